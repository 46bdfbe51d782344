"""np.inner, np.vdot, np.outer, np.tensordot, np.einsum, N-D np.dot and batched matmul on
fake arrays, written as the matmul and multiply nodes NumPy's own definitions reduce them
to (the matmul node runs NumPy's BLAS: Note [NumPy's BLAS] in dynexpr/blas.py). np.dot
and `@` are matmul / dot here (np_ops.matmul makes one 2-D product).

Note [contractions as one product]
A two-operand contraction is one gemm once its operands are transposed and reshaped: the
free axes of a as rows, the summed axes as the inner dimension, the free axes of b as
columns (and axes shared by both and the result as a batch). Transposes are views, which
BLAS reads with its trans flags where they leave a unit stride; a reshape that cannot be
a view copies once, as NumPy's tensordot does. What is not such a contraction (an axis
summed within one operand, a diagonal, an ellipsis, three operands, complex operands,
dynamic sizes) is a graph break with that reason: plain NumPy runs it."""

from __future__ import annotations

import math

import numpy as np

from . import np_ops, np_views
from .arrays import ArrayVar
from .builder import Context
from .errors import graph_break
from .infer import normalize_axes
from .np_args import REQUIRED, bind, const_of
from .variables import ListVar, PyVar, TupleVar, Var


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


def _static(name: str, *xs: ArrayVar) -> None:
    if not all(isinstance(d, int) for x in xs for d in x.shape):
        graph_break(f"np.{name} of arrays of dynamic size is not supported by dynexpr")


def _contract(ctx: Context, a: ArrayVar, b: ArrayVar, batch: tuple, free_a: tuple,
              sum_a: tuple, bat_b: tuple, sum_b: tuple, free_b: tuple) -> Var:
    """Note [contractions as one product]: the result's axes are batch, free_a, free_b
    (batch, free_a, sum_a: axes of a; bat_b, sum_b, free_b: the matching axes of b)."""
    dims = [tuple(x.shape[i] for i in axes) for x, axes in
            ((a, batch), (a, free_a), (a, sum_a), (b, free_b))]
    nb, m, k, n = (math.prod(d) for d in dims)
    at = np_views.transpose(ctx, a, batch + free_a + sum_a)
    bt = np_views.transpose(ctx, b, bat_b + sum_b + free_b)
    lead = (nb,) if batch else ()
    at = np_views.reshape(ctx, at, lead + (m, k))
    bt = np_views.reshape(ctx, bt, lead + (k, n))
    out = np_ops.matmul(ctx, at, bt, batched=bool(batch))
    return np_views.reshape(ctx, out, dims[0] + dims[1] + dims[3])


def tensordot(ctx: Context, a: Var, b: Var, axes) -> Var:
    """np.tensordot: a's axes_a summed against b's axes_b; the rest of a's, then b's."""
    if not _arrays("tensordot", a, b):
        graph_break("np.tensordot of scalars or Python data is not supported by dynexpr")
    _static("tensordot", a, b)
    if isinstance(axes, int):
        if axes < 0 or axes > min(a.ndim, b.ndim):
            graph_break(f"np.tensordot: axes={axes} does not fit the operands (NumPy raises)")
        ax_a, ax_b = tuple(range(a.ndim - axes, a.ndim)), tuple(range(axes))
    else:
        try:
            xa, xb = axes
            ax_a = tuple(int(i) for i in (xa if isinstance(xa, (tuple, list)) else [xa]))
            ax_b = tuple(int(i) for i in (xb if isinstance(xb, (tuple, list)) else [xb]))
        except (TypeError, ValueError):
            graph_break(f"np.tensordot: axes={axes!r} is not an int or a pair of axis lists")
        if len(ax_a) != len(ax_b) or any(not -x.ndim <= i < x.ndim for x, ax in
                                          ((a, ax_a), (b, ax_b)) for i in ax):
            graph_break(f"np.tensordot: axes={axes!r} do not fit the operands (NumPy raises)")
        ax_a = tuple(i % a.ndim for i in ax_a)
        ax_b = tuple(i % b.ndim for i in ax_b)
    if len(set(ax_a)) != len(ax_a) or len(set(ax_b)) != len(ax_b) or \
            any(a.shape[i] != b.shape[j] for i, j in zip(ax_a, ax_b)):
        graph_break("np.tensordot: shape-mismatch for sum (NumPy raises ValueError)")
    free_a = tuple(i for i in range(a.ndim) if i not in ax_a)
    free_b = tuple(i for i in range(b.ndim) if i not in ax_b)
    return _contract(ctx, a, b, (), free_a, ax_a, (), ax_b, free_b)


