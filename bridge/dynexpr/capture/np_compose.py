"""NumPy functions that NumPy itself computes from ops the graph already has: each is
written here with the same ops in the same order, so the result has NumPy's dtype and,
op for op, NumPy's values (within the op table's bounds for the transcendental ones).

Note [functions as NumPy composes them]
Each entry follows NumPy's own definition, not a shortcut to the same math:
  np.sinc         y = pi * where(x == 0, 1e-20, x); sin(y) / y      (numpy/lib)
  np.radians,     x * (pi / 180), x * (180 / pi): the constant rounded to x's float
  np.degrees        type, one multiply, as npymath's npy_deg2rad / npy_rad2deg
  np.round(x, d)  x * 10**d, rint, / 10**d (d < 0: / then *), in x's dtype
                  (PyArray_Round); integers with d >= 0 are a copy
  np.nansum/prod  NaNs replaced by 0 / 1 (float inputs only), then sum / prod
  np.ptp          max - min, in the input's dtype (integers wrap as NumPy's do)
  np.average      weights=None only: mean
  np.fmax, fmin   the non-NaN operand where one is NaN, else maximum / minimum
  np.heaviside    0 below zero, 1 above, x2 at zero, NaN stays NaN
  np.fabs         absolute, of the operand cast to NumPy's float loop
  np.nan_to_num   NaN and +-inf replaced (floats); other dtypes copied
  np.flip, fliplr, flipud  views with reversed slices, as NumPy's
  np.trace, np.diag (2-D)  the k-th diagonal as a strided slice of the flat array
  np.diag (1-D)   zeros with v stored on the k-th diagonal (np.eye's way)
  np.meshgrid     reshaped inputs broadcast to the grid, copied (copy=True)
  np.tile, np.repeat  a broadcast of a reshaped input, reshaped to the result
Where NumPy would warn, so does the graph (the same ops overflow alike); no function here
computes a value NumPy does not, so none raises a floating-point warning NumPy would not
(np.logaddexp and np.isclose would: their branches overflow where NumPy's do not look).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import np_ops, np_views
from .arrays import ArrayVar
from .builder import Context
from .errors import graph_break
from .infer import ask, example, normalize_axes, result_of, stand_in
from .np_args import NOVALUE, REQUIRED, bind, const_arg
from .variables import ListVar, PyVar, TupleVar, Var


def _array(x: Var, what: str) -> ArrayVar:
    if not isinstance(x, ArrayVar):
        graph_break(f"{what} of a {x.describe()} is not supported by dynexpr (convert it "
                    "with np.asarray first)")
    return x


def _dtype_of(fn: Any, *vs: Var, **kw: Any) -> str:
    """NumPy's result dtype for fn on stand-ins of vs (and its refusal as a break)."""
    return result_of(ask(fn, *[example(v) for v in vs], **kw))[0]


def _uf(ctx: Context, uf: np.ufunc, *vs: Var) -> Var:
    return np_ops.ufunc(ctx, uf, list(vs))


# --- elementwise --------------------------------------------------------------------------


def _scale_by(constant: float, name: str):
    def handler(tx, args, kwargs):
        d = bind(f"np.{name}", args, kwargs, (("x", REQUIRED), ("out", None)))
        x = d["x"]
        if isinstance(x, PyVar):
            return np_ops.fold(getattr(np, name), x.value)
        x = _array(x, f"np.{name}")
        dt = _dtype_of(getattr(np, name), x)
        if x.dtype != dt:  # integers and bools: NumPy's float64 loop
            x = np_ops.astype(tx.ctx, x, dt)
        return _uf(tx.ctx, np.multiply, x, PyVar(float(np.dtype(dt).type(constant))))

    return handler


def _sinc(tx, args, kwargs):
    d = bind("np.sinc", args, kwargs, (("x", REQUIRED),))
    x = _array(d["x"], "np.sinc")
    ctx = tx.ctx
    y = _uf(ctx, np.multiply, PyVar(math.pi),
            np_ops.where(ctx, _uf(ctx, np.equal, x, PyVar(0)), PyVar(1.0e-20), x))
    return _uf(ctx, np.true_divide, _uf(ctx, np.sin, y), y)


