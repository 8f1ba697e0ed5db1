"""ft.save / ft.load: state dicts as .npz files that loading can never execute.

torch.save pickles, so loading a file runs whatever code it names. Here a nested
object (dicts, lists, tuples, tensors, arrays, numbers, strings, None) is
flattened: every array becomes one .npz entry and the nesting is a JSON
description stored as a unicode array. Loading reads the zip archive and each
.npy header itself (no np.load, no pickle): an object array, a bare .npy, a
pickle, a truncated or altered file raises `CheckpointError`, which names the file
and what was wrong. Saving to a path is atomic: the data goes to a temporary file
in the same directory, is flushed to disk and then renamed over the target, so a
failed save leaves the previous file as it was (docs/reliability.md).
"""
from __future__ import annotations

import json
import math
import os
import stat
import struct
import uuid
import zipfile
import zlib
from typing import IO, Any

import numpy as np
from .core import SUPPORTED_DTYPES, FunctransError
from .facade import creation as C
from .facade.tensor import Tensor
from .nn.modules.module import Parameter

_LZMA_ERRORS: tuple = ()                # zipfile reads LZMA members only where lzma is built
try:
    from lzma import LZMAError
    _LZMA_ERRORS = (LZMAError,)
except ImportError:                     # pragma: no cover - Python built without lzma
    pass

_SPEC_KEY = "__functrans_spec__"
_FORMAT = "functrans.save/1"
MAX_DEPTH = 100                         # nesting of dicts/lists/tuples that save and load accept

# what reading a damaged or foreign file can raise inside zipfile, zlib and the .npy
# header parser; each becomes a CheckpointError naming the file (RecursionError is a
# RuntimeError: JSON nested too deep)
_READ_ERRORS = (zipfile.BadZipFile, zlib.error, struct.error, EOFError, OSError, ValueError,
                TypeError, KeyError, NotImplementedError, RuntimeError, OverflowError,
                MemoryError, SyntaxError) + _LZMA_ERRORS


class CheckpointError(FunctransError, ValueError):
    """ft.load was given something that is not an intact checkpoint (damaged, truncated, foreign)."""


