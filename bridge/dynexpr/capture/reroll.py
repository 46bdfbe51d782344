"""Rolling an unrolled `for i in range(...)` back into a loop node (Note [loop nodes],
ir.py), so that the unit compiled for it has the size of one iteration, not of T.

Note [rolling unrolled loops]
The translator runs a loop's body once per iteration, as CPython does, and marks where
each iteration's values start in the graph (handlers._for_iter, IteratorVar.marks). Once
the graph is finished (output._rebuild: dead values gone), each loop over a range that ran
to its end is a list of segments S_0 .. S_{T-1}. Iteration 0 stays unrolled (it is where
hash-consing shares constants and loop-invariant values with the code before the loop,
so its segment usually differs), and S_1 .. S_{T-1} become one loop node when they are the
same computation: position by position the same op, dtype, shape and attributes, and each
argument either
    in the same segment, at the same position in every one        (body-internal)
    in the previous segment, at the same position p for j >= 2    (carried: S_1 reads the
                                                                   init, the rest S_{j-1}[p])
    the same value outside the region in every iteration          (invariant)
Every iteration is checked against S_1, so the loop computes exactly what the unrolled
graph did: no NumPy semantics are re-derived (a slice update's right-hand side was read
before the write in the unrolled graph, so it is in the body). Values after the loop may
use only the last iteration's carried values (they become loop_out values). Anything
else (a body that depends on i, a shape that changes, a break, a return inside the loop)
leaves the loop unrolled, as before.

The stop of a range built from an argument or a global (`range(T)`, `range(1, n)`) is a
0-d input read from there at call time, so every T shares one unit: a new T still
translates again (the translation read T's value: a VALUE guard) but compiles nothing.
An index item that steps by a constant per iteration (`a[i]`, `a[i-1]`, `a[:, i]`,
`a[i:i+3]`: the same extent every time) becomes a dynamic offset read from i (Note
[dynamic offsets], ir.py); a slice whose extent steps by a constant too (`a[i:]`,
`L[i, :i+1]`, `A[i+1:, i]`) gets a dynamic length, and the values computed from it an
extent that the body computes from i (Note [dynamic extents], ir.py).
A long loop's translation stops after a few iterations (truncate.py, Note [stopping the
unrolling early]) and its stop's VALUE guard is then relaxed (relax.py).
A constant every iteration shares is a constant of the body (a C++ literal), not a 0-d
invariant input: a 0-d array operand broadcast in every trip made a rolled heat step
~3x slower than the same steps unrolled.
A constant whose value steps with i (`t = i * dt` in array work) is computed in the body
from i (affine.py, Note [loop-derived scalars]).

Note [nested loops]
Loops are tried outermost first, so an outer loop whose body holds a loop with its own
trip count per outer iteration (`for k in range(n): ... for j in range(k + 1, n):`,
Gram-Schmidt, triangular updates) does not roll: its iterations have different lengths.
Its inner loops then roll, one loop node per outer iteration, and the outer loop is tried
again on segments that hold those nodes (_remapped puts each node in the segment that
held its iterations). Two inner loop nodes are one computation when their starts step by
a constant per outer iteration and their bodies differ only in index items that do
(`Q[:, k]` inside the j loop): the rolled inner node takes the outer variable as its
last invariant, its start is ("dyn", k, mul, add) (Note [loop nodes], ir.py), and its
body reads those items as dynamic offsets of that input (_general_body), and the
extents that move with it (`A[i, k:]`: n-k elements) as affine_extent(mul, add, var) of
that input (Note [dynamic extents], ir.py). The last outer
iterations often run their inner loop too few times to roll (n-k-1 < MIN_TRIPS): up to
MAX_TAIL of them stay unrolled after the loop, which then ends at a constant stop. Bodies
that differ in anything else (an op, a constant, the shape of a carried array, an extent
that moves with both variables) leave the outer loop unrolled, as before.

Note [views shared across iterations]
Hash-consing gives two reads of the same element one value: `X[j]` read by the inner loop
of outer iteration 0 is the `X[j]` of every later outer iteration (pair distances, a
covariance's upper triangle). A later iteration then reads a value of an earlier one
that is not carried (the iterations are not one computation), and the earlier region
has users after it, so neither loop rolled. A view computes nothing, so before rolling,
each iteration that reads a view another iteration holds gets its own copy of it
(_own_views), placed before its first reader there: the values are the same, only the
sharing goes.

Note [period-2 bodies]
A body that alternates between two computations (`j0 = 1 if i % 2 else 2`, the red and
black half-sweeps of SOR) is not one computation per iteration, but iteration k+2 is
iteration k's: when the loop does not roll as it is, reroll tries pairs of iterations
(S_m + S_{m+1}, S_{m+2} + S_{m+3}, ...) as the segments of a range stepping twice as far,
with the m leading iterations that make the rest an even count left unrolled. The stop
is the range's own, so a pair never runs past it. A loop whose translation stopped early
is not paired (its iterations past the translated ones could have either parity).
"""

