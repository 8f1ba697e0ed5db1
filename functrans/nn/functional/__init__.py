"""torch.nn.functional: layers and losses as functions (ft.nn.functional).

Every function is written once, with functrans.numpy, and runs two ways:
  * on facade Tensors it is ONE recorded op (`apply_fn`): traced once per signature, run
    eagerly by the primitives' implementations, named like PyTorch's grad_fn
    (`NllLossBackward0`, `ConvolutionBackward0`, ...); its backward comes from the core;
  * on arrays or traced values (inside ft.grad / ft.vmap / ft.jit, e.g. through
    ft.func.functional_call) it is plain functrans.numpy code, so it composes with every
    transformation. Tensors met on this path enter as constants.
"""
from ...core import Tracer  # noqa: F401  (read as F.Tracer by nn.modules.normalization)
from ._dispatch import _check_reduction, _is_facade, _legacy_reduction, _raw  # noqa: F401
from ._linear import bilinear, embedding, linear, one_hot  # noqa: F401
from ._bag import embedding_bag  # noqa: F401
from ._activations import (  # noqa: F401
    dropout, elu, gelu, hardtanh, leaky_relu, log_softmax, logsigmoid, mish, prelu, relu, relu6,
    relu_, sigmoid, silu, softmax, softmin, softplus, tanh, threshold, threshold_)
from ._normalization import batch_norm, group_norm, instance_norm, layer_norm  # noqa: F401
from ._conv import (_pair, _single, _triple, adaptive_avg_pool2d, avg_pool2d, conv1d,  # noqa: F401
                    conv2d, conv3d, max_pool2d, pad)
from ._fold import conv_transpose1d, conv_transpose2d, fold, unfold  # noqa: F401
from ._image import (dropout1d, dropout2d, dropout3d, interpolate, pixel_shuffle,  # noqa: F401
                     pixel_unshuffle, upsample)
from ._losses import (  # noqa: F401
    binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy, huber_loss, kl_div,
    l1_loss, mse_loss, nll_loss, smooth_l1_loss)
from ._attention import scaled_dot_product_attention  # noqa: F401
from ._grid import affine_grid, grid_sample  # noqa: F401
from ._ctc import ctc_loss  # noqa: F401
from ._misc import cosine_similarity, flatten, normalize  # noqa: F401
from ._dispatch import tensor_arguments as _tensor_arguments

# torch's TypeError for a non-Tensor argument, checked in this one place for every function
for _name, _fn in list(globals().items()):
    if not _name.startswith("_") and callable(_fn) and getattr(_fn, "__module__", "").startswith(
            __name__ + "."):
        globals()[_name] = _tensor_arguments(_fn)
del _name, _fn
