"""One symbolic frame: the instruction loop, the value stack, locals and cells.

The loop mirrors CPython's: it fetches an instruction from dis.get_instructions and
calls the handler the running CPython's opcode table names for it (opcodes311.py,
opcodes312.py). An opcode missing from the table is a graph break, like any other
unsupported construct; an unexpected exception is an internal error that names the
instruction, never a silent wrong answer.
"""

from __future__ import annotations

import builtins
import dis
import inspect
from collections.abc import Callable
from typing import Any

from .builder import Context
from .errors import InternalError, ShapeQuestion, Unsupported, Untruncate, graph_break
from .memo import Memo
from .variables import UNBOUND, CellVar, Var

# Note [generator and coroutine functions run as plain Python]: calling one runs none
# of its body; it returns a generator (or coroutine) that runs the body lazily, one
# step per next()/send(), interleaved with the caller. A captured call must return that
# same object, so the captured function itself runs as plain Python (a final break, for
# every call). An inlined helper that is a generator is followed eagerly (Note
# [generators run eagerly]); an inlined coroutine cannot be.
_WHAT = {  # flag: (what the function is, what calling it returns)
    inspect.CO_COROUTINE: ("a coroutine function (async def)", "a coroutine"),
    inspect.CO_ASYNC_GENERATOR: ("an async generator function", "an async generator"),
    inspect.CO_ITERABLE_COROUTINE: ("a generator-based coroutine (types.coroutine)",
                                    "a generator"),
    inspect.CO_GENERATOR: ("a generator function", "a generator"),
}
_NOT_INLINED = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


def _instructions(code) -> tuple[list, dict]:
    insts = list(dis.get_instructions(code))
    return insts, {inst.offset: i for i, inst in enumerate(insts)}


# (instructions, index by offset) of a code object; callers must not change them.
instructions_of = Memo(_instructions)


def _lazy_function(code, depth: int) -> None:
    """Break for a generator or coroutine function (Note [generator and coroutine
    functions run as plain Python]), at its def line."""
    what, returns = next(w for flag, w in _WHAT.items() if code.co_flags & flag)
    if depth == 0:
        why = (f"{code.co_qualname} is {what}: calling it returns {returns} that runs "
               "the body lazily, so the function runs as plain Python")
    else:
        why = f"{code.co_qualname} is {what}; dynexpr does not inline it"
    e = Unsupported(why, final=depth == 0)
    e.at(code.co_filename, code.co_firstlineno, code.co_qualname)
    raise e


class LazyArg:
    """An argument of the captured function, wrapped (and guarded) on first use, so an
    unused argument of an unsupported kind does not stop the capture."""

    __slots__ = ("value", "source")

    def __init__(self, value: Any, source: tuple) -> None:
        self.value = value
        self.source = source


