"""How a new entry gets its callable from a Backend: the one place that decides between
the cache, compiling now, compiling in the background (NumPy meanwhile), autotuning, and
NumPy when building is not possible; the same for every backend.

    fn = policy.compile_graph(backend, graph, example_inputs, mode=..., fuse=...,
                              name=fn.__qualname__, owner=id(captured_function))

Note [when building is not possible]
No compiler, a full disk or an unwritable cache is the machine's state, not the
user's mistake: the call must still return what NumPy returns. The entry runs its
captured graph with NumPy (the eager backend: the same results, unfused), with one
warning per process naming the cause; later new entries try to compile again. A
compiler that rejects the generated code is still an error (CompileError).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .. import autotune, background, eager
from ..config import config
from ..diagnostics import warn_once, warn_unavailable
from ..toolchain import BuildUnavailable
from .base import Backend, CallableBackend


def compile_graph(backend: Backend, graph, example_inputs: Sequence[Any], *, mode: str,
                  fuse: bool, name: str, owner: int = 0) -> Callable:
    """The callable running `graph` for a new entry of captured function `name` (`owner`:
    its id, which keys its warnings)."""
    backend.check_inputs(example_inputs)
    why = backend.unavailable()
    if why is not None:
        warn_once(("unavailable", backend.name),
                  f"dynexpr: backend={backend.name!r} is not available ({why}); captured "
                  "graphs run op by op with NumPy (backend='eager') instead")
        return eager.compile_graph(graph)
    if not backend.fallbacks:
        compiled = tiered(backend, graph, example_inputs, mode=mode, fuse=fuse, name=name)
    else:
        try:
            compiled = tiered(backend, graph, example_inputs, mode=mode, fuse=fuse, name=name)
        except (BuildUnavailable, OSError) as e:
            compiled = unavailable(e, graph)
        except NotImplementedError as e:  # a valid graph the compiled backend lacks
            warn_once(
                (f"{backend.name}-missing", str(e)),
                f"dynexpr: {name}: the {backend.name} backend cannot compile this graph "
                f"yet ({e}); it runs op by op with NumPy (backend='eager') instead",
            )
            compiled = eager.compile_graph(graph)
        except Exception as e:
            if not config.suppress_errors:
                raise
            warn_once(
                (f"{backend.name}-error", owner),
                f"{e}\n(suppress_errors: running the captured graph with NumPy instead)",
            )
            compiled = eager.compile_graph(graph)
    if not callable(compiled):
        label = backend.fn if isinstance(backend, CallableBackend) else backend.name
        raise TypeError(
            f"dynexpr: backend {label!r} returned {type(compiled).__name__}, "
            "not a callable f(*inputs) -> tuple of output arrays"
        )
    return compiled


def tiered(backend: Backend, graph, example_inputs: Sequence[Any], *, mode: str, fuse: bool,
           name: str) -> Callable:
    """The kernel, when the store holds it or compiling now is wanted; else a
    background.Tiered that runs NumPy until the background compile is done (Note
    [tiered first call] in background.py). mode="max-autotune" compiles now and times
    its schedules (autotune.py)."""
    plan = backend.codegen(graph, example_inputs, fuse=fuse)
    ready = backend.cached(plan)
    if plan.key is None:  # nothing to build: what cached() gave is the callable
        return ready
    if mode == "max-autotune":
        fn = ready or backend.build(plan)
        autotune.tune(fn, plan.key, list(example_inputs), autotune.written_inputs(graph), name)
        return fn
    if ready is not None:
        return ready
    if not config.background_compile:
        return backend.build(plan)
    job = background.submit(lambda: backend.build(plan), f"{name} (unit {plan.key[:12]})")
    return background.Tiered(job, eager.compile_graph(graph), name)


def unavailable(err: BaseException, graph) -> Callable:
    """Note [when building is not possible]."""
    warn_unavailable(err)
    return eager.compile_graph(graph)
