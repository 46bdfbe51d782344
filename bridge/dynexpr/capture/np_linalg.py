"""np.inner, np.vdot, np.outer on fake arrays, written as the matmul and multiply nodes
NumPy's own definitions reduce them to (the matmul node runs NumPy's BLAS: Note [NumPy's
BLAS] in dynexpr/blas.py). np.dot and `@` are np_ops.dot / np_ops.matmul. What is not
covered (complex operands, more than 2 dims, np.tensordot, np.einsum) is a graph break:
plain NumPy runs it."""

from __future__ import annotations

import numpy as np

from . import np_ops, np_views
from .arrays import ArrayVar
from .builder import Context
from .errors import graph_break
from .variables import Var


def _arrays(name: str, a: Var, b: Var) -> bool:
    """Whether both are arrays of at least one dim (else NumPy multiplies); breaks on
    what dynexpr leaves to NumPy."""
    if not (isinstance(a, ArrayVar) and isinstance(b, ArrayVar)) or a.ndim == 0 or b.ndim == 0:
        return False
    if any(np.dtype(x.dtype).kind == "c" for x in (a, b)):
        graph_break(f"np.{name} of complex arrays is not supported by dynexpr")
    return True


def inner(ctx: Context, a: Var, b: Var) -> Var:
    """np.inner: sum over the last axes, i.e. a @ b.T for 1-D and 2-D operands."""
    if not _arrays("inner", a, b):
        return np_ops.ufunc(ctx, np.multiply, [a, b])
    if a.ndim > 2 or b.ndim > 2:
        graph_break("np.inner of arrays with more than 2 dims is not supported by dynexpr")
    return np_ops.matmul(ctx, a, np_views.transpose(ctx, b) if b.ndim == 2 else b)


def vdot(ctx: Context, a: Var, b: Var) -> Var:
    """np.vdot: the dot product of the flattened operands (real: no conjugate)."""
    if not (isinstance(a, ArrayVar) and isinstance(b, ArrayVar)):
        graph_break("np.vdot of Python data is not supported by dynexpr")
    _arrays("vdot", a, b)
    if not (isinstance(a.size, int) and isinstance(b.size, int)):
        graph_break("np.vdot of arrays of dynamic size is not supported by dynexpr")
    if a.size != b.size:
        graph_break(f"np.vdot: sizes {a.size} and {b.size} differ (NumPy raises ValueError)")
    return np_ops.matmul(ctx, np_views.ravel(ctx, a), np_views.ravel(ctx, b))


def outer(ctx: Context, a: Var, b: Var) -> Var:
    """np.outer: multiply(a.ravel()[:, None], b.ravel()[None, :]), NumPy's definition."""
    if not (isinstance(a, ArrayVar) and isinstance(b, ArrayVar)):
        graph_break("np.outer of Python data is not supported by dynexpr")
    col = np_views.reshape(ctx, np_views.ravel(ctx, a), (-1, 1))
    row = np_views.reshape(ctx, np_views.ravel(ctx, b), (1, -1))
    return np_ops.ufunc(ctx, np.multiply, [col, row])
