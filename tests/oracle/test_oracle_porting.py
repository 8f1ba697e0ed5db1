"""The names PyTorch programs reach for before they train, against PyTorch: the device
selection of pytorch/examples (`torch.accelerator`), `import torch.onnx`, the module paths
programs name classes by (`torch.nn.modules.sparse.Embedding` in word_language_model's
safe_globals), `flatten_parameters()` after loading an RNN, and what a missing `nn` name
says. Each case runs the same function with `torch` and with `functrans` and compares
(oracle.case; an error by type and message)."""
import importlib
import io
import traceback
import types

import pytest

import oracle
from oracle import compare, ft, torch


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the error is the result being compared
        return type(e).__name__, str(e).split(" (functrans")[0]
    return "ok"


def _accelerator(L):
    """What mnist/main.py, word_language_model and dcgan call to pick a device, and what the
    device-only calls do without an accelerator."""
    A = L.accelerator
    device = A.current_accelerator() if A.is_available() else L.device("cpu")
    return {"is_available": A.is_available(), "current": A.current_accelerator(),
            "checked": A.current_accelerator(check_available=True),
            "count": A.device_count(), "device": str(device),
            "index": _error(A.current_device_index), "synchronize": _error(A.synchronize),
            "set_index": _error(lambda: A.set_device_index(0)),
            "empty_cache": _error(A.empty_cache),
            "device_index_none": _error(lambda: A.device_index(None).__enter__())}


def accelerator_case():
    if ft.cuda.is_available():      # torch here is a CPU build: compare with what CUDA gives
        assert ft.accelerator.current_accelerator() == ft.device("cuda")
        assert ft.accelerator.device_count() == ft.cuda.device_count()
        return
    compare(_accelerator(ft), _accelerator(torch), "accelerator")


def onnx_case():
    """`import torch.onnx` and the query models make; export itself refuses, saying what
    to do (PyTorch exports)."""
    onnx = importlib.import_module("functrans.onnx")
    assert onnx.is_in_onnx_export() is torch.onnx.is_in_onnx_export() is False
    with pytest.raises(NotImplementedError, match=r"cannot export to ONNX.*ft\.save\(model"
                                                  r"\.state_dict\(\), path\).*torch\.onnx"
                                                  r"\.export"):
        onnx.export(ft.nn.Linear(2, 2), (ft.zeros(1, 2),), "model.onnx")


def module_paths_case():
    """Every torch.nn class functrans has too is reachable by torch's module path
    (`nn.modules.<file>.<Class>`, `nn.parameter.Parameter`) as the same class."""
    missing = []
    for name in sorted(set(dir(ft.nn)) & set(dir(torch.nn))):
        cls = getattr(torch.nn, name)
        if name.startswith("_") or not isinstance(cls, type):
            continue
        path = "functrans." + cls.__module__.split(".", 1)[1]    # torch.nn.modules.sparse
        try:            # by import: nn.parallel.data_parallel is also a function's name
            ours = importlib.import_module(path)
        except ImportError:
            ours = None
        if getattr(ours, name, None) is not getattr(ft.nn, name):
            missing.append(f"{cls.__module__}.{name}")
    assert not missing, f"not reachable by torch's module path: {missing}"
    assert ft.nn.parameter.Parameter is ft.nn.Parameter


def _flatten(L):
    """flatten_parameters() returns None and changes no output (word_language_model calls it
    after torch.load)."""
    L.manual_seed(0)
    out = []
    for rnn in (L.nn.LSTM(3, 4, 2), L.nn.GRU(3, 4), L.nn.RNN(3, 4, nonlinearity="relu")):
        rnn.double()
        x = L.ones(2, 1, 3, dtype=L.float64)
        before = rnn(x)[0]
        out.append((rnn.flatten_parameters(), bool((rnn(x)[0] == before).all())))
    return out


def nn_names_case():
    """A missing nn name raises AttributeError, and nothing Python could suggest instead is
    a submodule: asked for a class, the user must not be pointed to the module
    'transformer'."""
    allowed = {"functional", "init", "utils", "modules", "parallel", "parameter", "functions",
               "initializers"}       # (jax.nn.initializers)
    modules = sorted(n for n in dir(ft.nn) if not n.startswith("_")
                     and isinstance(getattr(ft.nn, n), types.ModuleType))
    assert set(modules) <= allowed, f"submodules listed by dir(ft.nn): {modules}"
    for lib in (ft, torch):
        with pytest.raises(AttributeError) as e:
            lib.nn.Transformerr  # noqa: B018
        shown = "".join(traceback.format_exception_only(e.type, e.value))
        assert "'transformer'" not in shown, shown


