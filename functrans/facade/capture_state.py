"""Which ft.compile capture runs on this thread. The capture (compiler/capture.py) pushes
itself here; facade code calls the hooks of the active capture (`current().hooks`) on
traced data, so it never imports the compiler (which sits above the facade)."""
from __future__ import annotations

import threading

from ..core import FunctransError


class _Captures(threading.local):
    def __init__(self):
        self.stack = []          # the captures running on this thread, innermost last


_tls = _Captures()


def active():
    """The innermost capture running on this thread, or None."""
    stack = _tls.stack
    return stack[-1] if stack else None


def current():
    """The innermost capture running on this thread (an error outside ft.compile)."""
    stack = _tls.stack
    if not stack:
        raise FunctransError("internal: a capture hook ran outside ft.compile's capture")
    return stack[-1]
