"""Reductions of generated CUDA units (Note [cuda kernels] in cuda_codegen.py): sum prod
min max mean any all as block + grid reductions in a fixed order, var/std as two of them,
argmin/argmax with (value, index) pairs. A mixin of cuda_codegen._Unit."""

from __future__ import annotations

from .. import ir
from .cuda_index import BLOCK, CT, Array, as_tuple, combiner, prod, static, tree, unravel

REDUCE_OPS = ("sum", "prod", "min", "max", "mean", "any", "all", "var", "std", "argmin",
              "argmax")


class Reductions:
    def reduction(self, v: ir.Value, dest: Array) -> None:
        if v.op not in REDUCE_OPS:
            raise NotImplementedError(f"dynexpr cuda codegen: {v.op} is not generated for "
                                      "CUDA yet")
        if v.op in ("argmin", "argmax"):
            self._arg_reduce(v, dest)
            return
        if v.op not in ("var", "std"):
            self._reduce(v, v.op, dest)
            return
        # NumPy's var: the mean first, then the mean square deviation from it, divided
        # by max(n - ddof, 0); std is its square root. Two reductions, the mean kept in
        # a workspace indexed like the output's elements.
        a, acc = v.args[0], CT[v.dtype]
        nd = len(a.shape)
        axes = v.attr("axes")
        red = set(range(nd)) if axes is None else {x % nd for x in as_tuple(axes)}
        M = prod([a.shape[d] for d in range(nd) if d not in red])
        R = prod([a.shape[d] for d in sorted(red)])
        mean = self.workspace(v.dtype, (int(M),) if static(M) is not None else (f"({M})",))
        self._reduce(v, "mean", mean, linear=True)
        ddof = int(v.attr("ddof", 0))
        ops = "dxcu::ops::"

        def deviation(k, e):
            d = f"{ops}sub_op::scalar<{acc}>(dxcu::cast<{acc}>({e}), {k.ptr(mean, False)}[m])"
            return f"{ops}square_op::scalar<{acc}>({d})"

        def final(r):
            q = f"{r} / ({acc})(({R}) - {ddof} > 0 ? ({R}) - {ddof} : 0)"
            return q if v.op == "var" else f"{ops}sqrt_op::scalar<{acc}>({q})"

        self._reduce(v, "sum", dest, element=deviation, final=final)

    def _arg_reduce(self, v: ir.Value, dest: Array) -> None:
        """argmin/argmax: one block per output element (no grid split yet), each thread
        keeping (value, index) of its share, the block's tree keeping NumPy's winner."""
        a = v.args[0]
        nd = len(a.shape)
        axis = v.attr("axis")
        red = set(range(nd)) if axis is None else {axis % nd}
        kept = [d for d in range(nd) if d not in red]
        M, R = prod([a.shape[d] for d in kept]), prod([a.shape[d] for d in sorted(red)])
        T, I = CT[a.dtype], self.I
        take = f"dxcu::ops::detail::arg_takes<{'true' if v.op == 'argmax' else 'false'}, {T}>"
        k = self.new_kernel(tuple(a.shape))
        mi, ri = [f"i{d}" for d in kept], [f"i{d}" for d in sorted(red)]
        expr = k.value(a, k.idx, as_leaf=False)
        out = k.address(dest, _out_index(v, kept, mi, dest), write=True)
        body = [f"DXCU_SHARED {T} sh[{BLOCK}];",
                f"DXCU_SHARED long long shi[{BLOCK}];",
                f"const {I} m = blockIdx.x;",
                "DXCU_THREADS {",
                f"  {T} r = {T}();",
                "  long long ri = -1;",
                *["  " + ln for ln in unravel("m", [a.shape[d] for d in kept], mi, I)],
                f"  for ({I} j = threadIdx.x; j < {R}; j += {BLOCK}) {{",
                *["    " + ln for ln in unravel("j", [a.shape[d] for d in sorted(red)], ri, I)],
                *["    " + ln for ln in k.lines],
                f"    const {T} e = {expr};",
                f"    if ({take}(r, ri, e, j)) {{ r = e; ri = j; }}",
                "  }",
                "  sh[threadIdx.x] = r;",
                "  shi[threadIdx.x] = ri;",
                "}",
                "DXCU_SYNC",
                f"for (unsigned s = {BLOCK // 2}; s > 0; s >>= 1) {{",
                "  DXCU_THREADS {",
                "    const unsigned t = threadIdx.x;",
                (f"    if (t < s && {take}(sh[t], shi[t], sh[t + s], shi[t + s])) "
                 "{ sh[t] = sh[t + s]; shi[t] = shi[t + s]; }"),
                "  }",
                "  DXCU_SYNC",
                "}",
                "DXCU_THREADS {",
                "  if (threadIdx.x == 0) {",
                *["    " + ln for ln in unravel("m", [a.shape[d] for d in kept], mi, I)],
                f"    {dest.name}[{out}] = shi[0];",
                "  }",
                "}"]
        self.add_kernel(f"k{len(self.launches)}", k, body,
                        int(M) if static(M) is not None else M, BLOCK)

    def _reduce(self, v: ir.Value, op: str, dest: Array, *, linear: bool = False,
                element=None, final=None) -> None:
        """v's input reduced with op over v's axes into dest (linear: dest is indexed by
        the output element's number m, not its multi-index); element(kernel, expr) maps
        each input element first, final(r) the combined result."""
        a = v.args[0]
        nd = len(a.shape)
        axes = v.attr("axes")
        red = set(range(nd)) if axes is None else {x % nd for x in as_tuple(axes)}
        kept = [d for d in range(nd) if d not in red]
        M = prod([a.shape[d] for d in kept])
        R = prod([a.shape[d] for d in sorted(red)])
        # G blocks per output: a function of the sizes only (Note [cuda kernels])
        g_rule = (f"(1 if ({M}) >= 64 or ({R}) <= {BLOCK * 16} else "
                  f"min(-(-({R}) // {BLOCK * 16}), max(1, 1024 // ({M}))))")
        fixed = static(M) is not None and static(R) is not None
        G = str(eval(g_rule)) if fixed else "n_parts"
        acc = CT[v.dtype]
        combine, ident = combiner(op, v.dtype)
        if final is None:
            def final(r):
                return f"{r} / ({acc})({R})" if op == "mean" else r

        k = self.new_kernel(tuple(a.shape))
        if not fixed:
            k.params.append(("long long n_parts", ("count", g_rule)))
        I = self.I
        mi, ri = [f"i{d}" for d in kept], [f"i{d}" for d in sorted(red)]
        expr = k.value(a, k.idx, as_leaf=False)
        expr = f"dxcu::cast<{acc}>({expr})" if element is None else element(k, expr)
        part = None if G == "1" else self.workspace(
            v.dtype, (int(M) * int(G),) if fixed else (f"({M}) * {g_rule}",))
        if part is None:
            out = "m" if linear else k.address(dest, _out_index(v, kept, mi, dest), write=True)
            k.ptr(dest, True)
            tail = unravel("m", [a.shape[d] for d in kept], mi, I) + [
                f"{dest.name}[{out}] = {final('sh[0]')};"]
        else:
            tail = [f"{k.ptr(part, True)}[m * {G} + g] = sh[0];"]
        body = [f"DXCU_SHARED {acc} sh[{BLOCK}];",
                f"const {I} m = blockIdx.x / {G}, g = blockIdx.x % {G};",
                "DXCU_THREADS {",
                f"  {acc} r = {ident};",
                *["  " + ln for ln in unravel("m", [a.shape[d] for d in kept], mi, I)],
                f"  for ({I} j = g * {BLOCK} + threadIdx.x; j < {R}; j += {G} * {BLOCK}) {{",
                *["    " + ln for ln in unravel("j", [a.shape[d] for d in sorted(red)],
                                                       ri, I)],
                *["    " + ln for ln in k.lines],
                f"    r = {combine('r', expr)};",
                "  }",
                "  sh[threadIdx.x] = r;",
                "}",
                *tree(acc, combine),
                "DXCU_THREADS {",
                "  if (threadIdx.x == 0) {",
                *["    " + ln for ln in tail],
                "  }",
                "}"]
        grid = int(M) * int(G) if fixed else f"({M}) * {g_rule}"
        self.add_kernel(f"k{len(self.launches)}", k, body, grid, BLOCK)
        if part is not None:
            k2 = self.new_kernel(())
            if not fixed:
                k2.params.append(("long long n_parts", ("count", g_rule)))
            src = k2.ptr(part, False)
            out = ("m" if linear else
                   k2.address(dest, _out_index(v, kept, [f"i{d}" for d in kept], dest), write=True))
            k2.ptr(dest, True)
            body = [f"DXCU_SHARED {acc} sh[{BLOCK}];",
                    f"const {I} m = blockIdx.x;",
                    "DXCU_THREADS {",
                    f"  {acc} r = {ident};",
                    (f"  for ({I} j = threadIdx.x; j < {G}; j += {BLOCK}) "
                     f"r = {combine('r', f'{src}[m * {G} + j]')};"),
                    "  sh[threadIdx.x] = r;",
                    "}",
                    *tree(acc, combine),
                    "DXCU_THREADS {",
                    "  if (threadIdx.x == 0) {",
                    *["    " + ln for ln in unravel("m", [a.shape[d] for d in kept],
                                                           [f"i{d}" for d in kept], I)],
                    f"    {dest.name}[{out}] = {final('sh[0]')};",
                    "  }",
                    "}"]
            self.add_kernel(f"k{len(self.launches)}", k2, body,
                            int(M) if fixed else M, BLOCK)


def _out_index(v: ir.Value, kept, names, dest: Array) -> list[str]:
    """The reduction's output multi-index from the kept input dims (keepdims: 0s)."""
    nd = len(v.args[0].shape)
    if v.attr("keepdims"):
        return [names[kept.index(d)] if d in kept else "0" for d in range(nd)]
    return list(names)
