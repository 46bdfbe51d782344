"""The cache's trust rule and its faults (issue 11): directories another user can write
are never loaded from (Note [cache trust] in dynexpr/trust.py), every loaded artifact is
verified (Note [verified artifacts] in dynexpr/cache.py), a build the machine cannot do
runs NumPy instead, temporaries of killed builds go away, concurrent first calls build
one entry, and forked children do not hang on background compiles.

Tests run as root, so a foreign owner is made with os.chown(…, 65534) (nobody). Every
captured result is compared with NumPy. Children run in new processes where a dlopen
already done in this one would hide what is being tested.
"""

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

_native = pytest.importorskip("dynexpr._native", reason="the native extension is not built")

import dynexpr
from dynexpr import cache, cxx, trust
from dynexpr.toolchain import BuildUnavailable

from cache_testing import link_pch, use_cache
from compare import assert_same

# Its subject (compiler, cache files, generated text) does not depend on the CPython
# version: run_all.sh runs it on the first version only (conftest.py, one_python).
pytestmark = pytest.mark.one_python

ROOT = Path(__file__).resolve().parents[2]

HERE = Path(__file__).parent
NOBODY = 65534
_NONCE = (os.getpid() % 9973) * 1e-7  # units of this run only


# ----------------------------------------------------------------------- fixtures
@pytest.fixture
def fresh(tmp_path, monkeypatch, shared_pch):
    """A new trusted cache (tmp_path is under sticky /tmp) sharing the session's prelude."""
    root = tmp_path / "cache"
    use_cache(root, monkeypatch, shared_pch)
    yield root
    cache.reset()


CHAIN = """
import numpy as np
def chain(x, y):
    return np.tanh(x * {c!r} + y) * 0.5 - x * y
"""


def run_child(code: str, root: Path | None, extra_env=None, cwd=None, timeout=600) -> dict:
    """Runs code in a new process on cache `root`; it prints one JSON line last."""
    prog = textwrap.dedent(f"""
        import json, os, sys, warnings
        sys.path.insert(0, {str(HERE)!r})
        import numpy as np
        import dynexpr
        from dynexpr import cache, runtime
        dynexpr.config.background_compile = False
    """) + textwrap.dedent(code)
    env = dict(os.environ, **(extra_env or {}))
    if root is not None:
        env["DYNEXPR_CACHE_DIR"] = str(root)
    p = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, env=env,
                       cwd=cwd, timeout=timeout, check=False)
    assert p.returncode == 0, f"child died ({p.returncode}):\n{p.stderr[-4000:]}"
    return json.loads(p.stdout.strip().splitlines()[-1])


COMPUTE = """
exec({chain!r})
f = dynexpr.capture(chain)
x = np.linspace(-1, 1, 1000, dtype=np.float32); y = np.cos(x)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    got = f(x, y)
want = chain(x, y)
print(json.dumps({{"same": bool(got.dtype == want.dtype and got.shape == want.shape
                               and np.allclose(got, want, rtol=1e-5, atol=1e-6)),
                   "compiles": cache.stats["compiles"], "hits": cache.stats["hits"],
                   "kind": type(f.entries[0].compiled).__name__,
                   "warnings": [str(m.message) for m in w],
                   "layout": str(cache.cache_dir())}}))
"""


def compute(root, c, **kw) -> dict:
    return run_child(COMPUTE.format(chain=CHAIN.format(c=c)), root, **kw)


def unit_dirs(layout: Path) -> list[Path]:
    return sorted(p.parent for p in (layout / "units").rglob("unit.so"))


# ------------------------------------------------------------------ untrusted caches
PLANT = r"""
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
__attribute__((constructor)) static void planted(void) {
  FILE* f = fopen("%s", "w");
  if (f) { fputs("planted code ran", f); fclose(f); }
}
int32_t dynexpr_abi_version(void) { return %d; }
int32_t dynexpr_kernel(const void* in, int32_t n_in, const void* out, int32_t n_out,
                       char* err, size_t err_len) { return 0; }
"""


