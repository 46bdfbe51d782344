"""dynexpr.row_blocks — which runs of a schedule's kernels may run block of rows by block
of rows (Note [row blocks] in kernels/prelude.hpp), and how each value is read there.

A run qualifies when rows never mix in it: every value it stores, and every pointwise
value fused into those, has the run's rank N and its row count R as the leading extent,
and each reduction reduces other axes only, keeping them (keepdims). Row k of such a value
then depends only on row k of its operands of rank N and on the whole of the others
(lower rank, or a leading extent of 1, broadcast over the rows). Those operands are read
whole in each block; the rest are read as row views. Views, setitem, products and loops
end a run: a view may move the leading axis, and the others write or read across rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import ir, manifest
from .schedule import Buffer, Kernel, Schedule

# Reductions a run takes: the ones codegen spells as dx::NAME(x, axes, keepdims).
_REDUCTIONS = ("sum", "prod", "min", "max", "mean", "var", "std")


@dataclass
class Run:
    first: int  # index of its first kernel in Schedule.kernels
    last: int  # ... and of its last
    rows: object  # R: an int, or a dynamic size's name
    widest: ir.Value  # the row value it reads or writes with the most elements per row
    reads: list[ir.Value]  # inputs and earlier buffers it reads as row views
    # tmp buffers (by index) the run writes that kernels after it read: allocated whole
    # before the run, written row block by row block
    shared_tmps: list[Buffer] = field(default_factory=list)


def runs(s: Schedule, cache_sized: bool = True) -> list[Run]:
    """The runs of two or more consecutive kernels of `s` that qualify, in order;
    cache_sized: only those whose data a CPU cache blocks well (_may_block)."""
    found: list[Run] = []
    k = 0
    while k < len(s.kernels):
        rows = _rows_of(s, s.kernels[k])
        end = k
        if rows is not None:
            rank = len(s.kernels[k].stores[0].value.shape)
            while (end + 1 < len(s.kernels)
                   and _rows_of(s, s.kernels[end + 1]) == rows
                   and len(s.kernels[end + 1].stores[0].value.shape) == rank):
                end += 1
        reads = _row_reads(s, s.kernels[k:end + 1], rows) if end > k else None
        run = None if reads is None else _run(s, k, end, rows, reads)
        if run is not None and (not cache_sized or _may_block(run.widest)):
            found.append(run)
            k = end + 1
        else:
            k += 1
    return found


def _rows_of(s: Schedule, kernel: Kernel):
    """R if every value `kernel` stores keeps rows (rank >= 2, leading extent R != 1,
    into an output or temporary), else None."""
    if kernel.kind not in ("pointwise", "reduction"):
        return None
    rows = None
    for st in kernel.stores:
        v, b = st.value, st.buffer
        if not isinstance(b, Buffer) or b.kind not in ("out", "tmp") or len(v.shape) < 2:
            return None
        if v.op in ir.REDUCTIONS:
            axes = v.attr("axes")
            nd = len(v.args[0].shape)
            if (v.op not in _REDUCTIONS or axes is None or not v.attr("keepdims")
                    or any(a % nd == 0 for a in _axes(axes))):
                return None
        r = v.shape[0]
        if r == 1 or (rows is not None and r != rows):
            return None
        rows = r
    return rows


def _row_reads(s: Schedule, kernels: list[Kernel], rows) -> list[ir.Value] | None:
    """The values outside the kernels' expressions that they read as row views (inputs
    and buffers of rank N with R rows), or None when some read is not row-safe: a view,
    a row-shaped splat, or a value without the rows computed from one with them."""
    rank = len(kernels[0].stores[0].value.shape)
    stored = {st.value.id for k in kernels for st in k.stores}

    def is_row(v: ir.Value) -> bool:
        return len(v.shape) == rank and v.shape[0] == rows

    read: dict[int, ir.Value] = {}
    for k in kernels:
        for st in k.stores:
            todo, seen = [st.value], set()
            while todo:
                w = todo.pop()
                if w.id in seen:
                    continue
                seen.add(w.id)
                if not is_row(w) and not _whole(w, s, stored, is_row):
                    return None
                for a in w.args:
                    if a.op in ir.VIEWS or (a.op == "full" and is_row(a)):
                        return None
                    if s.storage[a.id] == "lazy":
                        todo.append(a)
                    elif is_row(a) and a.id not in stored:
                        read[a.id] = a
                    elif not is_row(a) and a.id in stored:
                        return None
    return list(read.values())


def _whole(v: ir.Value, s: Schedule, stored: set[int], is_row) -> bool:
    """v is the same in every block: neither it nor any lazy value or operand it is
    computed from has the rows."""
    todo = [v]
    while todo:
        u = todo.pop()
        if is_row(u) or u.id in stored or u.op in ir.VIEWS:
            return False
        if s.storage[u.id] == "lazy":
            todo.extend(u.args)
    return True


def _run(s: Schedule, first: int, last: int, rows, reads: list[ir.Value]) -> Run:
    kernels = s.kernels[first:last + 1]
    # What a block holds is set by the widest row value the run reads or writes: a
    # reduction's input (softmax's exp(x - m)) is wider than its keepdims result.
    seen = [st.value for k in kernels for st in k.stores]
    seen += [st.value.args[0] for k in kernels for st in k.stores if st.value.op in ir.REDUCTIONS]
    widest = max(seen + list(reads), key=lambda v: _row_elems(v.shape))
    mine = {st.value.id for k in kernels for st in k.stores}
    shared: list[Buffer] = []
    for k in kernels:
        for st in k.stores:
            b = st.buffer
            if b.kind == "tmp" and b not in shared and any(
                    u.id not in mine and not _fused_into(s, u, mine)
                    for u in s.users[st.value.id]):
                shared.append(b)
    return Run(first, last, rows, widest, reads, shared)


def _fused_into(s: Schedule, u: ir.Value, mine: set[int]) -> bool:
    """Whether lazy value u is computed inside a kernel of the run (one of its users,
    through lazies, is stored by the run)."""
    todo, seen = [u], set()
    while todo:
        w = todo.pop()
        if w.id in seen:
            continue
        seen.add(w.id)
        if w.id in mine:
            return True
        if s.storage[w.id] == "lazy":
            todo.extend(s.users[w.id])
    return False


# kernels/prelude.hpp's row_block_bytes, and the least data row_blocks splits (4 blocks).
BLOCK_BYTES = 256 * 1024
MIN_BYTES = 4 * BLOCK_BYTES


def _may_block(widest: ir.Value) -> bool:
    """False when static extents show that row_blocks would run fn(0, rows) once (data
    that fit in cache, or rows longer than a block): the run then costs compile time and
    buys nothing. Dynamic extents are decided at run time."""
    if any(not isinstance(d, int) for d in widest.shape):
        return True
    itemsize = np.dtype(widest.dtype).itemsize
    row_bytes = _row_elems(widest.shape) * itemsize
    return 0 < row_bytes <= BLOCK_BYTES and widest.shape[0] * row_bytes >= MIN_BYTES


def _row_elems(shape) -> int:
    n = 1
    for d in shape[1:]:
        n *= d if isinstance(d, int) else 1 << 10  # a dynamic extent: assume a long row
    return n


def _axes(axes) -> tuple:
    return tuple(axes) if isinstance(axes, (tuple, list)) else (axes,)


# ------------------------------------------------------------------- emitting a run
def open_run(unit, run: Run) -> tuple:
    """Opens `dxk::row_blocks(..., [&](r0, r1) {` around the run's kernels (Note [row
    blocks] in kernels/prelude.hpp): the outputs and shared temporaries it writes and
    the row values it reads are renamed to row views of [r0, r1)."""
    n = run.last - run.first + 1
    unit.emit(f"// kernels {run.first}-{run.last}: row blocks (Note [row blocks])")
    for b in run.shared_tmps:
        unit.declared_tmp.add(b.index)
        unit.fresh_tmp.add(b.index)
        unit.emit(f"auto t{b.index} = dx::Tensor<{manifest.CTYPE[b.dtype]}>::empty("
                  f"{unit.shape(b.shape)});")
    w = run.widest
    unit.emit(f"dxk::row_blocks({unit.shape(w.shape)}, sizeof({manifest.CTYPE[w.dtype]}), "
              f"{n}, [&](dx::index_t r0, dx::index_t r1) {{")
    views = [unit.buffer_ref(st.buffer) for k in unit.s.kernels[run.first:run.last + 1]
             for st in k.stores if st.buffer.kind == "out" or st.buffer in run.shared_tmps]
    views += [unit.ref(v) for v in run.reads]
    unit.rename = {name: name + "r" for name in dict.fromkeys(views)}
    for name, row in unit.rename.items():
        unit.emit(f"auto {row} = dxk::rows({name}, r0, r1);")
    unit.pending = []  # direct loops wait to run row by row together (codegen.flush_direct)
    return set(unit.names), set(unit.declared_tmp)


def close_run(unit, run: Run, saved: tuple) -> None:
    """Closes the lambda open_run opened; what was declared inside it is forgotten."""
    names, tmps = saved
    unit.flush_direct()
    unit.pending = None
    unit.rename = {}
    unit.emit("});")
    # Names declared inside the block's lambda are out of scope after it.
    for k in [k for k in unit.names if k not in names]:
        del unit.names[k]
    unit.declared_tmp &= tmps
    unit.fresh_tmp -= {b.index for b in run.shared_tmps}
