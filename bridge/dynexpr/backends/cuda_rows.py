"""Row-wise normalisations in generated CUDA units: softmax, log-softmax, logsumexp,
layernorm and their kin as one kernel, one block per row. A mixin of cuda_codegen._Unit.

Note [cuda row kernels]
A run of kernels in which rows never mix (row_blocks.runs: every value it stores has the
run's row count R as its leading extent, and its reductions reduce the other axes with
keepdims) is, on the CPU, evaluated block of rows by block of rows so that each block
stays in cache between its passes. On a GPU the same run becomes one kernel in which a
block of threads owns a row (a grid-stride loop over rows) and takes its kernels as
phases, separated by __syncthreads():
- a reduction is the block's fixed-order tree (the same as a one-block reduction kernel's,
  so its result does not depend on the launch), into a __shared__ scalar that the later
  phases read;
- a pointwise store into an output, or into a temporary read after the run, is a loop of
  the block's threads over the row's elements;
- a pointwise temporary read only inside the run is not stored at all: it is recomputed
  where it is read (softmax's exp(x - max) in the sum and in the quotient), so the row
  goes from memory to registers, and what is read twice comes from L1/L2, not DRAM.
Only reductions over every axis but the leading one qualify (one scalar per row); a run
with another reduction, or an op a phase cannot take, is generated kernel by kernel.
"""

from __future__ import annotations

from .. import ir, row_blocks
from ..schedule import Buffer
from .cuda_index import BLOCK, CT, as_tuple, combiner, ext, prod, tree, unravel

ROW_REDUCTIONS = ("sum", "prod", "min", "max", "mean", "any", "all", "var", "std")
MAX_ROW_GRID = 8192


