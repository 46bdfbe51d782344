"""Calls: NumPy functions and array methods go to np_table; builtins to pybuiltins;
plain Python functions and methods of user objects are inlined (their bytecode runs
in a new symbolic frame sharing the graph and the guards); anything else breaks. The
handler modules are found through registry.py (Note [handlers are registered])."""

from __future__ import annotations

import inspect
from typing import Any

from ..backends import cuda_arrays
from . import registry
from .arrays import ArrayVar
from .errors import graph_break
from .frame import LazyArg
from .variables import (
    BoundMethodVar,
    CellVar,
    DictVar,
    FunctionVar,
    IteratorVar,
    NestedFunctionVar,
    ObjectVar,
    PyVar,
    TupleVar,
    Var,
)


def call(tx, fn: Var, args: list, kwargs: dict) -> Var:
    if isinstance(fn, (FunctionVar, NestedFunctionVar)):
        return inline(tx, fn, args, kwargs)
    if isinstance(fn, BoundMethodVar):
        if isinstance(fn.func, str):
            slot = "array_method" if isinstance(fn.self_var, ArrayVar) else "container_method"
            return registry.handler(slot)(tx, fn.self_var, fn.func, args, kwargs)
        return call(tx, fn.func, [fn.self_var] + list(args), kwargs)
    if isinstance(fn, PyVar):
        value = fn.value
        if tx.ctx.session.device:  # cupy.exp is np.exp on the device path (cuda_run.py)
            value = cuda_arrays.numpy_equivalent(value) or value
        handler = registry.handler("numpy_function")(value)
        if handler is not None:
            tx.ctx.session.api.add(f"np.{getattr(value, '__name__', type(value).__name__)}")
            return handler(tx, args, kwargs)
        handler = registry.handler("builtin_function")(value)
        if handler is not None:
            return handler(tx, args, kwargs)
        return registry.handler("known_call")(tx, value, args, kwargs)
    if isinstance(fn, ObjectVar):
        r = call_method_of_object(tx, fn, "__call__", args, kwargs)
        if r is not None:
            return r
    graph_break(f"calling a {fn.describe()} is not supported")


def call_method_of_object(
    tx, obj: ObjectVar, name: str, args: list, kwargs: dict | None = None
) -> Var | None:
    """Inline type(obj).<name> when it is a plain Python function; None otherwise."""
    static = inspect.getattr_static(type(obj.value), name, None)
    if not isinstance(static, type(call)):
        return None
    fn = tx.ctx.wrap(static, ("attr", ("type", obj.source), name))
    return inline(tx, fn, [obj] + list(args), kwargs or {})


# --- inlining ----------------------------------------------------------------------------


def inline(tx, fn: Var, args: list, kwargs: dict) -> Var:
    tx.ctx.session.inlined += 1

    if tx.depth + 1 > tx.ctx.budget.inline_depth:
        graph_break(f"calls nest deeper than {tx.ctx.budget.inline_depth} (recursion?)")
    if isinstance(fn, FunctionVar):
        f = fn.fn
        if getattr(f, "__dynexpr_disable__", False):
            graph_break(f"{f.__qualname__} is marked dynexpr.disable")
        if getattr(f, "__dynexpr_cond__", False):
            return registry.handler("cond")(tx, args, kwargs)
        code = f.__code__
        defaults = [
            tx.ctx.wrap(d, ("item", ("attr", fn.source, "__defaults__"), i))
            for i, d in enumerate(f.__defaults__ or ())
        ]
        kwdefaults = {
            k: tx.ctx.wrap(v, ("item", ("attr", fn.source, "__kwdefaults__"), k))
            for k, v in (f.__kwdefaults__ or {}).items()
        }
        cells = {}
        for i, name in enumerate(code.co_freevars):
            cell_src = ("attr", ("item", ("attr", fn.source, "__closure__"), i), "cell_contents")
            cells[name] = _real_cell(tx.ctx, f.__closure__[i], cell_src, name)
        same_module = f.__globals__ is tx.ctx.fn.__globals__
        frame_globals, globals_src = f.__globals__, (None if same_module else fn.source)
    else:
        code = fn.code
        defaults, kwdefaults = list(fn.defaults), fn.kwdefaults
        cells = {name: c for name, c in zip(code.co_freevars, fn.closure)}
        frame_globals, globals_src = fn.globals, fn.globals_src
    try:
        locals_ = bind(code, defaults, kwdefaults, list(args), dict(kwargs), TupleVar, DictVar)
    except BindError as e:
        graph_break(f"TypeError: {e}")
    ctx = tx.ctx
    active, budget, graph = ctx.inlining, ctx.budget, ctx.graph
    recursive = code in active or code is ctx.fn.__code__
    work = graph.requests
    # The inlined frame runs the same opcode table as its caller (versions.Translator).
    frame = type(tx)(ctx, code, locals_, cells, frame_globals, globals_src, tx.depth + 1)
    active[code] = active.get(code, 0) + 1
    try:
        result = frame.run()
    finally:
        active[code] -= 1
        if not active[code]:
            del active[code]
    if recursive and graph.requests != work:
        budget.used_recursive_calls += 1
        if budget.used_recursive_calls > budget.recursive_calls:
            graph_break(f"recursion: {code.co_qualname} was inlined into itself with array "
                        f"work more than {budget.recursive_calls} times (dynexpr unrolls "
                        "every call)")
    if frame.yields is not None:
        return IteratorVar(frame.yields, generator=code.co_qualname)
    return result


