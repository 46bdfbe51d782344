"""dynexpr.codegen — renders a Schedule as one C++ translation unit in dynexpr's expression
templates. The text is a contract (tests/python/golden/) and the compile cache's key.

Note [one unit per graph]
A graph is one unit, its kernels consecutive statements of one `run` function: a call is
one dlopen'd symbol, one GIL release and one argument check, temporaries between kernels
never reach Python, and the compiler (and its 190 MB precompiled prelude) runs once per
graph rather than once per kernel.

    #include "prelude.hpp"            // kernels/prelude.hpp (precompiled)
    static void run(dxk::frame& f) {
      const auto x0 = f.input<float>(0, {1024});      // checked: dtype, rank, extents
      const auto o0 = f.output<float>(0, {1024});
      // kernel 0: pointwise -> out[0]
      const auto v2 = dxk::typed<float>(x0 * 2.0);    // lazy: fused into its user
      dx::assign(o0, dxk::typed<float>(dx::tanh(v2)));
    }
    DYNEXPR_UNIT(run, 1, 1)

Every value is pinned to the dtype the graph gives it (dxk::typed<T>); constants marked
weak (NEP 50 Python scalars) are written as C++ literals, which dynexpr promotes as NumPy 2
does; other constants are dx::scalar<T>. Shapes are literals, or `dxk::dyn{k}` for a
dynamic size bound from the arguments at run time.
"""

from __future__ import annotations

import math

import numpy as np

from . import codegen_loop, ir, manifest, row_blocks
from .schedule import Buffer, Schedule

FORMAT = 1  # bump when the shape of generated units changes

CTYPE = manifest.CTYPE  # dtype name -> C++ element type
# The arithmetic ops are written with their C++ operators (`x0 * 2.0`), the rest as named
# functions; the text is the cache key, so this choice is part of the format.
INFIX = {n: o["operator"] for n, o in manifest.OPS.items() if o["operator"] in ("+", "-", "*", "/")}
REDUCE_FN = {"sum": "sum", "prod": "prod", "min": "min", "max": "max", "mean": "mean",
             "any": "any", "all": "all", "var": "var", "std": "std"}


def generate(s: Schedule) -> str:
    return _Unit(s).render()


