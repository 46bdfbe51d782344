"""Attribute loads (`obj.name`) on symbolic values.

User objects are read the way CPython would find the attribute (data descriptors on
the type, then the instance __dict__, then the type), but statically, with
inspect.getattr_static, so no user code runs while translating. What is found is
wrapped on its access path, which records the guard: an instance attribute by value
or as an array input, a method by the identity of its function on the type.
"""

from __future__ import annotations

import inspect
import types

import numpy as np

from . import np_views
from .arrays import ArrayVar
from .calls import call
from .errors import graph_break
from .np_table import ARRAY_METHODS, DATA_METHODS
from .variables import (
    BoundMethodVar,
    DictVar,
    FunctionVar,
    ListVar,
    NestedFunctionVar,
    ObjectVar,
    PyVar,
    TupleVar,
    Var,
)

_ARRAY_FACTS = {
    "shape": lambda x: x.shape,
    "ndim": lambda x: x.ndim,
    "size": lambda x: x.size,
    "dtype": lambda x: np.dtype(x.dtype),
    "itemsize": lambda x: np.dtype(x.dtype).itemsize,
    "nbytes": lambda x: x.size * np.dtype(x.dtype).itemsize,
}


def load_attr(tx, obj: Var, name: str) -> Var:
    ctx = tx.ctx
    if isinstance(obj, ArrayVar):
        return _array_attr(tx, obj, name)
    if isinstance(obj, PyVar):
        value = obj.value
        # Note [module attributes are guarded]: np.exp is read at call time like any
        # global (ID guard on ("attr", ("global", "np"), "exp"), checked in C), so
        # `np.exp = f` or mock.patch("numpy.exp") is seen, and restoring it finds the
        # first entry again.
        if isinstance(value, (types.ModuleType, type)) and obj.source is not None:
            _real_getattr(value, name)
            return ctx.wrap(getattr(value, name), ("attr", obj.source, name))
        if isinstance(value, (list, dict, set)):
            return BoundMethodVar(obj, name)
        return PyVar(_real_getattr(value, name))
    if isinstance(obj, ObjectVar):
        return _object_attr(tx, obj, name)
    if isinstance(obj, (TupleVar, ListVar, DictVar)):
        return BoundMethodVar(obj, name)
    if isinstance(obj, FunctionVar):
        return PyVar(_real_getattr(obj.fn, name))
    if isinstance(obj, NestedFunctionVar) and name in ("__name__", "__qualname__"):
        return PyVar(getattr(obj.code, "co_" + name.strip("_")))
    graph_break(f"attribute {name!r} of a {obj.describe()} is not supported")


def _real_getattr(value, name: str):
    try:
        return getattr(value, name)
    except AttributeError as e:
        graph_break(f"AttributeError: {e}")


def _array_attr(tx, x: ArrayVar, name: str) -> Var:
    if name not in ("shape", "ndim", "T"):
        tx.ctx.session.api.add(f"ndarray.{name}")
    fact = _ARRAY_FACTS.get(name)
    if fact is not None:
        if name in ("shape", "size", "nbytes"):
            tx.ctx.session.check_static(x.shape, f"x.{name} read by Python")
        return PyVar(fact(x))
    if name == "T":
        return np_views.transpose(tx.ctx, x)
    if name == "real" and np.dtype(x.dtype).kind != "c":
        return x if x.is_scalar else x.view("reshape", x.shape, shape=x.shape)
    if name in ARRAY_METHODS or name in DATA_METHODS:
        return BoundMethodVar(x, name)
    graph_break(f"ndarray.{name} is not supported by dynexpr")


def _object_attr(tx, obj: ObjectVar, name: str) -> Var:
    ctx = tx.ctx
    value, src = obj.value, obj.source
    t = type(value)
    if t.__getattribute__ is not object.__getattribute__:
        graph_break(
            f"{t.__qualname__} defines __getattribute__; dynexpr cannot read its "
            "attributes without running it"
        )
    try:
        static = inspect.getattr_static(value, name)
    except AttributeError:
        why = "defines __getattr__" if hasattr(t, "__getattr__") else "has no such attribute"
        graph_break(
            f"{t.__qualname__} object: attribute {name!r} is not found statically (the class {why})"
        )
    type_src = ("attr", ("type", src), name)
    if isinstance(static, property):
        if static.fget is None:
            graph_break(f"property {name!r} of {t.__qualname__} has no getter")
        fget = ctx.wrap(static.fget, ("attr", type_src, "fget"))
        return call(tx, fget, [obj], {})
    instance_dict = getattr(value, "__dict__", None)
    if isinstance(static, (types.MemberDescriptorType, types.GetSetDescriptorType)) or (
        instance_dict is not None and name in instance_dict
    ):
        return ctx.wrap(getattr(value, name), ("attr", src, name))
    if isinstance(static, types.FunctionType):
        return BoundMethodVar(obj, ctx.wrap(static, type_src))
    if isinstance(static, staticmethod):
        return ctx.wrap(static.__func__, type_src)
    if isinstance(static, classmethod):
        owner = ctx.wrap(t, ("type", src))
        return BoundMethodVar(owner, ctx.wrap(static.__func__, ("attr", type_src, "__func__")))
    if hasattr(type(static), "__get__"):
        graph_break(
            f"attribute {name!r} of {t.__qualname__} is a descriptor "
            f"({type(static).__name__}) dynexpr does not run"
        )
    return ctx.wrap(static, type_src)
