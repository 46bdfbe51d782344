"""Segments of a function that breaks (Note [resuming after a graph break] in
interp.py): a translation that stops before the instruction it cannot capture, and
the template that rebuilds the frame's real locals and stack from the compiled outputs.

State template nodes, beyond output.py's ("const", "src", "view", "out", "tuple"):
    ("viewof", node, steps)     a NumPy view of the array `node` builds
    ("new", k, node) / ("ref", k)   one mutable object (list, dict, iterator) that
                                several places hold: built once per call, then shared
    ("list"|"dict", ...)        as in output.py, inside "new"
    ("attr", node, name)        getattr(built node, name): a method of an array
    ("method", fnode, snode)    a Python function bound to an object
    ("function", code, defaults, kwdefaults, globals)  a def/lambda made in the frame
    ("iter", items) / ("listiter", node, pos)   an iterator over the rest of a sequence
    ("null",) / ("unbound",)    the interpreter's NULL and a cleared local
    ("errstate", settings)      a real np.errstate, not entered yet
"""

from __future__ import annotations

import itertools
import types
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import eager, ir
from ..config import config
from ..guards import resolve
from .arrays import ArrayVar
from .builder import Context
from .calls import real_cells
from .concrete import NULL as REAL_NULL
from .concrete import kw_names_before, protected
from .errors import BreakReason, InternalError, Unsupported, graph_break
from .frame import LazyArg
from .np_table import QuietErrors
from .truncate import Untruncate
from .output import Translation, _Outputs, _rebuild, finalize
from .resume_code import loop_start_step
from .versions import translator
from .variables import (
    NULL,
    UNBOUND,
    BoundMethodVar,
    DictVar,
    FunctionVar,
    IteratorVar,
    ListVar,
    NestedFunctionVar,
    ObjectVar,
    PyVar,
    ScalarInputVar,
    TupleVar,
    Var,
)


@dataclass
class Resume:
    """Where a segment stops: the instruction to run as plain Python next, and how to
    rebuild the frame's locals and stack there."""

    ip: int
    names: tuple  # the locals bound at the break, in co_varnames order
    locals_t: tuple
    stack_t: tuple
    reason: BreakReason
    empty: bool  # it broke at its first instruction: the state is the one it started with


class Pause:
    """What a resumable translation keeps to stop cleanly before a break."""

    def __init__(self, code, stop_at: int | None = None, original: Unsupported | None = None,
                 strict: bool = False) -> None:
        self.steps = 0
        self.stop_at = stop_at  # stop before this top-level step (a clean second run)
        self.original = original
        self.reason = original.reason if original is not None else ""
        # Instructions in try/with blocks; strict: they break (plain Python runs them,
        # so their exceptions reach their handlers); entered: the translation ran one.
        self.protected = protected(code)
        self.strict = strict
        self.entered = False
        self.first: dict[int, int] = {}  # instruction index -> the step that first ran it

    def paused(self, e: Unsupported, frame, before: tuple) -> None:
        ip, stack, locals_, effects = before
        dirty = effects != frame.ctx.session.effects()
        e.pause = (ip, stack, locals_, self.steps, dirty, frame)
        raise e


def run_top(fn: Any, make_frame, dyn: Any = None, resumable: bool = False,
            stop: tuple | None = None, strict: bool = False,
            truncate: bool = True, device: bool = False,
            stand_ins: dict | None = None) -> Translation:
    """Translate the frame make_frame(ctx) builds; with `resumable`, a break in the top
    frame ends the translation there with a Resume instead of raising. `truncate`: long
    rollable loops may stop unrolling early (Note [stopping the unrolling early])."""
    ctx = Context(fn, dyn, device, stand_ins)
    ctx.truncate_loops = truncate
    if resumable:
        ctx.pause = Pause(fn.__code__, *(stop or (None, None)), strict=strict)
    frame = make_frame(ctx)
    try:
        return finalize(ctx, frame.run())
    except Untruncate:
        return run_top(fn, make_frame, dyn, resumable, stop, strict, truncate=False,
                       device=device, stand_ins=stand_ins)
    except Unsupported as e:
        if ctx.truncated:  # no break or resume state from a loop that was cut short
            return run_top(fn, make_frame, dyn, resumable, stop, strict, truncate=False,
                           device=device, stand_ins=stand_ins)
        e.guards = ctx.guards  # what the translation had relied on when it stopped
        p = getattr(e, "pause", None)
        if p is None or e.final:
            raise
        ip, stack, locals_, steps, dirty, frame = p
        original = ctx.pause.original or e
        if ctx.pause.entered and not ctx.pause.strict:  # try/with blocks must stay Python
            return run_top(fn, make_frame, dyn, resumable, stop, strict=True)
        if dirty:  # the instruction changed shared state before it broke: stop before it
            return run_top(fn, make_frame, dyn, resumable, (steps, original), strict)
        if ctx.pause.stop_at is None and config.resume_as_code:
            # A break inside a loop: stop where the loop starts, and the whole loop runs
            # as real bytecode (Note [resume code] in resume_code.py), not one segment
            # and one interpreted break per iteration.
            start = loop_start_step(frame.code, frame.instructions, ip, ctx.pause.first)
            if start is not None and start < steps:
                saved = original.reason, original.pause
                try:
                    return run_top(fn, make_frame, dyn, resumable, (start, original), strict)
                except Unsupported:  # no state to hand over there: stop at the break
                    original.reason, original.pause = saved
        try:
            return finalize_state(ctx, original, ip, stack, locals_, frame.code, steps == 1)
        except Unsupported as why:
            original.pause = None
            original.reason = f"{original.reason} (and the function cannot resume after it: " \
                              f"{why.reason})"
            raise original from None


