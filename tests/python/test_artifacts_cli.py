"""python -m dynexpr cache ls | info | clear | why-miss (issue 15 part 5), run as the
user runs them: in a subprocess, on a cache a captured function filled in this process.
Every captured result is compared with NumPy's."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from cache_testing import use_cache

import dynexpr
from dynexpr import cache

# Its subject (compiler, cache files, generated text) does not depend on the CPython
# version: run_all.sh runs it on the first version only (conftest.py, one_python).
pytestmark = pytest.mark.one_python

MODULE = textwrap.dedent('''
    import numpy as np
    import dynexpr

    def plain(x, y):
        return np.tanh(x) * 2.0 + y

    f = dynexpr.capture(plain, dynamic=False)

    def args64():
        return np.linspace(-1, 1, 1000), np.ones(1000)

    def args32():
        return np.linspace(-1, 1, 1000, dtype=np.float32), np.ones(1000, np.float32)

    def args1024():
        return np.linspace(-1, 1, 1024), np.ones(1024)

    def args_c2():
        return np.ones((8, 125)), np.ones((8, 125))

    def args_f2():
        return np.asfortranarray(np.ones((8, 125))), np.ones((8, 125))
''')


@pytest.fixture
def mod(tmp_path, monkeypatch, shared_pch):
    use_cache(tmp_path / "cache", monkeypatch, shared_pch)
    work = tmp_path / "work"
    work.mkdir()
    (work / "wmmod.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(work))
    sys.modules.pop("wmmod", None)
    import wmmod

    yield work, wmmod
    sys.modules.pop("wmmod", None)


def cli(work, *argv) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "dynexpr", *argv], cwd=work,
                          capture_output=True, text=True, env=dict(os.environ), timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc


def call_and_check(m, make):
    args = make()
    got = m.f(*args)
    want = m.plain(*make())
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert got.dtype == want.dtype and got.shape == want.shape


def test_why_miss_names_the_dtype_the_extent_and_the_layout(mod):
    work, m = mod
    call_and_check(m, m.args64)
    call_and_check(m, m.args_c2)
    assert m.f.cache_info().compiles == 2

    out = cli(work, "cache", "why-miss", "wmmod:f", "--args-from", "wmmod:args32").stdout
    assert "x: dtype float32 (this call) vs float64 (cached)" in out
    assert "y: dtype float32 (this call) vs float64 (cached)" in out
    assert "shape" not in out.split("misses on", 1)[1]  # the nearest is the 1000 one

    out = cli(work, "cache", "why-miss", "wmmod:f", "--args-from", "wmmod:args1024").stdout
    assert "x.shape[0]: extent 1024 (this call) vs 1000 (cached)" in out
    assert "dtype" not in out.split("misses on", 1)[1]

    out = cli(work, "cache", "why-miss", "wmmod:f", "--args-from", "wmmod:args_f2").stdout
    assert "x: layout F (this call) vs C (cached)" in out
    assert "misses on 1 guard:" in out

    out = cli(work, "cache", "why-miss", "wmmod:plain", "--args-from", "wmmod:args64").stdout
    assert "every guard holds: this call hits the cache" in out


def test_why_miss_of_a_dynamic_entry_names_the_range(mod):
    work, m = mod
    x, y = m.args64()
    dynexpr.mark_dynamic(x, 0, min=2, max=1000)
    dynexpr.mark_dynamic(y, 0, min=2, max=1000)
    g = dynexpr.capture(m.plain)
    np.testing.assert_allclose(g(x, y), m.plain(x, y), rtol=1e-12)
    (work / "wmdyn.py").write_text(textwrap.dedent('''
        import numpy as np
        from wmmod import plain
        def big():
            return np.ones(4096), np.ones(4096)
    '''))
    out = cli(work, "cache", "why-miss", "wmdyn:plain", "--args-from", "wmdyn:big").stdout
    assert "x.shape[0]: extent 4096 (this call) is outside the cached dynamic range 2..1000" \
        in out


def test_ls_info_and_clear(mod):
    work, m = mod
    call_and_check(m, m.args64)
    out = cli(work, "cache", "ls").stdout
    assert "wmmod:plain(x: float64[1000] C, y: float64[1000] C)" in out
    assert "1 entries, 1 units" in out
    key = cache.unit_dir(next(iter(r for r in __import__("dynexpr.artifacts.record",
                         fromlist=["records"]).records()))["units"][0]).name
    out = cli(work, "cache", "info", key[:10]).stdout
    assert f"unit {key}" in out and "verified: yes" in out
    assert "used by wmmod:plain(x: float64[1000] C" in out
    out = cli(work, "cache", "info", "wmmod:plain").stdout
    assert "guard x.dtype == dtype('float64')" in out
    cli(work, "cache", "clear")
    out = cli(work, "cache", "ls").stdout
    assert "0 entries, 0 units" in out
    # The cleared cache is used again: the call compiles and is right.
    dynexpr.reset()
    cache.reset()
    call_and_check(m, m.args64)
    assert m.f.cache_info().compiles == 1


def test_why_miss_without_any_entry_says_so(mod):
    work, m = mod
    out = cli(work, "cache", "why-miss", "wmmod:f", "--args-from", "wmmod:args64").stdout
    assert "wmmod:plain: no cached entry" in out
