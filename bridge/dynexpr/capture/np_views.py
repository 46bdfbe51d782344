"""NumPy views, basic indexing and writes on fake arrays (Note [arrays as storages and
view paths] in arrays.py): what is a view is a view path; writes go through
ArrayVar.write with NumPy's casting and broadcasting already applied."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from .arrays import ArrayVar, apply_step, fresh
from .builder import Context
from .errors import graph_break
from .infer import (
    ask,
    broadcast,
    example,
    index_result,
    normalize_axes,
    index_to_python,
    normalize_index,
    shape_of,
    stand_in,
    ufunc_loop,
)
from .np_ops import UFUNC_OPS, full, is_numeric_const, operand
from .variables import PyVar, Var


def make_view(ctx: Context, x: ArrayVar, op: str, out_shape: tuple, **attrs: Any) -> ArrayVar:
    if x.is_scalar:  # a view of a NumPy scalar is a new array: the scalar stays immutable
        view = x.view(op, out_shape, **attrs)
        return fresh(ctx.graph, apply_step(ctx.graph, view.path[-1], x.value))
    return x.view(op, out_shape, **attrs)


def _need_array(x: Var, what: str) -> ArrayVar:
    if not isinstance(x, ArrayVar):
        graph_break(f"{what} of a {x.describe()} is not supported")
    return x


def reshape(ctx: Context, x: Var, newshape: Any) -> Var:
    x = _need_array(x, "reshape")
    ctx.session.check_static(x.shape, "reshape")
    shape = tuple(ask(lambda: stand_in(x.shape).reshape(newshape)).shape)
    if shape == x.shape:
        return make_view(ctx, x, "reshape", shape, shape=shape)
    squeezed = [d for d in x.shape if d != 1] == [d for d in shape if d != 1]
    if squeezed or x.is_scalar or c_contiguous(x):
        return make_view(ctx, x, "reshape", shape, shape=shape)
    # Note [arrays as storages and view paths]: NumPy copies or not by layout here.
    reason = (
        "an array reshaped from a non-contiguous one is written to; NumPy makes a copy "
        "or a view depending on memory layout, which dynexpr does not track"
    )
    x.storage.freeze(reason)
    out = fresh(ctx.graph, ctx.graph.node("reshape", (x.value,), x.dtype, shape, shape=shape))
    out.storage.freeze(reason)
    return out


def ravel(ctx: Context, x: Var) -> Var:
    """x.ravel() / np.ravel(x) (order 'C'): unlike reshape(-1), which views whatever
    strides allow, NumPy's ravel views only a C-contiguous array and copies any other
    (x[::2].ravel() and x.T[0].ravel() are copies)."""
    x = _need_array(x, "ravel")
    contiguous = c_contiguous(x)
    if contiguous or x.is_scalar:
        return reshape(ctx, x, -1)
    ctx.session.check_static(x.shape, "ravel")
    shape = (int(np.prod(x.shape)),)
    out = fresh(ctx.graph, ctx.graph.node("reshape", (x.value,), x.dtype, shape, shape=shape))
    if contiguous is None:  # layout unknown: a view or a copy, as in reshape above
        reason = ("an array raveled from one whose layout dynexpr does not track is written "
                  "to; NumPy makes a copy or a view depending on memory layout")
        x.storage.freeze(reason)
        out.storage.freeze(reason)
    return out


def c_contiguous(x: ArrayVar) -> bool | None:
    """Whether NumPy's array for x is C-contiguous (None: not known). A view path over a
    C-contiguous storage (x[1:], x.T[0]) is answered by NumPy's own flags on a stand-in
    with the storage's strides that owns no memory (no step here reads or copies data)."""
    if x.c_contig is not None or not x.path or x.storage.c_contig is not True:
        return x.c_contig
    shape = x.path[0].in_shape
    if any(isinstance(d, str) for d in shape):
        return None
    strides = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) * 8 for i in range(len(shape)))
    a = np.lib.stride_tricks.as_strided(np.zeros(1), shape, strides, writeable=False)
    try:
        for step in x.path:
            attrs = dict(step.attrs)
            if step.op == "getitem":
                a = a[index_to_python(attrs["index"])]
            elif step.op == "transpose":
                a = a.transpose(attrs["axes"])
            elif step.op in ("reshape", "expand_dims", "squeeze") and a.flags.c_contiguous:
                a = a.reshape(step.out_shape)  # a view of a contiguous array: no copy
            else:
                return None
    except (TypeError, ValueError, IndexError):  # e.g. a dynamic extent in the path
        return None
    return bool(a.flags.c_contiguous)


