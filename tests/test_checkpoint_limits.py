"""ft.load's memory is bounded by what the file declares (docs/reliability.md).

Each hostile file is built here, in a few milliseconds, and loading it is measured with
tracemalloc (NumPy reports its buffers to it): a file that refers to one member many times,
a deflate bomb, members that overlap, two members of one name.
"""
import io
import json
import struct
import tracemalloc
import zipfile
import zlib

import numpy as np
import pytest

import functrans as ft
from functrans import serialization
from functrans.serialization import CheckpointError

MiB = 2 ** 20


def _peak(fn):
    """(result or the exception raised, peak bytes allocated while fn ran)."""
    tracemalloc.start()
    try:
        try:
            out = fn()
        except Exception as e:          # noqa: BLE001 - returned for the caller to check
            out = e
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# ---------------------------------------------------------------- a zip written by hand

def _local(name, data, method, size, crc):
    n = name.encode()
    return struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, method, 0, 0x21, crc,
                       len(data), size, len(n), 0) + n + data


def _central(name, offset, method, csize, size, crc):
    n = name.encode()
    return struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, method, 0, 0x21, crc,
                       csize, size, len(n), 0, 0, 0, 0, 0, offset) + n


def _zip(members, directory=None):
    """members: [(name, stored bytes, method, inflated size, crc)], laid out in order;
    directory: [(name, index of the member the entry points at)] (default: each once)."""
    out, offsets = b"", []
    for name, data, method, size, crc in members:
        offsets.append(len(out))
        out += _local(name, data, method, size, crc)
    directory = directory or [(m[0], i) for i, m in enumerate(members)]
    cd = b"".join(_central(name, offsets[i], members[i][2], len(members[i][1]), members[i][3],
                           members[i][4]) for name, i in directory)
    return out + cd + struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(directory),
                                  len(directory), len(cd), len(out), 0)


def _stored(name, data):
    return (name, data, zipfile.ZIP_STORED, len(data), zlib.crc32(data))


def _npy(arr):
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _npy_header(count):
    """A 128-byte .npy v1.0 header for a uint8 array of `count` elements."""
    text = "{'descr': '|u1', 'fortran_order': False, 'shape': (%d,), }" % count
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", 118) + text.ljust(117).encode() + b"\n"


def _spec(root):
    return _npy(np.array(json.dumps({"format": "functrans.save/1", "root": root})))


def _deflate_bomb(mib):
    """A deflate stream of `mib` MiB of zeros, ~1 KB per MiB, made without inflating it:
    after a full flush the compressor starts afresh, so one MiB's block repeats."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = c.compress(bytes(MiB)) + c.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(mib):
        crc = zlib.crc32(bytes(MiB), crc)
    return block * mib + zlib.compressobj(9, zlib.DEFLATED, -15).flush(), crc


# ---------------------------------------------------------------- one member, many references

def test_a_member_referred_to_100_times_is_read_once():
    """The issue's 4 KB file: a compressed 4 MiB big-endian array and a description naming
    it 100 times. Each reference once made its own byte-swapped copy (+400 MB); now the
    references give one tensor."""
    arr = np.zeros(MiB // 2, ">f8")                         # 4 MiB, compresses to ~4 KB
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("a0.npy", _npy(arr))
        z.writestr(serialization.npz.SPEC_KEY + ".npy",
                   _spec({"list": [{"tensor": 0}] * 100 + [{"ndarray": 0}] * 100}))
    data = buf.getvalue()
    assert len(data) < 8 * 1024
    got, peak = _peak(lambda: ft.load(io.BytesIO(data)))
    assert len(got) == 200 and all(t is got[0] for t in got[:100])
    assert all(a is got[100] for a in got[100:])
    assert got[0].dtype == ft.float64 and got[0].shape == (MiB // 2,)
    assert peak < 2 * 4 * MiB + 3 * MiB, peak         # the member and one native copy


def test_a_torch_storage_referred_to_100_times_is_read_once():
    """PyTorch's format: 100 tensors rebuilt from one compressed 4 MiB storage are views of
    one array (big-endian: one swapped copy), not 100 copies."""
    base = ft.zeros(MiB)
    buf = io.BytesIO()
    ft.save([base[i:] for i in range(100)], buf)          # one storage, 100 views of it
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as z:
        members = {n: z.read(n) for n in z.namelist()}
    assert sum(n.startswith("archive/data/") for n in members) == 1
    for order in (b"little", b"big"):
        members["archive/byteorder"] = order
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            for n, d in members.items():
                z.writestr(n, d)
        data = out.getvalue()
        assert len(data) < 16 * 1024
        got, peak = _peak(lambda: ft.load(io.BytesIO(data)))
        assert len(got) == 100 and got[99].shape == (MiB - 99,)
        assert np.shares_memory(got[0].numpy(), got[99].numpy())
        copies = 1 if order == b"little" else 2     # the storage (and its native copy)
        assert peak < copies * 4 * MiB + 3 * MiB, (order, peak)


# ---------------------------------------------------------------- compressed members

def test_a_deflate_bomb_is_refused_before_inflating():
    """The issue's bomb: ~530 KB that inflate to a 512 MiB array (+1,086 MB peak before)."""
    stream, crc = _deflate_bomb(512)
    header = _npy_header(512 * MiB - 128)
    data = _zip([("a0.npy", header + stream, zipfile.ZIP_DEFLATED, 512 * MiB, crc)])
    assert len(data) < 600 * 1024
    err, peak = _peak(lambda: ft.load(io.BytesIO(data)))
    assert isinstance(err, CheckpointError), err
    msg = str(err)
    assert "'a0.npy'" in msg and str(512 * MiB) in msg and str(len(header + stream)) in msg
    assert "ft.serialization.MAX_INFLATED_BYTES = 536870912" in msg
    assert peak < 4 * MiB, peak


