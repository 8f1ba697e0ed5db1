"""Checkpoints move between PyTorch and functrans: torch.load(weights_only=True) reads what
ft.save writes, ft.load reads what torch.save writes (oracle extra: needs torch)."""
import io
import os

import numpy as np
import pytest

import functrans as ft
from functrans.serialization import CheckpointError

torch = pytest.importorskip("torch")

X = np.random.default_rng(0).standard_normal((16, 4)).astype(np.float32)
Y = np.random.default_rng(1).integers(0, 3, 16)


def _models():
    ft.manual_seed(0)
    fm = ft.nn.Sequential(ft.nn.Linear(4, 8), ft.nn.BatchNorm1d(8), ft.nn.ReLU(),
                          ft.nn.Linear(8, 3))
    tm = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(),
                             torch.nn.Linear(8, 3))
    with torch.no_grad():
        for (_, p), (_, q) in zip(fm.named_parameters(), tm.named_parameters()):
            q.copy_(torch.from_numpy(p.detach().numpy().copy()))
    return fm, tm


def _optimizer(lib, params, kind):
    if kind == "sgd":
        return lib.optim.SGD(params, lr=0.1, momentum=0.9)
    if kind == "adadelta":                  # mnist/main.py's
        return lib.optim.Adadelta(params, lr=1.0)
    if kind == "adamw":                     # word_language_model --use-optimizer
        return lib.optim.AdamW(params, lr=0.01)
    return lib.optim.Adam(params, lr=0.01, betas=(0.5, 0.999))   # dcgan's betas


def _step(lib, model, opt, steps=1):
    x, y = lib.tensor(X), lib.tensor(Y)
    for _ in range(steps):
        opt.zero_grad()
        lib.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


def _step_with_fixed_grads(lib, model, opt):
    """One more step from the same gradients in both libraries (loss gradients near zero
    would make Adam's step depend on their rounding)."""
    rng = np.random.default_rng(2)
    for p in model.parameters():
        p.grad = lib.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32))
    opt.step()


def _same(a, b, where="obj"):
    """a (functrans) and b (torch) hold the same structure and bitwise the same tensors."""
    if isinstance(a, ft.Tensor):
        assert isinstance(b, torch.Tensor), where
        bn = b.detach().numpy()
        assert a.dtype == bn.dtype and tuple(a.shape) == tuple(bn.shape), where
        assert a.detach().numpy().tobytes() == bn.tobytes(), where
        assert a.requires_grad == b.requires_grad, where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), where
        for k in a:
            _same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        kinds = {ft.Size: torch.Size}
        assert kinds.get(type(a), type(a)) is type(b) and len(a) == len(b), where
        for i, (u, v) in enumerate(zip(a, b)):
            _same(u, v, f"{where}[{i}]")
    else:
        assert type(a) is type(b) and (a == b or a != a and b != b), (where, a, b)


