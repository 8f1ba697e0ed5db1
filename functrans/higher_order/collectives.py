"""Collectives over named axes as primitives (JAX's psum, pmax, pmin, all_gather,
psum_scatter, ppermute, axis_index), and pmap.

A collective's `axes` param holds axis names (str) and, once pmap's local part is done,
`ProcessAxis` entries. A name is bound by `vmap(axis_name=)` or `pmap(axis_name=)`: the
primitive is bound on that name's BatchTrace (`CollectivePrimitive.bind` lifts its
operand there), whose `named_batch` rule reduces over the mapped axis; under pmap it then
binds the same primitive over the `ProcessAxis`, whose impl calls the transport
(backends/mpi.py for NumPy arrays, backends/nccl.py for CuPy arrays) at run time, inside
ft.jit programs too. The rules follow JAX's pmap convention: psum transposes to psum
(the cotangents are per-entry), all_gather and psum_scatter to each other, ppermute to
the inverse permutation; pmax/pmin's JVP is the tangent at the maximum, ties averaged.
"""
from __future__ import annotations

import numpy as np

from .. import tree_util
from ..backends import mpi
from ..backends.nccl import NcclCommunicator
from ..batching import AxisFrame, apply_batch_rule, batch_with, named_trace
from ..core import (FunctransError, Primitive, ShapedArray, ShapeError, Tracer, Zero,
                    canonicalize, get_aval)
from ..primitives import elementwise as ew
from ..primitives import reductions as red
from ..primitives import shape as sh
from ..primitives.base import (NONCOMPLEX, NUMERIC, _check_kinds, aval_of,
                               broadcast_batched, defprim, moveaxis, self_rule)


