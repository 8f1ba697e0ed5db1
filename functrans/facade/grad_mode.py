"""Grad modes (no_grad, enable_grad, set_grad_enabled, inference_mode), thread-local as torch's.

Each mode is a context manager and a decorator. The state is one threading.local object
that the eager op path reads with a single attribute access.
"""
from __future__ import annotations

import functools
import inspect
import threading


class _GradState(threading.local):
    def __init__(self):
        self.enabled = True       # record autograd nodes
        self.inference = False    # tensors created now are inference tensors


STATE = _GradState()


def is_grad_enabled() -> bool:
    """True when operations on tensors that require grad are recorded (torch.is_grad_enabled)."""
    return STATE.enabled


def is_inference_mode_enabled() -> bool:
    return STATE.inference


class _DecoratorContextManager:
    """A context manager that can also decorate functions (and generator functions)."""

    def __call__(self, func):
        if inspect.isclass(func):
            raise TypeError(f"{type(self).__name__} cannot decorate a class")
        if inspect.isgeneratorfunction(func):
            @functools.wraps(func)
            def gen_wrapper(*args, **kwargs):
                gen = func(*args, **kwargs)
                with self.clone():
                    response = gen.send(None)
                while True:
                    try:
                        with self.clone():
                            request = yield response
                        with self.clone():
                            response = gen.send(request)
                    except StopIteration as e:
                        return e.value
            return gen_wrapper

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.clone():
                return func(*args, **kwargs)
        return wrapper

    def clone(self):
        return type(self)()


class no_grad(_DecoratorContextManager):  # noqa: N801  (torch's name)
    """Disable recording: results of ops do not require grad (torch.no_grad)."""

    def __enter__(self):
        self.prev = STATE.enabled
        STATE.enabled = False

    def __exit__(self, *exc):
        STATE.enabled = self.prev
        return False


class enable_grad(_DecoratorContextManager):  # noqa: N801
    """Enable recording inside a no_grad region (torch.enable_grad)."""

    def __enter__(self):
        self.prev = STATE.enabled
        STATE.enabled = True

    def __exit__(self, *exc):
        STATE.enabled = self.prev
        return False


class set_grad_enabled(_DecoratorContextManager):  # noqa: N801
    """Set grad mode now (as a function call) or for a block (as a context manager)."""

    def __init__(self, mode: bool):
        self.prev = STATE.enabled
        self.mode = bool(mode)
        STATE.enabled = self.mode

    def __enter__(self):
        STATE.enabled = self.mode

    def __exit__(self, *exc):
        STATE.enabled = self.prev
        return False

    def clone(self):
        return set_grad_enabled(self.mode)


class inference_mode(_DecoratorContextManager):  # noqa: N801
    """No recording, and tensors created inside are inference tensors: they cannot be saved
    for backward later, nor modified in place outside inference mode (torch.inference_mode)."""

    def __init__(self, mode: bool = True):
        self.mode = bool(mode)

    def __enter__(self):
        self.prev = (STATE.enabled, STATE.inference)
        if self.mode:
            STATE.enabled, STATE.inference = False, True
        else:
            STATE.inference = False

    def __exit__(self, *exc):
        STATE.enabled, STATE.inference = self.prev
        return False

    def clone(self):
        return inference_mode(self.mode)

    def __call__(self, func=None):
        if isinstance(func, bool):      # @inference_mode(False) style is handled by __init__
            return inference_mode(func)
        return super().__call__(func)
