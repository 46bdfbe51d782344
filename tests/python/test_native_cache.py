"""The on-disk compile cache: cold, warm in a new process, damaged artifacts, two
processes compiling one unit at once, an unusable cache directory, compiler failures,
the precompiled prelude, and the (function, guards) index.

Each test gets its own cache directory; the precompiled prelude (tens of seconds to
build) is shared with the session's cache through a symlink.
"""

import json
import os
import stat
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("dynexpr._native", reason="the native extension is not built "
                    "(pip install -e . --no-build-isolation -Cbuild-dir=build-py)")

from dynexpr import cache, cxx, runtime, toolchain
from cache_testing import link_pch, use_cache
from native_graphs import GraphBuilder

# Its subject (compiler, cache files, generated text) does not depend on the CPython
# version: run_all.sh runs it on the first version only (conftest.py, one_python).
pytestmark = pytest.mark.one_python

HERE = Path(__file__).parent


def small_graph(scale=3.0):
    b = GraphBuilder(np.arange(6, dtype=np.float32), np.ones(6, np.float32))
    x, y = b.x
    b.output(b.ufunc("add", b.ufunc("multiply", x, scale), y))
    return b


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch, shared_pch):
    root = tmp_path / "cache"
    use_cache(root, monkeypatch, shared_pch)
    before = dict(cache.stats)
    yield root
    cache.reset()
    cache.stats.update(before)


def _delta(before, key):
    return cache.stats[key] - before[key]


def run_child(code: str, root: Path, extra_env=None) -> dict:
    """Runs code in a new Python process with the given cache; it prints one JSON line."""
    prog = textwrap.dedent(f"""
        import json, sys, time
        sys.path.insert(0, {str(HERE)!r})
        t0 = time.perf_counter()
        import numpy as np
        from dynexpr import cache, runtime
        from native_graphs import GraphBuilder
    """) + textwrap.dedent(code)
    env = dict(os.environ, DYNEXPR_CACHE_DIR=str(root), **(extra_env or {}))
    p = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, env=env,
                       timeout=900, check=False)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


CHILD_COMPILE = """
    b = GraphBuilder(np.arange(6, dtype=np.float32), np.ones(6, np.float32))
    x, y = b.x
    b.output(b.ufunc("add", b.ufunc("multiply", x, 3.0), y))
    fn = runtime.compile_graph(b.graph)
    b.check(fn)
    print(json.dumps({"compiles": cache.stats["compiles"], "hits": cache.stats["hits"],
                      "seconds": time.perf_counter() - t0}))
"""