def translate_segment(fn: Any, ip: int, names: tuple, kinds: tuple, state: tuple,
                      dyn: Any = None) -> Translation:
    """Translate fn's code from instruction index ip, with the real frame `state`: the
    locals `names` then the stack (kinds: 0 a value, 1 NULL, 2 a cleared local). `dyn`:
    see translate.translate_dynamic."""
    code = fn.__code__

    def make(ctx: Context):
        ctx.scalar_inputs = True
        locals_ = {n: LazyArg(state[i], ("arg", i)) for i, n in enumerate(names)}
        frame = translator()(ctx, code, locals_, real_cells(ctx, fn), fn.__globals__, None)
        base = len(names)
        frame.stack = [NULL if k == 1 else UNBOUND if k == 2 else
                       ctx.wrap(state[base + j], ("arg", base + j)) for j, k in enumerate(kinds)]
        frame.ip = ip
        frame.kw_names = kw_names_before(fn, frame.instructions, ip)
        return frame

    return run_top(fn, make, dyn, resumable=True, strict=True)


# --- the state's template ----------------------------------------------------------------


class _StateOutputs(_Outputs):
    """Outputs for a frame's live values. Unlike a return value, one array object may be
    reached several ways (b = a; v = a[::2]), so a temporary's storage is one output and
    each view of it is a view again, not a copy."""

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self._bases: dict[int, tuple] = {}
        self.shared: dict[int, int] = {}  # id(Var) -> k of its "new" node
        self.lists: dict[int, Var] = {}  # id(ListVar.items) -> the ListVar

    def leaf(self, var: ArrayVar) -> tuple:
        st = var.storage
        if st.source is not None:
            return super().leaf(var)
        hit = self._leaf.get(id(var))
        if hit is not None:
            return hit
        base = self._bases.get(id(st))
        if base is None:
            value = st.current
            if value.op in ("input", "const") or value.op in ir.VIEWS or value.id in self._index:
                value = self.ctx.graph.copy(value)  # its own buffer, never another's
            k = self._index[value.id] = len(self.values)
            self.values.append(value)
            base = self._bases[id(st)] = ("out", k, var.kind if not var.path else "ndarray", False)
        leaf = base if not var.path else (
            "viewof", base, tuple((s.op, s.attrs) for s in var.path))
        self._leaf[id(var)] = leaf
        return leaf


def _state_template(out: _StateOutputs, v: Any) -> tuple:
    if v is NULL:
        return ("null",)
    if v is UNBOUND:
        return ("unbound",)
    if isinstance(v, LazyArg):
        return ("src", v.source)
    if isinstance(v, ArrayVar):
        return out.leaf(v)
    if isinstance(v, ScalarInputVar):
        return ("src", v.source)  # read as is: its value is no fact of the entry
    if isinstance(v, PyVar):
        if isinstance(v.value, QuietErrors):  # the real np.errstate, for Python to enter
            return ("errstate", tuple(v.value.settings.items()))
        return ("src", v.source) if v.source is not None else ("const", v.value)
    if isinstance(v, TupleVar):
        return ("tuple", tuple(_state_template(out, x) for x in v.items))
    if isinstance(v, (ListVar, DictVar, ObjectVar, FunctionVar)) and v.source is not None:
        return ("src", v.source)
    if isinstance(v, IteratorVar) and v.generator:
        graph_break(f"the {v.describe()} object is live at the break; dynexpr follows "
                    "generators eagerly, so it has no suspended generator to hand over")
    if isinstance(v, (ListVar, DictVar, IteratorVar)):
        k = out.shared.get(id(v))
        if k is not None:
            return ("ref", k)
        k = out.shared[id(v)] = len(out.shared)
        if isinstance(v, ListVar):
            out.lists[id(v.items)] = v
            return ("new", k, ("list", tuple(_state_template(out, x) for x in v.items)))
        if isinstance(v, DictVar):
            return ("new", k, ("dict", tuple((key, _state_template(out, x))
                                             for key, x in v.items.items())))
        owner = out.lists.get(id(v.items))
        if owner is not None:  # a live iterator over a list the frame also holds
            return ("new", k, ("listiter", _state_template(out, owner), v.pos))
        return ("new", k, ("iter", tuple(_state_template(out, x) for x in v.items[v.pos:])))
    if isinstance(v, BoundMethodVar):
        if isinstance(v.func, str):
            return ("attr", _state_template(out, v.self_var), v.func)
        return ("method", _state_template(out, v.func), _state_template(out, v.self_var))
    if isinstance(v, NestedFunctionVar) and not v.closure:
        return ("function", v.code, tuple(_state_template(out, d) for d in v.defaults),
                tuple((k, _state_template(out, d)) for k, d in v.kwdefaults.items()), v.globals)
    graph_break(f"a {v.describe()} is live at the break and has no value outside the graph")