class _Unit:
    def __init__(self, s: Schedule, functions: list[str] | None = None,
                 direct_fns: list[str] | None = None):
        self.s = s
        # Loop bodies' functions (codegen_loop.py), shared with the units of nested
        # bodies: all are emitted before `run`, each before its caller.
        self.functions: list[str] = [] if functions is None else functions
        self.lines: list[str] = []
        self.names: dict[int, str] = {}  # value id -> C++ name (declared leaves/lazies)
        self.declared_tmp: set[int] = set()
        self.written_out: set[int] = set()  # outputs already stored to (assign_fresh once)
        self.sym_index = {name: k for k, name in enumerate(s.symbols)}
        # Inside a run of row blocks (row_blocks.open_run): C++ name -> its row view's name.
        self.rename: dict[str, str] = {}
        self.fresh_tmp: set[int] = set()  # tmps allocated empty whose first write is next
        # Note [direct pointwise loops]: their functions, shared with loop bodies' units
        # like self.functions, and emitted before both
        self.direct_fns: list[str] = [] if direct_fns is None else direct_fns
        # Inside a run of row blocks: the direct loops not run yet (flush_direct)
        self.pending: list | None = None
        # Note [mean and var together], Note [max and sum of exps in captured code]: value
        # id -> (dx:: function, ddof, the pair's ids, the value the call reads or None:
        # the reduced one), and the C++ names each pair's results wait in until their
        # value takes them
        self.pairs: dict[int, tuple] = {}
        self.paired: dict[int, str] = {}
        self.n_pairs = 0

    def literal(self, value, dtype: str) -> str:
        """A C++ literal of `value` as `dtype` (for codegen_loop, which codegen imports)."""
        return scalar_literal(value, dtype)

    # -------------------------------------------------------------------------- text
    def emit(self, line: str = "") -> None:
        self.lines.append(("  " * (1 + bool(self.rename)) + line) if line else "")

    def render(self) -> str:
        s = self.s
        head = [
            f"// dynexpr generated unit (format {FORMAT}). Do not edit: this text is the",
            "// compile cache's key. Graph:",
        ]
        head += ["//   " + line for line in s.graph.canonical().splitlines()]
        kinds = ", ".join(k.kind for k in s.kernels)
        head.append(f"// {len(s.kernels)} kernel(s){': ' + kinds if kinds else ''}"
                    f"{'' if s.fuse else ' (unfused)'}")
        head += ['#include "prelude.hpp"']
        if "matmul" in codegen_loop.all_ops(s.graph):
            head.append("#include <dynexpr/interop/matmul.hpp>")  # Note [matmul without Eigen in units]
        head += [
            "",
            "namespace dx = dynexpr;",
            "namespace dxk = dynexpr::kernel;",
        ]
        run = self.function("run")
        if self.direct_fns:
            head += ["namespace hn = hwy::HWY_NAMESPACE;", ""] + self.direct_fns
        if self.functions:
            head += codegen_loop.HELPERS + self.functions
        tail = ["", f"DYNEXPR_UNIT(run, {s.n_inputs}, {len(s.outputs)})", ""]
        return "\n".join(head + [""] + run + tail)

    def function(self, name: str) -> list[str]:
        """The lines of `static void name(dxk::frame& f)` computing this schedule."""
        s = self.s
        self.lines = [f"static void {name}([[maybe_unused]] dxk::frame& f) {{"]
        for i, (dtype, shape, written) in enumerate(s.inputs):
            fn = "inout" if written else "input"
            self.emit(f"{'' if written else 'const '}auto x{i} = "
                      f"f.{fn}<{CTYPE[dtype]}>({i}, {self.extents(shape)});")
        for d, (src, _) in s.symbols.items():
            if src == ir.AFFINE:  # Note [dynamic extents] (ir.py): from input k (i: 0)
                k, mul, add = ir.parse_affine_extent(d)
                self.emit(f"f.bind_extent({self.sym_index[d]}, "
                          f"{mul} * x{k}.data()[0] + {add});")
        for b in s.outputs:
            self.emit(f"const auto o{b.index} = f.output<{CTYPE[b.dtype]}>"
                      f"({b.index}, {self.extents(b.shape)});")
        runs = {r.first: r for r in row_blocks.runs(s)} if s.fuse else {}
        in_runs = {n for r in runs.values() for n in range(r.first, r.last + 1)}
        self.pairs = {**_moment_pairs(s, in_runs), **_max_sumexp_pairs(s, in_runs)} if s.fuse else {}
        self.paired = {}
        run = None
        for n, k in enumerate(s.kernels):
            if n in runs:
                run = runs[n]
                saved = row_blocks.open_run(self, run)
            targets = ", ".join(self.buffer_label(st.buffer) for st in k.stores)
            self.emit(f"// kernel {n}: {k.kind} -> {targets}")
            for st in k.stores:
                if k.kind == "copy":
                    self.flush_direct()
                    self.emit(f"dx::assign({self.buffer_ref(st.buffer)}, {self.ref(st.value)});")
                    if st.buffer.kind == "out":
                        self.written_out.add(st.buffer.index)
                else:
                    self.store(st.value, st.buffer)
            if run is not None and n == run.last:
                row_blocks.close_run(self, run, saved)
                run = None
        lines = [line.rstrip() for line in self.lines] + ["}"]
        self.lines = []
        return lines

    def bref(self, b: Buffer) -> str:
        """buffer_ref, or its row view inside a run of row blocks."""
        name = self.buffer_ref(b)
        return self.rename.get(name, name)

    # ------------------------------------------------------------------------ shapes
    def dim(self, d) -> str:
        if not isinstance(d, str):
            return str(int(d))
        if d not in self.sym_index:
            raise NotImplementedError(f"dynexpr codegen: extent {d!r} is bound by no input")
        return f"dxk::dyn{{{self.sym_index[d]}}}"

    def extents(self, shape) -> str:
        return "{" + ", ".join(self.dim(d) for d in shape) + "}"

    def shape(self, shape) -> str:
        if any(isinstance(d, str) for d in shape):
            return f"f.shape({self.extents(shape)})"
        return "dx::Shape{" + ", ".join(str(int(d)) for d in shape) + "}"

    # ----------------------------------------------------------------------- buffers
    @staticmethod
    def buffer_label(b: Buffer) -> str:
        return f"{b.kind}[{b.index}]"

    @staticmethod
    def buffer_ref(b: Buffer) -> str:
        return {"in": "x", "out": "o", "tmp": "t"}[b.kind] + str(b.index)

    def storage(self, v: ir.Value):
        return self.s.storage[v.id]

    # ------------------------------------------------------------------------ values
    def ref(self, v: ir.Value, weak_ok: bool = False) -> str:
        """A C++ expression naming v's value (declaring leaves and lazies on first use)."""
        st = self.storage(v)
        if isinstance(st, Buffer):
            return self.bref(st)
        if v.op == "input":
            return self.rename.get(f"x{v.attr('index')}", f"x{v.attr('index')}")
        if v.op == "const":
            return self.const(v, weak_ok)
        if v.id in self.names:
            return self.names[v.id]
        # Note [no recursion on graph depth] (ir.py): a fused chain as long as an unrolled
        # loop would recurse ref -> pointwise -> ref once per link; declare the lazy
        # values below v first, deepest first (the order the recursion would emit them).
        for u in ir.walk([a for a in v.args if self._declares(a)], self._declares):
            if u.id not in self.names:
                self.ref(u)
        return self._declare(v)

    def _declares(self, v: ir.Value) -> bool:
        """Whether ref(v) would emit a declaration of v (a lazy or view value not yet named)."""
        return (v.id not in self.names and v.op not in ("input", "const")
                and not isinstance(self.storage(v), Buffer))

    def _declare(self, v: ir.Value) -> str:
        name = f"v{v.id}"
        if v.op == "full":
            self.emit(f"static constexpr {CTYPE[v.dtype]} c{v.id} = "
                      f"{scalar_literal(v.attr('value'), v.dtype)};")
            self.emit(f"const auto {name} = dxk::splat(&c{v.id}, {self.shape(v.shape)});")
        elif v.op in ir.VIEWS:
            self.emit(f"const auto {name} = {self.view(v)};")
        else:
            self.emit(f"const auto {name} = {self.pointwise(v)};")
        self.names[v.id] = name
        return name

    def const(self, v: ir.Value, weak_ok: bool) -> str:
        value = v.attr("value")
        weak = v.attr("weak")
        if weak_ok and weak:
            return weak_literal(value, weak)
        return f"dx::scalar<{CTYPE[v.dtype]}>({scalar_literal(value, v.dtype)})"

    def operand(self, a: ir.Value, result_dtype: str, arrays: bool) -> str:
        r = self.ref(a, weak_ok=arrays)
        if a.ndim == 0 and isinstance(self.storage(a), Buffer) and a.op in manifest.OPS:
            # Note [0-d values are computed once] (schedule.py): read as a scalar, as a
            # constant is, not as a 0-d array broadcast in the packet loop.
            r = f"dx::scalar<{CTYPE[a.dtype]}>({r}.data()[0])"
        if (result_dtype in ("float32", "float64") and a.dtype in ("bool", "uint8")
                and not (a.op == "const" and a.attr("weak"))):
            # NumPy computes in the promoted float type; dynexpr's float functions take no
            # bool/uint8 (NumPy would give float16 there), so convert first.
            r = f"dx::cast<{CTYPE[result_dtype]}>({r})"
        return r

    def pointwise(self, v: ir.Value) -> str:
        T = CTYPE[v.dtype]
        if v.op == "astype":
            return f"dx::cast<{T}>({self.ref(v.args[0])})"
        arrays = any(not (a.op == "const" and a.attr("weak")) for a in v.args)
        if v.op == "where":
            c = self.ref(v.args[0], weak_ok=False)
            a, b = (self.operand(x, v.dtype, arrays) for x in v.args[1:])
            return f"dxk::typed<{T}>(dx::where({c}, {a}, {b}))"
        args = [self.operand(a, v.dtype, arrays) for a in v.args]
        op = ir.computed_op(v)
        # Note [small powers]: x**2 is np.square, as NumPy itself computes it; x**3 is
        # x * x**2 (within the 1-2 ulp of the SIMD pow, at a tenth of its cost).
        if op == "x**2":
            return f"dxk::typed<{T}>(dx::square({args[0]}))"
        if op == "x**3":
            return f"dxk::typed<{T}>({args[0]} * dx::square({args[0]}))"
        if op in INFIX and len(args) == 2:
            expr = f"{args[0]} {INFIX[op]} {args[1]}"
        else:
            expr = f"dx::{op}({', '.join(args)})"
        return f"dxk::typed<{T}>({expr})"

    def view(self, v: ir.Value) -> str:
        base = self.ref(v.args[0])
        op = v.op
        nd_in = len(v.args[0].shape)
        if op == "getitem":
            items = self.index_items(v)
            return f"{base}.slice({', '.join(items)})" if items else f"dxk::view_of({base})"
        if op == "transpose":
            axes = v.attr("axes")
            axes = tuple(range(nd_in))[::-1] if axes is None else tuple(a % nd_in for a in axes)
            return f"{base}.permute(dx::Shape{{{', '.join(map(str, axes))}}})"
        if op == "broadcast_to":
            return f"{base}.broadcast_to({self.shape(v.shape)})"
        if op == "expand_dims":
            axes = sorted(a % len(v.shape) for a in _tuple(v.attr("axis")))
            return f"dxk::expand_dims(dxk::view_of({base}), {{{', '.join(map(str, axes))}}})"
        if op == "squeeze":
            ax = v.attr("axis")
            if ax is None:
                axes = [k for k, d in enumerate(v.args[0].shape) if d == 1]
            else:
                axes = sorted(a % nd_in for a in _tuple(ax))
            return f"dxk::squeeze(dxk::view_of({base}), {{{', '.join(map(str, axes))}}})"
        if op == "reshape":
            self.emit(f"dx::Tensor<{CTYPE[v.dtype]}> keep{v.id};")
            return f"dxk::reshape(dxk::view_of({base}), {self.shape(v.shape)}, keep{v.id})"
        raise NotImplementedError(f"dynexpr codegen: view op {op}")

    def index_items(self, v: ir.Value) -> list[str]:
        """v's index items as C++ (Note [dynamic offsets], ir.py: a dynamic offset reads
        its int64[] argument, a body input, when the view is taken)."""
        items = []
        for it in v.attr("index"):
            if it[0] in ("dyn", "dslice"):
                a = v.args[it[1]]
                if a.op != "input":
                    raise NotImplementedError(f"dynexpr codegen: a dynamic offset from {a}")
                at = f"({it[2]} * x{a.attr('index')}.data()[0] + {it[3]})"
                if it[0] == "dyn":
                    items.append(f"static_cast<dx::index_t>{at}")
                else:  # `length` elements from there (a stop below 0 is "past index 0")
                    _, _, _, _, length, step = it
                    if isinstance(length, tuple):  # Note [dynamic extents]
                        n = f"std::max<std::int64_t>(0, {length[0]} * x{a.attr('index')}" \
                            f".data()[0] + {length[1]})"
                        stop = f"({at} + {step} * {n})"
                    else:
                        stop = f"({at} + {step * length})"
                    items.append(f"dx::slice({at}, {stop} < 0 ? std::optional<dx::index_t>() "
                                 f": std::optional<dx::index_t>({stop}), {step})")
            else:
                items.append(index_item(it))
        return items

    # ------------------------------------------------------------------------ stores
    def store(self, v: ir.Value, b: Buffer) -> None:
        T = CTYPE[v.dtype]
        dest = self.bref(b)
        fresh = ((b.kind == "tmp" and (b.index not in self.declared_tmp or b.index in self.fresh_tmp))
                 or (b.kind == "out" and b.index not in self.written_out))
        if v.op not in ("loop", "matmul", "setitem") and fresh and self.direct(v, b):
            return
        self.flush_direct()  # what follows may read what the waiting loops write
        if v.op == "loop":
            codegen_loop.emit_loop(self, v, b)
            return
        if v.op == "matmul":
            self.matmul(v, b)
            return
        if v.op == "setitem":
            base, value = v.args[0], v.args[1]
            if not self.same_buffer(base, b):
                if b.kind == "tmp" and b.index not in self.declared_tmp:
                    self.declared_tmp.add(b.index)
                    self.emit(f"auto {dest} = dx::Tensor<{T}>::empty({self.shape(b.shape)});")
                if not (base.op == "full" and base.attr("empty") and b.kind in ("out", "tmp")):
                    # Note [np.empty is not filled] (capture/np_ops.py)
                    self.emit(f"dx::assign({dest}, {self.ref(base)});")
            items = self.index_items(v)
            target = f"{dest}.slice({', '.join(items)})" if items else dest
            self.emit(f"dx::assign({target}, {self.ref(value)});")
            if b.kind == "out":
                self.written_out.add(b.index)
            return
        expr = self.compute(v)
        if b.kind == "tmp" and b.index not in self.declared_tmp:
            self.declared_tmp.add(b.index)
            if v.op in ir.REDUCTIONS:
                self.emit(f"auto {dest} = dxk::tensor<{T}>({expr});")
            else:
                self.emit(f"auto {dest} = dxk::eval_fresh{self.loop(v, b)}({expr});")
        elif ((b.kind == "out" and b.index not in self.written_out)
              or (b.kind == "tmp" and b.index in self.fresh_tmp)):
            # First write into an output this call allocated (or a temporary allocated
            # empty for a run of row blocks): nothing can alias it.
            self.emit(f"dxk::assign_fresh{self.loop(v, b)}({dest}, {expr});")
        else:
            self.emit(f"dx::assign({dest}, {expr});")
        if b.kind == "out":
            self.written_out.add(b.index)

    def matmul(self, v: ir.Value, b: Buffer) -> None:
        """A product written straight into its buffer (no temporary, no copy), its scale
        and bias folded into the BLAS call (Note [alpha/beta folding] in blas_fold.py):
        the bias is written first, then the product accumulated onto it (beta = 1)."""
        T = CTYPE[v.dtype]
        a, b_ = self.ref(v.args[0]), self.ref(v.args[1])
        rest = list(v.args[2:])
        alpha = self.scalar_value(rest.pop(0), v.dtype) if v.attr("scaled") else None
        bias = rest.pop(0) if v.attr("bias") else None
        dest = self.buffer_ref(b)
        fresh = b.kind == "out" and b.index not in self.written_out
        if b.kind == "tmp" and b.index not in self.declared_tmp:
            self.declared_tmp.add(b.index)
            self.emit(f"auto {dest} = dx::Tensor<{T}>::empty({self.shape(b.shape)});")
            fresh = True
        target = f"{dest}.view()" if b.kind == "tmp" else dest
        if bias is not None and not fresh:
            # An argument's memory may be an operand: the bias must not overwrite it
            # before the product has read it, so both go to a temporary first.
            self.emit(f"auto m{v.id} = dx::Tensor<{T}>::empty({self.shape(v.shape)});")
            target = f"m{v.id}.view()"
        if bias is not None:
            self.emit(f"dxk::assign_fresh{self.loop(v, b, bias)}({target}, {self.ref(bias)});")
        extra = ""
        if alpha is not None or bias is not None:
            extra = f", {alpha or f'{T}(1)'}" + (", true" if bias is not None else "")
        self.emit(f"dx::matmul_into({target}, {a}, {b_}{extra});")
        if target.startswith("m"):
            self.emit(f"dx::assign({dest}, m{v.id});")
        if b.kind == "out":
            self.written_out.add(b.index)

    def scalar_value(self, s: ir.Value, dtype: str) -> str:
        """A 0-d constant or argument as a C++ value of dtype (NumPy casts it so)."""
        T = CTYPE[dtype]
        if s.op == "const":
            return scalar_literal(s.attr("value"), dtype)
        return f"static_cast<{T}>({self.ref(s)}.data()[0])"

    def loop(self, v: ir.Value, b: Buffer, expr: ir.Value | None = None) -> str:
        """"<true>" when the pointwise expression of v has an operand that is not
        unit-stride along the output's inner dimension, so the unit gets the packet loop
        for strides and broadcasts (Note [lean units] in kernels/prelude.hpp)."""
        if expr is None and (v.op in ir.REDUCTIONS or v.op in ("matmul", "loop_out")):
            return ""
        if not b.shape or b.shape[-1] == 1:
            return ""
        todo, seen = [v if expr is None else expr], set()
        while todo:
            u = todo.pop()
            if u.id in seen or u.op == "const":
                continue
            seen.add(u.id)
            leaf = u.op == "input" or (u is not v and isinstance(self.storage(u), Buffer))
            if u.op in ("transpose", "broadcast_to") or (
                    u.op == "getitem" and any((it[0] == "slice" and it[3] != 1)
                                              or (it[0] == "dslice" and it[5] != 1)
                                              for it in u.attr("index"))):
                return "<true>"
            if leaf or u.op in ir.VIEWS:
                if not u.shape or u.shape[-1] == 1:
                    return "<true>"  # a 0-d value or a keepdims reduction, broadcast
                if u.op in ir.VIEWS:
                    todo.extend(u.args[:ir.offset_args(u)])
                continue
            todo.extend(u.args)
        return ""

    # ------------------------------------------------------- direct pointwise loops
    def direct(self, v: ir.Value, b: Buffer) -> bool:
        """Note [direct pointwise loops]
        A pointwise value of one float dtype, computed from arrays of its own shape and
        dtype and from 0-d values, written into a buffer new for this call, is emitted as
        a function of its own: one Highway loop calling the op table's simd bodies
        (dx::ops::<op>::simd, the same ones the expression templates call), its last
        partial vector through a padded copy, over the pool in the blocks the expression
        loop uses. Nothing of the expression machinery (expression types, lowering,
        evaluators, the layout loop) is instantiated for it, which is most of a unit's
        compile time: a 10-op float32 chain compiles in about half the CPU time. The
        results are the same bits: the same op bodies on the same lanes, the tail padded
        with a real element (no flag NumPy would not raise). An argument that is not
        contiguous after all is copied first (dxk::dense). Anything else (broadcasts,
        views, casts, comparisons, where, integer ops) stays an expression.

        A sum, mean, max, min, var or std over the last axis of such an expression (the rows of
        softmax, logsumexp, layernorm, normalise) is a direct loop too, row by row: the
        expression may also read one value per row (a keepdims result of an earlier
        reduction, x - max_row(x)). It adds as the expression loop's reductions do (Note
        [summation accuracy] in eval/reduce.hpp: four vector accumulators within blocks
        of 1024 elements in the input's precision, block totals in double), and takes
        NaN as NumPy's max and min do; var and std take the mean in the input's dtype and
        then the squared deviations in a second pass over the row, as np.var does; rows
        are split over the pool in groups of about
        16384 elements, each row by one thread, so the result does not depend on the
        thread count. What it saves is the per-row setup of the general reduction, most
        of the time on short rows. Rows longer than 16384 elements (a whole 1-D array)
        keep the general reduction, which splits a row over threads.
        A pointwise value may also read one value per row the same way (the division of
        softmax, e / sum_row(e); layernorm's d / sqrt(var_row + eps)): it is then a row
        loop over the pool, each row's value set once as a vector, for rows of up to
        16384 elements (a static last extent).
        Inside a run of row blocks (Note [row blocks]) both work on the block's rows."""
        if v.dtype not in ("float32", "float64"):
            return False
        if v.op in _DIRECT_REDUCE:
            return self._direct_reduce(v, b)
        shape = tuple(v.shape)
        rowshape = (shape[:-1] + (1,) if len(shape) >= 2 and isinstance(shape[-1], int)
                    and 1 < shape[-1] <= _DIRECT_ROW_MAX else None)
        found = self._direct_expr(v, v.dtype, shape, rowshape) if v.shape else None
        if found is None:
            return False
        order, leaves, rowvals, scalars = found
        if rowvals and not leaves:
            return False  # nothing of the full shape to size the destination by
        T = CTYPE[v.dtype]
        dest = self._direct_dest(b, T, leaves, keepdims=None)
        if dest is None:
            return False
        if rowvals:
            self._direct_rows(v, dest, order, leaves, rowvals, scalars)
            return True
        k = self._direct_name()
        fn = self._direct_at(k, T, v, order, leaves, rowvals, scalars)
        fields, unpack = self._direct_params(T, leaves, rowvals, scalars)
        call = ", ".join([f"l{n}" for n in range(len(leaves))] + [f"s{n}" for n in range(len(scalars))])
        pad = ", ".join([f"t{n}" for n in range(len(leaves))] + [f"s{n}" for n in range(len(scalars))])
        sep = ", " if call else ""
        cost = sum(manifest.OPS[u.op]["cost"] for u in order)
        narrow = cost <= NARROW_COST
        at = [f"{k}_at(d, {call}{sep}i + {j} * N)" for j in range(4)]
        self.direct_fns += fn + [
            *_direct_head(k, T, fields, unpack, "b, e", narrow=narrow),
            "  dx::index_t i = b;",
            *([  # Note [narrow vectors for cheap loops]: four vectors a step
                "  for (; i + 4 * N <= e; i += 4 * N) {",
                *[f"    const auto p{j} = {at[j]};" for j in range(4)],
                *[f"    hn::StoreU(p{j}, d, out + i + {j} * N);" for j in range(4)],
                "  }",
            ] if narrow else []),
            f"  for (; i + N <= e; i += N) hn::StoreU({k}_at(d, {call}{sep}i), d, out + i);",
            "  if (i < e) {  // the last partial vector, padded with a real element",
            "    const dx::index_t m = e - i;",
            *_padded(T, len(leaves), "i", "    "),
            f"    alignas(64) {T} r[dx::simd::max_lanes_v<decltype(d)>];",
            f"    hn::Store({k}_at(d, {pad}{sep}0), d, r);",
            "    for (dx::index_t j = 0; j < m; ++j) out[i + j] = r[j];",
            "  }",
            "}",
            "",
        ]
        self._direct_call(k, dest, leaves, rowvals, scalars, f"{dest}.size()", None, cost)
        return True

    def _direct_rows(self, v: ir.Value, dest: str, order, leaves, rowvals, scalars) -> None:
        """The direct pointwise loop of a value that reads per-row values: row by row,
        each row's values set once, its last partial vector padded as in the flat loop."""
        T = CTYPE[v.dtype]
        L = v.shape[-1]
        k = self._direct_name()
        fn = self._direct_at(k, T, v, order, leaves, rowvals, scalars)
        fields, unpack = self._direct_params(T, leaves, rowvals, scalars)
        rest = [f"W{n}" for n in range(len(rowvals))] + [f"s{n}" for n in range(len(scalars))]
        call = ", ".join([f"l{n} + o" for n in range(len(leaves))] + rest)
        pad = ", ".join([f"t{n}" for n in range(len(leaves))] + rest)
        self.direct_fns += fn + [
            *_direct_head(k, T, fields, unpack, "r0, r1"),
            "  for (dx::index_t r = r0; r < r1; ++r) {",
            f"    const dx::index_t o = r * {L};",
            *[f"    const auto W{n} = hn::Set(d, w{n}[r]);" for n in range(len(rowvals))],
            "    dx::index_t i = 0;",
            f"    for (; i + N <= {L}; i += N) hn::StoreU({k}_at(d, {call}, i), d, out + o + i);",
            f"    if (i < {L}) {{  // the row's last partial vector, padded with a real element",
            f"      const dx::index_t m = {L} - i;",
            *_padded(T, len(leaves), "o + i", "      "),
            f"      alignas(64) {T} res[dx::simd::max_lanes_v<decltype(d)>];",
            f"      hn::Store({k}_at(d, {pad}, 0), d, res);",
            "      for (dx::index_t j = 0; j < m; ++j) out[o + i + j] = res[j];",
            "    }",
            "  }",
            "}",
            "",
        ]
        cost = sum(manifest.OPS[u.op]["cost"] for u in order)
        self._direct_call(k, dest, leaves, rowvals, scalars, f"{dest}.size() / {L}", L, cost)

    def _direct_reduce(self, v: ir.Value, b: Buffer) -> bool:
        e = v.args[0]
        if (e.dtype != v.dtype or e.ndim == 0 or not isinstance(e.shape[-1], int)
                or not 0 < e.shape[-1] <= _DIRECT_ROW_MAX):
            return False  # a long row (a whole 1-D array) is split over threads by dx::sum
        nd = e.ndim
        if ir.reduced_axes(v) != (nd - 1,):
            return False
        shape = tuple(e.shape)
        rowshape = shape[:-1] + (1,)
        ddof = int(v.attr("ddof", 0) or 0)
        if v.op in ("var", "std") and shape[-1] - ddof <= 0:
            return False  # NumPy's nan/inf and its warning: the general reduction
        if self._storage_is_leaf(e):
            order, leaves, rowvals, scalars = [], [e], [], []
            if e.op == "const" or e.ndim == 0:
                return False
        else:
            found = self._direct_expr(e, v.dtype, shape, rowshape)
            if found is None:
                return False
            order, leaves, rowvals, scalars = found
        if not leaves:
            return False
        T = CTYPE[v.dtype]
        dest = self._direct_dest(b, T, leaves, keepdims=bool(v.attr("keepdims")))
        if dest is None:
            return False
        k = self._direct_name()
        fn = self._direct_at(k, T, e, order, leaves, rowvals, scalars)
        fields, unpack = self._direct_params(T, leaves, rowvals, scalars)
        L = shape[-1]
        op = v.op
        moments = op in ("sum", "mean", "var", "std")
        ident = "0" if moments else {"max": f"-std::numeric_limits<{T}>::infinity()",
                                     "min": f"std::numeric_limits<{T}>::infinity()"}[op]
        comb = "hn::Add" if moments else {"max": "dx::ops::maximum_op::simd",
                                          "min": "dx::ops::minimum_op::simd"}[op]
        fold = {"max": "dx::ops::maximum_op::scalar", "min": "dx::ops::minimum_op::scalar"}.get(op)
        args_row = ", ".join([f"l{n} + r * {L}" for n in range(len(leaves))]
                             + [f"hn::Set(d, w{n}[r])" for n in range(len(rowvals))]
                             + [f"s{n}" for n in range(len(scalars))])
        pad = ", ".join([f"t{n}" for n in range(len(leaves))]
                        + [f"hn::Set(d, w{n}[r])" for n in range(len(rowvals))]
                        + [f"s{n}" for n in range(len(scalars))])
        add = "" if moments else "d, "
        blk = 1024 if moments else L

        def c(x, y):
            return f"{comb}({add}{x}, {y})"

        def row_loop(value, after: list[str]) -> list[str]:
            """One pass over row r: value(vector at i) accumulated (four accumulators,
            blocks of `blk`), the partial last vector's lanes past the row as identity."""
            return [
                f"    for (dx::index_t b = 0; b < {L}; b += {blk}) {{",
                f"      const dx::index_t e = std::min<dx::index_t>(b + {blk}, {L});",
                "      auto a0 = id, a1 = id, a2 = id, a3 = id;",
                "      dx::index_t i = b;",
                "      for (; i + 4 * N <= e; i += 4 * N) {",
                f"        a0 = {c('a0', value(f'{k}_at(d, {args_row}, i)'))};",
                f"        a1 = {c('a1', value(f'{k}_at(d, {args_row}, i + N)'))};",
                f"        a2 = {c('a2', value(f'{k}_at(d, {args_row}, i + 2 * N)'))};",
                f"        a3 = {c('a3', value(f'{k}_at(d, {args_row}, i + 3 * N)'))};",
                "      }",
                f"      for (; i + N <= e; i += N) a0 = {c('a0', value(f'{k}_at(d, {args_row}, i)'))};",
                "      if (i < e) {  // the last partial vector: real elements, identity lanes",
                "        const dx::index_t m = e - i;",
                *_padded(T, len(leaves), f"r * {L} + i", "        "),
                f"        const auto p = {value(f'{k}_at(d, {pad}, 0)')};",
                f"        a1 = {c('a1', 'hn::IfThenElse(hn::FirstN(d, static_cast<size_t>(m)), p, id)')};",
                "      }",
                f"      const auto s = {c(c('a0', 'a1'), c('a2', 'a3'))};",
                *after,
                "    }",
            ]

        def same(x):
            return x

        total = ["      total += static_cast<double>(hn::GetLane(hn::SumOfLanes(d, s)));"]
        short = op in ("sum", "mean", "max", "min") and L < _SHORT_ROW_MAX
        lines = [
            *_direct_head(k, T, fields, unpack, "r0, r1"),
            f"  const auto id = hn::Set(d, {ident});",
            *(["  dx::index_t r = r0;",
               *_short_rows(k, T, L, op, fold, len(leaves), len(rowvals), len(scalars)),
               "  for (; r < r1; ++r) {"] if short else
              ["  for (dx::index_t r = r0; r < r1; ++r) {"]),
        ]
        if op in ("sum", "mean"):
            lines += ["    double total = 0;", *row_loop(same, total),
                      f"    out[r] = static_cast<{T}>({'total' if op == 'sum' else f'total / {L}'});"]
        elif op in ("var", "std"):
            # As np.var: the mean in the input's dtype, then the sum of squared deviations
            # (a second pass over the row, in cache), divided by L - ddof.
            lines += ["    double total = 0;", *row_loop(same, total),
                      f"    const auto mv = hn::Set(d, static_cast<{T}>(total / {L}));",
                      "    const auto sq = [&](auto x) { const auto t = hn::Sub(x, mv); return hn::Mul(t, t); };",
                      "    total = 0;", *row_loop(lambda x: f"sq({x})", total),
                      f"    const {T} var = static_cast<{T}>(total / {L - ddof});",
                      f"    out[r] = {'std::sqrt(var)' if op == 'std' else 'var'};"]
        else:
            lines += ["    auto acc = id;", *row_loop(same, [f"      acc = {comb}(d, acc, s);"]),
                      f"    alignas(64) {T} lanes[dx::simd::max_lanes_v<decltype(d)>];",
                      "    hn::Store(acc, d, lanes);",
                      f"    {T} x = lanes[0];",
                      f"    for (dx::index_t j = 1; j < N; ++j) x = {fold}(x, lanes[j]);",
                      "    out[r] = x;"]
        lines += ["  }", "}", ""]
        self.direct_fns += fn + lines
        cost = sum(manifest.OPS[u.op]["cost"] for u in order) + 1
        self._direct_call(k, dest, leaves, rowvals, scalars,
                          f"{self.ref(leaves[0])}.size() / {L}", L, cost)
        return True

    def _storage_is_leaf(self, u: ir.Value) -> bool:
        return isinstance(self.storage(u), Buffer) or u.op in ("input", "const")

    def _direct_expr(self, root: ir.Value, T: str, shape: tuple, rowshape: tuple | None):
        """(values in order, full-shape leaves, per-row leaves, 0-d leaves) of the
        expression computing root, or None when it is not one a direct loop takes."""
        order, leaves, rowvals, scalars, seen = [], [], [], [], set()
        stack = [(root, False)]
        while stack:
            u, done = stack.pop()
            if done:
                order.append(u)
                continue
            if u.id in seen:
                continue
            seen.add(u.id)
            if (u is not root and rowshape is not None and tuple(u.shape) == rowshape
                    and u.dtype == T and self._view_of_storage(u)):
                rowvals.append(u)  # a per-row operand by view: m[:, None] * v
                continue
            if u is not root and self._storage_is_leaf(u):
                if u.dtype != T:
                    return None
                if u.op == "const":
                    if u.ndim != 0:
                        return None
                    continue
                if u.ndim == 0:
                    scalars.append(u)
                elif tuple(u.shape) == shape:
                    leaves.append(u)
                elif rowshape is not None and tuple(u.shape) == rowshape:
                    rowvals.append(u)
                else:
                    return None
                continue
            o = manifest.OPS.get(u.op)
            if (o is None or o["rule"] not in _DIRECT_RULES or not o["simd"]
                    or ir.computed_op(u) != u.op or u.dtype != T or tuple(u.shape) != shape
                    or len(u.args) != o["arity"]):
                return None
            stack.append((u, True))
            stack += [(a, False) for a in reversed(u.args)]
        return order, leaves, rowvals, scalars

    def _view_of_storage(self, u: ir.Value) -> bool:
        """Whether u is a view (m[:, None], an expand_dims or reshape) of an input or a
        buffer, none of it computed: a direct loop reads it through dxk::dense."""
        if self._storage_is_leaf(u) or u.op not in _VIEW_OPS:
            return False
        while u.op in _VIEW_OPS and not self._storage_is_leaf(u):
            if u.op == "getitem" and len(u.args) != 1:
                return False  # dynamic offsets (Note [dynamic offsets])
            u = u.args[0]
        return self._storage_is_leaf(u) and u.op != "const"

    def _direct_name(self) -> str:
        return f"k{sum(1 for line in self.direct_fns if line.startswith('struct k'))}"

    def _direct_at(self, k, T, root, order, leaves, rowvals, scalars) -> list[str]:
        """`k_at(d, leaves..., row values..., scalars..., i)`: the expression's vector at
        element i (row values and scalars come in as vectors already)."""
        names = {u.id: f"L{n}" for n, u in enumerate(leaves)}
        names.update({u.id: f"W{n}" for n, u in enumerate(rowvals)})
        names.update({u.id: f"S{n}" for n, u in enumerate(scalars)})
        params = ([f"const {T}* __restrict__ l{n}" for n in range(len(leaves))]
                  + [f"hn::Vec<D> W{n}" for n in range(len(rowvals))]
                  + [f"{T} s{n}" for n in range(len(scalars))])
        body = [f"  const auto L{n} = hn::LoadU(d, l{n} + i);" for n in range(len(leaves))]
        body += [f"  const auto S{n} = hn::Set(d, s{n});" for n in range(len(scalars))]

        def operand(a: ir.Value) -> str:
            if a.id in names:
                return names[a.id]
            if a.op == "const":
                return f"hn::Set(d, {scalar_literal(a.attr('value'), root.dtype)})"
            return f"v{a.id}"

        for u in order:
            o = manifest.OPS[u.op]
            args = ", ".join(operand(a) for a in u.args)
            fn = f"dx::ops::{o['id']}::simd"
            # Against constants that are not NaN, ordered compares alone keep NumPy's NaN
            # and signed-zero results (ops/op_support.hpp): half the instructions.
            consts = [_not_nan_const(a) for a in u.args]
            if u.op == "clip" and all(consts[1:]):
                fn = "dx::ops::detail::clip_to_bounds"
            elif u.op in ("maximum", "minimum") and consts.count(True) == 1:
                is_max, first = u.op == "maximum", consts[0]  # first: max(c, x)
                fn = f"dx::ops::detail::bound_by_const<{str(is_max).lower()}, {str(first).lower()}>"
                args = ", ".join(operand(a) for a in (u.args[::-1] if first else u.args))
            body.append(f"  const auto v{u.id} = {fn}(d, {args});")
        result = operand(root) if not order else f"v{root.id}"
        return ["template <class D>",
                f"DYNEXPR_INLINE hn::Vec<D> {k}_at(D d, {', '.join(params + ['dx::index_t i'])}) {{",
                *body, f"  return {result};", "}"]

    def _direct_params(self, T, leaves, rowvals, scalars):
        fields = ([f"const {T}* l{n};" for n in range(len(leaves))]
                  + [f"const {T}* w{n};" for n in range(len(rowvals))]
                  + [f"{T} s{n};" for n in range(len(scalars))])
        unpack = ([f"  const {T}* __restrict__ l{n} = a.l{n};" for n in range(len(leaves))]
                  + [f"  const {T}* __restrict__ w{n} = a.w{n};" for n in range(len(rowvals))]
                  + [f"  const {T} s{n} = a.s{n};" for n in range(len(scalars))])
        return fields, unpack

    def _direct_dest(self, b: Buffer, T: str, leaves: list, keepdims: bool | None) -> str | None:
        """The name of the buffer a direct loop writes, declared if it is a temporary
        not declared yet (inside a run of row blocks, of the block's rows: its shape is
        read from a leaf's); None where that cannot be done."""
        dest = self.bref(b)
        if b.kind == "tmp" and b.index not in self.declared_tmp and dest not in self.rename.values():
            if self.rename:
                if not leaves:
                    return None
                lead = self.ref(leaves[0])
                shape = f"{lead}.shape()" if keepdims is None else \
                    f"dxk::reduced_rows({lead}.shape(), {'true' if keepdims else 'false'})"
            else:
                shape = self.shape(b.shape)
            self.declared_tmp.add(b.index)
            self.emit(f"auto {dest} = dx::Tensor<{T}>::empty({shape});")
        elif b.kind == "out":
            self.written_out.add(b.index)
        return dest

    def _direct_call(self, k, dest, leaves, rowvals, scalars, units: str,
                     row_len: int | None, cost: int) -> None:
        """The call in `run`: the arguments gathered (a copy where one is not contiguous),
        then k run over `units` (an expression: elements of a flat loop, row_len None;
        rows of row_len elements of a row loop) on the pool. Inside a run of row blocks
        the call waits in self.pending for the kernels after it (flush_direct)."""
        args = []
        pending = self.pending is not None
        keep = f"{k}_keep" if pending else "keep"
        if not pending:
            self.emit("{")
        for n, u in enumerate(leaves + rowvals):
            ref = self.ref(u)
            st = self.storage(u)
            if isinstance(st, Buffer) and st.kind == "tmp" and ref not in self.rename.values():
                args.append(f"{ref}.data()")
            else:
                self.emit(f"{'' if pending else '  '}dxk::owned {keep}{n};")
                args.append(f"dxk::dense({ref}, {keep}{n})")
        args += [f"{self.ref(u)}.data()[0]" for u in scalars]
        init = f"{k}_args {k + '_a' if pending else 'args'}{{{', '.join(args + [f'{dest}.data()'])}}};"
        if pending:
            self.emit(init)
            self.pending.append((k, units, row_len, cost))
            return
        self.emit(f"  {init}")
        self.emit(f"  dxk::{_runner(units, row_len, cost)}, {k}, &args);")
        self.emit("}")

    def flush_direct(self) -> None:
        """Note [rows of direct loops]
        Inside a run of row blocks (Note [row blocks]) the direct loops (Note [direct
        pointwise loops]) do not run one after the other over the whole block: their
        arguments are gathered as they come (self.pending) and, when something else must
        run or the block ends, they run as one loop over the block's leading rows that
        takes a few rows at a time (about _ROW_STEP_BYTES of the widest value, 16 rows of
        256 floats) through every loop in turn. Those rows are in L1 when the next loop
        reads them, and the loads of the next rows from memory overlap the arithmetic of
        these (the max pass of logsumexp is pure memory traffic and its exp-sum pass pure
        arithmetic: one after the other over a 256 KB block they do not overlap). Each
        loop is called on its own units (rows of its row length, or elements) per leading
        row, m = units / leading rows, so a 3-D (A, B, L) block with rows of L elements
        works. It is valid because a run keeps its rows apart: a loop reads of the values
        before it only those of the same rows, and the arguments gathered early are never
        written by the loops before them (those write fresh temporaries and outputs, which
        dense() does not copy). A/B, 2 cores, float32: logsumexp rows 1M 315 -> 227 us,
        16M 5.38 -> 4.88 ms; softmax 16M 8.99 -> 7.38 ms; layernorm 1M 258 -> 238 us;
        float64 softmax 1M 889 -> 763 us (medians, bench-style back-to-back calls)."""
        waiting = self.pending or []
        if self.pending is not None:
            self.pending = []
        if not waiting:
            return
        if len(waiting) == 1:
            k, units, row_len, cost = waiting[0]
            self.emit(f"dxk::{_runner(units, row_len, cost)}, {k}, &{k}_a);")
            return
        g = f"g{sum(1 for line in self.direct_fns if line.startswith('struct g'))}"
        n = len(waiting)
        self.direct_fns += [
            f"struct {g}_ctx {{ void* a[{n}]; dx::index_t m[{n}]; dx::index_t step; }};",
            f"static void {g}(void* ctx, dx::index_t r0, dx::index_t r1) {{",
            f"  const auto& c = *static_cast<const {g}_ctx*>(ctx);",
            "  for (dx::index_t r = r0; r < r1; r += c.step) {",
            "    const dx::index_t e = std::min(r + c.step, r1);",
            *[f"    {k}(c.a[{i}], r * c.m[{i}], e * c.m[{i}]);" for i, (k, *_) in enumerate(waiting)],
            "  }",
            "}",
            "",
        ]
        self.emit("{")
        self.emit("  const dx::index_t lead = r1 - r0;")
        ms = [f"lead ? ({units}) / lead : 0" for _, units, _, _ in waiting]
        self.emit(f"  {g}_ctx g{{{{{', '.join(f'&{k}_a' for k, *_ in waiting)}}}, {{{', '.join(ms)}}}, 1}};")
        widths = [f"g.m[{i}] * {row_len or 1}" for i, (_, _, row_len, _) in enumerate(waiting)]
        self.emit(f"  const dx::index_t per_row = std::max<dx::index_t>({{1, {', '.join(widths)}}});")
        self.emit(f"  g.step = std::max<dx::index_t>(1, {_ROW_STEP_BYTES} / (per_row * 8));")
        self.emit(f"  dxk::run_rows(lead, per_row, {sum(c for *_, c in waiting)}, {g}, &g);")
        self.emit("}")

    def same_buffer(self, base: ir.Value, b: Buffer) -> bool:
        if base.op == "input":
            return b.kind == "in" and b.index == base.attr("index")
        return self.storage(base) == b

    def compute(self, v: ir.Value) -> str:
        """The expression a materialised value is evaluated from."""
        if v.op in ir.REDUCTIONS:
            return self.reduction(v)
        if v.op == "loop_out":
            return codegen_loop.carried_name(v.args[0], v.attr("index"))
        if v.op in ("const", "full", "input") or v.op in ir.VIEWS:
            saved = self.s.storage[v.id]
            self.s.storage[v.id] = "leaf"  # read it as a leaf, then copy
            try:
                return self.ref(v)
            finally:
                self.s.storage[v.id] = saved
        return self.pointwise(v)

    def reduction(self, v: ir.Value) -> str:
        x = self.ref(v.args[0])
        nd = len(v.args[0].shape)
        keep = "true" if v.attr("keepdims") else "false"
        if v.op in ("argmin", "argmax"):
            axis = v.attr("axis")
            if axis is None:
                return (f"dx::Tensor<std::int64_t>({self.shape(v.shape)}, "
                        f"dx::{v.op}({x}))")
            return f"dx::{v.op}({x}, {axis % nd}, {keep})"
        axes = v.attr("axes")
        if axes is None or (nd > 0 and len({a % nd for a in _tuple(axes)}) == nd):
            spec = "dx::all_axes"
        else:
            spec = "dx::Shape{" + ", ".join(str(a % nd) for a in sorted(_tuple(axes))) + "}"
        pair = self.pairs.get(v.id)
        if pair is not None:  # Note [mean and var together], [max and sum of exps ...]
            fn, ddof, first, second, src = pair
            if first not in self.paired and second not in self.paired and v.id not in self.paired:
                n = self.n_pairs
                self.n_pairs += 1
                arg = x if src is None else self.ref(src)
                extra = "" if ddof is None else f", {ddof}"
                self.emit(f"auto [pm{n}, ps{n}] = dx::{fn}({arg}, {spec}, {keep}{extra});")
                self.paired[first], self.paired[second] = f"pm{n}", f"ps{n}"
            name = self.paired.pop(v.id, None)
            if name is not None:
                return f"std::move({name})"
        extra = ""
        if v.op in ("var", "std"):
            extra = f", {int(v.attr('ddof', 0))}"
        return f"dx::{REDUCE_FN[v.op]}({x}, {spec}, {keep}{extra})"


