"""functrans.example_libraries.optimizers (jax.example_libraries.optimizers): first-order
optimizers as (init_fun, update_fun, get_params) triples over pytrees of parameters.

An optimizer is written for one array (`init(x0) -> state`, `update(i, g, state) -> state`,
`get_params(state) -> x`, a state being an array or a tuple of them) and the `optimizer`
decorator lifts it to pytrees: its state is an `OptimizerState` (a pytree node, so it passes
through `jit`) holding each parameter's state leaves. Step sizes are numbers or schedules
`i -> step size` (`make_schedule`).
"""
from __future__ import annotations

import functools
from collections import namedtuple
from typing import Any, Callable, NamedTuple

from .. import numpy as fnp
from ..tree_util import (register_pytree_node, tree_flatten, tree_leaves, tree_map,
                         tree_unflatten)

__all__ = ["JoinPoint", "Optimizer", "OptimizerState", "adagrad", "adam", "adamax",
           "clip_grads", "constant", "exponential_decay", "inverse_time_decay", "l2_norm",
           "make_schedule", "momentum", "nesterov", "optimizer", "pack_optimizer_state",
           "piecewise_constant", "polynomial_decay", "rmsprop", "rmsprop_momentum", "sgd",
           "unpack_optimizer_state"]

OptimizerState = namedtuple("OptimizerState", ["packed_state", "tree_def", "subtree_defs"])
OptimizerState.__doc__ = ("The state of a pytree optimizer: the flat leaves of each "
                          "parameter's state (packed_state) and the tree structures to rebuild "
                          "them; a pytree node whose leaves are packed_state's arrays.")
register_pytree_node(
    OptimizerState,
    lambda s: ((s.packed_state,), (s.tree_def, tuple(s.subtree_defs))),
    lambda aux, children: OptimizerState(children[0], *aux))


class Optimizer(NamedTuple):
    init_fn: Callable[[Any], OptimizerState]
    update_fn: Callable[[int, Any, OptimizerState], OptimizerState]
    params_fn: Callable[[OptimizerState], Any]


def optimizer(opt_maker):
    """Lift an optimizer for one array (init, update, get_params) to pytrees of arrays."""
    @functools.wraps(opt_maker)
    def tree_opt_maker(*args, **kwargs):
        init, update, get_params = opt_maker(*args, **kwargs)

        @functools.wraps(init)
        def tree_init(x0_tree):
            x0_flat, tree = tree_flatten(x0_tree)
            states = [tree_flatten(init(x0)) for x0 in x0_flat]
            return OptimizerState([s[0] for s in states], tree, [s[1] for s in states])

        @functools.wraps(update)
        def tree_update(i, grad_tree, opt_state):
            packed, tree, subtrees = opt_state
            grads, grad_tree_def = tree_flatten(grad_tree)
            if grad_tree_def != tree:
                raise TypeError(f"optimizer update: the gradient's tree structure "
                                f"{grad_tree_def} differs from the parameters' {tree}")
            states = [tree_unflatten(t, s) for t, s in zip(subtrees, packed)]
            new = [tree_flatten(update(i, g, s))[0] for g, s in zip(grads, states)]
            return OptimizerState(new, tree, subtrees)

        @functools.wraps(get_params)
        def tree_get_params(opt_state):
            packed, tree, subtrees = opt_state
            states = [tree_unflatten(t, s) for t, s in zip(subtrees, packed)]
            return tree_unflatten(tree, [get_params(s) for s in states])

        return Optimizer(tree_init, tree_update, tree_get_params)
    return tree_opt_maker


# ---------------------------------------------------------------------------
# optimizers

@optimizer
def sgd(step_size):
    """Stochastic gradient descent: x - step_size(i) g."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0

    def update(i, g, x):
        return x - step_size(i) * g

    def get_params(x):
        return x
    return init, update, get_params


@optimizer
def momentum(step_size, mass):
    """Heavy-ball momentum: v = mass v + g; x - step_size(i) v."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, fnp.zeros_like(x0)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * velocity, velocity

    def get_params(state):
        return state[0]
    return init, update, get_params


