"""ft.optim: PyTorch's optimizers (SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax,
NAdam, RAdam, ASGD, Rprop, Adafactor, LBFGS; SparseAdam refuses, there being no sparse
gradients) over facade parameters, and `ft.optim.lr_scheduler`."""
from . import lr_scheduler  # noqa: F401
from .adadelta import Adadelta, Adafactor  # noqa: F401
from .adam import Adam, AdamW  # noqa: F401
from .adam_variants import Adamax, NAdam, RAdam  # noqa: F401
from .asgd import ASGD, Rprop  # noqa: F401
from .lbfgs import LBFGS  # noqa: F401
from .optimizer import Optimizer  # noqa: F401
from .rmsprop import Adagrad, RMSprop  # noqa: F401
from .sgd import SGD  # noqa: F401
from .sparse_adam import SparseAdam  # noqa: F401
