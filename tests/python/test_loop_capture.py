"""Capture rolls an unrolled `for ... in range(...)` back into a loop node (Note [rolling
unrolled loops], capture/reroll.py): every result equals plain NumPy's (values, dtype,
shape, mutation of the caller's array) on both backends, and the unit's size does not
grow with the trip count."""

import copy

import numpy as np
import pytest

import dynexpr
from compare import assert_matches_plain, assert_same
from dynexpr import runtime
from dynexpr.capture import reroll
from dynexpr.capture.translate import translate


def heat_2d(u, k, T):
    for t in range(T):
        u[1:-1, 1:-1] = u[1:-1, 1:-1] + k * (
            u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4 * u[1:-1, 1:-1])
    return u


def leapfrog(a, b, steps):
    # Two carried arrays that trade places every step (a returned fresh array each time).
    for _ in range(steps):
        a, b = b, 2.0 * b - a + 0.01 * np.sin(b)
    return a, b


def grows(x, n):
    # The body's constant changes with the iteration, not affinely (i * i): unrolled.
    # (`x * i` rolls: Note [loop-derived scalars], capture/affine.py.)
    acc = np.zeros_like(x)
    for i in range(n):
        acc = acc + x * (i * i)
    return acc


def copy_then_update(u, steps):
    # A copy each step, as published stencils write it (un = u.copy()), f32 and a
    # Python float (NEP 50: the result stays float32).
    for _ in range(steps):
        un = u.copy()
        u[1:-1] = un[1:-1] + 0.25 * (un[2:] - 2 * un[1:-1] + un[:-2])
        u[0] = 0.0
    return u


CASES = [
    (heat_2d, lambda r, T: (r.random((9, 7)), 0.2, T)),
    (leapfrog, lambda r, T: (r.random(5), r.random(5), T)),
    (grows, lambda r, T: (r.random(4), T)),
    (copy_then_update, lambda r, T: (r.random(11).astype(np.float32), T)),
]


def _check(fn, args, backend):
    return assert_matches_plain(fn, args, dynexpr.capture(fn, backend=backend))


@pytest.mark.parametrize("backend", ["eager", "cpu"])
@pytest.mark.parametrize("fn,make", CASES, ids=[c[0].__name__ for c in CASES])
@pytest.mark.parametrize("T", [0, 1, 2, 3, 7])
def test_rolled_loop_matches_numpy(fn, make, T, backend):
    got, got_args = _check(fn, make(np.random.default_rng(T), T), backend)
    if fn in (heat_2d, copy_then_update):
        assert got is got_args[0], "returns the caller's array itself, as NumPy does"


def _graph(fn, args):
    return translate(fn, list(copy.deepcopy(args))).graph


@pytest.mark.parametrize("fn,make", [CASES[0], CASES[1], CASES[3]], ids=["heat_2d", "leapfrog",
                                                                        "copy_then_update"])
def test_body_becomes_one_loop_node(fn, make):
    g = _graph(fn, make(np.random.default_rng(0), 7))
    assert g.ops().count("loop") == 1, g.canonical()


def test_changing_body_stays_unrolled():
    g = _graph(grows, (np.ones(4), 7))
    assert "loop" not in g.ops()


def test_unit_size_does_not_grow_with_trip_count():
    """10 and 1000 steps give the same unit: the stop is a 0-d input read from the
    argument at call time, so the source (the cache key) has no T in it."""
    r = np.random.default_rng(1)
    plans = [runtime.plan(_graph(heat_2d, (r.random((16, 16)), 0.1, T))) for T in (10, 1000)]
    assert plans[0].key == plans[1].key
    assert len(plans[1].source) < 8000, len(plans[1].source)


def test_new_trip_count_compiles_nothing():
    """A new T translates again (its value was read), but the unit is in the cache."""
    from dynexpr import cxx

    captured = dynexpr.capture(heat_2d, backend="cpu")
    r = np.random.default_rng(3)
    for T in (5, 9, 40):
        if T == 9:
            before = cxx.stats["compiles"]
        u = r.random((10, 10))
        expected = heat_2d(u.copy(), 0.2, T)
        got = captured(u, 0.2, T)
        assert_same(expected, got)
        assert got is u
    assert cxx.stats["compiles"] == before
    assert captured.cache_info().entries == 3


def test_stop_from_a_global(monkeypatch):
    """range(N) over a module global: the stop is read from the global at call time."""
    monkeypatch.setitem(globals(), "N_STEPS", 6)

    def f(u):
        for _ in range(N_STEPS):  # noqa: F821
            u[1:] = u[1:] + 0.5 * u[:-1]
        return u

    for n in (6, 4):
        monkeypatch.setitem(globals(), "N_STEPS", n)
        u = np.arange(5.0)
        expected = u.copy()
        for _ in range(n):
            expected[1:] = expected[1:] + 0.5 * expected[:-1]
        assert_same(expected, dynexpr.capture(f, backend="eager")(u))


def test_rolling_can_be_turned_off():
    """The unrolled graph (the reference the rolled one is checked against) is still there."""
    args = (np.random.default_rng(2).random((6, 6)), 0.1, 5)
    reroll.ENABLED = False
    try:
        g = _graph(heat_2d, args)
    finally:
        reroll.ENABLED = True
    assert "loop" not in g.ops() and g.ops().count("setitem") == 5
