"""ft.nn.functional's unfold (im2col), fold (col2im) and the transposed convolutions.

F.fold adds each block of given columns into the output at its strided, dilated position (an
interior-padded `lax.pad`, the transpose of the strided slice unfold takes). A transposed
convolution is the gradient of a convolution with respect to its input: the
conv_general_dilated primitive with the input dilated by the strides and the kernel flipped.
"""
from __future__ import annotations

from ... import lax
from ...numpy import raw as fnp
from ._conv import _check_conv_dtypes, _pair, _single, _windows
from ._dispatch import _call, _ndim, _shape, _squeeze0, _unsqueeze0


def _col2im(cols, out_size, kernel, stride, dilation, padding):
    """(N, C, H, W) from columns (N, C, kh, kw, lh, lw): block (i, j) added at rows
    i*dh - ph + sh*[0, lh) and columns j*dw - pw + sw*[0, lw) (the padding cropped)."""
    kh, kw = kernel
    lh, lw = cols.shape[4], cols.shape[5]
    zero = fnp.zeros((), cols.dtype)
    out = None
    for i in range(kh):
        lo_h = i * dilation[0] - padding[0]
        hi_h = out_size[0] - lo_h - ((lh - 1) * stride[0] + 1)
        for j in range(kw):
            lo_w = j * dilation[1] - padding[1]
            hi_w = out_size[1] - lo_w - ((lw - 1) * stride[1] + 1)
            block = lax.pad(cols[:, :, i, j], zero,
                            ((0, 0, 0), (0, 0, 0), (lo_h, hi_h, stride[0] - 1),
                             (lo_w, hi_w, stride[1] - 1)))
            out = block if out is None else out + block
    return out


def _blocks(size, k, d, p, s):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


# ---------------------------------------------------------------------------
# unfold / fold


def _unfold_fn(x, *, kernel, dilation, padding, stride, unbatched):
    if unbatched:
        x = fnp.expand_dims(x, 0)
    n, c, h, w = x.shape
    ph, pw = padding
    if ph or pw:
        x = fnp.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = _blocks(h, kernel[0], dilation[0], ph, stride[0])
    ow = _blocks(w, kernel[1], dilation[1], pw, stride[1])
    cols = fnp.reshape(_windows(x, kernel[0], kernel[1], stride, dilation, oh, ow),
                       (n, c * kernel[0] * kernel[1], oh * ow))
    return fnp.squeeze(cols, 0) if unbatched else cols


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: (N, C, H, W) (or (C, H, W)) -> (N, C*kh*kw, L), every sliding block's values
    as a column (L blocks, row-major)."""
    nd = _ndim(input)
    if nd not in (3, 4):
        raise RuntimeError(f"Expected 3D or 4D (batch mode) tensor with possibly 0 batch size "
                           f"and other non-zero dimensions for input, but got: "
                           f"{list(_shape(input))}")
    kernel, dilation = _pair(kernel_size), _pair(dilation, "dilation")
    padding, stride = _pair(padding, "padding"), _pair(stride, "stride")
    h, w = _shape(input)[-2:]
    oh = _blocks(h, kernel[0], dilation[0], padding[0], stride[0])
    ow = _blocks(w, kernel[1], dilation[1], padding[1], stride[1])
    if oh < 1 or ow < 1:
        raise RuntimeError(f"Given input with spatial size ({h}, {w}), kernel_size="
                           f"({kernel[0]}, {kernel[1]}), dilation=({dilation[0]}, "
                           f"{dilation[1]}), padding=({padding[0]}, {padding[1]}), calculated "
                           f"shape of the array of sliding blocks as ({oh}, {ow}), but its "
                           "components must be at least one.")
    return _call("Im2ColBackward0", _unfold_fn, (input,), kernel=kernel, dilation=dilation,
                 padding=padding, stride=stride, unbatched=nd == 3)


def _fold_fn(x, *, out_size, kernel, dilation, padding, stride, blocks, unbatched):
    if unbatched:
        x = fnp.expand_dims(x, 0)
    n, ckk = x.shape[0], x.shape[1]
    c = ckk // (kernel[0] * kernel[1])
    cols = fnp.reshape(x, (n, c, kernel[0], kernel[1]) + blocks)
    out = _col2im(cols, out_size, kernel, stride, dilation, padding)
    return fnp.squeeze(out, 0) if unbatched else out


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im: (N, C*kh*kw, L) (or (C*kh*kw, L)) -> (N, C, H, W), each column's values added
    at its block's positions (overlaps sum): the adjoint of unfold."""
    nd = _ndim(input)
    if nd not in (2, 3):
        raise RuntimeError(f"Expected 2D or 3D (batch mode) tensor for input with possibly 0 "
                           f"batch size and non-zero dimensions for input, but got: "
                           f"{list(_shape(input))}")
    out_size, kernel = _pair(output_size, "output_size"), _pair(kernel_size)
    dilation, padding = _pair(dilation, "dilation"), _pair(padding, "padding")
    stride = _pair(stride, "stride")
    shape = _shape(input)
    ckk, length = shape[-2], shape[-1]
    if ckk % (kernel[0] * kernel[1]):
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the "
                           f"product of kernel_size, but got input.size(1)={ckk} and "
                           f"kernel_size=({kernel[0]}, {kernel[1]}).")
    blocks = tuple(_blocks(s, k, d, p, st) for s, k, d, p, st in
                   zip(out_size, kernel, dilation, padding, stride))
    if blocks[0] * blocks[1] != length:
        raise RuntimeError(f"Given output_size=({out_size[0]}, {out_size[1]}), kernel_size="
                           f"({kernel[0]}, {kernel[1]}), dilation=({dilation[0]}, "
                           f"{dilation[1]}), padding=({padding[0]}, {padding[1]}), stride="
                           f"({stride[0]}, {stride[1]}), expected size of input's dimension 2 "
                           f"to match the calculated number of sliding blocks {blocks[0]} * "
                           f"{blocks[1]} = {blocks[0] * blocks[1]}, but got input.size(2)="
                           f"{length}.")
    return _call("Col2ImBackward0", _fold_fn, (input,), out_size=out_size, kernel=kernel,
                 dilation=dilation, padding=padding, stride=stride, blocks=blocks,
                 unbatched=nd == 2)