def plant(layout: Path, marker: Path, tmp: Path) -> None:
    """Replaces every unit in `layout` by one whose constructor writes `marker`, with the
    digest recorded as dynexpr records it: only the trust rule can keep it out."""
    src = tmp / "plant.c"
    src.write_text(PLANT % (marker, _native.ABI_VERSION))  # the ABI: only trust refuses it
    so = tmp / "plant.so"
    subprocess.run(["cc", "-shared", "-fPIC", str(src), "-o", str(so)], check=True)
    for d in unit_dirs(layout):
        shutil.copyfile(so, d / "unit.so")
        digest = cache.unit_digest((d / "unit.so").read_bytes(), (d / "meta.json").read_bytes())
        (d / "unit.sha256").write_text(digest + "\n")


def chown_tree(path: Path, uid: int) -> None:
    for top, dirs, files in os.walk(path):
        for n in dirs + files:
            os.lchown(os.path.join(top, n), uid, -1)
    os.lchown(path, uid, -1)


@pytest.mark.parametrize("how", ["foreign-owner", "group-writable", "writable-ancestor"])
def test_a_cache_others_can_write_is_never_loaded(tmp_path, shared_pch, how):
    c = 1.5 + _NONCE
    good = tmp_path / "good" / "cache"
    made = compute(good, c)
    assert made["same"] and made["compiles"] == 1
    marker = tmp_path / "marker"
    plant(Path(made["layout"]), marker, tmp_path)
    # Control: the planted cache, trusted, is loaded (so the plant is a real one).
    control = compute(good, c)
    assert marker.exists() and not control["same"]
    marker.unlink()

    victim = tmp_path / "victim" / "cache"
    victim.parent.mkdir()
    shutil.copytree(good, victim, symlinks=True)
    if how == "foreign-owner":
        chown_tree(victim, NOBODY)
    elif how == "group-writable":
        os.chmod(victim, 0o770)
    else:  # a directory above the cache that anyone can write (not sticky)
        os.chmod(victim.parent, 0o777)
    got = compute(victim, c, extra_env={"DYNEXPR_NO_PCH": "1"})  # in the fallback
    assert not marker.exists(), "dynexpr ran code from a cache another user can write"
    assert got["same"], got
    warned = [w for w in got["warnings"] if "not safe to load code from" in w]
    assert len(warned) == 1, got["warnings"]
    assert str(victim) in warned[0] and "DYNEXPR_CACHE_DIR" in warned[0]
    if how == "foreign-owner":
        assert "nobody" in warned[0] or "65534" in warned[0]
    assert not got["layout"].startswith(str(victim))


def test_trust_rule_on_directories(tmp_path):
    ours = tmp_path / "ours"
    ours.mkdir(mode=0o700)
    assert trust.problem(ours) is None  # under sticky /tmp: /tmp is the boundary
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, NOBODY, -1)
    assert "owned by" in trust.problem(theirs)
    inner = theirs / "inner"
    inner.mkdir(mode=0o700)
    assert "owned by" in trust.problem(inner)  # an ancestor is someone else's
    open_ = tmp_path / "open"
    open_.mkdir()
    os.chmod(open_, 0o777)
    assert "writable by" in trust.problem(open_)
    os.chmod(open_, 0o1777)  # sticky, like /tmp: a boundary
    assert trust.problem(open_) is None


def test_package_prebuilt_dir_is_checked_too(tmp_path, fresh, monkeypatch):
    """The package's _pch directory (prelude and runtime library installed with it) is
    used only when trusted and verified."""
    rt = cxx.ensure_runtime() / cxx.RUNTIME_LIB
    pkg = tmp_path / "pkg"
    inst = pkg / "_pch"
    inst.mkdir(parents=True)
    shutil.copyfile(rt, inst / cxx.RUNTIME_LIB)
    shutil.copyfile(str(rt) + ".sha256", str(inst / cxx.RUNTIME_LIB) + ".sha256")
    (inst / "key.txt").write_text(cxx.pch_key() + "\n")
    os.chmod(pkg, 0o755)
    os.chmod(inst, 0o755)
    monkeypatch.setattr(cxx, "PKG_DIR", pkg)
    cache._verified.clear()
    assert cxx.ensure_runtime() == inst  # control: trusted and verified
    os.chown(inst, NOBODY, -1)
    cache._verified.clear()
    assert cxx.ensure_runtime() != inst
    os.chown(inst, 0, -1)
    (inst / cxx.RUNTIME_LIB).write_bytes(b"\x7fELF garbage")
    cache._verified.clear()
    assert cxx.ensure_runtime() != inst


