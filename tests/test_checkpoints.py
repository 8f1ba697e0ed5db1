"""ft.save is atomic and ft.load refuses anything that is not an intact checkpoint.

A failed save (disk full, an exception, Ctrl-C part-way) leaves the previous file as it was
and no temporary file; every damaged, truncated or foreign file raises CheckpointError (a
ValueError) naming the file, and no byte of a file is ever unpickled.
"""
import io
import json
import os
import pickle
import resource
import signal
import stat
import threading
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import functrans as ft
import functrans.nn as nn
from functrans import serialization
from functrans.serialization import CheckpointError


def _state(n=4, seed=0):
    ft.manual_seed(seed)
    return nn.Linear(n, n).state_dict()


def _same(a, b):
    assert list(a) == list(b)
    for k in a:
        np.testing.assert_array_equal(a[k].detach().numpy(), b[k].detach().numpy())


# ---------------------------------------------------------------- atomic saves

def test_disk_full_during_save_keeps_the_previous_checkpoint(tmp_path):
    """The issue's reproduction: RLIMIT_FSIZE makes the second save fail after 256 KiB."""
    path = tmp_path / "ckpt.ft"
    old = _state(512, seed=0)                      # ~1 MiB of float32
    ft.save(old, path)
    before = path.read_bytes()
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 18, hard))
    try:
        with pytest.raises(OSError):
            ft.save(_state(512, seed=1), path)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
    assert path.read_bytes() == before
    _same(ft.load(path), old)
    assert os.listdir(tmp_path) == ["ckpt.ft"]     # no temporary file left behind


@pytest.mark.parametrize("fmt", ["torch", "npz"])
@pytest.mark.parametrize("exc", [RuntimeError("writer failed"), KeyboardInterrupt()])
def test_exception_part_way_through_a_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch,
                                                                         exc, fmt):
    """The writer has already written an array when the second one fails (or Ctrl-C)."""
    path = tmp_path / "ckpt.ft"
    old = _state()
    ft.save(old, path, format=fmt)
    calls = []
    if fmt == "npz":
        module, name = np.lib.format, "write_array"
    else:
        module, name = serialization.torch_write, "_put"
    write = getattr(module, name)

    def failing(fp, array, *args, **kwargs):
        if fmt == "npz" or "/data/" in array:
            calls.append(1)
        if len(calls) == 2:
            (fp.fp if fmt == "torch" else fp).write(b"\0" * 100)
            raise exc
        return write(fp, array, *args, **kwargs)
    monkeypatch.setattr(module, name, failing)
    with pytest.raises(type(exc)):
        ft.save(_state(seed=1), path, format=fmt)
    assert len(calls) == 2
    monkeypatch.undo()
    _same(ft.load(path), old)
    assert os.listdir(tmp_path) == ["ckpt.ft"]


def test_a_value_that_cannot_be_saved_leaves_no_file(tmp_path):
    path = tmp_path / "ckpt.ft"
    ft.save({"w": ft.ones(2)}, path)
    with pytest.raises(TypeError, match="cannot save object"):
        ft.save({"w": ft.zeros(2), "x": object()}, path)
    assert ft.load(path)["w"].tolist() == [1.0, 1.0] and os.listdir(tmp_path) == ["ckpt.ft"]


def test_save_replaces_the_file_keeps_its_mode_and_follows_symlinks(tmp_path):
    path = tmp_path / "ckpt.ft"
    ft.save({"v": 1}, path)
    os.chmod(path, 0o640)
    ft.save({"v": 2}, str(path))
    assert ft.load(path) == {"v": 2} and stat.S_IMODE(os.stat(path).st_mode) == 0o640
    link = tmp_path / "latest"
    os.symlink(path, link)
    ft.save({"v": 3}, link)
    assert os.path.islink(link) and ft.load(path) == {"v": 3}
    assert sorted(os.listdir(tmp_path)) == ["ckpt.ft", "latest"]


