"""Benchmark harness: a workload registry, interleaved timing rounds, ratios to a NumPy floor.

A workload is a setup function registered with ``@workload(...)``. It returns a
dict ``{variant_name: zero_arg_callable}`` (or a ``Case`` carrying extra notes);
one variant is the hand-written NumPy floor. The harness checks every variant
against the floor, then times all variants round-robin so that machine noise
hits them alike, and reports each median as a ratio to the floor's median
measured in the same run. A variant may be ``Staged`` (an untimed preparation
per call) or ``Checked`` (what is compared differs from what is timed), and a
``Case`` may give some variants floors of their own (one workload, several sizes).

``--against torch,jax`` imports those libraries (the ``oracle`` extra) so that workloads
add their variants (``library(name)``); each variant's median is then also given as a
ratio to the references of the same run: PyTorch eager (``torch_eager``), ``torch.compile``
(``torch_compile``) and JAX's jit (``jax_jit``). ``--threads default,1`` times every
workload with each library's default threads in this process, and with one thread in a
child process started with every thread pool set to one (``THREAD_ENV``).
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import importlib
import io
import json
import math
import os
import pkgutil
import platform
import pstats
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace

import numpy as np

import functrans as ft

# ---------------------------------------------------------------------------
# registry


@dataclass
class Workload:
    """One registered benchmark: its setup function and how to judge its variants."""
    name: str
    setup: object
    issue: int | None = None
    floor: str = "numpy"
    targets: dict = field(default_factory=dict)   # variant -> max ratio to the floor
    description: str = ""
    rtol: float = 1e-4
    atol: float = 1e-5
    module: str = ""
    settings: dict = field(default_factory=dict)  # caps on Settings fields (slow workloads)
    threads: tuple = ("default",)                 # thread settings run when --threads is not given


@dataclass
class Case:
    """What a setup function may return instead of a plain dict: variants plus notes."""
    variants: dict
    notes: dict = field(default_factory=dict)     # printed under the table, stored in JSON;
                                                  # a callable note is called after the check
                                                  # (e.g. compile seconds the check measured)
    floors: dict = field(default_factory=dict)    # variant -> its own floor variant
                                                  # (default: the workload's floor)
    floor: str | None = None                      # the default floor, when not the workload's
                                                  # (e.g. the facade when torch is missing)
    refs: dict = field(default_factory=dict)      # variant -> {reference label: variant}
                                                  # (default: REFERENCES' variant names)

    def floor_of(self, name, default=None):
        return self.floors.get(name, default or self.floor)

    def refs_of(self, name):
        """{reference label: variant} the variant's median is divided by (when timed)."""
        return {**{label: ref for label, ref in REFERENCES.items() if ref in self.variants},
                **self.refs.get(name, {})}


# The references a variant's median is also divided by, when the workload has them:
# label -> the variant's default name.
REFERENCES = {"torch": "torch_eager", "torch.compile": "torch_compile", "jax.jit": "jax_jit"}
OTHER_LIBRARIES = ("torch_", "jax_")     # variant names of the libraries timed against


class Staged:
    """A variant whose calls need fresh untimed input each: ``prepare()`` builds it (e.g.
    records a new graph), ``run(state)`` is what is timed (e.g. its first backward).
    Calling it runs both, for the correctness check and the warm-up."""

    def __init__(self, prepare, run):
        self.prepare, self.run = prepare, run

    def __call__(self):
        return self.run(self.prepare())


class Checked:
    """A variant whose checked value is not what is timed: ``check()`` returns what is
    compared with the floor (e.g. the losses of a model's first two training steps, taken
    with dropout off), ``run()`` is timed (one training step). The harness calls ``check``
    once, before any ``run``."""

    def __init__(self, check, run):
        self.check, self.run = check, run

    def __call__(self):
        return self.run()


def checked_value(fn):
    """What a variant's correctness check compares: ``check()`` of a Checked, else a call."""
    return fn.check() if isinstance(fn, Checked) else fn()


# ---------------------------------------------------------------------------
# the libraries timed against (--against)

INSTALL_ORACLE = "pip install -e '.[oracle]'"
KNOWN_LIBRARIES = ("torch", "jax")
AGAINST: dict = {}        # library name -> its module, for the libraries --against found
MISSING: dict = {}        # library name -> why it is not there and how to get it


