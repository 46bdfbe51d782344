"""Running the captured function's own bytecode on real values, one instruction at a
time: what happens at a graph break between two compiled segments.

Note [resuming after a graph break]
A break no longer sends the whole call to plain Python. The translator stops before
the instruction it cannot capture, and the segment it has so far compiles with every
live value of the frame (locals and stack) among its outputs. At run time the kernel
runs, the frame is rebuilt from its outputs, this module runs the breaking instruction
on the real values (the `.item()`, the `print`, the branch on data), and translation
starts again at the next instruction with the frame's values as inputs: a resume point,
cached by its guards like the function's own entries. So the array work before and
after a break runs compiled, and the instruction between runs exactly once, as CPython
would run it.

The interpreter mirrors each version's stack layout as the translator's handlers keep
it (a method load pushes [NULL, bound method], 3.13 [bound method, NULL]), so a frame
passes between the two at any instruction. The instructions of try/except/finally and
`with` blocks run here, never in a graph, and an exception goes to its handler through
the code's exception table as in CPython. Code this interpreter cannot run (generators,
cells of inner functions, except*), and code that calls what looks at its caller's
frame's locals or stack (inspect, sys._getframe, locals()), is never resumed:
such a function runs as plain Python from its first break, as before (`not_resumable`).
"""

from __future__ import annotations

import builtins
import dis
import inspect
import operator
import sys
import types
from typing import Any

from .variables import UNBOUND

_V = sys.version_info[:2]


class _Null:
    """The NULL a method or global load pushes below a callable (a real-value twin of
    variables.NULL)."""

    def __repr__(self) -> str:
        return "NULL"


NULL = _Null()


class Returned:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


_BINARY = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "@": operator.matmul,
    "<<": operator.lshift, ">>": operator.rshift, "&": operator.and_, "|": operator.or_,
    "^": operator.xor,
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow,
    "@=": operator.imatmul, "<<=": operator.ilshift, ">>=": operator.irshift,
    "&=": operator.iand, "|=": operator.ior, "^=": operator.ixor,
}
_COMPARE = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
            ">": operator.gt, ">=": operator.ge}
_CLEANUP = {"SWAP", "POP_TOP", "STORE_FAST", "COPY", "NOP"}


def _jump_if(value_ok) -> Any:
    def run(f: Run, inst) -> None:
        if value_ok(f.stack.pop()):
            f.jump(inst.argval)
    return run


class Run:
    """One frame's real state while the interpreter runs it: stack, locals, next index."""

    __slots__ = ("fn", "insts", "index_of", "stack", "locals", "i", "handling")

    def __init__(self, fn, insts, index_of, stack: list, locals_: dict, i: int) -> None:
        self.fn, self.insts, self.index_of = fn, insts, index_of
        self.stack, self.locals, self.i = stack, locals_, i
        # The exception an `except` or `with` cleanup is handling (CPython keeps it in
        # the thread state; PUSH_EXC_INFO and POP_EXCEPT save and restore it).
        self.handling: BaseException | None = None

    def jump(self, offset: int) -> None:
        self.i = self.index_of[offset]

    def popn(self, n: int) -> list:
        if n == 0:
            return []
        vals = self.stack[-n:]
        del self.stack[-n:]
        return vals

    def step(self) -> Returned | None:
        """Run the instruction at self.i; a Returned when it returns from the frame. An
        exception goes to the frame's handler for that instruction, as in CPython's
        exception table, or out of the call when none covers it."""
        inst = self.insts[self.i]
        self.i += 1
        try:
            return OPS[inst.opname](self, inst)
        except BaseException as exc:  # noqa: BLE001 - routed as CPython routes it
            h = handler_for(self.fn.__code__, inst.offset)
            if h is None:
                raise
            del self.stack[h.depth:]
            if h.lasti:
                self.stack.append(inst.offset)
            self.stack.append(exc)
            self.jump(h.target)
            return None

    def kw_names(self) -> tuple:
        """The keyword names of the CALL about to run (3.11/3.12: KW_NAMES before it)."""
        j = self.i - 2
        if j >= 0 and self.insts[j].opname == "PRECALL":
            j -= 1
        if j >= 0 and self.insts[j].opname == "KW_NAMES":
            return self.fn.__code__.co_consts[self.insts[j].arg]
        return ()