from __future__ import annotations

from typing import Any

from .. import ir
from . import affine, relax
from .truncate import Untruncate

ENABLED = True  # tests turn it off to compare against the unrolled graph
MIN_TRIPS = 3  # iteration 0 stays unrolled; at least two iterations to compare
# Values that move with i (offsets, extents, scalars) are fitted to mul*i + add over the
# rolled iterations; a fit is only a check with a third point (`x * (i * i)` over two
# pairs of iterations fits 8*i - 15).
MIN_FIT = 3
LEAD = 3  # at most this many leading iterations stay unrolled
# An outer loop whose inner loops ran too few times to roll (`for j in range(k+1, n)`
# near k = n-1) rolls with at most this many trailing iterations left unrolled.
MAX_TAIL = 8
MAX_EXTENTS = 16  # dynamic extents one body may have: frame::max_symbols (prelude.hpp)


def iterations(ctx: Any, new: dict[int, ir.Value]) -> list[tuple[range, list[list[ir.Value]]]]:
    """The loops over ranges that ran to their end, as segments of the rebuilt graph
    (`new`: builder value id -> rebuilt value; dead values are left out)."""
    values = ctx.graph.graph.values
    out = []
    for it in ctx.loops:
        rng, marks, stop_source = it.marks
        # A truncated loop (truncate.py) ends at its last translated iteration's mark.
        if len(rng) < MIN_TRIPS or (len(marks) != len(rng) + 1 and not it.truncated):
            continue  # too short, or left early (break, return, a graph break)
        segs = [[new[v.id] for v in values[a:b] if v.id in new] for a, b in zip(marks, marks[1:])]
        out.append(((rng, stop_source, it.truncated, it), segs))
    return out


