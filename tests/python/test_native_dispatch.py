"""The native hit path (Note [the native hit path] in bridge/native/dispatch.c): a call
that hits a plain compiled entry runs its kernel from C. These check that it returns
what the Python path returns, counts its hits, holds no references, raises what the
kernel raises, and hands every other call to the Python path."""

import gc
import sys
import weakref

import numpy as np
import pytest

import dynexpr

_native = pytest.importorskip("dynexpr._native", reason="the native extension is not built")


@pytest.fixture
def compiled_path():
    """The compiled path from the first call, without the judge (Note [judging an
    entry]) or a background compile in between."""
    saved = dynexpr.config.plain_fallback, dynexpr.config.background_compile
    dynexpr.config.plain_fallback = False
    dynexpr.config.background_compile = False
    yield
    dynexpr.config.plain_fallback, dynexpr.config.background_compile = saved


def scaled_tanh(x, y):
    return np.tanh(x) * 2.0 + y


def test_captured_functions_are_dispatch_objects(compiled_path):
    f = dynexpr.capture(scaled_tanh)
    assert isinstance(f, _native.Dispatch)
    assert f.__name__ == "scaled_tanh" and f.__wrapped__ is scaled_tanh


def test_hits_return_the_plain_values_and_are_counted(compiled_path):
    f = dynexpr.capture(scaled_tanh)
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(100), rng.standard_normal(100)
    first = f(x, y)
    entry = f._entries[0]
    assert entry.arg_index == (0, 1) and entry.direct is not None and entry.judge is None
    hits = f.cache_info().hits
    for _ in range(10):
        got = f(x, y)
        want = scaled_tanh(x, y)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-12)
        assert got is not first  # a new output array each call
    assert f.cache_info().hits == hits + 10
    # A new shape misses the entry: the Python path adds one, and the next call hits it.
    x2, y2 = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    np.testing.assert_allclose(f(x2, y2), scaled_tanh(x2, y2), rtol=1e-12)
    np.testing.assert_allclose(f(x2, y2), scaled_tanh(x2, y2), rtol=1e-12)
    assert f.cache_info().entries >= 2


def test_hits_hold_no_references(compiled_path):
    f = dynexpr.capture(scaled_tanh)
    x, y = np.ones(16), np.arange(16.0)
    for _ in range(1000):
        f(x, y)
    rx, ry = sys.getrefcount(x), sys.getrefcount(y)
    for _ in range(100_000):
        f(x, y)
    assert (sys.getrefcount(x), sys.getrefcount(y)) == (rx, ry)
    out = f(x, y)
    assert sys.getrefcount(out) == 2  # only `out` holds it


def test_a_dropped_captured_function_is_collected(compiled_path):
    f = dynexpr.capture(scaled_tanh)
    f(np.ones(8), np.ones(8))
    ref = weakref.ref(f)
    del f
    gc.collect()
    assert ref() is None


def test_keywords_and_other_arities_take_the_python_path(compiled_path):
    def axpy(a, x, y=None):
        return a * x + (0.0 if y is None else y)

    f = dynexpr.capture(axpy)
    x, y = np.arange(5.0), np.ones(5)
    for args, kwargs in [((2.0, x, y), {}), ((2.0, x), {}), ((2.0,), {"x": x, "y": y}),
                         ((), {"a": 3.0, "x": x})]:
        got, want = f(*args, **kwargs), axpy(*args, **kwargs)
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype
    with pytest.raises(TypeError):
        f(1.0, x, y, 4)  # what Python raises for the plain function


def test_results_that_are_not_one_output(compiled_path):
    def pair(x):
        return x + 1, x  # a tuple, one item an argument as it is

    def same(x):
        return x

    f, g = dynexpr.capture(pair), dynexpr.capture(same)
    x = np.arange(6.0)
    for _ in range(3):
        a, b = f(x)
        np.testing.assert_array_equal(a, x + 1)
        assert b is x
        assert g(x) is x


def test_a_kernel_error_raises_on_the_hit_path(compiled_path):
    def reciprocal(x):
        return 1.0 / x

    f = dynexpr.capture(reciprocal)
    good, bad = np.arange(1.0, 9.0), np.array([1.0, 0.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
    f(good)
    assert f._entries[0].direct is not None
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            reciprocal(bad)
        with pytest.raises(FloatingPointError):
            f(bad)
        np.testing.assert_array_equal(f(good), reciprocal(good))


def test_the_judged_path_still_answers():
    # plain_fallback on (the default): the entry is judged first, through the Python
    # path, and then runs whichever path won.
    f = dynexpr.capture(scaled_tanh)
    x, y = np.linspace(-1, 1, 64), np.ones(64)
    for _ in range(40):
        np.testing.assert_allclose(f(x, y), scaled_tanh(x, y), rtol=1e-12)