def kw_names_before(fn, insts, i: int) -> tuple:
    """What KW_NAMES set for the CALL at index i or after (a resume point may fall
    between them)."""
    return Run(fn, insts, {}, [], {}, i + 1).kw_names()


def _global(f: Run, name: str) -> Any:
    g = f.fn.__globals__
    if name in g:
        return g[name]
    b = g.get("__builtins__", builtins)
    b = b if isinstance(b, dict) else b.__dict__
    if name in b:
        return b[name]
    raise NameError(f"name {name!r} is not defined")


def _local(f: Run, name: str) -> Any:
    try:
        return f.locals[name]
    except KeyError:
        raise UnboundLocalError(
            f"cannot access local variable {name!r} where it is not associated with a value"
        ) from None


def _cell(f: Run, name: str):
    code = f.fn.__code__
    return f.fn.__closure__[code.co_freevars.index(name)]


# Note [calls from the user's line]: what the interpreter calls for the user runs from a
# frame whose code claims the user's file, line and function, so a logging record, a
# warning (NumPy's RuntimeWarning too) or a traceback names the user's line, not ours.
_TRAMPOLINE = (lambda fn, args, kwargs: fn(*args, **kwargs)).__code__
_trampolines: dict[tuple, Any] = {}
_NO_KWARGS: dict = {}


def as_user(f: Run, fn: Any, args, kwargs: dict = _NO_KWARGS) -> Any:
    """fn(*args, **kwargs), called from the line of the instruction running now."""
    inst = f.insts[f.i - 1]
    code = f.fn.__code__
    pos = inst.positions
    line = pos.lineno if pos is not None and pos.lineno is not None else code.co_firstlineno
    t = _trampolines.get((code, line))
    if t is None:
        if len(_trampolines) > 4096:
            _trampolines.clear()
        t = _trampolines[(code, line)] = types.FunctionType(_TRAMPOLINE.replace(
            co_filename=code.co_filename, co_name=code.co_name, co_qualname=code.co_qualname,
            co_firstlineno=line), f.fn.__globals__)  # warnings keep their registry there
    return t(fn, args, kwargs)


def _call(f: Run, fn: Any, args: list, kw_names: tuple) -> None:
    n = len(args) - len(kw_names)
    kwargs = dict(zip(kw_names, args[n:]))
    f.stack.append(as_user(f, fn, args[:n], kwargs))


def _CALL(f: Run, inst) -> None:
    args = f.popn(inst.arg)
    if _V >= (3, 13):
        self_or_null, fn = f.stack.pop(), f.stack.pop()
        if self_or_null is not NULL:
            args = [self_or_null] + args
        return _call(f, fn, args, ())
    callable_or_self, fn_or_null = f.stack.pop(), f.stack.pop()
    if fn_or_null is NULL:
        fn = callable_or_self
    else:
        fn, args = fn_or_null, [callable_or_self] + args
    return _call(f, fn, args, f.kw_names())


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
    if _V >= (3, 13):
        f.stack.pop()
        fn = f.stack.pop()
    else:
        fn = f.stack.pop()
        if f.stack and f.stack[-1] is NULL:
            f.stack.pop()
    f.stack.append(as_user(f, fn, args, kwargs))


def _LOAD_GLOBAL(f: Run, inst) -> None:
    value = _global(f, inst.argval)
    if inst.arg & 1 and _V < (3, 13):
        f.stack.append(NULL)
    f.stack.append(value)
    if inst.arg & 1 and _V >= (3, 13):
        f.stack.append(NULL)


def _LOAD_ATTR(f: Run, inst) -> None:
    obj = f.stack.pop()
    method = inst.opname == "LOAD_METHOD" or (_V >= (3, 12) and inst.arg & 1)
    value = getattr(obj, inst.argval)
    if method and _V < (3, 13):
        f.stack.append(NULL)
    f.stack.append(value)
    if method and _V >= (3, 13):
        f.stack.append(NULL)