def test_created_files_are_private(fresh):
    got = compute(fresh, 2.5 + _NONCE)
    assert got["same"]
    layout = Path(got["layout"])
    (d,) = unit_dirs(layout)
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert stat.S_IMODE((d / "unit.so").stat().st_mode) == 0o700
    for name in ("unit.cpp", "meta.json", "unit.sha256"):
        assert stat.S_IMODE((d / name).stat().st_mode) == 0o600, name
    rt = next((layout / "rt").iterdir())
    assert stat.S_IMODE(rt.stat().st_mode) == 0o700


# ------------------------------------------------------------------- damaged artifacts
def test_truncated_runtime_library_is_rebuilt_not_mapped(fresh):
    c = 3.5 + _NONCE
    assert compute(fresh, c)["same"]
    (lib,) = (fresh / "v1" / "rt").glob(f"*/{cxx.RUNTIME_LIB}")
    with open(lib, "r+b") as fh:  # in place, as a full disk or a crash leaves it
        fh.truncate(4096)
    got = compute(fresh, c)  # used to die of SIGBUS
    assert got["same"] and got["compiles"] == 0 and got["kind"] == "Kernel"
    assert lib.stat().st_size > 4096


def test_garbage_unit_with_a_matching_hash_is_rebuilt(fresh):
    c = 4.5 + _NONCE
    assert compute(fresh, c)["same"]
    (d,) = unit_dirs(fresh / "v1")
    (d / "unit.so").write_bytes(b"not an ELF file at all" * 100)
    digest = cache.unit_digest((d / "unit.so").read_bytes(), (d / "meta.json").read_bytes())
    (d / "unit.sha256").write_text(digest + "\n")
    got = compute(fresh, c)
    assert got["same"] and got["compiles"] == 1 and got["kind"] == "Kernel"
    again = compute(fresh, c)
    assert again["same"] and again["compiles"] == 0


def test_edited_meta_json_is_caught_by_the_digest(fresh):
    c = 5.5 + _NONCE
    assert compute(fresh, c)["same"]
    (d,) = unit_dirs(fresh / "v1")
    meta = json.loads((d / "meta.json").read_text())
    meta["outputs"][0][1] = [7]  # a wrong output extent
    (d / "meta.json").write_text(json.dumps(meta))
    got = compute(fresh, c)
    assert got["same"] and got["compiles"] == 1


def test_damaged_precompiled_prelude_is_rebuilt(fresh, monkeypatch, shared_pch):
    layout = cache.cache_dir()
    own = layout / "pch" / cxx.pch_key()
    own.unlink()  # this test's own copy, not the session's link
    own.mkdir()
    for name in ("prelude.hpp", "prelude.hpp.gch", "prelude.hpp.gch.sha256", "key.txt"):
        shutil.copyfile(shared_pch / name, own / name)
    cache._verified.clear()
    assert cxx.ensure_pch() == own  # control: a good copy is used as it is
    builds = []

    def build(d):  # the real build takes a minute: copy the session's instead
        builds.append(d)
        for name in ("prelude.hpp.gch", "prelude.hpp.gch.sha256"):
            shutil.copyfile(shared_pch / name, d / name)

    monkeypatch.setattr(cxx, "build_pch", build)
    for damage in (b"", b"garbage" * 1000):
        (own / "prelude.hpp.gch").write_bytes(damage)
        cache._verified.clear()
        assert cxx.ensure_pch() == own
        assert cache.verify_file(own / "prelude.hpp.gch")
    assert builds == [own, own]


