"""ft.Tensor with PyTorch's semantics: creation, dtypes, repr, operators and methods,
views and version counters, in-place ops, indexing. Expected values by hand or NumPy."""
import warnings

import numpy as np
import pytest

import functrans as ft
from functrans.facade import grad_mode


@pytest.fixture(autouse=True)
def _modes_restored():
    before = (grad_mode.STATE.enabled, grad_mode.STATE.inference, ft.get_default_dtype())
    yield
    assert (grad_mode.STATE.enabled, grad_mode.STATE.inference, ft.get_default_dtype()) == before


def arr(t):
    return t.detach().numpy()


# ---------------------------------------------------------------------------
# creation and dtypes

def test_default_dtypes_follow_torch():
    assert ft.tensor([1.0, 2.0]).dtype == ft.float32
    assert ft.tensor([1, 2]).dtype == ft.int64
    assert ft.tensor([True]).dtype == ft.bool
    assert ft.tensor(np.array([1.0], np.float64)).dtype == ft.float64
    assert ft.zeros(2, 3).dtype == ft.float32 and ft.zeros(2, 3).shape == (2, 3)
    assert ft.arange(5).dtype == ft.int64 and ft.arange(0.0, 1.0, 0.25).dtype == ft.float32
    assert ft.full((2,), 3).dtype == ft.int64 and ft.full((2,), 3.0).dtype == ft.float32
    assert ft.ones((2, 2), dtype=ft.float64).dtype == ft.float64
    assert ft.eye(3).numpy().tolist() == np.eye(3).tolist()
    np.testing.assert_allclose(ft.linspace(0, 1, 5).numpy(), np.linspace(0, 1, 5))


def test_set_default_dtype():
    ft.set_default_dtype(ft.float64)
    try:
        assert ft.tensor([1.0]).dtype == ft.float64
        assert ft.randn(2).dtype == ft.float64
        assert (ft.tensor([1, 2]) * 0.5).dtype == ft.float64
    finally:
        ft.set_default_dtype(ft.float32)


def test_like_and_random_creation():
    x = ft.ones(2, 3, dtype=ft.float64)
    for f in (ft.zeros_like, ft.ones_like, ft.empty_like, ft.rand_like, ft.randn_like):
        y = f(x)
        assert y.shape == (2, 3) and y.dtype == ft.float64
    assert ft.full_like(x, 7).numpy().tolist() == [[7.0] * 3] * 2
    ft.manual_seed(3)
    a = ft.randn(4)
    ft.manual_seed(3)
    assert np.array_equal(a.numpy(), ft.randn(4).numpy())
    r = ft.randint(0, 5, (100,))
    assert r.dtype == ft.int64 and r.min().item() >= 0 and r.max().item() < 5
    u = ft.rand(1000)
    assert 0 <= u.min().item() and u.max().item() < 1
    assert sorted(ft.randperm(6).tolist()) == list(range(6))


def test_from_numpy_shares_memory_and_tensor_copies():
    a = np.zeros(3, np.float32)
    t = ft.from_numpy(a)
    a[0] = 5
    assert t[0].item() == 5
    t.add_(1)
    assert a.tolist() == [6, 1, 1]
    c = ft.tensor(a)
    a[1] = 9
    assert c[1].item() == 1


