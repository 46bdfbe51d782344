"""Turning the real objects a translation meets into Vars, recording a guard for each
fact it relies on.

Every object the bytecode reaches from outside (an argument, a global, a closure cell,
an attribute of a user object, an item of a container) comes through `wrap`, with its
access path. What is guarded depends on what the object is:

    ndarray           TYPE, DTYPE, SHAPE, STRIDES_CLASS, ALIAS with every other array
                      (and WRITEABLE when the function writes into it); it becomes a
                      graph input, read at call time, never a baked-in constant
    scalars, str, None, dtypes, tuples/lists/dicts of those
                      VALUE (type-strict: 0.5 and np.float32(0.5) differ, NEP 50)
    containers holding arrays
                      TYPE and LEN / DICT_KEYS, then each element on its own path
    functions, modules, classes, builtins
                      ID (and the code object of an inlined function)
    other objects     TYPE; their attributes are wrapped when read
"""

from __future__ import annotations

import copy
import types
from typing import Any

import numpy as np

from .. import ir
from ..backends import cuda_arrays
from ..guards import Guard, alias_relation, strides_class
from .arrays import ArrayVar, Storage
from .errors import Budget, graph_break
from .graph import GraphBuilder
from .infer import SUPPORTED
from .session import Session
from .variables import (
    BoundMethodVar,
    DictVar,
    FunctionVar,
    ListVar,
    ObjectVar,
    PyVar,
    ScalarInputVar,
    StopVar,
    TupleVar,
    Var,
)

_SCALARS = (type(None), bool, int, float, complex, str, bytes, range, slice, type(Ellipsis))
_NUMBERS = (np.float32, np.float64, np.int32, np.int64)
_CONST_LIMIT = 4096  # elements; a bigger constant container is compared per call


def _is_constant(value: Any, budget: list) -> bool:
    budget[0] -= 1
    if budget[0] < 0:
        return False
    t = type(value)
    if t in _SCALARS or issubclass(t, (np.generic, np.dtype)):
        return True
    if t in (tuple, list):
        return all(_is_constant(x, budget) for x in value)
    if t is dict:
        return all(_is_constant(k, budget) and _is_constant(v, budget) for k, v in value.items())
    return False


# Note [wrapping runs no user code]: the facts wrap() reads come from type(value)
# (issubclass, not isinstance: isinstance asks the object for __class__ when its type
# does not match, which runs a user-defined __getattribute__), and attributes are read
# only where the type's attribute lookup is the generic one. User code run here would
# run again when the call falls back to plain Python: its side effects and exceptions
# must happen once, in the plain run.
_GENERIC_GETATTRIBUTE = (object.__getattribute__, type.__getattribute__)


def _is_library_callable(value: Any, device: bool = False) -> bool:
    t = type(value)
    if issubclass(t, (types.BuiltinFunctionType, np.ufunc)):
        return True
    plain = callable(value) and t.__getattribute__ in _GENERIC_GETATTRIBUTE
    module = getattr(value, "__module__", None) if plain else None
    # dynexpr.ops: the manifest's ops without a NumPy function (np_table handles them).
    if isinstance(module, str) and (
        module in ("numpy", "builtins", "dynexpr.ops") or module.startswith("numpy.")
    ):
        return True
    # cupy.exp in a device-path translation: np.exp's handler (calls.py)
    return device and cuda_arrays.numpy_equivalent(value) is not None


def is_constant(value: Any) -> bool:
    return _is_constant(value, [_CONST_LIMIT])


