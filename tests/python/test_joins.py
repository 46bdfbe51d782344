"""np.roll, np.concatenate, the stacking functions and np.pad are captured as stores into a new
array (Note [joins as stores into a new array] in bridge/dynexpr/capture/np_join.py), in
code written the way scientists write it; what NumPy refuses still raises NumPy's error.
The corpus (corpus_arrays.py: periodic_stencils, padded_stencils, joins) checks the forms
one by one."""

import numpy as np
import pytest

import dynexpr
from compare import assert_same

RNG = np.random.default_rng(2026)


def heat_periodic(u, steps=60, nu=0.2):
    """Explicit heat equation on a periodic grid: the 5-point Laplacian by np.roll."""
    for _ in range(steps):
        lap = (np.roll(u, 1, axis=0) + np.roll(u, -1, axis=0)
               + np.roll(u, 1, axis=1) + np.roll(u, -1, axis=1) - 4.0 * u)
        u = u + nu * lap
    return u


def smoothing_history(x, steps=8):
    """Each step of a periodic 1-D smoother kept, then stacked into (steps, n)."""
    rows = []
    for _ in range(steps):
        x = 0.25 * np.roll(x, 1) + 0.5 * x + 0.25 * np.roll(x, -1)
        rows.append(x)
    return np.stack(rows), np.concatenate(rows[-2:])


def blur_edges(img, passes=3):
    """A 3x3 box blur repeated, the borders padded by repeating the edge pixels."""
    for _ in range(passes):
        p = np.pad(img, 1, mode="edge")
        img = (p[:-2, :-2] + p[:-2, 1:-1] + p[:-2, 2:] + p[1:-1, :-2] + p[1:-1, 1:-1]
               + p[1:-1, 2:] + p[2:, :-2] + p[2:, 1:-1] + p[2:, 2:]) / 9.0
    return img


def _captured_whole(f, *args):
    ex = dynexpr.explain(f, *args)
    assert ex.graph_count == 1 and ex.graph_break_count == 0, ex.break_reasons


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn, shape", [(heat_periodic, (48, 70)), (blur_edges, (40, 52))],
                         ids=["periodic heat loop", "edge-padded blur"])
def test_stencils_are_captured_whole_and_match_numpy(fn, shape, dtype):
    u = RNG.random(shape).astype(dtype)
    f = dynexpr.capture(fn)
    for _ in range(2):
        assert_same(fn(u), f(u))
    _captured_whole(fn, u)


def test_stacking_a_list_built_in_a_loop():
    x = RNG.standard_normal(500)
    f = dynexpr.capture(smoothing_history)
    for _ in range(2):
        assert_same(smoothing_history(x), f(x))
    _captured_whole(smoothing_history, x)


def test_a_python_list_in_a_join_is_a_graph_break_with_the_way_out():
    def f(x):
        return np.concatenate(([1.0, 2.0], x)) * 2

    x = RNG.standard_normal(20)
    assert_same(f(x), dynexpr.capture(f)(x))
    ex = dynexpr.explain(f, x)
    assert ex.graph_break_count == 1
    assert "np.asarray" in ex.break_reasons[0].reason


@pytest.mark.parametrize("fn, args", [
    (lambda a, b: np.concatenate((a, b)), (np.ones((3, 4)), np.ones(4))),
    (lambda a, b: np.concatenate((a, b), axis=1), (np.ones((3, 4)), np.ones((2, 4)))),
    (lambda a, b: np.stack((a, b)), (np.ones(3), np.ones(4))),
    (lambda a, b: np.roll(a, 1, axis=2), (np.ones((3, 4)), None)),
    (lambda a, b: np.concatenate((a, a), dtype=np.int32), (np.ones(3), None)),
    (lambda a, b: np.pad(a, -1), (np.ones(3), None)),
    (lambda a, b: np.pad(a, 1.5), (np.ones(3), None)),
    (lambda a, b: np.pad(a, ((1, 2), (3, 4), (5, 6))), (np.ones((3, 4)), None)),
    (lambda a, b: np.pad(a, 1, mode="edge"), (np.ones((0, 3)), None)),
])
def test_what_numpy_refuses_raises_numpys_error(fn, args):
    with pytest.raises(Exception) as plain:
        fn(*args)
    with pytest.raises(type(plain.value)) as captured:
        dynexpr.capture(fn)(*args)
    assert str(captured.value) == str(plain.value)


def test_roll_truncates_each_float_shift_as_numpy_does():
    x = np.arange(10.0)

    def f(v):  # a tuple of shifts with axis None: each part truncated, then added
        return (np.roll(v, -1.5) + np.roll(v, 2.7), np.roll(v, (1.5, 1.5)),
                np.roll(v, (0.6, 0.6, 0.6)), np.roll(v, (2**62, 2**62)))

    assert_same(f(x), dynexpr.capture(f)(x))


def test_a_join_result_is_a_new_array():
    """np.roll by 0 and a one-part concatenate copy, as NumPy's do: writing the result
    must not change the input."""
    def f(x):
        a, b = np.roll(x, 0), np.concatenate((x,))
        a[0] = -1.0
        b[1] = -2.0
        return a, b

    x = RNG.standard_normal(16)
    keep = x.copy()
    assert_same(f(x.copy()), dynexpr.capture(f)(x))
    assert_same(keep, x)
