"""Carried arrays of a rolled loop (Note [carried arrays in place], codegen_loop.py): a
carried array updated through a slice or an index is written in place, one buffer for
the whole loop, and every result still equals plain NumPy's (values, dtype, shape,
mutation of the caller's arrays) on both backends, including bodies whose right-hand side
reads the region it overwrites and carried arrays that trade places."""

import copy
import re
import warnings

import numpy as np
import pytest

import dynexpr
from compare import assert_matches_plain
from dynexpr import runtime
from dynexpr.capture.translate import translate


def smooth_rows(out, x, a):
    # Each column from the one before: an exponential smoother along rows.
    for j in range(1, out.shape[1]):
        out[:, j] = out[:, j - 1] * a + x[:, j]
    return out


def recurrence(x, a, b):
    for i in range(1, x.shape[0]):
        x[i] = a * x[i - 1] + b[i]
    return x


def heat(u, k, T):
    # The right-hand side reads u[1:-1] and its neighbours, which the store overwrites.
    for _ in range(T):
        u[1:-1] = u[1:-1] + k * (u[2:] - 2 * u[1:-1] + u[:-2])
    return u


def neighbours(u, T):
    # u[1:-1] = u[:-2] + u[2:]: NumPy reads both shifted slices before writing.
    for _ in range(T):
        u[1:-1] = 0.5 * (u[:-2] + u[2:])
    return u


def two_updates(u, v, T):
    # Two carried arrays, each updated in place, each reading the other's new value.
    for _ in range(T):
        u[1:] = u[1:] + 0.1 * v[:-1]
        v[:-1] = v[:-1] - 0.1 * u[1:]
    return u, v


def trade_places(a, b, T):
    # a is updated in place, then the names swap: a's entry becomes b's exit.
    for _ in range(T):
        a[1:] = a[1:] + 0.5 * b[:-1]
        a, b = b, a
    return a, b


def old_copy(u, T):
    # The old content is copied before the write and read after it.
    for _ in range(T):
        old = u.copy()
        u[1:-1] = 0.5 * u[1:-1]
        u[0] = old[1] + u[1]
    return u


def column_then_sum(out, x):
    # Reads the whole carried array after writing one column of it in the same trip.
    for j in range(1, out.shape[1]):
        out[:, j] = out[:, j - 1] + x[:, j]
        out[0, 0] = out.sum() * 1e-3
    return out


def int_counts(c, idx):
    # An integer carried array updated element by element.
    for i in range(1, c.shape[0]):
        c[i] = c[i - 1] * 3 + idx[i]
    return c


CASES = [
    (smooth_rows, lambda r, n: (r.random((5, n)), r.random((5, n)), 0.5)),
    (recurrence, lambda r, n: (r.random(n), 0.9, r.random(n))),
    (heat, lambda r, n: (r.random(11), 0.2, n)),
    (neighbours, lambda r, n: (r.random(9).astype(np.float32), n)),
    (two_updates, lambda r, n: (r.random(7), r.random(7), n)),
    (trade_places, lambda r, n: (r.random(6), r.random(6), n)),
    (old_copy, lambda r, n: (r.random(8), n)),
    (column_then_sum, lambda r, n: (r.random((4, n)), r.random((4, n)))),
    (int_counts, lambda r, n: (np.arange(n, dtype=np.int64), r.integers(0, 5, n))),
]
# Bodies whose carried array is updated from its own entry: one buffer, no per-trip copy
# (trade_places is not: a's updated entry becomes b's exit, so it ping-pongs).
IN_PLACE = [smooth_rows, recurrence, heat, neighbours, two_updates, old_copy,
            column_then_sum, int_counts]
# ... of which these update one element a trip: C++ scalars (Note [scalar loop bodies]).
SCALAR_BODIES = [recurrence, int_counts]

def _check(fn, args, backend):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = assert_matches_plain(fn, args, dynexpr.capture(fn, backend=backend))
    assert not [w for w in caught if "dynexpr" in str(w.message)], [str(w.message) for w in caught]
    return got


@pytest.mark.parametrize("backend", ["eager", "cpu"])
@pytest.mark.parametrize("fn,make", CASES, ids=[c[0].__name__ for c in CASES])
@pytest.mark.parametrize("n", [4, 9])
def test_carried_loop_matches_numpy(fn, make, n, backend):
    _check(fn, make(np.random.default_rng(n), n), backend)


