"""Real code objects that resume a frame at an instruction (Note [resume code]).

Note [resume code]
The resume interpreter (interp.py) runs the code after a graph break one Python-level
step per instruction; a loop whose body breaks pays that on every instruction. CPython
itself can run the rest of the frame instead: `resume_code(code, offset, names, kinds)`
builds a code object that takes the frame's live state as arguments and jumps to
`offset`, where the original instructions follow unchanged. Its layout:

    arguments   every name of co_varnames (those not in `names` get any value and are
                deleted by the prologue: unbound, as in the original frame), then one
                argument ".stackN" per stack slot that holds a value (kinds[N] == 0)
    prologue    COPY_FREE_VARS (closures), RESUME, DELETE_FAST per unbound local, the
                stack rebuilt slot by slot (LOAD_FAST + clear for a value, PUSH_NULL for
                a NULL or a cleared local), JUMP_FORWARD to the shifted `offset`
    body        the original co_code

What the prologue shifts (every jump in 3.11+ is relative, so none of those change):
- the exception table's start and target offsets (absolute, in code units);
- the line table gets a no-location entry for the prologue in front: the original
  entries are deltas from co_firstlineno, so the body keeps its lines;
- the localsplus index of each free variable (LOAD_DEREF and friends, 3.13's LOAD_FAST
  of a closure cell) grows by the number of stack arguments; an index that would need
  one more EXTENDED_ARG byte is refused (it would move every later instruction).
Refused (ResumeCodeError, the caller keeps the interpreter): generators and coroutines
(their frames live in the generator object), cell variables (MAKE_CELL runs at the
start, a bound cell's contents are no argument), an offset between KW_NAMES and its
CALL (3.11/3.12 keep the names in the eval loop, not on the stack). The caller must not
resume inside an `except` body (CPython keeps the exception being handled in the
thread state, which a new frame does not inherit).
"""

from __future__ import annotations

import dis
import inspect
import sys
import types

from .memo import Memo

_V = sys.version_info[:2]
_OP = dis.opmap
_EXT = _OP["EXTENDED_ARG"]
_REFUSED_FLAGS = (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
                  | inspect.CO_ITERABLE_COROUTINE)
# Opcodes whose argument is a localsplus index (shifted when it names a free variable).
_INDEXED = frozenset(dis.hasfree) | frozenset(getattr(dis, "haslocal", ()))
# 3.13's two-index opcodes (4 bits each): they only ever name plain locals.
_PACKED = frozenset(_OP[n] for n in ("LOAD_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST",
                                     "STORE_FAST_LOAD_FAST") if n in _OP)
_KW_NAMES = _OP.get("KW_NAMES")
_NO_LOCATION = 0x80 | (15 << 3)  # a line table entry's first byte: code 15, no location


class ResumeCodeError(Exception):
    """This frame cannot resume as real code at that offset (the reason says why)."""


def _units(op: int, arg: int) -> list[int]:
    """The bytes of op with argument arg, EXTENDED_ARG prefixes first."""
    out = []
    shift = (max(arg.bit_length(), 1) - 1) // 8 * 8
    while shift:
        out += [_EXT, (arg >> shift) & 0xFF]
        shift -= 8
    return out + [op, arg & 0xFF]


def _varint(value: int, first: bool) -> bytes:
    """An exception table number: 6-bit chunks, most significant first, bit 6 marks one
    more chunk, bit 7 marks an entry's first byte (Objects/exception_handling_notes.txt)."""
    chunks = [value & 63]
    value >>= 6
    while value:
        chunks.append(value & 63)
        value >>= 6
    chunks.reverse()
    out = bytearray(c | 64 for c in chunks[:-1]) + bytes([chunks[-1]])
    if first:
        out[0] |= 128
    return bytes(out)


def _parse_table(raw: bytes) -> list[tuple[int, int, int, int]]:
    """(start, size, target, depth_lasti) in code units, per entry."""
    entries, i = [], 0

    def number() -> int:
        nonlocal i
        b = raw[i]
        i += 1
        value = b & 63
        while b & 64:
            b = raw[i]
            i += 1
            value = (value << 6) | (b & 63)
        return value

    while i < len(raw):
        entries.append((number(), number(), number(), number()))
    return entries


