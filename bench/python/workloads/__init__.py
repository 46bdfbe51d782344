"""The peer benchmark's workloads: plain NumPy functions that dynexpr captures, each with
its inputs and, where a peer can express it, the same math for numexpr, torch, numba and
JAX. bench/python/run_peers.py times them; tests/python/test_workloads.py checks that
dynexpr's captures give NumPy's results.

    from workloads import REGISTRY, by_name
"""

from __future__ import annotations

from . import pointwise, reductions, stencil
from .base import ROW, Workload

REGISTRY: list[Workload] = [*pointwise.WORKLOADS, *reductions.WORKLOADS, *stencil.WORKLOADS]


def by_name(names: list[str] | None = None) -> list[Workload]:
    """The workloads named (all when names is None), in the order given."""
    if names is None:
        return list(REGISTRY)
    known = {w.name: w for w in REGISTRY}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(
            f"unknown workload(s) {', '.join(unknown)}; the workloads are "
            f"{', '.join(known)}"
        )
    return [known[n] for n in names]


__all__ = ["REGISTRY", "ROW", "Workload", "by_name"]