@pytest.mark.parametrize("garbage", ["[1, 2]", "{\"k\": [3]}", "not json", ""])
def test_garbage_toolchain_and_index_json_are_ignored(fresh, garbage):
    memo = cache.cache_dir() / "toolchain.json"
    memo.write_text(garbage)
    cache.reset()
    tc = cxx.toolchain()
    assert tc.version and tc.isa
    assert isinstance(json.loads(memo.read_text()), dict)  # rewritten
    cache.index_put("mod.fn", "guards", {"units": ["k"]})
    cache._index_file("mod.fn", "guards").write_text(garbage)
    assert cache.index_get("mod.fn", "guards") is None


# ------------------------------------------------------------------------ the linker
GOLD = ("-fuse-ld=gold", "-Wl,--enable-new-dtags")


def test_units_link_with_gold_where_the_compiler_drives_it(fresh, monkeypatch):
    """Note [the linker]: gold when g++ can link with it (binutils ships it beside ld),
    else the compiler's default; either way the unit's search path is a DT_RUNPATH."""
    monkeypatch.delenv("DYNEXPR_LD", raising=False)
    cache.reset()
    gold = subprocess.run([cxx.toolchain().cxx, "-fuse-ld=gold", "-Wl,--version"],
                          capture_output=True, text=True, check=False)
    assert cxx.toolchain().link == (GOLD if gold.returncode == 0 else ())
    assert compute(fresh, 9.5 + _NONCE)["compiles"] == 1
    (d,) = unit_dirs(fresh / "v1")
    dyn = subprocess.run(["readelf", "-d", str(d / "unit.so")], capture_output=True,
                         text=True, check=True).stdout
    assert "(RUNPATH)" in dyn and "(RPATH)" not in dyn, dyn


def test_dynexpr_ld_picks_the_linker_and_a_bad_one_is_a_clear_error(fresh, monkeypatch):
    monkeypatch.setenv("DYNEXPR_LD", "default")
    cache.reset()
    default = cxx.toolchain()
    assert default.link == ()
    monkeypatch.setenv("DYNEXPR_LD", "bfd")
    cache.reset()
    bfd = cxx.toolchain()
    assert bfd.link == ("-fuse-ld=bfd", "-Wl,--enable-new-dtags")
    assert bfd.fingerprint() != default.fingerprint()  # units of each linker keyed apart
    for bad, says in (("no-such-linker", "cannot link a shared library here"),
                      ("gold; rm -rf ~", "is not a linker name")):
        monkeypatch.setenv("DYNEXPR_LD", bad)
        cache.reset()
        with pytest.raises(BuildUnavailable, match=re.escape(says)) as e:
            cxx.toolchain()
        assert "DYNEXPR_LD" in str(e.value)


def test_prelude_and_runtime_library_build_side_by_side(tmp_path, monkeypatch):
    """A new toolchain's two prerequisites are built at once, on two threads, and an
    error of either still reaches the caller."""
    monkeypatch.setenv("DYNEXPR_CACHE_DIR", str(tmp_path / "new"))
    cache.reset()
    runtime_started = threading.Event()
    seen = {}

    def prelude(d):
        seen["prelude"] = threading.current_thread().name
        # returns only once the runtime library's build has begun elsewhere
        seen["overlapped"] = runtime_started.wait(timeout=120)
        raise cache.CompileError("fake: the prelude does not compile")

    def runtime(d):
        seen["runtime"] = threading.current_thread().name
        runtime_started.set()
        raise BuildUnavailable("fake: no room for the runtime library")

    monkeypatch.setattr(cxx, "build_pch", prelude)
    monkeypatch.setattr(cxx, "build_runtime", runtime)
    with pytest.raises(BuildUnavailable, match="no room for the runtime library"):
        cxx.ensure_prelude_and_runtime()
    assert seen["overlapped"] and seen["prelude"] != seen["runtime"], seen
    cache.reset()


