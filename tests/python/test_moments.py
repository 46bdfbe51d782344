"""Means and variances of the same value over the same axes, from one read (Note [mean and
var together] in bridge/dynexpr/codegen.py; Note [one-pass moments] in
include/dynexpr/eval/moments.hpp).

Every result is compared with plain NumPy (values, dtype, shape), and each test says
whether the unit pairs the two reductions into one dx::mean_var / dx::mean_std call, so
the paired path cannot silently pass through the separate one (or the other way round).
"""

import numpy as np
import pytest

pytest.importorskip("dynexpr._native", reason="the native extension is not built")

import dynexpr

from compare import assert_matches_plain, assert_same, unit_source

RNG = np.random.default_rng(11)



def _check(fn, *args, paired: str | None):
    f = dynexpr.capture(fn)
    assert_matches_plain(fn, args, f)
    source = unit_source(f)
    for name in ("mean_var", "mean_std"):
        assert source.count(f"dx::{name}(") == (name == paired), (name, source)
    assert_matches_plain(fn, args, f)  # the compiled path again (cache hit)
    return source


def standardise_columns(x):
    return (x - x.mean(axis=0)) / (x.std(axis=0) + 1e-5)


def zscore_keepdims(x, axis):
    mu = np.mean(x, axis=axis, keepdims=True)
    sd = np.std(x, axis=axis, keepdims=True)
    return (x - mu) / sd


def mean_and_sample_var(x):
    return x.mean(axis=0), x.var(axis=0, ddof=1)


def whiten_all(x):
    return (x - x.mean()) / x.std()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(4096, 300), (70000, 3), (37, 1030), (1, 5)])
def test_column_standardisation_pairs_mean_and_std(dtype, shape):
    x = RNG.standard_normal(shape).astype(dtype) * 3 + 2
    _check(standardise_columns, x, paired="mean_std")


@pytest.mark.parametrize("axis", [0, (0, 2), None])
def test_keepdims_pairs_over_several_axes(axis):
    x = RNG.standard_normal((64, 40, 33))
    _check(lambda x: zscore_keepdims(x, axis), x, paired="mean_std")


def test_mean_and_var_with_ddof_are_returned_together():
    x = RNG.standard_normal((5000, 17)).astype(np.float32)
    _check(mean_and_sample_var, x, paired="mean_var")


def test_whole_array_moments_of_a_strided_view():
    x = RNG.standard_normal((300, 400))[::2, ::3]
    _check(whiten_all, x, paired="mean_std")


def test_integer_input_gives_float64_moments():
    x = RNG.integers(-1000, 1000, size=(3000, 50)).astype(np.int32)
    _check(standardise_columns, x, paired="mean_std")


def test_different_keepdims_are_not_paired():
    def f(x):
        return x.mean(axis=0, keepdims=True), x.std(axis=0)

    _check(f, RNG.standard_normal((500, 60)), paired=None)


def test_inner_axis_rows_stay_with_the_row_loops():
    # Rows of a fixed length are reduced by the direct row loops (in cache): no pairing.
    x = RNG.standard_normal((2000, 96)).astype(np.float32)
    _check(lambda x: zscore_keepdims(x, -1), x, paired=None)


def test_far_from_zero_data_keeps_numpys_accuracy():
    # mean 1e4 times the spread in float32: the textbook one-pass formula loses every
    # digit here; the blocked one must agree with a float64 reference as NumPy does.
    x = (1e4 + RNG.standard_normal((20000, 40))).astype(np.float32)
    f = dynexpr.capture(mean_and_sample_var)
    mean, var = f(x)
    ref = x.astype(np.float64)
    exact_var = ref.var(axis=0, ddof=1)
    numpy_err = np.max(np.abs(x.var(axis=0, ddof=1) - exact_var) / exact_var)
    ours = np.max(np.abs(var.astype(np.float64) - exact_var) / exact_var)
    assert ours <= max(numpy_err, 1e-5), (ours, numpy_err)
    np.testing.assert_allclose(mean, ref.mean(axis=0), rtol=1e-6)
    # against NumPy itself: within NumPy's own error (2e-4 here) plus ours
    tol = max(1e-4, 2 * numpy_err)
    assert_same(mean_and_sample_var(x), (mean, var), tol={"float32": (tol, tol)})


def test_inf_and_nan_follow_numpy():
    x = RNG.standard_normal((3000, 4))
    x[10, 1] = np.inf
    x[2000, 2] = np.nan
    with np.errstate(invalid="ignore"):
        _check(mean_and_sample_var, x, paired="mean_var")


def test_a_scientists_feature_scaling_loop():
    # Per-feature scaling of mini-batches, then a running average of the scaled batch's
    # column means: the shape of a data-loading loop, not of this test suite.
    def scale_batches(data, batch):
        total = np.zeros(data.shape[1])
        for start in range(0, data.shape[0], batch):
            b = data[start:start + batch]
            z = (b - b.mean(axis=0)) / (b.std(axis=0) + 1e-8)
            total += z.mean(axis=0) + z.std(axis=0)
        return total

    data = RNG.standard_normal((4000, 12)) * np.arange(1, 13) + np.arange(12)
    f = dynexpr.capture(scale_batches)
    assert_same(scale_batches(data, 500), f(data, 500))
    assert_same(scale_batches(data, 500), f(data, 500))


@pytest.mark.parametrize("rows", [1001, 200_003])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.float64])
def test_constant_columns_have_zero_spread_not_nan(dtype, rows):
    # A constant feature (a column of one value) is common in real data. Its variance
    # about an inexactly rounded block mean came out a rounding below 0, and std NaN with
    # an "invalid value" warning, where NumPy gives 0 (or a rounding above it); then a
    # rounding above 0 (1e-62), whose float32 variance underflowed (Note [a constant
    # column's spread is 0]). Now exactly 0, with no floating-point flag at all.
    x = np.empty((rows, 4), dtype)
    x[:] = np.array([173, 3, 0.1, 7.25]).astype(dtype)
    x[::7, 3] += 1  # one column that does vary
    f = dynexpr.capture(lambda x: (x.std(axis=0), x.var(axis=0)))
    with np.errstate(all="raise"):  # no spurious invalid-value or underflow flag
        got_std, got_var = f(x)
    # Against float64: NumPy's own float32 rounding gives 1e-5 at 1001 rows and 0.52 (the
    # std of a column of 173s) at 200003.
    x64 = x.astype(np.float64)
    for got, want, exact in ((got_std, x.std(axis=0), x64.std(axis=0)),
                             (got_var, x.var(axis=0), x64.var(axis=0))):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.all(got[:3] == 0), got  # float64 NumPy: 0, 0 and 1.4e-15 at 1001 rows
        np.testing.assert_allclose(got, exact, rtol=1e-5, atol=1e-12)
    keep = dynexpr.capture(standardise_columns)
    assert np.all(np.isfinite(keep(x.astype(np.float64))))
