"""The layout of a scan's consts for the CPU loop (higher_order/control_flow.py's scan
impl): a 2-D const that the body only multiplies as the transposed right operand of a
matrix product (x @ Wᵀ: a recurrent layer's hidden weight) is passed as Wᵀ, a view where
the native few-row product lays it out itself, else a C-contiguous copy, so that every
step's product reads its operands in row-major order."""
from __future__ import annotations

import math

import numpy as np

from ..backends.memory import DERIVED, EQN_BYTES
from ..core import ClosedJaxpr, Jaxpr, JaxprEqn, Var, structure_key
from ..core.config import config
from ..primitives.linalg import MIN_WEIGHT, NATIVE_GEMM, SMALL_ROWS, dot_general_p


_LAYOUT_STEPS = 4       # steps from which a const's one transposing copy pays off


def _const_layout(closed, num_consts):
    """(body, flip, views): the body reading each 2-D const that it only multiplies as the
    transposed right operand of a matrix product (x @ Wᵀ: a recurrent layer's hidden
    weight) as Wᵀ itself, to be passed C-contiguous, so that every step's GEMM reads both
    operands in row-major order (BLAS's transposed-operand path is slower on the small
    row counts of a batch per step); (None, None, None) when no const qualifies. Kept in
    the one cache by the body's structure, and on closed itself (with `views`, the memo of
    _transposed): a training loop's scan runs the same closed every step, where hashing
    the structure again cost about 0.1 ms a call."""
    own = closed._exes
    if own is None:
        own = closed._exes = {}
    hit = own.get(("scan layout", num_consts))
    if hit is not None:
        return hit
    j = closed.jaxpr
    key = ("scan layout", structure_key(j))
    try:
        shared = DERIVED.get(key)
    except TypeError:
        return None, None, None
    if shared is None:
        shared = DERIVED.put(key, _flip_consts(j, num_consts), EQN_BYTES * (len(j.eqns) + 1))
    body, flip = shared
    hit = (None, None, None) if body is None else (ClosedJaxpr(body, closed.consts), flip, {})
    own[("scan layout", num_consts)] = hit
    return hit


def _flip_consts(j, num_consts):
    """_const_layout's rewrite of the body j (None, None when no const qualifies)."""
    readers = {}
    for e in j.eqns:
        for k, a in enumerate(e.invars):
            if type(a) is Var:
                readers.setdefault(a, []).append((e, k))
    flip = []
    for v in j.invars[:num_consts]:
        rs = readers.get(v, [])
        only_nt = all(e.primitive is dot_general_p and k == 1 and e.invars[0] is not v
                      and e.params["dimension_numbers"][0][1] == (1,)
                      and e.params["dimension_numbers"][1] == ((), ()) for e, k in rs)
        flip.append(v.aval.ndim == 2 and bool(rs) and only_nt
                    and not any(o is v for o in j.outvars))
    if not any(flip):
        return None, None
    new = {v: Var(v.aval.update(shape=v.aval.shape[::-1]))
           for v, f in zip(j.invars, flip) if f}
    eqns, rows = [], {v: set() for v in new}
    for e in j.eqns:
        if e.primitive is dot_general_p and e.invars[1] in new:
            (lc, _), nb = e.params["dimension_numbers"]
            rows[e.invars[1]].add(math.prod(e.invars[0].aval.shape[:-1]))
            e = JaxprEqn(dot_general_p, [e.invars[0], new[e.invars[1]]],
                         {"dimension_numbers": ((lc, (0,)), nb)}, e.outvars)
        eqns.append(e)
    # per const: False, or the row counts of the products that read its transpose
    flip = tuple(tuple(sorted(rows[v])) if f else False for v, f in zip(j.invars, flip))
    return Jaxpr(j.constvars, [new.get(v, v) for v in j.invars], eqns, j.outvars), flip


def _transposed(c, rows, views):
    """The transpose of a const c (n, k) that products of these row counts read: a view of
    c where the native few-row product takes it (it lays the weight out in panels once for
    the loop, reading c's rows: ft_gemm_pack), else a C-contiguous copy (BLAS's
    transposed-operand path is slower on few rows). The view saves the copy: 1 MB, about
    0.25 ms, per layer and training step of the bench's LSTM. views: the memo of whether
    the kernel takes these shapes, per (rows, shape, cpu_backend) (asking built the
    kernel's closure, 10-60 us, at every call)."""
    if not (type(c) is np.ndarray and c.dtype == np.float32 and c.ndim == 2
            and c.flags.c_contiguous and c.size >= MIN_WEIGHT):
        return np.ascontiguousarray(c.T)
    key = (rows, c.shape, config.cpu_backend)
    ok = views.get(key)
    if ok is None:
        ok = views[key] = NATIVE_GEMM.kernel is not None and all(
            2 <= m <= SMALL_ROWS and NATIVE_GEMM.kernel(m, c.shape[1], c.shape[0]) is not None
            for m in rows)
    return c.T if ok else np.ascontiguousarray(c.T)
