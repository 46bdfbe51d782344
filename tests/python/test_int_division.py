"""Integer floor division and remainder as people write them: bins of an index, digits of
a number, a day of the week, wrap-around indices. Packed lanes divide through double
(Note [integer division through double] in include/dynexpr/ops/op_support.hpp), or by a
divisor prepared once when it is a scalar (Note [division by a scalar]); lanes it cannot
take exactly (int64 past 2^51, or 2^50 by a scalar; zero divisors; MIN // -1) take the
scalar body with NumPy's flags. Every result is compared with plain NumPy (values, dtype, shape)."""

import numpy as np
import pytest

pytestmark = pytest.mark.one_python  # the C++ loops, not the CPython version

pytest.importorskip("dynexpr._native", reason="the native extension is not built")

import dynexpr

from compare import assert_matches_plain, unit_source

RNG = np.random.default_rng(1206)


def hour_and_weekday(seconds):
    # seconds since an epoch -> hour of the day, day of the week
    return seconds // 3600 % 24, (seconds // 86400 + 4) % 7


def digits(n):
    return n % 10, n // 10 % 10, n // 100 % 10


def divmod_arrays(a, b):
    return a // b, a % b


def wrap_index(i, n):
    return (i + 3) % n - n // 2


def bins(x, width):
    return (x - x.min()) // width


def signed_values(dtype, n, top):
    """n values of dtype whose magnitudes spread evenly over 1 .. 2^top, both signs."""
    bits = RNG.integers(0, top, n)
    v = (RNG.integers(0, 2**62, n) >> (62 - bits)).astype(np.int64)
    return (v * RNG.choice([-1, 1], n)).astype(dtype)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("n", [7, 1003, 50021])