# --------------------------------------------------------------- where the cache is
def test_a_copied_cache_loads_without_recompiling(fresh, tmp_path):
    c = 6.5 + _NONCE
    assert compute(fresh, c)["compiles"] == 1
    (d,) = unit_dirs(fresh / "v1")
    dyn = subprocess.run(["readelf", "-d", str(d / "unit.so")], capture_output=True,
                         text=True, check=True).stdout
    assert "$ORIGIN/" in dyn, dyn
    moved = tmp_path / "moved"
    shutil.copytree(fresh, moved, symlinks=True)
    shutil.rmtree(fresh)  # the old location is gone
    got = compute(moved, c)
    assert got["same"] and got["compiles"] == 0 and got["kind"] == "Kernel"


def test_relative_cache_dir_survives_chdir(tmp_path, shared_pch):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    code = f"""
        exec({CHAIN.format(c=7.5 + _NONCE)!r})
        f = dynexpr.capture(chain)
        x = np.linspace(-1, 1, 100, dtype=np.float32)
        same = [bool(np.allclose(f(x, x), chain(x, x)))]
        os.chdir({str(b)!r})
        g = dynexpr.capture(lambda x: np.exp(x) * {8.5 + _NONCE!r})
        same.append(bool(np.allclose(g(x), np.exp(x) * {8.5 + _NONCE!r})))
        print(json.dumps({{"same": same, "compiles": cache.stats["compiles"]}}))
    """
    got = run_child(code, None, extra_env={"DYNEXPR_CACHE_DIR": "relcache",
                                           "DYNEXPR_NO_PCH": "1"}, cwd=a)
    assert got["same"] == [True, True] and got["compiles"] == 2
    assert len(unit_dirs(a / "relcache" / "v1")) == 2
    assert not (b / "relcache").exists()


def test_config_cache_dir_switches_the_cache(fresh, tmp_path, shared_pch):
    other = tmp_path / "other"
    c = 9.5 + _NONCE

    def chain(x, y):
        return np.tanh(x * c + y) * 0.5 - x * y

    x = np.linspace(-1, 1, 100, dtype=np.float32)
    try:
        dynexpr.config.cache_dir = str(other)
        assert dynexpr.config.cache_dir == str(other)
        link_pch(cache.cache_dir(), shared_pch)
        assert_same(chain(x, x), dynexpr.capture(chain)(x, x))
    finally:
        del dynexpr.config.cache_dir
    assert len(unit_dirs(other / "v1")) == 1
    assert not unit_dirs(fresh / "v1")
    assert dynexpr.config.cache_dir == str(fresh)


def test_config_num_threads_sizes_the_kernel_pool(fresh):
    code = f"""
        from dynexpr import runtime
        f = dynexpr.capture(lambda x: np.sqrt(np.abs(x)) * {10.5 + _NONCE!r})
        x = np.linspace(-1, 1, 1 << 22)
        tasks = lambda: len(os.listdir("/proc/self/task"))
        dynexpr.config.num_threads = 3
        before = tasks()
        same = bool(np.allclose(f(x), np.sqrt(np.abs(x)) * {10.5 + _NONCE!r}))
        three = (runtime.kernel_threads(), tasks() - before)
        dynexpr.config.num_threads = 1
        f(x)
        one = (runtime.kernel_threads(), tasks() - before)
        print(json.dumps({{"same": same, "three": three, "one": one}}))
    """
    got = run_child(code, fresh)
    assert got["same"]
    assert got["three"] == [3, 2], got  # the caller and two workers
    assert got["one"] == [1, 0], got