def _fabs(tx, args, kwargs):
    d = bind("np.fabs", args, kwargs, (("x", REQUIRED), ("out", None)))
    x = _array(d["x"], "np.fabs")
    dt = _dtype_of(np.fabs, x)
    return _uf(tx.ctx, np.absolute, np_ops.astype(tx.ctx, x, dt, copy_=False))


def _heaviside(tx, args, kwargs):
    d = bind("np.heaviside", args, kwargs, (("x1", REQUIRED), ("x2", REQUIRED), ("out", None)))
    x, h = d["x1"], d["x2"]
    ctx = tx.ctx
    dt = _dtype_of(np.heaviside, x, h)
    x = np_ops.astype(ctx, _array(x, "np.heaviside"), dt, copy_=False)
    if isinstance(h, ArrayVar):
        h = np_ops.astype(ctx, h, dt, copy_=False)
    at_zero = np_ops.where(ctx, _uf(ctx, np.equal, x, PyVar(0)), h, x)  # NaN stays NaN
    above = np_ops.where(ctx, _uf(ctx, np.greater, x, PyVar(0)), PyVar(1), at_zero)
    out = np_ops.where(ctx, _uf(ctx, np.less, x, PyVar(0)), PyVar(0), above)
    return np_ops.astype(ctx, out, dt, copy_=False)


def _nan_choice(uf: np.ufunc, name: str):
    def handler(tx, args, kwargs):
        d = bind(f"np.{name}", args, kwargs, (("x1", REQUIRED), ("x2", REQUIRED), ("out", None)))
        a, b = d["x1"], d["x2"]
        ctx = tx.ctx
        dt = _dtype_of(getattr(np, name), a, b)
        base = _uf(ctx, uf, a, b)
        if np.dtype(dt).kind != "f":
            return base
        a = np_ops.astype(ctx, a, dt, copy_=False) if isinstance(a, ArrayVar) else a
        b = np_ops.astype(ctx, b, dt, copy_=False) if isinstance(b, ArrayVar) else b
        if isinstance(b, ArrayVar):
            base = np_ops.where(ctx, _uf(ctx, np.isnan, b), a, base)
        if isinstance(a, ArrayVar):
            base = np_ops.where(ctx, _uf(ctx, np.isnan, a), b, base)
        return np_ops.astype(ctx, base, dt, copy_=False)

    return handler


def _nan_to_num(tx, args, kwargs):
    d = bind("np.nan_to_num", args, kwargs, (("x", REQUIRED), ("copy", True), ("nan", 0.0),
                                             ("posinf", None), ("neginf", None)))
    x = _array(d["x"], "np.nan_to_num")
    if const_arg(d, "copy") is not True:
        graph_break("np.nan_to_num(copy=False) (in place) is not supported by dynexpr")
    ctx = tx.ctx
    if np.dtype(x.dtype).kind != "f":
        return np_ops.copy(ctx, x)
    info = np.finfo(x.dtype)
    nan, posinf, neginf = (const_arg(d, k) for k in ("nan", "posinf", "neginf"))
    fills = [ask(lambda v: float(np.asarray(v).astype(x.dtype)), v)
             for v in (nan, info.max if posinf is None else posinf,
                       info.min if neginf is None else neginf)]
    out = np_ops.where(ctx, _uf(ctx, np.isnan, x), PyVar(fills[0]), x)
    out = np_ops.where(ctx, _uf(ctx, np.equal, x, PyVar(math.inf)), PyVar(fills[1]), out)
    out = np_ops.where(ctx, _uf(ctx, np.equal, x, PyVar(-math.inf)), PyVar(fills[2]), out)
    return np_ops.astype(ctx, out, x.dtype, copy_=False)


