"""Higher-order primitives: primitives that carry sub-jaxprs (cond, while, scan).

Their rules transform the sub-jaxprs with the transformations (jvp, partial evaluation,
transpose, batching), so they sit above them in the layers (docs/architecture.md).
"""
