"""Stopping the unrolling of a long for-range loop early (Note [stopping the unrolling
early], capture/truncate.py): the translation of a rollable loop runs a fixed number of
iterations whatever T, and every loop whose later iterations could differ from the first
ones (a branch on i, a clipped or floor-divided index, a list that grows, a value of the
last iteration used after the loop) still gives plain NumPy's result."""

import copy

import numpy as np
import pytest

import dynexpr
from compare import assert_matches_plain, assert_same
from dynexpr.capture import truncate
from dynexpr.capture.translate import translate


def heat_2d(u, k, T):
    for t in range(T):
        u[1:-1, 1:-1] = u[1:-1, 1:-1] + k * (
            u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4 * u[1:-1, 1:-1])
    return u


def recurrence(x, a, b, T):
    for i in range(1, T):
        x[i] = a * x[i - 1] + b[i]
    return x


def branch_on_t(u, T):
    for t in range(T):
        if t == 40:
            u[0] = 5.0
        u[1:] = u[1:] * 0.5 + u[:-1] * 0.5
    return u


def clipped_index(a, out):
    n = a.shape[0]
    for i in range(out.shape[0]):
        out[i] = a[min(i + 1, n - 1)] * 2.0
    return out


def floor_index(a, out):
    for i in range(out.shape[0]):
        out[i] = a[i // 10] + 1.0
    return out


def times_t(x, T):
    # t * t is not affine in t (`t * 0.001` is: Note [loop-derived scalars], affine.py).
    for t in range(T):
        x = x * 0.99 + (t * t) * 1e-6
    return x


def grows_a_list(u, T):
    seen = []
    for _ in range(T):
        u[1:] = u[1:] + u[:-1] * 0.1
        seen.append(1)
    return u, len(seen)


def index_after_loop(u, T):
    n = u.shape[0]
    for i in range(T):
        j = n - 1 - (i % 1)  # `%`: read as a value, so every iteration is translated
        u[1:] = u[1:] * 0.9
    return u * i, j


def affine_after_loop(u, T):
    for i in range(T):
        j = 2 * i + 1
        u[1:] = u[1:] * 0.9 + 0.1
    return u, i, j


def last_intermediate(u, T):
    for _ in range(T):
        tmp = u * 2.0
        u = tmp - u * 0.5
    return u, tmp


CASES = [
    (heat_2d, lambda r: (r.random((9, 8)), 0.1, 300)),
    (recurrence, lambda r: (r.random(400), 0.9, r.random(400), 350)),
    (branch_on_t, lambda r: (r.random(7), 60)),
    (clipped_index, lambda r: (r.random(30), np.zeros(30))),
    (floor_index, lambda r: (r.random(8), np.zeros(70))),
    (times_t, lambda r: (r.random(5), 20)),  # 50: a 50-link unrolled chain, past g++'s depth
    (grows_a_list, lambda r: (r.random(6), 40)),
    (index_after_loop, lambda r: (r.random(6), 30)),
    (affine_after_loop, lambda r: (r.random(6), 30)),
    (last_intermediate, lambda r: (r.random(6), 30)),
]


@pytest.mark.parametrize("backend", ["eager", "cpu"])
@pytest.mark.parametrize("fn,make", CASES, ids=[c[0].__name__ for c in CASES])
def test_long_loop_matches_numpy(fn, make, backend):
    args = make(np.random.default_rng(0))
    assert_matches_plain(fn, args, dynexpr.capture(fn, backend=backend))


def _translated_iterations(monkeypatch, fn, args) -> tuple[int, bool]:
    """(the most iterations of one loop the translation ran, whether one stopped early)"""
    seen, stopped = [0], [False]
    real = truncate.stop_early

    def spy(frame, it):
        seen[0] = max(seen[0], len(it.marks[1]) - 1)
        r = real(frame, it)
        stopped[0] |= r
        return r

    monkeypatch.setattr(truncate, "stop_early", spy)
    g = translate(fn, list(copy.deepcopy(args))).graph
    assert g.ops().count("loop") >= 1, g.canonical()
    return seen[0], stopped[0]


@pytest.mark.parametrize("T", [20, 1000, 5000])
def test_translation_does_not_grow_with_trip_count(monkeypatch, T):
    """heat_2d and a dynamic-offset recurrence translate AT iterations for any long T
    (5000 is past the unrolling budget: the loop is captured, not a graph break)."""
    r = np.random.default_rng(T)
    n, stopped = _translated_iterations(monkeypatch, heat_2d, (r.random((8, 8)), 0.1, T))
    assert stopped and n == truncate.AT
    n, stopped = _translated_iterations(monkeypatch, recurrence,
                                        (r.random(T + 1), 0.5, r.random(T + 1), T))
    assert stopped and n == truncate.AT


@pytest.mark.parametrize("fn,make", [CASES[2], CASES[3], CASES[4], CASES[5], CASES[6]],
                         ids=["branch_on_t", "clipped_index", "floor_index", "times_t",
                              "grows_a_list"])
def test_loops_that_may_change_are_translated_to_the_end(monkeypatch, fn, make):
    seen, stopped = [False], None
    real = truncate.stop_early

    def spy(frame, it):
        r = real(frame, it)
        seen[0] |= r
        return r

    monkeypatch.setattr(truncate, "stop_early", spy)
    translate(fn, list(make(np.random.default_rng(1))))
    assert not seen[0], stopped


def test_long_loop_past_the_budget_runs_compiled():
    """T = 3000 (past the 1000 iterations capture unrolls): one entry, no graph break."""
    u = np.random.default_rng(5).random((6, 6))
    expected = heat_2d(u.copy(), 0.05, 3000)
    captured = dynexpr.capture(heat_2d, backend="cpu")
    got = captured(u, 0.05, 3000)
    assert_same(expected, got)
    assert got is u
    ex = dynexpr.explain(heat_2d, u.copy(), 0.05, 3000)
    assert ex.graph_break_count == 0, ex.break_reasons


def heat_1d_and_t(u, T):
    for t in range(T):
        u[1:-1] = u[1:-1] + 0.1 * (u[2:] - 2 * u[1:-1] + u[:-2])
    return u, t


def _run_all(fn, calls, backend="cpu"):
    captured = dynexpr.capture(fn, backend=backend)
    for args in calls:
        expected_args, got_args = copy.deepcopy(args), copy.deepcopy(args)
        expected = fn(*expected_args)
        assert_same(expected, captured(*got_args))
        assert_same(expected_args[0], got_args[0], "argument after the call")
    return captured


def test_new_trip_count_reuses_the_entry():
    """T's VALUE guard is relaxed to `T > 0` for a truncated, rolled loop (relax.py): a
    new T (past the truncation threshold) neither translates nor compiles again."""
    r = np.random.default_rng(7)
    calls = [(r.random((7, 6)), 0.1, T) for T in (30, 200, 45)]
    captured = _run_all(heat_2d, calls)
    assert captured.cache_info().entries == 1
    _run_all(heat_2d, [(r.random((7, 6)), 0.1, 5)])  # short: its own (exact) entry


def test_relaxed_guard_keeps_offsets_in_bounds():
    """x[i] with x of 40 elements: T up to 40 shares the entry; T = 41 indexes past the
    end, so it is not taken: it translates again and raises IndexError as NumPy does."""
    r = np.random.default_rng(8)
    calls = [(r.random(40), 0.5, r.random(40), T) for T in (30, 40, 12)]
    captured = _run_all(recurrence, calls)
    assert captured.cache_info().entries == 1
    x = r.random(40)
    with pytest.raises(IndexError):
        recurrence(x.copy(), 0.5, r.random(40), 41)
    with pytest.raises(IndexError):
        captured(x, 0.5, r.random(40), 41)


def test_loop_variable_read_after_the_loop_keeps_the_value_guard():
    r = np.random.default_rng(9)
    captured = _run_all(heat_1d_and_t, [(r.random(9), T) for T in (30, 40)])
    assert captured.cache_info().entries == 2


def test_long_loop_that_cannot_stop_early_breaks_before_it_as_before():
    """Past the unrolling budget, a loop that reads i as a value (branch_on_t) cannot
    stop early: the translation starts over and breaks before the loop, as it always
    did (never part way through it), and the result is NumPy's."""
    u = np.random.default_rng(10).random(7)
    expected = branch_on_t(u.copy(), 3000)
    assert_same(expected, dynexpr.capture(branch_on_t, backend="eager")(u, 3000))
    ex = dynexpr.explain(branch_on_t, u.copy(), 3000)
    assert any("unrolls loops of at most" in r for r in map(str, ex.break_reasons)), \
        ex.break_reasons