class Context:
    """What all frames of one translation share: the graph, the guards, the arrays, and
    the session (Note [one session per translation] in session.py)."""

    def __init__(self, fn: Any, dyn: Any = None, device: bool = False,
                 stand_ins: dict | None = None) -> None:
        self.fn = fn
        # dyn: dynamic.DynState, or None: every extent static
        self.session = Session(dyn, device, stand_ins)
        self.budget = Budget()
        self.graph = GraphBuilder(self.budget, self.session)
        self._guards: dict[Guard, None] = {}
        self._wrapped: dict[tuple, Var] = {}
        self._arrays: list[tuple[np.ndarray, tuple, ArrayVar]] = []
        self.pause = None  # resume.Pause in a resumable translation
        self.loops: list = []  # IteratorVars over ranges, with their iterations' marks
        self.range_stops: dict[int, tuple] = {}  # id(range) -> its stop's source
        self.truncate_loops = False  # Note [stopping the unrolling early] (truncate.py)
        self.truncated = False  # a loop stopped unrolling early in this translation
        self.range_uses: dict[tuple, int] = {}  # source -> range() calls with it as stop
        self.inlining: dict = {}  # code object -> frames of it being inlined now (recursion)
        # A resumed segment's frame values that are floats: 0-d inputs, not constants.
        self.scalar_inputs = False

    # -- guards ----------------------------------------------------------------------
    def guard(self, kind: str, source: tuple, expected: Any) -> None:
        self._guards.setdefault(Guard(kind, source, expected))

    @property
    def guards(self) -> list[Guard]:
        return list(self._guards)

    # -- wrapping --------------------------------------------------------------------
    def wrap(self, value: Any, source: tuple) -> Var:
        """The Var for `value`, found at `source`; the same source gives the same Var."""
        hit = self._wrapped.get(source)
        if hit is not None:
            return hit
        if self.session.stand_ins:  # a CUDA array of a global or closure (cuda_run.py)
            value = self.session.stand_ins.get(source, value)
        var = self._wrap(value, source)
        self._wrapped[source] = var
        return var

    def wrapped(self, source: tuple) -> Var | None:
        """The Var already made for `source`, if any."""
        return self._wrapped.get(source)

    def _wrap(self, value: Any, source: tuple) -> Var:
        t = type(value)
        if self.scalar_inputs and source[0] == "arg":  # a resumed segment's frame value
            if t is float or t is int or t in _NUMBERS:
                self.guard("TYPE", source, t)
                return ScalarInputVar(value, source, self)
            method = t is types.BuiltinMethodType or t is types.MethodType
            bound_self = value.__self__ if method else None
            if method and not issubclass(type(bound_self), (types.ModuleType, type(None))) \
                    and _is_library_callable(value, self.session.device):
                self.guard("TYPE", source, t)  # a new bound method each call: never its id
                return ObjectVar(value, source)
        if t is np.ndarray or issubclass(t, np.ndarray):
            return self._wrap_array(value, source)
        if t in (tuple, list, dict) or t in _SCALARS or issubclass(t, (np.generic, np.dtype)):
            if is_constant(value):
                self.guard("VALUE", source, copy.deepcopy(value) if t in (list, dict) else value)
                if t is int and source[0] == "arg":  # maybe a loop's stop (relax.py)
                    return StopVar(value, source)
                return PyVar(value, source)
            self.guard("TYPE", source, t)
            if t is dict:
                self.guard("DICT_KEYS", source, tuple(value))
                return DictVar(
                    {k: self.wrap(v, ("item", source, k)) for k, v in value.items()}, source
                )
            self.guard("LEN", source, len(value))
            items = [self.wrap(v, ("item", source, i)) for i, v in enumerate(value)]
            return TupleVar(items) if t is tuple else ListVar(items, source)
        # NumPy and builtins: the call tables handle them
        if _is_library_callable(value, self.session.device):
            self.guard("ID", source, value)
            return PyVar(value, source)
        if t is types.FunctionType:
            self.guard("ID", source, value)
            self.guard("ID", ("attr", source, "__code__"), value.__code__)
            return FunctionVar(value, source)
        if getattr(t, "_dynexpr_captured", False):  # captured code calling captured code
            self.guard("ID", source, value)
            return FunctionVar(value.__dynexpr_wrapped__, ("attr", source, "__dynexpr_wrapped__"))
        if t is types.MethodType:
            self.guard("TYPE", source, t)
            fn = self.wrap(value.__func__, ("attr", source, "__func__"))
            return BoundMethodVar(self.wrap(value.__self__, ("attr", source, "__self__")), fn)
        if issubclass(t, (type, types.ModuleType)):
            self.guard("ID", source, value)
            return PyVar(value, source)
        self.guard("TYPE", source, t)
        return ObjectVar(value, source)

    def _wrap_array(self, a: np.ndarray, source: tuple) -> Var:
        self.guard("TYPE", source, type(a))
        if type(a) is not np.ndarray:
            graph_break(
                f"{type(a).__name__} is an ndarray subclass; dynexpr captures plain "
                "ndarrays only (pass np.asarray(x))", final=True
            )
        self.guard("DTYPE", source, a.dtype)
        if a.dtype not in SUPPORTED or not a.dtype.isnative:
            graph_break(
                f"an array has dtype {a.dtype}, which the backends do not support "
                f"({', '.join(ir.DTYPES)}); convert it first, "
                "e.g. x.astype(np.float64)", final=True
            )
        # With dynamic dimensions, sentinels stand for their extents (Note [dynamic
        # dimensions by sentinels]); translate_dynamic turns this guard into DYN_SHAPE.
        dyn = self.session.dyn
        shape = a.shape if dyn is None else dyn.shape_for(source, a)
        self.guard("SHAPE", source, shape)
        self.guard("STRIDES_CLASS", source, strides_class(a))
        overlapping = []
        for other, osrc, ovar in self._arrays:
            rel = alias_relation(other, a)
            self.guard("ALIAS", (osrc, source), rel)
            if rel == "same":  # one array reached twice is one input (see CAPTURE.md)
                return ovar
            if rel == "overlap":
                overlapping.append(ovar)
        value = self.graph.input(source, a.dtype.name, shape)

        def first_write() -> None:
            self.guard("WRITEABLE", source, bool(a.flags.writeable))
            if not a.flags.writeable:
                graph_break(
                    "the function writes into a read-only array (NumPy raises "
                    "ValueError: assignment destination is read-only)"
                )

        st = Storage(
            value, source=source, c_contig=bool(a.flags.c_contiguous), on_first_write=first_write
        )
        var = ArrayVar(self.graph, st)
        reason = (
            "two arrays the function reads overlap in memory and it writes into one "
            "of them; dynexpr does not model partial overlap (pass a copy)"
        )
        for ovar in overlapping:
            if ovar.storage.written:  # it was written before this one was first read
                graph_break(reason)
            ovar.storage.freeze(reason)
            st.freeze(reason)
        self._arrays.append((a, source, var))
        return var

    def array_vars(self) -> list[ArrayVar]:
        """The arrays met from outside (arguments, globals, attributes), in order."""
        return [var for _, _, var in self._arrays]
