"""Python operators on symbolic values: what `a + b`, `a < b`, `x[i]`, `for v in x`,
`if v:` mean for each kind of Var. Arrays go to NumPy's semantics (np_ops.py); known
Python values are computed for real (the translation is side-effect free, so only pure
operations run); anything else is a graph break naming the construct."""

from __future__ import annotations

import math

import operator
from typing import Any

import numpy as np

from .. import manifest
from . import np_linalg, np_ops, np_views
from .arrays import ArrayVar
from .calls import call_method_of_object
from .np_args import const_of
from .errors import graph_break
from .infer import ask
from .variables import (
    DictVar,
    FunctionVar,
    IteratorVar,
    ListVar,
    LoopIndexVar,
    NestedFunctionVar,
    ObjectVar,
    PyVar,
    ScalarInputVar,
    TupleVar,
    Var,
)

# Python's operators on arrays, by symbol: the manifest's py_operator of each op.
_BY_SYMBOL = {sym: getattr(np, name) for sym, name in manifest.PY_OPERATORS.items()}
_COMPARE = {sym: uf for sym, uf in _BY_SYMBOL.items() if sym in ("<", "<=", "==", "!=", ">", ">=")}
_UFUNCS = {sym: uf for sym, uf in _BY_SYMBOL.items() if sym not in _COMPARE}
_PY_BINARY = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": operator.pow,
    "@": operator.matmul,
    "&": operator.and_,
    "|": operator.or_,
    "^": operator.xor,
    "<<": operator.lshift,
    ">>": operator.rshift,
}
_PY_COMPARE = {
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
}
_DUNDER = {
    "+": "add",
    "-": "sub",
    "*": "mul",
    "/": "truediv",
    "//": "floordiv",
    "%": "mod",
    "**": "pow",
    "@": "matmul",
    "&": "and",
    "|": "or",
    "^": "xor",
    "<<": "lshift",
    ">>": "rshift",
}
_MUTABLE = (list, dict, set, bytearray)


def real(fn: Any, *args: Any) -> PyVar:
    """Compute on known values; what Python raises becomes a graph break (the plain
    run raises it for real)."""
    r = ask(fn, *args)
    if isinstance(r, np.ndarray):
        graph_break(
            "an operation on known values built an array; dynexpr does not capture array literals"
        )
    return PyVar(r)


def const_key(v: Var) -> Any:
    return const_of(v, "a dict key")


def index_part(v: Var) -> Any:
    if isinstance(v, ArrayVar):
        graph_break("an index or slice bound computed from array data is not supported")
    if isinstance(v, LoopIndexVar) and type(v.raw) is int:  # reroll.py checks how it moves
        return v.raw
    return const_of(v, "an index")


def make_tuple(items) -> Var:
    items = list(items)
    if any(isinstance(v, LoopIndexVar) for v in items):
        return TupleVar(items)  # an index key (a[i, 1:]) reads i as an index only
    if all(isinstance(v, PyVar) for v in items):
        return PyVar(tuple(v.value for v in items))
    return TupleVar(items)


def mutable_list(v: Var) -> ListVar:
    if not isinstance(v, ListVar) or v.source is not None:
        graph_break(
            "changing a list that came from outside the function is a side effect "
            "dynexpr does not replay"
        )
    return v


def as_items(v: Var) -> list | None:
    """The elements of a finite sequence, or None when v is not one."""
    if isinstance(v, (TupleVar, ListVar)):
        return list(v.items)
    if isinstance(v, PyVar) and isinstance(v.value, (tuple, list, range, str, dict)):
        return [PyVar(x) for x in v.value]
    if isinstance(v, DictVar):
        return [PyVar(k) for k in v.items]
    return None


def unpack(tx, v: Var) -> list:
    items = as_items(v)
    if items is not None:
        return items
    if isinstance(v, IteratorVar):
        rest = v.items[v.pos :]
        v.pos = len(v.items)
        return list(rest)
    if isinstance(v, ArrayVar):
        return list(iterate(tx, v).items)
    graph_break(f"unpacking a {v.describe()} is not supported")


def dict_items(tx, v: Var) -> dict:
    if isinstance(v, DictVar):
        return dict(v.items)
    if isinstance(v, PyVar) and isinstance(v.value, dict):
        return {k: PyVar(x) for k, x in v.value.items()}
    graph_break(f"a {v.describe()} is not a mapping dynexpr can unpack")


def is_none(v: Var) -> bool:
    return isinstance(v, PyVar) and v.value is None


# --- arithmetic --------------------------------------------------------------------------