def test_config_spin_us_sets_the_pools_spin_time(fresh):
    """dynexpr.config.spin_us reaches the runtime library's pool (Note [spin then block]):
    set before the first kernel loads, after it, and -1 for the library's default; a bad
    value is refused by config and never reaches C++."""
    code = f"""
        from dynexpr import runtime
        f = dynexpr.capture(lambda x: np.sqrt(np.abs(x)) * {11.5 + _NONCE!r})
        x = np.linspace(-1, 1, 1 << 20)
        dynexpr.config.spin_us = 2500
        same = bool(np.allclose(f(x), np.sqrt(np.abs(x)) * {11.5 + _NONCE!r}))
        at_load = runtime.kernel_spin_us()
        dynexpr.config.spin_us = 0
        zero = runtime.kernel_spin_us()
        f(x)
        dynexpr.config.spin_us = -1
        default = runtime.kernel_spin_us()
        try:
            dynexpr.config.spin_us = -2
            refused = ""
        except ValueError as e:
            refused = str(e)
        print(json.dumps({{"same": same, "at_load": at_load, "zero": zero,
                           "default": default, "refused": refused,
                           "after": runtime.kernel_spin_us()}}))
    """
    got = run_child(code, fresh)
    assert got["same"]
    assert got["at_load"] == 2500 and got["zero"] == 0, got
    text = (ROOT / "include/dynexpr/parallel/thread_pool.hpp").read_text()
    default = int(re.search(r"#define DYNEXPR_DEFAULT_SPIN_US (\d+)", text).group(1))
    assert got["default"] == default == got["after"], got
    assert "spin_us must be >= -1, got -2" in got["refused"]

# ------------------------------------------------------- when nothing can be built
FAKE_CXX = """#!/bin/sh
# g++ for questions, a full disk for builds (as the linker reports it)
case "$*" in
  *--version*|*--help=target*) exec g++ "$@" ;;
esac
echo "/usr/bin/ld: final link failed: No space left on device" >&2
exit 1
"""


