"""Cheap flat loops run with at most 256-bit vectors (Note [narrow vectors for cheap
loops] in bridge/dynexpr/codegen.py): every length's last partial vector, a strided
argument, a 0-d argument, both float dtypes, against plain NumPy (values, dtype, shape),
and the same bits as the full-width loop."""

import numpy as np
import pytest

pytestmark = pytest.mark.one_python  # the generated C++ loop, not the CPython version

pytest.importorskip("dynexpr._native", reason="the native extension is not built")

import dynexpr
from dynexpr import codegen

from compare import assert_matches_plain, unit_source

RNG = np.random.default_rng(5)


def rescale(x, lo, span):
    return ((x - lo) / span) * 2.0 - 1.0


def affine(x):
    return ((x * 1.5 + 0.5) * 0.75 - 0.25) * 2.0 + 1.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_tail_length_matches_numpy(dtype):
    # dynamic=True: one unit for every length, so each call below runs compiled (with
    # static shapes the recompile limit would hand later lengths to plain Python).
    f = dynexpr.capture(affine, dynamic=True)
    g = dynexpr.capture(rescale, dynamic=True)
    for n in [*range(1, 40), 63, 64, 65, 1023, 4097, 65537]:
        x = RNG.standard_normal(n).astype(dtype)
        assert_matches_plain(affine, (x,), f)
        lo = np.array(RNG.standard_normal(), dtype)
        assert_matches_plain(rescale, (x, lo, np.array(3.0, dtype)), g)
    # a length of 1 is specialised (it broadcasts), every other length shares one entry
    assert len(f.entries) <= 2 and len(g.entries) <= 2, (f.entries, g.entries)
    assert "CappedTag" in unit_source(f)
    strided = RNG.standard_normal(2 * 10001).astype(dtype)[::2]
    assert_matches_plain(affine, (strided,), f)


def test_narrow_and_full_width_loops_give_the_same_bits(monkeypatch):
    x = RNG.standard_normal(100003)

    def wide(x):
        return ((x * 1.5 + 0.5) * 0.75 - 0.25) * 2.0 + 1.0

    narrow = dynexpr.capture(affine)(x)
    monkeypatch.setattr(codegen, "NARROW_COST", 0)
    f = dynexpr.capture(wide)
    full = f(x)
    assert "CappedTag" not in unit_source(f)
    assert narrow.dtype == full.dtype and np.array_equal(narrow, full)
