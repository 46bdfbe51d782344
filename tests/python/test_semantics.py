"""NumPy's object semantics, beyond values: which results are the caller's arrays or
views of them, which are distinct objects, and what a write through a view changes."""

import numpy as np
import pytest

import dynexpr
from compare import assert_same


def cap(fn):
    return dynexpr.capture(fn, backend="eager")


def test_returning_the_argument_returns_the_same_object():
    x = np.arange(3.0)
    assert cap(lambda x: x)(x) is x

    def bump(x):
        x += 1
        return x

    assert cap(bump)(x) is x and x[0] == 1.0


def test_returned_views_of_arguments_share_memory_like_numpy():
    x = np.arange(6.0).reshape(2, 3)
    f = cap(lambda x: (x[1:], x.T, x.reshape(3, 2), x[:, ::2]))
    for r, e in zip(f(x), (x[1:], x.T, x.reshape(3, 2), x[:, ::2]), strict=True):
        assert np.shares_memory(r, x) and np.array_equal(r, e)
    r = f(x)[0]
    r[0, 0] = 100.0
    assert x[1, 0] == 100.0


def test_one_result_twice_is_one_object_a_copy_is_another():
    r = cap(lambda x: (lambda y: (y, y, y.copy()))(x * 2))(np.ones(3))
    assert r[0] is r[1] and r[2] is not r[0] and not np.shares_memory(r[0], r[2])


def test_scalar_indexing_copies_view_indexing_does_not():
    def g(x):
        s = x[0]
        v = x[0:1]
        x[0] = 5.0
        return s, v

    x = np.arange(3.0)
    s, v = cap(g)(x.copy())
    assert type(s) is np.float64 and s == 0.0
    assert v[0] == 5.0


def test_write_through_reshape_of_contiguous_argument():
    def g(x):
        y = x.reshape(3, 2)
        y[0] = -1.0
        return x

    x = np.arange(6.0)
    assert_same(g(x.copy()), cap(g)(x))


def test_write_after_reshape_of_non_contiguous_is_plain_python():
    def g(x):
        y = x.T.reshape(-1)  # NumPy copies here: the write must not reach x
        y[0] = -1.0
        return x, y

    x = np.arange(6.0).reshape(2, 3)
    f = cap(g)
    assert_same(g(x.copy()), f(x.copy()))
    assert "non-contiguous" in f.entries[0].reason.reason


def test_reading_a_view_after_the_base_changed():
    def g(x):
        v = x[::2]
        x += 10
        w = v + 0
        v[0] = -1.0
        return w, x

    x = np.arange(5.0)
    assert_same(g(x.copy()), cap(g)(x))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.sum(),
        lambda x: x[0, 0],
        lambda x: np.float64(2) * x[0, 0],
        lambda x: x[0, ...],
        lambda x: x[0, 0] + x[1, 1],
        lambda x: np.where(x[0, 0] > 0, 1.0, 2.0),
        lambda x: x.reshape(-1)[1:2].reshape(()),
        lambda x: (x.max(), x.argmax(), x.shape[0]),
    ],
)
def test_result_types_scalars_and_zero_d_arrays(fn):
    x = np.arange(4.0).reshape(2, 2)
    assert_same(fn(x), cap(fn)(x))


def test_mutation_inside_a_helper_reaches_the_caller():
    def clamp_(a):
        a[a.shape[0] // 2 :] = 0.0

    def g(x):
        clamp_(x)
        return x.sum()

    x = np.ones(4)
    assert_same(np.float64(2.0), cap(g)(x))
    assert_same(np.array([1.0, 1.0, 0.0, 0.0]), x)


def test_values_are_read_at_call_time_not_baked_in():
    f = cap(lambda x, y: x + y)
    x, y = np.ones(3), np.zeros(3)
    f(x, y)
    y[:] = 5.0
    assert_same(np.full(3, 6.0), f(x, y))


def test_sequence_equality_compares_contents():
    def g(x, opts):
        a = [x.ndim, 2] == [1, 2]
        b = (x.shape[0],) + (1,) == (3, 1)
        c = opts == ["fast"]
        return x * 2 if a and b and c else x

    x = np.ones(3)
    assert_same(g(x, ["fast"]), cap(g)(x, ["fast"]))
    assert_same(g(x, ["slow"]), cap(g)(x, ["slow"]))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.ravel(order="F"),
        lambda x: x.T.ravel(order="K"),
        lambda x: x.flatten(order="A"),
        lambda x: x.astype(np.int32, casting="same_kind"),
    ],
)
def test_order_and_casting_arguments_that_change_results(fn):
    x = np.arange(6.0).reshape(2, 3)
    f = cap(fn)
    try:
        expected = fn(x)
    except TypeError:
        with pytest.raises(TypeError):
            f(x)
        return
    assert_same(expected, f(x))
