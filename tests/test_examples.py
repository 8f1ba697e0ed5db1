"""Every example in examples/ runs to completion (CI runs them as a user would), with or
without the optional `examples` extra (matplotlib, tqdm: figures go to a temporary folder).
Modules starting with `_` are the examples' helpers, not examples."""
import importlib
import importlib.util
import pathlib
import os
import runpy
import subprocess
import sys

import pytest

from mpi_jobs import needs_mpi

HERE = pathlib.Path(__file__).parent.parent / "examples"
EXAMPLES = sorted(p for p in HERE.glob("*.py") if not p.name.startswith("_"))
SLOW: set = set()   # every example runs in seconds, so CI runs them all
FIGURES = {"train_mlp.py": "train_mlp.png", "wgan_gp.py": "wgan_gp.png",
           "per_example_grads.py": "per_example_grads.png"}


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.slow) if p.name in SLOW
                                  else p for p in EXAMPLES], ids=lambda p: p.name)
def test_example_runs(path, capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "argv", [str(path)])
    monkeypatch.syspath_prepend(str(HERE))            # as `python examples/x.py` does
    monkeypatch.setenv("FUNCTRANS_FIGURES", str(tmp_path))
    runpy.run_path(str(path), run_name="__main__")
    assert capsys.readouterr().out.strip()
    figure = FIGURES.get(path.name)
    if figure is not None and importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / figure).stat().st_size > 10_000, "the example's figure"


def test_examples_without_the_extra(monkeypatch, capsys, tmp_path):
    """Without matplotlib and tqdm the helpers fall back to printing: no figure, no bar."""
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setenv("FUNCTRANS_FIGURES", str(tmp_path))
    extras = importlib.import_module("_extras")
    monkeypatch.setattr(extras, "plt", None)
    monkeypatch.setattr(extras, "tqdm", None)
    items = range(3)
    assert extras.progress(items, total=3) is items
    extras.log("epoch 1")
    assert extras.figure("x", lambda plt: 1 / 0) is None
    out = capsys.readouterr().out
    assert "epoch 1" in out and "pip install -e '.[examples]'" in out
    assert not list(tmp_path.iterdir())


@needs_mpi
def test_ddp_example_runs_in_two_processes():
    """As the docs say: python -m functrans.distributed.run -n 2 examples/ddp_train_mlp.py"""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-m", "functrans.distributed.run", "-n", "2",
                          str(HERE / "ddp_train_mlp.py")], cwd=HERE.parent, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 process(es), 719 of 1437 training samples each" in out.stdout
    assert "every rank holds the same parameters" in out.stdout
    assert out.stdout.count("epoch ") == 3          # printed by rank 0 only
