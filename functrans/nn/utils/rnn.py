"""torch.nn.utils.rnn: PackedSequence and the packing/padding functions (in nn._packed, which
nn.modules.rnn imports too)."""
from .._packed import (PackedSequence, invert_permutation, pack_padded_sequence,  # noqa: F401
                       pack_sequence, pad_packed_sequence, pad_sequence, unpack_sequence,
                       unpad_sequence)