def test_the_inflation_limit_can_be_raised(monkeypatch):
    arr = np.zeros(2 * MiB, np.uint8)
    buf = io.BytesIO()
    np.savez_compressed(buf, w=arr)
    data = buf.getvalue()
    monkeypatch.setattr(serialization, "MAX_INFLATED_BYTES", MiB)
    with pytest.raises(CheckpointError, match=r"'w.npy' declares 2097280 bytes when inflated"):
        ft.load(io.BytesIO(data))
    monkeypatch.setattr(serialization, "MAX_INFLATED_BYTES", 4 * MiB)
    assert ft.load(io.BytesIO(data))["w"].shape == (2 * MiB,)


def test_a_member_that_inflates_past_its_declared_size_yields_only_that():
    """A bomb that declares 1 MiB: reading stops at the declared size (and the CRC, taken
    over the whole stream, does not match), so memory stays bounded by the declaration."""
    stream, crc = _deflate_bomb(256)
    header = _npy_header(MiB - 128)
    data = _zip([("a0.npy", header + stream, zipfile.ZIP_DEFLATED, MiB, crc)])
    err, peak = _peak(lambda: ft.load(io.BytesIO(data)))
    assert isinstance(err, CheckpointError) and "damaged" in str(err), err
    assert peak < 6 * MiB, peak


# ---------------------------------------------------------------- the member table

def test_two_members_with_the_same_name_are_refused():
    spec = _spec({"tensor": 0})
    for members in ([_stored("a0.npy", _npy(np.ones(2))), _stored("a0.npy", _npy(np.zeros(2))),
                     _stored(serialization.npz.SPEC_KEY + ".npy", spec)],
                    [_stored("archive/data.pkl", b"\x80\x02K\x01."),
                     _stored("archive/data.pkl", b"\x80\x02K\x02.")]):
        with pytest.raises(CheckpointError, match="two members are named"):
            ft.load(io.BytesIO(_zip(members)))


def test_a_directory_pointing_100_times_at_one_member_is_refused():
    """100 directory entries (a0 ... a99) all pointing at one 1 MiB member."""
    member = _stored("a0.npy", _npy(np.zeros(MiB // 8)))
    data = _zip([member], [(f"a{i}.npy", 0) for i in range(100)])
    err, peak = _peak(lambda: ft.load(io.BytesIO(data)))
    assert isinstance(err, CheckpointError) and "overlaps member" in str(err), err
    assert peak < MiB, peak


def test_a_member_inside_another_is_refused():
    """The "overlapping files" zip bomb: B's local header and data lie inside A's data."""
    inner = _npy(np.zeros(1000))
    b_local = _local("b.npy", inner, 0, len(inner), zlib.crc32(inner))
    a = _stored("a.npy", b_local)
    data = _zip([a])
    cd_at = data.index(b"PK\x01\x02")
    b_entry = _central("b.npy", 30 + len("a.npy"), 0, len(inner), len(inner), zlib.crc32(inner))
    cd = data[cd_at:data.index(b"PK\x05\x06")] + b_entry
    data = data[:cd_at] + cd + struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 2, 2, len(cd),
                                           cd_at, 0)
    with pytest.raises(CheckpointError, match="'a.npy'.* overlaps member 'b.npy'"):
        ft.load(io.BytesIO(data))


def test_a_stored_member_larger_than_the_file_is_refused():
    member = list(_stored("a0.npy", _npy(np.zeros(4))))
    data = bytearray(_zip([tuple(member)]))
    cd_at = data.index(b"PK\x01\x02")
    data[cd_at + 20:cd_at + 28] = struct.pack("<II", 2 ** 31, 2 ** 31)    # both sizes: 2 GiB
    err, peak = _peak(lambda: ft.load(io.BytesIO(bytes(data))))
    assert isinstance(err, CheckpointError) and "runs into the zip directory" in str(err), err
    assert peak < MiB