def _STORE_FAST(f: Run, inst) -> None:
    v = f.stack.pop()
    if v is UNBOUND:
        f.locals.pop(inst.argval, None)
    else:
        f.locals[inst.argval] = v


def _DELETE_FAST(f: Run, inst) -> None:
    _local(f, inst.argval)
    del f.locals[inst.argval]


def _LOAD_DEREF(f: Run, inst) -> None:
    try:
        f.stack.append(_cell(f, inst.argval).cell_contents)
    except ValueError:
        raise NameError(
            f"cannot access free variable {inst.argval!r} where it is not associated with a "
            "value in enclosing scope"
        ) from None


def _STORE_DEREF(f: Run, inst) -> None:
    _cell(f, inst.argval).cell_contents = f.stack.pop()


def _STORE_ATTR(f: Run, inst) -> None:
    obj, value = f.stack.pop(), f.stack.pop()
    setattr(obj, inst.argval, value)


def _BINARY_SUBSCR(f: Run, inst) -> None:
    key = f.stack.pop()
    f.stack.append(as_user(f, operator.getitem, (f.stack.pop(), key)))


def _STORE_SUBSCR(f: Run, inst) -> None:
    key, container, value = f.stack.pop(), f.stack.pop(), f.stack.pop()
    as_user(f, operator.setitem, (container, key, value))


def _DELETE_SUBSCR(f: Run, inst) -> None:
    key = f.stack.pop()
    del f.stack.pop()[key]


def _BINARY_SLICE(f: Run, inst) -> None:
    stop, start = f.stack.pop(), f.stack.pop()
    f.stack.append(f.stack.pop()[start:stop])


def _STORE_SLICE(f: Run, inst) -> None:
    stop, start = f.stack.pop(), f.stack.pop()
    container, value = f.stack.pop(), f.stack.pop()
    container[start:stop] = value


def _BINARY_OP(f: Run, inst) -> None:
    rhs, lhs = f.stack.pop(), f.stack.pop()
    f.stack.append(as_user(f, _BINARY[inst.argrepr], (lhs, rhs)))


def _COMPARE_OP(f: Run, inst) -> None:
    rhs, lhs = f.stack.pop(), f.stack.pop()
    r = as_user(f, _COMPARE[inst.argval], (lhs, rhs))
    f.stack.append(bool(r) if _V >= (3, 13) and inst.arg & 16 else r)


def _BUILD_MAP(f: Run, inst) -> None:
    items = f.popn(2 * inst.arg)
    f.stack.append(dict(zip(items[0::2], items[1::2])))


def _BUILD_CONST_KEY_MAP(f: Run, inst) -> None:
    keys = f.stack.pop()
    f.stack.append(dict(zip(keys, f.popn(inst.arg))))


def _FORMAT_VALUE(f: Run, inst) -> None:
    conv, has_spec = inst.argval
    spec = f.stack.pop() if has_spec else ""
    value = f.stack.pop()
    f.stack.append(format(conv(value) if conv else value, spec))


def _FORMAT_WITH_SPEC(f: Run, inst) -> None:
    spec = f.stack.pop()
    f.stack.append(format(f.stack.pop(), spec))


def _DICT_MERGE(f: Run, inst) -> None:
    other = f.stack.pop()
    target = f.stack[-inst.arg]
    for k in other.keys():
        if k in target:
            raise TypeError(f"got multiple values for keyword argument {k!r}")
    target.update(other)


def _UNPACK_SEQUENCE(f: Run, inst) -> None:
    items = list(f.stack.pop())
    n = inst.arg
    if len(items) < n:
        raise ValueError(f"not enough values to unpack (expected {n}, got {len(items)})")
    if len(items) > n:
        raise ValueError(f"too many values to unpack (expected {n})")
    f.stack.extend(reversed(items))