def binary(tx, sym: str, lhs: Var, rhs: Var) -> Var:
    inplace = sym.endswith("=") and sym not in ("==", "<=", ">=", "!=")
    op = sym[:-1] if inplace else sym
    if isinstance(lhs, ArrayVar) or isinstance(rhs, ArrayVar):
        return _array_binary(tx, op, lhs, rhs, inplace)
    affine = _loop_index_affine(op, lhs, rhs)
    if affine is not None:
        return affine
    if isinstance(lhs, PyVar) and isinstance(rhs, PyVar):
        if inplace and isinstance(lhs.value, _MUTABLE):
            graph_break("changing a list or dict in place that came from outside is a side effect")
        return real(_PY_BINARY[op], lhs.value, rhs.value)
    if isinstance(lhs, (TupleVar, ListVar)) or isinstance(rhs, (TupleVar, ListVar)):
        return _sequence_binary(tx, op, lhs, rhs, inplace)
    if isinstance(lhs, ObjectVar) or isinstance(rhs, ObjectVar):
        return _dunder(tx, op, lhs, rhs)
    graph_break(f"`{op}` between {lhs.describe()} and {rhs.describe()} is not supported")


def _loop_index_affine(op: str, lhs: Var, rhs: Var) -> Var | None:
    """i + c, c + i, i - c, c - i, i * c, c * i, i / c of a loop variable (or a scalar
    affine in it) and an int or float: still affine in i (LoopIndexVar, Note
    [loop-derived scalars]); None for anything else."""
    li, ri = isinstance(lhs, LoopIndexVar), isinstance(rhs, LoopIndexVar)
    if li == ri:
        return None
    idx, other = (lhs, rhs) if li else (rhs, lhs)
    if not isinstance(other, PyVar) or isinstance(other, ScalarInputVar) \
            or type(other.value) not in (int, float):
        return None
    c = other.value
    if op == "/" and (not li or c == 0):
        return None
    if op not in ("+", "-", "*", "/") or (op == "/" and not li):
        return None
    if isinstance(c, float) and not math.isfinite(c):
        return None
    return idx.step(op, c, li)


def _loop_scalar(v: Var, other: Var) -> Var:
    """A loop-derived scalar (`t = i * dt`) with a float array enters the graph as a
    constant without making its loop opaque (Note [loop-derived scalars], affine.py):
    reroll rolls the loop only if those constants step affinely, and a float array takes
    any int or float the same way (an int array could overflow on later values)."""
    if isinstance(v, LoopIndexVar) and isinstance(other, ArrayVar) \
            and other.dtype in ("float32", "float64"):
        return PyVar(v.raw)
    return v


def _array_binary(tx, op: str, lhs: Var, rhs: Var, inplace: bool) -> Var:
    ctx = tx.ctx
    lhs, rhs = _loop_scalar(lhs, rhs), _loop_scalar(rhs, lhs)
    for v in (lhs, rhs):
        if not isinstance(v, ArrayVar) and not np_ops.is_numeric_const(v):
            graph_break(
                f"`{op}` between an array and a {v.describe()} is not supported "
                "(NumPy would convert it to an array)"
            )
    if inplace and isinstance(lhs, ArrayVar) and not lhs.is_scalar:
        if op == "@":
            graph_break("in-place matmul `@=` is not supported")
        fast = np_ops.fast_power(lhs, rhs) if op == "**" else None
        if fast is not None:  # np.square(x, out=x) and friends
            return np_views.ufunc_into(ctx, fast, [lhs], lhs)
        return np_views.ufunc_into(ctx, _UFUNCS[op], [lhs, rhs], lhs)
    if op == "@":
        return np_linalg.matmul(ctx, lhs, rhs)
    if op == "**":
        return np_ops.power(ctx, lhs, rhs)
    return np_ops.ufunc(ctx, _UFUNCS[op], [lhs, rhs])


def _sequence_binary(tx, op: str, lhs: Var, rhs: Var, inplace: bool) -> Var:
    a, b = as_items(lhs), as_items(rhs)
    if op == "+" and a is not None and b is not None:
        if isinstance(lhs, ListVar):
            if inplace:
                mutable_list(lhs).items.extend(b)
                return lhs
            return ListVar(a + b)
        return make_tuple(a + b)
    if op == "*" and (a is None) != (b is None):
        seq, n = (lhs, rhs) if a is not None else (rhs, lhs)
        count = const_of(n, "a repeat count")
        items = as_items(seq) * count
        return ListVar(items) if isinstance(seq, ListVar) else make_tuple(items)
    graph_break(f"`{op}` between {lhs.describe()} and {rhs.describe()} is not supported")


