"""torch.nn.utils: gradient clipping and parameter/vector conversion (clip_grad), packed
sequences for recurrent layers (rnn), weight and spectral normalization (the hook-based API),
parametrizations of a module's tensors (parametrize) and the ones torch ships
(parametrizations: weight_norm, spectral_norm, orthogonal)."""
from . import parametrizations, parametrize, rnn  # noqa: F401
from .clip_grad import (clip_grad_norm_, clip_grad_value_, get_total_norm,  # noqa: F401
                        parameters_to_vector, vector_to_parameters)
from .spectral_norm import remove_spectral_norm, spectral_norm  # noqa: F401
from .weight_norm import remove_weight_norm, weight_norm  # noqa: F401
