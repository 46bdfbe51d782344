"""Which NumPy functions and ndarray methods the translator captures, and what each
becomes (np_ops.py, np_views.py); arguments bind as np_args.py says."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import manifest, ops
from . import np_compose, np_join, np_linalg, np_ops, np_views, registry
from .arrays import ArrayVar, fresh
from .errors import graph_break
from .infer import ask, example
from .np_args import NOVALUE, REQUIRED, bind, const_arg, entry
from .operators import const_of
from .variables import ListVar, PyVar, ScalarInputVar, TupleVar, Var

# --- reductions --------------------------------------------------------------------------

_RED_PARAMS = {
    "sum": ("axis", "dtype", "out", "keepdims", "initial", "where"),
    "mean": ("axis", "dtype", "out", "keepdims", "where"),
    "max": ("axis", "out", "keepdims", "initial", "where"),
    "any": ("axis", "out", "keepdims", "where"),
    "var": ("axis", "dtype", "out", "ddof", "keepdims", "where", "mean", "correction"),
    "argmax": ("axis", "out", "keepdims"),
}
_RED_PARAMS.update(
    prod=_RED_PARAMS["sum"],
    min=_RED_PARAMS["max"],
    all=_RED_PARAMS["any"],
    std=_RED_PARAMS["var"],
    argmin=_RED_PARAMS["argmax"],
)
_RED_DEFAULTS = {
    "axis": None,
    "dtype": None,
    "keepdims": False,
    "ddof": 0,
    "out": None,
    "where": True,
    "initial": NOVALUE,
    "mean": NOVALUE,
    "correction": NOVALUE,
}


def _reduction(name: str) -> tuple[Callable, Callable]:
    spec = tuple((p, _RED_DEFAULTS[p]) for p in _RED_PARAMS[name])

    def body(ctx, x: Var, d: dict) -> Var:
        return np_ops.reduce(
            ctx,
            name,
            x,
            axis=const_arg(d, "axis"),
            keepdims=bool(const_arg(d, "keepdims")),
            dtype=const_arg(d, "dtype") if "dtype" in d else None,
            ddof=const_arg(d, "ddof") if "ddof" in d else 0,
        )

    return entry(name, spec, body)


# --- elementwise ---------------------------------------------------------------------------


def _reference_handler(name: str, fn: Callable) -> Callable:
    """dynexpr.ops.<name>: one node of the manifest op `name` (np_ops.reference_op)."""
    params = manifest.OPS[name]["params"]
    spec = tuple((p, REQUIRED) for p in params)

    def handler(tx, args: list, kwargs: dict) -> Var:
        d = bind(f"dynexpr.ops.{name}", args, kwargs, spec)
        return np_ops.reference_op(tx.ctx, name, fn, [d[p] for p in params])

    return handler


def _ufunc_handler(uf: np.ufunc) -> Callable:
    spec = tuple((f"x{i}", REQUIRED) for i in range(uf.nin)) + (
        ("out_", None),  # bound by hand below: out= may be an array
        ("where", True),
        ("casting", "same_kind"),
        ("order", "K"),
        ("dtype", None),
        ("subok", True),
        ("signature", None),
    )

    def handler(tx, args: list, kwargs: dict) -> Var:
        kwargs = dict(kwargs)
        out = kwargs.pop("out", args[uf.nin] if len(args) > uf.nin else PyVar(None))
        args = args[: uf.nin] + args[uf.nin + 1 :]
        d = bind(f"np.{uf.__name__}", args, kwargs, spec)
        if const_arg(d, "dtype") is not None or const_arg(d, "signature") is not None:
            graph_break(f"np.{uf.__name__} with dtype=/signature= is not supported by dynexpr")
        operands = [d[f"x{i}"] for i in range(uf.nin)]
        if isinstance(out, TupleVar) and len(out.items) == 1:
            out = out.items[0]
        if isinstance(out, ArrayVar) and uf is not np.matmul:
            return np_views.ufunc_into(tx.ctx, uf, operands, out)
        if not (isinstance(out, PyVar) and out.value is None):
            graph_break(f"np.{uf.__name__}(..., out={out.describe()}) is not supported")
        if uf is np.positive:
            return np_ops.positive(tx.ctx, operands[0])
        if uf is np.matmul:
            return np_linalg.matmul(tx.ctx, *operands)
        return np_ops.ufunc(tx.ctx, uf, operands)

    return handler


def _where(tx, args, kwargs):
    if len(args) + len(kwargs) == 1:
        graph_break("np.where(condition) with one argument (nonzero) is not supported")
    d = bind("np.where", args, kwargs, (("condition", REQUIRED), ("x", REQUIRED), ("y", REQUIRED)))
    return np_ops.where(tx.ctx, d["condition"], d["x"], d["y"])


def _unset(v: Var) -> bool:
    return isinstance(v, PyVar) and v.value is NOVALUE


def _clip_body(ctx, x, d):
    lo = d["min"] if _unset(d["a_min"]) else d["a_min"]
    hi = d["max"] if _unset(d["a_max"]) else d["a_max"]
    none = PyVar(None)
    return np_ops.clip(ctx, x, none if _unset(lo) else lo, none if _unset(hi) else hi)


def _round_body(ctx, x, d):
    decimals = const_arg(d, "decimals")
    if isinstance(x, PyVar):
        return np_ops.fold(np.round, x.value, decimals)
    if type(decimals) is not int and not isinstance(decimals, np.integer):
        graph_break(f"np.round(decimals={decimals!r}): NumPy takes an int here")
    if decimals != 0 and isinstance(x, ArrayVar):
        return np_compose.round_decimals(ctx, x, int(decimals))
    if np.dtype(x.dtype).kind == "f":
        return np_ops.ufunc(ctx, np.rint, [x])
    return np_ops.copy(ctx, x, x.kind)


# --- shapes, views, copies -------------------------------------------------------------------


def _varargs_shape(args: list) -> Any:
    """`x.reshape(2, 3)` and `x.reshape((2, 3))` alike."""
    if len(args) == 1:
        return const_of(args[0], "a shape")
    return tuple(const_of(a, "a shape") for a in args)


def _reshape_method(tx, x, args, kwargs):
    kwargs = dict(kwargs)
    shape = const_of(kwargs.pop("shape"), "shape=") if "shape" in kwargs else _varargs_shape(args)
    d = bind("ndarray.reshape", [], kwargs, (("order", "C"), ("copy", None)))
    _check_reshape(d)
    return np_views.reshape(tx.ctx, x, shape)


def _check_reshape(d: dict) -> None:
    if const_arg(d, "order") not in ("C", None):
        graph_break("reshape with order other than 'C' is not supported by dynexpr")
    if const_arg(d, "copy") is not None:
        graph_break("reshape(copy=...) is not supported by dynexpr")


def _np_reshape(tx, args, kwargs):
    d = bind(
        "np.reshape",
        args,
        kwargs,
        (("a", REQUIRED), ("shape", None), ("order", "C"), ("newshape", None), ("copy", None)),
    )
    _check_reshape(d)
    shape = const_arg(d, "shape") if const_arg(d, "shape") is not None else const_arg(d, "newshape")
    return np_views.reshape(tx.ctx, d["a"], shape)


def _transpose_method(tx, x, args, kwargs):
    if kwargs:
        graph_break("ndarray.transpose takes no keyword arguments (TypeError)")
    return np_views.transpose(tx.ctx, x, _varargs_shape(args) if args else None)


def _like(fill: Any, empty: bool = False) -> Callable:
    def body(ctx, x, d):
        shape, dtype = const_arg(d, "shape"), const_arg(d, "dtype")
        value = fill if fill is not None else const_arg(d, "fill_value")
        if isinstance(x, ArrayVar):
            proto_shape, proto_dtype = x.shape, x.dtype
        else:
            proto = np.asarray(const_of(x, "the prototype"))
            proto_shape, proto_dtype = proto.shape, proto.dtype
        return np_ops.full(
            ctx,
            proto_shape if shape is None else shape,
            value,
            proto_dtype if dtype is None else dtype,
            empty=empty,
        )

    return body


def _creator(fill: Any, empty: bool = False) -> Callable:
    spec = (
        (("shape", REQUIRED),)
        + ((("fill_value", REQUIRED),) if fill is None else ())
        + (
            ("dtype", None if fill is None else float),
            ("order", "C"),
            ("like", None),
            ("device", None),
        )
    )

    def handler(tx, args, kwargs):
        d = bind("np.full" if fill is None else "np.zeros", args, kwargs, spec)
        value = const_arg(d, "fill_value") if fill is None else fill
        return np_ops.full(tx.ctx, const_arg(d, "shape"), value, const_arg(d, "dtype"),
                           empty=empty)

    return handler


def _eye(tx, args, kwargs):
    d = bind("np.eye", args, kwargs, (("N", REQUIRED), ("M", None), ("k", 0), ("dtype", float),
                                      ("order", "C"), ("device", None), ("like", None)))
    return np_views.eye(tx.ctx, const_arg(d, "N"), const_arg(d, "M"), const_arg(d, "k"),
                        const_arg(d, "dtype"), const_arg(d, "order"))


def _identity(tx, args, kwargs):
    d = bind("np.identity", args, kwargs, (("n", REQUIRED), ("dtype", None), ("like", None)))
    n = const_arg(d, "n")
    return np_views.eye(tx.ctx, n, n, 0, const_arg(d, "dtype"), "C")


def _asarray(copy_default: Any) -> Callable:
    spec = (
        ("a", REQUIRED),
        ("dtype", None),
        ("order", None),
        ("copy", copy_default),
        ("ndmin", 0),
        ("subok", False),
        ("like", None),
        ("device", None),
    )

    def handler(tx, args, kwargs):
        d = bind("np.asarray", args, kwargs, spec)
        x, dtype, copy_ = d["a"], const_arg(d, "dtype"), const_arg(d, "copy")
        if isinstance(x, ArrayVar):
            if dtype is not None:
                # A NumPy scalar in gives a 0-d array out, so it is always a new array then.
                out = np_ops.astype(tx.ctx, x, dtype, copy_=copy_ is True or x.is_scalar)
                out.kind = "ndarray"
                return out
            return np_ops.copy(tx.ctx, x) if (x.is_scalar or copy_) else x
        if np_ops.is_numeric_const(x):
            return np_ops.full(tx.ctx, (), x.value, dtype)
        if isinstance(x, (ListVar, TupleVar)) and const_arg(d, "ndmin") == 0:
            return _from_items(tx.ctx, x.items, dtype, const_arg(d, "order"))
        graph_break(
            "np.asarray/np.array of Python data (nested sequences, or items that are not "
            "arrays of one shape or numbers) is not captured; build the array outside the "
            "function and pass it in"
        )

    return handler


def _from_items(ctx, items: list, dtype: Any, order: Any) -> Var:
    """np.array([a, b, ...]) of NumPy scalars, 0-d arrays, numbers or arrays of one shape
    (an ODE's right-hand side `np.array([v, -np.sin(x)])`, a stack of rows): a new array
    of len(items) + that shape, each item stored into its row with NumPy's casts. The
    dtype is NumPy's own answer for items of those dtypes and kinds."""
    shapes = {v.shape if isinstance(v, ArrayVar) else () for v in items}
    if len(shapes) > 1 or any(not (isinstance(v, ArrayVar) or np_ops.is_numeric_const(v))
                              for v in items):
        graph_break("np.array of a list whose items are not all arrays of one shape or "
                    "numbers is not captured; build it outside the function and pass it in")
    shape = shapes.pop() if shapes else ()
    if any(type(e) is not int for e in shape):
        graph_break("np.array of a list of arrays with dynamic extents is not captured")
    if len(shape) and order not in (None, "K", "A", "C"):
        graph_break(f"np.array(..., order={order!r}) of a list of arrays is not captured")
    sample = ask(np.array, [example(v) for v in items], dtype)
    out = np_ops.full(ctx, (len(items),) + shape, 0, sample.dtype, empty=True)
    for i, v in enumerate(items):
        if isinstance(v, ScalarInputVar):  # a Python number argument, read at call time
            v = fresh(ctx.graph, np_ops.operand(ctx, v, out.dtype), "scalar")
        np_views.setitem(ctx, out, (i,), v)
    return out


def _scalar_type(t: type) -> Callable:
    def handler(tx, args, kwargs):
        if kwargs or len(args) != 1 or not isinstance(args[0], ArrayVar):
            return np_ops.fold(
                t,
                *[const_of(a, "an argument") for a in args],
                **{k: const_of(v, k) for k, v in kwargs.items()},
            )
        x = args[0]
        if x.ndim and x.kind == "ndarray" and np.dtype(x.dtype) == np.dtype(t):
            return x  # np.int32(int32_array) is that array itself, not a copy
        out = np_ops.astype(tx.ctx, x, t)
        out.kind = "scalar" if x.ndim == 0 else "ndarray"  # np.float32(0-d array) is a scalar
        return out

    return handler


def _fold_all(fn: Callable) -> Callable:
    def handler(tx, args, kwargs):
        vals = [
            np.dtype(a.dtype) if isinstance(a, ArrayVar) else const_of(a, "an argument")
            for a in args
        ]
        return np_ops.fold(fn, *vals, **{k: const_of(v, k) for k, v in kwargs.items()})

    return handler


def _isscalar(tx, args, kwargs):
    (x,) = args
    if isinstance(x, ArrayVar):
        return PyVar(x.is_scalar)
    return np_ops.fold(np.isscalar, const_of(x, "an argument"))


def _facts(fact: Callable) -> Callable:
    def handler(tx, args, kwargs):
        x = args[0] if args else kwargs.get("a")
        if isinstance(x, ArrayVar):
            if fact is not np.ndim:
                tx.ctx.session.check_static(x.shape, f"np.{fact.__name__}() read by Python")
            return PyVar(fact(np.empty(x.shape, np.dtype([]))))
        return np_ops.fold(fact, const_of(x, "an argument"))

    return handler


# Note [errstate inside captured code]
# A captured graph reports its floating-point errors as the caller's np.errstate says
# (Note [floating-point errors] in bridge/native/kernel.c). A `with np.errstate(...)` block in
# the captured code changes that for the ops inside the block only, but a fused kernel
# cannot tell which op raised a flag: so the kinds a block sets to 'ignore' are silenced
# for the whole graph (ir.Graph.quiet). Ops outside the block then miss those reports,
# never report where NumPy would not. 'raise' and 'call' make NumPy react to the data
# and break the graph; 'warn'/'print'/'log' inside a block follow the caller's state.
_FPE_BITS = {"divide": 1, "over": 2, "under": 4, "invalid": 8, "all": 15}


class QuietErrors:
    """What `np.errstate(...)` is inside captured code (Note [errstate inside captured
    code]). `settings` make the real one where plain Python runs the block (resume.py)."""

    def __init__(self, settings: dict) -> None:
        self.settings = settings


def errstate_exit(tx, args, kwargs):
    return PyVar(None)


def _errstate(tx, args, kwargs):
    settings = {k: const_of(v, f"np.errstate's {k}=") for k, v in kwargs.items()}
    if args or "call" in settings or any(v in ("raise", "call") for v in settings.values()):
        graph_break(
            "np.errstate(...='raise'/'call') makes NumPy react to the data; dynexpr "
            "cannot capture it"
        )
    graph = tx.ctx.graph.graph
    for kind, mode in settings.items():
        if mode == "ignore":
            graph.quiet |= _FPE_BITS.get(kind, 0)
    return PyVar(QuietErrors(settings))


def _ravel_body(ctx, x, d):
    if const_arg(d, "order") not in ("C", None):
        graph_break("ravel with order other than 'C' is not supported by dynexpr")
    return np_views.ravel(ctx, x)


def _dot_body(ctx, x, d):
    return np_linalg.dot(ctx, x, d["b"])


def _fill_body(ctx, x, d):
    np_views.setitem(ctx, x, Ellipsis, d["value"])
    return PyVar(None)


def _diff_body(ctx, x, d):
    """np.diff(a, n, axis): n times a[..., 1:] - a[..., :-1] along axis (not_equal for
    bools, as NumPy does), as views and a subtraction that fuse with what follows."""
    if not isinstance(x, ArrayVar):
        graph_break("np.diff of a list or scalar is not supported by dynexpr (convert it "
                    "with np.asarray first)")
    for name in ("prepend", "append"):
        if const_arg(d, name) is not NOVALUE:
            graph_break(f"np.diff({name}=...) is not supported by dynexpr")
    n, axis = const_arg(d, "n"), const_arg(d, "axis")
    if type(n) is not int or n < 0:
        graph_break(f"np.diff(n={n!r}): NumPy takes a non-negative int here")
    if x.ndim == 0 or type(axis) is not int or not -x.ndim <= axis < x.ndim:
        graph_break(f"np.diff(axis={axis!r}) of a {x.ndim}-d array is not valid NumPy")
    if n == 0:
        return x
    extent = x.shape[axis]
    if not isinstance(extent, int):  # slicing specialises the axis; never n steps blind
        graph_break("np.diff along an axis of dynamic length is not supported by dynexpr")
    n = min(n, extent)  # the axis is empty after `extent` steps, and stays so
    sub = np.not_equal if x.dtype == "bool" else np.subtract
    lead = (slice(None),) * (axis % x.ndim)
    for _ in range(n):
        x = np_ops.ufunc(ctx, sub, [np_views.getitem(ctx, x, lead + (slice(1, None),)),
                                    np_views.getitem(ctx, x, lead + (slice(None, -1),))])
    return x


_LIKE_SPEC = (("dtype", None), ("order", "K"), ("subok", True), ("shape", None), ("device", None))
_SHARED = {  # name: (spec, body) — both np.<name>(a, ...) and a.<name>(...)
    "clip": (
        (
            ("a_min", NOVALUE),
            ("a_max", NOVALUE),
            ("out", None),
            ("min", NOVALUE),
            ("max", NOVALUE),
        ),
        _clip_body,
    ),
    "round": ((("decimals", 0), ("out", None)), _round_body),
    "swapaxes": (
        (("axis1", REQUIRED), ("axis2", REQUIRED)),
        lambda c, x, d: np_views.swapaxes(c, x, const_arg(d, "axis1"), const_arg(d, "axis2")),
    ),
    "squeeze": ((("axis", None),), lambda c, x, d: np_views.squeeze(c, x, const_arg(d, "axis"))),
    "ravel": ((("order", "C"),), lambda c, x, d: _ravel_body(c, x, d)),
    "dot": ((("b", REQUIRED), ("out", None)), _dot_body),
}
_METHOD_ONLY = {
    "astype": (
        (
            ("dtype", REQUIRED),
            ("order", "K"),
            ("casting", "unsafe"),
            ("subok", True),
            ("copy", True),
        ),
        lambda c, x, d: np_ops.astype(c, x, const_arg(d, "dtype"), bool(const_arg(d, "copy"))),
    ),
    "flatten": ((("order", "C"),), lambda c, x, d: np_ops.copy(c, np_views.reshape(c, x, -1))),
    "copy": ((("order", "C"),), lambda c, x, d: np_ops.copy(c, x, x.kind)),
    "fill": ((("value", REQUIRED),), _fill_body),
}
_FUNCTION_ONLY = {
    "transpose": (
        (("axes", None),),
        lambda c, x, d: np_views.transpose(c, x, const_arg(d, "axes")),
    ),
    "expand_dims": (
        (("axis", REQUIRED),),
        lambda c, x, d: np_views.expand_dims(c, x, const_arg(d, "axis")),
    ),
    "broadcast_to": (
        (("shape", REQUIRED), ("subok", False)),
        lambda c, x, d: np_views.broadcast_to(c, x, const_arg(d, "shape")),
    ),
    "copy": ((("order", "K"), ("subok", False)), lambda c, x, d: np_ops.copy(c, x)),
    "zeros_like": (_LIKE_SPEC, _like(0)),
    "ones_like": (_LIKE_SPEC, _like(1)),
    "empty_like": (_LIKE_SPEC, _like(0, empty=True)),
    "full_like": ((("fill_value", REQUIRED),) + _LIKE_SPEC, _like(None)),
    "inner": ((("b", REQUIRED),), lambda c, x, d: np_linalg.inner(c, x, d["b"])),
    "vdot": ((("b", REQUIRED),), lambda c, x, d: np_linalg.vdot(c, x, d["b"])),
    "outer": ((("b", REQUIRED),), lambda c, x, d: np_linalg.outer(c, x, d["b"])),
    "diff": ((("n", 1), ("axis", -1), ("prepend", NOVALUE), ("append", NOVALUE)), _diff_body),
}


def _tables() -> tuple[dict, dict]:
    functions: dict[Any, Callable] = {}
    methods: dict[str, Callable] = {"reshape": _reshape_method, "transpose": _transpose_method}
    for name in _RED_PARAMS:
        functions[getattr(np, name)], methods[name] = _reduction(name)
    functions[np.amax], functions[np.amin] = _reduction("max")[0], _reduction("min")[0]
    for name, (spec, body) in _SHARED.items():
        functions[getattr(np, name)], methods[name] = entry(name, spec, body)
    functions[np.around] = functions[np.round]
    for name, (spec, body) in _METHOD_ONLY.items():
        methods[name] = entry(name, spec, body)[1]
    for name, (spec, body) in _FUNCTION_ONLY.items():
        functions[getattr(np, name)] = entry(name, spec, body)[0]
    functions.update(
        {
            np.where: _where,
            np.reshape: _np_reshape,
            np.errstate: _errstate,
            errstate_exit: errstate_exit,
            np.asarray: _asarray(None),
            np.array: _asarray(True),
            np.zeros: _creator(0),
            np.ones: _creator(1),
            np.empty: _creator(0, empty=True),
            np.full: _creator(None),
            np.eye: _eye,
            np.identity: _identity,
            np.shape: _facts(np.shape),
            np.tensordot: np_linalg.tensordot_call,
            np.einsum: np_linalg.einsum_call,
            np.linalg.norm: np_linalg.norm_call,
            np.ndim: _facts(np.ndim),
            np.size: _facts(np.size),
        }
    )
    functions.update(np_join.handlers())
    functions.update(np_compose.handlers())
    functions[np.isscalar] = _isscalar
    for fn in (
        np.result_type,
        np.promote_types,
        np.dtype,
        np.finfo,
        np.iinfo,
        np.can_cast,
        np.issubdtype,
    ):
        functions[fn] = _fold_all(fn)
    for st in (np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_):
        functions[st] = _scalar_type(st)
    for name, fn in ops.FUNCTIONS.items():
        functions[fn] = _reference_handler(name, fn)
    return functions, methods


FUNCTIONS, ARRAY_METHODS = _tables()
# Methods that hand the data to Python: a graph break with a reason that says so.
DATA_METHODS = (
    "item",
    "tolist",
    "tobytes",
    "nonzero",
    "sort",
    "argsort",
    "cumsum",
    "cumprod",
    "__bool__",
    "__float__",
    "__int__",
    "__index__",
)


@registry.register("numpy_function")
def function_handler(value: Any) -> Callable | None:
    try:
        h = FUNCTIONS.get(value)
    except TypeError:  # unhashable
        return None
    if h is None and isinstance(value, np.ufunc):
        return _ufunc_handler(value)
    return h


@registry.register("array_method")
def call_method(tx, self_var: ArrayVar, name: str, args: list, kwargs: dict) -> Var:
    tx.ctx.session.api.add(f"ndarray.{name}")
    if name in DATA_METHODS:
        graph_break(
            f"ndarray.{name}() hands the array's data to Python; dynexpr cannot capture it"
        )
    handler = ARRAY_METHODS.get(name)
    if handler is None:
        graph_break(f"ndarray.{name} is not supported by dynexpr")
    return handler(tx, self_var, list(args), dict(kwargs))
