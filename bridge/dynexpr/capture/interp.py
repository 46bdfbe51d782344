"""The resume interpreter: running the captured function's own bytecode on real values,
one instruction at a time: what happens at a graph break between two compiled segments.
This module holds what all versions share; concrete311.py, concrete312.py and
concrete313.py add each version's opcodes (versions.py picks one, concrete.py is the
interface the rest of dynexpr uses), resumability.py says which code can be resumed
and reads exception tables, and trampolines.py makes the user's-line frames.

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

A break inside a loop does not come here turn after turn: the segment before it stops
where the loop starts and the rest of the call runs as a real code object (Note [resume
code] in resume_code.py); this interpreter keeps the breaks outside loops, explain's
runs, and the layouts resume code refuses.
"""

from __future__ import annotations

import builtins
import operator
import types
from typing import Any

from . import trampolines
from .resumability import handler_for
from .variables import UNBOUND

_NO_KWARGS: dict = {}

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


def _jump_if(value_ok) -> Any:
    def run(f: Run, inst) -> None:
        if value_ok(f.stack.pop()):
            f.jump(inst.argval)
    return run


class Run:
    """One frame's real state while the interpreter runs it: stack, locals, next index."""

    __slots__ = ("fn", "insts", "index_of", "stack", "locals", "i", "handling")
    OPS: dict[str, Any] = {}  # opname -> fn(run, inst); each version's subclass sets it

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
            return self.OPS[inst.opname](self, inst)
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
        """The keyword names of the CALL about to run (3.11/3.12: KW_NAMES before it;
        3.13 has no KW_NAMES, so this finds none)."""
        j = self.i - 2
        if j >= 0 and self.insts[j].opname == "PRECALL":
            j -= 1
        if j >= 0 and self.insts[j].opname == "KW_NAMES":
            return self.fn.__code__.co_consts[self.insts[j].arg]
        return ()


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


# Note [calls from the user's line] (trampolines.py)
def as_user(f: Run, fn: Any, args, kwargs: dict = _NO_KWARGS) -> Any:
    """fn(*args, **kwargs), called from the line of the instruction running now."""
    inst = f.insts[f.i - 1]
    code = f.fn.__code__
    pos = inst.positions
    line = pos.lineno if pos is not None and pos.lineno is not None else code.co_firstlineno
    return trampolines.as_user(code, line, f.fn.__globals__, fn, args, kwargs)


def _call(f: Run, fn: Any, args: list, kw_names: tuple) -> None:
    n = len(args) - len(kw_names)
    kwargs = dict(zip(kw_names, args[n:]))
    f.stack.append(as_user(f, fn, args[:n], kwargs))


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


def _BINARY_OP(f: Run, inst) -> None:
    rhs, lhs = f.stack.pop(), f.stack.pop()
    f.stack.append(as_user(f, _BINARY[inst.argrepr], (lhs, rhs)))


def _BUILD_MAP(f: Run, inst) -> None:
    items = f.popn(2 * inst.arg)
    f.stack.append(dict(zip(items[0::2], items[1::2])))


def _BUILD_CONST_KEY_MAP(f: Run, inst) -> None:
    keys = f.stack.pop()
    f.stack.append(dict(zip(keys, f.popn(inst.arg))))


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


def for_iter(skip: int):
    """FOR_ITER; at exhaustion it jumps to its target and skips `skip` instructions
    there (3.12 skips the loop's END_FOR, 3.13 its END_FOR and POP_TOP, as translated)."""
    def run(f: Run, inst) -> None:
        try:
            f.stack.append(next(f.stack[-1]))
        except StopIteration:
            f.stack.pop()
            f.jump(inst.argval)
            f.i += skip
    return run


def _delete_global(f: Run, inst) -> None:
    try:
        del f.fn.__globals__[inst.argval]
    except KeyError:
        raise NameError(f"name {inst.argval!r} is not defined") from None