def real_cells(ctx, fn: Any) -> dict:
    """The captured function's closure cells, each read (and guarded) on first use."""
    code = fn.__code__
    return {
        name: _real_cell(ctx, cell, ("closure", name), name)
        for name, cell in zip(code.co_freevars, fn.__closure__ or ())
    }


def _real_cell(ctx, cell, source: tuple, name: str) -> CellVar:
    def load() -> Var:
        try:
            contents = cell.cell_contents
        except ValueError:
            graph_break(f"free variable {name!r} is empty (NameError)")
        return ctx.wrap(contents, source)

    return CellVar(loader=load, name=name)


def bind(
    code, defaults: list, kwdefaults: dict, args: list, kwargs: dict, make_tuple, make_dict
) -> dict:
    """Parameters of `code` bound to args/kwargs as CPython binds them (name -> value).
    Works on real values (for the captured function) and on Vars (when inlining)."""
    n_pos = code.co_argcount
    n_kwonly = code.co_kwonlyargcount
    names = code.co_varnames
    pos_names = names[:n_pos]
    kwonly_names = names[n_pos : n_pos + n_kwonly]
    has_varargs = bool(code.co_flags & inspect.CO_VARARGS)
    has_varkw = bool(code.co_flags & inspect.CO_VARKEYWORDS)
    posonly = code.co_posonlyargcount
    out: dict[str, Any] = {}
    if len(args) > n_pos and not has_varargs:
        _bind_error(code, f"takes {n_pos} positional arguments but {len(args)} were given")
    for name, v in zip(pos_names, args):
        out[name] = v
    extra_kw = {}
    for k, v in kwargs.items():
        if k in pos_names[posonly:] or k in kwonly_names:
            if k in out:
                _bind_error(code, f"got multiple values for argument {k!r}")
            out[k] = v
        elif has_varkw:
            extra_kw[k] = v
        else:
            _bind_error(code, f"got an unexpected keyword argument {k!r}")
    first_default = n_pos - len(defaults)
    for i, name in enumerate(pos_names):
        if name not in out:
            if i < first_default:
                _bind_error(code, f"missing required argument {name!r}")
            out[name] = defaults[i - first_default]
    for name in kwonly_names:
        if name not in out:
            if name not in kwdefaults:
                _bind_error(code, f"missing required keyword-only argument {name!r}")
            out[name] = kwdefaults[name]
    i = n_pos + n_kwonly
    if has_varargs:
        out[names[i]] = make_tuple(args[n_pos:])
        i += 1
    if has_varkw:
        out[names[i]] = make_dict(extra_kw)
    return out


def _bind_error(code, what: str) -> None:
    raise BindError(f"{code.co_qualname}() {what}")


class BindError(TypeError):
    """Arguments do not fit the signature (the plain call raises the real TypeError)."""


def top_level_locals(fn, bound: list) -> dict:
    """Locals of the captured function's frame: each argument wrapped on first use."""
    code = fn.__code__
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return {code.co_varnames[i]: LazyArg(bound[i], ("arg", i)) for i in range(n)}


def bind_call(fn, args: tuple, kwargs: dict) -> list:
    """The bound arguments of a call of the captured function, in co_varnames order:
    what guard sources ("arg", i) index. Raises BindError for a call that does not fit."""
    code = fn.__code__
    if (
        not kwargs
        and len(args) == code.co_argcount
        and not (
            code.co_kwonlyargcount or code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
        )
    ):
        return list(args)
    d = bind(
        code, list(fn.__defaults__ or ()), fn.__kwdefaults__ or {}, list(args), kwargs, tuple, dict
    )
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return [d[code.co_varnames[i]] for i in range(n)]