def set_against(names):
    """Import the libraries ``names`` (among KNOWN_LIBRARIES) for the workloads to time
    against; those that do not import are recorded in MISSING and the rest run."""
    AGAINST.clear()
    MISSING.clear()
    # Every library's OpenMP pool sleeps when idle, as functrans's does by default
    # (toolchain.load): rounds interleave the libraries in one process, and a pool left
    # spinning after one library's round takes the cores from the next (torch eager's GPT
    # step measured 82 ms with an IQR of 65 ms beside spinning pools, 46 ms +- 2 without,
    # the same as alone). Set before torch loads its OpenMP runtime, which reads it once.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    for name in names:
        if name not in KNOWN_LIBRARIES:
            raise ValueError(f"--against: unknown library {name!r}; known: "
                             f"{', '.join(KNOWN_LIBRARIES)}")
        try:
            AGAINST[name] = importlib.import_module(name)
        except Exception as e:   # ImportError, or a broken install: run the rest
            MISSING[name] = f"{type(e).__name__}: {e} (install the oracle extra: {INSTALL_ORACLE})"
    return AGAINST


def library(name):
    """The module of library ``name`` when ``--against`` named it and it imported, else None:
    a workload adds that library's variants only when this returns the module."""
    return AGAINST.get(name)


def library_versions():
    """{library: version and thread counts} of the libraries timed against, for the report."""
    out = {}
    torch = AGAINST.get("torch")
    if torch is not None:
        out["torch"] = {"version": torch.__version__, "num_threads": torch.get_num_threads(),
                        "interop_threads": torch.get_num_interop_threads()}
    jax = AGAINST.get("jax")
    if jax is not None:
        out["jax"] = {"version": jax.__version__,
                      "XLA_FLAGS": os.environ.get("XLA_FLAGS", "")}
    return out


# ---------------------------------------------------------------------------
# thread settings (--threads)

def thread_env(n):
    """The environment of a child process whose thread pools all have ``n`` threads: OpenMP
    (PyTorch's intra-op pool, the native backend), the BLAS libraries, and XLA's CPU client,
    which reads its thread count only when it starts (so JAX's figures with ``n`` threads
    need a process of their own)."""
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"):
        env[var] = str(n)
    xla = f"--xla_cpu_multi_thread_eigen={'false' if n == 1 else 'true'} " \
          f"intra_op_parallelism_threads={n}"
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + xla).strip()
    return env


def set_threads_in_process(n):
    """Set ``n`` threads in this process where libraries allow it at run time: PyTorch's
    intra-op and inter-op pools, functrans' (BLAS and the CPU backend)."""
    ft.set_num_threads(n)
    torch = AGAINST.get("torch")
    if torch is not None:
        torch.set_num_threads(n)
        try:
            torch.set_num_interop_threads(n)
        except RuntimeError:     # only possible before torch's first parallel work
            pass


def parse_threads(text):
    """``"default,1"`` -> ("default", 1): "default" leaves each library's own count."""
    out = []
    for item in (t.strip() for t in text.split(",")):
        if item == "default":
            out.append("default")
        elif item.isdigit() and int(item) >= 1:
            out.append(int(item))
        else:
            raise ValueError(f"--threads: {item!r} is neither 'default' nor a positive integer")
    return tuple(dict.fromkeys(out))


PASSES: dict = {}         # thread setting -> describe_threads() of the process that ran it

REGISTRY: dict[str, Workload] = {}
SKIPPED_MODULES: dict[str, str] = {}


def workload(name, *, issue=None, floor="numpy", targets=None, description="",
             rtol=1e-4, atol=1e-5, settings=None, threads=("default",)):
    """Register ``setup() -> {variant: fn}`` as benchmark ``name``; ``floor`` names the NumPy floor.

    ``targets`` maps a variant to the issue's bound on its ratio to the floor
    (e.g. ``{"eval_jaxpr": 2.0}``). ``rtol``/``atol`` are the correctness
    tolerances, applied relative to each output leaf's largest magnitude.
    ``settings`` caps ``Settings`` fields for this workload (e.g. ``{"warmup": 2}`` for
    one whose calls last a second): each field is the smaller of the run's and the cap;
    ``"steady_calls": n`` raises the warmup to n calls instead (Settings.capped).
    ``threads`` are the thread settings the workload runs under when ``--threads`` is not
    given (the model workloads: ``("default", 1)``).
    """
    def register(setup):
        if name in REGISTRY:
            raise ValueError(f"benchmark workload {name!r} is registered twice "
                             f"({REGISTRY[name].module} and {setup.__module__})")
        REGISTRY[name] = Workload(name, setup, issue, floor, dict(targets or {}),
                                  description or (setup.__doc__ or "").strip(), rtol, atol,
                                  setup.__module__, dict(settings or {}), tuple(threads))
        return setup
    return register


