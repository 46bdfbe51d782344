"""dynexpr.explain: what capture would do with one call, without running it.

    print(dynexpr.explain(f, x, y))

Translation is side-effect free, so explain translates the call (nothing is compiled
or executed) and reports the graphs, the graph breaks with their file, line and source
text, the ops of each graph and the guards that decide when the capture is reused.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any

from . import ir
from .capture import BreakReason, Unsupported, translate
from .capture.calls import BindError, bind_call
from .guards import Guard


@dataclass
class ExplainOutput:
    graph_count: int
    graph_break_count: int
    break_reasons: list[BreakReason]
    ops_per_graph: list[list[str]]
    guards: list[Guard]
    graphs: list[ir.Graph] = field(default_factory=list)
    argnames: tuple = ()

    def __str__(self) -> str:
        lines = [f"Graph count: {self.graph_count}", f"Graph break count: {self.graph_break_count}"]
        for i, ops in enumerate(self.ops_per_graph):
            lines.append(f"Ops in graph {i} ({len(ops)}): {', '.join(ops) or '(none)'}")
        for i, g in enumerate(self.graphs):
            lines.append(f"Graph {i}:")
            lines += ["    " + line for line in g.canonical().splitlines()]
        if self.break_reasons:
            lines.append("Break reasons:")
            for i, r in enumerate(self.break_reasons, 1):
                lines.append(f"  {i}. {r.reason}")
                lines.append(f"     at {r.file}:{r.line}")
                if r.source:
                    lines.append(f"       {r.source}")
                if len(r.stack) > 1:
                    inlined = " -> ".join(f"{name} ({line})" for _, line, name in r.stack)
                    lines.append(f"     inlined through: {inlined}")
        lines.append(f"Guards ({len(self.guards)}):")
        lines += [f"  {g.kind}: {g.describe(self.argnames)}" for g in self.guards]
        return "\n".join(lines)


def explain(fn: Any, *args: Any, **kwargs: Any) -> ExplainOutput:
    """Translate fn(*args, **kwargs) and report; fn may be captured or a plain function
    (or a bound method of either)."""
    if isinstance(fn, types.MethodType):
        fn, args = fn.__func__, (fn.__self__,) + args
    target = getattr(fn, "__dynexpr_wrapped__", fn)
    if not hasattr(target, "__code__"):
        raise TypeError(
            f"dynexpr.explain: expected a Python function or a captured one, got "
            f"{type(fn).__name__}"
        )
    try:
        bound = bind_call(target, args, kwargs)
    except BindError as e:
        raise TypeError(
            f"dynexpr.explain: the arguments do not fit {target.__qualname__}: {e}"
        ) from None
    names = target.__code__.co_varnames
    try:
        tr = translate(target, bound)
    except Unsupported as e:
        return ExplainOutput(0, 1, [e.to_reason()], [], list(e.guards), [], names)
    return ExplainOutput(1, 0, [], [tr.graph.ops()], list(tr.guards), [tr.graph], names)
