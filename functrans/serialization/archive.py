"""The zip layer of ft.load: an archive whose members are checked before any is read.

Both checkpoint formats (functrans's .npz and PyTorch's zip) are zip archives. Before a
byte of data is read or allocated, `Archive` checks the member table so that memory is
bounded by what the file declares and the file cannot claim more than it holds:

- no two members share a name (zipfile would silently let the last one win);
- no two members overlap in the file (each member's data lies between its own local header
  and the next member's), so the stored members' sizes add up to at most the file's size;
- a stored member's recorded size equals the bytes it stores;
- compressed members (deflate, bzip2, lzma: a "zip bomb" inflates 1000x) declare their
  inflated sizes, and their sum must stay within a limit (`MAX_INFLATED_BYTES` of the
  package), checked before inflating; reading never produces more than a member declares.

A file that fails a check raises `CheckpointError` naming the file and the member.
"""
from __future__ import annotations

import os
import struct
import zipfile
import zlib
from contextlib import contextmanager

import numpy as np

from ..core import FunctransError
from ..nn.modules.module import Module

_LZMA_ERRORS: tuple = ()                # zipfile reads LZMA members only where lzma is built
try:
    from lzma import LZMAError
    _LZMA_ERRORS = (LZMAError,)
except ImportError:                     # pragma: no cover - Python built without lzma
    pass

# what reading a damaged or foreign file can raise inside zipfile, zlib and the .npy
# header parser; each becomes a CheckpointError naming the file (RecursionError is a
# RuntimeError: JSON nested too deep)
READ_ERRORS = (zipfile.BadZipFile, zlib.error, struct.error, EOFError, OSError, ValueError,
               TypeError, KeyError, NotImplementedError, RuntimeError, OverflowError,
               MemoryError, SyntaxError, IndexError, AttributeError) + _LZMA_ERRORS

_LOCAL_HEADER = struct.Struct("<4s22xHH")       # signature ... name length, extra length

MAX_DEPTH = 100                         # nesting of dicts/lists/tuples that save and load accept


class CheckpointError(FunctransError, ValueError):
    """ft.load was given something that is not an intact checkpoint (damaged, truncated, foreign)."""


def cannot_save(obj, where, also=""):
    """The TypeError for a value that no checkpoint format holds. An object with a state
    dict (a module, an optimizer) is saved through it: the message says how."""
    cls = type(obj).__name__
    if callable(getattr(obj, "state_dict", None)) and callable(
            getattr(obj, "load_state_dict", None)):
        var = "model" if isinstance(obj, Module) else (
            "optimizer" if any(c.__name__ == "Optimizer" for c in type(obj).__mro__) else "obj")
        return TypeError(
            f"ft.save: cannot save the {cls} object at {where}: saving a whole object would "
            "pickle its class, and loading it would run code named by the file (ft.load never "
            "does; torch.load(weights_only=True) refuses such files too). Save its state dict "
            f"instead: ft.save({var}.state_dict(), path), and after building the {cls} again, "
            f"load it with {var}.load_state_dict(ft.load(path))")
    return TypeError(f"ft.save: cannot save {cls} at {where}; only tensors, {also}numbers, "
                     "strings, None and dicts/lists/tuples of them are saved (nothing is "
                     "pickled)")


