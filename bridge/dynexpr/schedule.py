"""dynexpr.schedule — decides, for a Graph, which values are computed where and when.

Every live value gets one storage:

    leaf    read in place: inputs, constants, `full` (a zero-stride splat), and view ops
            (getitem/transpose/reshape/...) of leaves or of buffers: a view never copies;
    lazy    a pointwise value (op-table op, where, astype) fused into the one expression
            that uses it;
    Buffer  materialised: a graph output (`out`), an argument updated in place (`in`), or
            a unit-local temporary (`tmp`).

Note [fusion boundaries]
Materialised: outputs, reductions (their pointwise input is fused into them), matmul
(with its scale and bias: Note [alpha/beta folding] in blas_fold.py),
setitem, final values of mutated arguments, values a view is taken of, and pointwise
values used more than once (after structural hashing, so a common subexpression is
computed once, not once per use as a plain expression template would), and a pointwise
value at MAX_FUSED_DEPTH in its expression (Note [fused depth]). With fuse=False
every computing value is materialised: one kernel per op, through the same pipeline.

A Kernel is one materialisation, or a run of pointwise ones writing buffers of one shape
(Note [one kernel, several outputs]). Kernels run in a topological order that puts writes
into arguments as late as possible (Note [in-place writes]).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import blas_fold, ir, manifest

POINTWISE_STRUCTURAL = ("where", "astype")

# Note [fused depth]
# A fused expression is one C++ expression-template type nested as deep as the
# expression: an unrolled chain of single-use pointwise ops (x = tanh(x * a + y), T
# times) would nest 3T deep, past g++'s template depth limit (900) at T ~ 65, and its
# compile time grows with the square of the type's length well before. So a lazy value
# that would sit MAX_FUSED_DEPTH ops deep is materialised: the chain becomes kernels of
# at most that depth, which the compile budget (split.py) can then cut into units.
# bench/python/unit_budget.py --kind fused: 200 nodes compile in 4.4 s at depth 8, 6.8 s
# at 16, 11.6 s at 32 (2.3 s for a chain materialised every 4 ops); 16 is deeper than
# the formulas people write in one statement, so only unrolled chains are cut, and one
# store and load per 16 fused ops costs little.
MAX_FUSED_DEPTH = 16

# Note [0-d values are computed once]
# A pointwise 0-d value used by an array expression (dt * np.sin(w * t), t derived from a
# loop variable: Note [loop-derived scalars], capture/affine.py) is materialised, and its
# users read it as a scalar (codegen.operand), as they read a constant: fused, the
# expression template would evaluate sin once per element of the array, every trip.

# Note [broadcast values are computed once]
# The same holds for a pointwise value that an expression reads broadcast along an axis
# it does not have: layernorm's 1 / sqrt(var + eps), of shape (R, 1), fused into
# (x - mean) / sqrt(var + eps) of shape (R, C), took a square root and a division per
# element, C times each row's one (42% of layernorm_rows on 1M float32). Computing it into
# a buffer of its own shape first costs a small kernel and a small temporary; it is done
# when the reader has at least BROADCAST_RATIO times its elements (or an extent unknown
# until the call), and not for a cast, which costs no more than the read it replaces.
BROADCAST_RATIO = 8
LEAF_OPS = ("input", "const", "full")


@dataclass(frozen=True)
class Buffer:
    kind: str  # "in" | "out" | "tmp"
    index: int
    dtype: str
    shape: tuple


@dataclass
class Store:
    """Materialise `value` into `buffer` (for setitem: its base, then value at index)."""

    value: ir.Value
    buffer: Buffer


@dataclass
class Kernel:
    kind: str  # "pointwise" | "reduction" | "matmul" | "setitem" | "copy" | "loop" | "loop_out"
    stores: list[Store] = field(default_factory=list)

    @property
    def values(self) -> list[ir.Value]:
        return [s.value for s in self.stores]


@dataclass
class Schedule:
    graph: ir.Graph
    fuse: bool
    values: list[ir.Value]  # live values after CSE, topological order
    users: dict[int, list[ir.Value]]
    storage: dict[int, object]  # value id -> "leaf" | "lazy" | Buffer
    kernels: list[Kernel]
    inputs: list[tuple[str, tuple, bool]]  # per graph input: dtype, shape, written in place
    outputs: list[Buffer]  # buffers the caller allocates, in `out` index order
    results: list[int]  # per graph output: k >= 0 is outputs[k]; -(i+1) is input i itself
    # dynamic size -> (input index, axis) that binds it, or (ir.AFFINE, 0): computed from
    # a loop body's i (Note [dynamic extents], ir.py)
    symbols: dict[str, tuple]

    @property
    def n_inputs(self) -> int:
        return len(self.inputs)


def is_pointwise(v: ir.Value) -> bool:
    return v.op not in ir.STRUCTURAL_OPS or v.op in POINTWISE_STRUCTURAL


def schedule(graph: ir.Graph, fuse: bool = True) -> Schedule:
    _, remap = _cse(graph)
    outputs = [remap[o.id] for o in graph.outputs]
    mutated = {i: remap[v.id] for i, v in graph.mutations}
    if fuse:  # Note [alpha/beta folding]: scale and bias into the product's BLAS call
        outputs, mutated = blas_fold.fold(outputs, mutated)
    values = ir.walk(outputs + list(mutated.values()))
    users: dict[int, list[ir.Value]] = {v.id: [] for v in values}
    for v in values:
        for a in dict.fromkeys(v.args):
            users[a.id].append(v)

    graph_inputs = [v for v in graph.values if v.op == "input"]
    n_inputs = 1 + max((v.attr("index") for v in graph_inputs), default=-1)
    inputs: list[list] = [["float64", (), False] for _ in range(n_inputs)]
    input_value: dict[int, ir.Value] = {}
    for v in graph_inputs:
        inputs[v.attr("index")][:2] = [v.dtype, tuple(v.shape)]
        input_value[v.attr("index")] = remap[v.id]
    mutated = {i: f for i, f in mutated.items() if f is not input_value.get(i)}

    result_ids = {o.id for o in outputs}
    final_ids = {f.id for f in mutated.values()}
    mat = _materialised(values, users, result_ids | final_ids, fuse)
    chain_root = {v.id: _chain_input(v) for v in values}
    writers = {v.id for v in values if v.id in final_ids
               or (v.op == "setitem" and chain_root[v.id] in mutated)}
    order = _order([v for v in values if v.id in mat], mat, writers)
    pos = {v.id: k for k, v in enumerate(order)}
    read_pos = _read_positions(values, users, pos)

    # Results: an argument, or any version of a mutated argument, is returned as the
    # argument object itself (NumPy returns the same object); the rest get `out` buffers.
    outputs_buf: list[Buffer] = []
    out_of: dict[int, int] = {}
    results: list[int] = []
    final_of = {f.id: i for i, f in mutated.items()}
    for o in outputs:
        root = chain_root[o.id]
        if o.op == "input":
            results.append(-(o.attr("index") + 1))
        elif root is not None and root in mutated:
            results.append(-(root + 1))
        elif o.id in final_of:  # e.g. a loop's result that is an argument's new value
            results.append(-(final_of[o.id] + 1))
        else:
            if o.id not in out_of:
                out_of[o.id] = len(outputs_buf)
                outputs_buf.append(Buffer("out", len(outputs_buf), o.dtype, tuple(o.shape)))
            results.append(out_of[o.id])

    # Note [in-place writes]
    # A setitem writes into its base's buffer when every other reader of the base runs in
    # an earlier kernel; reads inside the writing kernel itself are its own expression,
    # which dx::assign makes safe (Note [aliasing] in include/dynexpr/eval/assign.hpp).
    # Versions linked this way form a group with one buffer: the output's, the mutated
    # argument's (when nothing reads the argument's original content after the group's
    # first write), or a temporary (then copied into the argument at the very end).
    group = {v.id: v.id for v in order}
    for v in reversed(order):
        if v.op != "setitem":
            continue
        base = v.args[0]
        if (base.id in mat and group[base.id] == base.id and base.id not in result_ids
                and base.id not in final_ids and _others_before(base, v, users, read_pos, pos)):
            group[base.id] = group[v.id]
    members: dict[int, list[ir.Value]] = {}
    for v in order:
        members.setdefault(group[v.id], []).append(v)

    storage: dict[int, object] = {}
    tmp_count = 0
    tail: list[Store] = []
    for vs in members.values():
        buf = None
        finals = [i for i, f in mutated.items() if any(f is m for m in vs)]
        if finals:
            i = finals[0]
            if _in_place_legal(vs, input_value.get(i), users, read_pos, pos):
                buf = Buffer("in", i, inputs[i][0], inputs[i][1])
                inputs[i][2] = True
        if buf is None:
            outs = [out_of[m.id] for m in vs if m.id in out_of]
            if outs:
                buf = outputs_buf[outs[0]]
        if buf is None:
            buf = Buffer("tmp", tmp_count, vs[0].dtype, tuple(vs[0].shape))
            tmp_count += 1
        for m in vs:
            storage[m.id] = buf
    for i, f in mutated.items():
        b = storage.get(f.id)
        if not (isinstance(b, Buffer) and b.kind == "in" and b.index == i):
            inputs[i][2] = True
            tail.append(Store(f, Buffer("in", i, inputs[i][0], inputs[i][1])))
    for v in values:
        if v.id not in storage:
            storage[v.id] = "leaf" if (v.op in LEAF_OPS or v.op in ir.VIEWS) else "lazy"

    kernels: list[Kernel] = []
    for v in order:
        kind = _kind(v)
        store = Store(v, storage[v.id])
        last = kernels[-1] if kernels else None
        # Note [one kernel, several outputs]: consecutive pointwise stores of one shape
        # that do not read each other form one kernel: one call, run back to back while
        # their inputs are still in cache.
        if (fuse and last is not None and kind == "pointwise" and last.kind == "pointwise"
                and tuple(last.stores[0].value.shape) == tuple(v.shape)
                and not any(_reads(v, s.value, storage) for s in last.stores)):
            last.stores.append(store)
        else:
            kernels.append(Kernel(kind, [store]))
    if tail:
        kernels.append(Kernel("copy", tail))

    symbols: dict[str, tuple[int, int]] = {}
    for v in sorted(graph_inputs, key=lambda v: v.attr("index")):
        for axis, d in enumerate(v.shape):
            if isinstance(d, str) and d not in symbols:
                symbols[d] = (v.attr("index"), axis)
    for v in values:  # a loop body's extents that move with i (Note [dynamic extents], ir.py)
        for d in v.shape:
            if d not in symbols and ir.parse_affine_extent(d) is not None:
                symbols[d] = (ir.AFFINE, 0)
    return Schedule(graph, fuse, values, users, storage, kernels,
                    [tuple(x) for x in inputs], outputs_buf, results, symbols)



# Note [recomputed instead of stored]
# A pointwise value used twice is stored once and read twice (Note [fusion boundaries]).
# Where one of its users is a reduction along an outer axis (or all axes), directly or
# through a short single-use pointwise chain ((d * d).mean(0)), and the value is cheap to
# compute, that costs more than it saves: column softmax's e = exp(x - max(x, 0)), read
# by e.sum(0) and by e / s, was written to a temporary and read back, two passes over
# memory for the 12 cost units of one exp. So such a value stays lazy and each user
# computes it again: RECOMPUTE_COST bounds the cost of its fused expression (manifest
# costs: exp 12, a subtraction 1), RECOMPUTE_USERS the number of users. Reductions along
# the innermost axis alone are left to the row blocks (Note [row blocks]), which keep the
# stored value in cache, and so are small values (known sizes): in cache, the store and
# the read cost less than computing the value again. "Small" grows with the cost: below
# RECOMPUTE_BYTES for each RECOMPUTE_BYTES_PER cost units (at least one share), so
# 256 KB for a subtraction, 768 KB for an exp of a difference (cost 13). Measured on a
# 2-core AVX-512 machine (2 MB L2 a core), stored against recomputed, column softmax:
# 256x256 float32 (256 KB) 0.74-0.78x recomputed, 362x362 (512 KB) 1.04x, 512x512 (1 MB)
# 1.01-1.03x, 2048x2048 1.21x; float64 256x256 0.95x; while the cheap d = x - mean(x, 0)
# of a hand-written standardisation won 1.09x at 256 KB and 1.3-1.6x from 512 KB up.
RECOMPUTE_COST = 16
RECOMPUTE_USERS = 3
RECOMPUTE_BYTES = 1 << 18
RECOMPUTE_BYTES_PER = 4


def _recomputed(v: ir.Value, all_users: dict, cost: int) -> bool:
    users = all_users[v.id]
    if (v.ndim == 0 or cost > RECOMPUTE_COST or len(users) > RECOMPUTE_USERS
            or not all(is_pointwise(u) or u.op in ir.REDUCTIONS for u in users)):
        return False
    if all(isinstance(d, int) for d in v.shape):
        size = 1
        for d in v.shape:
            size *= d
        if size * np.dtype(v.dtype).itemsize < RECOMPUTE_BYTES * max(1, cost // RECOMPUTE_BYTES_PER):
            return False
    return any(_feeds_outer_reduction(v, u, all_users) for u in users)


def _feeds_outer_reduction(v: ir.Value, u: ir.Value, all_users, hops: int = 4) -> bool:
    """Whether u reduces v (or a single-use pointwise chain of it: (d * d).mean(0)) over
    the whole array or over axes without the innermost one."""
    while hops > 0:
        if u.op in ir.REDUCTIONS:
            if u.op in ("argmin", "argmax") or tuple(u.args[0].shape) != tuple(v.shape):
                return False
            red = ir.reduced_axes(u)
            return v.ndim - 1 not in red or len(red) == v.ndim
        if not is_pointwise(u) or len(all_users[u.id]) != 1 or tuple(u.shape) != tuple(v.shape):
            return False
        u = all_users[u.id][0]
        hops -= 1
    return False


def _materialised(values, users, roots: set[int], fuse: bool) -> set[int]:
    mat: set[int] = set()
    depth: dict[int, int] = {}  # a lazy value's depth in its fused expression
    cost: dict[int, int] = {}  # ... and the cost of that expression (manifest units)
    for v in values:
        if v.op in LEAF_OPS or v.op in ir.VIEWS:
            if v.id in roots and v.op != "input":
                mat.add(v.id)  # an output that is a constant or a view: copied
            continue
        if is_pointwise(v):
            cost[v.id] = _op_cost(v) + sum(cost.get(a.id, 0) for a in dict.fromkeys(v.args) if a.id in depth)
        shared = len(users[v.id]) > 1 and not (
            fuse and is_pointwise(v) and _recomputed(v, users, cost[v.id]))  # Note [recomputed instead of stored]
        if not is_pointwise(v) or v.id in roots or not fuse or shared or any(u.op in ir.VIEWS for u in users[v.id]):
            mat.add(v.id)
        elif v.ndim == 0 and v.op != "astype" and any(u.ndim > 0 for u in users[v.id]):
            # Note [0-d values are computed once]: fused into an array expression, a 0-d
            # value (np.sin(w * t) of a loop-derived t) would be recomputed per element.
            mat.add(v.id)
        elif v.op != "astype" and any(_broadcast_into(v, u) for u in users[v.id]):
            mat.add(v.id)  # Note [broadcast values are computed once]
        else:
            d = 1 + max((depth.get(a.id, 0) for a in v.args), default=0)
            if d >= MAX_FUSED_DEPTH:  # Note [fused depth]
                mat.add(v.id)
            else:
                depth[v.id] = d
    return mat


def _op_cost(v: ir.Value) -> int:
    op = manifest.OPS.get(v.op)
    return int(op["cost"]) if op else 1


def _broadcast_into(v: ir.Value, u: ir.Value) -> bool:
    """Whether u reads v broadcast over at least BROADCAST_RATIO times v's elements."""
    if u.op in ir.REDUCTIONS or u.ndim == 0 or tuple(v.shape) == tuple(u.shape):
        return False
    small, big = 1, 1
    for d in v.shape:
        if not isinstance(d, int):
            return False  # a dynamic extent of v: as large as u's, for all we know
        small *= d
    for d in u.shape:
        if not isinstance(d, int):
            return True  # u has an extent v lacks, unknown until the call
        big *= d
    return big >= BROADCAST_RATIO * max(small, 1)


