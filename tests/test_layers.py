"""The package keeps its shape: no import cycle, no import up the layers, no hidden
(function-local) import of a project module. docs/architecture.md draws the layers.

The checks read the source (AST); nothing is imported, except in the last test, which
starts a fresh interpreter to see what `import functrans.primitives` loads.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Lowest first; a module may import its own layer and the layers before it.
LAYERS = [
    ("core", ["functrans.core", "functrans.tree_util", "functrans.tree"]),
    ("first-order primitives", ["functrans.primitives"]),
    ("tracing and jaxpr passes", ["functrans.tracing", "functrans.passes"]),
    ("runtime and backends", ["functrans.runtime", "functrans.backends"]),
    ("transformations", ["functrans.ad", "functrans.batching", "functrans.staged_rules",
                         "functrans.reverse", "functrans.executor"]),
    ("higher-order primitives", ["functrans.higher_order"]),
    ("array API", ["functrans.transforms", "functrans.numpy", "functrans.contraction",
                   "functrans.lax", "functrans.control_flow", "functrans.random",
                   "functrans.nn.functions", "functrans.debug"]),
    ("facade", ["functrans.facade", "functrans.autograd", "functrans.nn", "functrans.optim",
                "functrans.func", "functrans.serialization", "functrans.viz", "functrans.utils",
                "functrans.cuda", "functrans.accelerator", "functrans.onnx",
                "functrans.distributed"]),
    ("compile", ["functrans.compiler"]),
    ("public namespace", ["functrans.api", "functrans"]),
]

# Imports that run up the layers, each with its reason (none today; these lists only
# shrink: a test checks that every entry still exists).
UPWARD: dict = {
}

# Function-local imports of project modules, each with its reason (optional dependencies
# such as CuPy or mpi4py are not project modules and may always be imported lazily).
LOCAL: dict = {
}


def layer_of(mod):
    best = None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if mod == p or mod.startswith(p + "."):
                if best is None or len(p) > len(best[1]):
                    best = (i, p)
    assert best is not None, f"{mod} is in no layer: add it to LAYERS in {__file__}"
    return best[0]


def project_modules():
    """Module name -> (path, is_package), walking functrans/ (primitives/ through its link)."""
    out = {}
    base = os.path.join(ROOT, "functrans")
    for dirpath, dirnames, filenames in os.walk(base, followlinks=True):
        dirnames[:] = [d for d in dirnames if not d.startswith((".", "__"))]
        for fn in filenames:
            if fn.endswith(".py"):
                parts = os.path.relpath(os.path.join(dirpath, fn), ROOT)[:-3].split(os.sep)
                is_pkg = parts[-1] == "__init__"
                if is_pkg:
                    parts = parts[:-1]
                out[".".join(parts)] = (os.path.join(dirpath, fn), is_pkg)
    return out


def _resolve(name, mods):
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def import_edges(mods):
    """(importer, imported, line, inside a function) for every import of a project module."""
    edges = []
    for mod, (path, is_pkg) in mods.items():
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        package = mod if is_pkg else mod.rpartition(".")[0]

        def visit(node, local):
            for child in ast.iter_child_nodes(node):
                inner = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                    ast.Lambda))
                targets = []
                if isinstance(child, ast.Import):
                    targets = [a.name for a in child.names]
                elif isinstance(child, ast.ImportFrom):
                    if child.level:
                        pkg = package.split(".")
                        pkg = pkg[:len(pkg) - child.level + 1]
                        src = ".".join(pkg + ([child.module] if child.module else []))
                    else:
                        src = child.module or ""
                    targets = [f"{src}.{a.name}" if f"{src}.{a.name}" in mods else src
                               for a in child.names]
                for t in targets:
                    r = _resolve(t, mods)
                    if r is not None and r != mod:
                        edges.append((mod, r, child.lineno, local))
                visit(child, inner)
        visit(tree, False)
    return sorted(set(edges))


MODS = project_modules()
EDGES = import_edges(MODS)


def _cycles(edges):
    graph = {}
    for a, b, _, _ in edges:
        graph.setdefault(a, set()).add(b)
    index, low, stack, on, out = {}, {}, [], set(), []

    def strong(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    for v in list(graph):
        if v not in index:
            strong(v)
    return out


def test_every_module_has_a_layer():
    for mod in MODS:
        layer_of(mod)


def test_no_import_cycle():
    # the package's own __init__ gathers the public names of every layer: it is the top,
    # and a submodule importing its parent package is how Python imports work, not a cycle
    edges = [e for e in EDGES if e[1] != "functrans"]
    cycles = _cycles(edges)
    report = []
    for comp in cycles:
        report.append(f"cycle of {len(comp)}: " + ", ".join(sorted(comp)))
        report += sorted({f"    {a} -> {b}" + (" (in a function)" if loc else "")
                          for a, b, _, loc in edges if a in comp and b in comp})
    assert not cycles, "\n".join(report)


def test_no_upward_import():
    bad = [f"{a} ({LAYERS[layer_of(a)][0]}) -> {b} ({LAYERS[layer_of(b)][0]}), line {n}"
           for a, b, n, _ in EDGES
           if layer_of(b) > layer_of(a) and (a, b) not in UPWARD]
    assert not bad, "imports up the layers:\n" + "\n".join(bad)


def test_allowlists_are_current():
    """Every documented exception still exists (so the lists only shrink)."""
    upward = {(a, b) for a, b, _, _ in EDGES if layer_of(b) > layer_of(a)}
    local = {(a, b) for a, b, _, loc in EDGES if loc}
    assert set(UPWARD) <= upward, set(UPWARD) - upward
    assert set(LOCAL) <= local, set(LOCAL) - local


def test_no_hidden_import():
    bad = [f"{a} -> {b}, line {n}" for a, b, n, loc in EDGES if loc and (a, b) not in LOCAL]
    assert not bad, "function-local imports of project modules:\n" + "\n".join(bad)


def test_primitives_load_with_the_core_alone():
    """`import functrans.primitives` loads the core and the primitives, nothing above."""
    code = ("import sys, functrans.primitives; "
            "print(' '.join(m for m in sys.modules if m.startswith('functrans')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True).stdout.split()
    assert "functrans.primitives.elementwise" in out
    above = [m for m in out if m != "functrans" and layer_of(m) > 1]
    assert not above, f"import functrans.primitives loaded {above}"


def test_the_distribution_installs_only_functrans():
    """`pip install` puts one top-level package in site-packages (primitives/ goes in as
    functrans.primitives, never as a generic `primitives`)."""
    import importlib.metadata
    top = importlib.metadata.distribution("functrans").read_text("top_level.txt").split()
    assert top == ["functrans"], top
