"""Column blocks: native fusion groups that read or write blocks of columns of a larger
array's last axis in place (a mixin of backends/cpu.py's lowering). An LSTM step's gates
read the four blocks of its pre-activations without copying them out (a slice, emit_slice);
its backward's gate gradients are written into the blocks of the array a concatenation
would copy them into (plan_out_columns), and the concatenation is not run."""
from __future__ import annotations

import numpy as np

from .native import kernels as native_kernels
from ..core import Var
from ..primitives.shape import (concatenate_p, slice_column_block, slice_index,
                                slice_is_contiguous)


class ColumnBlocks:
    """The lowering's column-block state and decisions; the lowering sets `columns`
    ({slice var: (operand's name, W, lo)}), `row_loops`, `out_columns` and `skip`."""

    def emit_slice(self, e, readers, outputs):
        """A slice as a basic index of its operand (a view). Native calls take C-contiguous
        arrays only (and would retry with every argument copied): where native groups read
        a slice whose view is not one, they read a column block (an LSTM step's gate
        block of the pre-activations) in place, from the whole operand, when each of them
        can (takes_columns), and the view is not made; else the slice is copied
        C-contiguous."""
        o, x = e.outvars[0], e.invars[0]
        nm = self.names[o] = self.fresh()
        xs = self.atom(x, as_scalar=False)
        view = f"{xs}[{self.ctx.g(slice_index(**e.params), 'index')}]"
        natives = [r for r in readers.get(o, ()) if id(r) in self.native_ids]
        if natives and not slice_is_contiguous(x.aval.shape, **e.params):
            block = slice_column_block(x.aval.shape, **e.params)
            if block and o not in outputs and len(natives) == len(readers[o]) and all(
                    self.takes_columns(r, o) for r in natives):
                self.columns[o] = (xs, *block)
                return []
            view = f"{self.ctx.g(np.ascontiguousarray, 'ascontiguousarray')}({view})"
        return [f"{nm} = {view}"]

    def takes_columns(self, e, v):
        """Whether native group e can read its input v as a column block: a group of plain
        elementwise work (not a row group) that loads v at its own shape and loops over
        rows (native_kernels.takes_columns)."""
        if id(e) in self.row_functions:
            return False
        inner = e.params["jaxpr"]
        shape = inner.eqns[-1].outvars[0].aval.shape if inner.eqns else None
        if any(a is v and p.aval.shape != shape for a, p in zip(e.invars, inner.invars)):
            return False
        rows = self.row_loops.get(id(e))
        if rows is None:
            rows = self.row_loops[id(e)] = native_kernels.takes_columns(
                native_kernels.render_group(inner, "probe"))
        return rows

    def plan_out_columns(self, eqns, plan, readers, outputs):
        """Concatenations along the last axis whose operands are each an output of a
        native group that loops over rows (takes_columns), read by nothing else: those
        groups write the blocks into the concatenation's array (out_columns: id(group) ->
        {output position: (concatenation var, W, lo)}) and the concatenation is skipped
        (skip). Only where the concatenation's array is allocated per call for it alone
        (an output: allocated before the groups run instead, no other value's buffer)."""
        producer = {v: e for e in eqns for v in e.outvars}
        for e in eqns:
            o = e.outvars[0]
            s = plan.slot_of.get(o)
            if (e.primitive is not concatenate_p or o.aval.ndim < 2
                    or e.params["dimension"] != o.aval.ndim - 1 or s is None
                    or not plan.escapes[s] or plan.donor[s] is not None
                    or sum(t == s for t in plan.slot_of.values()) != 1):
                continue
            blocks, lo, w = [], 0, o.aval.shape[-1]
            for a in e.invars:
                g = producer.get(a) if type(a) is Var else None
                if (g is None or id(g) not in self.native_ids or a in outputs
                        or len(readers.get(a, ())) != 1 or not self.takes_columns(g, a)):
                    break
                blocks.append((g, g.outvars.index(a), lo))
                lo += a.aval.shape[-1]
            else:
                for g, k, lo in blocks:
                    self.out_columns.setdefault(id(g), {})[k] = (o, w, lo)
                self.skip.add(id(e))