def test_repr_like_torch():
    assert repr(ft.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(ft.tensor([0.1, 2.5])) == "tensor([0.1000, 2.5000])"
    assert repr(ft.tensor(3.0)) == "tensor(3.)"
    assert repr(ft.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(ft.tensor([1.0], dtype=ft.float64)) == "tensor([1.], dtype=ft.float64)"
    x = ft.tensor([1.0, 2.0], requires_grad=True)
    assert repr(x) == "tensor([1., 2.], requires_grad=True)"
    assert repr(x * 2) == "tensor([2., 4.], grad_fn=<MulBackward0>)"
    assert repr(ft.ones(2, 2)) == "tensor([[1., 1.],\n        [1., 1.]])"


def test_item_tolist_numpy_array():
    t = ft.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert t.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert t[1, 0].item() == 3.0 and isinstance(t.sum().item(), float)
    assert np.asarray(t).tolist() == t.tolist()
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        t.item()
    g = ft.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"Can't call numpy\(\) on Tensor that requires grad. "
                                           r"Use tensor.detach\(\).numpy\(\) instead."):
        g.numpy()
    assert g.detach().numpy().tolist() == [1.0]
    assert float(ft.tensor(2.5)) == 2.5 and int(ft.tensor(3)) == 3


def test_shape_size_dim_numel():
    t = ft.zeros(2, 3, 4)
    assert t.shape == (2, 3, 4) and t.size() == (2, 3, 4) and t.size(1) == 3
    assert t.dim() == 3 and t.ndim == 3 and t.numel() == 24 and len(t) == 2
    assert t.element_size() == 4 and t.is_floating_point()
    assert str(t.device) == "cpu" and t.device.type == "cpu"


def test_to_and_dtype_conversions():
    t = ft.tensor([1.5, -2.5])
    assert t.double().dtype == ft.float64 and t.to(ft.float64).dtype == ft.float64
    assert t.long().tolist() == [1, -2] and t.int().dtype == ft.int32
    assert t.to("cpu") is t and t.cpu() is t
    assert t.to(ft.float32) is t
    x = ft.tensor([1.0, 2.0], requires_grad=True)
    y = x.double()
    assert y.grad_fn.name() == "ToCopyBackward0"
    y.sum().backward()
    assert x.grad.dtype == ft.float32 and x.grad.tolist() == [1.0, 1.0]


def test_cuda_without_cupy_is_a_clear_error():
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy is installed")
    except ImportError:
        pass
    with pytest.raises(RuntimeError, match="CuPy"):
        ft.ones(2).cuda()


# ---------------------------------------------------------------------------
# operators, promotion, methods

def test_torch_type_promotion():
    i = ft.tensor([1, 2])
    f = ft.tensor([1.0, 2.0])
    d = ft.tensor([1.0, 2.0], dtype=ft.float64)
    assert (i + f).dtype == ft.float32          # numpy would say float64
    assert (i * 2.5).dtype == ft.float32
    assert (i + 1).dtype == ft.int64
    assert (f + d).dtype == ft.float64
    assert (f + ft.tensor(1.0, dtype=ft.float64)).dtype == ft.float32   # zero-dim: lower priority
    assert (i / i).dtype == ft.float32 and (i / i).tolist() == [1.0, 1.0]
    assert (ft.tensor([True]) + 1).dtype == ft.int64
    assert (f > 1).dtype == ft.bool and (f > 1).tolist() == [False, True]
    assert (2 - f).tolist() == [1.0, 0.0] and (2 / f).tolist() == [2.0, 1.0]
    assert (2 ** f).tolist() == [2.0, 4.0] and (f ** 2).tolist() == [1.0, 4.0]
    assert (i // 2).tolist() == [0, 1] and (ft.tensor([-3, 3]) % 2).tolist() == [1, 1]
    assert (np.float32(2) * f).tolist() == [2.0, 4.0]
    assert (np.array([1.0, 1.0], np.float32) + f).tolist() == [2.0, 3.0]


@pytest.mark.parametrize("name,npf", [
    ("exp", np.exp), ("log", np.log), ("sin", np.sin), ("cos", np.cos), ("tanh", np.tanh),
    ("sqrt", np.sqrt), ("abs", np.abs), ("neg", np.negative), ("log1p", np.log1p),
    ("expm1", np.expm1), ("sigmoid", lambda x: 1 / (1 + np.exp(-x))), ("floor", np.floor),
    ("ceil", np.ceil), ("sign", np.sign), ("relu", lambda x: np.maximum(x, 0)),
    ("reciprocal", lambda x: 1 / x), ("square", np.square), ("rsqrt", lambda x: 1 / np.sqrt(x)),
    ("log2", np.log2), ("trunc", np.trunc), ("atan", np.arctan),
])
def test_unary_methods_match_numpy(name, npf):
    x = np.array([0.3, 1.7, 2.2], np.float64)
    got = getattr(ft.tensor(x), name)()
    np.testing.assert_allclose(got.numpy(), npf(x), rtol=1e-12)
    np.testing.assert_allclose(getattr(ft, name)(ft.tensor(x)).numpy(), npf(x), rtol=1e-12)


def test_reductions():
    a = np.arange(24, dtype=np.float64).reshape(2, 3, 4) - 7.5
    t = ft.tensor(a)
    np.testing.assert_allclose(t.sum().numpy(), a.sum())
    np.testing.assert_allclose(t.sum(1).numpy(), a.sum(1))
    np.testing.assert_allclose(t.sum((0, 2), keepdim=True).numpy(), a.sum((0, 2), keepdims=True))
    np.testing.assert_allclose(t.mean(-1).numpy(), a.mean(-1))
    np.testing.assert_allclose(t.var().numpy(), a.var(ddof=1))
    np.testing.assert_allclose(t.std(1, unbiased=False).numpy(), a.std(1))
    np.testing.assert_allclose(t.prod(2).numpy(), a.prod(2))
    np.testing.assert_allclose(t.logsumexp(1).numpy(), np.log(np.exp(a).sum(1)))
    np.testing.assert_allclose(t.norm().numpy(), np.linalg.norm(a))
    np.testing.assert_allclose(t.amax((0, 1)).numpy(), a.max((0, 1)))
    np.testing.assert_allclose(t.cumsum(2).numpy(), a.cumsum(2))
    v, i = t.max(1)
    np.testing.assert_allclose(v.numpy(), a.max(1))
    assert i.dtype == ft.int64 and i.numpy().tolist() == a.argmax(1).tolist()
    r = t.min(dim=2, keepdim=True)
    assert r.values.shape == (2, 3, 1) and r.indices.tolist() == a.argmin(2)[..., None].tolist()
    assert t.max().item() == a.max() and t.argmax().item() == a.argmax()
    assert ft.tensor([1, 2]).sum().dtype == ft.int64
    with pytest.raises(RuntimeError, match="mean\\(\\): could not infer output dtype"):
        ft.tensor([1, 2]).mean()


def test_shape_ops():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = ft.tensor(a)
    assert t.view(6, 4).shape == (6, 4) and t.view(-1).shape == (24,)
    assert t.reshape(4, -1).numpy().tolist() == a.reshape(4, -1).tolist()
    assert t.permute(2, 0, 1).numpy().tolist() == a.transpose(2, 0, 1).tolist()
    assert t.transpose(0, 2).shape == (4, 3, 2) and t[0].t().shape == (4, 3)
    assert t[0].T.numpy().tolist() == a[0].T.tolist()
    assert t.unsqueeze(1).shape == (2, 1, 3, 4) and t.unsqueeze(-1).shape == (2, 3, 4, 1)
    assert ft.zeros(1, 3, 1).squeeze().shape == (3,) and ft.zeros(1, 3).squeeze(1).shape == (1, 3)
    assert t.flatten().shape == (24,) and t.flatten(1).shape == (2, 12)
    assert ft.ones(3, 1).expand(3, 4).shape == (3, 4) and ft.ones(3, 1).expand(-1, 2).shape == (3, 2)
    assert t[:, :1].repeat(1, 2, 1).shape == (2, 2, 4)
    assert [c.shape for c in t.chunk(2, dim=2)] == [(2, 3, 2), (2, 3, 2)]
    assert [c.shape for c in t.split([1, 3], dim=2)] == [(2, 3, 1), (2, 3, 3)]
    assert ft.cat([t, t], 1).shape == (2, 6, 4) and ft.stack([t, t]).shape == (2, 2, 3, 4)
    assert [u.shape for u in t.unbind(1)] == [(2, 4)] * 3
    assert t.flip(0).numpy().tolist() == a[::-1].tolist()
    assert t.narrow(2, 1, 2).numpy().tolist() == a[:, :, 1:3].tolist()
    assert t.movedim(0, -1).shape == (3, 4, 2)
    assert ft.tensor([1, 2, 3]).roll(1).tolist() == [3, 1, 2]
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        t.transpose(0, 1).view(-1)
    assert t.transpose(0, 1).reshape(-1).numpy().tolist() == a.transpose(1, 0, 2).reshape(
        -1).tolist()


def test_matmul_family_and_einsum():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    A, B = ft.tensor(a), ft.tensor(b)
    np.testing.assert_allclose((A @ B).numpy(), a @ b)
    np.testing.assert_allclose(A.mm(B).numpy(), a @ b)
    np.testing.assert_allclose(A.mv(B[:, 0]).numpy(), a @ b[:, 0])
    np.testing.assert_allclose(B[:, 0].dot(B[:, 1]).numpy(), b[:, 0] @ b[:, 1])
    c = rng.standard_normal((2, 3, 4))
    np.testing.assert_allclose(ft.tensor(c).bmm(ft.tensor(c).transpose(1, 2)).numpy(),
                               c @ c.transpose(0, 2, 1))
    np.testing.assert_allclose(ft.einsum("ij,jk->ik", A, B).numpy(), a @ b)
    np.testing.assert_allclose(ft.outer(B[:, 0], B[0]).numpy(), np.outer(b[:, 0], b[0]))


def test_where_clamp_masked_fill_gather():
    x = ft.tensor([-2.0, 0.5, 3.0])
    assert ft.where(x > 0, x, ft.zeros(3)).tolist() == [0.0, 0.5, 3.0]
    assert x.clamp(-1, 1).tolist() == [-1.0, 0.5, 1.0] and x.clamp(min=0).tolist() == [0, 0.5, 3]
    assert x.masked_fill(x < 0, 9.0).tolist() == [9.0, 0.5, 3.0]
    g = ft.tensor([[1.0, 2.0], [3.0, 4.0]]).gather(1, ft.tensor([[1], [0]]))
    assert g.tolist() == [[2.0], [3.0]]
    s = ft.zeros(2, 3).scatter_add(1, ft.tensor([[0, 0], [2, 1]]), ft.ones(2, 2))
    assert s.tolist() == [[2.0, 0.0, 0.0], [0.0, 1.0, 1.0]]
    v, i = ft.tensor([3.0, 1.0, 2.0]).sort()
    assert v.tolist() == [1.0, 2.0, 3.0] and i.tolist() == [1, 2, 0]
    assert ft.tensor([3.0, 1.0, 2.0]).topk(2).values.tolist() == [3.0, 2.0]


def test_softmax_log_softmax():
    a = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 1000.0]])
    e = np.exp(a - a.max(1, keepdims=True))
    sm = e / e.sum(1, keepdims=True)
    np.testing.assert_allclose(ft.tensor(a).softmax(1).numpy(), sm)
    lse = a.max(1, keepdims=True) + np.log(e.sum(1, keepdims=True))
    np.testing.assert_allclose(ft.tensor(a).log_softmax(-1).numpy(), a - lse, atol=1e-12)


