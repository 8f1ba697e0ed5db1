"""ft.save's default format: PyTorch's zip archive, which torch.load(weights_only=True) reads.

The pickle (`data.pkl`) is emitted opcode by opcode, as torch.save emits it (protocol 2):
dicts, OrderedDicts (with their `_metadata`), lists, tuples, torch.Size, numbers, strings,
None, and each tensor as a call of torch._utils._rebuild_tensor_v2 (v3 for the unsigned
dtypes that have no legacy storage class) on a storage named by a persistent id. Tensors
that view one array share one storage (the span of bytes they cover); the same tensor met
twice is written once (the pickle's memo). Nothing here pickles: only data is written.
"""
from __future__ import annotations

import inspect
import struct
import sys
import zipfile
from collections import OrderedDict

import numpy as np

from ..facade.tensor import Tensor
from ..facade.tensor_info import Size
from ..nn.modules.module import Module, Parameter
from .archive import MAX_DEPTH, cannot_save
from .torch_read import _STORAGES, plain_class_flaw

# the storage class torch.save writes for each dtype functrans has (the others: _rebuild_v3)
_STORAGE_OF = {np.dtype(v): k + "Storage" for k, v in _STORAGES.items()
               if v in ("float32", "float64", "float16", "int64", "int32", "int16", "int8",
                        "uint8", "bool", "complex64", "complex128")}

_OPS = dict(mark=b"(", stop=b".", tuple=b"t", setitems=b"u", appends=b"e", reduce=b"R",
            build=b"b", persid=b"Q", none=b"N", true=b"\x88", false=b"\x89")


