"""The captured function: its entries, translation on a miss, and recompile limits.

One call (the Python path; the native fast path evaluates the same guard data):
    bound = the arguments bound to fn's parameters (guard sources index them)
    the first entry whose guards all hold runs; else translate, compile, add an entry
An entry is either a compiled graph or a recorded graph break: a break entry runs the
function as plain Python, once, without translating again (its guards are every fact
the translation had consulted when it stopped, so the same facts break the same way).

Where the rest lives: the entries and their per-call path in entries.py, what runs
after a graph break in segments.py, how a graph becomes a callable (backend, cache,
tiering, autotune) in backends/, warnings and recompile reports in diagnostics.py.
"""

from __future__ import annotations

import inspect
import os
import threading
import types
import weakref
from collections import namedtuple
from collections.abc import Callable
from typing import Any

import numpy as np

from . import backends, cuda_run, dask_run, judge, logs
from .artifacts import record as artifacts_record
from .backends import policy
from .capture import GraphBreakError, InternalError, Unsupported, translate
from .capture.calls import BindError, bind_call
from .capture.concrete import not_resumable
from .capture import dynamic
from .capture.translate import stack_depth, translate_dynamic
from .config import config, on_change
from .dask_run import has_dask
from . import diagnostics
from .diagnostics import DynexprWarning, _state, warn_once  # noqa: F401  (re-exported)
from .entries import (Entry, added, below_accumulated_limit, below_limit, find, inputs_of,
                      nothing, of_translation, run)
from .guards import GuardSet, changed_dims, format_source
from .segments import Segments



class CacheInfo(namedtuple("CacheInfo", "hits misses compiles entries")):
    """cache_info(): the counts (a 4-tuple, as before); `judged`: one line per entry
    judged against the plain function (Note [judging an entry] in judge.py), saying
    which path it runs and the times per call measured; `plain`: those that run plain."""

    judged: tuple = ()

    @property
    def plain(self) -> tuple:
        return tuple(line for line in self.judged if "runs plain" in line)

    def __repr__(self) -> str:
        return f"{super().__repr__()[:-1]}, judged={list(self.judged)!r})"


# "reduce-overhead" is torch.compile's name for replaying a CUDA graph of the kernels.
# On the cpu backend the default path already is that: guards checked in C and the unit
# called with no Python in between (Note [the native hit path]), so it runs as "default";
# calls with CUDA arrays replay each unit as a CUDA graph (Note [CUDA graph replay] in
# backends/cuda_driver.py). explain says which (explain.mode_note).
MODES = ("default", "reduce-overhead", "max-autotune")

_live: weakref.WeakSet[CapturedFunction] = weakref.WeakSet()
try:
    from ._native import Dispatch as _Dispatch, select as _select
except ImportError:  # a source checkout without the built extension: guards in Python
    _select = None

    class _Dispatch:  # what _native.Dispatch does, without its native hit path
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return self._call(*args, **kwargs)


