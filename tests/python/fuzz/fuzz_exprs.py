"""The values and expressions of a random NumPy program (fuzz_programs.py draws the
statements): arguments and their inputs, and ExprGen, which draws an expression as
Python source while it evaluates it with plain NumPy.

Note [exact operands of discontinuous ops]
The compiled kernels may round differently from NumPy within the op table's ULP bounds
(SIMD math, fused multiply-add, another summation order). A comparison, floor, //, %,
rint, sign, argmax or a cast to an integer turns such a last-bit difference into a
different answer, which would be noise, not a bug. So those ops only take operands that
both sides compute exactly: arguments, constants, integer and bool values, and exact
functions of them (negation, abs, min/max, views, where).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

DTYPES = ("float64", "float32", "int64", "int32", "bool")
# Base shapes: odd extents (SIMD tails), a 3-d one, and one large enough for the main
# vector loop and the thread pool.
BASE_SHAPES = ((5, 7), (3, 4, 6), (33,), (130, 257))
FLOAT_CONSTS = ("0.5", "2.0", "-1.5", "3.0")
INT_CONSTS = ("2", "3", "-1", "0")

UNARY_FLOAT = ("exp", "log", "sqrt", "sin", "cos", "tanh", "arctan", "expm1", "log1p", "square",
               "reciprocal", "exp2", "sinh", "cosh", "arcsinh")
UNARY_EXACT = ("negative", "absolute", "floor", "ceil", "rint", "trunc", "sign")
DISCONTINUOUS = {"floor", "ceil", "rint", "trunc", "sign"}
BINARY_OPS = ("+", "-", "*", "/", "//", "%", "**")
BINARY_NP = ("maximum", "minimum", "arctan2", "hypot", "add", "multiply", "subtract")
COMPARE = ("<", "<=", ">", ">=", "==", "!=")
BITWISE = ("&", "|", "^", "<<", ">>")  # shifts: counts past the width too
REDUCTIONS = ("sum", "mean", "max", "min", "prod", "any", "all", "std", "var", "argmax", "argmin")
EXACT_REDUCTIONS = {"max", "min", "any", "all"}  # prod/sum of ints too: see _reduction
INPLACE = ("+=", "-=", "*=", "/=", "//=", "%=", "**=")


@dataclass
class Arg:
    name: str
    dtype: str
    rule: tuple  # (leading dims dropped, dims set to 1 (after dropping), scalar0d)
    layout: str = "C"  # "C", "T" (a transposed array) or "step" (every other element)
    alias: int | None = None  # the same array object as argument `alias`

    def shape(self, base: tuple) -> tuple:
        drop, ones, zero_d = self.rule
        if zero_d:
            return ()
        s = list(base[drop:])
        for i in ones:
            s[i] = 1
        return tuple(s)


@dataclass
class Program:
    source: str
    args: list
    base: tuple
    specials: bool
    seed: int
    loose: bool  # float32 rounding somewhere in it: float32's tolerance for every float
    scale: float  # largest finite magnitude seen (absolute tolerance of cancellations)
    red_n: int  # largest reduction length (summation order)
    resize: bool  # also call it with a second base shape (dynamic dimensions)
    flip: bool  # also call it with other layouts and aliased arguments (guards)
    raises: bool  # its first input set makes plain NumPy raise
    notes: list = field(default_factory=list)

    def inputs(self, which: int, base: tuple | None = None, flip: bool = False) -> list:
        """Input set `which` (0: the one it was generated on; it alone may hold NaN/inf).
        flip: each argument in the next layout, and one that matches the first argument's
        dtype and shape is that array or its reverse (guards on strides and aliasing)."""
        rng = np.random.default_rng([self.seed, which])
        out = []
        for i, a in enumerate(self.args):
            shape = a.shape(base or self.base)
            if a.alias is not None:
                out.append(out[a.alias])
                continue
            if flip and i and a.dtype == self.args[0].dtype and shape == out[0].shape:
                out.append(out[0] if which % 2 or not shape else out[0][::-1])
                continue
            special = self.specials and which == 0
            layout = {"C": "T", "T": "step", "step": "C"}[a.layout] if flip else a.layout
            if layout == "T" and len(shape) >= 2:
                x = make_array(rng, a.dtype, shape[::-1], special).T
            elif layout == "step" and shape:
                x = make_array(rng, a.dtype, shape[:-1] + (2 * shape[-1],), special)[..., ::2]
            else:
                x = make_array(rng, a.dtype, shape, special)
            out.append(x)
        return out

    def describe(self) -> str:
        """How to rebuild its inputs: Program.inputs with these fields."""
        args = ", ".join(f"{a.name}: {a.dtype} {a.shape(self.base)} {a.layout}"
                         + (f" (is {self.args[a.alias].name})" if a.alias is not None else "")
                         for a in self.args)
        return f"base={self.base} seed={self.seed} specials={self.specials} args: {args}"


def make_array(rng, dtype: str, shape: tuple, specials: bool) -> np.ndarray:
    if dtype == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    if dtype.startswith("int"):
        return np.asarray(rng.integers(-6, 7, size=shape), dtype=dtype)
    x = np.asarray(rng.uniform(-3, 3, size=shape), dtype=dtype)
    if specials and x.size:
        flat = x.reshape(-1)
        for v in (np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0):
            flat[rng.integers(0, flat.size)] = v
    return x


class ExprGen:
    """One program being drawn: its source lines and its NumPy state on input set 0
    (expressions here; statements in fuzz_programs.py)."""

    def __init__(self, draw, args, base, specials, seed):
        self.draw, self.args = draw, args
        self.env = {"np": np}
        for a, v in zip(args, Program(
            "", args, base, specials, seed, False, 1.0, 1, False, False, False).inputs(0)):
            self.env[a.name] = v
        self.exact = {a.name for a in args}  # names whose values both sides compute exactly
        self.lines: list[str] = []
        self.indent = "    "
        self.loose = any(a.dtype == "float32" for a in args)
        self.scale, self.red_n, self.ntemp = 1.0, 1, 0

    # --- values --------------------------------------------------------------------------
    def note(self, v) -> None:
        if isinstance(v, (np.ndarray, np.generic)):
            if v.dtype == np.float16:  # float ops on bool: dynexpr has no float16 (a break)
                raise TypeError("float16")
            if v.dtype == np.float32:
                self.loose = True
            if v.dtype.kind == "f" and v.size:
                fin = np.abs(v[np.isfinite(v)]) if v.ndim else (abs(v) if np.isfinite(v) else 0)
                if np.size(fin):
                    self.scale = max(self.scale, float(np.max(fin)))

    def eval(self, text: str, env=None):
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            v = eval(text, env or self.env)
        self.note(v)
        return v

    def arrays(self) -> list[str]:
        return [k for k, v in self.env.items() if isinstance(v, np.ndarray)]

    # --- expressions: (text, value, exact) -------------------------------------------------
    def leaf(self, exact_only=False):
        names = [n for n in self.arrays() if n in self.exact or not exact_only]
        name = self.draw(st.sampled_from(names or self.arrays()))
        return name, self.env[name], name in self.exact

    def scalar(self):
        kind = self.draw(st.sampled_from(("float", "int", "np.float32", "np.float64", "np.int32",
                                          "np.int64", "bool", "read")))
        pyvals = [k for k, v in self.env.items() if isinstance(v, (int, float)) and k[0] == "s"]
        if kind == "read" and pyvals:  # a Python number read from the data earlier
            t = self.draw(st.sampled_from(pyvals))
            return t, self.env[t], t in self.exact
        if kind == "read" or kind == "int" and self.draw(st.integers(0, 7)) == 0:
            # beyond int32 (NEP 50: OverflowError with an int32 array)
            t = self.draw(st.sampled_from(("3000000000", "-2147483649", "2**31")))
        elif kind == "float":
            t = self.draw(st.sampled_from(FLOAT_CONSTS))
        elif kind == "int":
            t = self.draw(st.sampled_from(INT_CONSTS))
        elif kind == "bool":
            t = self.draw(st.sampled_from(("True", "False")))
        else:
            c = self.draw(st.sampled_from(FLOAT_CONSTS if "float" in kind else INT_CONSTS))
            t = f"{kind}({c})"
        return t, self.eval(t), True

    def expr(self, depth: int, exact_only=False):
        for _ in range(8):  # redraw expressions NumPy rejects
            try:
                return self._expr(depth, exact_only)
            except Exception:  # noqa: BLE001  NumPy said no: draw another
                continue
        return self.leaf(exact_only)

    def _expr(self, depth: int, exact_only: bool):
        kinds = ["leaf"] if depth <= 0 else [
            "binary", "unary", "binary", "reduce", "where", "compare", "view", "astype", "clip",
            "bitwise", "logical", "other", "leaf"]
        kind = self.draw(st.sampled_from(kinds))
        if kind == "leaf":
            return self.leaf(exact_only)
        if kind == "unary":
            exact = self.draw(st.booleans()) or exact_only
            op = self.draw(st.sampled_from(UNARY_EXACT if exact else UNARY_FLOAT))
            x, xv, xe = self.expr(depth - 1, exact_only=op in DISCONTINUOUS or exact_only)
            if op == "negative" and self.draw(st.booleans()):
                t = f"(-{x})"
            elif op == "absolute" and self.draw(st.booleans()):
                t = f"abs({x})"
            else:
                t = f"np.{op}({x})"
            v = self.eval(t)
            return t, v, xe and (op in UNARY_EXACT or v.dtype.kind in "biu")
        if kind in ("binary", "compare", "bitwise"):
            disc = kind != "binary"
            if kind == "binary":
                op = self.draw(st.sampled_from(BINARY_OPS + BINARY_NP))
                disc = op in ("//", "%")
            else:
                op = self.draw(st.sampled_from(COMPARE if kind == "compare" else BITWISE))
            x, xv, xe = self.expr(depth - 1, exact_only=disc or exact_only)
            if self.draw(st.integers(0, 2)) == 0:
                y, yv, ye = self.scalar()
            else:
                y, yv, ye = self.expr(depth - 1, exact_only=disc or exact_only)
            if self.draw(st.booleans()):
                x, y, xe, ye = y, x, ye, xe
            t = f"np.{op}({x}, {y})" if op.isidentifier() else f"({x} {op} {y})"
            v = self.eval(t)
            exact = xe and ye and (disc or v.dtype.kind in "biu" or op in ("maximum", "minimum"))
            if exact_only and not exact:
                raise ValueError("inexact")
            return t, v, exact
        if kind == "where":
            c, _, _ = self.expr(depth - 1, exact_only=True)
            x, _, xe = self.expr(depth - 1, exact_only)
            if self.draw(st.booleans()):
                y, _, ye = self.scalar()
            else:
                y, _, ye = self.expr(depth - 1, exact_only)
            t = f"np.where({c}, {x}, {y})"
            return t, self.eval(t), xe and ye
        if kind == "reduce":
            return self._reduction(depth, exact_only)
        if kind == "view":
            x, xv, xe = self.expr(depth - 1, exact_only)
            t = self._view(x, np.ndim(xv))
            return t, self.eval(t), xe
        if kind == "astype":
            dt = self.draw(st.sampled_from(DTYPES))
            to_int = dt in ("int32", "int64", "bool")
            x, xv, xe = self.expr(depth - 1, exact_only=to_int or exact_only)
            if dt.startswith("int") and np.asarray(xv).dtype.kind == "f":
                fv = np.asarray(xv)
                if not (np.all(np.isfinite(fv)) and np.all(np.abs(fv) < 2**31)):
                    raise ValueError("float to int cast of non-finite or out-of-range values")
            form = self.draw(st.integers(0, 2))
            t = (f"{x}.astype(np.{dt})", f"np.{dt if dt != 'bool' else 'bool_'}({x})",
                 f"np.asarray({x}, dtype=np.{dt})")[form]
            v = self.eval(t)
            return t, v, xe or v.dtype.kind in "biu" and np.asarray(xv).dtype.kind in "biu"
        if kind == "logical":  # bool-valued, exact
            op = self.draw(st.sampled_from(("logical_and", "logical_or", "logical_xor",
                                            "logical_not", "isnan", "isinf", "isfinite")))
            x, xv, xe = self.expr(depth - 1, exact_only=True)
            if op.startswith("is") or op == "logical_not":
                t = f"np.{op}({x})"
            else:
                y, _, _ = self.expr(depth - 1, exact_only=True)
                t = f"np.{op}({x}, {y})"
            return t, self.eval(t), True
        if kind == "other":
            return self._other(depth, exact_only)
        # clip
        x, xv, xe = self.expr(depth - 1, exact_only)
        lo, hi = sorted(self.draw(st.lists(st.sampled_from(("-1", "0", "0.5", "2")),
                                           min_size=2, max_size=2)), key=float)
        t = f"np.clip({x}, {lo}, {hi})" if self.draw(st.booleans()) else f"{x}.clip({lo}, {hi})"
        return t, self.eval(t), xe

    def _other(self, depth, exact_only):
        """Creation, layout and extern ops: *_like, broadcast_to, swapaxes, squeeze,
        round, matmul/dot, and a dimension read by Python (x.shape[0])."""
        form = self.draw(st.sampled_from(("like", "broadcast_to", "swapaxes", "squeeze", "round",
                                          "matmul", "shape")))
        x, xv, xe = self.expr(depth - 1, exact_only)
        nd = np.ndim(xv)
        if form == "like":
            fn = self.draw(st.sampled_from(("np.zeros_like({})", "np.ones_like({})",
                                            "np.full_like({}, 2)",
                                            "np.zeros_like({}, np.float32)")))
            t = fn.format(x)
            return t, self.eval(t), True
        if form == "broadcast_to":
            t = f"np.broadcast_to({x}, (2,) + np.shape({x}))"
        elif form == "swapaxes" and nd >= 2:
            t = f"np.swapaxes({x}, 0, -1)"
        elif form == "squeeze":
            t = f"{x}[None].squeeze(0)" if self.draw(st.booleans()) else f"np.squeeze({x}[None])"
        elif form == "round":
            t = f"np.round({x})" if self.draw(st.booleans()) else f"{x}.round()"
            if np.asarray(xv).dtype.kind == "f" and not (xe or not exact_only):
                raise ValueError("inexact")
            return t, self.eval(t), xe
        elif form == "matmul" and nd == 2 and np.asarray(xv).dtype.kind == "f":
            t = f"({x} @ {x}.T)" if self.draw(st.booleans()) else f"np.dot({x}.T, {x})"
            v = self.eval(t)
            self.red_n = max(self.red_n, int(np.shape(xv)[1]), int(np.shape(xv)[0]))
            if exact_only:
                raise ValueError("inexact")
            return t, v, False
        elif form == "shape" and nd >= 1:
            t = f"({x} * {x}.shape[0] + len({x}))"
        else:
            raise ValueError("not for this operand")
        v = self.eval(t)
        return t, v, xe and (form != "shape" or v.dtype.kind in "biu")

    def _reduction(self, depth, exact_only):
        op = self.draw(st.sampled_from(REDUCTIONS))
        disc = op in ("argmax", "argmin")
        x, xv, xe = self.expr(depth - 1, exact_only=disc or exact_only)
        nd = np.ndim(xv)
        axes = [None] + list(range(-nd, nd)) + ([(0, nd - 1)] if nd >= 2 else [])
        if op in ("argmax", "argmin"):
            axes = [a for a in axes if not isinstance(a, tuple)]
        axis = self.draw(st.sampled_from(axes))
        kw = []
        if axis is not None or self.draw(st.booleans()):
            kw.append(f"axis={axis!r}")
        if self.draw(st.booleans()):
            kw.append(f"keepdims={self.draw(st.booleans())}")
        if op in ("std", "var") and self.draw(st.integers(0, 3)) == 0:
            kw.append("ddof=1")
        if op in ("sum", "prod", "mean") and self.draw(st.integers(0, 3)) == 0:
            kw.append(f"dtype=np.{self.draw(st.sampled_from(('float64', 'int64', 'float32')))}")
        if op in ("sum", "max", "min", "prod") and self.draw(st.integers(0, 4)) == 0:
            kw.append("initial=1")
        if self.draw(st.booleans()):
            t = f"np.{op}({', '.join([x] + kw)})"
        else:
            t = f"{x}.{op}({', '.join(kw)})"
        v = self.eval(t)
        n = int(np.size(xv) // max(1, np.size(v))) if np.size(xv) else 1
        self.red_n = max(self.red_n, n)
        exact = xe and (op in EXACT_REDUCTIONS or disc or np.asarray(v).dtype.kind in "biu")
        if exact_only and not exact:
            raise ValueError("inexact")
        return t, v, exact

    def _view(self, x: str, nd: int) -> str:
        if nd == 0:
            return f"{x}[None]" if self.draw(st.booleans()) else f"{x}[...]"
        forms = ["slice", "slice", "T", "ravel", "newaxis", "index", "expand"]
        form = self.draw(st.sampled_from(forms))
        if form == "slice":
            # 5: is empty on short axes
            steps = (":", "1:", ":-1", "::2", "1::2", "::-1", "2:5", "5:")
            parts = [self.draw(st.sampled_from(steps))
                     for _ in range(self.draw(st.integers(1, nd)))]
            return f"{x}[{', '.join(parts)}]"
        if form == "T":
            return f"{x}.T" if self.draw(st.booleans()) else f"np.transpose({x})"
        if form == "ravel":
            return f"{x}.reshape(-1)" if self.draw(st.booleans()) else f"{x}.ravel()"
        if form == "newaxis":
            return f"{x}[None]" if self.draw(st.booleans()) else f"{x}[..., None]"
        if form == "index":
            return f"{x}[{self.draw(st.sampled_from(('0', '-1', '1')))}]"
        return f"np.expand_dims({x}, {self.draw(st.sampled_from(('0', '-1')))})"