# What every version runs alike; concrete31x.py add the rest (and the calls, loads of
# globals and attributes, comparisons, loops and functions, whose stack layout changed).
COMMON: dict[str, Any] = {
    **dict.fromkeys(["NOP", "RESUME", "EXTENDED_ARG", "CACHE", "COPY_FREE_VARS"], _nop),
    "POP_TOP": lambda f, inst: f.popn(1) and None,
    "PUSH_NULL": lambda f, inst: f.stack.append(NULL),
    "COPY": lambda f, inst: f.stack.append(f.stack[-inst.arg]),
    "SWAP": _swap,
    "LOAD_CONST": _push(lambda f, inst: inst.argval),
    "LOAD_FAST": _push(lambda f, inst: _local(f, inst.argval)),
    "STORE_FAST": _STORE_FAST,
    "DELETE_FAST": _DELETE_FAST,
    "STORE_GLOBAL": lambda f, inst: f.fn.__globals__.__setitem__(inst.argval, f.stack.pop()),
    "DELETE_GLOBAL": _delete_global,
    "LOAD_DEREF": _LOAD_DEREF,
    "STORE_DEREF": _STORE_DEREF,
    "LOAD_CLOSURE": _push(lambda f, inst: _cell(f, inst.argval)),
    "STORE_ATTR": _STORE_ATTR,
    "DELETE_ATTR": lambda f, inst: delattr(f.stack.pop(), inst.argval),
    "BINARY_SUBSCR": _BINARY_SUBSCR,
    "STORE_SUBSCR": _STORE_SUBSCR,
    "DELETE_SUBSCR": _DELETE_SUBSCR,
    "BINARY_OP": _BINARY_OP,
    "IS_OP": lambda f, inst: f.stack.append((f.stack.pop() is f.stack.pop()) != bool(inst.arg)),
    "CONTAINS_OP": lambda f, inst: f.stack.append(
        (f.stack.pop(-2) in f.stack.pop()) != bool(inst.arg)),
    "UNARY_NEGATIVE": _unary(operator.neg),
    "UNARY_INVERT": _unary(operator.invert),
    "UNARY_NOT": _unary(operator.not_),
    "BUILD_TUPLE": _build(tuple),
    "BUILD_LIST": _build(list),
    "BUILD_SET": _build(set),
    "BUILD_MAP": _BUILD_MAP,
    "BUILD_CONST_KEY_MAP": _BUILD_CONST_KEY_MAP,
    "BUILD_SLICE": _build(lambda parts: slice(*parts)),
    "BUILD_STRING": _build("".join),
    "LIST_APPEND": _extend("append"),
    "SET_ADD": _extend("add"),
    "LIST_EXTEND": _extend("extend"),
    "SET_UPDATE": _extend("update"),
    "DICT_UPDATE": _extend("update"),
    "DICT_MERGE": _DICT_MERGE,
    "MAP_ADD": _map_add,
    "UNPACK_SEQUENCE": _UNPACK_SEQUENCE,
    "UNPACK_EX": _UNPACK_EX,
    **dict.fromkeys(["JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"], _jump),
    "GET_ITER": _unary(iter),
    "RETURN_VALUE": lambda f, inst: Returned(f.stack.pop()),
    "LOAD_ASSERTION_ERROR": _push(lambda f, inst: AssertionError),
    "RAISE_VARARGS": _RAISE_VARARGS,
    "IMPORT_NAME": _IMPORT_NAME,
    "IMPORT_FROM": _push(lambda f, inst: getattr(f.stack[-1], inst.argval)),
    "PUSH_EXC_INFO": _PUSH_EXC_INFO,
    "POP_EXCEPT": _POP_EXCEPT,
    "CHECK_EXC_MATCH": _CHECK_EXC_MATCH,
    "RERAISE": _RERAISE,
    "BEFORE_WITH": _BEFORE_WITH,
    "WITH_EXCEPT_START": _WITH_EXCEPT_START,
}