def _source(fn, args):
    g = translate(fn, list(copy.deepcopy(args))).graph
    assert "loop" in g.ops(), g.canonical()
    return runtime.plan(g).source


@pytest.mark.parametrize("fn", IN_PLACE, ids=[f.__name__ for f in IN_PLACE])
def test_carried_array_is_updated_in_place(fn):
    """The body takes the carried array as an in/out argument and never copies a whole
    entry into an output buffer: a trip writes only the region it updates (before, each
    trip copied the whole array, then swapped buffers)."""
    make = dict(CASES)[fn]
    src = _source(fn, make(np.random.default_rng(0), 9))
    if fn in SCALAR_BODIES:  # Note [scalar loop bodies]: elements written into the buffer
        assert "static void body" not in src, src
        assert re.search(r"const auto (L\d+_a\d+) = L\d+_c\d+\.view\(\);", src), src
        assert re.search(r"  L\d+_a\d+\.at\([^;]*\) = s\d+;", src), src
        return
    body = src[src.index("static void body0"):src.index("static void run")]
    assert re.search(r"auto x1 = f\.inout<", body), body
    assert not re.search(r"dx::assign\(o\d+, x\d+\);", body), body


def test_body_constants_are_literals():
    """A constant every iteration shares stays a constant of the body (a C++ literal),
    not a 0-d loop invariant broadcast in each trip's kernels."""
    g = translate(heat, [np.ones(11), 0.2, 9]).graph
    (loop,) = [v for v in g.values if v.op == "loop"]
    body = loop.attr("body").graph
    assert [v.shape for v in body.inputs] == [(), (11,)], body.canonical()
    assert {v.attr("value") for v in body.values if v.op == "const"} >= {2, 0.2}


def test_long_recurrence_matches_numpy():
    """Many trips over one buffer (the trip count is an input: one unit for every n)."""
    r = np.random.default_rng(5)
    for n in (50, 3000):
        _check(recurrence, (r.random(n), 0.999, r.random(n)), "cpu")


# --- Note [loop-derived scalars] (capture/affine.py): a scalar stepping with i -------------


def forced_linear(u, f, dt, T):
    # t = i * dt, a forcing term growing with time.
    for i in range(T):
        t = i * dt
        u[1:-1] = u[1:-1] + 0.1 * (u[2:] - 2 * u[1:-1] + u[:-2]) + t * f[1:-1]
    return u


def forced_offset(u, f, t0, dt, T):
    # t = t0 + i*dt with float32 arrays (NEP 50: the Python float is converted to float32).
    for i in range(T):
        t = t0 + i * dt
        u += dt * (t * f)
    return u


def int_ramp(x, T):
    # An int scalar affine in i, applied to a float array.
    for i in range(2, T):
        x[1:] = x[1:] * 0.5 + (3 * i - 1) * x[:-1]
    return x


def quadratic(u, dt, T):
    # t = (i*i) * dt is not affine in i: the loop stays unrolled (and right).
    for i in range(T):
        u = u + (i * i) * dt
    return u


def sine_forcing(u, f, w, dt, T):
    # np.sin of the loop-derived w*t: a 0-d node on the affine constant, so it rolls.
    for i in range(T):
        u = u + np.sin(w * (i * dt)) * f
    return u


SCALARS = [
    (forced_linear, lambda r, T: (r.random(12), r.random(12), 0.01, T)),
    (forced_offset, lambda r, T: (r.random(9).astype(np.float32),
                                  r.random(9).astype(np.float32), 0.3, 0.1, T)),
    (int_ramp, lambda r, T: (r.random(6) * 1e-3, T)),
    (quadratic, lambda r, T: (r.random(5), 0.5, T)),
    (sine_forcing, lambda r, T: (r.random(5), r.random(5), 3.0, 0.01, T)),
]
AFFINE = [forced_linear, forced_offset, int_ramp, sine_forcing]


@pytest.mark.parametrize("backend", ["eager", "cpu"])
@pytest.mark.parametrize("fn,make", SCALARS, ids=[c[0].__name__ for c in SCALARS])
@pytest.mark.parametrize("T", [3, 10])
def test_loop_scalar_matches_numpy(fn, make, T, backend):
    _check(fn, make(np.random.default_rng(T), T), backend)


