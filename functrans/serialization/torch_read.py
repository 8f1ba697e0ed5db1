"""PyTorch's checkpoint format (torch.save's zip archive), read without pickle.

A torch.save file is a zip archive under one folder (`archive/`, or the file's stem):
`data.pkl` pickles the object; each tensor storage is a member `data/<key>` of raw bytes,
named from the pickle by a persistent id ('storage', StorageClass, key, location, numel);
`byteorder` says how those bytes are ordered.

Reading: `data.pkl` runs on a small pickle machine of our own (`_Reader`). It knows the
opcodes torch.save emits (protocol 2, and protocol 4's framing, memo and STACK_GLOBAL) and
resolves each GLOBAL against a fixed table (`_GLOBALS`) of what tensors, state dicts and
optimizer state need: tensor and Parameter rebuilders, storage classes, dtypes, torch.Size
and collections.OrderedDict, the globals torch.load(weights_only=True) allows for them.
Each entry is functrans's own rebuilder: the machine never imports a module or calls a
function the file names, so a file cannot run code; any other global is refused, named.
Classes passed to `add_safe_globals` are rebuilt as plain data (a new instance and its
saved attributes), without running their code.

Memory: each storage member is read once, however many tensors refer to it, and tensors
are views of it (as in torch, tensors saved sharing a storage load sharing it). A tensor
whose elements would overlap (an expanded one) is refused: a view of it is not writable
element by element, and a copy would be as large as the file says, not as the file is.

torch_write.py writes the same format.
"""
from __future__ import annotations

import math
import struct
import sys
from collections import OrderedDict

import numpy as np

from ..core import SUPPORTED_DTYPES
from ..facade import creation as C
from ..facade.tensor import Tensor
from ..facade.tensor_info import Size
from ..nn.modules.module import Parameter
from .archive import MAX_DEPTH, CheckpointError, reading

# ---------------------------------------------------------------- names in the file

# torch's dtypes (GLOBAL torch.<name>) and legacy storage classes (torch.<Name>Storage)
_DTYPES = ["float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64",
           "uint8", "uint16", "uint32", "uint64", "bool", "complex32", "complex64",
           "complex128", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
           "float8_e8m0fnu", "float4_e2m1fn_x2", "qint8", "quint8", "qint32", "quint4x2",
           "quint2x4"]
_STORAGES = {"Float": "float32", "Double": "float64", "Half": "float16",
             "BFloat16": "bfloat16", "Long": "int64", "Int": "int32", "Short": "int16",
             "Char": "int8", "Byte": "uint8", "Bool": "bool", "ComplexFloat": "complex64",
             "ComplexDouble": "complex128", "ComplexHalf": "complex32", "QInt8": "qint8",
             "QUInt8": "quint8", "QInt32": "qint32", "QUInt4x2": "quint4x2",
             "QUInt2x4": "quint2x4"}



def _dtype(name, file):
    """The NumPy dtype of torch dtype `name`; a clear refusal where functrans has none."""
    dt = np.dtype(name) if name in ("float16", "float32", "float64", "int8", "int16", "int32",
                                    "int64", "uint8", "uint16", "uint32", "uint64", "bool",
                                    "complex64", "complex128") else None
    if dt is None or dt not in SUPPORTED_DTYPES:
        raise CheckpointError(
            f"ft.load: {file} holds torch.{name} tensors, and functrans has no {name} dtype. "
            "Convert them in PyTorch before saving, e.g. "
            "{k: v.float() if v.dtype == torch." + name + " else v for k, v in sd.items()}")
    return dt


class _StorageType:
    """A storage class named by the file; dtype None for UntypedStorage (bytes)."""

    def __init__(self, dtype):
        self.dtype = dtype


class _Call:
    """A global the file may call with REDUCE: one of this module's rebuilders."""

    def __init__(self, name, fn):
        self.name, self.fn = name, fn


class _PlainClass:
    """A class the user allowlisted: rebuilt by NEWOBJ and BUILD as plain data."""

    def __init__(self, cls):
        self.cls = cls


