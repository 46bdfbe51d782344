"""The max of a value and the sum of exp(value - max) over the same axes, from one read
(Note [max and sum of exps in captured code] in bridge/dynexpr/codegen.py; Note [max and
sum of exps together] in include/dynexpr/eval/max_sumexp.hpp).

Every result is compared with plain NumPy (values, dtype, shape), and each test says
whether the unit makes the one dx::max_sumexp call, so the paired path cannot silently
pass through the separate reductions (or the other way round).
"""

import numpy as np
import pytest

pytest.importorskip("dynexpr._native", reason="the native extension is not built")

import dynexpr
from compare import assert_matches_plain, unit_source

RNG = np.random.default_rng(17)


def _check(fn, *args, paired: bool):
    f = dynexpr.capture(fn)
    with np.errstate(all="ignore"):
        assert_matches_plain(fn, args, f)
        source = unit_source(f)
        assert source.count("dx::max_sumexp(") == int(paired), source
        assert_matches_plain(fn, args, f)  # the compiled path again (cache hit)
    return source


def softmax_columns(x):
    e = np.exp(x - x.max(axis=0))
    return e / e.sum(axis=0)


def logsumexp_columns_keepdims(x):
    m = np.max(x, axis=0, keepdims=True)
    return m + np.log(np.sum(np.exp(x - m), axis=0, keepdims=True))


def softmax_all(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def log_partition(energies, beta):
    # a physicist's free energy per column: -log(sum(exp(-beta * E))) / beta, stabilised
    a = -beta * energies
    amax = a.max(axis=0)
    return -(amax + np.log(np.exp(a - amax).sum(axis=0))) / beta


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(60000, 7), (300000, 2), (20000, 64)])
def test_softmax_of_a_few_long_columns_takes_max_and_sum_in_one_call(dtype, shape):
    # Data of its own, not drawn from the module's RNG, whose draws depend on the tests a
    # pytest-xdist worker ran first: NumPy's float32 column sums of (300000, 2) are off by
    # up to 1.1e-4 relative (sequential), at the comparison's tolerance, on some draws.
    x = (np.random.default_rng(shape[0] * 100 + shape[1]).standard_normal(shape) * 6).astype(dtype)
    _check(softmax_columns, x, paired=True)


@pytest.mark.parametrize("shape", [(200003, 3), (300000, 8), (60000, 37)])
def test_a_column_softmax_raises_no_flag_numpy_does_not(shape):
    # Columns fewer than a vector: the last vector's lanes past the columns were computed
    # from stale scratch and masked off, and an exp of x less a stale max overflowed: an
    # "overflow" warning, or an error under np.errstate, for data (|x| < 30) where no exp
    # can overflow. Checked against float64, as NumPy's float32 column sums are sequential
    # (relative error 2e-3 at (200003, 3) on this data; dynexpr's 1e-6).
    x = (np.random.default_rng(shape[0] * 100 + shape[1]).standard_normal(shape) * 3).astype(np.float32)
    f = dynexpr.capture(softmax_columns)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        want = softmax_columns(x)
        got = f(x)
        got = f(x)  # the compiled path again (cache hit)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, softmax_columns(x.astype(np.float64)), rtol=1e-5, atol=1e-30)


def test_keepdims_logsumexp_and_a_whole_array_softmax():
    x = RNG.standard_normal((40000, 30)) * 10
    _check(logsumexp_columns_keepdims, x, paired=True)
    _check(softmax_all, RNG.standard_normal((1500, 400)).astype(np.float32), paired=True)


def test_three_axes_and_a_strided_fused_input():
    def f(x):
        y = x[::2] * 1.5
        m = y.max(axis=(0, 2), keepdims=True)
        return np.exp(y - m).sum(axis=(0, 2), keepdims=True)

    _check(f, RNG.standard_normal((80, 30, 200)), paired=True)


def test_special_values_are_numpys():
    x = RNG.standard_normal((40000, 7))
    x[:, 0] = -np.inf           # all -inf: NaN softmax
    x[:30000, 1] = -np.inf      # -inf blocks, then values
    x[12345, 2] = np.nan        # a NaN
    x[5, 3] = np.inf            # +inf
    x[39999, 4] = 700.0         # the max at the end, near exp's overflow
    _check(softmax_columns, x, paired=True)
    _check(logsumexp_columns_keepdims, x.astype(np.float32), paired=True)


def test_a_beta_sweep_in_a_loop():
    energies = RNG.standard_normal((20000, 24)) * 4
    f = dynexpr.capture(log_partition)
    for beta in (0.1, 0.5, 1.0, 2.0, 8.0):
        got, want = f(energies, beta), log_partition(energies, beta)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-12)
    assert unit_source(f).count("dx::max_sumexp(") == 1


def test_what_is_not_paired():
    x = RNG.standard_normal((600, 600))

    def other_axis_broadcast(x):
        # m is per row but broadcasts along the columns: not a softmax, NumPy's answer all the same
        return np.exp(x - x.max(axis=1)).sum(axis=1)

    def stored_exp(x):
        e = np.exp(x - x.max(axis=0))
        return e, e.sum(axis=0)  # e is an output: stored, the sum reads it

    def integers(x):
        m = x.max(axis=0)
        return np.exp(x - m).sum(axis=0)

    _check(other_axis_broadcast, x, paired=False)
    _check(stored_exp, x, paired=False)
    _check(integers, (x * 10).astype(np.int32), paired=False)
    _check(softmax_columns, RNG.standard_normal((10000, 10)), paired=False)  # 800 KB: in cache
    # 300 columns: the separate column reductions stream as fast (the codegen Note's numbers)
    _check(softmax_columns, RNG.standard_normal((2048, 300)), paired=False)
