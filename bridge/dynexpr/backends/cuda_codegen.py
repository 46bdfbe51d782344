"""backend="cuda", codegen: a Schedule (the same one the cpu backend renders as C++
expression templates, schedule.py) rendered as one CUDA C++ unit of __global__ kernels
plus the list of launches that runs it.

    unit = generate(schedule.schedule(graph), contiguous={0, 1})
    unit.source      # prelude (cuda_prelude.py) + one extern "C" kernel per launch
    unit.launches    # [Launch(kernel, grid, block, args)] in order
    unit.arrays      # every buffer: inputs x<i>, outputs o<k>, temporaries t<k>,
                     # workspaces w<k> (reduction partials, scratch copies)

Note [cuda kernels]
- One kernel per fused pointwise group (schedule.Kernel), each a grid-stride loop over the
  group's shape; the lazy values of the group are locals of the loop body.
- Operands are read through index maps, not copies: a view op (getitem, transpose,
  broadcast_to, expand_dims, squeeze, reshape) maps the loop's multi-index to its base's,
  and an array turns a multi-index into an address with its strides: constants for the
  unit's own buffers and for inputs that were C-contiguous when generated (`contiguous`,
  checked again by every launcher), kernel parameters (element strides) for the others.
- 32-bit indices unless a size (of a loop, or of a buffer addressed with constant
  strides) needs 64 bits; addresses through stride parameters are always 64-bit.
- Constants (`const`, `full`) are kernel parameters, so the kernel text does not depend
  on their values.
- Reductions (sum prod min max mean any all var std, over any axes): each output element is
  reduced by G blocks of BLOCK threads; each thread accumulates a strided share, the
  block combines its shared-memory slots in a fixed tree, and with G > 1 a second kernel
  combines the G partials the same way. G and BLOCK depend only on the sizes, so the
  order of the additions, hence the result, is the same on every run and every device.
- A store into an array the same kernel also reads at another address (x[1:] = x[:-1],
  a mutated argument read transposed) is a race on a GPU: it goes through a workspace
  copy (two kernels).
- A run of kernels in which rows never mix (softmax, layernorm, logsumexp) is one
  kernel, a block per row (Note [cuda row kernels] in cuda_rows.py).
- A matrix product is the arguments' library's (cuBLAS through cupy.matmul), a step
  between the kernels (Note [matmul through the library]).
Not generated yet (NotImplementedError naming it): loops.
argmin/argmax take one block per output element (no grid split yet).

"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from .. import codegen, ir
from ..schedule import Buffer, Schedule
from .cuda_index import (
    BLOCK,
    CT,
    Array,
    broadcast_index,
    c_strides,
    eval_extent,
    getitem_map,
    prod,
    static,
    unravel,
    view_map,
)
from .cuda_prelude import prelude
from .cuda_reduce import Reductions
from .cuda_rows import Rows

MAX_GRID = 8192


@dataclass
class Launch:
    kernel: str
    grid: int
    block: int
    # ("ptr", array) | ("stride", array, axis) | ("scalar", dtype, value)
    # | ("count", python expression over the dynamic extents n_<name>)
    args: list = field(default_factory=list)
    # Not a kernel of the unit: ("matmul", a, b, out) array names, run by the arguments'
    # library (Note [matmul through the library])
    library_call: tuple | None = None


@dataclass
class CudaUnit:
    source: str
    arrays: dict
    launches: list
    schedule: Schedule
    index_type: str
    contiguous: frozenset


def resolve(unit: CudaUnit, inputs) -> dict:
    """The dynamic extents' values (n_<name>) for one call, read from the inputs' shapes."""
    return {f"n_{name}": int(inputs[i].shape[axis])
            for name, (i, axis) in unit.schedule.symbols.items()}


ITEMSIZE = {"bool": 1, "uint8": 1, "int32": 4, "int64": 8, "float32": 4, "float64": 8}


def _matmul_shape(a: tuple, b: tuple) -> tuple | None:
    """np.matmul's result shape for operand shapes a and b; None where a dynamic batch
    extent leaves it open."""
    if len(a) == 1 and len(b) == 1:
        return ()
    if len(a) == 1:
        return (*b[:-2], b[-1])
    if len(b) == 1:
        return tuple(a[:-1])
    ba, bb = a[:-2], b[:-2]
    n = max(len(ba), len(bb))
    ba, bb = (1,) * (n - len(ba)) + tuple(ba), (1,) * (n - len(bb)) + tuple(bb)
    batch = []
    for x, y in zip(ba, bb):
        if x == y or y == 1:
            batch.append(x)
        elif x == 1:
            batch.append(y)
        else:
            return None
    return (*batch, a[-2], b[-1])


def evaluate(expr, dims: dict) -> int:
    """A launch's grid or a ("count", expr) argument for one call."""
    return expr if isinstance(expr, int) else eval_extent(expr, dims)


