"""np.concatenate, np.stack, np.hstack, np.vstack, np.column_stack, np.append, np.roll
and np.pad: a new array whose parts are stored into it as slices (np_views.setitem on
np.empty), so each part is computed straight into its place and fuses with what made it.

Note [joins as stores into a new array]
NumPy builds these by copying each input into a slice of a fresh array; so does this
module, with the same nodes a user's `y = np.empty(...); y[:k] = a; y[k:] = b` becomes:
a `full` (empty: never filled, Note [np.empty is not filled]) and one `setitem` per part.
Every extent along the joined axis must be known while capturing (the slices are
static); shapes and errors come from NumPy itself, asked on zero-byte stand-ins
(infer.stand_in), so a call NumPy refuses is a graph break and raises NumPy's own error
when it runs as Python. np.roll(x, k, axis) is two such parts: x's last k elements
first, then the rest; with axis=None it rolls the flattened array and reshapes back."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import np_ops, np_views
from .arrays import ArrayVar
from .builder import Context
from .errors import graph_break
from .infer import ask, stand_in
from .np_args import REQUIRED, bind, const_arg
from .variables import ListVar, TupleVar, Var


def _arrays(seq: Var, what: str) -> list[ArrayVar]:
    if not isinstance(seq, (TupleVar, ListVar)):
        graph_break(f"{what} takes a sequence of arrays; a {seq.describe()} is not supported "
                    "by dynexpr")
    items = list(seq.items)
    for v in items:
        if not isinstance(v, ArrayVar):
            graph_break(f"{what} of a {v.describe()} is not supported by dynexpr (convert it "
                        "with np.asarray first)")
    if not items:
        graph_break(f"{what} needs at least one array to join (NumPy raises ValueError)")
    return items


def _static(ctx: Context, parts: list[ArrayVar], what: str) -> None:
    for p in parts:
        ctx.session.check_static(p.shape, what)


def _dtype(parts: list[ArrayVar], dtype: Any) -> str:
    """The joined array's dtype: NumPy's promotion of the parts, or `dtype` with
    same_kind casting checked as np.concatenate does."""
    samples = [np.ones((1,), p.dtype) for p in parts]
    return ask(np.concatenate, samples, dtype=dtype).dtype.name


def concatenate_parts(ctx: Context, parts: list[ArrayVar], axis: Any, dtype: Any,
                      what: str) -> ArrayVar:
    """The arrays `parts` joined along `axis` (None: flattened first), as stores into
    one new array (Note [joins as stores into a new array])."""
    if axis is None:
        parts = [np_views.reshape(ctx, p, -1) for p in parts]
        axis = 0
    _static(ctx, parts, what)
    shape = tuple(ask(np.concatenate, [stand_in(p.shape) for p in parts], axis=axis).shape)
    out_dtype = _dtype(parts, dtype)
    ax = axis % len(shape)
    out = np_ops.full(ctx, shape, 0, out_dtype, empty=True)
    lead = (slice(None),) * ax
    start = 0
    for p in parts:
        extent = p.shape[ax]
        if extent:
            np_views.setitem(ctx, out, lead + (slice(start, start + extent),), p)
        start += extent
    return out


def concatenate(tx, args: list, kwargs: dict) -> Var:
    d = bind("np.concatenate", args, kwargs, (("arrays", REQUIRED), ("axis", 0), ("out", None),
                                              ("dtype", None), ("casting", "same_kind")))
    parts = _arrays(d["arrays"], "np.concatenate")
    return concatenate_parts(tx.ctx, parts, const_arg(d, "axis"), const_arg(d, "dtype"),
                             "np.concatenate")


def stack(tx, args: list, kwargs: dict) -> Var:
    d = bind("np.stack", args, kwargs, (("arrays", REQUIRED), ("axis", 0), ("out", None),
                                        ("dtype", None), ("casting", "same_kind")))
    parts = _arrays(d["arrays"], "np.stack")
    axis = const_arg(d, "axis")
    _static(tx.ctx, parts, "np.stack")
    ask(np.stack, [stand_in(p.shape) for p in parts], axis=axis)  # NumPy's shape checks
    parts = [np_views.expand_dims(tx.ctx, p, axis) for p in parts]
    return concatenate_parts(tx.ctx, parts, axis, const_arg(d, "dtype"), "np.stack")


def _at_least(ctx: Context, p: ArrayVar, ndim: int) -> ArrayVar:
    """np.atleast_1d / np.atleast_2d of one array: 0-d -> (1,) or (1, 1); 1-d (n,) ->
    (1, n) for two dims."""
    if p.ndim >= ndim:
        return p
    shape = (1,) * (ndim - p.ndim) + tuple(p.shape)
    return np_views.reshape(ctx, p, shape)


def hstack(tx, args: list, kwargs: dict) -> Var:
    d = bind("np.hstack", args, kwargs, (("tup", REQUIRED), ("dtype", None),
                                         ("casting", "same_kind")))
    parts = [_at_least(tx.ctx, p, 1) for p in _arrays(d["tup"], "np.hstack")]
    axis = 0 if parts[0].ndim == 1 else 1  # as NumPy: 1-d arrays join end to end
    return concatenate_parts(tx.ctx, parts, axis, const_arg(d, "dtype"), "np.hstack")


def vstack(tx, args: list, kwargs: dict) -> Var:
    d = bind("np.vstack", args, kwargs, (("tup", REQUIRED), ("dtype", None),
                                         ("casting", "same_kind")))
    parts = [_at_least(tx.ctx, p, 2) for p in _arrays(d["tup"], "np.vstack")]
    return concatenate_parts(tx.ctx, parts, 0, const_arg(d, "dtype"), "np.vstack")


def column_stack(tx, args: list, kwargs: dict) -> Var:
    d = bind("np.column_stack", args, kwargs, (("tup", REQUIRED),))
    parts = []
    for p in _arrays(d["tup"], "np.column_stack"):
        if p.ndim < 2:  # 1-d arrays become columns; 0-d ones a 1x1 array, as NumPy
            p = np_views.reshape(tx.ctx, p, (-1, 1) if p.ndim == 1 else (1, 1))
        parts.append(p)
    return concatenate_parts(tx.ctx, parts, 1, None, "np.column_stack")


def append(tx, args: list, kwargs: dict) -> Var:
    d = bind("np.append", args, kwargs, (("arr", REQUIRED), ("values", REQUIRED), ("axis", None)))
    parts = _arrays(TupleVar([d["arr"], d["values"]]), "np.append")
    return concatenate_parts(tx.ctx, parts, const_arg(d, "axis"), None, "np.append")


def roll(tx, args: list, kwargs: dict) -> Var:
    d = bind("np.roll", args, kwargs, (("a", REQUIRED), ("shift", REQUIRED), ("axis", None)))
    x, shift, axis = d["a"], const_arg(d, "shift"), const_arg(d, "axis")
    if not isinstance(x, ArrayVar):
        graph_break(f"np.roll of a {x.describe()} is not supported by dynexpr (convert it with "
                    "np.asarray first)")
    ctx = tx.ctx
    ctx.session.check_static(x.shape, "np.roll")
    ask(np.roll, stand_in(x.shape), shift, axis)  # NumPy's own checks of shift and axis
    if axis is None:
        flat = np_views.reshape(ctx, x, -1)
        total = sum(int(s) for s, _ in np.broadcast(shift, 0))  # each part truncated, as NumPy
        return np_views.reshape(ctx, _roll_axes(ctx, flat, {0: total}), x.shape)
    shifts: dict[int, int] = {}
    for s, a in np.broadcast(shift, axis):  # NumPy's pairing: repeated axes add up
        a = int(a) % x.ndim
        shifts[a] = shifts.get(a, 0) + int(s)
    return _roll_axes(ctx, x, shifts)


def _roll_axes(ctx: Context, x: ArrayVar, shifts: dict[int, int]) -> ArrayVar:
    out = x
    moved = False
    for ax, s in sorted(shifts.items()):
        n = x.shape[ax]
        k = s % n if n else 0
        if k == 0:
            continue
        lead = (slice(None),) * ax
        tail = np_views.getitem(ctx, out, lead + (slice(n - k, None),))
        head = np_views.getitem(ctx, out, lead + (slice(None, n - k),))
        out = concatenate_parts(ctx, [tail, head], ax, None, "np.roll")
        moved = True
    return out if moved else np_ops.copy(ctx, x)  # np.roll always returns a new array


_PAD_MODES = ("constant", "edge", "wrap", "reflect", "symmetric")


def _pad_pairs(pad_width: Any, ndim: int) -> list[tuple[int, int]]:
    """(before, after) per axis, as np.pad reads pad_width (an int, a pair, or one pair
    per axis); NumPy's errors for a bad one."""
    x = np.asarray(pad_width)
    if x.dtype.kind not in "iu":
        raise TypeError("`pad_width` must be of integral type.")
    x = x.astype(np.intp)
    if (x < 0).any():
        raise ValueError("index can't contain negative values")
    if x.ndim < 3 and x.size == 1:
        return [(int(x.ravel()[0]),) * 2] * ndim
    if x.ndim < 3 and x.size == 2 and x.shape != (2, 1):
        return [(int(x.ravel()[0]), int(x.ravel()[1]))] * ndim
    return [(int(b), int(e)) for b, e in np.broadcast_to(x, (ndim, 2))]


