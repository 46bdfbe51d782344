"""Loops of scalar work as C++ scalars (Note [scalar loop bodies], codegen_scalar.py):
recurrences written as a scientist writes them, each compared with plain NumPy (values,
dtypes, shapes, mutated arguments) on both backends; the cpu unit is checked to take the
scalar form (no body function, no frame per trip) where the body qualifies, and the
general form where it does not."""

import copy
import os
import sys
import warnings

import numpy as np
import pytest

import dynexpr
from compare import assert_matches_plain
from dynexpr import runtime
from dynexpr.capture.translate import translate

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "scientific"))

# A tridiagonal solve: two arrays updated in place, each trip reading the trip before.
from sci_linalg import thomas  # noqa: E402


def lorenz(state, dt, steps):
    traj = np.empty((steps, 3))
    x, y, z = state
    for i in range(steps):
        dx = 10.0 * (y - x)
        dy = x * (28.0 - z) - y
        dz = x * y - 8.0 / 3.0 * z
        x, y, z = x + dt * dx, y + dt * dy, z + dt * dz
        traj[i, 0] = x
        traj[i, 1] = y
        traj[i, 2] = z
    return traj


def fib_pairs(x, n):
    # Carried values that trade places, in float32: a, b = b, a + b.
    a, b = x[0], x[1]
    for _ in range(n):
        a, b = b, np.float32(0.75) * a + b * np.float32(0.5)
    return a, b


def flags_and_where(x, t):
    hit = x[0] > t
    acc = x[0] * 0.0
    for i in range(1, x.shape[0]):
        hit = hit | (x[i] > t)
        acc = np.where(x[i] > 0, acc + x[i], acc - 1.0)
    return hit, acc


def mixed_dtypes(k, w):
    # int64 elements promoted to float64 (astype in the body), small integer powers.
    s = w[0] * 0.0
    for i in range(k.shape[0]):
        s = s + k[i] * 0.5 + w[i] ** 2 - w[i] ** 3
    return s


def ar2(x, a1, a2):
    y = np.zeros_like(x)
    y[0] = x[0]
    y[1] = x[1] + a1 * y[0]
    for t in range(2, x.shape[0]):
        y[t] = x[t] + a1 * y[t - 1] + a2 * y[t - 2]
    return y


def copy_prefix(x, y, k):
    # The trip count is an input: a later call with more trips than x has elements
    # indexes past its end, an IndexError as in NumPy.
    for i in range(k):
        y[i] = x[i] * 2.0
    return y


def reciprocal_sum(x):
    s = x[0] * 0.0
    for i in range(x.shape[0]):
        s = s + 1.0 / x[i]
    return s


def column_sweep(out, x, a):
    # A slice per trip: not scalar work (the general loop).
    for j in range(1, out.shape[1]):
        out[:, j] = out[:, j - 1] * a + x[:, j]
    return out


def drawdown(prices):
    # builtin max of NumPy scalars in the recurrence (captured as where-chains).
    peak = prices[0]
    worst = prices[0] * 0.0
    dd = np.zeros_like(prices)
    for t in range(1, prices.shape[0]):
        peak = max(peak, prices[t])
        dd[t] = (peak - prices[t]) / peak
        worst = max(worst, dd[t])
    return dd, worst


def _tri(r, n):
    return (r.random(n), r.random(n) + 4.0, r.random(n), r.random(n))


CASES = [
    (lorenz, lambda r, n: (np.array([1.0, 1.0, 1.0]), 0.01, n)),
    (thomas, _tri),
    (fib_pairs, lambda r, n: (r.random(2).astype(np.float32), n)),
    (flags_and_where, lambda r, n: (r.standard_normal(n), 0.5)),
    (mixed_dtypes, lambda r, n: (r.integers(-5, 5, n), r.random(n))),
    (ar2, lambda r, n: (r.standard_normal(n), 0.5, -0.25)),
    (drawdown, lambda r, n: (np.cumsum(r.standard_normal(n)) + 100.0,)),
]
SCALAR = [f for f, _ in CASES]


@pytest.mark.parametrize("fn,make", CASES, ids=[c[0].__name__ for c in CASES])
@pytest.mark.parametrize("n", [3, 40, 500])
def test_scalar_recurrence_matches_numpy(fn, make, n, backend):
    args = make(np.random.default_rng(n), n)
    assert_matches_plain(fn, args, dynexpr.capture(fn, backend=backend))


def _source(fn, args):
    g = translate(fn, list(copy.deepcopy(args))).graph
    assert "loop" in g.ops(), g.canonical()
    return runtime.plan(g).source


@pytest.mark.parametrize("fn", SCALAR, ids=[f.__name__ for f in SCALAR])
def test_scalar_bodies_are_written_as_cpp_scalars(fn):
    make = dict(CASES)[fn]
    src = _source(fn, make(np.random.default_rng(0), 40))
    assert "static void body" not in src, src
    assert "dxk::sc<" in src and "dxk::frame L" not in src, src


