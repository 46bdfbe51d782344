"""backend="cpu": the graph scheduled and generated as one C++ unit of dynexpr's
expression templates (runtime.plan: schedule -> codegen), compiled by the host C++
compiler (cxx.py: g++ with -march=native and a precompiled prelude) into the store
(cache.py) as `unit.so`, and loaded as a dynexpr._native.Kernel (runtime.py). A graph
over the compile budget is several such units, called in order (split.py)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

from .. import cxx, runtime, split
from ..diagnostics import _state
from .base import Backend, Plan

_PKG = __package__.rpartition(".")[0]


class CpuBackend(Backend):
    name = "cpu"
    artifact = cxx.ARTIFACT
    fallbacks = True

    def unavailable(self) -> str | None:
        # Memoised per process in diagnostics._state["runtime"] (dynexpr.reset() clears
        # it): a source checkout without the built extension cannot load units.
        if _state["runtime"] is None:
            try:
                importlib.import_module(f"{_PKG}._native")
                _state["runtime"] = True
            except ImportError as e:
                _state["runtime"] = str(e)
        return None if _state["runtime"] is True else _state["runtime"]

    def toolchain(self):
        return cxx.toolchain()

    def codegen(self, graph, example_inputs: Sequence[Any], *, fuse: bool = True) -> Plan:
        # A graph over the compile budget is several units (Note [compile budget]).
        p = split.plan(graph, fuse=fuse)
        return Plan(graph, p.key, p.source, p)

    def cached(self, plan: Plan) -> Callable | None:
        if isinstance(plan.detail, split.SplitPlan):
            return split.cached(plan.detail)
        ready = runtime.cached(plan.detail)
        return None if ready is None else ready.fn

    def build(self, plan: Plan) -> Callable:
        if isinstance(plan.detail, split.SplitPlan):
            return split.finish(plan.detail)
        return runtime.finish(plan.detail).fn
