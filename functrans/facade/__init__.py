"""The PyTorch-like facade: `Tensor`, the autograd engine, grad modes and `autograd.Function`.

Every backward pass is the core's reverse-mode transformation of the recorded graph
(engine.py); nothing here defines a derivative.
"""
from . import dtypes
from .dtypes import finfo, get_default_dtype, iinfo, set_default_dtype  # noqa: F401
from .dtypes import public_promote_types as promote_types  # noqa: F401
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled,  # noqa: F401
                        is_inference_mode_enabled, no_grad, set_grad_enabled)
from .tensor import Size, Tensor  # noqa: F401
from .tensor_info import public_result_type as result_type  # noqa: F401
# the modules above tensor.py that define Tensor methods install them on the class when
# imported (`Tensor.name = fn` at their module level): importing them here installs them all
from . import methods, reductions, shape_methods, inplace, indexing, api, numpy_interop  # noqa: F401,E402
from . import diag  # noqa: F401,E402  (Tensor.diag, diag_embed, diagflat, bitwise_and/or/xor)
from . import linalg  # noqa: F401,E402  (ft.linalg: torch.linalg's norms, svd)
from .linalg import geqrf, matrix_exp  # noqa: F401,E402
from .dlpack import from_dlpack  # noqa: F401,E402
from .distance import cdist  # noqa: F401,E402
from . import legacy as _legacy  # noqa: E402  (torch.FloatTensor, LongTensor, ...)
from . import ops as _ops
from .creation import (Generator, arange, as_tensor, bernoulli, default_generator, device,  # noqa: F401
                       empty, empty_like, eye, from_numpy, full, full_like, initial_seed,
                       linspace, logspace, manual_seed, multinomial, normal, ones, ones_like,
                       rand, rand_like, randint, randint_like, randn, randn_like, randperm,
                       seed, tensor, zeros, zeros_like)
from .ops import (broadcast_tensors, broadcast_to, cat, clone, concat, concatenate,  # noqa: F401
                  einsum, hstack, is_floating_point, is_tensor, meshgrid, numel, stack, vstack,
                  where)

globals().update(_ops.FUNCTIONS)
from .scatter_reduce import index_reduce, scatter_reduce  # noqa: F401,E402  (Functions)
from .sorting import bucketize, searchsorted, unique, unique_consecutive  # noqa: F401,E402
from .creation import empty_strided  # noqa: F401,E402
# torch's float constants
inf, nan, pi, e = float("inf"), float("nan"), 3.141592653589793, 2.718281828459045
for _n in dtypes.NAMES + dtypes.MEMORY_FORMATS:
    globals()[_n] = getattr(dtypes, _n)
for _n in _legacy.NAMES:
    globals()[_n] = getattr(_legacy, _n)
del _n

FACADE_NAMES = (
    ["Tensor", "Size", "tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty",
     "arange", "linspace", "logspace", "eye", "rand", "randn", "randint", "randperm", "normal",
     "bernoulli", "multinomial", "zeros_like", "ones_like", "full_like", "empty_like",
     "rand_like", "randn_like", "randint_like", "manual_seed", "seed", "initial_seed",
     "Generator", "default_generator", "device", "no_grad", "enable_grad", "set_grad_enabled",
     "inference_mode", "is_grad_enabled", "is_inference_mode_enabled", "get_default_dtype",
     "set_default_dtype", "promote_types", "result_type", "cat", "concat", "stack", "hstack",
     "vstack", "einsum", "broadcast_tensors", "meshgrid", "is_tensor", "numel",
     "is_floating_point", "clone", "where", "linalg", "from_dlpack", "real", "imag", "inf", "nan",
     "pi", "e", "finfo", "iinfo", "cdist", "matrix_exp", "geqrf", "scatter_reduce",
     "index_reduce", "searchsorted", "bucketize", "unique", "unique_consecutive",
     "empty_strided"]
    + list(_ops.FUNCTION_NAMES) + list(dtypes.NAMES) + list(dtypes.MEMORY_FORMATS)
    + list(_legacy.NAMES))
