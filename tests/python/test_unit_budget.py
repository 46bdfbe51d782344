"""The compile budget (Note [compile budget] in split.py): a graph over
dynexpr.config.unit_budget nodes is compiled as several units, called in order, with
NumPy's results; and no fused expression nests deeper than g++ accepts (Note [fused
depth] in schedule.py)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dynexpr
from cache_testing import use_cache
from compare import assert_same
from dynexpr import cache, split
from dynexpr.capture import reroll

# Its subject (compiler, cache files, generated text) does not depend on the CPython
# version: run_all.sh runs it on the first version only (conftest.py, one_python).
pytestmark = pytest.mark.one_python

BUDGET = 30  # nodes: small, so a few unrolled steps are over it


def heat(u, k, T):  # a 2-D stencil updating its argument in place, ~13 nodes per step
    for t in range(T):
        u[1:-1, 1:-1] = u[1:-1, 1:-1] + k * (
            u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4 * u[1:-1, 1:-1])
    return u


def mixed(x, y, n):  # several results, a reduction, a float32 one, an argument's update
    s = []
    for i in range(n):
        x = np.tanh(x * 1.01 + y)
        s.append(x.sum())
        y = y - 0.1 * x
    y32 = (x * y).astype(np.float32) + np.float32(1)
    return x, s[1], s[-1], y32


def fused(x, y, T):  # single-use pointwise chain: one expression 3T ops deep
    for t in range(T):
        x = np.tanh(x * 0.999 + y)
    return x


@pytest.fixture
def unrolled(monkeypatch):
    """Loops stay unrolled (capture/reroll.py off) and the budget is BUDGET nodes."""
    monkeypatch.setattr(reroll, "ENABLED", False)
    monkeypatch.setattr(dynexpr.config, "unit_budget", BUDGET)


def _units(f) -> int:
    (entry,) = f.entries
    return getattr(entry.compiled, "units", 1)


def test_stencil_over_budget_is_several_units_with_numpy_results(unrolled):
    rng = np.random.default_rng(0)
    u0 = rng.random((24, 20))
    want_u = u0.copy()
    want = heat(want_u, 0.1, 6)
    f = dynexpr.capture(heat, backend="cpu")
    got_u = u0.copy()
    got = f(got_u, 0.1, 6)
    assert_same(want, got)
    assert_same(want_u, got_u)  # the argument updated in place, as NumPy does
    assert got is got_u  # and returned as the same object
    assert _units(f) > 1
    again = u0.copy()
    assert_same(heat(u0.copy(), 0.1, 6), f(again, 0.1, 6))  # the second call: a hit


def test_several_results_and_dtypes_across_units(unrolled):
    x = np.linspace(-1, 1, 37)
    y = np.linspace(0.5, 2, 37)
    want = mixed(x.copy(), y.copy(), 10)
    f = dynexpr.capture(mixed, backend="cpu")
    xs, ys = x.copy(), y.copy()
    got = f(xs, ys, 10)
    assert len(got) == len(want)
    for w, g in zip(want, got):
        assert_same(w, g)
    assert_same(x, xs)
    assert_same(y, ys)  # not mutated: y = y - ... rebinds
    assert _units(f) > 1


def test_explain_says_how_a_graph_is_split(unrolled):
    u = np.random.default_rng(1).random((16, 16))
    text = str(dynexpr.explain(heat, u, 0.1, 6))
    assert "split into " in text and f"(budget {BUDGET} nodes" in text
    k = int(text.split("split into ")[1].split()[0])
    assert k > 1
    dynexpr.config.unit_budget = 0  # no budget: one unit, nothing said
    assert "split into" not in str(dynexpr.explain(heat, u, 0.1, 6))


def _unit_sizes(*args) -> list[int]:
    text = str(dynexpr.explain(mixed, *args))
    return [int(n) for n in text.split("nodes per unit: ")[1].split(")")[0].split(", ")]


def test_a_small_last_unit_is_balanced_with_the_one_before(unrolled, monkeypatch):
    """Units compile side by side: a tail far under the budget is re-cut with the unit
    before it (Note [compile budget]), and every unit stays within the budget."""
    x, y = np.linspace(-1, 1, 37), np.linspace(0.5, 2, 37)
    for n in (6, 12):
        sizes = _unit_sizes(x, y, n)
        with monkeypatch.context() as m:
            m.setattr(split, "_balance_tail", lambda s, groups, w, limit: groups)
            greedy = _unit_sizes(x, y, n)
        assert sum(sizes) == sum(greedy) and len(sizes) == len(greedy)
        assert greedy[:-2] == sizes[:-2] and 2 * greedy[-1] < BUDGET  # the case it is for
        assert max(sizes) <= BUDGET and abs(sizes[-1] - sizes[-2]) < greedy[-2] - greedy[-1]
        f = dynexpr.capture(mixed, backend="cpu")
        for w, v in zip(mixed(x, y, n), f(x, y, n)):
            assert_same(w, v)
        assert _units(f) == len(sizes)


def test_a_shared_prefix_is_one_unit(unrolled):
    """Each unit is cached by its own content: a graph that begins as another did
    compiles only the units after the shared prefix."""
    x = np.linspace(-1, 1, 37)
    y = np.linspace(0.5, 2, 37)
    dynexpr.capture(mixed, backend="cpu")(x, y, 10)
    before = cache.stats["compiles"]
    g = dynexpr.capture(mixed, backend="cpu")
    got = g(x, y, 14)
    for w, v in zip(mixed(x, y, 14), got):
        assert_same(w, v)
    (entry,) = g.entries
    assert cache.stats["compiles"] - before < len(set(entry.compiled.keys))


def test_deep_single_use_chain_compiles(monkeypatch):
    """70 steps of x = tanh(x * a + y) are one fused expression 210 ops deep: g++ gave
    up on its type ("template instantiation depth exceeds maximum of 900") until
    Note [fused depth]."""
    monkeypatch.setattr(reroll, "ENABLED", False)
    x = np.linspace(-1, 1, 33)
    y = np.linspace(0, 0.5, 33)
    f = dynexpr.capture(fused, backend="cpu")
    assert_same(fused(x, y, 70), f(x, y, 70))


KILLED = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    import numpy as np
    import dynexpr
    from dynexpr import cache, cxx
    from dynexpr.capture import reroll
    sys.path.insert(0, sys.argv[1])
    from test_unit_budget import heat
    reroll.ENABLED = False
    dynexpr.config.unit_budget = 30
    dynexpr.config.background_compile = False
    calls = []
    real = cxx._compiler

    def compiler(cmd):
        if not any(a.endswith("unit.cpp") for a in cmd):
            return real(cmd)  # the runtime library, built once for this cache
        calls.append(cmd)
        if len(calls) == 1:
            return real(cmd)
        # Every later unit: wait until the first is published, start g++, and die
        # while it runs (what a SIGKILL or an OOM kill does to a compiling process).
        units = cache.cache_dir() / "units"
        for _ in range(600):
            if any(units.glob("*/*/unit.sha256")):
                break
            time.sleep(0.1)
        subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGKILL)

    cxx._compiler = compiler
    dynexpr.capture(heat, backend="cpu")(np.ones((16, 16)), 0.1, 5)
""")


