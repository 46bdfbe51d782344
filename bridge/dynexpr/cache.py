"""dynexpr.cache — the on-disk compile cache of generated units.

Layout under the cache directory ($DYNEXPR_CACHE_DIR or dynexpr.config.cache_dir,
default ~/.cache/dynexpr; directories 0700, files 0600):

    v1/toolchain.json             compiler fingerprints, memoised by compiler file + CPU
    v1/pch/<key>/                 prelude.hpp, prelude.hpp.gch (+ .sha256), key.txt
    v1/rt/<key>/                  libdynexpr_rt.so (+ .sha256): the runtime library units
                                  link against (kernels/runtime.cpp)
    v1/units/<kk>/<key>/          unit.cpp, unit.so, meta.json, unit.sha256
    v1/index/<hash>.json          (function identity, guard-set key) -> unit keys
    v1/locks/<key>.lock           fcntl locks: one compile of a key at a time
    v1/failed/<key>.cpp           sources the compiler rejected (named in the error)

A unit's key is the sha256 of everything that changes its binary: the generated source,
the ABI version, the content of every header under include/ and kernels/, the compiler's
identity and version, the flags, and the resolved target ISA. Units are published by
compiling into a temporary directory and renaming it into place under the key's lock.

Note [verified artifacts]
Everything that is loaded or fed to the compiler is checked against a sha256 recorded
when it was published, before its first use in a process: a unit (one digest over
unit.so and meta.json, so edited output extents are caught too), the runtime library
and the precompiled prelude. One that does not verify is rebuilt, never loaded: a
truncated shared object would kill the process with SIGBUS when mapped. The check is
made once per process and artifact (memoised by inode, size and mtime), never per call.
The directories themselves must be trusted (Note [cache trust] in trust.py); units link
the runtime library through an $ORIGIN-relative rpath, so a cache directory can be moved
or copied as a whole.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import shutil
import subprocess
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from . import toolchain as _tc
from . import trust
from .toolchain import (KERNEL_FILES, LAYOUT, PKG_DIR, BuildUnavailable, CompileError,  # noqa: F401
                        Toolchain, source_dirs, system_includes)
from .toolchain import abi_version as _abi_version  # noqa: F401
from .toolchain import headers_hash as _headers_hash
from .toolchain import sha as _sha

CXXFLAGS = ("-std=c++20", "-O2", "-march=native", "-fPIC")
LINKFLAGS = ("-shared", "-pthread")
SUBDIRS = ("pch", "rt", "units", "index", "locks", "failed")

log = logging.getLogger("dynexpr.cache")
log_code = logging.getLogger("dynexpr.output_code")

# Counters for tests, explain and cache_info (this process).
stats = {"compiles": 0, "hits": 0, "rebuilt": 0, "pch_builds": 0, "compile_seconds": 0.0}


# ----------------------------------------------------------------------------- paths
_dirs: dict[str, Path] = {}  # cache root as configured -> the layout directory used for it
_warned: set[str] = set()  # roots warned about
_cleaned: set[Path] = set()  # layout directories whose stale temporaries were removed
_fallback_dir: Path | None = None


def configured_root() -> str:
    """dynexpr.config.cache_dir when set, else $DYNEXPR_CACHE_DIR, else ~/.cache/dynexpr."""
    from .config import config

    return config.cache_dir


def cache_dir() -> Path:
    """The layout directory, created 0700. One that cannot be used (not creatable, not
    writable, or not trusted: Note [cache trust]) is replaced by a private temporary
    directory for this process, with one warning. A relative root is resolved against
    the working directory once, at its first use (a later os.chdir does not move it)."""
    raw = configured_root()
    d = _dirs.get(raw)
    if d is not None:
        return d
    root = Path(raw).expanduser().absolute()
    d = root / LAYOUT
    try:
        top = _existing_ancestor(d)
        if not top.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, f"{top} is not a directory")
        why = trust.problem(top)
        if why is None:
            root.mkdir(parents=True, exist_ok=True, mode=0o700)
            d.mkdir(exist_ok=True, mode=0o700)
            why = trust.problem(d)
        if why is None:
            for sub in SUBDIRS:
                (d / sub).mkdir(exist_ok=True, mode=0o700)
                why = why or trust.check_owned(d / sub)
        if why is not None:
            d = _fallback(root, f"it is not safe to load code from: {why}. Anyone who can "
                          "write there could make this process run their code",
                          "use a directory that only you can write (chmod go-w it, or "
                          "set DYNEXPR_CACHE_DIR or dynexpr.config.cache_dir to one)")
        else:
            probe = d / "locks" / f".probe-{os.getpid()}-"
            os.close(os.open(probe, os.O_CREAT | os.O_WRONLY, 0o600))
            os.unlink(probe)
    except OSError as e:
        d = _fallback(root, f"it is not usable ({e.strerror or e})",
                      "set DYNEXPR_CACHE_DIR to a writable directory to keep them")
    _dirs[raw] = d
    return d


def _existing_ancestor(p: Path) -> Path:
    while not p.exists() and p.parent != p:
        p = p.parent
    return p


def _fallback(root: Path, why: str, way_out: str) -> Path:
    """The process's private temporary cache (one per process, removed at exit)."""
    global _fallback_dir
    if _fallback_dir is None or not _fallback_dir.is_dir():
        tmp = trust.private_temp_dir() / LAYOUT
        for sub in SUBDIRS:
            (tmp / sub).mkdir(parents=True, mode=0o700)
        _fallback_dir = tmp
    if str(root) not in _warned:
        _warned.add(str(root))
        warnings.warn(
            f"dynexpr: cache directory {root}: {why}; compiled kernels go to "
            f"{_fallback_dir.parent} for this process only (removed at exit). To keep "
            f"them, {way_out}.", RuntimeWarning, stacklevel=4)
    return _fallback_dir


