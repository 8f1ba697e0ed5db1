"""linalg on matrices holding inf or NaN never hangs (issue 32): LAPACK's SVD loops forever on
some matrices with an inf (a 3x3 random matrix with one inf is enough), so the svd and eig
primitives never give it a non-finite matrix: its outputs are NaN (JAX's answer for NaN
input). The facade follows torch: svd, svdvals, pinv and the nuclear and spectral norms of a
matrix with inf are NaN, with a NaN raise torch's LinAlgError; eig raises, eigvals is NaN.

Every case runs in one child process under a timeout, so a hang fails the test instead of
hanging the suite (a hang inside LAPACK never returns to Python: no signal can stop it)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# each case: (name, code evaluating to the value, or raising); A is a 4x4 float64 matrix
# with inf at [0, 0] (the pattern that hung), R with a row of inf, N with a NaN, S a stack
# of (identity, A, ones); built in the child
CHILD = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    import functrans as ft
    import functrans.numpy as fnp
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(0)
    base = rng.standard_normal((4, 4))
    A = base.copy(); A[0, 0] = np.inf
    R = base.copy(); R[0, :] = np.inf
    N = base.copy(); N[1, 0] = np.nan
    S = np.stack([np.eye(4), A, np.ones((4, 4))])
    out = {}
    for name, code in json.loads(sys.argv[1]):
        try:
            v = eval(code)
            if isinstance(v, tuple):
                v = v[0] if name.endswith("eig") else v[1] if "svd" in name else v
            v = np.asarray(v.detach().numpy() if isinstance(v, ft.Tensor) else v)
            out[name] = ["ok", v.real.tolist(), v.imag.tolist() if v.dtype.kind == "c" else None]
        except Exception as e:
            out[name] = ["raise", type(e).__name__, str(e)]
        print(json.dumps({name: out[name]}), flush=True)
""")

NAN_CASES = {       # -> NaN values (the stack: only its non-finite matrix)
    "fnp svd": "fnp.linalg.svd(A, full_matrices=False)",
    "fnp svd float32": "fnp.linalg.svd(A.astype(np.float32), full_matrices=False)",
    "fnp svd row": "fnp.linalg.svd(R, full_matrices=False)",
    "fnp svdvals": "fnp.linalg.svd(A, compute_uv=False)",
    "fnp svdvals nan": "fnp.linalg.svd(N, compute_uv=False)",
    "fnp pinv": "fnp.linalg.pinv(A)",
    "fnp nuc": "fnp.linalg.norm(A, 'nuc')",
    "fnp norm2": "fnp.linalg.norm(R, 2)",
    "fnp eigvals": "fnp.linalg.eigvals(A)",
    "jit svdvals": "ft.jit(lambda a: fnp.linalg.svd(a, compute_uv=False))(A)",
    "grad nuc": "ft.grad(lambda a: fnp.linalg.norm(a, 'nuc'))(A)",
    "svd": "ft.linalg.svd(ft.tensor(A))",
    "svd row": "ft.linalg.svd(ft.tensor(R))",
    "svdvals": "ft.linalg.svdvals(ft.tensor(A))",
    "pinv row": "ft.linalg.pinv(ft.tensor(R))",
    "matrix_norm nuc": "ft.linalg.matrix_norm(ft.tensor(A), 'nuc')",
    "matrix_norm 2": "ft.linalg.matrix_norm(ft.tensor(A), 2)",
    "matrix_norm -2": "ft.linalg.matrix_norm(ft.tensor(R), -2)",
    "norm nuc": "ft.tensor(A).norm('nuc')",
    "linalg.norm 2": "ft.linalg.norm(ft.tensor(A), 2)",
    "eigvals": "ft.linalg.eigvals(ft.tensor(A))",
    "eigvals nan": "ft.linalg.eigvals(ft.tensor(N))",
}
STACK_CASES = {     # a stack of (identity, A, ones): the finite matrices keep their values
    "fnp svdvals stack": "fnp.linalg.svd(S, compute_uv=False)",
    "svdvals stack": "ft.linalg.svdvals(ft.tensor(S))",
    "fnp eigvals stack": "fnp.linalg.eigvals(S)",
}
SVD_NAN = ("linalg.svd: The algorithm failed to converge because the input matrix contained "
           "non-finite values.")