def reroll(g: ir.Graph, loops: list, sources: list, ctx: Any = None) -> tuple[ir.Graph, list]:
    """g with its rollable loops rolled, and its input sources (`sources`, extended by
    the stops read at call time); with ctx, the guard of a truncated loop's stop is
    relaxed (relax.py)."""
    if not ENABLED:
        if any(r[2] for r, _ in loops):  # only a rolled loop runs its untranslated rest
            raise Untruncate("loops are not rolled (reroll.ENABLED is off)")
        return g, sources
    sources = list(sources)
    loops = _own_views(g, loops)
    # Outermost (largest) loops first; a loop inside one already rolled is part of its
    # body: its segments, mapped onto the new graph, are empty.
    failed = []  # loops that did not roll: tried again once the loops inside them have
    for k in sorted(range(len(loops)), key=lambda k: -sum(len(s) for s in loops[k][1])):
        rng, segs = loops[k]
        if not any(segs[1:]):
            continue  # (a truncated loop with no array work left nothing out)
        # Hash-consing can share a value between iterations (`u[i+1]` of one is `u[i-1]`
        # of the one after next), so the first iterations may build more values than the
        # rest: leave up to LEAD of them unrolled before the region that is one body.
        result = None
        for m in range(LEAD):
            if len(segs) - m < MIN_TRIPS or result is not None:
                break
            result = _roll(g, (rng[0][m:], rng[1]), segs[m:], sources)
            lead = m + 1
        if result is None and not rng[2]:
            result = _roll_pairs(g, rng, segs, sources)
        if result is None:
            if rng[2]:  # its later iterations were never translated
                raise Untruncate(f"a loop over {rng[0]} is not one computation")
            failed.append(k)
            continue
        if rng[2] and not _exact_to_the_end(result[2], rng[0], lead):
            raise Untruncate(f"a loop over {rng[0]} indexes out of its arrays' bounds "
                             "after its translated iterations")
        if rng[2] and rng[1] is not None and ctx is not None:
            relax.relax(ctx, rng[1], rng[0], lead, result[2], rng[3])
        g, remap = result[:2]
        loops = _remapped(loops, k, g, remap)
    # Note [nested loops]: an outer loop whose inner loops are now loop nodes; innermost
    # first, so a middle loop rolled here is a node when the loop around it is tried.
    for k in reversed(failed):
        rng, segs = loops[k]
        if not any(v.op == "loop" for s in segs for v in s):
            continue
        order = {id(v): p for p, v in enumerate(g.values)}
        segs = [sorted(s, key=lambda v: order[id(v)]) for s in segs]
        result = None
        for tail in range(MAX_TAIL + 1):
            if len(segs) - tail < MIN_TRIPS or result is not None:
                break
            for m in range(LEAD):
                end = len(segs) - tail
                if end - m < MIN_TRIPS or result is not None:
                    break
                # A tail left unrolled depends on the stop: the stop is then a constant.
                stop_source = rng[1] if tail == 0 else None
                result = _roll(g, (rng[0][m:end], stop_source), segs[m:end], sources)
        if result is not None:
            g, remap = result[:2]
            loops = _remapped(loops, k, g, remap)
    return g, sources


def _own_views(g: ir.Graph, loops: list) -> list:
    """loops, with every view that one iteration shares with another copied into the
    iterations that read it (g changed in place; Note [views shared across iterations])."""
    where: dict[int, set] = {}  # value id -> {(loop, segment)} holding it
    for li, (_, segs) in enumerate(loops):
        for si, seg in enumerate(segs):
            for v in seg:
                where.setdefault(id(v), set()).add((li, si))
    copies: dict[tuple, ir.Value] = {}
    before: dict[int, list[ir.Value]] = {}  # id of a user -> copies placed before it

    def own(a: ir.Value, at: frozenset, user: ir.Value) -> ir.Value:
        here = where.get(id(a), set())
        loops_of_user = {li for li, _ in at}
        # Shared: a view held by another iteration of a loop the user is in.
        if a.op not in ir.VIEWS or not any(li in loops_of_user and (li, si) not in at
                                        for li, si in here):
            return a
        key = (id(a), at)
        if key not in copies:
            args = tuple(own(x, at, user) for x in a.args)
            copies[key] = ir.Value(a.op, args, a.dtype, tuple(a.shape), a.attrs)
            before.setdefault(id(user), []).append(copies[key])
            where[id(copies[key])] = set(at)
        return copies[key]

    for v in list(g.values):
        at = frozenset(where.get(id(v), ()))
        if at:
            v.args = tuple(own(a, at, v) for a in v.args)
    if not copies:
        return loops
    values = []
    for v in g.values:
        values.extend(before.get(id(v), ()))
        values.append(v)
    g.values = values
    for i, v in enumerate(values):
        v.id = i
    return [(r, [[x for v in seg for x in (*before.get(id(v), ()), v)] for seg in segs])
            for r, segs in loops]


def _remapped(loops: list, k: int, g: ir.Graph, remap: dict) -> list:
    """The segments of every loop but loops[k] (just rolled into graph g) as values of g:
    the values left outside the rolled region through `remap`, and the loop node that
    replaced the region (its stop, the node, its loop_outs) added to each segment that
    held the region, the segment of an outer loop that failed to roll (Note [nested
    loops])."""
    images = {id(x) for x in remap.values()}
    new = [v for v in g.values if id(v) not in images and v.op != "input"]
    out = []
    for j, (r, ss) in enumerate(loops):
        segs = []
        for s in ss:
            kept = [remap[id(v)] for v in s if id(v) in remap]
            # Values of the region are the ones remap leaves out: a segment with some of
            # them and others that stay encloses the rolled loop (one inside it has none
            # that stay).
            if j != k and kept and len(kept) < len(s):
                kept += new
            segs.append(kept)
        out.append((r, segs))
    return out