@optimizer
def nesterov(step_size, mass):
    """Nesterov momentum: v = mass v + g; x - step_size(i) (mass v + g)."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, fnp.zeros_like(x0)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * (mass * velocity + g), velocity

    def get_params(state):
        return state[0]
    return init, update, get_params


@optimizer
def adagrad(step_size, momentum=0.9):
    """Adagrad with momentum: s += g²; m = (1 - momentum) g/√s + momentum m (0 where s is
    0); x - step_size(i) m."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, fnp.zeros_like(x0), fnp.zeros_like(x0)

    def update(i, g, state):
        x, g_sq, m = state
        g_sq = g_sq + fnp.square(g)
        g_sq_inv_sqrt = fnp.where(g_sq > 0, 1. / fnp.sqrt(g_sq), 0.0)
        m = (1. - momentum) * (g * g_sq_inv_sqrt) + momentum * m
        return x - step_size(i) * m, g_sq, m

    def get_params(state):
        return state[0]
    return init, update, get_params


@optimizer
def rmsprop(step_size, gamma=0.9, eps=1e-8):
    """RMSProp: a = gamma a + (1 - gamma) g²; x - step_size(i) g / √(a + eps)."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, fnp.zeros_like(x0)

    def update(i, g, state):
        x, avg_sq_grad = state
        avg_sq_grad = avg_sq_grad * gamma + fnp.square(g) * (1. - gamma)
        return x - step_size(i) * g / fnp.sqrt(avg_sq_grad + eps), avg_sq_grad

    def get_params(state):
        return state[0]
    return init, update, get_params


@optimizer
def rmsprop_momentum(step_size, gamma=0.9, eps=1e-8, momentum=0.9):
    """RMSProp with momentum: a as rmsprop's; m = momentum m + step_size(i) g / √(a + eps);
    x - m."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, fnp.zeros_like(x0), fnp.zeros_like(x0)

    def update(i, g, state):
        x, avg_sq_grad, mom = state
        avg_sq_grad = avg_sq_grad * gamma + fnp.square(g) * (1. - gamma)
        mom = momentum * mom + step_size(i) * g / fnp.sqrt(avg_sq_grad + eps)
        return x - mom, avg_sq_grad, mom

    def get_params(state):
        return state[0]
    return init, update, get_params


def _power(b, i, like):
    """b ** (i + 1) in like's dtype (i may be a traced step count)."""
    return fnp.asarray(b, like.dtype) ** (i + 1)


