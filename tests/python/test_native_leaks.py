"""No reference or memory leaks in the native call path over a million calls (works on
a release CPython: resident memory and reference counts instead of
sys.gettotalrefcount). A leaked output array or argument reference per call would show
as tens of megabytes here."""

import sys

import numpy as np
import pytest

_native = pytest.importorskip("dynexpr._native", reason="the native extension is not built "
                              "(pip install -e . --no-build-isolation -Cbuild-dir=build-py)")

from dynexpr import guards as G
from dynexpr import ir, runtime

CALLS = 1_000_000


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096


def tiny_kernel():
    g = ir.Graph()
    x = g.add(ir.Value("input", (), "float32", (8,), ir.make_attrs(index=0)))
    y = g.add(ir.Value("input", (), "float32", (8,), ir.make_attrs(index=1)))
    s = g.add(ir.Value("add", (x, y), "float32", (8,)))
    g.outputs = [s, x]  # an output and an argument returned as itself
    return runtime.compile_graph(g)


def test_a_million_calls_do_not_leak():
    fn = tiny_kernel()
    x, y = np.ones(8, np.float32), np.arange(8, dtype=np.float32)
    for _ in range(20_000):
        fn(x, y)
    rx, ry = sys.getrefcount(x), sys.getrefcount(y)
    before = rss_bytes()
    for _ in range(CALLS):
        fn(x, y)
    grown = rss_bytes() - before
    assert sys.getrefcount(x) == rx and sys.getrefcount(y) == ry
    assert grown < 4 << 20, f"resident memory grew by {grown / 2**20:.1f} MiB over {CALLS} calls"
    out, same = fn(x, y)
    assert same is x and np.array_equal(out, x + y)
    assert sys.getrefcount(out) == 2  # only `out` holds it


def test_error_paths_do_not_leak():
    fn = tiny_kernel()
    x, bad = np.ones(8, np.float32), np.ones(9, np.float32)
    wrong = np.ones(8, np.float64)
    for arg in (bad, wrong):
        for _ in range(2_000):
            with pytest.raises((ValueError, TypeError)):
                fn(x, arg)
        rx, ra = sys.getrefcount(x), sys.getrefcount(arg)
        before = rss_bytes()
        for _ in range(100_000):
            try:
                fn(x, arg)
            except (ValueError, TypeError):
                pass
        assert sys.getrefcount(x) == rx and sys.getrefcount(arg) == ra
        assert rss_bytes() - before < 4 << 20


def test_guard_checks_do_not_leak():
    gs = _native.GuardSet([
        G.Guard("TYPE", ("arg", 0), np.ndarray), G.Guard("DTYPE", ("arg", 0), np.dtype("f4")),
        G.Guard("SHAPE", ("arg", 0), (8,)), G.Guard("VALUE", ("arg", 1), (1, 2.0)),
        G.Guard("VALUE", ("attr", ("arg", 0), "ndim"), 1),
    ])
    args = (np.ones(8, np.float32), (1, 2.0))
    for _ in range(20_000):
        assert gs.check(args)
    r0 = sys.getrefcount(args[0])
    before = rss_bytes()
    for _ in range(CALLS // 2):
        gs.check(args)
    r1 = sys.getrefcount(args[0])  # outside the assert: pytest's rewriting holds a reference
    assert r1 == r0
    assert rss_bytes() - before < 4 << 20
