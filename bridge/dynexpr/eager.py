"""The eager backend: runs a captured Graph op by op with NumPy.

It is a real backend (capture(fn, backend="eager")) and the reference the compiled
backend is measured against: each op is computed by the NumPy function it names, and
each result is checked against the dtype and shape the graph claims, so a translator
mistake fails loudly here instead of producing a quiet wrong number.

Calling convention, shared with every backend (backends/base.py):
    f = compile_graph(graph)
    outputs = f(*inputs)   # inputs: the graph's input arrays in index order
returns a tuple with one ndarray per graph output (0-d arrays for 0-d values), freshly
allocated, and writes each Graph.mutations value into its input array (after every
output has been computed, as NumPy's own in-place semantics would have it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import fperr, ir, ops
from .capture.errors import InternalError
from .capture.infer import index_to_python


def _ufunc(name: str) -> Callable:
    uf = getattr(np, name)
    return lambda v, args: uf(*args)


def _reduction(v: ir.Value, args: list) -> Any:
    fn = getattr(np, v.op)
    if v.op in ("argmin", "argmax"):
        return fn(args[0], axis=v.attr("axis"), keepdims=v.attr("keepdims"))
    kw = {"axis": v.attr("axes"), "keepdims": v.attr("keepdims")}
    if v.op in ("var", "std"):
        kw["ddof"] = v.attr("ddof")
    if v.op in ("sum", "prod", "mean", "var", "std"):
        kw["dtype"] = v.dtype  # the graph's (NumPy's default, or the code's dtype=)
    return fn(args[0], **kw)


def _index(v: ir.Value, args: list) -> tuple:
    """v's index as a Python key, its dynamic offsets read from args (Note [dynamic
    offsets], ir.py)."""
    n = ir.offset_args(v)
    offsets = {k: int(args[k]) for k in range(n, len(args))}
    return index_to_python(ir.resolve_index(v.attr("index"), offsets) if offsets
                           else v.attr("index"))


def _setitem(v: ir.Value, args: list) -> np.ndarray:
    out = np.array(args[0], copy=True)
    out[_index(v, args)] = args[1]
    return out


_STRUCTURAL: dict[str, Callable] = {
    "input": None,  # read from the call's arguments by the loop
    "const": lambda v, args: np.asarray(v.attr("value"), dtype=v.dtype),
    "astype": lambda v, args: np.asarray(args[0]).astype(v.dtype),
    "where": lambda v, args: np.where(*args),
    "clip": lambda v, args: np.clip(*args),
    "matmul": lambda v, args: np.matmul(*args),
    "full": lambda v, args: np.full(v.shape, v.attr("value"), dtype=v.dtype),
    "setitem": _setitem,
    "loop": None,  # run by _executor with its body (Note [loop nodes])
    "loop_out": None,
}


def apply_view(op: str, attrs: dict, a: np.ndarray) -> np.ndarray:
    """A view op on a real array (also rebuilds views of arguments for results)."""
    if op == "reshape":
        return np.reshape(a, attrs["shape"])
    if op == "transpose":
        return np.transpose(a, attrs["axes"])
    if op == "broadcast_to":
        return np.broadcast_to(a, attrs["shape"])
    if op == "expand_dims":
        return np.expand_dims(a, attrs["axis"])
    if op == "squeeze":
        return np.squeeze(a, attrs["axis"])
    if op == "getitem":
        return a[index_to_python(attrs["index"])]
    raise InternalError(f"dynexpr: unknown view op {op!r}")


def _evaluator(v: ir.Value) -> Callable:
    if v.op in _STRUCTURAL:
        return _STRUCTURAL[v.op]
    if v.op in ir.REDUCTIONS:
        return _reduction
    if v.op == "getitem" and len(v.args) > 1:
        return lambda v, args: np.asarray(args[0])[_index(v, args)]
    if v.op in ir.VIEWS:
        attrs = dict(v.attrs)
        return lambda v, args: apply_view(v.op, attrs, np.asarray(args[0]))
    if hasattr(np, v.op) and isinstance(getattr(np, v.op), np.ufunc):
        return _ufunc(v.op)
    if v.op in ops.FUNCTIONS:  # a manifest op with a NumPy reference only
        fn = ops.FUNCTIONS[v.op]
        return lambda v, args: fn(*args)
    raise InternalError(f"dynexpr: the eager backend has no rule for op {v.op!r}")


def compile_graph(
    graph: ir.Graph, example_inputs: Sequence[Any] | None = None, **_: Any
) -> Callable:
    execute = _executor(graph)
    out_ids = [o.id for o in graph.outputs]
    mutations = [(i, v.id) for i, v in graph.mutations]
    n_inputs = len(graph.inputs)

    def run(*inputs: np.ndarray) -> tuple:
        if len(inputs) != n_inputs:
            raise TypeError(f"dynexpr: this graph takes {n_inputs} inputs, got {len(inputs)}")
        # NumPy's error state applies op by op, as it would have in the plain function,
        # with the reports naming the caller's line (Note [floating-point errors]).
        with fperr.collecting() as (state, sink):
            env = execute(inputs, state, sink)
        outs = tuple(_fresh(env[i], inputs) for i in out_ids)
        finals = [(i, _fresh(env[vid], inputs)) for i, vid in mutations]
        for i, value in finals:
            np.copyto(inputs[i], value)
        return outs

    return run


def _executor(graph: ir.Graph) -> Callable:
    """execute(inputs, state, sink) -> env: every value of `graph` by id, computed in one
    error-state scope (a loop body runs inside its loop's, Note [loop nodes])."""
    plan = [(v, _evaluator(v), tuple(a.id for a in v.args)) for v in graph.values]
    # The names NumPy's messages use ("divide" for true_divide, "cast" for astype).
    names = {v.id: "cast" if v.op == "astype" else
             getattr(getattr(np, v.op, None), "__name__", v.op) for v in graph.values}
    bodies = {v.id: _body_runner(v) for v in graph.values if v.op == "loop"}
    quiet = graph.quiet  # Note [errstate inside captured code]
    dynamic = any(isinstance(d, str) for v in graph.values for d in v.shape)
    affine = {d: ir.parse_affine_extent(d) for v in graph.values for d in v.shape
              if ir.parse_affine_extent(d) is not None}

    def execute(inputs: Sequence[np.ndarray], state, sink) -> dict:
        env: dict[int, Any] = {}
        finals: dict[int, list] = {}  # loop id -> its carried arrays' final values
        sizes: dict[str, int] = {}  # dynamic extents, bound by the first value that has them
        if affine:  # a loop body's extents that move with i (Note [dynamic extents], ir.py)
            sizes.update({d: max(0, mul * int(inputs[k]) + add)
                          for d, (k, mul, add) in affine.items()})
        for v, fn, arg_ids in plan:
            if v.op == "input":
                r = inputs[v.attr("index")]
            elif dynamic and v.op == "full":
                r = np.full(tuple(sizes[d] if isinstance(d, str) else d for d in v.shape),
                            v.attr("value"), dtype=v.dtype)
            elif affine and v.op in ("reshape", "broadcast_to"):  # its shape attr is v.shape
                shape = tuple(sizes[d] if isinstance(d, str) else d for d in v.shape)
                r = (np.reshape if v.op == "reshape" else np.broadcast_to)(env[arg_ids[0]], shape)
            elif v.op == "loop":
                r, finals[v.id] = bodies[v.id]([env[i] for i in arg_ids], state, sink)
            elif v.op == "loop_out":
                r = finals[v.args[0].id][v.attr("index")]
            else:
                r = np.asarray(fn(v, [env[i] for i in arg_ids]))
                if sink is not None and sink.bits:
                    bits, sink.bits = sink.bits & ~quiet, 0
                    fperr.report(bits, names[v.id], state)
            if dynamic and r.ndim == v.ndim:
                for d, got in zip(v.shape, r.shape):
                    if isinstance(d, str):
                        sizes.setdefault(d, got)
                want = tuple(sizes[d] if isinstance(d, str) else d for d in v.shape)
            else:
                want = v.shape
            if r.dtype != np.dtype(v.dtype) or r.shape != want:
                raise InternalError(
                    f"dynexpr: the graph says %{v.id} = {v.op} is {v.dtype}{list(v.shape)}, "
                    f"NumPy computed {r.dtype}{list(r.shape)}; this is a dynexpr bug, please "
                    f"report it with the graph:\n{graph.canonical()}"
                )
            env[v.id] = r
        return env

    return execute


def _body_runner(v: ir.Value) -> Callable:
    """run(args, state, sink) -> (trip count, final carried arrays) for loop node v."""
    body = v.attr("body").graph
    execute = _executor(body)
    start, step, n = v.attr("start"), v.attr("step"), v.attr("carried")
    out_ids = [o.id for o in body.outputs]

    def run(args: list, state, sink) -> tuple:
        stop, carried, invariants = args[0], list(args[1:1 + n]), list(args[1 + n:])
        first = start  # ("dyn", k, mul, add): mul * args[k] + add (Note [loop nodes])
        if isinstance(start, tuple):
            first = start[2] * int(args[start[1]]) + start[3]
        steps = range(first, int(stop), step)
        for i in steps:
            env = execute([np.asarray(i, dtype=np.int64), *carried, *invariants], state, sink)
            # Copies where an exit value is a view of (or is) an entry: the next
            # iteration's entries must not change under it.
            carried = [_fresh(env[o], carried) for o in out_ids]
        # With no iteration the results are the inits themselves: eager values are never
        # written in place, and outputs and mutations are copied out by _fresh.
        return np.asarray(len(steps), dtype=np.int64), carried

    return run


def _fresh(a: np.ndarray, inputs: Sequence[np.ndarray]) -> np.ndarray:
    if a.base is None and not any(a is x for x in inputs):
        return a
    if any(np.may_share_memory(a, x) for x in inputs) or not a.flags.writeable:
        return np.array(a, copy=True)
    return a