def _check_numpy_with_one_warning(match: str) -> None:
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal(500), rng.standard_normal(500)
    c = 11.5 + _NONCE

    def chain(x, y):
        return np.tanh(x * c + y) * 0.5 - x * y

    def other(x):
        return np.exp(x) + c

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f, g = dynexpr.capture(chain), dynexpr.capture(other)
        for _ in range(2):
            assert_same(chain(x, y), f(x, y))
            assert_same(other(x), g(x))
    ours = [w for w in caught if "cannot be compiled here" in str(w.message)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert match in str(ours[0].message)


@pytest.fixture
def disk_full_cxx(tmp_path, monkeypatch):
    """CXX is a compiler that fails as g++ does when the disk fills while linking."""
    cxx = tmp_path / "fake-g++"
    cxx.write_text(FAKE_CXX)
    cxx.chmod(0o755)
    monkeypatch.setenv("CXX", str(cxx))
    cache.reset()


def test_disk_full_while_linking_runs_numpy(fresh, disk_full_cxx):
    _check_numpy_with_one_warning("No space left on device")


def test_disk_full_while_writing_runs_numpy(fresh, monkeypatch):
    import errno

    def full(path, data, mode=0o600):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(trust, "write_private", full)
    _check_numpy_with_one_warning("No space left on device")


def test_missing_compiler_runs_numpy(fresh, monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent")
    cache.reset()
    _check_numpy_with_one_warning("no C++ compiler")


def test_disk_full_in_a_background_compile_runs_numpy(fresh, disk_full_cxx):
    from dynexpr import background

    dynexpr.config.background_compile = True
    x = np.linspace(-1, 1, 300)
    c = 16.5 + _NONCE
    f = dynexpr.capture(lambda x: np.exp(x) * c)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            assert_same(np.exp(x) * c, f(x))
            assert background.synchronize(timeout=120)
    ours = [w for w in caught if "cannot be compiled here" in str(w.message)]
    assert len(ours) == 1 and "No space left on device" in str(ours[0].message)


# -------------------------------------------------------------------------- leaks
def test_fallback_cache_is_removed_at_exit(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    got = compute(blocker / "cache", 12.5 + _NONCE, extra_env={"DYNEXPR_NO_PCH": "1"})
    assert got["same"]
    fallback = Path(got["layout"]).parent
    assert fallback.name.startswith("dynexpr-cache-") and str(blocker) not in str(fallback)
    assert not fallback.exists(), "the private fallback cache outlived its process"


def test_temporaries_of_killed_builds_are_removed(fresh):
    dead = subprocess.Popen(["true"])
    dead.wait()
    layout = cache.cache_dir()
    own_pch = layout / "pch" / "k"
    own_pch.mkdir()
    stale = [own_pch / f"prelude.hpp.gch.tmp{dead.pid}",
             layout / "units" / "ab" / f".build-{dead.pid}-x1",
             layout / "index" / f".tmp-{dead.pid}-y"]
    old = layout / "units" / "ab" / ".build-legacy"  # no pid: by age
    live = layout / "units" / "ab" / f".build-{os.getpid()}-z"
    for p in stale[1:2] + [old, live]:
        p.mkdir(parents=True)
    for p in stale[0::2]:
        p.write_bytes(b"x")
    os.utime(old, (0, 0))
    c = 13.5 + _NONCE
    x = np.linspace(-1, 1, 100)
    f = dynexpr.capture(lambda x: np.exp(x) * c)
    assert_same(np.exp(x) * c, f(x))  # a build: it cleans first
    assert not any(p.exists() for p in stale + [old])
    assert live.exists()


# -------------------------------------------------------------------- concurrency
def _slow_backend(graph, example_inputs):
    import time

    time.sleep(0.3)  # every thread misses before the first entry exists
    from dynexpr import eager

    return eager.compile_graph(graph)


def _hammer(f, arrays, want):
    out, barrier = [None] * len(arrays), threading.Barrier(len(arrays))

    def one(i):
        barrier.wait()
        out[i] = f(*arrays[i])

    ts = [threading.Thread(target=one, args=(i,)) for i in range(len(arrays))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for o, w in zip(out, want):
        assert_same(w, o)


def test_threads_making_the_same_first_call_build_one_entry(fresh):
    c = 14.5 + _NONCE

    def chain(x, y):
        return np.tanh(x * c + y) * 0.5 - x * y

    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    for backend in (_slow_backend, "cpu"):
        f = dynexpr.capture(chain, backend=backend)
        before = cache.stats["compiles"]
        _hammer(f, [(x, x)] * 8, [chain(x, x)] * 8)
        assert f.cache_info().entries == 1
        assert backend != "cpu" or cache.stats["compiles"] - before == 1


def test_threads_with_mixed_shapes_respect_the_recompile_limit(fresh):
    def chain(x):
        return x * 2.0 + 1.0

    f = dynexpr.capture(chain, backend=_slow_backend, dynamic=False)
    arrays = [(np.arange(n, dtype=np.float64),) for n in range(3, 15)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the limit's warning
        _hammer(f, arrays, [chain(*a) for a in arrays])
    assert f.cache_info().entries == dynexpr.config.recompile_limit


def test_mark_static_rejects_a_list_like_mark_dynamic():
    for mark in (dynexpr.mark_static, dynexpr.mark_dynamic):
        with pytest.raises(TypeError, match="expected a NumPy ndarray, got list"):
            mark([1, 2], 0)


# --------------------------------------------------------------------------- fork
def test_fork_pool_after_a_pending_background_compile(fresh):
    code = f"""
        import multiprocessing as mp
        from dynexpr import background
        dynexpr.config.background_compile = True
        exec({CHAIN.format(c=15.5 + _NONCE)!r})
        f = dynexpr.capture(chain)
        x = np.linspace(-1, 1, 1000, dtype=np.float32)
        first = bool(np.allclose(f(x, x), chain(x, x)))  # submits the compile
        assert background.pending() == 1

        def work(i):
            ok = bool(np.allclose(f(x * i, x), chain(x * i, x)))
            return ok and background.synchronize(timeout=240) and bool(
                np.allclose(f(x * i, x), chain(x * i, x)))

        with mp.get_context("fork").Pool(2) as pool:
            res = pool.map_async(work, range(4)).get(timeout=200)
        pid = os.fork()
        if pid == 0:
            os._exit(0 if background.synchronize(timeout=240) else 3)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({{"first": first, "pool": res, "child": status,
                          "parent": background.synchronize(timeout=240)}}))
    """
    got = run_child(code, fresh, timeout=900)
    assert got == {"first": True, "pool": [True] * 4, "child": 0, "parent": True}


def test_forks_never_hang_a_tool_starting_on_another_thread():
    """Note [starting a tool while another thread forks]: a thread starts short tools
    (run_tool) back to back while the main thread forks 60 children that keep whatever
    they inherited open for 3 s. A fork inside a start's window would copy the start's
    error pipe into a child and hold that start until the child exits (>= 3 s); with the
    guard no start waits for a child."""
    code = """
        import threading, time
        from dynexpr import toolchain

        slowest, runs, stop = [0.0], [0], threading.Event()

        def starter():
            while not stop.is_set():
                t0 = time.monotonic()
                r = toolchain.run_tool(["true"])
                slowest[0] = max(slowest[0], time.monotonic() - t0)
                runs[0] += r.returncode == 0

        th = threading.Thread(target=starter)
        th.start()
        kids = []
        for _ in range(60):
            pid = os.fork()
            if pid == 0:
                time.sleep(3)
                os._exit(0)
            kids.append(pid)
            time.sleep(0.005)
        stop.set()
        th.join()
        for pid in kids:
            os.waitpid(pid, 0)
        print(json.dumps({"runs": runs[0], "slowest": slowest[0]}))
    """
    got = run_child(code, None, timeout=300)
    assert got["runs"] >= 20, got
    assert got["slowest"] < 2.5, got


def test_run_tool_gives_what_subprocess_run_gives():
    from dynexpr import toolchain

    r = toolchain.run_tool([sys.executable, "-c", "import sys; print('out'); "
                            "print('err', file=sys.stderr); sys.exit(sys.stdin.read() == '' and 3)"])
    assert (r.returncode, r.stdout, r.stderr) == (3, "out\n", "err\n")  # stdin: /dev/null
    with pytest.raises(subprocess.TimeoutExpired):
        toolchain.run_tool([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    with pytest.raises(OSError):
        toolchain.run_tool(["/nonexistent/dynexpr-no-such-compiler"])


def test_a_first_compile_imports_nothing_on_its_threads(fresh):
    """Note [no imports on compile threads]: a fork while a compile thread imports a
    module for the first time leaves that module's import lock held in the child, and the
    child's own compile waits on it forever (seen as test_fork_pool_after_a_pending_
    background_compile timing out). A first compile on a new cache (prelude, runtime
    library, unit) runs on the compile thread and its helper: neither imports anything."""
    code = f"""
        import importlib.abc, threading
        from dynexpr import background

        seen = []

        class Spy(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if threading.current_thread() is not threading.main_thread():
                    seen.append([threading.current_thread().name, name])
                return None  # the next finder imports it

        sys.meta_path.insert(0, Spy())
        dynexpr.config.background_compile = True
        exec({CHAIN.format(c=16.5 + _NONCE)!r})
        f = dynexpr.capture(chain)
        x = np.linspace(-1, 1, 1000, dtype=np.float32)
        ok = bool(np.allclose(f(x, x), chain(x, x)))
        queued = background.pending()
        done = background.synchronize(timeout=600)
        ok = ok and bool(np.allclose(f(x, x), chain(x, x)))
        print(json.dumps({{"ok": ok, "queued": queued, "done": done,
                          "compiles": cache.stats["compiles"], "imports": seen}}))
    """
    got = run_child(code, fresh, timeout=900)
    assert got == {"ok": True, "queued": 1, "done": True, "compiles": 1, "imports": []}


# -------------------------------------------------------------------------- chaos
def test_chaos_quick_mode():
    """tests/chaos_cache.py in its small fixed mode: kills during compiles and damaged
    artifacts of every kind but the prelude; no wrong result, crash, hang or unverified
    load."""
    p = subprocess.run([sys.executable, str(HERE.parent / "chaos_cache.py"), "--rounds", "2",
                        "--quick", "--seed", "5", "--timeout", "300"],
                       capture_output=True, text=True, timeout=900, check=False)
    counts = json.loads(p.stdout.strip().splitlines()[-1])
    assert p.returncode == 0, (counts, p.stderr[-3000:])
    assert counts["faults"] >= 4 and counts["runs"] >= 10, counts
    assert {k: counts[k] for k in ("wrong", "crashes", "hangs", "unverified")} == {
        "wrong": 0, "crashes": 0, "hangs": 0, "unverified": 0}
