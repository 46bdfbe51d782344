"""The captured function: cache entries, guard checks, translation on a miss,
recompile limits, backends, and rebuilding the return value.

One call (the Python path; the native fast path evaluates the same guard data):
    bound = the arguments bound to fn's parameters (guard sources index them)
    the first entry whose guards all hold runs; else translate, compile, add an entry
An entry is either a compiled graph or a recorded graph break: a break entry runs the
function as plain Python, once, without translating again (its guards are every fact
the translation had consulted when it stopped, so the same facts break the same way).
"""

from __future__ import annotations

import importlib
import inspect
import operator
import os
import sys
import threading
import types
import warnings
import weakref
from collections import namedtuple
from collections.abc import Callable
from typing import Any

import numpy as np

from . import eager, logs
from .capture import GraphBreakError, InternalError, Unsupported, translate
from .capture.calls import BindError, bind_call
from .capture.concrete import not_resumable
from .capture.resume import build
from .config import config
from .explain import recompile_lines
from .capture import dynamic
from .capture.translate import stack_depth, translate_dynamic
from .guards import GuardSet, changed_dims, format_source, resolve
from .segments import Segments
from .toolchain import BuildUnavailable

CacheInfo = namedtuple("CacheInfo", "hits misses compiles entries")
BACKENDS = ("cpu", "eager")
MODES = ("default", "max-autotune")


class DynexprWarning(UserWarning):
    """dynexpr fell back to plain Python or NumPy somewhere it would rather not."""


_live: weakref.WeakSet[CapturedFunction] = weakref.WeakSet()
try:
    from ._native import select as _select
except ImportError:  # a source checkout without the built extension: guards in Python
    _select = None
_state = {"entries": 0, "warned": set(), "runtime": None}


def warn_once(key: Any, message: str) -> None:
    if key not in _state["warned"]:
        _state["warned"].add(key)
        warnings.warn(message, DynexprWarning, stacklevel=4)


def _cpu_available() -> bool:
    """Whether the compiled backend can run; False (eager, with one warning) without
    dynexpr.runtime or the built native extension (a source checkout)."""
    if _state["runtime"] is None:
        try:
            importlib.import_module(f"{__package__}.runtime")
            importlib.import_module(f"{__package__}._native")
            _state["runtime"] = True
        except ImportError as e:
            warn_once(
                "runtime",
                f"dynexpr: backend='cpu' is not available ({e}); captured graphs "
                "run op by op with NumPy (backend='eager') instead",
            )
            _state["runtime"] = False
    return _state["runtime"]


class Entry:
    __slots__ = ("guards", "cguards", "compiled", "input_getters", "template", "translation",
                 "reason", "fetch", "direct", "resume")

    def __init__(
        self,
        guards: GuardSet,
        compiled=None,
        sources=(),
        template=None,
        translation=None,
        reason=None,
        resume=None,
    ) -> None:
        self.guards = guards
        self.cguards = _native_guards(guards)  # the same guards checked in C, or None
        self.compiled = compiled  # None: a graph-break entry (plain Python)
        self.input_getters = [_getter(s) for s in sources]
        self.template = template
        self.translation = translation
        self.reason = reason
        # A segment that stops at a graph break (capture.resume.Resume): the call goes on
        # in segments.Segments.finish. None: the entry runs the whole call.
        self.resume = resume
        # The per-call path, kept short (a 1K add costs ~3 us in all): the inputs when
        # they are all arguments, and the output when the result is one of them as is.
        idx = [s[1] for s in sources if s[0] == "arg"]
        if len(idx) != len(sources):
            self.fetch = None
        elif len(idx) >= 2:
            self.fetch = operator.itemgetter(*idx)
        else:
            self.fetch = (lambda b, i=idx[0]: (b[i],)) if idx else (lambda b: ())
        self.direct = (template[1] if template is not None and template[0] == "out"
                       and template[2] != "scalar" and not template[3] else None)


def _native_guards(guards: GuardSet):
    """guards as a dynexpr._native.GuardSet (checked in C on every call), or None where
    the extension is not built or a guard kind is one only the Python check knows."""
    try:
        from . import _native
    except ImportError:
        return None
    try:
        return _native.GuardSet(guards.guards)
    except (TypeError, ValueError):
        return None


def _getter(src: tuple) -> Callable:
    if src[0] == "arg":
        i = src[1]
        return lambda bound, fn: bound[i]
    return lambda bound, fn: resolve(src, bound, fn)