# ---------------------------------------------------------------------------
# indexing

def test_indexing_and_views():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = ft.tensor(a)
    assert t[1].tolist() == a[1].tolist() and t[:, 2].tolist() == a[:, 2].tolist()
    assert t[1:, ::2].tolist() == a[1:, ::2].tolist() and t[..., -1].tolist() == a[..., -1].tolist()
    assert t[None].shape == (1, 3, 4)
    assert t[ft.tensor([2, 0])].tolist() == a[[2, 0]].tolist()
    assert t[[0, 2], [1, 3]].tolist() == a[[0, 2], [1, 3]].tolist()
    assert t[t > 5].tolist() == a[a > 5].tolist()
    with pytest.raises(IndexError):
        t[3]
    v = t[1]
    v[0] = 100.0          # a view: writes through to t
    assert t[1, 0].item() == 100.0


def test_setitem_variants():
    t = ft.zeros(3, 3)
    t[0] = 1.0
    t[:, 2] = ft.tensor([5.0, 6.0, 7.0])
    t[t == 6.0] = -1.0
    t[ft.tensor([2]), ft.tensor([0])] = 3.0
    assert t.tolist() == [[1, 1, 5], [0, 0, -1], [3, 0, 7]]


# ---------------------------------------------------------------------------
# version counters, detach, clone, in-place

