"""dynexpr.runtime — a Graph in, a callable out: schedule -> codegen -> cache -> native.

    fn = compile_graph(graph)          # compiles on a cache miss (once across processes)
    outs = fn(*input_arrays)           # tuple of ndarrays, in graph.outputs order

The callable is a `dynexpr._native.Kernel`: it checks the arrays (dtype, rank; the unit
checks extents), allocates the outputs, releases the GIL and runs the unit. Arguments in
graph.mutations are updated in place (NumPy's semantics; they must be writeable). An
output that is an argument (or a version of a mutated one) is that argument object.

For a warm start without rebuilding the graph, `build()` gives the unit's cache key and
`load(key)` turns a key back into the callable; cache.index_get/index_put map a function
identity and guard-set key to such keys (see dynexpr.cache).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import cache, codegen, fperr, ir
from .schedule import Schedule, schedule

CODES = {name: k for k, name in enumerate(ir.DTYPES)}  # kernels/abi.h dx_dtype_code order


@dataclass
class Compiled:
    fn: object  # the callable
    key: str | None  # cache key of the unit (None: nothing to compile)
    source: str
    schedule: Schedule

    @property
    def kernel_count(self) -> int:
        return len(self.schedule.kernels)


def compile_graph(graph: ir.Graph, *, fuse: bool = True):
    """The callable computing `graph` (outputs in graph.outputs order)."""
    return build(graph, fuse=fuse).fn


def build(graph: ir.Graph, *, fuse: bool = True) -> Compiled:
    return finish(plan(graph, fuse=fuse))


@dataclass
class Plan:
    """A graph scheduled and turned into its unit's source, not compiled yet."""
    schedule: Schedule
    conv: dict
    source: str  # "" when there is nothing to compile (every output is an input)
    key: str | None


def plan(graph: ir.Graph, *, fuse: bool = True) -> Plan:
    s = schedule(graph, fuse)
    conv = calling_convention(s)
    if not s.kernels:
        return Plan(s, conv, "", None)
    source = codegen.generate(s)
    return Plan(s, conv, source, cache.unit_key(source))


def cached(p: Plan) -> Compiled | None:
    """p's callable if the cache already holds its unit (or it needs none), else None."""
    if p.key is None:
        return finish(p)
    art = cache.lookup(p.key)
    if art is None:
        return None
    cache.stats["hits"] += 1
    return Compiled(_kernel(art, p.schedule), art.key, p.source, p.schedule)


def finish(p: Plan) -> Compiled:
    """p's callable, compiling its unit on a cache miss (once, across processes)."""
    if p.key is None:
        return Compiled(_identity(p.conv), None, "", p.schedule)
    art = cache.get_or_build(p.source, p.conv)
    return Compiled(_kernel(art, p.schedule), art.key, p.source, p.schedule)


def load(key: str):
    """The callable of a published unit, or None if the cache does not hold it (intact)."""
    art = cache.lookup(key)
    return None if art is None else _kernel(art)


def warmup() -> None:
    """Builds the precompiled prelude now (it is otherwise built by the first compile)."""
    cache.ensure_pch()


def calling_convention(s: Schedule) -> dict:
    """What the native Kernel needs besides the unit: JSON, stored beside the artifact."""
    def dim(d):
        if not isinstance(d, str):
            return int(d)
        if d not in s.symbols:
            raise NotImplementedError(
                f"dynexpr: output extent {d!r} is not the extent of any input; the cpu "
                "backend sizes outputs from input extents only")
        return list(s.symbols[d])

    return {
        "inputs": [[CODES[dt], len(shape), bool(w)] for dt, shape, w in s.inputs],
        "outputs": [[CODES[b.dtype], [dim(d) for d in b.shape]] for b in s.outputs],
        "results": list(s.results),
        "quiet": s.graph.quiet,
        "where": fperr.op_names(s.graph.ops()),
    }


def _kernel(art: cache.Artifact, s: Schedule | None = None):
    """The native callable of `art`; its error reports name the ops of schedule `s`'s
    graph, or (a warm start without the graph) those recorded beside the artifact."""
    from . import _native

    m = art.meta
    where = fperr.op_names(s.graph.ops()) if s is not None else m.get("where")
    return _native.Kernel(
        str(art.so),
        tuple((c, n, bool(w)) for c, n, w in m["inputs"]),
        tuple((c, tuple(tuple(d) if isinstance(d, list) else d for d in dims))
              for c, dims in m["outputs"]),
        tuple(m["results"]),
        m.get("quiet", 0),
        tuple(where or ()),
    )


def _identity(conv: dict):
    results = conv["results"]
    n_in = len(conv["inputs"])

    def call(*arrays):
        if len(arrays) != n_in:
            raise TypeError(f"dynexpr kernel: takes {n_in} arrays, got {len(arrays)}")
        return tuple(arrays[-r - 1] for r in results)

    return call
