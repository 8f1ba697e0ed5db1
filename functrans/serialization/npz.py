"""functrans's own checkpoint format: an .npz archive that loading can never execute.

A nested object (dicts, lists, tuples, tensors, arrays, numbers, strings, None) is
flattened: every array becomes one .npz entry and the nesting is a JSON description stored
as a unicode array. Loading reads the zip archive (through `archive.Archive`, which bounds
memory) and each .npy header itself (no np.load, no pickle): an object array, a bare .npy,
a truncated or altered file raises `CheckpointError`, which names the file and what was
wrong. `ft.save(obj, f, format="npz")` writes it; `ft.load` reads it and PyTorch's format.
"""
from __future__ import annotations

import json
import math

import numpy as np
from ..core import SUPPORTED_DTYPES
from ..facade import creation as C
from ..facade.tensor import Tensor
from ..nn.modules.module import Parameter
from .archive import MAX_DEPTH, CheckpointError, cannot_save, read_into, reading

SPEC_KEY = "__functrans_spec__"
FORMAT = "functrans.save/1"


def _encode(obj, arrays, where, depth=0, seen=None):
    """The JSON description of `obj`; its arrays are appended to `arrays`.

    `seen` maps id(tensor) to its entry: a tensor met twice is stored once and loads as one
    tensor (as pickle's memo does for torch.save)."""
    seen = {} if seen is None else seen
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return {"int": int(obj)}
    if isinstance(obj, float):
        return {"float": repr(float(obj))}          # repr keeps nan/inf and every digit
    if isinstance(obj, Tensor):
        if id(obj) not in seen:
            arr = np.asarray(obj.detach().cpu().numpy())
            _check_array(arr, where)
            arrays.append(arr)
            seen[id(obj)] = (len(arrays) - 1, obj)
        return {"tensor": seen[id(obj)][0], "requires_grad": bool(obj.requires_grad),
                "parameter": isinstance(obj, Parameter)}
    if isinstance(obj, (np.ndarray, np.generic)):
        arr = np.asarray(obj)
        _check_array(arr, where)
        arrays.append(arr)
        return {"ndarray": len(arrays) - 1}
    if isinstance(obj, (dict, list, tuple)) and depth >= MAX_DEPTH:
        raise ValueError(f"ft.save: {where} is nested more than {MAX_DEPTH} levels deep "
                         "(dicts, lists and tuples); flatten the object before saving")
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if isinstance(k, bool) or not isinstance(k, (str, int)):
                raise TypeError(f"ft.save: dictionary key {k!r} at {where} is a "
                                f"{type(k).__name__}; only str and int keys can be saved")
            items.append([k if isinstance(k, str) else {"int": k},
                          _encode(v, arrays, f"{where}[{k!r}]", depth + 1, seen)])
        return {"dict": items}
    if isinstance(obj, (list, tuple)):
        kind = "list" if isinstance(obj, list) else "tuple"
        return {kind: [_encode(v, arrays, f"{where}[{i}]", depth + 1, seen)
                       for i, v in enumerate(obj)]}
    raise cannot_save(obj, where, "arrays, ")


def _check_array(arr, where):
    if arr.dtype.hasobject:
        raise TypeError(f"ft.save: the array at {where} has dtype object; object arrays "
                        "would need pickle and are refused")


def entries(obj):
    """The .npz entries (name -> array) that describe `obj`: "a0", "a1", ... and the spec."""
    arrays: list = []
    spec = {"format": FORMAT, "root": _encode(obj, arrays, "obj")}
    out = {f"a{i}": a for i, a in enumerate(arrays)}
    out[SPEC_KEY] = np.array(json.dumps(spec))
    return out


def write(fh, entries):
    """Write the .npz archive of `entries` to the binary file `fh`."""
    np.savez(fh, **entries)


def load(archive, map_location):
    """The object in the .npz `archive` (an archive.Archive); a plain np.savez file loads as
    a dict of tensors."""
    name = archive.name
    arrays = {}
    with reading(name):
        for member in archive.members:
            if not member.endswith(".npy"):
                raise CheckpointError(f"ft.load: {name} is a zip archive but not a "
                                      f"checkpoint: member {member!r} is not a .npy array")
            arrays[member[:-4]] = _read_member(archive, member)
    if SPEC_KEY not in arrays:
        return {k: _tensor(v, name, k) for k, v in arrays.items()}
    spec_arr = arrays.pop(SPEC_KEY)
    if spec_arr.dtype.kind != "U" or spec_arr.ndim != 0:
        raise CheckpointError(f"ft.load: {name} is not a valid checkpoint: its description "
                              f"entry is a {spec_arr.dtype} array of shape {spec_arr.shape}, "
                              "not a string")
    try:
        spec = json.loads(str(spec_arr))
    except (ValueError, RecursionError) as e:
        raise CheckpointError(f"ft.load: {name} is not a valid checkpoint: its description "
                              f"is not readable JSON ({type(e).__name__}: {e})") from None
    if not isinstance(spec, dict) or spec.get("format") != FORMAT or "root" not in spec:
        fmt = spec.get("format") if isinstance(spec, dict) else None
        raise CheckpointError(f"ft.load: {name} has unknown checkpoint format {fmt!r} "
                              f"(this version reads {FORMAT!r})")
    return _Decoder(arrays, map_location, name).decode(spec["root"], 0)