# ---------------------------------------------------------------- safe globals

_SAFE_GLOBALS: set = set()


def add_safe_globals(safe_globals: list) -> None:
    """Allow the given classes in checkpoints ft.load reads (torch's signature).

    Entries are classes, or (class, "module.Name") pairs for a class saved under another
    name. ft.load rebuilds an allowed class only as plain data: a new instance (the class's
    __new__ must be object's) whose __dict__ receives the saved attributes; its __init__,
    __setstate__ or any other code of it never runs, and a function is never called even
    when listed (loading stays free of code execution)."""
    for entry in safe_globals:
        if isinstance(entry, tuple):
            if len(entry) != 2:
                raise ValueError("Expected tuple of length 2 (global, str of callable full "
                                 f"path), but got tuple of length: {len(entry)}")
            if type(entry[1]) is not str:
                raise TypeError("Expected second item in tuple to be str of callable full "
                                f"path, but got: {type(entry[1])}")
        elif not callable(entry):
            raise TypeError(f"add_safe_globals: expected classes or (class, name) tuples, got "
                            f"{type(entry).__name__}")
    _SAFE_GLOBALS.update(safe_globals)


def get_safe_globals() -> list:
    """The classes (or (class, name) pairs) added by add_safe_globals."""
    return list(_SAFE_GLOBALS)


def clear_safe_globals() -> None:
    """Forget every class added by add_safe_globals."""
    _SAFE_GLOBALS.clear()


class safe_globals:
    """Context manager: the given classes are allowed inside the block (torch's
    torch.serialization.safe_globals)."""

    def __init__(self, safe_globals: list):
        self.safe_globals = safe_globals

    def __enter__(self):
        add_safe_globals(self.safe_globals)

    def __exit__(self, *exc):
        _SAFE_GLOBALS.difference_update(self.safe_globals)


def plain_class_flaw(cls):
    """Why instances of cls cannot be rebuilt as plain data (a new instance by object's
    __new__ and its saved __dict__), or None when they can."""
    return ("its __new__ is its own" if cls.__new__ is not object.__new__ else
            "it defines __setstate__" if hasattr(cls, "__setstate__") else
            "it defines __reduce__" if cls.__reduce__ is not object.__reduce__ or
            cls.__reduce_ex__ is not object.__reduce_ex__ else
            "its instances have no __dict__ (__slots__)" if not hasattr(
                object.__new__(cls), "__dict__") else None)


def _user_global(full):
    for entry in _SAFE_GLOBALS:
        obj, name = entry if isinstance(entry, tuple) else (
            entry, f"{getattr(entry, '__module__', '')}.{getattr(entry, '__qualname__', '')}")
        if name == full:
            return obj
    return None


# ---------------------------------------------------------------- reading

def folder(archive):
    """The folder ("archive/") holding data.pkl if `archive` is torch.save's format, else None."""
    for member in archive.members:
        head, sep, tail = member.partition("/")
        if sep and tail == "data.pkl":
            return head + "/"
    return None


def load(archive, map_location):
    """The object in the torch.save archive (an archive.Archive)."""
    prefix = folder(archive)
    with reading(archive.name):
        order = b"little"
        if prefix + "byteorder" in archive.members:
            order = archive.read(prefix + "byteorder").tobytes()
        if order not in (b"little", b"big"):
            raise CheckpointError(f"ft.load: {archive.name} is damaged: its byteorder record "
                                  f"says {order[:20]!r}, not 'little' or 'big'")
        code = archive.read(prefix + "data.pkl").tobytes()
        reader = _Reader(code, archive, prefix, order.decode(), map_location)
        try:
            obj = reader.run()
        except _UserError as e:
            raise e.error from None
    _check_tree(obj, archive.name)
    return obj


class _UserError(Exception):
    """An error of the caller's (a bad map_location), passed through the reader unchanged."""

    def __init__(self, error):
        self.error = error


