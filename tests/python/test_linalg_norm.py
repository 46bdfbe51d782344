"""np.linalg.norm captured as the reductions of NumPy's own definition (Note [norms as
reductions] in dynexpr/capture/np_linalg.py): every order and axis form compared with plain
NumPy (values, dtype, shape), fused with the work around it in one graph; the orders that
need singular values break with a reason and are still right."""

import numpy as np
import pytest

import dynexpr
from compare import assert_same

RNG = np.random.default_rng(7)


def arr(shape, dtype):
    x = RNG.standard_normal(shape) * 3
    return x.astype(dtype)


VECTOR_ORDS = [None, 2, 1, np.inf, -np.inf, 0, 3, 0.5]
MATRIX_ORDS = [None, "fro", 1, -1, np.inf, -np.inf]


def _one_graph(fn, *args):
    ex = dynexpr.explain(fn, *args)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex.break_reasons


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
@pytest.mark.parametrize("ord_", VECTOR_ORDS)
def test_vector_norms(dtype, ord_):
    def fn(x):
        return np.linalg.norm(x * 2 - 1, ord=ord_)

    x = arr((1000,), dtype)
    x[::7] = 0  # the 0-"norm" counts nonzeros
    f = dynexpr.capture(fn)
    assert_same(fn(x), f(x))
    assert_same(fn(x), f(x))
    _one_graph(fn, x)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("ord_", MATRIX_ORDS)
@pytest.mark.parametrize("axis", [None, (0, 1), (1, 0)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_matrix_norms(dtype, ord_, axis, keepdims):
    def fn(a):
        return np.linalg.norm(np.tanh(a), ord=ord_, axis=axis, keepdims=keepdims)

    a = arr((37, 53), dtype)
    f = dynexpr.capture(fn)
    assert_same(fn(a), f(a))
    _one_graph(fn, a)


@pytest.mark.parametrize("axis", [0, 1, -1, (2,)])
@pytest.mark.parametrize("ord_", [None, 1, np.inf])
def test_norms_along_an_axis(axis, ord_):
    def fn(x):
        return x / np.linalg.norm(x, ord=ord_, axis=axis, keepdims=True)

    x = arr((4, 6, 5), "float64")
    f = dynexpr.capture(fn)
    assert_same(fn(x), f(x))
    _one_graph(fn, x)


def test_flat_two_norm_of_any_rank_and_keepdims():
    def fn(x):
        return np.linalg.norm(x), np.linalg.norm(x, keepdims=True)

    x = arr((3, 4, 5), "float32")
    assert_same(fn(x), dynexpr.capture(fn)(x))


def test_power_iteration_with_norm_stays_right():
    def power_iteration(A, iters):
        v = np.ones(A.shape[0]) / np.sqrt(A.shape[0])
        for _ in range(iters):
            w = A @ v
            v = w / np.linalg.norm(w)
        return v, v @ A @ v

    M = arr((40, 40), "float64")
    A = M @ M.T
    f = dynexpr.capture(power_iteration)
    assert_same(power_iteration(A, 30), f(A, 30))


@pytest.mark.parametrize("ord_", [2, -2, "nuc"])
def test_singular_value_orders_break_and_stay_right(ord_):
    def fn(a):
        return np.linalg.norm(a + 1, ord=ord_)

    a = arr((6, 4), "float64")
    f = dynexpr.capture(fn)
    assert_same(fn(a), f(a))
    ex = dynexpr.explain(fn, a)
    assert ex.graph_break_count == 1 and "singular values" in ex.break_reasons[0].reason, ex


def test_bad_arguments_raise_as_numpy():
    def three_d(x):
        return np.linalg.norm(x, ord=1)  # no axis: improper number of dimensions

    def matrix_ord_on_vector(x):
        return np.linalg.norm(x[0, 0], ord="fro")

    x = arr((2, 3, 4), "float64")
    for fn in (three_d, matrix_ord_on_vector):
        with pytest.raises(ValueError):
            fn(x)
        with pytest.raises(ValueError):
            dynexpr.capture(fn)(x)
