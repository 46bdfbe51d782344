"""dynexpr.ir — the typed graph that capture produces and every backend consumes.

A Graph is a list of Values in topological order. Each Value is one NumPy-level
operation with its result dtype and shape already decided (by NumPy's own rules, at
capture time), so backends never re-derive promotion or broadcasting:

    %0 = input[0] : float32[1024]
    %1 = const(2.0, weak=float) : float32[]
    %2 = multiply(%0, %1) : float32[1024]
    %3 = tanh(%2) : float32[1024]
    return (%3,)

Ops are the NumPy names of the op manifest's ops (include/dynexpr/ops/manifest.py, from
which the C++ op table is generated), plus the structural ops listed in STRUCTURAL_OPS. The canonical text is the
hash input of the compile cache: it contains everything that changes the generated
code and nothing else (no object ids, no file names).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from . import manifest

DTYPES = manifest.DTYPES

# dim: an int for a static extent, or a str naming a dynamic one ("s0", "s1", ...);
# equal names are equal extents.
Dim = "int | str"

# Ops that are not elementwise op-table entries. attrs (all hashable):
#   input        index: position among the graph's inputs
#   const        value: Python scalar (already of the node's dtype's kind)
#   astype       dtype
#   where        (cond, a, b)
#   sum prod min max mean any all    axes: tuple[int] | None, keepdims: bool
#   var std      axes, keepdims, ddof
#   argmin argmax                    axis: int | None, keepdims: bool
#   matmul       (a, b)
#   reshape      shape: tuple
#   transpose    axes: tuple
#   broadcast_to shape: tuple
#   expand_dims  axis: tuple
#   squeeze      axis: tuple
#   getitem      index: tuple of ("int", i) | ("slice", start, stop, step) | ("newaxis",)
#                | ("dyn", k, mul, add) | ("dslice", k, mul, add, length, step): Note
#                [dynamic offsets]; args[k] (k >= 1) is the int64[] value they read.
#   full         value, dtype, shape (zeros_like/ones_like/full_like)
#   setitem      (base, value, offsets...) index: like getitem (dyn items read args[k],
#                k >= 2) — writes value into base[index]; its result is base after the
#                write (a new version of it).
#   loop         (stop, carried inits..., invariants...) start, step, carried: int,
#                body: Body. Note [loop nodes]. Its own value is the trip count
#                (int64[]); the carried arrays' final values are its loop_out users.
#   loop_out     (loop,) index: k — the final value of the loop's carried array k.
#
# Note [loop nodes]
# A `for i in range(start, stop, step)` whose body is array work is one node instead of
# trip-count copies of its body, so a unit's size and compile time do not grow with the
# trip count, and `stop` is a graph input (an int64[] value): a new trip count is a new
# argument, not a new graph. The body is a Graph of its own whose inputs are, in order:
#   input[0]         the loop variable i, int64[] (start + step*j on iteration j),
#   input[1..n]      the carried arrays on entry to the iteration (iteration 0: the
#                    loop's carried init args; then the body's outputs of the one before),
#   input[n+1..]     loop invariants (the loop's remaining args, the same every iteration),
# and whose outputs are the n carried arrays on exit, each with the dtype and shape of
# its entry (a carried array changes neither: a body that changes them is not a loop,
# capture unrolls it). Body values are functional like the outer graph's: a slice
# update is a setitem whose value was computed from the carried array's entry version,
# so NumPy's "the right-hand side is read before the write" holds by construction.
# A body has no mutations; the caller's array a loop updates is a mutation of the outer
# graph whose final value is a loop_out.
# `start` is an int, or ("dyn", k, mul, add): mul*args[k] + add, args[k] an int64[]
# invariant. That is an inner loop whose start moves with an outer loop's variable
# (`for j in range(k + 1, n)` inside `for k in ...`: Note [nested loops] in
# capture/reroll.py), which it takes as its last invariant.
#
# Note [dynamic offsets]
# `a[i]`, `a[i-1]`, `a[:, i] = ...`, `a[i:i+3]` in a loop body index at an offset that
# moves with the loop variable: an index item ("dyn", k, mul, add) is the integer
# mul*args[k] + add, and ("dslice", k, mul, add, length, step) the slice of `length`
# elements from mul*args[k] + add by `step`, where args[k] is an int64[] value (in a body:
# its input[0], i). The extent stays static (`length`): a slice whose length changes with
# i (`a[i:]`, `L[i, :i]`) has a dynamic length instead: `length` is then a pair (lmul,
# ladd), lmul*args[k] + ladd elements (Note [dynamic extents]). Capture (reroll.py)
# makes these items only from iterations it saw, each offset in bounds; the cpu backend
# still checks integer offsets (an IndexError, never a wild read).
#
# Note [dynamic extents]
# In a loop body, an extent that moves with the loop variable (`L[i, :i] @ x[:i]`: i
# elements; `A[i+1:, i]`: n-i-1) is the shape entry affine_extent(mul, add), a string
# like the outer graph's dynamic sizes, meaning mul*i + add for i the body's input[0].
# Nothing binds it from an input's shape: a body unit computes it from i on entry
# (schedule.Schedule.symbols maps it to AFFINE), eager from its i. It is never negative
# for the i the loop runs (reroll fits it to the iterations it saw, relax.py keeps the
# trip count where it holds), and may be 0: a sum or a dot over 0 elements is 0.
#
# Note [what capture guarantees] (dynexpr.capture produces graphs with these properties;
# tests/python/test_corpus.py::test_graph_is_well_formed checks them on every corpus graph)
#   - dtype/shape of every value are NumPy's; every shape entry is an int (static).
#   - Op-table ops (and clip) get their arguments already cast to the loop dtype NumPy
#     picks (astype nodes, or constants made in that dtype): all args share one dtype.
#     where: cond is bool, a and b have the result dtype.
#   - const: `value` is of the node dtype's kind; `weak` ("int"/"float") is present only
#     for a Python scalar the user wrote (NEP 50); its dtype is the one NumPy converts
#     it to in that op.
#   - getitem/setitem index: one entry per indexed dim, Ellipsis expanded, ints >= 0,
#     ("slice", start, stop, step) with start >= 0 and stop >= 0 or None ("past the
#     end"; for a negative step, past index 0): Python slice semantics select exactly
#     those elements; an empty slice is ("slice", 0, 0, 1). setitem's value already has
#     the region's shape and the base's dtype.
#   - reductions: axes is None or a sorted tuple of non-negative ints;
#     argmin/argmax axis is None or a non-negative int; var/std carry ddof.
#   - reshape shape has no -1; transpose axes is a full permutation; expand_dims and
#     squeeze axis are explicit tuples of non-negative ints.
#   - matmul is 2-D @ 2-D (1-D operands arrive reshaped to rows/columns), or batched:
#     2-D/3-D operands, a 3-D result, a batch of one broadcast (np_linalg.batched_matmul).
#   - graph outputs are computed values: never an input, a const or a view (a copy,
#     an astype to the same dtype, is added where needed); inputs are numbered 0..n-1
#     in order, and every mutated input is an input even when its old value is unused.
REDUCTIONS = manifest.REDUCTIONS
VIEWS = ("reshape", "transpose", "broadcast_to", "expand_dims", "squeeze", "getitem")
LOOP_OPS = ("loop", "loop_out")
STRUCTURAL_OPS = (("input", "const", "astype", "where", "matmul", "full", "setitem")
                  + REDUCTIONS + VIEWS + LOOP_OPS)


@dataclass(eq=False)
class Value:
    """One node: op applied to args, giving an array of `dtype` and `shape`."""

    op: str
    args: tuple["Value", ...]
    dtype: str
    shape: tuple
    attrs: tuple = ()  # sorted ((name, value), ...), hashable
    id: int = -1

    def attr(self, name: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == name:
                return v
        return default

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"%{self.id}:{self.op}:{self.dtype}{list(self.shape)}"


def small_integer_exponent(e: Value) -> int | None:
    """The exponent of `x ** e` as an int when e is a 0-d constant of integral value
    (Note [small powers] in codegen.py), else None."""
    if e.op != "const" or e.shape != ():
        return None
    x = e.attr("value")
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) \
            or x != int(x):
        return None
    return int(x)


# NumPy's add/multiply/maximum/minimum of two bools are logical or/and (manifest: on_bools).
_BOOL_ARITH = {n: o["on_bools"] for n, o in manifest.OPS.items() if o["on_bools"]}


def computed_op(v: Value) -> str:
    """The op pointwise value v computes, as NumPy's loops compute it: a float x**2 is
    "x**2" (np.square) and x**3 "x**3" (x * x**2; Note [small powers] in codegen.py),
    names no manifest op can take; + and * of bools are logical or/and; else v.op. Every
    codegen spells what this names."""
    if v.op == "power" and v.dtype in ("float32", "float64"):
        k = small_integer_exponent(v.args[1])
        if k in (2, 3):
            return "x**2" if k == 2 else "x**3"
    if v.op in _BOOL_ARITH and all(a.dtype == "bool" for a in v.args):
        return _BOOL_ARITH[v.op]
    return v.op


def make_attrs(**kw: Any) -> tuple:
    return tuple(sorted(kw.items()))


@dataclass
class Graph:
    """Values in topological order; `outputs` are what the captured code returns or
    writes back (mutations are `setitem` values listed in `mutations` with the input
    index they update)."""

    values: list[Value] = field(default_factory=list)
    outputs: list[Value] = field(default_factory=list)
    # (input index, final value of that input) for arguments the code mutated in place.
    mutations: list[tuple[int, Value]] = field(default_factory=list)
    # NumPy FPE bits (1 divide, 2 over, 4 under, 8 invalid) that np.errstate(...="ignore")
    # blocks in the captured code silence: the graph's floating-point reports leave them
    # out whatever the caller's error state (Note [errstate inside captured code],
    # capture/np_table.py).
    quiet: int = 0

    def add(self, v: Value) -> Value:
        v.id = len(self.values)
        self.values.append(v)
        return v

    @property
    def inputs(self) -> list[Value]:
        return [v for v in self.values if v.op == "input"]

    def ops(self) -> list[str]:
        """Op names of the computing values (no inputs or constants)."""
        return [v.op for v in self.values if v.op not in ("input", "const")]

    def canonical(self) -> str:
        """The text that identifies this graph's computation (the cache-key input)."""
        lines = []
        for v in self.values:
            args = ", ".join(f"%{a.id}" for a in v.args)
            attrs = ", ".join(f"{k}={_canon(x)}" for k, x in v.attrs)
            inner = ", ".join(p for p in (args, attrs) if p)
            shape = ",".join(str(d) for d in v.shape)
            lines.append(f"%{v.id} = {v.op}({inner}) : {v.dtype}[{shape}]")
        lines.append("return (" + ", ".join(f"%{o.id}" for o in self.outputs) + ")")
        for i, v in self.mutations:
            lines.append(f"mutate input[{i}] <- %{v.id}")
        if self.quiet:
            lines.append(f"quiet fp errors {self.quiet}")
        return "\n".join(lines)

    def key(self) -> str:
        return hashlib.sha256(self.canonical().encode()).hexdigest()

    def __str__(self) -> str:
        return self.canonical()