def pendulum_rk4(y, dt, n):
    # the right-hand side built with np.array from NumPy scalars, as ODE code writes it
    def f(y):
        return np.array([y[1], -np.sin(y[0])])

    for _ in range(n):
        k1 = f(y)
        k2 = f(y + dt / 2 * k1)
        k3 = f(y + dt / 2 * k2)
        k4 = f(y + dt * k3)
        y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y


@pytest.mark.parametrize("n", [3, 40, 500])
def test_an_rk4_loop_whose_right_hand_side_is_np_array_rolls(n, backend):
    args = (np.array([1.0, 0.0]), 0.01, n)
    f = dynexpr.capture(pendulum_rk4, backend=backend)
    assert_matches_plain(pendulum_rk4, args, f)
    assert all(e.compiled is not None for e in f.entries)  # no graph break
    if n == 500:
        assert "loop" in translate(pendulum_rk4, list(copy.deepcopy(args))).graph.ops()


def test_a_body_with_slices_keeps_the_general_loop():
    r = np.random.default_rng(1)
    src = _source(column_sweep, (r.random((4, 9)), r.random((4, 9)), 0.5))
    assert "static void body0" in src and "dxk::sc<" not in src, src


def test_a_new_trip_count_past_the_end_raises_index_error(backend):
    f = dynexpr.capture(copy_prefix, backend=backend)
    x, y = np.arange(8.0), np.zeros(8)
    assert_matches_plain(copy_prefix, (x, y, 5), f)
    with pytest.raises(IndexError):
        copy_prefix(x, y.copy(), 12)
    with pytest.raises(IndexError):
        f(x, y.copy(), 12)
    assert_matches_plain(copy_prefix, (x, y, 8), f)  # still right afterwards


def test_division_by_zero_in_a_scalar_body_warns_as_numpy(backend):
    x = np.array([1.0, 2.0, 0.0, 4.0])
    f = dynexpr.capture(reciprocal_sum, backend=backend)
    with warnings.catch_warnings(record=True) as plain:
        warnings.simplefilter("always")
        want = reciprocal_sum(x)
    with warnings.catch_warnings(record=True) as captured:
        warnings.simplefilter("always")
        got = f(x)
    assert got == want and type(got) is type(want)
    assert [w.category for w in plain if "divide" in str(w.message)] == [RuntimeWarning]
    assert [w.category for w in captured if "divide" in str(w.message)] == [RuntimeWarning]


def test_many_trips_are_one_unit():
    # The trip count is a kernel input: 50 and 5000 trips of ar2 run one compiled unit.
    f = dynexpr.capture(ar2)
    r = np.random.default_rng(3)
    for n in (50, 5000):
        x = r.standard_normal(n)
        assert_matches_plain(ar2, (x, 0.5, -0.25), f)
    assert f.cache_info().compiles <= 2  # one per shape specialisation at most


def builtin_extremes(x):
    a, b, c = x[0], x[1], x[2]
    return max(a, b), min(a, b), max(a, b, c), min(c, b, a), max(b, a)


@pytest.mark.parametrize("values", [
    [1.0, 2.0, 3.0], [2.0, 1.0, 2.0], [np.nan, 1.0, 2.0], [1.0, np.nan, 0.5],
    [-0.0, 0.0, -0.0], [np.inf, -np.inf, np.nan]], ids=str)
def test_builtin_max_min_of_numpy_scalars_pick_as_python(values, backend):
    # Python keeps the first of equal items and compares with > (<), so a NaN first
    # stays and a NaN later is skipped; -0.0 and 0.0 tie. Same results, same types.
    for dtype in (np.float64, np.float32):
        x = np.array(values, dtype=dtype)
        with warnings.catch_warnings():
            # NumPy's comparisons report no "invalid" for a NaN; neither may the kernel's
            # (Note [quiet comparisons] in include/dynexpr/ops/scalar_support.hpp).
            warnings.simplefilter("error")
            got = dynexpr.capture(builtin_extremes, backend=backend)(x)
            want = builtin_extremes(x)
        assert [type(g) for g in got] == [type(w) for w in want]
        for g, w in zip(got, want):
            assert (np.isnan(g) and np.isnan(w)) or (g == w and np.signbit(g) == np.signbit(w))


def mixed_max(x):
    return max(x[0], 0.5)  # a Python float among them: its type would depend on the data


def test_builtin_max_with_a_python_number_still_breaks():
    ex = dynexpr.explain(mixed_max, np.array([1.0, 2.0]))
    assert ex.graph_break_count == 1
    assert "builtin max()" in ex.break_reasons[0].reason
    for x in (np.array([1.0]), np.array([0.25])):
        got, want = dynexpr.capture(mixed_max)(x), mixed_max(x)
        assert got == want and type(got) is type(want)