def _moment_pairs(s: Schedule, skip: set[int]) -> dict[int, tuple]:
    """Note [mean and var together]
    x.mean(axis) and x.var(axis) (or x.std(axis)) of the same value over the same axes
    come from one dx::mean_var (dx::mean_std) call: one read of x instead of two (the
    variance itself reads x once: Note [one-pass moments] in eval/moments.hpp). The first
    of the two to be computed makes the call; each takes its result from it once. Not
    for reductions the direct row loops may take (the innermost axis alone, rows of a
    fixed length: they read rows in cache already), nor inside a run of row blocks,
    whose scope the second value might be outside of.

    Returns value id -> (function, ddof, mean's id, var's or std's id) for both."""
    groups: dict[tuple, list] = {}
    for n, k in enumerate(s.kernels):
        if k.kind != "reduction" or n in skip:
            continue
        for st in k.stores:
            v = st.value
            if v.op not in ("mean", "var", "std"):
                continue
            e = v.args[0]
            nd = e.ndim
            red = ir.reduced_axes(v)
            want = e.dtype if e.dtype in ("float32", "float64") else "float64"
            if v.dtype != want or nd == 0:
                continue
            if red == (nd - 1,) and isinstance(e.shape[-1], int) and e.shape[-1] <= _DIRECT_ROW_MAX:
                continue  # the direct row loops may take it
            groups.setdefault((e.id, red, bool(v.attr("keepdims"))), []).append(v)
    pairs: dict[int, tuple] = {}
    for vs in groups.values():
        mean = next((v for v in vs if v.op == "mean"), None)
        spread = next((v for v in vs if v.op in ("var", "std")), None)
        if mean is None or spread is None:
            continue
        fn = "mean_std" if spread.op == "std" else "mean_var"
        entry = (fn, int(spread.attr("ddof", 0) or 0), mean.id, spread.id, None)
        pairs[mean.id] = pairs[spread.id] = entry
    return pairs


