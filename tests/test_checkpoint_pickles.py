"""ft.load of PyTorch's format runs data.pkl on its own machine: only tensors, state dicts and
optimizer state are rebuilt, every other global is refused, nothing the file names is called.

The hostile files are built here with pickle.dumps (the test writes them; ft.load must never
unpickle) inside torch.save's zip layout; torch itself is not needed.
"""
import argparse
import dataclasses
import io
import os
import pickle
import struct
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import functrans as ft
from functrans import serialization
from functrans.serialization import CheckpointError


def _archive(code, storages=(), **extra):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("archive/data.pkl", code)
        z.writestr("archive/byteorder", extra.pop("byteorder", b"little"))
        for key, data in storages:
            z.writestr(f"archive/data/{key}", data)
        for name, data in extra.items():
            z.writestr(f"archive/{name}", data)
    buf.seek(0)
    return buf


# a few pickle opcodes, to write what pickle.dumps will not (torch's globals without torch)

def G(module, name):
    return b"c" + f"{module}\n{name}\n".encode()


def S(text):
    data = text.encode()
    return b"X" + struct.pack("<I", len(data)) + data


def I(n):
    return b"J" + struct.pack("<i", n)


def T(*items):
    return b"(" + b"".join(items) + b"t"


def R(fn, *args):
    return fn + T(*args) + b"R"


def D(**items):
    return b"}(" + b"".join(S(k) + v for k, v in items.items()) + b"u"


def program(body):
    return b"\x80\x02" + body + b"."


FLOAT = G("torch", "FloatStorage")
HOOKS = R(G("collections", "OrderedDict"))


def _tensor(key, numel, offset, size, stride, storage=FLOAT, hooks=HOOKS):
    """torch.save's pickle of one tensor."""
    pid = T(S("storage"), storage, S(key), S("cpu"), I(numel)) + b"Q"
    return R(G("torch._utils", "_rebuild_tensor_v2"), pid, I(offset), T(*map(I, size)),
             T(*map(I, stride)), b"\x89", hooks)


def _code(obj):
    """pickle.dumps of a real object, in torch.save's protocol."""
    return pickle.dumps(obj, protocol=2)


@pytest.fixture(autouse=True)
def no_unpickling(monkeypatch):
    """Any attempt to unpickle while loading fails the test (building files may pickle)."""
    loads = {}

    def forbidden(*args, **kwargs):
        raise AssertionError("ft.load unpickled")
    for name in ("load", "loads", "Unpickler"):
        loads[name] = getattr(pickle, name)
    real = ft.load

    def guarded(*args, **kwargs):
        for name in loads:
            monkeypatch.setattr(pickle, name, forbidden)
        try:
            return real(*args, **kwargs)
        finally:
            for name, fn in loads.items():
                monkeypatch.setattr(pickle, name, fn)
    monkeypatch.setattr(ft, "load", guarded)
    yield
    serialization.clear_safe_globals()


def test_a_state_dict_pickled_as_torch_does_loads():
    data = np.arange(6, dtype=np.float32)
    sd = D(w=_tensor("0", 6, 0, (2, 3), (3, 1)), b=_tensor("0", 6, 4, (2,), (1,)),
           t=_tensor("0", 6, 0, (3, 2), (1, 3)), step=I(3), name=S("x"), none=b"N")
    got = ft.load(_archive(program(sd), [("0", data.tobytes())]))
    assert got["w"].tolist() == [[0, 1, 2], [3, 4, 5]] and got["b"].tolist() == [4, 5]
    assert got["t"].tolist() == [[0, 3], [1, 4], [2, 5]]
    assert np.shares_memory(got["w"].numpy(), got["b"].numpy())     # one storage, shared
    assert (got["step"], got["name"], got["none"]) == (3, "x", None)


class _Reduce:
    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return (self.fn, self.args)


def _evil(*args):
    raise AssertionError("the file's function was called")


HOSTILE = {
    "os.system": (_code(_Reduce(os.system, "touch /tmp/ft_hostile_marker")),
                  "names the global posix.system"),
    "eval": (_code(_Reduce(eval, "1+1")), "names the global builtins.eval"),
    "getattr": (_code(_Reduce(getattr, 1, "real")), "names the global builtins.getattr"),
    "numpy": (_code(np.float64(1.0)), "names the global numpy"),
    "a test function": (_code(_Reduce(_evil)), "test_checkpoint_pickles._evil"),
    "ordered dict with items": (program(R(G("collections", "OrderedDict"),
                                          b"](" + T(I(1), I(2)) + b"e")),
                                "called with items"),
    "not a storage": (program(R(G("torch._utils", "_rebuild_tensor_v2"),
                                T(S("module"), FLOAT, S("0"), S("cpu"), I(1)) + b"Q")),
                      "not a storage"),
    "missing storage": (program(_tensor("9", 1, 0, (1,), (1,))),
                        "has no member 'archive/data/9'"),
    "wrong storage size": (program(_tensor("0", 5, 0, (1,), (1,))), "holds 20 bytes, but"),
    "past the end": (program(_tensor("0", 4, 2, (3,), (1,))), "past the end of its storage"),
    "negative stride": (program(_tensor("0", 4, 3, (2,), (-1,))), "stride (-1,)"),
    "expanded": (program(_tensor("0", 4, 0, (3,), (0,))), "elements overlap"),
    "hooks": (program(_tensor("0", 4, 0, (1,), (1,), hooks=D(h=I(1)))), "backward hooks"),
    "bfloat16": (program(_tensor("0", 4, 0, (1,), (1,), storage=G("torch", "BFloat16Storage"))),
                 "functrans has no bfloat16 dtype"),
    "int requires grad": (program(R(G("torch._utils", "_rebuild_tensor_v2"),
                                    T(S("storage"), G("torch", "LongStorage"), S("0"), S("cpu"),
                                      I(2)) + b"Q", I(0), T(I(2)), T(I(1)), b"\x88", HOOKS)),
                          "requires grad"),
}


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_hostile_pickles_are_refused_without_running_anything(kind):
    code, words = HOSTILE[kind]
    if os.path.exists("/tmp/ft_hostile_marker"):
        os.unlink("/tmp/ft_hostile_marker")
    with pytest.raises(CheckpointError) as info:
        ft.load(_archive(code, [("0", bytes(16))]))
    assert words in str(info.value), str(info.value)
    assert not os.path.exists("/tmp/ft_hostile_marker")


