"""dynexpr.cache — the on-disk store of built artifacts, content-addressed, and its index.

Layout under the cache directory ($DYNEXPR_CACHE_DIR or dynexpr.config.cache_dir,
default ~/.cache/dynexpr; directories 0700, files 0600):

    v1/toolchain.json             compiler fingerprints, memoised by compiler file + CPU
    v1/pch/<key>/                 prelude.hpp, prelude.hpp.gch (+ .sha256), key.txt
    v1/rt/<key>/                  libdynexpr_rt.so (+ .sha256): the runtime library units
                                  link against (kernels/runtime.cpp)
    v1/units/<kk>/<key>/          unit.cpp, unit.so, meta.json, unit.sha256
    v1/index/<hash>.json          (function identity, guard-set key) -> unit keys
    v1/locks/<key>.lock           fcntl locks: one build of a key at a time
    v1/failed/<key>.cpp           sources the compiler rejected (named in the error)

This module is the store: where things are, verifying them, publishing a built artifact
(into a temporary directory, renamed into place under the key's lock), finding it again,
and the index. It knows nothing of compilers: what fills a unit's directory is the
backend's toolchain driver (cxx.py for the cpu backend, which also owns pch/ and rt/),
handed to get_or_build as a callable. A unit's key is the backend's (backends/base.py:
the sha256 of the backend's name, the source and the toolchain's fingerprint).

Note [verified artifacts]
Everything that is loaded or fed to the compiler is checked against a sha256 recorded
when it was published, before its first use in a process: a unit (one digest over
its artifact and meta.json, so edited output extents are caught too), the runtime library
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
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import toolchain as _tc
from . import trust
from .config import config
from .toolchain import LAYOUT, CompileError  # noqa: F401  (CompileError: for callers)
from .toolchain import sha as _sha

SUBDIRS = ("pch", "rt", "units", "index", "locks", "failed")
ARTIFACT = "unit.so"  # the artifact kind of every unit today (Backend.artifact)

log = logging.getLogger("dynexpr.cache")

# Counters for tests, explain and cache_info (this process); the toolchain drivers
# count their builds here too.
stats = {"compiles": 0, "hits": 0, "rebuilt": 0, "pch_builds": 0, "compile_seconds": 0.0}
_on_reset: list[Callable[[], None]] = []  # what drivers forget with the cache (on_reset)


# ----------------------------------------------------------------------------- paths
_dirs: dict[str, Path] = {}  # cache root as configured -> the layout directory used for it
_warned: set[str] = set()  # roots warned about
_cleaned: set[Path] = set()  # layout directories whose stale temporaries were removed
_fallback_dir: Path | None = None


def configured_root() -> str:
    """dynexpr.config.cache_dir when set, else $DYNEXPR_CACHE_DIR, else ~/.cache/dynexpr."""
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
    _dirs.clear()
    _warned.clear()
    _cleaned.clear()
    _verified.clear()
    for forget in _on_reset:
        forget()


def on_reset(forget: Callable[[], None]) -> None:
    """Calls forget() on every reset(): a toolchain driver's memo of this cache's files."""
    _on_reset.append(forget)


def clean_stale(d: Path) -> None:
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


def record(built: Path, final: Path) -> None:
    """Writes `<final>.sha256`, the digest of `built` (published as `final` next)."""
    trust.write_private(final.with_name(final.name + ".sha256"),
                        (file_sha256(built) + "\n").encode())

# ----------------------------------------------------------------------- bundles
# Units served by loaded bundles (dynexpr.artifacts.bundle, Note [bundles]): unit key ->
# Artifact, verified when the bundle was loaded. Empty unless a bundle is loaded.
bundled: dict[str, "Artifact"] = {}
bundled_source: dict[str, str] = {}  # cxx.source_key(source) -> unit key in `bundled`
bundled_stat: dict[str, tuple | None] = {}  # file -> its stat signature when verified
bundle_runtime: Path | None = None  # the loaded bundle's runtime library


# ------------------------------------------------------------------------ artifacts
@dataclass
class Artifact:
    key: str
    dir: Path
    meta: dict
    name: str = ARTIFACT  # the artifact file in dir (the backend's artifact kind)

    @property
    def path(self) -> Path:
        return self.dir / self.name

    @property
    def so(self) -> Path:  # the cpu backend's name for it
        return self.path


def _unit_dir(key: str) -> Path:
    return cache_dir() / "units" / key[:2] / key


def unit_dir(key: str) -> Path:
    """Where the artifact `key` is published (a build's rpath is relative to it)."""
    return _unit_dir(key)


def unit_digest(so: bytes, meta: bytes) -> str:
    """One sha256 over the artifact and meta.json (Note [verified artifacts])."""
    h = hashlib.sha256(b"dynexpr unit\0%d\0" % len(so))
    h.update(so)
    h.update(b"\0meta.json\0")
    h.update(meta)
    return h.hexdigest()


def lookup(key: str, name: str = ARTIFACT) -> Artifact | None:
    """A published, verified artifact, or None (missing, damaged or not ours)."""
    if bundled and key in bundled:  # verified when its bundle was loaded (Note [bundles])
        art = bundled[key]
        if _signature(art.path) != bundled_stat.get(str(art.path)):
            log.warning("dynexpr: bundle unit %s changed after its bundle was verified; "
                        "not loading it", art.path)
            return None
        return art
    d = _unit_dir(key)
    try:
        why = trust.check_owned(d)
        recorded = (d / "unit.sha256").read_text().strip()
        meta_bytes = (d / "meta.json").read_bytes()
        data = (d / name).read_bytes()
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
    return Artifact(key, d, meta, name) if isinstance(meta, dict) else None


# make(tmp, final) builds the artifact file into the temporary directory tmp, which is
# renamed to final (the unit's directory) once it is complete.
Maker = Callable[[Path, Path], None]


def get_or_build(key: str, meta: dict, make: Maker, name: str = ARTIFACT) -> Artifact:
    """The artifact `key`, built by make() (once, across processes) on a miss."""
    art = lookup(key, name)
    if art is not None:
        stats["hits"] += 1
        log.debug("dynexpr cache: hit %s", key[:16])
        return art
    return rebuild(key, meta, make, name, only_if_missing=True)


def rebuild(key: str, meta: dict, make: Maker, name: str = ARTIFACT, *,
            only_if_missing: bool = False) -> Artifact:
    """Builds the artifact `key` again (a published copy that failed to load is removed
    first); with only_if_missing, a copy another process published meanwhile is used."""
    with lock(key):
        if only_if_missing:
            art = lookup(key, name)  # another process may have published it meanwhile
            if art is not None:
                stats["hits"] += 1
                return art
        d = _unit_dir(key)
        if d.exists():
            stats["rebuilt"] += 1
            shutil.rmtree(d, ignore_errors=True)
        return _publish(key, meta, make, name)


def _publish(key: str, meta: dict, make: Maker, name: str) -> Artifact:
    final = _unit_dir(key)
    clean_stale(cache_dir())
    try:
        final.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = Path(tempfile.mkdtemp(prefix=f".build-{os.getpid()}-", dir=final.parent))
    except OSError as e:
        raise _tc.unavailable(e, f"cannot write into the cache directory {final.parent}") \
            from None
    try:
        make(tmp, final)
        os.chmod(tmp / name, 0o700)
        meta_bytes = json.dumps(meta).encode()
        trust.write_private(tmp / "meta.json", meta_bytes)
        digest = unit_digest((tmp / name).read_bytes(), meta_bytes)
        trust.write_private(tmp / "unit.sha256", (digest + "\n").encode())
        os.rename(tmp, final)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _tc.unavailable(e, f"cannot build {key[:16]} in the cache {final.parent}") \
            from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Artifact(key, final, meta, name)


def discard(key: str) -> None:
    """Removes the published unit `key` (it verified but did not load); a bundle's unit
    is only forgotten (a bundle is read-only)."""
    if bundled.pop(key, None) is not None:
        return
    with lock(key):
        shutil.rmtree(_unit_dir(key), ignore_errors=True)


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
        write_atomic(_index_file(fn_id, guard_key), json.dumps(rec).encode())

# --------------------------------------------------------------------------- helpers
@contextlib.contextmanager
def lock(name: str):
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


def write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".tmp-{os.getpid()}-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