def dot_nd(ctx: Context, a: ArrayVar, b: ArrayVar) -> Var:
    """np.dot with an operand of more than 2 dims: a's last axis against b's second to
    last (its only one when 1-D), i.e. a tensordot."""
    return tensordot(ctx, a, b, ([a.ndim - 1], [max(b.ndim - 2, 0)]))


def matmul(ctx: Context, a: Var, b: Var) -> Var:
    """`a @ b` and np.matmul: N-D operands as a batch of products, else one product."""
    if isinstance(a, ArrayVar) and isinstance(b, ArrayVar) and (a.ndim > 2 or b.ndim > 2):
        if a.ndim > 0 and b.ndim > 0 and not (a.is_scalar or b.is_scalar):
            return batched_matmul(ctx, a, b)
    return np_ops.matmul(ctx, a, b)


def dot(ctx: Context, a: Var, b: Var) -> Var:
    """np.dot: a scalar operand multiplies, N-D operands contract a's last axis with b's
    second to last, else it is matmul."""
    if isinstance(a, PyVar) or isinstance(b, PyVar) or a.ndim == 0 or b.ndim == 0:
        return np_ops.ufunc(ctx, np.multiply, [a, b])
    if a.ndim > 2 or b.ndim > 2:
        return dot_nd(ctx, a, b)
    return np_ops.matmul(ctx, a, b)


def batched_matmul(ctx: Context, a: ArrayVar, b: ArrayVar) -> Var:
    """np.matmul with an operand of more than 2 dims: the batch axes broadcast, then one
    gemm per matrix (a 3-D matmul node), or one gemm of all rows when b is one matrix."""
    _static("matmul", a, b)
    va = np_views.reshape(ctx, a, (1, a.shape[0])) if a.ndim == 1 else a
    vb = np_views.reshape(ctx, b, (b.shape[0], 1)) if b.ndim == 1 else b
    (m, k), (kb, n) = va.shape[-2:], vb.shape[-2:]
    if k != kb:
        graph_break(f"matmul: core dimensions {a.shape} @ {b.shape} mismatch (NumPy raises ValueError)")
    try:
        batch = tuple(np.broadcast_shapes(va.shape[:-2], vb.shape[:-2]))
    except ValueError:
        graph_break(f"matmul: batch dimensions of {a.shape} and {b.shape} do not broadcast "
                    "(NumPy raises ValueError)")
    nb = math.prod(batch)
    if vb.ndim == 2:  # (..., m, k) @ (k, n): all rows of a at once
        rows = np_views.reshape(ctx, va, (nb * m, k))
        out = np_ops.matmul(ctx, rows, vb)
    else:
        def three_d(x, core):
            if math.prod(x.shape[:-2]) == 1:
                return np_views.reshape(ctx, x, core)  # a batch of one: broadcast by dx::matmul
            if tuple(x.shape[:-2]) != batch:
                x = np_views.broadcast_to(ctx, x, batch + core)
            return np_views.reshape(ctx, x, (nb,) + core)
        out = np_ops.matmul(ctx, three_d(va, (m, k)), three_d(vb, (k, n)), batched=True)
    final = batch + ((m,) if a.ndim > 1 else ()) + ((n,) if b.ndim > 1 else ())
    return np_views.reshape(ctx, out, final)


def _einsum_spec(spec: str, ndims: tuple) -> tuple[list[str], str]:
    spec = spec.replace(" ", "")
    if "." in spec:
        graph_break("np.einsum with an ellipsis runs as NumPy (not one product for dynexpr)")
    ins, arrow, out = spec.partition("->")
    terms = ins.split(",")
    if len(terms) != len(ndims) or any(len(t) != d for t, d in zip(terms, ndims)) or \
            not all(c.isalpha() for c in "".join(terms) + out):
        graph_break(f"np.einsum: subscripts {spec!r} do not fit the operands (NumPy raises)")
    if not arrow:  # implicit: the letters seen once, in alphabetical order
        letters = "".join(terms)
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    return terms, out


