"""The rest of a call after a graph break: plain Python for the breaking instruction,
then compiled segments again (Note [resuming after a graph break] in capture/interp.py).

A resume point is (instruction index, names of the bound locals, stack layout). Its
entries are cached with their guards over the frame's values, as the function's own
entries are over its arguments; a point that needs more than config.recompile_limit
entries (a loop whose counter every segment depends on) runs as plain Python for the
rest of that call.

A break inside a loop (Note [resume code] in capture/resume_code.py) would pay that on
every iteration: the interpreter for each instruction and a guard selection for each
segment. There the rest of the call runs as a real code object instead, CPython from
the breaking instruction on, with NumPy for the array work: what plain Python costs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from . import logs
from .capture import InternalError, Unsupported
from .capture import dynamic
from .capture.concrete import NULL, Returned, Run, protected
from .capture.frame import instructions_of
from .capture.resume import build, translate_segment
from .capture.resume_code import ResumeCodeError, in_loop, resume_args, resume_function
from .capture.translate import translate_dynamic
from .capture.variables import UNBOUND
from .config import config
from .diagnostics import warn_once
from .entries import Entry, added, find, inputs_of, nothing, of_translation
from .entries import run as run_entry
from .guards import GuardSet, changed_dims

_ARRAYS = (np.ndarray, np.generic)
# Instructions that compute with their operands (an array among them is an array op run
# by plain Python, for explain's share of compiled ops).
_COMPUTING = {"CALL", "CALL_KW", "CALL_FUNCTION_EX", "BINARY_OP", "BINARY_SUBSCR",
              "STORE_SUBSCR", "BINARY_SLICE", "STORE_SLICE", "COMPARE_OP", "UNARY_NEGATIVE",
              "UNARY_INVERT", "UNARY_POSITIVE", "CONTAINS_OP"}


class Segments:
    """The resume points of one captured function.

    fn        the function
    dynamic   its capture(dynamic=...) option
    compile   compile(graph, example_inputs) -> the callable of a new entry (the
              captured function's backend policy)
    owner_id  the captured function's id (keys its warnings)
    """

    def __init__(self, fn: Callable, dynamic: Any, compile: Callable, owner_id: int) -> None:
        self.fn, self.dynamic, self.compile, self.owner_id = fn, dynamic, compile, owner_id
        # point -> (entries, native): snapshots (Note [entry lists are snapshots]),
        # replaced under self.lock.
        self.points: dict[tuple, tuple[list, list | None]] = {}
        self.dims: dict[tuple, set] = {}  # point -> (source, axis) seen with two extents
        self.entries = 0
        # Note [one compile per guard set] (captured.py), for the entries of resume points.
        self.lock = threading.RLock()
        self.trace: list | None = None  # explain: ("graph", tr) / ("break", reason) / ("python",)
        # (ip, names, kinds) -> the resume function that runs the rest of the call from
        # a break inside a loop, or None where the interpreter must (Note [resume code]).
        self.real: dict[tuple, Any] = {}

    def clear(self) -> None:
        with self.lock:
            self.points = {}
            self.dims = {}
            self.real = {}
            self.entries = 0

    def all_entries(self) -> list:
        """Every entry of every resume point (a snapshot)."""
        return [e for entries, _ in list(self.points.values()) for e in entries]

    def finish(self, entry, outs: tuple, state: Any) -> Any:
        """Run the rest of the call that `entry`'s kernel started: rebuild the frame at
        its break from the outputs, run the breaking instruction, go on."""
        fn = self.fn
        insts, index_of = instructions_of(fn.__code__)
        run = Run(fn, insts, index_of, [], {}, 0)
        self._restore(run, entry, outs, state)
        guarded = protected(fn.__code__)  # try/with blocks: always run here
        trace = self.trace
        real = self._real(run)
        if real is not None and trace is None:
            return real()
        plain = real is not None  # explain: the same instructions, counted as Python
        while True:
            if trace is not None:
                self._note_python(run)
            done = run.step()
            if done is not None:
                return done.value
            if plain or run.i in guarded:
                continue
            seg, state = self._select(run)
            if seg is None:
                plain = True
                continue
            r = seg.resume
            if r is not None and r.empty:
                if trace is not None:
                    trace.append(("break", seg.reason))
                real = self._real(run)  # a loop starts here that breaks inside
                if real is not None:
                    if trace is None:
                        return real()
                    plain = True
                continue
            if trace is not None:
                trace.append(("graph", seg.translation))
            result = run_entry(seg, state, fn, _stopped)
            if type(result) is not _Stopped:
                return result
            self._restore(run, seg, result.outs, state)
            real = self._real(run)
            if real is not None:
                if trace is None:
                    return real()
                plain = True

    def _restore(self, run: Run, entry, outs: tuple, state: Any) -> None:
        r = entry.resume
        fn, memo = run.fn, {}
        run.locals = {n: build(t, outs, state, fn, memo) for n, t in zip(r.names, r.locals_t)}
        run.stack = [build(t, outs, state, fn, memo) for t in r.stack_t]
        run.i = r.ip
        if self.trace is not None:
            self.trace.append(("break", r.reason))

    def _real(self, run: Run):
        """A call that runs the rest of the frame `run` holds as real bytecode, when it
        stopped inside a loop (Note [resume code]); None: the interpreter goes on."""
        if not config.resume_as_code or run.handling is not None:
            return None
        code = run.fn.__code__
        offset = run.insts[run.i].offset
        if not in_loop(code, offset):
            return None
        stack = run.stack
        kinds = tuple(1 if v is NULL else 2 if v is UNBOUND else 0 for v in stack)
        names = tuple(n for n in code.co_varnames if n in run.locals)  # one key per layout
        key = (run.i, names, kinds)
        f = self.real.get(key, _MISSING)
        if f is _MISSING:
            try:
                f = resume_function(run.fn, offset, names, kinds)
            except ResumeCodeError as e:
                logs.get("graph_breaks").debug("%s: resumes by interpreter: %s",
                                               run.fn.__qualname__, e)
                f = None
            self.real[key] = f
        if f is None:
            return None
        args = resume_args(code.co_varnames, run.locals, stack, kinds)
        return lambda: f(*args)

    def _select(self, run: Run) -> tuple:
        """The entry for the frame as it is now (translated on a miss), and the frame's
        values as a tuple; (None, None) when this point runs as plain Python."""
        names = tuple(n for n in run.fn.__code__.co_varnames if n in run.locals)
        kinds = tuple(1 if v is NULL else 2 if v is UNBOUND else 0 for v in run.stack)
        state = tuple(run.locals[n] for n in names) + tuple(run.stack)
        key = (run.i, names, kinds)
        fn = run.fn
        point = self.points.get(key)
        if point is not None:
            hit = find(point[0], point[1], state, fn)
            if hit is not None:
                return hit, state
        with self.lock:  # Note [one compile per guard set] (captured.py)
            entries, native = self.points.get(key) or ([], [])
            hit = find(entries, native, state, fn)
            if hit is not None:
                return hit, state
            limit = config.recompile_limit
            if len(entries) >= limit or self.entries >= 8 * limit:
                where = (f"more than {limit} captures at one place" if len(entries) >= limit
                         else f"more than {8 * limit} captures in all")
                warn_once((self.owner_id, "resume"),
                          f"dynexpr: {fn.__qualname__}: the code after a graph break needed "
                          f"{where} (a loop whose values the captured code depends on?); from "
                          "there on, calls run it as plain Python. Raise "
                          "dynexpr.config.recompile_limit, or move the break out of the loop")
                return None, None
            entry = self._new(fn, key, state, entries)
            if entry is None:
                return None, None
            self.points[key] = added(entries, native, entry)
            self.entries += 1
        return entry, state

    def _new(self, fn, key: tuple, state: tuple, entries: list):
        ip, names, kinds = key
        try:
            tr = self._translate_dynamic(fn, key, state, entries)
            if tr is None:
                tr = translate_segment(fn, ip, names, kinds, state)
        except Unsupported as e:  # nothing to resume with: run this instruction as Python
            return Entry(GuardSet(e.guards), reason=e.to_reason(), resume=_PASS)
        except RecursionError:  # Note [the translator's own stack] (captured.py)
            return None  # the rest of this call as Python, translated again next time
        except InternalError as e:
            if not config.suppress_errors:
                raise
            warn_once((self.owner_id, "internal"),
                      f"{e}\n(suppress_errors: running as plain Python)")
            return None
        r = tr.resume
        if r is not None and logs.enabled("graph_breaks"):
            logs.get("graph_breaks").info("%s: %s", fn.__qualname__, r.reason)
        if r is not None and r.empty:
            return Entry(GuardSet(tr.guards), reason=r.reason, resume=r)
        graph = tr.graph
        if graph.outputs or graph.mutations:
            compiled = self.compile(graph, inputs_of(tr.input_sources, state, fn))
        else:
            compiled = nothing
        return of_translation(tr, compiled)

    def _translate_dynamic(self, fn, key: tuple, state: tuple, entries: list):
        """The point's translation with dynamic dimensions, as the function's own
        entries get them: all with dynamic=True, those whose extent changed at this
        point with dynamic=None, those mark_dynamic names; None: translate static."""
        dyn = self.dynamic
        if dyn is False:
            return None
        changed = self.dims.setdefault(key, set())
        if dyn is None:
            changed.update((s, a) for s, a, _, _ in changed_dims(entries, state, fn))
        if not (dyn or changed or dynamic.any_marks()):
            return None

        def policy(source: tuple, axis: int, a: np.ndarray):
            marks = dynamic.marks(a)
            if marks is not None and axis in marks:
                return marks[axis]
            return (2, None) if dyn or (source, axis) in changed else None

        ip, names, kinds = key
        try:
            tr, _ = translate_dynamic(fn, state, policy, run=lambda st: translate_segment(
                fn, ip, names, kinds, state, st))
        except Unsupported:
            return None
        return tr

    def _note_python(self, run: Run) -> None:
        inst = run.insts[run.i]
        if inst.opname in _COMPUTING and any(
                isinstance(v, _ARRAYS) or isinstance(getattr(v, "__self__", None), _ARRAYS)
                for v in run.stack[-4:]):
            self.trace.append(("python",))


_MISSING = object()


class _Stopped:
    """What run_entry hands back for a segment that stops at the next break: its
    outputs, from which _restore rebuilds the frame (a private type, never a result)."""

    __slots__ = ("outs",)

    def __init__(self, outs: tuple) -> None:
        self.outs = outs


def _stopped(entry, outs: tuple, state: Any) -> _Stopped:
    return _Stopped(outs)


class _Passthrough:
    """The resume of an entry whose translation could not start: run as Python."""

    empty = True
    reason = None


_PASS = _Passthrough()
__all__ = ["Segments", "Returned"]