def _max_sumexp_pairs(s: Schedule, skip: set[int]) -> dict[int, tuple]:
    """Note [max and sum of exps in captured code]
    m = x.max(axes) and np.exp(x - m).sum(axes) over the same axes (a column softmax or
    logsumexp, a softmax over a whole array) come from one dx::max_sumexp call: one read
    of x instead of two (Note [max and sum of exps together] in eval/max_sumexp.hpp). The
    sum's exp and difference must be lazy (computed where the sum reads them, not stored
    by a kernel of their own), m must reach the difference only through views that keep
    its elements where x's kept positions are (keepdims, or a leading reduced axis that
    broadcasting puts back), and both reductions must have the same keepdims; floats only
    (NumPy's max of integers is an integer). Not for the direct row loops' reductions nor
    inside a run of row blocks (as Note [mean and var together]), not for inputs under
    MAX_SUMEXP_BYTES (in cache, the two reads cost less than the second pass over each
    block), and only for reductions with at most MAX_SUMEXP_OUTPUTS results: a whole
    array, a few long columns. Measured on a 2-core AVX-512 machine (A/B in one process,
    pairing off and on): a whole-array softmax 1.02-1.20x faster from 1 MB to 128 MB, a
    column softmax or logsumexp of 100000x16 1.15-1.33x; but wide columns (512 to 4096 of
    them, 1-32 MB) 0.86-1.08x, float64 0.90-0.93x: there the separate column reductions
    (direct loops) stream as fast as the pair's blocks, which pay a second pass each.

    Returns value id -> ("max_sumexp", None, max's id, sum's id, x) for both."""
    maxes: dict[tuple, ir.Value] = {}
    sums: list[ir.Value] = []
    for n, k in enumerate(s.kernels):
        if k.kind != "reduction" or n in skip:
            continue
        for st in k.stores:
            v = st.value
            x = v.args[0] if v.args else None
            if v.op not in ("max", "sum") or x is None or x.ndim == 0:
                continue
            if x.dtype not in ("float32", "float64") or v.dtype != x.dtype:
                continue
            red = ir.reduced_axes(v)
            if red == (x.ndim - 1,) and isinstance(x.shape[-1], int) and x.shape[-1] <= _DIRECT_ROW_MAX:
                continue  # the direct row loops may take it
            if v.op == "max":
                maxes.setdefault((x.id, red, bool(v.attr("keepdims"))), v)
            else:
                sums.append(v)
    pairs: dict[int, tuple] = {}
    for total in sums:
        e = total.args[0]
        if e.op != "exp" or s.storage.get(e.id) != "lazy":
            continue
        d = e.args[0]
        if d.op != "subtract" or s.storage.get(d.id) != "lazy" or d.args[0].shape != e.shape:
            continue
        x, b = d.args
        red = ir.reduced_axes(total)
        m = maxes.get((x.id, red, bool(total.attr("keepdims"))))
        if m is None or m.id in pairs or not _reaches_kept_positions(b, m, x, red):
            continue
        if not all(isinstance(dim, int) for dim in (*x.shape, *m.shape)):
            continue  # sizes known at the call only: the rules below cannot be judged
        if math.prod(x.shape) * np.dtype(x.dtype).itemsize < MAX_SUMEXP_BYTES:
            continue
        if math.prod(m.shape) > MAX_SUMEXP_OUTPUTS:
            continue
        entry = ("max_sumexp", None, m.id, total.id, x)
        pairs[m.id] = pairs[total.id] = entry
    return pairs


