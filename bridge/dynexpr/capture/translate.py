"""Entry point of the translator: one call of the captured function, symbolically.

The opcode table is chosen once, in versions.py, from the running CPython's version;
nothing else in the translator looks at the version. This module imports the handler
modules that register themselves for calls.call (Note [handlers are registered]).
"""

from __future__ import annotations

import sys
from typing import Any

# control, np_table and pybuiltins register their handlers when imported (registry.py).
from . import control, dynamic, np_table, pybuiltins  # noqa: F401
from ..guards import Guard
from .builder import Context
from .calls import real_cells, top_level_locals
from .output import Translation
from .resume import run_top
from .versions import translator


def translate(fn: Any, bound: list, dyn: Any = None, resumable: bool = False,
              device: bool = False, stand_ins: dict | None = None) -> Translation:
    """Run fn's bytecode on symbolic values for this call's bound arguments; raises
    errors.Unsupported at the first graph break, or with `resumable` returns the part
    before it (Translation.resume, Note [resuming after a graph break]). `dyn`: see
    translate_dynamic. `device`: for CUDA arrays' stand-ins (Note [the device path]);
    `stand_ins`: source -> the stand-in read there for a global's or closure's CUDA array."""

    def make(ctx: Context):
        code = fn.__code__
        return translator()(ctx, code, top_level_locals(fn, bound), real_cells(ctx, fn),
                             fn.__globals__, None)

    return run_top(fn, make, dyn, resumable, device=device, stand_ins=stand_ins)


def stack_depth() -> int:
    """The number of Python frames below this one (the miss path only: it walks them)."""
    f, n = sys._getframe(1), 0
    while f is not None:
        f, n = f.f_back, n + 1
    return n


def translate_dynamic(fn: Any, bound: list, policy, run=None) -> tuple[Translation | None, set]:
    """translate() with the dimensions `policy` names dynamic (Note [dynamic dimensions by
    sentinels]). Returns the translation with symbolic extents and the (source, axis)
    pairs that stayed dynamic, or (None, set()) when no dimension could stay dynamic (the
    caller translates static); raises Unsupported only for a break that is not about
    the sentinels. `run(st)` translates with DynState st (default: translate(fn, bound,
    st)); a resumable translation's frame at its break is compared too."""
    if run is None:
        def run(st):
            return translate(fn, bound, st)

    specialized: set[tuple] = set()

    def narrowed(source, axis, a):
        return None if (source, axis) in specialized else policy(source, axis, a)

    for _ in range(16):
        runs = []
        try:
            for k in (0, 1):
                st = dynamic.DynState(narrowed, k)
                runs.append((run(st), st))
        except dynamic.SpecializeDims as e:
            for s in e.sentinels:
                specialized.update(st.members.get(s, ()))
            continue
        (a, sa), (b, sb) = runs
        if not sa.members:
            return None, set()
        if _generalize(a, sa) != _generalize(b, sb):
            return None, set()  # something depends on the extents' values
        return _symbolic(a, sa), {m for ms in sa.members.values() for m in ms}
    return None, set()


def _generalize(tr: Translation, st) -> tuple:
    """What must be equal between the two runs: graph text, guards and the output
    template, with each sentinel replaced by its symbol."""
    names = st.symbol_of()

    def sub(x):
        if isinstance(x, int) and not isinstance(x, bool) and x in names:
            return names[x]
        if isinstance(x, tuple):
            return tuple(sub(e) for e in x)
        if isinstance(x, list):
            return [sub(e) for e in x]
        return x

    text = tr.graph.canonical()
    for s, name in names.items():
        text = text.replace(str(s), name)
    guards = [(g.kind, g.source, sub(g.expected) if g.kind == "SHAPE" else repr(g.expected))
              for g in tr.guards]
    r = tr.resume
    frame = None if r is None else (r.ip, r.names, sub(r.locals_t), sub(r.stack_t))
    return text, guards, sub(tr.template), tuple(map(tuple, tr.input_sources)), frame


def _symbolic(tr: Translation, st) -> Translation | None:
    """tr with sentinel extents replaced by symbols and SHAPE guards of arrays with dynamic
    dimensions replaced by DYN_SHAPE (+ DIM_EQ for extents that must stay equal)."""
    names = st.symbol_of()
    r = tr.resume
    live = tr.template if r is None else (r.locals_t, r.stack_t)
    if any(x in names for x in dynamic.ints(live)):
        return None  # a returned (or live) view's steps hold an extent
    for v in tr.graph.values:
        if any(isinstance(x, int) and x in names for x in dynamic.ints(v.attrs)):
            return None  # an op attribute holds an extent: no symbolic form for it
        v.shape = tuple(names.get(d, d) if isinstance(d, int) else d for d in v.shape)
    guards = []
    for g in tr.guards:
        if g.kind == "SHAPE" and any(d in names for d in g.expected):
            exp = tuple(st.ranges[d] if d in names else d for d in g.expected)
            guards.append(Guard("DYN_SHAPE", g.source, exp))
        else:
            guards.append(g)
    for s, members in st.members.items():
        (src0, ax0) = members[0]
        for src, ax in members[1:]:
            guards.append(Guard("DIM_EQ", (src0, src), (ax0, ax)))
    tr.guards = guards
    return tr