def _exact_to_the_end(body: ir.Graph, rng: range, lead: int) -> bool:
    """Whether every dynamic offset and extent of a truncated loop's body selects, for
    each i the loop runs (not only the translated ones), what Python's index would:
    past an array's end a slice clamps (`x[:i+1]` stops growing) and the fit made from
    the first iterations no longer holds."""
    bounds = relax.bounds(body)
    if bounds is None:
        return False
    lo, hi = bounds
    run = rng[lead:]
    if not run:
        return True
    first, last = min(run[0], run[-1]), max(run[0], run[-1])
    return (lo is None or first >= lo) and (hi is None or last <= hi)


def _roll_pairs(g: ir.Graph, rng: tuple, segs: list, sources: list):
    """A body that alternates (`if i % 2`, red/black sweeps: Note [period-2 bodies])
    rolled as pairs of iterations, or None."""
    for m in range(LEAD + 1):
        rest = len(segs) - m
        if rest % 2 or rest // 2 < MIN_TRIPS:
            continue
        pairs = [segs[k] + segs[k + 1] for k in range(m, len(segs), 2)]
        result = _roll(g, (rng[0][m::2], rng[1]), pairs, sources, rng[0].step)
        if result is not None:
            return result
    return None


def _same_node(a: ir.Value, b: ir.Value) -> bool:
    """Whether b is a's computation, up to the offsets of an index (_dynamic_index) and
    extents that move with i (_extents)."""
    def key(v: ir.Value) -> tuple:
        attrs = v.attrs
        if v.op in ("getitem", "setitem"):
            attrs = tuple((k, len(x)) if k == "index" else (k, x) for k, x in attrs)
        elif v.op in _SHAPED:
            attrs = tuple((k, len(x)) if k == "shape" else (k, x) for k, x in attrs)
        elif v.op == "const":  # its value may move with i (affine.py)
            attrs = tuple((k, x) for k, x in attrs if k != "value")
        elif v.op == "loop":  # its start and body may move with i (Note [nested loops])
            attrs = tuple((k, x) for k, x in attrs if k not in ("start", "body"))
        return v.op, v.dtype, len(v.shape), attrs, len(v.args)
    return key(a) == key(b)


_SHAPED = ("reshape", "broadcast_to", "full")  # ops whose attr `shape` is their own shape


def _extents(vs: list[ir.Value], rng: range) -> tuple | None:
    """The shape of one body position over iterations 1..T-1 (`vs`): an extent that
    steps by a constant per iteration is affine_extent(mul, add) (Note [dynamic
    extents], ir.py); None when one changes in any other way."""
    out = []
    for dims in zip(*(v.shape for v in vs)):
        if all(d == dims[0] for d in dims):
            out.append(dims[0])
            continue
        aff = _affine(list(dims), rng)
        if aff is None or any(isinstance(d, str) for d in dims):
            return None
        out.append(ir.affine_extent(*aff))
    if vs[0].op in _SHAPED and any(tuple(v.attr("shape")) != tuple(v.shape) for v in vs):
        return None
    return tuple(out)


def _affine(cs: list[int], rng: range) -> tuple[int, int] | None:
    """(mul, add) with cs[m] == mul*i + add for i the loop variable of iteration m+1
    (the first rolled one), or None when cs does not step by a constant per iteration."""
    delta = cs[1] - cs[0]
    if any(c != cs[0] + m * delta for m, c in enumerate(cs)) or delta % rng.step:
        return None
    mul = delta // rng.step
    return mul, cs[0] - mul * (rng.start + rng.step)


