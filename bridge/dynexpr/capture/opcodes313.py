"""The opcode table of CPython 3.13: 3.12's handlers, plus what 3.13 changed.

3.13 moved NULL after the callable ([callable, self_or_null, args...]), replaced
KW_NAMES by CALL_KW, split MAKE_FUNCTION's flags into SET_FUNCTION_ATTRIBUTE, made
branches take exact bools (TO_BOOL, COMPARE_OP's bool flag) and fused LOAD_FAST pairs.
"""

from __future__ import annotations

from .errors import graph_break
from .opcodes312 import NAMES as NAMES_312
from .opcodes312 import Frame312
from .attrs import load_attr
from .operators import compare, const_of, dict_items, unpack
from .variables import NULL, NestedFunctionVar, PyVar

_FUNCTION_ATTRIBUTES = {0x01: "defaults", 0x02: "kwdefaults", 0x04: "annotations", 0x08: "closure"}


class Frame313(Frame312):
    def LOAD_GLOBAL(self, inst) -> None:
        self.push(self.load_global(inst.argval))
        if inst.arg & 1:
            self.push(NULL)

    def LOAD_ATTR(self, inst) -> None:
        self.push(load_attr(self, self.pop(), inst.argval))
        if inst.arg & 1:  # [method, self] or [attribute, NULL]; we always give the latter
            self.push(NULL)

    def CALL(self, inst) -> None:
        self._call(inst.arg, ())

    def CALL_KW(self, inst) -> None:
        self._call(inst.arg, self.pop().value)

    def _call(self, n: int, kw_names: tuple) -> None:
        args = self.popn(n)
        self_or_null, fn = self.pop(), self.pop()
        if self_or_null is not NULL:
            args = [self_or_null] + args
        self.finish_call(fn, args, kw_names)

    def pop_callable_ex(self):
        self.pop()  # 3.13: [callable, NULL, args, kwargs?]
        return self.pop()

    def MAKE_FUNCTION(self, inst) -> None:
        code = self.pop().value
        self.push(NestedFunctionVar(code, (), {}, (), self.globals, self.globals_src))

    def SET_FUNCTION_ATTRIBUTE(self, inst) -> None:
        fn, value = self.pop(), self.pop()
        what = _FUNCTION_ATTRIBUTES.get(inst.arg)
        if what == "defaults":
            fn.defaults = tuple(unpack(self, value))
        elif what == "kwdefaults":
            fn.kwdefaults = dict_items(self, value)
        elif what == "closure":
            fn.closure = tuple(value.items)
        elif what != "annotations":
            graph_break(f"SET_FUNCTION_ATTRIBUTE {inst.arg} is not supported")
        self.push(fn)

    # Note [TO_BOOL is the branch's business]: TO_BOOL (and COMPARE_OP's bool flag,
    # which is a TO_BOOL merged into it) only ever feeds a POP_JUMP_IF_* or UNARY_NOT,
    # and those already take the truth of what they pop, as in 3.12. Taking it here
    # instead would break one instruction early: the comparison feeding an `if` on
    # array data would run as Python rather than in the graph before the break.
    def TO_BOOL(self, inst) -> None:
        pass

    def COMPARE_OP(self, inst) -> None:
        rhs, lhs = self.pop(), self.pop()
        self.push(compare(self, inst.argval, lhs, rhs))

    def LOAD_FAST_LOAD_FAST(self, inst) -> None:
        for name in inst.argval:
            self.push(self.load_local(name))

    def STORE_FAST_STORE_FAST(self, inst) -> None:
        for name in inst.argval:
            self.locals[name] = self.pop()

    def STORE_FAST_LOAD_FAST(self, inst) -> None:
        store, load = inst.argval
        self.locals[store] = self.pop()
        self.push(self.load_local(load))

    def CONVERT_VALUE(self, inst) -> None:
        self.push(PyVar(inst.argval(const_of(self.pop(), "a value formatted into a string"))))

    def FORMAT_SIMPLE(self, inst) -> None:
        self.push(PyVar(format(const_of(self.pop(), "a value formatted into a string"))))

    def FORMAT_WITH_SPEC(self, inst) -> None:
        spec = const_of(self.pop(), "a format spec")
        self.push(PyVar(format(const_of(self.pop(), "a value formatted into a string"), spec)))

    def FOR_ITER(self, inst) -> None:
        if not self._for_iter(inst):
            # 3.13: exhaustion skips the loop's END_FOR and POP_TOP.
            self.ip = self.index_of[inst.argval] + 2

    def END_FOR(self, inst) -> None:
        self.pop()


_REMOVED = {"KW_NAMES", "FORMAT_VALUE"}
NAMES = (
    [n for n in NAMES_312 if n not in _REMOVED]
    + """
CALL_KW SET_FUNCTION_ATTRIBUTE TO_BOOL LOAD_FAST_LOAD_FAST STORE_FAST_STORE_FAST
STORE_FAST_LOAD_FAST CONVERT_VALUE FORMAT_SIMPLE FORMAT_WITH_SPEC
""".split()
)

Frame313.OPCODES = {name: getattr(Frame313, name) for name in NAMES}
Translator = Frame313
