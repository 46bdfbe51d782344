"""Binding the arguments of NumPy functions and ndarray methods to their signatures.

Keyword arguments that would change the semantics in ways dynexpr does not model (out=,
where=, initial=, casting=, a reading order=) must keep their defaults, else the call
is a graph break that names the argument."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import graph_break
from .variables import PyVar, TupleVar, Var

REQUIRED = object()


def const_of(v: Var, what: str) -> Any:
    if isinstance(v, PyVar):
        return v.value
    if isinstance(v, TupleVar):
        return tuple(const_of(x, what) for x in v.items)
    graph_break(f"{what} must be known while capturing, but it is a {v.describe()}")
NOVALUE = getattr(np, "_NoValue", None)
# Parameters that must keep their defaults: another value changes the semantics in a way
# dynexpr does not model, and the call is a graph break that names it.
_FIXED = {
    "out",
    "where",
    "initial",
    "mean",
    "correction",
    "subok",
    "like",
    "device",
    "ndmin",
    "casting",
}
# order= is the memory layout of a new array, which values do not depend on, except where
# it is the order elements are read in (ravel, flatten, reshape): there only "C".
_ORDERS_OK = (None, "C", "K", "A")
_READ_ORDER = ("np.ravel", "ndarray.ravel", "ndarray.flatten", "np.reshape", "ndarray.reshape")


def bind(what: str, args: list, kwargs: dict, spec: tuple) -> dict[str, Var]:
    """Bind a NumPy signature: spec is ((name, default), ...); returns name -> Var."""
    out: dict[str, Var] = {}
    if len(args) > len(spec):
        graph_break(f"{what}: too many positional arguments ({len(args)}) (TypeError)")
    for (name, _), v in zip(spec, args):
        out[name] = v
    names = {n for n, _ in spec}
    for k, v in kwargs.items():
        if k not in names:
            graph_break(f"{what}(..., {k}=) is not supported by dynexpr")
        if k in out:
            graph_break(f"{what}: got multiple values for {k!r} (TypeError)")
        out[k] = v
    for name, default in spec:
        if name not in out:
            if default is REQUIRED:
                graph_break(f"{what}: missing argument {name!r} (TypeError)")
            out[name] = PyVar(default)
    for name, default in spec:
        if name in _FIXED or name == "order":
            val = const_of(out[name], f"{what}'s {name}=")
            if name == "order":
                ok = val == "C" if what in _READ_ORDER else val in _ORDERS_OK
            else:
                ok = val is default or (
                    default is not NOVALUE and type(val) is type(default) and val == default
                )
            if not ok:
                graph_break(f"{what}(..., {name}={val!r}) is not supported by dynexpr")
    return out


def const_arg(d: dict, name: str) -> Any:
    return const_of(d[name], f"the {name}= argument")


def entry(name: str, spec: tuple, body: Callable) -> tuple[Callable, Callable]:
    """(np.<name> handler, ndarray.<name> handler) for one body(ctx, x, bound)."""

    def function(tx, args: list, kwargs: dict) -> Var:
        d = bind(f"np.{name}", args, kwargs, (("a", REQUIRED),) + spec)
        return body(tx.ctx, d.pop("a"), d)

    def method(tx, x: Var, args: list, kwargs: dict) -> Var:
        return body(tx.ctx, x, bind(f"ndarray.{name}", args, kwargs, spec))

    return function, method
