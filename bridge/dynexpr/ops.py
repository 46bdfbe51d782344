"""dynexpr.ops — the manifest's ops that NumPy has no function for, as functions.

An op entry of include/dynexpr/ops/manifest.py with a NumPy reference
(`python={"numpy": "<expression>"}`) becomes `dynexpr.ops.<name>`: called outside a
captured function it computes the reference with NumPy; inside one it is a node of the
graph, compiled from the op's C++ bodies (and computed by the same reference on the eager
backend). Ops that NumPy has are reached through NumPy itself (np.exp, np.add, ...).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import manifest


def _make(name: str, params: tuple[str, ...], expr: str) -> Callable:
    code = compile(f"lambda {', '.join(params)}: {expr}", f"<dynexpr op {name}>", "eval")
    fn = eval(code, {"np": np})  # noqa: S307 - the manifest's own text
    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = __name__
    fn.__doc__ = f"dynexpr op {name}({', '.join(params)}) = {expr} (NumPy reference)"
    return fn


# name -> function, for every reference op of the manifest.
FUNCTIONS: dict[str, Callable] = {n: _make(n, p, e) for n, (p, e) in manifest.REFERENCE_OPS.items()}
globals().update(FUNCTIONS)


def listing() -> str:
    """One line per op of the manifest: name, kind, arity, rule and how Python reaches it
    (`python -m dynexpr ops`)."""
    lines = []
    for name, o in manifest.OPS.items():
        py = o["python"]
        how = ("np." + name if py == "ufunc" else f"np.{name} (own handler)" if py == "function"
               else f"dynexpr.ops.{name}" if isinstance(py, dict) else "C++ only")
        lines.append(f"{name:<15} {o['kind']:<13} {o['arity']}  {o['rule'] or '-':<18} {how}")
    lines.append(f"{len(manifest.OPS)} ops; dtypes: {', '.join(manifest.DTYPES)}; "
                 f"reductions: {', '.join(manifest.REDUCTIONS)} (from {manifest.PATH})")
    return "\n".join(lines)