def _dunder(tx, op: str, lhs: Var, rhs: Var) -> Var:
    name = _DUNDER.get(op)
    if isinstance(lhs, ObjectVar) and name:
        r = call_method_of_object(tx, lhs, f"__{name}__", [rhs])
        if r is not None:
            return r
    if isinstance(rhs, ObjectVar) and name:
        r = call_method_of_object(tx, rhs, f"__r{name}__", [lhs])
        if r is not None:
            return r
    graph_break(f"`{op}` on {lhs.describe()} and {rhs.describe()} is not supported")


def compare(tx, sym: str, lhs: Var, rhs: Var) -> Var:
    if isinstance(lhs, ScalarInputVar) != isinstance(rhs, ScalarInputVar):
        s, other = (lhs, rhs) if isinstance(lhs, ScalarInputVar) else (rhs, lhs)
        if isinstance(other, PyVar) and np_ops.is_numeric_const(other):
            # `if total > 1e9:` on a number plain Python computed: guard the outcome, not
            # the value, so the next value with the same outcome reuses the segment.
            left = s is lhs
            a, b = (s.raw, other.value) if left else (other.value, s.raw)
            r = real(_PY_COMPARE[sym], a, b)
            tx.ctx.guard("CMP", s.source, (sym, other.value, left, bool(r.value)))
            return r
    if isinstance(lhs, ArrayVar) or isinstance(rhs, ArrayVar):
        return np_ops.ufunc(tx.ctx, _COMPARE[sym], [lhs, rhs])
    if isinstance(lhs, (TupleVar, ListVar)) or isinstance(rhs, (TupleVar, ListVar)):
        lhs, rhs = PyVar(_known_items(lhs)), PyVar(_known_items(rhs))
    if isinstance(lhs, PyVar) and isinstance(rhs, PyVar):
        return real(_PY_COMPARE[sym], lhs.value, rhs.value)
    functions = (FunctionVar, NestedFunctionVar)
    if sym in ("==", "!=") and isinstance(lhs, functions) and isinstance(rhs, functions):
        same = is_same(tx, lhs, rhs)  # functions compare by identity
        return PyVar(same if sym == "==" else not same)
    graph_break(f"`{sym}` between {lhs.describe()} and {rhs.describe()} is not supported")


def _known_items(v: Var):
    """A sequence's value for a comparison, when every element is known."""
    if isinstance(v, (TupleVar, ListVar)):
        items = [_known_items(x) for x in v.items]
        return tuple(items) if isinstance(v, TupleVar) else items
    return const_of(v, "an element of a compared sequence")


def unary(tx, sym: str, v: Var) -> Var:
    if isinstance(v, PyVar):
        return real({"-": operator.neg, "+": operator.pos, "~": operator.invert}[sym], v.value)
    if isinstance(v, ArrayVar):
        if sym == "+":
            return np_ops.positive(tx.ctx, v)
        return np_ops.ufunc(tx.ctx, np.negative if sym == "-" else np.invert, [v])
    if isinstance(v, ObjectVar):
        name = {"-": "__neg__", "+": "__pos__", "~": "__invert__"}[sym]
        r = call_method_of_object(tx, v, name, [])
        if r is not None:
            return r
    graph_break(f"unary `{sym}` on a {v.describe()} is not supported")


def truth(tx, v: Var) -> bool:
    if isinstance(v, PyVar):
        return bool(real(bool, v.value).value)
    if isinstance(v, ArrayVar):
        graph_break(
            "a branch on an array's value (`if`, `and`, `or`, `not`, bool()) depends on "
            "the data; dynexpr cannot capture it"
        )
    if isinstance(v, (TupleVar, ListVar, DictVar)):
        return bool(v.items)
    if isinstance(v, ObjectVar):
        t = type(v.value)
        if hasattr(t, "__bool__") or hasattr(t, "__len__"):
            graph_break(
                f"the truth of a {t.__qualname__} object (it defines __bool__/__len__) "
                "is not supported"
            )
        return True
    return True


def is_same(tx, lhs: Var, rhs: Var) -> bool:
    if isinstance(lhs, PyVar) and isinstance(rhs, PyVar):
        return lhs.value is rhs.value
    if isinstance(lhs, ObjectVar) and isinstance(rhs, ObjectVar):
        for v in (lhs, rhs):
            tx.ctx.guard("ID", v.source, v.value)
        return lhs.value is rhs.value
    if isinstance(lhs, FunctionVar) and isinstance(rhs, FunctionVar):
        return lhs.fn is rhs.fn
    return lhs is rhs


def contains(tx, container: Var, item: Var) -> bool:
    if isinstance(container, PyVar) and isinstance(item, PyVar):
        return bool(real(operator.contains, container.value, item.value).value)
    if isinstance(container, DictVar) and isinstance(item, PyVar):
        return item.value in container.items
    items = as_items(container)
    if items is not None and isinstance(item, PyVar):
        if not all(isinstance(x, PyVar) for x in items):
            graph_break("`in` over a sequence holding arrays is not supported")
        return any(real(operator.eq, x.value, item.value).value for x in items)
    graph_break(f"`in` on a {container.describe()} is not supported")


