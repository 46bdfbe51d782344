"""clip, maximum and minimum against constants run as ordered compares and blends in the
direct loops (ops/op_support.hpp: clip_to_bounds, bound_by_const): every result, NaN and
the sign of zero included, is NumPy's, and no floating-point warning appears that NumPy
would not give."""

import warnings

import numpy as np
import pytest

import dynexpr

FORMS = [
    lambda a: np.clip(a, -1.0, 1.0) * 3.0,
    lambda a: np.clip(a, 0.0, 1.0) * 1.0,  # -0.0 at the 0.0 bound stays -0.0
    lambda a: np.clip(a, 2.0, -2.0) * 1.0,  # lo > hi: NumPy gives hi everywhere
    lambda a: np.clip(a, -0.0, 0.0) * 1.0,  # two constants equal in Python, not in sign
    lambda a: np.clip(a, -np.inf, 0.5) * 1.0,
    lambda a: np.maximum(a, 0.0) * 2.0,  # relu
    lambda a: np.maximum(0.0, a) * 2.0,
    lambda a: np.minimum(a, -0.0) * 1.0,
    lambda a: np.minimum(-0.0, a) * 1.0,
    lambda a: np.minimum(1.0, np.maximum(a, -1.0)) * 3.0,
    lambda a: np.maximum(a, np.nan) * 1.0,  # a NaN constant keeps the NaN-aware op
    lambda a: np.maximum(a * 0.5, a) * 1.0,  # no constant: the NaN-aware op
]


def _values(dtype):
    x = (np.random.default_rng(3).standard_normal(3000) * 2).astype(dtype)
    x[:8] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.0]
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("form", range(len(FORMS)))
def test_bounds_keep_numpys_nan_and_signed_zero(form, dtype):
    fn = FORMS[form]
    x = _values(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither side may warn
        expected = fn(x)
        got = dynexpr.capture(fn)(x)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))