def _encode(obj, arrays, where, depth=0):
    """The JSON description of `obj`; its arrays are appended to `arrays`."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return {"int": int(obj)}
    if isinstance(obj, float):
        return {"float": repr(float(obj))}          # repr keeps nan/inf and every digit
    if isinstance(obj, Tensor):
        arr = np.asarray(obj.detach().cpu().numpy())
        _check_array(arr, where)
        arrays.append(arr)
        return {"tensor": len(arrays) - 1, "requires_grad": bool(obj.requires_grad),
                "parameter": type(obj).__name__ == "Parameter"}
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
                          _encode(v, arrays, f"{where}[{k!r}]", depth + 1)])
        return {"dict": items}
    if isinstance(obj, (list, tuple)):
        kind = "list" if isinstance(obj, list) else "tuple"
        return {kind: [_encode(v, arrays, f"{where}[{i}]", depth + 1)
                       for i, v in enumerate(obj)]}
    raise TypeError(f"ft.save: cannot save {type(obj).__name__} at {where}; only tensors, "
                    "arrays, numbers, strings, None and dicts/lists/tuples of them are "
                    "saved (nothing is pickled)")


def _check_array(arr, where):
    if arr.dtype.hasobject:
        raise TypeError(f"ft.save: the array at {where} has dtype object; object arrays "
                        "would need pickle and are refused")


def save(obj: Any, f: str | os.PathLike | IO[bytes]) -> None:
    """Write `obj` (a state dict or any nesting of tensors, numbers, strings) to `f` as .npz.

    `f` is a path (written exactly as given, without adding ".npz"; atomically: the previous
    file survives a failed save) or a binary file object.
    """
    arrays: list = []
    spec = {"format": _FORMAT, "root": _encode(obj, arrays, "obj")}
    entries = {f"a{i}": a for i, a in enumerate(arrays)}
    entries[_SPEC_KEY] = np.array(json.dumps(spec))
    if isinstance(f, (str, os.PathLike)):
        _write_atomically(os.fspath(f), lambda fh: np.savez(fh, **entries))
    else:
        np.savez(f, **entries)


def _write_atomically(path, write):
    """Run write(file) on a new file beside `path`, fsync it, then rename it over `path`.

    The rename is atomic (os.replace), so `path` holds either its old or its new contents,
    whatever fails (disk full, an exception, Ctrl-C); the temporary file is removed on failure.
    A symlink is followed (its target is replaced), and an existing file keeps its mode. A
    target that is not a regular file (/dev/null, a pipe) is written in place: it cannot be
    replaced, and holds no checkpoint to lose.
    """
    target = os.path.realpath(path)
    if os.path.exists(target) and not stat.S_ISREG(os.stat(target).st_mode):
        with open(target, "wb") as fh:
            write(fh)
        return
    directory, name = os.path.split(target)
    tmp = os.path.join(directory, f".{name}.{uuid.uuid4().hex[:12]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        if os.path.exists(target):
            os.chmod(tmp, os.stat(target).st_mode & 0o7777)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_directory(directory)


def _fsync_directory(directory):
    """Make the rename itself durable (POSIX); a no-op where directories cannot be opened."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def load(f: str | os.PathLike | IO[bytes], map_location: Any = None,
         weights_only: bool = True) -> Any:
    """Read what ft.save wrote. A plain .npz of arrays (np.savez) loads as a dict of tensors.

    Never unpickles and never runs code from the file; anything that is not an intact
    checkpoint raises CheckpointError. `weights_only` is accepted for torch compatibility;
    loading is always weights-only.
    """
    name = repr(os.fspath(f)) if isinstance(f, (str, os.PathLike)) else repr(f)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:          # a missing file stays FileNotFoundError
            arrays = _read_npz(fh, name)
    else:
        arrays = _read_npz(f, name)
    if _SPEC_KEY not in arrays:
        return {k: _tensor(v, name, k) for k, v in arrays.items()}
    spec_arr = arrays.pop(_SPEC_KEY)
    if spec_arr.dtype.kind != "U" or spec_arr.ndim != 0:
        raise CheckpointError(f"ft.load: {name} is not a valid checkpoint: its description "
                              f"entry is a {spec_arr.dtype} array of shape {spec_arr.shape}, "
                              "not a string")
    try:
        spec = json.loads(str(spec_arr))
    except (ValueError, RecursionError) as e:
        raise CheckpointError(f"ft.load: {name} is not a valid checkpoint: its description "
                              f"is not readable JSON ({type(e).__name__}: {e})") from None
    if not isinstance(spec, dict) or spec.get("format") != _FORMAT or "root" not in spec:
        fmt = spec.get("format") if isinstance(spec, dict) else None
        raise CheckpointError(f"ft.load: {name} has unknown checkpoint format {fmt!r} "
                              f"(this version reads {_FORMAT!r})")
    return _Decoder(arrays, map_location, name).decode(spec["root"], 0)


def _read_npz(fh, name):
    """The arrays of the .npz archive in the open binary file `fh`, read without np.load.

    Each member must be a .npy of a non-object dtype whose header agrees with the member's
    size; everything else (and every error zipfile or zlib raises) is a CheckpointError.
    """
    try:
        start = fh.tell()
        head = fh.read(8)
        fh.seek(start)
        if not isinstance(head, bytes):
            raise CheckpointError(f"ft.load: {name} must be a path or a binary file object")
        if head.startswith(b"\x93NUMPY"):
            raise CheckpointError(f"ft.load: {name} is a bare .npy array, not a checkpoint "
                                  "(ft.save writes .npz archives); read it with np.load")
        if head[:1] == b"\x80" or head[:1] in (b"(", b"]", b"}"):
            raise CheckpointError(f"ft.load: {name} looks like a pickle (torch.save's legacy "
                                  "format or pickle.dump); ft.load never unpickles, since that "
                                  "would run code named by the file")
        if not head.startswith(b"PK"):
            raise CheckpointError(f"ft.load: {name} is not a checkpoint: it is not a zip "
                                  f"archive (.npz); it starts with {head!r}")
        declared = _declared_entries(fh, start)
        with zipfile.ZipFile(fh) as z:
            infos = z.infolist()
            if declared is not None and declared != len(infos):
                raise CheckpointError(f"ft.load: {name} is damaged: its zip directory lists "
                                      f"{len(infos)} of the {declared} members it declares")
            return {info.filename[:-4]: _read_member(z, info, name) for info in infos}
    except CheckpointError:
        raise
    except _READ_ERRORS as e:
        raise CheckpointError(f"ft.load: {name} is damaged or not a checkpoint: "
                              f"{type(e).__name__}: {e}") from e


