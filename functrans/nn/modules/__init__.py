"""torch.nn's modules: the Module machinery, layers, containers and losses. Each is importable
by the module path PyTorch gives it (nn.modules.sparse.Embedding,
nn.modules.activation.MultiheadAttention, nn.modules.pooling.MaxPool2d, ...)."""
from .activation import (ELU, GELU, Hardtanh, LeakyReLU, LogSigmoid, LogSoftmax,  # noqa: F401
                         MultiheadAttention, PReLU, ReLU, Mish, ReLU6, SiLU, Sigmoid, Softmax,
                         Softplus, Tanh, Threshold)
from .container import (Flatten, ModuleDict, ModuleList, ParameterDict, ParameterList,  # noqa: F401
                        Sequential, Unflatten)
from .conv import (AdaptiveAvgPool2d, AvgPool2d, Conv1d, Conv2d, Conv3d, ConvTranspose1d,  # noqa: F401
                   ConvTranspose2d, MaxPool2d)
from .dropout import Dropout, Dropout1d, Dropout2d, Dropout3d  # noqa: F401
from .fold import Fold, Unfold  # noqa: F401
from .sparse import Embedding, EmbeddingBag  # noqa: F401
from .linear import Bilinear, Identity, Linear  # noqa: F401
from .loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, CTCLoss,  # noqa: F401
                   HuberLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss, SmoothL1Loss)
from .module import (Buffer, Module, Parameter, register_module_forward_hook,  # noqa: F401
                     register_module_forward_pre_hook, register_module_full_backward_hook)
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell, RNNBase, RNNCellBase  # noqa: F401
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,  # noqa: F401
                          TransformerEncoder, TransformerEncoderLayer)
from .normalization import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm  # noqa: F401
from .instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d  # noqa: F401
from .padding import (CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d,  # noqa: F401
                      ConstantPad2d, ConstantPad3d, ReflectionPad1d, ReflectionPad2d,
                      ReflectionPad3d, ReplicationPad1d, ReplicationPad2d, ReplicationPad3d,
                      ZeroPad1d, ZeroPad2d, ZeroPad3d)
from .pixelshuffle import PixelShuffle, PixelUnshuffle  # noqa: F401
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: F401
from . import batchnorm, flatten, pooling  # noqa: F401,E402  (PyTorch's module paths)
