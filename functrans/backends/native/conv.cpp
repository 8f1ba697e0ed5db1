// functrans native backend: direct 2-D convolutions of float32 arrays (backends/native/conv.py).
// Both kernels compute, in channels-last layouts,
//   out[b, y, x, o] = sum over f, i, j of L[b, y*sh + i*dh, x*sw + j*dw, f] * R[i, j, f, o]
// over an already padded (and lhs-dilated) L, each in the loop order its shape needs:
//  - ft_conv2d_direct: many output pixels, a short contraction (a forward convolution, an
//    input gradient). A register tile of PW output pixels x NV vectors of output channels
//    accumulates over (i, j, f); threads split the (b, y) output rows.
//  - ft_conv2d_wgrad: few outputs, a long contraction (a kernel gradient) with the roles
//    "b" <-> "f" swapped by the caller: x (N, Hp, Wp, C), ct (N, OH, OW, O), dw (KH, KW, C, O),
//    dw[kh, kw, c, o] = sum over n, oh, ow of x[n, oh*sh + kh*dh, ow*sw + kw*dw, c] * ct[n, oh, ow, o].
//    A register tile of PC channels x NV vectors of O accumulates over the pixels, which are
//    walked in chunks that stay in cache while every tile of a thread reads them; threads
//    split the tiles.
// Every output is summed by one thread in a fixed order: the result does not depend on the
// number of threads. The sums use fused multiply-adds (as BLAS does): they agree with a
// float64 reference within float32 rounding of the sum, not bit for bit with NumPy's GEMM.
// ft_conv2d_pack lays an operand out for them: any strided 4-D view copied into a fresh
// channels-last buffer, its two middle axes dilated and padded with zeros.
// The kernels take p = {lhs, rhs, out, dims} and dims = {B, Hp, Wp, F, KH, KW, O, OH, OW, sh, sw,
// dh, dw, planar} (planar: the direct kernel writes out as (B, O, OH, OW), an NCHW result's
// layout, instead of channels-last)
// (int64); O is a multiple of 16 (of every vector width here).
#include <cstring>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__AVX512F__)
#include <immintrin.h>
typedef __m512 vf;
static const int VW = 16;
static inline vf vload(const float* p) { return _mm512_loadu_ps(p); }
static inline void vstore(float* p, vf v) { _mm512_storeu_ps(p, v); }
static inline vf vset1(float x) { return _mm512_set1_ps(x); }
static inline vf vfma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
typedef __m256 vf;
static const int VW = 8;
static inline vf vload(const float* p) { return _mm256_loadu_ps(p); }
static inline void vstore(float* p, vf v) { _mm256_storeu_ps(p, v); }
static inline vf vset1(float x) { return _mm256_set1_ps(x); }
static inline vf vfma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
#else
typedef float vf __attribute__((vector_size(16)));
static const int VW = 4;
static inline vf vload(const float* p) { vf v; std::memcpy(&v, p, sizeof v); return v; }
static inline void vstore(float* p, vf v) { std::memcpy(p, &v, sizeof v); }
static inline vf vset1(float x) { return vf{x, x, x, x}; }
static inline vf vfma(vf a, vf b, vf c) { return a * b + c; }
#endif

// pixels (direct) or channels (wgrad) of a register tile two vectors of channels wide: its
// 2 x TILE2 accumulators, the two weight vectors and the broadcast fit AVX-512's 32
// registers at 12 and AVX2's 16 at 6 (at 12 on AVX2 they spilled: 1.5x the time); one
// vector wide, 12 fit either. The tile's shape changes no output's chain of multiply-adds.
static const int TILE2 = VW >= 16 ? 12 : 6;

struct Dims {
  long long B, Hp, Wp, F, KH, KW, O, OH, OW, sh, sw, dh, dw, planar;
  explicit Dims(const long long* d)
      : B(d[0]), Hp(d[1]), Wp(d[2]), F(d[3]), KH(d[4]), KW(d[5]), O(d[6]), OH(d[7]), OW(d[8]),
        sh(d[9]), sw(d[10]), dh(d[11]), dw(d[12]), planar(d[13]) {}
};

