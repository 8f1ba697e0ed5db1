"""Pictures of graphs, as torchviz draws PyTorch's: `make_dot(loss)` draws a Tensor's
autograd graph (nodes named like `grad_fn`, leaves with their shapes, the values each node
saves for backward and their sizes, hooks marked), `make_dot(jaxpr)` and
`make_dot(jitted_f, *args)` draw a program's equations with the fusion groups the CPU
backend runs as one kernel outlined as clusters.

The result's `.source` is Graphviz DOT text, built here without any dependency;
`.render(path, format="svg")` runs it through the `graphviz` Python package and Graphviz's
`dot` program when both are installed (`pip install 'functrans[viz]'`, plus the system's
graphviz package).
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from .backends import Lowered, cpu
from .core import ClosedJaxpr, FunctransError, Jaxpr, Literal
from .facade.node import edge_of
from .facade.report import human_bytes, saved_values
from .facade.tensor import Tensor
from .fusion import fuse, fused_p
from .higher_order.jit import JitFunction
from .tracing import make_jaxpr

INSTALL = ("pip install 'functrans[viz]' (the graphviz Python package) and Graphviz's dot "
           "program (apt install graphviz, brew install graphviz or conda install graphviz)")

# colors as torchviz uses them: outputs green, leaves blue, saved values orange
_OUTPUT, _LEAF, _SAVED, _HOOK, _CLUSTER = "darkolivegreen1", "lightblue", "orange", "red", "gray40"


class RenderError(FunctransError, RuntimeError):
    """A graph could not be rendered: the graphviz package or the dot program is missing."""


class Dot:
    """A graph as DOT text (`.source`); `.render(path, format)` draws it with Graphviz."""

    def __init__(self, source: str):
        self.source = source

    def __str__(self) -> str:
        return self.source

    def __repr__(self) -> str:
        return f"<functrans.viz.Dot: {self.source.count(chr(10)) + 1} lines of DOT>"

    def render(self, path: str | os.PathLike, format: str = "svg") -> str:
        """Write the picture to `path` (`format`: "svg", "png", or any format of dot's);
        returns the path written."""
        try:
            import graphviz
        except ImportError:
            raise RenderError(f"rendering a graph needs the graphviz Python package and "
                              f"Graphviz's dot program: {INSTALL}. Without them, .source "
                              "holds the DOT text (paste it into any Graphviz viewer)") from None
        try:
            return graphviz.Source(self.source).render(outfile=os.fspath(path), format=format,
                                                       cleanup=True)
        except graphviz.ExecutableNotFound:
            raise RenderError(f"rendering a graph needs Graphviz's dot program on PATH (the "
                              f"graphviz Python package is installed): {INSTALL}") from None

    def _repr_svg_(self) -> str | None:
        """An inline picture in Jupyter when Graphviz is installed."""
        try:
            import graphviz
            return graphviz.Source(self.source).pipe(format="svg").decode()
        except Exception:
            return None


def _quote(s: str) -> str:
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class _Builder:
    """Accumulates DOT statements; node ids are n0, n1, ..."""

    def __init__(self, title: str):
        self.lines = [f"digraph {_quote(title)} {{",
                      '  graph [rankdir=TB fontname="Helvetica" fontsize=11]',
                      '  node [shape=box style="rounded,filled" fillcolor=white '
                      'fontname="Helvetica" fontsize=10 height=0.3]',
                      '  edge [fontname="Helvetica" fontsize=9 arrowsize=0.7]']
        self.count = 0
        self.indent = "  "
        self.edges: list[str] = []   # written last, at the top level: an edge inside a
        #                              cluster would pull its outside endpoint into it

    def node(self, label: str, **attrs: Any) -> str:
        name = f"n{self.count}"
        self.count += 1
        extra = "".join(f" {k}={_quote(v)}" for k, v in attrs.items())
        self.lines.append(f"{self.indent}{name} [label={_quote(label)}{extra}]")
        return name

    def edge(self, a: str, b: str, label: str | None = None) -> None:
        extra = f" [label={_quote(label)}]" if label else ""
        self.edges.append(f"  {a} -> {b}{extra}")

    def open_cluster(self, label: str) -> None:
        self.lines.append(f"{self.indent}subgraph cluster_{self.count} {{")
        self.count += 1
        self.indent += "  "
        self.lines.append(f'{self.indent}label={_quote(label)} style="rounded,dashed" '
                          f"color={_quote(_CLUSTER)} fontcolor={_quote(_CLUSTER)}")

    def close_cluster(self) -> None:
        self.indent = self.indent[:-2]
        self.lines.append(f"{self.indent}}}")

    def done(self) -> Dot:
        return Dot("\n".join(self.lines + self.edges + ["}"]) + "\n")


# ---------------------------------------------------------------------------- autograd

def _shape(t: Any) -> str:
    return "(" + ", ".join(map(str, np.shape(t))) + ")"


def _hook_count(fn: Any) -> int:
    """Hooks registered on the tensors a node produces (or on a leaf), retain_grad included."""
    if fn.info is None:                       # AccumulateGrad: the leaf's hooks
        var = fn.variable
        if var is None:
            return 0
        hooks = len(var._hooks or ()) + len(var.__dict__.get("_post_hooks") or ())
        return hooks + (1 if var.retains_grad else 0)
    return sum(len(d) for d in (fn.hooks or {}).values()) + len(fn.retains or {})


def _tensor_graph(roots: list[Tensor], params: Mapping[str, Tensor] | None,
                  show_saved: bool) -> Dot:
    names = {id(t): n for n, t in (params or {}).items()}
    b = _Builder("autograd graph")
    ids: dict[int, str] = {}
    stack = []
    for i, r in enumerate(roots):
        if not isinstance(r, Tensor):
            raise TypeError(f"make_dot: expected Tensors, got {type(r).__name__}")
        if r.grad_fn is None and not r.requires_grad:
            raise ValueError("make_dot: the tensor has no autograd graph (it does not require "
                             "grad); compute it from tensors created with requires_grad=True")
        label = f"output {i}\n{_shape(r)}" if len(roots) > 1 else f"output\n{_shape(r)}"
        out = b.node(label, fillcolor=_OUTPUT)
        fn = r.grad_fn if r.grad_fn is not None else edge_of(r)[0]
        stack.append((fn, out))
    while stack:
        fn, consumer = stack.pop()
        key = id(fn)
        if key not in ids:
            ids[key] = _draw_fn(b, fn, names, show_saved)
            for nxt, _ in fn.next_functions:
                if nxt is not None:
                    stack.append((nxt, ids[key]))
        b.edge(ids[key], consumer)
    return b.done()


def _draw_fn(b: _Builder, fn: Any, names: dict, show_saved: bool) -> str:
    hooks = _hook_count(fn)
    mark = {"color": _HOOK, "penwidth": "2"} if hooks else {}
    hook_line = f"\nhooks: {hooks}" if hooks else ""
    if fn.info is None:                       # a leaf
        var = fn.variable
        name = names.get(id(var), "") if var is not None else "(freed)"
        label = f"{name}\n{_shape(var)}" if var is not None else name
        return b.node(label.strip() + hook_line, fillcolor=_LEAF, **mark)
    label = fn.name() + hook_line
    saved = saved_values(fn) if show_saved else []
    if saved:
        total = sum(int(getattr(v, "nbytes", np.asarray(v).nbytes)) for _, v in saved)
        lines = [f"{w}: {np.dtype(v.dtype).name}{list(np.shape(v))}" for w, v in saved[:4]]
        lines += [f"... {len(saved) - 4} more"] if len(saved) > 4 else []
        label += f"\nsaved {human_bytes(total)}:\n" + "\n".join(lines)
        return b.node(label, **(mark or {"color": _SAVED, "penwidth": "2"}))
    if fn.freed:
        label += "\n(saved values freed)"
    return b.node(label, **mark)


# ---------------------------------------------------------------------------- jaxprs

def _params_text(params: dict) -> str:
    parts = []
    for k, v in sorted(params.items()):
        if isinstance(v, (Jaxpr, ClosedJaxpr)) or k in ("name",):
            continue
        text = f"{k}={v}"
        parts.append(text if len(text) <= 40 else text[:37] + "...")
    return "\n".join(parts[:3])


def _draw_eqns(b: _Builder, eqns: Iterable, env: dict) -> None:
    for e in eqns:
        if e.primitive is fused_p:
            inner = e.params["jaxpr"]
            inner = inner.jaxpr if isinstance(inner, ClosedJaxpr) else inner
            for outer, v in zip(e.invars, inner.invars):
                if not isinstance(outer, Literal) and outer in env:
                    env[v] = env[outer]
            b.open_cluster(f"{e.params.get('name', 'fused')} ({len(inner.eqns)} ops, one "
                           "kernel)")
            _draw_eqns(b, inner.eqns, env)
            b.close_cluster()
            for outer, v in zip(e.outvars, inner.outvars):
                if not isinstance(v, Literal) and v in env:
                    env[outer] = env[v]
            continue
        lits = [str(np.asarray(a.val)[()]) for a in e.invars       # 0.1, not 0.100000001
                if isinstance(a, Literal) and np.ndim(a.val) == 0]
        outs = ", ".join(v.aval.str_short() for v in e.outvars)
        label = "\n".join(x for x in (e.primitive.name, _params_text(e.params),
                                      f"literals {', '.join(lits)}" if lits else "",
                                      f"-> {outs}") if x)
        node = b.node(label)
        for a in e.invars:
            src = None if isinstance(a, Literal) else env.get(a)
            if src is not None:
                b.edge(src, node, a.aval.str_short())
        for v in e.outvars:
            env[v] = node


def _jaxpr_graph(closed: ClosedJaxpr, title: str) -> Dot:
    b = _Builder(title)
    j = closed.jaxpr
    env: dict = {}
    for i, v in enumerate(j.constvars):
        env[v] = b.node(f"const {i}\n{v.aval.str_short()}", shape="ellipse", fillcolor="gray90")
    for i, v in enumerate(j.invars):
        env[v] = b.node(f"input {i}\n{v.aval.str_short()}", shape="ellipse", fillcolor=_LEAF)
    _draw_eqns(b, j.eqns, env)
    for i, v in enumerate(j.outvars):
        out = b.node(f"output {i}\n{v.aval.str_short()}", shape="ellipse", fillcolor=_OUTPUT)
        if isinstance(v, Literal):
            continue
        if v in env:
            b.edge(env[v], out)
    return b.done()


def make_dot(obj: Any, *args: Any, params: Mapping[str, Tensor] | None = None,
             show_saved: bool = True, fusion: bool = True, **kwargs: Any) -> Dot:
    """The graph of `obj` as a `Dot` (`.source`, `.render(path, format)`):

    - a Tensor (or a list of Tensors): its autograd graph, `grad_fn` nodes named as
      PyTorch names them, leaves (blue) with their shapes and, through `params`
      (`dict(model.named_parameters())`), their names; the values each node saves for
      backward with their total size (orange border), nodes and leaves with hooks (red);
    - a jaxpr (`ft.make_jaxpr(f)(x)`): its equations; with `fusion=True` the groups the
      CPU backend would run as one generated kernel are outlined (`fusion.fuse`);
    - a jitted function and its arguments (`make_dot(ft.jit(step), x, y)`), or a `Lowered`:
      the optimized program the jit runs, fusion groups outlined; any other callable with
      its arguments is traced with make_jaxpr first.
    """
    if isinstance(obj, Tensor) or (isinstance(obj, (list, tuple)) and obj
                                   and all(isinstance(t, Tensor) for t in obj)):
        return _tensor_graph([obj] if isinstance(obj, Tensor) else list(obj), params,
                             show_saved)
    if isinstance(obj, JitFunction):
        lowered = obj.lower(*args, **kwargs)
        return _jaxpr_graph(lowered.optimized, f"jit({lowered.name})")
    if isinstance(obj, Lowered):
        return _jaxpr_graph(obj.optimized, f"jit({obj.name})")
    if isinstance(obj, Jaxpr):
        obj = ClosedJaxpr(obj, [])
    if isinstance(obj, ClosedJaxpr):
        return _jaxpr_graph(fuse(obj, can_fuse=cpu.can_fuse) if fusion else obj, "jaxpr")
    if callable(obj) and args:
        closed = make_jaxpr(obj)(*args, **kwargs)
        return _jaxpr_graph(fuse(closed, can_fuse=cpu.can_fuse) if fusion else closed,
                            getattr(obj, "__name__", "jaxpr"))
    raise TypeError(f"make_dot: cannot draw a {type(obj).__name__}; pass a Tensor (its "
                    "autograd graph), a jaxpr (ft.make_jaxpr(f)(*args)), or a function and its "
                    "arguments (make_dot(ft.jit(f), *args))")
