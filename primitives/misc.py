"""Primitives that exist for the transformations: stop_gradient."""
from __future__ import annotations

from .base import ANY, defprim, keep_operand, unary

stop_gradient_p = defprim("stop_gradient", lambda xp, x: x, unary(ANY), differentiable=False,
                          elementwise=True, cuda="{0}", simplify=keep_operand)
stop_gradient = stop_gradient_p.bind
