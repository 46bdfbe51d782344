"""Python builtins and methods of Python containers, on symbolic values.

Known values are computed for real, but only by functions known to be pure (a call
such as print or list.append on a caller's list would be a side effect, and the
translation must have none). Arrays meet builtins only where NumPy's answer does not
depend on the data (len, isinstance, abs), and in max(a, b)/min(a, b) of NumPy scalars
of one dtype (a where-chain: the result's type does not depend on the data then);
float(x), max(x, 0.5) or print(x) on an array is a graph break.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from . import np_ops, registry
from .attrs import load_attr
from .calls import call, call_method_of_object
from .arrays import ArrayVar, fresh
from .errors import graph_break
from .operators import (
    as_items,
    binary,
    const_of,
    dict_items,
    iterate,
    make_tuple,
    mutable_list,
    unpack,
)
from .variables import (
    StopVar,
    DictVar,
    FunctionVar,
    IteratorVar,
    ListVar,
    NestedFunctionVar,
    ObjectVar,
    PyVar,
    TupleVar,
    Var,
)

_PURE_BUILTINS = {
    abs,
    min,
    max,
    round,
    divmod,
    pow,
    int,
    float,
    bool,
    complex,
    str,
    repr,
    len,
    isinstance,
    issubclass,
    sorted,
    sum,
    any,
    all,
    hash,
    ord,
    chr,
    format,
    tuple,
    list,
    dict,
    set,
    frozenset,
    range,
    slice,
    type,
    hasattr,
    getattr,
    callable,
}
_PURE_MODULES = ("math", "operator", "cmath")
_IMMUTABLE = (
    str,
    bytes,
    int,
    float,
    complex,
    bool,
    tuple,
    range,
    frozenset,
    type(None),
    np.generic,
    np.dtype,
)


def _all_known(args: list, kwargs: dict) -> bool:
    return all(isinstance(a, PyVar) for a in list(args) + list(kwargs.values()))


def _fold(fn: Callable, args: list, kwargs: dict) -> Var:
    return np_ops.fold(fn, *[a.value for a in args], **{k: v.value for k, v in kwargs.items()})


def fake_type(v: Var) -> type:
    """type(v) as the real program would see it."""
    if isinstance(v, ArrayVar):
        return np.dtype(v.dtype).type if v.is_scalar else np.ndarray
    if isinstance(v, (PyVar, ObjectVar)):
        return type(v.value)
    if isinstance(v, (FunctionVar, NestedFunctionVar)):
        return types.FunctionType
    return {TupleVar: tuple, ListVar: list, DictVar: dict}.get(type(v)) or graph_break(
        f"type() of a {v.describe()} is not supported"
    )


def _len(tx, args, kwargs):
    (v,) = args
    if isinstance(v, ArrayVar):
        if v.ndim == 0:
            graph_break("len() of a 0-d array or NumPy scalar (TypeError)")
        tx.ctx.session.check_static(v.shape[0], "len() of an array")
        return PyVar(v.shape[0])
    if isinstance(v, (TupleVar, ListVar, DictVar)):
        return PyVar(len(v.items))
    if isinstance(v, ObjectVar):
        r = call_method_of_object(tx, v, "__len__", [])
        if r is not None:
            return r
    return _known(tx, len, args, kwargs)


def _abs(tx, args, kwargs):
    (v,) = args
    if isinstance(v, ArrayVar):
        return np_ops.ufunc(tx.ctx, np.absolute, [v])
    return _known(tx, abs, args, kwargs)


_CLASS = object.__dict__["__class__"]


def _isinstance(tx, args, kwargs):
    v, cls = args
    cls = const_of(cls, "isinstance's class")
    if isinstance(v, PyVar):
        return PyVar(isinstance(v.value, cls))
    t = fake_type(v)
    found = issubclass(t, cls)
    # When the type does not match, isinstance asks the object for __class__: code of
    # the user's (a __getattribute__, a __class__ property, a mock's spec) decides then.
    if not found and isinstance(v, ObjectVar) and (
            t.__getattribute__ is not object.__getattribute__
            or inspect.getattr_static(t, "__class__", None) is not _CLASS):
        graph_break(f"isinstance() of a {t.__qualname__} object asks the object for "
                    "__class__, which runs its own code")
    return PyVar(found)


def _type(tx, args, kwargs):
    if len(args) != 1 or kwargs:
        return _known(tx, type, args, kwargs)
    return PyVar(fake_type(args[0]))


def _to_scalar(fn: Callable) -> Callable:
    def handler(tx, args, kwargs):
        if any(isinstance(a, ArrayVar) for a in args):
            graph_break(
                f"{fn.__name__}() of an array value depends on its data; dynexpr cannot capture it"
            )
        return _known(tx, fn, args, kwargs)

    return handler


def _minmax(fn: Callable) -> Callable:
    def handler(tx, args, kwargs):
        items = args
        if len(args) == 1:
            items = as_items(args[0]) or []
        if any(isinstance(a, ArrayVar) for a in items):
            if not kwargs and len(args) >= 2 and _same_kind_scalars(args):
                return _pick(tx, fn, args)
            graph_break(
                f"builtin {fn.__name__}() compares array data in Python; use "
                f"np.{'maximum' if fn is max else 'minimum'} or np.{fn.__name__}"
            )
        if len(args) == 1 and not isinstance(args[0], PyVar):
            return _known(tx, fn, [PyVar(tuple(const_of(a, "an item") for a in items))], kwargs)
        return _known(tx, fn, args, kwargs)

    return handler


def _same_kind_scalars(items: list) -> bool:
    """Whether every item is a NumPy scalar of one dtype: the one builtin max/min returns
    is then of that type whatever the data (with a Python number or a 0-d array among
    them, the type of the result would depend on which one wins)."""
    return (all(isinstance(a, ArrayVar) and a.is_scalar for a in items)
            and len({a.dtype for a in items}) == 1)


def _pick(tx, fn: Callable, items: list) -> ArrayVar:
    """Builtin max(a, b, ...) (or min) of NumPy scalars of one dtype, as CPython computes
    it: the first item, replaced by each later one that compares greater (less), so ties
    keep the earlier item and a NaN is kept or skipped exactly as Python does: a chain of
    where(b > best, b, best). A recurrence's `peak = max(peak, x[t])` then captures."""
    cmp = np.greater if fn is max else np.less
    best = items[0]
    for b in items[1:]:
        cond = np_ops.ufunc(tx.ctx, cmp, [b, best])
        g = tx.ctx.graph
        best = fresh(g, g.node("where", (cond.value, b.value, best.value), best.dtype, ()),
                     "scalar")
    return best


