"""glibc's malloc kept from handing memory back every step (backends/memory.tune_malloc):
a steady training step interleaved with the user's own NumPy code takes no page faults."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from functrans.backends import memory

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


GLIBC = memory.glibc_version() is not None
DEFAULT_ENV = {k: v for k, v in os.environ.items()
               if not k.startswith("MALLOC_") and k != "FUNCTRANS_MALLOC"}


def test_the_user_s_settings_win():
    assert memory.tune_malloc({"FUNCTRANS_MALLOC": "system"}) == \
        "system (FUNCTRANS_MALLOC=system)"
    assert memory.tune_malloc({"MALLOC_TRIM_THRESHOLD_": "0"}) == \
        "system (MALLOC_TRIM_THRESHOLD_ is set)"
    if GLIBC:
        assert memory.tune_malloc(DEFAULT_ENV).startswith("glibc")


STEPS = """
import resource, sys
sys.path.insert(0, {root!r})
from bench.workloads_facade_nn import facade_mlp_train_step
v = facade_mlp_train_step()
for _ in range(10):
    v["numpy"](); v["facade"]()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(30):
    v["facade"](); v["numpy"]()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 30)
"""


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc only")
def test_interleaved_steps_take_no_page_faults():
    """The facade MLP step alternating with its NumPy floor: 2,250 page faults a pair
    with glibc's adaptive thresholds (its megabytes of temporaries handed back and taken
    again), none once tuned."""
    out = subprocess.run([sys.executable, "-c", STEPS.format(root=ROOT)], check=True,
                         capture_output=True, text=True, timeout=300,
                         env={**DEFAULT_ENV, "OPENBLAS_NUM_THREADS": "1"})
    assert float(out.stdout.strip()) < 50, out.stdout