MAX_SUMEXP_BYTES = 1 << 20
MAX_SUMEXP_OUTPUTS = 64


def _reaches_kept_positions(b: ir.Value, m: ir.Value, x: ir.Value, red: tuple) -> bool:
    """Whether b, as the second operand of x - b, is m's values at x's kept positions:
    m itself or m under broadcast_to/expand_dims/reshapes that only add or drop 1s, and
    b's shape, padded with leading 1s to x's rank, is x's with the reduced axes 1."""
    keep = tuple(1 if i in red else dim for i, dim in enumerate(x.shape))
    if b.op == "broadcast_to":
        b = b.args[0]
    if len(b.shape) > x.ndim or (1,) * (x.ndim - len(b.shape)) + tuple(b.shape) != keep:
        return False
    core = [dim for dim in m.shape if dim != 1]
    while b is not m:
        if b.op not in ("expand_dims", "reshape", "squeeze") or [dim for dim in b.shape if dim != 1] != core:
            return False
        b = b.args[0]
    return True


# Op rules whose simd bodies take and give the one float dtype (Note [direct pointwise loops])
_DIRECT_RULES = ("float_unary_rule", "float_binary_rule", "arith_rule", "same_rule")
_DIRECT_REDUCE = ("sum", "mean", "max", "min", "var", "std")
_VIEW_OPS = ("getitem", "expand_dims", "reshape", "squeeze")
_DIRECT_ROW_MAX = 16384  # elements: longer rows need several threads per row
_ROW_STEP_BYTES = 16384  # Note [rows of direct loops]: the rows each loop takes in turn