def _declared_entries(fh, start):
    """The member count in the zip's end-of-directory record (None if unknown, as in ZIP64).

    zipfile stops reading the directory where its size runs out, so a damaged length field
    can hide members (the description among them); comparing counts catches that.
    """
    end = fh.seek(0, os.SEEK_END)
    n = min(end - start, 22 + 0xFFFF)
    fh.seek(end - n)
    tail = fh.read(n)
    fh.seek(start)
    i = tail.rfind(b"PK\x05\x06")
    if i < 0 or len(tail) - i < 22:
        return None                     # no record: zipfile raises BadZipFile
    count = struct.unpack("<H", tail[i + 10:i + 12])[0]
    return None if count == 0xFFFF else count


def _read_member(z, info, name):
    """One .npy member of the archive, its header checked against the member's size."""
    member = info.filename
    if not member.endswith(".npy"):
        raise CheckpointError(f"ft.load: {name} is a zip archive but not a checkpoint: member "
                              f"{member!r} is not a .npy array (a torch.save file, perhaps)")
    if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
        raise CheckpointError(f"ft.load: {name} is damaged: member {member!r} records "
                              f"{info.file_size} bytes but stores {info.compress_size}")
    with z.open(info) as m:
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
        if m.tell() + nbytes != info.file_size:
            raise CheckpointError(f"ft.load: {name} is damaged: member {member!r} declares "
                                  f"{dtype}{list(shape)} ({nbytes} bytes) but holds "
                                  f"{info.file_size - m.tell()} bytes of data")
        flat = np.empty(count, dtype)
        view = memoryview(flat.view(np.uint8)) if nbytes else memoryview(b"")
        got = 0
        while got < nbytes:
            n = m.readinto(view[got:])
            if not n:
                raise CheckpointError(f"ft.load: {name} is truncated: member {member!r} "
                                      f"ends after {got} of {nbytes} bytes")
            got += n
        m.read(1)                       # reach the end, so zipfile checks the CRC
    return flat.reshape(shape[::-1]).T if fortran else flat.reshape(shape)


def _tensor(arr, name, where):
    """A Tensor of the array read from entry `where`, in native byte order."""
    if arr.dtype.newbyteorder("=") not in SUPPORTED_DTYPES:
        raise CheckpointError(f"ft.load: {name}: {where} holds a {arr.dtype} array, which a "
                              "Tensor cannot hold")
    return C.from_numpy(np.asarray(arr, arr.dtype.newbyteorder("=")))


class _Decoder:
    """Rebuilds the saved object from the JSON description, checking every node's form."""

    def __init__(self, arrays, map_location, name):
        self.arrays, self.map_location, self.name = arrays, map_location, name

    def fail(self, what):
        raise CheckpointError(f"ft.load: {self.name} is not a valid checkpoint: {what}")

    def array(self, node, key):
        i = node[key]
        if type(i) is not int or f"a{i}" not in self.arrays:
            self.fail(f"{key} entry {i!r} names no array in the file")
        return self.arrays[f"a{i}"]

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
            t = _tensor(self.array(node, "tensor"), self.name, f"tensor {node['tensor']}")
            if self.map_location is not None:
                t = t.to(self.map_location)
            if node.get("parameter"):
                return Parameter(t, requires_grad=bool(node.get("requires_grad", True)))
            return t.requires_grad_(True) if node.get("requires_grad") else t
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