@pytest.mark.parametrize("fn,make", SCALARS, ids=[c[0].__name__ for c in SCALARS])
def test_affine_scalar_keeps_the_loop_rolled(fn, make):
    """T=10 and T=1000 give one loop node and the same graph (translation stopped early:
    its size does not grow with T); scalars not affine in i stay unrolled."""
    graphs = [translate(fn, list(make(np.random.default_rng(0), T))).graph for T in (10, 1000)
              if fn in AFFINE or T == 10]
    for g in graphs:
        assert g.ops().count("loop") == (1 if fn in AFFINE else 0), g.canonical()
    if fn in AFFINE:
        assert len(graphs[0].values) == len(graphs[1].values)


LONG = [c for c in SCALARS if c[0] in AFFINE]


@pytest.mark.parametrize("fn,make", LONG, ids=[c[0].__name__ for c in LONG])
def test_long_affine_loop_matches_numpy(fn, make):
    _check(fn, make(np.random.default_rng(7), 1000), "cpu")


def test_value_after_the_loop_is_pythons():
    """A loop-derived scalar read after a loop whose unrolling stopped early is the value
    Python computes (the arithmetic replayed, not mul*i + add)."""
    def f(u, dt, T):
        for i in range(T):
            t = 0.1 + (i + 1) * dt
            u[1:] = u[1:] + t * u[:-1]
        return u, t

    _check(f, (np.full(4, 1e-4), 0.37, 500), "cpu")


def test_branch_on_a_loop_derived_ufunc_stays_right():
    """A branch on np.sin(t) of a loop-derived t (a graph value now) is still NumPy's."""
    def f(u, dt, T):
        for i in range(T):
            s = np.sin(i * dt)
            if s > 0:
                u = u + s
        return u

    for T in (5, 40):
        _check(f, (np.zeros(3), 0.3, T), "cpu")


def test_zero_d_value_is_computed_once_per_trip():
    """np.sin(w * t) in the body is a 0-d kernel of its own, read as a scalar by the array
    expression (Note [0-d values are computed once], schedule.py), not fused into it and
    recomputed for every element."""
    from dynexpr import schedule

    g = translate(sine_forcing, [np.ones(5), np.ones(5), 3.0, 0.01, 50]).graph
    (loop,) = [v for v in g.values if v.op == "loop"]
    s = schedule.schedule(loop.attr("body").graph)
    (sin,) = [v for v in s.values if v.op == "sin"]
    assert isinstance(s.storage[sin.id], schedule.Buffer), s.storage[sin.id]
    src = _source(sine_forcing, (np.ones(5), np.ones(5), 3.0, 0.01, 50))
    assert re.search(r"dx::scalar<double>\(t\d+\.data\(\)\[0\]\)", src), src


def trajectory(r, x0, T):
    xs = np.empty((T, r.size))
    x = x0 * np.ones_like(r)
    for t in range(T):
        x = r * x * (1 - x)
        xs[t] = x
    return xs


def trajectory_like(u, nu, T):
    hist = np.empty_like(u, shape=(T + 1, u.size))
    hist[0] = u
    for t in range(T):
        u = u * (1 - nu) + nu
        hist[t + 1] = u
    return hist


@pytest.mark.parametrize("backend", ["eager", "cpu"])
@pytest.mark.parametrize("fn,args", [
    (trajectory, (np.linspace(2.5, 4.0, 50), 0.5, 40)),
    (trajectory, (np.linspace(2.5, 4.0, 7, dtype=np.float32), np.float32(0.25), 3)),
    (trajectory_like, (np.linspace(0, 1, 33), 0.1, 25)),
], ids=["float64", "float32", "empty_like"])
def test_preallocated_trajectory_matches_numpy(fn, args, backend):
    _check(fn, args, backend)


@pytest.mark.parametrize("fn,args", [
    (trajectory, (np.linspace(2.5, 4.0, 50), 0.5, 40)),
    (trajectory_like, (np.linspace(0, 1, 33), 0.1, 25)),
])
def test_empty_trajectory_is_neither_filled_nor_copied_into_the_loop(fn, args):
    """Note [np.empty is not filled] (capture/np_ops.py) and Note [carried buffers taken
    over] (codegen_loop.py): the np.empty buffer is not zero-filled before its rows are
    written, and the loop takes it over instead of copying it."""
    src = _source(fn, args)
    run = src[src.index("static void run"):]
    before_loop = run.split("for (std::int64_t i")[0]
    assert not re.search(r"dxk::splat\(&c\d+, dx::Shape\{\d+, \d+\}\)", before_loop), run
    assert re.search(r"auto L\d+_c\d+ = std::move\(t\d+\);", run), run