@pytest.mark.parametrize("code,words", [
    (b"\x80\x02]q\x00h\x00a.", "contains itself"),                     # l = [l]
    (b"\x80\x02" + b"]" * 101 + b"a" * 100 + b".", "nested more than 100"),
    (b"\x80\x02cposix\nsystem\nX\x02\x00\x00\x00idq\x85R.", "posix.system"),
    (b"\x80\x02K\x01}b.", "sets the state of a int"),
    (b"\x80\x02N\x85q\x00h\x07.", "memo entry 7, never stored"),
    (b"\x80\x02X\xff\x00\x00\x00ab.", "is truncated"),
    (b"\x80\x02S'ab'\n.", "pickle opcode b'S'"),
    (b"\x80\x02K\x01", "truncated"),
])
def test_malformed_programs_are_refused(code, words):
    with pytest.raises(CheckpointError, match=words):
        ft.load(_archive(code))


def test_a_big_endian_file_loads_in_native_order():
    data = np.arange(4, dtype=">f4").tobytes()
    got = ft.load(_archive(program(D(w=_tensor("0", 4, 0, (4,), (1,)))), [("0", data)],
                           byteorder=b"big"))
    assert got["w"].tolist() == [0, 1, 2, 3] and got["w"].dtype == ft.float32


# ---------------------------------------------------------------- safe globals

@dataclasses.dataclass
class Config:
    lr: float
    name: str


class WithSetstate:
    def __setstate__(self, state):
        raise AssertionError("ran the class's code")


def _saved(obj):
    return _archive(_code({"cfg": obj}))


def test_safe_globals_rebuild_plain_data_classes_without_running_their_code():
    f = _saved(argparse.Namespace(lr=0.5, layers=[1, 2]))
    with pytest.raises(CheckpointError, match=r"add_safe_globals\(\[Namespace\]\)"):
        ft.load(f)
    with serialization.safe_globals([argparse.Namespace]):
        assert serialization.get_safe_globals() == [argparse.Namespace]
        got = ft.load(_saved(argparse.Namespace(lr=0.5, layers=[1, 2])))
    assert serialization.get_safe_globals() == []
    assert isinstance(got["cfg"], argparse.Namespace) and got["cfg"].layers == [1, 2]
    serialization.add_safe_globals([(Config, "test_checkpoint_pickles.Config")])
    got = ft.load(_saved(Config(0.1, "run")))
    assert got["cfg"] == Config(0.1, "run")
    serialization.clear_safe_globals()
    assert serialization.get_safe_globals() == []


def test_safe_globals_never_call_functions_or_class_code():
    serialization.add_safe_globals([os.system, WithSetstate])
    with pytest.raises(CheckpointError, match="never calls a function"):
        ft.load(_saved(_Reduce(os.system, "true")))
    with pytest.raises(CheckpointError, match="it defines __setstate__"):
        ft.load(_saved(WithSetstate()))
    serialization.add_safe_globals([argparse.Namespace])
    with pytest.raises(CheckpointError, match="does not call"):        # REDUCE of a class
        ft.load(_saved(_Reduce(argparse.Namespace)))


def test_safe_globals_check_their_entries_as_torch_does():
    with pytest.raises(ValueError, match="tuple of length 2"):
        serialization.add_safe_globals([(Config,)])
    with pytest.raises(TypeError, match="second item in tuple to be str"):
        serialization.add_safe_globals([(Config, 1)])
    with pytest.raises(TypeError, match="expected classes"):
        serialization.add_safe_globals([3])


def test_ordered_dicts_keep_their_metadata():
    sd = OrderedDict(w=1)
    sd._metadata = OrderedDict({"": {"version": 1}})
    got = ft.load(_archive(_code(sd)))
    assert type(got) is OrderedDict and got._metadata == {"": {"version": 1}}
    buf = io.BytesIO()
    ft.save(got, buf)
    buf.seek(0)
    assert ft.load(buf)._metadata == {"": {"version": 1}}