def discover(path=None, package="bench", verbose=True):
    """Import every ``workloads_*.py`` module; a module that fails to import is skipped with its reason."""
    if path is None:
        path = [os.path.dirname(os.path.abspath(__file__))]
    for info in sorted(pkgutil.iter_modules(path), key=lambda m: m.name):
        if not info.name.startswith("workloads_"):
            continue
        modname = f"{package}.{info.name}"
        if modname in sys.modules or modname in SKIPPED_MODULES:
            continue
        try:
            importlib.import_module(modname)
        except Exception as e:  # a missing feature must not break the harness
            reason = f"{type(e).__name__}: {e}"
            SKIPPED_MODULES[modname] = reason
            sys.modules.pop(modname, None)
            for name in [n for n, wl in REGISTRY.items() if wl.module == modname]:
                del REGISTRY[name]              # registered before the failure: drop them too
            if verbose:
                print(f"skipping {modname}: {reason}", file=sys.stderr)
    return REGISTRY


# ---------------------------------------------------------------------------
# correctness


def _leaves(tree):
    """Flatten nested lists/tuples/dicts (and functrans pytrees) into a list of arrays."""
    if isinstance(tree, dict):
        return [x for k in sorted(tree) for x in _leaves(tree[k])]
    if isinstance(tree, (list, tuple)):
        return [x for t in tree for x in _leaves(t)]
    return [np.asarray(tree)]


def _to_host(x):
    get = getattr(x, "get", None)          # cupy arrays
    return np.asarray(get() if callable(get) and not isinstance(x, np.ndarray) else x)


def compare(out, ref, rtol, atol, where=""):
    """Raise AssertionError unless ``out`` matches ``ref`` leaf by leaf (shape and values)."""
    a, b = _leaves(out), _leaves(ref)
    if len(a) != len(b):
        raise AssertionError(f"{where}: {len(a)} output leaves, floor has {len(b)}")
    for i, (x, y) in enumerate(zip(a, b)):
        x, y = _to_host(x), _to_host(y)
        if x.shape != y.shape:
            raise AssertionError(f"{where}: leaf {i} has shape {x.shape}, floor {y.shape}")
        y64 = y.astype(np.float64)
        scale = float(np.max(np.abs(y64))) if y.size else 0.0
        err = float(np.max(np.abs(x.astype(np.float64) - y64))) if y.size else 0.0
        if not err <= atol + rtol * scale:      # also catches NaN
            raise AssertionError(f"{where}: leaf {i} {x.shape} differs from the floor by {err:.3g} "
                                 f"(allowed {atol + rtol * scale:.3g}, floor max |x| {scale:.3g})")


def build(wl: Workload) -> Case:
    """Run a workload's setup and normalize its result to a Case with the floor first."""
    case = wl.setup()
    if not isinstance(case, Case):
        case = Case(dict(case))
    case.floor = case.floor or wl.floor
    for floor in {case.floor, *case.floors.values()}:
        if floor not in case.variants:
            raise ValueError(f"workload {wl.name!r} has no floor variant {floor!r}")
    case.variants = {case.floor: case.variants[case.floor],
                     **{k: v for k, v in case.variants.items() if k != case.floor}}
    return case


def check(wl: Workload, case: Case | None = None):
    """Check every variant of a workload against its floor; return {variant: error or None}."""
    case = case or build(wl)
    floors = {case.floor, *case.floors.values()}
    refs = {name: checked_value(case.variants[name]) for name in case.variants if name in floors}
    errors = {}
    for name, fn in case.variants.items():
        if name in floors:
            continue
        try:
            compare(checked_value(fn), refs[case.floor_of(name)], wl.rtol, wl.atol,
                    where=f"{wl.name}/{name}")
            errors[name] = None
        except Exception as e:
            errors[name] = f"{type(e).__name__}: {e}"
    return errors


