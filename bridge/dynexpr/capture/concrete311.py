"""The resume interpreter's opcodes of CPython 3.11 (interp.py holds what all versions
share): a method load pushes [NULL, callable], KW_NAMES/PRECALL come before CALL, and
branches have forward and backward forms."""

from __future__ import annotations

import operator
import types
from typing import Any

from . import interp
from .interp import COMMON, NULL, Run, _call, _COMPARE, _global, _jump_if, _nop, _unary
from .interp import as_user, for_iter


def _CALL(f: Run, inst) -> None:
    args = f.popn(inst.arg)
    callable_or_self, fn_or_null = f.stack.pop(), f.stack.pop()
    if fn_or_null is NULL:
        fn = callable_or_self
    else:
        fn, args = fn_or_null, [callable_or_self] + args
    return _call(f, fn, args, f.kw_names())


def _CALL_FUNCTION_EX(f: Run, inst) -> None:
    kwargs = f.stack.pop() if inst.arg & 1 else {}
    args = f.stack.pop()
    fn = f.stack.pop()
    if f.stack and f.stack[-1] is NULL:
        f.stack.pop()
    f.stack.append(as_user(f, fn, args, kwargs))


def _LOAD_GLOBAL(f: Run, inst) -> None:
    value = _global(f, inst.argval)
    if inst.arg & 1:
        f.stack.append(NULL)
    f.stack.append(value)


def load_attr(is_method) -> Any:
    """LOAD_ATTR/LOAD_METHOD before 3.13: a method load pushes [NULL, bound method]."""
    def run(f: Run, inst) -> None:
        obj = f.stack.pop()
        value = getattr(obj, inst.argval)
        if is_method(inst):
            f.stack.append(NULL)
        f.stack.append(value)
    return run


def _COMPARE_OP(f: Run, inst) -> None:
    rhs, lhs = f.stack.pop(), f.stack.pop()
    f.stack.append(as_user(f, _COMPARE[inst.argval], (lhs, rhs)))


def _FORMAT_VALUE(f: Run, inst) -> None:
    conv, has_spec = inst.argval
    spec = f.stack.pop() if has_spec else ""
    value = f.stack.pop()
    f.stack.append(format(conv(value) if conv else value, spec))


def _MAKE_FUNCTION(f: Run, inst) -> None:
    code = f.stack.pop()
    flags = inst.arg
    closure = f.stack.pop() if flags & 0x08 else None
    annotations = f.stack.pop() if flags & 0x04 else None
    kwdefaults = f.stack.pop() if flags & 0x02 else None
    defaults = f.stack.pop() if flags & 0x01 else None
    new = types.FunctionType(code, f.fn.__globals__, code.co_name, defaults, closure)
    new.__qualname__ = code.co_qualname
    if kwdefaults:
        new.__kwdefaults__ = kwdefaults
    if annotations:
        new.__annotations__ = (dict(zip(annotations[::2], annotations[1::2]))
                               if isinstance(annotations, tuple) else annotations)
    f.stack.append(new)


def _jump_or_pop(when: bool):
    def run(f: Run, inst) -> None:
        if bool(f.stack[-1]) == when:
            f.jump(inst.argval)
        else:
            f.stack.pop()
    return run


_LOAD_ATTR = load_attr(lambda inst: inst.opname == "LOAD_METHOD")

OPS: dict[str, Any] = {
    **COMMON,
    **dict.fromkeys(["PRECALL", "KW_NAMES"], _nop),
    "LOAD_GLOBAL": _LOAD_GLOBAL,
    "LOAD_ATTR": _LOAD_ATTR,
    "LOAD_METHOD": _LOAD_ATTR,
    "COMPARE_OP": _COMPARE_OP,
    "UNARY_POSITIVE": _unary(operator.pos),
    "FORMAT_VALUE": _FORMAT_VALUE,
    "LIST_TO_TUPLE": _unary(tuple),
    **dict.fromkeys(["POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_FALSE"],
                    _jump_if(operator.not_)),
    **dict.fromkeys(["POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_TRUE"], _jump_if(bool)),
    **dict.fromkeys(["POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NONE"],
                    _jump_if(lambda v: v is None)),
    **dict.fromkeys(["POP_JUMP_FORWARD_IF_NOT_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE"],
                    _jump_if(lambda v: v is not None)),
    "JUMP_IF_TRUE_OR_POP": _jump_or_pop(True),
    "JUMP_IF_FALSE_OR_POP": _jump_or_pop(False),
    "FOR_ITER": for_iter(0),  # 3.11: the target follows the loop directly
    "MAKE_FUNCTION": _MAKE_FUNCTION,
    "CALL": _CALL,
    "CALL_FUNCTION_EX": _CALL_FUNCTION_EX,
}


class Run311(interp.Run):
    __slots__ = ()
    OPS = OPS

