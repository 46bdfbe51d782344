"""dynexpr.artifacts.specs — a captured entry's guards and arguments in a portable form
(JSON/TOML: no types, dtypes or objects), and the guard-by-guard difference between a
call and a recorded entry (`python -m dynexpr cache why-miss`, a bundle's miss warning).

A portable guard is {"kind", "source", "expected", "text"}: `source` the guard's access
path as nested lists, `expected` what the guard holds said in plain values (a dtype by
name, a type by module.qualname, an object by a short description), `text` the guard as
explain says it. Comparing portable values is what a process that did not make the entry
can do; for kinds whose expected value is an object (TYPE, ID) it compares names, which
is enough to explain a miss, and is never used to decide a hit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..guards import alias_relation, format_source, resolve


def dtype_name(dt: Any) -> str:
    dt = np.dtype(dt)
    return dt.name if dt.isnative else dt.str


def layout(a: np.ndarray) -> str:
    """C, F (Fortran-contiguous, not C) or strided."""
    if a.flags.c_contiguous:
        return "C"
    return "F" if a.flags.f_contiguous else "strided"


def _type_name(t: Any) -> str:
    return f"{getattr(t, '__module__', '?')}.{getattr(t, '__qualname__', t)}"


def _value(x: Any) -> str:
    text = repr(x)
    return f"{text if len(text) <= 80 else text[:77] + '...'} ({type(x).__name__})"


def _object(x: Any) -> str:
    name = getattr(x, "__qualname__", None) or getattr(x, "__name__", None)
    return f"<{type(x).__name__} {name}>" if name else f"<{type(x).__name__}>"


def _listify(obj: Any) -> Any:
    if isinstance(obj, (tuple, list)):
        return [_listify(x) for x in obj]
    return obj


def _tuplify(obj: Any) -> Any:
    if isinstance(obj, list):
        return tuple(_tuplify(x) for x in obj)
    return obj


def portable(kind: str, expected: Any) -> Any:
    """A guard's expected value (or the same fact of a call) in plain values."""
    if kind == "TYPE":
        return _type_name(expected)
    if kind == "DTYPE":
        return dtype_name(expected)
    if kind in ("SHAPE", "DYN_SHAPE", "DIM_EQ", "CMP"):
        return json.loads(json.dumps(_listify(expected), default=repr))
    if kind == "VALUE":
        return _value(expected)
    if kind == "ID":
        return _object(expected)
    if kind == "DICT_KEYS":
        return [repr(k) for k in expected]
    if kind in ("NDIM", "LEN", "WRITEABLE", "STRIDES_CLASS", "ALIAS"):
        return expected
    return repr(expected)


def guard_record(g, argnames: Sequence[str]) -> dict:
    return {"kind": g.kind, "source": _listify(g.source),
            "expected": portable(g.kind, g.expected), "text": g.describe(argnames)}


def arg_specs(bound: Sequence[Any], names: Sequence[str], guards) -> list[dict]:
    """Per bound argument: an array's dtype, shape (a dynamic dimension as [lo, hi],
    hi None for no bound) and layout; a plain Python value as itself; else its type."""
    dyn = {g.source[1]: g.expected for g in guards
           if g.kind == "DYN_SHAPE" and g.source[0] == "arg"}
    out = []
    for i, x in enumerate(bound):
        name = names[i] if i < len(names) else f"arg{i}"
        if type(x) is np.ndarray:
            shape = [list(d) if not isinstance(d, int) else d for d in dyn.get(i, x.shape)]
            out.append({"name": name, "dtype": dtype_name(x.dtype), "shape": shape,
                        "layout": layout(x)})
        elif x is None or type(x) in (bool, int, float, str):
            out.append({"name": name, "value": x})
        else:
            out.append({"name": name, "type": _type_name(type(x))})
    return out


def arg_text(a: dict) -> str:
    """x: float64[1000] C, a dynamic dimension as 2..4096 (n = 1000 when recorded)."""
    if "dtype" in a:
        dims = []
        for d in a["shape"]:
            if isinstance(d, list):
                hi = "" if d[1] is None else d[1]
                dims.append(f"{d[0]}..{hi}")
            else:
                dims.append(str(d))
        return f"{a['name']}: {a['dtype']}[{', '.join(dims)}] {a['layout']}"
    if "type" in a:
        return f"{a['name']}: {a['type']}"
    return f"{a['name']}={a.get('value')!r}"


