"""functrans.numpy's functions as the library itself calls them: raw arrays (NumPy, CuPy)
and tracers in and out, no `ft.Array` wrapping (functrans.numpy's public functions wrap
their results; internal chains of eager calls need not pay for it, and the facade's
Tensors hold raw arrays). Filled by functrans/numpy/__init__.py before it wraps its public
functions: `from ..numpy import raw as fnp` in a library module.
"""