# ---------------------------------------------------------------------------
# transposed convolutions


def _conv_transpose_fn(x, w, *b, stride, padding, out_size, dilation, groups):
    """conv_transpose1d/2d as one op: conv_general_dilated of the input dilated by the
    strides with the flipped kernel (input and output features swapped per group), padded
    by dilation*(k-1) - padding on each side, plus the output padding at the end."""
    nsp, g = len(stride), groups
    cin, cog, ks = w.shape[0], w.shape[1], w.shape[2:]
    spatial = tuple(range(2, 2 + nsp))
    if g == 1:       # (C_in, C_out, ...) read as (I, O, ...): no copy
        spec = (1, 0) + spatial
    else:            # (G*C_in/G, C_out/G, ...) -> (G*C_out/G, C_in/G, ...)
        w = fnp.reshape(w, (g, cin // g, cog) + ks)
        w = fnp.reshape(fnp.swapaxes(w, 1, 2), (g * cog, cin // g) + ks)
        spec = (0, 1) + spatial
    pads = []
    for n, k, s_, p, d, o in zip(x.shape[2:], ks, stride, padding, dilation, out_size):
        lo = d * (k - 1) - p
        pads.append((lo, o - ((n - 1) * s_ + 1 + lo - d * (k - 1))))
    dn = lax.ConvDimensionNumbers((0, 1) + spatial, spec, (0, 1) + spatial)
    out = lax.conv_general_dilated(x, lax.rev(w, spatial), (1,) * nsp, pads,
                                   lhs_dilation=stride, rhs_dilation=dilation,
                                   dimension_numbers=dn, feature_group_count=g)
    if b:
        out = out + fnp.reshape(b[0], (1, -1) + (1,) * nsp)
    return out


def _transpose_geometry(si, sw, stride, padding, output_padding, dilation, groups,
                        one_d=False):
    """torch's checks of a transposed convolution; returns its (H, W) output size."""
    show = (lambda s: list(s[:2]) + list(s[3:])) if one_d else list
    if si[1] != sw[0]:
        raise RuntimeError(f"Given transposed=1, weight of size {show(sw)}, expected "
                           f"input{show(si)} to have {sw[0]} channels, but got {si[1]} "
                           "channels instead")
    if sw[0] % groups:
        raise RuntimeError("Given groups, weight of size is not divisible by groups")
    for op, s, d in zip(output_padding, stride, dilation):
        if op >= s and op >= d:
            raise RuntimeError(
                "output padding must be smaller than either stride or dilation, but got "
                f"output_padding_height: {output_padding[0]} output_padding_width: "
                f"{output_padding[1]} stride_height: {stride[0]} stride_width: {stride[1]} "
                f"dilation_height: {dilation[0]} dilation_width: {dilation[1]}")
    size = tuple((i - 1) * s - 2 * p + d * (k - 1) + op + 1 for i, s, p, d, k, op in
                 zip(si[2:], stride, padding, dilation, sw[2:], output_padding))
    if min(size) < 1:
        shown = (lambda s: s[1:]) if one_d else (lambda s: s)
        raise RuntimeError(f"Given input size per channel: "
                           f"({' x '.join(map(str, shown(si[2:])))}). Calculated output size "
                           f"per channel: ({' x '.join(map(str, shown(size)))}). Output size "
                           "is too small")
    return size


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """The 2-D transposed convolution ("deconvolution") of (N, C_in, H, W) (or unbatched)
    with weight (C_in, C_out/groups, kh, kw): the gradient of conv2d with respect to its
    input. Output size (H-1)*stride - 2*padding + dilation*(k-1) + output_padding + 1."""
    unbatched = _ndim(input) == 3
    if unbatched:
        input = _unsqueeze0(input)
    if _ndim(input) != 4:
        raise RuntimeError(f"Expected 3D (unbatched) or 4D (batched) input to conv_transpose2d, "
                           f"but got input of size: {list(_shape(input))}")
    stride, padding = _pair(stride, "stride"), _pair(padding, "padding")
    output_padding, dilation = _pair(output_padding, "output_padding"), _pair(dilation,
                                                                              "dilation")
    _check_conv_dtypes(input, weight, bias)
    out_size = _transpose_geometry(_shape(input), _shape(weight), stride, padding,
                                   output_padding, dilation, int(groups))
    args = (input, weight) if bias is None else (input, weight, bias)
    out = _call("ConvolutionBackward0", _conv_transpose_fn, args, stride=stride,
                padding=padding, out_size=tuple(out_size), dilation=dilation, groups=int(groups))
    return _squeeze0(out) if unbatched else out


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """The 1-D transposed convolution of (N, C_in, L) (or (C_in, L)) with weight
    (C_in, C_out/groups, k): conv_transpose2d over a height of one."""
    if _ndim(input) not in (2, 3):
        raise RuntimeError(f"Expected 2D (unbatched) or 3D (batched) input to "
                           f"conv_transpose1d, but got input of size: {list(_shape(input))}")
    unbatched = _ndim(input) == 2
    if unbatched:
        input = _unsqueeze0(input)
    one = {n: (1, _single(v, n)) for n, v in (("stride", stride), ("dilation", dilation))}
    padding = (0, _single(padding, "padding"))
    output_padding = (0, _single(output_padding, "output_padding"))
    si, sw = _shape(input), _shape(weight)
    _check_conv_dtypes(input, weight, bias)
    out_size = _transpose_geometry(si[:2] + (1,) + si[2:], sw[:2] + (1,) + sw[2:],
                                   one["stride"], padding, output_padding, one["dilation"],
                                   int(groups), one_d=True)
    args = (input, weight) if bias is None else (input, weight, bias)
    out = _call("ConvolutionBackward0", _conv_transpose_fn, args, stride=one["stride"][1:],
                padding=padding[1:], out_size=tuple(out_size[1:]),
                dilation=one["dilation"][1:], groups=int(groups))
    return _squeeze0(out) if unbatched else out


def _output_padding(input, output_size, stride, padding, kernel, dilation, n_spatial):
    """ConvTranspose's output_padding for a requested output_size (torch's rule: the extra
    rows/columns past the smallest size, each below the stride)."""
    output_size = list(output_size)
    if len(output_size) == n_spatial + 2:
        output_size = output_size[2:]
    elif len(output_size) == n_spatial + 1 and _ndim(input) == n_spatial + 1:
        output_size = output_size[1:]
    if len(output_size) != n_spatial:
        raise ValueError(f"ConvTranspose{n_spatial}D: for {_ndim(input)}D input, output_size "
                         f"must have {n_spatial} or {n_spatial + 2} elements (got "
                         f"{len(output_size)})")
    spatial = _shape(input)[-n_spatial:]
    res = []
    for d in range(n_spatial):
        lo = (spatial[d] - 1) * stride[d] - 2 * padding[d] + dilation[d] * (kernel[d] - 1) + 1
        hi = lo + stride[d] - 1
        if not lo <= output_size[d] <= hi:
            raise ValueError(f"requested an output size of {output_size}, but valid sizes range "
                             f"from {[lo]} to {[hi]} (for an input of {list(spatial)})")
        res.append(int(output_size[d]) - lo)
    return tuple(res)

