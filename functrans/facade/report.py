"""What functrans shows that other libraries do not: the backward program of a graph
(`backward_jaxpr`) and the values the graph keeps alive for it (`saved_tensors_report`)."""
from __future__ import annotations

import numpy as np

from ..core import ClosedJaxpr
from . import engine
from .lower import walk
from .node import edge_of, source_line
from .tensor import Tensor


class BackwardJaxpr(ClosedJaxpr):
    """The jaxpr `tensor.backward()` runs; prints like any jaxpr. `inputs` / `outputs`
    describe its arguments (saved values, then output cotangents) and results."""

    def __init__(self, closed, inputs, outputs):
        super().__init__(closed.jaxpr, closed.consts)
        self.inputs = inputs
        self.outputs = outputs

    def describe(self):
        lines = [str(self), "", "inputs:"]
        lines += [f"  {i}: {d}" for i, d in enumerate(self.inputs)]
        lines += ["outputs:"] + [f"  {i}: {d}" for i, d in enumerate(self.outputs)]
        return "\n".join(lines)


def _targets(tensor, inputs):
    if inputs is None:
        return None
    return [inputs] if isinstance(inputs, Tensor) else list(inputs)


def backward_jaxpr(tensor, inputs=None, create_graph=False):
    """The backward program (a jaxpr) that `tensor.backward(inputs=inputs)` would run."""
    if not isinstance(tensor, Tensor) or not tensor.requires_grad:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a "
                           "grad_fn")
    targets = _targets(tensor, inputs)
    root = tensor._grad_fn if tensor._grad_fn is not None else edge_of(tensor)[0]
    if targets is not None:
        for t in targets:
            if t._grad_fn is None and t._requires_grad:
                edge_of(t)
    nodes, pos, structure = engine.index_graph([root])
    if targets is None:
        targets = [v for v in (n.variable for n in nodes if n.info is None) if v is not None]
    tkeys = [engine.value_key(t, pos) for t in targets]
    uniq = list(dict.fromkeys(k for k in tkeys if k is not None))
    n = len(uniq)
    uniq, _ = engine.with_retained(uniq, nodes, structure)
    root_keys = [engine.value_key(tensor, pos)]
    prog, _, _ = engine.get_program(nodes, pos, uniq, root_keys, create_graph, structure)
    ins = [_describe_key(nodes, k) for k in prog.keys] + [
        f"cotangent of the output {_aval_str(tensor)}"]
    outs = [f"gradient of {_describe_key(nodes, k)}" for k in uniq[:n]] + [
        f"retained grad of {_describe_key(nodes, k)}" for k in uniq[n:]]
    return BackwardJaxpr(prog.closed, ins, outs)


def _aval_str(t):
    return f"{t.dtype.name}{list(t.shape)}"


def _describe_key(nodes, k):
    p, s = k
    n = nodes[p]
    if n.info is None:
        v = n.variable
        return f"leaf {v.dtype.name}{list(v.shape)}"
    info = n.info
    a = info.slot_avals[s]
    where = (f"input {s}" if s < info.n_in else f"output {info.out_slots.index(s)}"
             if s in info.out_slots else "intermediate value")
    return f"{where} of {info.name} {a.str_short()} ({source_line(n.src)})"


class SavedTensorsReport:
    """Every value a graph keeps alive for backward: `entries` (dicts) and `total_bytes`."""

    def __init__(self, entries, total_bytes):
        self.entries = entries
        self.total_bytes = total_bytes

    def __iter__(self):
        return iter(self.entries)

    def __len__(self):
        return len(self.entries)

    def __str__(self):
        lines = [f"{len(self.entries)} saved values, {human_bytes(self.total_bytes)} in total "
                 "(views and values shared between nodes counted once)"]
        for e in self.entries:
            shape = "x".join(map(str, e["shape"])) or "scalar"
            lines.append(f"  {e['node']:<22} {e['what']:<12} {e['dtype']:<8} {shape:<14} "
                         f"{human_bytes(e['bytes']):>10}  {e['source']}")
        return "\n".join(lines)

    __repr__ = __str__


def human_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _root_buffer(a):
    b = a
    while isinstance(b, np.ndarray) and isinstance(b.base, np.ndarray):
        b = b.base
    return b


def saved_values(n):
    """(what, array) for each value a recorded node keeps for backward: its held input,
    output and intermediate slots, and an autograd.Function's save_for_backward tensors."""
    info, vals = n.info, []
    if n.vals:
        for s, v in enumerate(n.vals):
            if v is not None:
                what = (f"input {s}" if s < info.n_in else
                        f"output {info.out_slots.index(s)}" if s in info.out_slots
                        else "intermediate")
                vals.append((what, v))
    if n.ctx is not None and n.ctx._saved:
        for i, t in enumerate(n.ctx._saved):
            if t is not None:
                vals.append((f"saved {i}", t._data))
    return vals


def saved_tensors_report(tensor):
    """List the values kept alive for backward by the graph of tensor (shape, dtype, bytes,
    the node and forward source line that saved them) and their total."""
    if not isinstance(tensor, Tensor) or tensor._grad_fn is None:
        return SavedTensorsReport([], 0)
    nodes = walk([tensor._grad_fn])
    entries = []
    seen = {}
    total = 0
    for n in nodes:
        if n.info is None:
            continue
        info = n.info
        for what, v in saved_values(n):
            arr = np.asarray(v) if not hasattr(v, "nbytes") else v
            root = _root_buffer(arr)
            rid = id(root)
            own = 0
            if rid not in seen:
                seen[rid] = root
                own = int(getattr(root, "nbytes", arr.nbytes))
                total += own
            entries.append({"node": info.name, "what": what, "shape": tuple(np.shape(arr)),
                            "dtype": np.asarray(arr).dtype.name if not hasattr(arr, "dtype")
                            else arr.dtype.name, "bytes": int(arr.nbytes), "new_bytes": own,
                            "source": source_line(n.src)})
    return SavedTensorsReport(entries, total)