def _dynamic_index(vs: list[ir.Value], rng: range) -> tuple | None:
    """The index of one getitem/setitem position over iterations 1..T-1 (`vs`), with the
    items that move with i as dynamic offsets read from the node's next arg (Note
    [dynamic offsets], ir.py); None when an item changes in any other way. Extents are
    equal already (_same_node compared shapes)."""
    idx = [v.attr("index") for v in vs]
    k = len(vs[0].args)
    out = []
    dims, d = [], 0  # the base's dimension that each index item reads
    for e in idx[0]:
        dims.append(d)
        d += e[0] != "newaxis"
    for m, first in enumerate(idx[0]):
        items = [x[m] for x in idx]
        if all(it == first for it in items):
            out.append(first)
        elif first[0] == "int" and all(it[0] == "int" for it in items):
            aff = _affine([it[1] for it in items], rng)
            if aff is None:
                return None
            out.append(("dyn", k, *aff))
        elif first[0] == "slice" and all(it[0] == "slice" and it[3] == first[3]
                                         and it[1] is not None and it[2] is not None
                                         and it[2] - it[1] == first[2] - first[1]
                                         for it in items):
            aff = _affine([it[1] for it in items], rng)
            if aff is None:
                return None
            out.append(("dslice", k, *aff, len(range(first[1], first[2], first[3])), first[3]))
        elif first[0] == "slice" and first[3] > 0 and all(
                it[0] == "slice" and it[3] == first[3] for it in items):
            # An extent that moves with i (Note [dynamic extents], ir.py): `a[i:]`, `L[i, :i]`.
            spans = [range(v.args[0].shape[dims[m]])[slice(*it[1:])] for v, it in zip(vs, items)]
            aff = _affine([r.start for r in spans], rng)
            lengths = _affine([len(r) for r in spans], rng)
            if aff is None or lengths is None:
                return None
            out.append(("dslice", k, *aff, lengths, first[3]))
        else:
            return None
    return tuple(out)


def _nested(vs: list[ir.Value], rng: range) -> tuple | None:
    """(start, body) of one loop node over the outer iterations 1..T-1 (`vs`) as one
    inner loop whose start and index offsets move with the outer loop variable, or None
    (Note [nested loops])."""
    a = vs[0]
    if any((x.attr("step"), x.attr("carried"), len(x.args))
           != (a.attr("step"), a.attr("carried"), len(a.args)) for x in vs):
        return None
    k = len(a.args)  # the outer variable: the node's next arg, the body's next input
    starts = [x.attr("start") for x in vs]
    if not all(isinstance(x, int) for x in starts):
        return None
    if all(x == starts[0] for x in starts):
        start = starts[0]
    else:
        aff = _affine(starts, rng)
        if aff is None:
            return None
        start = ("dyn", k, *aff)
    body = _general_body([x.attr("body").graph for x in vs], rng)
    return None if body is None else (start, body)


