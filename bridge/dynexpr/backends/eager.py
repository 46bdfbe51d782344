"""backend="eager": the captured graph run op by op with NumPy (dynexpr/eager.py), the
reference every other backend is compared with and the tier that runs while they
build. It builds nothing, so its plans have no key and load at once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .. import eager
from .base import Backend, Plan


class EagerBackend(Backend):
    name = "eager"

    def codegen(self, graph, example_inputs: Sequence[Any], *, fuse: bool = True) -> Plan:
        return Plan(graph, None)

    def cached(self, plan: Plan) -> Callable:
        return eager.compile_graph(plan.graph)

    def build(self, plan: Plan) -> Callable:
        return self.cached(plan)