class _Reader:
    """Runs data.pkl's opcodes on a stack, resolving globals through `_GLOBALS` only."""

    def __init__(self, code, archive, prefix, byteorder, map_location):
        self.code, self.pos = code, 0
        self.archive, self.prefix, self.byteorder = archive, prefix, byteorder
        self.map_location = map_location
        self.file = archive.name
        self.storages = {}              # key -> the member's bytes (uint8), read once
        self.typed = {}                 # (key, dtype) -> the bytes as a native-order array
        self.plain = set()              # ids of instances of allowlisted classes

    def fail(self, what):
        raise CheckpointError(f"ft.load: {self.file}: {self.prefix}data.pkl {what}")

    def take(self, n):
        end = self.pos + n
        if end > len(self.code):
            self.fail("is truncated (an instruction runs past its end)")
        out = self.code[self.pos:end]
        self.pos = end
        return out

    def line(self):
        end = self.code.find(b"\n", self.pos, self.pos + 1024)
        if end < 0:
            self.fail("is damaged (a GLOBAL name has no end)")
        out = self.code[self.pos:end].decode("utf-8")
        self.pos = end + 1
        return out

    def run(self):
        stack: list = []
        marks: list = []
        memo: dict = {}
        take, push = self.take, stack.append
        while True:
            op = take(1)
            if op == b"\x80":                               # PROTO
                if take(1)[0] > 5:
                    self.fail("uses a pickle protocol above 5")
            elif op == b"\x95":                             # FRAME (a length hint)
                take(8)
            elif op == b".":                                # STOP
                return stack.pop()
            elif op == b"(":                                # MARK
                marks.append(stack)
                stack = []
                push = stack.append
            elif op in b"}])" and len(op) == 1:             # EMPTY_DICT/LIST/TUPLE
                push({} if op == b"}" else [] if op == b"]" else ())
            elif op == b"t":                                # TUPLE
                items, stack = tuple(stack), marks.pop()
                push = stack.append
                push(items)
            elif op in (b"\x85", b"\x86", b"\x87"):         # TUPLE1/2/3
                n = op[0] - 0x84
                if len(stack) < n:
                    self.fail("is damaged (a tuple of more items than the stack holds)")
                stack[-n:] = [tuple(stack[-n:])]
            elif op in (b"s", b"u"):                        # SETITEM(S)
                if op == b"s":
                    items = stack[-2:]
                    del stack[-2:]
                else:
                    items, stack = stack, marks.pop()
                    push = stack.append
                target = stack[-1]
                if type(target) not in (dict, OrderedDict) or len(items) % 2:
                    self.fail(f"sets items on a {type(target).__name__}")
                for i in range(0, len(items), 2):
                    target[items[i]] = items[i + 1]
            elif op in (b"a", b"e"):                        # APPEND(S)
                if op == b"a":
                    items = [stack.pop()]
                else:
                    items, stack = stack, marks.pop()
                    push = stack.append
                if type(stack[-1]) is not list:
                    self.fail(f"appends to a {type(stack[-1]).__name__}")
                stack[-1].extend(items)
            elif op == b"q":                                # BINPUT
                memo[take(1)[0]] = stack[-1]
            elif op == b"r":                                # LONG_BINPUT
                memo[struct.unpack("<I", take(4))[0]] = stack[-1]
            elif op == b"\x94":                             # MEMOIZE
                memo[len(memo)] = stack[-1]
            elif op in (b"h", b"j"):                        # BINGET, LONG_BINGET
                i = take(1)[0] if op == b"h" else struct.unpack("<I", take(4))[0]
                if i not in memo:
                    self.fail(f"is damaged (it refers to memo entry {i}, never stored)")
                push(memo[i])
            elif op == b"J":                                # BININT
                push(struct.unpack("<i", take(4))[0])
            elif op == b"K":                                # BININT1
                push(take(1)[0])
            elif op == b"M":                                # BININT2
                push(struct.unpack("<H", take(2))[0])
            elif op == b"\x8a":                             # LONG1
                push(int.from_bytes(take(take(1)[0]), "little", signed=True))
            elif op == b"G":                                # BINFLOAT
                push(struct.unpack(">d", take(8))[0])
            elif op in (b"X", b"\x8c"):                     # BINUNICODE, SHORT_BINUNICODE
                n = struct.unpack("<I", take(4))[0] if op == b"X" else take(1)[0]
                push(str(take(n), "utf-8", "surrogatepass"))
            elif op == b"N":
                push(None)
            elif op in (b"\x88", b"\x89"):                  # NEWTRUE, NEWFALSE
                push(op == b"\x88")
            elif op == b"c":                                # GLOBAL
                module = self.line()
                push(self.resolve(module, self.line()))
            elif op == b"\x93":                             # STACK_GLOBAL
                name, module = stack.pop(), stack.pop()
                if not (isinstance(module, str) and isinstance(name, str)):
                    self.fail("is damaged (STACK_GLOBAL of a non-string)")
                push(self.resolve(module, name))
            elif op == b"R":                                # REDUCE
                args, fn = stack.pop(), stack[-1]
                if not isinstance(fn, _Call) or type(args) is not tuple:
                    self.fail(f"calls {_describe(fn)}, which ft.load does not call" + (
                        "; ft.load never calls a function named by a file, even one passed "
                        "to add_safe_globals" if callable(fn) else ""))
                stack[-1] = fn.fn(self, *args) if fn.name.startswith("torch._utils.") \
                    else fn.fn(*args)
            elif op == b"\x81":                             # NEWOBJ
                args, cls = stack.pop(), stack.pop()
                if not isinstance(cls, _PlainClass) or args != ():
                    self.fail(f"creates {_describe(cls)} with arguments {_describe(args)}; "
                              "ft.load creates only allowlisted classes, without arguments")
                obj = object.__new__(cls.cls)
                self.plain.add(id(obj))
                push(obj)
            elif op == b"b":                                # BUILD
                state, obj = stack.pop(), stack[-1]
                if not (type(obj) is OrderedDict or id(obj) in self.plain):
                    self.fail(f"sets the state of a {type(obj).__name__}")
                if type(state) is not dict or not all(type(k) is str for k in state):
                    self.fail(f"sets the state of a {type(obj).__name__} from "
                              f"{_describe(state)}, not from a dict of attributes")
                vars(obj).update(state)
            elif op == b"Q":                                # BINPERSID
                push(self.storage(stack.pop()))
            else:
                self.fail(f"uses the pickle opcode {op!r} at byte {self.pos - 1}, which "
                          "ft.load does not run (it reads what torch.save writes)")

    def resolve(self, module, name):
        module = {"__builtin__": "builtins", "copy_reg": "copyreg"}.get(module, module)
        full = f"{module}.{name}"
        if full in _GLOBALS:
            return _GLOBALS[full]
        if module == "torch" and name.endswith("Storage") and name[:-7] in _STORAGES:
            return _StorageType(_dtype(_STORAGES[name[:-7]], self.file))
        if module == "torch" and name in _DTYPES:
            return _dtype(name, self.file)
        obj = _user_global(full)
        if isinstance(obj, type):
            bad = plain_class_flaw(obj)
            if bad is None:
                return _PlainClass(obj)
            self.fail(f"names the allowlisted class {full}, but {bad}: ft.load rebuilds "
                      "allowlisted classes only as plain data (a new instance and its saved "
                      "attributes), without running their code")
        if obj is not None:
            # an allowlisted function is a value (a module's `activation = F.relu`); REDUCE
            # accepts only this module's rebuilders, so it is never called
            return obj
        hint = (" (a TorchScript archive, from torch.jit.save: read it with torch.jit.load)"
                if any(m.startswith(self.prefix + "code/") for m in self.archive.members)
                else "")
        self.fail(f"names the global {full}{hint}, which ft.load does not allow: loading "
                  "rebuilds tensors, state dicts and optimizer state and never imports or "
                  "calls what a file names (that is how a pickle runs code). If it is a "
                  "plain data class you trust (not a function), allow it with "
                  f"ft.serialization.add_safe_globals([{name}])")

    def storage(self, pid):
        """The storage a persistent id names, read once per key: (bytes, dtype or None)."""
        if not (type(pid) is tuple and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType) and type(pid[2]) is str
                and type(pid[4]) is int and pid[4] >= 0):
            self.fail(f"names a persistent object {_describe(pid)}, not a storage")
        _, kind, key, _location, numel = pid
        nbytes = numel * (kind.dtype.itemsize if kind.dtype is not None else 1)
        member = f"{self.prefix}data/{key}"
        if key not in self.storages:
            if member not in self.archive.members:
                self.fail(f"names storage {key!r}, but the archive has no member {member!r}")
            self.storages[key] = self.archive.read(member)
        if self.storages[key].size != nbytes:
            self.fail(f"says storage {key!r} holds {nbytes} bytes, but member {member!r} "
                      f"holds {self.storages[key].size}")
        return key, kind.dtype

    def flat(self, storage, dtype):
        """The storage's bytes as a 1-d array of `dtype` in native order (one per dtype)."""
        key, stored = storage
        if (key, dtype) not in self.typed:
            raw = self.storages[key]
            if raw.size % dtype.itemsize:
                self.fail(f"views storage {key!r} ({raw.size} bytes) as {dtype}")
            arr = raw.view(dtype)
            if self.byteorder != sys.byteorder and dtype.itemsize > 1:
                arr = arr.byteswap().view(dtype)
            self.typed[key, dtype] = arr
        return self.typed[key, dtype]

    def tensor(self, storage, offset, size, stride, requires_grad=False, hooks=None,
               dtype=None, metadata=None):
        """The tensor that views `storage` from `offset` with `size` and `stride`."""
        if not (type(storage) is tuple and len(storage) == 2):
            self.fail(f"rebuilds a tensor from {_describe(storage)}, not from a storage")
        dtype = storage[1] if dtype is None else dtype
        if not isinstance(dtype, np.dtype) or (storage[1] is not None and storage[1] != dtype):
            self.fail(f"rebuilds a tensor of dtype {_describe(dtype)} from a storage of "
                      f"{storage[1]}")
        ints = (type(offset) is int and offset >= 0 and isinstance(size, tuple)
                and isinstance(stride, tuple) and len(size) == len(stride)
                and all(type(n) is int and n >= 0 for n in size)
                and all(type(s) is int and s >= 0 for s in stride))
        if not ints or type(requires_grad) is not bool:
            self.fail(f"rebuilds a tensor with offset {_describe(offset)}, size "
                      f"{_describe(size)}, stride {_describe(stride)}")
        if hooks or metadata:
            self.fail("rebuilds a tensor with backward hooks or metadata, which ft.load "
                      "does not restore")
        flat = self.flat(storage, dtype)
        where = f"a tensor of size {list(size)}, stride {list(stride)} at offset {offset}"
        if math.prod(size) == 0:
            arr = np.empty(size, dtype)
        else:
            last = offset + sum((n - 1) * s for n, s in zip(size, stride))
            if last >= flat.size:
                self.fail(f"rebuilds {where}, past the end of its storage of {flat.size} "
                          "elements")
            span = 0
            for s, n in sorted((s, n) for n, s in zip(size, stride) if n > 1):
                if s <= span:
                    self.fail(f"rebuilds {where}, whose elements overlap (an expanded "
                              "tensor); ft.load loads tensors of distinct elements only: "
                              "call .contiguous() on it before torch.save")
                span += (n - 1) * s
            arr = np.ndarray(size, dtype, buffer=flat, offset=offset * dtype.itemsize,
                             strides=tuple(s * dtype.itemsize for s in stride))
        t = C.from_numpy(arr)
        if self.map_location is not None:
            try:
                t = t.to(self.map_location)
            except Exception as e:
                raise _UserError(e) from None
        if requires_grad and dtype.kind not in "fc":
            self.fail(f"rebuilds {where} of dtype {dtype} that requires grad")
        return t.requires_grad_(requires_grad)

    def tensor_v3(self, storage, offset, size, stride, requires_grad, hooks, dtype,
                  metadata=None):
        return self.tensor(storage, offset, size, stride, requires_grad, hooks, dtype, metadata)

    def parameter(self, data, requires_grad, hooks, state=None):
        if type(data) is not Tensor or type(requires_grad) is not bool or hooks or state:
            self.fail("rebuilds a Parameter from something other than a tensor, a flag and "
                      "no hooks or state")
        return Parameter(data, requires_grad)


