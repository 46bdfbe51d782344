"""Ask NumPy what an operation gives: dtype, scalar or array, shape, and errors.

Note [NumPy decides]
No promotion table is written here. For a dtype, the real ufunc (or function) is called
on tiny stand-ins of the operands' dtypes, with Python scalars passed as the very Python
scalars the user wrote, so NEP 50 applies exactly (weak scalars, overflow checks). For
a shape, NumPy's own np.broadcast_shapes / normalize_axis_tuple, or indexing a
zero-itemsize stand-in of the real shape, which costs no memory. Whatever NumPy raises
becomes a graph break: the function then runs as plain Python and raises that error
itself, with its own message, at the user's line.
"""

from __future__ import annotations

import operator
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from .. import ir
from .arrays import ArrayVar
from .errors import ShapeQuestion, graph_break
from .variables import PyVar, ScalarInputVar, Var

SUPPORTED = {np.dtype(n) for n in ir.DTYPES}
# warnings.catch_warnings saves and restores the process-wide filter list: two threads
# translating at once would restore each other's lists (and could leave "ignore" in
# place for good). Python < 3.14 has no thread-safe form, so the translations take turns
# here; NumPy's errstate is per thread already.
_WARNINGS = threading.RLock()  # re-entrant: NumPy may call back into Python
_VOID = np.dtype([])  # itemsize 0: a stand-in of any shape costs no memory


def ask(fn: Callable, *args: Any, **kw: Any) -> Any:
    """Call NumPy on stand-ins; its errors become graph breaks."""
    try:
        with _WARNINGS, np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args, **kw)
    except Exception as e:  # noqa: BLE001 - NumPy's own error is the message we want
        # With a dynamic extent in play the error may be about the sentinel (a dynamic
        # extent meeting a static one): the frame loop translates again static before
        # believing it (errors.ShapeQuestion).
        raise ShapeQuestion(f"NumPy raises {type(e).__name__}: {e}", f"NumPy: {e}") from None


def example(v: Var) -> Any:
    """A tiny real object that NumPy treats like `v`: same dtype, same kind (array,
    NumPy scalar or Python scalar), zero-size dims kept zero."""
    if isinstance(v, ArrayVar):
        dt = np.dtype(v.dtype)
        if v.is_scalar:
            return dt.type(1)
        return np.ones(tuple(min(d, 1) for d in v.shape), dt)
    if isinstance(v, ScalarInputVar):
        return v.raw  # any value of its type promotes alike
    if isinstance(v, PyVar):
        return v.value
    graph_break(f"NumPy cannot take a {v.describe()} here")


def stand_in(shape: tuple) -> np.ndarray:
    """An array of the real shape whose views and reshapes NumPy computes for free."""
    return np.empty(shape, _VOID)


def operand_descr(v: Var) -> Any:
    """What ufunc.resolve_dtypes takes for an operand: a dtype, or int/float for a weak
    Python scalar (NEP 50)."""
    if isinstance(v, ArrayVar):
        return np.dtype(v.dtype)
    x = v.raw if isinstance(v, ScalarInputVar) else v.value
    if type(x) is bool:
        return np.dtype(bool)
    if type(x) in (int, float, complex):
        return type(x)
    return np.asarray(x).dtype


def dtype_name(dt: Any) -> str:
    dt = np.dtype(dt)
    if dt not in SUPPORTED or not dt.isnative:
        graph_break(
            f"the result has dtype {dt}, which dynexpr does not support "
            f"(supported: {', '.join(ir.DTYPES)})"
        )
    return dt.name


def result_of(r: Any) -> tuple[str, str]:
    """(dtype name, kind) of a NumPy result."""
    if isinstance(r, np.generic):
        return dtype_name(r.dtype), "scalar"
    if isinstance(r, np.ndarray):
        return dtype_name(r.dtype), "ndarray"
    graph_break(f"NumPy returned a {type(r).__name__}, which dynexpr cannot represent")