def test_special_files_are_written_in_place_not_replaced(tmp_path):
    """A pipe is written through (zipfile streams to it), and stays a pipe."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    same_pipe = tmp_path / "same_pipe"        # a second name, to release a stuck reader
    os.link(fifo, same_pipe)
    got = {}

    def reader():
        with open(fifo, "rb") as fh:
            got["data"] = fh.read()
    t = threading.Thread(target=reader)
    t.start()
    try:
        ft.save({"w": ft.arange(3)}, fifo)
    finally:
        t.join(10)
        if t.is_alive():                   # the save replaced the pipe: release the reader
            os.close(os.open(same_pipe, os.O_WRONLY | os.O_NONBLOCK))
            t.join()
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(os.listdir(tmp_path)) == ["pipe", "same_pipe"]
    assert ft.load(io.BytesIO(got["data"]))["w"].tolist() == [0, 1, 2]


def test_concurrent_saves_to_one_path_leave_one_whole_file(tmp_path):
    path = tmp_path / "ckpt.ft"
    states = [{"w": ft.full((64, 64), float(i))} for i in range(4)]

    def work(i):
        for _ in range(10):
            ft.save(states[i], path)
    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    w = ft.load(path)["w"].numpy()
    assert w.shape == (64, 64) and w.min() == w.max() and w.min() in range(4)
    assert os.listdir(tmp_path) == ["ckpt.ft"]


def test_file_objects_are_written_in_place():
    buf = io.BytesIO()
    buf.write(b"header")
    ft.save({"w": ft.arange(3)}, buf)
    buf.seek(6)
    assert ft.load(buf)["w"].tolist() == [0, 1, 2]


def test_saving_deeper_than_the_limit_is_refused(tmp_path):
    deep = [1]
    for _ in range(serialization.MAX_DEPTH):
        deep = [deep]
    with pytest.raises(ValueError, match="nested more than 100 levels"):
        ft.save(deep, tmp_path / "x")
    ok = deep[0]
    ft.save(ok, tmp_path / "x")
    assert ft.load(tmp_path / "x") == ok


# ---------------------------------------------------------------- loading foreign files

def _npz(path, **entries):
    with open(path, "wb") as fh:              # np.savez would append ".npz" to a bare path
        np.savez(fh, **entries)
    return path


def _spec(text):
    return {serialization.npz.SPEC_KEY: np.array(text)}


def _foreign_files(tmp_path):
    """name -> (path, words the error must contain)."""
    good = tmp_path / "good.ft"
    ft.save(_state(), good)
    data = good.read_bytes()
    files = {}

    def put(name, payload, words):
        p = tmp_path / name
        p.write_bytes(payload)
        files[name] = (p, words)
    put("truncated_zip", data[: len(data) // 2], "damaged")
    put("truncated_end", data[:-1], "damaged")
    put("empty", b"", "not a zip archive")
    put("random_bytes", np.random.default_rng(0).bytes(300), "not a zip archive")
    put("pickle", pickle.dumps({"w": [1.0, 2.0]}), "pickle")
    put("pickle_protocol0", pickle.dumps([1], protocol=0), "pickle")
    npy = io.BytesIO()
    np.save(npy, np.arange(3.0))
    put("bare_npy", npy.getvalue(), "bare .npy")
    other_zip = io.BytesIO()
    with zipfile.ZipFile(other_zip, "w") as z:
        z.writestr("readme.txt", b"hello")
    put("other_zip", other_zip.getvalue(), "not a .npy")
    torch_like = io.BytesIO()
    with zipfile.ZipFile(torch_like, "w") as z:       # torch.save's layout, a hostile pickle
        z.writestr("archive/data.pkl", b"\x80\x02cposix\nsystem\nX\x02\x00\x00\x00idq\x85R.")
    put("torch_zip_os_system", torch_like.getvalue(), "names the global posix.system")
    _npz(tmp_path / "object_array", payload=np.array([print], dtype=object))
    files["object_array"] = (tmp_path / "object_array", "object array")
    _npz(tmp_path / "bad_json", **_spec('{"format": "functrans.save/1", "root": {'))
    files["bad_json"] = (tmp_path / "bad_json", "JSON")
    deep = '{"format": "functrans.save/1", "root": ' + '{"list": [' * 50_000 + \
        "]}" * 50_000 + "}"
    _npz(tmp_path / "deep_json", **_spec(deep))
    files["deep_json"] = (tmp_path / "deep_json", "JSON")
    mid = '{"format": "functrans.save/1", "root": ' + '{"list": [' * 200 + "]}" * 200 + "}"
    _npz(tmp_path / "deep_description", **_spec(mid))
    files["deep_description"] = (tmp_path / "deep_description", "nested more than")
    _npz(tmp_path / "other_format", **_spec(json.dumps({"format": "x/2", "root": None})))
    files["other_format"] = (tmp_path / "other_format", "unknown checkpoint format")
    for name, root in [("missing_array", {"tensor": 3}), ("bad_index", {"tensor": "a0"}),
                       ("bad_int", {"int": "12"}), ("bad_float", {"float": "abc"}),
                       ("bad_item", {"dict": [[1, 2, 3]]}), ("bad_key", {"dict": [[[1], 2]]}),
                       ("unknown_node", {"set": [1]}), ("bare_list", [1, 2])]:
        _npz(tmp_path / name, a0=np.zeros(2),
             **_spec(json.dumps({"format": "functrans.save/1", "root": root})))
        files[name] = (tmp_path / name, "not a valid checkpoint")
    _npz(tmp_path / "spec_not_text", **{serialization.npz.SPEC_KEY: np.zeros(3)})
    files["spec_not_text"] = (tmp_path / "spec_not_text", "not a string")
    _npz(tmp_path / "string_tensor", words=np.array(["a", "b"]))
    files["string_tensor"] = (tmp_path / "string_tensor", "a Tensor cannot hold")
    return files


FOREIGN = ["truncated_zip", "truncated_end", "empty", "random_bytes", "pickle",
           "pickle_protocol0", "bare_npy", "other_zip", "torch_zip_os_system",
           "object_array", "bad_json", "deep_json", "deep_description", "other_format",
           "missing_array", "bad_index", "bad_int", "bad_float", "bad_item", "bad_key",
           "unknown_node", "bare_list", "spec_not_text", "string_tensor"]


@pytest.fixture
def no_unpickling(monkeypatch):
    """Any attempt to unpickle fails the test."""
    def forbidden(*args, **kwargs):
        raise AssertionError("ft.load unpickled")
    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, forbidden)


@pytest.mark.parametrize("kind", FOREIGN)
def test_every_foreign_or_damaged_file_raises_checkpoint_error(tmp_path, kind, no_unpickling):
    path, words = _foreign_files(tmp_path)[kind]
    with pytest.raises(CheckpointError) as info:
        ft.load(path)
    msg = str(info.value)
    assert words in msg and str(path) in msg, msg
    assert isinstance(info.value, ValueError) and isinstance(info.value, ft.FunctransError)
    assert "allow_pickle" not in msg
    with open(path, "rb") as fh:                   # file objects: the same error
        with pytest.raises(CheckpointError):
            ft.load(fh)


def test_a_missing_file_is_still_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        ft.load(tmp_path / "nope.ft")


def test_the_error_class_is_exported():
    assert ft.CheckpointError is ft.serialization.CheckpointError is CheckpointError
    assert issubclass(CheckpointError, ValueError)


def _good(fmt):
    """A checkpoint in each format, and what it loads as."""
    idx = np.arange(3, dtype=np.int16)
    buf = io.BytesIO()
    ft.save({"w": ft.arange(6.0).reshape(2, 3), "step": 7, "cfg": {"lr": 0.5, "betas": (0.9, 0.99)},
             "idx": idx if fmt == "npz" else ft.from_numpy(idx)}, buf, format=fmt)
    return buf.getvalue()


GOOD = {fmt: _good(fmt) for fmt in ("npz", "torch")}
_EXPECTED = {fmt: ft.load(io.BytesIO(data)) for fmt, data in GOOD.items()}
_LONGEST = max(map(len, GOOD.values()))

_edit = st.one_of(
    st.tuples(st.just("set"), st.integers(0, _LONGEST - 1), st.integers(0, 255)),
    st.tuples(st.just("cut"), st.integers(0, _LONGEST - 1), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, _LONGEST), st.integers(0, 255)),
    st.tuples(st.just("delete"), st.integers(0, _LONGEST - 1), st.integers(1, 64)))


def _mutate(data, edits):
    b = bytearray(data)
    for op, i, v in edits:
        i = min(i, len(b))
        if op == "set" and i < len(b):
            b[i] = v
        elif op == "cut":
            del b[i:]
        elif op == "insert":
            b[i:i] = bytes([v])
        elif op == "delete":
            del b[i:i + v]
    return bytes(b)


def _check_good(got, fmt):
    expected = _EXPECTED[fmt]
    assert got["step"] == 7 and got["cfg"] == {"lr": 0.5, "betas": (0.9, 0.99)}
    np.testing.assert_array_equal(got["w"].numpy(), expected["w"].numpy())
    np.testing.assert_array_equal(np.asarray(got["idx"]), np.asarray(expected["idx"]))
    assert got["idx"].dtype == np.int16 and got["w"].dtype == ft.float32


@pytest.mark.parametrize("fmt", ["npz", "torch"])
@settings(max_examples=200)
@given(edits=st.lists(_edit, min_size=1, max_size=4))
def test_mutated_checkpoints_load_correctly_or_raise_checkpoint_error(fmt, edits):
    data = _mutate(GOOD[fmt], edits)
    try:
        got = ft.load(io.BytesIO(data))
    except CheckpointError:
        return
    _check_good(got, fmt)


@pytest.mark.parametrize("fmt", ["npz", "torch"])
def test_every_single_byte_change_is_caught_or_harmless(fmt):
    """Exhaustive over positions (one value each): the hypothesis test's guarantee, bounded."""
    good = GOOD[fmt]
    for i in range(len(good)):
        data = bytearray(good)
        data[i] ^= 0x5A
        try:
            got = ft.load(io.BytesIO(bytes(data)))
        except CheckpointError:
            continue
        _check_good(got, fmt)
