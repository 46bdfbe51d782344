"""Slice stencils on Dask arrays (x[1:] - x[:-1], x[2:] - 2*x[1:-1] + x[:-2]) through
dask.array.map_overlap, the halo depth taken from the slices.

Note [dask stencils]
Along a chunked axis of length n, every read of a Dask argument is a slice x[lo:n-hi]
with one K = lo + hi, so output element i reads x[i+lo] and the output is n - K long.
Each block extended by the next block's first K elements (depth (0, K), boundary none,
not trimmed) gives exactly its own block's share of the output; the last block, with no
neighbour, gives K fewer. So one task per chunk runs the captured function itself on
the extended block (translated static: slicing reads the extent, so each distinct block
length is one entry of the per-process captured function, two or three in all).
The rest of the graph must be chunk-local (dask_plan.py's rules).
"""

from __future__ import annotations

import threading

import numpy as np

from . import dask_plan, manifest
from .capture import Unsupported, translate

_captured: dict[bytes, object] = {}
# fn -> its captured function with the default options: set by captured.py, the layer
# above, which this module does not import (no import cycle).
capture_fn = None
_lock = threading.Lock()


class Stencil:
    """A picklable task: the plain function (by reference or cloudpickle, not the
    captured object) and the non-Dask arguments; captured once per process."""

    def __init__(self, fn, bound: list, dask_pos: list, key: bytes) -> None:
        self.fn, self.pos, self.key = fn, dask_pos, key
        self.bound = [None if i in dask_pos else a for i, a in enumerate(bound)]

    def __call__(self, *blocks):
        cf = _captured.get(self.key)
        if cf is None:
            with _lock:
                cf = _captured.get(self.key) or _captured.setdefault(
                    self.key, capture_fn(self.fn))
        args = list(self.bound)
        for i, b in zip(self.pos, blocks):
            args[i] = b
        return cf(*args)

    def __repr__(self) -> str:
        return f"dynexpr-stencil:{getattr(self.fn, '__qualname__', 'fn')}"


def depths(graph, dask_inputs: set, shape: tuple, chunked: set) -> dict | str:
    """{axis: K} of a stencil graph (Note [dask stencils]), or why it is not one."""
    ks: dict[int, set] = {k: set() for k in chunked}
    labels: dict[int, tuple] = {}
    nd = len(shape)
    for v in graph.values:
        if v.op == "input":
            idx = v.attr("index")
            labels[v.id] = ("in",) if idx in dask_inputs else (None,) * v.ndim
        elif v.op == "getitem" and labels.get(v.args[0].id) == ("in",):
            for ax, item in enumerate(v.attr("index")):
                n = shape[ax]
                if item[0] != "slice" or item[3] != 1:
                    return "an index other than a slice of step 1"
                lo, stop = item[1], n if item[2] is None else item[2]
                if ax in chunked:
                    ks[ax].add(lo + n - stop)
                elif (lo, stop) != (0, n):
                    return "a slice along an unchunked axis"
            labels[v.id] = tuple(range(nd))
        elif any(labels.get(a.id) == ("in",) for a in v.args):
            return "a Dask argument read whole next to its slices"
        elif v.op == "const":
            labels[v.id] = ()
        elif v.op in dask_plan.POINTWISE or v.op in manifest.OPS:
            got = dask_plan._broadcast(v, [labels.get(a.id) for a in v.args])
            if got is None:
                return f"{v.op} mixes dimensions of different Dask axes"
            labels[v.id] = got
        elif v.op in manifest.REDUCTIONS and labels.get(v.args[0].id) is not None:
            src, axes = labels[v.args[0].id], dask_plan._axes(v)
            if any(src[a] in chunked for a in axes):
                return f"{v.op} over a chunked axis"
            keep = v.attr("keepdims", False)
            labels[v.id] = tuple(None if a in axes else lab for a, lab in enumerate(src)
                                 if keep or a not in axes)
        else:
            return f"{v.op} is not taken chunk-wise"
    if any(len(s) != 1 for s in ks.values()) or not any(k for s in ks.values() for k in s):
        return "slices of different halo along one axis"
    if len(graph.outputs) != 1 or labels[graph.outputs[0].id] != tuple(range(nd)):
        return "the result is not one array along the Dask axes"
    return {ax: s.pop() for ax, s in ks.items()}


def lazy(fn, bound: list, darrs: list, da):
    """fn on the Dask arrays through map_overlap, or a string: why not."""
    import cloudpickle

    first = darrs[0]
    chunked = {ax for ax, cs in enumerate(first.chunks) if len(cs) > 1}
    meta = [np.zeros(a.shape, a.dtype) if isinstance(a, da.Array) else a for a in bound]
    try:
        tr = translate(fn, meta, resumable=False)
    except Unsupported as e:
        return f"graph break: {e.to_reason()}"
    if tr.resume is not None or tr.template is None or tr.template[0] != "out":
        return "a graph break or a result that is not one array"
    dpos = [i for i, a in enumerate(bound) if isinstance(a, da.Array)]
    ins = {k for k, s in enumerate(tr.input_sources) if s[0] == "arg" and s[1] in dpos}
    d = depths(tr.graph, ins, first.shape, chunked)
    if isinstance(d, str):
        return d
    chunks = list(first.chunks)
    for ax, k in d.items():
        cs = first.chunks[ax]
        if min(cs[1:]) < k or cs[-1] <= k:
            return f"chunks along axis {ax} smaller than the stencil's halo {k}"
        chunks[ax] = cs[:-1] + (cs[-1] - k,)
    out = tr.graph.outputs[0]
    task = Stencil(fn, bound, dpos, cloudpickle.dumps(fn))
    return da.map_overlap(task, *darrs, depth={ax: (0, k) for ax, k in d.items()},
                          boundary="none", trim=False, chunks=tuple(chunks),
                          dtype=np.dtype(out.dtype), meta=np.empty((0,) * out.ndim, out.dtype),
                          align_arrays=False)
