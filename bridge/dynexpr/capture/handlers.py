"""Opcode handlers shared by CPython 3.11 and 3.12, one method per opcode, named like
it. Semantics live in operators.py, attrs.py and calls.py; these methods move values
between the stack, locals and cells, as ceval does."""

from __future__ import annotations

from . import attrs, calls, operators, truncate
from .errors import graph_break
from .frame import Frame, LazyArg
from .np_table import QuietErrors, errstate_exit
from .variables import (
    NULL,
    UNBOUND,
    CellVar,
    DictVar,
    IteratorVar,
    ListVar,
    NestedFunctionVar,
    ObjectVar,
    PyVar,
)


class CommonHandlers(Frame):
    def truth(self, v) -> bool:
        """bool(v) as a branch needs it (operators.truth)."""
        return operators.truth(self, v)

    # -- no-ops ---------------------------------------------------------------------
    def NOP(self, inst) -> None:
        pass

    RESUME = EXTENDED_ARG = CACHE = COPY_FREE_VARS = NOP

    # -- stack ----------------------------------------------------------------------
    def POP_TOP(self, inst) -> None:
        self.pop()

    def PUSH_NULL(self, inst) -> None:
        self.push(NULL)

    def COPY(self, inst) -> None:
        self.push(self.stack[-inst.arg])

    def SWAP(self, inst) -> None:
        i = inst.arg
        self.stack[-1], self.stack[-i] = self.stack[-i], self.stack[-1]

    # -- locals, globals, cells ----------------------------------------------------------
    def LOAD_CONST(self, inst) -> None:
        self.push(PyVar(inst.argval))

    def LOAD_FAST(self, inst) -> None:
        self.push(self.load_local(inst.argval))

    def STORE_FAST(self, inst) -> None:
        v = self.pop()
        if v is UNBOUND:  # restoring a variable an inlined comprehension hid (3.12)
            self.locals.pop(inst.argval, None)
        else:
            self.locals[inst.argval] = v

    def DELETE_FAST(self, inst) -> None:
        self.load_local(inst.argval)
        del self.locals[inst.argval]

    def LOAD_GLOBAL(self, inst) -> None:
        if inst.arg & 1:
            self.push(NULL)
        self.push(self.load_global(inst.argval))

    def STORE_GLOBAL(self, inst) -> None:
        graph_break(
            f"assigning the global {inst.argval!r} is a side effect dynexpr does not replay"
        )

    DELETE_GLOBAL = STORE_GLOBAL

    def MAKE_CELL(self, inst) -> None:
        name = inst.argval
        v = self.locals.pop(name, UNBOUND)
        if isinstance(v, LazyArg):  # an argument that a nested function closes over
            v = self.ctx.wrap(v.value, v.source)
        self.cells[name] = CellVar(v, name=name)

    def LOAD_CLOSURE(self, inst) -> None:
        self.push(self.cell(inst.argval))

    def LOAD_DEREF(self, inst) -> None:
        v = self.cell(inst.argval).get()
        if v is UNBOUND:
            graph_break(f"free variable {inst.argval!r} is used before assignment (NameError)")
        self.push(v)

    def STORE_DEREF(self, inst) -> None:
        c = self.cell(inst.argval)
        if c.external:
            graph_break(
                f"assigning the nonlocal {inst.argval!r} of an outer function is a side "
                "effect dynexpr does not replay"
            )
        c.contents = self.pop()

    # -- attributes and items ---------------------------------------------------------
    def STORE_ATTR(self, inst) -> None:
        obj, value = self.pop(), self.pop()
        if (
            isinstance(obj, ObjectVar)
            and self.ctx.wrapped(("attr", obj.source, inst.argval)) is value
        ):
            return  # `self.w += y` stores the same array back: the object does not change
        graph_break(
            f"setting the attribute {inst.argval!r} is a side effect dynexpr does not replay"
        )

    def DELETE_ATTR(self, inst) -> None:
        graph_break(f"deleting the attribute {inst.argval!r} is not supported")

    def BINARY_SUBSCR(self, inst) -> None:
        key = self.pop()
        self.push(operators.getitem(self, self.pop(), key))

    def STORE_SUBSCR(self, inst) -> None:
        key, container, value = self.pop(), self.pop(), self.pop()
        operators.setitem(self, container, key, value)

    def DELETE_SUBSCR(self, inst) -> None:
        graph_break("`del x[...]` is not supported")

    # -- operators ------------------------------------------------------------------
    def BINARY_OP(self, inst) -> None:
        rhs, lhs = self.pop(), self.pop()
        self.push(operators.binary(self, inst.argrepr, lhs, rhs))

    def COMPARE_OP(self, inst) -> None:
        rhs, lhs = self.pop(), self.pop()
        self.push(operators.compare(self, inst.argval, lhs, rhs))

    def IS_OP(self, inst) -> None:
        rhs, lhs = self.pop(), self.pop()
        self.push(PyVar(operators.is_same(self, lhs, rhs) != bool(inst.arg)))

    def CONTAINS_OP(self, inst) -> None:
        container, item = self.pop(), self.pop()
        self.push(PyVar(operators.contains(self, container, item) != bool(inst.arg)))

    def UNARY_NEGATIVE(self, inst) -> None:
        self.push(operators.unary(self, "-", self.pop()))

    def UNARY_INVERT(self, inst) -> None:
        self.push(operators.unary(self, "~", self.pop()))

    def UNARY_NOT(self, inst) -> None:
        self.push(PyVar(not self.truth(self.pop())))

    # -- building -------------------------------------------------------------------
    def BUILD_TUPLE(self, inst) -> None:
        self.push(operators.make_tuple(self.popn(inst.arg)))

    def BUILD_LIST(self, inst) -> None:
        self.push(ListVar(self.popn(inst.arg)))

    def BUILD_MAP(self, inst) -> None:
        items = self.popn(2 * inst.arg)
        keys = [operators.const_key(k) for k in items[0::2]]
        self.push(DictVar(dict(zip(keys, items[1::2]))))

    def BUILD_CONST_KEY_MAP(self, inst) -> None:
        keys = self.pop().value
        self.push(DictVar(dict(zip(keys, self.popn(inst.arg)))))

    def BUILD_SLICE(self, inst) -> None:
        parts = self.popn(inst.arg)
        self.push(PyVar(slice(*[operators.index_part(p) for p in parts])))

    def BUILD_STRING(self, inst) -> None:
        parts = self.popn(inst.arg)
        self.push(PyVar("".join(operators.const_of(p, "an f-string part") for p in parts)))

    def FORMAT_VALUE(self, inst) -> None:
        conv, has_spec = inst.argval
        spec = operators.const_of(self.pop(), "a format spec") if has_spec else ""
        value = operators.const_of(self.pop(), "a value formatted into a string")
        self.push(PyVar(format(conv(value) if conv else value, spec)))

    def LIST_APPEND(self, inst) -> None:
        v = self.pop()
        operators.mutable_list(self.stack[-inst.arg]).items.append(v)

    def LIST_EXTEND(self, inst) -> None:
        v = self.pop()
        operators.mutable_list(self.stack[-inst.arg]).items.extend(operators.unpack(self, v))

    def MAP_ADD(self, inst) -> None:
        value, key = self.pop(), self.pop()
        self.stack[-inst.arg].items[operators.const_key(key)] = value

    def DICT_UPDATE(self, inst) -> None:
        other = self.pop()
        self.stack[-inst.arg].items.update(operators.dict_items(self, other))

    DICT_MERGE = DICT_UPDATE

    def UNPACK_SEQUENCE(self, inst) -> None:
        items = operators.unpack(self, self.pop())
        if len(items) != inst.arg:
            graph_break(f"cannot unpack {len(items)} values into {inst.arg} (ValueError)")
        self.stack.extend(reversed(items))

    def UNPACK_EX(self, inst) -> None:
        before, after = inst.arg & 0xFF, inst.arg >> 8
        items = operators.unpack(self, self.pop())
        if len(items) < before + after:
            graph_break("not enough values to unpack (ValueError)")
        mid = ListVar(items[before : len(items) - after])
        self.stack.extend(reversed(items[:before] + [mid] + items[len(items) - after :]))

    # -- control flow -----------------------------------------------------------------
    def JUMP_FORWARD(self, inst) -> None:
        self.jump(inst)

    JUMP_BACKWARD = JUMP_BACKWARD_NO_INTERRUPT = JUMP_FORWARD

    def _pop_jump(self, inst, when: bool) -> None:
        if self.truth(self.pop()) == when:
            self.jump(inst)

    def _pop_jump_none(self, inst, when: bool) -> None:
        if operators.is_none(self.pop()) == when:
            self.jump(inst)

    def GET_ITER(self, inst) -> None:
        self.push(operators.iterate(self, self.pop()))

    def _for_iter(self, inst) -> bool:
        """Advance the iterator on top; False when it is exhausted (and popped)."""
        budget = self.ctx.budget
        if not isinstance(self.stack[-1], IteratorVar):  # one plain Python started
            graph_break(f"a loop over a {self.stack[-1].describe()} started outside the graph")
        it = self.stack[-1]
        if it.marks is not None:  # where this iteration's values start (reroll.py)
            it.marks[1].append(len(self.ctx.graph.graph.values))
            if truncate.stop_early(self, it):
                self.pop()
                return False
        nxt = it.next()
        if nxt is None:
            self.pop()
            return False
        budget.used_iterations += 1
        if budget.used_iterations > budget.loop_iterations:
            graph_break(
                f"loops ran past {budget.loop_iterations} iterations; dynexpr unrolls "
                "loops, so long ones stay plain Python"
            )
        self.push(nxt)
        return True

    def RETURN_GENERATOR(self, inst) -> None:
        if self.yields is None:
            graph_break("RETURN_GENERATOR outside a generator")
        self.push(PyVar(None))  # popped right away, as by CPython's POP_TOP

    def YIELD_VALUE(self, inst) -> None:
        if self.yields is None:
            graph_break("yield outside a generator")
        self.yields.append(self.pop())
        self.push(PyVar(None))  # what `send` would give back: nothing, iteration only

    def RETURN_VALUE(self, inst) -> None:
        self.result = self.pop()

    def LOAD_ASSERTION_ERROR(self, inst) -> None:
        self.push(PyVar(AssertionError))

    def RAISE_VARARGS(self, inst) -> None:
        graph_break("the function raises an exception here")

    def BEFORE_WITH(self, inst) -> None:
        manager = self.pop()
        if self.ctx.pause is not None and self.ctx.pause.strict and self.depth == 0:
            graph_break("a with block whose body runs as plain Python enters its manager there")
        if not (isinstance(manager, PyVar) and isinstance(manager.value, QuietErrors)):
            graph_break(f"`with` on a {manager.describe()} is not supported (np.errstate is)")
        self.push(PyVar(errstate_exit))  # called as __exit__(None, None, None) at the end
        self.push(PyVar(None))

    # -- functions --------------------------------------------------------------------
    def MAKE_FUNCTION(self, inst) -> None:
        code = self.pop().value
        flags = inst.arg
        closure = self.pop().items if flags & 0x08 else ()
        if flags & 0x04:
            self.pop()  # annotations do not change what the function computes
        kwdefaults = operators.dict_items(self, self.pop()) if flags & 0x02 else {}
        defaults = operators.unpack(self, self.pop()) if flags & 0x01 else ()
        self.push(
            NestedFunctionVar(code, defaults, kwdefaults, closure, self.globals, self.globals_src)
        )

    def KW_NAMES(self, inst) -> None:
        self.kw_names = self.code.co_consts[inst.arg]

    def CALL(self, inst) -> None:
        # 3.11/3.12 layout: [NULL, callable, args...] or [method, self, args...]
        args = self.popn(inst.arg)
        callable_or_self, fn_or_null = self.pop(), self.pop()
        if fn_or_null is NULL:
            fn = callable_or_self
        else:
            fn, args = fn_or_null, [callable_or_self] + args
        kw_names, self.kw_names = self.kw_names, ()
        self.finish_call(fn, args, kw_names)

    def finish_call(self, fn, args: list, kw_names: tuple) -> None:
        """Call fn with args, the last len(kw_names) of them passed by keyword."""
        n_pos = len(args) - len(kw_names)
        kwargs = dict(zip(kw_names, args[n_pos:], strict=True))
        self.push(calls.call(self, fn, args[:n_pos], kwargs))

    def CALL_FUNCTION_EX(self, inst) -> None:
        kwargs = operators.dict_items(self, self.pop()) if inst.arg & 1 else {}
        args = operators.unpack(self, self.pop())
        fn = self.pop_callable_ex()
        self.push(calls.call(self, fn, list(args), {str(k): v for k, v in kwargs.items()}))

    def pop_callable_ex(self):
        fn = self.pop()  # 3.11/3.12: [NULL, callable, args, kwargs?]
        if self.stack and self.stack[-1] is NULL:
            self.pop()
        return fn

    def LOAD_METHOD_OR_ATTR(self, inst, method: bool) -> None:
        obj = self.pop()
        v = attrs.load_attr(self, obj, inst.argval)
        if method:
            self.push(NULL)
        self.push(v)
