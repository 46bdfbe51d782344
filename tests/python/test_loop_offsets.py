"""The loop variable as a dynamic offset (Note [dynamic offsets], ir.py): `a[i]`,
`a[i-1]`, `a[:, i] = ...`, `a[i:i+3]` inside a for-range body keep the loop rolled
(reroll.py), on scientist-style code; every result equals plain NumPy's (values, dtype,
shape, mutation of the caller's arrays) on both backends. Bodies whose extents change
with i (`L[i, :i+1]`) roll too, with dynamic extents (test_loop_extents.py)."""

import warnings

import numpy as np
import pytest

import dynexpr
from compare import assert_matches_plain
from dynexpr import runtime
from dynexpr.capture.translate import translate


def gauss_seidel_rows(u, sweeps):
    # Row-by-row Gauss-Seidel: row i reads row i-1 as already updated this sweep.
    n = u.shape[0]
    for _ in range(sweeps):
        for i in range(1, n - 1):
            u[i, 1:-1] = 0.25 * (u[i - 1, 1:-1] + u[i + 1, 1:-1] + u[i, :-2] + u[i, 2:])
    return u


def jacobi_rows(u, f, h2):
    # One Jacobi sweep written row by row into a new array (rows read the old u).
    n = u.shape[0]
    new = u.copy()
    for i in range(1, n - 1):
        new[i, 1:-1] = 0.25 * (u[i - 1, 1:-1] + u[i + 1, 1:-1] + u[i, :-2] + u[i, 2:]
                               - h2 * f[i, 1:-1])
    return new


def recurrence(x, a, b):
    # x[i] = a*x[i-1] + b[i]: a first-order linear recurrence (an IIR filter).
    for i in range(1, x.shape[0]):
        x[i] = a * x[i - 1] + b[i]
    return x


def covariance_rows(X):
    # C[i, :] = X[:, i] @ X, one row per column of X.
    n = X.shape[1]
    C = np.zeros((n, n), dtype=X.dtype)
    for i in range(n):
        C[i, :] = X[:, i] @ X
    return C


def window_sum(x, out):
    # out[i] = x[i:i+3].sum(): a moving window of fixed width (a dynamic slice).
    for i in range(out.shape[0]):
        out[i] = x[i:i + 3].sum()
    return out


def column_scan(A):
    # A[:, i] = A[:, i] + A[:, i-1] * 0.5: a column-wise cumulative update.
    for i in range(1, A.shape[1]):
        A[:, i] = A[:, i] + A[:, i - 1] * 0.5
    return A


def reversed_rows(A):
    # Every other row backwards from the end: a negative step, rows i and i+1.
    for i in range(A.shape[0] - 2, 0, -2):
        A[i - 1] = A[i] - A[i + 1]
    return A


def lower_triangle(A):
    # L[i, :i+1] = ...: the extent changes with i (Note [dynamic extents], ir.py).
    n = A.shape[0]
    L = np.zeros_like(A)
    for i in range(n):
        L[i, :i + 1] = A[i, :i + 1] * 2.0
    return L


CASES = [
    (gauss_seidel_rows, lambda r: (r.random((8, 6)), 2)),
    (jacobi_rows, lambda r: (r.random((7, 9)), r.random((7, 9)), 0.01)),
    (recurrence, lambda r: (r.random(12), 0.9, r.random(12))),
    (covariance_rows, lambda r: (r.random((6, 5)),)),
    (window_sum, lambda r: (r.random(10), np.zeros(8))),
    (column_scan, lambda r: (r.random((4, 7)).astype(np.float32),)),
    (reversed_rows, lambda r: (r.random((9, 3)),)),
    (lower_triangle, lambda r: (r.random((5, 5)),)),
]
ROLLED = [gauss_seidel_rows, jacobi_rows, recurrence, covariance_rows, window_sum, column_scan,
          reversed_rows, lower_triangle]


def _check(fn, args, backend):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert_matches_plain(fn, args, dynexpr.capture(fn, backend=backend))
    # The cpu backend compiles the loop itself (no fallback to NumPy op by op).
    assert not [w for w in caught if "dynexpr" in str(w.message)], [str(w.message) for w in caught]


@pytest.mark.parametrize("backend", ["eager", "cpu"])
@pytest.mark.parametrize("fn,make", CASES, ids=[c[0].__name__ for c in CASES])
def test_offset_loop_matches_numpy(fn, make, backend):
    for seed in (0, 1):
        _check(fn, make(np.random.default_rng(seed)), backend)


@pytest.mark.parametrize("fn,make", CASES, ids=[c[0].__name__ for c in CASES])
def test_offset_loop_is_rolled(fn, make):
    g = translate(fn, list(make(np.random.default_rng(0)))).graph
    loops = [v for v in g.values if v.op == "loop"]
    if fn in ROLLED:
        assert loops, g.canonical()
        body = loops[-1].attr("body").graph
        assert any(it[0] in ("dyn", "dslice") for v in body.values
                   if v.op in ("getitem", "setitem") for it in v.attr("index")), body.canonical()
    else:
        assert not loops, g.canonical()


def test_offset_unit_does_not_grow_with_rows():
    """16 and 64 rows of a recurrence: one body, whose unit differs only in sizes."""
    r = np.random.default_rng(4)
    sizes = [len(runtime.plan(translate(recurrence, [r.random(n), 0.5, r.random(n)]).graph)
                 .source) for n in (16, 64)]
    assert abs(sizes[0] - sizes[1]) < 64, sizes