_QUERIES = ("is_cpu", "is_cuda", "is_xpu", "is_mps", "is_meta", "is_xla", "is_ipu", "is_mtia",
            "is_maia", "is_vulkan", "is_sparse", "is_sparse_csr", "is_quantized", "is_nested",
            "is_mkldnn")


def _device_queries(L):
    """A CPU tensor's device and layout queries (dcgan: `input.is_cuda or input.is_xpu`)."""
    x = L.ones(2, requires_grad=True)
    return {(kind, q): getattr(t, q) for kind, t in (("leaf", x), ("result", x * 2),
                                                      ("parameter", L.nn.Parameter(L.ones(1))))
            for q in _QUERIES}


_LEGACY = ("FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor",
           "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor")


def _legacy_types(L):
    """The legacy tensor types: constructors from a size, a Size, data and a tensor, the
    isinstance checks old programs make, `t.type(L.LongTensor)`, and the errors."""
    out = {}
    x, p = L.ones(2, 3), L.nn.Parameter(L.ones(2, dtype=L.float64))
    for name in _LEGACY:
        T = getattr(L, name)
        out[name] = (T(2, 3).shape, T(L.Size([4])).shape, T().shape, T([1, 0, 1]).tolist(),
                     T([1, 0]).dtype, isinstance(x, T), isinstance(p, T),
                     isinstance(x.long(), T), x.type(T).dtype,
                     _error(lambda: T(2.5)), _error(lambda: T("a")))
    same = L.tensor([1, 2])
    L.LongTensor(same)[0] = 7             # an alias of the tensor
    out["same_tensor"] = same.tolist()
    out["other_dtype"] = _error(lambda: L.FloatTensor(L.ones(2, dtype=L.float64)))[0]
    out["subclass"] = issubclass(L.FloatTensor, L.Tensor)
    return out


def _data_parallel(L):
    """nn.DataParallel on a CPU (torch runs the module itself): outputs, state_dict keys,
    the wrapped module, and gradients through it."""
    net = L.nn.Sequential(L.nn.Linear(3, 4), L.nn.Tanh(), L.nn.Linear(4, 2)).double()
    with L.no_grad():
        for i, w in enumerate(net.parameters()):
            w.copy_(L.arange(w.numel(), dtype=L.float64).reshape(w.shape) / 10 - 0.3 * i)
    dp = L.nn.DataParallel(net)
    x = L.arange(6, dtype=L.float64).reshape(2, 3) / 6
    y = dp(x)
    y.sum().backward()
    return (y, list(dp.state_dict()), dp.module is net, net[0].weight.grad,
            type(dp).__module__.split(".", 1)[1])


def _lm_class(L, name):
    """word_language_model's RNNModel, cut down (encoder, dropout, recurrent layer, decoder
    with tied weights), as a module-level class of library L: torch.save pickles it by name."""
    class LM(L.nn.Module):
        def __init__(self, kind, ntoken=7, ninp=4):
            super().__init__()
            self.drop = L.nn.Dropout(0.2)
            self.encoder = L.nn.Embedding(ntoken, ninp)
            self.rnn = getattr(L.nn, kind)(ninp, ninp, 2)
            self.decoder = L.nn.Linear(ninp, ntoken)
            self.decoder.weight = self.encoder.weight
            self.kind = kind

        def forward(self, tokens):
            out, hidden = self.rnn(self.drop(self.encoder(tokens)))
            return L.nn.functional.log_softmax(self.decoder(self.drop(out)), dim=-1), hidden
    LM.__name__ = LM.__qualname__ = name
    return LM


TorchLM, FtLM = _lm_class(torch, "TorchLM"), _lm_class(ft, "FtLM")