def _UNPACK_EX(f: Run, inst) -> None:
    before, after = inst.arg & 0xFF, inst.arg >> 8
    items = list(f.stack.pop())
    if len(items) < before + after:
        raise ValueError(
            f"not enough values to unpack (expected at least {before + after}, got {len(items)})"
        )
    mid = items[before : len(items) - after]
    f.stack.extend(reversed(items[:before] + [mid] + items[len(items) - after :]))


def _FOR_ITER(f: Run, inst) -> None:
    try:
        f.stack.append(next(f.stack[-1]))
    except StopIteration:
        f.stack.pop()
        f.jump(inst.argval)
        # 3.12 skips the loop's END_FOR, 3.13 its END_FOR and POP_TOP (as translated).
        f.i += {(3, 11): 0, (3, 12): 1}.get(_V, 2)


def _END_FOR(f: Run, inst) -> None:
    f.popn(2 if _V == (3, 12) else 1)


def _RAISE_VARARGS(f: Run, inst) -> None:
    if inst.arg == 0:
        if f.handling is None:
            raise RuntimeError("No active exception to reraise")
        raise f.handling
    cause = f.stack.pop() if inst.arg == 2 else None
    exc = f.stack.pop()
    if isinstance(exc, type) and issubclass(exc, BaseException):
        exc = exc()
    if isinstance(exc, BaseException) and f.handling is not None and exc is not f.handling:
        exc.__context__ = f.handling  # what CPython chains while an except block runs
    if inst.arg == 2:
        raise exc from cause
    raise exc


def _PUSH_EXC_INFO(f: Run, inst) -> None:
    exc = f.stack.pop()
    f.stack.append(f.handling)
    f.stack.append(exc)
    f.handling = exc


def _POP_EXCEPT(f: Run, inst) -> None:
    f.handling = f.stack.pop()


def _CHECK_EXC_MATCH(f: Run, inst) -> None:
    kind = f.stack.pop()
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not all(isinstance(k, type) and issubclass(k, BaseException) for k in kinds):
        raise TypeError("catching classes that do not inherit from BaseException is not allowed")
    f.stack.append(isinstance(f.stack[-1], kind))


def _RERAISE(f: Run, inst) -> None:
    exc = f.stack.pop()
    if inst.arg:
        f.stack.pop()  # the f_lasti CPython restores; tracebacks here are ours anyway
    raise exc


def _BEFORE_WITH(f: Run, inst) -> None:
    manager = f.stack.pop()
    kind = type(manager)
    try:
        enter, exit_ = kind.__enter__, kind.__exit__
    except AttributeError:
        raise TypeError(f"{kind.__qualname__!r} object does not support the context manager "
                        "protocol") from None
    f.stack.append(types.MethodType(exit_, manager))
    f.stack.append(enter(manager))


def _WITH_EXCEPT_START(f: Run, inst) -> None:
    exc = f.stack[-1]
    f.stack.append(f.stack[-4](type(exc), exc, exc.__traceback__))


def _MAKE_FUNCTION(f: Run, inst) -> None:
    code = f.stack.pop()
    if _V >= (3, 13):
        f.stack.append(types.FunctionType(code, f.fn.__globals__, code.co_name))
        f.stack[-1].__qualname__ = code.co_qualname
        return
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


def _SET_FUNCTION_ATTRIBUTE(f: Run, inst) -> None:
    fn, value = f.stack.pop(), f.stack.pop()
    attr = {0x01: "__defaults__", 0x02: "__kwdefaults__", 0x04: "__annotations__"}.get(inst.arg)
    if attr is None:  # 0x08, a closure: only cells of fn itself reach here
        fn = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, value)
    else:
        setattr(fn, attr, value)
    f.stack.append(fn)


def _CALL_INTRINSIC_1(f: Run, inst) -> None:
    v = f.stack.pop()
    f.stack.append(+v if inst.argrepr == "INTRINSIC_UNARY_POSITIVE" else tuple(v))


