"""dynexpr.backends — the ways a captured graph runs, registered by name.

    capture(fn, backend="cpu")      # a registered name
    capture(fn, backend=my_fn)      # a callable(graph, example_inputs) -> f(*inputs)

A new backend (CUDA, say) is a Backend subclass (base.py) registered here under its
name, with a factory called on first use so that its imports (a driver library, a
compiler) cost nothing to processes that never use it:

    from dynexpr import backends
    backends.register("cuda", lambda: CudaBackend())

Tiering, autotune, the disk cache and the fallbacks then work for it as for "cpu"
(policy.py); nothing in captured.py names a backend.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from .base import Backend, CallableBackend, Plan

_factories: dict[str, Callable[[], Backend]] = {}
_made: dict[str, Backend] = {}


def register(name: str, factory: Callable[[], Backend]) -> None:
    """Makes `capture(backend=name)` use the Backend that factory() returns (called once,
    at the first capture that needs it); registering a name again replaces it."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"dynexpr.backends.register: the name must be a string, got {name!r}")
    _factories[name] = factory
    _made.pop(name, None)


def names() -> tuple[str, ...]:
    return tuple(_factories)


def known(spec: Any) -> bool:
    """Whether capture(backend=spec) names a backend: a registered name or a callable."""
    return (isinstance(spec, Backend) or callable(spec)
            or (isinstance(spec, str) and spec in _factories))


def get(spec: Any) -> Backend:
    """The Backend for capture's `backend` option."""
    if isinstance(spec, Backend):
        return spec
    if callable(spec):
        return CallableBackend(spec)
    b = _made.get(spec)
    if b is None:
        if spec not in _factories:
            raise ValueError(unknown_message(spec))
        b = _made[spec] = _factories[spec]()
    return b


def unknown_message(spec: Any) -> str:
    listed = ", ".join(repr(n) for n in names())
    return (f"dynexpr.capture: unknown backend {spec!r}; use {listed} or a "
            "callable(graph, example_inputs) returning f(*inputs) -> outputs")


def _lazy(module: str, cls: str) -> Callable[[], Backend]:
    return lambda: getattr(importlib.import_module(f"{__name__}.{module}"), cls)()


register("cpu", _lazy("cpu", "CpuBackend"))
register("eager", _lazy("eager", "EagerBackend"))
register("cuda", _lazy("cuda", "CudaBackend"))

__all__ = ["Backend", "CallableBackend", "Plan", "register", "names", "known", "get"]
