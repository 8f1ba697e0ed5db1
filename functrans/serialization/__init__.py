"""ft.save / ft.load: checkpoints that loading can never execute.

`ft.save(obj, f)` writes PyTorch's zip format (what torch.save writes), so torch.load reads
it, weights_only=True included; `format="npz"` writes functrans's own .npz format instead
(NumPy arrays stay arrays). `ft.load` reads both, and never unpickles: PyTorch's data.pkl
runs on a small machine of our own that rebuilds tensors, state dicts and optimizer state
and refuses every other global (torch_read.py); the .npz format holds no pickle at all
(npz.py). Both are zip archives whose members are checked before anything is read, so
memory stays bounded by what the file declares (archive.py). Anything that is not an
intact checkpoint raises `CheckpointError`, naming the file and what was wrong.

Saving to a path is atomic: the data goes to a temporary file in the same directory, is
flushed to disk and then renamed over the target, so a failed save leaves the previous
file as it was (docs/reliability.md).
"""
from __future__ import annotations

import os
import stat
import uuid
from typing import IO, Any

from . import npz, torch_read, torch_write
from .archive import MAX_DEPTH, Archive, CheckpointError, reading
from .torch_read import add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals

__all__ = ["save", "load", "CheckpointError", "MAX_DEPTH", "MAX_INFLATED_BYTES",
           "add_safe_globals", "get_safe_globals", "clear_safe_globals", "safe_globals"]

# The bytes that the compressed members of one file may inflate to, in all. Neither
# torch.save nor ft.save compresses; np.savez_compressed does, and a deflate bomb inflates
# a thousandfold. Raise it to load a larger compressed file you trust.
MAX_INFLATED_BYTES = 256 * 2 ** 20

_FORMATS = ("torch", "npz")


def save(obj: Any, f: str | os.PathLike | IO[bytes], *, format: str = "torch") -> None:
    """Write `obj` (a state dict or any nesting of tensors, numbers, strings) to `f`.

    format="torch" (the default) writes PyTorch's zip format, which torch.load reads;
    format="npz" writes functrans's .npz format, which also keeps NumPy arrays. `f` is a
    path (written exactly as given; atomically: the previous file survives a failed save)
    or a binary file object. A whole nn.Module is refused: save its state_dict().
    """
    if format == "torch":
        encoded = torch_write.encode(obj)

        def write(fh):
            torch_write.write(fh, encoded)
    elif format == "npz":
        entries = npz.entries(obj)

        def write(fh):
            npz.write(fh, entries)
    else:
        raise ValueError(f"ft.save: unknown format {format!r}; use one of {_FORMATS}")
    if isinstance(f, (str, os.PathLike)):
        _write_atomically(os.fspath(f), write)
    else:
        write(f)


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
    """Read a checkpoint that ft.save or torch.save wrote (or a plain np.savez file, as a
    dict of tensors).

    Never unpickles and never runs code from the file; anything that is not an intact
    checkpoint raises CheckpointError. `weights_only` is accepted for torch compatibility;
    loading is always weights-only (classes passed to add_safe_globals are rebuilt as plain
    data).
    """
    name = repr(os.fspath(f)) if isinstance(f, (str, os.PathLike)) else repr(f)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:          # a missing file stays FileNotFoundError
            return _load(fh, name, map_location)
    return _load(f, name, map_location)


def _load(fh, name, map_location):
    with reading(name):
        start = fh.tell()
        head = fh.read(8)
        fh.seek(start)
        if not isinstance(head, bytes):
            raise CheckpointError(f"ft.load: {name} must be a path or a binary file object")
        if head.startswith(b"\x93NUMPY"):
            raise CheckpointError(f"ft.load: {name} is a bare .npy array, not a checkpoint "
                                  "(ft.save writes zip archives); read it with np.load")
        if head[:1] == b"\x80" or head[:1] in (b"(", b"]", b"}"):
            raise CheckpointError(f"ft.load: {name} looks like a pickle (torch.save's legacy "
                                  "format, _use_new_zipfile_serialization=False, or "
                                  "pickle.dump); ft.load never unpickles, since that would "
                                  "run code named by the file")
        if not head.startswith(b"PK"):
            raise CheckpointError(f"ft.load: {name} is not a checkpoint: it is not a zip "
                                  f"archive (torch.save's format or .npz); it starts with "
                                  f"{head!r}")
        archive = Archive(fh, name, MAX_INFLATED_BYTES)
    with archive:
        if torch_read.folder(archive) is not None:
            return torch_read.load(archive, map_location)
        return npz.load(archive, map_location)
