"""functrans benchmarks: ``python -m bench`` times workloads against a hand-written NumPy floor.

Add a workload in a module named ``bench/workloads_<topic>.py`` with the
``bench.harness.workload`` decorator; the harness discovers it automatically.
"""
from .harness import Case, REGISTRY, Staged, discover, workload  # noqa: F401