def test_version_counter_shared_by_views_and_detach():
    t = ft.zeros(2, 2)
    v = t[0]
    d = t.detach()
    assert t._version == v._version == d._version == 0
    v.add_(1)
    assert t._version == v._version == d._version == 1
    d.mul_(3)
    assert t._version == 2 and t.tolist() == [[3, 3], [0, 0]]
    c = t.clone()
    c.add_(1)
    assert c._version == 1 and t._version == 2 and t.tolist() == [[3, 3], [0, 0]]


def test_identity_views_are_views():
    """A view op that returns its input's whole storage unchanged (x[:], a view or reshape
    to the same shape, a no-op squeeze) is a view all the same: it shares the version
    counter and its base, and writing through it is seen by autograd."""
    t = ft.zeros(2, 3)
    views = [t[:], t[...], t[:, :], t.view(2, 3), t.reshape(2, 3), t.squeeze(),
             t.expand(2, 3), t.narrow(0, 0, 2)]
    assert not t._is_view() and not t.clone()._is_view()
    for k, v in enumerate(views):
        assert v._base is t and v._is_view()
        v.add_(1)
        assert t._version == k + 1 and t[0, 0].item() == k + 1
    x = ft.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        x[:].mul_(2)
    y = x * 1
    z = y.exp()                   # saves its output y.exp(), not y
    w = y.sin()                   # saves y
    y[:].mul_(2)
    assert y.grad_fn.name() == "torch::autograd::CopySlices"
    z.sum().backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        w.sum().backward()


def test_inplace_on_an_expanded_view_is_refused():
    """expand() repeats elements in memory: every in-place op refuses it with torch's
    RuntimeError (the fast paths used to let NumPy raise ValueError)."""
    c = ft.ones(3)
    for op in (lambda v: v.add_(1), lambda v: v.fill_(2.0), lambda v: v.zero_(),
               lambda v: v.addcmul_(v, v), lambda v: v.uniform_(), lambda v: v.mul_(2)):
        with pytest.raises(RuntimeError, match="more than one element of the written-to "
                                               "tensor refers to a single memory location"):
            op(c.expand(2, 3))
    assert c.tolist() == [1.0, 1.0, 1.0] and c._version == 0


def test_getitem_grad_fn_names_follow_torch():
    x = ft.ones(2, 3, requires_grad=True)
    assert x[:].grad_fn.name() == "SliceBackward0"           # a bare slice: a slice op
    assert x[...].grad_fn.name() == "AliasBackward0"         # no index at all: an alias
    assert x[:, :].grad_fn.name() == "AliasBackward0"
    assert x[0, :].grad_fn.name() == "SelectBackward0"


def test_detach_shares_storage_and_cuts_the_graph():
    x = ft.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None and d.is_leaf
    d[0] = 10.0
    assert y[0].item() == 10.0
    z = x * 1
    z.detach_()
    assert z.grad_fn is None and not z.requires_grad