RAISE_CASES = {     # -> (exception name, message): torch's
    "svd nan": ("ft.linalg.svd(ft.tensor(N))", "LinAlgError", SVD_NAN),
    "svdvals nan": ("ft.linalg.svdvals(ft.tensor(N))", "LinAlgError", SVD_NAN),
    "pinv nan": ("ft.linalg.pinv(ft.tensor(N))", "LinAlgError", SVD_NAN),
    "matrix_norm nuc nan": ("ft.linalg.matrix_norm(ft.tensor(N), 'nuc')", "LinAlgError",
                            SVD_NAN),
    "norm nuc nan": ("ft.tensor(N).norm('nuc')", "LinAlgError", SVD_NAN),
    "svdvals nan stack": ("ft.linalg.svdvals(ft.tensor(np.stack([np.eye(4), N])))",
                          "LinAlgError", SVD_NAN.replace("svd: ", "svd: (Batch element 1): ")),
    "eig": ("ft.linalg.eig(ft.tensor(A))", "RuntimeError",
            "torch.linalg.eig: input tensor should not contain infs or NaNs."),
    "eig nan": ("ft.linalg.eig(ft.tensor(N))", "RuntimeError",
                "torch.linalg.eig: input tensor should not contain infs or NaNs."),
}
TIMEOUT_S = 120     # all cases take ~5 s; a hang takes forever


@pytest.fixture(scope="module")
def results():
    cases = [*NAN_CASES.items(), *STACK_CASES.items(),
             *((k, v[0]) for k, v in RAISE_CASES.items())]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OPENBLAS_NUM_THREADS="1")
    try:
        p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cases)], env=env,
                           capture_output=True, text=True, timeout=TIMEOUT_S, cwd=ROOT)
        stdout, stderr = p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout or ""
        stderr = "TIMEOUT"
    out = {}
    for line in stdout.splitlines():
        out.update(json.loads(line))
    if stderr == "TIMEOUT":
        done = set(out)
        hung = next(k for k, _ in cases if k not in done)
        pytest.fail(f"linalg hung on a non-finite matrix: case {hung!r} ran past {TIMEOUT_S} s")
    assert len(out) == len(cases), stderr
    return out


@pytest.mark.parametrize("name", sorted(NAN_CASES))
def test_non_finite_input_gives_nan_without_hanging(results, name):
    status, real, imag = results[name]
    assert status == "ok", f"{name}: raised {real}: {imag}"
    assert np.isnan(np.asarray(real, float)).all(), (name, real)
    if imag is not None:        # torch's eigvals: nan+nanj
        assert np.isnan(np.asarray(imag, float)).all(), (name, imag)


@pytest.mark.parametrize("name", sorted(STACK_CASES))
def test_a_stack_keeps_its_finite_matrices(results, name):
    status, real, _ = results[name]
    assert status == "ok", f"{name}: raised {real}"
    v = np.asarray(real, float)
    assert np.isnan(v[1]).all(), v
    s = np.stack([np.eye(4), np.ones((4, 4))])
    want = (np.sort(np.linalg.eigvals(s).real, -1) if "eig" in name
            else np.linalg.svd(s, compute_uv=False))
    got = np.sort(v[[0, 2]], -1) if "eig" in name else v[[0, 2]]
    np.testing.assert_allclose(got, want, atol=1e-12)


@pytest.mark.parametrize("name", sorted(RAISE_CASES))
def test_torch_raises_there_and_so_does_the_facade(results, name):
    status, kind, message = results[name]
    assert status == "raise", f"{name}: returned {kind}"
    assert (kind, message) == RAISE_CASES[name][1:]
