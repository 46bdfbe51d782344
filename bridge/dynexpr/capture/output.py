"""Finishing a translation: the return value becomes a template the caller fills from
the compiled outputs; the graph keeps only what the outputs and mutations need.

Template nodes (tuples):
    ("const", value)           a value known at capture time (lists/dicts copied per call)
    ("src", source)            the object at `source` itself (an argument returned as is)
    ("view", source, steps)    a NumPy view of the array at `source`: steps are (op, attrs)
    ("out", k, kind, copy)     graph output k; kind "scalar" unwraps a 0-d result into a
                               NumPy scalar; copy: a second, distinct object of that value
    ("tuple"|"list", children) and ("dict", ((key, child), ...))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import ir
from . import reroll
from ..guards import Guard
from .arrays import ArrayVar
from .builder import Context
from .errors import graph_break
from .variables import DictVar, FunctionVar, ListVar, ObjectVar, PyVar, TupleVar, Var


@dataclass
class Translation:
    graph: ir.Graph
    guards: list[Guard]
    input_sources: list[tuple]
    template: tuple | None  # None for a segment that stops at a break (see `resume`)
    resume: Any = None  # resume.Resume: where a segment of a breaking function stops
    api: frozenset = frozenset()  # Session.api: the NumPy functions, methods, attributes used


class _Outputs:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.values: list[ir.Value] = []
        self._index: dict[int, int] = {}  # value id -> output index
        self._owner: dict[int, int] = {}  # value id -> id of the Var that owns it
        self._leaf: dict[int, tuple] = {}  # Var id -> leaf

    def leaf(self, var: ArrayVar) -> tuple:
        hit = self._leaf.get(id(var))
        if hit is not None:
            return hit
        st = var.storage
        if st.source is not None:  # the caller's array, or a view of it (after mutations)
            leaf = (
                ("src", st.source)
                if not var.path
                else ("view", st.source, tuple((s.op, s.attrs) for s in var.path))
            )
        else:
            value = var.value
            if value.op == "input" or value.op == "const" or value.op in ir.VIEWS:
                value = self.ctx.graph.copy(value)  # every output is computed, never aliased
            k = self._index.get(value.id)
            if k is None:
                k = self._index[value.id] = len(self.values)
                self.values.append(value)
                self._owner[value.id] = id(var)
            leaf = ("out", k, var.kind, self._owner[value.id] != id(var))
        self._leaf[id(var)] = leaf
        return leaf


def _template(out: _Outputs, v: Var) -> tuple:
    if isinstance(v, ArrayVar):
        return out.leaf(v)
    if isinstance(v, PyVar):
        return ("src", v.source) if v.source is not None else ("const", v.value)
    if isinstance(v, TupleVar):
        return ("tuple", tuple(_template(out, x) for x in v.items))
    if isinstance(v, (ListVar, DictVar)) and v.source is not None:
        return ("src", v.source)
    if isinstance(v, ListVar):
        return ("list", tuple(_template(out, x) for x in v.items))
    if isinstance(v, DictVar):
        return ("dict", tuple((k, _template(out, x)) for k, x in v.items.items()))
    if isinstance(v, (ObjectVar, FunctionVar)) and v.source is not None:
        return ("src", v.source)
    graph_break(f"returning a {v.describe()} is not supported")


def finalize(ctx: Context, ret: Var) -> Translation:
    out = _Outputs(ctx)
    template = _template(out, ret)
    mutations = []
    for var in ctx.array_vars():
        st = var.storage
        if st.written and st.current is not st.origin:
            mutations.append((st.origin, st.current))
    graph, sources = _rebuild(ctx, out.values, mutations)
    return Translation(graph, ctx.guards, sources, template, api=frozenset(ctx.session.api))


def _rebuild(ctx: Context, outputs: list, mutations: list) -> tuple[ir.Graph, list]:
    """The graph restricted to what outputs and mutations need, inputs renumbered in
    order (an unused argument is not an input; a mutated one always is)."""
    roots = list(outputs) + [v for _, v in mutations] + [o for o, _ in mutations]
    live = {id(v) for v in ir.walk(roots)}
    # Note [unused values that may raise]: NumPy raises ValueError for an integer to a
    # negative integer power, whether or not the result is used; such a value stays in
    # the graph as an extra output that no template reads (the kernel raises as NumPy).
    checks = [v for v in ctx.graph.graph.values if id(v) not in live and _may_raise(v)]
    outputs = list(outputs) + checks
    order = ir.walk(roots + checks)
    inputs = sorted((v for v in order if v.op == "input"), key=lambda v: v.attr("index"))
    rest = [v for v in order if v.op != "input"]
    g = ir.Graph()
    new: dict[int, ir.Value] = {}
    old_sources = ctx.graph.input_sources
    sources = []
    for i, v in enumerate(inputs):
        new[v.id] = g.add(ir.Value("input", (), v.dtype, v.shape, ir.make_attrs(index=i)))
        sources.append(old_sources[v.attr("index")])
    for v in rest:
        new[v.id] = g.add(
            ir.Value(v.op, tuple(new[a.id] for a in v.args), v.dtype, v.shape, v.attrs)
        )
    g.outputs = [new[v.id] for v in outputs]
    g.mutations = [(new[o.id].attr("index"), new[v.id]) for o, v in mutations]
    g.quiet = ctx.graph.graph.quiet
    return reroll.reroll(g, reroll.iterations(ctx, new), sources, ctx)


def _may_raise(v: ir.Value) -> bool:
    """A signed integer power whose exponent is not a constant >= 0."""
    if v.op != "power" or v.dtype not in ("int32", "int64"):
        return False
    e = v.args[1]
    return not (e.op == "const" and e.attr("value") >= 0)
