"""Backends that lower an optimized jaxpr: `cpu` (generated NumPy code) and `cuda`
(generated CUDA kernels run through CuPy). Each exposes `lower(closed, donated, name)`
returning a `functrans.jit.Lowered`."""
