"""torch.profiler, minimal and honest: `profile` records the wall time of the regions the
program marks with `record_function(name)` (nested regions each count their own span), and
reports them through `key_averages().table()`, `events()` and `export_chrome_trace(path)`.
It does not record per-operator events, shapes, memory, stacks, FLOPs or GPU kernels as
torch's does: asking for those (record_shapes=True, profile_memory=True, with_stack=True,
with_flops=True, ProfilerActivity.CUDA, a schedule or on_trace_ready) raises
NotImplementedError rather than returning an empty or partial table."""
from __future__ import annotations

import enum
import functools
import json
import os
import threading
import time
from collections import OrderedDict

__all__ = ["profile", "record_function", "ProfilerActivity", "FunctionEvent"]

_ACTIVE: list = []          # the profiles now recording (innermost last)
_LOCK = threading.Lock()


class ProfilerActivity(enum.Enum):
    CPU = 0
    CUDA = 1
    XPU = 2
    MTIA = 3


class FunctionEvent:
    """One recorded region: name, thread, start and end (microseconds since the profile
    began); cpu_time_total is its wall-clock duration in microseconds."""

    def __init__(self, name, thread, start_us, end_us):
        self.name, self.key, self.thread = name, name, thread
        self.time_range_start, self.time_range_end = start_us, end_us

    @property
    def cpu_time_total(self):
        return self.time_range_end - self.time_range_start

    def __repr__(self):
        return f"<FunctionEvent name={self.name!r} cpu_time_total={self.cpu_time_total:.3f}us>"


class FunctionEventAvg:
    """The regions of one name, summed: count, cpu_time_total (us) and cpu_time (mean, us)."""

    def __init__(self, key):
        self.key, self.count, self.cpu_time_total = key, 0, 0.0

    @property
    def cpu_time(self):
        return self.cpu_time_total / self.count if self.count else 0.0

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key!r} count={self.count} "
                f"cpu_time_total={self.cpu_time_total:.3f}us>")


class EventList(list):
    """Events (or their averages) with torch's `table(sort_by=..., row_limit=...)`."""

    def table(self, sort_by=None, row_limit=100, **kwargs):
        rows = [e if isinstance(e, FunctionEventAvg) else _avg([e])[0] for e in self]
        if sort_by is not None:
            key = sort_by.replace("self_", "")
            if key not in ("cpu_time_total", "cpu_time", "count"):
                raise ValueError(f"table(sort_by={sort_by!r}): functrans records wall time of "
                                 "record_function regions only; sort by cpu_time_total, "
                                 "cpu_time or count")
            rows.sort(key=lambda r: getattr(r, key), reverse=True)
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        width = max([len("Name")] + [len(r.key) for r in rows])
        line = "-" * (width + 42)
        out = [line, f"{'Name':<{width}}  {'# of Calls':>10}  {'CPU total':>12}  "
                     f"{'CPU time avg':>12}", line]
        for r in rows:
            out.append(f"{r.key:<{width}}  {r.count:>10}  {_fmt(r.cpu_time_total):>12}  "
                       f"{_fmt(r.cpu_time):>12}")
        out.append(line)
        return "\n".join(out)


def _fmt(us):
    return f"{us:.3f}us" if us < 1e3 else f"{us / 1e3:.3f}ms" if us < 1e6 else f"{us / 1e6:.3f}s"


def _avg(events):
    groups: OrderedDict = OrderedDict()
    for e in events:
        g = groups.setdefault(e.key, FunctionEventAvg(e.key))
        g.count += 1
        g.cpu_time_total += e.cpu_time_total
    return EventList(groups.values())


class profile:
    """Records the record_function regions run inside `with profile() as prof:` (wall time)."""

    def __init__(self, activities=None, schedule=None, on_trace_ready=None,
                 record_shapes=False, profile_memory=False, with_stack=False,
                 with_flops=False, with_modules=False, experimental_config=None,
                 execution_trace_observer=None, acc_events=False, use_cuda=None):
        asked = [n for n, v in (("record_shapes", record_shapes),
                                ("profile_memory", profile_memory), ("with_stack", with_stack),
                                ("with_flops", with_flops), ("with_modules", with_modules),
                                ("schedule", schedule is not None),
                                ("on_trace_ready", on_trace_ready is not None),
                                ("use_cuda", bool(use_cuda))) if v]
        if activities is not None and any(a != ProfilerActivity.CPU for a in activities):
            asked.append("activities other than ProfilerActivity.CPU")
        if asked:
            raise NotImplementedError(
                f"torch.profiler.profile: functrans's profiler records only the wall time of "
                f"record_function regions; {', '.join(asked)} not supported. Use "
                "profile(activities=[ProfilerActivity.CPU]) with record_function, or Python's "
                "cProfile for per-function timings")
        self._events: list = []
        self._t0 = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self):
        self._t0 = time.perf_counter_ns()
        with _LOCK:
            _ACTIVE.append(self)

    def stop(self):
        with _LOCK:
            if self in _ACTIVE:
                _ACTIVE.remove(self)

    def step(self):
        """A training-loop step boundary (schedules are not supported, so nothing to do)."""

    def _add(self, name, t_start, t_end):
        self._events.append(FunctionEvent(name, threading.get_ident(),
                                          (t_start - self._t0) / 1e3, (t_end - self._t0) / 1e3))

    def events(self):
        return EventList(sorted(self._events, key=lambda e: e.time_range_start))

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        if group_by_input_shape or group_by_stack_n:
            raise NotImplementedError("key_averages: functrans records no shapes or stacks")
        return _avg(self.events())

    def export_chrome_trace(self, path):
        """The regions as Chrome trace events ("X" spans), for chrome://tracing or Perfetto."""
        trace = {"traceEvents": [{"name": e.name, "ph": "X", "ts": e.time_range_start,
                                  "dur": e.cpu_time_total, "pid": os.getpid(), "tid": e.thread,
                                  "cat": "user_annotation"} for e in self.events()]}
        with open(path, "w") as f:
            json.dump(trace, f)


class record_function:
    """A named region (context manager or decorator): its wall time is recorded by every
    profile active when it ends; costs two clock reads when none is."""

    def __init__(self, name, args=None):
        self.name, self._start = name, None

    def __enter__(self):
        self._start = time.perf_counter_ns()
        return self

    def __exit__(self, *exc):
        end = time.perf_counter_ns()
        for p in list(_ACTIVE):
            p._add(self.name, self._start, end)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with record_function(self.name):
                return fn(*args, **kwargs)
        return wrapped
