"""dynexpr.guards — the facts a captured graph relies on, as data.

A Guard is (kind, source, expected). `source` is an access path from the call's
bound arguments and the captured function to one Python object; `expected` is what
that object had when the graph was captured. Guards are never code strings: the same
data is evaluated here in Python and by the native fast path in C.

Sources (tuples, hashable):
    ("arg", i)              the i-th parameter after binding (co_varnames order:
                            positional, keyword-only, *args, **kwargs; defaults applied)
    ("global", name)        LOAD_GLOBAL of the captured function: its __globals__,
                            then builtins
    ("global", name, fsrc)  the same for the function found at source fsrc (an inlined
                            helper from another module)
    ("closure", name)       the captured function's closure cell for free variable name
    ("attr", src, name)     getattr(resolve(src), name)
    ("item", src, key)      resolve(src)[key]
    ("type", src)           type(resolve(src)) — where methods of user objects live
    ("as0d", src, dtype)    np.asarray(resolve(src), dtype): a float a resumed segment
                            takes as a 0-d input (kernel inputs only, never guarded)

Kinds (listed in dynexpr.guard_kinds, which the C checker is generated from) and their
`expected`:
    TYPE           type object; type(x) is expected (exact, subclasses differ)
    DTYPE          numpy dtype; x.dtype == expected (byte order included)
    NDIM           int
    SHAPE          tuple of ints
    STRIDES_CLASS  "C" (C-contiguous) or "strided"
    VALUE          a Python value; equal and of the same type, recursively through
                   tuples, lists and dicts (1 and 1.0 and True differ: NEP 50 cares);
                   NaN equals NaN
    ID             an object; x is expected
    LEN            int; len(x) == expected
    DICT_KEYS      tuple; tuple(x.keys()) == expected (order matters for iteration)
    WRITEABLE      True; x.flags.writeable
    ALIAS          source is a PAIR of sources (a, b) of arrays; expected is "same"
                   (a is b), "overlap" (np.may_share_memory, not the same object) or
                   "disjoint"
    CMP            (op, constant, left, outcome): `x op constant` (or `constant op x`
                   when not left) is outcome, for a number a resumed segment compared
                   (Note [resuming after a graph break]); checked in Python only

Guards are ordered so that a TYPE guard precedes the guards that need that type; the
evaluator never raises: a source that cannot be resolved fails its guard.
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .guard_kinds import KINDS, PAIR_KINDS  # Note [guard kinds are listed once]


@dataclass(frozen=True)
class Guard:
    kind: str
    source: tuple
    expected: Any = field(hash=False)  # may be a list or dict (VALUE of a mutable constant)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"dynexpr: unknown guard kind {self.kind!r}; kinds: {KINDS}")

    def describe(self, argnames: Sequence[str] = ()) -> str:
        if self.kind == "ALIAS":
            a, b = self.source
            return f"{format_source(a, argnames)} and {format_source(b, argnames)}: {self.expected}"
        if self.kind == "DIM_EQ":
            (a, b), (i, j) = self.source, self.expected
            return (f"{format_source(a, argnames)}.shape[{i}] == "
                    f"{format_source(b, argnames)}.shape[{j}]")
        if self.kind == "DYN_SHAPE":
            dims = ", ".join(
                str(d) if isinstance(d, int) else
                (f"{d[0]}..{d[1]}" if d[1] is not None else f">={d[0]}")
                for d in self.expected)
            return f"{format_source(self.source, argnames)}.shape == ({dims}) (dynamic)"
        what = format_source(self.source, argnames)
        exp = self.expected
        if self.kind == "CMP":
            sym, const, left, outcome = exp
            test = f"{what} {sym} {const!r}" if left else f"{const!r} {sym} {what}"
            return f"({test}) is {outcome}"
        if self.kind == "TYPE":
            return f"type({what}) is {getattr(exp, '__qualname__', exp)}"
        if self.kind == "ID":
            return f"{what} is {_short(exp)}"
        if self.kind == "VALUE":
            return f"{what} == {exp!r} ({type(exp).__name__})"
        field = {
            "DTYPE": "dtype",
            "NDIM": "ndim",
            "SHAPE": "shape",
            "LEN": "len",
            "DICT_KEYS": "keys",
            "WRITEABLE": "writeable",
            "STRIDES_CLASS": "layout",
        }[self.kind]
        return f"{what}.{field} == {exp!r}"

    def __str__(self) -> str:
        return f"{self.kind}: {self.describe()}"


def _short(obj: Any) -> str:
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    return f"<{type(obj).__name__} {name}>" if name else f"<{type(obj).__name__}>"


def format_source(src: tuple, argnames: Sequence[str] = ()) -> str:
    """A readable Python-like spelling of an access path, for logs and explain."""
    kind = src[0]
    if kind == "arg":
        i = src[1]
        return argnames[i] if i < len(argnames) else f"arg[{i}]"
    if kind == "global":
        return (
            src[1]
            if len(src) == 2
            else f"{format_source(src[2], argnames)}.__globals__[{src[1]!r}]"
        )
    if kind == "closure":
        return f"<closure {src[1]}>"
    if kind == "attr":
        return f"{format_source(src[1], argnames)}.{src[2]}"
    if kind == "item":
        return f"{format_source(src[1], argnames)}[{src[2]!r}]"
    if kind == "type":
        return f"type({format_source(src[1], argnames)})"
    if kind == "as0d":
        return f"np.asarray({format_source(src[1], argnames)}, {src[2]})"
    return repr(src)


# --- resolving sources ---------------------------------------------------------------


def _lookup_global(fn: Any, name: str) -> Any:
    g = fn.__globals__
    if name in g:
        return g[name]
    b = g.get("__builtins__", builtins)
    b = b if isinstance(b, dict) else b.__dict__
    return b[name]


def resolve(src: tuple, args: Sequence[Any], fn: Any) -> Any:
    """The object `src` names for this call (raises if it cannot be reached)."""
    kind = src[0]
    if kind == "arg":
        return args[src[1]]
    if kind == "global":
        return _lookup_global(fn if len(src) == 2 else resolve(src[2], args, fn), src[1])
    if kind == "closure":
        i = fn.__code__.co_freevars.index(src[1])
        return fn.__closure__[i].cell_contents
    if kind == "attr":
        return getattr(resolve(src[1], args, fn), src[2])
    if kind == "item":
        return resolve(src[1], args, fn)[src[2]]
    if kind == "type":
        return type(resolve(src[1], args, fn))
    if kind == "as0d":  # a float fed to a kernel as a 0-d array of the loop's dtype
        return np.asarray(resolve(src[1], args, fn), dtype=src[2])
    raise ValueError(f"dynexpr: unknown guard source {src!r}")


# --- checking --------------------------------------------------------------------------


def strict_equal(a: Any, b: Any) -> bool:
    """== that also requires equal types, recursively; NaN equals NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return tuple(a) == tuple(b) and all(strict_equal(a[k], b[k]) for k in a)
    if isinstance(a, (float, np.floating)) and math.isnan(a):
        return math.isnan(b)
    try:
        return bool(a == b)
    except Exception:
        return False


