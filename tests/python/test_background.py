"""The tiered first call (Note [tiered first call] in dynexpr/background.py): a graph whose
unit is not cached runs with NumPy while its unit compiles on a background thread, then
the entry switches to the kernel. Results are NumPy's on both tiers."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dynexpr
from dynexpr import background, cache, cxx

from compare import assert_same


_NONCE = (os.getpid() % 9973) * 1e-7  # units of this process only: never in the cache yet


def make_chain(c):
    """A chain whose unit no other test or earlier run compiled (c is baked into it)."""
    c = c + _NONCE

    def chain(x, y):
        return np.tanh(x * c + y) * 0.5 - np.sqrt(np.abs(y)) + x * y

    return chain


@pytest.fixture
def fresh_cache():
    # The session's cache (its precompiled prelude is shared); the units are new to it.
    yield os.environ.get("DYNEXPR_CACHE_DIR") or os.path.expanduser("~/.cache/dynexpr")
    background.synchronize()


def inputs(n=4096, dtype=np.float32):
    rng = np.random.default_rng(7)
    return rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)


def test_first_call_runs_numpy_then_the_kernel(fresh_cache):
    dynexpr.config.background_compile = True
    chain = make_chain(1.25)
    f = dynexpr.capture(chain)
    x, y = inputs()
    first = f(x, y)
    entry = f.entries[0]
    # The entry swaps to the kernel only in a call that finds the compile done, and
    # the job was submitted during this first call: it ran the NumPy tier.
    assert type(entry.compiled).__name__ == "Tiered"
    assert_same(chain(x, y), first)
    assert background.synchronize(timeout=300), "the background compile did not finish"
    # The compile is done, but the entry swaps over at its next call.
    second = f(x, y)
    assert_same(chain(x, y), second)
    assert entry.compiled.__class__.__name__ == "Kernel", entry.compiled
    assert f.cache_info().compiles == 1 and f.cache_info().entries == 1
    # A cached unit is loaded at once: a new capture of the same function gets the kernel
    # on its first call, with no background job.
    g = dynexpr.capture(chain)
    assert_same(chain(x, y), g(x, y))
    assert g.entries[0].compiled.__class__.__name__ == "Kernel"
    assert background.pending() == 0


def test_calls_before_the_compile_finishes_are_numpy_exact(fresh_cache):
    dynexpr.config.background_compile = True
    chain = make_chain(1.5)
    f = dynexpr.capture(chain)
    for n in (1, 3):  # a second shape is a second entry, compiled in the queue after it
        x, y = inputs(n * 1000, np.float64)
        for _ in range(3):
            assert_same(chain(x, y), f(x, y))
    background.synchronize()
    for n in (1, 3):
        x, y = inputs(n * 1000, np.float64)
        assert_same(chain(x, y), f(x, y))
    kinds = {e.compiled.__class__.__name__ for e in f.entries}
    assert kinds == {"Kernel"}, kinds


def test_judged_entries_run_the_plain_function_while_compiling(fresh_cache, monkeypatch):
    # Note [plain while compiling] (judge.py): with judging on, no call runs the NumPy
    # tier, which is slower than the plain function for loop nodes.
    dynexpr.config.background_compile = True
    dynexpr.config.plain_fallback = True
    chain = make_chain(2.75)
    tier_calls = []
    real_init = background.Tiered.__init__

    def counting_init(self, job, fallback, name):
        def counted(*a):
            tier_calls.append(1)
            return fallback(*a)
        real_init(self, job, counted, name)

    monkeypatch.setattr(background.Tiered, "__init__", counting_init)
    f = dynexpr.capture(chain)
    x, y = inputs()
    for _ in range(5):
        assert_same(chain(x, y), f(x, y))
    assert type(f.entries[0].compiled).__name__ in ("Tiered", "Kernel")
    assert background.synchronize(timeout=300), "the background compile did not finish"
    for _ in range(3):
        assert_same(chain(x, y), f(x, y))
    assert f.entries[0].compiled.__class__.__name__ == "Kernel"
    assert tier_calls == []


def test_synchronize_after_a_first_call_covers_the_units_after_a_graph_break(fresh_cache):
    # Note [reaching the resume points] (judge.py): the first call reaches the break, so
    # the resume segment's unit is queued by then and synchronize() waits for it too.
    dynexpr.config.background_compile = True
    dynexpr.config.plain_fallback = True
    c = 1.0 + _NONCE

    def with_a_break(x, y):
        z = np.sqrt(x * x + c) - y
        total = float(z.sum())  # a graph break: a Python float from an array
        return (z - y) / total

    f = dynexpr.capture(with_a_break)
    x, y = inputs(20000, np.float64)
    assert_same(with_a_break(x, y), f(x, y))
    resumed = f._segments.all_entries()
    assert len(resumed) == 1, resumed
    assert background.synchronize(timeout=300), "the background compiles did not finish"
    for _ in range(3):
        assert_same(with_a_break(x, y), f(x, y))
    units = [f.entries[0].compiled] + [e.compiled for e in f._segments.all_entries()]
    assert [u.__class__.__name__ for u in units] == ["Kernel", "Kernel"], units
    assert background.pending() == 0


def test_a_failed_background_compile_raises_with_the_compiler_message(fresh_cache,
                                                                      monkeypatch):
    dynexpr.config.background_compile = True
    monkeypatch.setattr(cxx, "CXXFLAGS", cxx.CXXFLAGS + ("-fno-such-flag-dynexpr",))
    chain = make_chain(1.75)
    f = dynexpr.capture(chain)
    x, y = inputs()
    assert_same(chain(x, y), f(x, y))  # NumPy tier while it compiles (and fails)
    background.synchronize()
    with pytest.raises(cache.CompileError, match="no-such-flag-dynexpr"):
        f(x, y)
    with pytest.raises(cache.CompileError):
        f(x, y)  # every call, as a synchronous compile would
    dynexpr.config.suppress_errors = True
    with pytest.warns(dynexpr.DynexprWarning, match="keeps running the captured graph"):
        assert_same(chain(x, y), f(x, y))
    assert_same(chain(x, y), f(x, y))


def test_exit_finishes_the_running_compile_for_the_next_process(fresh_cache):
    c = 2.25 + _NONCE
    prog = textwrap.dedent(f"""
        import numpy as np, dynexpr
        def chain(x, y):
            return np.tanh(x * {c!r} + y) * 0.5 - np.sqrt(np.abs(y)) + x * y
        x = np.linspace(-1, 1, 999, dtype=np.float32)
        r = dynexpr.capture(chain)(x, x)
        assert np.allclose(r, chain(x, x), rtol=1e-5, atol=1e-6)
    """)
    env = dict(os.environ, DYNEXPR_CACHE_DIR=str(fresh_cache), DYNEXPR_BACKGROUND_COMPILE="1")
    p = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, env=env,
                       timeout=600, check=False)
    assert p.returncode == 0, p.stderr
    # The first process exited right after its NumPy-tier call; its compile was finished
    # at exit, so a second process loads the unit without compiling.
    check = textwrap.dedent(f"""
        import numpy as np, dynexpr
        from dynexpr import cache
        def chain(x, y):
            return np.tanh(x * {c!r} + y) * 0.5 - np.sqrt(np.abs(y)) + x * y
        x = np.linspace(-1, 1, 999, dtype=np.float32)
        f = dynexpr.capture(chain)
        f(x, x)
        print(cache.stats["compiles"], f.entries[0].compiled.__class__.__name__)
    """)
    p = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=env,
                       timeout=600, check=False)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["0", "Kernel"], p.stdout


def test_config_rejects_a_non_bool():
    with pytest.raises(TypeError, match="background_compile must be bool"):
        dynexpr.config.background_compile = "yes"
