"""Nested loops whose inner trip count moves with the outer variable (Note [nested
loops] in capture/reroll.py): `for k in range(n): ... for j in range(k + 1, n):` rolls
into an outer loop node holding an inner one, so the graph does not grow with n. Every
result equals plain NumPy's (values, dtype, shape, the caller's arrays after the call)
on both backends."""

import os
import sys

import numpy as np
import pytest

import dynexpr
from compare import assert_matches_plain
from dynexpr.capture.translate import translate

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "scientific"))
# Modified Gram-Schmidt, column by column: R[k, j] for j > k (the corpus's own).
from sci_linalg import modified_gram_schmidt as gram_schmidt  # noqa: E402


def eliminate(A, b):
    # Gaussian elimination without pivoting, row operations under the diagonal
    # (float32 throughout: the caller's arrays are updated in place).
    n = A.shape[0]
    for k in range(n - 1):
        for i in range(k + 1, n):
            f = A[i, k] / A[k, k]
            A[i, k:] = A[i, k:] - f * A[k, k:]
            b[i] = b[i] - f * b[k]
    return A, b


def pair_distances(X):
    # Upper triangle of a distance matrix, one pair at a time, mirrored.
    n = X.shape[0]
    D = np.zeros((n, n), dtype=X.dtype)
    for i in range(n):
        for j in range(i + 1, n):
            d = np.sqrt(np.sum((X[i] - X[j]) ** 2))
            D[i, j] = d
            D[j, i] = d
    return D


def sweep_rows(U, w):
    # Row k, scaled, is taken from every row below it (the caller's array in place).
    n = U.shape[0]
    for k in range(n):
        U[k] = U[k] * w
        for i in range(k + 1, n):
            U[i] = U[i] - 0.1 * U[k]
    return U


def smooth_tail(x):
    # Pass k smooths x[k+1:] left to right, each element with its updated neighbour.
    n = x.shape[0]
    for k in range(n):
        for i in range(k + 1, n):
            x[i] = 0.5 * (x[i] + x[i - 1])
    return x


def upper_covariance(X):
    # The upper triangle of X.T @ X, one entry at a time.
    n = X.shape[1]
    C = np.zeros((n, n))
    for i in range(n):
        C[i, i] = X[:, i] @ X[:, i]
        for j in range(i + 1, n):
            C[i, j] = X[:, i] @ X[:, j]
    return C


def _spd(r, n, dtype=np.float64):
    M = r.standard_normal((n, n))
    return (M @ M.T + n * np.eye(n)).astype(dtype)


CASES = [
    (gram_schmidt, lambda r, n: (r.standard_normal((3 * n, n)),)),
    (eliminate, lambda r, n: (_spd(r, n, np.float32), r.standard_normal(n).astype(np.float32))),
    (pair_distances, lambda r, n: (r.standard_normal((n, 3)),)),
    (upper_covariance, lambda r, n: (r.standard_normal((2 * n, n)),)),
    (sweep_rows, lambda r, n: (r.standard_normal((n, 5)), 0.9)),
    (smooth_tail, lambda r, n: (r.standard_normal(n).astype(np.float32),)),
]
IDS = [c[0].__name__ for c in CASES]
# Every case rolls: eliminate's A[i, k:] has an extent that moves with the outer
# variable (Note [dynamic extents], ir.py); pair_distances and upper_covariance read
# X[j], a view the graph shared with earlier outer iterations (Note [views shared
# across iterations]).


def _loops(g):
    """The loop nodes of g and of its loops' bodies, and the deepest nesting."""
    found, depth, todo = [], 0, [(g, 0)]
    while todo:
        graph, d = todo.pop()
        for v in graph.values:
            if v.op == "loop":
                found.append(v)
                depth = max(depth, d + 1)
                todo.append((v.attr("body").graph, d + 1))
    return found, depth


@pytest.mark.parametrize("backend", ["eager", "cpu"])
@pytest.mark.parametrize("fn,make", CASES, ids=IDS)
def test_nested_loop_matches_numpy(fn, make, backend):
    for n in (9, 13):
        r = np.random.default_rng(n)
        assert_matches_plain(fn, make(r, n), dynexpr.capture(fn, backend=backend))


@pytest.mark.parametrize("fn,make", CASES, ids=IDS)
def test_nested_loop_is_rolled_and_does_not_grow_with_n(fn, make):
    sizes = []
    for n in (12, 24):
        g = translate(fn, list(make(np.random.default_rng(0), n))).graph
        loops, depth = _loops(g)
        assert depth == 2, g.canonical()  # a loop node inside a loop body
        inner = [v for v in loops if isinstance(v.attr("start"), tuple)]
        assert inner, "no inner loop starts at an offset of the outer variable"
        sizes.append(len(g.values))
    assert sizes[0] == sizes[1], sizes  # the unrolled lead and tail do not depend on n


def test_nested_loop_start_moves_with_the_outer_variable():
    """The inner node's start is ("dyn", k, mul, add) over its last argument, which is
    the outer body's loop variable."""
    g = translate(gram_schmidt, [np.random.default_rng(1).standard_normal((30, 10))]).graph
    loops, _ = _loops(g)
    (inner,) = [v for v in loops if isinstance(v.attr("start"), tuple)]
    kind, k, mul, add = inner.attr("start")
    # range(k + 1, n) less its first iteration, which stays unrolled before the node
    assert (kind, k, mul, add) == ("dyn", len(inner.args) - 1, 1, 2)
    outer = next(v for v in loops if any(x is inner for x in v.attr("body").graph.values))
    assert inner.args[-1] is outer.attr("body").graph.values[0]  # the outer i


def banded_passes(x, passes):
    # Three levels: each pass p sweeps k over the array, and each k smooths x[k+1:]
    # (the inner trip count moves with k; the middle loop's does not move with p).
    n = x.shape[0]
    for p in range(passes):
        for k in range(n):
            for i in range(k + 1, n):
                x[i] = 0.5 * (x[i] + x[i - 1]) + 0.01 * p
    return x


@pytest.mark.parametrize("backend", ["eager", "cpu"])
def test_three_levels_match_numpy(backend):
    r = np.random.default_rng(5)
    assert_matches_plain(banded_passes, (r.standard_normal(10), 4),
                         dynexpr.capture(banded_passes, backend=backend))


def test_three_levels_do_not_grow_with_n():
    sizes = []
    for n in (10, 16):
        g = translate(banded_passes, [np.random.default_rng(0).standard_normal(n), 4]).graph
        assert _loops(g)[1] >= 2, g.canonical()
        sizes.append(len(g.values))
    assert sizes[0] == sizes[1], sizes