class Rows:
    def row_runs(self) -> dict:
        """{first kernel: run} of the runs generated as row kernels."""
        return {r.first: r for r in row_blocks.runs(self.s, cache_sized=False)
                if self._row_run_ok(r)}

    def _row_run_ok(self, run) -> bool:
        for kern in self.s.kernels[run.first:run.last + 1]:
            if kern.kind not in ("pointwise", "reduction"):
                return False
            for st in kern.stores:
                if not isinstance(st.buffer, Buffer):
                    return False
                v = st.value
                if kern.kind == "reduction":
                    nd = len(v.args[0].shape)
                    axes = v.attr("axes")
                    if (v.op not in ROW_REDUCTIONS or axes is None or not v.attr("keepdims")
                            or {a % nd for a in as_tuple(axes)} != set(range(1, nd))):
                        return False
        return True

    def row_kernel(self, run) -> None:
        s = self.s
        kernels = s.kernels[run.first:run.last + 1]
        shared = {id(b) for b in run.shared_tmps}
        self.inline = {st.value.id for kern in kernels if kern.kind == "pointwise"
                       for st in kern.stores
                       if st.buffer.kind == "tmp" and id(st.buffer) not in shared}
        self.row_scalars = {}
        k = self.new_kernel(tuple(run.widest.shape))
        I = self.I
        decls, phases = [], []
        try:
            for kern in kernels:
                for st in kern.stores:
                    v = st.value
                    if kern.kind == "reduction":
                        phases += self._row_reduction(k, v, st.buffer, decls,
                                                      keep=st.buffer.kind == "out"
                                                      or id(st.buffer) in shared)
                    elif v.id not in self.inline:
                        phases += self._row_store(k, v, self.array_of(st.buffer))
        finally:
            self.inline, self.row_scalars = set(), {}
        rows = ext(run.rows)
        body = [*decls,
                f"for ({I} row = blockIdx.x; row < {rows}; row += gridDim.x) {{",
                f"  const {I} i0 = row;",
                *["  " + ln for ln in phases],
                "}"]
        grid = (max(1, min(MAX_ROW_GRID, int(run.rows))) if not isinstance(run.rows, str)
                else f"max(1, min({MAX_ROW_GRID}, {rows}))")
        self.add_kernel(f"k{len(self.launches)}", k, body, grid, BLOCK)

    def _row_loop(self, k, shape, inner: list[str]) -> list[str]:
        """A loop of the block's threads over the row's elements of `shape`."""
        I = self.I
        return [f"  for ({I} j = threadIdx.x; j < {prod(shape[1:])}; j += {BLOCK}) {{",
                *["    " + ln for ln in unravel("j", shape[1:], k.idx[1:len(shape)], I)],
                *["    " + ln for ln in k.lines],
                *["    " + ln for ln in inner],
                "  }"]

    def _row_store(self, k, v: ir.Value, dest) -> list[str]:
        k.lines, k.names = [], {}
        expr = k.value(v, k.idx, as_leaf=True)
        addr = k.address(dest, k.idx[:len(v.shape)], write=True)
        return ["DXCU_THREADS {",
                *self._row_loop(k, v.shape, [f"{dest.name}[{addr}] = {expr};"]),
                "}",
                "DXCU_SYNC"]

    def _row_reduction(self, k, v: ir.Value, buffer: Buffer, decls: list, keep: bool):
        a = v.args[0]
        acc = CT[v.dtype]
        n = prod(a.shape[1:])
        if v.op in ("var", "std"):  # NumPy's two passes: the mean, then the deviations
            mean = f"m{v.id}"
            decls.append(f"DXCU_SHARED {acc} {mean};")
            lines = self._row_tree(k, a, "mean", v.dtype, mean,
                                   lambda e: f"dxcu::cast<{acc}>({e})",
                                   lambda r: f"{r} / ({acc})({n})")
            ddof = int(v.attr("ddof", 0))
            ops = "dxcu::ops::"

            def element(e):
                d = f"{ops}sub_op::scalar<{acc}>(dxcu::cast<{acc}>({e}), {mean})"
                return f"{ops}square_op::scalar<{acc}>({d})"

            def final(r):
                q = f"{r} / ({acc})(({n}) - {ddof} > 0 ? ({n}) - {ddof} : 0)"
                return q if v.op == "var" else f"{ops}sqrt_op::scalar<{acc}>({q})"

            op = "sum"
        else:
            lines, op = [], v.op

            def element(e):
                return f"dxcu::cast<{acc}>({e})"

            def final(r):
                return f"{r} / ({acc})({n})" if op == "mean" else r

        name = f"r{v.id}"
        decls.append(f"DXCU_SHARED {acc} {name};")
        lines += self._row_tree(k, a, op, v.dtype, name, element, final)
        if keep:  # an output, or read after the run: stored as well
            dest = self.array_of(buffer)
            addr = k.address(dest, ["i0"] + ["0"] * (len(v.shape) - 1), write=True)
            lines[-2:-2] = ["  DXCU_THREADS {",
                            f"    if (threadIdx.x == 0) {dest.name}[{addr}] = {name};",
                            "  }"]
        self.row_scalars[v.id] = name
        return lines

    def _row_tree(self, k, a: ir.Value, op: str, dtype: str, name: str, element, final):
        """One block reduction of a's row into the shared scalar `name` (of dtype)."""
        acc = CT[dtype]
        combine, ident = combiner(op, dtype)
        k.lines, k.names = [], {}
        expr = element(k.value(a, k.idx))
        return ["{",
                f"  DXCU_SHARED {acc} sh[{BLOCK}];",
                "  DXCU_THREADS {",
                f"    {acc} r = {ident};",
                *["  " + ln for ln in self._row_loop(k, a.shape, [f"r = {combine('r', expr)};"])],
                "    sh[threadIdx.x] = r;",
                "  }",
                *["  " + ln for ln in tree(acc, combine)],
                "  DXCU_THREADS {",
                f"    if (threadIdx.x == 0) {name} = {final('sh[0]')};",
                "  }",
                "  DXCU_SYNC",
                "}"]