def finalize_state(ctx: Context, e: Unsupported, ip: int, stack: list, locals_: dict, code,
                   empty: bool) -> Translation:
    out = _StateOutputs(ctx)
    names = tuple(n for n in code.co_varnames if n in locals_ and locals_[n] is not UNBOUND)
    locals_t = tuple(_state_template(out, locals_[n]) for n in names)
    stack_t = tuple(_state_template(out, v) for v in stack)
    mutations = [(var.storage.origin, var.storage.current) for var in ctx.array_vars()
                 if var.storage.written and var.storage.current is not var.storage.origin]
    graph, sources = _rebuild(ctx, out.values, mutations)
    resume = Resume(ip, names, locals_t, stack_t, e.to_reason(), empty)
    return Translation(graph, ctx.guards, sources, None, resume)


def build(t: tuple, outs: tuple, state: Any, fn: Any, memo: dict | None = None) -> Any:
    """The real object template node t stands for, after the kernel ran: a captured
    call's result (output.py's nodes, checked first: every call builds one) or a
    segment's frame at its break. `memo` holds the shared objects ("new") built so far
    in this call; a result has none."""
    kind = t[0]
    if kind == "out":
        a = outs[t[1]]
        if t[2] == "scalar":
            return a[()]
        return np.array(a, copy=True) if t[3] else a
    if kind == "src":
        return resolve(t[1], state, fn)
    if kind == "tuple":
        return tuple(build(c, outs, state, fn, memo) for c in t[1])
    if kind == "const":
        v = t[1]
        return type(v)(v) if isinstance(v, (list, dict, set)) else v
    if kind == "null":
        return REAL_NULL
    if kind == "unbound":
        return UNBOUND
    if kind == "ref":
        return memo[t[1]]
    if kind == "new":
        inner = t[2]
        what = inner[0]
        if what == "list":
            obj = memo[t[1]] = []
            obj.extend(build(c, outs, state, fn, memo) for c in inner[1])
        elif what == "dict":
            obj = memo[t[1]] = {}
            obj.update((k, build(c, outs, state, fn, memo)) for k, c in inner[1])
        elif what == "listiter":
            obj = iter(build(inner[1], outs, state, fn, memo))
            for _ in itertools.islice(obj, inner[2]):
                pass
            memo[t[1]] = obj
        else:
            obj = memo[t[1]] = iter([build(c, outs, state, fn, memo) for c in inner[1]])
        return obj
    if kind in ("view", "viewof"):
        a = resolve(t[1], state, fn) if kind == "view" else build(t[1], outs, state, fn, memo)
        for op, attrs in t[2]:
            a = eager.apply_view(op, dict(attrs), a)
        return a
    if kind == "attr":
        return getattr(build(t[1], outs, state, fn, memo), t[2])
    if kind == "method":
        return types.MethodType(build(t[1], outs, state, fn, memo),
                                build(t[2], outs, state, fn, memo))
    if kind == "function":
        code, defaults, kwdefaults, frame_globals = t[1:]
        f = types.FunctionType(code, frame_globals, code.co_name,
                               tuple(build(c, outs, state, fn, memo) for c in defaults) or None)
        f.__qualname__ = code.co_qualname
        if kwdefaults:
            f.__kwdefaults__ = {k: build(c, outs, state, fn, memo) for k, c in kwdefaults}
        return f
    if kind == "errstate":
        return np.errstate(**dict(t[1]))
    if kind == "list":
        return [build(c, outs, state, fn, memo) for c in t[1]]
    if kind == "dict":
        return {k: build(c, outs, state, fn, memo) for k, c in t[1]}
    raise InternalError(f"dynexpr: unknown output template {kind!r}")


__all__ = ["Resume", "run_top", "translate_segment", "build"]