def _kind(v: ir.Value) -> str:
    if v.op in ir.REDUCTIONS:
        return "reduction"
    if v.op in ("matmul", "setitem") or v.op in ir.LOOP_OPS:
        return v.op  # a loop is one kernel: a C++ loop around its body's (codegen_loop.py)
    return "pointwise"


def _deps(v: ir.Value, mat: set[int]) -> set[int]:
    """Materialised values v's kernel reads (through its fused expression)."""
    out: set[int] = set()
    stack = list(v.args)
    while stack:
        a = stack.pop()
        if a.id in mat:
            out.add(a.id)
        else:
            stack.extend(a.args)
    return out


def _order(mvals: list[ir.Value], mat: set[int], writers: set[int]) -> list[ir.Value]:
    """Topological order of the kernels that postpones writes into arguments, so that the
    readers of an argument's original content run before it is overwritten."""
    deps = {v.id: _deps(v, mat) for v in mvals}
    done: set[int] = set()
    order: list[ir.Value] = []
    pending = list(mvals)
    while pending:
        ready = [v for v in pending if deps[v.id] <= done]
        pick = next((v for v in ready if v.id not in writers), ready[0])
        order.append(pick)
        done.add(pick.id)
        pending.remove(pick)
    return order


def _read_positions(values, users, pos) -> dict[int, set[int]]:
    """For each value, the kernels (positions) that read its content."""
    rp: dict[int, set[int]] = {}
    for v in reversed(values):
        if v.id in pos:
            rp[v.id] = {pos[v.id]}
        else:
            s: set[int] = set()
            for u in users[v.id]:
                s |= rp[u.id]
            rp[v.id] = s
    return rp


