"""Arrays with a few columns: (n, 3) points, (n, 8) features. Their arithmetic against a
row repeated along the rows, and their column reductions, run as super-rows (Note
[short rows] in include/dynexpr/eval/assign.hpp and reduce.hpp); these are written as a
scientist writes them, and every result is compared with plain NumPy (values, dtype,
shape), at sizes past the super-row threshold, with rows left over."""

import numpy as np
import pytest

pytestmark = pytest.mark.one_python  # the C++ loops, not the CPython version

pytest.importorskip("dynexpr._native", reason="the native extension is not built")

import dynexpr

from compare import assert_matches_plain, unit_source

RNG = np.random.default_rng(23)


def centre_and_scale(points):
    # centred point cloud scaled to unit RMS radius per axis
    c = points - points.mean(axis=0)
    return c / np.sqrt((c * c).mean(axis=0))


def weighted_features(x, w, b):
    return np.tanh(x * w + b)


def bounding_box(points):
    return points.min(axis=0), points.max(axis=0), np.abs(points).sum(axis=0)


def column_softmax(x):
    e = np.exp(x - x.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


def masked_offsets(x, lo):
    return np.where(x > lo, x - lo, 0.0 * x), (x > lo).sum(axis=0)


# 3 and 8 columns (points, features), an odd 5, each with rows left over; other row
# lengths (1 to 300) are covered in C++ (tests/cpp/test_eval.cpp, test_reduce.cpp).
SHAPES = [(20011, 3), (30000, 8), (4097, 5)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_point_clouds_and_features(dtype, shape):
    x = (RNG.standard_normal(shape) * 3 + 1).astype(dtype)
    w = RNG.uniform(0.5, 2.0, shape[1]).astype(dtype)
    b = RNG.standard_normal((1, shape[1])).astype(dtype)
    for fn, args in ((centre_and_scale, (x,)), (weighted_features, (x, w, b)),
                     (bounding_box, (x,)), (column_softmax, (x,)), (masked_offsets, (x, b))):
        f = dynexpr.capture(fn)
        assert_matches_plain(fn, args, f)
        assert_matches_plain(fn, args, f)  # the compiled entry again


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_integer_columns(dtype):
    x = RNG.integers(0, 100, (5003, 3)).astype(dtype)
    off = np.array([1, 2, 3], dtype)

    def fn(x, off):
        return x * 2 + off, (x - off).sum(axis=0), x.max(axis=0)

    assert_matches_plain(fn, (x, off), dynexpr.capture(fn))


def test_a_batch_of_point_sets_with_a_centre_each():
    # (batch, n, 3) against a (batch, 1, 3) centre: the centre moves with the batch, so
    # no tile stands for every row; the plain row loop answers.
    pts = RNG.standard_normal((6, 5000, 3))

    def fn(p):
        c = p.mean(axis=1, keepdims=True)
        return ((p - c) ** 2).sum(axis=1), p - c

    assert_matches_plain(fn, (pts,), dynexpr.capture(fn))


# Row reductions of rows shorter than a vector (Note [short inner rows] in
# include/dynexpr/eval/reduce.hpp): super-rows, a per-row operand permuted into its
# row's lanes, rows left over folded the same way.
def kinetic_energy(v, m):
    return 0.5 * (m[:, None] * v**2).sum(axis=1)


def speeds_and_extremes(v):
    return np.sqrt((v * v).sum(axis=1)), np.abs(v).max(axis=1), v.min(axis=1)


def weighted_row_means(x, w, b):
    return (x * w[:, None] + b).mean(axis=1), (x * np.expand_dims(w, 1)).sum(axis=-1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cols", [1, 2, 3, 4, 5, 7, 8, 13, 15])
def test_row_reductions_of_short_rows(dtype, cols):
    for rows in (7, 1003, 50021):  # fewer rows than a super-row; rows left over per thread
        v = (RNG.standard_normal((rows, cols)) * 2).astype(dtype)
        m = RNG.uniform(0.5, 3.0, rows).astype(dtype)
        b = RNG.standard_normal(cols).astype(dtype)
        for fn, args in ((kinetic_energy, (v, m)), (speeds_and_extremes, (v,)),
                         (weighted_row_means, (v, m, b))):
            f = dynexpr.capture(fn)
            assert_matches_plain(fn, args, f)


def test_short_rows_propagate_nan_and_inf_as_numpy():
    v = RNG.standard_normal((4099, 3))
    v[5, 1] = np.nan
    v[17, 0] = np.inf
    v[4098, 2] = np.nan  # a row left over after the super-rows
    v[300, :] = -np.inf
    m = RNG.uniform(0.5, 3.0, 4099)
    for fn, args in ((kinetic_energy, (v, m)), (speeds_and_extremes, (v,))):
        f = dynexpr.capture(fn)
        with np.errstate(invalid="ignore"):
            assert_matches_plain(fn, args, f)
        assert "Note [short inner rows]" in unit_source(f)  # the super-row loop is there


def test_short_row_sums_do_not_depend_on_the_thread_count():
    v = RNG.standard_normal((30011, 5)).astype(np.float32)
    m = RNG.uniform(0.5, 3.0, 30011).astype(np.float32)
    f = dynexpr.capture(kinetic_energy)
    before = dynexpr.config.num_threads
    base = f(v, m)
    try:
        for n in (1, 3):
            dynexpr.config.num_threads = n
            assert np.array_equal(f(v, m), base), n
    finally:
        dynexpr.config.num_threads = before
