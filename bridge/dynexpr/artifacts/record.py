"""dynexpr.artifacts.record — what a new entry of a captured function leaves behind:
one record in the cache's index (its function, arguments, guards and units: what
`python -m dynexpr cache ls | info | why-miss` read), and with DYNEXPR_RECORD=path one
[[spec]] in that manifest (manifest.py), so a test suite or a warm-up run writes the
manifest that `python -m dynexpr precompile` builds.

Only the miss path calls this (after translating, while compiling costs far more); a
failure to record is logged, never raised: recording must not break a call.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

from .. import background, cache, eager
from ..toolchain import sha
from . import manifest, specs

log = logging.getLogger("dynexpr.cache")
INDEX_PREFIX = "spec:"  # the index's function identities of entry records


def units_of(compiled: Any) -> list[str] | None:
    """The unit keys an entry's callable runs (a native Kernel's unit directory is named
    by its key; a split kernel runs several); None for a callable that runs no unit yet:
    NumPy (eager, or a fallback), or a unit still compiling in the background."""
    if compiled is None:
        return []
    fns = getattr(compiled, "fns", None)  # split.SplitKernel
    if fns is not None:
        out = []
        for f in fns:
            keys = units_of(f)
            if keys is None:
                return None
            out += [k for k in keys if k not in out]
        return out
    path = getattr(compiled, "path", None)  # _native.Kernel
    if isinstance(path, str):
        return [Path(path).parent.name]
    if getattr(compiled, "__module__", None) in (eager.__name__, background.__name__):
        return None
    return []  # nothing to build (every output is an input, no outputs at all)


def fn_id(fn: Any) -> str:
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', '?')}"


def entry_record(cf: Any, bound: Any, entry: Any, units: list[str]) -> dict:
    """The index record of a captured function's new entry."""
    fn = cf._fn
    names = fn.__code__.co_varnames
    nargs = len(bound)
    return {
        "function": fn_id(fn),
        "backend": cf.backend if isinstance(cf.backend, str) else repr(cf.backend),
        "mode": cf.mode,
        "kind": "break" if entry.compiled is None else "graph",
        "reason": str(entry.reason) if entry.reason is not None else None,
        "args": specs.arg_specs(bound, names[:nargs], entry.guards),
        "guards": [specs.guard_record(g, names) for g in entry.guards],
        "units": list(units),
        "time": time.time(),
    }


def manifest_spec(rec: dict, cf: Any) -> dict | None:
    """The [[spec]] of an index record, or None when its arguments cannot be written
    (an object other than an array or a plain value: precompile could not make it)."""
    args = []
    for a in rec["args"]:
        if "type" in a:
            return None
        if "dtype" in a:
            a = dict(a, shape=[{"min": d[0], "max": d[1], "example": d[2]}
                               if isinstance(d, list) else d for d in a["shape"]])
        elif a.get("value") is None:
            a = {"name": a["name"], "none": True}
        args.append(a)
    spec = {"function": rec["function"], "backend": rec["backend"], "mode": rec["mode"]}
    if isinstance(cf.dynamic, bool):
        spec["dynamic"] = cf.dynamic
    spec["args"] = args
    return spec


def entry_added(cf: Any, bound: Any, entry: Any) -> None:
    """Records a new entry (captured.py calls this once per entry it adds)."""
    units = units_of(entry.compiled)
    if cache.bundled and entry.compiled is not None and cf._backend.artifact and (
            units is None or any(k not in cache.bundled for k in units)):
        _warn_bundle_miss(cf, bound, entry, units)
    units = units or []
    path = os.environ.get("DYNEXPR_RECORD")
    if cf._backend.artifact is None and not path:
        return  # a backend that stores nothing (eager, a user's callable): no index
    try:
        rec = entry_record(cf, bound, entry, units)
        _examples(rec, bound)
        if cf._backend.artifact is not None:
            cache.index_put(INDEX_PREFIX + rec["function"], sha(rec["guards"]), rec)
        if path and rec["kind"] == "graph":
            spec = manifest_spec(rec, cf)
            if spec is None:
                log.info("dynexpr record: %s: an argument is neither an array nor a plain "
                         "value; not written to %s", rec["function"], path)
            else:
                manifest.append(path, spec)
    except Exception as e:  # recording must never break the call
        log.warning("dynexpr: recording the entry of %s failed: %s", fn_id(cf._fn), e)


def _examples(rec: dict, bound: Any) -> None:
    """A dynamic dimension [lo, hi] gets this call's extent as its example: [lo, hi, n]."""
    for i, a in enumerate(rec["args"]):
        if "dtype" in a:
            a["shape"] = [[d[0], d[1], int(bound[i].shape[axis])] if isinstance(d, list)
                          else d for axis, d in enumerate(a["shape"])]


def records(function: str | None = None) -> list[dict]:
    """The entry records in the cache's index (of one function when named)."""
    out = []
    d = cache.cache_dir() / "index"
    with contextlib.suppress(OSError):
        for e in os.scandir(d):
            if not e.name.endswith(".json"):
                continue
            rec = cache._tc.read_json_dict(d / e.name)
            if rec is None or not str(rec.get("fn", "")).startswith(INDEX_PREFIX):
                continue
            value = rec.get("value")
            if isinstance(value, dict) and (function is None
                                            or value.get("function") == function):
                value["_index"] = e.name
                out.append(value)
    out.sort(key=lambda r: (r.get("function", ""), r.get("time", 0)))
    return out


def _warn_bundle_miss(cf: Any, bound: Any, entry: Any, units: list | None) -> None:
    """One warning per specialisation the loaded bundles lack (Note [bundles]): what it
    is, how it differs from the nearest bundle entry, and what runs instead."""
    from ..diagnostics import warn_once
    from . import bundle

    try:
        fn = cf._fn
        names = fn.__code__.co_varnames
        name = fn_id(fn)
        mine = specs.arg_specs(bound, names[:len(bound)], entry.guards)
        text = f"{name}({', '.join(specs.arg_text(a) for a in mine)})"
        bundles = bundle.loaded()
        recs = [s for b in bundles for s in b["specs"] if s["function"] == name]
        where = ", ".join(b["path"] for b in bundles)
        if recs:
            best, lines = specs.nearest(recs, bound, fn, names)
            near = (f"the nearest bundle entry is {name}("
                    f"{', '.join(specs.arg_text(a) for a in best['args'])}): "
                    + ("; ".join(lines).replace("(cached)", "(bundle)") if lines else
                       "its guards hold, but its graph differs"))
        else:
            near = f"the bundle has no entry of {name}"
        if getattr(entry.compiled, "__module__", None) == eager.__name__:
            cxx = os.environ.get("CXX") or "c++"
            why = ("no C++ compiler found" if shutil.which(cxx) is None
                   else "kernels cannot be compiled here now")
            then = f"It runs with NumPy instead ({why})"
        elif units is None:
            then = "It is compiled here (NumPy runs it meanwhile)"
        else:
            then = "It was compiled here"
        warn_once(("bundle-miss", name, sha([g.describe(names) for g in entry.guards])),
                  f"dynexpr: {text} is not in the loaded bundle ({where}); {near}. {then}. "
                  "Add it to the manifest and precompile again (DYNEXPR_RECORD=manifest.toml "
                  "records it).", stacklevel=6)
    except Exception as e:  # a warning must never break the call
        log.warning("dynexpr: describing a bundle miss of %s failed: %s", fn_id(cf._fn), e)
