"""Cheap values read by an outer-axis reduction and by pointwise work are computed again
by each user instead of stored and read back (Note [recomputed instead of stored] in
bridge/dynexpr/schedule.py).

Every result is compared with plain NumPy (values, dtype, shape), and each test says
which kernels the unit has, so a test of the recomputing schedule cannot silently pass
through the storing one (or the other way round).
"""

import numpy as np
import pytest

pytest.importorskip("dynexpr._native", reason="the native extension is not built")

import dynexpr

from compare import assert_matches_plain, unit_source

RNG = np.random.default_rng(13)


def _kernels(f) -> str:
    for line in unit_source(f).splitlines():
        if "kernel(s)" in line:
            return line.split(":", 1)[1].strip()
    raise AssertionError("no kernel list in the unit")


def _check(fn, *args, kernels: str):
    f = dynexpr.capture(fn)
    assert_matches_plain(fn, args, f)
    assert _kernels(f) == kernels
    assert_matches_plain(fn, args, f)


def softmax_columns(x):
    e = np.exp(x - x.max(axis=0))
    return e / e.sum(axis=0)


def softmax_all(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def standardise_by_hand(x):
    d = x - x.mean(axis=0)
    return d / np.sqrt((d * d).mean(axis=0) + 1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_column_softmax_recomputes_exp(dtype):
    x = RNG.standard_normal((2048, 300)).astype(dtype) * 4
    # max, sum of exp (fused), exp / sum: no kernel writes e
    _check(softmax_columns, x, kernels="reduction, reduction, pointwise")


def test_whole_array_softmax_recomputes_exp():
    x = RNG.standard_normal((700, 500))
    _check(softmax_all, x, kernels="reduction, reduction, pointwise")


def test_deviations_are_recomputed_for_the_variance_and_the_output():
    x = RNG.standard_normal((100000, 8)).astype(np.float32)
    _check(standardise_by_hand, x, kernels="reduction, reduction, pointwise, pointwise")


def test_small_values_are_still_stored():
    # 64 x 64 float64 is 32 KB: in cache, storing e is cheaper than its second exp
    x = RNG.standard_normal((64, 64))
    _check(softmax_columns, x, kernels="reduction, pointwise, reduction, pointwise")


def test_the_size_floor_grows_with_the_cost():
    # 362 x 362 float32 is 512 KB: above the 256 KB floor of a subtraction, so the
    # deviations are recomputed; below the 768 KB of exp(x - max) (cost 13), so e is stored
    x = RNG.standard_normal((362, 362)).astype(np.float32)
    _check(standardise_by_hand, x, kernels="reduction, reduction, pointwise, pointwise")
    _check(softmax_columns, x, kernels="reduction, pointwise, reduction, pointwise")
    # 512 x 512 float32 (1 MB) is over both
    x = RNG.standard_normal((512, 512)).astype(np.float32)
    _check(softmax_columns, x, kernels="reduction, reduction, pointwise")


def test_row_softmax_keeps_its_row_blocks():
    def softmax_rows(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    x = RNG.standard_normal((4096, 512)).astype(np.float32)
    f = dynexpr.capture(softmax_rows)
    assert_matches_plain(softmax_rows, (x,), f)
    assert "reduction, pointwise, reduction, pointwise" in _kernels(f)


def test_expensive_values_are_still_stored():
    def f(x):
        t = np.tanh(np.sin(x) * np.cos(x))  # cost 48: computing it twice costs more
        return t / t.sum(axis=0)

    x = RNG.standard_normal((3000, 200))
    _check(f, x, kernels="pointwise, reduction, pointwise")


def test_a_scientists_normalised_histogram_loop():
    # Column-normalised Boltzmann weights over a temperature sweep, summed per state.
    def occupations(energies, temperatures):
        total = np.zeros(energies.shape[1])
        for t in temperatures:
            w = np.exp(-(energies - energies.min(axis=0)) / t)
            total += (w / w.sum(axis=0)).max(axis=0)
        return total

    energies = RNG.standard_normal((5000, 40)) * 3
    temps = [0.5, 1.0, 2.0, 4.0]
    f = dynexpr.capture(occupations)
    np.testing.assert_allclose(f(energies, temps), occupations(energies, temps), rtol=1e-9)
    np.testing.assert_allclose(f(energies, temps), occupations(energies, temps), rtol=1e-9)
