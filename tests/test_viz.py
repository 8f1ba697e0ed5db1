"""ft.viz.make_dot: autograd graphs of Tensors, jaxprs and jitted functions as DOT text
(no dependency), rendered through Graphviz when the graphviz package and `dot` exist."""
import builtins
import re
import shutil

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans import fusion, viz
from functrans.backends import cpu

W = np.ones((3, 2), np.float32)
B = np.zeros(2, np.float32)
X = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)


def loss_fn(w, b, x):
    return fnp.sum(fnp.tanh(x @ w + b) ** 2)


def labels(dot):
    return re.findall(r'label="((?:[^"\\]|\\.)*)"', dot.source)


def balanced(dot):
    return dot.source.count("{") == dot.source.count("}")


def test_autograd_graph_of_a_model():
    model = ft.nn.Sequential(ft.nn.Linear(4, 8), ft.nn.Tanh(), ft.nn.Linear(8, 3))
    x, y = ft.randn(5, 4), ft.randint(0, 3, (5,))
    loss = ft.nn.functional.cross_entropy(model(x), y)
    handle = model[0].weight.register_hook(lambda g: g)
    dot = ft.viz.make_dot(loss, params=dict(model.named_parameters()))
    text = labels(dot)
    # PyTorch's grad_fn names, walked through next_functions
    for name in ("NllLossBackward0", "AddmmBackward0", "TanhBackward0"):
        assert any(t.startswith(name) for t in text), (name, text)
    # leaves named by params, with shapes; the hooked leaf is marked
    assert "0.weight\\n(8, 4)\\nhooks: 1" in text and "2.bias\\n(3)" in text
    # saved values with their sizes: tanh keeps its output, f32[5, 8] = 160 B
    assert any(t.startswith("TanhBackward0\\nsaved 160 B") for t in text)
    assert dot.source.count("->") == 8 and balanced(dot)   # a tree: 4 leaves, 4 nodes, output
    handle.remove()
    assert "hooks" not in ft.viz.make_dot(loss).source
    loss.backward()                            # saved values freed: said so, none listed
    after = labels(ft.viz.make_dot(loss))
    assert sum("(saved values freed)" in t for t in after) == 4
    assert not any(" B:" in t for t in after)


def test_autograd_graph_edges_and_roots():
    a = ft.tensor([1.0, 2.0], requires_grad=True)
    b = a * 3
    b.retain_grad()
    c = b.sin() + b
    dot = ft.viz.make_dot([c, b])            # several roots, a shared node drawn once
    text = labels(dot)
    assert text.count("output 0\\n(2)") == 1 and text.count("output 1\\n(2)") == 1
    assert sum(t.startswith("MulBackward0") for t in text) == 1
    assert any(t.startswith("MulBackward0\\nhooks: 1") for t in text)   # retain_grad
    assert ft.viz.make_dot(a).source.count("->") == 1                      # a leaf root
    with pytest.raises(ValueError, match="does not require grad"):
        ft.viz.make_dot(ft.ones(2))


def test_jaxpr_graph_outlines_the_backends_fusion_groups():
    closed = ft.make_jaxpr(ft.grad(loss_fn))(W, B, X)
    dot = ft.viz.make_dot(closed)
    fused = fusion.fuse(closed, can_fuse=cpu.can_fuse)
    groups = [e for e in fused.jaxpr.eqns if e.primitive is fusion.fused_p]
    assert groups and dot.source.count("subgraph cluster_") == len(groups)
    for g in groups:
        assert g.params["name"] in dot.source
    for e in closed.jaxpr.eqns:                # every equation is drawn
        assert f'label="{e.primitive.name}\\n' in dot.source
    assert balanced(dot)
    plain = ft.viz.make_dot(closed, fusion=False)
    assert "cluster" not in plain.source
    assert ft.viz.make_dot(closed.jaxpr).source == dot.source


def test_jitted_function_graph_is_the_optimized_program():
    step = ft.jit(ft.value_and_grad(loss_fn))
    dot = ft.viz.make_dot(step, W, B, X)
    lowered = step.lower(W, B, X)
    n_groups = sum(e.primitive is fusion.fused_p for e in lowered.optimized.jaxpr.eqns)
    assert n_groups >= 1 and dot.source.count("subgraph cluster_") == n_groups
    assert dot.source == ft.viz.make_dot(lowered).source
    assert "output 1\\nf32[3,2]" in dot.source
    traced = ft.viz.make_dot(loss_fn, W, B, X)      # a plain function: traced first
    assert "tanh" in traced.source
    with pytest.raises(TypeError, match="cannot draw a int"):
        ft.viz.make_dot(3)


def test_quoting():
    assert viz._quote('a "b"\nc\\') == '"a \\"b\\"\\nc\\\\"'


@pytest.mark.skipif(shutil.which("dot") is None, reason="needs Graphviz's dot program")
def test_render_svg_and_png(tmp_path):
    pytest.importorskip("graphviz", reason="needs the graphviz package (functrans[viz])")
    a = ft.tensor([1.0, 2.0], requires_grad=True)
    dot = ft.viz.make_dot((a.exp() * a).sum())
    svg = dot.render(tmp_path / "g.svg")
    assert "<svg" in open(svg).read() and "ExpBackward0" in open(svg).read()
    png = dot.render(tmp_path / "g.png", format="png")
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_render_without_graphviz_names_both(monkeypatch, tmp_path):
    real_import = builtins.__import__

    def no_graphviz(name, *args, **kwargs):
        if name == "graphviz":
            raise ImportError("No module named 'graphviz'")
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_graphviz)
    dot = ft.viz.make_dot(ft.make_jaxpr(fnp.sin)(1.0))
    with pytest.raises(viz.RenderError, match=r"graphviz Python package.*dot program"):
        dot.render(tmp_path / "g.svg")
    assert dot.source.startswith('digraph "jaxpr"')     # the text needs nothing
