"""dynexpr.manifest — the op and dtype manifest (include/dynexpr/ops/manifest.py, the one
place an op or a dtype is listed) as the tables the Python side uses.

It is read from the headers the package compiles units against (toolchain.source_dirs():
the installed `_include/`, or the checkout's include/), so the ops Python captures are
exactly the ops those headers define. DYNEXPR_SOURCE_ROOT points both at another tree (a
test's copy of the manifest with an extra op); nothing else needs it.
"""

from __future__ import annotations

import importlib.util

from .toolchain import source_dirs

PATH = source_dirs()[0] / "dynexpr" / "ops" / "manifest.py"


def _load():
    # A module spec rather than runpy: the compiled manifest is cached in __pycache__.
    spec = importlib.util.spec_from_file_location("dynexpr._ops_manifest", PATH)
    if spec is None or spec.loader is None:  # pragma: no cover - a broken install
        raise ImportError(f"dynexpr: cannot read the op manifest {PATH}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_M = _load()

# dtypes, in ABI code order (kernels/abi.h)
DTYPES: tuple[str, ...] = tuple(d[0] for d in _M.DTYPES)
CTYPE: dict[str, str] = {d[0]: d[1] for d in _M.DTYPES}
CODES: dict[str, int] = {d[0]: d[2] for d in _M.DTYPES}

REDUCTIONS: tuple[str, ...] = tuple(_M.REDUCTIONS)
OPS: dict[str, dict] = {o["name"]: o for o in _M.OPS}
# Ops reached through their NumPy ufunc (np.<name>), in manifest order.
UFUNC_OPS: tuple[str, ...] = tuple(n for n, o in OPS.items() if o["python"] == "ufunc")
# Ops with a NumPy function and a handler of their own (clip, where).
FUNCTION_OPS: tuple[str, ...] = tuple(n for n, o in OPS.items() if o["python"] == "function")
# Ops without a NumPy function: name -> (parameter names, NumPy reference expression);
# dynexpr.ops makes each a function.
REFERENCE_OPS: dict[str, tuple[tuple[str, ...], str]] = {
    n: (tuple(o["params"]), o["python"]["numpy"])
    for n, o in OPS.items() if isinstance(o["python"], dict)}
# Python's binary operator symbol -> op name ("//" -> "floor_divide").
PY_OPERATORS: dict[str, str] = {o["py_operator"]: n for n, o in OPS.items() if o["py_operator"]}
