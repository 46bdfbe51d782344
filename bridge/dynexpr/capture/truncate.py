"""Stopping the unrolling of a for-range loop early (Note [stopping the unrolling early]):
translation time does not grow with the trip count.

Note [stopping the unrolling early]
reroll.py rolls the translated iterations of a loop back into a loop node, checking every
one of them. For a long loop the translation itself still cost T iterations, so it stops
after AT iterations when nothing the rest could do differently was seen:
  - the loop variable (LoopIndexVar) was read only as an index, in affine arithmetic
    (i+1, n-1-i, 2*i, t0 + i*dt) or as a scalar in array math (`x * t`: reroll checks the
    constants move affinely, Note [loop-derived scalars]): a branch on it, `i // 2`,
    `np.sin(t)`, a call with it mark the loop opaque, and it runs to its end as before;
  - the frame at the start of the last two translated iterations holds the same Python
    state: each local and stack entry is the same object, an equal immutable constant, an
    array (the graph carries it; reroll checks it) or the loop variable; a list or dict
    holds the same items; no other loop over a range is running around this one
    (attribute writes and other side effects are graph breaks, see below).
The loop is then left as CPython would after its last iteration (the loop variable, and
the values computed from it, set to their last values) and marked `truncated`: reroll
rolls it with the full range's stop, and when it cannot (the iterations were not one
computation, or a value after the loop is not one the loop carries), it raises
Untruncate and the translation runs again with every iteration (resume.run_top). A graph
break in a translation with a truncated loop also translates again without truncation,
so no resume state ever comes from a loop that was cut short. When the stop is an int
argument read by nothing else, its VALUE guard becomes the range of trip counts the
graph is right for (relax.py): a new T reuses the entry without translating.
"""

from __future__ import annotations

from typing import Any

from .arrays import ArrayVar
from .errors import Untruncate
from .variables import (DictVar, FinalIndexVar, IteratorVar, ListVar, LoopIndexVar, PyVar,
                        replay)

AT = 8  # iterations translated before the rest may be skipped (LEAD + 2 compared, and more)
_IMMUTABLE = (int, float, complex, bool, str, bytes, type(None))


def stop_early(frame: Any, it: IteratorVar) -> bool:
    """At the start of an iteration of `it` (its mark just recorded): whether to stop
    translating its iterations here; if so, the frame is left as after the last one."""
    ctx = frame.ctx
    rng, marks = it.marks[0], it.marks[1]
    done = len(marks) - 1  # iterations translated so far
    if not getattr(ctx, "truncate_loops", False):
        return False
    if len(rng) > ctx.budget.loop_iterations and (it.opaque or done > AT):
        # Only a loop that stops early may pass the unrolling budget (operators.iterate):
        # this one cannot, so translate again, breaking before the loop as always.
        raise Untruncate(f"a loop over {len(rng)} items that does not stop early")
    if it.opaque or len(rng) <= AT + 2 or done not in (AT - 1, AT):
        return False
    cells = {n: getattr(c, "contents", None) for n, c in (frame.cells or {}).items()}
    seen = list(frame.locals.values()) + list(frame.stack) + list(cells.values())
    # The contents of containers (a list appended to each iteration is a change the
    # graph does not see), shallow: their items are compared by identity.
    contents = {id(v): (v, _items(v)) for v in seen if isinstance(v, (ListVar, DictVar))}
    state = (dict(frame.locals), list(frame.stack), contents, cells)
    if done == AT - 1:
        it.snapshot = state
        return False
    if it.snapshot is None or _nested(ctx, it) or not _same_state(it.snapshot, state, it):
        return False
    last = rng[-1]
    for name, v in list(frame.locals.items()):
        if isinstance(v, LoopIndexVar) and v.it is it:
            frame.locals[name] = FinalIndexVar(replay(v.chain, last), it)
    it.pos = len(it.items)
    it.truncated = True
    ctx.truncated = True
    return True


def _nested(ctx: Any, it: IteratorVar) -> bool:
    """Whether another range loop is still running (this one would be in its body)."""
    return any(o is not it and o.pos < len(o.items) for o in ctx.loops)


def _items(v: Any) -> list:
    return list(v.items.items()) if isinstance(v, DictVar) else list(v.items)


def _same_state(old: tuple, new: tuple, it: IteratorVar) -> bool:
    (lo, so, ko, co), (ln, sn, kn, cn) = old, new
    if len(so) != len(sn) or set(lo) != set(ln) or set(co) != set(cn) or set(ko) != set(kn):
        return False
    for k, (v, items) in kn.items():
        before = ko[k][1]
        if len(items) != len(before) or any(
                (a is not b) if not isinstance(a, tuple) else (a[0] != b[0] or a[1] is not b[1])
                for a, b in zip(before, items)):
            return False
    pairs = [(lo[k], ln[k]) for k in lo] + list(zip(so, sn)) + [(co[k], cn[k]) for k in co]
    return all(_same(a, b, it) for a, b in pairs)


def _same(a: Any, b: Any, it: IteratorVar) -> bool:
    if a is b:
        return True
    if isinstance(a, ArrayVar) and isinstance(b, ArrayVar):
        return True
    if isinstance(a, LoopIndexVar) or isinstance(b, LoopIndexVar):
        return (isinstance(a, LoopIndexVar) and isinstance(b, LoopIndexVar) and a.it is it
                and b.it is it and a.chain == b.chain)
    if type(a) is PyVar and type(b) is PyVar:
        x, y = a.value, b.value
        return type(x) is type(y) and isinstance(x, _IMMUTABLE) and x == y
    return False
