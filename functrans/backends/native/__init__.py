"""The native CPU backend: fusion groups rendered to C++ from the primitives' expression
templates (the text of the CUDA kernels), compiled by the host compiler (`toolchain`)."""
