"""dynexpr.split — the compile budget (issue 13 part 1): a graph too large for one unit is
cut into several, compiled in parallel, and called in order.

Note [compile budget]
g++'s time and memory on one unit grow faster than its size (one function of thousands
of statements and expression-template types), and one unit is compiled by one process on
one core. So no unit holds more than `config.unit_budget` graph nodes
($DYNEXPR_UNIT_BUDGET; 0: no limit). A node is a computing value of the scheduled graph
(inputs and constants are free; a loop counts its body's nodes too), the measure known
before any source is generated. Past the budget, the schedule's kernels (in their run
order) are cut into consecutive groups of at most that many nodes, at kernel boundaries
only: a kernel's fused expression is never cut, and a loop stays with its loop_out
kernels (they read its carried arrays by name). A single kernel larger than the budget
is a group of its own. A last group under half the budget is then re-cut with the one
before it to weigh alike, since they compile side by side (a 42-node tail after 500
left one core idle). The default, 500 nodes (about 65 KB of C++), keeps one g++ under
~300 MB and ~10 s of CPU (bench/python/unit_budget.py), and gives a few thousand nodes
enough units to keep every core busy.

Each group becomes a graph of its own (`Part`): its inputs are the caller's arrays and
the values of earlier groups it reads, its outputs the values later groups or the caller
need. Parts are planned as any graph (runtime.plan), so each unit is cached under its own
content key and a prefix shared with another graph is compiled once; the missing units
compile in parallel, one g++ per core. The callable (`SplitKernel`) calls the units in
order, passing intermediates as the arrays the earlier units returned; every part is
functional (no part writes the caller's arrays), and the final values of arguments the
graph mutates are copied into them after the last part, so every part reads the
arguments' original content as the one-unit graph would. A unit is published whole or
not at all (cache.py), so a killed compile leaves the units that finished, and the next
process compiles only the rest.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from . import cache, cxx, ir, runtime
from .config import config
from .schedule import Buffer, Kernel, Schedule, schedule
from .toolchain import sha as _sha


def body_nodes(g: ir.Graph) -> int:
    """The nodes of a graph, its loops' bodies included (Note [compile budget])."""
    return sum(_weight(v) for v in g.values)


def _weight(v: ir.Value) -> int:
    if v.op in ("input", "const"):
        return 0
    if v.op == "loop":
        return 1 + body_nodes(v.attr("body").graph)
    return 1


@dataclass
class Part:
    graph: ir.Graph
    args: list[tuple[str, int]]  # per input: ("arg", caller's index) | ("slot", j)
    exports: list[int]  # per output: the slot it fills
    nodes: int


@dataclass
class SplitPlan:
    """A graph over the budget: its parts, each planned as its own unit."""
    schedule: Schedule  # the whole graph's (results, mutations, inputs)
    parts: list[Part]
    plans: list  # runtime.Plan per part
    results: list[tuple[str, int]]  # per graph output: ("arg", i) | ("slot", j)
    writes: list[tuple[int, int]]  # (caller's index, slot): copied after the last part
    n_slots: int
    limit: int
    key: str
    source: str

    def describe(self) -> str:
        sizes = ", ".join(str(p.nodes) for p in self.parts)
        return (f"split into {len(self.parts)} units (budget {self.limit} nodes; "
                f"nodes per unit: {sizes})")


def plan(graph: ir.Graph, *, fuse: bool = True):
    """runtime.plan(graph), or a SplitPlan when the graph is over the budget."""
    limit = config.unit_budget
    if limit:
        s = schedule(graph, fuse)
        groups = partition(s, limit)
        if len(groups) > 1:
            return _split(graph, s, groups, limit, fuse)
    return runtime.plan(graph, fuse=fuse)


def describe(graph: ir.Graph, fuse: bool = True) -> str:
    """What the cpu backend makes of `graph`: one unit, or how it is split (explain)."""
    limit = config.unit_budget
    s = schedule(graph, fuse)
    nodes = sum(w for _, w in _weights(s))
    groups = partition(s, limit) if limit else [s.kernels]
    if len(groups) <= 1:
        budget = f"budget {limit} nodes" if limit else "no budget"
        return f"one unit ({nodes} nodes, {budget})"
    sizes = ", ".join(str(sum(w for _, w in g)) for g in _weighed_groups(s, groups))
    return (f"split into {len(groups)} units (budget {limit} nodes; nodes per unit: "
            f"{sizes})")