def einsum(ctx: Context, spec: Var, operands: list[Var]) -> Var:
    """np.einsum of two operands that is one (batched) product, Note [contractions as one
    product]; anything else is a graph break that says why."""
    spec = const_of(spec, "np.einsum's subscripts")
    if not isinstance(spec, str):
        graph_break("np.einsum with subscripts as lists runs as NumPy")
    if len(operands) != 2:
        graph_break(f"np.einsum of {len(operands)} operands runs as NumPy (dynexpr captures "
                    "two-operand contractions)")
    a, b = operands
    if not _arrays("einsum", a, b):
        graph_break("np.einsum of scalars or Python data runs as NumPy")
    _static("einsum", a, b)
    (ta, tb), out = _einsum_spec(spec, (a.ndim, b.ndim))
    if len(set(ta)) != len(ta) or len(set(tb)) != len(tb) or len(set(out)) != len(out) \
            or any(c not in ta + tb for c in out):
        graph_break(f"np.einsum {spec!r}: a diagonal or repeated output axis runs as NumPy")
    only = [c for c in ta + tb if c not in out and (c in ta) != (c in tb)]
    if only:
        graph_break(f"np.einsum {spec!r}: axis {only[0]!r} is summed within one operand, "
                    "not one product: it runs as NumPy")
    if any(a.shape[ta.index(c)] != b.shape[tb.index(c)] for c in ta if c in tb):
        graph_break(f"np.einsum {spec!r}: operand sizes do not match (NumPy raises ValueError)")
    batch = [c for c in out if c in ta and c in tb]
    free_a = [c for c in out if c in ta and c not in tb]
    free_b = [c for c in out if c in tb and c not in ta]
    summed = [c for c in ta if c in tb and c not in out]
    r = _contract(ctx, a, b, tuple(ta.index(c) for c in batch), tuple(ta.index(c) for c in free_a),
                  tuple(ta.index(c) for c in summed), tuple(tb.index(c) for c in batch),
                  tuple(tb.index(c) for c in summed), tuple(tb.index(c) for c in free_b))
    order = batch + free_a + free_b
    perm = tuple(order.index(c) for c in out)
    return r if perm == tuple(range(len(perm))) else np_ops.copy(ctx, np_views.transpose(ctx, r, perm))


def tensordot_call(tx, args: list, kwargs: dict) -> Var:
    d = bind("np.tensordot", args, kwargs, (("a", REQUIRED), ("b", REQUIRED), ("axes", 2)))
    return tensordot(tx.ctx, d["a"], d["b"], _axes(d["axes"]))


def _axes(v: Var):
    """tensordot's axes as written: an int, or lists/tuples of ints (a list the code itself
    built is its value; one from outside is a guarded input, so it must be a tuple)."""
    if isinstance(v, (TupleVar, ListVar)) and (not isinstance(v, ListVar) or v.source is None):
        return tuple(_axes(x) for x in v.items)
    return const_of(v, "np.tensordot's axes=")


def einsum_call(tx, args: list, kwargs: dict) -> Var:
    extra = set(kwargs) - {"optimize"}
    if extra:
        graph_break(f"np.einsum(..., {sorted(extra)[0]}=) runs as NumPy")
    if not args:
        graph_break("np.einsum without subscripts (NumPy raises)")
    return einsum(tx.ctx, args[0], list(args[1:]))


# --- np.linalg.norm ----------------------------------------------------------------------
#
# Note [norms as reductions]
# np.linalg.norm is NumPy code, not a LAPACK call, for every order but the singular-value
# ones: the 2-norm of a vector and the Frobenius norm are sqrt(sum(x*x)) (NumPy computes
# the sum of squares with a BLAS dot over the flattened array, dynexpr as one fused
# reduction, so the two agree to rounding, as any two summation orders do), the 1- and
# inf-norms are sums and maxima of |x|, and a general p-norm is sum(|x|**p)**(1/p). Each is
# written here as the ufunc and reduction nodes of NumPy's own definition (numpy/linalg's
# norm), so the reduction fuses with the work that feeds it. Integer inputs become float64
# first, as in NumPy. The orders 2, -2 and 'nuc' of a matrix need its singular values:
# they are a graph break, and NumPy runs them.


def _norm_abs(ctx: Context, x: ArrayVar) -> Var:
    return np_ops.ufunc(ctx, np.absolute, [x])


def _two_norm(ctx: Context, x: ArrayVar, axis, keepdims: bool) -> Var:
    squares = np_ops.ufunc(ctx, np.multiply, [x, x])
    return np_ops.ufunc(ctx, np.sqrt, [np_ops.reduce(ctx, "sum", squares, axis, keepdims)])