def _params_close(fm, tm):
    for p, q in zip(fm.parameters(), tm.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


KINDS = ["sgd", "adam", "adadelta", "adamw"]


@pytest.mark.parametrize("kind", KINDS)
def test_torch_loads_what_ft_saves(kind):
    fm, tm = _models()
    fo = _optimizer(ft, fm.parameters(), kind)
    _step(ft, fm, fo, 3)
    buf = io.BytesIO()
    ft.save({"model": fm.state_dict(), "optim": fo.state_dict(), "epoch": 3}, buf)
    buf.seek(0)
    got = torch.load(buf, weights_only=True)
    _same({"model": fm.state_dict(), "optim": fo.state_dict(), "epoch": 3}, got)
    tm.load_state_dict(got["model"])
    to = _optimizer(torch, tm.parameters(), kind)
    to.load_state_dict(got["optim"])
    _step_with_fixed_grads(ft, fm, fo)      # training goes on alike in both libraries
    _step_with_fixed_grads(torch, tm, to)
    _params_close(fm, tm)


@pytest.mark.parametrize("kind", KINDS)
def test_ft_loads_what_torch_saves_and_saves_it_back(kind):
    fm, tm = _models()
    to = _optimizer(torch, tm.parameters(), kind)
    _step(torch, tm, to, 3)
    buf = io.BytesIO()
    torch.save({"model": tm.state_dict(), "optim": to.state_dict()}, buf)
    buf.seek(0)
    got = ft.load(buf)
    _same(got, {"model": tm.state_dict(), "optim": to.state_dict()})
    fm.load_state_dict(got["model"])
    fo = _optimizer(ft, fm.parameters(), kind)
    fo.load_state_dict(got["optim"])
    _step_with_fixed_grads(ft, fm, fo)
    _step_with_fixed_grads(torch, tm, to)
    _params_close(fm, tm)
    again = io.BytesIO()                    # and back to PyTorch, bitwise
    ft.save(got, again)
    again.seek(0)
    _same(got, torch.load(again, weights_only=True))


def test_four_dimensional_weights_and_long_tuples_reach_torch():
    # a convolution's weight has a 4-item size and stride, which the pickle writes as a
    # tuple after a MARK (tuples of 0 to 3 items have opcodes of their own): without the
    # MARK, torch.load failed on every Conv2d state_dict ("pop from empty list")
    conv = ft.nn.Conv2d(2, 3, 3)
    obj = {"model": conv.state_dict(), "t": (1, 2, 3, 4, 5), "x": ft.ones(1, 2, 3, 4, 5),
           "nested": [(1, (2, 3, 4, 5), "a")]}
    buf = io.BytesIO()
    ft.save(obj, buf)
    buf.seek(0)
    got = torch.load(buf, weights_only=True)
    _same(obj, got)
    assert got["x"].stride() == (120, 60, 20, 5, 1)


def test_a_step_lr_schedule_crosses_both_ways():
    # mnist/main.py's StepLR beside Adadelta: the scheduler's state_dict (its last_epoch,
    # _last_lr, ...) moves with the optimizer's and the schedule goes on alike
    fm, tm = _models()
    fo, to = _optimizer(ft, fm.parameters(), "adadelta"), _optimizer(torch, tm.parameters(),
                                                                      "adadelta")
    fs = ft.optim.lr_scheduler.StepLR(fo, step_size=1, gamma=0.7)
    ts = torch.optim.lr_scheduler.StepLR(to, step_size=1, gamma=0.7)
    for _ in range(2):
        _step(ft, fm, fo)
        fs.step()
    buf = io.BytesIO()
    ft.save({"optim": fo.state_dict(), "sched": fs.state_dict()}, buf)
    buf.seek(0)
    got = torch.load(buf, weights_only=True)
    to.load_state_dict(got["optim"])
    ts.load_state_dict(got["sched"])
    ts.step()
    fs.step()
    assert ts.get_last_lr() == fs.get_last_lr() and ts.last_epoch == fs.last_epoch == 3
    buf = io.BytesIO()
    torch.save({"optim": to.state_dict(), "sched": ts.state_dict()}, buf)
    buf.seek(0)
    back = ft.load(buf)
    fo2 = _optimizer(ft, fm.parameters(), "adadelta")
    fo2.load_state_dict(back["optim"])
    fs2 = ft.optim.lr_scheduler.StepLR(fo2, step_size=1, gamma=0.7)
    fs2.load_state_dict(back["sched"])
    assert fs2.state_dict() == fs.state_dict()
    assert fo2.param_groups[0]["lr"] == to.param_groups[0]["lr"]


def test_every_dtype_and_shared_storages_cross_both_ways():
    rng = np.random.default_rng(0)
    base = torch.arange(12.0)
    obj = {"base": base, "view": base[2:8].view(2, 3), "t": base.view(3, 4).t(),
           "p": torch.nn.Parameter(torch.ones(2)), "frozen": torch.ones(2).requires_grad_(),
           "f16": torch.tensor([1.5, -np.inf, np.nan], dtype=torch.float16),
           "f64": torch.tensor([np.pi]), "c64": torch.tensor([1 + 2j]),
           "c128": torch.tensor([1 + 2j], dtype=torch.complex128),
           "bool": torch.tensor([True, False]), "empty": torch.zeros(0, 3),
           "scalar": torch.tensor(7), "size": torch.Size([2, 3])}
    for dt in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        info = np.iinfo(dt)
        obj[dt] = torch.from_numpy(np.array([info.min, info.max, 1], dt))
    obj["f32"] = torch.from_numpy(rng.standard_normal(5).astype(np.float32))
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    got = ft.load(buf)
    _same(got, obj)
    assert isinstance(got["p"], ft.nn.Parameter) and isinstance(got["size"], ft.Size)
    shared = [got[k].numpy() for k in ("base", "view", "t")]
    assert all(np.shares_memory(shared[0], a) for a in shared[1:])
    out = io.BytesIO()
    ft.save(got, out)
    out.seek(0)
    back = torch.load(out, weights_only=True)
    _same(got, back)
    ptr = back["base"].untyped_storage().data_ptr()
    assert all(back[k].untyped_storage().data_ptr() == ptr for k in ("view", "t"))
    assert back["view"].storage_offset() == 2 and back["t"].stride() == (1, 4)


def test_refused_pytorch_files_say_why(tmp_path):
    buf = io.BytesIO()
    torch.save({"w": torch.ones(2, dtype=torch.bfloat16)}, buf)
    buf.seek(0)
    with pytest.raises(CheckpointError, match="functrans has no bfloat16 dtype"):
        ft.load(buf)
    buf = io.BytesIO()
    torch.save(torch.nn.Linear(2, 2), buf)              # a whole module: its class
    buf.seek(0)
    with pytest.raises(CheckpointError, match="torch.nn.modules.linear.Linear"):
        ft.load(buf)
    buf = io.BytesIO()
    torch.save({"w": torch.ones(2)}, buf, _use_new_zipfile_serialization=False)
    buf.seek(0)
    with pytest.raises(CheckpointError, match="looks like a pickle"):
        ft.load(buf)
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))
    buf = io.BytesIO()
    torch.save({"w": torch.ones(2), "x": Evil()}, buf)
    buf.seek(0)
    with pytest.raises(CheckpointError, match="names the global posix.system"):
        ft.load(buf)
    assert not marker.exists()
