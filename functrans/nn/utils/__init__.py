"""torch.nn.utils: gradient clipping and parameter/vector conversion (clip_grad), packed
sequences for recurrent layers (rnn)."""
from . import rnn  # noqa: F401
from .clip_grad import (clip_grad_norm_, clip_grad_value_, get_total_norm,  # noqa: F401
                        parameters_to_vector, vector_to_parameters)