def _not_nan_const(v: ir.Value) -> bool:
    """A constant operand that is a number and not NaN (a clip bound the loop may compare
    with ordered compares alone: detail::clip_to_bounds in ops/op_support.hpp)."""
    if v.op != "const":
        return False
    x = v.attr("value")
    return isinstance(x, (int, float, np.integer, np.floating)) and not (x != x)


def _runner(units: str, row_len: int | None, cost: int) -> str:
    """The runtime entry running a direct loop over `units` (elements of a flat loop,
    row_len None; rows of a row loop), up to its last two arguments (function, context)."""
    return (f"run_blocks({units}, {cost}" if row_len is None
            else f"run_rows({units}, {row_len}, {cost}")


# Note [narrow vectors for cheap loops]
# A flat direct loop of cheap ops (total cost <= NARROW_COST: a few adds and multiplies)
# moves two or three bytes of memory per flop, so its speed is that of the memory it runs
# from. Measured on the 2-core AVX-512 machine (Highway AVX3_DL, g++ -O2), y = affine(x)
# over float64, per call, 512-bit against 256-bit vectors: 0.26 vs 0.39 us at 2K
# elements (in L1), 3.60 vs 2.62 us at 16K and 7.2 vs 5.2 us at 32K (in L2: 1.38x for
# 256 bits), the same from DRAM; with 16 FMAs per element 512 bits won at every size
# (1.5-2x). So a cheap flat loop uses at most 256-bit vectors (hn::CappedTag: the full
# vector on AVX2 and narrower targets), as GCC's and LLVM's own vectorisers prefer on
# AVX-512 machines; costlier loops keep the full width. Results are the same bits: the
# same op bodies lane by lane.
# Such a loop also takes four vectors a step, all four loaded and computed before any is
# stored. Where the output starts well apart from its inputs this is as fast as one vector
# a step; where it starts just after one of them in page-offset terms (4K aliasing: Note
# [where an output starts in its page] in bridge/native/buffers.c, which avoids it for
# the inputs it can see, not for several at scattered offsets) it keeps the loop at speed:
# bench/narrow_loop.cpp, 1M float64 on two threads, output 48 bytes after the input,
# 124 us one vector a step, 91 us four; 89-99 us either way elsewhere.
# (The 512- against 256-bit numbers above were taken with every output 48 bytes after
# its NumPy input, which costs full-width vectors more. Placed apart, the same bench gives
# 256 bits 5.0-5.4 us at 64K and 90-98 us at 1M, full width 5.2-5.6 and 94-101 us: still
# no reason to widen.)
NARROW_COST = 8