# ---------------------------------------------------------------------------
# timing


@dataclass
class Settings:
    rounds: int = 30          # timing rounds (each round times every variant once)
    min_rounds: int = 7       # rounds kept even past the time budget
    warmup: int = 10          # untimed calls per variant before calibration (enough for
                              # caches and for hot programs to be lowered, runtime.HOT_RUNS)
    warmup_s: float = 0.05    # ... and at least this long, so calibration sees steady state
    sample_s: float = 0.02    # a sample repeats a call until it lasts about this long
    budget_s: float = 12.0    # stop adding rounds to a workload after this much time
    steady: bool = True       # honour a workload's steady_calls (not in quick runs)

    @classmethod
    def quick(cls):
        return cls(rounds=5, min_rounds=3, warmup=1, warmup_s=0.0, sample_s=0.002,
                   budget_s=1.5, steady=False)

    def capped(self, caps):
        """These settings with each field in ``caps`` lowered to the cap; the key
        ``steady_calls`` is a floor instead: the calls a workload's variants need before
        they reach their steady state (a facade step's backward program goes native after
        runtime.NATIVE_RUNS runs), which warmup is raised to unless the run is quick."""
        caps = dict(caps)
        steady = caps.pop("steady_calls", 0)
        out = replace(self, **{k: min(getattr(self, k), v) for k, v in caps.items()})
        return replace(out, warmup=max(out.warmup, steady)) if self.steady else out


def _timed_calls(fn, n):
    """Seconds of ``n`` calls of a variant; a Staged variant's preparations are untimed."""
    if isinstance(fn, Staged):
        states = [fn.prepare() for _ in range(n)]
        t0 = time.perf_counter()
        for state in states:
            fn.run(state)
        elapsed = time.perf_counter() - t0
        del states
        return elapsed
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return time.perf_counter() - t0


def _calibrate(fn, sample_s):
    """Number of calls per sample so that a sample lasts about ``sample_s``."""
    n, elapsed = 1, 0.0
    while True:
        elapsed = _timed_calls(fn, n)
        if elapsed >= sample_s / 4 or n >= 1 << 16:
            break
        n *= 4
    per_call = elapsed / n
    return max(1, min(1 << 16, int(math.ceil(sample_s / max(per_call, 1e-9)))))


def time_variants(variants: dict, settings: Settings):
    """Time each zero-arg callable in interleaved rounds; return ({name: per-call seconds
    list}, {name: calls per sample}, {name: error}). A variant that raises while warming up
    or timing is dropped with its error; the others go on."""
    names, failed = list(variants), {}

    def guarded(name, action):
        try:
            return action()
        except Exception as e:
            failed[name] = f"{type(e).__name__}: {e}"
            names.remove(name)

    def warm(fn):
        t0 = time.perf_counter()
        k = 0
        while k < settings.warmup or time.perf_counter() - t0 < settings.warmup_s:
            fn()
            k += 1
    for name in list(names):
        guarded(name, lambda: warm(variants[name]))
    reps = {}
    for name in list(names):
        reps[name] = guarded(name, lambda: _calibrate(variants[name], settings.sample_s))
    samples = {name: [] for name in names}
    gc.collect()
    start = time.perf_counter()
    for r in range(settings.rounds):
        if r >= settings.min_rounds and time.perf_counter() - start > settings.budget_s:
            break
        order = list(names)
        for i in range(len(order)):                 # rotate the order each round
            name = order[(r + i) % len(order)]
            n = reps[name]
            t = guarded(name, lambda: _timed_calls(variants[name], n) / n)
            if t is not None:
                samples[name].append(t)
    for name in failed:
        samples.pop(name, None)
        reps.pop(name, None)
    return samples, reps, failed


def summarize(samples):
    q1, med, q3 = np.percentile(np.asarray(samples), [25, 50, 75])
    return float(med), float(q1), float(q3)


# ---------------------------------------------------------------------------
# reporting


