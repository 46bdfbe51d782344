"""The resume interpreter as the rest of dynexpr uses it (Note [resuming after a graph
break] in interp.py): the running CPython's Run class (versions.py picks it from
concrete311.py, concrete312.py or concrete313.py), the NULL it pushes, and which code it
can take over (resumability.py).
"""

from __future__ import annotations

from .interp import NULL, Returned
from .memo import Memo
from .resumability import handler_for, protected, why_not
from .versions import Run


def kw_names_before(fn, insts, i: int) -> tuple:
    """What KW_NAMES set for the CALL at index i or after (a resume point may fall
    between them)."""
    return Run(fn, insts, {}, [], {}, i + 1).kw_names()


# Why a frame of a code object cannot be resumed after a break (None: it can).
not_resumable = Memo(lambda code: why_not(code, Run.OPS))

__all__ = ["NULL", "Returned", "Run", "handler_for", "kw_names_before", "not_resumable",
           "protected"]