// ---------------------------------------------------------------------------------------
// direct: PW output pixels of row (b, y) from x0, NV vectors of channels from ob

template <int NV, int PW>
static inline void pixels(const float* L, const float* R, float* out, const Dims& d,
                          long long b, long long y, long long x0, long long ob) {
  vf acc[PW][NV];
  for (int p = 0; p < PW; ++p)
    for (int v = 0; v < NV; ++v) acc[p][v] = vset1(0.0f);
  const long long step = d.sw * d.F;
  for (long long i = 0; i < d.KH; ++i) {
    const float* row = L + ((b * d.Hp + y * d.sh + i * d.dh) * d.Wp) * d.F;
    for (long long j = 0; j < d.KW; ++j) {
      const float* xs = row + (x0 * d.sw + j * d.dw) * d.F;
      const float* ws = R + ((i * d.KW + j) * d.F) * d.O + ob;
      for (long long f = 0; f < d.F; ++f) {
        vf wv[NV];
        for (int v = 0; v < NV; ++v) wv[v] = vload(ws + f * d.O + v * VW);
        for (int p = 0; p < PW; ++p) {
          const vf xb = vset1(xs[p * step + f]);
          for (int v = 0; v < NV; ++v) acc[p][v] = vfma(xb, wv[v], acc[p][v]);
        }
      }
    }
  }
  if (!d.planar) {
    float* o = out + ((b * d.OH + y) * d.OW + x0) * d.O + ob;
    for (int p = 0; p < PW; ++p)
      for (int v = 0; v < NV; ++v) vstore(o + p * d.O + v * VW, acc[p][v]);
    return;
  }
  alignas(64) float t[PW][NV * VW];      // the tile, written out channel by channel
  for (int p = 0; p < PW; ++p)
    for (int v = 0; v < NV; ++v) vstore(&t[p][v * VW], acc[p][v]);
  float* o = out + ((b * d.O + ob) * d.OH + y) * d.OW + x0;
  const long long plane = d.OH * d.OW;
  for (int c = 0; c < NV * VW; ++c)
    for (int p = 0; p < PW; ++p) o[c * plane + p] = t[p][c];
}

#define FT_TAIL(F, ...)                                                                  \
  switch (rest) {                                                                        \
    case 1: F<NV, 1>(__VA_ARGS__); break;   case 2: F<NV, 2>(__VA_ARGS__); break;       \
    case 3: F<NV, 3>(__VA_ARGS__); break;   case 4: F<NV, 4>(__VA_ARGS__); break;       \
    case 5: F<NV, 5>(__VA_ARGS__); break;   case 6: F<NV, 6>(__VA_ARGS__); break;       \
    case 7: F<NV, 7>(__VA_ARGS__); break;   case 8: F<NV, 8>(__VA_ARGS__); break;       \
    case 9: F<NV, 9>(__VA_ARGS__); break;   case 10: F<NV, 10>(__VA_ARGS__); break;     \
    case 11: F<NV, 11>(__VA_ARGS__); break; default: break;                             \
  }

template <int NV, int PW>
static void output_row(const float* L, const float* R, float* out, const Dims& d, long long b,
                       long long y, long long ob) {
  long long x = 0;
  for (; x + PW <= d.OW; x += PW) pixels<NV, PW>(L, R, out, d, b, y, x, ob);
  const long long rest = d.OW - x;
  FT_TAIL(pixels, L, R, out, d, b, y, x, ob)
}

extern "C" void ft_conv2d_direct(void* const* p, long long, int nt) {
  const float* L = (const float*)p[0];
  const float* R = (const float*)p[1];
  float* out = (float*)p[2];
  const Dims d((const long long*)p[3]);
  const bool two = d.O % (2 * VW) == 0;
  #pragma omp parallel for num_threads(nt) schedule(static) collapse(2)
  for (long long b = 0; b < d.B; ++b)
    for (long long y = 0; y < d.OH; ++y) {
      if (two)
        for (long long ob = 0; ob < d.O; ob += 2 * VW)
          output_row<2, TILE2>(L, R, out, d, b, y, ob);
      else
        for (long long ob = 0; ob < d.O; ob += VW) output_row<1, 12>(L, R, out, d, b, y, ob);
    }
}

