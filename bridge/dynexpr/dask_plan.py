"""How a captured graph runs on Dask arrays: which part is one kernel per chunk.

Note [dask chunk plans]
A captured function called with dask.array.Array arguments is translated on the
arrays' metadata (dtype, shape), with every axis that has more than one chunk dynamic,
so the graph's extents along chunked axes are symbols ("s0") and one compiled kernel
serves every chunk size, the ragged last chunk included. Each value of that graph gets
a label per dimension: the dask axis it runs along (inputs: 0..n-1), or None (a
constant's or a passed-whole NumPy array's dimension, a keepdims 1). Then:
  - "blockwise": every value is chunk-local (elementwise ops, where, astype, and
    reductions whose axes are all unchunked, i.e. have one static extent): the whole
    graph is one task per chunk (dask.array.blockwise), running the compiled graph.
  - "reduction": the graph's one output is a reduction over a chunked axis of a
    chunk-local value: dask.array.reduction, whose chunk step is a compiled graph of
    the partials (sum/prod/min/max/any/all of the chunk; mean: count and sum; var/std:
    count, mean and M2, combined by Chan's formula, never as the mean of means).
  - anything else (matmul, slicing, reshapes, a chunked reduction followed by more
    work, a graph break): "dask": the function runs as plain Python on the Dask arrays,
    so Dask's own operations do it (a break computes on the client, as .compute() does).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import ir, manifest

CHUNKED_REDUCTIONS = ("sum", "prod", "min", "max", "any", "all", "mean", "var", "std")
POINTWISE = ("astype", "where")


@dataclass
class Plan:
    kind: str  # "blockwise" | "reduction" | "dask" ("stencil": dask_stencil.py)
    why: str = ""  # for "dask": what made the graph not chunk-wise
    graph: ir.Graph | None = None  # blockwise: the graph; reduction: the chunk-step graph
    labels: list = field(default_factory=list)  # per output: its dims' dask axes (or None)
    reduce: ir.Value | None = None  # reduction: the graph's reduction node
    axes: tuple = ()  # reduction: the dask axes reduced
    translation: object = None  # the translation on the Dask arrays' metadata


def _dynamic(d) -> bool:
    return isinstance(d, str)


def label(graph: ir.Graph, dask_inputs: set, ndim: int) -> tuple[dict, str | None]:
    """{value id: labels} for the chunk-local values of `graph`, and the first reason a
    value is not chunk-local (None when all are). dask_inputs: indices of the graph's
    inputs that are chunks of the Dask arguments (all of ndim dimensions)."""
    labels: dict[int, tuple] = {}
    for v in graph.values:
        if v.op == "input":
            idx = v.attr("index")
            if idx in dask_inputs:
                labels[v.id] = tuple(range(ndim))
            elif any(_dynamic(d) for d in v.shape):
                return labels, f"input {idx} has a chunked extent but is not a Dask array"
            else:
                labels[v.id] = (None,) * v.ndim
        elif v.op == "const":
            labels[v.id] = ()
        elif v.op in POINTWISE or v.op in manifest.OPS:
            got = _broadcast(v, [labels.get(a.id) for a in v.args])
            if got is None:
                return labels, f"{v.op} mixes dimensions of different Dask axes"
            labels[v.id] = got
        elif v.op in manifest.REDUCTIONS:
            src = labels.get(v.args[0].id)
            if src is None:
                return labels, f"{v.op} of a value that is not chunk-local"
            axes = _axes(v)
            if any(_dynamic(v.args[0].shape[a]) for a in axes):
                return labels, f"chunked:{v.id}"
            keep = v.attr("keepdims", False)
            labels[v.id] = tuple(None if a in axes else lab for a, lab in enumerate(src)
                                 if keep or a not in axes)
        else:
            return labels, f"{v.op} is not taken chunk-wise (Dask's own operation runs it)"
    return labels, None


def _axes(v: ir.Value) -> tuple:
    n = v.args[0].ndim
    if v.op in ("argmin", "argmax"):
        a = v.attr("axis")
        return tuple(range(n)) if a is None else (a,)
    a = v.attr("axes")
    return tuple(range(n)) if a is None else tuple(a)


def _broadcast(v: ir.Value, args: list) -> tuple | None:
    """The labels of elementwise value v from its args' (NumPy's right-aligned
    broadcasting), or None when two args put different Dask axes at one position."""
    if any(a is None for a in args):
        return None
    out: list = [None] * v.ndim
    for lab in args:
        off = v.ndim - len(lab)
        for k, x in enumerate(lab):
            if x is None:
                continue
            if out[off + k] not in (None, x):
                return None
            out[off + k] = x
    return tuple(out)


def plan(graph: ir.Graph, dask_inputs: set, ndim: int) -> Plan:
    """The plan of a translated graph (Note [dask chunk plans])."""
    if graph.mutations:
        return Plan("dask", "the function writes into an argument")
    if not graph.outputs:
        return Plan("dask", "the function returns no array")
    labels, why = label(graph, dask_inputs, ndim)
    if why is None:
        outs = [labels[o.id] for o in graph.outputs]
        if len(set(outs)) > 1:
            return Plan("dask", "outputs of different chunk structure")
        return Plan("blockwise", graph=graph, labels=outs)
    if not why.startswith("chunked:"):
        return Plan("dask", why)
    r = graph.values[int(why.split(":")[1])]
    if r.op not in CHUNKED_REDUCTIONS:
        return Plan("dask", f"{r.op} over a chunked axis (Dask's own arg-reduction runs it)")
    if len(graph.outputs) != 1 or graph.outputs[0] is not r:
        return Plan("dask", f"work after {r.op} over a chunked axis")
    src = labels[r.args[0].id]
    axes = _axes(r)
    if any(src[a] is None for a in axes):
        return Plan("dask", f"{r.op} over a broadcast axis")
    return Plan("reduction", graph=partials(graph, r), reduce=r,
                axes=tuple(src[a] for a in axes), labels=[src])


def partials(graph: ir.Graph, r: ir.Value) -> ir.Graph:
    """The chunk step of reduction r (the graph's output): the graph up to r's input,
    then the partials of one chunk with keepdims (sum/prod/min/max/any/all: the same
    reduction; mean: the sum; var/std: the mean and M2 = sum((y - mean)^2))."""
    g = ir.Graph(quiet=graph.quiet)
    g.values = [v for v in graph.values if v.id < r.id]
    y = r.args[0]
    axes = _axes(r)
    kshape = tuple(1 if a in axes else d for a, d in enumerate(y.shape))
    kw = ir.make_attrs(axes=axes, keepdims=True)
    acc = r.dtype if r.op in ("mean", "var", "std") else y.dtype
    if r.op in ("mean", "var", "std") and y.dtype != acc:
        y = g.add(ir.Value("astype", (y,), acc, y.shape, ir.make_attrs(dtype=acc)))
    if r.op in ("sum", "prod", "min", "max", "any", "all"):
        g.outputs = [g.add(ir.Value(r.op, (y,), r.dtype, kshape, kw))]
    elif r.op == "mean":
        g.outputs = [g.add(ir.Value("sum", (y,), acc, kshape, kw))]
    else:
        m = g.add(ir.Value("mean", (y,), acc, kshape, kw))
        d = g.add(ir.Value("subtract", (y, m), acc, y.shape))
        sq = g.add(ir.Value("multiply", (d, d), acc, y.shape))
        g.outputs = [m, g.add(ir.Value("sum", (sq,), acc, kshape, kw))]
    # Renumber: ids are positions (the canonical text and codegen rely on it).
    for i, v in enumerate(g.values):
        v.id = i
    return g
