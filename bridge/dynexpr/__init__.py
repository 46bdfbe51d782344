"""dynexpr — capture NumPy functions into fused, compiled kernels.

    @dynexpr.capture
    def gelu(x):
        return 0.5 * x * (1.0 + np.tanh(0.79788456 * (x + 0.044715 * x ** 3)))

See capture() for the options, explain() for what a capture did, and config for the
settings. A kernel missing from the disk cache compiles in the background while NumPy runs
the captured graph (config.background_compile); synchronize() waits for those compiles. DYNEXPR_LOGS=graph_breaks,guards,recompiles,output_code,cache turns on logs.
"""

from __future__ import annotations

import builtins
import os as _os
import functools
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from . import backends, logs, ops
from .capture import dynamic as _dynamic
from .capture import GraphBreakError
from .captured import MODES, CacheInfo, CapturedFunction, DynexprWarning, reset
from .config import config
from .explain import explain
from .background import synchronize
from .guards import Guard

__version__ = "0.1.0"
_OPTIONS = ("backend", "mode", "dynamic", "fullgraph", "fuse")


def capture(
    fn: Callable | None = None,
    *,
    backend: Any = "cpu",
    mode: str = "default",
    dynamic: bool | None = None,
    fullgraph: bool = False,
    fuse: bool = True,
    **unknown: Any,
) -> Any:
    """Capture a NumPy function: `capture(fn)`, `@capture` or `@capture(backend=...)`.

    backend    "cpu" (compiled C++ kernels), "eager" (the captured graph run op by op
               with NumPy), another name registered with dynexpr.backends.register, or
               a callable(graph, example_inputs) -> f(*inputs) -> outputs
    mode       "default" (the parallel schedule from a heuristic), "max-autotune" (each
               new kernel compiles at once and times a few schedules on the first call's
               inputs; the fastest is kept in the cache for later processes), or
               "reduce-overhead" (torch.compile's name: on the cpu backend it is the
               default path, whose per-call cost is already a C guard check and the
               kernel call; on CUDA arrays, each unit replayed as a CUDA graph (Note [CUDA
               graph replay] in backends/cuda_driver.py); explain says which)
    dynamic    None: the first call is specialised to its shapes; a dimension seen with a
               second extent is dynamic in the recompiled entry (a third extent reuses
               it). True: every dimension of size >= 2 is dynamic from the start.
               False: never dynamic (each new shape is captured again)
    fullgraph  True: raise GraphBreakError instead of running plain Python at a break
    fuse       False: one kernel per op (the unfused comparison, same pipeline)
    """
    if unknown:
        raise TypeError(
            f"dynexpr.capture() got unknown option(s) {', '.join(sorted(unknown))}; "
            f"the options are {', '.join(_OPTIONS)}"
        )
    if not backends.known(backend):
        raise ValueError(backends.unknown_message(backend))
    if mode not in MODES:
        raise ValueError(f"dynexpr.capture: unknown mode {mode!r}; modes: {', '.join(MODES)}")
    if dynamic not in (None, False, True):
        raise TypeError(f"dynexpr.capture: dynamic must be None, False or True, got {dynamic!r}")
    for name, value in (("fullgraph", fullgraph), ("fuse", fuse)):
        if not isinstance(value, bool):
            raise TypeError(f"dynexpr.capture: {name} must be True or False, got {value!r}")
    options = dict(backend=backend, mode=mode, dynamic=dynamic, fullgraph=fullgraph, fuse=fuse)
    if fn is None:
        return functools.partial(_capture_one, **options)
    return _capture_one(fn, **options)


def _capture_one(fn: Any, **options: Any) -> Any:
    if isinstance(fn, CapturedFunction):
        fn = fn.__dynexpr_wrapped__
    if isinstance(fn, types.MethodType):
        func = getattr(fn.__func__, "__dynexpr_wrapped__", fn.__func__)
        if isinstance(func, types.FunctionType):
            return types.MethodType(CapturedFunction(func, **options), fn.__self__)
    if not isinstance(fn, types.FunctionType):
        what = f"{type(fn).__name__} {fn!r:.40}"
        raise TypeError(
            f"dynexpr.capture({what}): expected a Python function (a def or a "
            "lambda); use it as @dynexpr.capture above a def, or "
            "dynexpr.capture(backend=...) with options only"
        )
    return CapturedFunction(fn, **options)