# ------------------------------------------------------------------------ partition
def _weights(s: Schedule) -> list[tuple[Kernel, int]]:
    """Each kernel with its nodes: its stores and the lazy values fused into them (a
    view or splat read by several kernels counts once, at its first reader)."""
    seen: set[int] = set()
    out = []
    for k in s.kernels:
        w = 0
        stack = list(k.values)
        while stack:
            v = stack.pop()
            if v.id in seen:
                continue
            seen.add(v.id)
            w += _weight(v)
            stack.extend(a for a in v.args
                         if not isinstance(s.storage.get(a.id), Buffer) or a in k.values)
        out.append((k, w))
    return out


def _weighed_groups(s: Schedule, groups: list[list[Kernel]]):
    w = {id(k): n for k, n in _weights(s)}
    return [[(k, w[id(k)]) for k in g] for g in groups]


def partition(s: Schedule, limit: int) -> list[list[Kernel]]:
    """The kernels in run order, cut into consecutive groups of at most `limit` nodes
    where a cut is allowed (Note [compile budget]), the last two balanced."""
    weights = _weights(s)
    groups = _balance_tail(s, _greedy(s, weights, limit), dict((id(k), w) for k, w in weights),
                           limit)
    return [g for g in groups if g]


def _balance_tail(s: Schedule, groups: list[list[Kernel]], w: dict, limit: int):
    """groups with the kernels of its last two re-cut where they weigh most alike.
    The units compile in parallel, so a graph of 542 nodes cut as 500 + 42 took as
    long as one unit of 500 (g++'s time grows faster than a unit's size); cut as
    270 + 272 it takes about half. Only a tail under half the budget moves, and only
    the group before it with it: every other group is cut where the greedy pass cut
    it, so a graph that begins as another did still shares those units
    (test_unit_budget.py::test_a_shared_prefix_is_one_unit)."""
    if len(groups) < 2 or 2 * sum(w[id(k)] for k in groups[-1]) >= limit:
        return groups  # a tail of half the budget or more: the greedy cut stands
    ks = groups[-2] + groups[-1]
    loop_of = {v.id: v.args[0].id for k in ks for v in k.values if v.op == "loop_out"}
    # The first and last kernel that hold each loop or one of its loop_outs: a cut may
    # not fall between them (the loop_out kernels read its carried arrays by name).
    span: dict[int, list[int]] = {}
    for i, k in enumerate(ks):
        for v in k.values:
            lid = v.id if v.op == "loop" else loop_of.get(v.id)
            if lid is not None:
                span.setdefault(lid, [i, i])[1] = i
    total, head = sum(w[id(k)] for k in ks), sum(w[id(k)] for k in groups[-2])
    best_c = len(groups[-2])  # the greedy cut, kept unless another is strictly better
    best, left = max(head, total - head), 0
    for c in range(1, len(ks)):
        left += w[id(ks[c - 1])]
        worst = max(left, total - left)
        if worst < best and not any(a < c <= b for a, b in span.values()):
            best, best_c = worst, c
    return groups[:-2] + [ks[:best_c], ks[best_c:]]


def _greedy(s: Schedule, weights: list, limit: int) -> list[list[Kernel]]:
    """The kernels in run order, each group filled up to `limit` nodes."""
    users = s.users
    groups: list[list[Kernel]] = [[]]
    size = 0
    open_loops: set[int] = set()  # loops of the current group whose loop_outs are to come
    for k, w in weights:
        if groups[-1] and size + w > limit and not open_loops:
            groups.append([])
            size = 0
        groups[-1].append(k)
        size += w
        for v in k.values:
            if v.op == "loop" and any(u.op == "loop_out" for u in users[v.id]):
                open_loops.add(v.id)
            if v.op == "loop_out":
                loop = v.args[0]
                if all(_stored_in(u, groups[-1]) for u in users[loop.id] if u.op == "loop_out"):
                    open_loops.discard(loop.id)
    return groups


