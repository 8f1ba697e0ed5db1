"""einsum: the contraction order is planned by opt_einsum, each pairwise step is lowered
to dot_general (plus reduce_sum for indices summed within one operand, and a final
transpose)."""
from __future__ import annotations

import string

import numpy as np
import opt_einsum

from functrans.primitives import linalg as la
from functrans.primitives import reductions as red
from functrans.primitives import shape as sh


def _parse(subscripts, shapes):
    subscripts = subscripts.replace(" ", "")
    if "->" in subscripts:
        ins, out = subscripts.split("->")
    else:
        ins, out = subscripts, None
    ins = ins.split(",")
    if len(ins) != len(shapes):
        raise ValueError(f"einsum: {len(ins)} operand subscripts for {len(shapes)} operands")
    if "..." in subscripts:
        free = [c for c in string.ascii_letters if c not in subscripts]
        ell_n = max(len(s) - (len(t) - 3) for t, s in zip(ins, shapes) if "..." in t)
        ell = "".join(free[:ell_n])
        new_ins = []
        for t, s in zip(ins, shapes):
            if "..." in t:
                k = len(s) - (len(t) - 3)
                t = t.replace("...", ell[ell_n - k:])
            new_ins.append(t)
        ins = new_ins
        if out is not None:
            out = out.replace("...", ell)
        else:
            out = ell + "".join(sorted(c for c in set("".join(ins)) if "".join(ins).count(c) == 1
                                       and c not in ell))
    if out is None:
        joined = "".join(ins)
        out = "".join(sorted(c for c in set(joined) if joined.count(c) == 1))
    for t, s in zip(ins, shapes):
        if len(t) != len(s):
            raise ValueError(f"einsum: subscripts {t!r} do not match an operand of shape {s}")
        if len(set(t)) != len(t):
            raise NotImplementedError(f"einsum: repeated index within one operand ({t!r}, a "
                                      "diagonal) is not supported")
    return ins, out


def _sum_out(x, labels, keep):
    axes = tuple(i for i, c in enumerate(labels) if c not in keep)
    if not axes:
        return x, labels
    return red.reduce_sum(x, axes=axes), "".join(c for c in labels if c in keep)


def einsum(subscripts, *operands, optimize="optimal"):
    shapes = [tuple(np.shape(o)) if not hasattr(o, "aval") else o.aval.shape for o in operands]
    ins, out = _parse(subscripts, shapes)
    sizes = {}
    for t, s in zip(ins, shapes):
        for c, n in zip(t, s):
            if sizes.setdefault(c, n) != n and 1 not in (n, sizes[c]):
                raise ValueError(f"einsum: index {c!r} has sizes {sizes[c]} and {n}")
    ops = list(operands)
    labels = list(ins)
    if len(ops) > 1:
        path, _ = opt_einsum.contract_path(",".join(ins) + "->" + out, *shapes, shapes=True,
                                           optimize=optimize)
    else:
        path = []
    for pos in path:
        pos = sorted(pos, reverse=True)
        picked = [(ops.pop(p), labels.pop(p)) for p in pos]
        rest = "".join(labels) + out
        if len(picked) == 1:
            x, lx = _sum_out(*picked[0], rest)
            ops.append(x), labels.append(lx)
            continue
        (x, lx), (y, ly) = picked[1], picked[0]
        x, lx = _sum_out(x, lx, rest + ly)
        y, ly = _sum_out(y, ly, rest + lx)
        batch = [c for c in lx if c in ly and c in rest]
        contract = [c for c in lx if c in ly and c not in rest]
        dn = ((tuple(lx.index(c) for c in contract), tuple(ly.index(c) for c in contract)),
              (tuple(lx.index(c) for c in batch), tuple(ly.index(c) for c in batch)))
        z = la.dot_general(x, y, dimension_numbers=dn)
        lz = "".join(batch) + "".join(c for c in lx if c not in ly) + "".join(
            c for c in ly if c not in lx)
        ops.append(z), labels.append(lz)
    (x,), (lx,) = ops, labels
    x, lx = _sum_out(x, lx, out)
    if lx != out:
        x = sh.transpose(x, permutation=tuple(lx.index(c) for c in out))
    return x
