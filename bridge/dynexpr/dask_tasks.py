"""What runs inside a Dask task: a graph's kernel on the NumPy chunks, and the combine
and aggregate steps of chunked reductions (Note [dask chunk plans] in dask_plan.py).

Note [kernels in dask tasks]
A task holds a Kernel: the graph (plain data, pickled with the task), never a compiled
callable or a loaded .so. Each process (a worker, or the client under the threaded
scheduler) compiles a graph the first time a task of it runs, through the same policy
as a captured call (the on-disk cache, the tiered first call), and keeps the callable
in a per-process table keyed by the graph's canonical text; the table's lock makes
threads that miss at once compile once.
"""

from __future__ import annotations

import threading

import numpy as np

_compiled: dict[str, object] = {}
_lock = threading.Lock()


class Kernel:
    """A picklable callable running `graph` on chunks: kernel(*blocks) -> its outputs
    (one array, or the tuple of them when `tuple_out`)."""

    def __init__(self, graph, name: str, tuple_out: bool = False) -> None:
        self.graph, self.name, self.tuple_out = graph, name, tuple_out
        self.key = graph.key()

    def __call__(self, *blocks):
        fn = _compiled.get(self.key)
        if fn is None:
            fn = _compile(self, blocks)
        outs = fn(*blocks)
        return tuple(outs) if self.tuple_out else outs[0]

    def __repr__(self) -> str:  # the task's name in Dask's dashboard and graphs
        return f"dynexpr:{self.name}"


def _compile(k: Kernel, blocks: tuple):
    from . import backends
    from .backends import policy

    with _lock:
        fn = _compiled.get(k.key)
        if fn is None:
            fn = policy.compile_graph(backends.get("cpu"), k.graph, list(blocks),
                                      mode="default", fuse=True, name=k.name)
            _compiled[k.key] = fn
    return fn


class Chunk:
    """dask.array.reduction's chunk step: the partials graph on one block, as the dict
    combine and aggregate read (Dask concatenates dicts key by key)."""

    def __init__(self, kernel: Kernel, op: str, inputs: list, pos: int) -> None:
        self.kernel, self.op, self.inputs, self.pos = kernel, op, inputs, pos

    def __call__(self, block, axis=None, keepdims=True, computing_meta=False, **_):
        if computing_meta:  # Dask asking for the type of a partial: no kernel for that
            return block
        blocks = list(self.inputs)
        blocks[self.pos] = block
        outs = self.kernel(*blocks)
        if self.op in ("mean", "var", "std"):
            n = np.full(outs[0].shape, _count(blocks, outs[0].shape), dtype=np.float64)
            if self.op == "mean":
                return {"n": n, "s": outs[0]}
            return {"n": n, "m": outs[0], "M2": outs[1]}
        return outs[0]


def _count(blocks: tuple, kshape: tuple) -> int:
    """Elements each partial of a block summarises: the block's size over its reduced
    (keepdims 1) axes."""
    shape = np.broadcast_shapes(*(b.shape for b in blocks if np.ndim(b) == len(kshape)))
    return int(np.prod([d for d, k in zip(shape, kshape) if k == 1 and d != 1] or [1]))


_SIMPLE = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max,
           "any": np.any, "all": np.all}


class Combine:
    """Combine (keepdims) and aggregate (final) step of reduction `op` over `axis`."""

    def __init__(self, op: str, dtype, ddof: int = 0, final: bool = False) -> None:
        self.op, self.dtype, self.ddof, self.final = op, np.dtype(dtype), ddof, final

    def __call__(self, p, axis=None, keepdims=False, **_):
        op = self.op
        kd = keepdims if self.final else True
        if op in _SIMPLE:
            out = _SIMPLE[op](p, axis=axis, keepdims=kd)
            return out.astype(self.dtype, copy=False) if self.final else out
        n = np.sum(p["n"], axis=axis, keepdims=True)
        if op == "mean":
            s = np.sum(p["s"], axis=axis, keepdims=True)
            if not self.final:
                return {"n": n, "s": s}
            with np.errstate(divide="ignore", invalid="ignore"):
                return _squeeze(s / n, axis, kd).astype(self.dtype, copy=False)
        # Chan et al.: the parts' M2 plus each part's count times its mean's squared
        # distance from the combined mean.
        with np.errstate(divide="ignore", invalid="ignore"):
            m = np.sum(p["n"] * p["m"], axis=axis, keepdims=True) / n
            M2 = (np.sum(p["M2"], axis=axis, keepdims=True)
                  + np.sum(p["n"] * (p["m"] - m) ** 2, axis=axis, keepdims=True))
            if not self.final:
                return {"n": n, "m": m, "M2": M2}
            var = M2 / np.maximum(n - self.ddof, 0)
        out = np.sqrt(var) if op == "std" else var
        return _squeeze(out, axis, kd).astype(self.dtype, copy=False)


def _squeeze(a, axis, keepdims: bool):
    a = a if keepdims else np.squeeze(a, axis=axis)
    return a[()] if a.ndim == 0 else a  # a NumPy scalar, as Dask's own reductions give
