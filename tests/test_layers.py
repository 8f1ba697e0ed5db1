"""The package keeps its shape: every module in a layer of docs/architecture.md's table
(read from the page: the table is the one list of layers), no import cycle, no import up
the layers, no hidden (function-local) import of a project module.

The checks read the source (AST); nothing is imported, except in the last test, which
starts a fresh interpreter to see what `import functrans.primitives` loads.
"""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def doc_layers():
    """The layer table of docs/architecture.md, lowest first: [(layer, [module, ...])],
    a folder as "package.*" (the package and everything below it). Paths there are
    relative to functrans/ (`core/`, `tree_util.py`, `nn/functions.py`, `__init__.py`); a
    module may import its own layer and the layers before it. The page's table is the one
    list of layers."""
    with open(os.path.join(ROOT, "docs", "architecture.md")) as f:
        text = f.read()
    section = text.split("## The layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")][2:]
    layers = []
    for row in rows:
        cells = [c.strip() for c in row.split("|")[1:-1]]
        paths = re.findall(r"`([^`]+)`", cells[1])
        prefixes = []
        for path in paths:
            assert os.path.exists(os.path.join(ROOT, "functrans", path)), \
                f"docs/architecture.md names functrans/{path}, which does not exist"
            mod = path.rstrip("/").removesuffix(".py").replace("/", ".")
            mod = "functrans" if mod == "__init__" else f"functrans.{mod}"
            prefixes.append(mod + ".*" if path.endswith("/") else mod)
        layers.append((cells[0], prefixes))
    return layers


LAYERS = doc_layers()

# Imports that run up the layers, each with its reason (none today; these lists only
# shrink: a test checks that every entry still exists).
UPWARD: dict = {
}

# Function-local imports of project modules, each with its reason (optional dependencies
# such as CuPy or mpi4py are not project modules and may always be imported lazily).
LOCAL: dict = {
}


def layer_of(mod):
    """The index of mod's row: the row naming its file, else the row of the most specific
    folder holding it."""
    best = None
    for i, (_, names) in enumerate(LAYERS):
        for p in names:
            folder = p.endswith(".*")
            base = p[:-2] if folder else p
            if mod == base or (folder and mod.startswith(base + ".")):
                rank = (not folder, len(base))
                if best is None or rank > best[1]:
                    best = (i, rank)
    assert best is not None, f"{mod} is in no layer: add it to a row of docs/architecture.md"
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
    """Every module of the package is in one row of the page's table (the most specific
    path naming it), and no path is named twice."""
    for mod in MODS:
        layer_of(mod)
    named = [p for _, prefixes in LAYERS for p in prefixes]
    assert len(named) == len(set(named)), sorted(p for p in named if named.count(p) > 1)
    assert [name for name, _ in LAYERS][0] == "core" and len(LAYERS) == 10


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