def _others_before(base, writer, users, read_pos, pos) -> bool:
    """Whether every reader of base other than writer runs no later than writer's own
    kernel (a read in that kernel is part of writer's value: dx::assign handles it)."""
    return all(p <= pos[writer.id] for u in users[base.id] if u is not writer
               for p in read_pos[u.id])


def _in_place_legal(group: list[ir.Value], inp: ir.Value | None, users, read_pos, pos) -> bool:
    """Whether a group holding a mutated argument's final value may live in the argument's
    memory: its first write (the oldest member, at its own kernel) comes after every read
    of the argument's original content, other than reads by that kernel itself."""
    if inp is None:
        return True
    first = min(group, key=lambda m: pos[m.id])
    for u in users.get(inp.id, ()):  # an argument only written (out=) has no readers
        if u is first and first.op == "setitem" and first.args[0] is inp \
                and inp not in first.args[1:]:
            continue  # the base of the first write is the buffer itself
        if any(p > pos[first.id] for p in read_pos[u.id]):
            return False
    return True


def _reads(v: ir.Value, target: ir.Value, storage: dict) -> bool:
    """Whether v's fused expression reads target."""
    stack = list(v.args)
    while stack:
        a = stack.pop()
        if a is target:
            return True
        if storage.get(a.id) in ("lazy", "leaf"):
            stack.extend(a.args)
    return False