def fmt_time(s):
    if s != s:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    if s < 1.0:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def run_workload(wl: Workload, settings: Settings, keep=None):
    """Build, check and time one workload; return its result record. ``keep``, a dict,
    receives the built Case under the workload's name (for --profile)."""
    rec = {"name": wl.name, "issue": wl.issue, "floor": wl.floor, "description": wl.description,
           "module": wl.module, "variants": [], "notes": {}, "error": None}
    try:
        case = build(wl)
        rec["floor"] = case.floor
        errors = check(wl, case)
    except Exception as e:
        rec["error"] = f"setup failed: {type(e).__name__}: {e}"
        return rec
    if keep is not None:
        keep[wl.name] = case
    rec["notes"] = {k: v() if callable(v) else v for k, v in case.notes.items()}
    good = {k: v for k, v in case.variants.items() if errors.get(k) is None}
    try:
        samples, reps, failed = time_variants(good, settings.capped(wl.settings))
    except Exception as e:
        rec["error"] = f"timing failed: {type(e).__name__}: {e}"
        return rec
    medians = {name: summarize(xs)[0] for name, xs in samples.items()}
    floors = {case.floor, *case.floors.values()}
    for name in case.variants:
        target = wl.targets.get(name)
        floor = name if name in floors else case.floor_of(name)
        error = errors.get(name) or (failed.get(name) and f"while timed: {failed[name]}")
        v = {"name": name, "floor": floor, "target": target,
             "correct": errors.get(name) is None, "error": error}
        if name in samples:
            med, q1, q3 = summarize(samples[name])
            ratio = med / medians.get(floor, math.nan)
            v.update(median_s=med, q1_s=q1, q3_s=q3, iqr_s=q3 - q1, ratio=ratio,
                     samples=len(samples[name]), calls_per_sample=reps[name],
                     meets_target=None if target is None else bool(ratio <= target),
                     vs={label: med / medians[ref] for label, ref in case.refs_of(name).items()
                         if ref in medians})
        rec["variants"].append(v)
    return rec


def _columns(against):
    """The reference labels printed as columns: those of the libraries timed against."""
    return [label for label in REFERENCES if label.split(".")[0] in against]


def print_header(out=None, against=None):
    against = AGAINST if against is None else against
    refs = "".join(f" {'vs ' + label:>{len(label) + 4}}" for label in _columns(against))
    head = (f"{'workload':<26} {'variant':<18} {'median':>10} {'IQR':>10} {'ratio':>8}"
            f"{refs}  target")
    print(head, file=out)
    print("-" * len(head), file=out)


def print_table(records, out=None, header=True, against=None):
    """Print one row per variant: median, IQR, ratio to the floor, ratios to the references
    of the same run (PyTorch eager, torch.compile, JAX jit) and the issue's target."""
    against = AGAINST if against is None else against
    columns = _columns(against)
    if header:
        print_header(out, against)
    for rec in records:
        if rec["error"]:
            print(f"{rec['name']:<26} ERROR {rec['error']}", file=out)
            continue
        first = True
        for v in rec["variants"]:
            label = rec["name"] if first else ""
            first = False
            if not v["correct"]:
                kind = "WRONG" if v["error"].startswith("AssertionError") else "FAILED"
                print(f"{label:<26} {v['name']:<18} {kind}: {v['error']}", file=out)
                continue
            if "median_s" not in v:
                print(f"{label:<26} {v['name']:<18} FAILED: {v['error']}", file=out)
                continue
            target = ""
            if v["target"] is not None:
                target = f"<= {v['target']:.2f}x " + ("ok" if v["meets_target"] else "MISSED")
            elif v["name"] == v["floor"]:
                target = "(floor)"
            refs = "".join(f" {v['vs'][c]:>{len(c) + 3}.2f}x" if c in v["vs"]
                           else f" {'-':>{len(c) + 4}}" for c in columns)
            print(f"{label:<26} {v['name']:<18} {fmt_time(v['median_s']):>10} "
                  f"{fmt_time(v['iqr_s']):>10} {v['ratio']:>7.2f}x{refs}  {target}", file=out)
        for k, val in rec["notes"].items():
            print(f"{'':<26}   note: {k} = {val}", file=out)


def profile_variant(fn, calls=20, top=15, out=None):
    """Print the top functions by cumulative and by own time over ``calls`` calls of ``fn``."""
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    for key in ("cumulative", "tottime"):
        s = io.StringIO()
        stats = pstats.Stats(prof, stream=s)
        stats.sort_stats(key).print_stats(top)
        text = s.getvalue()
        body = text[text.find("ncalls"):] if "ncalls" in text else text
        print(f"-- top {top} by {key} time over {calls} calls --", file=out)
        print(body.rstrip() + "\n", file=out)


