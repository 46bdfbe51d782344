"""Who may have written what dynexpr loads, private files, and stale temporaries.

Note [cache trust]
dynexpr dlopens shared objects from its cache directory (and from the package's `_pch`
directory), so whoever can write there can run code in every process that uses it. As
ssh does for ~/.ssh and pip for its cache, a directory is trusted only if it and every
directory above it are owned by the current user or by root and are writable by no group
and no other user; a sticky directory (/tmp) ends the walk up, since others cannot
rename or replace what we own inside it. An untrusted cache directory is never read or
written: cache.cache_dir() warns once, naming the directory, its owner and the way out,
and compiles into a private temporary cache for this process instead (removed at exit).
Everything dynexpr creates is private: directories 0700, files 0600 (0700 for objects).

Note [stale temporaries]
Builds write into temporaries whose names carry the builder's pid (`.build-<pid>-*`,
`*.tmp<pid>`, `.tmp-<pid>-*`, `dynexpr-cache-<pid>-*`) and publish by rename. A process
killed mid-build leaves its temporary behind; the next process that builds in the same
cache removes those whose pid is dead, and any older than a day (a pid can be reused).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path

STALE_SECONDS = 24 * 3600


class UntrustedDirectory(OSError):
    """A directory dynexpr would load code from is writable by someone else."""


def _user(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def problem(path: Path | str) -> str | None:
    """None when `path` is a trusted directory (Note [cache trust]); else a sentence
    naming the directory at fault and its owner or mode."""
    me = os.geteuid()
    p = os.path.realpath(path)
    while True:
        try:
            st = os.stat(p)
        except OSError as e:
            return f"{p} cannot be inspected ({e.strerror or e})"
        if not stat.S_ISDIR(st.st_mode):
            return f"{p} is not a directory"
        if st.st_uid not in (me, 0):
            return f"{p} is owned by {_user(st.st_uid)}, not by you ({_user(me)}) or root"
        writable = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if writable and not st.st_mode & stat.S_ISVTX:
            who = "its group and others" if writable == (stat.S_IWGRP | stat.S_IWOTH) else (
                "its group" if writable & stat.S_IWGRP else "other users")
            return (f"{p} (owned by {_user(st.st_uid)}, mode {stat.S_IMODE(st.st_mode):04o}) "
                    f"is writable by {who}")
        if writable:  # sticky: others cannot rename or replace entries that are ours
            return None
        parent = os.path.dirname(p)
        if parent == p:
            return None
        p = parent


def check_owned(path: Path, st: os.stat_result | None = None) -> str | None:
    """The cheap check of one entry inside a trusted directory: owned by us or root and
    not group/world-writable (a file or directory planted or loosened there later)."""
    try:
        st = st or os.stat(path)
    except OSError as e:
        return f"{path} cannot be inspected ({e.strerror or e})"
    if st.st_uid not in (os.geteuid(), 0):
        return f"{path} is owned by {_user(st.st_uid)}, not by you ({_user(os.geteuid())})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def write_private(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Writes a new file readable by its owner only (O_EXCL: never through a planted
    link); an existing file is replaced."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                 mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


# ------------------------------------------------------------- stale temporaries
# Our temporaries: a prefix and "<pid>-", or a ".tmp<pid>" suffix; names of the same
# prefixes without a pid (written by older versions) go by age alone.
_PID = re.compile(r"^(?:\.build-|\.tmp-|dynexpr-cache-|\.probe-)(\d+)-|\.tmp(\d+)$")
_LEGACY = re.compile(r"^(?:\.build-|\.tmp-|dynexpr-cache-)|\.tmp\d*$")


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_stale(entry: os.DirEntry | Path, now: float | None = None) -> bool:
    """Whether a temporary (by its name) belongs to a dead process or is over a day old."""
    m = _PID.search(entry.name)
    if m is None and not _LEGACY.search(entry.name):
        return False
    try:
        age = (now or time.time()) - entry.stat(follow_symlinks=False).st_mtime
    except OSError:
        return False
    return age > STALE_SECONDS or (m is not None and not _alive(int(m.group(1) or m.group(2))))


def clean_stale(dirs: list[Path]) -> int:
    """Removes stale temporaries directly inside each of `dirs`; returns how many."""
    now, removed = time.time(), 0
    for d in dirs:
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            if not is_stale(e, now):
                continue
            with contextlib.suppress(OSError):
                if e.is_dir(follow_symlinks=False):
                    shutil.rmtree(e.path)
                else:
                    os.unlink(e.path)
                removed += 1
    return removed


# ---------------------------------------------------------- private fallback caches
_fallbacks: list[tuple[int, Path]] = []  # (creating pid, directory) removed at exit


def private_temp_dir() -> Path:
    """A new 0700 directory under the system temporary directory, removed when this
    process exits; stale ones of dead processes are removed first."""
    base = Path(tempfile.gettempdir())
    with contextlib.suppress(OSError):
        _clean_fallbacks(base)
    d = Path(tempfile.mkdtemp(prefix=f"dynexpr-cache-{os.getpid()}-", dir=base))
    _fallbacks.append((os.getpid(), d))
    return d


def _clean_fallbacks(base: Path) -> None:
    # Only dynexpr's own fallback caches, only ours, only of dead processes (or old).
    now = time.time()
    for e in os.scandir(base):
        if e.name.startswith("dynexpr-cache-") and e.is_dir(follow_symlinks=False):
            with contextlib.suppress(OSError):
                if e.stat(follow_symlinks=False).st_uid == os.geteuid() and is_stale(e, now):
                    shutil.rmtree(e.path)


@atexit.register
def _remove_fallbacks() -> None:
    # A forked child inherits the list but not the ownership: only the creator removes.
    for pid, d in _fallbacks:
        if pid == os.getpid():
            shutil.rmtree(d, ignore_errors=True)
