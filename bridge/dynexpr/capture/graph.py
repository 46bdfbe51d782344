"""Building the IR graph: hash-consed nodes, inputs, constants, casts.

Identical nodes (same op, arguments, attributes, dtype and shape) are made once, so a
subexpression the user wrote twice is computed once. Nodes are pure: a write into an
array is a `setitem` node producing the array's next version (see arrays.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import ir
from .errors import Budget, graph_break
from .session import Session

# dynexpr::max_rank (include/dynexpr/core/config.hpp; a test checks they agree).
MAX_RANK = 8


def _key_of_attrs(attrs: tuple) -> str:
    # Canonical text keeps 0.0 and -0.0, 1 and 1.0 and True apart (== would merge them).
    return "".join(f"{k}={ir._canon(v)};" for k, v in attrs)


class GraphBuilder:
    def __init__(self, budget: Budget, session: Session) -> None:
        self.graph = ir.Graph()
        self.session = session  # the translation's (ArrayVar.b.session reaches it)
        self.input_sources: list[tuple] = []
        self._memo: dict[tuple, ir.Value] = {}
        self._budget = budget
        self.requests = 0  # node() calls, memo hits included: the array work translated

    def node(self, op: str, args: tuple, dtype: str, shape: tuple, /, **attrs: Any) -> ir.Value:
        if dtype not in ir.DTYPES:
            graph_break(
                f"{op} gives dtype {dtype}, which dynexpr does not support "
                f"(supported: {', '.join(ir.DTYPES)})"
            )
        shape = tuple(int(d) for d in shape)
        if len(shape) > MAX_RANK:
            graph_break(
                f"{op} gives an array of {len(shape)} dims; dynexpr's kernels take at most "
                f"{MAX_RANK}"
            )
        self.requests += 1
        attr_t = ir.make_attrs(**attrs)
        key = (op, tuple(a.id for a in args), dtype, shape, _key_of_attrs(attr_t))
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        if len(self.graph.values) >= self._budget.graph_values:
            graph_break(f"the graph has more than {self._budget.graph_values} values")
        v = self.graph.add(ir.Value(op, tuple(args), dtype, shape, attr_t))
        self._memo[key] = v
        return v

    def input(self, source: tuple, dtype: str, shape: tuple) -> ir.Value:
        index = len(self.input_sources)
        self.input_sources.append(source)
        return self.node("input", (), dtype, shape, index=index)

    def const(self, value: Any, dtype: str, weak: str | None = None) -> ir.Value:
        """A 0-d constant already converted to `dtype`'s kind (what NumPy's loop sees)."""
        py = _as_kind(value, dtype)
        if weak is None:
            return self.node("const", (), dtype, (), value=py)
        return self.node("const", (), dtype, (), value=py, weak=weak)

    def cast(self, v: ir.Value, dtype: str) -> ir.Value:
        if v.dtype == dtype:
            return v
        if v.op == "const":  # fold: a constant is cast once here, as NumPy's loop would
            folded = np.array(v.attr("value"), dtype=v.dtype).astype(dtype).item()
            return self.const(folded, dtype, v.attr("weak"))
        return self.node("astype", (v,), dtype, v.shape, dtype=dtype)

    def copy(self, v: ir.Value) -> ir.Value:
        """A node computing a fresh copy of v (an astype to its own dtype)."""
        return self.node("astype", (v,), v.dtype, v.shape, dtype=v.dtype)


def _as_kind(value: Any, dtype: str) -> Any:
    if dtype == "bool":
        return bool(value)
    if dtype.startswith(("int", "uint")):
        return int(value)
    return float(value)