class Archive:
    """The members of the zip archive in the open binary file `fh`, checked (module doc).

    `name` is how errors name the file; `inflate_limit` bounds the inflated sizes of the
    compressed members together. Use as a context manager; `members` maps names to ZipInfo.
    """

    def __init__(self, fh, name, inflate_limit):
        self.name = name
        declared = _declared_entries(fh)
        self.zip = zipfile.ZipFile(fh)
        try:
            infos = self.zip.infolist()
            if declared is not None and declared != len(infos):
                raise CheckpointError(f"ft.load: {name} is damaged: its zip directory lists "
                                      f"{len(infos)} of the {declared} members it declares")
            self.members = {}
            for info in infos:
                if info.filename in self.members:
                    raise CheckpointError(f"ft.load: {name} is damaged or hostile: two members "
                                          f"are named {info.filename!r} (which one is meant?)")
                self.members[info.filename] = info
            self._check_layout(fh, infos)
            self._check_sizes(infos, inflate_limit)
        except BaseException:
            self.zip.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.zip.close()

    def _check_layout(self, fh, infos):
        """Each member's local header and data end before the next member begins."""
        end_of_data = self.zip.start_dir            # where the central directory begins
        spans = []
        for info in infos:
            fh.seek(info.header_offset)
            head = fh.read(_LOCAL_HEADER.size)
            if len(head) < _LOCAL_HEADER.size:
                raise CheckpointError(f"ft.load: {self.name} is truncated: member "
                                      f"{info.filename!r} has no local header")
            magic, n_name, n_extra = _LOCAL_HEADER.unpack(head)
            if magic != b"PK\x03\x04":
                raise CheckpointError(f"ft.load: {self.name} is damaged: member "
                                      f"{info.filename!r} points at no local header")
            start = info.header_offset
            spans.append((start, start + _LOCAL_HEADER.size + n_name + n_extra +
                          info.compress_size, info.filename))
        spans.sort()
        for (start, end, member), nxt in zip(spans, spans[1:] + [(end_of_data, 0, None)]):
            if end > nxt[0]:
                what = (f"overlaps member {nxt[2]!r}" if nxt[2] is not None
                        else "runs into the zip directory")
                raise CheckpointError(f"ft.load: {self.name} is damaged or hostile: member "
                                      f"{member!r} ({end - start} bytes from offset {start}) "
                                      f"{what}")

    def _check_sizes(self, infos, limit):
        compressed = [i for i in infos if i.compress_type != zipfile.ZIP_STORED]
        for info in infos:
            if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
                raise CheckpointError(f"ft.load: {self.name} is damaged: member "
                                      f"{info.filename!r} records {info.file_size} bytes "
                                      f"but stores {info.compress_size}")
        total = sum(i.file_size for i in compressed)
        if total <= limit:
            return
        info = max(compressed, key=lambda i: i.file_size)
        raise CheckpointError(
            f"ft.load: {self.name}: compressed member {info.filename!r} declares "
            f"{info.file_size} bytes when inflated from {info.compress_size} compressed bytes, "
            f"and the {len(compressed)} compressed member(s) of the file {total} in all; "
            f"ft.load inflates at most {limit} bytes per file "
            "(ft.serialization.MAX_INFLATED_BYTES), and checks this before inflating. If you "
            f"trust the file, raise the limit: ft.serialization.MAX_INFLATED_BYTES = "
            f"{_round_up(total)}")

    def open(self, member):
        """The member as a file object that yields at most its declared size (CRC checked)."""
        return self.zip.open(self.members[member])

    def read(self, member):
        """The member's bytes as a new uint8 array of exactly its declared size."""
        info = self.members[member]
        out = np.empty(info.file_size, np.uint8)
        with self.zip.open(info) as m:
            read_into(m, out, self.name, member)
        return out


@contextmanager
def reading(name):
    """Turn what a damaged or foreign file makes zipfile, zlib or a parser raise into a
    CheckpointError naming the file."""
    try:
        yield
    except CheckpointError:
        raise
    except READ_ERRORS as e:
        raise CheckpointError(f"ft.load: {name} is damaged or not a checkpoint: "
                              f"{type(e).__name__}: {e}") from e


_CHUNK = 2 ** 18


def read_into(m, out, name, member):
    """Fill the uint8 array `out` from the member file `m`, then reach its end (CRC check).

    Read 256 KiB at a time: zipfile's own read(n) would hold n bytes, and more while
    inflating, beside `out`."""
    got = 0
    while got < out.size:
        chunk = m.read(min(_CHUNK, out.size - got))
        if not chunk:
            raise CheckpointError(f"ft.load: {name} is truncated: member {member!r} "
                                  f"ends after {got} of {out.size} bytes")
        out[got:got + len(chunk)] = np.frombuffer(chunk, np.uint8)
        got += len(chunk)
    m.read(1)


def _round_up(n):
    """The power of two at or above n (the limit to suggest)."""
    return 1 << max(n - 1, 1).bit_length()


def _declared_entries(fh):
    """The member count in the zip's end-of-directory record (None if unknown, as in ZIP64).

    zipfile stops reading the directory where its size runs out, so a damaged length field
    can hide members (the description among them); comparing counts catches that.
    """
    start = fh.tell()
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