def _shift_table(raw: bytes, units: int) -> bytes:
    out = bytearray()
    for start, size, target, dl in _parse_table(raw):
        out += _varint(start + units, True) + _varint(size, False)
        out += _varint(target + units, False) + _varint(dl, False)
    return bytes(out)


def _no_location(units: int) -> bytes:
    out = bytearray()
    while units:
        n = min(units, 8)
        out.append(_NO_LOCATION | (n - 1))
        units -= n
    return bytes(out)


def _shift_free(code, insts: list, extra: int) -> bytes:
    """co_code with every localsplus index past the plain locals grown by `extra`."""
    raw = bytearray(code.co_code)
    nvars = len(code.co_varnames)
    for k, inst in enumerate(insts):
        if inst.opcode in _PACKED:
            if inst.arg >> 4 >= nvars or inst.arg & 15 >= nvars:
                raise ResumeCodeError(f"{inst.opname} names a closure cell")
            continue
        if inst.opcode not in _INDEXED or inst.arg is None or inst.arg < nvars or not extra:
            continue
        prefixes = 0
        while k - prefixes - 1 >= 0 and insts[k - prefixes - 1].opcode == _EXT:
            prefixes += 1
        new = inst.arg + extra
        if new >> (8 * (prefixes + 1)):
            raise ResumeCodeError("a free variable's index would need one more EXTENDED_ARG")
        for j in range(prefixes + 1):
            raw[insts[k - j].offset + 1] = (new >> (8 * j)) & 0xFF
    return bytes(raw)


def _start_of(insts: list, offset: int) -> int:
    """The offset a jump to the instruction at `offset` takes: its EXTENDED_ARG prefix."""
    index = {inst.offset: k for k, inst in enumerate(insts)}
    k = index.get(offset)
    if k is None:
        raise ResumeCodeError(f"offset {offset} is not an instruction boundary")
    while k > 0 and insts[k - 1].opcode == _EXT:
        k -= 1
    if _KW_NAMES is not None:
        j = k - 1
        while j >= 0 and insts[j].opname in ("PRECALL", "EXTENDED_ARG"):
            j -= 1
        if j >= 0 and insts[j].opcode == _KW_NAMES:
            raise ResumeCodeError("the offset lies between KW_NAMES and its CALL")
    return insts[k].offset