def test_inplace_methods_return_self_and_match_numpy():
    t = ft.tensor([1.0, 2.0, 4.0])
    assert t.add_(1) is t and t.tolist() == [2, 3, 5]
    t.sub_(1).mul_(2).div_(2)
    assert t.tolist() == [1, 2, 4]
    t.add_(ft.ones(3), alpha=2)
    assert t.tolist() == [3, 4, 6]
    t.clamp_(max=5).sqrt_()
    np.testing.assert_allclose(t.numpy(), np.sqrt([3, 4, 5]))
    t.zero_()
    assert t.tolist() == [0, 0, 0]
    t.fill_(2).addcmul_(ft.ones(3), ft.ones(3), value=3)
    assert t.tolist() == [5, 5, 5]
    t += 1
    t *= 2
    assert t.tolist() == [12, 12, 12] and t._version == 12
    t.copy_(ft.tensor([1.0, 2.0, 3.0]))
    assert t.tolist() == [1, 2, 3]
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        ft.tensor([1, 2]).add_(1.5)


def test_inplace_on_inference_tensor_outside_inference_mode():
    with ft.inference_mode():
        t = ft.ones(2)
        t.add_(1)
    assert t.is_inference()
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside "
                                           "InferenceMode is not allowed"):
        t.add_(1)


def test_nonleaf_grad_warning_text():
    x = ft.tensor([1.0], requires_grad=True)
    y = x * 2
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert y.grad is None
    assert "is not a leaf Tensor is being accessed" in str(w[0].message)


def test_deepcopy_and_pickle():
    import copy
    import pickle
    x = ft.tensor([1.0, 2.0], requires_grad=True)
    y = copy.deepcopy(x)
    assert y.requires_grad and y.is_leaf and y.tolist() == [1.0, 2.0]
    y.detach()[0] = 5.0
    assert x[0].item() == 1.0
    z = pickle.loads(pickle.dumps(x))
    assert z.requires_grad and z.tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="Only Tensors created explicitly by the user"):
        copy.deepcopy(x * 2)
    with pytest.raises(RuntimeError, match="Cowardly refusing to serialize non-leaf tensor"):
        pickle.dumps(x * 2)


def test_binary_ops_that_do_not_broadcast_raise_torchs_runtime_error():
    """A shape mismatch in an elementwise op is a RuntimeError naming the sizes and the
    dimension counted from the result's last (as torch's infer_size), so ported
    `except RuntimeError` blocks still catch it."""
    a, b = ft.ones(3, 4, requires_grad=True), ft.ones(3, 5)
    msg = r"size of tensor a \(4\) must match the size of tensor b \(5\) at non-singleton " \
          r"dimension 1"
    for f in (lambda: a + b, lambda: a * b, lambda: a.atan2(b), lambda: a.remainder(b),
              lambda: a // b, lambda: a < b, lambda: (a > 0).logical_and(b > 0)):
        with pytest.raises(RuntimeError, match=msg):
            f()
    with pytest.raises(RuntimeError, match=r"tensor a \(2\) must match the size of tensor b "
                                           r"\(3\) at non-singleton dimension 0"):
        ft.ones(2, 3, 4) - ft.ones(3, 1, 4)
    with pytest.raises(RuntimeError, match=r"tensor a \(4\) must match the size of tensor b "
                                           r"\(5\) at non-singleton dimension 1"):
        ft.ones(5).__rsub__(ft.ones(3, 4))       # reflected: a is the left operand


def test_matmul_errors_are_torchs_runtime_errors():
    """matmul and its family raise torch's RuntimeError (the message of the kernel torch
    folds the product into) for contracting sizes that differ, and do not promote dtypes."""
    cases = [((3, 4), (3, 4), r"mat1 and mat2 shapes cannot be multiplied \(3x4 and 3x4\)"),
             ((4,), (3, 5), r"mat1 and mat2 shapes cannot be multiplied \(1x4 and 3x5\)"),
             ((2, 3, 4), (3, 5), r"mat1 and mat2 shapes cannot be multiplied \(6x4 and 3x5\)"),
             ((4,), (3,), r"inconsistent tensor size, expected tensor \[4\] and src \[3\]"),
             ((2, 3, 4), (5,), r"size mismatch, got input \(6\), mat \(6x4\), vec \(5\)"),
             ((2, 3, 4), (2, 3, 4), r"first two dimensions of batch2 tensor to be: \[2, 4\] "
                                    r"but got: \[2, 3\]"),
             ((2, 3, 4), (3, 4, 5), r"tensor a \(2\) must match the size of tensor b \(3\)")]
    for sa, sb, msg in cases:
        with pytest.raises(RuntimeError, match=msg):
            ft.matmul(ft.ones(sa), ft.ones(sb))
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied"):
        ft.ones(2, 3).mm(ft.ones(2, 3))
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype, but "
                                           "got: double != float"):
        ft.ones(2, 3, dtype=ft.float64) @ ft.ones(3, 2)
    with pytest.raises(RuntimeError, match="dot : expected both vectors to have same dtype, "
                                           "but found Long and Float"):
        ft.tensor([1, 2]).dot(ft.ones(2))
    assert ft.ones(2, 3, 4).bmm(ft.ones(2, 4, 5).requires_grad_()).grad_fn.name() == \
        "BmmBackward0"


