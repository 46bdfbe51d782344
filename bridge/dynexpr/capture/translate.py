"""Entry point of the translator: one call of the captured function, symbolically.

The opcode table is chosen once, here, from the running CPython's version; nothing
else in the translator looks at the version.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from .builder import Context
from .calls import _real_cell, top_level_locals
from .errors import Unsupported, graph_break
from .output import Translation, finalize

_TABLES = {(3, 11): "opcodes311", (3, 12): "opcodes312", (3, 13): "opcodes313"}
_frame_class = None


def frame_class():
    global _frame_class  # the one table for this interpreter, looked up once
    if _frame_class is None:
        module = _TABLES.get(sys.version_info[:2])
        if module is None:
            graph_break(
                f"dynexpr's capture supports CPython 3.11 to 3.13, not "
                f"{sys.version_info[0]}.{sys.version_info[1]}"
            )
        _frame_class = importlib.import_module(f".{module}", __package__).Translator
    return _frame_class


def translate(fn: Any, bound: list) -> Translation:
    """Run fn's bytecode on symbolic values for this call's bound arguments; raises
    errors.Unsupported at the first graph break."""
    ctx = Context(fn)
    code = fn.__code__
    cells = {
        name: _real_cell(ctx, cell, ("closure", name), name)
        for name, cell in zip(code.co_freevars, fn.__closure__ or ())
    }
    try:
        frame = frame_class()(ctx, code, top_level_locals(fn, bound), cells, fn.__globals__, None)
        return finalize(ctx, frame.run())
    except Unsupported as e:
        e.guards = ctx.guards  # what the translation had relied on when it stopped
        raise