@optimizer
def adam(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """Adam (Kingma and Ba 2014): m, v moving averages of g and g² with bias correction;
    x - step_size(i) m̂ / (√v̂ + eps)."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, fnp.zeros_like(x0), fnp.zeros_like(x0)

    def update(i, g, state):
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * fnp.square(g) + b2 * v
        mhat = m / (1 - _power(b1, i, m))
        vhat = v / (1 - _power(b2, i, m))
        return x - step_size(i) * mhat / (fnp.sqrt(vhat) + eps), m, v

    def get_params(state):
        return state[0]
    return init, update, get_params


@optimizer
def adamax(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """Adamax (Adam with the infinity norm): u = max(b2 u, |g|);
    x - step_size(i) / (1 - b1^(i+1)) m / (u + eps)."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0, fnp.zeros_like(x0), fnp.zeros_like(x0)

    def update(i, g, state):
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = fnp.maximum(b2 * u, fnp.abs(g))
        return x - (step_size(i) / (1 - _power(b1, i, m))) * m / (u + eps), m, u

    def get_params(state):
        return state[0]
    return init, update, get_params


# ---------------------------------------------------------------------------
# learning-rate schedules

def constant(step_size) -> Callable:
    """i -> step_size."""
    def schedule(i):
        return step_size
    return schedule


def exponential_decay(step_size, decay_steps, decay_rate):
    """i -> step_size · decay_rate^(i / decay_steps)."""
    def schedule(i):
        return step_size * decay_rate ** (i / decay_steps)
    return schedule


def inverse_time_decay(step_size, decay_steps, decay_rate, staircase=False):
    """i -> step_size / (1 + decay_rate · i / decay_steps) (i / decay_steps floored with
    staircase=True)."""
    if staircase:
        def schedule(i):
            return step_size / (1 + decay_rate * fnp.floor(i / decay_steps))
    else:
        def schedule(i):
            return step_size / (1 + decay_rate * i / decay_steps)
    return schedule


def polynomial_decay(step_size, decay_steps, final_step_size, power=1.0):
    """i -> (step_size - final_step_size) (1 - min(i, decay_steps)/decay_steps)^power +
    final_step_size."""
    def schedule(step_num):
        step_num = fnp.minimum(step_num, decay_steps)
        step_mult = (1 - step_num / decay_steps) ** power
        return step_mult * (step_size - final_step_size) + final_step_size
    return schedule


def piecewise_constant(boundaries, values):
    """i -> values[k], k the number of boundaries below i (len(values) = len(boundaries) + 1)."""
    boundaries = fnp.array(boundaries)
    values = fnp.array(values)
    if not boundaries.ndim == values.ndim == 1:
        raise ValueError("boundaries and values must be sequences")
    if not boundaries.shape[0] == values.shape[0] - 1:
        raise ValueError("boundaries length must be one shorter than values length")

    def schedule(i):
        return fnp.take(values, fnp.sum(i > boundaries))
    return schedule


def make_schedule(scalar_or_schedule):
    """A schedule: a callable as it is, a number as constant(number)."""
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if fnp.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise TypeError(f"make_schedule: expected a number or a callable i -> step size, got "
                    f"{type(scalar_or_schedule).__name__} of shape "
                    f"{fnp.shape(scalar_or_schedule)}")


# ---------------------------------------------------------------------------
# utilities

def l2_norm(tree):
    """The L2 norm of all of a pytree's leaves together."""
    leaves = tree_leaves(tree)
    return fnp.sqrt(sum(fnp.vdot(x, x) for x in leaves))


def clip_grads(grad_tree, max_norm):
    """grad_tree scaled down so its l2_norm is at most max_norm."""
    norm = l2_norm(grad_tree)

    def normalize(g):
        return fnp.where(norm < max_norm, g, g * (max_norm / norm))
    return tree_map(normalize, grad_tree)


class JoinPoint:
    """Marks where a parameter's state subtree joins the parameter tree (a pytree leaf),
    in the tree unpack_optimizer_state returns."""

    def __init__(self, subtree):
        self.subtree = subtree

    def __iter__(self):
        yield from self.subtree


def unpack_optimizer_state(opt_state):
    """An OptimizerState as a pytree with the parameters' structure, each parameter's
    state in a JoinPoint (for saving: plain containers and arrays)."""
    states, tree_def, subtree_defs = opt_state
    subtrees = [tree_unflatten(t, s) for t, s in zip(subtree_defs, states)]
    return tree_unflatten(tree_def, [JoinPoint(s) for s in subtrees])


def pack_optimizer_state(marked_pytree):
    """The inverse of unpack_optimizer_state."""
    sentinels, tree_def = tree_flatten(marked_pytree, is_leaf=lambda x: isinstance(x, JoinPoint))
    if not all(isinstance(s, JoinPoint) for s in sentinels):
        raise TypeError("pack_optimizer_state: expected the tree unpack_optimizer_state "
                        "returns (a JoinPoint per parameter)")
    flat = [tree_flatten(s.subtree) for s in sentinels]
    return OptimizerState([f[0] for f in flat], tree_def, [f[1] for f in flat])
