"""The opcode table of CPython 3.12: the shared handlers plus what only 3.12 has."""

from __future__ import annotations

from .errors import graph_break
from .handlers import CommonHandlers
from .operators import getitem, index_part, make_tuple, setitem, unary
from .variables import UNBOUND, PyVar

_INTRINSICS = {"INTRINSIC_UNARY_POSITIVE", "INTRINSIC_LIST_TO_TUPLE"}


class Frame312(CommonHandlers):
    def LOAD_ATTR(self, inst) -> None:
        # 3.12 folded LOAD_METHOD into LOAD_ATTR: the low bit asks for [method, self].
        self.LOAD_METHOD_OR_ATTR(inst, method=bool(inst.arg & 1))

    def LOAD_FAST_CHECK(self, inst) -> None:
        self.LOAD_FAST(inst)

    def LOAD_FAST_AND_CLEAR(self, inst) -> None:
        # An inlined comprehension saves the outer variable of the same name.
        self.push(self.locals.pop(inst.argval, UNBOUND))

    def RETURN_CONST(self, inst) -> None:
        self.result = PyVar(inst.argval)

    def CALL_INTRINSIC_1(self, inst) -> None:
        if inst.argrepr not in _INTRINSICS:
            graph_break(f"{inst.argrepr} is not supported")
        v = self.pop()
        if inst.argrepr == "INTRINSIC_UNARY_POSITIVE":
            self.push(unary(self, "+", v))
        else:
            self.push(make_tuple(v.items))

    def BINARY_SLICE(self, inst) -> None:
        stop, start = self.pop(), self.pop()
        container = self.pop()
        self.push(getitem(self, container, PyVar(slice(index_part(start), index_part(stop)))))

    def STORE_SLICE(self, inst) -> None:
        stop, start = self.pop(), self.pop()
        container, value = self.pop(), self.pop()
        setitem(self, container, PyVar(slice(index_part(start), index_part(stop))), value)

    def POP_JUMP_IF_FALSE(self, inst) -> None:
        self._pop_jump(inst, False)

    def POP_JUMP_IF_TRUE(self, inst) -> None:
        self._pop_jump(inst, True)

    def POP_JUMP_IF_NONE(self, inst) -> None:
        self._pop_jump_none(inst, True)

    def POP_JUMP_IF_NOT_NONE(self, inst) -> None:
        self._pop_jump_none(inst, False)

    def FOR_ITER(self, inst) -> None:
        if not self._for_iter(inst):
            # 3.12: the target is the loop's END_FOR, which exhaustion skips.
            self.ip = self.index_of[inst.argval] + 1

    def END_FOR(self, inst) -> None:
        self.popn(2)


NAMES = """
NOP RESUME EXTENDED_ARG CACHE COPY_FREE_VARS POP_TOP PUSH_NULL COPY SWAP
LOAD_CONST LOAD_FAST LOAD_FAST_CHECK LOAD_FAST_AND_CLEAR STORE_FAST DELETE_FAST
LOAD_GLOBAL STORE_GLOBAL DELETE_GLOBAL
MAKE_CELL LOAD_CLOSURE LOAD_DEREF STORE_DEREF STORE_ATTR DELETE_ATTR
BINARY_SUBSCR STORE_SUBSCR DELETE_SUBSCR BINARY_SLICE STORE_SLICE
BINARY_OP COMPARE_OP IS_OP CONTAINS_OP UNARY_NEGATIVE UNARY_INVERT UNARY_NOT CALL_INTRINSIC_1
BUILD_TUPLE BUILD_LIST BUILD_MAP BUILD_CONST_KEY_MAP BUILD_SLICE BUILD_STRING FORMAT_VALUE
LIST_APPEND LIST_EXTEND MAP_ADD DICT_UPDATE DICT_MERGE UNPACK_SEQUENCE UNPACK_EX
JUMP_FORWARD JUMP_BACKWARD JUMP_BACKWARD_NO_INTERRUPT
POP_JUMP_IF_FALSE POP_JUMP_IF_TRUE POP_JUMP_IF_NONE POP_JUMP_IF_NOT_NONE
RETURN_GENERATOR YIELD_VALUE GET_ITER FOR_ITER END_FOR RETURN_VALUE RETURN_CONST
LOAD_ASSERTION_ERROR RAISE_VARARGS
BEFORE_WITH MAKE_FUNCTION KW_NAMES CALL CALL_FUNCTION_EX LOAD_ATTR
""".split()

Frame312.OPCODES = {name: getattr(Frame312, name) for name in NAMES}
Translator = Frame312