def describe_threads(setting):
    """What a thread setting means in this process, as the libraries report it."""
    out = {"setting": setting, "functrans": ft.get_num_threads(),
           "env": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                               "MKL_NUM_THREADS", "XLA_FLAGS")
                   if k in os.environ}}
    torch = AGAINST.get("torch")
    if torch is not None:
        out["torch"] = torch.get_num_threads()
    if "jax" in AGAINST:
        out["jax"] = ("XLA's CPU client as XLA_FLAGS set it at start" if "XLA_FLAGS" in os.environ
                      else f"XLA's default (all {os.cpu_count()} cores)")
    return out


def _meta(quick):
    return {"python": platform.python_version(), "numpy": np.__version__,
            "machine": platform.machine(), "system": platform.system(),
            "cpu_count": os.cpu_count(), "quick": quick,
            "blas_threads": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                          "MKL_NUM_THREADS") if k in os.environ},
            "against": sorted(AGAINST), "missing": dict(MISSING),
            "libraries": library_versions(), "threads": {str(k): v for k, v in PASSES.items()},
            "time": time.strftime("%Y-%m-%dT%H:%M:%S")}


def _run_pass(names, settings, setting, profile, quick):
    """Run workloads ``names`` in this process under thread setting ``setting``; print the
    table as it goes and the profiles asked for; return the records."""
    info = PASSES[setting] = describe_threads(setting)
    print(f"\n== threads: {setting} == " + ", ".join(f"{k} {v}" for k, v in info.items()
                                                    if k != "setting"))
    print_header()
    records, cases = [], {}
    for name in names:
        t0 = time.perf_counter()
        rec = run_workload(REGISTRY[name], settings, keep=cases)
        rec["wall_s"] = time.perf_counter() - t0
        rec["threads"] = setting
        records.append(rec)
        print_table([rec], header=False)
        sys.stdout.flush()
    if profile is not None:
        wanted = [v for v in profile.split(",") if v]
        for name in names:
            case = cases.get(name)
            if case is None:
                continue
            for vname, fn in case.variants.items():
                if (vname in wanted) if wanted else vname != case.floor:
                    print(f"== profile {name}/{vname} (threads: {setting}) ==")
                    try:
                        profile_variant(fn, calls=5 if quick else 20)
                    except Exception as e:
                        print(f"profile failed: {type(e).__name__}: {e}")
    return records