def test_reduction_dims_are_checked_and_empty_dims_reduce_everything():
    """A dim outside [-ndim, ndim) is torch's IndexError (not a silent modulo); dim=()
    reduces every dimension, as in torch; reductions over nothing raise torch's errors."""
    x = ft.ones(2, 3)
    msg = r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"
    for f in (lambda: x.sum(2), lambda: x.mean(dim=2), lambda: x.amax(2), lambda: x.max(2),
              lambda: x.argmax(2), lambda: x.all(2), lambda: x.std(2), lambda: x.cumsum(2),
              lambda: x.count_nonzero(2), lambda: x.prod(2)):
        with pytest.raises(IndexError, match=msg):
            f()
    assert x.sum(dim=()).shape == () and x.sum(dim=()).item() == 6.0
    assert ft.tensor(2.5).cumsum(0).item() == 2.5 and ft.tensor(2.5).cumprod(-1).item() == 2.5
    e = ft.ones(0, 3)
    assert e.amax(1).shape == (0,) and e.max(1).values.shape == (0,)
    with pytest.raises(IndexError, match=r"amax\(\): Expected reduction dim 0 to have non-zero"):
        e.amax(0)
    with pytest.raises(IndexError, match=r"argmin\(\): Expected reduction dim 0 to have non-"):
        e.argmin(0)
    with pytest.raises(RuntimeError, match=r"max\(\): Expected reduction dim to be specified"):
        e.max()
    with pytest.raises(IndexError, match=r"argmax\(\): Expected reduction dim to be specified"):
        e.argmax()
    with pytest.raises(RuntimeError, match=r"argmax\(\): does not support bool input"):
        ft.tensor([True, False]).argmax()


def test_clamp_is_min_of_max_and_promotes_with_its_bounds():
    """clamp(x, lo, hi) = min(max(x, lo), hi): hi everywhere when lo > hi, with derivative 0;
    an integer tensor clamped to a float bound becomes the default float dtype."""
    x = ft.tensor([-2.0, 0.0, 0.5, 3.0], requires_grad=True)
    y = x.clamp(1.0, -1.0)
    y.sum().backward()
    assert y.tolist() == [-1.0] * 4 and x.grad.tolist() == [0.0] * 4
    assert ft.tensor([1, 5]).clamp(-2.5, 3).dtype == ft.float32
    assert ft.tensor([1, 5]).clamp(2, 3).dtype == ft.int64
    assert ft.tensor([1, 5]).clamp(min=2.5).tolist() == [2.5, 5.0]
    assert x.clamp(min=0.0).grad_fn.name() == "ClampBackward1"
    assert x.clamp_min(ft.zeros(4)).grad_fn.name() == "ClampMinBackward1"


def test_facade_integer_reductions_accumulate_in_int64_and_std_norm_need_floats():
    for t in (ft.tensor([1, 2, 3], dtype=ft.int32), ft.tensor([True, False, True])):
        assert t.prod().dtype == ft.int64 and t.cumsum(0).dtype == ft.int64
        assert t.cumprod(0).dtype == ft.int64
    assert ft.tensor([True, True, False]).cumprod(0).tolist() == [1, 1, 0]
    with pytest.raises(RuntimeError, match="std and var only support floating point"):
        ft.tensor([1, 2]).std()
    with pytest.raises(RuntimeError, match="Expected a floating point or complex tensor as "
                                           "input. Got Long"):
        ft.tensor([1, 2]).norm()
    assert ft.ones(3).norm(dtype=ft.float64).dtype == ft.float64


def test_integer_powers_stay_integral():
    """Integer ** integer is integral as in torch (a negative exponent truncates 1/b^|e|:
    1, +-1 or 0); bool ** int is int64; a number base with a tensor exponent is __rpow__."""
    b, e = ft.tensor([0, 0, 1, -1, -1, 2, -2, 3]), ft.tensor([-1, -2, -5, -3, -2, -1, -1, 2])
    assert (b ** e).tolist() == [0, 0, 1, -1, 1, 0, 0, 9] and (b ** e).dtype == ft.int64
    assert (2 ** ft.tensor([3, 0])).tolist() == [8, 1] and ft.pow(2, ft.tensor([2])).dtype == \
        ft.int64
    assert (ft.tensor([True, False]) ** 2).tolist() == [1, 0]
    assert ft.tensor([1, 2]).pow(ft.tensor([0.5, 1.0])).dtype == ft.float32
    x = ft.tensor([1.0, 2.0], requires_grad=True)
    assert ft.pow(2.0, x).grad_fn.name() == "PowBackward2"
    assert ft.tensor([2, -3]).trunc().dtype == ft.int64