// ---------------------------------------------------------------------------------------
// wgrad: PC channels from c0 x NV vectors of O from ob at kernel offset (kh, kw), the pixels
// q0 <= q < q1 (q = (n, oh, ow) flattened) added to the tile's running sums in dw

static const long long CHUNK = 128;

template <int NV, int PC>
static inline void tile(const float* x, const float* ct, float* dw, const Dims& d, long long kh,
                        long long kw, long long c0, long long ob, long long q0, long long q1) {
  // here B = N, F = C and (KH, KW) the kernel, (OH, OW) the cotangent's pixels
  float* o = dw + ((kh * d.KW + kw) * d.F + c0) * d.O + ob;
  vf acc[PC][NV];
  for (int c = 0; c < PC; ++c)
    for (int v = 0; v < NV; ++v) acc[c][v] = vload(o + c * d.O + v * VW);
  long long n = q0 / (d.OH * d.OW), r = q0 % (d.OH * d.OW), oh = r / d.OW, ow = r % d.OW;
  for (long long q = q0; q < q1; ++q) {
    const float* xs =
        x + ((n * d.Hp + oh * d.sh + kh * d.dh) * d.Wp + ow * d.sw + kw * d.dw) * d.F + c0;
    const float* cs = ct + q * d.O + ob;
    vf cv[NV];
    for (int v = 0; v < NV; ++v) cv[v] = vload(cs + v * VW);
    for (int c = 0; c < PC; ++c) {
      const vf xb = vset1(xs[c]);
      for (int v = 0; v < NV; ++v) acc[c][v] = vfma(xb, cv[v], acc[c][v]);
    }
    if (++ow == d.OW) {
      ow = 0;
      if (++oh == d.OH) { oh = 0; ++n; }
    }
  }
  for (int c = 0; c < PC; ++c)
    for (int v = 0; v < NV; ++v) vstore(o + c * d.O + v * VW, acc[c][v]);
}

template <int NV, int PC>
static void channels(const float* x, const float* ct, float* dw, const Dims& d, long long kh,
                     long long kw, long long ob, long long q0, long long q1) {
  long long c = 0;
  for (; c + PC <= d.F; c += PC) tile<NV, PC>(x, ct, dw, d, kh, kw, c, ob, q0, q1);
  const long long rest = d.F - c;
  FT_TAIL(tile, x, ct, dw, d, kh, kw, c, ob, q0, q1)
}