class ProcessAxis:
    """The part of a pmap axis that spans processes (through the transport)."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return type(other) is ProcessAxis and other.name == self.name

    def __hash__(self):
        return hash(("ProcessAxis", self.name))

    def __repr__(self):
        return f"processes({self.name!r})"


def unbound(name):
    return NameError(f"unbound axis name: {name}")


class CollectivePrimitive(Primitive):
    """A collective: bound on the trace of its innermost-bound axis name, so that a value
    not mapped along that axis still meets the axis (psum(1.0, 'i') is the axis size)."""

    def bind(self, *args, **params):
        top = None
        for name in params["axes"]:
            if type(name) is str:
                t = named_trace(name)
                if t is None:
                    raise unbound(name)
                if top is None or t.main.level > top.main.level:
                    top = t
        self.abstract_eval(*[get_aval(a) for a in args], **params)   # errors name shapes
        if top is not None:
            level = max([a._trace.main.level for a in args if isinstance(a, Tracer)],
                        default=0)
            if level < top.main.level:
                args = (top.pure(args[0]),) + args[1:]
        return Primitive.bind(self, *args, **params)


def _transport(xp):
    """The communicator for arrays of `xp`: MPI for NumPy, NCCL for CuPy."""
    world = mpi.world()
    if xp is np or world.size == 1:
        return world
    global _NCCL
    if _NCCL is None:
        _NCCL = NcclCommunicator(world)
    return _NCCL


_NCCL = None


def _process_only(name, axes):
    """The impl's check for collectives whose result varies along the axis: every name
    must have been resolved by its trace."""
    for a in axes:
        if type(a) is str:
            if named_trace(a) is None:
                raise unbound(a)
            raise FunctransError(
                f"{name} over axis {a!r}: the operand reached evaluation outside the trace "
                f"that maps {a!r} (e.g. an ft.jit call none of whose arguments is mapped "
                f"along {a!r}); pass a mapped argument to it, or call the collective "
                f"outside the jitted function")
    _one_process_axis(name, axes)


def _one_process_axis(name, axes):
    if len(axes) > 1:
        raise NotImplementedError(f"{name} over several pmap axes at once ({axes}): nested "
                                  "pmap is not supported")


def _unmapped_frames(axes):
    """For an impl reached with axis names (a program run on concrete values, such as a
    backward pass, under a named vmap/pmap): the operand is not mapped along them, so
    each entry holds it. Returns their frames and the process axes."""
    frames = []
    for a in axes:
        if type(a) is str:
            t = named_trace(a)
            if t is None:
                raise unbound(a)
            frames.append(t.main.global_data)
    return frames, tuple(a for a in axes if type(a) is not str)


def _split(axes, frame):
    """(is this frame's name among axes, the other entries)."""
    return frame.name in axes, tuple(a for a in axes if a != frame.name)


def _procs_axes(rest, frame):
    return rest + (ProcessAxis(frame.name),) if frame.procs else rest


def _one_name(name, axes):
    if len([a for a in axes if type(a) is str]) > 1:
        raise NotImplementedError(f"{name} over several axis names at once ({axes}) is not "
                                  "supported; nest one call per name")


# ---------------------------------------------------------------------------
# psum, pmax, pmin


def _reduce_impl(op):
    def impl(xp, x, *, axes):
        frames, procs = _unmapped_frames(axes)
        for f in frames:
            if op == "sum":
                x = x * np.asarray(f.size, x.dtype)
            if f.procs:
                procs += (ProcessAxis(f.name),)
        _one_process_axis("psum" if op == "sum" else f"p{op}", procs)
        return _transport(xp).allreduce(x, op) if procs else x
    return impl


def _same_shape(kinds):
    def rule(x, *, axes):
        _check_kinds("operand", x, kinds)
        return ShapedArray(x.shape, x.dtype, x.weak_type)
    return rule


def _per_entry_batch(p):
    """Batching over an axis the collective does not name: one collective per entry."""
    def rule(vals, dims, **params):
        return p.bind(vals[0], **params), dims[0]
    return rule


_LOCAL = {"psum": (red.reduce_sum, lambda x, n: ew.mul(x, np.asarray(n, aval_of(x).dtype))),
          "pmax": (red.reduce_max, lambda x, n: x), "pmin": (red.reduce_min, lambda x, n: x)}


def _reduce_named(p, vals, dims, frame, *, axes):
    """Over this frame's axis: reduce the mapped axis (an unmapped value: n copies), then
    the other names and, under pmap, the processes."""
    mine, rest = _split(axes, frame)
    if not mine:
        return apply_batch_rule(p, vals, dims, {"axes": axes})
    (x,), (d,) = vals, dims
    local_reduce, unmapped = _LOCAL[p.name]
    x = unmapped(x, frame.size) if d is None else local_reduce(x, axes=(d,))
    rest = _procs_axes(rest, frame)
    return (p.bind(x, axes=rest) if rest else x), None


def _transpose_by(rule):
    """A linear collective's transpose rule from rule(ct, **params) (zero stays zero)."""
    def transpose(ct, x, **params):
        return [Zero(x.aval) if type(ct) is Zero else rule(ct, **params)]
    return transpose


_psum_transpose = _transpose_by(lambda ct, *, axes: psum_p.bind(ct, axes=axes))


def _pextremum_jvp(p):
    """The tangent at the maximum (minimum); ties share it evenly."""
    def jvp(primals, tangents, *, axes):
        (x,), (t,) = primals, tangents
        y = p.bind(x, axes=axes)
        if type(t) is Zero:
            return y, Zero(aval_of(y).strip_weak())
        mask = ew.convert_element_type(ew.eq(x, y), new_dtype=aval_of(t).dtype,
                                       weak_type=False)
        count = psum_p.bind(mask, axes=axes)
        return y, ew.div(psum_p.bind(ew.mul(t, mask), axes=axes), count)
    return jvp


_COLL = dict(effectful=True, memo=False, primitive_class=CollectivePrimitive)
psum_p = defprim("psum", _reduce_impl("sum"), _same_shape(NUMERIC), linear=True,
                 transpose=_psum_transpose, batch=self_rule(_per_entry_batch),
                 **{**_COLL, "named_batch": _reduce_named})
pmax_p = defprim("pmax", _reduce_impl("max"), _same_shape(NONCOMPLEX),
                 jvp=self_rule(_pextremum_jvp), batch=self_rule(_per_entry_batch),
                 **{**_COLL, "named_batch": _reduce_named})
pmin_p = defprim("pmin", _reduce_impl("min"), _same_shape(NONCOMPLEX),
                 jvp=self_rule(_pextremum_jvp), batch=self_rule(_per_entry_batch),
                 **{**_COLL, "named_batch": _reduce_named})


# ---------------------------------------------------------------------------
# all_gather and psum_scatter: `size` is the number of entries along the axes


def _merge(x, axis):
    """Merge dims axis and axis + 1 (the stacked entries and each one's own dim)."""
    shp = aval_of(x).shape
    return sh.reshape(x, new_sizes=shp[:axis] + (shp[axis] * shp[axis + 1],) + shp[axis + 2:])


def _all_gather_impl(xp, x, *, axes, axis, tiled, size):
    frames, procs = _unmapped_frames(axes)
    if frames:                                  # n copies of an unmapped operand
        _one_name("all_gather", axes)
        f = frames[0]
        x = xp.stack([x] * f.size, axis)
        x = _merge_np(x, axis) if tiled else x
        if not f.procs:
            return x
        procs, tiled = (ProcessAxis(f.name),), True
    _one_process_axis("all_gather", procs)
    g = _transport(xp).allgather(x)             # (processes, *x.shape)
    g = xp.moveaxis(g, 0, axis)
    return _merge_np(g, axis) if tiled else g


def _merge_np(g, axis):
    return g.reshape(g.shape[:axis] + (g.shape[axis] * g.shape[axis + 1],) + g.shape[axis + 2:])


def _all_gather_shape(x, *, axes, axis, tiled, size):
    if not 0 <= axis <= x.ndim - tiled:
        raise ShapeError(f"axis {axis} out of range for an operand of rank {x.ndim}")
    if tiled:
        return ShapedArray(x.shape[:axis] + (x.shape[axis] * size,) + x.shape[axis + 1:],
                           x.dtype)
    return ShapedArray(x.shape[:axis] + (size,) + x.shape[axis:], x.dtype)


def _gather_batch(vals, dims, *, axes, axis, tiled, size):
    return all_gather_p.bind(moveaxis(vals[0], dims[0], 0), axes=axes, axis=axis + 1,
                             tiled=tiled, size=size), 0


def _gather_named(p, vals, dims, frame, *, axes, axis, tiled, size):
    """Stack the mapped axis at `axis` (an unmapped value: n copies), then gather the
    processes' stacks."""
    mine, rest = _split(axes, frame)
    if not mine:
        return apply_batch_rule(p, vals, dims, dict(axes=axes, axis=axis, tiled=tiled,
                                                    size=size))
    _one_name("all_gather", axes)
    (x,), (d,) = vals, dims
    y = broadcast_batched(x, frame.size, axis) if d is None else moveaxis(x, d, axis)
    if tiled:
        y = _merge(y, axis)
    if frame.procs:
        y = all_gather_p.bind(y, axes=(ProcessAxis(frame.name),), axis=axis, tiled=True,
                              size=frame.procs)
    return y, None


_gather_transpose = _transpose_by(
    lambda ct, *, axes, axis, tiled, size: psum_scatter_p.bind(
        ct, axes=axes, scatter_dimension=axis, tiled=tiled, size=size))


def _scatter_impl(xp, x, *, axes, scatter_dimension, tiled, size):
    _process_only("psum_scatter", axes)
    y = _transport(xp).reduce_scatter(xp.moveaxis(x, scatter_dimension, 0), "sum")
    return xp.moveaxis(y, 0, scatter_dimension) if tiled else y[0]


def _scatter_shape(x, *, axes, scatter_dimension, tiled, size):
    s = scatter_dimension
    if not 0 <= s < x.ndim:
        raise ShapeError(f"scatter_dimension {s} out of range for an operand of rank {x.ndim}")
    n = x.shape[s]
    if (n % size if tiled else n != size):
        raise ShapeError(
            f"dimension {s} of the operand {x.str_short()} must "
            + (f"be a multiple of the axis size {size}" if tiled
               else f"equal the axis size {size} (or pass tiled=True)"))
    if tiled:
        return ShapedArray(x.shape[:s] + (n // size,) + x.shape[s + 1:], x.dtype)
    return ShapedArray(x.shape[:s] + x.shape[s + 1:], x.dtype)


def _scatter_batch(vals, dims, *, axes, scatter_dimension, tiled, size):
    return psum_scatter_p.bind(moveaxis(vals[0], dims[0], 0), axes=axes,
                               scatter_dimension=scatter_dimension + 1, tiled=tiled,
                               size=size), 0


def _scatter_named(p, vals, dims, frame, *, axes, scatter_dimension, tiled, size):
    """Sum the mapped axis, scatter the processes' blocks, then hand entry i its block."""
    mine, rest = _split(axes, frame)
    s = scatter_dimension
    if not mine:
        return apply_batch_rule(p, vals, dims, dict(axes=axes, scatter_dimension=s,
                                                    tiled=tiled, size=size))
    _one_name("psum_scatter", axes)
    (x,), (d,) = vals, dims
    n = frame.size
    z = _LOCAL["psum"][1](x, n) if d is None else red.reduce_sum(x, axes=(d,))
    if frame.procs:
        z = psum_scatter_p.bind(z, axes=(ProcessAxis(frame.name),), scatter_dimension=s,
                                tiled=True, size=frame.procs)
    if tiled:
        shp = aval_of(z).shape
        z = sh.reshape(z, new_sizes=shp[:s] + (n, shp[s] // n) + shp[s + 1:])
    return z, s


_scatter_transpose = _transpose_by(
    lambda ct, *, axes, scatter_dimension, tiled, size: all_gather_p.bind(
        ct, axes=axes, axis=scatter_dimension, tiled=tiled, size=size))


all_gather_p = defprim("all_gather", _all_gather_impl, _all_gather_shape, linear=True,
                       transpose=_gather_transpose, batch=_gather_batch,
                       named_batch=_gather_named, **_COLL)
psum_scatter_p = defprim("psum_scatter", _scatter_impl, _scatter_shape, linear=True,
                         transpose=_scatter_transpose, batch=_scatter_batch,
                         named_batch=_scatter_named, **_COLL)


# ---------------------------------------------------------------------------
# ppermute and axis_index


def _check_perm(perm, size):
    srcs, dsts = [s for s, _ in perm], [d for _, d in perm]
    if len(set(srcs)) < len(srcs) or len(set(dsts)) < len(dsts) or any(
            not 0 <= i < size for i in srcs + dsts):
        raise ValueError(f"ppermute: perm {list(perm)} must be (source, destination) pairs "
                         f"of indices below the axis size {size}, each source and each "
                         "destination at most once")


def _ppermute_impl(xp, x, *, axes, perm):
    _process_only("ppermute", axes)
    return _transport(xp).ppermute(x, perm)


def _ppermute_shape(x, *, axes, perm):
    return ShapedArray(x.shape, x.dtype, x.weak_type)


def _ppermute_named(p, vals, dims, frame, *, axes, perm):
    """Entry dst gets entry src's value; entries that are no destination get zeros."""
    mine, rest = _split(axes, frame)
    if not mine:
        return apply_batch_rule(p, vals, dims, dict(axes=axes, perm=perm))
    _one_name("ppermute", axes)
    (x,), (d,) = vals, dims
    n = frame.size
    if frame.procs:
        if n != 1:
            raise NotImplementedError(
                f"ppermute over pmap axis {frame.name!r} with {n} local entries per process "
                "(one device per process is supported)")
        if d is not None:
            x = sh.squeeze(x, dimensions=(d,))
        return ppermute_p.bind(x, axes=(ProcessAxis(frame.name),), perm=perm), None
    _check_perm(perm, n)
    x = broadcast_batched(x, n, 0) if d is None else moveaxis(x, d, 0)
    shp = aval_of(x).shape
    src_of = {dst: src for src, dst in perm}
    zero_row = sh.broadcast_in_dim(np.zeros((), aval_of(x).dtype), shape=(1,) + shp[1:],
                                   broadcast_dimensions=())
    rows = [sh.slice(x, start_indices=(src_of[i],) + (0,) * (len(shp) - 1),
                     limit_indices=(src_of[i] + 1,) + shp[1:], strides=None)
            if i in src_of else zero_row for i in range(n)]
    return sh.concatenate(*rows, dimension=0), 0


_ppermute_transpose = _transpose_by(        # by the inverse permutation
    lambda ct, *, axes, perm: ppermute_p.bind(ct, axes=axes,
                                              perm=tuple((d, s) for s, d in perm)))


def _ppermute_batch(vals, dims, *, axes, perm):
    return ppermute_p.bind(vals[0], axes=axes, perm=perm), dims[0]


ppermute_p = defprim("ppermute", _ppermute_impl, _ppermute_shape, linear=True,
                     transpose=_ppermute_transpose, batch=_ppermute_batch,
                     named_batch=_ppermute_named, **_COLL)


def _axis_index_impl(xp, x, *, axes):
    _process_only("axis_index", axes)
    return np.asarray(mpi.world().rank, np.int32)


def _axis_index_named(p, vals, dims, frame, *, axes):
    """0 .. n-1 along the mapped axis, offset by this process's first entry under pmap."""
    if frame.name not in axes:
        return apply_batch_rule(p, vals, dims, {"axes": axes})
    offset = mpi.world().rank * frame.size if frame.procs else 0
    idx = sh.iota(dtype=np.dtype(np.int32), shape=(frame.size,), dimension=0)
    if offset:
        idx = ew.add(idx, np.asarray(offset, np.int32))
    return idx, 0


def _axis_index_batch(vals, dims, *, axes):
    size = aval_of(vals[0]).shape[dims[0]]
    return sh.broadcast_in_dim(axis_index_p.bind(np.zeros((), np.int32), axes=axes),
                               shape=(size,), broadcast_dimensions=()), 0


axis_index_p = defprim("axis_index", _axis_index_impl,
                       lambda x, *, axes: ShapedArray((), np.dtype(np.int32)),
                       differentiable=False, batch=_axis_index_batch,
                       named_batch=_axis_index_named, **_COLL)


# ---------------------------------------------------------------------------
# the public functions (ft.lax.psum, ...) and pmap


def _names(axis_name):
    names = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"axis_name must be a str or a tuple of str, got {axis_name!r}")
    return names


def axis_size(axis_name):
    """The number of entries along the named axes (over all processes under pmap)."""
    n = 1
    for name in _names(axis_name):
        t = named_trace(name)
        if t is None:
            raise unbound(name)
        frame: AxisFrame = t.main.global_data
        n *= frame.size * (frame.procs or 1)
    return n


def _leafwise(p, x, axis_name, **params):
    axes = _names(axis_name)
    return tree_util.tree_map(lambda v: p.bind(canonicalize(v), axes=axes, **params), x)


def psum(x, axis_name):
    """The sum of x over the named axes (every entry gets it); a pytree of arrays too."""
    return _leafwise(psum_p, x, axis_name)


def pmean(x, axis_name):
    """The mean of x over the named axes: psum / the axes' size."""
    n = axis_size(axis_name)

    def mean(v):
        s = psum_p.bind(canonicalize(v), axes=_names(axis_name))
        return ew.div(s, np.asarray(n, get_aval(s).dtype))
    return tree_util.tree_map(mean, x)


def pmax(x, axis_name):
    """The maximum of x over the named axes."""
    return _leafwise(pmax_p, x, axis_name)


def pmin(x, axis_name):
    """The minimum of x over the named axes."""
    return _leafwise(pmin_p, x, axis_name)


def all_gather(x, axis_name, *, axis=0, tiled=False):
    """Every entry's x stacked along a new axis `axis` (concatenated along `axis` when
    tiled)."""
    return _leafwise(all_gather_p, x, axis_name, axis=axis, tiled=tiled,
                     size=axis_size(axis_name))


def psum_scatter(x, axis_name, *, scatter_dimension=0, tiled=False):
    """psum, with entry i keeping block i of `scatter_dimension` (of size 1, removed,
    unless tiled)."""
    return _leafwise(psum_scatter_p, x, axis_name, scatter_dimension=scatter_dimension,
                     tiled=tiled, size=axis_size(axis_name))


def ppermute(x, axis_name, perm):
    """Entry `dst` gets entry `src`'s x for each (src, dst) in perm; others get zeros."""
    perm = tuple((int(s), int(d)) for s, d in perm)
    _check_perm(perm, axis_size(axis_name))
    return _leafwise(ppermute_p, x, axis_name, perm=perm)


def axis_index(axis_name):
    """This entry's index along the named axis (over all processes under pmap)."""
    return axis_index_p.bind(np.zeros((), np.int32), axes=_names(axis_name))


_anonymous = iter(range(1 << 62))


def pmap(fun, axis_name=None, *, in_axes=0, out_axes=0):
    """Map fun over the local devices (one per process on CPU: the mapped axis has size 1
    locally) of every process of the job; collectives over `axis_name` span all of them
    through MPI (NCCL for CuPy arrays)."""
    name = axis_name if axis_name is not None else f"<pmap {next(_anonymous)}>"
    procs = mpi.world().size if mpi.world().size > 1 else None
    batched = batch_with(fun, in_axes, out_axes, None, name, procs)

    def mapped(*args):
        sizes = {np.shape(leaf)[a] for leaf, a in _mapped_leaves(args, in_axes)}
        if sizes - {1}:
            raise ValueError(
                f"pmap: the mapped axis has size {sorted(sizes)} but this process has 1 "
                "local device (one device per process: give each process its own slice "
                "with a leading axis of size 1, launch more processes with mpiexec)")
        return batched(*args)
    mapped.__name__ = getattr(fun, "__name__", "pmapped")
    mapped.__doc__ = fun.__doc__
    return mapped


def _mapped_leaves(args, in_axes):
    """(leaf, axis) of the arguments mapped along an int axis."""
    axes = in_axes if isinstance(in_axes, (tuple, list)) else [in_axes] * len(args)
    return [(leaf, ax) for a, ax in zip(args, axes) if isinstance(ax, int)
            for leaf in tree_util.tree_leaves(a)]
