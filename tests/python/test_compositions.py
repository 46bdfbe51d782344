"""NumPy functions built from the graph's own ops as NumPy builds them (Note [functions as
NumPy composes them] in bridge/dynexpr/capture/np_compose.py), in code written as
scientists write it. The corpus (corpus_arrays.py: numpy_compositions,
layout_compositions) checks each form against NumPy on both backends."""

import numpy as np

import dynexpr
from compare import assert_same

RNG = np.random.default_rng(7)


def lowpass_taps(cutoff, offsets, window):
    """Windowed-sinc FIR taps for a normalised cutoff, normalised to unit gain; the
    window is applied symmetrically (it and its mirror image averaged)."""
    h = 2 * cutoff * np.sinc(2 * cutoff * offsets)
    h = h * 0.5 * (window + np.flip(window))
    return h / np.nansum(h)


def sensor_summary(readings_deg, fill):
    """Readings in degrees with gaps (NaN) and saturated channels (inf): cleaned, then
    per-channel spread and mean, and the angles in radians, rounded as a report would."""
    clean = np.nan_to_num(readings_deg, nan=fill, posinf=fill, neginf=fill)
    spread = np.ptp(clean, axis=0)
    mean = np.average(clean, axis=0)
    rad = np.round(np.radians(clean), 3)
    return spread, mean, rad, np.nansum(readings_deg, axis=1)


def test_sensor_summary_is_captured_whole_and_matches_numpy():
    x = RNG.normal(45.0, 20.0, (200, 6))
    x[3, 2] = np.nan
    x[10, 4] = np.inf
    x[11, 1] = -np.inf
    f = dynexpr.capture(sensor_summary)
    for _ in range(2):
        assert_same(sensor_summary(x, 45.0), f(x, 45.0))
    ex = dynexpr.explain(sensor_summary, x, 45.0)
    assert ex.graph_count == 1 and ex.graph_break_count == 0, ex.break_reasons


def test_windowed_sinc_taps_match_numpy():
    m = np.arange(63) - 31.0
    w = np.hanning(63)
    f = dynexpr.capture(lowpass_taps)
    for _ in range(2):
        assert_same(lowpass_taps(0.2, m, w), f(0.2, m, w))
    assert dynexpr.explain(lowpass_taps, 0.2, m, w).graph_break_count == 0


def test_grid_evaluation_with_meshgrid_and_tile():
    def field(xs, ys):
        gx, gy = np.meshgrid(xs, ys)
        r = np.hypot(gx, gy)
        return np.sinc(r) * np.tile(np.flip(ys)[:, None], (1, xs.shape[0]))

    xs, ys = np.linspace(-2, 2, 50), np.linspace(-1, 1, 30)
    f = dynexpr.capture(field)
    for _ in range(2):
        assert_same(field(xs, ys), f(xs, ys))
    assert dynexpr.explain(field, xs, ys).graph_break_count == 0


def test_rounding_integers_to_tens_is_a_break_with_numpys_result():
    x = np.arange(-25, 25, dtype=np.int64)
    f = dynexpr.capture(lambda a: np.round(a, -1) + 1)
    assert_same(np.round(x, -1) + 1, f(x))
    reasons = dynexpr.explain(lambda a: np.round(a, -1) + 1, x).break_reasons
    assert reasons and "decimals < 0" in reasons[0].reason
