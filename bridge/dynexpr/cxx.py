"""dynexpr.cxx — the cpu backend's toolchain driver: the host C++ compiler (g++ with
-march=native), the commands that build a generated unit, the precompiled prelude and
the runtime library every unit links against.

What it builds goes into the store (cache.py), which verifies and publishes it; what of
the compiler goes into a key is the Toolchain (toolchain.py: compiler identity and
version, flags, resolved ISA, header hash, ABI version), memoised in the cache's
toolchain.json.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import threading
import time
from pathlib import Path

from . import cache, trust
from .artifacts import isa as _isa
from . import toolchain as _tc
from .cache import cache_dir, clean_stale, lock, verify_file
from .toolchain import PKG_DIR, CompileError, Toolchain, source_dirs, system_includes
from .toolchain import sha as _sha

# -march=native, or the ISA level DYNEXPR_ISA names (artifacts/isa.py: precompile).
CXXFLAGS = ("-std=c++20", "-O2", *_isa.compile_flags(), "-fPIC")
LINKFLAGS = ("-shared", "-pthread")  # and the toolchain's linker: link_flags()
ARTIFACT = "unit.so"
BACKEND = "cpu"  # the backend whose units this driver builds (part of each unit's key)

stats = cache.stats  # one set of counters for the store and its drivers
log = logging.getLogger("dynexpr.cache")
log_code = logging.getLogger("dynexpr.output_code")


# ------------------------------------------------------------------------- toolchain
_toolchain: Toolchain | None = None


def toolchain() -> Toolchain:
    global _toolchain
    if _toolchain is None:
        _toolchain = _tc.make(cache_dir() / "toolchain.json", CXXFLAGS + LINKFLAGS,
                              cache.write_atomic)
    return _toolchain


def link_flags() -> tuple[str, ...]:
    """LINKFLAGS and the linker the toolchain picked (Note [the linker] in toolchain.py)."""
    return LINKFLAGS + toolchain().link


def _forget_toolchain() -> None:
    global _toolchain
    _toolchain = None


cache.on_reset(_forget_toolchain)  # the memo lives in the cache directory



# ----------------------------------------------------------------------------- units
def unit_key(source: str) -> str:
    """The key of the unit built from `source`: the backend, the source and everything
    of the toolchain that changes the binary (Toolchain.fingerprint). A loaded bundle
    that holds a unit for `source` gives that unit's key, with no compiler asked (Note
    [bundles] in artifacts/bundle.py)."""
    key = cache.bundled_source.get(source_key(source)) if cache.bundled else None
    if key is None:
        try:
            key = _sha({"backend": BACKEND, "source": source,
                        "toolchain": toolchain().fingerprint()})
        except _tc.BuildUnavailable as e:
            if cache.bundled:  # artifacts/record.py warns, naming the specialisation
                e.bundle_miss = True
            raise
    return key


def source_key(source: str) -> str:
    """What a bundle finds a unit by: its backend and source, not the toolchain (the
    bundle's toolchain and ISA are checked once, when it is loaded)."""
    return _sha({"backend": BACKEND, "source": source})


def get_or_build(source: str, meta: dict) -> cache.Artifact:
    """The unit for `source`, compiled (once, across processes) on a miss."""
    key = unit_key(source)
    return cache.get_or_build(key, meta, _maker(key, source), ARTIFACT)


def rebuild(key: str, source: str, meta: dict) -> cache.Artifact:
    """Compiles the unit `key` again (a published copy that failed to load is removed)."""
    return cache.rebuild(key, meta, _maker(key, source), ARTIFACT)


def _maker(key: str, source: str):
    return lambda tmp, final: compile_unit(key, source, tmp, final)


def compile_unit(key: str, source: str, tmp: Path, final: Path) -> None:
    """Compiles `source` into tmp/unit.so (tmp becomes the unit directory `final`)."""
    src = tmp / "unit.cpp"
    trust.write_private(src, source.encode())
    log_code.info("dynexpr: generated unit %s:\n%s", key[:16], source)
    pch_dir, rt_dir = ensure_prelude_and_runtime()
    cmd = compile_command(src, tmp / ARTIFACT, pch_dir, rt_dir, final)
    t0 = time.perf_counter()
    proc = _compiler(cmd)
    stats["compile_seconds"] += time.perf_counter() - t0
    if proc.returncode != 0:
        kept = cache_dir() / "failed" / f"{key}.cpp"
        with contextlib.suppress(OSError):
            trust.write_private(kept, source.encode())
        raise _tc.classify(cmd, proc.returncode, proc.stderr,
                           "dynexpr internal error: the C++ compiler failed on the "
                           f"generated file {kept}")
    if "not used because" in proc.stderr or "invalid" in proc.stderr and ".gch" in proc.stderr:
        log.warning("dynexpr cache: the precompiled prelude was not used: %s", proc.stderr)
    stats["compiles"] += 1
    log.info("dynexpr cache: compiled %s in %.2fs", key[:16], time.perf_counter() - t0)


def _compiler(cmd: list[str]) -> subprocess.CompletedProcess:
    try:
        return _tc.run_tool(cmd)
    except OSError as e:  # the compiler vanished, or no memory / processes to start it
        raise _tc.unavailable(e, f"cannot start the compiler {cmd[0]}") from None


def compile_command(src: Path, out: Path, pch_dir: Path | None,
                    rt_dir: Path | None = None, unit_dir: Path | None = None) -> list[str]:
    """The compiler command for one unit; linked against libdynexpr_rt.so in rt_dir, found
    again at load time through the unit's rpath: relative to the unit ($ORIGIN) when
    both lie in one cache directory, so the directory can be moved whole."""
    tc = toolchain()
    inc, kern = source_dirs()
    cmd = [tc.cxx, *CXXFLAGS, "-Winvalid-pch"]
    if pch_dir is not None:
        cmd += ["-I", str(pch_dir)]
    cmd += ["-I", str(inc), "-I", str(kern)]
    for s in system_includes():
        cmd += ["-isystem", s]
    cmd += [*link_flags(), str(src), "-o", str(out)]
    if rt_dir is not None:
        rpath = str(rt_dir)
        if unit_dir is not None and rt_dir.parent.parent == unit_dir.parent.parent.parent:
            rpath = "$ORIGIN/" + os.path.relpath(rt_dir, unit_dir)
        cmd += [str(rt_dir / RUNTIME_LIB), f"-Wl,-rpath,{rpath}"]
    return cmd


# -------------------------------------------------------------- precompiled prelude
PCH = "prelude.hpp.gch"


def pch_key() -> str:
    return _sha({"pch": toolchain().fingerprint(), "sys": system_includes()})


def _prebuilt(name: str, key: str) -> Path | None:
    """The package's `_pch` directory when it holds `name` for this key, verified."""
    inst = PKG_DIR / "_pch"
    with contextlib.suppress(OSError):
        if (inst / "key.txt").read_text().strip() == key and verify_file(inst / name):
            return inst
    return None


def ensure_pch() -> Path | None:
    """The directory holding prelude.hpp and its verified .gch for this toolchain: the
    one installed with the package if it matches, else the cache's (built now if missing
    or damaged). None if precompiling is disabled (DYNEXPR_NO_PCH=1) or failed (then units
    include the prelude as text: slower, still correct)."""
    if os.environ.get("DYNEXPR_NO_PCH"):
        return None
    key = pch_key()
    inst = _prebuilt(PCH, key)
    if inst is not None:
        return inst
    d = cache_dir() / "pch" / key
    if verify_file(d / PCH):
        return d
    with lock("pch-" + key):
        if verify_file(d / PCH):
            return d
        try:
            build_pch(d)
        except CompileError as e:
            log.warning("%s", e)
            return None
        except OSError as e:
            log.warning("dynexpr cache: cannot precompile the prelude in %s: %s", d, e)
            return None
    return d


def build_pch(d: Path) -> None:
    """Precompiles kernels/prelude.hpp into d: prelude.hpp, prelude.hpp.gch (published by
    rename, its sha256 beside it) and key.txt."""
    tc = toolchain()
    inc, kern = source_dirs()
    clean_stale(cache_dir())
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    trust.write_private(d / "prelude.hpp", (kern / "prelude.hpp").read_bytes())
    tmp = d / f"{PCH}.tmp{os.getpid()}"
    cmd = [tc.cxx, *CXXFLAGS, "-I", str(inc), "-I", str(kern)]
    for s in system_includes():
        cmd += ["-isystem", s]
    cmd += ["-pthread", "-x", "c++-header", str(d / "prelude.hpp"), "-o", str(tmp)]
    t0 = time.perf_counter()
    proc = _compiler(cmd)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise _tc.classify(cmd, proc.returncode, proc.stderr,
                           "dynexpr internal error: precompiling kernels/prelude.hpp failed")
    os.chmod(tmp, 0o600)
    cache.record(tmp, d / PCH)
    os.rename(tmp, d / PCH)
    trust.write_private(d / "key.txt", (pch_key() + "\n").encode())
    stats["pch_builds"] += 1
    log.info("dynexpr cache: precompiled the prelude in %.1fs", time.perf_counter() - t0)


# ------------------------------------------------------------------ runtime library
RUNTIME_LIB = "libdynexpr_rt.so"


def ensure_prelude_and_runtime() -> tuple[Path | None, Path]:
    """(ensure_pch(), ensure_runtime()). A new toolchain needs both, and each is one
    compiler process (8.0 s and 9.4 s of g++ on this 2-core machine), so the runtime
    library is built on a second thread while the prelude precompiles: a first compile
    waits ~9.5 s for them instead of ~17 s. Each keeps its own lock, so concurrent
    processes still build each once. A compile finished at exit (Note [tiered first
    call]) may find no new thread allowed; it builds them one after the other."""
    toolchain()  # probed once, here, not by both threads
    got: dict = {}

    def runtime() -> None:
        try:
            got["rt"] = ensure_runtime()
        except BaseException as e:  # noqa: BLE001 (re-raised on the calling thread)
            got["error"] = e

    helper = threading.Thread(target=runtime, name="dynexpr-runtime-build", daemon=True)
    try:
        helper.start()
    except RuntimeError:  # interpreter shutdown
        return ensure_pch(), ensure_runtime()
    try:
        pch = ensure_pch()
    finally:
        helper.join()
    if "error" in got:
        raise got["error"]
    return pch, got["rt"]


def ensure_runtime() -> Path:
    """The directory holding libdynexpr_rt.so (kernels/runtime.cpp: the thread pool and
    argument checks every unit links against) for this toolchain and header set, verified:
    the one installed with the package if it matches, else the cache's, built now if
    missing or damaged."""
    key = pch_key()
    inst = _prebuilt(RUNTIME_LIB, key)
    if inst is not None:
        return inst
    d = cache_dir() / "rt" / key
    if verify_file(d / RUNTIME_LIB):
        return d
    with lock("rt-" + key):
        if not verify_file(d / RUNTIME_LIB):
            if (d / RUNTIME_LIB).exists():
                stats["rebuilt"] += 1
            build_runtime(d)
    return d


def build_runtime(d: Path) -> None:
    """Compiles kernels/runtime.cpp into d/libdynexpr_rt.so (published by rename, its
    sha256 beside it)."""
    tc = toolchain()
    inc, kern = source_dirs()
    clean_stale(cache_dir())
    try:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as e:
        raise _tc.unavailable(e, f"cannot write into the cache directory {d}") from None
    tmp = d / f"{RUNTIME_LIB}.tmp{os.getpid()}"
    cmd = [tc.cxx, *CXXFLAGS, "-I", str(kern), "-I", str(inc)]
    for s in system_includes():
        cmd += ["-isystem", s]
    cmd += [*link_flags(), f"-Wl,-soname,{RUNTIME_LIB}", str(kern / "runtime.cpp"), "-o", str(tmp)]
    t0 = time.perf_counter()
    proc = _compiler(cmd)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise _tc.classify(cmd, proc.returncode, proc.stderr,
                           "dynexpr internal error: building the runtime library "
                           "(kernels/runtime.cpp) failed")
    try:
        os.chmod(tmp, 0o700)
        cache.record(tmp, d / RUNTIME_LIB)
        os.rename(tmp, d / RUNTIME_LIB)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise _tc.unavailable(e, f"cannot publish {RUNTIME_LIB} in {d}") from None
    log.info("dynexpr cache: built %s in %.1fs", RUNTIME_LIB, time.perf_counter() - t0)


if __name__ == "__main__":
    # meson (option python_pch) precompiles the prelude at build time to install it with
    # the package: python -m dynexpr.cxx --build-pch OUTDIR. Installed files are for
    # every user of the package: readable by all, writable by the installer only.
    import sys

    if len(sys.argv) != 3 or sys.argv[1] != "--build-pch":
        sys.exit("usage: python -m dynexpr.cxx --build-pch OUTDIR")
    out = Path(sys.argv[2])
    build_pch(out)
    build_runtime(out)
    for f in out.iterdir():
        os.chmod(f, 0o755 if f.suffix == ".so" else 0o644)

