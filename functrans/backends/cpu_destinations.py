"""Product destinations: a batched matrix product whose result is transposed and then
copied, by a reshape or into a concatenation, is written where the copy would put it (a
mixin of backends/cpu.py's lowering). Attention's weighted values (B, H, T, d) become
(B, T, H * d) through a transpose and a reshape that copies; its backward's dq, dk and dv
are transposed and concatenated into the gradient of the qkv product. The product writes
into that array's transposed view instead, and the copies are not run: BLAS writes a
matrix of any row stride, so the product costs the same (a GPT step: four reshapes and two
concatenations of 1.5 MB, about 1 ms of 41 at one thread)."""
from __future__ import annotations

import numpy as np

from ..core import Var
from ..primitives.linalg import dot_general_p
from ..primitives.shape import concatenate_p, reshape_p, transpose_p


class ProductDestinations:
    """The lowering's product-destination state; the lowering sets `dest_of_product`
    ({id(product): (copy eqn, its block (axis, lo, hi) or None for a reshape, inverse
    permutation, the transposed result's shape)}) and `dest_copies` ({id(copy eqn): the
    positions of the operands written in place})."""

    def plan_product_destinations(self, eqns, readers, outputs, dest_slots, plan):
        """Batched products (an "out" kind, not fused) read only by a transpose read only
        by a reshape, or by a concatenation once: written into the reshape's (the
        concatenation's) array, allocated by the first such product. Not where the
        array is a destination a caller gives (dest_slots). A product that is also a
        program output (attention's weighted values, a residual of ft.compile's
        forward) is returned as that view: the backward's transpose of it is then
        C-contiguous, and its reshape no copy either."""
        for e in eqns:
            if (e.primitive is not dot_general_p or not e.params["dimension_numbers"][1][0]
                    or dot_general_p.cpu(e) is None):
                continue
            o = e.outvars[0]
            if len(readers.get(o, ())) != 1:
                continue
            t = readers[o][0]
            if t.primitive is not transpose_p:
                continue
            to = t.outvars[0]
            if to in outputs or len(readers.get(to, ())) != 1:
                continue
            c = readers[to][0]
            inv = tuple(int(i) for i in np.argsort(t.params["permutation"]))
            s = plan.slot_of.get(c.outvars[0])
            if s is not None and (s in dest_slots or plan.donor[s] is not None):
                continue
            if c.primitive is reshape_p:
                index = None
            elif c.primitive is concatenate_p and sum(a is to for a in c.invars) == 1:
                ax, lo = c.params["dimension"], 0
                for a in c.invars:
                    if a is to:
                        break
                    lo += a.aval.shape[ax]
                index = (ax, lo, lo + to.aval.shape[ax])
            else:
                continue
            self.dest_of_product[id(e)] = (c, index, inv, to.aval.shape)
            self.dest_copies.setdefault(id(c), set()).add(
                next(i for i, a in enumerate(c.invars) if a is to))

    def product_destination(self, e, body):
        """The name of the view product e writes into, its array allocated here when e is
        the first to write into it."""
        c, index, inv, shape = self.dest_of_product[id(e)]
        o = c.outvars[0]
        if o not in self.names:
            nm = self.names[o] = self.fresh("d")
            body.append(f"{nm} = _empty({tuple(o.aval.shape)!r}, "
                        f"{self.ctx.dtype(o.aval.dtype)})")
        arr = self.names[o]
        view = f"{arr}.reshape({tuple(shape)!r})" if index is None else _block(arr, *index)
        nm = self.names[e.outvars[0]] = self.fresh()
        body.append(f"{nm} = {view}.transpose({inv})")
        return nm

    def emit_destination_copy(self, e):
        """A reshape or concatenation some products wrote into: the operands not written
        in place are copied into their blocks (a reshape has none)."""
        done = self.dest_copies[id(e)]
        if e.primitive is reshape_p:
            return []
        arr, ax, lo, lines = self.names[e.outvars[0]], e.params["dimension"], 0, []
        for i, a in enumerate(e.invars):
            hi = lo + a.aval.shape[ax]
            if i not in done:
                lines.append(f"{self.ctx.g(np.copyto, 'copyto')}({_block(arr, ax, lo, hi)}, "
                             f"{self.atom(a, as_scalar=False)})")
            lo = hi
        return lines


def _block(arr, ax, lo, hi):
    """The basic index of the block [lo, hi) along axis ax of the array named arr."""
    return f"{arr}[{', '.join([':'] * ax + [f'{lo}:{hi}'])}]"
