"""A captured function called with Dask arrays: a lazy Dask array whose tasks run
compiled kernels on the chunks (Note [dask chunk plans] in dask_plan.py, Note [kernels
in dask tasks] in dask_tasks.py).

The hook is on the miss path only (captured.py): a Dask array fails every entry's
array guards, so NumPy calls never reach this module and dask is never imported for
them. Each call with Dask arrays translates on the arrays' metadata (no chunk is
read); the compiled kernels are cached per process by the graph's text.
"""

from __future__ import annotations

import string
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import dask_plan, dask_stencil, dask_tasks
from .capture import Unsupported, translate
from .capture.translate import translate_dynamic
from .guards import resolve


# Why a graph is not chunk-wise when it slices along a chunked axis: then try a stencil.
STENCIL_WHY = ("the graph depends on a chunked extent",
               "getitem is not taken chunk-wise (Dask's own operation runs it)")


def has_dask(bound) -> bool:
    """Whether a call's bound arguments hold a dask.array.Array (cheap when dask.array
    was never imported: no dask value can exist then)."""
    da = sys.modules.get("dask.array")
    if da is None:
        return False
    return any(isinstance(a, da.Array) for a in bound)


@dataclass
class Built:
    """What one call with Dask arrays becomes: the plan, and the result (lazy)."""

    plan: dask_plan.Plan
    result: Any
    inputs: list  # the Dask arrays the call read


def call(cf, bound: list, args: tuple, kwargs: dict) -> Any:
    return build(cf._fn, bound, args, kwargs).result


def build(fn, bound: list, args: tuple, kwargs: dict, run_plain: bool = True) -> Built:
    """fn(*args, **kwargs) on Dask arrays, lazily. run_plain=False (explain): a call
    that Dask's own operations run is not made (result None): a graph break in it would
    compute on the client."""
    import dask.array as da

    darrs = [a for a in bound if isinstance(a, da.Array)]
    plan, bound = _translated(fn, bound, darrs, da)
    if plan.kind == "dask" and plan.why in STENCIL_WHY:  # Note [dask stencils]
        got = dask_stencil.lazy(fn, bound, darrs, da)
        if not isinstance(got, str):
            return Built(dask_plan.Plan("stencil"), got, darrs)
        plan = dask_plan.Plan("dask", f"{plan.why}; not a stencil: {got}",
                              translation=plan.translation)
    if plan.kind != "dask":
        try:
            return Built(plan, _lazy(plan, bound, fn, da), darrs)
        except _NotChunkwise as e:
            plan = dask_plan.Plan("dask", str(e), translation=plan.translation)
    return Built(plan, fn(*args, **kwargs) if run_plain else None, darrs)


class _NotChunkwise(Exception):
    pass


def _translated(fn, bound: list, darrs: list, da) -> tuple[dask_plan.Plan, list]:
    """The plan of fn on these arguments, and the bound arguments with NumPy arrays of
    the Dask arrays' shape made Dask arrays of the same chunks."""
    first = darrs[0]
    if any(a.shape != first.shape for a in darrs):
        return dask_plan.Plan("dask", "Dask arrays of different shapes"), bound
    if any(np.isnan(c) for cs in first.chunks for c in cs):
        return dask_plan.Plan("dask", "unknown chunk sizes"), bound
    darrs[:] = da.core.unify_chunks(*[x for a in darrs for x in (a, range(a.ndim))])[1]
    chunks = darrs[0].chunks
    it = iter(darrs)
    bound = [next(it) if isinstance(a, da.Array) else
             da.from_array(a, chunks=chunks) if isinstance(a, np.ndarray)
             and a.shape == first.shape else a for a in bound]
    # Metadata stand-ins: zero-filled (calloc'd, never touched) arrays of the full
    # shape; translation reads only their dtype and shape.
    meta = [np.zeros(a.shape, a.dtype) if isinstance(a, da.Array) else a for a in bound]
    chunked = {i: {ax for ax, cs in enumerate(a.chunks) if len(cs) > 1}
               for i, a in enumerate(bound) if isinstance(a, da.Array)}

    def policy(source, axis, a):
        ok = source[0] == "arg" and axis in chunked.get(source[1], ())
        return (1, None) if ok else None

    try:
        tr = None
        if any(chunked.values()):
            tr, _ = translate_dynamic(fn, meta, policy,
                                      run=lambda st: translate(fn, meta, st, False))
            if tr is None:
                return dask_plan.Plan("dask", "the graph depends on a chunked extent"), bound
        else:
            tr = translate(fn, meta, resumable=False)
    except Unsupported as e:
        return dask_plan.Plan("dask", f"graph break: {e.to_reason()}"), bound
    if tr.resume is not None or tr.template is None:
        return dask_plan.Plan("dask", "graph break"), bound
    ins = {i for i, s in enumerate(tr.input_sources) if s[0] == "arg"
           and isinstance(bound[s[1]], da.Array)}
    p = dask_plan.plan(tr.graph, ins, first.ndim)
    p.translation = tr
    return p, bound