def _run_child(n, names, args, profile):
    """Run workloads ``names`` with ``n`` threads in a child process (XLA reads its thread
    count only at start): its table prints as it goes; return its records."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = thread_env(n)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    fd, path = tempfile.mkstemp(suffix=".json", prefix="bench-threads-")
    os.close(fd)
    cmd = [sys.executable, "-m", "bench", "--only", ",".join(names), "--in-child", str(n),
           "--json", path]
    if args.quick:
        cmd.append("--quick")
    if args.rounds:
        cmd += ["--rounds", str(args.rounds)]
    if args.against:
        cmd += ["--against", args.against]
    if profile is not None:
        cmd += [f"--profile={profile}"]
    sys.stdout.flush()
    status = None
    try:
        status = subprocess.run(cmd, cwd=root, env=env).returncode
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:     # no child, or it wrote no JSON (it crashed)
        return [{"name": name, "threads": n, "variants": [], "notes": {}, "wall_s": 0.0,
                 "error": f"the {n}-thread child process failed ({type(e).__name__}: {e}; "
                          f"exit status {status})"}
                for name in names]
    finally:
        os.unlink(path)
    PASSES.update(data["meta"].get("threads", {}))
    return data["workloads"]


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="few short rounds (whole suite well under a minute)")
    p.add_argument("--only", metavar="NAME[,NAME]", help="run only these workloads")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.add_argument("--list", action="store_true", help="list the workloads and exit")
    p.add_argument("--rounds", type=int, help="override the number of timing rounds")
    p.add_argument("--profile", nargs="?", const="", metavar="VARIANT[,VARIANT]",
                   help="after timing, print a cProfile summary (top 15 cumulative and own "
                        "time) of the variants named (default: every non-floor variant)")
    p.add_argument("--against", metavar="LIB[,LIB]",
                   help="also time the workloads' variants in these libraries (torch, jax; "
                        "the oracle extra), in the same rounds, and print ratios to them")
    p.add_argument("--threads", metavar="SETTING[,SETTING]",
                   help="thread settings to run under: 'default' (each library's own, in this "
                        "process) and/or counts (a child process with every pool at that "
                        "count); default: each workload's own (the models: default,1)")
    p.add_argument("--in-child", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    discover()
    ordered = sorted(REGISTRY, key=lambda n: (REGISTRY[n].issue is None, REGISTRY[n].issue or 0))
    if args.list:
        for wl in (REGISTRY[n] for n in ordered):
            tg = ", ".join(f"{k} <= {v}x" for k, v in wl.targets.items()) or "no target"
            iss = f"issue {wl.issue}" if wl.issue is not None else ""
            print(f"{wl.name:<26} {iss:<9} {tg:<24} {wl.description}")
        for mod, reason in SKIPPED_MODULES.items():
            print(f"(skipped {mod}: {reason})")
        return 0

    names = ordered
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in REGISTRY]
        if unknown:
            skipped = "".join(f"; skipped {m} ({r})" for m, r in SKIPPED_MODULES.items())
            p.error(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(ordered)}{skipped}")
    try:
        set_against([n.strip() for n in (args.against or "").split(",") if n.strip()])
        threads = parse_threads(args.threads) if args.threads else None
    except ValueError as e:
        p.error(str(e))
    for lib, why in MISSING.items():
        print(f"--against {lib}: not available, its variants are left out: {why}",
              file=sys.stderr)
    settings = Settings.quick() if args.quick else Settings()
    if args.rounds:
        settings.rounds = args.rounds
        settings.min_rounds = min(settings.min_rounds, args.rounds)

    if args.in_child:                     # the child of _run_child: pools set by its env
        set_threads_in_process(args.in_child)
        passes = [(args.in_child, names)]
    else:
        order = threads or tuple(dict.fromkeys(t for n in names for t in REGISTRY[n].threads))
        order = sorted(order, key=lambda t: (t != "default", str(t)))
        passes = [(t, [n for n in names if threads or t in REGISTRY[n].threads])
                  for t in order]
    records = []
    first_in_process = next((t for t, _ in passes if t == "default" or args.in_child), None)
    for setting, pass_names in passes:
        if not pass_names:
            continue
        if setting == "default" or args.in_child:
            profile = args.profile if setting == first_in_process else None
            records += _run_pass(pass_names, settings, setting, profile, args.quick)
        else:
            profile = args.profile if first_in_process is None and not records else None
            records += _run_child(setting, pass_names, args, profile)
    print(f"\n{len(records)} workload run(s) in {sum(r['wall_s'] for r in records):.1f} s"
          f"{' (--quick: few short rounds, ratios are rough)' if args.quick else ''}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": _meta(args.quick), "skipped_modules": SKIPPED_MODULES,
                       "workloads": records}, f, indent=2, default=str)
    failed, others = failures(records)
    if others:
        print(f"other libraries' variants that failed their check (not counted in the exit "
              f"status): {', '.join(others)}", file=sys.stderr)
    if failed:
        print(f"FAILED correctness, setup or timing: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def failures(records):
    """(ours, others): the workload runs with an error or a functrans variant, or a floor,
    that failed its check or its timing; and the other libraries' variants (OTHER_LIBRARIES:
    torch.compile, JAX, ...) that failed theirs but are no floor. Those are reported, not
    counted: the run's exit status says whether functrans is right (the mnist Net's
    torch.compile step gave a loss 1.2% off PyTorch eager's after one Adadelta step)."""
    ours, others = [], []
    for r in records:
        where = f"{r['name']} (threads: {r.get('threads', 'default')})"
        bad = [v for v in r["variants"] if not v["correct"] or "median_s" not in v]
        theirs = [v for v in bad if v["name"].startswith(OTHER_LIBRARIES)
                  and v["name"] != v["floor"]]
        if r["error"] or len(theirs) < len(bad):
            ours.append(where)
        others += [f"{where} {v['name']}" for v in theirs]
    return ours, others
