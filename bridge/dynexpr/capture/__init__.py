"""dynexpr.capture — the symbolic bytecode translator (see translate.translate)."""

from .errors import BreakReason, GraphBreakError, InternalError, Unsupported, graph_break
from .output import Translation
from .translate import translate

__all__ = [
    "translate",
    "Translation",
    "BreakReason",
    "GraphBreakError",
    "InternalError",
    "Unsupported",
    "graph_break",
]
