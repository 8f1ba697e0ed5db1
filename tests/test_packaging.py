"""What a user meets around the library: the license and metadata, `py.typed` and the
public API's type hints (mypy, configured in pyproject.toml), `python -m functrans`, and
`ft.set_num_threads` / `ft.get_num_threads`."""
import os
import pathlib
import subprocess
import sys
import warnings

import numpy as np
import pytest

import functrans as ft
from functrans.backends import threads

ROOT = pathlib.Path(__file__).parent.parent


def test_license_and_metadata():
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "Apache License" in (ROOT / "LICENSE").read_text()[:200]
    assert project["license"] == {"text": "Apache-2.0"}
    assert project["authors"] and project["urls"] and project["readme"] == "README.md"
    assert "License :: OSI Approved :: Apache Software License" in project["classifiers"]
    assert {"viz", "examples", "test"} <= set(project["optional-dependencies"])
    assert (ROOT / "functrans" / "py.typed").exists()


def test_public_api_type_checks():
    pytest.importorskip("mypy", reason="the type check needs mypy (pip install -e '.[test]')")
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_public_signatures_are_hinted():
    for fn in (ft.grad, ft.value_and_grad, ft.vjp, ft.jvp, ft.linearize, ft.jacfwd, ft.jacrev,
               ft.hessian, ft.vmap, ft.jit, ft.make_jaxpr, ft.save, ft.load, ft.device_put,
               ft.set_num_threads, ft.get_num_threads, ft.Tensor.detach, ft.Tensor.numpy):
        assert "return" in fn.__annotations__, fn.__name__


def test_python_m_functrans():
    proc = subprocess.run([sys.executable, "-m", "functrans"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for key in ("functrans ", "python ", "numpy ", "opt_einsum ", "cupy ", "devices ", "BLAS ",
                "threads ", "C compiler ", "MPI ", "derived programs "):
        assert f"\n{key}" in "\n" + out, (key, out)
    assert ft.__version__ in out and np.__version__ in out


def _blas_threads():
    return [lib["num_threads"] for lib in threads.blas_info() if "num_threads" in lib]


def test_set_num_threads():
    before, blas_before = ft.get_num_threads(), _blas_threads()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")      # no reachable BLAS: env vars, with a warning
            ft.set_num_threads(1)
        assert ft.get_num_threads() == 1
        assert all(c == 1 for c in _blas_threads())
        with pytest.raises(ValueError, match="positive integer"):
            ft.set_num_threads(0)
    finally:
        with warnings.catch_warnings():         # BLAS as it was, then the backend's count
            warnings.simplefilter("ignore")
            ft.set_num_threads(blas_before[0] if blas_before else before)
        threads.CONFIG.threads = before


def test_set_num_threads_without_a_reachable_blas(monkeypatch):
    """Neither threadpoolctl nor NumPy's bundled OpenBLAS: the variables are set for later
    processes, and a warning says that this process's BLAS is unchanged."""
    for var in threads.ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(threads, "_threadpoolctl", lambda: None)
    monkeypatch.setattr(threads, "_numpy_openblas", lambda: None)
    monkeypatch.setattr(threads.CONFIG, "threads", threads.CONFIG.threads)
    with pytest.warns(UserWarning, match="OPENBLAS_NUM_THREADS=1 python"):
        ft.set_num_threads(3)
    assert all(os.environ[v] == "3" for v in threads.ENV_VARS) and ft.get_num_threads() == 3


def test_a_monkeypatched_public_name_stays_patched():
    # the lazily loaded namespace once overwrote every public name on each missed lookup, so
    # `ft.randn = mine` (as `mock.patch("torch.randn")` does) was undone by the next
    # `hasattr(ft, "missing")`; a fresh interpreter, since this process has loaded it all
    code = ("import functrans as ft\n"
            "ft.randn = mine = lambda *s: 'patched'\n"
            "assert not hasattr(ft, 'no_such_name')\n"
            "assert ft.randn is mine and ft.zeros(2).shape == (2,)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