def _ordered_dict(*args):
    if args not in ((), ([],)):
        raise CheckpointError("ft.load: collections.OrderedDict is called with items; "
                              "torch.save writes them with SETITEMS")
    return OrderedDict()


def _set(items=()):
    if type(items) is not list:
        raise CheckpointError(f"ft.load: builtins.set of {_describe(items)}, not of a list")
    return set(items)


def _frozenset(items=()):
    return frozenset(_set(items))


def _size(dims=()):
    if not (isinstance(dims, tuple) and all(type(n) is int for n in dims)):
        raise CheckpointError(f"ft.load: torch.Size of {_describe(dims)}, not of ints")
    return Size(dims)


_GLOBALS = {
    "builtins.set": _Call("builtins.set", _set),
    "builtins.frozenset": _Call("builtins.frozenset", _frozenset),
    "collections.OrderedDict": _Call("collections.OrderedDict", _ordered_dict),
    "torch.Size": _Call("torch.Size", _size),
    "torch._utils._rebuild_tensor": _Call("torch._utils._rebuild_tensor", _Reader.tensor),
    "torch._utils._rebuild_tensor_v2": _Call("torch._utils._rebuild_tensor_v2", _Reader.tensor),
    "torch._utils._rebuild_tensor_v3": _Call("torch._utils._rebuild_tensor_v3",
                                             _Reader.tensor_v3),
    "torch._utils._rebuild_parameter": _Call("torch._utils._rebuild_parameter",
                                             _Reader.parameter),
    "torch._utils._rebuild_parameter_with_state": _Call(
        "torch._utils._rebuild_parameter_with_state", _Reader.parameter),
    "torch.storage.UntypedStorage": _StorageType(None),
    "torch.UntypedStorage": _StorageType(None),
}