def _general_body(bodies: list[ir.Graph], rng: range) -> ir.Graph | None:
    """One body for inner loop bodies that differ only in index items moving with the
    outer loop variable, which it takes as one more input (the last); None when they
    differ in any other way: an op, a shape, a constant, a nested loop."""
    b0 = bodies[0]
    pos = [{id(v): p for p, v in enumerate(b.values)} for b in bodies]
    ends = {id(o) for o in b0.outputs}  # the carried arrays keep one shape
    for b, ps in zip(bodies, pos):
        if len(b.values) != len(b0.values) or b.mutations or b.quiet != b0.quiet:
            return None
        if [pos[0][id(o)] for o in b0.outputs] != [ps.get(id(o)) for o in b.outputs]:
            return None
        for v0, v in zip(b0.values, b.values):
            if not _same_node(v0, v) or len(v0.shape) != len(v.shape) or (
                    tuple(v0.shape) != tuple(v.shape)
                    and (v0.op == "input" or id(v0) in ends)):
                return None
            if [pos[0][id(x)] for x in v0.args] != [ps[id(x)] for x in v.args]:
                return None
    var = len(b0.inputs)  # the outer variable's input number in the new body
    out = ir.Graph(quiet=b0.quiet)
    copies = []
    for v0 in b0.values:
        copies.append(out.add(ir.Value(v0.op, (), v0.dtype, tuple(v0.shape), v0.attrs)))
    outer = out.add(ir.Value("input", (), "int64", (), ir.make_attrs(index=var)))
    for p, v0 in enumerate(b0.values):
        vs = [b.values[p] for b in bodies]
        args = [copies[pos[0][id(x)]] for x in v0.args]
        attrs, shape = v0.attrs, []
        for dims in zip(*(x.shape for x in vs)):  # an extent moving with the outer variable
            aff = None if any(isinstance(d, str) for d in dims) else _affine(list(dims), rng)
            if all(d == dims[0] for d in dims):
                shape.append(dims[0])
            elif aff is None:
                return None
            else:
                shape.append(ir.affine_extent(*aff, var=var))
        if v0.op in _SHAPED and tuple(shape) != tuple(v0.shape):
            if any(tuple(x.attr("shape")) != tuple(x.shape) for x in vs):
                return None
            attrs = tuple((k, tuple(shape) if k == "shape" else x) for k, x in attrs)
        elif any(x.attrs != v0.attrs for x in vs[1:]):
            index = _dynamic_index(vs, rng) if v0.op in ("getitem", "setitem") else None
            if index is None:
                return None
            args.append(outer)
            attrs = tuple((k, index if k == "index" else x) for k, x in attrs)
        copies[p].args, copies[p].attrs, copies[p].shape = tuple(args), attrs, tuple(shape)
    # The new input after the others (inputs are listed in their index order) and
    # before its first use: a body's inputs come first (_roll adds them so).
    last = max((p for p, v in enumerate(b0.values) if v.op == "input"), default=-1)
    if any(v.op == "input" for v in b0.values[last + 1:]) or any(
            v.op != "input" for v in b0.values[:last + 1]):
        return None
    out.values = copies[:last + 1] + [outer] + copies[last + 1:]
    for i, v in enumerate(out.values):
        v.id = i
    out.outputs = [copies[pos[0][id(o)]] for o in b0.outputs]
    return out


def _classify(segs: list[list[ir.Value]]) -> dict | None:
    """(q, r) -> ("in", q') | ("carry", d, p, inits) | ("inv", value) for argument r of
    position q of the body, or None when the iterations are not one computation. A carry
    of distance d reads S_{j-d}[p] on iteration j > d, and inits[j-1] (a value from before
    the region) on iterations j <= d: `a, b = b, f(a, b)` carries f's value two back."""
    T, A = len(segs), segs[1]
    pos = [{id(v): q for q, v in enumerate(s)} for s in segs]
    seg_of = {id(v): j for j in range(1, T) for v in segs[j]}
    kinds: dict[tuple[int, int], tuple] = {}
    for q, v in enumerate(A):
        for r in range(len(v.args)):
            last = segs[T - 1][q].args[r]  # the last iteration sees the longest distance
            if id(last) in seg_of:
                j0 = seg_of[id(last)]
                d, p = T - 1 - j0, pos[j0][id(last)]
            else:
                d, p = None, None
            inits = []
            for j in range(1, T):
                a = segs[j][q].args[r]
                if d is None:
                    ok = a is last
                elif j > d:
                    ok = pos[j - d].get(id(a)) == p
                else:
                    ok = id(a) not in seg_of
                    inits.append(a)
                if not ok:
                    return None
            if d is None:
                kinds[(q, r)] = ("inv", last)
            elif d == 0:
                kinds[(q, r)] = ("in", p)
            else:
                kinds[(q, r)] = ("carry", d, p, tuple(inits))
    return kinds


