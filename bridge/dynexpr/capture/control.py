"""dynexpr.cond inside a capture: a branch on array data that stays in the graph.

`dynexpr.cond(pred, true_fn, false_fn, operands)` is `true_fn(*operands) if pred else
false_fn(*operands)`. Captured with a Python pred (a flag: guarded by value), only the
chosen branch is inlined. With an array pred (0-d), both branches are inlined and every
array they return is selected with `where(pred, t, f)`: pointwise branches fuse into one
kernel with the select, others become their own kernels before it. That computes both
sides, so the branches must be functions of their operands only (as in JAX's lax.cond):
same structure, dtypes and shapes on both sides, and no writes into arrays; otherwise the
call is a graph break with the reason.
"""

from __future__ import annotations

from . import np_ops, registry
from .arrays import ArrayVar
from .calls import call
from .errors import graph_break
from .variables import DictVar, ListVar, PyVar, TupleVar, Var

_PARAMS = ("pred", "true_fn", "false_fn", "operands")


@registry.register("cond")
def cond(tx, args: list, kwargs: dict) -> Var:
    if len(args) > 4 or set(kwargs) - set(_PARAMS[len(args):]):
        graph_break("dynexpr.cond(pred, true_fn, false_fn, operands): unexpected arguments")
    bound = dict(zip(_PARAMS, args), **kwargs)
    if not {"pred", "true_fn", "false_fn"} <= set(bound):
        graph_break("dynexpr.cond needs pred, true_fn and false_fn (TypeError)")
    ops = bound.get("operands", TupleVar([]))
    if not isinstance(ops, (TupleVar, ListVar)):
        graph_break("dynexpr.cond: operands must be a tuple or list")
    items = list(ops.items)
    pred = bound["pred"]
    if isinstance(pred, PyVar):  # known while capturing (and guarded): one branch
        branch = bound["true_fn"] if bool(pred.value) else bound["false_fn"]
        return call(tx, branch, items, {})
    if not isinstance(pred, ArrayVar) or pred.ndim != 0:
        graph_break(
            "dynexpr.cond: pred must be a Python bool or a 0-d array (a reduction such as "
            f"x.sum() > 0), got a {pred.describe()}"
        )
    session = tx.ctx.session
    before = session.writes
    t = call(tx, bound["true_fn"], items, {})
    f = call(tx, bound["false_fn"], items, {})
    if session.writes != before:
        graph_break("dynexpr.cond: a branch writes into an array; both branches run in the "
                    "graph, so they must only return values")
    return _select(tx.ctx, pred, t, f, "result")


def _select(ctx, pred: ArrayVar, t: Var, f: Var, path: str) -> Var:
    if isinstance(t, ArrayVar) and isinstance(f, ArrayVar):
        if (t.dtype, t.shape, t.kind) != (f.dtype, f.shape, f.kind):
            graph_break(
                f"dynexpr.cond: the branches' {path} differ ({t.describe()} and "
                f"{f.describe()}); both must give the same dtype and shape")
        r = np_ops.where(ctx, pred, t, f)
        r.kind = t.kind
        return r
    if isinstance(t, PyVar) and isinstance(f, PyVar):
        if type(t.value) is type(f.value) and t.value == f.value:
            return t
        graph_break(f"dynexpr.cond: the branches' {path} are different Python values "
                    f"({t.value!r} and {f.value!r}); return arrays to select between them")
    if isinstance(t, (TupleVar, ListVar)) and type(t) is type(f) and len(t.items) == len(f.items):
        items = [_select(ctx, pred, a, b, f"{path}[{i}]")
                 for i, (a, b) in enumerate(zip(t.items, f.items))]
        return TupleVar(items) if isinstance(t, TupleVar) else ListVar(items, None)
    if isinstance(t, DictVar) and isinstance(f, DictVar) and list(t.items) == list(f.items):
        return DictVar({k: _select(ctx, pred, t.items[k], f.items[k], f"{path}[{k!r}]")
                        for k in t.items}, None)
    graph_break(f"dynexpr.cond: the branches' {path} differ in kind ({t.describe()} and "
                f"{f.describe()})")