def _vector_norm(ctx: Context, x: ArrayVar, ord_, axis: int, keepdims: bool) -> Var:
    if ord_ is None or ord_ == 2:
        return _two_norm(ctx, x, axis, keepdims)
    if ord_ == np.inf:
        return np_ops.reduce(ctx, "max", _norm_abs(ctx, x), axis, keepdims)
    if ord_ == -np.inf:
        return np_ops.reduce(ctx, "min", _norm_abs(ctx, x), axis, keepdims)
    if ord_ == 0:
        nonzero = np_ops.astype(ctx, np_ops.ufunc(ctx, np.not_equal, [x, PyVar(0)]), x.dtype)
        return np_ops.reduce(ctx, "sum", nonzero, axis, keepdims)
    if ord_ == 1:
        return np_ops.reduce(ctx, "sum", _norm_abs(ctx, x), axis, keepdims)
    if isinstance(ord_, str):
        graph_break(f"np.linalg.norm: ord={ord_!r} is for matrices (NumPy raises ValueError)")
    p = float(ord_)
    powered = np_ops.ufunc(ctx, np.power, [_norm_abs(ctx, x), PyVar(np.dtype(x.dtype).type(p))])
    total = np_ops.reduce(ctx, "sum", powered, axis, keepdims)
    return np_ops.ufunc(ctx, np.power, [total, PyVar(np.dtype(x.dtype).type(1.0 / p))])


def _matrix_norm(ctx: Context, x: ArrayVar, ord_, axes: tuple, keepdims: bool) -> Var:
    row, col = axes
    if ord_ in (None, "fro", "f"):
        r = _two_norm(ctx, x, axes, False)
    elif ord_ in (1, -1, np.inf, -np.inf):
        # 1: the largest column sum of |x|; inf: the largest row sum (NumPy's definition).
        summed, other = (row, col) if ord_ in (1, -1) else (col, row)
        if other > summed:
            other -= 1
        sums = np_ops.reduce(ctx, "sum", _norm_abs(ctx, x), summed)
        r = np_ops.reduce(ctx, "max" if ord_ > 0 else "min", sums, other)
    else:
        graph_break(f"np.linalg.norm(ord={ord_!r}) of a matrix needs its singular values "
                    "(an SVD): NumPy runs it")
    if keepdims:
        shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
        r = np_views.reshape(ctx, r, shape)
    return r


def norm(ctx: Context, x: Var, ord_=None, axis=None, keepdims: bool = False) -> Var:
    """np.linalg.norm (Note [norms as reductions])."""
    if not isinstance(x, ArrayVar):
        graph_break(f"np.linalg.norm of a {x.describe()} runs as NumPy")
    if np.dtype(x.dtype).kind == "c":
        graph_break("np.linalg.norm of complex arrays is not supported by dynexpr")
    if np.dtype(x.dtype).kind not in "f":
        x = np_ops.astype(ctx, x, np.float64)
    if axis is None:
        flat_two = ord_ is None or (ord_ in ("f", "fro") and x.ndim == 2) or (ord_ == 2 and x.ndim == 1)
        if flat_two:
            r = _two_norm(ctx, x, None, False)
            return np_views.reshape(ctx, r, (1,) * x.ndim) if keepdims else r
        if x.ndim not in (1, 2):
            graph_break("np.linalg.norm: improper number of dimensions to norm (NumPy raises "
                        "ValueError)")
        axis = tuple(range(x.ndim))
    elif not isinstance(axis, tuple):
        if not isinstance(axis, (int, np.integer)):
            graph_break(f"np.linalg.norm: axis={axis!r} must be an int or a tuple (TypeError)")
        axis = (int(axis),)
    axes = normalize_axes(axis, x.ndim)
    if len(axes) == 1:
        return _vector_norm(ctx, x, ord_, axes[0], keepdims)
    if len(axes) == 2 and axes[0] != axes[1]:
        return _matrix_norm(ctx, x, ord_, axes, keepdims)
    graph_break("np.linalg.norm: improper number of dimensions to norm (NumPy raises ValueError)")


def norm_call(tx, args: list, kwargs: dict) -> Var:
    d = bind("np.linalg.norm", args, kwargs,
             (("x", REQUIRED), ("ord", None), ("axis", None), ("keepdims", False)))
    ord_ = const_of(d["ord"], "np.linalg.norm's ord=")
    axis = const_of(d["axis"], "np.linalg.norm's axis=")
    keepdims = const_of(d["keepdims"], "np.linalg.norm's keepdims=")
    return norm(tx.ctx, d["x"], ord_, axis, bool(keepdims))
