"""Every example in examples/ runs to completion (CI runs them as a user would)."""
import pathlib
import runpy
import sys

import pytest

EXAMPLES = sorted(p for p in (pathlib.Path(__file__).parent.parent / "examples").glob("*.py"))
SLOW: set = set()   # every example runs in seconds, so CI runs them all


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.slow) if p.name in SLOW
                                  else p for p in EXAMPLES], ids=lambda p: p.name)
def test_example_runs(path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(path)])
    runpy.run_path(str(path), run_name="__main__")
    assert capsys.readouterr().out.strip()
