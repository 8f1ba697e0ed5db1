"""Benchmark harness: a workload registry, interleaved timing rounds, ratios to a NumPy floor.

A workload is a setup function registered with ``@workload(...)``. It returns a
dict ``{variant_name: zero_arg_callable}`` (or a ``Case`` carrying extra notes);
one variant is the hand-written NumPy floor. The harness checks every variant
against the floor, then times all variants round-robin so that machine noise
hits them alike, and reports each median as a ratio to the floor's median
measured in the same run. A variant may be ``Staged`` (an untimed preparation
per call), and a ``Case`` may give some variants floors of their own (one
workload, several sizes).
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
import sys
import time
from dataclasses import dataclass, field, replace

import numpy as np

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


@dataclass
class Case:
    """What a setup function may return instead of a plain dict: variants plus notes."""
    variants: dict
    notes: dict = field(default_factory=dict)     # printed under the table, stored in JSON
    floors: dict = field(default_factory=dict)    # variant -> its own floor variant
                                                  # (default: the workload's floor)

    def floor_of(self, name, default):
        return self.floors.get(name, default)


class Staged:
    """A variant whose calls need fresh untimed input each: ``prepare()`` builds it (e.g.
    records a new graph), ``run(state)`` is what is timed (e.g. its first backward).
    Calling it runs both, for the correctness check and the warm-up."""

    def __init__(self, prepare, run):
        self.prepare, self.run = prepare, run

    def __call__(self):
        return self.run(self.prepare())


REGISTRY: dict[str, Workload] = {}
SKIPPED_MODULES: dict[str, str] = {}


def workload(name, *, issue=None, floor="numpy", targets=None, description="",
             rtol=1e-4, atol=1e-5, settings=None):
    """Register ``setup() -> {variant: fn}`` as benchmark ``name``; ``floor`` names the NumPy floor.

    ``targets`` maps a variant to the issue's bound on its ratio to the floor
    (e.g. ``{"eval_jaxpr": 2.0}``). ``rtol``/``atol`` are the correctness
    tolerances, applied relative to each output leaf's largest magnitude.
    ``settings`` caps ``Settings`` fields for this workload (e.g. ``{"warmup": 2}`` for
    one whose calls last a second): each field is the smaller of the run's and the cap.
    """
    def register(setup):
        if name in REGISTRY:
            raise ValueError(f"benchmark workload {name!r} is registered twice "
                             f"({REGISTRY[name].module} and {setup.__module__})")
        REGISTRY[name] = Workload(name, setup, issue, floor, dict(targets or {}),
                                  description or (setup.__doc__ or "").strip(), rtol, atol,
                                  setup.__module__, dict(settings or {}))
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
    for floor in {wl.floor, *case.floors.values()}:
        if floor not in case.variants:
            raise ValueError(f"workload {wl.name!r} has no floor variant {floor!r}")
    case.variants = {wl.floor: case.variants[wl.floor],
                     **{k: v for k, v in case.variants.items() if k != wl.floor}}
    return case


def check(wl: Workload, case: Case | None = None):
    """Check every variant of a workload against its floor; return {variant: error or None}."""
    case = case or build(wl)
    floors = {wl.floor, *case.floors.values()}
    refs = {name: case.variants[name]() for name in case.variants if name in floors}
    errors = {}
    for name, fn in case.variants.items():
        if name in floors:
            continue
        try:
            compare(fn(), refs[case.floor_of(name, wl.floor)], wl.rtol, wl.atol,
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

    @classmethod
    def quick(cls):
        return cls(rounds=5, min_rounds=3, warmup=1, warmup_s=0.0, sample_s=0.002,
                   budget_s=1.5)

    def capped(self, caps):
        """These settings with each field in ``caps`` lowered to the cap."""
        return replace(self, **{k: min(getattr(self, k), v) for k, v in caps.items()})


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
    """Time each zero-arg callable in interleaved rounds; return {name: per-call seconds list}."""
    names = list(variants)
    for name in names:
        t0 = time.perf_counter()
        k = 0
        while k < settings.warmup or time.perf_counter() - t0 < settings.warmup_s:
            variants[name]()
            k += 1
    reps = {name: _calibrate(variants[name], settings.sample_s) for name in names}
    samples = {name: [] for name in names}
    gc.collect()
    start = time.perf_counter()
    for r in range(settings.rounds):
        if r >= settings.min_rounds and time.perf_counter() - start > settings.budget_s:
            break
        for i in range(len(names)):                 # rotate the order each round
            name = names[(r + i) % len(names)]
            n = reps[name]
            samples[name].append(_timed_calls(variants[name], n) / n)
    return samples, reps


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


def run_workload(wl: Workload, settings: Settings):
    """Build, check and time one workload; return its result record."""
    rec = {"name": wl.name, "issue": wl.issue, "floor": wl.floor, "description": wl.description,
           "module": wl.module, "variants": [], "notes": {}, "error": None}
    try:
        case = build(wl)
        errors = check(wl, case)
    except Exception as e:
        rec["error"] = f"setup failed: {type(e).__name__}: {e}"
        return rec
    rec["notes"] = dict(case.notes)
    good = {k: v for k, v in case.variants.items() if errors.get(k) is None}
    try:
        samples, reps = time_variants(good, settings.capped(wl.settings))
    except Exception as e:
        rec["error"] = f"timing failed: {type(e).__name__}: {e}"
        return rec
    floors = {wl.floor, *case.floors.values()}
    for name in case.variants:
        target = wl.targets.get(name)
        floor = name if name in floors else case.floor_of(name, wl.floor)
        v = {"name": name, "floor": floor, "target": target,
             "correct": errors.get(name) is None, "error": errors.get(name)}
        if name in samples:
            med, q1, q3 = summarize(samples[name])
            ratio = med / summarize(samples[floor])[0]
            v.update(median_s=med, q1_s=q1, q3_s=q3, iqr_s=q3 - q1, ratio=ratio,
                     samples=len(samples[name]), calls_per_sample=reps[name],
                     meets_target=None if target is None else bool(ratio <= target))
        rec["variants"].append(v)
    return rec


def print_header(out=None):
    head = f"{'workload':<26} {'variant':<18} {'median':>10} {'IQR':>10} {'ratio':>8}  target"
    print(head, file=out)
    print("-" * len(head), file=out)


def print_table(records, out=None, header=True):
    """Print one row per variant: median, IQR, ratio to the floor and the issue's target."""
    if header:
        print_header(out)
    for rec in records:
        if rec["error"]:
            print(f"{rec['name']:<26} ERROR {rec['error']}", file=out)
            continue
        first = True
        for v in rec["variants"]:
            label = rec["name"] if first else ""
            first = False
            if not v["correct"]:
                print(f"{label:<26} {v['name']:<18} WRONG: {v['error']}", file=out)
                continue
            target = ""
            if v["target"] is not None:
                target = f"<= {v['target']:.2f}x " + ("ok" if v["meets_target"] else "MISSED")
            elif v["name"] == v["floor"]:
                target = "(floor)"
            print(f"{label:<26} {v['name']:<18} {fmt_time(v['median_s']):>10} "
                  f"{fmt_time(v['iqr_s']):>10} {v['ratio']:>7.2f}x  {target}", file=out)
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