def _lazy(plan: dask_plan.Plan, bound: list, fn, da) -> Any:
    tr = plan.translation
    name = getattr(fn, "__qualname__", "fn")
    ins = [resolve(s, bound, fn) for s in tr.input_sources]
    letters = string.ascii_lowercase
    ndim = next(a.ndim for a in ins if isinstance(a, da.Array))
    if plan.kind == "blockwise":
        outs = _blockwise(plan, ins, letters[:ndim], name, da)
    else:
        outs = [_reduction(plan, ins, name, da)]
    return _rebuild(tr.template, outs, bound, fn)


def _blockwise(plan, ins: list, ind: str, name: str, da) -> list:
    graph = plan.graph
    labels = plan.labels[0]
    args: list = []
    for a in ins:
        args += [a, ind] if isinstance(a, da.Array) else [a, None]
    out_ind, new_axes = "", {}
    for k, lab in enumerate(labels):
        if lab is None:
            letter = string.ascii_uppercase[k]
            new_axes[letter] = graph.outputs[0].shape[k]
            out_ind += letter
        else:
            out_ind += ind[lab]
    multi = len(graph.outputs) > 1
    kernel = dask_tasks.Kernel(graph, name, tuple_out=multi)
    if not multi:
        o = graph.outputs[0]
        return [da.blockwise(kernel, out_ind, *args, dtype=np.dtype(o.dtype),
                             new_axes=new_axes, concatenate=True,
                             meta=np.empty((0,) * o.ndim, o.dtype))]
    # One kernel task per chunk computes every output; each output picks its own.
    tmp = da.blockwise(kernel, out_ind, *args, dtype=object, new_axes=new_axes,
                       concatenate=True, meta=np.empty((0,) * len(out_ind), object))
    return [tmp.map_blocks(_pick, k, dtype=np.dtype(o.dtype),
                           meta=np.empty((0,) * o.ndim, o.dtype))
            for k, o in enumerate(graph.outputs)]


def _pick(block, k: int):
    return block[k]


def _reduction(plan, ins: list, name: str, da):
    darrs = [a for a in ins if isinstance(a, da.Array)]
    if len(darrs) != 1:
        raise _NotChunkwise("a reduction over a chunked axis of several Dask arrays")
    x = darrs[0]
    pos = next(i for i, a in enumerate(ins) if a is x)
    r = plan.reduce
    kernel = dask_tasks.Kernel(plan.graph, name, tuple_out=True)
    # The other inputs (NumPy arrays, passed whole) travel with the chunk step.
    chunk_fn = dask_tasks.Chunk(kernel, r.op, [None if a is x else a for a in ins], pos)
    ddof = r.attr("ddof", 0) or 0
    keep = r.attr("keepdims", False)
    # The reduced axes as dask sees them: the graph's reduction axes are those of a
    # chunk-local value whose labels map them to the Dask array's axes.
    return da.reduction(
        x, chunk_fn, dask_tasks.Combine(r.op, r.dtype, ddof, final=True),
        combine=dask_tasks.Combine(r.op, r.dtype, ddof), axis=plan.axes, keepdims=keep,
        dtype=np.dtype(r.dtype), concatenate=True, name=f"dynexpr-{name}-{r.op}",
        meta=np.empty((0,) * len(r.shape), r.dtype))


def _rebuild(t: tuple, outs: list, bound: list, fn) -> Any:
    """The return value from the output template (capture/resume.py's build, for lazy
    outputs: no copy, no scalar read)."""
    kind = t[0]
    if kind == "out":
        return outs[t[1]]
    if kind == "tuple":
        return tuple(_rebuild(c, outs, bound, fn) for c in t[1])
    if kind == "const":
        return t[1]
    if kind == "src":
        return resolve(t[1], bound, fn)
    raise _NotChunkwise(f"a result built as {kind!r}")