class Body:
    """A loop node's body graph as an attribute: hashable and compared by its canonical
    text (attrs are hashable; two bodies that compute the same are the same key)."""

    __slots__ = ("graph", "_text")

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self._text = graph.canonical()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Body) and other._text == self._text

    def __hash__(self) -> int:
        return hash(self._text)

    def __repr__(self) -> str:
        return "{" + "; ".join(self._text.splitlines()) + "}"


def loop(graph: Graph, start: int, stop: Value, step: int, carried: list[Value],
         invariants: list[Value], body: Graph) -> list[Value]:
    """Adds a loop node (Note [loop nodes]) and its loop_out values to `graph`; returns
    the carried arrays' final values. Checks the body's contract, so a translator mistake
    fails here rather than as a wrong number."""
    n = len(carried)
    ins = body.inputs
    if step == 0:
        raise ValueError("dynexpr: a loop's step cannot be zero (range() raises ValueError)")
    if stop.dtype != "int64" or stop.shape != ():
        raise ValueError(f"dynexpr: a loop's stop must be an int64[] value, got {stop}")
    if len(ins) != 1 + n + len(invariants) or len(body.outputs) != n or body.mutations:
        raise ValueError(f"dynexpr: a loop body takes (i, {n} carried, {len(invariants)} "
                         f"invariants) and returns {n} carried values, without mutations")
    if (ins[0].dtype, ins[0].shape) != ("int64", ()):
        raise ValueError("dynexpr: a loop body's input[0] (the loop variable) is int64[]")
    for k, (init, entry, out) in enumerate(zip(carried, ins[1:], body.outputs)):
        kinds = {(x.dtype, tuple(x.shape)) for x in (init, entry, out)}
        if len(kinds) != 1:
            raise ValueError(f"dynexpr: carried array {k} of a loop changes dtype or shape "
                             f"({init}, {entry}, {out})")
    for x, entry in zip(invariants, ins[1 + n:]):
        if (x.dtype, tuple(x.shape)) != (entry.dtype, tuple(entry.shape)):
            raise ValueError(f"dynexpr: loop invariant {x} does not match body {entry}")
    node = graph.add(Value("loop", (stop, *carried, *invariants), "int64", (),
                           make_attrs(start=start, step=step, carried=n, body=Body(body))))
    return [graph.add(Value("loop_out", (node,), c.dtype, tuple(c.shape), make_attrs(index=k)))
            for k, c in enumerate(carried)]