class CapturedFunction(_Dispatch):
    """What dynexpr.capture returns: call it like the function it wraps.

    Its base, _native.Dispatch, answers a call that hits a plain compiled entry without
    running Python (Note [the native hit path] in bridge/native/dispatch.c); every other
    call runs _call. _centries, _fn, _simple_nargs and _hits are that base's members."""

    _dynexpr_captured = True  # marks captured functions for the translator (builder.py)

    def __init__(
        self, fn: Callable, backend: Any, mode: str, dynamic: Any, fullgraph: bool, fuse: bool,
        *, trace: list | None = None,
    ) -> None:
        """trace: a list that receives what a call does after its first graph break
        (("graph", translation), ("break", reason), ("python",)): explain's hook."""
        self._fn = fn
        code = fn.__code__
        # Positional calls of a function without defaults' tricks bind as they are.
        star = code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
        self._simple_nargs = -1 if code.co_kwonlyargcount or star else code.co_argcount
        self.__dynexpr_wrapped__ = fn
        self.backend, self.mode, self.dynamic = backend, mode, dynamic
        self.fullgraph, self.fuse = fullgraph, fuse
        self._backend = backends.get(backend)
        for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(self, attr, getattr(fn, attr, None))
        self.__wrapped__ = fn
        # Snapshots, replaced (never changed) under self._lock: Note [entry lists are
        # snapshots] in entries.py. _centries: (native GuardSet, entry) pairs for
        # _native.select, while every entry has one; else None.
        self._entries: list[Entry] = []
        self._centries: list[tuple] | None = []
        self._hits = self._misses = self._compiles = 0
        # (source, axis) of dimensions seen with two extents: dynamic from then on
        # (dynamic=None, TorchDynamo's "automatic dynamic shapes").
        self._dyn: set[tuple] = set()
        # Per recompile: (entry number, [(guard that failed, value seen), ...]).
        self._recompiles: list[tuple[int, list[tuple[str, str]]]] = []
        self._segments = Segments(fn, dynamic, self._compile, id(self))  # after a break
        self._segments.trace = trace
        self._finish = self._segments.finish
        self._deep: int | None = None  # a stack depth at which translating ran out of stack
        self._device: cuda_run.State | None = None  # entries for CUDA arrays (cuda_run.py)
        # Note [one compile per guard set]: held while a miss finds or adds an entry.
        self._lock = threading.RLock()
        _live.add(self)

    def __repr__(self) -> str:
        return f"<dynexpr.capture({self._fn.__qualname__}, backend={self.backend!r})>"

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else types.MethodType(self, obj)

    # -- calls ------------------------------------------------------------------------
    def _call(self, *args: Any, **kwargs: Any) -> Any:
        """A call the native hit path did not answer (Note [the native hit path])."""
        fn = self._fn
        if not kwargs and len(args) == self._simple_nargs:
            bound = args
        else:
            try:
                bound = bind_call(fn, args, kwargs)
            except BindError:
                return fn(*args, **kwargs)  # Python raises the real TypeError
        # The hit path takes no lock: _centries/_entries are snapshots.
        centries = self._centries
        if centries is not None and _select is not None:  # the guards checked in C
            entry = _select(centries, bound, fn)
        else:
            entry = find(self._entries, None, bound, fn)
        if entry is None:
            return self._miss(bound, args, kwargs)
        self._hits += 1
        if entry.judge is not None:  # Note [judging an entry] (judge.py); breaks too
            return entry.judge.call(self, entry, bound, args, kwargs)
        return run(entry, bound, fn, self._finish)

    def _miss(self, bound: list, args: tuple, kwargs: dict) -> Any:
        # Note [one compile per guard set]
        # Threads that miss at once would each translate and compile the same guard set
        # (8 threads: 8 identical entries, and the recompile limit reached by copies).
        # The miss path finds or adds the entry under a per-function lock, so one thread
        # builds it and the others find it; the hit paths (Dispatch, _call) take no lock.
        fn = self._fn
        if getattr(fn, "__dynexpr_disable__", False):
            self._misses += 1
            return fn(*args, **kwargs)
        if has_dask(bound):  # Dask arrays fail every entry's guards: only a miss sees them
            return dask_run.call(self, bound, args, kwargs)
        if cuda_run.has_device_arrays(bound) or cuda_run.reads_device_arrays(fn):
            return cuda_run.call(self, bound, args, kwargs)  # Note [the device path]
        if self._deep is not None and stack_depth() >= self._deep:
            self._misses += 1
            return fn(*args, **kwargs)  # Note [the translator's own stack]
        with self._lock:
            entry = self._find(bound)
            if entry is not None:
                self._hits += 1
            else:
                self._misses += 1
                entry = self._add_entry(bound)
        if entry is None:
            return fn(*args, **kwargs)
        if entry.judge is not None:
            return entry.judge.call(self, entry, bound, args, kwargs)
        return run(entry, bound, fn, self._finish)

    def _find(self, bound: list) -> Entry | None:
        return find(self._entries, self._centries, bound, self._fn)

    def _add_entry(self, bound: list) -> Entry | None:
        """A new entry for this call (self._lock held), or None: run as plain Python."""
        fn = self._fn
        if self._entries:
            why = diagnostics.why(self._entries, bound, fn, self._argnames())
            diagnostics.log_recompile(fn.__qualname__, len(self._entries) + 1, why)
            self._note_changed_dims(bound)
            record = (len(self._entries) + 1, [(g, seen) for _, g, seen in why])
            if not below_limit(len(self._entries), id(self), fn.__qualname__,
                               self._recompiles + [record]):
                return None
            self._recompiles.append(record)
        if not below_accumulated_limit():
            return None
        try:
            entry = self._new_entry(bound)
        except RecursionError:
            # Note [the translator's own stack]: the translator uses several Python
            # frames per frame it follows, so it can run out of stack where the plain
            # call does not. Nothing has run yet: run the call plainly, and do not
            # translate again this deep (the plain call raises RecursionError itself
            # where plain Python would). _miss checks the depth one frame up.
            self._deep = stack_depth() - 1
            if self._entries:
                self._recompiles.pop()  # no entry came of it
            return None
        except InternalError as e:
            if not config.suppress_errors:
                raise
            warn_once((id(self), "internal"), f"{e}\n(suppress_errors: running as plain Python)")
            return None
        judge.start(entry)
        artifacts_record.entry_added(self, bound, entry)  # the cache index, DYNEXPR_RECORD
        # Note [entry lists are snapshots]: _entries first, so a reader that sees the
        # new _centries never misses the entry in _entries.
        self._entries, self._centries = added(self._entries, self._centries, entry)
        _state["entries"] += 1
        if config.verbose:
            diagnostics.log_entry(fn.__qualname__, len(self._entries), entry)
        return entry

    def _new_entry(self, bound: list) -> Entry:
        tr = None
        if self.dynamic is not False and (self.dynamic or self._dyn or dynamic.any_marks()):
            resumable = self._resumable()
            try:
                tr, kept = translate_dynamic(
                    self._fn, bound, self._dim_policy,
                    run=lambda st: translate(self._fn, bound, st, resumable))
            except Unsupported:
                tr = None  # translated static below, for the break's own guards
            if tr is not None and logs.enabled("dynamic"):
                logs.get("dynamic").info(
                    "%s: dynamic dimensions %s", self._fn.__qualname__,
                    ", ".join(f"{format_source(s, self._argnames())}.shape[{a}]"
                              for s, a in sorted(kept, key=repr)))
        try:
            if tr is None:
                tr = translate(self._fn, bound, resumable=self._resumable())
        except Unsupported as e:
            reason = e.to_reason()
            diagnostics.log_break(self._fn.__qualname__, reason)
            if self.fullgraph:
                raise GraphBreakError(reason) from None
            return Entry(GuardSet(e.guards), reason=reason)
        diagnostics.log_capture(self._fn.__qualname__, self._argnames(), tr)
        if tr.resume is not None:
            diagnostics.log_break(self._fn.__qualname__, tr.resume.reason, resumed=True)
        graph = tr.graph
        if graph.outputs or graph.mutations:
            compiled = self._compile(graph, inputs_of(tr.input_sources, bound, self._fn))
        else:
            compiled = nothing
        return of_translation(tr, compiled)

    def _resumable(self) -> bool:
        """Whether a break may end a compiled segment that plain Python resumes (Note
        [resuming after a graph break]); else a break runs the whole call as Python."""
        return not self.fullgraph and not_resumable(self._fn.__code__) is None

    def _compile(self, graph, example_inputs: list) -> Callable:
        """The callable of a new entry's graph (of the function or of a resume point):
        the backend through the one policy of every backend (backends/policy.py)."""
        compiled = policy.compile_graph(self._backend, graph, example_inputs, mode=self.mode,
                                        fuse=self.fuse, name=self._fn.__qualname__,
                                        owner=id(self))
        self._compiles += 1
        return compiled

    # -- dynamic dimensions ---------------------------------------------------------------
    def _dim_policy(self, source: tuple, axis: int, a: np.ndarray):
        """(lo, hi) when dimension `axis` of array `a` (found at `source`) is to be
        dynamic in the next translation, else None (Note [dynamic dimensions by
        sentinels] in capture/dynamic.py)."""
        marks = dynamic.marks(a)
        if marks is not None and axis in marks:
            return marks[axis]  # mark_dynamic's range, or None for mark_static
        if self.dynamic or (source, axis) in self._dyn:
            return (2, None)
        return None

    def _note_changed_dims(self, bound: list) -> None:
        """dynamic=None: an array dimension whose extent differs from the one an entry was
        captured for becomes dynamic for the next translation."""
        if self.dynamic is not None:
            return
        for source, axis, was, got in changed_dims(self._entries, bound, self._fn):
            if (source, axis) not in self._dyn and logs.enabled("dynamic"):
                logs.get("dynamic").info(
                    "%s: %s.shape[%d] was %d, now %d: making it dynamic",
                    self._fn.__qualname__, format_source(source, self._argnames()),
                    axis, was, got)
            self._dyn.add((source, axis))

    # -- introspection ------------------------------------------------------------------
    def cache_info(self) -> CacheInfo:
        device = len(self._device.entries) if self._device is not None else 0
        info = CacheInfo(self._hits, self._misses, self._compiles, len(self._entries) + device)
        info.judged = tuple(judge.report(self._entries))
        return info

    def cache_clear(self) -> None:
        with self._lock:
            _state["entries"] -= len(self._entries)
            self._entries, self._centries = [], []
            self._dyn.clear()
            self._deep = None
            self._device = None
            self._recompiles.clear()
            self._segments.clear()
            self._hits = self._misses = self._compiles = 0
            diagnostics.forget(id(self))

    @property
    def entries(self) -> list[Entry]:
        return list(self._entries)

    def _argnames(self) -> tuple:
        return self._fn.__code__.co_varnames


# The captured function a stencil task runs on each chunk (dask_stencil.py).
dask_run.dask_stencil.capture_fn = (
    lambda fn: CapturedFunction(fn, "cpu", "default", None, False, True))


def _after_fork_in_child() -> None:
    # A lock another thread held at the fork stays held forever in the child.
    for f in list(_live):
        f._lock = threading.RLock()
        f._segments.lock = threading.RLock()
        if f._device is not None:
            f._device.lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _plain_fallback_changed(on: bool) -> None:
    for f in list(_live):
        judge.switched(on, f._entries)


on_change("plain_fallback", _plain_fallback_changed)


def reset() -> None:
    """Forget every captured graph and warning (compiled kernels stay in the disk cache)."""
    for f in list(_live):
        f.cache_clear()
    diagnostics.reset()