class CapturedFunction:
    """What dynexpr.capture returns: call it like the function it wraps."""

    _dynexpr_captured = True  # marks captured functions for the translator (builder.py)

    def __init__(
        self, fn: Callable, backend: Any, mode: str, dynamic: Any, fullgraph: bool, fuse: bool
    ) -> None:
        self._fn = fn
        code = fn.__code__
        # Positional calls of a function without defaults' tricks bind as they are.
        star = code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
        self._simple_nargs = -1 if code.co_kwonlyargcount or star else code.co_argcount
        self.__dynexpr_wrapped__ = fn
        self.backend, self.mode, self.dynamic = backend, mode, dynamic
        self.fullgraph, self.fuse = fullgraph, fuse
        for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(self, attr, getattr(fn, attr, None))
        self.__wrapped__ = fn
        self._entries: list[Entry] = []
        # (native GuardSet, entry) pairs for _native.select, while every entry has one.
        self._centries: list[tuple] | None = []
        self._hits = self._misses = self._compiles = 0
        # (source, axis) of dimensions seen with two extents: dynamic from then on
        # (dynamic=None, TorchDynamo's "automatic dynamic shapes").
        self._dyn: set[tuple] = set()
        # Per recompile: (entry number, [(guard that failed, value seen), ...]).
        self._recompiles: list[tuple[int, list[tuple[str, str]]]] = []
        self._segments = Segments(self)  # what runs after a graph break
        self._deep: int | None = None  # a stack depth at which translating ran out of stack
        # Note [one compile per guard set]: held while a miss finds or adds an entry.
        self._lock = threading.RLock()
        _live.add(self)

    def __repr__(self) -> str:
        return f"<dynexpr.capture({self._fn.__qualname__}, backend={self.backend!r})>"

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else types.MethodType(self, obj)

    # -- calls ------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fn = self._fn
        if not kwargs and len(args) == self._simple_nargs:
            bound = args
        else:
            try:
                bound = bind_call(fn, args, kwargs)
            except BindError:
                return fn(*args, **kwargs)  # Python raises the real TypeError
        centries = self._centries
        if centries is not None and _select is not None:  # the guards checked in C
            entry = _select(centries, bound, fn)
            if entry is not None:
                self._hits += 1
                return self._run(entry, bound, args, kwargs)
            return self._miss(bound, args, kwargs)
        for entry in self._entries:
            if entry.guards.holds(bound, fn):
                self._hits += 1
                return self._run(entry, bound, args, kwargs)
        return self._miss(bound, args, kwargs)

    def _run(self, entry: Entry, bound: list, args: tuple, kwargs: dict) -> Any:
        if entry.compiled is None:
            return self._fn(*args, **kwargs)
        fetch = entry.fetch
        if fetch is not None:
            outs = entry.compiled(*fetch(bound))
        else:
            outs = entry.compiled(*[get(bound, self._fn) for get in entry.input_getters])
        if entry.direct is not None:
            return outs[entry.direct]
        if entry.resume is not None:
            return self._segments.finish(entry, outs, bound)
        return build(entry.template, outs, bound, self._fn)

    def _miss(self, bound: list, args: tuple, kwargs: dict) -> Any:
        # Note [one compile per guard set]
        # Threads that miss at once would each translate and compile the same guard set
        # (8 threads: 8 identical entries, and the recompile limit reached by copies).
        # The miss path finds or adds the entry under a per-function lock, so one thread
        # builds it and the others find it; the hit path (__call__) takes no lock.
        fn = self._fn
        if getattr(fn, "__dynexpr_disable__", False):
            self._misses += 1
            return fn(*args, **kwargs)
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
        return self._run(entry, bound, args, kwargs)

    def _find(self, bound: list) -> Entry | None:
        centries = self._centries
        if centries is not None and _select is not None:
            return _select(centries, bound, self._fn)
        return next((e for e in self._entries if e.guards.holds(bound, self._fn)), None)

    def _add_entry(self, bound: list) -> Entry | None:
        """A new entry for this call (self._lock held), or None: run as plain Python."""
        fn = self._fn
        if self._entries:
            why = self._why(bound)
            self._log_recompile(why)
            self._note_changed_dims(bound)
            record = (len(self._entries) + 1, [(g, seen) for _, g, seen in why])
            if len(self._entries) >= config.recompile_limit:
                text = "\n".join(recompile_lines(self._recompiles + [record]))
                warn_once(
                    (id(self), "limit"),
                    f"dynexpr: {fn.__qualname__} reached config.recompile_limit "
                    f"({config.recompile_limit}); from now on calls that fit none of its "
                    f"{len(self._entries)} entries run as plain Python. Why each capture after "
                    f"the first was needed (the guard of an earlier entry that failed, and the "
                    f"value seen):\n{text}\nRaise dynexpr.config.recompile_limit, or use "
                    "dynamic=True / mark_dynamic for changing shapes",
                )
                return None
            self._recompiles.append(record)
        if _state["entries"] >= config.accumulated_recompile_limit:
            warn_once(
                "accumulated",
                "dynexpr: config.accumulated_recompile_limit "
                f"({config.accumulated_recompile_limit}) reached; new captures run as plain Python",
            )
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
        self._entries.append(entry)
        if self._centries is not None:
            if entry.cguards is None:
                self._centries = None  # one entry C cannot check: check all in Python
            else:
                self._centries.append((entry.cguards, entry))
        _state["entries"] += 1
        if config.verbose:
            print(
                f"dynexpr: {self._fn.__qualname__}: entry {len(self._entries)}: {_summary(entry)}",
                file=sys.stderr,
            )
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
            log = logs.get("graph_breaks")
            if log.isEnabledFor(20):
                log.info("%s: %s", self._fn.__qualname__, reason)
            if self.fullgraph:
                raise GraphBreakError(reason) from None
            return Entry(GuardSet(e.guards), reason=reason)
        self._log_capture(tr)
        if tr.resume is not None:
            log = logs.get("graph_breaks")
            if log.isEnabledFor(20):
                log.info("%s: %s (compiled code before and after it)", self._fn.__qualname__,
                         tr.resume.reason)
        graph = tr.graph
        if graph.outputs or graph.mutations:
            arrays = [get(bound, self._fn) for get in map(_getter, tr.input_sources)]
            compiled = self._compile(graph, arrays)
            self._compiles += 1
        else:
            compiled = _nothing
        entry = Entry(GuardSet(tr.guards), compiled, tr.input_sources, tr.template, tr,
                      tr.resume.reason if tr.resume is not None else None, tr.resume)
        if getattr(compiled, "tiered", False):
            compiled.entry = entry
        return entry

    def _resumable(self) -> bool:
        """Whether a break may end a compiled segment that plain Python resumes (Note
        [resuming after a graph break]); else a break runs the whole call as Python."""
        return not self.fullgraph and not_resumable(self._fn.__code__) is None

    def _compile(self, graph, example_inputs: list) -> Callable:
        backend = self.backend
        if callable(backend):
            compiled = backend(graph, example_inputs)
        elif backend == "cpu" and _cpu_available():
            try:
                compiled = self._compile_cpu(graph, example_inputs)
            except (BuildUnavailable, OSError) as e:
                compiled = unavailable(e, graph)
            except NotImplementedError as e:  # a valid graph the compiled backend lacks
                warn_once(
                    ("cpu-missing", str(e)),
                    f"dynexpr: {self._fn.__qualname__}: the "
                    f"cpu backend cannot compile this graph yet ({e}); it runs op by "
                    "op with NumPy (backend='eager') instead",
                )
                compiled = eager.compile_graph(graph)
            except Exception as e:
                if not config.suppress_errors:
                    raise
                warn_once(
                    ("cpu-error", id(self)),
                    f"{e}\n(suppress_errors: running the captured graph with NumPy instead)",
                )
                compiled = eager.compile_graph(graph)
        else:
            compiled = eager.compile_graph(graph)
        if not callable(compiled):
            raise TypeError(
                f"dynexpr: backend {backend!r} returned {type(compiled).__name__}, "
                "not a callable f(*inputs) -> tuple of output arrays"
            )
        return compiled

    def _compile_cpu(self, graph, example_inputs: list) -> Callable:
        """The kernel, when the cache holds it or compiling now is wanted; else a background.Tiered
        that runs NumPy until the background compile is done (Note [tiered first call]).
        mode="max-autotune" compiles now and times its schedules (autotune.py)."""
        from . import autotune, background, runtime

        plan = runtime.plan(graph, fuse=self.fuse)
        ready = runtime.cached(plan)
        if self.mode == "max-autotune":
            fn = (ready or runtime.finish(plan)).fn
            autotune.tune(fn, plan.key, example_inputs, autotune.written_inputs(graph),
                          self._fn.__qualname__)
            return fn
        if ready is not None:
            return ready.fn
        if not config.background_compile:
            return runtime.finish(plan).fn
        job = background.submit(lambda: runtime.finish(plan).fn,
                                f"{self._fn.__qualname__} (unit {plan.key[:12]})")
        return background.Tiered(job, eager.compile_graph(graph), self._fn.__qualname__)

    def _why(self, bound: list) -> list[tuple[int, str, str]]:
        """For each entry (numbered from 1), the first guard that fails for this call and
        the value seen."""
        names, out = self._argnames(), []
        for i, e in enumerate(self._entries, 1):
            g = e.guards.failing(bound, self._fn)
            if g is not None:
                out.append((i, g.describe(names), _seen(g, bound, self._fn)))
        return out

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
        return CacheInfo(self._hits, self._misses, self._compiles, len(self._entries))

    def cache_clear(self) -> None:
        _state["entries"] -= len(self._entries)
        self._entries.clear()
        self._centries = []
        self._dyn.clear()
        self._deep = None
        self._recompiles.clear()
        self._segments.clear()
        self._hits = self._misses = self._compiles = 0
        _state["warned"] = {
            k for k in _state["warned"] if not (isinstance(k, tuple) and k[0] == id(self))
        }

    @property
    def entries(self) -> list[Entry]:
        return list(self._entries)

    def _argnames(self) -> tuple:
        return self._fn.__code__.co_varnames

    def _log_capture(self, tr) -> None:
        if logs.enabled("guards"):
            lines = "\n  ".join(g.describe(self._argnames()) for g in tr.guards)
            logs.get("guards").info(
                "%s: %d guards\n  %s", self._fn.__qualname__, len(tr.guards), lines
            )
        if logs.enabled("output_code"):
            logs.get("output_code").info(
                "%s: captured graph\n%s", self._fn.__qualname__, tr.graph.canonical()
            )

    def _log_recompile(self, why: list[tuple[int, str, str]]) -> None:
        if logs.enabled("recompiles"):
            text = "; ".join(f"entry {i} needs {g}" for i, g, _ in why)
            logs.get("recompiles").info(
                "%s: capturing again (entry %d): %s",
                self._fn.__qualname__,
                len(self._entries) + 1,
                text,
            )