def test_bool_tensors_are_refused_where_torchs_kernels_refuse_them():
    m = ft.tensor([True, False])
    for f, kind, msg in [(lambda: m.abs(), NotImplementedError, "\"abs_cpu\" not implemented "
                          "for 'Bool'"),
                         (lambda: m.floor(), NotImplementedError, "floor_vml_cpu"),
                         (lambda: ft.tensor([1, 2]).frac(), NotImplementedError,
                          "\"frac_cpu\" not implemented for 'Long'"),
                         (lambda: m.fmod(m), NotImplementedError, "fmod_cpu"),
                         (lambda: ft.ones(2) & ft.ones(2), NotImplementedError,
                          "\"bitwise_and_cpu\" not implemented for 'Float'"),
                         (lambda: -m, RuntimeError, "Negation, the `-` operator, on a bool"),
                         (lambda: m - m, RuntimeError, "with two bool tensors is not supported"),
                         (lambda: m - ft.tensor([1, 2]), RuntimeError, "with a bool tensor is "
                          "not supported"),
                         (lambda: ft.relu(m), RuntimeError, "Boolean inputs not supported")]:
        with pytest.raises(kind, match=msg):
            f()
    assert m.sign().tolist() == [True, False] and m.sgn().dtype == ft.bool
    assert (m & m).tolist() == [True, False] and (ft.tensor([6]) ^ 3).tolist() == [5]


def test_div_rounding_modes():
    """torch.div(..., rounding_mode='floor'/'trunc'): the rounded quotient in the promoted
    dtype (integers stay integral), derivative 0 (DivBackward2)."""
    a = ft.tensor([7, -7, 6, -6])
    assert ft.div(a, 2, rounding_mode="trunc").tolist() == [3, -3, 3, -3]
    assert ft.div(a, -2, rounding_mode="floor").tolist() == [-4, 3, -3, 3]
    assert a.div(2, rounding_mode="floor").dtype == ft.int64
    assert ft.div(a, 2.0, rounding_mode="trunc").tolist() == [3.0, -3.0, 3.0, -3.0]
    x = ft.tensor([1.5, -2.5], requires_grad=True)
    y = x.div(ft.tensor([2.0, 2.0]), rounding_mode="floor")
    y.sum().backward()
    assert y.tolist() == [0.0, -2.0] and x.grad.tolist() == [0.0, 0.0]
    assert y.grad_fn.name() == "DivBackward2"
    with pytest.raises(RuntimeError, match="expected rounding_mode to be one of None, 'trunc', "
                                           "or 'floor' but found 'round'"):
        x.div(2, rounding_mode="round")


def test_cat_stack_einsum_where_gather_errors_are_torchs():
    a, b = ft.ones(3, 4), ft.ones(3, 5)
    with pytest.raises(RuntimeError, match=r"Sizes of tensors must match except in dimension 0. "
                                           r"Expected size 4 but got size 5 for tensor number 1"):
        ft.cat([a, b])
    with pytest.raises(RuntimeError, match="Tensors must have same number of dimensions: got 2 "
                                           "and 3"):
        ft.cat([a, ft.ones(1, 3, 4)])
    with pytest.raises(RuntimeError, match=r"stack expects each tensor to be equal size, but "
                                           r"got \[3, 4\] at entry 0 and \[3, 5\] at entry 1"):
        ft.stack([a, b])
    with pytest.raises(RuntimeError, match=r"einsum\(\): subscript j has size 3 for operand 1 "
                                           r"which does not broadcast with previously seen size 4"):
        ft.einsum("ij,jk->ik", a, a)
    with pytest.raises(RuntimeError, match="where expected condition to be a boolean tensor, "
                                           "but got a tensor with dtype Long"):
        ft.where(ft.tensor([1, 0]), ft.ones(2), ft.zeros(2))
    with pytest.raises(RuntimeError, match="but got mask with dtype long"):
        ft.ones(2).masked_fill(ft.tensor([1, 0]), 0.0)
    with pytest.raises(RuntimeError, match="index 5 is out of bounds for dimension 0 with size "
                                           "3"):
        ft.ones(3, 2).gather(0, ft.tensor([[0, 5]]))
    assert ft.ones(3, 2).gather(0, ft.tensor([[0, 2]], dtype=ft.int32)).shape == (1, 2)
    x = ft.ones(3, requires_grad=True)
    e = ft.zeros(0, requires_grad=True)
    ft.cat([x, e]).sum().backward()               # a skipped 1-d empty tensor gets its grad
    assert e.grad is not None and e.grad.shape == (0,)


