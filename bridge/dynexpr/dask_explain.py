"""dynexpr.explain on Dask arrays: the chunk graph (Note [dask chunk plans] in
dask_plan.py): how many tasks Dask with NumPy chunks would run and how many the
captured function's graph has, and what went to Dask's own operations."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import dask_run


@dataclass
class DaskExplain:
    kind: str  # "blockwise" | "reduction" | "stencil" | "dask" (Note [dask chunk plans])
    why: str  # for "dask": why Dask's own operations run the call
    chunks: int  # chunks of the (first) Dask argument
    tasks_plain: int | None  # tasks of fn on the Dask arrays (Dask + NumPy), inputs not counted
    tasks: int | None  # tasks of the captured call's result, inputs not counted
    ops: list[str] = field(default_factory=list)  # the graph's ops, where it translated

    def __str__(self) -> str:
        lines = [f"Dask inputs: {self.chunks} chunks; plan: {self.kind}"]
        if self.kind == "blockwise":
            lines.append("  the whole graph runs as one compiled kernel per chunk")
        elif self.kind == "stencil":
            lines.append("  one task per chunk (map_overlap, halo from the slices) runs the "
                         "captured function on the chunk and its halo")
        elif self.kind == "reduction":
            lines.append("  a compiled chunk step per chunk (partials), then Dask's "
                         "combine/aggregate tree on the partials")
        else:
            lines.append(f"  went to Dask's own operations: {self.why}")
        if self.ops:
            lines.append(f"  ops: {', '.join(self.ops)}")
        plain = "n/a" if self.tasks_plain is None else self.tasks_plain
        got = "n/a" if self.tasks is None else self.tasks
        lines.append(f"  tasks (inputs not counted): Dask + NumPy {plain}, dynexpr {got}")
        return "\n".join(lines)


def _tasks(result, inputs: list) -> int | None:
    graph = getattr(result, "__dask_graph__", None)
    if graph is None:
        return None
    known = set()
    for a in inputs:
        known.update(a.__dask_graph__().keys())
    return len(set(graph().keys()) - known)


def explain(fn, bound: list, args: tuple, kwargs: dict) -> DaskExplain:
    built = dask_run.build(fn, list(bound), args, kwargs, run_plain=False)
    p = built.plan
    chunks = built.inputs[0].npartitions if built.inputs else 0
    ops = p.translation.graph.ops() if p.translation is not None else []
    # A break in the plain call would compute on the client: not counted then.
    plain = None if "graph break" in p.why else _tasks(fn(*args, **kwargs), built.inputs)
    mine = plain if p.kind == "dask" else _tasks(built.result, built.inputs)
    return DaskExplain(p.kind, p.why, chunks, plain, mine, ops)