def _seen(g, bound: list, fn: Any) -> str:
    """What guard g's source holds in this call, said the way the guard is."""
    try:
        if g.kind in ("ALIAS", "DIM_EQ"):
            a, b = (resolve(s, bound, fn) for s in g.source)
            if g.kind == "DIM_EQ":
                return f"{a.shape[g.expected[0]]} and {b.shape[g.expected[1]]}"
            from .guards import alias_relation
            return alias_relation(a, b)
        x = resolve(g.source, bound, fn)
    except Exception as e:  # the source itself is gone
        return f"unreachable: {type(e).__name__}"
    kind = g.kind
    if kind in ("SHAPE", "DYN_SHAPE"):
        return repr(getattr(x, "shape", x))
    if kind == "DTYPE":
        return repr(getattr(x, "dtype", x))
    if kind in ("TYPE",):
        return type(x).__qualname__
    if kind == "LEN":
        return str(len(x))
    if kind == "STRIDES_CLASS":
        from .guards import strides_class
        return repr(strides_class(x))
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


def _summary(entry: Entry) -> str:
    if entry.compiled is None:
        return f"plain Python ({entry.reason.reason}, {entry.reason.file}:{entry.reason.line})"
    return f"{len(entry.translation.graph.ops())} ops, {len(entry.guards)} guards"