def _save_load_whole_model(L, cls, kind):
    """main.py's `torch.save(model, f)` and `torch.load(f)` under `safe_globals`, then one
    evaluation and one training step of the loaded model (weights set alike in both)."""
    model = cls(kind).double()
    with L.no_grad():
        for i, (_, w) in enumerate(sorted(model.named_parameters())):
            w.copy_(L.sin(L.arange(w.numel(), dtype=L.float64).reshape(w.shape) + i) / 2)
    buf = io.BytesIO()
    L.save(model, buf)
    buf.seek(0)
    with L.serialization.safe_globals([cls, L.nn.Dropout, L.nn.Embedding, L.nn.Linear,
                                       getattr(L.nn, kind)]):
        back = L.load(buf)
    back.rnn.flatten_parameters()
    back.eval()
    tokens = L.tensor([[1, 2], [3, 4], [5, 6]])
    out, hidden = back(tokens)
    loss = L.nn.functional.nll_loss(out.view(-1, 7), tokens.view(-1))
    loss.backward()
    return (out, hidden, loss, back.encoder.weight.grad, back.decoder.weight is
            back.encoder.weight, type(back) is cls, back.kind)


def _save_load_transformer(L):
    """word_language_model's Transformer branch: the allowlist names F.relu (the layers'
    `activation` attribute) and the attention's classes."""
    L.manual_seed(0)
    enc = L.nn.TransformerEncoder(L.nn.TransformerEncoderLayer(4, 2, 8, 0.0), 2,
                                  enable_nested_tensor=False).double()
    with L.no_grad():
        for i, (_, w) in enumerate(sorted(enc.named_parameters())):
            w.copy_(L.cos(L.arange(w.numel(), dtype=L.float64).reshape(w.shape) + i) / 3)
    buf = io.BytesIO()
    L.save(enc, buf)
    buf.seek(0)
    M = L.nn.modules
    with L.serialization.safe_globals([
            L.nn.functional.relu, M.activation.MultiheadAttention, M.container.ModuleList,
            M.dropout.Dropout, M.linear.Linear, M.linear.NonDynamicallyQuantizableLinear,
            M.normalization.LayerNorm, M.transformer.TransformerEncoder,
            M.transformer.TransformerEncoderLayer]):
        back = L.load(buf)
    x = L.linspace(-1, 1, 24, dtype=L.float64).reshape(3, 2, 4)
    mask = L.nn.Transformer.generate_square_subsequent_mask(3).double()
    return back(x, mask), back.layers[0].activation is L.nn.functional.relu


def _whole_model_case(kind):
    return lambda: compare(_save_load_whole_model(ft, FtLM, kind),
                           _save_load_whole_model(torch, TorchLM, kind), "lm", grad_fn=False)


CASES = {
    **{f"porting:save_whole_model_{k}": _whole_model_case(k) for k in ("LSTM", "GRU", "RNN")},
    "porting:save_whole_model_Transformer": lambda: compare(
        _save_load_transformer(ft), _save_load_transformer(torch), "encoder", grad_fn=False),
    "porting:legacy_tensor_types": lambda: compare(_legacy_types(ft), _legacy_types(torch),
                                                   "legacy"),
    "porting:data_parallel": lambda: compare(_data_parallel(ft), _data_parallel(torch),
                                             "data_parallel", grad_fn=False),
    "porting:tensor_device_queries": lambda: compare(_device_queries(ft),
                                                     _device_queries(torch), "queries"),
    "porting:accelerator": accelerator_case,
    "porting:onnx": onnx_case,
    "porting:nn_module_paths": module_paths_case,
    "porting:flatten_parameters": lambda: compare(_flatten(ft), _flatten(torch), "flatten"),
    "porting:nn_missing_name": nn_names_case,
}
oracle.register(*CASES)


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_porting(case_id):
    oracle.case(case_id, CASES[case_id])


def test_data_parallel_function_runs_module():
    """nn.parallel.data_parallel on functrans's one device calls the module (a CPU-only
    torch raises "device type could not be determined", so this is not an oracle case);
    several device ids are refused naming DistributedDataParallel."""
    net = ft.nn.Linear(3, 2)
    x = ft.ones(4, 3)
    assert (ft.nn.parallel.data_parallel(net, x) == net(x)).all()
    assert (ft.nn.parallel.data_parallel(net, (x,), module_kwargs={}) == net(x)).all()
    with pytest.raises(RuntimeError, match="DistributedDataParallel"):
        ft.nn.DataParallel(net, device_ids=[0, 1])