def test_killed_compile_of_one_unit_leaves_no_half_entry(monkeypatch, tmp_path, shared_pch):
    use_cache(tmp_path / "cache", monkeypatch, shared_pch)
    here = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.run([sys.executable, "-c", KILLED, here], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == -9, proc.stderr
    # What was published is whole: every unit directory verifies; a half-built one
    # is at most a temporary (.build-*) that the next build removes.
    units = cache.cache_dir() / "units"
    published = [d for d in units.glob("*/*") if not d.name.startswith(".")]
    assert published, "the first unit was published before the kill"
    for d in published:
        assert cache.lookup(d.name) is not None, d
    # The next process gets NumPy's result, compiling only the units that are missing.
    monkeypatch.setattr(reroll, "ENABLED", False)
    monkeypatch.setattr(dynexpr.config, "unit_budget", BUDGET)
    u0 = np.random.default_rng(3).random((16, 16))
    f = dynexpr.capture(heat, backend="cpu")
    before = cache.stats["compiles"]
    got_u = u0.copy()
    assert_same(heat(u0.copy(), 0.1, 5), f(got_u, 0.1, 5))
    (entry,) = f.entries
    distinct = set(entry.compiled.keys)  # 5 steps in parts of 2, 2, 1: two distinct units
    assert len(distinct) == 2
    assert {d.name for d in published} < distinct
    assert cache.stats["compiles"] - before == len(distinct) - len(published)


_NONCE = (os.getpid() % 9973) * 1e-7  # units of this process only: never in the cache yet


def test_background_compile_of_a_split_graph(unrolled):
    """The tiered first call (background.py) works as for one unit: NumPy first, then
    the units, with NumPy's results on both tiers."""
    from dynexpr import background

    dynexpr.config.background_compile = True
    k = 0.1 + _NONCE
    u0 = np.random.default_rng(4).random((16, 16))
    f = dynexpr.capture(heat, backend="cpu")
    try:
        got_u = u0.copy()
        assert_same(heat(u0.copy(), k, 6), f(got_u, k, 6))
        (entry,) = f.entries
        assert type(entry.compiled).__name__ == "Tiered"
        assert background.synchronize(timeout=600), "the background compile did not finish"
        got_u = u0.copy()
        assert_same(heat(u0.copy(), k, 6), f(got_u, k, 6))
        assert isinstance(entry.compiled, split.SplitKernel), entry.compiled
    finally:
        background.synchronize()


def test_no_compiler_runs_numpy(unrolled, monkeypatch):
    """A unit that cannot be built (here: no disk space to start g++) in a split graph
    falls back to NumPy with the warning, as one unit does (Note [when building is not
    possible] in backends/policy.py)."""
    from dynexpr import cxx, toolchain

    def no_space(cmd):
        raise toolchain.unavailable(OSError(28, "No space left on device"),
                                    f"cannot start the compiler {cmd[0]}")

    monkeypatch.setattr(cxx, "_compiler", no_space)
    k = 0.2 + _NONCE  # units no earlier test compiled
    u0 = np.random.default_rng(5).random((16, 16))
    f = dynexpr.capture(heat, backend="cpu")
    got_u = u0.copy()
    with pytest.warns(Warning, match="cannot be compiled here now"):
        got = f(got_u, k, 6)
    want_u = u0.copy()
    assert_same(heat(want_u, k, 6), got)
    assert_same(want_u, got_u)