def transpose(ctx: Context, x: Var, axes: Any = None) -> Var:
    x = _need_array(x, "transpose")
    r = ask(np.transpose, stand_in(x.shape), axes)
    perm = (
        tuple(range(x.ndim))[::-1]
        if axes is None
        else tuple(int(a) % x.ndim for a in (axes if isinstance(axes, (tuple, list)) else [axes]))
    )
    return make_view(ctx, x, "transpose", tuple(r.shape), axes=perm)


def swapaxes(ctx: Context, x: Var, a: int, b: int) -> Var:
    x = _need_array(x, "swapaxes")
    ask(np.swapaxes, stand_in(x.shape), a, b)
    perm = list(range(x.ndim))
    a, b = a % x.ndim, b % x.ndim
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(ctx, x, tuple(perm))


def expand_dims(ctx: Context, x: Var, axis: Any) -> Var:
    x = _need_array(x, "expand_dims")
    r = ask(np.expand_dims, stand_in(x.shape), axis)
    axes = normalize_axes(axis, r.ndim)
    return make_view(ctx, x, "expand_dims", tuple(r.shape), axis=tuple(sorted(axes)))


def squeeze(ctx: Context, x: Var, axis: Any = None) -> Var:
    x = _need_array(x, "squeeze")
    r = ask(np.squeeze, stand_in(x.shape), axis)
    axes = (
        tuple(i for i, d in enumerate(x.shape) if d == 1)
        if axis is None
        else tuple(sorted(normalize_axes(axis, x.ndim)))
    )
    return make_view(ctx, x, "squeeze", tuple(r.shape), axis=axes)


def broadcast_to(ctx: Context, x: Var, shape: Any) -> Var:
    if isinstance(x, PyVar):  # a read-only array of one value: a splat, never written
        out = full(ctx, tuple(ask(np.broadcast_to, x.value, shape).shape), x.value, None)
        out.storage.writeable = False
        return out
    x = _need_array(x, "broadcast_to")
    ctx.session.check_static(x.shape, "broadcast_to a given shape")
    r = ask(np.broadcast_to, stand_in(x.shape), shape)
    return make_view(ctx, x, "broadcast_to", tuple(r.shape), shape=tuple(r.shape))


def _dynamic_index(ctx: Context, shape: tuple, index: tuple) -> tuple:
    """index with full slices of dynamic extents written ("slice", 0, None, 1); any
    other item on a dynamic extent needs its value (Note [dynamic dimensions by
    sentinels])."""
    out, axis = [], 0
    for item in index:
        if item[0] == "newaxis":
            out.append(item)
            continue
        d = shape[axis]
        axis += 1
        if item[0] == "slice" and item[1] == 0 and item[3] == 1 and item[2] in (d, None):
            out.append(("slice", 0, None, 1) if item[2] is not None else item)
            continue
        ctx.session.check_static(d, "indexing along it")
        out.append(item)
    return tuple(out)


def getitem(ctx: Context, x: ArrayVar, key: Any) -> Var:
    if x.is_scalar:
        graph_break("indexing a NumPy scalar is not supported")
    shape, kind = index_result(x.shape, key)
    index = _dynamic_index(ctx, x.shape, normalize_index(x.shape, key))
    if kind == "scalar":  # x[i, j] on all dims: NumPy returns a copy, a scalar
        node = ctx.graph.node("getitem", (x.value,), x.dtype, shape, index=index)
        return fresh(ctx.graph, node, "scalar")
    return x.view("getitem", shape, index=index)


def setitem(ctx: Context, x: ArrayVar, key: Any, value: Var) -> None:
    """x[key] = value, with NumPy's casting (unsafe for arrays, checked for Python
    scalars) and broadcasting of value into the region."""
    if x.is_scalar:
        graph_break("NumPy scalars do not support item assignment (TypeError)")
    region, _ = index_result(x.shape, key)
    index = _dynamic_index(ctx, x.shape, normalize_index(x.shape, key))
    if isinstance(value, ArrayVar):
        if _is_region_itself(x, index, value):
            return  # `x[i] += y` stores the view back into itself: nothing to do
        vshape = value.shape
        while len(vshape) > len(region) and vshape[0] == 1:  # NumPy drops leading 1s
            vshape = vshape[1:]
        if broadcast(vshape, region) != region:
            graph_break(
                f"could not broadcast input array from shape {value.shape} into shape "
                f"{region} (NumPy raises ValueError)"
            )
        v = ctx.graph.cast(value.value, x.dtype)
        if vshape != value.shape:
            v = ctx.graph.node("reshape", (v,), v.dtype, vshape, shape=vshape)
        if vshape != region:
            v = ctx.graph.node("broadcast_to", (v,), v.dtype, region, shape=region)
    elif is_numeric_const(value):
        sample = np.empty((), x.dtype)
        ask(operator.setitem, sample, (), value.value)  # NumPy's checks (NaN to int, overflow)
        value = sample.item()
        v = (
            ctx.graph.const(value, x.dtype)
            if region == ()
            else ctx.graph.node(
                "full", (), x.dtype, region, value=value, dtype=x.dtype, shape=region
            )
        )
    else:
        graph_break(f"assigning a {value.describe()} into an array is not supported")
    x.write(index if index else None, v)


