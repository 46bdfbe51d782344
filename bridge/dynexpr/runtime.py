"""dynexpr.runtime — a Graph in, a callable out: schedule -> codegen -> cache -> native
(the steps of the cpu backend, backends/cpu.py; cxx.py compiles, cache.py stores).

    fn = compile_graph(graph)          # compiles on a cache miss (once across processes)
    outs = fn(*input_arrays)           # tuple of ndarrays, in graph.outputs order

The callable is a `dynexpr._native.Kernel`: it checks the arrays (dtype, rank; the unit
checks extents), allocates the outputs, releases the GIL and runs the unit. Arguments in
graph.mutations are updated in place (NumPy's semantics; they must be writeable). An
output that is an argument (or a version of a mutated one) is that argument object.

For a warm start without rebuilding the graph, `build()` gives the unit's cache key and
`load(key)` turns a key back into the callable; cache.index_get/index_put map a function
identity and guard-set key to such keys (see dynexpr.cache).

Note [loading a unit]
A unit is loaded only after it verified (cache.lookup) and after this process loaded the
verified runtime library it links against (`_runtime_lib`): the dynamic linker then
resolves the unit's DT_NEEDED libdynexpr_rt.so by its soname to that copy, so a damaged
or foreign runtime library on the unit's rpath is never mapped. A unit that verifies but
still fails to load (a shared object that is not one, a meta.json that does not fit it)
is removed and compiled once more; a second failure is an error.
"""

from __future__ import annotations

import ctypes
import json
import logging
from dataclasses import dataclass

from . import blas, cache, codegen, cxx, fperr, ir, manifest
from .config import config, on_change
from .schedule import Schedule, schedule

CODES = manifest.CODES  # dtype name -> kernels/abi.h dx_dtype_code
log = logging.getLogger("dynexpr.cache")
_rt: dict = {"lib": None, "threads": None}  # the loaded runtime library; the pool size set


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
    return Plan(s, conv, source, cxx.unit_key(source))


def cached(p: Plan) -> Compiled | None:
    """p's callable if the cache already holds its unit (or it needs none), else None."""
    if p.key is None:
        return finish(p)
    art = cache.lookup(p.key, cxx.ARTIFACT)
    if art is None or art.meta != _as_json(p.conv):
        return None
    fn = _try_kernel(art, p.schedule)
    if fn is None:
        return None
    cache.stats["hits"] += 1
    return Compiled(fn, art.key, p.source, p.schedule)


def finish(p: Plan) -> Compiled:
    """p's callable, compiling its unit on a cache miss (once, across processes)."""
    if p.key is None:
        return Compiled(_identity(p.conv), None, "", p.schedule)
    art = cxx.get_or_build(p.source, p.conv)
    fn = _try_kernel(art, p.schedule) if art.meta == _as_json(p.conv) else None
    if fn is None:  # Note [loading a unit]: once more from scratch, then it must load
        art = cxx.rebuild(art.key, p.source, p.conv)
        fn = _kernel(art, p.schedule)
    return Compiled(fn, art.key, p.source, p.schedule)


def load(key: str):
    """The callable of a published unit, or None if the cache does not hold it (intact)."""
    art = cache.lookup(key, cxx.ARTIFACT)
    return None if art is None else _try_kernel(art)


def set_num_threads(n: int) -> None:
    """Sizes the kernels' thread pool (0: one thread per core): now if the runtime
    library is loaded, else when it is (dynexpr.config.num_threads calls this)."""
    _rt["threads"] = n
    lib = _rt["lib"]
    if lib is not None and lib.dynexpr_rt_set_num_threads(n) != 0:
        raise ValueError(f"dynexpr.config.num_threads: the thread pool refused {n} threads")


on_change("num_threads", set_num_threads)  # now if kernels are loaded, else at load


def set_spin_us(us: int) -> None:
    """How long the pool's idle threads spin before sleeping (-1: the library default):
    now if the runtime library is loaded, else when it is (dynexpr.config.spin_us)."""
    lib = _rt["lib"]
    if lib is not None:
        lib.dynexpr_rt_set_spin_us(ctypes.c_longlong(us))


on_change("spin_us", set_spin_us)


def kernel_spin_us() -> int | None:
    """The pool's spin time in microseconds, or None before any kernel is loaded."""
    lib = _rt["lib"]
    if lib is None:
        return None
    lib.dynexpr_rt_spin_us.restype = ctypes.c_longlong
    return int(lib.dynexpr_rt_spin_us())


def kernel_threads() -> int | None:
    """The kernels' thread pool size, or None before any kernel is loaded."""
    lib = _rt["lib"]
    return None if lib is None else int(lib.dynexpr_rt_num_threads())


def _runtime_lib():
    """The verified runtime library, loaded once per process (Note [loading a unit])."""
    if _rt["lib"] is None:
        # A loaded bundle's own (Note [bundles] in artifacts/bundle.py: no compiler needed)
        path = cache.bundle_runtime or cxx.ensure_runtime() / cxx.RUNTIME_LIB
        lib = ctypes.CDLL(str(path))
        threads = _rt["threads"]
        if threads is None:
            threads = config.num_threads
        if threads:  # 0: the pool's own default ($DYNEXPR_NUM_THREADS, else one per core)
            lib.dynexpr_rt_set_num_threads(threads)
        if config.spin_us >= 0:  # -1: the library's ($DYNEXPR_SPIN_US, else its default)
            lib.dynexpr_rt_set_spin_us(ctypes.c_longlong(config.spin_us))
        blas.install(lib)  # Note [NumPy's BLAS]: dx::matmul calls NumPy's gemm/gemv
        # Note [streaming stores] (dynexpr/simd/convert.hpp): off for generated units. On
        # the 2-core AMD EPYC, flipped in one process at 16M float32, units streaming
        # ran stencil3 at 0.69x, tanh_chain at 0.55-0.62x and affine at 0.92-1.16x of
        # units storing normally, while the C++ expression loop gained 1.09-1.38x.
        # A runtime library from before streaming has no switch and streams nothing.
        try:
            lib.dynexpr_rt_set_stream_min_bytes(ctypes.c_longlong(-1))
        except AttributeError:
            pass
        _rt["lib"] = lib
    return _rt["lib"]


def _try_kernel(art: cache.Artifact, s: Schedule | None = None):
    """art's callable, or None after removing a unit that does not load."""
    try:
        return _kernel(art, s)
    except (ImportError, OSError, TypeError, ValueError, KeyError, IndexError) as e:
        if isinstance(e, cache.CompileError):
            raise
        log.warning("dynexpr cache: %s verified but does not load (%s); rebuilding",
                    art.dir, e)
        cache.discard(art.key)
        return None


def _as_json(conv: dict):
    return json.loads(json.dumps(conv))


def warmup() -> None:
    """Builds the precompiled prelude and the runtime library now (they are otherwise
    built by the first compile)."""
    cxx.ensure_prelude_and_runtime()


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

    _runtime_lib()
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
