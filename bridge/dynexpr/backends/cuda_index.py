"""Index arithmetic of generated CUDA kernels (cuda_codegen.py), as C text: extents
(literals, or parameters n_<name> for dynamic ones), row-major strides and unravelling,
and the index maps of NumPy's implicit broadcasting and of the view ops, which turn the
multi-index of a view's element into its base's (Note [cuda kernels]); and the text of
a reduction's combination (its identity, its combining function, the block's tree)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from .. import ir

CT = {"bool": "bool", "uint8": "unsigned char", "int32": "int", "int64": "long long",
      "float32": "float", "float64": "double"}
BLOCK = 256


_EXTENT_NAMES = {"__builtins__": {}, "max": max, "min": min}


@functools.lru_cache(maxsize=1024)
def _compiled(expr: str):
    return compile(expr, "<cuda extent>", "eval")


def eval_extent(expr: str, dims: dict) -> int:
    """An extent or launch expression of generated text (integers, n_<name> parameters,
    + - * // min max) for one call's dynamic extents; compiled once per text, since a
    launch evaluates its grid and counts on every call."""
    return int(eval(_compiled(expr), _EXTENT_NAMES, dims))  # noqa: S307 - our own text


def ext(d) -> str:
    """An extent as C (and Python) text: a literal, or the parameter of a dynamic one."""
    return f"n_{d}" if isinstance(d, str) else str(int(d))


def prod(shape) -> str:
    """The product of extents as text ("n_s0 * 20"), constants folded."""
    c = math.prod(int(d) for d in shape if not isinstance(d, str))
    syms = [ext(d) for d in shape if isinstance(d, str)]
    return " * ".join(syms + ([str(c)] if c != 1 or not syms else []))


def c_strides(shape) -> list[str]:
    return [prod(shape[k + 1:]) for k in range(len(shape))]


def static(x: str):
    """x as an int when it has no dynamic extent in it, else None."""
    return int(x) if x.lstrip("-").isdigit() else None


def as_tuple(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def unravel(lin: str, shape, names, I) -> list[str]:
    """Declarations of `names` (row-major) from the linear index `lin` over shape."""
    if not names:
        return []
    lines = [f"{I} r_{lin} = {lin};"]
    for d in range(len(names) - 1, 0, -1):
        e = ext(shape[d])
        lines.append(f"const {I} {names[d]} = r_{lin} % {e}; r_{lin} /= {e};")
    lines.append(f"const {I} {names[0]} = r_{lin};")
    return lines


def getitem_map(items, base_shape, idx: list[str]) -> list[str]:
    """getitem: the base's multi-index of the view element at idx (Note [what capture
    guarantees]: starts are >= 0, a missing trailing item is the whole dim)."""
    out, k = [], 0
    for it in items:
        if it[0] == "int":
            out.append(str(int(it[1])))
        elif it[0] == "slice":
            start = 0 if it[1] is None else int(it[1])
            step = 1 if it[3] is None else int(it[3])
            out.append(affine(start, step, idx[k]))
            k += 1
        elif it[0] == "newaxis":
            k += 1
        else:
            raise NotImplementedError(f"dynexpr cuda codegen: index item {it!r}")
    while len(out) < len(base_shape):
        out.append(idx[k])
        k += 1
    return out


def affine(start: int, step: int, i: str) -> str:
    term = i if step == 1 else f"{step} * {i}"
    return term if start == 0 else f"({start} + {term})"


def broadcast_index(shape, out_shape, idx: list[str]) -> list[str]:
    """NumPy's implicit broadcasting: the index of an operand of `shape` read by an
    element at idx of out_shape (the same list when the shapes are equal)."""
    if tuple(shape) == tuple(out_shape):
        return idx
    lead = len(out_shape) - len(shape)
    # a dynamic extent is never 1 (the guards make 0 and 1 static, as TorchDynamo does)
    return ["0" if shape[j] == 1 else idx[lead + j] for j in range(len(shape))]


def view_map(v: ir.Value, base_shape, idx: list[str], I: str) -> list[str]:
    """The base's multi-index of view v's element at idx."""
    op = v.op
    nb = len(base_shape)
    if op == "getitem":
        return getitem_map(v.attr("index"), base_shape, idx)
    if op == "transpose":
        axes = v.attr("axes")
        axes = tuple(range(nb))[::-1] if axes is None else tuple(a % nb for a in axes)
        out = [""] * nb
        for k, a in enumerate(axes):
            out[a] = idx[k]
        return out
    if op == "broadcast_to":
        lead = len(v.shape) - nb
        return ["0" if base_shape[j] == 1 else idx[lead + j] for j in range(nb)]
    if op == "expand_dims":
        axes = {a % len(v.shape) for a in as_tuple(v.attr("axis"))}
        return [e for k, e in enumerate(idx) if k not in axes]
    if op == "squeeze":
        ax = v.attr("axis")
        axes = ({k for k, d in enumerate(base_shape) if d == 1} if ax is None
                else {a % nb for a in as_tuple(ax)})
        it = iter(idx)
        return ["0" if j in axes else next(it) for j in range(nb)]
    if op == "reshape":
        if tuple(base_shape) == tuple(v.shape):
            return list(idx)
        flat = " + ".join(f"({I})({e}) * {s}" for e, s in zip(idx, c_strides(v.shape))) or "0"
        return [f"(({flat}) / ({s})) % {ext(d)}" for s, d in zip(c_strides(base_shape), base_shape)]
    raise NotImplementedError(f"dynexpr cuda codegen: view op {op}")


def combiner(op: str, dtype: str):
    T = CT[dtype]
    if op in ("sum", "mean"):
        return (lambda a, b: f"dxcu::ops::add_op::scalar<{T}>({a}, {b})"), f"({T})0"
    if op == "prod":
        return (lambda a, b: f"dxcu::ops::mul_op::scalar<{T}>({a}, {b})"), f"({T})1"
    if op == "any":
        return (lambda a, b: f"({a} || {b})"), "false"
    if op == "all":
        return (lambda a, b: f"({a} && {b})"), "true"
    fn = "scalar_min" if op == "min" else "scalar_max"
    if dtype in ("float32", "float64"):
        ident = f"{'' if op == 'min' else '-'}dxcu::std::numeric_limits<{T}>::infinity()"
    else:
        ident = f"dxcu::std::numeric_limits<{T}>::{'max' if op == 'min' else 'min'}()"
    return (lambda a, b: f"dxcu::ops::detail::{fn}<{T}>({a}, {b})"), ident


def tree(acc: str, combine) -> list[str]:
    """The block's fixed-order combination of its BLOCK shared slots (Note [phases])."""
    return ["DXCU_SYNC",
            f"for (unsigned s = {BLOCK // 2}; s > 0; s >>= 1) {{",
            "  DXCU_THREADS {",
            (f"    if (threadIdx.x < s) sh[threadIdx.x] = "
             f"{combine('sh[threadIdx.x]', 'sh[threadIdx.x + s]')};"),
            "  }",
            "  DXCU_SYNC",
            "}"]


@dataclass
class Array:
    name: str
    dtype: str
    shape: tuple
    strided: bool = False  # its element strides are kernel parameters

    def extents(self, dims: dict) -> tuple:
        """The shape with dynamic extents (and workspace size expressions) evaluated."""
        return tuple(eval_extent(ext(d) if not isinstance(d, str) or not d.startswith("(")
                                 else d, dims) for d in self.shape)
