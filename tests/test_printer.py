"""Golden make_jaxpr strings: the printer follows JAX's layout."""
from __future__ import annotations

import numpy as np

import functrans as ft
import functrans.numpy as fnp
from conftest import check_traced
import pytest

F3 = np.ones(3, np.float32)


def golden(f, *args, **kw):
    closed = check_traced(f, *args, **kw)
    return str(closed)


def test_one_line():
    assert golden(lambda x, y: x * y, F3, F3) == \
        "{ lambda ; a:f32[3] b:f32[3]. let c:f32[3] = mul a b in (c,) }"


def test_multi_line_with_params():
    a, b = np.ones((3, 4), np.float32), np.ones((4, 2), np.float32)
    assert golden(lambda x, y: fnp.sum(fnp.tanh(x @ y) * 2.0), a, b) == """\
{ lambda ; a:f32[3,4] b:f32[4,2]. let
    c:f32[3,2] = dot_general[dimension_numbers=(((1,), (0,)), ((), ()))] a b
    d:f32[3,2] = tanh c
    e:f32[3,2] = mul d 2.0:f32[]
    f:f32[] = reduce_sum[axes=(0, 1)] e
  in (f,) }"""


def test_tanh_matmul_program_evaluates_like_numpy():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(4, 2)).astype(np.float32)
    closed = ft.make_jaxpr(lambda x, y: fnp.sum(fnp.tanh(x @ y) * 2.0))(a, b)
    (out,) = ft.eval_jaxpr(closed.jaxpr, closed.consts, a, b)
    np.testing.assert_allclose(out, np.sum(np.tanh(a @ b) * 2.0), rtol=1e-6)
    assert np.asarray(out).dtype == np.float32


def test_hoisted_constant():
    w = np.arange(3, dtype=np.float32)
    assert golden(lambda x: fnp.sin(x) + w, F3) == """\
{ lambda a:f32[3] ; b:f32[3]. let
    c:f32[3] = sin b
    d:f32[3] = add c a
  in (d,) }"""


def test_literals_of_each_kind_and_several_outputs():
    assert golden(lambda x: (x + 1, x * 2.5, x > 0, x.astype(np.int32) + 1),
                  np.float32(1.0)) == """\
{ lambda ; a:f32[]. let
    b:f32[] = add a 1.0:f32[]
    c:f32[] = mul a 2.5:f32[]
    d:bool[] = gt a 0.0:f32[]
    e:i32[] = convert_element_type[new_dtype=int32 weak_type=False] a
    f:i32[] = add e 1:i32[]
  in (b, c, d, f) }"""


def test_literal_and_input_as_outputs():
    assert golden(lambda x: (x, 1.0), F3) == "{ lambda ; a:f32[3]. let in (a, 1.0:f32[]) }"


@pytest.mark.usefixtures("x64")
def test_float64_and_static_argnums():
    x = np.ones((2, 2))
    assert golden(lambda x, n: x * n, x, 3, static_argnums=1) == \
        "{ lambda ; a:f64[2,2]. let b:f64[2,2] = mul a 3.0:f64[] in (b,) }"


def test_where_and_slicing_params():
    assert golden(lambda x: fnp.where(x > 0, x, 0.0), F3) == """\
{ lambda ; a:f32[3]. let
    b:bool[3] = gt a 0.0:f32[]
    c:f32[3] = select b a 0.0:f32[]
  in (c,) }"""
    assert golden(lambda x: x[1:, None], F3) == """\
{ lambda ; a:f32[3]. let
    b:f32[3,1] = expand_dims[dimensions=(1,)] a
    c:f32[2,1] = slice[limit_indices=(3, 1) start_indices=(1, 0) strides=None] b
  in (c,) }"""


def test_variable_names_continue_after_z():
    def chain(x):
        for _ in range(30):
            x = fnp.sin(x)
        return x
    text = golden(chain, F3)
    lines = text.splitlines()
    assert lines[1].strip() == "b:f32[3] = sin a"
    assert "z:f32[3] = sin y" in text and "ba:f32[3] = sin z" in text
    assert "bb:f32[3] = sin ba" in text
    assert lines[-1] == "  in (be,) }"           # a, then b..z and ba..be: 30 sins


def test_pytree_outputs_print_in_flattened_order():
    assert golden(lambda x: {"b": x * 2, "a": [x, None]}, F3) == \
        "{ lambda ; a:f32[3]. let b:f32[3] = mul a 2.0:f32[] in (a, b) }"


def test_str_of_closed_jaxpr_and_jaxpr_agree():
    closed = ft.make_jaxpr(lambda x: fnp.exp(x) * 3.0)(F3)
    assert str(closed) == str(closed.jaxpr) == ft.core.pp_jaxpr(closed.jaxpr)