def disable(fn: Callable | None = None) -> Any:
    """Never capture fn: calling it from captured code is a graph break, and a captured
    `disable`d function runs as plain Python."""
    if fn is None:
        return disable
    fn = getattr(fn, "__dynexpr_wrapped__", fn)
    if not callable(fn):
        raise TypeError(f"dynexpr.disable({fn!r}): expected a function")

    @functools.wraps(fn)
    def plain(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    plain.__dynexpr_disable__ = True  # type: ignore[attr-defined]
    return plain


def cond(pred: Any, true_fn: Callable, false_fn: Callable, operands: Any = ()) -> Any:
    """true_fn(*operands) if pred else false_fn(*operands), and in captured code a branch
    on array data that stays compiled: with a 0-d array pred both branches are computed
    and their results selected (np.where), so they must be functions of their operands
    returning the same structure, dtypes and shapes, without writing into arrays."""
    ops = tuple(operands)
    p = np.asarray(pred)
    if p.size != 1:
        raise ValueError(
            f"dynexpr.cond: pred must be a single value (a Python bool or a 0-d array), got "
            f"an array of shape {p.shape}; reduce it first, e.g. x.sum() > 0")
    return true_fn(*ops) if bool(p) else false_fn(*ops)


cond.__dynexpr_cond__ = True  # type: ignore[attr-defined]  (capture/control.py)


def mark_dynamic(a: Any, dim: int, min: int | None = None, max: int | None = None) -> None:
    """Capture array `a`'s dimension `dim` as dynamic (any extent in [min, max]) the next
    time a captured function meets `a`, instead of waiting for a second extent. Extents
    0 and 1 stay specialised, so min is at least 2."""
    lo = 2 if min is None else min
    for name, v in (("min", min), ("max", max)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            raise TypeError(f"dynexpr.mark_dynamic: {name} must be a non-negative int, got {v!r}")
    if max is not None and max < lo:
        raise ValueError(f"dynexpr.mark_dynamic: max={max} is below min={lo}")
    d = _dynamic.axis_of(a, dim, "mark_dynamic")
    n = a.shape[d]
    if n < lo or (max is not None and n > max):
        raise ValueError(
            f"dynexpr.mark_dynamic: dimension {d} of this array has extent {n}, outside the "
            f"range [{lo}, {'inf' if max is None else max}] given for it; widen the range "
            "or mark another array")
    _dynamic.mark(a, d, (builtins.max(lo, 2), max), "mark_dynamic")


def mark_static(a: Any, dim: int | None = None) -> None:
    """Keep array `a`'s dimension `dim` (every dimension when dim is None) static, even
    when it changes between calls or the function was captured with dynamic=True."""
    dims = range(getattr(a, "ndim", 0)) if dim is None else (dim,)
    if dim is None and type(a) is not np.ndarray:
        raise TypeError(f"dynexpr.mark_static: expected a NumPy ndarray, got {type(a).__name__}")
    for d in dims:
        _dynamic.mark(a, d, None, "mark_static")


def load_artifacts(path: str) -> str:
    """Makes this process use the precompiled units of the bundle at `path` (written by
    `python -m dynexpr precompile`): verified first (sha256 of every file, the signature
    when DYNEXPR_BUNDLE_KEY is set), the best ISA level this CPU runs chosen. Returns the
    level; raises dynexpr.artifacts.bundle.BundleError when it must not be loaded.
    DYNEXPR_ARTIFACTS=path does the same at import (warning instead of raising)."""
    from .artifacts import bundle

    return bundle.load(path)


def export(fn: Callable, *args: Any, dynamic_shapes: Any = None, name: str | None = None,
           **kwargs: Any):
    """fn exported for the example call fn(*args, **kwargs) as standalone C++, like
    torch.export + AOTInductor: returns a dynexpr.artifacts.export.Exported whose
    `.add(*more_args, dynamic_shapes=...)` adds specialisations and `.save(dir)` writes
    NAME.hpp and libNAME.so (entry point NAME::run, guards checked in C++; no Python at
    run time). dynamic_shapes: {param: {axis: dynexpr.Dim(name, min=, max=)}}. A graph
    break is an ExportError listing the breaks."""
    from .artifacts import export as _export

    return _export.export(fn, *args, dynamic_shapes=dynamic_shapes, name=name, **kwargs)


def __getattr__(name: str) -> Any:
    if name in ("Dim", "ExportError", "Exported"):  # without importing export.py at start
        from .artifacts import export as _export

        return getattr(_export, name)
    raise AttributeError(f"module 'dynexpr' has no attribute {name!r}")


if _os.environ.get("DYNEXPR_ARTIFACTS"):
    from .artifacts import bundle as _bundle

    _bundle.load_from_env()


__all__ = [
    "capture",
    "explain",
    "config",
    "reset",
    "synchronize",
    "cond",
    "disable",
    "mark_dynamic",
    "mark_static",
    "GraphBreakError",
    "CacheInfo",
    "DynexprWarning",
    "Guard",
    "logs",
    "load_artifacts",
    "export",
    "Dim",
    "ExportError",
]