def _stored_in(v: ir.Value, group: list[Kernel]) -> bool:
    return any(v is x for k in group for x in k.values)


# ---------------------------------------------------------------------------- parts
def _split(graph: ir.Graph, s: Schedule, groups: list[list[Kernel]], limit: int,
           fuse: bool) -> SplitPlan:
    home: dict[int, int] = {}  # value id -> the group that stores it
    for n, g in enumerate(groups):
        for k in g:
            for v in k.values:
                home.setdefault(v.id, n)

    def boundary(v: ir.Value, n: int) -> bool:
        return v.id in home and home[v.id] != n

    # Pass 1: each group's values and the earlier groups' values it reads.
    reads: list[list[ir.Value]] = []
    inner: list[list[ir.Value]] = []
    for n, g in enumerate(groups):
        roots = [v for k in g for v in k.values if home[v.id] == n]
        vals = ir.walk(roots, lambda a, n=n: not boundary(a, n) and a.op != "input")
        inner.append(vals)
        seen: dict[int, ir.Value] = {}
        for v in vals:
            for a in v.args:
                if boundary(a, n):
                    seen.setdefault(a.id, a)
        reads.append(list(seen.values()))

    # Exports: what later groups read, the graph's results and the mutations' finals.
    slot: dict[int, int] = {}

    def slot_of(v: ir.Value) -> int:
        return slot.setdefault(v.id, len(slot))

    needed: dict[int, list[ir.Value]] = {n: [] for n in range(len(groups))}

    def need(v: ir.Value) -> None:
        if v.id not in slot:
            slot_of(v)
            needed[home[v.id]].append(v)

    for vs in reads:
        for v in vs:
            need(v)
    last = _last_stores(s)
    results: list[tuple[str, int]] = []
    for r in s.results:
        if r < 0:
            results.append(("arg", -r - 1))
        else:
            v = last[("out", r)]
            need(v)
            results.append(("slot", slot[v.id]))
    writes = []
    for (kind, i), v in last.items():
        if kind == "in":
            need(v)
            writes.append((i, slot[v.id]))

    parts = []
    for n, vals in enumerate(inner):
        parts.append(_part(s, vals, reads[n], needed[n], slot, graph.quiet, n, home))
    plans = [runtime.plan(p.graph, fuse=fuse) for p in parts]
    key = _sha({"split": [p.key for p in plans], "results": results, "writes": writes})
    source = "\n".join(f"// unit {n} of {len(plans)}\n{p.source}" for n, p in enumerate(plans))
    return SplitPlan(s, parts, plans, results, writes, len(slot), limit, key, source)


def _last_stores(s: Schedule) -> dict[tuple[str, int], ir.Value]:
    """The value each `out` and `in` buffer holds after the last kernel: a graph result,
    or an argument's final value (the schedule links a buffer's versions so that the
    last one written is the one the caller sees: Note [in-place writes])."""
    last = {}
    for k in s.kernels:
        for st in k.stores:
            if st.buffer.kind in ("out", "in"):
                last[(st.buffer.kind, st.buffer.index)] = st.value
    return last


def _part(s: Schedule, vals, reads, exports, slot, quiet: int, n: int, home) -> Part:
    g = ir.Graph(quiet=quiet)
    new: dict[int, ir.Value] = {}
    args: list[tuple[str, int]] = []
    arg_of: dict[tuple[str, int], ir.Value] = {}

    def input_for(kind: str, idx: int, like: ir.Value) -> ir.Value:
        if (kind, idx) not in arg_of:
            arg_of[(kind, idx)] = g.add(ir.Value(
                "input", (), like.dtype, tuple(like.shape), ir.make_attrs(index=len(args))))
            args.append((kind, idx))
        return arg_of[(kind, idx)]

    read_ids = {v.id for v in reads}
    for v in vals:
        if v.op == "input":
            new[v.id] = input_for("arg", v.attr("index"), v)
            continue
        mapped = []
        for a in v.args:
            if a.id in read_ids:
                mapped.append(input_for("slot", slot[a.id], a))
            elif a.op == "input":
                mapped.append(input_for("arg", a.attr("index"), a))
            else:
                mapped.append(new[a.id])
        new[v.id] = g.add(ir.Value(v.op, tuple(mapped), v.dtype, tuple(v.shape), v.attrs))
    g.outputs = [new[v.id] for v in exports]
    # Dynamic extents of the part's values must be bound by one of its inputs: add the
    # caller's array that binds any the part's inputs do not (the unit reads its shape).
    bound = {d for a in g.inputs for d in a.shape if isinstance(d, str)}
    for v in list(g.values):
        for d in v.shape:
            if isinstance(d, str) and d not in bound and d in s.symbols:
                i, _ = s.symbols[d]
                dtype, shape, _ = s.inputs[i]
                input_for("arg", i, ir.Value("input", (), dtype, tuple(shape)))
                bound |= {x for x in shape if isinstance(x, str)}
    return Part(g, args, [slot[v.id] for v in exports], body_nodes(g))


