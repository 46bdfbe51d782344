"""What a backend is: the interface every way of running a captured graph implements.

A Backend turns a captured graph (ir.Graph) into a callable `f(*inputs) -> tuple of
output arrays` (the calling convention in eager.py), in two steps that the policy
(policy.py: tiering, autotune, fallbacks) drives the same way for every backend:

    plan = backend.codegen(graph, example_inputs, fuse=...)   # graph -> source / plan
    fn = backend.cached(plan)      # the loader: a callable from the store, or None
    fn = backend.build(plan)       # the toolchain fills the store, then the loader

A plan whose `key` is None needs nothing built: `cached` returns its callable at once
(the eager backend, a user's callable, a graph whose outputs are all inputs). A plan
with a key names one artifact in the store (cache.py); the key is the sha256 of the
backend's name, its source and its toolchain's identity (Toolchain.fingerprint).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Plan:
    """A graph turned into what its backend builds, not built yet."""
    graph: Any  # the ir.Graph
    key: str | None  # the artifact's key in the store; None: nothing to build
    source: str = ""  # the generated source ("" when there is none)
    detail: Any = None  # the backend's own (the cpu backend: its runtime.Plan)


class Backend:
    """The interface (a base class with the defaults of a backend that builds nothing).

    name         the string users pass as capture(backend=...), and part of every key
    artifact     the file a build publishes in the store ("unit.so"); None: none
    array_types  the array types its callables accept (checked by the guards: today
                 every backend takes NumPy arrays)
    fallbacks    whether a failure to build runs the graph with NumPy instead (Note
                 [when building is not possible] in policy.py); False where the
                 failure is the user's to see (a user's callable) or there is nothing
                 to fall back to (eager)
    """

    name: str = ""
    artifact: str | None = None
    array_types: tuple[type, ...] = (np.ndarray,)
    fallbacks: bool = False

    def unavailable(self) -> str | None:
        """Why this backend cannot run in this process (a missing extension), or None."""
        return None

    def check_inputs(self, example_inputs: Sequence[Any]) -> None:
        """Raise TypeError, naming the way out, for inputs this backend never takes (the
        cuda backend and NumPy arrays); checked before anything else, so the error does
        not depend on whether the backend can build on this machine."""

    def toolchain(self):
        """The compiler this backend builds with (toolchain.Toolchain: compiler, flags,
        and its fingerprint, which goes into every key), or None: it builds nothing."""
        return None

    def codegen(self, graph, example_inputs: Sequence[Any], *, fuse: bool = True) -> Plan:
        raise NotImplementedError

    def cached(self, plan: Plan) -> Callable | None:
        """The loader: plan's callable when the store holds its artifact (or it needs
        none), else None."""
        raise NotImplementedError

    def build(self, plan: Plan) -> Callable:
        """Builds plan's artifact into the store (once, across processes) and loads it."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<dynexpr backend {self.name!r}>"


class CallableBackend(Backend):
    """A user's function(graph, example_inputs) -> f(*inputs) -> outputs, as a Backend:
    called once per new entry, nothing cached (it is the user's to cache)."""

    fallbacks = False

    def __init__(self, fn: Callable) -> None:
        self.fn = fn
        self.name = getattr(fn, "__qualname__", type(fn).__name__)

    def codegen(self, graph, example_inputs: Sequence[Any], *, fuse: bool = True) -> Plan:
        return Plan(graph, None, detail=list(example_inputs))

    def cached(self, plan: Plan) -> Callable | None:
        return self.fn(plan.graph, plan.detail)

    def build(self, plan: Plan) -> Callable:
        return self.cached(plan)
