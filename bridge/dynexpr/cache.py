"""dynexpr.cache — the on-disk compile cache of generated units.

Layout under the cache directory ($DYNEXPR_CACHE_DIR, default ~/.cache/dynexpr, 0700):

    v1/toolchain.json             compiler fingerprints, memoised by compiler file + CPU
    v1/pch/<key>/prelude.hpp(.gch)  the precompiled prelude (kernels/prelude.hpp)
    v1/rt/<key>/libdynexpr_rt.so  the runtime library units link against (runtime.cpp)
    v1/units/<kk>/<key>/          unit.cpp, unit.so, unit.sha256, meta.json
    v1/index/<hash>.json          (function identity, guard-set key) -> unit keys
    v1/locks/<key>.lock           fcntl locks: one compile of a key at a time
    v1/failed/<key>.cpp           sources the compiler rejected (named in the error)

A unit's key is the sha256 of everything that changes its binary: the generated source,
the ABI version, the content of every header under include/ and kernels/, the compiler's
identity and version, the flags, and the resolved target ISA. Units are published by
compiling into a temporary directory and renaming it into place under the key's lock;
the sha256 of unit.so is recorded beside it and checked before every load, so a truncated
or corrupted entry is rebuilt, never loaded.
"""

from __future__ import annotations

import contextlib
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

LAYOUT = "v1"
CXXFLAGS = ("-std=c++20", "-O2", "-march=native", "-fPIC")
LINKFLAGS = ("-shared", "-pthread")

log = logging.getLogger("dynexpr.cache")
log_code = logging.getLogger("dynexpr.output_code")

# Counters for tests, explain and cache_info (this process).
stats = {"compiles": 0, "hits": 0, "rebuilt": 0, "pch_builds": 0, "compile_seconds": 0.0}


class CompileError(RuntimeError):
    """dynexpr internal error: the C++ compiler rejected a generated unit."""


# ----------------------------------------------------------------------------- paths
PKG_DIR = Path(__file__).resolve().parent


def source_dirs() -> tuple[Path, Path]:
    """(include root holding dynexpr/, kernels dir holding abi.h and prelude.hpp): the
    installed copy in the package (`_include/`), else the source checkout's."""
    inst = PKG_DIR / "_include"
    if (inst / "kernels" / "abi.h").is_file():
        return inst, inst / "kernels"
    root = PKG_DIR.parent.parent
    return root / "include", root / "kernels"


def system_includes() -> list[str]:
    """Third-party header directories (Eigen has its own directory; Highway and Hana
    live in the default search path on Debian)."""
    env = os.environ.get("DYNEXPR_SYSTEM_INCLUDES")
    if env:
        return [p for p in env.split(os.pathsep) if p]
    out = []
    try:
        from . import _config  # written by meson at build time

        out += list(getattr(_config, "SYSTEM_INCLUDES", ()))
    except ImportError:
        pass
    for cand in ("/usr/include/eigen3", "/usr/local/include/eigen3"):
        if cand not in out and Path(cand, "Eigen", "Core").is_file():
            out.append(cand)
    return out


_dirs: dict[str, Path] = {}  # cache root -> the layout directory used for it
_warned = False


def cache_dir() -> Path:
    """The layout directory, created 0700; an unusable one falls back to a private
    temporary directory, with one warning per process."""
    root = Path(os.environ.get("DYNEXPR_CACHE_DIR") or Path.home() / ".cache" / "dynexpr")
    d = _dirs.get(str(root))
    if d is not None:
        return d
    d = root / LAYOUT
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        d.mkdir(exist_ok=True, mode=0o700)
        for sub in ("pch", "rt", "units", "index", "locks", "failed"):
            (d / sub).mkdir(exist_ok=True, mode=0o700)
        probe = d / "locks" / f".probe-{os.getpid()}"
        os.close(os.open(probe, os.O_CREAT | os.O_WRONLY, 0o600))
        os.unlink(probe)
    except OSError as e:
        d = _fallback(root, e)
    _dirs[str(root)] = d
    return d


def _fallback(root: Path, err: OSError) -> Path:
    global _warned
    tmp = Path(tempfile.mkdtemp(prefix="dynexpr-cache-")) / LAYOUT
    for sub in ("pch", "rt", "units", "index", "locks", "failed"):
        (tmp / sub).mkdir(parents=True, mode=0o700)
    if not _warned:
        _warned = True
        warnings.warn(
            f"dynexpr: cache directory {root} is not usable ({err.strerror or err}); "
            f"compiled kernels go to {tmp.parent} for this process only. Set "
            "DYNEXPR_CACHE_DIR to a writable directory to keep them.",
            RuntimeWarning,
            stacklevel=4,
        )
    return tmp