def strides_class(a: np.ndarray) -> str:
    return "C" if a.flags.c_contiguous else "strided"


def alias_relation(a: Any, b: Any) -> str:
    if a is b:
        return "same"
    return "overlap" if np.may_share_memory(a, b) else "disjoint"


_COMPARISONS = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
                ">": operator.gt, ">=": operator.ge}


def _predicate(g: Guard) -> Callable[[Any], bool]:
    kind, exp = g.kind, g.expected
    if kind == "TYPE":
        return lambda x: type(x) is exp
    if kind == "DTYPE":
        return lambda x: x.dtype == exp
    if kind == "NDIM":
        return lambda x: x.ndim == exp
    if kind == "SHAPE":
        return lambda x: x.shape == exp
    if kind == "STRIDES_CLASS":
        return lambda x: strides_class(x) == exp
    if kind == "VALUE":
        return lambda x: strict_equal(x, exp)
    if kind == "ID":
        return lambda x: x is exp
    if kind == "LEN":
        return lambda x: len(x) == exp
    if kind == "DICT_KEYS":
        return lambda x: tuple(x.keys()) == exp
    if kind == "WRITEABLE":
        return lambda x: bool(x.flags.writeable) == exp
    if kind == "DYN_SHAPE":
        def dyn_shape(x, exp=exp):
            s = x.shape
            if len(s) != len(exp):
                return False
            for d, e in zip(s, exp):
                if type(e) is int:
                    if d != e:
                        return False
                elif d < e[0] or (e[1] is not None and d > e[1]):
                    return False
            return True

        return dyn_shape
    if kind == "DIM_EQ":
        i, j = exp
        return lambda pair: pair[0].shape[i] == pair[1].shape[j]
    if kind == "CMP":
        sym, const, left, outcome = exp
        op = _COMPARISONS[sym]
        if left:
            return lambda x: bool(op(x, const)) == outcome
        return lambda x: bool(op(const, x)) == outcome
    if kind == "ALIAS":
        if exp == "disjoint":  # the common case, without building the relation string
            return lambda pair: pair[0] is not pair[1] and not np.may_share_memory(*pair)
        return lambda pair: alias_relation(*pair) == exp
    raise ValueError(f"dynexpr: unknown guard kind {kind!r}")


