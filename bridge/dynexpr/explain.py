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

from . import cuda_run, ir, judge
from .capture import BreakReason, Unsupported, translate
from .capture.calls import BindError, bind_call
from .capture.concrete import not_resumable
from .captured import CapturedFunction
from .dask_run import has_dask
from .diagnostics import recompile_lines
from .guards import Guard


# What to do about a break, by the words of its reason (first match wins).
HINTS = (
    ("branch on an array's value",
     "use np.where(cond, a, b) instead of a Python branch on array data, or "
     "dynexpr.cond(pred, true_fn, false_fn, operands)"),
    (".item()", "keep the value an array (x.sum() instead of x.sum().item()) so it stays in "
                "the graph"),
    (".tolist()", "return the array and convert outside the captured function"),
    ("float() of an array", "keep the value an array: x[0] broadcasts like a float"),
    ("int() of an array", "keep the value an array, or pass the int as an argument"),
    ("print()", "print outside the captured function (or log the value it returns)"),
    ("advanced indexing", "use np.where(mask, x, 0) or a reduction with where= instead of "
                          "boolean or integer-array indexing"),
    ("is not supported by dynexpr", "move the call outside the captured function, or split "
                                    "the function at it: the parts before and after capture"),
    ("is not in dynexpr's op table", "move the call outside the captured function"),
    ("dtype", "convert the array first, e.g. x.astype(np.float64)"),
    ("loops ran past", "raise the loop's bound outside, or vectorise the loop body"),
    ("runs the body lazily", "capture a plain function that it calls, or one that consumes "
                             "the generator (a generator used inside is followed)"),
    ("is marked dynexpr.disable", "remove dynexpr.disable if the function can be captured"),
)


def hint_for(reason: str) -> str:
    for words, hint in HINTS:
        if words in reason:
            return hint
    return "run the function under DYNEXPR_LOGS=graph_breaks to see every break"


@dataclass
class ExplainOutput:
    graph_count: int
    graph_break_count: int
    break_reasons: list[BreakReason]
    ops_per_graph: list[list[str]]
    guards: list[Guard]
    graphs: list[ir.Graph] = field(default_factory=list)
    argnames: tuple = ()
    # The captured function's recompiles so far: (entry number, [(guard text, value
    # seen), ...] for the guards of earlier entries that failed). Empty for a plain one.
    recompiles: list[tuple[int, list[tuple[str, str]]]] = field(default_factory=list)
    # For a call that went on past its breaks (Note [resuming after a graph break]): the
    # array ops that ran in graphs, and the instructions plain Python ran on arrays.
    compiled_ops: int | None = None
    python_ops: int = 0
    # For a captured function: one line per entry judged against the plain function
    # (Note [judging an entry] in judge.py): whether it runs plain, and the times measured.
    judged: list[str] = field(default_factory=list)
    # What the captured function's mode means on its backend (mode_note()).
    mode: str = ""
    # For a call with CUDA arrays (cuda_run.explain): where it runs, and why.
    device: list[str] = field(default_factory=list)

    @property
    def units(self) -> list[str]:
        """Per graph, what the cpu backend compiles it into: "one unit (...)" or "split
        into K units (budget ...)" (Note [compile budget] in split.py)."""
        from . import split

        return [split.describe(g) for g in self.graphs]

    @property
    def runs_plain(self) -> list[str]:
        """The judged entries that run the plain function (compiling did not pay)."""
        return [line for line in self.judged if "runs plain" in line]

    @property
    def compiled_op_share(self) -> float:
        """The share of this call's array ops that run compiled (0.0 when a break makes
        the whole function run as plain Python)."""
        if self.compiled_ops is not None:
            total = self.compiled_ops + self.python_ops
            return self.compiled_ops / total if total else 0.0
        return 1.0 if self.graph_count and not self.graph_break_count else 0.0

    @property
    def hints(self) -> list[str]:
        return [hint_for(r.reason) for r in self.break_reasons]

    def __str__(self) -> str:
        share = f"Array ops that run compiled: {self.compiled_op_share:.0%}"
        if self.compiled_ops is not None:
            share += (f" ({self.compiled_ops} in graphs, {self.python_ops} run by Python at the "
                      "breaks; the call was run once to follow it past them)")
        lines = [f"Graph count: {self.graph_count}", f"Graph break count: {self.graph_break_count}",
                 share]
        if self.device:
            lines += ["Device:"] + [f"  {line}" for line in self.device]
        for i, ops in enumerate(self.ops_per_graph):
            lines.append(f"Ops in graph {i} ({len(ops)}): {', '.join(ops) or '(none)'}")
        for i, unit in enumerate(self.units):
            if unit.startswith("split"):
                lines.append(f"Graph {i} is {unit}")
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
                lines.append(f"     hint: {hint_for(r.reason)}")
        lines.append(f"Guards ({len(self.guards)}):")
        lines += [f"  {g.kind}: {g.describe(self.argnames)}" for g in self.guards]
        if self.recompiles:
            lines.append("Recompiles:")
            lines += recompile_lines(self.recompiles)
        if self.mode:
            lines.append(self.mode)
        if self.judged:
            lines.append("Compiled vs the plain function (measured on real calls):")
            lines += [f"  {line}" for line in self.judged]
        return "\n".join(lines)