def _describe(value):
    text = repr(value) if not isinstance(value, (_Call, _StorageType, _PlainClass)) else (
        getattr(value, "name", type(value).__name__))
    return text if len(text) <= 60 else text[:57] + "..."


def _check_tree(root, file):
    """Refuse a result nested deeper than MAX_DEPTH or holding itself (a pickle can build
    both; neither is a checkpoint, and either breaks code that walks it)."""
    depth: dict = {}
    path: set = set()
    todo = [(root, False)]
    while todo:
        obj, done = todo.pop()
        kids = _children(obj)
        if kids is None or (not done and id(obj) in depth):
            continue
        if done:
            path.discard(id(obj))
            depth[id(obj)] = d = 1 + max((depth.get(id(k), 0) for k in kids), default=0)
            if d > MAX_DEPTH:
                raise CheckpointError(f"ft.load: {file}: the object is nested more than "
                                      f"{MAX_DEPTH} levels deep")
            continue
        if id(obj) in path:
            raise CheckpointError(f"ft.load: {file}: the object contains itself")
        path.add(id(obj))
        todo.append((obj, True))
        todo.extend((k, False) for k in kids)


def _children(obj):
    if isinstance(obj, dict):
        return [*obj.keys(), *obj.values(), *vars(obj).values()] if type(obj) is OrderedDict \
            else [*obj.keys(), *obj.values()]
    if isinstance(obj, (list, tuple)):
        return obj
    if not isinstance(obj, (Tensor, str, int, float, np.dtype)) and obj is not None \
            and hasattr(obj, "__dict__"):
        return list(vars(obj).values())
    return None
