"""Creation functions (torch.tensor, zeros, ones, ..., rand, randn), devices and the
global random generator (`manual_seed`)."""
from __future__ import annotations

import builtins

import numpy as np

from ..core import check_dtype
from . import dtypes as D
from .tensor_info import result_type
from .placement import _check_device, _on, device  # noqa: F401  (ft.device)
from .tensor import Tensor, tensor, traced_hooks, wrap  # noqa: F401  (ft.tensor)


# ---------------------------------------------------------------------------
# from data

def as_tensor(data, dtype=None, device=None):
    """Shares memory with a NumPy array or tensor when no conversion is needed."""
    dtype = D.to_dtype(dtype)
    if isinstance(data, Tensor):
        return data if dtype is None or dtype == data.dtype else data.to(dtype)
    if isinstance(data, np.ndarray) and (dtype is None or data.dtype == dtype):
        return from_numpy(data)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(ndarray):
    """A tensor sharing memory with the NumPy array (torch.from_numpy)."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    check_dtype(ndarray.dtype, "from_numpy")
    return wrap(ndarray)


def _size(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    return tuple(builtins.int(s) for s in size)


def _make(arr, requires_grad):
    t = wrap(arr)
    traced_hooks().created(t)      # ft.compile: the function may fill it in place
    return t.requires_grad_(True) if requires_grad else t


def zeros(*size, dtype=None, device=None, requires_grad=False, out=None):
    _check_device(device)
    return _make(_on(wrap(np.zeros(_size(size), D.to_dtype(dtype) or
                                                  D.get_default_dtype())), device)._data,
                 requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False, out=None):
    _check_device(device)
    return _make(_on(wrap(np.ones(_size(size), D.to_dtype(dtype) or
                                                  D.get_default_dtype())), device)._data,
                 requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False, out=None, memory_format=None):
    _check_device(device)
    return _make(_on(wrap(np.zeros(_size(size), D.to_dtype(dtype) or
                                                  D.get_default_dtype())), device)._data,
                 requires_grad)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False):
    """torch.empty_strided: a tensor of the given sizes and strides (in elements) over a fresh
    zeroed buffer (torch leaves it uninitialized)."""
    _check_device(device)
    dt = np.dtype(D.to_dtype(dtype) or D.get_default_dtype())
    size, stride = tuple(size), tuple(stride)
    n = 1 + sum((k - 1) * st for k, st in zip(size, stride)) if all(size) else 0
    arr = np.lib.stride_tricks.as_strided(np.zeros(n, dt), size,
                                          tuple(st * dt.itemsize for st in stride))
    return _make(arr, requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    _check_device(device)
    dtype = D.to_dtype(dtype)
    if dtype is None:
        if isinstance(fill_value, Tensor):
            fill_value = fill_value.item()
        dtype = result_type(fill_value)
    return _make(np.full(tuple(size), fill_value, dtype), requires_grad)


def _like(x, dtype):
    return tuple(x.shape), D.to_dtype(dtype) or x.dtype


def zeros_like(input, dtype=None, device=None, requires_grad=False, memory_format=None):  # noqa: A002
    s, d = _like(input, dtype)
    return _make(np.zeros(s, d), requires_grad)


def ones_like(input, dtype=None, device=None, requires_grad=False, memory_format=None):  # noqa: A002
    s, d = _like(input, dtype)
    return _make(np.ones(s, d), requires_grad)


def empty_like(input, dtype=None, device=None, requires_grad=False, memory_format=None):  # noqa: A002
    return zeros_like(input, dtype=dtype, requires_grad=requires_grad)


def full_like(input, fill_value, dtype=None, device=None, requires_grad=False,  # noqa: A002
              memory_format=None):
    s, d = _like(input, dtype)
    return _make(np.full(s, fill_value, d), requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    _check_device(device)
    if end is None:
        start, end = 0, start
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    dtype = D.to_dtype(dtype) or result_type(*vals)
    if dtype.kind in "iu" and any(isinstance(v, builtins.float) for v in vals):
        dtype = D.get_default_dtype()
    if vals[2] == 0:
        raise RuntimeError("step must be nonzero")
    if (vals[1] - vals[0]) * vals[2] < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    return _make(np.arange(vals[0], vals[1], vals[2]).astype(dtype), requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    _check_device(device)
    return _make(np.linspace(start, end, steps).astype(D.to_dtype(dtype) or
                                                        D.get_default_dtype()), requires_grad)


def logspace(start, end, steps, base=10.0, dtype=None, device=None, requires_grad=False):
    return _make(np.logspace(start, end, steps, base=base).astype(
        D.to_dtype(dtype) or D.get_default_dtype()), requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    _check_device(device)
    return _make(np.eye(n, m, dtype=D.to_dtype(dtype) or D.get_default_dtype()), requires_grad)


# ---------------------------------------------------------------------------
# randomness: one global NumPy generator, reseeded by manual_seed

class Generator:
    """torch.Generator: a NumPy PCG64 stream with manual_seed."""

    def __init__(self, device="cpu"):
        self._g = np.random.default_rng()
        self._seed = None

    def manual_seed(self, seed):
        self._seed = builtins.int(seed)
        self._g = np.random.default_rng(self._seed)
        return self

    def seed(self):
        s = builtins.int(np.random.SeedSequence().entropy % (2 ** 63))
        self.manual_seed(s)
        return s

    def initial_seed(self):
        return self._seed

    def get_state(self):
        return wrap(np.frombuffer(repr(self._g.bit_generator.state).encode(), np.uint8).copy())

    def set_state(self, state):
        import ast
        st = ast.literal_eval(bytes(state._data).decode())
        self._g.bit_generator.state = st

    def __getattr__(self, name):
        return getattr(self._g, name)


default_generator = Generator()
default_generator.manual_seed(0)


def _rng(generator=None):
    """The NumPy Generator behind a facade generator (or the default one); inside an
    ft.compile capture, what stands for it there (draws become program inputs)."""
    g = generator if generator is not None else default_generator
    g = g._g if isinstance(g, Generator) else g
    return traced_hooks().rng(generator, g)


def manual_seed(seed):
    """Seed the global generator (torch.manual_seed); returns it."""
    return default_generator.manual_seed(seed)


def seed():
    return default_generator.seed()


def initial_seed():
    return default_generator.initial_seed()


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    _check_device(device)
    d = D.to_dtype(dtype) or D.get_default_dtype()
    # float32 and narrower drawn as float32 (24 random bits each, as torch's): half the
    # generator's work of float64 draws, and no conversion pass (dropout's masks)
    if np.dtype(d).kind == "f" and np.dtype(d).itemsize <= 4:
        u = _rng(generator).random(_size(size), dtype=np.float32)
        return _make(u if u.dtype == d else u.astype(d), requires_grad)
    return _make(_rng(generator).random(_size(size)).astype(d), requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    _check_device(device)
    d = D.to_dtype(dtype) or D.get_default_dtype()
    return _make(_rng(generator).standard_normal(_size(size)).astype(d), requires_grad)


def randint(low=0, high=None, size=None, *, generator=None, dtype=None, device=None,
            requires_grad=False):
    if high is None:
        low, high = 0, low
    elif size is None and isinstance(high, (tuple, list)):     # randint(high, size)
        low, high, size = 0, low, high
    if size is None:
        raise TypeError("randint() missing required argument 'size'")
    d = D.to_dtype(dtype) or D.int64
    return _make(_rng(generator).integers(low, high, tuple(size)).astype(d), requires_grad)


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    return _make(_rng(generator).permutation(n).astype(D.to_dtype(dtype) or D.int64),
                 requires_grad)


def rand_like(input, dtype=None, requires_grad=False, generator=None):  # noqa: A002
    s, d = _like(input, dtype)
    return _make(_rng(generator).random(s).astype(d), requires_grad)


def randn_like(input, dtype=None, requires_grad=False, generator=None):  # noqa: A002
    s, d = _like(input, dtype)
    return _make(_rng(generator).standard_normal(s).astype(d), requires_grad)


def randint_like(input, low=0, high=None, dtype=None, requires_grad=False):  # noqa: A002
    if high is None:
        low, high = 0, low
    s, d = _like(input, dtype)
    return _make(_rng().integers(low, high, s).astype(d), requires_grad)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, requires_grad=False):
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        m = mean._data if isinstance(mean, Tensor) else mean
        s = std._data if isinstance(std, Tensor) else std
        shape = np.broadcast_shapes(np.shape(m), np.shape(s))
        dt = (mean if isinstance(mean, Tensor) else std).dtype
        return _make((_rng(generator).standard_normal(shape) * s + m).astype(dt), requires_grad)
    d = D.to_dtype(dtype) or D.get_default_dtype()
    return _make((_rng(generator).standard_normal(tuple(size)) * std + mean).astype(d),
                 requires_grad)


def bernoulli(input, p=None, *, generator=None):  # noqa: A002
    prob = input._data if p is None else p
    return wrap((_rng(generator).random(input._data.shape) < prob).astype(input.dtype))


Tensor.bernoulli = bernoulli


def multinomial(input, num_samples, replacement=False, *, generator=None):  # noqa: A002
    probs = np.asarray(input._data, np.float64)
    g = _rng(generator)
    rows = probs.reshape(-1, probs.shape[-1])
    out = []
    for r in rows:
        pr = r / r.sum()
        out.append(g.choice(len(pr), size=num_samples, replace=replacement, p=pr))
    res = np.asarray(out, np.int64)
    return wrap(res.reshape(probs.shape[:-1] + (num_samples,)))
