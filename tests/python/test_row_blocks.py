"""Runs of kernels over the same rows evaluated block of rows by block of rows (Note [row
blocks] in kernels/prelude.hpp; bridge/dynexpr/row_blocks.py decides which runs qualify).

Every result is compared with plain NumPy (values, dtype, shape). The shapes are large
enough that row_blocks really splits the rows (more than 4 blocks of 256 KB), and each
test also says whether the unit's source uses row blocks, so a test of the blocked path
cannot silently pass through the kernel-by-kernel one (or the other way round).
"""

import pathlib

import numpy as np
import pytest

pytest.importorskip("dynexpr._native", reason="the native extension is not built")

import dynexpr

from compare import assert_matches_plain, unit_source

RNG = np.random.default_rng(7)
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _check(fn, *args, blocked: bool) -> str:
    f = dynexpr.capture(fn)
    assert_matches_plain(fn, args, f)
    source = unit_source(f)
    assert ("dxk::row_blocks(" in source) == blocked
    assert_matches_plain(fn, args, f)  # the compiled path again (cache hit)
    return source


def softmax_rows(x):
    e = np.exp(x - np.max(x, axis=1, keepdims=True))
    return e / np.sum(e, axis=1, keepdims=True)


def layernorm_affine(x, gamma, beta):
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    var = (d * d).mean(axis=-1, keepdims=True)
    return d / np.sqrt(var + 1e-5) * gamma + beta


def logsumexp_rows(x):
    m = np.max(x, axis=1, keepdims=True)
    return (np.log(np.sum(np.exp(x - m), axis=1, keepdims=True)) + m)[:, 0]


def rms_norm(x, w):
    return x / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + 1e-6) * w


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_rows(dtype):
    _check(softmax_rows, RNG.standard_normal((3000, 256)).astype(dtype), blocked=True)


def test_layernorm_with_gain_and_bias_read_whole_in_every_block():
    x = RNG.standard_normal((2500, 384)).astype(np.float32)
    gamma = RNG.uniform(0.5, 1.5, 384).astype(np.float32)
    beta = RNG.standard_normal((1, 384)).astype(np.float32)
    _check(layernorm_affine, x, gamma, beta, blocked=True)


def test_logsumexp_rows_keeps_its_reduction_for_the_view_after_the_run():
    """The [R, 1] result is read by a view after the run: it is allocated whole before
    the blocks and written block by block."""
    _check(logsumexp_rows, RNG.standard_normal((4000, 200)), blocked=True)


def test_rms_norm_with_ragged_last_block():
    """4099 rows: the last block is shorter than the others."""
    x = RNG.standard_normal((4099, 300)).astype(np.float32)
    _check(rms_norm, x, RNG.uniform(0.5, 2, 300).astype(np.float32), blocked=True)


def test_three_d_rows_reducing_the_last_two_axes():
    def standardise(x):
        m = x.mean(axis=(1, 2), keepdims=True)
        s = x.std(axis=(1, 2), keepdims=True)
        return (x - m) / s

    _check(standardise, RNG.standard_normal((600, 32, 24)), blocked=True)


def softmax_last(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize(("shape", "dtype"), [((4099, 300), "float64"),
                                              ((300, 7, 301), "float32"),
                                              ((10007, 33), "float32")])
def test_direct_loops_of_a_block_run_row_by_row_together(shape, dtype):
    """Note [rows of direct loops]: the block's direct loops (max, exp-sum, divide) run as
    one loop over its rows, each taking a few rows in turn: ragged row counts, rows that
    are a leading axis times a middle one (3-D), rows shorter than a vector step."""
    x = RNG.standard_normal(shape).astype(dtype)
    source = _check(softmax_last, x, blocked=True)
    assert "static void g0(" in source
    out = _check(logsumexp_rows, RNG.standard_normal((4000, 200)).astype(dtype), blocked=True)
    assert "static void g0(" in out  # with the [R, 1] pointwise kernel: one value per row


def test_several_outputs_and_an_intermediate_returned():
    def stats(x):
        m = x.max(axis=1, keepdims=True)
        e = np.exp(x - m)
        s = e.sum(axis=1, keepdims=True)
        return e / s, s, m

    _check(stats, RNG.standard_normal((3000, 256)).astype(np.float32), blocked=True)


def test_column_reductions_mix_rows_and_are_not_blocked():
    def centre_columns(x):
        return x - x.mean(axis=0, keepdims=True)

    _check(centre_columns, RNG.standard_normal((3000, 256)), blocked=False)


def test_a_row_reduction_broadcast_along_columns_is_not_blocked():
    """x / x.sum(axis=1) on a square array: NumPy broadcasts the [R] sums along the
    columns, so row k of the result needs every row's sum; rows mix."""
    def by_column_sums(x):
        return x / x.sum(axis=1)

    x = RNG.uniform(0.5, 1.5, (1024, 1024))
    _check(by_column_sums, x, blocked=False)


def test_kernels_that_read_a_view_stay_outside_the_run():
    """y = x.T: rows of y are columns of x, so the kernels reading the view run kernel by
    kernel; the two after them, which read only materialised rows, form a run."""
    def softmax_t(x):
        y = x.T
        e = np.exp(y - y.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    source = _check(softmax_t, RNG.standard_normal((256, 3000)), blocked=True)
    assert "// kernels 2-3: row blocks" in source
    assert source.index("permute") < source.index("dxk::row_blocks(")


def test_small_static_arrays_keep_kernel_by_kernel():
    """Static extents that fit in cache: no run is emitted (it would only cost compile
    time); row_blocks.py's thresholds are prelude.hpp's."""
    from dynexpr import row_blocks

    _check(softmax_rows, RNG.standard_normal((8, 16)).astype(np.float32), blocked=False)
    text = (ROOT / "kernels" / "prelude.hpp").read_text()
    assert f"row_block_bytes = {row_blocks.BLOCK_BYTES // 1024} * 1024;" in text
    assert "row_blocks_min_bytes = 4 * row_block_bytes;" in text
    assert row_blocks.MIN_BYTES == 4 * row_blocks.BLOCK_BYTES


def test_dynamic_rows():
    f = dynexpr.capture(softmax_rows, dynamic=True)
    for n in (2000, 3001, 7):
        x = RNG.standard_normal((n, 256)).astype(np.float32)
        assert_matches_plain(softmax_rows, (x,), f)
    assert "dxk::row_blocks(" in unit_source(f)


def test_errors_in_a_block_reach_python_as_numpy_warnings_or_values():
    """A row of -inf gives NaN in NumPy (inf - inf) with an 'invalid' warning; the blocked
    run gives the same values, rows on either side untouched."""
    x = RNG.standard_normal((3000, 256)).astype(np.float32)
    x[1234] = -np.inf
    f = dynexpr.capture(softmax_rows)
    with np.errstate(invalid="ignore"):
        assert_matches_plain(softmax_rows, (x,), f)
    with np.errstate(invalid="raise"), pytest.raises(FloatingPointError):
        f(x)