def _sequence(make: Callable) -> Callable:
    def handler(tx, args, kwargs):
        if kwargs or len(args) > 1:
            graph_break("tuple()/list() with keyword or extra arguments (TypeError)")
        return make(unpack(tx, args[0]) if args else [])

    return handler


def _zip(tx, args, kwargs):
    if kwargs:
        return _known(tx, zip, args, kwargs)
    seqs = [unpack(tx, a) for a in args]
    n = min((len(s) for s in seqs), default=0)
    return IteratorVar([make_tuple([s[i] for s in seqs]) for i in range(n)])


def _enumerate(tx, args, kwargs):
    start = const_of(kwargs.get("start", args[1] if len(args) > 1 else PyVar(0)), "start")
    return IteratorVar(
        [make_tuple([PyVar(start + i), v]) for i, v in enumerate(unpack(tx, args[0]))]
    )


def _reversed(tx, args, kwargs):
    return IteratorVar(list(reversed(unpack(tx, args[0]))))


def _sum(tx, args, kwargs):
    items = unpack(tx, args[0])
    total = args[1] if len(args) > 1 else kwargs.get("start", PyVar(0))
    for v in items:  # Python's sum: ((start + a) + b) + ...
        total = binary(tx, "+", total, v)
    return total


def _iter(tx, args, kwargs):
    return iterate(tx, args[0])


def _next(tx, args, kwargs):
    it = args[0]
    if not isinstance(it, IteratorVar):
        graph_break(f"next() of a {it.describe()} is not supported")
    v = it.next()
    if v is None:
        if len(args) > 1:
            return args[1]
        graph_break("next() of an exhausted iterator raises StopIteration")
    return v


def _getattr(tx, args, kwargs):
    if len(args) != 2:
        graph_break("getattr() with a default is not supported")
    return load_attr(tx, args[0], const_of(args[1], "an attribute name"))


def _dict(tx, args, kwargs):
    if args:
        return (
            _known(tx, dict, args, kwargs)
            if _all_known(args, {})
            else graph_break("dict() of symbolic items is not supported")
        )
    return DictVar(kwargs)


def _map(tx, args, kwargs):
    fn, seqs = args[0], [unpack(tx, a) for a in args[1:]]
    n = min((len(s) for s in seqs), default=0)
    return IteratorVar([call(tx, fn, [s[i] for s in seqs], {}) for i in range(n)])


def _print(tx, args, kwargs):
    graph_break("print() is a side effect; dynexpr runs this function as plain Python")


_HANDLERS: dict[Any, Callable] = {
    len: _len,
    abs: _abs,
    isinstance: _isinstance,
    type: _type,
    float: _to_scalar(float),
    int: _to_scalar(int),
    bool: _to_scalar(bool),
    complex: _to_scalar(complex),
    round: _to_scalar(round),
    min: _minmax(min),
    max: _minmax(max),
    tuple: _sequence(make_tuple),
    list: _sequence(ListVar),
    zip: _zip,
    enumerate: _enumerate,
    reversed: _reversed,
    sum: _sum,
    iter: _iter,
    next: _next,
    getattr: _getattr,
    dict: _dict,
    map: _map,
    print: _print,
}


@registry.register("builtin_function")
def handler(value: Any) -> Callable | None:
    try:
        return _HANDLERS.get(value)
    except TypeError:
        return None


