"""`torch.autograd.gradcheck` as a module: `from ft.autograd.gradcheck import GradcheckError`
(the package's attribute `gradcheck` stays the function, as in torch).

The module is callable too (calling it is calling `gradcheck`): an import hook that loads
it under another name (a `torch` -> functrans alias, as porting shims do) makes the import
system bind the module over the package's `gradcheck` attribute, and
`ft.autograd.gradcheck(fn, x)` keeps working then."""
import sys
import types

from ..facade.gradcheck import (GradcheckError, get_analytical_jacobian,  # noqa: F401
                                get_numerical_jacobian, gradcheck, gradgradcheck)

__all__ = ["GradcheckError", "gradcheck", "gradgradcheck", "get_numerical_jacobian",
           "get_analytical_jacobian"]


class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kwargs):
        return gradcheck(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
