"""What dynexpr tells the user about its captures: warnings (once each), why a capture
was needed again, and the recompile and capture logs.

It sits below captured.py, segments.py, background.py and explain.py, which all report
through it; it imports nothing of theirs, so none of them imports another to warn.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

from . import logs
from .guards import alias_relation, resolve, strides_class


class DynexprWarning(UserWarning):
    """dynexpr fell back to plain Python or NumPy somewhere it would rather not."""


# Process-wide: the number of entries of all captured functions (for
# config.accumulated_recompile_limit), the warnings given, and whether the cpu backend
# can run here (None: not checked yet; backends/cpu.py).
_state: dict[str, Any] = {"entries": 0, "warned": set(), "runtime": None}


def warn_once(key: Any, message: str, stacklevel: int = 4) -> None:
    if key not in _state["warned"]:
        _state["warned"].add(key)
        warnings.warn(message, DynexprWarning, stacklevel=stacklevel)


def forget(owner_id: int) -> None:
    """Forget the warnings keyed by one captured function (its cache_clear)."""
    _state["warned"] = {
        k for k in _state["warned"] if not (isinstance(k, tuple) and k[0] == owner_id)
    }


def reset() -> None:
    _state["entries"] = 0
    _state["warned"] = set()
    _state["runtime"] = None


def warn_unavailable(err: BaseException) -> None:
    """Note [when building is not possible] (backends/policy.py)."""
    if getattr(err, "bundle_miss", False):
        return  # artifacts/record.py warns, naming the specialisation the bundle lacks
    warn_once("build-unavailable",
              f"{err}\ndynexpr: kernels cannot be compiled here now; captured functions run "
              "with NumPy instead (the same results, unfused). Free disk space, make the "
              "cache directory writable (DYNEXPR_CACHE_DIR) or install g++ (CXX) to get "
              "compiled kernels.")


# ------------------------------------------------------------------------- recompiles
def recompile_lines(history: list) -> list[str]:
    """One line per recompile: the guards of earlier entries that failed, with the values
    seen (explain's report and the recompile-limit warning)."""
    return [f"  entry {k}: " + ("; ".join(f"{g} (got {seen})" for g, seen in failed) or "?")
            for k, failed in history]


def why(entries, bound: Any, fn: Any, names: tuple) -> list[tuple[int, str, str]]:
    """For each entry (numbered from 1), the first guard that fails for this call and
    the value seen."""
    out = []
    for i, e in enumerate(entries, 1):
        g = e.guards.failing(bound, fn)
        if g is not None:
            out.append((i, g.describe(names), seen(g, bound, fn)))
    return out


def seen(g, bound: Any, fn: Any) -> str:
    """What guard g's source holds in this call, said the way the guard is."""
    try:
        if g.kind in ("ALIAS", "DIM_EQ"):
            a, b = (resolve(s, bound, fn) for s in g.source)
            if g.kind == "DIM_EQ":
                return f"{a.shape[g.expected[0]]} and {b.shape[g.expected[1]]}"
            return alias_relation(a, b)
        x = resolve(g.source, bound, fn)
    except Exception as e:  # the source itself is gone
        return f"unreachable: {type(e).__name__}"
    kind = g.kind
    if kind in ("SHAPE", "DYN_SHAPE"):
        return repr(getattr(x, "shape", x))
    if kind == "DTYPE":
        return repr(getattr(x, "dtype", x))
    if kind in ("TYPE",):
        return type(x).__qualname__
    if kind == "LEN":
        return str(len(x))
    if kind == "STRIDES_CLASS":
        return repr(strides_class(x))
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


def log_recompile(qualname: str, number: int, failed: list[tuple[int, str, str]]) -> None:
    if logs.enabled("recompiles"):
        text = "; ".join(f"entry {i} needs {g}" for i, g, _ in failed)
        logs.get("recompiles").info("%s: capturing again (entry %d): %s", qualname, number,
                                    text)


def warn_limit(owner_id: int, qualname: str, limit: int, count: int, history: list) -> None:
    text = "\n".join(recompile_lines(history))
    warn_once(
        (owner_id, "limit"),
        f"dynexpr: {qualname} reached config.recompile_limit "
        f"({limit}); from now on calls that fit none of its "
        f"{count} entries run as plain Python. Why each capture after "
        f"the first was needed (the guard of an earlier entry that failed, and the "
        f"value seen):\n{text}\nRaise dynexpr.config.recompile_limit, or use "
        "dynamic=True / mark_dynamic for changing shapes",
        stacklevel=6,
    )


# --------------------------------------------------------------------------- captures
def summary(entry) -> str:
    if entry.compiled is None:
        return f"plain Python ({entry.reason.reason}, {entry.reason.file}:{entry.reason.line})"
    return f"{len(entry.translation.graph.ops())} ops, {len(entry.guards)} guards"


def log_entry(qualname: str, number: int, entry) -> None:
    """config.verbose: one line per new entry."""
    print(f"dynexpr: {qualname}: entry {number}: {summary(entry)}", file=sys.stderr)


def log_capture(qualname: str, names: tuple, tr) -> None:
    if logs.enabled("guards"):
        lines = "\n  ".join(g.describe(names) for g in tr.guards)
        logs.get("guards").info("%s: %d guards\n  %s", qualname, len(tr.guards), lines)
    if logs.enabled("output_code"):
        logs.get("output_code").info("%s: captured graph\n%s", qualname, tr.graph.canonical())


def log_break(qualname: str, reason, resumed: bool = False) -> None:
    log = logs.get("graph_breaks")
    if log.isEnabledFor(20):
        if resumed:
            log.info("%s: %s (compiled code before and after it)", qualname, reason)
        else:
            log.info("%s: %s", qualname, reason)
