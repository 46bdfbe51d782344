"""dynexpr.toolchain — the compiler and the headers a unit is built from, and what of
them goes into a cache key (re-exported by dynexpr.cache, which owns the memo file)."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

try:
    from . import _config  # written by meson at build time
except ImportError:  # a source checkout run without building
    _config = None

LAYOUT = "v1"
PKG_DIR = Path(__file__).resolve().parent


class CompileError(RuntimeError):
    """dynexpr internal error: the C++ compiler rejected a generated unit."""


class BuildUnavailable(CompileError):
    """Nothing can be built here now (no compiler, disk full, cache not writable): not
    a fault of the generated code. Captured functions run with NumPy instead (Note
    [when building is not possible] in backends/policy.py)."""


# Words of a compiler's or linker's message that mean the machine, not the code, failed.
_ENVIRONMENT = ("No space left on device", "Disk quota exceeded", "Read-only file system",
                "Permission denied", "cannot open output file", "Cannot allocate memory",
                "out of memory allocating", "Killed signal terminated program",
                "virtual memory exhausted")


def classify(cmd: list[str], returncode: int, stderr: str, what: str) -> CompileError:
    """The error for a compiler run that failed: BuildUnavailable when the environment
    is at fault (a signal, a full disk), else CompileError with the compiler's message."""
    text = (f"{what}\ncommand: {' '.join(cmd)}\n{stderr[-20000:]}")
    if returncode < 0 or any(w in stderr for w in _ENVIRONMENT):
        return BuildUnavailable(text)
    return CompileError(text)


# Note [starting a tool while another thread forks]
# Popen's parent keeps pipe ends it waits on only while it starts the child: the error
# pipe (read until exec closes it) and the output pipes' write ends (closed after the
# start). A fork on another thread inside that window (a multiprocessing fork pool right
# after a first call, while the compile thread starts g++) copies those ends into the
# forked process, which keeps them open: the parent's Popen then waits for that process
# to exit, and that process (a pool worker) waits for the compile the parent is stuck
# in. So every tool the library starts starts through run_tool() (the precompile CLI's
# worker processes, started by a process that forks nothing, still use subprocess.run
# with their spec on stdin), under _spawning, which os.fork() takes
# before it forks (register_at_fork): a fork waits the few milliseconds of a start, and
# a started tool's pipes hold nothing a forked process can keep open (its stdin is
# /dev/null; input goes in a file). subprocess's own fork, which starts the tool, runs
# no fork hooks.
_spawning = threading.Lock()


def _fresh_spawning_lock() -> None:
    global _spawning
    _spawning = threading.Lock()  # the fork's thread held the old one at the fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=lambda: _spawning.acquire(),
                        after_in_parent=lambda: _spawning.release(),
                        after_in_child=_fresh_spawning_lock)


def run_tool(cmd: list[str], timeout: float | None = None,
             env: dict | None = None) -> subprocess.CompletedProcess:
    """subprocess.run(cmd, capture_output=True, text=True, timeout=timeout) with stdin
    from /dev/null, started so that a fork on another thread cannot hang it (Note
    [starting a tool while another thread forks]). Raises OSError when cmd cannot start,
    subprocess.TimeoutExpired (the tool killed) when it outruns `timeout`."""
    with _spawning:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)
    with proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except BaseException:  # a timeout or KeyboardInterrupt: no orphaned compiler
            proc.kill()
            proc.wait()
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def unavailable(err: OSError, what: str) -> BuildUnavailable:
    """An OSError met while building (starting the compiler, writing a file)."""
    name = errno.errorcode.get(err.errno or 0, "")
    return BuildUnavailable(f"dynexpr: {what}: {err.strerror or err}"
                            + (f" [{name}]" if name else "")
                            + (f": {err.filename}" if err.filename else ""))


def source_dirs() -> tuple[Path, Path]:
    """(include root holding dynexpr/, kernels dir holding abi.h and prelude.hpp): the
    installed copy in the package (`_include/`), else the source checkout's. The
    environment's DYNEXPR_SOURCE_ROOT names another tree (include/, kernels/) instead:
    a copy with an extra op (tests/python/test_manifest.py, dynexpr.manifest)."""
    other = os.environ.get("DYNEXPR_SOURCE_ROOT")
    if other:
        return Path(other) / "include", Path(other) / "kernels"
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
    # _config is imported with this module, never here: this runs on compile threads
    # (Note [no imports on compile threads] in background.py)
    out = list(getattr(_config, "SYSTEM_INCLUDES", ()))
    for cand in ("/usr/include/eigen3", "/usr/local/include/eigen3"):
        if cand not in out and Path(cand, "Eigen", "Core").is_file():
            out.append(cand)
    return out


@dataclass(frozen=True)
class Toolchain:
    cxx: str
    version: str  # first line of `c++ --version`
    isa: str  # resolved -march=native target flags
    headers: str  # sha256 of every header under include/ and kernels/
    abi: int
    flags: tuple[str, ...]
    link: tuple[str, ...] = ()  # the linker's flags (Note [the linker]); () is the default one

    def fingerprint(self) -> str:
        return sha({"cxx": self.version, "isa": self.isa, "headers": self.headers,
                    "abi": self.abi, "flags": self.flags, "link": self.link,
                    "layout": LAYOUT})