def _meta(quick):
    return {"python": platform.python_version(), "numpy": np.__version__,
            "machine": platform.machine(), "system": platform.system(),
            "cpu_count": os.cpu_count(), "quick": quick,
            "blas_threads": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                          "MKL_NUM_THREADS") if k in os.environ},
            "time": time.strftime("%Y-%m-%dT%H:%M:%S")}


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="few short rounds (whole suite well under a minute)")
    p.add_argument("--only", metavar="NAME[,NAME]", help="run only these workloads")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.add_argument("--list", action="store_true", help="list the workloads and exit")
    p.add_argument("--rounds", type=int, help="override the number of timing rounds")
    p.add_argument("--profile", action="store_true",
                   help="after timing, print a cProfile summary (top 15 cumulative) of each non-floor variant")
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
    settings = Settings.quick() if args.quick else Settings()
    if args.rounds:
        settings.rounds = args.rounds
        settings.min_rounds = min(settings.min_rounds, args.rounds)

    records = []
    print_header()
    for name in names:
        t0 = time.perf_counter()
        rec = run_workload(REGISTRY[name], settings)
        rec["wall_s"] = time.perf_counter() - t0
        records.append(rec)
        print_table([rec], header=False)
        sys.stdout.flush()
    print(f"\n{len(records)} workload(s) in {sum(r['wall_s'] for r in records):.1f} s"
          f"{' (--quick: few short rounds, ratios are rough)' if args.quick else ''}")
    if args.profile:
        for name in names:
            wl = REGISTRY[name]
            try:
                case = build(wl)
            except Exception:
                continue
            for vname, fn in case.variants.items():
                if vname != wl.floor:
                    print(f"== profile {name}/{vname} ==")
                    profile_variant(fn, calls=5 if args.quick else 20)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": _meta(args.quick), "skipped_modules": SKIPPED_MODULES,
                       "workloads": records}, f, indent=2, default=str)
    failed = [r["name"] for r in records
              if r["error"] or any(not v["correct"] for v in r["variants"])]
    if failed:
        print(f"FAILED correctness or setup: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