def reset() -> None:
    """Forget this process's view of the cache directory and toolchain (tests)."""
    global _toolchain
    _dirs.clear()
    _warned.clear()
    _cleaned.clear()
    _verified.clear()
    _toolchain = None


def _clean_stale(d: Path) -> None:
    """Removes temporaries that killed builders left (Note [stale temporaries]); once per
    process and cache, before its first build (never on the warm path)."""
    if d in _cleaned:
        return
    _cleaned.add(d)
    dirs = [d, d / "index", d / "locks"]
    for sub in ("pch", "rt", "units"):
        with contextlib.suppress(OSError):
            dirs += [Path(e.path) for e in os.scandir(d / sub) if e.is_dir()]
    n = trust.clean_stale(dirs)
    if n:
        log.info("dynexpr cache: removed %d stale temporaries of killed builds", n)


# ------------------------------------------------------------------------- toolchain
_toolchain: Toolchain | None = None


def toolchain() -> Toolchain:
    global _toolchain
    if _toolchain is None:
        _toolchain = _tc.make(cache_dir() / "toolchain.json", CXXFLAGS + LINKFLAGS,
                              _write_atomic)
    return _toolchain


# ------------------------------------------------------------------------ verifying
_verified: dict[str, tuple] = {}  # path -> (inode, size, mtime) of the copy that verified


def _signature(path: Path) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def verify_file(path: Path) -> bool:
    """Whether `path` matches the sha256 recorded beside it (`<name>.sha256`) and lies
    in a trusted directory; hashed once per process while the file stays the same."""
    sig = _signature(path)
    if sig is None:
        return False
    if _verified.get(str(path)) == sig:
        return True
    if trust.problem(path.parent) is not None:
        log.warning("dynexpr cache: not using %s: %s", path, trust.problem(path.parent))
        return False
    try:
        recorded = path.with_name(path.name + ".sha256").read_text().strip()
        ok = file_sha256(path) == recorded
    except (OSError, ValueError):
        ok = False
    if ok:
        _verified[str(path)] = sig
    elif path.exists():
        log.warning("dynexpr cache: %s does not match its recorded sha256; rebuilding", path)
    return ok