extern "C" void ft_conv2d_wgrad(void* const* p, long long, int nt) {
  const float* x = (const float*)p[0];
  const float* ct = (const float*)p[1];
  float* dw = (float*)p[2];
  const Dims d((const long long*)p[3]);
  const bool two = d.O % (2 * VW) == 0;
  const long long width = two ? 2 * VW : VW, blocks = d.O / width;
  const long long tiles = d.KH * d.KW * blocks, pixels_ = d.B * d.OH * d.OW;
  std::memset(dw, 0, sizeof(float) * d.KH * d.KW * d.F * d.O);
  #pragma omp parallel num_threads(nt)
  {
    long long tid = 0, nth = 1;
#ifdef _OPENMP
    tid = omp_get_thread_num();
    nth = omp_get_num_threads();
#endif
    const long long t0 = tiles * tid / nth, t1 = tiles * (tid + 1) / nth;
    for (long long q0 = 0; q0 < pixels_; q0 += CHUNK) {
      const long long q1 = q0 + CHUNK < pixels_ ? q0 + CHUNK : pixels_;
      for (long long t = t0; t < t1; ++t) {
        const long long k = t / blocks, ob = (t % blocks) * width;
        if (two) channels<2, TILE2>(x, ct, dw, d, k / d.KW, k % d.KW, ob, q0, q1);
        else channels<1, 12>(x, ct, dw, d, k / d.KW, k % d.KW, ob, q0, q1);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// pack: out (A, Hp, Wp, D) = the view src[a, i, j, k] (element strides st[0..3]) placed at
// (a, lo_h + i * ld_h, lo_w + j * ld_w, k), zeros elsewhere (lo >= 0).
// p = {dims, out}, dims = {A, H, W, D, Hp, Wp, lo_h, lo_w, ld_h, ld_w, st0, st1, st2, st3,
// the address of src[0, 0, 0, 0]} (a strided view, which the call passes only by address)

// o[j * D + k] = s[k * s3 + j] for j < n (at most VW), k < VW: VW rows of n floats
// transposed in registers, each pixel's VW channels written as one vector (the mnist Net's
// 64x26x26x32 pack, element by element, was a fifth of its step). AVX-512: pairs of floats,
// then of pairs, then 128-bit lanes twice; AVX2: pairs, then shuffles, then 128-bit halves.
// Masked loads end a row (the masked lanes are not read).
#if defined(__AVX512F__)
#define FT_TRANSPOSE 1
static inline void transpose_block(const float* s, long long s3, float* o, long long D, int n) {
  const __mmask16 m = (__mmask16)((1u << n) - 1u);
  __m512 r[16], t[16];
  for (int k = 0; k < 16; ++k) r[k] = _mm512_maskz_loadu_ps(m, s + k * s3);
  for (int k = 0; k < 16; k += 2) {
    t[k] = _mm512_unpacklo_ps(r[k], r[k + 1]);
    t[k + 1] = _mm512_unpackhi_ps(r[k], r[k + 1]);
  }
  for (int k = 0; k < 16; k += 4) {
    for (int h = 0; h < 2; ++h) {
      const __m512d a = _mm512_castps_pd(t[k + h]), b = _mm512_castps_pd(t[k + h + 2]);
      r[k + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
      r[k + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    }
  }
  for (int k = 0; k < 16; k += 8)
    for (int h = 0; h < 4; ++h) {
      t[k + h] = _mm512_shuffle_f32x4(r[k + h], r[k + h + 4], 0x88);
      t[k + h + 4] = _mm512_shuffle_f32x4(r[k + h], r[k + h + 4], 0xdd);
    }
  for (int h = 0; h < 8; ++h) {
    r[h] = _mm512_shuffle_f32x4(t[h], t[h + 8], 0x88);
    r[h + 8] = _mm512_shuffle_f32x4(t[h], t[h + 8], 0xdd);
  }
  for (int j = 0; j < n; ++j) _mm512_storeu_ps(o + j * D, r[j]);
}
#elif defined(__AVX2__) && defined(__FMA__)
#define FT_TRANSPOSE 1
static inline void transpose_block(const float* s, long long s3, float* o, long long D, int n) {
  const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n),
                                       _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256 r[8], t[8];
  for (int k = 0; k < 8; ++k) r[k] = _mm256_maskload_ps(s + k * s3, m);
  for (int k = 0; k < 8; k += 2) {
    t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
    t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
  }
  for (int k = 0; k < 8; k += 4)
    for (int h = 0; h < 2; ++h) {
      r[k + 2 * h] = _mm256_shuffle_ps(t[k + h], t[k + h + 2], 0x44);
      r[k + 2 * h + 1] = _mm256_shuffle_ps(t[k + h], t[k + h + 2], 0xee);
    }
  for (int h = 0; h < 4; ++h) {
    t[h] = _mm256_permute2f128_ps(r[h], r[h + 4], 0x20);
    t[h + 4] = _mm256_permute2f128_ps(r[h], r[h + 4], 0x31);
  }
  for (int j = 0; j < n; ++j) _mm256_storeu_ps(o + j * D, t[j]);
}
#endif

extern "C" void ft_conv2d_pack(void* const* p, long long, int nt) {
  const long long* d = (const long long*)p[0];
  float* out = (float*)p[1];
  const float* src = (const float*)d[14];
  const long long A = d[0], H = d[1], W = d[2], D = d[3], Hp = d[4], Wp = d[5];
  const long long loh = d[6], low = d[7], ldh = d[8], ldw = d[9];
  const long long s0 = d[10], s1 = d[11], s2 = d[12], s3 = d[13];
  #pragma omp parallel for num_threads(nt) schedule(static) collapse(2)
  for (long long a = 0; a < A; ++a)
    for (long long y = 0; y < Hp; ++y) {
      float* row = out + (a * Hp + y) * Wp * D;
      const long long i = (y - loh) / ldh;
      if (y < loh || (y - loh) % ldh || i >= H) {
        std::memset(row, 0, sizeof(float) * Wp * D);
        continue;
      }
      if (ldw != 1) std::memset(row, 0, sizeof(float) * Wp * D);
      else {
        std::memset(row, 0, sizeof(float) * low * D);
        const long long end = low + W;
        if (end < Wp) std::memset(row + end * D, 0, sizeof(float) * (Wp - end) * D);
      }
      const float* s = src + a * s0 + i * s1;
      if (s3 == 1) {
        for (long long j = 0; j < W; ++j) {
          const float* sj = s + j * s2;
          float* o = row + (low + j * ldw) * D;
          for (long long k = 0; k < D; ++k) o[k] = sj[k];
        }
      } else {
        // channels apart (an NCHW view, s3 = H * W): 16 pixels at a time, each channel's
        // pixels read along the row; the channels of one pixel are D lines a plane apart,
        // for a power-of-two plane in one cache set, which the loop over them at each
        // pixel refetched (the ResNet block's 32x32 planes: a sixth of its step)
        long long kv = 0;       // channels done VW at a time in registers (transpose_block)
#ifdef FT_TRANSPOSE
        if (s2 == 1 && ldw == 1) kv = D - D % VW;
        for (long long j0 = 0; j0 < W; j0 += VW)
          for (long long k0 = 0; k0 < kv; k0 += VW)
            transpose_block(s + k0 * s3 + j0, s3, row + (low + j0) * D + k0, D,
                            (int)(W - j0 < VW ? W - j0 : VW));
#endif
        for (long long j0 = 0; j0 < W; j0 += 16) {
          const long long j1 = j0 + 16 < W ? j0 + 16 : W;
          for (long long k = kv; k < D; ++k) {
            const float* sk = s + k * s3;
            float* o = row + low * D + k;
            for (long long j = j0; j < j1; ++j) o[j * ldw * D] = sk[j * s2];
          }
        }
      }
    }
}

// ---------------------------------------------------------------------------------------
// max pooling (primitives/pool.py): windows over the last two axes of P planes (H, W),
// window (i, j) holding x[i*sh + a*dh, j*sw + b*dw] at offset a*kw + b.
// p = {x or g, (idx), out, dims}, dims = {P, H, W, OH, OW, kh, kw, sh, sw, dh, dw}; threads
// split the planes, and each output is written by one thread in a fixed order.

struct PoolDims {
  long long P, H, W, OH, OW, kh, kw, sh, sw, dh, dw;
  explicit PoolDims(const long long* d)
      : P(d[0]), H(d[1]), W(d[2]), OH(d[3]), OW(d[4]), kh(d[5]), kw(d[6]), sh(d[7]), sw(d[8]),
        dh(d[9]), dw(d[10]) {}
  int K() const { return (int)(kh * kw); }
  // off[k]: where offset k of window (i, j) is, from the window's corner i*sh*W + j*sw
  std::vector<long long> offsets() const {
    std::vector<long long> off(K());
    for (int k = 0; k < K(); ++k) off[k] = (k / kw) * dh * W + (k % kw) * dw;
    return off;
  }
};

// idx = the offset of each window's first maximum (a NaN is the maximum: the first NaN). Row
// by row of outputs, offset by offset: a branchless update of the row's running maxima.
extern "C" void ft_pool_argmax(void* const* p, long long, int nt) {
  const float* x = (const float*)p[0];
  int* idx = (int*)p[1];
  const PoolDims d((const long long*)p[2]);
  const std::vector<long long> off = d.offsets();
  const int K = d.K();
  #pragma omp parallel num_threads(nt)
  {
    std::vector<float> best(d.OW);
    #pragma omp for schedule(static)
    for (long long q = 0; q < d.P; ++q)
      for (long long i = 0; i < d.OH; ++i) {
        const float* xr = x + q * d.H * d.W + i * d.sh * d.W;
        int* ir = idx + (q * d.OH + i) * d.OW;
        float* b = best.data();
        for (long long j = 0; j < d.OW; ++j) {
          b[j] = xr[off[0] + j * d.sw];
          ir[j] = 0;
        }
        for (int k = 1; k < K; ++k) {
          const float* xk = xr + off[k];
          for (long long j = 0; j < d.OW; ++j) {
            const float v = xk[j * d.sw], m = b[j];
            const bool take = v > m || (v != v && m == m);
            b[j] = take ? v : m;
            ir[j] = take ? k : ir[j];
          }
        }
      }
  }
}

// out[i, j] = x at offset idx[i, j] of window (i, j) (offset 0 for one outside the window,
// as the NumPy implementation)
extern "C" void ft_pool_gather(void* const* p, long long, int nt) {
  const float* x = (const float*)p[0];
  const int* idx = (const int*)p[1];
  float* out = (float*)p[2];
  const PoolDims d((const long long*)p[3]);
  const std::vector<long long> off = d.offsets();
  const int K = d.K();
  #pragma omp parallel for num_threads(nt) schedule(static)
  for (long long q = 0; q < d.P; ++q)
    for (long long i = 0; i < d.OH; ++i) {
      const float* xr = x + q * d.H * d.W + i * d.sh * d.W;
      const long long r = (q * d.OH + i) * d.OW;
      for (long long j = 0; j < d.OW; ++j) {
        const int k = idx[r + j];
        out[r + j] = xr[off[k >= 0 && k < K ? k : 0] + j * d.sw];
      }
    }
}

// out = zeros (H, W) plus each g[i, j] at offset idx[i, j] of window (i, j), added in the
// order of the windows where windows overlap (offset 0 for one outside the window, as gather)
extern "C" void ft_pool_scatter(void* const* p, long long, int nt) {
  const float* g = (const float*)p[0];
  const int* idx = (const int*)p[1];
  float* out = (float*)p[2];
  const PoolDims d((const long long*)p[3]);
  const std::vector<long long> off = d.offsets();
  const int K = d.K();
  #pragma omp parallel for num_threads(nt) schedule(static)
  for (long long q = 0; q < d.P; ++q) {
    float* oq = out + q * d.H * d.W;
    std::memset(oq, 0, sizeof(float) * d.H * d.W);
    for (long long i = 0; i < d.OH; ++i) {
      float* orow = oq + i * d.sh * d.W;
      const long long r = (q * d.OH + i) * d.OW;
      for (long long j = 0; j < d.OW; ++j) {
        const int k = idx[r + j];
        orow[off[k >= 0 && k < K ? k : 0] + j * d.sw] += g[r + j];
      }
    }
  }
}

// out[rows[i], :] += upd[i, :] for i = 0, 1, ... in that order: np.add.at's sums, the same
// bits (an embedding's gradient). Rows are in range (the caller clipped them). One thread:
// two updates of one row would race, and the order of a row's adds is its result.
template <typename T>
static void scatter_add_rows(void* const* p) {
  const T* __restrict upd = (const T*)p[0];
  const long long* rows = (const long long*)p[1];
  T* __restrict out = (T*)p[2];
  const long long* d = (const long long*)p[3];
  const long long n = d[0], c = d[1];
  for (long long i = 0; i < n; ++i) {
    T* __restrict o = out + rows[i] * c;
    const T* __restrict u = upd + i * c;
    for (long long j = 0; j < c; ++j) o[j] += u[j];
  }
}

extern "C" void ft_scatter_add_rows_f32(void* const* p, long long, int) {
  scatter_add_rows<float>(p);
}

extern "C" void ft_scatter_add_rows_f64(void* const* p, long long, int) {
  scatter_add_rows<double>(p);
}

// out[j] = x[0, j] + x[1, j] + ... + x[m - 1, j], the rows added in order (NumPy's sum over
// the leading axis of a C-contiguous array: the same bits): a bias's gradient. One thread.
template <typename T>
static void sum_rows(void* const* p, long long n) {
  const T* __restrict x = (const T*)p[0];
  T* __restrict out = (T*)p[1];
  const long long m = ((const long long*)p[2])[0];
  for (long long j = 0; j < n; ++j) out[j] = x[j];
  for (long long i = 1; i < m; ++i) {
    const T* __restrict r = x + i * n;
    for (long long j = 0; j < n; ++j) out[j] += r[j];
  }
}

extern "C" void ft_sum_rows_f32(void* const* p, long long n, int) { sum_rows<float>(p, n); }

extern "C" void ft_sum_rows_f64(void* const* p, long long n, int) { sum_rows<double>(p, n); }

// ---------------------------------------------------------------------------------------
// few-row products by a weight laid out once for a loop: out (m, n) = x (m, k) @ W (k, n),
// W given as panels P[n / 16][k][16] (ft_gemm_pack). In a recurrent layer's loop the direct
// kernel reads a 16-column strip of a row-major W whose rows sit n floats (4 KB) apart: one
// cache set for the whole strip, refetched for every tile of rows; a panel is contiguous.
// Each output is the chain of fused multiply-adds over f = 0, 1, ..., k - 1 from zero, as in
// the direct kernel's 1x1 convolution: the same bits. The m rows are split into tiles of
// equal height (at most GP rows: GP x GV accumulators of the 16 vector registers). One thread.
static const int PANEL = 16;
static const int GV = PANEL / VW;                   // vectors per panel row
static const int GP = 12 / GV;                      // rows of a register tile at most

template <int PW>
static inline void panel_rows(const float* x, const float* w, float* out, long long k,
                              long long n) {
  vf acc[PW][GV];
  for (int p = 0; p < PW; ++p)
    for (int v = 0; v < GV; ++v) acc[p][v] = vset1(0.0f);
  for (long long f = 0; f < k; ++f) {
    vf wv[GV];
    for (int v = 0; v < GV; ++v) wv[v] = vload(w + f * PANEL + v * VW);
    for (int p = 0; p < PW; ++p) {
      const vf xb = vset1(x[p * k + f]);
      for (int v = 0; v < GV; ++v) acc[p][v] = vfma(xb, wv[v], acc[p][v]);
    }
  }
  for (int p = 0; p < PW; ++p)
    for (int v = 0; v < GV; ++v) vstore(out + p * n + v * VW, acc[p][v]);
}

// a tile of 1 <= rows <= GP rows
static void panel_tile(int rows, const float* x, const float* w, float* out, long long k,
                       long long n) {
  switch (rows) {
    case 1: panel_rows<1>(x, w, out, k, n); break;
    case 2: panel_rows<2>(x, w, out, k, n); break;
    case 3: panel_rows<3>(x, w, out, k, n); break;
    case 4: panel_rows<4>(x, w, out, k, n); break;
    case 5: panel_rows<5>(x, w, out, k, n); break;
    case 6: panel_rows<6>(x, w, out, k, n); break;
    case 7: panel_rows<7>(x, w, out, k, n); break;
    case 8: panel_rows<8>(x, w, out, k, n); break;
    case 9: panel_rows<9>(x, w, out, k, n); break;
    case 10: panel_rows<10>(x, w, out, k, n); break;
    case 11: panel_rows<11>(x, w, out, k, n); break;
    default: panel_rows<12>(x, w, out, k, n);
  }
}

// p = {x, P, out, dims = {m, k, n}}
extern "C" void ft_gemm_panels(void* const* p, long long, int) {
  const float* x = (const float*)p[0];
  const float* P = (const float*)p[1];
  float* out = (float*)p[2];
  const long long* d = (const long long*)p[3];
  const long long m = d[0], k = d[1], n = d[2];
  const long long tiles = (m + GP - 1) / GP, base = m / tiles, extra = m % tiles;
  for (long long j = 0; j < n; j += PANEL) {
    long long r = 0;
    for (long long t = 0; t < tiles; ++t) {
      const int rows = (int)(base + (t < extra));
      panel_tile(rows, x + r * k, P + j * k, out + r * n + j, k, n);
      r += rows;
    }
  }
}

// P[j / 16][f][0:16] = W[f, j:j + 16] for W (k, n), n a multiple of 16, element (f, j) at
// W[f * sf + j * sc]; p = {W, P, dims = {k, n, sf, sc}}. Row-major W (sc = 1) is copied a
// panel row at a time; the transposed view of a row-major (n, k) matrix (sf = 1, sc = k: a
// recurrent layer's hidden weight as the layer holds it) is read 16 of its rows (one
// panel, 16 KB at k = 256) at a time, with no transposed copy of it made first.
extern "C" void ft_gemm_pack(void* const* p, long long, int) {
  const float* W = (const float*)p[0];
  float* P = (float*)p[1];
  const long long* d = (const long long*)p[2];
  const long long k = d[0], n = d[1], sf = d[2], sc = d[3];
  for (long long j = 0; j < n; j += PANEL)
    for (long long f = 0; f < k; ++f) {
      float* dst = P + j * k + f * PANEL;
      const float* src = W + f * sf + j * sc;
      if (sc == 1)
        std::memcpy(dst, src, sizeof(float) * PANEL);
      else
        for (int c = 0; c < PANEL; ++c) dst[c] = src[c * sc];
    }
}

// Adam/AdamW steps of k parameters in place, in one call: PyTorch's single-tensor update
// with the facade's eager rounding (optim/adam.py: each operation rounds to T as written,
// in that order; -ffp-contract=off keeps them apart). p = {sizes (k), s (8 k, as T), flags
// (2 k), then param, exp_avg, exp_avg_sq, grad of each parameter}; a parameter's s =
// {decay, weight_decay, 1 - beta1, beta2, 1 - beta2, sqrt(1 - beta2^t), eps, -step_size},
// its flags = {maximize, L2 weight decay}. Elementwise: one pass a parameter instead of
// about fourteen, the same bits on any thread count (one thread).
static inline float sqrt_of(float x) { return __builtin_sqrtf(x); }
static inline double sqrt_of(double x) { return __builtin_sqrt(x); }

template <typename T>
static void adam_step(void* const* p, long long n, const T* s, bool maximize, bool l2) {
  T* __restrict w = (T*)p[0];
  T* __restrict m = (T*)p[1];
  T* __restrict v = (T*)p[2];
  const T* __restrict g = (const T*)p[3];
  const T decay = s[0], wd = s[1], w1 = s[2], b2 = s[3], w2 = s[4], bc2 = s[5], eps = s[6],
      step = s[7];
  for (long long i = 0; i < n; ++i) {
    T gi = maximize ? -g[i] : g[i];
    const T wi = w[i] * decay;
    if (l2) gi = gi + wi * wd;
    const T mi = m[i] + w1 * (gi - m[i]);
    T gg = gi * gi;
    gg = gg * w2;
    const T vi = v[i] * b2 + gg;
    T den = sqrt_of(vi) / bc2;
    den = den + eps;
    T q = mi / den;
    q = q * step;
    w[i] = wi + q;
    m[i] = mi;
    v[i] = vi;
  }
}

template <typename T>
static void adam_steps(void* const* p, long long k) {
  const long long* sizes = (const long long*)p[0];
  const T* s = (const T*)p[1];
  const long long* flags = (const long long*)p[2];
  for (long long j = 0; j < k; ++j)
    adam_step<T>(p + 3 + 4 * j, sizes[j], s + 8 * j, flags[2 * j], flags[2 * j + 1]);
}

extern "C" void ft_adam_steps_f32(void* const* p, long long k, int) { adam_steps<float>(p, k); }

extern "C" void ft_adam_steps_f64(void* const* p, long long k, int) { adam_steps<double>(p, k); }