def test_cold_then_warm_in_a_new_process(fresh_cache):
    before = dict(cache.stats)
    b = small_graph()
    built = runtime.build(b.graph)
    b.check(built.fn)
    assert _delta(before, "compiles") == 1
    art = cache.lookup(built.key)
    assert art is not None and art.so.is_file()
    assert (art.dir / "unit.cpp").read_text() == built.source
    layout = cache.cache_dir()
    for d in (fresh_cache, layout, layout / "units"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    # The same graph again in this process: a hit, no compile.
    b.check(runtime.compile_graph(b.graph))
    assert _delta(before, "compiles") == 1
    # A new process with the warm cache does not compile.
    child = run_child(CHILD_COMPILE, fresh_cache)
    assert child["compiles"] == 0 and child["hits"] == 1


def test_damaged_artifacts_are_rebuilt_never_loaded(fresh_cache):
    b = small_graph(5.0)
    built = runtime.build(b.graph)
    so = cache.lookup(built.key).so
    good = so.read_bytes()
    # This process has the unit mapped: damage it by replacing the file (a new inode),
    # as a rewrite in place would pull the pages from under the loaded code.
    def replace(path, data):
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    for damage in ("truncate", "flip", "drop-hash"):
        if damage == "truncate":
            replace(so, good[: len(good) // 2])
        elif damage == "flip":
            bad = bytearray(good)
            bad[len(bad) // 3] ^= 0xFF
            replace(so, bytes(bad))
        else:
            (so.parent / "unit.sha256").unlink()
        assert cache.lookup(built.key) is None, damage
        before = dict(cache.stats)
        b.check(runtime.compile_graph(b.graph))
        assert _delta(before, "compiles") == 1, damage
        assert cache.lookup(built.key) is not None
        so = cache.lookup(built.key).so
        good = so.read_bytes()


def test_two_processes_compile_one_unit_once(fresh_cache):
    prog = [sys.executable, "-c", textwrap.dedent(f"""
        import json, sys, time
        t0 = time.perf_counter()
        sys.path.insert(0, {str(HERE)!r})
        import numpy as np
        from dynexpr import cache, runtime
        from native_graphs import GraphBuilder
    """) + textwrap.dedent(CHILD_COMPILE.replace("3.0", "7.0"))]
    env = dict(os.environ, DYNEXPR_CACHE_DIR=str(fresh_cache))
    procs = [subprocess.Popen(prog, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for _ in range(2)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=900)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert sum(r["compiles"] for r in results) == 1
    assert sorted(r["hits"] for r in results) == [0, 1]
    units = [p for p in (cache.cache_dir() / "units").rglob("unit.so")]
    assert len(units) == 1
    leftovers = [p for p in (cache.cache_dir() / "units").rglob(".build-*")]
    assert not leftovers


def test_unusable_cache_dir_falls_back_with_one_warning(tmp_path, monkeypatch, shared_pch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("DYNEXPR_CACHE_DIR", str(blocker / "cache"))
    cache.reset()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            d1 = cache.cache_dir()
            d2 = cache.cache_dir()
            link_pch(d1, shared_pch)
            b = small_graph(11.0)
            b.check(runtime.compile_graph(b.graph))
            b13 = small_graph(13.0)
            b13.check(runtime.compile_graph(b13.graph))
        ours = [w for w in caught if "cache directory" in str(w.message)]
        assert len(ours) == 1, [str(w.message) for w in caught]
        assert issubclass(ours[0].category, RuntimeWarning)
        assert d1 == d2 and str(blocker) not in str(d1)
        assert stat.S_IMODE(d1.parent.stat().st_mode) == 0o700
    finally:
        cache.reset()


def test_compiler_failure_names_the_file_and_the_message(fresh_cache):
    with pytest.raises(cache.CompileError) as info:
        cxx.get_or_build("int broken( {\n", {})
    msg = str(info.value)
    assert "internal error" in msg and "error" in msg
    path = next(w for w in msg.split() if w.endswith(".cpp"))
    assert Path(path).read_text() == "int broken( {\n"


def test_precompiled_prelude_is_used(fresh_cache, tmp_path):
    pch = cxx.ensure_pch()
    assert pch is not None and (pch / "prelude.hpp.gch").is_file()
    src = tmp_path / "probe.cpp"
    src.write_text('#include "prelude.hpp"\nint probe() { return 1; }\n')
    cmd = cxx.compile_command(src, tmp_path / "probe.so", pch) + ["-H"]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr
    # gcc -H marks a precompiled header it used with "!"; -Winvalid-pch says why not.
    assert f"! {pch}/prelude.hpp.gch" in p.stderr, p.stderr[:2000]
    assert "not used because" not in p.stderr


def test_index_maps_function_and_guards_to_units(fresh_cache):
    b = small_graph(17.0)
    built = runtime.build(b.graph)
    cache.index_put("mod.fn:12", "guards-abc", {"units": [built.key]})
    assert cache.index_get("mod.fn:12", "guards-abc") == {"units": [built.key]}
    assert cache.index_get("mod.fn:12", "guards-other") is None
    child = run_child("""
        rec = cache.index_get("mod.fn:12", "guards-abc")
        fn = runtime.load(rec["units"][0])
        x = np.arange(6, dtype=np.float32)
        ok = bool(np.allclose(fn(x, np.ones(6, np.float32))[0], x * 17 + 1))
        print(json.dumps({"ok": ok, "compiles": cache.stats["compiles"],
                          "seconds": time.perf_counter() - t0}))
    """, fresh_cache)
    assert child["ok"] and child["compiles"] == 0
    assert runtime.load("0" * 64) is None


def test_a_checkout_and_an_installed_copy_share_keys(tmp_path):
    """The installed package compiles against its own copy of the headers
    (dynexpr/_include): the same content gives the same keys, so a cache (and a prelude
    precompiled at install time) serves both."""
    import shutil

    inc, kern = toolchain.source_dirs()
    fake = tmp_path / "_include"
    shutil.copytree(inc / "dynexpr", fake / "dynexpr")
    (fake / "kernels").mkdir()
    for name in toolchain.KERNEL_FILES:
        shutil.copyfile(kern / name, fake / "kernels" / name)
    assert toolchain.headers_hash(inc, kern) == toolchain.headers_hash(fake, fake / "kernels")
    (fake / "dynexpr" / "extra.hpp").write_text("// changed\n")
    assert toolchain.headers_hash(inc, kern) != toolchain.headers_hash(fake, fake / "kernels")
