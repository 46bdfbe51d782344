"""Hand-built IR graphs for the native tests, with NumPy as the oracle.

    b = GraphBuilder(x, y)             # example input arrays define the graph's inputs
    z = b.ufunc("add", b.ufunc("multiply", b.x[0], 2.0), b.x[1])
    b.output(z)
    fn = runtime.compile_graph(b.graph)
    b.check(fn)                        # runs fn on copies of x, y; compares with NumPy

Every value's dtype and shape come from NumPy evaluating the op on the example values,
which are also the expected results: the graph matches NumPy by construction.
"""

from __future__ import annotations

import numpy as np
from dynexpr import ir


def _index(items):
    out = []
    for it in items:
        if it[0] == "int":
            out.append(it[1])
        elif it[0] == "slice":
            out.append(slice(*it[1:]))
        elif it[0] == "newaxis":
            out.append(None)
    return tuple(out)


class GraphBuilder:
    def __init__(self, *inputs: np.ndarray, dynamic: dict | None = None):
        self.graph = ir.Graph()
        self.inputs = [np.array(a, copy=True) for a in inputs]
        self.example: dict[int, object] = {}
        self.current = [a.copy() for a in inputs]  # arguments after the graph's mutations
        self.x = []
        for i, a in enumerate(inputs):
            shape = tuple(a.shape)
            if dynamic and i in dynamic:
                shape = tuple(dynamic[i].get(k, d) for k, d in enumerate(shape))
            self.x.append(self._add("input", (), a, index=i, shape=shape))

    def _add(self, op, args, example, shape=None, **attrs) -> ir.Value:
        example = np.asarray(example)
        v = self.graph.add(ir.Value(op, tuple(args), str(example.dtype),
                                    shape if shape is not None else tuple(example.shape),
                                    ir.make_attrs(**attrs)))
        self.example[v.id] = example
        return v

    def ex(self, v):
        return self.example[v.id] if isinstance(v, ir.Value) else v

    def const(self, value, dtype: str, weak: str | None = None) -> ir.Value:
        kw = {"value": value}
        if weak:
            kw["weak"] = weak
        return self._add("const", (), np.asarray(value, dtype=dtype), **kw)

    def _arg(self, a, arrays) -> ir.Value:
        if isinstance(a, ir.Value):
            return a
        # A Python scalar: NEP 50 weak, of the dtype NumPy gives it next to the arrays.
        kind = type(a).__name__
        dtype = np.result_type(*[self.ex(x).dtype for x in arrays], a) if arrays else \
            np.asarray(a).dtype
        return self.const(a, str(dtype), weak=kind)

    def ufunc(self, name: str, *args) -> ir.Value:
        arrays = [a for a in args if isinstance(a, ir.Value)]
        with np.errstate(all="ignore"):
            example = getattr(np, name)(*[self.ex(a) for a in args])
        return self._add(name, [self._arg(a, arrays) for a in args], example)

    def where(self, c, a, b) -> ir.Value:
        arrays = [x for x in (a, b) if isinstance(x, ir.Value)]
        example = np.where(self.ex(c), self.ex(a), self.ex(b))
        return self._add("where", [c, self._arg(a, arrays), self._arg(b, arrays)], example)

    def astype(self, a, dtype: str) -> ir.Value:
        return self._add("astype", [a], self.ex(a).astype(dtype), dtype=dtype)

    def reduce(self, op: str, a, axes=None, keepdims=False, ddof=None) -> ir.Value:
        kw = {"axis": axes, "keepdims": keepdims}
        if ddof is not None:
            kw["ddof"] = ddof
        with np.errstate(all="ignore"):
            example = getattr(np, op)(self.ex(a), **kw)
        attrs = {"keepdims": keepdims}
        if op in ("argmin", "argmax"):
            attrs["axis"] = axes
        else:
            attrs["axes"] = axes if axes is None else tuple(np.atleast_1d(axes).tolist())
        if ddof is not None:
            attrs["ddof"] = ddof
        return self._add(op, [a], example, **attrs)

    def matmul(self, a, b) -> ir.Value:
        return self._add("matmul", [a, b], np.matmul(self.ex(a), self.ex(b)))

    def getitem(self, a, *items) -> ir.Value:
        return self._add("getitem", [a], self.ex(a)[_index(items)], index=tuple(items))

    def transpose(self, a, axes=None) -> ir.Value:
        axes = tuple(reversed(range(self.ex(a).ndim))) if axes is None else tuple(axes)
        return self._add("transpose", [a], np.transpose(self.ex(a), axes), axes=axes)

    def reshape(self, a, shape) -> ir.Value:
        return self._add("reshape", [a], np.reshape(self.ex(a), shape), shape=tuple(shape))

    def broadcast_to(self, a, shape) -> ir.Value:
        return self._add("broadcast_to", [a], np.broadcast_to(self.ex(a), shape),
                         shape=tuple(shape))

    def expand_dims(self, a, axis) -> ir.Value:
        axis = tuple(np.atleast_1d(axis).tolist())
        return self._add("expand_dims", [a], np.expand_dims(self.ex(a), axis), axis=axis)

    def squeeze(self, a, axis) -> ir.Value:
        axis = tuple(np.atleast_1d(axis).tolist())
        return self._add("squeeze", [a], np.squeeze(self.ex(a), axis), axis=axis)

    def full(self, value, dtype, shape) -> ir.Value:
        return self._add("full", (), np.full(shape, value, dtype=dtype), value=value,
                         dtype=dtype, shape=tuple(shape))

    def setitem(self, base, value, *items) -> ir.Value:
        ex = np.array(self.ex(base), copy=True)
        ex[_index(items)] = self.ex(value)
        return self._add("setitem", [base, self._arg(value, [base])], ex, index=tuple(items))

    # ------------------------------------------------------------------------ results
    def output(self, *vs: ir.Value) -> None:
        self.graph.outputs.extend(vs)

    def mutate(self, i: int, v: ir.Value) -> None:
        self.graph.mutations.append((i, v))
        self.current[i] = np.array(self.ex(v), copy=True)

    def check(self, fn, inputs=None) -> tuple:
        """Calls fn on copies of the inputs; compares outputs and mutated arguments with
        NumPy (values, dtype, shape). Returns the outputs."""
        args = [np.array(a, copy=True) for a in (inputs or self.inputs)]
        outs = fn(*args)
        assert isinstance(outs, tuple) and len(outs) == len(self.graph.outputs)
        for k, (o, v) in enumerate(zip(outs, self.graph.outputs)):
            assert_same(o, self.example[v.id], f"output {k}")
        for i, a in enumerate(args):
            assert_same(a, self.current[i], f"argument {i} after the call")
        return outs


def assert_same(got, want, what: str = "") -> None:
    want = np.asarray(want)
    assert isinstance(got, np.ndarray), f"{what}: {type(got)} is not an ndarray"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, NumPy gives {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, NumPy gives {want.shape}"
    if want.dtype.kind == "f":
        # SIMD transcendentals are within a few ulp (include/dynexpr/ops), a*b+c may be
        # contracted into one FMA, and sums may be reassociated.
        rtol = 2e-5 if want.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, equal_nan=True,
                                   err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)
