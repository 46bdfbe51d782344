"""The opcode table of CPython 3.11: the shared handlers plus what only 3.11 has."""

from __future__ import annotations

from .handlers import CommonHandlers
from .operators import make_tuple, unary


class Frame311(CommonHandlers):
    def PRECALL(self, inst) -> None:
        pass  # 3.11 prepares bound methods here; CALL does the work

    def LOAD_METHOD(self, inst) -> None:
        self.LOAD_METHOD_OR_ATTR(inst, method=True)

    def LOAD_ATTR(self, inst) -> None:
        self.LOAD_METHOD_OR_ATTR(inst, method=False)

    def UNARY_POSITIVE(self, inst) -> None:
        self.push(unary(self, "+", self.pop()))

    def LIST_TO_TUPLE(self, inst) -> None:
        self.push(make_tuple(self.pop().items))

    def POP_JUMP_FORWARD_IF_FALSE(self, inst) -> None:
        self._pop_jump(inst, False)

    def POP_JUMP_FORWARD_IF_TRUE(self, inst) -> None:
        self._pop_jump(inst, True)

    def POP_JUMP_FORWARD_IF_NONE(self, inst) -> None:
        self._pop_jump_none(inst, True)

    def POP_JUMP_FORWARD_IF_NOT_NONE(self, inst) -> None:
        self._pop_jump_none(inst, False)

    POP_JUMP_BACKWARD_IF_FALSE = POP_JUMP_FORWARD_IF_FALSE
    POP_JUMP_BACKWARD_IF_TRUE = POP_JUMP_FORWARD_IF_TRUE
    POP_JUMP_BACKWARD_IF_NONE = POP_JUMP_FORWARD_IF_NONE
    POP_JUMP_BACKWARD_IF_NOT_NONE = POP_JUMP_FORWARD_IF_NOT_NONE

    def JUMP_IF_TRUE_OR_POP(self, inst) -> None:
        if self.truth(self.stack[-1]):
            self.jump(inst)
        else:
            self.pop()

    def JUMP_IF_FALSE_OR_POP(self, inst) -> None:
        if not self.truth(self.stack[-1]):
            self.jump(inst)
        else:
            self.pop()

    def FOR_ITER(self, inst) -> None:
        if not self._for_iter(inst):
            self.jump(inst)  # 3.11: the target follows the loop directly


NAMES = """
NOP RESUME EXTENDED_ARG CACHE COPY_FREE_VARS POP_TOP PUSH_NULL COPY SWAP
LOAD_CONST LOAD_FAST STORE_FAST DELETE_FAST LOAD_GLOBAL STORE_GLOBAL DELETE_GLOBAL
MAKE_CELL LOAD_CLOSURE LOAD_DEREF STORE_DEREF STORE_ATTR DELETE_ATTR
BINARY_SUBSCR STORE_SUBSCR DELETE_SUBSCR BINARY_OP COMPARE_OP IS_OP CONTAINS_OP
UNARY_NEGATIVE UNARY_INVERT UNARY_NOT UNARY_POSITIVE
BUILD_TUPLE BUILD_LIST BUILD_MAP BUILD_CONST_KEY_MAP BUILD_SLICE BUILD_STRING FORMAT_VALUE
LIST_APPEND LIST_EXTEND LIST_TO_TUPLE MAP_ADD DICT_UPDATE DICT_MERGE UNPACK_SEQUENCE UNPACK_EX
JUMP_FORWARD JUMP_BACKWARD JUMP_BACKWARD_NO_INTERRUPT
POP_JUMP_FORWARD_IF_FALSE POP_JUMP_FORWARD_IF_TRUE POP_JUMP_FORWARD_IF_NONE
POP_JUMP_FORWARD_IF_NOT_NONE POP_JUMP_BACKWARD_IF_FALSE POP_JUMP_BACKWARD_IF_TRUE
POP_JUMP_BACKWARD_IF_NONE POP_JUMP_BACKWARD_IF_NOT_NONE JUMP_IF_TRUE_OR_POP JUMP_IF_FALSE_OR_POP
RETURN_GENERATOR YIELD_VALUE GET_ITER FOR_ITER RETURN_VALUE
LOAD_ASSERTION_ERROR RAISE_VARARGS BEFORE_WITH
MAKE_FUNCTION KW_NAMES PRECALL CALL CALL_FUNCTION_EX LOAD_METHOD LOAD_ATTR
""".split()

Frame311.OPCODES = {name: getattr(Frame311, name) for name in NAMES}
Translator = Frame311
