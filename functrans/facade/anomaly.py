"""Anomaly detection: `set_detect_anomaly` / `detect_anomaly`.

While it is on, each recorded node keeps the traceback of the forward call that created
it, and backward runs equation by equation (interpret.py) so that the first NaN produced is
attributed to its node and reported with that traceback.
"""
from __future__ import annotations

import sys
import warnings

import numpy as np

from .grad_mode import _DecoratorContextManager
from .record import ANOMALY


class detect_anomaly(_DecoratorContextManager):  # noqa: N801
    """Enable anomaly detection for a block (context manager and decorator)."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime "
                      "and should only be enabled for debugging.", stacklevel=2)

    def __enter__(self):
        self.prev = (ANOMALY.enabled, ANOMALY.check_nan)
        ANOMALY.enabled, ANOMALY.check_nan = True, self.check_nan

    def __exit__(self, *exc):
        ANOMALY.enabled, ANOMALY.check_nan = self.prev
        return False

    def clone(self):
        return detect_anomaly(self.check_nan)


class set_detect_anomaly(_DecoratorContextManager):  # noqa: N801
    """Turn anomaly detection on or off now, or for a block when used with `with`."""

    def __init__(self, mode, check_nan=True):
        self.prev = (ANOMALY.enabled, ANOMALY.check_nan)
        self.mode, self.check_nan = bool(mode), check_nan
        ANOMALY.enabled, ANOMALY.check_nan = self.mode, check_nan

    def __enter__(self):
        ANOMALY.enabled, ANOMALY.check_nan = self.mode, self.check_nan

    def __exit__(self, *exc):
        ANOMALY.enabled, ANOMALY.check_nan = self.prev
        return False

    def clone(self):
        return set_detect_anomaly(self.mode, self.check_nan)


def is_anomaly_enabled():
    return ANOMALY.enabled


def is_anomaly_check_nan_enabled():
    return ANOMALY.check_nan


class AnomalyError(RuntimeError):
    """A backward function produced NaN while anomaly detection was on."""


def nan_error(node, i):
    name = node.info.name
    msg = f"Function '{name}' returned nan values in its {i}th output."
    if node.stack:
        msg += ("\n\nError detected in " + name + ". Traceback of forward call that caused "
                "the error:\n" + "".join(node.stack))
    else:
        msg += ("\n(No forward traceback: the node was recorded while anomaly detection was "
                "off. Enable it before the forward pass.)")
    return AnomalyError(msg)


def warn_error_in(node):
    """torch's warning when a node's backward fails in anomaly mode: the node and the
    traceback of the forward call that recorded it (printed to stderr when warnings are
    errors, so the error itself still propagates)."""
    name = node.info.name if node.info is not None else node.name()
    stack = getattr(node, "stack", None)
    if stack:
        msg = (f"Error detected in {name}. Traceback of forward call that caused the "
               "error:\n" + "".join(stack))
    else:
        msg = (f"Error detected in {name}. No forward pass information available. Enable "
               "detect anomaly during forward pass for more information.")
    try:
        warnings.warn(msg, stacklevel=2)
    except Warning:
        sys.stderr.write(f"Warning: {msg}\n")


def has_nan(a):
    a = a._data if hasattr(a, "_data") else a
    return a.dtype.kind in "fc" and bool(np.isnan(np.asarray(a)).any())