def reset() -> None:
    """Forget this process's view of the cache directory and toolchain (tests)."""
    global _warned, _toolchain
    _dirs.clear()
    _warned = False
    _toolchain = None


# ------------------------------------------------------------------------- toolchain
@dataclass(frozen=True)
class Toolchain:
    cxx: str
    version: str  # first line of `c++ --version`
    isa: str  # resolved -march=native target flags
    headers: str  # sha256 of every header under include/ and kernels/
    abi: int
    flags: tuple[str, ...]

    def fingerprint(self) -> str:
        return _sha({"cxx": self.version, "isa": self.isa, "headers": self.headers,
                     "abi": self.abi, "flags": self.flags, "layout": LAYOUT})


_toolchain: Toolchain | None = None


def toolchain() -> Toolchain:
    global _toolchain
    if _toolchain is None:
        _toolchain = _make_toolchain()
    return _toolchain


def _make_toolchain() -> Toolchain:
    cxx = os.environ.get("CXX") or "c++"
    path = shutil.which(cxx)
    if path is None:
        raise CompileError(f"dynexpr: no C++ compiler found ({cxx!r}); install g++ or set CXX")
    real = os.path.realpath(path)
    st = os.stat(real)
    cpu = _cpu_identity()
    flags = CXXFLAGS + LINKFLAGS
    # Running the compiler costs tens of ms: memoise what it says per compiler file and CPU.
    memo_key = _sha([real, st.st_size, st.st_mtime_ns, cpu, flags])
    memo_file = cache_dir() / "toolchain.json"
    memo = _read_json(memo_file) or {}
    entry = memo.get(memo_key)
    if entry is None:
        version = _run([path, "--version"]).splitlines()[0].strip()
        isa = _resolve_isa(path)
        entry = {"version": version, "isa": isa}
        memo[memo_key] = entry
        with contextlib.suppress(OSError):
            _write_atomic(memo_file, json.dumps(memo, indent=1).encode())
    inc, kern = source_dirs()
    return Toolchain(path, entry["version"], entry["isa"], _headers_hash(inc, kern),
                     _abi_version(kern), flags)


def _cpu_identity() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    keep = [ln for ln in text.splitlines() if ln.startswith(("model name", "flags"))][:2]
    return hashlib.sha256("\n".join(keep).encode()).hexdigest()


def _resolve_isa(cxx: str) -> str:
    """What -march=native means here: the -march/-mtune values and the enabled -m flags."""
    out = _run([cxx, "-march=native", "-Q", "--help=target"])
    keep = []
    for ln in out.splitlines():
        parts = ln.split()
        if len(parts) >= 2 and parts[0].startswith("-m") and (
                parts[1] == "[enabled]" or parts[0] in ("-march=", "-mtune=")):
            keep.append(" ".join(parts[:2]))
    return ";".join(keep)


# What a generated unit can include from kernels/; meson installs exactly these with the
# package, so a checkout and an installed copy of the same headers hash alike.
KERNEL_FILES = ("abi.h", "prelude.hpp", "runtime.cpp")


def _headers_hash(include: Path, kernels: Path) -> str:
    """sha256 of every header under include/dynexpr/ and of KERNEL_FILES."""
    # os.walk, not Path.rglob: this runs in every new process, and rglob's pattern
    # machinery alone costs more than reading the headers.
    files = []
    for top, subdirs, names in os.walk(include / "dynexpr"):
        subdirs.sort()
        files += [os.path.join(top, n) for n in names
                  if n.endswith((".h", ".hpp", ".inl", ".cuh"))]
    named = sorted((os.path.relpath(f, include), f) for f in files)
    named += [(f"kernels/{n}", str(kernels / n)) for n in KERNEL_FILES]
    h = hashlib.sha256()
    for rel, f in named:
        h.update(rel.encode() + b"\0")
        with open(f, "rb") as fh:
            h.update(fh.read() + b"\0")
    return h.hexdigest()