def _IMPORT_NAME(f: Run, inst) -> None:
    fromlist, level = f.stack.pop(), f.stack.pop()
    f.stack.append(__import__(inst.argval, f.fn.__globals__, None, fromlist, level))


def _nop(f: Run, inst) -> None:
    pass


def _push(make):
    def run(f: Run, inst) -> None:
        f.stack.append(make(f, inst))
    return run


def _unary(fn):
    def run(f: Run, inst) -> None:
        f.stack.append(fn(f.stack.pop()))
    return run


def _build(make):
    def run(f: Run, inst) -> None:
        f.stack.append(make(f.popn(inst.arg)))
    return run


def _extend(method: str):
    def run(f: Run, inst) -> None:
        v = f.stack.pop()
        getattr(f.stack[-inst.arg], method)(v)
    return run


def _swap(f: Run, inst) -> None:
    s, i = f.stack, inst.arg
    s[-1], s[-i] = s[-i], s[-1]


def _map_add(f: Run, inst) -> None:
    value, key = f.stack.pop(), f.stack.pop()
    f.stack[-inst.arg][key] = value


def _jump(f: Run, inst) -> None:
    f.jump(inst.argval)


def _jump_or_pop(when: bool):
    def run(f: Run, inst) -> None:
        if bool(f.stack[-1]) == when:
            f.jump(inst.argval)
        else:
            f.stack.pop()
    return run


def _store_pair(f: Run, inst) -> None:
    for name in inst.argval:
        f.locals[name] = f.stack.pop()


def _store_load(f: Run, inst) -> None:
    store, load = inst.argval
    f.locals[store] = f.stack.pop()
    f.stack.append(_local(f, load))


def _delete_global(f: Run, inst) -> None:
    try:
        del f.fn.__globals__[inst.argval]
    except KeyError:
        raise NameError(f"name {inst.argval!r} is not defined") from None


