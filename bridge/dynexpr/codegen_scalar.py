"""dynexpr.codegen_scalar — a loop node whose body is scalar work, as plain C++ scalars.

Note [scalar loop bodies]
Recurrences (a Thomas sweep, an IIR filter, an ODE integrated in Python floats, a logistic
map) roll into loop nodes whose bodies hold a few 0-d values per trip, and the general
loop (codegen_loop.py) runs each trip as a unit call: a frame of array descriptors, a 0-d
tensor per value, expression templates that work out shapes and strides. A 500-step
Lorenz integration spent ~0.9 us a trip there, slower than CPython's floats (0.7 us).
A body qualifies here when every value it computes is 0-d and it touches arrays only by
single elements: `x[i - 1]` (getitem with an integer or loop-moved item per dimension)
and `out[i, 2] = y` (setitem of one element of a carried array it updates in place,
Note [carried arrays in place] in codegen_loop.py). Then each trip is straight-line C++:

    double L9_s0 = L9_c0.data()[0];             // carried 0-d values as C++ scalars
    const auto L9_a1 = L9_c1.view();            // carried arrays, updated in place
    for (std::int64_t i = 1; i < L9_stop; i += 1) {
      ++L9_trip;
      const double s12 = dxk::sc<dynexpr::ops::mul_op>(L9_s0, 0.5);
      L9_a1.at(i, 0) = s12;                     // NumPy's index rules, bounds-checked
      L9_s0 = s12;
    }
    L9_c0.data()[0] = L9_s0;                    // back into the carried buffer

Each op is its manifest scalar body (dxk::sc, the evaluator's per-element path), so the
values and floating-point flags are the general path's. Element reads follow the trip's
order of writes: a body that reads an older version of an array after writing a newer
one (which NumPy semantics allow only through a copy) does not qualify.
"""

from __future__ import annotations

from . import ir, manifest

CTYPE = manifest.CTYPE
_ELEMENT_ITEMS = ("int", "dyn")


def qualifies(body: ir.Graph, n: int) -> bool:
    """Whether a loop body (input 0 the loop variable, 1..n carried, then invariants)
    is scalar work (Note [scalar loop bodies])."""
    kinds = _carried_kinds(body, n)
    if kinds is None:
        return False
    current = {}  # input index of an in-place array -> its latest version
    for v in body.values:
        if v.op == "input":
            k = v.attr("index")
            if v.ndim and 1 <= k <= n and kinds[k - 1] == "array":
                current[k] = v
            continue
        if v.op == "getitem":
            base = v.args[0]
            root = _root(base)
            if (v.ndim or root is None or not _element(v, base)
                    or (root in current and current[root] is not base)):
                return False
        elif v.op == "setitem":
            base, value = v.args[0], v.args[1]
            root = _root(base)
            if (root not in current or current[root] is not base or value.ndim
                    or value.dtype != base.dtype or not _element(v, base)):
                return False
            current[root] = v
        elif (v.ndim or any(a.ndim for a in v.args)
              or not (v.op in manifest.OPS or v.op in ("const", "full"))):
            return False
    return True


def _carried_kinds(body: ir.Graph, n: int) -> list[str] | None:
    """Per carried value: "scalar" (0-d), "array" (updated in place or passed on
    unchanged); None if one is neither."""
    inputs = {v.attr("index"): v for v in body.values if v.op == "input"}
    kinds = []
    for k, out in enumerate(body.outputs[:n]):
        entry = inputs.get(k + 1)
        if entry is None:
            return None
        if not entry.ndim:
            kinds.append("scalar")
            continue
        if out is not entry and not (out.op == "setitem" and _root(out) == k + 1):
            return None
        if any(_root(o) == k + 1 for j, o in enumerate(body.outputs) if j != k):
            return None  # another exit is a version of it: it needs its old content
        kinds.append("array")
    return kinds


def _root(v: ir.Value) -> int | None:
    """The body input that v is a version of (through setitem bases), if any."""
    while v.op == "setitem":
        v = v.args[0]
    return v.attr("index") if v.op == "input" else None