def _read_member(archive, member):
    """One .npy member of the archive, its header checked against the member's size."""
    name, size = archive.name, archive.members[member].file_size
    with archive.open(member) as m:
        version = np.lib.format.read_magic(m)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(m)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(m)
        else:
            raise CheckpointError(f"ft.load: {name}: member {member!r} has .npy format "
                                  f"version {version}, which ft.load does not read")
        if dtype.hasobject:
            raise CheckpointError(f"ft.load: {name}: member {member!r} is an object array; "
                                  "reading it would unpickle (run code), so it is refused")
        count = math.prod(shape)
        nbytes = count * dtype.itemsize
        if m.tell() + nbytes != size:
            raise CheckpointError(f"ft.load: {name} is damaged: member {member!r} declares "
                                  f"{dtype}{list(shape)} ({nbytes} bytes) but holds "
                                  f"{size - m.tell()} bytes of data")
        flat = np.empty(count, dtype)
        read_into(m, flat.view(np.uint8), name, member)
    return flat.reshape(shape[::-1]).T if fortran else flat.reshape(shape)

def _tensor(arr, name, where):
    """A Tensor of the array read from entry `where`, in native byte order."""
    if arr.dtype.newbyteorder("=") not in SUPPORTED_DTYPES:
        raise CheckpointError(f"ft.load: {name}: {where} holds a {arr.dtype} array, which a "
                              "Tensor cannot hold")
    return C.from_numpy(np.asarray(arr, arr.dtype.newbyteorder("=")))


class _Decoder:
    """Rebuilds the saved object from the JSON description, checking every node's form.

    Each array entry becomes at most one Tensor, however often the description refers to it
    (the writer refers to one tensor twice when the object holds it twice): a file cannot
    multiply its memory by repeating a reference."""

    def __init__(self, arrays, map_location, name):
        self.arrays, self.map_location, self.name = arrays, map_location, name
        self.tensors = {}                   # entry index -> (flags, Tensor)

    def fail(self, what):
        raise CheckpointError(f"ft.load: {self.name} is not a valid checkpoint: {what}")

    def array(self, node, key):
        i = node[key]
        if type(i) is not int or f"a{i}" not in self.arrays:
            self.fail(f"{key} entry {i!r} names no array in the file")
        return self.arrays[f"a{i}"]

    def tensor(self, node):
        arr = self.array(node, "tensor")
        i = node["tensor"]
        flags = (bool(node.get("parameter")), bool(node.get("requires_grad", node.get(
            "parameter"))))
        if i in self.tensors:
            if self.tensors[i][0] != flags:
                self.fail(f"tensor {i} is referred to as a Parameter or with requires_grad in "
                          "one place and not in another")
            return self.tensors[i][1]
        t = _tensor(arr, self.name, f"tensor {i}")
        if self.map_location is not None:
            t = t.to(self.map_location)
        if flags[1] and t.dtype.kind not in "fc":
            self.fail(f"tensor {i} of dtype {t.dtype} cannot require grad")
        t = Parameter(t, requires_grad=flags[1]) if flags[0] else t.requires_grad_(flags[1])
        self.tensors[i] = (flags, t)
        return t

    def decode(self, node, depth):
        if node is None or isinstance(node, (bool, str)):
            return node
        if not isinstance(node, dict) or len(node) == 0:
            self.fail(f"unexpected {type(node).__name__} in the description")
        kind = next(iter(node))
        if kind in ("list", "tuple", "dict") and depth >= MAX_DEPTH:
            self.fail(f"the description is nested more than {MAX_DEPTH} levels deep")
        if kind == "int" and type(node["int"]) is int:
            return node["int"]
        if kind == "float" and isinstance(node["float"], str):
            try:
                return float(node["float"])
            except ValueError:
                self.fail(f"{node['float'][:40]!r} is not a float")
        if kind == "tensor":
            return self.tensor(node)
        if kind == "ndarray":
            return self.array(node, "ndarray")
        if kind in ("list", "tuple") and isinstance(node[kind], list):
            items = [self.decode(v, depth + 1) for v in node[kind]]
            return items if kind == "list" else tuple(items)
        if kind == "dict" and isinstance(node["dict"], list):
            out = {}
            for item in node["dict"]:
                if not (isinstance(item, list) and len(item) == 2):
                    self.fail("a dictionary item is not a [key, value] pair")
                out[self.key(item[0])] = self.decode(item[1], depth + 1)
            return out
        self.fail(f"unknown or malformed entry {str(node)[:80]}")

    def key(self, k):
        if isinstance(k, str):
            return k
        if isinstance(k, dict) and list(k) == ["int"] and type(k["int"]) is int:
            return k["int"]
        self.fail(f"dictionary key {str(k)[:80]} is neither a string nor an int")