def broadcast(*shapes: tuple) -> tuple:
    return tuple(ask(np.broadcast_shapes, *shapes))


def shape_of(v: Var) -> tuple:
    return v.shape if isinstance(v, ArrayVar) else ()


def ufunc_loop(ufunc: np.ufunc, operands: list[Var], out_dtype: str | None = None) -> tuple:
    """Loop dtypes (inputs..., outputs...) NumPy picks for these operands."""
    descrs = tuple(operand_descr(v) for v in operands)
    outs = (np.dtype(out_dtype),) if out_dtype else (None,) * ufunc.nout
    try:
        return tuple(d.name for d in ufunc.resolve_dtypes(descrs + outs))
    except Exception:  # noqa: BLE001 - the real call (ask) reports NumPy's error
        r = ask(ufunc, *[example(v) for v in operands])
        dt = np.asarray(r).dtype.name
        return (dt,) * (ufunc.nin + ufunc.nout)


def normalize_axes(axis: Any, ndim: int) -> tuple | None:
    if axis is None:
        return None
    return tuple(ask(normalize_axis_tuple, axis, ndim))


def reduced_shape(shape: tuple, axes: tuple | None, keepdims: bool) -> tuple:
    axes = tuple(range(len(shape))) if axes is None else axes
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def index_result(shape: tuple, key: Any) -> tuple[tuple, str]:
    """(shape, kind) of basic indexing: NumPy indexes a free stand-in of the shape."""
    r = ask(operator.getitem, stand_in(shape), key)
    return (tuple(r.shape), "ndarray") if isinstance(r, np.ndarray) else ((), "scalar")


def normalize_index(shape: tuple, key: Any) -> tuple:
    """Basic index -> the IR's explicit form: one entry per indexed dim, Ellipsis
    expanded, ints made non-negative, slices resolved against the extent: ("slice",
    start, stop, step) with 0 <= start, and stop either >= 0 or None ("past the end",
    which for a negative step is past index 0). Read with Python's slice semantics, or as
    range(start, -1 if stop is None else stop, step), it selects the same elements; an
    empty slice is always ("slice", 0, 0, 1)."""
    items = key if isinstance(key, tuple) else (key,)
    for it in items:
        if not (
            it is None
            or it is Ellipsis
            or type(it) in (int, slice)
            or isinstance(it, (bool, np.integer))
        ):
            graph_break(
                f"indexing with {type(it).__name__} (advanced indexing) is not supported; "
                "use ints, slices, None and ..."
            )
        if isinstance(it, (bool, np.bool_)):
            graph_break("indexing with a bool is advanced indexing, which is not supported")
    consumed = sum(1 for it in items if it is not None and it is not Ellipsis)
    out: list[tuple] = []
    dim = 0
    for it in items:
        if it is None:
            out.append(("newaxis",))
        elif it is Ellipsis:
            for _ in range(len(shape) - consumed):
                out.append(("slice", 0, shape[dim], 1))
                dim += 1
        elif isinstance(it, slice):
            start, stop, step = it.indices(shape[dim])
            if len(range(start, stop, step)) == 0:
                start, stop, step = 0, 0, 1
            out.append(("slice", start, None if stop < 0 else stop, step))
            dim += 1
        else:
            i = int(it)
            out.append(("int", i + shape[dim] if i < 0 else i))
            dim += 1
    return tuple(out)


def index_to_python(index: tuple) -> tuple:
    """The IR's index back to a Python key (for NumPy, e.g. in the eager backend). The
    trailing Ellipsis keeps a full integer index a view (x[1, ...]), never a scalar copy."""
    key = []
    for e in index:
        if e[0] == "int":
            key.append(e[1])
        elif e[0] == "newaxis":
            key.append(None)
        else:
            key.append(slice(*e[1:]))
    return tuple(key) + (Ellipsis,)
