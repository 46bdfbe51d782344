"""Relaxing a rolled loop's trip count guard (Note [stopping the unrolling early],
truncate.py): a loop over range(start, T, step) whose unrolling stopped early and which
rolled computes the right result for every T in an interval, so T's VALUE guard becomes
TYPE int plus comparisons, and a new T reuses the entry without translating again.

The interval: at least `lead` iterations (the ones left unrolled before the loop node),
and, when the body indexes at an offset that moves with i (Note [dynamic offsets],
ir.py), no i past the last one whose offsets are in bounds (plain NumPy would raise
IndexError there, part way through; the relaxed entry does not take that T: it
translates again and runs as before). Only when T is read by nothing but that one
range() call (StopVar counts the reads) and the loop variable was not read after the
loop (FinalIndexVar): otherwise the graph holds T's value and the VALUE guard stays.
"""

from __future__ import annotations

from typing import Any

from .. import ir
from .variables import StopVar


def relax(ctx: Any, source: tuple, rng: range, lead: int, body: ir.Graph, it: Any) -> None:
    var = ctx.wrapped(source)
    if (not isinstance(var, StopVar) or var.reads or ctx.range_uses.get(source) != 1
            or it.final_read or rng.stop != var.raw):
        return
    b = bounds(body)
    if b is None:
        return  # an offset into an extent that itself moves with i: keep the exact guard
    lo, hi = b
    guards = [(">", rng.start + rng.step * (lead - 1))] if rng.step > 0 else \
        [("<", rng.start + rng.step * (lead - 1))]
    if rng.step > 0 and hi is not None:
        guards.append(("<=", hi + 1))
    elif rng.step < 0 and lo is not None:
        guards.append((">=", lo - 1))
    if any(not _holds(sym, c, var.raw) for sym, c in guards):
        return  # (cannot happen: this T was translated) keep the exact guard
    for g in [g for g in ctx._guards if g.kind == "VALUE" and g.source == source]:
        del ctx._guards[g]
    ctx.guard("TYPE", source, int)
    for sym, c in guards:
        ctx.guard("CMP", source, (sym, c, True, True))


def _holds(sym: str, c: int, x: int) -> bool:
    return {">": x > c, "<": x < c, "<=": x <= c, ">=": x >= c}[sym]


def bounds(body: ir.Graph) -> tuple[int | None, int | None] | None:
    """The interval of i for which every dynamic offset of the body is in bounds (and
    every dynamic extent selects exactly the elements Python's slice would); None when
    an offset indexes an extent that moves with i."""
    lo, hi = None, None
    for v in body.values:
        if v.op not in ("getitem", "setitem"):
            continue
        dim = 0
        for e in v.attr("index"):
            if e[0] in ("dyn", "dslice"):
                extent = v.args[0].shape[dim]
                if isinstance(extent, str):
                    return None
                if e[0] == "dslice" and isinstance(e[4], tuple):
                    # Note [dynamic extents]: 0 <= start <= extent, 0 <= length and
                    # 0 <= start + step*length <= extent (step > 0).
                    (lm, la), step = e[4], e[5]
                    cons = [(e[2], e[3], extent + 1), (lm, la, 1 << 62),
                            (e[2] + step * lm, e[3] + step * la, extent + 1)]
                else:
                    firsts = [e[3]]
                    if e[0] == "dslice" and e[4] > 0:
                        firsts.append(e[3] + e[5] * (e[4] - 1))
                    cons = [(e[2], add, extent) for add in firsts]
                for mul, add, n in cons:  # 0 <= mul*i + add <= n - 1
                    a, b = _interval(mul, add, n)
                    lo = a if lo is None or (a is not None and a > lo) else lo
                    hi = b if hi is None or (b is not None and b < hi) else hi
            if e[0] != "newaxis":
                dim += 1
    return lo, hi


def _interval(mul: int, add: int, extent: int) -> tuple[int | None, int | None]:
    if mul == 0:
        return None, None
    a, b = -add, extent - 1 - add  # a <= mul*i <= b
    if mul > 0:  # ceil(a/mul) <= i <= floor(b/mul)
        return -((-a) // mul), b // mul
    m = -mul  # -b <= m*i <= -a
    return -(b // m), (-a) // m