def mode_note(fn: Any) -> str:
    """A line on what a captured function's mode="reduce-overhead" does on its backend."""
    if getattr(fn, "mode", None) != "reduce-overhead":
        return ""
    if getattr(fn, "backend", "cpu") == "cuda":
        return ("Mode reduce-overhead: each CUDA unit is captured once per set of extents "
                "as a CUDA graph and replayed, one launch a call; inputs that come at a new "
                "address are copied into the graph's buffers, results copied out of them "
                "(Note [CUDA graph replay]; the Device lines above say what each entry does)")
    return ("Mode reduce-overhead: on this backend it is the default path (guards checked "
            "in C, the compiled unit called with no Python in between); nothing is "
            "replayed, except on CUDA arrays, whose units are replayed as CUDA graphs")


def explain(fn: Any, *args: Any, **kwargs: Any) -> ExplainOutput:
    """Translate fn(*args, **kwargs) and report; fn may be captured or a plain function
    (or a bound method of either). With Dask array arguments: a dask_explain.DaskExplain
    (the chunk plan and task counts)."""
    if isinstance(fn, types.MethodType):
        fn, args = fn.__func__, (fn.__self__,) + args
    history = list(getattr(fn, "_recompiles", ()))
    judged = judge.report(getattr(fn, "_entries", ()))
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
    if has_dask(bound):  # the chunk graph (dask_explain.py)
        from . import dask_explain
        return dask_explain.explain(target, bound, args, kwargs)
    if cuda_run.has_device_arrays(bound) or cuda_run.reads_device_arrays(target):  # Note [the device path]
        graphs, breaks, guards, device = cuda_run.explain(fn, target, bound)
        return ExplainOutput(len(graphs), len(breaks), breaks, [g.ops() for g in graphs],
                             guards, graphs, names, history, device=device, mode=mode_note(fn))
    try:
        tr = translate(target, bound)
    except Unsupported as e:
        stop = e
    else:
        return ExplainOutput(1, 0, [], [tr.graph.ops()], list(tr.guards), [tr.graph], names,
                             history, judged=judged, mode=mode_note(fn))
    if not_resumable(target.__code__) is None and not getattr(fn, "fullgraph", False):
        out = _explain_by_running(target, args, kwargs, history)  # not inside `except`
        out.judged, out.mode = judged, mode_note(fn)
        return out
    return ExplainOutput(0, 1, [stop.to_reason()], [], list(stop.guards), [], names, history,
                         judged=judged, mode=mode_note(fn))


def _explain_by_running(fn: Any, args: tuple, kwargs: dict, history: list) -> ExplainOutput:
    """What follows a break depends on the value the break produces, so, as
    torch._dynamo.explain does, run the call once (op by op with NumPy) and report the
    graphs and breaks it went through."""
    trace: list = []
    cf = CapturedFunction(fn, "eager", "default", False, False, True, trace=trace)
    try:
        cf(*args, **kwargs)
        entry = cf.entries[0]
    finally:
        cf.cache_clear()
    if entry.translation is None:  # the whole call ran as plain Python
        return ExplainOutput(0, 1, [entry.reason], [], list(entry.guards), [],
                             fn.__code__.co_varnames, history)
    events = [("graph", entry.translation)] + trace
    graphs, seen, reasons, keys = [], set(), [], set()
    compiled = python = 0
    for ev in events:
        if ev[0] == "graph":
            ops = ev[1].graph.ops()
            compiled += len(ops)
            if ops and id(ev[1]) not in seen:
                seen.add(id(ev[1]))
                graphs.append(ev[1].graph)
        elif ev[0] == "break":
            r = ev[1]
            if (r.reason, r.file, r.line) not in keys:
                keys.add((r.reason, r.file, r.line))
                reasons.append(r)
        else:
            python += 1
    return ExplainOutput(len(graphs), len(reasons), reasons, [g.ops() for g in graphs],
                         list(entry.guards), graphs, fn.__code__.co_varnames, history,
                         compiled, python)