def round_decimals(ctx: Context, x: ArrayVar, decimals: int) -> Var:
    """np.round(x, decimals) for decimals != 0, as PyArray_Round computes it."""
    kind = np.dtype(x.dtype).kind
    if kind in "iub":
        if decimals >= 0:
            return np_ops.copy(ctx, x, x.kind)
        graph_break("np.round of integers with decimals < 0 is not supported by dynexpr")
    f = PyVar(_power_of_ten(abs(decimals)))
    first, then = (np.multiply, np.true_divide) if decimals >= 0 else (np.true_divide,
                                                                       np.multiply)
    y = _uf(ctx, np.rint, _uf(ctx, first, x, f))
    return _uf(ctx, then, y, f)


def _power_of_ten(n: int) -> float:
    """10**n as NumPy's power_of_ten builds it (exact to 1e22, then repeated * 10)."""
    if n < 9:
        return float(10 ** n)
    r = 1e9
    for _ in range(n - 9):
        r *= 10.0
    return r


# --- reductions ---------------------------------------------------------------------------


def _nan_reduction(name: str, fill: float):
    spec = (("a", REQUIRED), ("axis", None), ("dtype", None), ("out", None),
            ("keepdims", False), ("initial", NOVALUE), ("where", True))

    def handler(tx, args, kwargs):
        d = bind(f"np.nan{name}", args, kwargs, spec)
        x = _array(d["a"], f"np.nan{name}")
        ctx = tx.ctx
        if np.dtype(x.dtype).kind == "f":  # NumPy replaces NaNs of inexact arrays only
            x = np_ops.where(ctx, _uf(ctx, np.isnan, x), PyVar(fill), x)
            x = np_ops.astype(ctx, x, d["a"].dtype, copy_=False)
        return np_ops.reduce(ctx, name, x, axis=const_arg(d, "axis"),
                             keepdims=bool(const_arg(d, "keepdims")), dtype=const_arg(d, "dtype"))

    return handler


def _ptp(tx, args, kwargs):
    d = bind("np.ptp", args, kwargs, (("a", REQUIRED), ("axis", None), ("out", None),
                                      ("keepdims", False)))
    x = _array(d["a"], "np.ptp")
    ctx = tx.ctx
    axis, keep = const_arg(d, "axis"), bool(const_arg(d, "keepdims"))
    hi = np_ops.reduce(ctx, "max", x, axis=axis, keepdims=keep)
    lo = np_ops.reduce(ctx, "min", x, axis=axis, keepdims=keep)
    return _uf(ctx, np.subtract, hi, lo)


def _average(tx, args, kwargs):
    d = bind("np.average", args, kwargs, (("a", REQUIRED), ("axis", None), ("weights", None),
                                          ("returned", False), ("keepdims", NOVALUE)))
    if not (isinstance(d["weights"], PyVar) and d["weights"].value is None):
        graph_break("np.average with weights= is not supported by dynexpr (write "
                    "(a * w).sum(axis) / w.sum(axis))")
    if const_arg(d, "returned"):
        graph_break("np.average(returned=True) is not supported by dynexpr")
    keep = const_arg(d, "keepdims")
    x = _array(d["a"], "np.average")
    return np_ops.reduce(tx.ctx, "mean", x, axis=const_arg(d, "axis"),
                         keepdims=False if keep is NOVALUE else bool(keep))


# --- views and layouts --------------------------------------------------------------------


def _flip_axes(ctx: Context, x: ArrayVar, axes: Any) -> Var:
    axes = normalize_axes(axes, x.ndim)  # NumPy's own axis checks
    key = [slice(None)] * x.ndim
    for a in range(x.ndim) if axes is None else axes:
        key[a] = slice(None, None, -1)
    return np_views.getitem(ctx, x, tuple(key))


def _flip(tx, args, kwargs):
    d = bind("np.flip", args, kwargs, (("m", REQUIRED), ("axis", None)))
    return _flip_axes(tx.ctx, _array(d["m"], "np.flip"), const_arg(d, "axis"))


