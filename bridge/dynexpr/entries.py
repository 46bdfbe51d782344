"""Cache entries: a guard set plus what runs when it holds, and the lists of them that a
captured function (captured.py) and each of its resume points (segments.py) keep.

Note [entry lists are snapshots]
The hit path reads a function's entry list without a lock, on any thread (the native
fast path walks it in C). So a published list is never changed: an entry is added by
building a new list and assigning it (under the owner's lock, Note [one compile per
guard set] in captured.py), and a reader that took the old list finds the entry on its
miss, under the lock. Assigning an attribute is atomic in CPython.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from . import diagnostics
from .capture.resume import build
from .config import config
from .guards import GuardSet, resolve

try:
    from . import _native
    from ._native import select
except ImportError:  # a source checkout without the built extension: guards in Python
    _native = None
    select = None


class Entry:
    __slots__ = ("guards", "cguards", "compiled", "input_getters", "template", "translation",
                 "reason", "fetch", "arg_index", "direct", "resume", "judge", "verdict")

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
        self.cguards = native_guards(guards)  # the same guards checked in C, or None
        self.compiled = compiled  # None: a graph-break entry (plain Python)
        self.input_getters = [getter(s) for s in sources]
        self.template = template
        self.translation = translation
        self.reason = reason
        # A segment that stops at a graph break (capture.resume.Resume): the call goes on
        # in segments.Segments.finish. None: the entry runs the whole call.
        self.resume = resume
        # Note [judging an entry] (judge.py): not None while a top-level entry's call goes
        # through its judge (being timed, running plain, or a graph break's plain call);
        # verdict: what the last judgement measured.
        self.judge = None
        self.verdict = None
        # The per-call path, kept short (a 1K add costs ~3 us in all): the inputs when
        # they are all arguments, and the output when the result is one of them as is.
        idx = [s[1] for s in sources if s[0] == "arg"]
        # Note [the native hit path] (bridge/native/guards.c): the argument positions of
        # the inputs, or None where one is not an argument.
        self.arg_index = tuple(idx) if len(idx) == len(sources) else None
        if len(idx) != len(sources):
            self.fetch = None
        elif len(idx) >= 2:
            self.fetch = operator.itemgetter(*idx)
        else:
            self.fetch = (lambda b, i=idx[0]: (b[i],)) if idx else (lambda b: ())
        self.direct = (template[1] if template is not None and template[0] == "out"
                       and template[2] != "scalar" and not template[3] else None)


def of_translation(tr, compiled: Callable) -> Entry:
    """The entry of translation `tr` whose graph runs as `compiled`."""
    r = tr.resume
    entry = Entry(GuardSet(tr.guards), compiled, tr.input_sources, tr.template, tr,
                  r.reason if r is not None else None, r)
    if getattr(compiled, "tiered", False):  # Note [tiered first call]: it swaps itself out
        compiled.entry = entry
    return entry


def run(entry: Entry, state: Any, fn: Any, resume: Callable) -> Any:
    """What compiled `entry` returns for `state` (a call's bound arguments, or the values
    of a frame resumed after a break): its kernel on its inputs, then the return value
    rebuilt from the outputs. An entry that stops at a graph break hands its outputs to
    `resume(entry, outs, state)`. The one per-call path of both captured.py and
    segments.py."""
    fetch = entry.fetch
    if fetch is not None:
        outs = entry.compiled(*fetch(state))
    else:
        outs = entry.compiled(*[get(state, fn) for get in entry.input_getters])
    if entry.direct is not None:
        return outs[entry.direct]
    if entry.resume is not None:
        return resume(entry, outs, state)
    return build(entry.template, outs, state, fn)


def native_guards(guards: GuardSet):
    """guards as a dynexpr._native.GuardSet (checked in C on every call), or None where
    the extension is not built or a guard kind is one only the Python check knows."""
    if _native is None:
        return None
    try:
        return _native.GuardSet(guards.guards)
    except (TypeError, ValueError):
        return None


def getter(src: tuple) -> Callable:
    if src[0] == "arg":
        i = src[1]
        return lambda bound, fn: bound[i]
    return lambda bound, fn: resolve(src, bound, fn)


def inputs_of(sources, state: Any, fn: Any) -> list:
    """The arrays at `sources` (a translation's input sources) in this call."""
    return [resolve(s, state, fn) for s in sources]


def find(entries: list[Entry], native: list | None, state: Any, fn: Any) -> Entry | None:
    """The first entry whose guards hold for `state`: checked in C while every entry has
    native guards (`native` is then the (GuardSet, entry) list), else in Python."""
    if native is not None and select is not None:
        return select(native, state, fn)
    for e in entries:
        if e.guards.holds(state, fn):
            return e
    return None


def added(entries: list[Entry], native: list | None,
          entry: Entry) -> tuple[list[Entry], list | None]:
    """New (entries, native) lists with `entry` appended (Note [entry lists are
    snapshots]); native becomes None for good once one entry has no native guards."""
    entries = entries + [entry]
    if native is not None:
        native = None if entry.cguards is None else native + [(entry.cguards, entry)]
    return entries, native


def below_limit(count: int, owner_id: int, qualname: str, history: list) -> bool:
    """Whether a function with `count` entries may add one (config.recompile_limit); the
    first time it may not, one warning with `history`, why each capture was needed."""
    if count < config.recompile_limit:
        return True
    diagnostics.warn_limit(owner_id, qualname, config.recompile_limit, count, history)
    return False


def below_accumulated_limit() -> bool:
    """Whether the process may add an entry (config.accumulated_recompile_limit, over
    every captured function); warns once when not."""
    if diagnostics._state["entries"] < config.accumulated_recompile_limit:
        return True
    diagnostics.warn_once(
        "accumulated",
        "dynexpr: config.accumulated_recompile_limit "
        f"({config.accumulated_recompile_limit}) reached; new captures run as plain Python",
        stacklevel=5,
    )
    return False


def nothing(*_: Any) -> tuple:
    """The callable of a graph with no outputs and no mutations."""
    return ()