def _element(v: ir.Value, base: ir.Value) -> bool:
    """Whether getitem/setitem v names one element of base: an integer item per dim,
    each static or moved by a 0-d integer value."""
    index = v.attr("index")
    return (len(index) == base.ndim
            and all(it[0] in _ELEMENT_ITEMS for it in index)
            and all(v.args[it[1]].ndim == 0 and v.args[it[1]].dtype in ("int32", "int64")
                    for it in index if it[0] == "dyn"))


def emit_body(unit, L: str, body: ir.Graph, buffers: list[str], header: str) -> None:
    """Emits the declarations before the C++ loop, its trips, and the write-back after it,
    for a body that qualifies. codegen_loop.emit_loop declared the rest: the carried
    buffers (`buffers`, one per carried value), the invariants L_v<j> and the loop
    header (`header`, `for (...) {` over i)."""
    n = len(buffers)
    emit = unit.emit
    names: dict[int, str] = {}
    carried = [None] * n
    for v in body.values:
        if v.op != "input":
            continue
        k = v.attr("index")
        if k == 0:
            names[v.id] = "i"
            continue
        store = buffers[k - 1] if k <= n else f"{L}_v{k - 1 - n}"
        if v.ndim:
            names[v.id] = f"{L}_a{k}"
            emit(f"const auto {L}_a{k} = {store}.view();")
        elif k <= n:
            names[v.id] = carried[k - 1] = f"{L}_s{k}"
            emit(f"{CTYPE[v.dtype]} {L}_s{k} = {store}.data()[0];")
        else:
            names[v.id] = f"{L}_w{k}"
            emit(f"const {CTYPE[v.dtype]} {L}_w{k} = {store}.data()[0];")
    emit(f"std::int64_t {L}_trip = 0;")
    emit(header)
    emit(f"  ++{L}_trip;")
    for v in body.values:
        if v.op == "input":
            continue
        if v.op == "setitem":
            names[v.id] = names[v.args[0].id]  # the same buffer, written in place
            emit(f"  {names[v.id]}.at({_items(v, names)}) = {names[v.args[1].id]};")
            continue
        names[v.id] = f"s{v.id}"
        emit(f"  const {CTYPE[v.dtype]} s{v.id} = {_scalar(unit, v, names)};")
    # Every exit is read before any carried value changes (a, b = b, a + b).
    updates = [(k, names[out.id]) for k, out in enumerate(body.outputs[:n])
               if carried[k] is not None and names[out.id] != carried[k]]
    for k, ref in updates:
        emit(f"  const {CTYPE[body.outputs[k].dtype]} {L}_n{k + 1} = {ref};")
    for k, _ in updates:
        emit(f"  {carried[k]} = {L}_n{k + 1};")
    emit("}")
    for k, name in enumerate(carried):
        if name is not None:
            emit(f"{buffers[k]}.data()[0] = {name};")


def _items(v: ir.Value, names: dict[int, str]) -> str:
    """v's element index as View::at arguments (negative ones wrap, all are checked, as
    NumPy's integer indexing)."""
    out = []
    for it in v.attr("index"):
        if it[0] == "int":
            out.append(f"dx::index_t{{{it[1]}}}")
        else:  # ("dyn", k, mul, add): mul * args[k] + add
            out.append(f"static_cast<dx::index_t>({it[2]} * {names[v.args[it[1]].id]} + {it[3]})")
    return ", ".join(out)


def _scalar(unit, v: ir.Value, names: dict[int, str]) -> str:
    """v's value as a C++ scalar expression of its operands' names."""
    T = CTYPE[v.dtype]
    if v.op in ("const", "full"):
        return unit.literal(v.attr("value"), v.dtype)
    args = [names[a.id] for a in v.args]
    if v.op == "getitem":
        return f"{args[0]}.at({_items(v, names)})"
    if v.op == "astype":
        return f"static_cast<{T}>({args[0]})"
    if v.op == "where":
        return f"(static_cast<bool>({args[0]}) ? {args[1]} : {args[2]})"
    op = ir.computed_op(v)  # Note [small powers] (codegen.py), bools' + and *
    if op in ("x**2", "x**3"):
        sq = f"dxk::sc<dynexpr::ops::square_op>({args[0]})"
        return sq if op == "x**2" else f"dxk::sc<dynexpr::ops::mul_op>({args[0]}, {sq})"
    return f"dxk::sc<dynexpr::ops::{manifest.OPS[op]['id']}>({', '.join(args)})"