def _flip_fixed(axis: int, name: str, min_ndim: int):
    def handler(tx, args, kwargs):
        d = bind(f"np.{name}", args, kwargs, (("m", REQUIRED),))
        x = _array(d["m"], f"np.{name}")
        if x.ndim < min_ndim:
            graph_break(f"np.{name} of a {x.ndim}-d array: NumPy raises ValueError")
        return _flip_axes(tx.ctx, x, axis)

    return handler


def _diagonal_view(ctx: Context, x: ArrayVar, k: int, what: str) -> Var:
    """The k-th diagonal of 2-D x: a strided slice of its flat array (a copy of x first
    when x is not C-contiguous, which reshape makes); None when it is empty."""
    ctx.session.check_static(x.shape, what)
    diag = np_views.diagonal_slice(*x.shape, k)
    return None if diag is None else np_views.getitem(ctx, np_views.reshape(ctx, x, -1), (diag,))


def _trace(tx, args, kwargs):
    d = bind("np.trace", args, kwargs, (("a", REQUIRED), ("offset", 0), ("axis1", 0),
                                        ("axis2", 1), ("dtype", None), ("out", None)))
    x = _array(d["a"], "np.trace")
    k = ask(int, const_arg(d, "offset"))
    if x.ndim != 2 or (const_arg(d, "axis1"), const_arg(d, "axis2")) not in ((0, 1), (-2, -1)):
        graph_break("np.trace of other than the two axes of a 2-D array is not supported by "
                    "dynexpr")
    diag = _diagonal_view(tx.ctx, x, k, "np.trace")
    if diag is None:  # an empty diagonal: NumPy's sum of nothing
        diag = np_ops.full(tx.ctx, (0,), 0, x.dtype)
    return np_ops.reduce(tx.ctx, "sum", diag, dtype=const_arg(d, "dtype"))


def _diag(tx, args, kwargs):
    d = bind("np.diag", args, kwargs, (("v", REQUIRED), ("k", 0)))
    x = _array(d["v"], "np.diag")
    k = ask(int, const_arg(d, "k"))
    ctx = tx.ctx
    if x.ndim == 2:
        diag = _diagonal_view(ctx, x, k, "np.diag")
        out = (np_ops.full(ctx, (0,), 0, x.dtype) if diag is None else np_ops.copy(ctx, diag))
        # NumPy returns a read-only view: a write to it raises there, so here it breaks
        out.storage.freeze("np.diag's result is read-only in NumPy")
        return out
    if x.ndim != 1:
        graph_break("np.diag of a 0-d or 3-d+ array: NumPy raises ValueError")
    ctx.session.check_static(x.shape, "np.diag")
    n = x.shape[0] + abs(k)
    out = np_ops.full(ctx, (n, n), 0, x.dtype)
    out.storage.c_contig = True  # its flat view is the same memory, as in NumPy
    diag = np_views.diagonal_slice(n, n, k)  # exactly x.shape[0] long
    if diag is not None:
        np_views.setitem(ctx, np_views.reshape(ctx, out, -1), (diag,), x)
    return out


def _meshgrid(tx, args, kwargs):
    d = bind("np.meshgrid", [], kwargs, (("copy", True), ("sparse", False), ("indexing", "xy")))
    if const_arg(d, "copy") is not True or const_arg(d, "sparse") is not False:
        graph_break("np.meshgrid with copy=False or sparse=True is not supported by dynexpr")
    indexing = const_arg(d, "indexing")
    xs = [_array(a, "np.meshgrid") for a in args]
    ctx = tx.ctx
    for a in xs:
        ctx.session.check_static(a.shape, "np.meshgrid")
    grids = ask(np.meshgrid, *[stand_in(a.shape) for a in xs], indexing=indexing)
    nd = len(xs)
    out = []
    for i, (a, g) in enumerate(zip(xs, grids)):
        axis = i
        if indexing == "xy" and nd > 1 and i < 2:
            axis = 1 - i
        shape = [1] * nd
        shape[axis] = -1
        v = np_views.reshape(ctx, np_views.reshape(ctx, a, -1), tuple(shape))
        out.append(np_ops.copy(ctx, np_views.broadcast_to(ctx, v, tuple(g.shape))))
    return TupleVar(out) if isinstance(grids, tuple) else ListVar(out, None)


