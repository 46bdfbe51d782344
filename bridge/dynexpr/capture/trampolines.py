"""Calls the resume interpreter makes for the user, from the user's line.

Note [calls from the user's line]: what the interpreter calls for the user runs from a
frame whose code claims the user's file, line and function, so a logging record, a
warning (NumPy's RuntimeWarning too) or a traceback names the user's line, not ours.

The trampolines are made when a segment's breaking instruction runs (call time, not
translation) and kept per (code, line); any thread may add one, and two threads that
make the same one at once make equal ones.
"""

from __future__ import annotations

import types
from typing import Any

_TRAMPOLINE = (lambda fn, args, kwargs: fn(*args, **kwargs)).__code__
_trampolines: dict[tuple, Any] = {}
_NO_KWARGS: dict = {}


def as_user(code, line: int, frame_globals: dict, fn: Any, args,
            kwargs: dict = _NO_KWARGS) -> Any:
    """fn(*args, **kwargs), called from `line` of `code` (a function with globals
    `frame_globals`)."""
    t = _trampolines.get((code, line))
    if t is None:
        if len(_trampolines) > 4096:
            _trampolines.clear()
        t = _trampolines[(code, line)] = types.FunctionType(_TRAMPOLINE.replace(
            co_filename=code.co_filename, co_name=code.co_name, co_qualname=code.co_qualname,
            co_firstlineno=line), frame_globals)  # warnings keep their registry there
    return t(fn, args, kwargs)
