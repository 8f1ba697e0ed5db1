"""ft.save / ft.load: state dicts in PyTorch's format (the default) or functrans's .npz, which
loading never executes (no pickle)."""
import io
import zipfile

import numpy as np
import pytest

import functrans as ft
import functrans.nn as nn


def num(t):
    return t.detach().numpy()


def _model(seed):
    ft.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))


def test_model_state_dict_round_trip(tmp_path):
    a, b = _model(0), _model(1)
    a(ft.randn(5, 3))                                     # move the running statistics
    path = tmp_path / "model.pt"
    ft.save(a.state_dict(), path)
    assert path.exists() and not (tmp_path / "model.pt.npz").exists()
    sd = ft.load(path)
    assert list(sd) == list(a.state_dict())
    assert sd["1.num_batches_tracked"].dtype == ft.int64
    b.load_state_dict(sd)
    for (k, v), (k2, w) in zip(a.state_dict().items(), b.state_dict().items()):
        assert k == k2 and v.dtype == w.dtype
        np.testing.assert_array_equal(num(v), num(w))
    x = ft.randn(2, 3)
    a.eval(), b.eval()
    np.testing.assert_array_equal(num(a(x)), num(b(x)))


def test_optimizer_state_dict_round_trip(tmp_path):
    m = _model(0)
    opt = ft.optim.Adam(m.parameters(), lr=0.01, betas=(0.8, 0.9), amsgrad=True)
    m(ft.randn(4, 3)).sum().backward()
    opt.step()
    buf = io.BytesIO()
    ft.save(opt.state_dict(), buf)
    buf.seek(0)
    sd = ft.load(buf)
    ref = opt.state_dict()
    assert sd["param_groups"][0]["betas"] == (0.8, 0.9)       # tuples stay tuples
    assert sd["param_groups"][0]["amsgrad"] is True and sd["param_groups"][0]["foreach"] is None
    assert sd["param_groups"][0]["params"] == ref["param_groups"][0]["params"]
    assert set(sd["state"]) == set(ref["state"])               # int keys stay ints
    for i, st in ref["state"].items():
        for k, v in st.items():
            np.testing.assert_array_equal(num(sd["state"][i][k]), num(v))
    m2 = _model(0)
    opt2 = ft.optim.Adam(m2.parameters())
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == 0.01


def test_nested_python_values_round_trip(tmp_path):
    obj = {"epoch": 3, "loss": 0.25, "best": float("inf"), "name": "run", "flags": [True, None],
           "nested": {"arr": np.arange(4, dtype=np.int16), "t": ft.tensor([1.5, 2.5])},
           "param": nn.Parameter(ft.ones(2))}
    ft.save(obj, tmp_path / "ckpt", format="npz")
    back = ft.load(tmp_path / "ckpt")
    assert back["epoch"] == 3 and isinstance(back["epoch"], int)
    assert back["loss"] == 0.25 and back["best"] == float("inf") and back["name"] == "run"
    assert back["flags"] == [True, None]
    assert back["nested"]["arr"].dtype == np.int16 and back["nested"]["arr"].tolist() == [0, 1,
                                                                                         2, 3]
    assert isinstance(back["nested"]["t"], ft.Tensor) and back["nested"]["t"].tolist() == [1.5,
                                                                                          2.5]
    assert isinstance(back["param"], nn.Parameter) and back["param"].requires_grad


def test_the_file_is_a_plain_npz_without_object_arrays(tmp_path):
    ft.save({"w": ft.ones(2, 2)}, tmp_path / "f.npz", format="npz")
    with np.load(tmp_path / "f.npz", allow_pickle=False) as data:
        assert all(data[k].dtype != object for k in data.files)
    with zipfile.ZipFile(tmp_path / "f.npz") as z:
        assert all(n.endswith(".npy") for n in z.namelist())


def test_loading_never_unpickles(tmp_path):
    """A file carrying an object array (which np.load would unpickle, running code) is refused."""
    path = tmp_path / "evil.npz"

    class Boom:
        def __reduce__(self):
            return (print, ("this would run on load",))
    np.savez(path, payload=np.array([Boom()], dtype=object))
    with pytest.raises(ft.CheckpointError, match="object array") as info:
        ft.load(path)                     # a ValueError; no hint at an allow_pickle option
    assert isinstance(info.value, ValueError) and "allow_pickle" not in str(info.value)


def test_plain_npz_loads_as_a_dict_of_tensors(tmp_path):
    np.savez(tmp_path / "plain.npz", a=np.arange(3.0), b=np.eye(2, dtype=np.float32))
    d = ft.load(tmp_path / "plain.npz")
    assert sorted(d) == ["a", "b"] and isinstance(d["a"], ft.Tensor)
    assert d["a"].dtype == ft.float64 and d["b"].tolist() == [[1, 0], [0, 1]]