class Frame:
    """Symbolic execution state of one code object. Subclasses add the handlers."""

    OPCODES: dict[str, Callable] = {}  # filled by each version's module

    def __init__(
        self,
        ctx: Context,
        code,
        locals_: dict,
        cells: dict,
        frame_globals: dict,
        globals_src: tuple | None,
        depth: int = 0,
    ) -> None:
        if code.co_flags & (_NOT_INLINED if depth else _NOT_INLINED | inspect.CO_GENERATOR):
            _lazy_function(code, depth)
        self.ctx = ctx
        self.code = code
        self.instructions, self.index_of = instructions_of(code)
        self.locals = locals_
        self.cells = cells
        self.globals = frame_globals
        self.globals_src = globals_src  # None: the captured function's own globals
        self.depth = depth
        self.stack: list[Any] = []
        self.ip = 0
        self.kw_names: tuple = ()
        self.result: Var | None = None
        self.inst = None
        # Note [generators run eagerly]: a generator's frame runs to the end at once and
        # its values become a finite iterator. Laziness is unobservable here because the
        # translation has no side effects to interleave.
        self.yields: list | None = [] if code.co_flags & inspect.CO_GENERATOR else None

    # -- the loop -------------------------------------------------------------------
    def run(self) -> Var:
        ctx = self.ctx
        budget = ctx.budget
        table = self.OPCODES
        # Note [resuming after a graph break] (interp.py): the top frame of a resumable
        # translation keeps the state before each instruction, so a break can end the
        # segment there instead of abandoning the whole call.
        pausable = ctx.pause is not None and self.depth == 0
        while self.result is None:
            inst = self.inst = self.instructions[self.ip]
            if pausable:
                p = ctx.pause
                p.steps += 1
                p.first.setdefault(self.ip, p.steps)  # where a loop starts (resume_code.py)
                before = (self.ip, list(self.stack), dict(self.locals),
                          ctx.session.effects())
                guarded = self.ip in p.protected
                p.entered |= guarded
            self.ip += 1
            budget.used_instructions += 1
            handler = table.get(inst.opname)
            try:
                if pausable and (p.steps == p.stop_at or (p.strict and guarded)):
                    graph_break(p.reason if p.steps == p.stop_at else
                                "code inside a try or with block runs as plain Python, so "
                                "that its exceptions reach their handlers")
                if budget.used_instructions > budget.instructions:
                    graph_break(f"translation ran past {budget.instructions} "
                                "instructions (a long unrolled loop?)")
                if handler is None:
                    graph_break(f"the bytecode {inst.opname} is not supported")
                handler(self, inst)
            except Unsupported as e:
                if isinstance(e, ShapeQuestion):
                    e = ctx.session.specialized(e)
                if pausable:
                    e.at(self.code.co_filename, self._line(), self.code.co_qualname)
                    ctx.pause.paused(e, self, before)
                self._annotate(e)
            except (InternalError, RecursionError, Untruncate):
                raise  # RecursionError: Note [the translator's own stack] (captured.py)
            except Exception as e:  # noqa: BLE001 - a bug in dynexpr, said clearly
                file, line = self.code.co_filename, self._line()
                raise InternalError(
                    f"dynexpr: internal error while translating {inst.opname} at {file}:{line} "
                    f"({type(e).__name__}: {e}); please report it. Set "
                    "dynexpr.config.suppress_errors = True to run such functions as plain "
                    "Python meanwhile"
                ) from e
        return self.result

    def _line(self) -> int:
        pos = getattr(self.inst, "positions", None)
        if pos is not None and pos.lineno is not None:
            return pos.lineno
        for inst in reversed(self.instructions[: self.ip]):  # the last one with a line
            pos = inst.positions
            if pos is not None and pos.lineno is not None:
                return pos.lineno
        return self.code.co_firstlineno

    def _annotate(self, e: Unsupported) -> None:
        e.at(self.code.co_filename, self._line(), self.code.co_qualname)
        raise e

    # -- stack ----------------------------------------------------------------------
    def push(self, v: Any) -> None:
        self.stack.append(v)

    def pop(self) -> Any:
        return self.stack.pop()

    def popn(self, n: int) -> list:
        if n == 0:
            return []
        vals = self.stack[-n:]
        del self.stack[-n:]
        return vals

    def jump(self, inst) -> None:
        self.ip = self.index_of[inst.argval]

    # -- names ----------------------------------------------------------------------
    def load_local(self, name: str) -> Var:
        v = self.locals.get(name, UNBOUND)
        if v is UNBOUND:
            graph_break(f"local variable {name!r} is used before assignment (UnboundLocalError)")
        if isinstance(v, LazyArg):
            v = self.locals[name] = self.ctx.wrap(v.value, v.source)
        return v

    def load_global(self, name: str) -> Var:
        g = self.globals
        if name in g:
            value = g[name]
        else:
            b = g.get("__builtins__", builtins)
            b = b if isinstance(b, dict) else b.__dict__
            if name not in b:
                graph_break(f"name {name!r} is not defined (NameError)")
            value = b[name]
        src = ("global", name) if self.globals_src is None else ("global", name, self.globals_src)
        return self.ctx.wrap(value, src)

    def cell(self, name: str) -> CellVar:
        c = self.cells.get(name)
        if c is None:
            graph_break(f"closure variable {name!r} is not available")
        return c