def test_time_digits_and_wrapped_indices(dtype, n):
    seconds = RNG.integers(-(2**30), 2**30, n).astype(dtype)
    assert_matches_plain(hour_and_weekday, [seconds], dynexpr.capture(hour_and_weekday))
    numbers = RNG.integers(0, 10**9, n).astype(dtype)
    assert_matches_plain(digits, [numbers], dynexpr.capture(digits))
    i = RNG.integers(-1000, 1000, n).astype(dtype)
    f = dynexpr.capture(wrap_index)
    for m in (7, -7, 1, 1000):
        assert_matches_plain(wrap_index, [i, m], f)
    x = signed_values(dtype, n, 30)
    assert_matches_plain(bins, [x, 37], dynexpr.capture(bins))


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_divisors_that_vary_by_lane_over_the_whole_range(dtype):
    top = 63 if dtype == "int64" else 31
    n = 40000
    a, b = signed_values(dtype, n, top), signed_values(dtype, n, top)
    b[b == 0] = 3
    f = dynexpr.capture(divmod_arrays)
    assert_matches_plain(divmod_arrays, [a, b], f)
    # the packed path's edge for int64 (2^51), and exact multiples with their neighbours
    if dtype == "int64":
        e = 2**51
        a = np.array([e - 1, e, -e + 1, -e, 2**52 + 1, -(2**52) - 1, 2**62, -(2**63)] * 5, dtype)
        b = np.array([1, -1, 3, -3, 7, e - 1, -(e - 1), 2] * 5, dtype)
        assert_matches_plain(divmod_arrays, [a, b], f)
    q = signed_values(dtype, n, top // 2 - 1)
    d = signed_values(dtype, n, top // 2 - 1)
    d[d == 0] = -5
    for k in (-1, 0, 1):
        assert_matches_plain(divmod_arrays, [q * d + k, d], f)
    # broadcast: a column of divisors against rows
    assert_matches_plain(divmod_arrays, [q[:600].reshape(20, 30) * 1000 + 7, d[:20].reshape(20, 1)], f)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_zero_divisors_and_overflow_give_numpys_values_and_flags(dtype):
    info = np.iinfo(dtype)
    a = RNG.integers(-100, 100, 64).astype(dtype)
    b = RNG.integers(1, 9, 64).astype(dtype)
    b[[3, 40]] = 0  # zero divisors among packed lanes
    a[17], b[17] = info.min, -1  # MIN // -1 wraps
    f = dynexpr.capture(divmod_arrays)
    with np.errstate(divide="ignore", over="ignore"):
        assert_matches_plain(divmod_arrays, [a, b], f)
    for name, want_error in (("divide", "divide by zero"), ("over", "overflow")):
        for what in (divmod_arrays, f):
            quiet = np.errstate(divide="ignore", over="ignore")
            with quiet, np.errstate(**{name: "raise"}), pytest.raises(FloatingPointError, match=want_error):
                what(a.copy(), b.copy())
    # no zero divisor and no MIN // -1: nothing is reported
    c = b.copy()
    c[c == 0], c[17] = 2, 2
    with np.errstate(all="raise"):
        assert_matches_plain(divmod_arrays, [a, c], f)


def by_scalar(a, s):
    return a // s, a % s, (a + 1) // s * s


@pytest.mark.parametrize("dtype", ["uint8", "int32", "int64"])
def test_scalar_divisors_of_every_size_and_sign(dtype):
    # A scalar divisor is prepared once per call (Note [division by a scalar]): uint8 by a
    # multiply-high, int32 and int64 by a multiply with a half-step bias. Every uint8 pair,
    # and int32/int64 ends, multiples and random values, are checked against the scalar
    # body in tests/cpp/test_ops_exact.cpp; here the captured path, one capture per divisor
    # (an int argument is a value guard).
    info = np.iinfo(dtype)
    if dtype == "uint8":
        a = np.arange(256 * 3, dtype=np.int64).astype(dtype)
        divisors = [1, 7, 255]
    else:
        top = 63 if dtype == "int64" else 31
        a = np.concatenate([signed_values(dtype, 30000, top),
                            np.array([info.min, info.max, 0, 1, -1, 2**30, -(2**30)], dtype)])
        divisors = [-3, 1000003, info.min]
        if dtype == "int64":
            e = 2**50  # lanes and divisors at the packed path's edge
            a = np.concatenate([a, np.array([e - 1, e, 1 - e, -e, e + 1, 2**51], dtype)])
            divisors = [7, e - 1, -e]
    for s in divisors:
        f = dynexpr.capture(by_scalar)
        with np.errstate(over="ignore"):  # (a + 1) wraps at the type's top, in both
            assert_matches_plain(by_scalar, [a, s], f)
            assert_matches_plain(by_scalar, [a // s * s + a % 3 - 1, s], f)  # multiples, +-1
        assert len(f.entries) == 1 and "floor_divide" in unit_source(f)


@pytest.mark.parametrize("dtype", ["uint8", "int32", "int64"])
def test_scalar_zero_and_minus_one_divisors_keep_numpys_flags(dtype):
    a = np.arange(-100, 100).astype(dtype)
    f = dynexpr.capture(divmod_arrays)
    with np.errstate(divide="ignore"):
        assert_matches_plain(divmod_arrays, [a, 0], f)
    for what in (divmod_arrays, f):
        with np.errstate(divide="raise"), pytest.raises(FloatingPointError, match="divide by zero"):
            what(a.copy(), 0)
    if dtype != "uint8":
        m = np.concatenate([a, np.array([np.iinfo(dtype).min], dtype)])
        with np.errstate(over="ignore"):
            assert_matches_plain(divmod_arrays, [m, -1], f)
        for what in (divmod_arrays, f):
            with np.errstate(over="raise"), pytest.raises(FloatingPointError, match="overflow"):
                what(m.copy(), -1)


def blend_and_quantise(a, b, levels):
    # halve without overflow, then posterise to `levels` grey levels
    mean = a // 2 + b // 2 + ((a % 2) & (b % 2))
    step = 256 // levels
    return mean // step * step, mean % step


@pytest.mark.parametrize("shape", [(7,), (480, 641), (3, 100, 5)])
def test_uint8_images(shape):
    a = RNG.integers(0, 256, shape, dtype=np.uint8)
    b = RNG.integers(0, 256, shape, dtype=np.uint8)
    f = dynexpr.capture(blend_and_quantise)
    for levels in (4, 7, 256):
        assert_matches_plain(blend_and_quantise, [a, b, levels], f)
    # divisors that vary by pixel, zeros among them (NumPy: 0, "divide by zero")
    d = RNG.integers(0, 256, shape, dtype=np.uint8)
    g = dynexpr.capture(divmod_arrays)
    with np.errstate(divide="ignore"):
        assert_matches_plain(divmod_arrays, [a, d], g)