def test_creation_numpy_scalars_randint_high_size_and_arange_errors():
    """torch.tensor keeps a NumPy scalar's dtype (alone or in a list); randint(high, size);
    arange refuses a zero step or one whose sign points away from the end."""
    assert ft.tensor(np.float64(2.5)).dtype == ft.float64
    assert ft.tensor([np.int32(1), np.int32(2)]).dtype == ft.int32
    assert ft.tensor(2.5).dtype == ft.float32 and ft.tensor([1, 2]).dtype == ft.int64
    r = ft.randint(5, (2, 3))
    assert r.shape == (2, 3) and r.dtype == ft.int64 and bool(((r >= 0) & (r < 5)).all())
    with pytest.raises(RuntimeError, match="upper bound and lower bound inconsistent with step "
                                           "sign"):
        ft.arange(0, 5, -1)
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        ft.arange(0, 5, 0)
    assert ft.arange(3, 3).shape == (0,)


def test_indexing_with_true_adds_an_axis():
    x = ft.ones(2, 3)
    assert x[True].shape == (1, 2, 3) and x[True, 0].shape == (1, 3)


def test_scatter_reduce_add():
    z = ft.zeros(2, 3).scatter(1, ft.tensor([[0, 0], [2, 1]]), ft.ones(2, 2), reduce="add")
    assert z.tolist() == [[2.0, 0.0, 0.0], [0.0, 1.0, 1.0]]
    with pytest.raises(RuntimeError, match="reduce='multiply' is not supported here"):
        ft.zeros(2).scatter(0, ft.tensor([0]), ft.ones(1), reduce="multiply")


def test_softmax_refuses_integer_input_as_torch():
    x = ft.tensor([[1, 2, 3]])
    with pytest.raises(NotImplementedError, match="\"softmax_lastdim_kernel_impl\" not "
                                                  "implemented for 'Long'"):
        x.softmax(1)
    with pytest.raises(NotImplementedError, match="\"log_softmax_kernel_impl\" not implemented"):
        x.log_softmax(0)
    assert x.softmax(1, dtype=ft.float32).dtype == ft.float32


def test_integer_division_by_zero_raises_and_logical_ops_of_0d_give_tensors():
    a, b = ft.tensor([3, 4]), ft.tensor([0, 1])
    for f in (lambda: a % b, lambda: a.fmod(b), lambda: a // b, lambda: a % 0,
              lambda: a.div(b, rounding_mode="trunc"), lambda: 7 % b,
              lambda: a.remainder(ft.tensor([False, True]))):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            f()
    assert (ft.tensor([3.0]) % 0).isnan().all()            # floats: NaN, as torch
    t = ft.tensor(True).logical_xor(ft.tensor(False))
    assert isinstance(t.numpy(), np.ndarray) and t.item() is True
    assert isinstance(ft.tensor(True).logical_not().numpy(), np.ndarray)


def test_einsum_broadcasts_subscripts_of_size_one():
    a = ft.ones(3, 4, requires_grad=True)
    b = ft.tensor([[2.0, 3.0]], requires_grad=True)
    y = ft.einsum("ij,jk->ik", a, b)
    assert y.tolist() == [[8.0, 12.0]] * 3
    y.sum().backward()
    assert b.grad.tolist() == [[12.0, 12.0]] and a.grad.tolist() == [[5.0] * 4] * 3


def test_indexing_0d_index_tensors_and_negative_steps_as_torch():
    x = ft.arange(12.0).reshape(3, 4).requires_grad_()
    y = x[ft.tensor(1)]
    assert y.tolist() == [4.0, 5.0, 6.0, 7.0] and y.grad_fn.name() == "SelectBackward0"
    assert x[ft.tensor(True)].shape == (1, 3, 4)
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x[::-1]


def test_python_integers_out_of_range_wrap_as_torch():
    """int8 + 1000 wraps as torch computes it (NumPy 2 raises OverflowError for the
    Python integer)."""
    assert (ft.tensor([1, -1], dtype=ft.int8) + 1000).tolist() == [-23, -25]
    assert (ft.tensor([1], dtype=ft.uint8) * 300).tolist() == [44]
def test_flatten_and_unflatten_check_their_dims_as_torch():
    import pytest
    x = ft.zeros(2, 3)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of "
                                         r"\[-2, 1\], but got 3\)"):
        x.flatten(3)
    with pytest.raises(RuntimeError, match="start_dim cannot come after end_dim"):
        x.flatten(1, 0)
    with pytest.raises(RuntimeError, match=r"unflatten: Provided sizes \[2, 2\] don't multiply "
                                           r"up to the size of dim 1 \(3\)"):
        x.unflatten(1, (2, 2))
    assert ft.zeros(()).flatten().shape == (1,)
    assert ft.zeros(2, 4).unflatten(-1, (-1, 2)).shape == (2, 2, 2)
