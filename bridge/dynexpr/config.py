"""dynexpr.config — process-wide settings, validated when set.

    dynexpr.config.recompile_limit = 16

Unknown names and wrong types raise at once, naming the valid choices, so a typo never
silently does nothing. Every setting takes effect when set: cache_dir switches the cache
used by the next lookup or compile (a relative path is made absolute at once), and
num_threads resizes the kernels' thread pool (0: one thread per core).
"""

from __future__ import annotations

import os
import warnings
from typing import Any


def _env_int(var: str, default: int) -> int:
    """$var as a whole number >= 0; anything else warns, naming the variable, and the
    default is used (a typo in the environment must not break `import dynexpr`)."""
    text = os.environ.get(var, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        warnings.warn(f"dynexpr: ${var}={text!r} is not a whole number >= 0; using "
                      f"{default}. Set it to one, or unset it.", RuntimeWarning, stacklevel=2)
        return default
    return value

# name: (type, default factory, what it means)
_FIELDS: dict[str, tuple[type | tuple, Any, str]] = {
    "recompile_limit": (
        int,
        lambda: 8,
        "captured graphs per function; past it, new guard sets run as plain Python",
    ),
    "accumulated_recompile_limit": (
        int,
        lambda: 256,
        "captured graphs over all functions of the process",
    ),
    "suppress_errors": (
        bool,
        lambda: False,
        "an internal dynexpr error runs the function as plain Python with a "
        "warning instead of raising",
    ),
    "cache_dir": (
        str,
        None,  # read when asked (Config.__getattr__) until set: $DYNEXPR_CACHE_DIR may change
        "where compiled kernels are cached ($DYNEXPR_CACHE_DIR, default ~/.cache/dynexpr; "
        "only a directory that only you can write is used: see the README)",
    ),
    "num_threads": (
        int,
        lambda: _env_int("DYNEXPR_NUM_THREADS", 0),
        "worker threads of compiled kernels; 0 = one per core ($DYNEXPR_NUM_THREADS)",
    ),
    "spin_us": (
        int,
        lambda: _env_int("DYNEXPR_SPIN_US", -1),
        "microseconds an idle worker thread of the kernels spins before it sleeps: longer "
        "keeps workers awake across Python's work between kernels, at the price of a "
        "polling core; -1 = the library's default ($DYNEXPR_SPIN_US)",
    ),
    "background_compile": (
        bool,
        lambda: os.environ.get("DYNEXPR_BACKGROUND_COMPILE", "1") not in ("0", "false", "no"),
        "a kernel not in the cache compiles in a background thread while NumPy runs the "
        "captured graph; False: the first call waits for the compiler "
        "($DYNEXPR_BACKGROUND_COMPILE=0)",
    ),
    "plain_fallback": (
        bool,
        lambda: os.environ.get("DYNEXPR_PLAIN_FALLBACK", "1") not in ("0", "false", "no"),
        "an entry whose compiled path is measured slower than the plain function runs "
        "the plain function (re-checked now and then); False: always the compiled path, "
        "for benchmarking it alone ($DYNEXPR_PLAIN_FALLBACK=0)",
    ),
    "unit_budget": (
        int,
        lambda: _env_int("DYNEXPR_UNIT_BUDGET", 500),
        "the most graph nodes one compiled unit holds; a larger graph is split into "
        "several units compiled in parallel (Note [compile budget] in split.py); "
        "0 = no limit ($DYNEXPR_UNIT_BUDGET)",
    ),
    "resume_as_code": (
        bool,
        lambda: os.environ.get("DYNEXPR_RESUME_AS_CODE", "1") not in ("0", "false", "no"),
        "after a graph break inside a loop, the rest of the call runs as real bytecode "
        "(CPython at full speed, no compiled segments after it); False: resume segment by "
        "segment through dynexpr's interpreter ($DYNEXPR_RESUME_AS_CODE=0)",
    ),
    "verbose": (bool, lambda: False, "print a line for each capture and compile"),
}

# Integer settings that take a value below 0: -1 there means "the library's default".
_LOWEST = {"spin_us": -1}


class Config:
    """Settings of dynexpr; see `Config.describe()` for the list."""

    def __init__(self) -> None:
        for name, (_, default, _) in _FIELDS.items():
            if default is not None:
                object.__setattr__(self, name, default())

    def __getattr__(self, name: str) -> Any:
        # Only settings whose default follows the environment get here (until set).
        if name == "cache_dir":
            return (os.environ.get("DYNEXPR_CACHE_DIR")
                    or os.path.join(os.path.expanduser("~"), ".cache", "dynexpr"))
        raise AttributeError(f"dynexpr.config has no setting {name!r}")

    def __delattr__(self, name: str) -> None:
        """`del dynexpr.config.cache_dir` returns to the default ($DYNEXPR_CACHE_DIR)."""
        if name != "cache_dir":
            raise AttributeError(f"dynexpr.config.{name} cannot be deleted; set it instead")
        self.__dict__.pop(name, None)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in _FIELDS:
            raise AttributeError(
                f"dynexpr.config has no setting {name!r}; settings: {', '.join(_FIELDS)}"
            )
        typ = _FIELDS[name][0]
        if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
            raise TypeError(
                f"dynexpr.config.{name} must be {typ.__name__}, "
                f"got {type(value).__name__} {value!r}"
            )
        low = _LOWEST.get(name, 0)
        if typ is int and value < low:
            raise ValueError(f"dynexpr.config.{name} must be >= {low}, got {value}")
        if name == "cache_dir":
            if not value:
                raise ValueError("dynexpr.config.cache_dir must name a directory; "
                                 "`del dynexpr.config.cache_dir` restores the default")
            value = os.path.abspath(os.path.expanduser(value))
        object.__setattr__(self, name, value)
        for hook in _hooks.get(name, ()):
            hook(value)

    @staticmethod
    def describe() -> str:
        return "\n".join(f"{n}: {doc}" for n, (_, _, doc) in _FIELDS.items())

    def __repr__(self) -> str:
        body = ", ".join(f"{n}={getattr(self, n)!r}" for n in _FIELDS)
        return f"dynexpr.config({body})"


# name -> what to call with a new value: layers below the settings that act on one at
# once register here (runtime.py resizes the kernels' pool on num_threads), so config
# imports none of them; one not imported yet reads the setting when it starts.
_hooks: dict[str, list] = {}


def on_change(name: str, hook) -> None:
    _hooks.setdefault(name, []).append(hook)


config = Config()
