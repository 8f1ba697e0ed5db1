"""torch.version's names, describing functrans: `__version__` is functrans's own version (not
a PyTorch version: code that compares it with PyTorch releases should check `library`), no
CUDA or ROCm build (CuPy supplies the GPU at run time: see ft.cuda)."""
from . import __version__  # noqa: F401

library = "functrans"
cuda = None
hip = None
git_version = "unknown"
debug = False
