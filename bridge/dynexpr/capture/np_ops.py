"""NumPy operations on fake arrays: each one decides its result by asking NumPy
(infer.py) and adds IR nodes. Callers pass Vars; results are Vars.

Every elementwise node gets its arguments already cast to the loop dtype NumPy picks
(astype nodes, or constants made in that dtype), so backends never promote.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from .. import ir, manifest
from .arrays import ArrayVar, fresh
from .builder import Context
from .errors import InternalError, graph_break
from .infer import (
    ask,
    broadcast,
    dtype_name,
    example,
    normalize_axes,
    reduced_shape,
    result_of,
    shape_of,
    ufunc_loop,
)
from .variables import LoopIndexVar, PyVar, ScalarInputVar, Var

# The manifest's ops NumPy reaches by ufunc, by the ufunc object (aliases such as np.divide,
# np.abs, np.mod are the same objects as true_divide, absolute, remainder).
ELEMENTWISE = manifest.UFUNC_OPS
UFUNC_OPS: dict[np.ufunc, str] = {getattr(np, n): n for n in ELEMENTWISE}
# Every op-table op the translator emits: ufuncs, NumPy functions with handlers of their own
# (clip, where), and the manifest's ops that only dynexpr.ops provides.
OP_TABLE_OPS = ELEMENTWISE + manifest.FUNCTION_OPS + tuple(manifest.REFERENCE_OPS)
REDUCTION_FNS = {name: getattr(np, name) for name in ir.REDUCTIONS}
_NUMERIC = (bool, int, float, complex)


def const_value(v: Var, what: str) -> Any:
    if isinstance(v, PyVar):
        return v.value
    graph_break(f"{what} must be known while capturing, but it is a {v.describe()}")


def is_numeric_const(v: Var) -> bool:
    if isinstance(v, ScalarInputVar):
        return True
    return isinstance(v, PyVar) and (type(v.value) in _NUMERIC or isinstance(v.value, np.generic))


def operand(ctx: Context, v: Var, dtype: str) -> ir.Value:
    """v as an IR value of `dtype` (the loop's input dtype)."""
    if isinstance(v, ArrayVar):
        return ctx.graph.cast(v.value, dtype)
    if isinstance(v, ScalarInputVar):  # read when the kernel runs, as NumPy would cast it
        hit = v.inputs.get(dtype)
        if hit is None:
            hit = v.inputs[dtype] = ctx.graph.input(("as0d", v.source, dtype), dtype, ())
        return hit
    if is_numeric_const(v):
        x = v.value
        weak = type(x).__name__ if type(x) in (int, float) else None
        return ctx.graph.const(x.item() if isinstance(x, np.generic) else x, dtype, weak)
    graph_break(
        f"NumPy would turn a {v.describe()} into an array here; dynexpr does not "
        "capture arrays built from Python data (build it outside, pass it in)"
    )


def fold(fn: Any, *args: Any, **kw: Any) -> Var:
    """All operands known: compute the real result now (it must not be an array)."""
    r = ask(fn, *args, **kw)
    if isinstance(r, np.ndarray):
        graph_break(
            f"{getattr(fn, '__name__', fn)} builds an array from constants; "
            "dynexpr does not capture array literals"
        )
    return PyVar(r)


# --- elementwise -----------------------------------------------------------------------


def ufunc(ctx: Context, uf: np.ufunc, operands: list[Var]) -> Var:
    name = UFUNC_OPS.get(uf)
    if name is None:
        graph_break(f"np.{uf.__name__} is not in dynexpr's op table")
    if len(operands) != uf.nin:
        graph_break(f"np.{uf.__name__} takes {uf.nin} operands here, got {len(operands)}")
    if all(isinstance(v, PyVar) for v in operands):
        if not _loop_derived(uf, operands):
            return fold(uf, *[v.value for v in operands])
        # np.sin(w * t) of a loop-derived t (Note [loop-derived scalars]): a 0-d node on
        # the constant, a NumPy scalar as Python's call gives, so the loop can roll.
        operands = [PyVar(v.raw) if isinstance(v, LoopIndexVar) else v for v in operands]
    for v in operands:
        if not isinstance(v, ArrayVar) and not is_numeric_const(v):
            operand(ctx, v, "float64")  # breaks with the reason
    dtype, kind = result_of(ask(uf, *[example(v) for v in operands]))
    known = _compare_out_of_range(ctx, uf, operands)
    if known is not None:
        return known
    shape = broadcast(*[shape_of(v) for v in operands])
    loop = ufunc_loop(uf, operands)
    args = tuple(operand(ctx, v, loop[i]) for i, v in enumerate(operands))
    return fresh(ctx.graph, ctx.graph.node(name, args, dtype, shape), kind)


def _loop_derived(uf: np.ufunc, operands: list[Var]) -> bool:
    """Whether a ufunc of known scalars has a float loop-derived one among them (a
    LoopIndexVar whose raw value is a float) and gives a float: computed in the graph."""
    if uf.nout != 1 or not any(isinstance(v, LoopIndexVar) and type(v.raw) is float
                               for v in operands):
        return False
    xs = [v.raw if isinstance(v, LoopIndexVar) else v.value for v in operands]
    return all(type(x) in (int, float) for x in xs) and \
        np.asarray(ask(uf, *[float(x) for x in xs])).dtype.kind == "f"


def reference_op(ctx: Context, name: str, fn: Any, operands: list[Var]) -> Var:
    """A manifest op without a NumPy ufunc (dynexpr.ops.<name>): its NumPy reference
    `fn` decides the result dtype, the operands are cast to the loop dtype (the result's,
    or for a bool result their common type) and the graph gets one `name` node."""
    if all(isinstance(v, PyVar) for v in operands):
        return fold(fn, *[v.value for v in operands])
    for v in operands:
        if not isinstance(v, ArrayVar) and not is_numeric_const(v):
            operand(ctx, v, "float64")  # breaks with the reason
    examples = [example(v) for v in operands]
    dtype, kind = result_of(ask(fn, *examples))
    loop = dtype if dtype != "bool" else ask(np.result_type, *examples).name
    shape = broadcast(*[shape_of(v) for v in operands])
    args = tuple(operand(ctx, v, loop) for v in operands)
    return fresh(ctx.graph, ctx.graph.node(name, args, dtype, shape), kind)


_COMPARISONS = {np.equal: operator.eq, np.not_equal: operator.ne, np.less: operator.lt,
                np.less_equal: operator.le, np.greater: operator.gt,
                np.greater_equal: operator.ge}


def _compare_out_of_range(ctx: Context, uf: np.ufunc, operands: list[Var]) -> Var | None:
    """NumPy 2 compares an integer array with a Python int outside the array's dtype
    (`int32_array < 3_000_000_000`) by value instead of raising OverflowError as
    arithmetic does. Every element then compares alike, so the result is that one bool:
    `x == x` or `x != x` on the array (its shape and kind, exact for integers)."""
    cmp = _COMPARISONS.get(uf)
    if cmp is None:
        return None
    arrays = [v for v in operands if isinstance(v, ArrayVar)]
    ints = [v.value for v in operands if isinstance(v, PyVar) and type(v.value) is int]
    if len(arrays) != 1 or len(ints) != 1 or np.dtype(arrays[0].dtype).kind not in "iu":
        return None
    info = np.iinfo(arrays[0].dtype)
    if info.min <= ints[0] <= info.max:
        return None
    x = arrays[0]
    pair = (0, ints[0]) if operands[0] is x else (ints[0], 0)  # 0: any in-range value
    return ufunc(ctx, np.equal if cmp(*pair) else np.not_equal, [x, x])


def fast_power(base: Var, exp: Var) -> np.ufunc | None:
    """NumPy's ndarray.__pow__ calls square/reciprocal/sqrt for a float array and an exact
    Python 2, -1 or 0.5 (its fast_scalar_power); the results differ from np.power in
    corner cases (sqrt(-inf) is nan, power(-inf, 0.5) is inf), so we do the same."""
    if not (
        isinstance(base, ArrayVar)
        and not base.is_scalar
        and isinstance(exp, PyVar)
        and type(exp.value) in (int, float)
        and np.dtype(base.dtype).kind == "f"
    ):
        return None
    return {(int, 2): np.square, (int, -1): np.reciprocal, (float, 0.5): np.sqrt}.get(
        (type(exp.value), exp.value)
    )


def power(ctx: Context, base: Var, exp: Var) -> Var:
    fast = fast_power(base, exp)
    return ufunc(ctx, fast, [base]) if fast else ufunc(ctx, np.power, [base, exp])


def where(ctx: Context, cond: Var, a: Var, b: Var) -> Var:
    ops = [cond, a, b]
    for v in ops:
        if not isinstance(v, ArrayVar) and not is_numeric_const(v):
            operand(ctx, v, "float64")
    dtype, kind = result_of(ask(np.where, *[example(v) for v in ops]))
    shape = broadcast(*[shape_of(v) for v in ops])
    a, b = _where_branch(a, dtype), _where_branch(b, dtype)
    args = (operand(ctx, cond, "bool"), operand(ctx, a, dtype), operand(ctx, b, dtype))
    return fresh(ctx.graph, ctx.graph.node("where", args, dtype, shape), kind)


def _where_branch(v: Var, dtype: str) -> Var:
    """np.where casts a Python number branch to the result dtype unsafely, as
    np.asarray(v).astype(dtype): np.where(int32_array > 0, x, 2**31) holds -2**31, and
    1e300 in a float32 result is inf. Such a value becomes a constant of that dtype."""
    if not (isinstance(v, PyVar) and type(v.value) in (int, float)):
        return v
    cast = ask(lambda: np.asarray(v.value).astype(dtype)[()])
    return v if cast == v.value else PyVar(cast)


def clip(ctx: Context, x: Var, lo: Var, hi: Var) -> Var:
    none_lo = isinstance(lo, PyVar) and lo.value is None
    none_hi = isinstance(hi, PyVar) and hi.value is None
    if none_lo and none_hi:
        return copy(ctx, x) if isinstance(x, ArrayVar) else x
    if none_lo:
        return ufunc(ctx, np.minimum, [x, hi])
    if none_hi:
        return ufunc(ctx, np.maximum, [x, lo])
    ops = [x, lo, hi]
    if all(isinstance(v, PyVar) for v in ops):
        return fold(np.clip, *[v.value for v in ops])
    dtype, kind = result_of(ask(np.clip, *[example(v) for v in ops]))
    shape = broadcast(*[shape_of(v) for v in ops])
    args = tuple(operand(ctx, v, dtype) for v in ops)
    return fresh(ctx.graph, ctx.graph.node("clip", args, dtype, shape), kind)


# --- reductions ------------------------------------------------------------------------


def reduce(
    ctx: Context,
    name: str,
    x: Var,
    axis: Any = None,
    keepdims: bool = False,
    dtype: Any = None,
    ddof: Any = 0,
) -> Var:
    fn = REDUCTION_FNS[name]
    kw: dict[str, Any] = {"axis": axis, "keepdims": keepdims}
    if name in ("var", "std"):
        kw["ddof"] = ddof
    if isinstance(x, PyVar):
        return fold(fn, x.value, **kw)
    if not isinstance(x, ArrayVar):
        graph_break(f"np.{name} of a {x.describe()} (NumPy would build an array) is not supported")
    if dtype is not None:
        if name in ("argmin", "argmax", "any", "all"):
            graph_break(f"np.{name} with dtype= is not supported")
        # NumPy's result dtype with dtype= (sum(int32_x, dtype=np.int32) stays int32).
        out_dtype, kind = result_of(ask(fn, example(x), dtype=dtype, **kw))
        if name in ("mean", "var", "std") and np.dtype(out_dtype).kind != "f":
            if name != "mean":
                graph_break(f"np.{name} with a non-float dtype= is not supported")
            return _int_mean(ctx, x, axis, keepdims, out_dtype)
        x = astype(ctx, x, dtype)
    else:
        out_dtype, kind = result_of(ask(fn, example(x), **kw))
    if (
        name in ("argmin", "argmax")
        and axis is not None
        and not isinstance(axis, (int, np.integer))
    ):
        graph_break(f"np.{name} takes an int axis; got {axis!r}")
    axes = normalize_axes(axis, x.ndim)
    axes = None if axes is None else tuple(sorted(axes))
    shape = reduced_shape(x.shape, axes, keepdims)
    if name in ("argmin", "argmax"):
        attrs = {"axis": None if axes is None else axes[0], "keepdims": bool(keepdims)}
    else:
        attrs = {"axes": axes, "keepdims": bool(keepdims)}
        if name in ("var", "std"):
            attrs["ddof"] = ddof.item() if isinstance(ddof, np.generic) else ddof
    node = ctx.graph.node(name, (x.value,), out_dtype, shape, **attrs)
    return fresh(ctx.graph, node, kind)


def _int_mean(ctx: Context, x: ArrayVar, axis: Any, keepdims: bool, out_dtype: str) -> Var:
    """np.mean(x, dtype=<int>) as NumPy computes it: the sum in that dtype, a true
    division by the count, and an unsafe cast back (np.mean(x, dtype=np.int64) of 5.5 is 5)."""
    ctx.session.check_static(x.shape, f"np.mean(dtype={out_dtype})")
    axes = normalize_axes(axis, x.ndim)
    count = int(np.prod([x.shape[a] for a in (range(x.ndim) if axes is None else axes)]))
    total = reduce(ctx, "sum", x, axis, keepdims, out_dtype)
    return astype(ctx, ufunc(ctx, np.true_divide, [total, PyVar(count)]), out_dtype)


# --- dtype, copies, creation -------------------------------------------------------------


def as_dtype(spec: Any) -> str:
    return dtype_name(ask(np.dtype, spec))


def astype(ctx: Context, x: Var, dtype: Any, copy_: bool = True) -> Var:
    if isinstance(x, PyVar):
        return fold(lambda v: np.asarray(v).astype(dtype)[()], x.value)
    dt = as_dtype(dtype)
    if dt == x.dtype and not copy_:
        return x
    value = ctx.graph.copy(x.value) if dt == x.dtype else ctx.graph.cast(x.value, dt)
    return fresh(ctx.graph, value, x.kind)


def copy(ctx: Context, x: Var, kind: str = "ndarray") -> Var:
    if not isinstance(x, ArrayVar):
        graph_break(f"copying a {x.describe()} into an array is not supported")
    return fresh(ctx.graph, ctx.graph.copy(x.value), kind)


def full(ctx: Context, shape: Any, fill: Any, dtype: Any, kind: str = "ndarray",
         empty: bool = False) -> Var:
    """np.full / np.zeros / np.ones, and np.empty (empty=True).

    Note [np.empty is not filled]
    np.empty's contents are whatever its memory held, so an np.empty node reads as zeros
    where it is read as a value (any contents are right), but when it is the base of a
    setitem stored into a buffer the call allocated (an output or a temporary), codegen
    does not fill that buffer first: `out = np.empty((T, n)); for t ...: out[t] = ...`
    writes every element once, as NumPy does, instead of zero-filling 16 MB before the
    loop overwrites it (a 2000-step recurrence's trajectory at n=1000: 12.1 ms against
    6.2 ms plain)."""
    if isinstance(fill, np.ndarray):
        graph_break("fill values that are arrays are not supported")
    sample = ask(np.full, (), fill, dtype)  # NumPy converts the fill value (unsafe cast)
    dt = dtype_name(sample.dtype)
    shape = tuple(ask(lambda s: np.empty(s, np.dtype([])).shape, shape))
    value = sample.item()
    attrs = {"empty": True} if empty else {}
    node = ctx.graph.node("full", (), dt, shape, value=value, dtype=dt, shape=shape, **attrs)
    return fresh(ctx.graph, node, kind)


# --- matmul ---------------------------------------------------------------------------


def matmul(ctx: Context, a: Var, b: Var, batched: bool = False) -> Var:
    """a @ b. batched: a and b are 2-D or 3-D (np_linalg.batched_matmul's operands, a
    batch of one broadcast), the node a 3-D product."""
    if (
        not (isinstance(a, ArrayVar) and isinstance(b, ArrayVar))
        or a.is_scalar
        or b.is_scalar
        or a.ndim == 0
        or b.ndim == 0
    ):
        graph_break(
            "matmul of scalars (NumPy raises ValueError) or of Python data is not supported"
        )
    if (a.ndim > 2 or b.ndim > 2) and not batched:
        # np_linalg.matmul sends N-D operands to batched_matmul before they reach here.
        raise InternalError(f"np_ops.matmul of {a.ndim}-D @ {b.ndim}-D operands")
    k_a = a.shape[-1]
    k_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if k_a != k_b:
        graph_break(
            f"matmul: core dimensions {a.shape} @ {b.shape} mismatch (NumPy raises ValueError)"
        )
    ex_a = np.ones((1,) * a.ndim, a.dtype)
    ex_b = np.ones((1,) * b.ndim, b.dtype)
    dtype, kind = result_of(ask(np.matmul, ex_a, ex_b))
    loop = ufunc_loop(np.matmul, [a, b])
    g = ctx.graph
    if dtype == "bool":
        # NumPy's bool matmul is OR of ANDs: the int64 product (counts, >= 0) is nonzero
        # exactly there; dx::matmul has no bool GEMM.
        ia, ib = (astype(ctx, x, np.int64, True) for x in (a, b))
        return ufunc(ctx, np.not_equal, [matmul(ctx, ia, ib, batched), PyVar(0)])
    # The IR's matmul is always 2-D @ 2-D; 1-D operands are NumPy's promoted rows/columns.
    va = g.cast(a.value, loop[0])
    vb = g.cast(b.value, loop[1])
    if a.ndim == 1:
        va = g.node("reshape", (va,), va.dtype, (1, k_a), shape=(1, k_a))
    if b.ndim == 1:
        vb = g.node("reshape", (vb,), vb.dtype, (k_b, 1), shape=(k_b, 1))
    n, m = va.shape[-2], vb.shape[-1]
    if va.ndim == 3 or vb.ndim == 3:
        nb = max(x.shape[0] if x.ndim == 3 else 1 for x in (va, vb))
        return fresh(g, g.node("matmul", (va, vb), dtype, (nb, n, m)), kind)
    out = g.node("matmul", (va, vb), dtype, (n, m))
    final = tuple(([n] if a.ndim == 2 else []) + ([m] if b.ndim == 2 else []))
    if final != (n, m):
        out = g.node("reshape", (out,), dtype, final, shape=final)
    return fresh(g, out, kind)


def positive(ctx: Context, x: Var) -> Var:
    if isinstance(x, PyVar):
        return fold(operator.pos, x.value)
    result_of(ask(np.positive, example(x)))  # NumPy refuses +bool
    return copy(ctx, x, x.kind)