def generate(s: Schedule, contiguous=frozenset()) -> CudaUnit:
    return _Unit(s, frozenset(contiguous)).render()


class _Unit(Reductions, Rows):
    def __init__(self, s: Schedule, contiguous: frozenset):
        self.s = s
        self.arrays: dict[str, Array] = {}
        for i, (dtype, shape, _) in enumerate(s.inputs):
            self.arrays[f"x{i}"] = Array(f"x{i}", dtype, tuple(shape), i not in contiguous)
        for b in s.outputs:
            self.arrays[f"o{b.index}"] = Array(f"o{b.index}", b.dtype, tuple(b.shape))
        self.kernels: list[str] = []
        self.launches: list[Launch] = []
        self.contiguous = contiguous
        self.n_work = 0
        self.n_synthetic = 0  # values made by the generator itself (_synthetic)
        self.dims = list(s.symbols)  # dynamic extents: parameters of every kernel
        shapes = [a.shape for a in self.arrays.values()] + [
            st.buffer.shape for k in s.kernels for st in k.stores] + [
            v.shape for v in s.values]
        big = max([math.prod(sh) for sh in shapes if not any(isinstance(d, str) for d in sh)]
                  + [0]) + MAX_GRID * BLOCK
        # 64-bit when a size needs it, or is not known before the call
        self.I = "int" if big < 2 ** 31 and not self.dims else "long long"
        # Note [cuda row kernels]: while a row kernel is rendered, the values recomputed
        # where read (not stored) and the reductions read from __shared__ scalars
        self.inline: set[int] = set()
        self.row_scalars: dict[int, str] = {}

    def array_of(self, b: Buffer) -> Array:
        name = {"in": "x", "out": "o", "tmp": "t"}[b.kind] + str(b.index)
        if name not in self.arrays:
            self.arrays[name] = Array(name, b.dtype, tuple(b.shape))
        return self.arrays[name]

    def workspace(self, dtype: str, shape: tuple) -> Array:
        a = Array(f"w{self.n_work}", dtype, tuple(shape))
        self.n_work += 1
        self.arrays[a.name] = a
        return a

    # ----------------------------------------------------------------------- render
    def render(self) -> CudaUnit:
        rows = self.row_runs()  # Note [cuda row kernels]
        skip = -1
        for n, k in enumerate(self.s.kernels):
            if n <= skip:
                continue
            if n in rows:
                self.row_kernel(rows[n])
                skip = rows[n].last
                continue
            if k.kind in ("loop", "loop_out"):
                raise NotImplementedError(f"dynexpr cuda codegen: {k.kind} is not generated "
                                          "for CUDA yet")
            if k.kind == "matmul":
                for st in k.stores:
                    self.matmul(st.value, self.array_of(st.buffer))
                continue
            if k.kind == "pointwise":
                self.pointwise(k.stores)
            elif k.kind == "reduction":
                for st in k.stores:
                    self.reduction(st.value, self.array_of(st.buffer))
            elif k.kind == "setitem":
                for st in k.stores:
                    self.setitem(st.value, st.buffer)
            else:  # copy
                for st in k.stores:
                    self.pointwise([st], as_leaf=False)
        head = ["// dynexpr generated CUDA unit. Graph:"]
        head += ["//   " + ln for ln in self.s.graph.canonical().splitlines()]
        source = "\n".join(head + [prelude(), "", *self.kernels, ""])
        return CudaUnit(source, self.arrays, self.launches, self.s, self.I, self.contiguous)

    def _grid(self, n: str):
        """Blocks for n elements: an int, or a Python expression over the dynamic extents."""
        if static(n) is not None:
            return max(1, min(MAX_GRID, -(-static(n) // BLOCK)))
        return f"max(1, min({MAX_GRID}, -(-({n}) // {BLOCK})))"

    def pointwise(self, stores, as_leaf: bool = True) -> None:
        """One grid-stride kernel computing every store of a fused group (as_leaf=False:
        copying values that already have a buffer of their own)."""
        shape = tuple(stores[0].value.shape)
        jobs = [(st.value, self.array_of(st.buffer), None) for st in stores]
        self._pointwise_kernel(shape, jobs, as_leaf)

    def _pointwise_kernel(self, shape, jobs, as_leaf=True) -> None:
        """jobs: (value, destination array, index map or None: the identity)."""
        k = _Kernel(self, shape, linear=True)
        rendered = [(v, dest, imap, k.value(v, k.idx, as_leaf=as_leaf)) for v, dest, imap in jobs]
        stores = []
        for v, dest, imap, expr in rendered:
            didx = k.idx if imap is None else imap(k.idx)
            addr = k.address(dest, didx, write=True)
            clash = {a for a in k.reads.get(dest.name, set()) if a != addr}
            if clash:  # Note [cuda kernels]: read elsewhere in this kernel -> via a copy
                w = self.workspace(v.dtype, shape)
                self._pointwise_kernel(shape, [(v, w, None)], as_leaf)
                src = ir.Value("input", (), v.dtype, shape, (("workspace", w.name),), -1)
                self._pointwise_kernel(shape, [(src, dest, imap)])
                continue
            stores.append(f"{dest.name}[{addr}] = {expr};")
        if stores:
            self.emit_pointwise(k, stores)

    def emit_pointwise(self, k: _Kernel, stores: list[str]) -> None:
        n = prod(k.shape)
        I = self.I
        name = f"k{len(self.launches)}"
        element = k.unravel("i", k.shape, k.idx) + k.lines + stores
        body = [(f"  for ({I} i = ({I})blockIdx.x * blockDim.x + threadIdx.x; i < {n}; "
                 f"i += ({I})gridDim.x * blockDim.x) {{")]
        body += ["    " + ln for ln in element] + ["  }"]
        width = self._vector_width(k, stores)
        if width:
            body = self._vectorised(k, element, stores, width, n, body)
        vn = None if not width else (static(n) // width + 1 if static(n) is not None
                                     else f"({n}) // {width} + 1")
        grid = self._grid(n if not width else str(vn))
        self.add_kernel(name, k, ["DXCU_THREADS {", *body, "}"], grid, BLOCK)

    def _vector_width(self, k: _Kernel, stores: list[str]) -> int:
        """Note [vector loads]
        A pointwise kernel whose every read and store is at the loop's own linear index
        (contiguous buffers of the loop's shape: no broadcast, stride or view) moves
        `width` consecutive elements per access, 16 bytes of its widest dtype, when every
        pointer is aligned to its access (checked per launch, in the kernel: a view at an
        odd offset takes the element loop). The element body is the same text, run on
        registers for j < width (unrolled); the remainder n % width takes the element
        loop. Other kernels stay element by element."""
        written = {st.split("[", 1)[0] for st in stores}
        if any(not st.split("[", 1)[1].startswith("i] = ") for st in stores):
            return 0
        if any(addrs != {"i"} for addrs in k.reads.values()):
            return 0
        names = written | set(k.reads)
        if not names or not k.shape:
            return 0
        width = 16 // max(ITEMSIZE[self.arrays[a].dtype] for a in names)
        return width if width >= 2 else 0

    def _vectorised(self, k: _Kernel, element: list[str], stores: list[str], width: int, n,
                    scalar_loop: list[str]) -> list[str]:
        I = self.I
        read = sorted(k.reads)
        written = sorted({st.split("[", 1)[0] for st in stores})
        names = sorted(set(read) | set(written))
        vec = {a: f"dxcu_vec<{CT[self.arrays[a].dtype]}, {width}>" for a in names}
        aligned = " && ".join(f"dxcu_aligned<{width}>({a})" for a in names)
        lanes = [re.sub(r"\b([xotw]\d+)\[i\]", r"\1_v.v[j]", ln) for ln in element]
        step = f"({I})gridDim.x * blockDim.x"
        out = [f"  if ({aligned}) {{",
               f"    const {I} nv = ({n}) / {width};",
               f"    for ({I} v = ({I})blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += {step}) {{"]
        for a in names:
            if a in read:
                out.append(f"      {vec[a]} {a}_v = *reinterpret_cast<const {vec[a]}*>({a} + v * {width});")
            else:
                out.append(f"      {vec[a]} {a}_v;")
        out += ["      #pragma unroll", f"      for (int j = 0; j < {width}; ++j) {{",
                f"        const {I} i = v * {width} + j;"]
        out += ["        " + ln for ln in lanes] + ["      }"]
        out += [f"      *reinterpret_cast<{vec[a]}*>({a} + v * {width}) = {a}_v;" for a in written]
        first = f"nv * {width} + ({I})blockIdx.x * blockDim.x + threadIdx.x"
        out += ["    }", f"    for ({I} i = {first}; i < {n}; i += {step}) {{"]
        out += ["      " + ln for ln in element] + ["    }", "  } else {"]
        out += ["  " + ln for ln in scalar_loop] + ["  }"]
        return out

    def add_kernel(self, name, k: _Kernel, body: list[str], grid, block: int) -> None:
        dims = [(f"long long n_{d}", ("count", f"n_{d}")) for d in self.dims]
        k.params[:0] = dims
        params = ", ".join(decl for decl, _ in k.params)
        self.kernels.append(f'extern "C" __global__ void __launch_bounds__({block}) '
                            f"{name}({params}) {{")
        self.kernels += ["  " + ln for ln in body] + ["}", ""]
        self.launches.append(Launch(name, grid, block, [arg for _, arg in k.params]))

    # -------------------------------------------------------------------- matmul
    def matmul(self, v: ir.Value, dest: Array) -> None:
        """Note [matmul through the library]
        A product is not a generated kernel: the unit asks the arguments' library for it
        (cupy.matmul, i.e. cuBLAS, torch.matmul; launch.library_call), on the stream the
        kernels run on, between the kernels that produce its operands and those that read
        it, as Inductor calls extern mm kernels. An operand that is not an array of the
        unit (a fused expression, a transposed or sliced view) is first written to a
        workspace by a kernel; the folded scale and bias (Note [alpha/beta folding] in
        blas_fold.py) are one pointwise kernel over the product afterwards."""
        a, b = (self.operand(u) for u in v.args[:2])
        want = _matmul_shape(a.shape, b.shape)
        if want is not None and tuple(want) != tuple(v.shape):
            raise NotImplementedError(f"dynexpr cuda codegen: matmul of {a.shape} and "
                                      f"{b.shape} into {v.shape}")
        self.launches.append(Launch(f"matmul{len(self.launches)}", 0, 0,
                                    library_call=("matmul", a.name, b.name, dest.name)))
        rest = list(v.args[2:])
        alpha = rest.pop(0) if v.attr("scaled") else None
        bias = rest.pop(0) if v.attr("bias") else None
        if alpha is None and bias is None:
            return
        e = self._synthetic("input", (), v.shape, v.dtype, (("workspace", dest.name),))
        if alpha is not None:
            e = self._synthetic("multiply", (alpha, e), v.shape, v.dtype)
        if bias is not None:
            e = self._synthetic("add", (e, bias), v.shape, v.dtype)
        self._pointwise_kernel(tuple(v.shape), [(e, dest, None)])

    def operand(self, u: ir.Value) -> Array:
        st = self.s.storage.get(u.id)
        if u.op == "input" and not u.attr("workspace"):
            return self.arrays[f"x{u.attr('index')}"]
        if isinstance(st, Buffer):
            return self.array_of(st)
        w = self.workspace(u.dtype, tuple(u.shape))
        self._pointwise_kernel(tuple(u.shape), [(u, w, None)])
        return w

    def _synthetic(self, op: str, args: tuple, shape, dtype: str, attrs: tuple = ()) -> ir.Value:
        """A value made here (not in the graph), with an id no graph value has."""
        self.n_synthetic += 1
        return ir.Value(op, args, dtype, tuple(shape), attrs, 1_000_000_000 + self.n_synthetic)

    # ------------------------------------------------------------------- setitem
    def setitem(self, v: ir.Value, b: Buffer) -> None:
        dest = self.array_of(b)
        base, value = v.args[0], v.args[1]
        same = (b.kind == "in" and base.op == "input" and base.attr("index") == b.index) \
            or self.s.storage.get(base.id) == b
        if not same:
            self._pointwise_kernel(tuple(base.shape), [(base, dest, None)])
        items = v.attr("index")
        self._pointwise_kernel(tuple(value.shape),
                               [(value, dest, lambda idx: getitem_map(items, base.shape, idx))],
                               as_leaf=False)

    def new_kernel(self, shape: tuple) -> _Kernel:
        return _Kernel(self, shape)


class _Kernel:
    """One kernel's body over a domain shape: lazy values as locals, parameters."""

    def __init__(self, unit: _Unit, shape: tuple, linear: bool = False):
        self.u = unit
        self.linear = linear  # the body has the linear index `i` over shape
        self.shape = tuple(shape)
        self.idx = [f"i{d}" for d in range(len(self.shape))]
        self.lines: list[str] = []
        self.params: list[tuple[str, tuple]] = []
        self.seen: set[str] = set()
        self.names: dict[tuple, str] = {}  # (value id, index) -> local name
        self.reads: dict[str, set[str]] = {}

    def unravel(self, lin, shape, names) -> list[str]:
        return unravel(lin, shape, names, self.u.I)

    # ---------------------------------------------------------------- parameters
    def ptr(self, a: Array, write: bool) -> str:
        key = f"ptr {a.name}"
        if key not in self.seen:
            self.seen.add(key)
            const = "" if a.name[0] in "otw" or write else "const "
            self.params.append((f"{const}{CT[a.dtype]}* __restrict__ {a.name}", ("ptr", a.name)))
        elif write and a.name[0] == "x":
            k = next(n for n, (_, arg) in enumerate(self.params) if arg == ("ptr", a.name))
            self.params[k] = (self.params[k][0].removeprefix("const "), self.params[k][1])
        return a.name

    def stride(self, a: Array, axis: int) -> str:
        name = f"{a.name}s{axis}"
        if name not in self.seen:
            self.seen.add(name)
            self.params.append((f"long long {name}", ("stride", a.name, axis)))
        return name

    def scalar(self, v: ir.Value) -> str:
        name = f"c{v.id}"
        if name not in self.seen:
            self.seen.add(name)
            self.params.append((f"{CT[v.dtype]} {name}", ("scalar", v.dtype, v.attr("value"))))
        return name

    # ------------------------------------------------------------------ addresses
    def address(self, a: Array, idx: list[str], write: bool = False) -> str:
        self.ptr(a, write)
        if self.linear and idx is self.idx and not a.strided and a.shape == self.shape and self.shape:
            if not write:
                self.reads.setdefault(a.name, set()).add("i")
            return "i"  # the loop's own linear index: a contiguous buffer of its shape
        terms = []
        if a.strided:
            for d, e in enumerate(idx):
                if e != "0" and a.shape[d] != 1:
                    terms.append(f"({e}) * {self.stride(a, d)}")
        else:
            for e, st in zip(idx, c_strides(a.shape)):
                if e != "0":
                    terms.append(e if st == "1" else f"({e}) * {st}")
        addr = " + ".join(terms) or "0"
        if not write:
            self.reads.setdefault(a.name, set()).add(addr)
        return addr

    # --------------------------------------------------------------------- values
    def value(self, v: ir.Value, idx: list[str], as_leaf: bool = False) -> str:
        """A C expression of v's element at multi-index idx (of v's shape); as_leaf:
        v itself is being materialised, so its own storage is not read."""
        row = self.u.row_scalars.get(v.id)
        if row is not None:  # Note [cuda row kernels]
            return row
        st = None if as_leaf or v.id in self.u.inline else self.u.s.storage.get(v.id)
        if v.op == "input" and v.attr("workspace"):
            a = self.u.arrays[v.attr("workspace")]
            return f"{a.name}[{self.address(a, idx)}]"
        if isinstance(st, Buffer):
            a = self.u.array_of(st)
            return f"{a.name}[{self.address(a, idx)}]"
        if v.op == "input":
            a = self.u.arrays[f"x{v.attr('index')}"]
            return f"{a.name}[{self.address(a, idx)}]"
        if v.op in ("const", "full"):
            return self.scalar(v)
        if v.op in ir.VIEWS:
            base = v.args[0]
            return self.value(base, view_map(v, base.shape, idx, self.u.I))
        return self._lazy(v, idx)

    def _is_lazy(self, u: ir.Value) -> bool:
        if u.id in self.u.row_scalars:
            return False
        return ((u.id in self.u.inline or not isinstance(self.u.s.storage.get(u.id), Buffer))
                and u.op not in ("input", "const", "full") and u.op not in ir.VIEWS)

    def _lazy(self, v: ir.Value, idx: list[str]) -> str:
        """A lazy (fused) value at idx, declared as a local once per index it is read at
        (an operand of lower rank is read at its broadcast index). Note [no recursion on
        graph depth] (ir.py): fused chains can be as long as an unrolled loop, so the
        operands are declared from an explicit stack, deepest first."""
        stack = [(v, idx)]
        while stack:
            u, ui = stack[-1]
            if (u.id, tuple(ui)) in self.names:
                stack.pop()
                continue
            todo = [(a, ai) for a, ai in self._operands(u, ui)
                    if self._is_lazy(a) and (a.id, tuple(ai)) not in self.names]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            name = f"v{u.id}" + ("" if ui is self.idx else f"_{len(self.names)}")
            self.lines.append(f"const {CT[u.dtype]} {name} = {self.pointwise(u, ui)};")
            self.names[(u.id, tuple(ui))] = name
        return self.names[(v.id, tuple(idx))]

    def _operands(self, v: ir.Value, idx: list[str]):
        return [(a, broadcast_index(a.shape, v.shape, idx)) for a in v.args]

    def pointwise(self, v: ir.Value, idx: list[str]) -> str:
        T = CT[v.dtype]
        args = [self.value(a, ai) for a, ai in self._operands(v, idx)]
        if v.op == "astype":
            return f"dxcu::cast<{T}>({args[0]})"
        if v.op == "where":
            return f"({args[0]} ? {args[1]} : {args[2]})"
        if v.op not in codegen.manifest.OPS:
            raise NotImplementedError(f"dynexpr cuda codegen: op {v.op}")
        op = ir.computed_op(v)
        ct = v.args[0].dtype
        if v.dtype in ("float32", "float64") and ct in ("bool", "uint8"):
            args = [f"dxcu::cast<{T}>({x})" for x in args]  # as codegen.operand does
            ct = v.dtype
        if op in ("x**2", "x**3"):  # Note [small powers] in codegen.py, as on the cpu
            sq = f"dxcu::ops::square_op::scalar<{T}>({args[0]})"
            return sq if op == "x**2" else f"({args[0]} * {sq})"
        if codegen.manifest.OPS[op]["rule"] == "logical_rule" and ct != "bool":
            # ops/rules.hpp: logical ops compute on truth values
            args = [f"dxcu::cast<bool>({x})" for x in args]
            ct = "bool"
        sid = codegen.manifest.OPS[op]["id"]
        return f"dxcu::ops::{sid}::scalar<{CT[ct]}>({', '.join(args)})"