OPS: dict[str, Any] = {
    **dict.fromkeys(["NOP", "RESUME", "EXTENDED_ARG", "CACHE", "COPY_FREE_VARS", "PRECALL",
                     "KW_NAMES"], _nop),
    "POP_TOP": lambda f, inst: f.popn(1) and None,
    "PUSH_NULL": lambda f, inst: f.stack.append(NULL),
    "COPY": lambda f, inst: f.stack.append(f.stack[-inst.arg]),
    "SWAP": _swap,
    "LOAD_CONST": _push(lambda f, inst: inst.argval),
    "LOAD_FAST": _push(lambda f, inst: _local(f, inst.argval)),
    "LOAD_FAST_CHECK": _push(lambda f, inst: _local(f, inst.argval)),
    "LOAD_FAST_AND_CLEAR": _push(lambda f, inst: f.locals.pop(inst.argval, UNBOUND)),
    "LOAD_FAST_LOAD_FAST": lambda f, inst: f.stack.extend(_local(f, n) for n in inst.argval),
    "STORE_FAST": _STORE_FAST,
    "STORE_FAST_STORE_FAST": _store_pair,
    "STORE_FAST_LOAD_FAST": _store_load,
    "DELETE_FAST": _DELETE_FAST,
    "LOAD_GLOBAL": _LOAD_GLOBAL,
    "STORE_GLOBAL": lambda f, inst: f.fn.__globals__.__setitem__(inst.argval, f.stack.pop()),
    "DELETE_GLOBAL": _delete_global,
    "LOAD_DEREF": _LOAD_DEREF,
    "STORE_DEREF": _STORE_DEREF,
    "LOAD_CLOSURE": _push(lambda f, inst: _cell(f, inst.argval)),
    "LOAD_ATTR": _LOAD_ATTR,
    "LOAD_METHOD": _LOAD_ATTR,
    "STORE_ATTR": _STORE_ATTR,
    "DELETE_ATTR": lambda f, inst: delattr(f.stack.pop(), inst.argval),
    "BINARY_SUBSCR": _BINARY_SUBSCR,
    "STORE_SUBSCR": _STORE_SUBSCR,
    "DELETE_SUBSCR": _DELETE_SUBSCR,
    "BINARY_SLICE": _BINARY_SLICE,
    "STORE_SLICE": _STORE_SLICE,
    "BINARY_OP": _BINARY_OP,
    "COMPARE_OP": _COMPARE_OP,
    "IS_OP": lambda f, inst: f.stack.append((f.stack.pop() is f.stack.pop()) != bool(inst.arg)),
    "CONTAINS_OP": lambda f, inst: f.stack.append(
        (f.stack.pop(-2) in f.stack.pop()) != bool(inst.arg)),
    "UNARY_NEGATIVE": _unary(operator.neg),
    "UNARY_POSITIVE": _unary(operator.pos),
    "UNARY_INVERT": _unary(operator.invert),
    "UNARY_NOT": _unary(operator.not_),
    "TO_BOOL": _unary(bool),
    "CALL_INTRINSIC_1": _CALL_INTRINSIC_1,
    "BUILD_TUPLE": _build(tuple),
    "BUILD_LIST": _build(list),
    "BUILD_SET": _build(set),
    "BUILD_MAP": _BUILD_MAP,
    "BUILD_CONST_KEY_MAP": _BUILD_CONST_KEY_MAP,
    "BUILD_SLICE": _build(lambda parts: slice(*parts)),
    "BUILD_STRING": _build("".join),
    "FORMAT_VALUE": _FORMAT_VALUE,
    "CONVERT_VALUE": _push(lambda f, inst: inst.argval(f.stack.pop())),
    "FORMAT_SIMPLE": _unary(format),
    "FORMAT_WITH_SPEC": _FORMAT_WITH_SPEC,
    "LIST_APPEND": _extend("append"),
    "SET_ADD": _extend("add"),
    "LIST_EXTEND": _extend("extend"),
    "SET_UPDATE": _extend("update"),
    "DICT_UPDATE": _extend("update"),
    "DICT_MERGE": _DICT_MERGE,
    "MAP_ADD": _map_add,
    "LIST_TO_TUPLE": _unary(tuple),
    "UNPACK_SEQUENCE": _UNPACK_SEQUENCE,
    "UNPACK_EX": _UNPACK_EX,
    **dict.fromkeys(["JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"], _jump),
    **dict.fromkeys(["POP_JUMP_IF_FALSE", "POP_JUMP_FORWARD_IF_FALSE",
                     "POP_JUMP_BACKWARD_IF_FALSE"], _jump_if(operator.not_)),
    **dict.fromkeys(["POP_JUMP_IF_TRUE", "POP_JUMP_FORWARD_IF_TRUE",
                     "POP_JUMP_BACKWARD_IF_TRUE"], _jump_if(bool)),
    **dict.fromkeys(["POP_JUMP_IF_NONE", "POP_JUMP_FORWARD_IF_NONE",
                     "POP_JUMP_BACKWARD_IF_NONE"], _jump_if(lambda v: v is None)),
    **dict.fromkeys(["POP_JUMP_IF_NOT_NONE", "POP_JUMP_FORWARD_IF_NOT_NONE",
                     "POP_JUMP_BACKWARD_IF_NOT_NONE"], _jump_if(lambda v: v is not None)),
    "JUMP_IF_TRUE_OR_POP": _jump_or_pop(True),
    "JUMP_IF_FALSE_OR_POP": _jump_or_pop(False),
    "GET_ITER": _unary(iter),
    "FOR_ITER": _FOR_ITER,
    "END_FOR": _END_FOR,
    "RETURN_VALUE": lambda f, inst: Returned(f.stack.pop()),
    "RETURN_CONST": lambda f, inst: Returned(inst.argval),
    "LOAD_ASSERTION_ERROR": _push(lambda f, inst: AssertionError),
    "RAISE_VARARGS": _RAISE_VARARGS,
    "MAKE_FUNCTION": _MAKE_FUNCTION,
    "SET_FUNCTION_ATTRIBUTE": _SET_FUNCTION_ATTRIBUTE,
    "CALL": _CALL,
    "CALL_KW": _CALL_KW,
    "CALL_FUNCTION_EX": _CALL_FUNCTION_EX,
    "IMPORT_NAME": _IMPORT_NAME,
    "IMPORT_FROM": _push(lambda f, inst: getattr(f.stack[-1], inst.argval)),
    "PUSH_EXC_INFO": _PUSH_EXC_INFO,
    "POP_EXCEPT": _POP_EXCEPT,
    "CHECK_EXC_MATCH": _CHECK_EXC_MATCH,
    "RERAISE": _RERAISE,
    "BEFORE_WITH": _BEFORE_WITH,
    "WITH_EXCEPT_START": _WITH_EXCEPT_START,
}
_INTRINSICS = {"INTRINSIC_UNARY_POSITIVE", "INTRINSIC_LIST_TO_TUPLE"}
_FLAGS = {inspect.CO_GENERATOR: "it is a generator", inspect.CO_COROUTINE: "it is a coroutine",
          inspect.CO_ASYNC_GENERATOR: "it is an async generator",
          inspect.CO_ITERABLE_COROUTINE: "it is a coroutine"}