# ----------------------------------------------------------------------- differences
def _observe(kind: str, source: Any, bound: Sequence[Any], fn: Any) -> Any:
    """The call's counterpart of a portable expected value (raises if unreachable)."""
    if kind in ("ALIAS", "DIM_EQ"):
        a, b = (resolve(_tuplify(s), bound, fn) for s in source)
        return alias_relation(a, b) if kind == "ALIAS" else [a.shape, b.shape]
    x = resolve(_tuplify(source), bound, fn)
    if kind == "TYPE":
        return _type_name(type(x))
    if kind == "DTYPE":
        return dtype_name(x.dtype)
    if kind in ("SHAPE", "DYN_SHAPE"):
        return list(x.shape)
    if kind == "NDIM":
        return x.ndim
    if kind == "STRIDES_CLASS":
        return layout(x)
    if kind == "VALUE":
        return _value(x)
    if kind == "ID":
        return _object(x)
    if kind == "LEN":
        return len(x)
    if kind == "DICT_KEYS":
        return [repr(k) for k in x.keys()]
    if kind == "WRITEABLE":
        return bool(x.flags.writeable)
    return x


def diff_guard(rec: dict, bound: Sequence[Any], fn: Any,
               argnames: Sequence[str]) -> list[str]:
    """How this call differs from one recorded guard: [] when it holds, else lines such
    as "x: dtype float32 (this call) vs float64 (cached)"."""
    kind, exp = rec["kind"], rec["expected"]
    src = rec["source"]
    try:
        now = _observe(kind, src, bound, fn)
    except Exception as e:
        return [f"{rec['text']}: cannot be evaluated for this call ({type(e).__name__})"]
    what = (format_source(_tuplify(src), argnames)
            if kind not in ("ALIAS", "DIM_EQ") else rec["text"])
    if kind in ("SHAPE", "DYN_SHAPE"):
        if len(now) != len(exp):
            return [f"{what}: ndim {len(now)} (this call) vs {len(exp)} (cached)"]
        out = []
        for axis, (d, e) in enumerate(zip(now, exp)):
            if isinstance(e, int):
                if d != e:
                    out.append(f"{what}.shape[{axis}]: extent {d} (this call) vs {e} (cached)")
            elif d < e[0] or (e[1] is not None and d > e[1]):
                hi = "" if e[1] is None else e[1]
                out.append(f"{what}.shape[{axis}]: extent {d} (this call) is outside the "
                           f"cached dynamic range {e[0]}..{hi}")
        return out
    if kind == "STRIDES_CLASS":
        if (now == "C") == (exp == "C"):
            return []
        return [f"{what}: layout {now} (this call) vs {exp} (cached)"]
    if kind == "DIM_EQ":
        (sa, sb), (i, j) = now, exp
        if sa[i] == sb[j]:
            return []
        return [f"{rec['text']}: {sa[i]} and {sb[j]} (this call) are not equal"]
    if kind == "CMP":  # a number a resumed segment compared: the guard's own predicate
        return []  # (a branch of plain Python: it does not select a unit)
    if now == exp:
        return []
    field = {"TYPE": "type", "DTYPE": "dtype", "NDIM": "ndim", "VALUE": "value",
             "ID": "object", "LEN": "len", "DICT_KEYS": "keys", "WRITEABLE": "writeable",
             "ALIAS": "aliasing"}.get(kind, kind.lower())
    return [f"{what}: {field} {now} (this call) vs {exp} (cached)"]


def diff(guards: Sequence[dict], bound: Sequence[Any], fn: Any,
         argnames: Sequence[str]) -> list[str]:
    """Every way this call differs from a recorded entry's guards ([]: they all hold)."""
    out: list[str] = []
    for rec in guards:
        for line in diff_guard(rec, bound, fn, argnames):
            if line not in out:
                out.append(line)
    return out


def nearest(records: Sequence[dict], bound: Sequence[Any], fn: Any,
            argnames: Sequence[str]) -> tuple[dict | None, list[str]]:
    """The recorded entry with the fewest differences from this call, and those."""
    best, best_diff = None, []
    for rec in records:
        d = diff(rec.get("guards", []), bound, fn, argnames)
        if best is None or len(d) < len(best_diff):
            best, best_diff = rec, d
    return best, best_diff
