"""The resume interpreter's opcodes of CPython 3.13: 3.12's, with NULL after the
callable ([callable, self_or_null, args...]), CALL_KW instead of KW_NAMES,
SET_FUNCTION_ATTRIBUTE instead of MAKE_FUNCTION's flags, TO_BOOL and COMPARE_OP's bool
flag, fused LOAD_FAST/STORE_FAST pairs and the split FORMAT_VALUE."""

from __future__ import annotations

import types
from typing import Any

from . import interp
from .concrete312 import SINCE_312
from .interp import COMMON, NULL, Run, _call, _COMPARE, _global, _local, _push, _unary
from .interp import as_user, for_iter


def _CALL(f: Run, inst) -> None:
    args = f.popn(inst.arg)
    self_or_null, fn = f.stack.pop(), f.stack.pop()
    if self_or_null is not NULL:
        args = [self_or_null] + args
    return _call(f, fn, args, ())


def _CALL_KW(f: Run, inst) -> None:
    names = f.stack.pop()
    args = f.popn(inst.arg)
    self_or_null, fn = f.stack.pop(), f.stack.pop()
    if self_or_null is not NULL:
        args = [self_or_null] + args
    _call(f, fn, args, names)


def _CALL_FUNCTION_EX(f: Run, inst) -> None:
    kwargs = f.stack.pop() if inst.arg & 1 else {}
    args = f.stack.pop()
    f.stack.pop()
    fn = f.stack.pop()
    f.stack.append(as_user(f, fn, args, kwargs))


def _LOAD_GLOBAL(f: Run, inst) -> None:
    f.stack.append(_global(f, inst.argval))
    if inst.arg & 1:
        f.stack.append(NULL)


def _LOAD_ATTR(f: Run, inst) -> None:
    obj = f.stack.pop()
    method = inst.opname == "LOAD_METHOD" or inst.arg & 1
    f.stack.append(getattr(obj, inst.argval))
    if method:
        f.stack.append(NULL)


def _COMPARE_OP(f: Run, inst) -> None:
    rhs, lhs = f.stack.pop(), f.stack.pop()
    r = as_user(f, _COMPARE[inst.argval], (lhs, rhs))
    f.stack.append(bool(r) if inst.arg & 16 else r)


def _MAKE_FUNCTION(f: Run, inst) -> None:
    code = f.stack.pop()
    f.stack.append(types.FunctionType(code, f.fn.__globals__, code.co_name))
    f.stack[-1].__qualname__ = code.co_qualname


def _SET_FUNCTION_ATTRIBUTE(f: Run, inst) -> None:
    fn, value = f.stack.pop(), f.stack.pop()
    attr = {0x01: "__defaults__", 0x02: "__kwdefaults__", 0x04: "__annotations__"}.get(inst.arg)
    if attr is None:  # 0x08, a closure: only cells of fn itself reach here
        fn = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, value)
    else:
        setattr(fn, attr, value)
    f.stack.append(fn)


def _FORMAT_WITH_SPEC(f: Run, inst) -> None:
    spec = f.stack.pop()
    f.stack.append(format(f.stack.pop(), spec))


def _store_pair(f: Run, inst) -> None:
    for name in inst.argval:
        f.locals[name] = f.stack.pop()


def _store_load(f: Run, inst) -> None:
    store, load = inst.argval
    f.locals[store] = f.stack.pop()
    f.stack.append(_local(f, load))


def _END_FOR(f: Run, inst) -> None:
    f.popn(1)


OPS: dict[str, Any] = {
    **COMMON,
    **SINCE_312,
    "LOAD_GLOBAL": _LOAD_GLOBAL,
    "LOAD_ATTR": _LOAD_ATTR,
    "LOAD_METHOD": _LOAD_ATTR,
    "COMPARE_OP": _COMPARE_OP,
    "TO_BOOL": _unary(bool),
    "LOAD_FAST_LOAD_FAST": lambda f, inst: f.stack.extend(_local(f, n) for n in inst.argval),
    "STORE_FAST_STORE_FAST": _store_pair,
    "STORE_FAST_LOAD_FAST": _store_load,
    "CONVERT_VALUE": _push(lambda f, inst: inst.argval(f.stack.pop())),
    "FORMAT_SIMPLE": _unary(format),
    "FORMAT_WITH_SPEC": _FORMAT_WITH_SPEC,
    "FOR_ITER": for_iter(2),  # exhaustion skips the loop's END_FOR and POP_TOP
    "END_FOR": _END_FOR,
    "MAKE_FUNCTION": _MAKE_FUNCTION,
    "SET_FUNCTION_ATTRIBUTE": _SET_FUNCTION_ATTRIBUTE,
    "CALL": _CALL,
    "CALL_KW": _CALL_KW,
    "CALL_FUNCTION_EX": _CALL_FUNCTION_EX,
}


class Run313(interp.Run):
    __slots__ = ()
    OPS = OPS
