"""ft.lax: thin wrappers over primitives (jax.lax's names), for users and rules alike."""
from __future__ import annotations

from functrans.primitives.elementwise import (abs, acos, add, asin, atan, atan2, ceil, convert_element_type,  # noqa: F401
                                    cos, cosh, div, eq, erf, exp, expm1, floor, ge, gt,
                                    integer_pow, is_finite, le, log, log1p, logistic, lt, max,
                                    min, mul, ne, neg, pow, rem, round, rsqrt, select, sign,
                                    sin, sinh, sqrt, sub, tan, tanh)
from functrans.primitives.indexing import (dynamic_slice, dynamic_update_slice, gather,  # noqa: F401
                                          scatter, scatter_add)
from functrans.primitives.linalg import dot_general  # noqa: F401
from functrans.primitives.reductions import (argmax, argmin, cumsum, reduce_max, reduce_min,  # noqa: F401
                                   reduce_prod, reduce_sum)
from functrans.primitives.shape import (broadcast_in_dim, concatenate, expand_dims,  # noqa: F401
                                        iota, pad, reshape, rev, slice, squeeze, transpose)
from functrans.primitives.misc import stop_gradient  # noqa: F401
from .control_flow import cond, fori_loop, scan, switch, while_loop  # noqa: F401