def make(memo_file: Path | None, flags: tuple[str, ...], write_memo) -> Toolchain:
    """The toolchain of $CXX (default c++). Running the compiler costs tens of ms, so
    what it says is memoised in memo_file per compiler file and CPU; a memo that is not
    what this function writes (damaged, hand-edited) is ignored and rewritten."""
    cxx = os.environ.get("CXX") or "c++"
    path = shutil.which(cxx)
    if path is None:
        raise BuildUnavailable(f"dynexpr: no C++ compiler found ({cxx!r}); install g++ or "
                               "set CXX to one")
    real = os.path.realpath(path)
    st = os.stat(real)
    ld = os.environ.get("DYNEXPR_LD", "").strip()
    memo_key = sha([real, st.st_size, st.st_mtime_ns, _cpu_identity(), flags, ld])
    memo = _read_memo(memo_file)
    entry = memo.get(memo_key)
    if not (isinstance(entry, dict) and isinstance(entry.get("version"), str)
            and isinstance(entry.get("isa"), str) and isinstance(entry.get("link"), list)
            and all(isinstance(f, str) for f in entry["link"])):
        entry = {"version": _run([path, "--version"]).splitlines()[0].strip(),
                 "isa": _resolve_isa(path), "link": list(_pick_linker(path, ld))}
        memo[memo_key] = entry
        if memo_file is not None:
            with contextlib.suppress(OSError):
                write_memo(memo_file, json.dumps(memo, indent=1).encode())
    inc, kern = source_dirs()
    return Toolchain(path, entry["version"], entry["isa"], headers_hash(inc, kern),
                     abi_version(kern), flags, tuple(entry["link"]))


# Note [the linker]
# Every unit is compiled and linked into a shared object by one compiler command. With
# GNU ld (bfd) the link alone took 0.13-0.16 s of a 10-op unit's ~0.7 s on this 2-core
# machine (g++ 12, binutils 2.40); gold, which binutils ships beside it, links the same
# object in 0.03-0.05 s, and lld in 0.04-0.07 s. So units link with gold when the
# compiler can drive it: one probe, memoised with the compiler's identity. gold writes
# DT_RPATH unless told otherwise; --enable-new-dtags keeps the DT_RUNPATH that Debian's
# ld writes, so a unit finds libdynexpr_rt.so the same way with either linker.
# DYNEXPR_LD=bfd (or lld, mold: any name -fuse-ld takes) picks another one, and
# DYNEXPR_LD=default the compiler's own; a named linker that cannot link is an error
# that says so, not a silent fallback.
PREFERRED_LINKER = "gold"


def _link_flags(name: str) -> tuple[str, ...]:
    return (f"-fuse-ld={name}", "-Wl,--enable-new-dtags")


def _pick_linker(cxx: str, asked: str) -> tuple[str, ...]:
    if asked == "default":
        return ()
    name = asked or PREFERRED_LINKER
    if not name.replace("-", "").replace(".", "").isalnum():
        raise BuildUnavailable(f"dynexpr: DYNEXPR_LD={asked!r} is not a linker name; set it "
                               "to gold, bfd, lld or mold, or to 'default' for the compiler's "
                               "own")
    flags = _link_flags(name)
    if _links(cxx, flags):
        return flags
    if asked:
        raise BuildUnavailable(f"dynexpr: DYNEXPR_LD={asked!r}: `{cxx} -fuse-ld={name}` cannot "
                               "link a shared library here; install that linker, or set "
                               "DYNEXPR_LD=default for the compiler's own linker")
    return ()


def _links(cxx: str, flags: tuple[str, ...]) -> bool:
    """Whether `cxx` with `flags` links a small C++ shared library."""
    with tempfile.TemporaryDirectory(prefix="dynexpr-ld-") as d:
        src, out = Path(d) / "probe.cpp", Path(d) / "probe.so"
        try:
            src.write_text("int dynexpr_ld_probe() { return 1; }\n")
            proc = run_tool([cxx, *flags, "-shared", "-fPIC", "-pthread", str(src), "-o",
                             str(out)], timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return proc.returncode == 0 and out.is_file()


def _read_memo(path: Path | None) -> dict:
    return (read_json_dict(path) if path is not None else None) or {}


def read_json_dict(path: Path) -> dict | None:
    """The JSON object in `path`, or None when the file is missing, unreadable, not JSON
    or not an object (a damaged or hand-edited cache file is never trusted)."""
    try:
        obj = json.loads(path.read_text())
    except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
        return None
    return obj if isinstance(obj, dict) else None


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


def headers_hash(include: Path, kernels: Path) -> str:
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


def abi_version(kernels: Path) -> int:
    for line in (kernels / "abi.h").read_text().splitlines():
        parts = line.split()
        if parts[:2] == ["#define", "DYNEXPR_ABI_VERSION"] and len(parts) > 2:
            return int(parts[2])
    raise CompileError(f"dynexpr: no DYNEXPR_ABI_VERSION in {kernels / 'abi.h'}")


def _run(cmd: list[str]) -> str:
    try:
        proc = run_tool(cmd)
    except OSError as e:
        raise unavailable(e, f"cannot run the compiler {cmd[0]}") from None
    if proc.returncode != 0:
        raise BuildUnavailable(f"dynexpr: `{' '.join(cmd)}` failed:\n{proc.stderr}")
    return proc.stdout


def sha(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()