def _repeat(tx, args, kwargs):
    d = bind("np.repeat", args, kwargs, (("a", REQUIRED), ("repeats", REQUIRED), ("axis", None)))
    x = _array(d["a"], "np.repeat")
    reps, axis = const_arg(d, "repeats"), const_arg(d, "axis")
    if isinstance(reps, bool) or not isinstance(reps, (int, np.integer)):
        graph_break("np.repeat with repeats per element is not supported by dynexpr")
    ctx = tx.ctx
    ctx.session.check_static(x.shape, "np.repeat")
    # NumPy's checks (a negative count, a bad axis), on an array of at most one element
    ask(np.repeat, np.empty(tuple(min(s, 1) for s in x.shape), x.dtype), reps, axis)
    reps = int(reps)
    if axis is None:
        x, axis = np_views.reshape(ctx, x, -1), 0
    ax = axis % x.ndim
    shape = tuple(x.shape)
    v = np_views.reshape(ctx, x, shape[:ax + 1] + (1,) + shape[ax + 1:])
    b = np_views.broadcast_to(ctx, v, shape[:ax + 1] + (reps,) + shape[ax + 1:])
    res = shape[:ax] + (shape[ax] * reps,) + shape[ax + 1:]
    return np_views.reshape(ctx, np_ops.copy(ctx, b), res)


def _tile(tx, args, kwargs):
    d = bind("np.tile", args, kwargs, (("A", REQUIRED), ("reps", REQUIRED)))
    x = _array(d["A"], "np.tile")
    reps = const_arg(d, "reps")
    reps = tuple(reps) if isinstance(reps, (tuple, list)) else (reps,)
    if not all(isinstance(r, (int, np.integer)) and not isinstance(r, bool) and r >= 0
               for r in reps):
        graph_break(f"np.tile(reps={reps!r}) is not supported by dynexpr")
    ctx = tx.ctx
    ctx.session.check_static(x.shape, "np.tile")
    nd = max(len(reps), x.ndim)
    reps = (1,) * (nd - len(reps)) + tuple(int(r) for r in reps)
    shape = (1,) * (nd - x.ndim) + tuple(x.shape)
    inter = tuple(s for pair in zip((1,) * nd, shape) for s in pair)
    grid = tuple(s for pair in zip(reps, shape) for s in pair)
    v = np_views.reshape(ctx, x, inter)
    b = np_views.broadcast_to(ctx, v, grid)
    return np_views.reshape(ctx, np_ops.copy(ctx, b), tuple(r * s for r, s in zip(reps, shape)))


def handlers() -> dict:
    """NumPy function -> handler(tx, args, kwargs), for np_table's FUNCTIONS."""
    return {
        np.sinc: _sinc,
        np.radians: _scale_by(math.pi / 180.0, "radians"),
        np.deg2rad: _scale_by(math.pi / 180.0, "deg2rad"),
        np.degrees: _scale_by(180.0 / math.pi, "degrees"),
        np.rad2deg: _scale_by(180.0 / math.pi, "rad2deg"),
        np.fabs: _fabs,
        np.heaviside: _heaviside,
        np.fmax: _nan_choice(np.maximum, "fmax"),
        np.fmin: _nan_choice(np.minimum, "fmin"),
        np.nan_to_num: _nan_to_num,
        np.nansum: _nan_reduction("sum", 0.0),
        np.nanprod: _nan_reduction("prod", 1.0),
        np.ptp: _ptp,
        np.average: _average,
        np.flip: _flip,
        np.fliplr: _flip_fixed(1, "fliplr", 2),
        np.flipud: _flip_fixed(0, "flipud", 1),
        np.trace: _trace,
        np.diag: _diag,
        np.meshgrid: _meshgrid,
        np.repeat: _repeat,
        np.tile: _tile,
    }