def pad(tx, args: list, kwargs: dict) -> Var:
    """np.pad(x, pad_width, mode) for the modes that copy (Note [joins as stores into a new
    array]): x stored into the middle of a new array, then each axis's borders, in axis
    order as NumPy fills them, each from a slice of the array being built (an edge, the
    far end of the period, the mirror image), over the rows already padded on earlier
    axes and the original extent of later ones, so corners come out as NumPy's."""
    d = bind("np.pad", args, kwargs, (("array", REQUIRED), ("pad_width", REQUIRED),
                                      ("mode", "constant"), ("constant_values", 0),
                                      ("reflect_type", "even")))
    x, mode = d["array"], const_arg(d, "mode")
    if not isinstance(x, ArrayVar) or x.is_scalar:
        graph_break(f"np.pad of a {x.describe()} is not supported by dynexpr (convert it with "
                    "np.asarray first)")
    if not isinstance(mode, str) or mode not in _PAD_MODES:
        graph_break(f"np.pad(mode={mode!r}) is not supported by dynexpr (it has "
                    f"{', '.join(_PAD_MODES)})")
    if const_arg(d, "reflect_type") != "even":
        graph_break("np.pad(reflect_type='odd') is not supported by dynexpr")
    fill = const_arg(d, "constant_values")
    if mode == "constant" and np.ndim(fill) != 0:
        graph_break("np.pad with a constant per axis or side is not supported by dynexpr")
    ctx = tx.ctx
    ctx.session.check_static(x.shape, "np.pad")
    pairs = ask(_pad_pairs, const_arg(d, "pad_width"), x.ndim)
    shape = tuple(n + b + e for n, (b, e) in zip(x.shape, pairs))
    for n, (b, e) in zip(x.shape, pairs):
        if mode != "constant" and n == 0 and (b or e):
            graph_break(f"np.pad(mode={mode!r}) of an empty axis: NumPy raises ValueError")
        limit = {"wrap": n, "symmetric": n, "reflect": max(n - 1, 0)}.get(mode)
        if limit is not None and max(b, e) > limit and not (mode == "reflect" and n == 1):
            graph_break(f"np.pad(mode={mode!r}) wider than the axis it repeats is not "
                        "supported by dynexpr")
    if mode == "constant":
        out = np_ops.full(ctx, shape, fill, x.dtype)
    else:
        out = np_ops.full(ctx, shape, 0, x.dtype, empty=True)
    middle = tuple(slice(b, b + n) for n, (b, _) in zip(x.shape, pairs))
    np_views.setitem(ctx, out, middle, x)
    if mode == "constant":
        return out
    for ax, (n, (b, e)) in enumerate(zip(x.shape, pairs)):
        def at(s: slice) -> tuple:  # the axis's slab: earlier axes whole, later ones original
            return (slice(None),) * ax + (s,) + middle[ax + 1:]

        if mode == "edge" or (mode == "reflect" and n == 1):  # NumPy: a singleton is an edge
            before, after = slice(b, b + 1), slice(b + n - 1, b + n)
        elif mode == "wrap":
            before, after = slice(n, n + b), slice(b, b + e)
        elif mode == "reflect":
            before = slice(2 * b, b, -1)
            after = slice(b + n - 2, b + n - 2 - e if b + n - 2 - e >= 0 else None, -1)
        else:  # symmetric
            before = slice(2 * b - 1, b - 1 if b >= 1 else None, -1)
            after = slice(b + n - 1, b + n - 1 - e if b + n - 1 - e >= 0 else None, -1)
        if b:
            np_views.setitem(ctx, out, at(slice(0, b)), np_views.getitem(ctx, out, at(before)))
        if e:
            np_views.setitem(ctx, out, at(slice(b + n, b + n + e)),
                             np_views.getitem(ctx, out, at(after)))
    return out


def handlers() -> dict:
    """NumPy function -> handler(tx, args, kwargs), for np_table's FUNCTIONS."""
    return {
        np.concatenate: concatenate,
        np.stack: stack,
        np.hstack: hstack,
        np.vstack: vstack,
        np.column_stack: column_stack,
        np.append: append,
        np.roll: roll,
        np.pad: pad,
    }