# Names whose callers look at the frames that call them, beyond file and line: the
# interpreter's frames are not the user's. (Called from an inlined helper, they run in
# that helper's real frame: no problem.)
# (Logging and warnings see the user's line: Note [calls from the user's line].)
_LOOKS_AT_CALLER = frozenset(
    "inspect traceback sys _getframe currentframe breakpoint set_trace locals vars globals "
    "exec eval super exc_info print_stack extract_stack".split())
_reasons: dict[Any, str | None] = {}


def not_resumable(code) -> str | None:
    """Why a frame of `code` cannot be resumed after a break (Note [resuming after a
    graph break]); None when it can."""
    if code in _reasons:
        return _reasons[code]
    reason = _why_not(code)
    if len(_reasons) > 512:
        _reasons.clear()
    _reasons[code] = reason
    return reason


def _why_not(code) -> str | None:
    for flag, what in _FLAGS.items():
        if code.co_flags & flag:
            return what
    if code.co_cellvars:
        return "inner functions close over its variables"
    looks = _LOOKS_AT_CALLER.intersection(code.co_names)
    if looks:
        return (f"it calls {sorted(looks)[0]}, which looks at its caller's frame (logging, "
                "warnings, inspect): run by the resume interpreter it would see the wrong one")
    insts = list(dis.get_instructions(code))
    for inst in insts:
        if inst.opname not in OPS:
            return f"it uses {inst.opname}, which the resume interpreter does not run"
        if inst.opname == "CALL_INTRINSIC_1" and inst.argrepr not in _INTRINSICS:
            return f"it uses {inst.argrepr}"
    return None


_tables: dict[Any, tuple] = {}


def _table(code) -> tuple:
    """(exception table entries, indices of the instructions a real handler covers)."""
    hit = _tables.get(code)
    if hit is None:
        insts = list(dis.get_instructions(code))
        index_of = {inst.offset: i for i, inst in enumerate(insts)}
        entries = dis._parse_exception_table(code)
        protected = set()
        for e in entries:
            # 3.12's inlined comprehensions restore their variable and re-raise: nothing
            # the caller can tell from no handler. Anything else handles the exception.
            i = index_of.get(e.target)
            while i is not None and i < len(insts) and insts[i].opname in _CLEANUP:
                i += 1
            if i is None or i >= len(insts) or insts[i].opname != "RERAISE":
                protected.update(k for k, inst in enumerate(insts)
                                 if e.start <= inst.offset < e.end)
        if len(_tables) > 512:
            _tables.clear()
        hit = _tables[code] = (tuple(entries), frozenset(protected))
    return hit


def handler_for(code, offset: int):
    """The exception table entry covering the instruction at `offset`, or None."""
    for e in _table(code)[0]:
        if e.start <= offset < e.end:
            return e
    return None


def protected(code) -> frozenset:
    """Indices of the instructions inside try/except/finally or with blocks: they run
    here, never in a graph, so that their exceptions reach their handlers."""
    return _table(code)[1]