def _direct_head(k: str, T: str, fields: list, unpack: list, params: str,
                 narrow: bool = False) -> list[str]:
    """A direct loop's argument struct and the head of its function, up to the loop:
    `static void k(void* ctx, dx::index_t P0, dx::index_t P1)` with `params` "P0, P1"
    (elements b, e of a flat loop; rows r0, r1 of a row loop), its arguments unpacked,
    `out`, the tag `d` (at most 256 bits when `narrow`: Note [narrow vectors for cheap
    loops]) and its lane count `N`."""
    p0, p1 = params.split(", ")
    tag = f"hn::CappedTag<{T}, 32 / sizeof({T})>" if narrow else f"hn::ScalableTag<{T}>"
    return [
        f"struct {k}_args {{ {' '.join(fields)} {T}* out; }};",
        f"static void {k}(void* ctx, dx::index_t {p0}, dx::index_t {p1}) {{",
        f"  const auto& a = *static_cast<const {k}_args*>(ctx);",
        *unpack,
        f"  {T}* __restrict__ out = a.out;",
        f"  const {tag} d;",
        "  const auto N = static_cast<dx::index_t>(hn::Lanes(d));",
    ]


_SHORT_ROW_MAX = 16  # rows shorter than this may be shorter than a vector (float32, AVX-512)