def offset_args(v: Value) -> int:
    """How many of v's leading args are arrays (the rest are dynamic offsets: Note
    [dynamic offsets]): 1 for getitem, 2 for setitem, all of them otherwise."""
    return {"getitem": 1, "setitem": 2}.get(v.op, len(v.args))


AFFINE = "affine"  # schedule.symbols' binding of an affine extent (Note [dynamic extents])


def affine_extent(mul: int, add: int, var: int = 0) -> str:
    """The shape entry of an extent mul*x + add in a loop body (Note [dynamic extents]),
    x its input[var]: 0 is the loop variable i; another is an outer loop's variable that
    an inner loop takes as an invariant (Note [nested loops] in capture/reroll.py)."""
    return f"i*{mul}{add:+d}" if var == 0 else f"in{var}*{mul}{add:+d}"


def reduced_axes(v: Value) -> tuple[int, ...]:
    """The axes reduction v reduces, sorted and non-negative: every axis of its input for
    axes=None (capture gives sorted non-negative axes; hand-built graphs may not)."""
    nd = v.args[0].ndim
    axes = v.attr("axes")
    if axes is None:
        return tuple(range(nd))
    return tuple(sorted({a % nd for a in (axes if isinstance(axes, (tuple, list)) else (axes,))}))


def parse_affine_extent(d: Any) -> tuple[int, int, int] | None:
    """(var, mul, add) of an affine_extent, or None for anything else."""
    if not isinstance(d, str):
        return None
    head, star, body = d.partition("*")
    if not star or not (head == "i" or (head[:2] == "in" and head[2:].isdigit())):
        return None
    cut = max(body.rfind("+"), body.rfind("-"))
    if cut <= 0:
        return None
    try:
        return (0 if head == "i" else int(head[2:])), int(body[:cut]), int(body[cut:])
    except ValueError:
        return None