def eye(ctx: Context, n: Any, m: Any, k: Any, dtype: Any, order: Any) -> Var:
    """np.eye(n, m, k, dtype) and np.identity: zeros whose k-th diagonal is written with
    ones, as one strided store through the array's flat view (in a C-ordered n x m array
    the diagonal is every (m+1)-th element from k, or from -k*m below the main one)."""
    if order not in ("C", None):
        graph_break(f"np.eye(order={order!r}) is not supported: dynexpr makes C-ordered arrays")
    dtype = float if dtype is None else dtype  # np.eye(dtype=None) and np.identity(n): float64
    ask(np.eye, 0, 0, 0, dtype)  # NumPy's own refusal of the dtype
    n, k = ask(operator.index, n), ask(operator.index, k)
    m = n if m is None else ask(operator.index, m)
    ctx.session.check_static((n, m, k), "np.eye")
    out = full(ctx, (n, m), 0, dtype)  # NumPy's error for a negative n or m
    out.storage.c_contig = True  # its flat view is the same memory, as in NumPy
    diag = diagonal_slice(n, m, k)
    if diag is not None:
        setitem(ctx, reshape(ctx, out, -1), diag, PyVar(1))
    return out


def diagonal_slice(n: int, m: int, k: int) -> slice | None:
    """The k-th diagonal of a C-ordered n x m array as a slice of its flat array (every
    (m+1)-th element from k, or from -k*m below the main one); None when it is empty."""
    count = max(0, min(n, m - k)) if k >= 0 else max(0, min(n + k, m))
    if count == 0:
        return None
    start = k if k >= 0 else -k * m
    return slice(start, start + (count - 1) * (m + 1) + 1, m + 1)


def _is_region_itself(x: ArrayVar, index: tuple, value: ArrayVar) -> bool:
    if value.storage is not x.storage or len(value.path) != len(x.path) + 1:
        return False
    if value.path[:-1] != x.path:
        return False
    last = value.path[-1]
    return last.op == "getitem" and dict(last.attrs)["index"] == index


def ufunc_into(ctx: Context, uf: np.ufunc, operands: list[Var], out: ArrayVar) -> ArrayVar:
    """np.<uf>(*operands, out=out), also `x op= y`: NumPy's loop for out's dtype, the
    result cast with same_kind casting, operands broadcast to out's shape (out itself
    never broadcasts). Returns out, which now holds the result."""
    name = UFUNC_OPS.get(uf)
    if name is None:
        graph_break(f"np.{uf.__name__} is not in dynexpr's op table")
    if out.is_scalar:
        graph_break("out= must be an array; a NumPy scalar cannot be written (TypeError)")
    for v in operands:
        if not isinstance(v, ArrayVar) and not is_numeric_const(v):
            operand(ctx, v, out.dtype)  # breaks, naming what the operand is
    loop = ufunc_loop(uf, operands, out_dtype=out.dtype)
    ask(uf, *[example(v) for v in operands], out=example(out))  # NumPy's casting checks
    shape = broadcast(*[shape_of(v) for v in operands])
    if broadcast(shape, out.shape) != out.shape:
        graph_break(
            f"non-broadcastable output operand with shape {out.shape} doesn't match "
            f"the broadcast shape {broadcast(shape, out.shape)} (NumPy raises ValueError)"
        )
    g = ctx.graph
    args = tuple(operand(ctx, v, loop[i]) for i, v in enumerate(operands))
    value = g.cast(g.node(name, args, loop[uf.nin], shape), out.dtype)
    if shape != out.shape:
        value = g.node("broadcast_to", (value,), out.dtype, out.shape, shape=out.shape)
    out.write(None, value)
    return out
