"""The resume interpreter's opcodes of CPython 3.12: 3.11's calls and loads (a method
load still pushes [NULL, callable]; LOAD_ATTR's low bit now asks for it), plus slices,
RETURN_CONST, inlined comprehensions, END_FOR and one form of each branch."""

from __future__ import annotations

import operator
from typing import Any

from . import interp
from .concrete311 import _CALL, _CALL_FUNCTION_EX, _COMPARE_OP, _FORMAT_VALUE, _LOAD_GLOBAL
from .concrete311 import _MAKE_FUNCTION, load_attr
from .interp import COMMON, Returned, Run, _jump_if, _local, _nop, _push, for_iter
from .variables import UNBOUND

_INTRINSICS = {"INTRINSIC_UNARY_POSITIVE", "INTRINSIC_LIST_TO_TUPLE"}


def _BINARY_SLICE(f: Run, inst) -> None:
    stop, start = f.stack.pop(), f.stack.pop()
    f.stack.append(f.stack.pop()[start:stop])


def _STORE_SLICE(f: Run, inst) -> None:
    stop, start = f.stack.pop(), f.stack.pop()
    container, value = f.stack.pop(), f.stack.pop()
    container[start:stop] = value


def _CALL_INTRINSIC_1(f: Run, inst) -> None:
    v = f.stack.pop()
    f.stack.append(+v if inst.argrepr == "INTRINSIC_UNARY_POSITIVE" else tuple(v))


# What 3.12 added and 3.13 kept (concrete313 starts from these).
SINCE_312: dict[str, Any] = {
    "LOAD_FAST_CHECK": _push(lambda f, inst: _local(f, inst.argval)),
    "LOAD_FAST_AND_CLEAR": _push(lambda f, inst: f.locals.pop(inst.argval, UNBOUND)),
    "BINARY_SLICE": _BINARY_SLICE,
    "STORE_SLICE": _STORE_SLICE,
    "CALL_INTRINSIC_1": _CALL_INTRINSIC_1,
    "RETURN_CONST": lambda f, inst: Returned(inst.argval),
    "POP_JUMP_IF_FALSE": _jump_if(operator.not_),
    "POP_JUMP_IF_TRUE": _jump_if(bool),
    "POP_JUMP_IF_NONE": _jump_if(lambda v: v is None),
    "POP_JUMP_IF_NOT_NONE": _jump_if(lambda v: v is not None),
}

# 3.12 folded LOAD_METHOD into LOAD_ATTR (a pseudo-op now; kept for the same table).
_LOAD_ATTR = load_attr(lambda inst: inst.opname == "LOAD_METHOD" or inst.arg & 1)

OPS: dict[str, Any] = {
    **COMMON,
    **SINCE_312,
    "KW_NAMES": _nop,
    "LOAD_GLOBAL": _LOAD_GLOBAL,
    "LOAD_ATTR": _LOAD_ATTR,
    "LOAD_METHOD": _LOAD_ATTR,
    "COMPARE_OP": _COMPARE_OP,
    "FORMAT_VALUE": _FORMAT_VALUE,
    "FOR_ITER": for_iter(1),  # exhaustion skips the loop's END_FOR, as translated
    "END_FOR": lambda f, inst: f.popn(2) and None,
    "MAKE_FUNCTION": _MAKE_FUNCTION,
    "CALL": _CALL,
    "CALL_FUNCTION_EX": _CALL_FUNCTION_EX,
}


class Run312(interp.Run):
    __slots__ = ()
    OPS = OPS
