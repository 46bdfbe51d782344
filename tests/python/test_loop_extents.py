"""Loops whose slices change extent with the loop variable (Note [dynamic extents],
ir.py): `L[i, :i] @ x[:i]`, `U[i, i+1:]`, `A[j+1:, j]` keep the loop rolled (reroll.py),
the body computing each extent from i. Scientist-style code, every result equal to plain
NumPy's (values, dtype, shape, the caller's arrays after the call) on both backends,
including the iterations where a slice is empty (a dot or sum over 0 elements is 0)."""

import warnings

import numpy as np
import pytest

import dynexpr
from compare import assert_matches_plain
from dynexpr import runtime
from dynexpr.capture.translate import translate


def forward_solve(L, b):
    # Lower-triangular solve by rows: row i uses the i unknowns already found.
    n = L.shape[0]
    x = np.zeros_like(b)
    for i in range(n):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]
    return x


def backward_solve(U, b):
    # Upper-triangular solve from the last row up, np.dot over the tail.
    n = U.shape[0]
    x = np.zeros(n)
    for i in range(n - 1, -1, -1):
        x[i] = (b[i] - np.dot(U[i, i + 1:], x[i + 1:])) / U[i, i]
    return x


def cholesky_by_columns(A):
    # Column j of L from the columns before it: a row of length j, a block (n-j-1) x j.
    n = A.shape[0]
    L = np.zeros_like(A)
    for j in range(n):
        L[j, j] = np.sqrt(A[j, j] - np.sum(L[j, :j] ** 2))
        L[j + 1:, j] = (A[j + 1:, j] - L[j + 1:, :j] @ L[j, :j]) / L[j, j]
    return L


def prefix_means(x, out):
    # out[i] = mean of the first i+1 elements, and the tail's sum beside it.
    n = x.shape[0]
    for i in range(n):
        out[i, 0] = x[:i + 1].mean()
        out[i, 1] = x[i + 1:].sum()
    return out


def upper_fill(A):
    # Row i from column i on: a shrinking row written through a slice.
    n = A.shape[0]
    U = np.zeros_like(A)
    for i in range(n):
        U[i, i:] = A[i, i:] * 2.0 + 1.0
    return U


def red_black_rows(u, omega, sweeps):
    # SOR on a grid, red then black points of each row: which columns a row updates
    # alternates with the row's parity (Note [period-2 bodies], reroll.py).
    for _ in range(sweeps):
        for color in (0, 1):
            for i in range(1, u.shape[0] - 1):
                j0 = 1 + (i + color) % 2
                gs = 0.25 * (u[i - 1, j0:-1:2] + u[i + 1, j0:-1:2]
                             + u[i, j0 - 1:-2:2] + u[i, j0 + 1::2])
                u[i, j0:-1:2] = (1 - omega) * u[i, j0:-1:2] + omega * gs
    return u


def alternating_update(x, y):
    # Even steps add, odd steps subtract: a body that alternates, written with an if.
    for i in range(1, x.shape[0]):
        if i % 2 == 0:
            x[i] = x[i - 1] + y[i]
        else:
            x[i] = x[i - 1] - 0.5 * y[i]
    return x


def tail_dots(x, w):
    # y[i] = x[i+1:] @ w[i+1:]: the last row's dot is over 0 elements (0.0, as NumPy).
    n = x.shape[0]
    y = np.ones(n)
    for i in range(n):
        y[i] = x[i + 1:] @ w[i + 1:]
    return y


def _lower(r, n):
    return np.tril(r.random((n, n))) + n * np.eye(n), r.random(n)


def _spd(r, n):
    a = r.random((n, n))
    return (a @ a.T + n * np.eye(n),)


CASES = [
    (forward_solve, lambda r, n: _lower(r, n)),
    (backward_solve, lambda r, n: (_lower(r, n)[0].T.copy(), r.random(n))),
    (cholesky_by_columns, _spd),
    (prefix_means, lambda r, n: (r.random(n), np.zeros((n, 2)))),
    (upper_fill, lambda r, n: (r.random((n, n)).astype(np.float32),)),
    (tail_dots, lambda r, n: (r.random(n), r.random(n))),
]
PAIRED = [
    (red_black_rows, lambda r, n: (r.random((n, n + 3)), 1.5, 2)),
    (alternating_update, lambda r, n: (r.random(n), r.random(n))),
]
PAIRED_IDS = [c[0].__name__ for c in PAIRED]
IDS = [c[0].__name__ for c in CASES]


def _check(fn, args, backend):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert_matches_plain(fn, args, dynexpr.capture(fn, backend=backend))
    assert not [w for w in caught if "dynexpr" in str(w.message)], [str(w.message) for w in caught]