class GuardSet:
    """A guard list prepared for checking: `holds()` is the per-call check (guards of one
    source fused into one predicate, the source resolved once); `failing()` names the
    first guard that does not hold, for logs and warnings."""

    __slots__ = ("guards", "_checks", "_fused")

    def __init__(self, guards: Sequence[Guard]) -> None:
        self.guards = tuple(guards)
        self._checks = [
            (g, _resolver(g.source, g.kind in PAIR_KINDS), _predicate(g)) for g in self.guards
        ]
        by_source: dict[Any, list[Guard]] = {}
        for g in self.guards:
            by_source.setdefault((g.kind in PAIR_KINDS, g.source), []).append(g)
        self._fused = tuple(
            (_resolver(src, pair), _fuse(gs)) for (pair, src), gs in by_source.items()
        )

    def holds(self, args: Sequence[Any], fn: Any) -> bool:
        try:
            for get, pred in self._fused:
                if not pred(get(args, fn)):
                    return False
        except Exception:  # a source that cannot be reached fails its guard
            return False
        return True

    def failing(self, args: Sequence[Any], fn: Any) -> Guard | None:
        """The first guard that does not hold for this call, or None when all hold."""
        for g, get, pred in self._checks:
            try:
                if not pred(get(args, fn)):
                    return g
            except Exception:
                return g
        return None

    def __len__(self) -> int:
        return len(self.guards)

    def __iter__(self):
        return iter(self.guards)


def _fuse(gs: list[Guard]) -> Callable[[Any], bool]:
    kinds = {g.kind: g.expected for g in gs}
    if set(kinds) == {"TYPE", "DTYPE", "SHAPE", "STRIDES_CLASS"} and kinds["TYPE"] is np.ndarray:
        # The common case, an array argument, as one expression.
        nd, dt, shape, c = np.ndarray, kinds["DTYPE"], kinds["SHAPE"], kinds["STRIDES_CLASS"] == "C"
        return lambda x: (
            type(x) is nd
            and (x.dtype is dt or x.dtype == dt)
            and x.shape == shape
            and x.flags.c_contiguous == c
        )
    preds = tuple(_predicate(g) for g in gs)
    if len(preds) == 1:
        return preds[0]
    return lambda x: all(p(x) for p in preds)


def _resolver(src: tuple, pair: bool) -> Callable[[Sequence[Any], Any], Any]:
    if pair:
        a, b = (_resolver(s, False) for s in src)
        return lambda args, fn: (a(args, fn), b(args, fn))
    if src[0] == "arg":  # the common cases, kept short
        i = src[1]
        return lambda args, fn: args[i]
    if src[0] == "global" and len(src) == 2:
        name = src[1]

        def get_global(args, fn):
            g = fn.__globals__
            return g[name] if name in g else _lookup_global(fn, name)

        return get_global
    return lambda args, fn: resolve(src, args, fn)


def check(guards: Sequence[Guard], args: Sequence[Any], fn: Any) -> bool:
    """True when every guard holds for bound arguments `args` of function `fn`."""
    return GuardSet(guards).holds(args, fn)


def changed_dims(entries, args: Sequence[Any], fn: Any) -> list[tuple]:
    """(source, axis, extent at capture, extent now) for each array dimension whose
    extent differs from the one an entry's shape guard was captured for (both >= 2):
    what dynamic=None makes dynamic in the next translation."""
    out = []
    for g in (g for e in entries for g in e.guards if g.kind in ("SHAPE", "DYN_SHAPE")):
        try:
            now = resolve(g.source, args, fn)
        except Exception:
            continue
        if type(now) is not np.ndarray or now.ndim != len(g.expected):
            continue
        for axis, (was, got) in enumerate(zip(g.expected, now.shape)):
            if type(was) is int and was != got and was >= 2 and got >= 2:
                out.append((g.source, axis, was, got))
    return out
