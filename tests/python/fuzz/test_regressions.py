"""Minimal programs the differential fuzzer (test_fuzz.py) found, each compared with
plain NumPy on both backends: values, dtypes, shapes, argument mutation, exceptions."""

import numpy as np
import pytest

import dynexpr
from fuzz_check import load


def _same(fn, args, backend):
    """fn(*args) plainly and captured, on separate copies: the same result or the same
    exception type, and the same arguments afterwards; twice (the second call is a
    cache hit)."""
    captured = dynexpr.capture(fn, backend=backend)
    for _ in range(2):
        _same_once(fn, captured, args)
    return captured


def _same_once(fn, captured, args):
    # order="K": a transposed argument stays transposed in both copies.
    plain, cap = [a.copy(order="K") for a in args], [a.copy(order="K") for a in args]
    try:
        expected, e_exc = fn(*plain), None
    except Exception as e:  # noqa: BLE001
        expected, e_exc = None, e
    try:
        got, g_exc = captured(*cap), None
    except Exception as e:  # noqa: BLE001
        got, g_exc = None, e
    assert type(g_exc) is type(e_exc), f"NumPy: {e_exc!r}; captured: {g_exc!r} / {got!r}"
    if e_exc is None:
        expected = expected if isinstance(expected, tuple) else (expected,)
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(expected)
        for e, g in zip(expected, got):
            assert type(g) is type(e) and g.dtype == e.dtype and g.shape == e.shape
            np.testing.assert_array_equal(g, e)
    for e, g in zip(plain, cap):
        np.testing.assert_array_equal(g, e)


INT32 = np.arange(-3, 9, dtype=np.int32)


@pytest.mark.parametrize("src", [
    "def f(a):\n    return a == 2**31\n",
    "def f(a):\n    return a < 3000000000, a >= -2147483649, np.not_equal(a, 2**40)\n",
    "def f(a):\n    return 2**31 > a, np.less_equal(-2**63 - 1, a.astype(np.int64))\n",
    "def f(a):\n    a[...] = (a == 2**31)\n    return a\n",
], ids=["eq", "three", "reflected", "setitem"])
def test_compare_with_python_int_out_of_range(src, backend):
    """NumPy 2 compares an int32 array with an out-of-range Python int by value (found
    as `a[...] = (a == 2**31)`); capture raised OverflowError (eager) or ValueError
    (cpu) from the int32 constant it made of 2**31."""
    _same(load(src, "regress-cmp"), [INT32], backend)


def test_arithmetic_with_python_int_out_of_range_still_raises(backend):
    _same(load("def f(a):\n    return a + 3000000000\n", "regress-add"), [INT32], backend)


@pytest.mark.parametrize("src", [
    "def f(a, b):\n    a ** b\n    return a\n",
    "def f(a, b):\n    t = a ** b\n    return a + 1\n",
    "def f(a, b):\n    t = np.power(a, b[::-1])\n    a += 1\n    return a\n",
], ids=["statement", "dead-name", "before-mutation"])
def test_unused_integer_power_still_raises(src, backend):
    """NumPy raises ValueError for an integer to a negative integer power even when the
    result is unused (found as `_e = a ** -np.ones(a.shape, np.int64)`); capture dropped
    the unused value and returned normally."""
    _same(load(src, "regress-pow"), [INT32, INT32], backend)


def test_unused_integer_power_non_negative_runs(backend):
    b = np.abs(INT32)
    _same(load("def f(a, b):\n    t = a ** b\n    return a + 1\n", "regress-pow-ok"), [INT32, b],
          backend)


@pytest.mark.parametrize("src", [
    "def f(a):\n    return np.where(a > 0, a, 2**31)\n",
    "def f(a):\n    return np.where(a > 0, -2**31 - 1, a), np.where(a > 2, 2**63, a)\n",
    "def f(a):\n    return np.where(a > 0, a.astype(np.float32), 1e300)\n",
], ids=["wraps", "both-sides", "float32-inf"])
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # NumPy's
def test_where_casts_python_numbers_unsafely(src, backend):
    """np.where(int32, x, 2**31) wraps to -2**31 in NumPy (found as
    `np.where(b, b, 2**31)`); capture raised OverflowError / ValueError."""
    _same(load(src, "regress-where"), [INT32], backend)


@pytest.mark.parametrize("src", [
    "def f(a):\n    return np.asarray(a.min(), dtype=np.int32)\n",
    "def f(a):\n    return np.asarray(a.max(), dtype=np.float64), np.array(a[0], dtype=np.int64)\n",
], ids=["asarray", "same-dtype-and-array"])
def test_asarray_of_a_numpy_scalar_is_an_array(src, backend):
    """np.asarray(scalar, dtype=...) is a 0-d ndarray (found as
    `np.asarray(c.min(axis=-1), dtype=np.int32)`); capture returned a NumPy scalar."""
    _same(load(src, "regress-asarray"), [INT32.astype(np.float64)], backend)


@pytest.mark.parametrize("backend_", [
    "cpu",
    pytest.param("eager", marks=pytest.mark.xfail(strict=True, reason=(
        "the eager backend writes mutations back only after the whole graph ran; when an "
        "op raises (an integer to a negative power) the arguments the function had "
        "already updated in place keep their old values. Needs each argument's version "
        "at the raising op, which the graph does not record yet."))),
])
def test_mutation_before_a_raising_power_is_kept(backend_):
    """Found as `np.multiply(c, a.astype(np.int64), out=c)` followed by an integer
    power that raises: NumPy has updated c when it raises."""
    _same(load("def f(a, b):\n    a *= 2\n    t = a ** b\n    return t\n", "regress-mut"),
          [INT32, INT32], backend_)