def _short_rows(k: str, T: str, L: int, op: str, fold: str | None, n_leaves: int,
                n_rowvals: int, n_scalars: int) -> list[str]:
    """A direct row reduction's rows when they are shorter than a vector (Note [short
    inner rows] in eval/reduce.hpp): super-rows of P = lcm(L, N) elements evaluated as
    full vectors into `v`, each per-row value (w<n>) permuted into its row's lanes; the
    rows left over as one padded vector each. Every row is then folded from its L values
    in order, first to last, in one place (`fold`), so a row's result does not depend on
    which of the two paths, or which thread, computed it."""
    leaves = [f"l{n} + r * {L}" for n in range(n_leaves)]
    scalars = [f"s{n}" for n in range(n_scalars)]
    spread = ", ".join(leaves + [f"hn::TableLookupLanes(hn::LoadU(d, w{n} + r + i / {L}), "
                                 "hn::SetTableIndices(d, ix + i))"
                                 for n in range(n_rowvals)] + scalars)
    pad = ", ".join([f"t{n}" for n in range(n_leaves)]
                    + [f"hn::Set(d, w{n}[r])" for n in range(n_rowvals)] + scalars)
    if op in ("sum", "mean"):
        body = ["      double t = x[0];",
                f"      for (dx::index_t j = 1; j < {L}; ++j) t += x[j];",
                f"      return static_cast<{T}>({'t' if op == 'sum' else f't / {L}'});"]
    else:
        body = [f"      {T} t = x[0];",
                f"      for (dx::index_t j = 1; j < {L}; ++j) t = {fold}(t, x[j]);",
                "      return t;"]
    return [
        f"  if ({L} < N && std::lcm<dx::index_t>({L}, N) <= 256) {{  // Note [short inner rows]",
        f"    const dx::index_t P = std::lcm<dx::index_t>({L}, N), G = P / {L};",
        f"    const auto fold = [](const {T}* x) -> {T} {{",
        *body,
        "    };",
        f"    alignas(64) {T} v[256];",
        *([  # lane q of a super-row reads its row's value w[r + q / L]: the packet at i
             # loads N values from w + r + i / L and permutes them into its lanes
            "    const hn::RebindToSigned<decltype(d)> di;",
            "    alignas(64) hn::TFromD<decltype(di)> ix[256];",
            "    for (dx::index_t q = 0; q < P; ++q)",
            f"      ix[q] = static_cast<hn::TFromD<decltype(di)>>(q / {L} - (q - q % N) / {L});",
            # the rows those loads touch, all before r1
            f"    const dx::index_t reach = std::max<dx::index_t>(G, (P - N) / {L} + N);",
        ] if n_rowvals else ["    const dx::index_t reach = G;"]),
        "    for (; r + reach <= r1; r += G) {",
        f"      for (dx::index_t i = 0; i < P; i += N) hn::Store({k}_at(d, {spread}, i), d, v + i);",
        f"      for (dx::index_t g = 0; g < G; ++g) out[r + g] = fold(v + g * {L});",
        "    }",
        "    for (; r < r1; ++r) {  // rows left over: one padded vector each",
        f"      const dx::index_t m = {L};",
        *_padded(T, n_leaves, f"r * {L}", "      "),
        f"      hn::Store({k}_at(d, {pad}, 0), d, v);",
        "      out[r] = fold(v);",
        "    }",
        "  }",
    ]


def _padded(T: str, n_leaves: int, at: str, indent: str) -> list[str]:
    """A direct loop's last partial vector: each leaf's elements from `at` copied into t<n>,
    the lanes past the end filled with the first of them (a real element: no
    floating-point flag NumPy would not raise); `m` is the number of real lanes."""
    lines = [f"{indent}alignas(64) {T} t{n}[dx::simd::max_lanes_v<decltype(d)>];"
             for n in range(n_leaves)]
    lines.append(f"{indent}for (dx::index_t j = 0; j < N; ++j) {{")
    lines += [f"{indent}  t{n}[j] = l{n}[{at} + (j < m ? j : 0)];" for n in range(n_leaves)]
    return lines + [f"{indent}}}"]


def _tuple(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def index_item(it: tuple) -> str:
    kind = it[0]
    if kind == "int":
        return str(int(it[1]))
    if kind == "newaxis":
        return "dx::newaxis"
    if kind == "ellipsis":
        return "dx::ellipsis"
    if kind == "slice":
        start, stop, step = (tuple(it[1:]) + (None, None, None))[:3]

        def b(x):
            return "dx::none" if x is None else str(int(x))

        return f"dx::slice({b(start)}, {b(stop)}, {1 if step is None else int(step)})"
    raise NotImplementedError(f"dynexpr codegen: index item {it!r}")


def scalar_literal(value, dtype: str) -> str:
    """A C++ literal of exactly the value NumPy's `dtype(value)` holds."""
    if dtype == "bool":
        return "true" if bool(value) else "false"
    if dtype in ("float32", "float64"):
        x = float(value)
        T = CTYPE[dtype]
        if math.isnan(x):
            return f"std::numeric_limits<{T}>::quiet_NaN()"
        if math.isinf(x):
            return f"{'-' if x < 0 else ''}std::numeric_limits<{T}>::infinity()"
        if dtype == "float32":
            # NumPy's float32 repr is the shortest text that reads back as this float32;
            # C++ parses `<text>f` to the nearest float, the same one.
            text = str(np.float32(x))
            if "e" not in text and "." not in text:
                text += ".0"
            return text + "f"
        text = repr(x)
        return text if ("." in text or "e" in text) else text + ".0"
    n = int(value)
    bits = {"uint8": 8, "int32": 32, "int64": 64}[dtype]
    if dtype == "uint8":
        n %= 256
    elif n >= 2 ** (bits - 1) or n < -(2 ** (bits - 1)):
        n = (n + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1)  # NumPy's wrap-around
    if dtype == "int64" and n == -(2 ** 63):
        return "std::numeric_limits<std::int64_t>::min()"
    return f"{CTYPE[dtype]}{{{n}}}" if n >= 0 else f"{CTYPE[dtype]}({n})"


def weak_literal(value, kind) -> str:
    """A NEP 50 weak Python scalar: a C++ literal of its kind, which dynexpr promotes as
    NumPy 2 does (`x_f32 * 2.0` stays float32)."""
    kind = kind if isinstance(kind, str) else getattr(kind, "__name__", str(kind))
    if kind == "bool":
        return "true" if value else "false"
    if kind == "float":
        x = float(value)
        if math.isnan(x):
            return "std::numeric_limits<double>::quiet_NaN()"
        if math.isinf(x):
            return f"{'-' if x < 0 else ''}std::numeric_limits<double>::infinity()"
        text = repr(x)
        return text if ("." in text or "e" in text) else text + ".0"
    n = int(value)
    if n == -(2 ** 63):
        return "std::numeric_limits<std::int64_t>::min()"
    return f"std::int64_t{{{n}}}" if n >= 0 else f"std::int64_t({n})"