def _record(built: Path, final: Path) -> None:
    """Writes `<final>.sha256`, the digest of `built` (published as `final` next)."""
    trust.write_private(final.with_name(final.name + ".sha256"),
                        (file_sha256(built) + "\n").encode())


# ------------------------------------------------------------------------ artifacts
@dataclass
class Artifact:
    key: str
    dir: Path
    meta: dict

    @property
    def so(self) -> Path:
        return self.dir / "unit.so"


def unit_key(source: str) -> str:
    return _sha({"source": source, "toolchain": toolchain().fingerprint()})


def _unit_dir(key: str) -> Path:
    return cache_dir() / "units" / key[:2] / key


def unit_digest(so: bytes, meta: bytes) -> str:
    """One sha256 over unit.so and meta.json (Note [verified artifacts])."""
    h = hashlib.sha256(b"dynexpr unit\0%d\0" % len(so))
    h.update(so)
    h.update(b"\0meta.json\0")
    h.update(meta)
    return h.hexdigest()


def lookup(key: str) -> Artifact | None:
    """A published, verified artifact, or None (missing, damaged or not ours)."""
    d = _unit_dir(key)
    try:
        why = trust.check_owned(d)
        recorded = (d / "unit.sha256").read_text().strip()
        meta_bytes = (d / "meta.json").read_bytes()
        data = (d / "unit.so").read_bytes()
    except (OSError, ValueError):
        return None
    if why is not None:
        log.warning("dynexpr cache: not loading %s: %s; rebuilding", d, why)
        return None
    if unit_digest(data, meta_bytes) != recorded:
        log.warning("dynexpr cache: %s does not match its recorded hash; rebuilding", d)
        return None
    try:
        meta = json.loads(meta_bytes)
    except ValueError:
        return None
    return Artifact(key, d, meta) if isinstance(meta, dict) else None


def get_or_build(source: str, meta: dict) -> Artifact:
    """The artifact for `source`, compiling it (once, across processes) on a miss."""
    key = unit_key(source)
    art = lookup(key)
    if art is not None:
        stats["hits"] += 1
        log.debug("dynexpr cache: hit %s", key[:16])
        return art
    return rebuild(key, source, meta, only_if_missing=True)


def rebuild(key: str, source: str, meta: dict, *, only_if_missing: bool = False) -> Artifact:
    """Compiles the unit `key` again (a published copy that failed to load is removed
    first); with only_if_missing, a copy another process published meanwhile is used."""
    with _lock(key):
        if only_if_missing:
            art = lookup(key)  # another process may have published it meanwhile
            if art is not None:
                stats["hits"] += 1
                return art
        d = _unit_dir(key)
        if d.exists():
            stats["rebuilt"] += 1
            shutil.rmtree(d, ignore_errors=True)
        return _build(key, source, meta)


def _build(key: str, source: str, meta: dict) -> Artifact:
    final = _unit_dir(key)
    _clean_stale(cache_dir())
    try:
        final.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = Path(tempfile.mkdtemp(prefix=f".build-{os.getpid()}-", dir=final.parent))
    except OSError as e:
        raise _tc.unavailable(e, f"cannot write into the cache directory {final.parent}") \
            from None
    try:
        src = tmp / "unit.cpp"
        trust.write_private(src, source.encode())
        log_code.info("dynexpr: generated unit %s:\n%s", key[:16], source)
        pch_dir = ensure_pch()
        cmd = compile_command(src, tmp / "unit.so", pch_dir, ensure_runtime(), final)
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
        os.chmod(tmp / "unit.so", 0o700)
        meta_bytes = json.dumps(meta).encode()
        trust.write_private(tmp / "meta.json", meta_bytes)
        digest = unit_digest((tmp / "unit.so").read_bytes(), meta_bytes)
        trust.write_private(tmp / "unit.sha256", (digest + "\n").encode())
        os.rename(tmp, final)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _tc.unavailable(e, f"cannot build {key[:16]} in the cache {final.parent}") \
            from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("dynexpr cache: compiled %s in %.2fs", key[:16], time.perf_counter() - t0)
    return Artifact(key, final, meta)