def _build(key: tuple) -> types.CodeType:
    code, offset, names, kinds = key[:4]
    if code.co_flags & _REFUSED_FLAGS:
        raise ResumeCodeError("generators and coroutines keep their frame in the generator")
    if code.co_cellvars:
        raise ResumeCodeError("inner functions close over its variables (cell variables)")
    insts = list(dis.get_instructions(code))
    target = _start_of(insts, offset)
    varnames = code.co_varnames
    bound = frozenset(names)
    if not bound <= frozenset(varnames):
        raise ResumeCodeError(f"{sorted(bound - set(varnames))} are not locals of the code")
    nvals = sum(1 for k in kinds if k == 0)
    stack_names = tuple(f".stack{j}" for j in range(nvals))
    base = len(varnames)

    pro: list[int] = []
    if code.co_freevars:
        pro += _units(_OP["COPY_FREE_VARS"], len(code.co_freevars))
    pro += _units(_OP["RESUME"], 0)
    for i, n in enumerate(varnames):
        if n not in bound:
            pro += _units(_OP["DELETE_FAST"], i)
    j = 0
    for k in kinds:
        if k == 0:
            if "LOAD_FAST_AND_CLEAR" in _OP:
                pro += _units(_OP["LOAD_FAST_AND_CLEAR"], base + j)
            else:  # 3.11: load, then drop the argument's own reference
                pro += _units(_OP["LOAD_FAST"], base + j) + _units(_OP["DELETE_FAST"], base + j)
            j += 1
        else:  # NULL, or the NULL LOAD_FAST_AND_CLEAR pushes for an unbound local
            pro += _units(_OP["PUSH_NULL"], 0)
    # The jump is relative to its own end, and the body follows right after it, so the
    # distance is the target's offset in the original code, whatever the prologue's size.
    pro += _units(_OP["JUMP_FORWARD"], target // 2)
    shift = len(pro) // 2

    body = _shift_free(code, insts, nvals)
    flags = code.co_flags & ~(inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
    return code.replace(
        co_code=bytes(pro) + body,
        co_argcount=base + nvals, co_posonlyargcount=0, co_kwonlyargcount=0,
        co_nlocals=base + nvals, co_varnames=varnames + stack_names, co_flags=flags,
        co_stacksize=max(code.co_stacksize, len(kinds)),
        co_linetable=_no_location(shift) + code.co_linetable,
        co_exceptiontable=_shift_table(code.co_exceptiontable, shift),
    )


_cache = Memo(_build, limit=1024)


def resume_code(code: types.CodeType, offset: int, names: tuple, kinds: tuple
                ) -> types.CodeType:
    """A code object that runs `code` from the instruction at `offset` (Note [resume
    code]). names: the locals bound there; kinds: the stack from the bottom, 0 a value,
    1 NULL, 2 the NULL of a cleared local. Call it with every co_varnames value (any
    value for an unbound one) followed by the stack's values. Cached per layout."""
    # File and qualified name are in the key: equal code objects of two functions must
    # still name their own file in a traceback.
    return _cache((code, offset, tuple(names), tuple(kinds), code.co_filename,
                   code.co_qualname))


_ENDS = frozenset(("RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"))
_JUMPS = frozenset(_OP[n] for n in ("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP",
                                    "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_NO_INTERRUPT")
                   if n in _OP)


def _loops(code) -> tuple:
    """(head, jump) offsets of each backward jump that the code reaches without an
    exception: the loops of `code`. (3.12+ moves exception cleanup to the end of the
    code and jumps back from there to the code after a `with` or `try`: no loop.)"""
    insts = list(dis.get_instructions(code))
    index = {inst.offset: k for k, inst in enumerate(insts)}
    reached, todo = set(), [0]
    while todo:
        k = todo.pop()
        if k in reached or k >= len(insts):
            continue
        reached.add(k)
        inst = insts[k]
        has_target = inst.opcode in dis.hasjrel or inst.opcode in dis.hasjabs
        if has_target and isinstance(inst.argval, int) and inst.argval in index:
            todo.append(index[inst.argval])
        if inst.opname not in _ENDS and not (has_target and inst.opcode in _JUMPS):
            todo.append(k + 1)
    loops = []
    for k in sorted(reached):
        inst = insts[k]
        if ("BACKWARD" in inst.opname and isinstance(inst.argval, int)
                and inst.argval <= inst.offset):
            # A for loop starts at the GET_ITER before its head: resumed there, the
            # frame holds the iterable, not an iterator to rebuild item by item.
            h = index[inst.argval]
            entry = insts[h - 1].offset if h and insts[h - 1].opname == "GET_ITER" else \
                inst.argval
            loops.append((entry, inst.offset))
    return tuple(sorted(loops))


_loop_memo = Memo(_loops)


def in_loop(code: types.CodeType, offset: int) -> bool:
    """Whether the instruction at `offset` lies between a loop's start (its head, the
    target of a backward jump, or the GET_ITER before it) and its backward jump: code
    that may run again in the same call."""
    return any(start <= offset <= jump for start, jump in _loop_memo(code))


def loop_start_step(code: types.CodeType, insts: list, ip: int, first: dict) -> int | None:
    """For a translation that breaks at instruction index `ip` inside a loop: the step
    (first[index] = the top frame's step that ran instruction index first) of the
    outermost enclosing loop's start that this translation ran, to stop there instead
    (the loop then runs as real bytecode from its start); None if there is none."""
    offset = insts[ip].offset
    index = {inst.offset: k for k, inst in enumerate(insts)}
    for start, jump in _loop_memo(code):  # sorted: outer loops start first
        if start <= offset <= jump:
            step = first.get(index[start])
            if step is not None:
                return step
    return None


def resume_function(fn: types.FunctionType, offset: int, names: tuple, kinds: tuple
                    ) -> types.FunctionType:
    """fn's resume code as a function of fn's globals and closure."""
    code = resume_code(fn.__code__, offset, names, kinds)
    f = types.FunctionType(code, fn.__globals__, code.co_name, None, fn.__closure__)
    f.__qualname__ = fn.__qualname__
    return f


def resume_args(varnames: tuple, locals_: dict, stack: list, kinds: tuple) -> list:
    """The arguments of a resume function: each local's value (None for an unbound
    one), then the stack slots that hold values."""
    args = [locals_.get(n) for n in varnames]
    args += [v for v, k in zip(stack, kinds) if k == 0]
    return args


__all__ = ["ResumeCodeError", "in_loop", "loop_start_step", "resume_code", "resume_function", "resume_args"]
