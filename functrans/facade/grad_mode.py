"""Grad modes (no_grad, enable_grad, set_grad_enabled, inference_mode), thread-local as torch's.

Each mode is a context manager and a decorator. The state is one threading.local object
that the eager op path reads with a single attribute access.
"""
from __future__ import annotations

import functools
import inspect
import threading
import warnings


class _GradState(threading.local):
    def __init__(self):
        self.enabled = True       # record autograd nodes
        self.inference = False    # tensors created now are inference tensors


STATE = _GradState()


class _Ever:
    """Whether inference mode was ever entered, on any thread (set once, never reset): until
    then the hot paths skip reading STATE.inference, a thread-local read per op (what an
    op on small arrays costs is mostly such reads and calls)."""
    inference = False


EVER = _Ever()


def is_grad_enabled() -> bool:
    """True when operations on tensors that require grad are recorded (torch.is_grad_enabled)."""
    return STATE.enabled


def is_inference_mode_enabled() -> bool:
    return STATE.inference


class _DecoratorContextManager:
    """A context manager that can also decorate functions (and generator functions).

    A decorated function runs under a fresh copy of the mode (clone) and the caller's mode
    is back when it returns. A decorated generator runs under the mode only while its own
    code runs (each next/send/throw/close); between yields its caller's mode is in force,
    as torch's generator wrapper does."""

    def __call__(self, func):
        if inspect.isclass(func):
            # torch's deprecated behaviour: the decorated name becomes a function that makes
            # an instance under the mode (so __init__ runs in it; the methods do not)
            warnings.warn("Decorating classes is deprecated and will be disabled in future "
                          "versions. You should only decorate functions or methods. To "
                          "preserve the current behavior of class decoration, you can "
                          "directly decorate the `__init__` method and nothing else.",
                          FutureWarning, stacklevel=2)
            cls = func

            def func(*args, **kwargs):
                return cls(*args, **kwargs)
        if inspect.isgeneratorfunction(func):
            return self._wrap_generator(func)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.clone():
                return func(*args, **kwargs)
        return wrapper

    def _wrap_generator(self, func):
        clone = self.clone

        @functools.wraps(func)
        def gen_wrapper(*args, **kwargs):
            gen = func(*args, **kwargs)
            try:
                with clone():
                    response = gen.send(None)
                while True:
                    try:
                        request = yield response          # the caller's mode, not ours
                    except GeneratorExit:
                        with clone():
                            gen.close()
                        raise
                    except BaseException as e:           # g.throw(e) by the caller
                        with clone():
                            response = gen.throw(e)
                    else:
                        with clone():
                            response = gen.send(request)
            except StopIteration as e:
                return e.value
        return gen_wrapper

    def clone(self):
        return type(self)()


class _NoParamDecoratorContextManager(_DecoratorContextManager):
    """A mode without arguments decorates with or without parentheses: `@no_grad` as well
    as `@no_grad()` (torch accepts both)."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class no_grad(_NoParamDecoratorContextManager):  # noqa: N801  (torch's name)
    """Disable recording: results of ops do not require grad (torch.no_grad)."""

    def __enter__(self):
        self.prev = STATE.enabled
        STATE.enabled = False

    def __exit__(self, *exc):
        STATE.enabled = self.prev
        return False


class enable_grad(_NoParamDecoratorContextManager):  # noqa: N801
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
        if not isinstance(mode, bool):      # as torch: a number or tensor is a mistake here
            raise TypeError(f"set_grad_enabled(): argument 'enabled' (position 1) must be "
                            f"bool, not {type(mode).__name__}")
        self.prev = STATE.enabled
        self.mode = mode
        STATE.enabled = self.mode

    def __call__(self, func):
        """As a decorator the call that made this object must not change the mode: only the
        decorated function runs under it (torch restores the mode here too)."""
        STATE.enabled = self.prev
        return super().__call__(func)

    def __enter__(self):
        STATE.enabled = self.mode

    def __exit__(self, *exc):
        STATE.enabled = self.prev
        return False

    def clone(self):
        return set_grad_enabled(self.mode)


class inference_mode(_DecoratorContextManager):  # noqa: N801
    """No recording, and tensors created inside are inference tensors: they cannot be saved
    for backward later, nor modified in place outside inference mode (torch.inference_mode).
    `inference_mode(False)` turns both off: grad mode on, inference mode off (torch's
    InferenceMode guard sets grad mode to `not mode`). `@inference_mode` decorates without
    parentheses too."""

    def __new__(cls, mode=True):
        if isinstance(mode, bool):
            return super().__new__(cls)
        return cls()(mode)                       # @inference_mode on a function

    def __init__(self, mode: bool = True):
        self.mode = bool(mode)

    def __enter__(self):
        self.prev = (STATE.enabled, STATE.inference)
        if self.mode:
            EVER.inference = True
        STATE.enabled, STATE.inference = not self.mode, self.mode

    def __exit__(self, *exc):
        STATE.enabled, STATE.inference = self.prev
        return False

    def clone(self):
        return inference_mode(self.mode)