def test_unsupported_values_are_refused(tmp_path):
    with pytest.raises(TypeError, match="cannot save object"):
        ft.save({"x": object()}, tmp_path / "x")
    with pytest.raises(TypeError, match="dtype object"):
        ft.save({"x": np.array([1, "a"], dtype=object)}, tmp_path / "x", format="npz")
    with pytest.raises(TypeError, match="format='npz'"):      # PyTorch's format: no NumPy
        ft.save({"x": np.arange(3)}, tmp_path / "x")
    with pytest.raises(ValueError, match="unknown format 'pt'"):
        ft.save({}, tmp_path / "x", format="pt")
    with pytest.raises(TypeError, match="only str and int keys"):
        ft.save({(1, 2): 3}, tmp_path / "x", format="npz")
    with pytest.raises(TypeError, match="keys are strings, numbers, None or tuples"):
        ft.save({ft.ones(1): 3}, tmp_path / "x")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("fmt", ["torch", "npz"])
def test_nested_values_round_trip_in_both_formats(tmp_path, fmt):
    p = nn.Parameter(ft.ones(2))
    t = ft.tensor([1.5, 2.5])
    obj = {"epoch": 3, "loss": 0.25, "best": float("inf"), "name": "run", "flags": [True, None],
           "big": 2 ** 70, "neg": -(2 ** 40), "t": t, "again": t, "param": p,
           "frozen": nn.Parameter(ft.zeros(1), requires_grad=False),
           "leaf": ft.ones(2).requires_grad_(), "shape": ft.Size([2, 3]), 7: (1, 2, 3, 4, 5)}
    ft.save(obj, tmp_path / "ckpt", format=fmt)
    back = ft.load(tmp_path / "ckpt")
    assert list(back) == list(obj)
    for k in ("epoch", "loss", "best", "name", "flags", "big", "neg", 7):
        assert back[k] == obj[k] and type(back[k]) is type(obj[k])
    assert back["again"] is back["t"]                     # one tensor saved twice: one tensor
    assert isinstance(back["param"], nn.Parameter) and back["param"].requires_grad
    assert isinstance(back["frozen"], nn.Parameter) and not back["frozen"].requires_grad
    assert back["leaf"].requires_grad and not isinstance(back["leaf"], nn.Parameter)
    assert tuple(back["shape"]) == (2, 3)
    if fmt == "torch":
        assert isinstance(back["shape"], ft.Size)


class _Net(nn.Module):
    """A user's model class, as word_language_model's RNNModel (module level: saved by name)."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(3, 4)
        self.head = nn.Linear(4, 2)
        self.act = ft.nn.functional.relu
        self.tag = {"kind": "gru", "sizes": (3, 4), "seen": {1, 2}}

    def forward(self, x):
        return self.act(self.head(self.rnn(x)[0]))


def test_whole_module_saved_as_plain_data_and_loaded_with_safe_globals(tmp_path):
    """torch.save(model) / torch.load under safe_globals (word_language_model's --save): the
    module is written as its classes by name and its attributes; ft.load refuses the
    classes until they are allowlisted, then rebuilds the module without running its code
    (no __init__), and the loaded module computes the same, trains and takes hooks."""
    model = _Net()
    x = ft.randn(5, 1, 3)
    ft.save(model, tmp_path / "m.pt")
    with pytest.raises(ft.CheckpointError, match=r"_Net.*add_safe_globals"):
        ft.load(tmp_path / "m.pt")
    allowed = [_Net, nn.GRU, nn.Linear, ft.nn.functional.relu]
    with ft.serialization.safe_globals(allowed):
        back = ft.load(tmp_path / "m.pt")
    assert type(back) is _Net and back.act is ft.nn.functional.relu
    assert back.tag == model.tag and back.rnn.weight_ih_l0 is not model.rnn.weight_ih_l0
    assert isinstance(back.rnn.weight_ih_l0, nn.Parameter)
    assert (back(x) == model(x)).all()
    calls = []
    back.register_forward_hook(lambda m, i, o: calls.append(o.shape)).remove()
    back.head.register_forward_hook(lambda m, i, o: calls.append(tuple(o.shape)))
    back(x).sum().backward()
    assert calls == [(5, 1, 2)] and back.head.weight.grad is not None
    with pytest.raises(TypeError, match=r"ft.save\(model.state_dict\(\), path\)"):
        ft.save({"model": model}, tmp_path / "m.npz", format="npz")    # npz: arrays only
    opt = ft.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match=r"ft.save\(optimizer.state_dict\(\), path\)"):
        ft.save(opt, tmp_path / "o.pt")
    local = nn.Linear(2, 2)
    local.fn = lambda t: t
    with pytest.raises(TypeError, match="cannot be found again by its name"):
        ft.save(local, tmp_path / "l.pt")
    assert not (tmp_path / "o.pt").exists() and not (tmp_path / "l.pt").exists()