# --- items and iteration -------------------------------------------------------------------


def getitem(tx, container: Var, key: Var) -> Var:
    if isinstance(container, ArrayVar):
        return np_views.getitem(tx.ctx, container, _basic_index(key))
    if isinstance(container, PyVar):
        if isinstance(key, PyVar):
            return real(operator.getitem, container.value, key.value)
        graph_break(f"indexing a {container.describe()} with a {key.describe()} is not supported")
    if isinstance(container, (TupleVar, ListVar)):
        k = const_of(key, "a sequence index")
        try:
            got = container.items[k]
        except (IndexError, TypeError) as e:
            graph_break(f"{type(e).__name__}: {e}")
        if isinstance(k, slice):
            return ListVar(got) if isinstance(container, ListVar) else make_tuple(got)
        return got
    if isinstance(container, DictVar):
        k = const_key(key)
        if k not in container.items:
            graph_break(f"KeyError: {k!r}")
        return container.items[k]
    if isinstance(container, ObjectVar):
        r = call_method_of_object(tx, container, "__getitem__", [key])
        if r is not None:
            return r
    graph_break(f"indexing a {container.describe()} is not supported")


def setitem(tx, container: Var, key: Var, value: Var) -> None:
    if isinstance(container, ArrayVar):
        np_views.setitem(tx.ctx, container, _basic_index(key), value)
        return
    if isinstance(container, ListVar):
        k = const_of(key, "a list index")
        try:
            if container.source is not None and container.items[k] is value:
                return  # `xs[i] += y` stores the same array back: no change to the list
            mutable_list(container).items[k] = value
        except (IndexError, TypeError) as e:
            graph_break(f"{type(e).__name__}: {e}")
        return
    if isinstance(container, DictVar) and container.source is None:
        container.items[const_key(key)] = value
        return
    graph_break(
        f"assigning an item of a {container.describe()} is a side effect dynexpr does not replay"
    )


def _basic_index(key: Var) -> Any:
    items = key.items if isinstance(key, TupleVar) else (key,)
    for it in items:
        if not isinstance(it, PyVar):
            graph_break(
                f"indexing an array with a {it.describe()} (advanced indexing) is not "
                "supported; use ints, slices, None and ..."
            )
    return tuple(index_part(it) for it in items) if isinstance(key, TupleVar) else index_part(key)


class _RangeItems:
    """The loop variables of a range loop, made when reached (a range may be long)."""

    __slots__ = ("rng", "it")

    def __init__(self, rng: range, it: IteratorVar) -> None:
        self.rng, self.it = rng, it

    def __len__(self) -> int:
        return len(self.rng)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [LoopIndexVar(x, self.it) for x in self.rng[k]]
        return LoopIndexVar(self.rng[k], self.it)


def iterate(tx, v: Var) -> IteratorVar:
    if isinstance(v, IteratorVar):
        return v
    if isinstance(v, ListVar):
        return IteratorVar(v.items)  # live: Python's list iterator sees appends
    if isinstance(v, PyVar) and isinstance(v.value, (range, tuple, list, str, dict)):
        # A long range may still be captured: its unrolling can stop early (truncate.py);
        # if it does not, the iteration budget stops it in _for_iter.
        if len(v.value) > tx.ctx.budget.loop_iterations and not (
                isinstance(v.value, range) and tx.ctx.truncate_loops):
            graph_break(
                f"a loop over {len(v.value)} items; dynexpr unrolls loops of at most "
                f"{tx.ctx.budget.loop_iterations}"
            )
        if isinstance(v.value, range):  # Note [rolling unrolled loops] (reroll.py)
            it = IteratorVar([])
            it.items = _RangeItems(v.value, it)
            it.marks = (v.value, [], tx.ctx.range_stops.get(id(v.value)))
            tx.ctx.loops.append(it)
            return it
        return IteratorVar([PyVar(x) for x in v.value])
    items = as_items(v)
    if items is not None:
        return IteratorVar(items)
    if isinstance(v, ArrayVar):
        if v.ndim == 0:
            graph_break("iteration over a 0-d array (NumPy raises TypeError)")
        tx.ctx.session.check_static(v.shape[0], "a loop over the rows of an array")
        if v.shape[0] > tx.ctx.budget.loop_iterations:
            graph_break(f"a loop over the {v.shape[0]} rows of an array is too long to unroll")
        return IteratorVar([np_views.getitem(tx.ctx, v, i) for i in range(v.shape[0])])
    graph_break(f"iterating over a {v.describe()} is not supported")