def _abi_version(kernels: Path) -> int:
    for line in (kernels / "abi.h").read_text().splitlines():
        parts = line.split()
        if parts[:2] == ["#define", "DYNEXPR_ABI_VERSION"] and len(parts) > 2:
            return int(parts[2])
    raise CompileError(f"dynexpr: no DYNEXPR_ABI_VERSION in {kernels / 'abi.h'}")


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


def lookup(key: str) -> Artifact | None:
    """A published, verified artifact, or None (missing or damaged)."""
    d = _unit_dir(key)
    try:
        recorded = (d / "unit.sha256").read_text().strip()
        meta = json.loads((d / "meta.json").read_text())
        data = (d / "unit.so").read_bytes()
    except (OSError, ValueError):
        return None
    if hashlib.sha256(data).hexdigest() != recorded:
        log.warning("dynexpr cache: %s does not match its recorded hash; rebuilding", d)
        return None
    return Artifact(key, d, meta)


def get_or_build(source: str, meta: dict) -> Artifact:
    """The artifact for `source`, compiling it (once, across processes) on a miss."""
    key = unit_key(source)
    art = lookup(key)
    if art is not None:
        stats["hits"] += 1
        log.debug("dynexpr cache: hit %s", key[:16])
        return art
    with _lock(key):
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
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=final.parent))
    try:
        src = tmp / "unit.cpp"
        src.write_text(source)
        log_code.info("dynexpr: generated unit %s:\n%s", key[:16], source)
        pch_dir = ensure_pch()
        cmd = compile_command(src, tmp / "unit.so", pch_dir, ensure_runtime())
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        stats["compile_seconds"] += time.perf_counter() - t0
        if proc.returncode != 0:
            kept = cache_dir() / "failed" / f"{key}.cpp"
            with contextlib.suppress(OSError):
                shutil.copyfile(src, kept)
            raise CompileError(
                "dynexpr internal error: the C++ compiler failed on the generated file "
                f"{kept}\ncommand: {' '.join(cmd)}\n{proc.stderr[-20000:]}")
        if "not used because" in proc.stderr or "invalid" in proc.stderr and ".gch" in proc.stderr:
            log.warning("dynexpr cache: the precompiled prelude was not used: %s", proc.stderr)
        stats["compiles"] += 1
        data = (tmp / "unit.so").read_bytes()
        (tmp / "unit.sha256").write_text(hashlib.sha256(data).hexdigest() + "\n")
        (tmp / "meta.json").write_text(json.dumps(meta))
        os.chmod(tmp, 0o700)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("dynexpr cache: compiled %s in %.2fs", key[:16], time.perf_counter() - t0)
    return Artifact(key, final, meta)


def compile_command(src: Path, out: Path, pch_dir: Path | None,
                    rt_dir: Path | None = None) -> list[str]:
    """The compiler command for one unit; linked against libdynexpr_rt.so in rt_dir (found
    again at load time through the unit's rpath)."""
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
        cmd += [str(rt_dir / RUNTIME_LIB), f"-Wl,-rpath,{rt_dir}"]
    return cmd


# -------------------------------------------------------------- precompiled prelude
def pch_key() -> str:
    return _sha({"pch": toolchain().fingerprint(), "sys": system_includes()})


def ensure_pch() -> Path | None:
    """The directory holding prelude.hpp and its .gch for this toolchain: the one
    installed with the package if it matches, else the cache's (built now if missing).
    None if precompiling is disabled (DYNEXPR_NO_PCH=1) or failed (then units include
    the prelude as text: slower, still correct)."""
    if os.environ.get("DYNEXPR_NO_PCH"):
        return None
    key = pch_key()
    inst = PKG_DIR / "_pch"
    with contextlib.suppress(OSError):
        if (inst / "key.txt").read_text().strip() == key and (inst / "prelude.hpp.gch").is_file():
            return inst
    d = cache_dir() / "pch" / key
    if (d / "ok").is_file():
        return d
    with _lock("pch-" + key):
        if (d / "ok").is_file():
            return d
        try:
            build_pch(d)
        except CompileError as e:
            log.warning("%s", e)
            return None
    return d


