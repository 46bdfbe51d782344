"""Which code the resume interpreter can take over after a graph break, and the
exception tables it routes exceptions by (Note [resuming after a graph break] in
interp.py).
"""

from __future__ import annotations

import dis
import inspect

from .memo import Memo

_CLEANUP = {"SWAP", "POP_TOP", "STORE_FAST", "COPY", "NOP"}
_INTRINSICS = {"INTRINSIC_UNARY_POSITIVE", "INTRINSIC_LIST_TO_TUPLE"}
_FLAGS = {inspect.CO_GENERATOR: "it is a generator", inspect.CO_COROUTINE: "it is a coroutine",
          inspect.CO_ASYNC_GENERATOR: "it is an async generator",
          inspect.CO_ITERABLE_COROUTINE: "it is a coroutine"}
# Names whose callers look at the frames that call them, beyond file and line: the
# interpreter's frames are not the user's. (Called from an inlined helper, they run in
# that helper's real frame: no problem.)
# (Logging and warnings see the user's line: Note [calls from the user's line].)
_LOOKS_AT_CALLER = frozenset(
    "inspect traceback sys _getframe currentframe breakpoint set_trace locals vars globals "
    "exec eval super exc_info print_stack extract_stack".split())


def why_not(code, ops: dict) -> str | None:
    """Why a frame of `code` cannot be resumed after a break by an interpreter that runs
    the opcodes `ops` (Note [resuming after a graph break]); None when it can."""
    for flag, what in _FLAGS.items():
        if code.co_flags & flag:
            return what
    if code.co_cellvars:
        return "inner functions close over its variables"
    looks = _LOOKS_AT_CALLER.intersection(code.co_names)
    if looks:
        return (f"it calls {sorted(looks)[0]}, which looks at its caller's frame (logging, "
                "warnings, inspect): run by the resume interpreter it would see the wrong one")
    insts = list(dis.get_instructions(code))
    for inst in insts:
        if inst.opname not in ops:
            return f"it uses {inst.opname}, which the resume interpreter does not run"
        if inst.opname == "CALL_INTRINSIC_1" and inst.argrepr not in _INTRINSICS:
            return f"it uses {inst.argrepr}"
    return None


def _exception_table(code) -> tuple:
    """(exception table entries, indices of the instructions a real handler covers)."""
    insts = list(dis.get_instructions(code))
    index_of = {inst.offset: i for i, inst in enumerate(insts)}
    entries = dis._parse_exception_table(code)
    protected = set()
    for e in entries:
        # 3.12's inlined comprehensions restore their variable and re-raise: nothing
        # the caller can tell from no handler. Anything else handles the exception.
        i = index_of.get(e.target)
        while i is not None and i < len(insts) and insts[i].opname in _CLEANUP:
            i += 1
        if i is None or i >= len(insts) or insts[i].opname != "RERAISE":
            protected.update(k for k, inst in enumerate(insts)
                             if e.start <= inst.offset < e.end)
    return tuple(entries), frozenset(protected)


_table = Memo(_exception_table)


def handler_for(code, offset: int):
    """The exception table entry covering the instruction at `offset`, or None."""
    for e in _table(code)[0]:
        if e.start <= offset < e.end:
            return e
    return None


def protected(code) -> frozenset:
    """Indices of the instructions inside try/except/finally or with blocks: they run
    here, never in a graph, so that their exceptions reach their handlers."""
    return _table(code)[1]