def dslice_length(e: tuple, offsets: dict[int, int]) -> int:
    """The number of elements of dslice item e (static, or lmul*args[k] + ladd)."""
    length = e[4]
    if isinstance(length, tuple):
        return max(0, length[0] * offsets[e[1]] + length[1])
    return length


def resolve_index(index: tuple, offsets: dict[int, int]) -> tuple:
    """A getitem/setitem index with its dynamic items made static (Note [dynamic offsets]),
    given the int value of each arg position an item reads."""
    out = []
    for e in index:
        if e[0] == "dyn":
            out.append(("int", e[2] * offsets[e[1]] + e[3]))
        elif e[0] == "dslice":
            _, k, mul, add, _, step = e
            length = dslice_length(e, offsets)
            start = mul * offsets[k] + add
            stop = start + step * length
            out.append(("slice", start, None if stop < 0 else stop, step))
        else:
            out.append(e)
    return tuple(out)


def _canon(x: Any) -> str:
    # repr of floats round-trips exactly; bools and ints are distinct from floats.
    if isinstance(x, Body):
        return repr(x)
    if isinstance(x, float):
        return repr(x) + "f"
    if isinstance(x, tuple):
        return "(" + ",".join(_canon(e) for e in x) + ")"
    return repr(x)


def topo_users(graph: Graph) -> dict[int, list[Value]]:
    """For each value id, the values that use it."""
    users: dict[int, list[Value]] = {v.id: [] for v in graph.values}
    for v in graph.values:
        for a in v.args:
            users[a.id].append(v)
    return users


def walk(values: Iterable[Value], within: Callable[[Value], bool] | None = None) -> list[Value]:
    """All values reachable from `values`, in topological order (each after its args,
    args in order: the order a recursive post-order visit gives); with `within`, only
    through the args for which it is true.

    Note [no recursion on graph depth]: an unrolled loop that updates one array makes a
    chain of setitem versions as long as its trip count, so every walk over a graph
    keeps its own stack instead of Python's (whose limit is ~1000 frames)."""
    seen: set[int] = set()
    order: list[Value] = []
    for root in values:
        if id(root) in seen:
            continue
        seen.add(id(root))
        stack = [(root, iter(root.args))]
        while stack:
            v, args = stack[-1]
            for a in args:
                if id(a) not in seen and (within is None or within(a)):
                    seen.add(id(a))
                    stack.append((a, iter(a.args)))
                    break
            else:
                stack.pop()
                order.append(v)
    return order