def _known(tx, fn: Any, args: list, kwargs: dict) -> Var:
    if not _all_known(args, kwargs):
        odd = next(a for a in list(args) + list(kwargs.values()) if not isinstance(a, PyVar))
        graph_break(f"{getattr(fn, '__qualname__', fn)}() of a {odd.describe()} is not supported")
    reads = [a.reads if isinstance(a, StopVar) else 0 for a in args]
    r = _fold(fn, args, kwargs)
    if fn is range and not kwargs and isinstance(r, PyVar) and isinstance(r.value, range):
        # Where the stop came from (an argument, a global): a loop over this range that
        # capture rolls takes its stop from there at call time (Note [rolling unrolled
        # loops]), so the unit is the same for every trip count.
        stop = args[0] if len(args) == 1 else args[1]
        if stop.source is not None and type(stop.value) is int:
            tx.ctx.range_stops[id(r.value)] = stop.source
        for a, n in zip(args, reads):  # these reads were range()'s: relax.py decides
            if isinstance(a, StopVar):
                a.reads = n
                tx.ctx.range_uses[a.source] = tx.ctx.range_uses.get(a.source, 0) + 1
    return r


def _is_pure(fn: Any) -> bool:
    try:
        if fn in _PURE_BUILTINS:
            return True
    except TypeError:
        pass
    if isinstance(fn, types.BuiltinFunctionType):
        owner = getattr(fn, "__self__", None)
        if isinstance(owner, types.ModuleType):
            return owner.__name__ in _PURE_MODULES
        return isinstance(owner, _IMMUTABLE)  # e.g. "a,b".split, (1, 2).index
    return isinstance(fn, types.MethodWrapperType) and isinstance(fn.__self__, _IMMUTABLE)


@registry.register("known_call")
def call_known(tx, fn: Any, args: list, kwargs: dict) -> Var:
    """A call of a known object that no table handles."""
    if _is_pure(fn):
        if any(isinstance(a, ArrayVar) for a in args) and getattr(fn, "__module__", "") == "math":
            graph_break(f"math.{fn.__name__} of an array value; use np.{fn.__name__}")
        return _known(tx, fn, args, kwargs)
    mod = getattr(fn, "__module__", None) or ""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
    if mod == "numpy" or mod.startswith("numpy."):
        graph_break(f"{mod}.{name} is not supported by dynexpr")
    if isinstance(fn, type):
        graph_break(f"creating a {name} object is not supported by dynexpr")
    graph_break(f"calling {mod + '.' if mod else ''}{name} is not supported by dynexpr")


# --- methods of containers ---------------------------------------------------------------

_LIST_READ = {"index", "count", "copy"}
_DICT_READ = {"get", "keys", "values", "items", "copy"}


@registry.register("container_method")
def container_method(tx, obj: Var, name: str, args: list, kwargs: dict) -> Var:
    if isinstance(obj, PyVar):
        if name in _LIST_READ | _DICT_READ:
            return _known(tx, getattr(obj.value, name), args, kwargs)
        graph_break(
            f"{type(obj.value).__name__}.{name} on an object from outside the function "
            "is a side effect dynexpr does not replay"
        )
    if isinstance(obj, (ListVar, TupleVar)):
        return _list_method(tx, obj, name, args, kwargs)
    if isinstance(obj, DictVar):
        return _dict_method(tx, obj, name, args, kwargs)
    graph_break(f"method {name} of a {obj.describe()} is not supported")


def _list_method(tx, obj, name, args, kwargs):
    items = obj.items
    if name == "copy" and isinstance(obj, ListVar):
        return ListVar(items)
    if name in ("index", "count"):
        return _known(tx, getattr(tuple(const_of(v, "an item") for v in items), name), args, kwargs)
    if isinstance(obj, TupleVar):
        graph_break(f"tuple.{name} is not supported")
    lst = mutable_list(obj)
    if name == "append":
        lst.items.append(args[0])
    elif name == "extend":
        lst.items.extend(unpack(tx, args[0]))
    elif name == "insert":
        lst.items.insert(const_of(args[0], "an index"), args[1])
    elif name == "pop":
        i = const_of(args[0], "an index") if args else -1
        if not lst.items:
            graph_break("pop from empty list (IndexError)")
        return lst.items.pop(i)
    elif name == "reverse":
        lst.items.reverse()
    else:
        graph_break(f"list.{name} is not supported")
    return PyVar(None)


def _dict_method(tx, obj, name, args, kwargs):
    items = obj.items
    if name == "get":
        key = const_of(args[0], "a dict key")
        return items.get(key, args[1] if len(args) > 1 else PyVar(None))
    if name == "keys":
        return IteratorVar([PyVar(k) for k in items])
    if name == "values":
        return IteratorVar(list(items.values()))
    if name == "items":
        return IteratorVar([make_tuple([PyVar(k), v]) for k, v in items.items()])
    if name == "copy":
        return DictVar(items)
    if obj.source is None and name == "update":
        items.update(dict_items(tx, args[0]) if args else {})
        items.update(kwargs)
        return PyVar(None)
    graph_break(f"dict.{name} is not supported")