# --------------------------------------------------------------------------- running
def cached(p: SplitPlan):
    """p's callable when every part's unit is in the cache, else None."""
    fns = []
    for pp in p.plans:
        c = runtime.cached(pp)
        if c is None:
            return None
        fns.append(c.fn)
    return SplitKernel(p, fns)


def finish(p: SplitPlan):
    """p's callable, compiling the missing units in parallel (one compiler per core)."""
    todo = list({pp.key: pp for pp in p.plans  # equal parts (equal steps) are one unit
                 if pp.key is not None and cache.lookup(pp.key, cxx.ARTIFACT) is None}.values())
    if len(todo) > 1:
        workers = min(len(todo), os.cpu_count() or 1)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dynexpr-cc") as ex:
            futures = [ex.submit(cxx.get_or_build, pp.source, pp.conv) for pp in todo]
            for f in futures:
                f.result()  # the first failure is raised (after all have finished)
    # Loading happens here, on one thread, each unit from the cache (or built now).
    return SplitKernel(p, [runtime.finish(pp).fn for pp in p.plans])


class SplitKernel:
    """Calls the units of a SplitPlan in order (Note [compile budget])."""

    def __init__(self, p: SplitPlan, fns: list) -> None:
        self.fns = fns
        self.n_inputs = p.schedule.n_inputs
        self.units = len(fns)
        self.keys = [pp.key for pp in p.plans]  # the units' cache keys (equal parts: one)
        self.describe = p.describe()
        last: dict[int, int] = {}
        for n, part in enumerate(p.parts):
            for kind, j in part.args:
                if kind == "slot":
                    last[j] = n
        keep = {j for kind, j in p.results if kind == "slot"} | {j for _, j in p.writes}
        # Per step: the unit, its arguments, the slots it fills, the slots read for the
        # last time (dropped then, so an intermediate's memory is freed early).
        self.steps = []
        for n, (part, fn) in enumerate(zip(p.parts, fns)):
            drop = tuple(j for j, m in last.items() if m == n and j not in keep)
            self.steps.append((fn, tuple((k == "slot", j) for k, j in part.args),
                               tuple(part.exports), drop))
        self.results = tuple((k == "slot", j) for k, j in p.results)
        self.writes = tuple(p.writes)
        self.n_slots = p.n_slots

    def __call__(self, *arrays):
        if len(arrays) != self.n_inputs:
            raise TypeError(f"dynexpr kernel: takes {self.n_inputs} arrays, got {len(arrays)}")
        slots: list = [None] * self.n_slots
        for fn, argspec, exports, drop in self.steps:
            outs = fn(*[slots[j] if from_slot else arrays[j] for from_slot, j in argspec])
            for j, o in zip(exports, outs):
                slots[j] = o
            for j in drop:
                slots[j] = None
        for i, j in self.writes:
            np.copyto(arrays[i], slots[j], casting="no")
        return tuple(slots[j] if from_slot else arrays[j] for from_slot, j in self.results)

    def set_schedule(self, threads: int, chunks: int) -> None:
        """max-autotune (autotune.py): the same pool schedule for every unit."""
        for fn in self.fns:
            if hasattr(fn, "set_schedule"):
                fn.set_schedule(threads, chunks)

    def __repr__(self) -> str:
        return f"<dynexpr split kernel: {self.describe}>"