def build_pch(d: Path, marker: bool = True) -> None:
    """Precompiles kernels/prelude.hpp into d (prelude.hpp + prelude.hpp.gch + key.txt;
    and `ok`, the cache's mark of a finished build, unless marker is False)."""
    tc = toolchain()
    inc, kern = source_dirs()
    d.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(kern / "prelude.hpp", d / "prelude.hpp")
    tmp = d / f"prelude.hpp.gch.tmp{os.getpid()}"
    cmd = [tc.cxx, *CXXFLAGS, "-I", str(inc), "-I", str(kern)]
    for s in system_includes():
        cmd += ["-isystem", s]
    cmd += ["-pthread", "-x", "c++-header", str(d / "prelude.hpp"), "-o", str(tmp)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise CompileError("dynexpr internal error: precompiling kernels/prelude.hpp failed\n"
                           f"command: {' '.join(cmd)}\n{proc.stderr[-20000:]}")
    os.rename(tmp, d / "prelude.hpp.gch")
    (d / "key.txt").write_text(pch_key() + "\n")
    if marker:
        (d / "ok").write_text(f"{time.perf_counter() - t0:.2f}s\n")
    stats["pch_builds"] += 1
    log.info("dynexpr cache: precompiled the prelude in %.1fs", time.perf_counter() - t0)


# ------------------------------------------------------------------ runtime library
RUNTIME_LIB = "libdynexpr_rt.so"


def ensure_runtime() -> Path:
    """The directory holding libdynexpr_rt.so (kernels/runtime.cpp: the thread pool and
    argument checks every unit links against) for this toolchain and header set: the one
    installed with the package if it matches, else the cache's, built now if missing."""
    key = pch_key()
    inst = PKG_DIR / "_pch"
    with contextlib.suppress(OSError):
        if (inst / "key.txt").read_text().strip() == key and (inst / RUNTIME_LIB).is_file():
            return inst
    d = cache_dir() / "rt" / key
    if (d / RUNTIME_LIB).is_file():
        return d
    with _lock("rt-" + key):
        if not (d / RUNTIME_LIB).is_file():
            build_runtime(d)
    return d


def build_runtime(d: Path) -> None:
    """Compiles kernels/runtime.cpp into d/libdynexpr_rt.so (published by rename)."""
    tc = toolchain()
    inc, kern = source_dirs()
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f"{RUNTIME_LIB}.tmp{os.getpid()}"
    cmd = [tc.cxx, *CXXFLAGS, "-I", str(kern), "-I", str(inc)]
    for s in system_includes():
        cmd += ["-isystem", s]
    cmd += [*LINKFLAGS, f"-Wl,-soname,{RUNTIME_LIB}", str(kern / "runtime.cpp"), "-o", str(tmp)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise CompileError("dynexpr internal error: building the runtime library "
                           f"(kernels/runtime.cpp) failed\ncommand: {' '.join(cmd)}\n"
                           f"{proc.stderr[-20000:]}")
    os.rename(tmp, d / RUNTIME_LIB)
    log.info("dynexpr cache: built %s in %.1fs", RUNTIME_LIB, time.perf_counter() - t0)


# ----------------------------------------------------------------------------- index
def _index_file(fn_id: str, guard_key: str) -> Path:
    return cache_dir() / "index" / (_sha([fn_id, guard_key]) + ".json")


def index_get(fn_id: str, guard_key: str) -> dict | None:
    """What index_put recorded for (function identity, guard-set key), or None."""
    rec = _read_json(_index_file(fn_id, guard_key))
    if not rec or rec.get("fn") != fn_id or rec.get("guards") != guard_key:
        return None
    return rec.get("value")


def index_put(fn_id: str, guard_key: str, value: dict) -> None:
    """Records `value` (JSON: e.g. {"units": [unit keys], ...}) for the pair, atomically."""
    rec = {"fn": fn_id, "guards": guard_key, "value": value}
    with contextlib.suppress(OSError):
        _write_atomic(_index_file(fn_id, guard_key), json.dumps(rec).encode())


# --------------------------------------------------------------------------- helpers
@contextlib.contextmanager
def _lock(name: str):
    path = cache_dir() / "locks" / f"{name}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _run(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise CompileError(f"dynexpr: `{' '.join(cmd)}` failed:\n{proc.stderr}")
    return proc.stdout


def _sha(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


if __name__ == "__main__":
    # meson (option python_pch) precompiles the prelude at build time to install it with
    # the package: python bridge/dynexpr/cache.py --build-pch OUTDIR
    import sys

    if len(sys.argv) != 3 or sys.argv[1] != "--build-pch":
        sys.exit("usage: cache.py --build-pch OUTDIR")
    build_pch(Path(sys.argv[2]), marker=False)
    build_runtime(Path(sys.argv[2]))