@pytest.mark.parametrize("backend", ["eager", "cpu"])
@pytest.mark.parametrize("fn,make", CASES, ids=IDS)
def test_extent_loop_matches_numpy(fn, make, backend):
    # 6 rows: translated whole; 20: the translation stops early (truncate.py) and the
    # rolled loop runs the rest.
    for n in (6, 20):
        _check(fn, make(np.random.default_rng(n), n), backend)


@pytest.mark.parametrize("fn,make", CASES, ids=IDS)
def test_extent_loop_is_rolled(fn, make):
    g = translate(fn, list(make(np.random.default_rng(0), 12))).graph
    loops = [v for v in g.values if v.op == "loop"]
    assert loops, g.canonical()
    body = loops[-1].attr("body").graph
    assert any(isinstance(d, str) for v in body.values for d in v.shape), body.canonical()


@pytest.mark.parametrize("fn,make", CASES, ids=IDS)
def test_extent_unit_does_not_grow_with_rows(fn, make):
    """12 and 48 rows: one body whose unit differs only in sizes."""
    sizes = [len(runtime.plan(translate(fn, list(make(np.random.default_rng(n), n))).graph)
                 .source) for n in (12, 48)]
    assert abs(sizes[0] - sizes[1]) < 64, sizes


def test_new_size_reuses_the_rolled_entry():
    """A new n of a triangular solve: the relaxed trip count guard does not hold for a
    new matrix size (its shape is guarded), so it translates again, and is right."""
    f = dynexpr.capture(forward_solve, backend="cpu")
    for n in (10, 30, 10):
        assert_matches_plain(forward_solve, _lower(np.random.default_rng(n), n), f)


@pytest.mark.parametrize("backend", ["eager", "cpu"])
@pytest.mark.parametrize("fn,make", PAIRED, ids=PAIRED_IDS)
def test_period_two_loop_matches_numpy(fn, make, backend):
    # Even and odd trip counts: the leading iterations left unrolled make the rest pairs.
    for n in (11, 12):
        _check(fn, make(np.random.default_rng(n), n), backend)


@pytest.mark.parametrize("fn,make", PAIRED, ids=PAIRED_IDS)
def test_period_two_loop_is_rolled(fn, make):
    """Rolled as pairs, and the unit does not grow with the trip count."""
    sizes = []
    for n in (12, 48):
        g = translate(fn, list(make(np.random.default_rng(0), n))).graph
        loops = [v for v in g.values if v.op == "loop"]
        assert loops and all(v.attr("step") == 2 for v in loops), g.canonical()
        sizes.append(len(runtime.plan(g).source))
    assert abs(sizes[0] - sizes[1]) < 64 * len(loops), sizes


def partial_sums(x, out, T):
    # out[i] = x[:i+1].sum() for T steps: past len(x), Python's slice clamps to x.
    for i in range(T):
        out[i] = x[:i + 1].sum()
    return out


@pytest.mark.parametrize("backend", ["eager", "cpu"])
def test_trip_count_past_the_extent(backend):
    """A relaxed trip count (relax.py) covers only the T for which x[:i+1] has i+1
    elements: T = 45 over 30 elements clamps, translates again, and is right."""
    f = dynexpr.capture(partial_sums, backend=backend)
    r = np.random.default_rng(3)
    x = r.random(30)
    for T in (20, 27, 45, 30):
        assert_matches_plain(partial_sums, (x, np.zeros(50), T), f)


def test_loops_with_one_body_share_its_function():
    """Four half-sweep loops (2 sweeps x 2 colours) over 2 distinct bodies: the unit has
    2 body functions, not 4."""
    g = translate(red_black_rows, [np.random.default_rng(0).random((12, 15)), 1.5, 2]).graph
    assert sum(v.op == "loop" for v in g.values) == 4, g.canonical()
    assert runtime.plan(g).source.count("static void body") == 2


def many_extents(x):
    # 17 slices whose extents all move with i, each its own (i + k): more than a body
    # unit binds (frame::max_symbols), so the loop stays unrolled, and is still right.
    y = np.zeros(9)
    for i in range(1, 9):
        y[i] = (x[1:2 + i].sum() + x[2:4 + i].sum() + x[3:6 + i].sum() + x[4:8 + i].sum()
                + x[5:10 + i].sum() + x[6:12 + i].sum() + x[7:14 + i].sum() + x[8:16 + i].sum()
                + x[9:18 + i].sum() + x[10:20 + i].sum() + x[11:22 + i].sum() + x[12:24 + i].sum()
                + x[13:26 + i].sum() + x[14:28 + i].sum() + x[15:30 + i].sum() + x[16:32 + i].sum()
                + x[17:34 + i].sum())
    return y


@pytest.mark.parametrize("backend", ["eager", "cpu"])
def test_more_extents_than_a_body_binds(backend):
    x = np.random.default_rng(5).random(140)
    assert_matches_plain(many_extents, (x,), dynexpr.capture(many_extents, backend=backend))
    g = translate(many_extents, [x]).graph
    assert not [v for v in g.values if v.op == "loop"], g.canonical()