def _chain_input(v: ir.Value) -> int | None:
    """The argument index v is a version of (through setitem bases), if any."""
    while v.op == "setitem":
        v = v.args[0]
    return v.attr("index") if v.op == "input" else None


def _cse(graph: ir.Graph) -> tuple[list[ir.Value], dict[int, ir.Value]]:
    """Structural hashing: values with the same op, args, attrs, dtype and shape become
    one. setitem values stay distinct (each is a version of a buffer)."""
    table: dict[tuple, ir.Value] = {}
    remap: dict[int, ir.Value] = {}
    out: list[ir.Value] = []
    for v in graph.values:
        args = tuple(remap[a.id] for a in v.args)
        key = None
        if v.op != "setitem":
            key = (v.op, tuple(a.id for a in args), _typed(v.attrs), v.dtype, tuple(v.shape))
            if key in table:
                remap[v.id] = table[key]
                continue
        nv = v if all(a is b for a, b in zip(args, v.args)) else \
            ir.Value(v.op, args, v.dtype, v.shape, v.attrs, v.id)
        remap[v.id] = nv
        if key is not None:
            table[key] = nv
        out.append(nv)
    return out, remap


def _typed(x):
    # 1, 1.0 and True are equal in Python; as constants they are different values. So are
    # 0.0 and -0.0 (clip(x, -0.0, 0.0) must keep both bounds).
    if isinstance(x, tuple):
        return tuple(_typed(e) for e in x)
    if isinstance(x, float):
        return ("float", x, math.copysign(1.0, x))
    return (type(x).__name__, x)