def _roll(g: ir.Graph, loop: tuple, segs: list[list[ir.Value]], sources: list,
          inner: int | None = None):
    """Rolls segments S_0..S_{T-1} of range `rng` (S_0 stays unrolled); with `inner`,
    each segment is a pair of iterations (Note [period-2 bodies]) whose own step is
    inner, and rng steps over the pairs."""
    (rng, stop_source), T, A = loop, len(segs), segs[1]
    if any(len(s) != len(A) for s in segs[2:]) or any(v.op == "input" for v in A):
        return None
    if not all(_same_node(a, b) for s in segs[2:] for a, b in zip(A, s)):
        return None
    kinds = _classify(segs)
    if kinds is None:
        return None
    shapes: dict[int, tuple] = {}  # position -> its shape with extents that move with i
    for q, v in enumerate(A):
        if any(tuple(s[q].shape) != tuple(v.shape) for s in segs[2:]):
            shape = _extents([s[q] for s in segs[1:]], rng)
            if shape is None:
                return None
            shapes[q] = shape
    if len({d for sh in shapes.values() for d in sh if isinstance(d, str)}) > MAX_EXTENTS:
        return None  # more than a unit's frame binds (kernels/prelude.hpp, max_symbols)
    dyn: dict[int, tuple] = {}  # position -> its index with dynamic offsets
    for q, v in enumerate(A):
        if v.op in ("getitem", "setitem") and any(s[q].attrs != v.attrs for s in segs[2:]):
            index = _dynamic_index([s[q] for s in segs[1:]], rng)
            if index is None:
                return None
            dyn[q] = index
    nested: dict[int, tuple] = {}  # position -> (start, body): Note [nested loops]
    for q, v in enumerate(A):
        if v.op == "loop" and any(s[q].attrs != v.attrs for s in segs[2:]):
            plan = _nested([s[q] for s in segs[1:]], rng)
            if plan is None:
                return None
            nested[q] = plan
    moving: dict[int, tuple] = {}  # position -> (mul, add): Note [loop-derived scalars]
    for q, v in enumerate(A):
        if v.op == "const" and any(s[q].attr("value") != v.attr("value") for s in segs[2:]):
            aff = None
            if v.shape == ():
                aff = affine.fit([s[q].attr("value") for s in segs[1:]], list(rng[1:T]),
                                 v.dtype)
            if aff is None:
                return None
            moving[q] = aff
    if (shapes or dyn or moving or nested) and len(segs) - 1 < MIN_FIT:
        return None  # two points fit any line: a fit must be checked on a third

    # Carried state: per carry (d, p, inits), a chain of d entries; entry m (1-based)
    # holds S_{j-m}[p] on iteration j, so the body's exits are: entry 1 <- its value at
    # p, entry m <- entry m-1. On iteration 1, entry m holds inits[d-m].
    chains: dict[tuple, list[int]] = {}  # (d, p, init ids) -> slot numbers of its entries
    slots: list[tuple[ir.Value, tuple]] = []  # (init, exit: ("at", p) | ("slot", k))
    invariants: list[ir.Value] = []
    inv_of: dict[int, int] = {}
    for (q, r), kind in kinds.items():
        if kind[0] == "carry":
            _, d, p, inits = kind
            key = (d, p, tuple(id(x) for x in inits))
            if key in chains:
                continue
            if p in shapes or any((x.dtype, tuple(x.shape)) != (A[p].dtype, tuple(A[p].shape))
                                  for x in inits):
                return None
            ks = []
            for m in range(1, d + 1):
                ks.append(len(slots))
                slots.append((inits[d - m], ("at", p) if m == 1 else ("slot", ks[m - 2])))
            chains[key] = ks
        elif kind[0] == "inv" and id(kind[1]) not in inv_of and kind[1].op != "const":
            inv_of[id(kind[1])] = len(invariants)
            invariants.append(kind[1])

    # Uses from outside the region: after the loop, entry m of a chain at p holds the
    # value of iteration T-m at p; nothing else of the region may be used.
    where = {id(v): (j, q) for j in range(1, T) for q, v in enumerate(segs[j])}
    final_slot: dict[tuple[int, int], int] = {}  # (iteration, position) -> slot
    for (d, p, _), ks in chains.items():
        for m, k in enumerate(ks, start=1):
            final_slot.setdefault((T - m, p), k)
    users_outside = [v for v in g.values if id(v) not in where]
    roots = list(g.outputs) + [f for _, f in g.mutations]
    for a in [a for v in users_outside for a in v.args] + roots:
        if id(a) in where and where[id(a)] not in final_slot:
            return None

    body = ir.Graph()
    body.add(ir.Value("input", (), "int64", (), ir.make_attrs(index=0)))
    entries = [body.add(ir.Value("input", (), init.dtype, tuple(init.shape),
                                 ir.make_attrs(index=1 + k))) for k, (init, _) in enumerate(slots)]
    inv_in = [body.add(ir.Value("input", (), x.dtype, tuple(x.shape),
                                ir.make_attrs(index=1 + len(slots) + k)))
              for k, x in enumerate(invariants)]
    # A constant the iterations share stays a constant of the body, not an input: codegen
    # writes it as a literal (a 0-d input would be an array broadcast in every kernel).
    consts: dict[int, ir.Value] = {}
    for _, kind in sorted(kinds.items()):
        x = kind[1]
        if kind[0] == "inv" and x.op == "const" and id(x) not in consts:
            consts[id(x)] = body.add(ir.Value("const", (), x.dtype, tuple(x.shape), x.attrs))
    copies: list[ir.Value] = []
    for q, v in enumerate(A):
        if q in moving:
            copies.append(affine.body_value(body, body.values[0], v, *moving[q]))
            continue
        args = []
        for r, a in enumerate(v.args):
            kind = kinds[(q, r)]
            if kind[0] == "in":
                args.append(copies[kind[1]])
            elif kind[0] == "carry":
                _, d, p, inits = kind
                args.append(entries[chains[(d, p, tuple(id(x) for x in inits))][d - 1]])
            elif id(kind[1]) in consts:
                args.append(consts[id(kind[1])])
            else:
                args.append(inv_in[inv_of[id(kind[1])]])
        attrs, shape = v.attrs, shapes.get(q, tuple(v.shape))
        if q in dyn:  # the loop variable is its offset's arg (body input[0])
            args.append(body.values[0])
            attrs = tuple((k, dyn[q] if k == "index" else x) for k, x in attrs)
        if q in nested:  # the loop variable is the inner loop's last invariant
            args.append(body.values[0])
            start, inner_body = nested[q]
            attrs = tuple((k, start if k == "start" else ir.Body(inner_body) if k == "body"
                           else x) for k, x in attrs)
        if q in shapes and v.op in _SHAPED:
            attrs = tuple((k, shape if k == "shape" else x) for k, x in attrs)
        copies.append(body.add(ir.Value(v.op, tuple(args), v.dtype, shape, attrs)))
    body.outputs = [copies[e[1]] if e[0] == "at" else entries[e[1]] for _, e in slots]

    # The outer graph: values that do not depend on the loop, the loop, then the rest.
    start = rng.start + rng.step
    stop = rng.start + rng.step * len(rng)  # the whole range (truncated: more than T)
    if inner is not None:  # pairs: the last pair starts one inner step before the end
        stop = rng.start + rng.step * (len(rng) - 1) + 2 * inner
    depends: set[int] = set()
    for v in users_outside:
        if any(id(a) in where or id(a) in depends for a in v.args):
            depends.add(id(v))
    out = ir.Graph()
    remap: dict[int, ir.Value] = {}

    def final(a: ir.Value) -> ir.Value:
        return finals[final_slot[where[id(a)]]] if id(a) in where else remap[id(a)]

    def copy(v: ir.Value) -> None:
        args = tuple(final(a) for a in v.args)
        remap[id(v)] = out.add(ir.Value(v.op, args, v.dtype, tuple(v.shape), v.attrs))

    finals: list[ir.Value] = []
    for v in users_outside:
        if id(v) not in depends:
            copy(v)
    if stop_source is None:
        stop_v = out.add(ir.Value("const", (), "int64", (), ir.make_attrs(value=stop)))
    else:  # the same iterations, range(start, stop, step) without its first
        stop_v = out.add(ir.Value("input", (), "int64", (), ir.make_attrs(index=len(sources))))
        sources.append(("as0d", stop_source, "int64"))
    finals = ir.loop(out, start, stop_v, rng.step, [remap[id(i)] for i, _ in slots],
                     [remap[id(x)] for x in invariants], body)
    for v in users_outside:
        if id(v) in depends:
            copy(v)

    out.outputs = [final(o) for o in g.outputs]
    out.mutations = [(i, final(f)) for i, f in g.mutations]
    out.quiet = g.quiet
    return out, remap, body
