"""torch.fft and torch.special against PyTorch: values, dtypes, grad_fn names, the inputs'
gradients (real and complex) and errors, through oracle.facade."""
import numpy as np
import pytest

import oracle

R = np.random.RandomState(0)
X = R.randn(4, 6)
X32 = R.randn(3, 5).astype(np.float32)
C = R.randn(4, 6) + 1j * R.randn(4, 6)
C3 = R.randn(2, 4, 5) + 1j * R.randn(2, 4, 5)
X3 = R.randn(2, 4, 5)


def _fft_cases():
    cases = {}
    for name in ("fft", "ifft", "hfft"):
        for norm in (None, "ortho", "forward"):
            cases[f"fft:{name}_{norm}_real"] = (lambda L, x, n=name, m=norm:
                                                getattr(L.fft, n)(x, norm=m), X)
            cases[f"fft:{name}_{norm}_complex"] = (lambda L, x, n=name, m=norm:
                                                   getattr(L.fft, n)(x, dim=0, norm=m), C)
    cases["fft:rfft"] = (lambda L, x: L.fft.rfft(x), X)
    cases["fft:rfft_n_float32"] = (lambda L, x: L.fft.rfft(x, n=8, norm="ortho"), X32)
    cases["fft:ihfft"] = (lambda L, x: L.fft.ihfft(x, dim=0), X)
    cases["fft:irfft"] = (lambda L, x: L.fft.irfft(x), C)
    cases["fft:irfft_n"] = (lambda L, x: L.fft.irfft(x, n=7, dim=0, norm="forward"), C)
    cases["fft:fft_n_pad"] = (lambda L, x: L.fft.fft(x, n=9), X)
    cases["fft:fft_n_cut"] = (lambda L, x: L.fft.fft(x, n=3, dim=-2), C)
    for name in ("fft2", "ifft2", "fftn", "ifftn"):
        cases[f"fft:{name}_real"] = (lambda L, x, n=name: getattr(L.fft, n)(x), X3)
        cases[f"fft:{name}_complex"] = (lambda L, x, n=name: getattr(L.fft, n)(x, norm="ortho"),
                                        C3)
    cases["fft:rfft2"] = (lambda L, x: L.fft.rfft2(x), X3)
    cases["fft:rfftn_s_dim"] = (lambda L, x: L.fft.rfftn(x, s=(3, 6), dim=(0, 2)), X3)
    cases["fft:irfft2"] = (lambda L, x: L.fft.irfft2(x), C3)
    cases["fft:irfftn_s"] = (lambda L, x: L.fft.irfftn(x, s=(4, 8), norm="ortho"), C3)
    cases["fft:fftn_s_minus_one"] = (lambda L, x: L.fft.fftn(x, s=(-1, 3), dim=(0, 1)), X3)
    cases["fft:fftshift"] = (lambda L, x: L.fft.fftshift(x), X3)
    cases["fft:ifftshift_dim"] = (lambda L, x: L.fft.ifftshift(x, dim=(0, -1)), C3)
    cases["fft:integer_input"] = (lambda L, x: L.fft.fft(x.long()), X)
    cases["fft:freq"] = (lambda L: (L.fft.fftfreq(5), L.fft.fftfreq(4, d=0.25),
                                    L.fft.rfftfreq(7, dtype=L.float64)),)
    errors = {
        "fft:error_norm": (lambda L, x: L.fft.fft(x, norm="bad"), X),
        "fft:error_points": (lambda L, x: L.fft.fft(x, n=0), X),
        "fft:error_dim": (lambda L, x: L.fft.fft(x, dim=2), X),
        "fft:error_rfft_complex": (lambda L, x: L.fft.rfft(x), C),
        "fft:error_rfftn_complex": (lambda L, x: L.fft.rfftn(x), C),
        "fft:error_s_dim_length": (lambda L, x: L.fft.fftn(x, s=(2,), dim=(0, 1)), X),
    }
    return cases, errors


FFT, FFT_ERRORS = _fft_cases()
oracle.register(*FFT, *FFT_ERRORS)


@pytest.mark.parametrize("case_id", sorted(FFT))
def test_fft(case_id):
    fn, *inputs = FFT[case_id]
    oracle.case(case_id, lambda: oracle.facade(fn, *inputs))


@pytest.mark.parametrize("case_id", sorted(FFT_ERRORS))
def test_fft_errors(case_id):
    fn, *inputs = FFT_ERRORS[case_id]
    oracle.case(case_id, lambda: oracle.facade(fn, *inputs, error=""))