class _Writer:
    """Emits the pickle of an object as torch.save does (protocol 2)."""

    def __init__(self, plan):
        self.out = bytearray(b"\x80\x02")
        self.memo: dict = {}            # id(tensor) or a global's name -> its memo index
        self.plan = plan                # id(tensor) -> (key, storage class, numel, ...)
        self.keep: list = []            # the plain objects memoized by id, kept alive

    def put(self):
        i = len(self.memo)
        self.out += b"q" + bytes([i]) if i < 256 else b"r" + struct.pack("<I", i)
        return i

    def get(self, i):
        self.out += b"h" + bytes([i]) if i < 256 else b"j" + struct.pack("<I", i)

    def glob(self, module, name):
        key = ("global", module, name)
        if key in self.memo:
            self.get(self.memo[key])
        else:
            self.out += b"c" + module.encode() + b"\n" + name.encode() + b"\n"
            self.memo[key] = self.put()

    def scalar(self, v):
        if v is None:
            self.out += _OPS["none"]
        elif v is True or v is False:
            self.out += _OPS["true" if v else "false"]
        elif isinstance(v, int):
            v = int(v)
            if 0 <= v < 256:
                self.out += b"K" + bytes([v])
            elif 0 <= v < 65536:
                self.out += b"M" + struct.pack("<H", v)
            elif -2 ** 31 <= v < 2 ** 31:
                self.out += b"J" + struct.pack("<i", v)
            else:
                data = v.to_bytes((v.bit_length() + 8) // 8, "little", signed=True)
                if len(data) > 255:
                    raise ValueError(f"ft.save: the integer {str(v)[:20]}... has more than "
                                     "2000 bits, which PyTorch's format does not hold")
                self.out += b"\x8a" + bytes([len(data)]) + data
        elif isinstance(v, float):
            self.out += b"G" + struct.pack(">d", v)
        else:
            data = v.encode("utf-8", "surrogatepass")
            self.out += b"X" + struct.pack("<I", len(data)) + data
        return True

    def tuple(self, items, where, depth):
        if len(items) > 3:                  # TUPLE takes the items above a MARK; 0-3: own ops
            self.out += _OPS["mark"]
        for i, v in enumerate(items):
            self.obj(v, f"{where}[{i}]", depth)
        self.out += {0: b")", 1: b"\x85", 2: b"\x86", 3: b"\x87"}.get(len(items), b"t")

    def obj(self, obj, where, depth=0):
        if obj is None or isinstance(obj, (bool, int, float, str)):
            return self.scalar(obj)
        if isinstance(obj, Tensor):
            return self.tensor(obj)
        if isinstance(obj, (np.ndarray, np.generic)):
            raise TypeError(
                f"ft.save: the NumPy value at {where} cannot be written in PyTorch's format "
                "(the default), which torch.load(weights_only=True) reads without NumPy: "
                "convert it (ft.from_numpy(a) for a tensor, a.item() or a.tolist() for "
                "numbers) or save with format='npz', functrans's own format, which keeps "
                "NumPy arrays")
        if isinstance(obj, (set, frozenset)) and type(obj) in (set, frozenset):
            self.glob("builtins", type(obj).__name__)      # as pickle: set(list), REDUCE
            self.obj(sorted(obj, key=repr), where, depth + 1)
            self.out += b"\x85" + _OPS["reduce"]
            return True
        if not isinstance(obj, (dict, list, tuple)):
            if depth >= MAX_DEPTH:
                raise ValueError(f"ft.save: {where} is nested more than {MAX_DEPTH} levels "
                                 "deep; flatten the object before saving")
            return self.named(obj, where) or self.plain(obj, where, depth)
        if depth >= MAX_DEPTH:
            raise ValueError(f"ft.save: {where} is nested more than {MAX_DEPTH} levels deep "
                             "(dicts, lists and tuples); flatten the object before saving")
        if isinstance(obj, Size):
            self.glob("torch", "Size")
            self.tuple(tuple(obj), where, depth + 1)
            self.out += b"\x85" + _OPS["reduce"]
        elif isinstance(obj, tuple):
            self.tuple(obj, where, depth + 1)
        elif isinstance(obj, list):
            self.out += b"]"
            if obj:
                self.out += _OPS["mark"]
                for i, v in enumerate(obj):
                    self.obj(v, f"{where}[{i}]", depth + 1)
                self.out += _OPS["appends"]
        else:
            ordered = isinstance(obj, OrderedDict)
            if ordered:
                self.glob("collections", "OrderedDict")
                self.out += b")" + _OPS["reduce"]
            else:
                self.out += b"}"
            if obj:
                self.out += _OPS["mark"]
                for k, v in obj.items():
                    if not isinstance(k, (str, int, float, type(None), tuple)):
                        raise TypeError(f"ft.save: dictionary key {k!r} at {where} is a "
                                        f"{type(k).__name__}; keys are strings, numbers, "
                                        "None or tuples of them")
                    self.obj(k, where, depth + 1)
                    self.obj(v, f"{where}[{k!r}]", depth + 1)
                self.out += _OPS["setitems"]
            state = vars(obj) if ordered else {}
            if state:                       # torch's state dicts carry `_metadata`
                self.obj(dict(state), f"{where}.__dict__", depth + 1)
                self.out += _OPS["build"]
        return True

    def named(self, obj, where):
        """A module-level function or class, written by name (GLOBAL), as pickle does; False
        for anything else."""
        if not isinstance(obj, type) and not inspect.isfunction(obj):
            return False
        found = _importable(obj)       # (a decorated function: its name finds the original)
        if found is None or found not in (obj, getattr(obj, "__wrapped__", None)):
            raise TypeError(f"ft.save: {obj!r} at {where} cannot be found again by its name "
                            f"{obj.__module__}.{obj.__qualname__} (a local or a lambda); only "
                            "module-level functions and classes are saved, by name")
        self.glob(obj.__module__, obj.__qualname__)
        return True

    def plain(self, obj, where, depth):
        """An instance as a protocol-2 pickle writes a plain object: its class by name, NEWOBJ
        with no arguments, BUILD from its __dict__ (torch.save of a whole module). Only what
        ft.load can rebuild without running the class's code is written: a class found by its
        name, object's __new__ and no __setstate__, __reduce__ or __slots__."""
        key = ("obj", id(obj))
        if key in self.memo:
            return self.get(self.memo[key])
        cls = type(obj)
        if not plain_data(obj) or _importable(cls) is not cls or (
                not isinstance(obj, Module) and callable(getattr(obj, "state_dict", None))):
            raise cannot_save(obj, where, "whole modules and plain objects (attributes only), ")
        self.glob(cls.__module__, cls.__qualname__)
        self.out += b")\x81"                                      # EMPTY_TUPLE, NEWOBJ
        self.memo[key] = self.put()
        self.keep.append(obj)
        state = vars(obj)
        if state:
            self.obj(dict(state), f"{where}.__dict__", depth + 1)
            self.out += _OPS["build"]
        return True

    def tensor(self, t):
        if id(t) in self.memo:
            return self.get(self.memo[id(t)])
        key, storage, numel, offset, size, stride, dtype = self.plan[id(t)]
        if isinstance(t, Parameter):
            self.glob("torch._utils", "_rebuild_parameter")
        v3 = storage is None
        self.glob("torch._utils", "_rebuild_tensor_v3" if v3 else "_rebuild_tensor_v2")
        self.out += _OPS["mark"] + _OPS["mark"]
        self.scalar("storage")
        self.glob(*(("torch.storage", "UntypedStorage") if v3 else ("torch", storage)))
        self.scalar(key)
        self.scalar("cpu")
        self.scalar(numel)
        self.out += _OPS["tuple"] + _OPS["persid"]
        self.scalar(offset)
        self.tuple(size, "", 0)
        self.tuple(stride, "", 0)
        self.scalar(bool(t.requires_grad) and not isinstance(t, Parameter))
        self.glob("collections", "OrderedDict")
        self.out += b")" + _OPS["reduce"]
        if v3:
            self.glob("torch", dtype.name)
        self.out += _OPS["tuple"] + _OPS["reduce"]
        if isinstance(t, Parameter):
            self.scalar(bool(t.requires_grad))
            self.glob("collections", "OrderedDict")
            self.out += b")" + _OPS["reduce"] + b"\x87" + _OPS["reduce"]
        self.memo[id(t)] = self.put()       # the plan keeps t alive: its id stays its own
        return True


def encode(obj):
    """(pickle bytes, [(key, uint8 array)]) for `obj`: everything ft.save checks before it
    opens a file. Tensors that share memory share one storage in the file."""
    tensors: dict = {}
    _tensors_in(obj, tensors, 0)
    plan, storages = _plan(tensors)
    w = _Writer(plan)
    w.obj(obj, "obj")
    w.out += _OPS["stop"]
    return bytes(w.out), storages


def _tensors_in(obj, out, depth, seen=None):
    seen = set() if seen is None else seen
    if isinstance(obj, Tensor):
        out.setdefault(id(obj), obj)
    elif depth >= MAX_DEPTH or id(obj) in seen:
        return
    elif isinstance(obj, (dict, list, tuple, set, frozenset)) or plain_data(obj):
        seen.add(id(obj))           # (obj is alive throughout: its id stays its own)
        if isinstance(obj, (list, tuple, set, frozenset)):
            items = list(obj)
        else:
            items = list(obj.values()) if isinstance(obj, dict) else []
            if type(obj) is OrderedDict or not isinstance(obj, dict):
                items += list(vars(obj).values())
        for v in items:
            _tensors_in(v, out, depth + 1, seen)


def plain_data(obj):
    """True for an instance that a pickle stores as its class and __dict__ alone, and that
    ft.load rebuilds without running its class's code (torch_read's rule, shared)."""
    cls = type(obj)
    return (not isinstance(obj, type) and hasattr(obj, "__dict__") and not callable(obj)
            or isinstance(obj, Module)) and not plain_class_flaw(cls)


def _importable(obj):
    """What obj's module-level name finds (None when nothing or something else)."""
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    found = module
    for part in getattr(obj, "__qualname__", "<>").split("."):
        found = getattr(found, part, None)
    return found


def _host(t):
    arr = t.detach().cpu().numpy()
    return arr if arr.dtype.isnative else arr.astype(arr.dtype.newbyteorder("="))


def _root(arr):
    """The array that owns `arr`'s memory (None where that is not a contiguous array)."""
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr if arr.flags.c_contiguous or arr.flags.f_contiguous else None


def _plan(tensors):
    """Where each tensor lies in which storage. Tensors viewing one array with the same dtype
    share one storage (the span of bytes they cover), as torch.save keeps views of one
    storage together; any other tensor gets a contiguous storage of its own."""
    groups: dict = {}
    for t in tensors.values():
        arr = _host(t)
        root = _root(arr) if arr.size else None       # an empty tensor shares nothing
        groups.setdefault(id(root) if root is not None else id(arr), (root, []))[1].append(
            (t, arr))
    plan, storages = {}, []
    for root, members in groups.values():
        layout = _shared_layout(root, [a for _, a in members]) if len(members) > 1 else None
        if layout is not None:
            data, offsets = layout
            key = str(len(storages))
            storages.append((key, data))
            for (t, arr), off in zip(members, offsets):
                plan[id(t)] = _entry(key, arr, data.size // arr.itemsize, off,
                                     tuple(s // arr.itemsize for s in arr.strides))
            continue
        for t, arr in members:
            flat = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
            key = str(len(storages))
            storages.append((key, flat))
            plan[id(t)] = _entry(key, arr, arr.size, 0, _contiguous_strides(arr.shape))
    return plan, storages


def _entry(key, arr, numel, offset, stride):
    storage = _STORAGE_OF.get(arr.dtype)
    if storage is None:                 # uint16/32/64: an untyped storage counted in bytes
        numel *= arr.itemsize
    return key, storage, numel, offset, arr.shape, stride, arr.dtype


def _shared_layout(root, arrays):
    """(bytes of the span the arrays cover, each array's element offset in it), or None
    where they cannot share one storage (mixed dtypes, negative or odd strides)."""
    dtype = arrays[0].dtype
    if root is None or any(a.dtype != dtype or a.size == 0 or min(a.strides, default=0) < 0
                           or any(s % dtype.itemsize for s in a.strides) for a in arrays):
        return None
    base = root.__array_interface__["data"][0]
    starts = [a.__array_interface__["data"][0] - base for a in arrays]
    ends = [s + sum((n - 1) * st for n, st in zip(a.shape, a.strides)) + dtype.itemsize
            for s, a in zip(starts, arrays)]
    lo, hi = min(starts), max(ends)
    if any((s - lo) % dtype.itemsize for s in starts) or lo < 0 or hi > root.nbytes:
        return None
    data = np.ndarray((hi - lo,), np.uint8, buffer=root, offset=lo)
    return data, [(s - lo) // dtype.itemsize for s in starts]


def _contiguous_strides(shape):
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= max(n, 1)
    return tuple(reversed(out))


def write(fh, encoded):
    """Write the archive torch.save writes: data.pkl, the storages (each aligned to 64
    bytes, as torch aligns them for mmap), byteorder and version."""
    code, storages = encoded
    with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as z:
        _put(z, "archive/data.pkl", code)
        _put(z, "archive/.format_version", b"1")
        _put(z, "archive/.storage_alignment", b"64")
        _put(z, "archive/byteorder", sys.byteorder.encode())
        for key, data in storages:
            _put(z, f"archive/data/{key}", data)
        _put(z, "archive/version", b"3\n")


def _put(z, name, data):
    size = len(data) if isinstance(data, bytes) else data.nbytes
    info = zipfile.ZipInfo(name)
    info.file_size = size
    zip64 = size * 1.05 > zipfile.ZIP64_LIMIT
    start = z.fp.tell() + 30 + len(name) + 4 + (20 if zip64 else 0)
    pad = -start % 64
    info.extra = struct.pack("<HH", 0x4246, pad) + b"Z" * pad      # "FB": torch's padding
    with z.open(info, "w") as dest:
        dest.write(data if isinstance(data, bytes) else memoryview(data))