def discard(key: str) -> None:
    """Removes the published unit `key` (it verified but did not load)."""
    with _lock(key):
        shutil.rmtree(_unit_dir(key), ignore_errors=True)


def _compiler(cmd: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=False)
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
    cmd += [*LINKFLAGS, str(src), "-o", str(out)]
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
    with _lock("pch-" + key):
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
    _clean_stale(cache_dir())
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
    _record(tmp, d / PCH)
    os.rename(tmp, d / PCH)
    trust.write_private(d / "key.txt", (pch_key() + "\n").encode())
    stats["pch_builds"] += 1
    log.info("dynexpr cache: precompiled the prelude in %.1fs", time.perf_counter() - t0)


# ------------------------------------------------------------------ runtime library
RUNTIME_LIB = "libdynexpr_rt.so"


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
    with _lock("rt-" + key):
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
    _clean_stale(cache_dir())
    try:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as e:
        raise _tc.unavailable(e, f"cannot write into the cache directory {d}") from None
    tmp = d / f"{RUNTIME_LIB}.tmp{os.getpid()}"
    cmd = [tc.cxx, *CXXFLAGS, "-I", str(kern), "-I", str(inc)]
    for s in system_includes():
        cmd += ["-isystem", s]
    cmd += [*LINKFLAGS, f"-Wl,-soname,{RUNTIME_LIB}", str(kern / "runtime.cpp"), "-o", str(tmp)]
    t0 = time.perf_counter()
    proc = _compiler(cmd)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise _tc.classify(cmd, proc.returncode, proc.stderr,
                           "dynexpr internal error: building the runtime library "
                           "(kernels/runtime.cpp) failed")
    try:
        os.chmod(tmp, 0o700)
        _record(tmp, d / RUNTIME_LIB)
        os.rename(tmp, d / RUNTIME_LIB)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise _tc.unavailable(e, f"cannot publish {RUNTIME_LIB} in {d}") from None
    log.info("dynexpr cache: built %s in %.1fs", RUNTIME_LIB, time.perf_counter() - t0)


# ----------------------------------------------------------------------------- index
def _index_file(fn_id: str, guard_key: str) -> Path:
    return cache_dir() / "index" / (_sha([fn_id, guard_key]) + ".json")


def index_get(fn_id: str, guard_key: str) -> dict | None:
    """What index_put recorded for (function identity, guard-set key), or None (also
    for a record that is not what index_put writes)."""
    rec = _tc.read_json_dict(_index_file(fn_id, guard_key))
    if rec is None or rec.get("fn") != fn_id or rec.get("guards") != guard_key:
        return None
    value = rec.get("value")
    return value if isinstance(value, dict) else None


def index_put(fn_id: str, guard_key: str, value: dict) -> None:
    """Records `value` (JSON: e.g. {"units": [unit keys], ...}) for the pair, atomically."""
    rec = {"fn": fn_id, "guards": guard_key, "value": value}
    with contextlib.suppress(OSError):
        _write_atomic(_index_file(fn_id, guard_key), json.dumps(rec).encode())


# --------------------------------------------------------------------------- helpers
@contextlib.contextmanager
def _lock(name: str):
    path = cache_dir() / "locks" / f"{name}.lock"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as e:
        raise _tc.unavailable(e, f"cannot lock {path}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".tmp-{os.getpid()}-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


if __name__ == "__main__":
    # meson (option python_pch) precompiles the prelude at build time to install it with
    # the package: python -m dynexpr.cache --build-pch OUTDIR. Installed files are for
    # every user of the package: readable by all, writable by the installer only.
    import sys

    if len(sys.argv) != 3 or sys.argv[1] != "--build-pch":
        sys.exit("usage: python -m dynexpr.cache --build-pch OUTDIR")
    out = Path(sys.argv[2])
    build_pch(out)
    build_runtime(out)
    for f in out.iterdir():
        os.chmod(f, 0o755 if f.suffix == ".so" else 0o644)