def unavailable(err: BaseException, graph) -> Callable:
    """Note [when building is not possible]
    No compiler, a full disk or an unwritable cache is the machine's state, not the
    user's mistake: the call must still return what NumPy returns. The entry runs its
    captured graph with NumPy (the eager backend: the same results, unfused), with one
    warning per process naming the cause; later new entries try to compile again. A
    compiler that rejects the generated code is still an error (CompileError)."""
    warn_unavailable(err)
    return eager.compile_graph(graph)


def warn_unavailable(err: BaseException) -> None:
    warn_once("build-unavailable",
              f"{err}\ndynexpr: kernels cannot be compiled here now; captured functions run "
              "with NumPy instead (the same results, unfused). Free disk space, make the "
              "cache directory writable (DYNEXPR_CACHE_DIR) or install g++ (CXX) to get "
              "compiled kernels.")


def _nothing(*_: Any) -> tuple:
    return ()


def _after_fork_in_child() -> None:
    # A lock another thread held at the fork stays held forever in the child.
    for f in list(_live):
        f._lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def reset() -> None:
    """Forget every captured graph and warning (compiled kernels stay in the disk cache)."""
    for f in list(_live):
        f.cache_clear()
    _state["entries"] = 0
    _state["warned"] = set()
    _state["runtime"] = None