def _t_layout():
    return np.arange(18.0).reshape(6, 1, 3).T  # (3, 1, 6), not C-contiguous


@pytest.mark.parametrize("src, make", [
    ("def f(a):\n    t = a[1].ravel()\n    t *= 2\n    return t\n", _t_layout),
    ("def f(a):\n    t = np.ravel(a[::2])\n    t += 1\n    return t, a\n", lambda: np.arange(12.0)),
    ("def f(a):\n    t = a.ravel()\n    t += 1\n    return t, a\n", _t_layout),
    ("def f(a):\n    t = a[1:].ravel()\n    t += 1\n    return t, a\n",
     lambda: np.arange(12.0).reshape(3, 4)),
    ("def f(a):\n    t = a.reshape(-1)\n    t += 1\n    return t, a\n",
     lambda: np.arange(12.0).reshape(3, 4)[:, ::2]),
    ("def f(a):\n    t = a[1:].reshape(-1)\n    t += 1\n    return t, a\n",
     lambda: np.arange(12.0).reshape(3, 4)),
    ("def f(a):\n    t = a.T[0].ravel()\n    t += 1\n    return t, a\n",
     lambda: np.arange(12.0).reshape(3, 4)),
], ids=["T-row", "strided-1d", "T", "contiguous-rows-view", "reshape-strided", "reshape-rows",
        "column"])
def test_ravel_copies_a_non_contiguous_array(src, make, backend):
    """x.ravel() is a view only of a C-contiguous x (found as
    `t0 = np.asarray(a[1], dtype=np.float32).ravel(); np.multiply(t0, ..., out=t0)` on a
    transposed argument): capture took it for a view like reshape(-1) and wrote
    through it into the argument. And x[1:].ravel() / x[1:].reshape(-1) of a C-contiguous
    x are views (capture made copies at the write's graph break: the layout of a sliced
    view was not known)."""
    _same(load(src, "regress-ravel"), [make()], backend)


@pytest.mark.parametrize("src", [
    "def f(a):\n    t1 = np.int32(a)\n    a -= 1\n    return t1\n",
    "def f(a):\n    t1 = np.int32(a)\n    t1 += 1\n    return a\n",
], ids=["then-argument-written", "then-result-written"])
def test_scalar_type_of_a_same_dtype_array_is_that_array(src, backend):
    """np.int32(int32_array) returns the array itself (found as `t1 = np.int32(a)` then
    `np.subtract(a, np.sign(a), out=a)`); capture made a copy, so t1 kept old values."""
    _same(load(src, "regress-scalar-type"), [INT32], backend)


@pytest.mark.parametrize("src, arg", [
    ("def f(a):\n    return a.mean(dtype=np.int64), np.mean(a, axis=0, dtype=np.int32)\n",
     np.arange(12.0).reshape(3, 4) * 1.7),
    ("def f(a):\n    return a.sum(dtype=np.int32), np.prod(a, axis=1, dtype=np.int32)\n",
     np.arange(12).reshape(3, 4)),
    ("def f(a):\n    return a.mean(dtype=np.float32), a.sum(axis=0, dtype=np.float32)\n",
     np.arange(12).reshape(3, 4)),
    ("def f(a):\n    return a.mean(keepdims=True, dtype=np.int64) // 2\n", np.arange(-6, 6) * 1.5),
], ids=["mean-int", "sum-prod-int32", "float32", "keepdims"])
def test_reduction_dtype_argument(src, arg, backend):
    """x.mean(dtype=np.int64) is int64 and x.sum(dtype=np.int32) int32 in NumPy (found as
    `np.log(t0).mean(dtype=np.int64)`); capture gave float64 and int64."""
    _same(load(src, "regress-red-dtype"), [arg], backend)


@pytest.mark.parametrize("base", [1, -1], ids=["one", "minus-one"])
def test_integer_power_of_one_to_a_negative_exponent_raises(base, backend):
    """NumPy 2.4 raises ValueError for every negative integer exponent, also with base 1
    or -1 (found as `t0 = np.clip(b * b.shape[0] + len(b), -1, 0)` then
    `t0 ** -np.ones(...)`); the op table's integer power returned 1 / -1 there."""
    a = np.full(4, base, np.int32)
    _same(load("def f(a, b):\n    return a ** b\n", "regress-pow-one"),
          [a, np.array([-1, -2, -5, 3], np.int32)], backend)


@pytest.mark.xfail(strict=True, reason=(
    "an argument written in place before an op that raises (an integer to a negative "
    "power) keeps its old value: the graph's kernels do not run in program order, and the "
    "write-back is not done when a kernel raises. Needs the ops that may raise ordered "
    "after the writes that precede them in the code."))
def test_write_before_an_unrelated_raising_power_is_kept(backend):
    """Found (cpu, long profile) as `b[...] = np.logical_and(t0, t0)` followed by
    `_e = a ** -np.ones(a.shape, np.int64)`: NumPy has written b when it raises."""
    a, b = np.arange(-3, 9).reshape(3, 4), np.zeros((3, 4), bool)
    _same(load("def f(a, b):\n    b[...] = a > 0\n    t = a ** -np.ones(a.shape, np.int64)\n"
               "    return b\n", "regress-mut-b"), [a, b], backend)
