"""dynexpr.export — a captured function as standalone C++ (no Python at run time), in the
spirit of torch.export + AOTInductor:

    ex = dynexpr.export(fn, x, w, dynamic_shapes={"x": {0: dynexpr.Dim("n", max=1 << 20)}})
    ex.add(x.astype(np.float64), w)     # another specialisation, if wanted
    ex.save("out/")                     # out/fn.hpp, out/libfn.so, out/libdynexpr_rt.so

Each specialisation is the example call translated whole (a graph break is an error that
lists every break, as `dynexpr.explain` does), scheduled and generated as the cpu
backend's unit would be. `save` compiles all of them into one shared library with a C++
entry point `fn::run` that picks the first specialisation whose guards hold, checked in
C++ (Note [guards in C++]); the API types are include/dynexpr/exported.hpp's.

Note [guards in C++]
A capture's guards fall in three groups. Those on the arguments become C++ predicates
over dynexpr::exported::Arg: an array's dtype, rank, extents (or a dynamic extent's
range), C-contiguity, two arrays' aliasing (same / overlapping bytes / disjoint, as
np.may_share_memory's bounds test), equal extents of two arrays, and a number or None by
value and type (Python's 2 and 2.0 differ, so Arg keeps bool, integer and floating
apart). A "strided" layout guard needs no predicate: its unit reads the strides it is
given, so it runs any layout. Guards on globals and closures (the `np` module, a constant)
have no C++ counterpart: their values are built into the library, and `describe()` lists
them as assumptions. What cannot be said of a C++ argument (an argument that is a list, a
dict, an object) is an ExportError naming it.

Note [constants in an export]
An array the graph reads from a global or a closure (a model's weights) has no Python
object to be read from at run time, so its value at export is built into the library, as
torch.export lifts parameters into the program: the bytes go into the library's read-only
data (the assembler's .incbin, not C++ text, so megabytes of weights compile in no time),
describe() lists it as assumed, a guard that it does not alias an argument holds by
construction, and an argument's extent the graph needs equal to the constant's is
checked against the constant's extent. A graph that writes into such an array is refused.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import cxx, manifest, runtime
from ..capture import Unsupported, translate
from ..capture.calls import BindError, bind_call
from ..capture.translate import translate_dynamic
from ..guards import Guard, format_source, resolve
from ..toolchain import run_tool, source_dirs, system_includes
from . import isa

CODES = manifest.CODES  # dtype name -> dx_dtype_code
_NAMES = {c: n for n, c in CODES.items()}
_CTYPE = {"bool": "bool", "uint8": "std::uint8_t", "int32": "std::int32_t",
          "int64": "std::int64_t", "float32": "float", "float64": "double"}
_DXE_DTYPE = {"bool": "bool_", "uint8": "uint8", "int32": "int32", "int64": "int64",
              "float32": "float32", "float64": "float64"}
_KIND = {bool: "boolean", int: "integer", float: "floating", type(None): "none",
         np.ndarray: "array"}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# C++ keywords, and the names the generated library itself declares at namespace scope
_CXX_KEYWORDS = frozenset("""
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t
    char16_t char32_t class compl concept const consteval constexpr constinit const_cast
    continue co_await co_return co_yield decltype default delete do double dynamic_cast else
    enum explicit export extern false float for friend goto if inline int long mutable
    namespace new noexcept not not_eq nullptr operator or or_eq private protected public
    register reinterpret_cast requires return short signed sizeof static static_assert
    static_cast struct switch template this thread_local throw true try typedef typeid
    typename union unsigned using virtual void volatile wchar_t while xor xor_eq
    std dynexpr hwy Eigen dx dxk dxe Args
""".split())  # noqa: SIM905


class ExportError(ValueError):
    """A function, example or option that cannot be exported; the message says why and
    what to change."""


@dataclass(frozen=True)
class Dim:
    """A dynamic dimension for dynexpr.export's dynamic_shapes: any extent in [min, max]
    (max None: no upper bound). Extents 0 and 1 stay specialised, so min is at least 2."""
    name: str
    min: int = 2
    max: int | None = None

    def __post_init__(self) -> None:
        for what, v in (("min", self.min), ("max", self.max)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise TypeError(f"dynexpr.Dim({self.name!r}): {what} must be a non-negative "
                                f"int, got {v!r}")
        if self.max is not None and self.max < max(self.min, 2):
            raise ValueError(f"dynexpr.Dim({self.name!r}): max={self.max} is below "
                             f"min={max(self.min, 2)}")


# ------------------------------------------------------------------- specialisations
@dataclass
class Specialisation:
    """One example call translated for export: C++ checks, kernel inputs and outputs,
    what the call returns, and the unit's source."""
    argnames: tuple[str, ...]
    n_params: int
    required: int  # arguments a C++ call must pass (trailing ones fixed by value may go)
    checks: list[tuple]  # Note [guards in C++]
    assumed: list[str]  # guards on globals and closures, built in
    inputs: list[tuple]  # per kernel input: ("arg", i) | ("scalar", i, dtype name) |
    #                      ("const", k, source text): constants[k], built in
    written: list[bool]
    outputs: list[tuple[str, list]]  # (dtype name, dims: int | (kernel input, axis))
    returns: list[tuple]  # ("out", buffer, copy) | ("input", kernel input, copy) |
    #                       ("arg", i) | ("const", value)
    source: str  # the unit's C++ ("" when the graph computes nothing)
    example: str  # the example call's arguments, as text
    dims: dict = field(default_factory=dict)  # (arg, axis) -> name of a dynamic extent
    constants: list = field(default_factory=list)  # arrays built in (inputs ("const", k))

    def inputs_const_name(self, k: int) -> str:
        return next(src[2] for src in self.inputs if src[0] == "const" and src[1] == k)

    def signature(self) -> str:
        """The arguments this specialisation takes, as text."""
        parts = []
        for i in range(self.n_params):
            parts.append(f"{self.argnames[i]}: {self._arg_text(i)}")
        return ", ".join(parts)

    def _arg_text(self, i: int) -> str:
        kind = next((c[2] for c in self.checks if c[0] == "kind" and c[1] == i), None)
        value = next((c for c in self.checks if c[0] == "value" and c[1] == i), None)
        if value is not None:
            return f"== {value[3]!r}"
        if kind != "array":
            return kind or "any"
        dt = next((c[2] for c in self.checks if c[0] == "dtype" and c[1] == i), "?")
        nd = next((c[2] for c in self.checks if c[0] == "ndim" and c[1] == i), 0)
        ext = []
        for ax in range(nd):
            d = next((c for c in self.checks if c[0] in ("dim", "range") and c[1] == i
                      and c[2] == ax), None)
            if d is None:
                ext.append("?")
            elif d[0] == "dim":
                ext.append(str(d[3]))
            else:
                name = self.dims.get((i, ax), f"{self.argnames[i]}_{ax}")
                hi = "" if d[4] is None else f"..{d[4]}"
                ext.append(f"{name}:{d[3]}{hi}" if hi else f"{name}>={d[3]}")
        layout = "" if any(c[0] == "contiguous" and c[1] == i for c in self.checks) else \
            " any layout"
        return f"{_NAMES[dt]}[{', '.join(ext)}]{layout}"

    def result_text(self) -> str:
        def one(r):
            if r[0] == "out":
                dt, dims = self.outputs[r[1]]
                return f"{_NAMES[dt]}[{', '.join(self._dim_text(d) for d in dims)}]"
            if r[0] == "input":
                src = self.inputs[r[1]]
                if src[0] == "const":
                    return f"{src[2]} (copy)"
                return f"{self.argnames[src[1]]}" + (" (copy)" if r[2] else "")
            if r[0] == "arg":
                return self.argnames[r[1]]
            return repr(r[1])
        return "(" + ", ".join(one(r) for r in self.returns) + ")"

    def _dim_text(self, d) -> str:
        if isinstance(d, int):
            return str(d)
        arg = self.inputs[d[0]][1]
        return self.dims.get((arg, d[1]), f"{self.argnames[arg]}.shape[{d[1]}]")


def _dynamic_marks(fn, bound: list, dynamic_shapes) -> dict[tuple[int, int], Dim]:
    """{(arg position, axis): Dim} from dynamic_shapes: a dict by parameter name, or a
    sequence by position; per array a dict {axis: Dim | (min, max) | True} or a sequence
    per axis (None: static)."""
    if dynamic_shapes is None:
        return {}
    names = fn.__code__.co_varnames[:len(bound)]
    if isinstance(dynamic_shapes, dict):
        unknown = [k for k in dynamic_shapes if k not in names]
        if unknown:
            raise ExportError(f"dynexpr.export: dynamic_shapes names {', '.join(unknown)}, "
                              f"which {fn.__qualname__} has no parameter of; its "
                              f"parameters: {', '.join(names)}")
        per_arg = {names.index(k): v for k, v in dynamic_shapes.items()}
    elif isinstance(dynamic_shapes, (tuple, list)):
        per_arg = dict(enumerate(dynamic_shapes))
    else:
        raise ExportError("dynexpr.export: dynamic_shapes is a dict by parameter name or a "
                          f"sequence by position, got {type(dynamic_shapes).__name__}")
    out: dict[tuple[int, int], Dim] = {}
    for i, spec in per_arg.items():
        if spec is None:
            continue
        if i >= len(bound) or type(bound[i]) is not np.ndarray:
            raise ExportError(f"dynexpr.export: dynamic_shapes gives dimensions for "
                              f"{names[i] if i < len(names) else i}, which is not an array")
        a = bound[i]
        items = spec.items() if isinstance(spec, dict) else enumerate(spec)
        for axis, d in items:
            if d is None or d is False:
                continue
            if not isinstance(axis, int) or not -a.ndim <= axis < a.ndim:
                raise ExportError(f"dynexpr.export: {names[i]} has {a.ndim} dimensions; "
                                  f"dynamic_shapes names axis {axis!r}")
            if d is True:
                d = Dim(f"{names[i]}_{axis % a.ndim}")
            elif isinstance(d, tuple) and len(d) == 2:
                d = Dim(f"{names[i]}_{axis % a.ndim}", d[0] if d[0] is not None else 2, d[1])
            elif not isinstance(d, Dim):
                raise ExportError(f"dynexpr.export: dynamic_shapes[{names[i]!r}][{axis}] is "
                                  f"{d!r}; give a dynexpr.Dim, a (min, max) pair or True")
            n = a.shape[axis]
            lo = max(d.min, 2)
            if n < lo or (d.max is not None and n > d.max):
                raise ExportError(
                    f"dynexpr.export: {names[i]}.shape[{axis % a.ndim}] is {n} in the example, "
                    f"outside its Dim {d.name!r} range [{lo}, {d.max if d.max is not None else 'inf'}]"
                    "; give an example inside the range")
            out[(i, axis % a.ndim)] = d
    return out


def _breaks_text(fn, args, kwargs) -> str:
    from ..explain import explain

    try:
        out = explain(fn, *args, **kwargs)
    except Exception as e:  # noqa: BLE001 (explain failing must not hide the break)
        return f"  (explain failed: {type(e).__name__}: {e})"
    lines = []
    for r in out.break_reasons:
        lines.append("  - " + str(r).replace("\n", "\n    "))
    return "\n".join(lines) or "  (explain found no break on this call)"


def specialise(fn, args: tuple, kwargs: dict, dynamic_shapes=None) -> Specialisation:
    """fn's example call (args, kwargs) translated whole for export."""
    try:
        bound = bind_call(fn, tuple(args), dict(kwargs))
    except BindError as e:
        raise ExportError(f"dynexpr.export: the example does not fit {fn.__qualname__}: "
                          f"{e}") from None
    code = fn.__code__
    if code.co_flags & 0x0C:  # CO_VARARGS | CO_VARKEYWORDS
        raise ExportError(f"dynexpr.export: {fn.__qualname__} takes *args or **kwargs; "
                          "export needs named parameters (wrap it in a function that names "
                          "them)")
    names = code.co_varnames[:len(bound)]
    marks = _dynamic_marks(fn, bound, dynamic_shapes)
    try:
        if marks:
            tr, kept = translate_dynamic(
                fn, bound, lambda src, axis, a: _policy(marks, src, axis),
                run=lambda st: translate(fn, bound, st, False))
            lost = [f"{names[i]}.shape[{ax}]" for (i, ax) in marks
                    if (("arg", i), ax) not in kept]
            if tr is None or lost:
                raise ExportError(
                    f"dynexpr.export: {', '.join(lost) or 'no dimension'} of "
                    f"{fn.__qualname__} cannot be dynamic: the computation depends on its "
                    "value (a branch, a loop count or a reshape uses it). Leave it static "
                    "and export one specialisation per extent (Exported.add), or change "
                    "the function")
        else:
            tr = translate(fn, bound, None, False)
    except Unsupported:
        raise ExportError(
            f"dynexpr.export: {fn.__qualname__} breaks the graph, so it cannot run without "
            f"Python. The breaks (dynexpr.explain):\n{_breaks_text(fn, args, kwargs)}"
        ) from None
    spec = _from_translation(fn, bound, names, tr)
    spec.dims = {k: d.name for k, d in marks.items()}
    return spec


def _policy(marks: dict, src: tuple, axis: int):
    if src[0] == "arg" and (src[1], axis) in marks:
        d = marks[(src[1], axis)]
        return (max(d.min, 2), d.max)
    return None


def _arg_of(src: tuple) -> int | None:
    return src[1] if src[0] == "arg" else None


def _root(src: tuple) -> str:
    while src[0] in ("attr", "item", "type") or (src[0] == "global" and len(src) > 2):
        src = src[1] if src[0] != "global" else src[2]
    return src[0]


def _from_translation(fn, bound: list, names: tuple, tr) -> Specialisation:
    qual = fn.__qualname__
    checks: list[tuple] = []
    assumed: list[str] = []
    fixed: set[int] = set()

    def refuse(src, what):
        raise ExportError(
            f"dynexpr.export: {qual} depends on {format_source(src, names)} ({what}); an "
            "exported function takes arrays, numbers (int, float, bool) and None as its "
            "arguments. Pass the values it needs as such, or wrap it in a function that does")

    inputs = []
    constants: list[np.ndarray] = []
    for s in tr.input_sources:
        if s[0] == "arg" and type(bound[s[1]]) is np.ndarray:
            inputs.append(("arg", s[1]))
        elif s[0] == "as0d" and s[1][0] == "arg":
            inputs.append(("scalar", s[1][1], np.dtype(s[2]).name))
        elif _root(s) in ("global", "closure"):
            # Note [constants in an export]: its value now, built into the library
            a, where = resolve(s, bound, fn), format_source(s, names)
            if type(a) is not np.ndarray or a.dtype.name not in CODES or not a.dtype.isnative:
                raise ExportError(
                    f"dynexpr.export: {qual} reads {where}, a {type(a).__name__} of dtype "
                    f"{getattr(a, 'dtype', '?')}, which cannot be built into the library; "
                    "pass it as an argument")
            inputs.append(("const", len(constants), where))
            constants.append(np.ascontiguousarray(a).copy())
            assumed.append(f"{where} is the {a.dtype}{list(a.shape)} array it held at export "
                           "(built in)")
        else:
            raise ExportError(
                f"dynexpr.export: {qual} reads the array {format_source(s, names)}, which is "
                "not one of its arguments; an exported function has no Python objects to "
                "read it from. Pass it as an argument")
    for g in tr.guards:
        _guard_checks(g, names, checks, assumed, fixed, refuse, bound, fn)
    for i, v in enumerate(bound):
        if not any(c[0] in ("kind", "value") and c[1] == i for c in checks):
            # unread by the graph: any value is fine, but a C++ call must still pass one
            checks.append(("any", i))
    required = len(bound)
    while required > 0 and (required - 1) in fixed:
        required -= 1

    p = runtime.plan(tr.graph)
    conv = p.conv
    written = [bool(w) for _, _, w in conv["inputs"]]
    for k, src in enumerate(inputs):
        if src[0] == "const" and written[k]:
            raise ExportError(f"dynexpr.export: {qual} writes into {src[2]}, which is not an "
                              "argument; an exported library's constants are read-only. Pass "
                              "it as an argument")

    def extent(d):
        if isinstance(d, int):
            return d
        src = inputs[int(d[0])]
        if src[0] == "const":  # a constant's extent is known now
            return int(constants[src[1]].shape[int(d[1])])
        if src[0] != "arg":
            raise ExportError(f"dynexpr internal error: an output extent of {qual} comes "
                              "from a scalar input")
        return (int(d[0]), int(d[1]))

    outputs = [(code, [extent(d) for d in dims]) for code, dims in conv["outputs"]]
    results = list(conv["results"])
    returns: list[tuple] = []
    _flatten(tr.template, results, inputs, bound, names, qual, returns)
    example = ", ".join(
        f"{n}={_describe(v)}" for n, v in zip(names, bound))
    return Specialisation(names, len(bound), required, checks, assumed, inputs, written,
                          outputs, returns, p.source, example, constants=constants)


def _describe(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"{v.dtype}{list(v.shape)}"
    return repr(v)


def _guard_checks(g: Guard, names, checks, assumed, fixed, refuse, bound, fn) -> None:
    kind, src, exp = g.kind, g.source, g.expected
    if kind in ("ALIAS", "DIM_EQ"):
        a, b = src
        i, j = _arg_of(a), _arg_of(b)
        if i is None or j is None:
            outside = [x for x in (a, b) if _arg_of(x) is None]
            if any(_root(x) not in ("global", "closure") for x in outside):
                refuse(a if i is None else b, g.describe(names))
            if i is None and j is None:
                assumed.append(g.describe(names))
            elif kind == "ALIAS" and exp == "disjoint":
                pass  # a built-in constant is the library's own memory: never an argument's
            elif kind == "DIM_EQ":  # the constant's extent is known now
                (arg, axis), (other, oaxis) = ((i, exp[0]), (b, exp[1])) if j is None \
                    else ((j, exp[1]), (a, exp[0]))
                checks.append(("dim", arg, axis, int(resolve(other, bound, fn).shape[oaxis])))
            else:
                refuse(a if i is None else b, g.describe(names))
            return
        if kind == "ALIAS":
            checks.append(("alias", i, j, exp))
        else:
            checks.append(("dim_eq", i, exp[0], j, exp[1]))
        return
    i = _arg_of(src)
    if i is None:
        if _root(src) in ("global", "closure"):
            assumed.append(g.describe(names))
            return
        refuse(src, g.describe(names))
    if kind == "TYPE":
        k = _KIND.get(exp)
        if k is None:
            refuse(src, f"a {getattr(exp, '__name__', exp)}")
        checks.append(("kind", i, k))
    elif kind == "DTYPE":
        if exp.name not in CODES or not exp.isnative:
            refuse(src, f"an array of dtype {exp}, which dynexpr's kernels do not compute")
        checks.append(("dtype", i, CODES[exp.name]))
    elif kind == "NDIM":
        checks.append(("ndim", i, int(exp)))
    elif kind in ("SHAPE", "DYN_SHAPE"):
        if not any(c[0] == "ndim" and c[1] == i for c in checks):
            checks.append(("ndim", i, len(exp)))
        for ax, d in enumerate(exp):
            if isinstance(d, int):
                checks.append(("dim", i, ax, int(d)))
            else:
                checks.append(("range", i, ax, int(d[0]), None if d[1] is None else int(d[1])))
    elif kind == "STRIDES_CLASS":
        if exp == "C":
            checks.append(("contiguous", i))
    elif kind == "WRITEABLE":
        pass  # the C++ Array's readonly flag is checked where a kernel writes an input
    elif kind in ("VALUE", "ID") and (exp is None or type(exp) in (bool, int, float)):
        if kind == "ID" and exp is not None:
            refuse(src, g.describe(names))
        checks.append(("value", i, _KIND[type(exp)], exp))
        fixed.add(i)
    else:
        refuse(src, g.describe(names))


def _flatten(t: tuple, results: list, inputs: list, bound: list, names, qual: str,
             out: list) -> None:
    kind = t[0]
    if kind in ("tuple", "list"):
        for c in t[1]:
            _flatten(c, results, inputs, bound, names, qual, out)
    elif kind == "out":
        r = results[t[1]]
        copy = bool(t[3])
        if r < 0 and inputs[-r - 1][0] == "scalar":
            raise ExportError(f"dynexpr.export: {qual} returns a number argument as an "
                              "array; return it from the caller instead")
        out.append(("out", r, copy) if r >= 0 else ("input", -r - 1, copy))
    elif kind == "src" and t[1][0] == "arg":
        v = bound[t[1][1]]
        if type(v) is np.ndarray:
            out.append(("arg", t[1][1]))
        elif v is None or type(v) in (bool, int, float):
            out.append(("const", v))
        else:
            raise ExportError(f"dynexpr.export: {qual} returns its argument "
                              f"{names[t[1][1]]}, a {type(v).__name__}")
    elif kind == "const" and (t[1] is None or type(t[1]) in (bool, int, float)):
        if t[1] is not None:  # None gives no result
            out.append(("const", t[1]))
    else:
        what = {"view": "a view of an argument (e.g. x.T or x.reshape(...))",
                "viewof": "a view of a result (e.g. y.T or y.reshape(...))",
                "dict": "a dict", "src": "an object it did not compute"}.get(kind, kind)
        raise ExportError(
            f"dynexpr.export: {qual} returns {what}; an exported function returns arrays, "
            "numbers, or tuples and lists of them. Return a computed array instead "
            "(e.g. np.ascontiguousarray(...) of the view)")


# ------------------------------------------------------------------------ the export
class Exported:
    """Specialisations of one function, to be written as C++ by `save(dir)`."""

    def __init__(self, fn, name: str | None = None) -> None:
        fn = getattr(fn, "__dynexpr_wrapped__", fn)
        if not hasattr(fn, "__code__"):
            raise TypeError(f"dynexpr.export: expected a Python function, got "
                            f"{type(fn).__name__}")
        self.fn = fn
        self.name = name or fn.__name__
        if (not _IDENT.match(self.name) or self.name in _CXX_KEYWORDS
                or self.name.lower().startswith(("dx_", "dxe_", "dxcu", "dynexpr"))):
            raise ExportError(f"dynexpr.export: {self.name!r} is not usable as a C++ "
                              "namespace and file name (a keyword, or a name the library "
                              "uses); pass name='...' (letters, digits, _)")
        self.specialisations: list[Specialisation] = []

    def add(self, *args: Any, dynamic_shapes=None, **kwargs: Any) -> Exported:
        """One more specialisation, from this example call (tried after those before)."""
        spec = specialise(self.fn, args, kwargs, dynamic_shapes)
        if self.specialisations and spec.n_params != self.specialisations[0].n_params:
            raise ExportError("dynexpr.export: every example must bind the same parameters")
        self.specialisations.append(spec)
        return self

    def describe(self) -> str:
        lines = [(f"{self.name}: {len(self.specialisations)} specialisation(s) of "
                 f"{self.fn.__module__}:{self.fn.__qualname__}")]
        for n, s in enumerate(self.specialisations):
            lines.append(f"  [{n}] ({s.signature()}) -> {s.result_text()}")
            for a in s.assumed:
                lines.append(f"      assumes {a}")
        return "\n".join(lines)

    __str__ = describe

    def __repr__(self) -> str:
        return f"<dynexpr.Exported {self.name}: {len(self.specialisations)} specialisation(s)>"

    def save(self, directory: str | os.PathLike) -> Path:
        """Writes NAME.hpp, NAME.cpp (the generated source), libNAME.so, libdynexpr_rt.so,
        dynexpr/exported.hpp and NAME.json into `directory`; files are written in a
        temporary directory and moved into place when all of them built."""
        if not self.specialisations:
            raise ExportError("dynexpr.export: nothing to save (no specialisation)")
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".dynexpr-export-", dir=out) as tmp:
            t = Path(tmp)
            header = _header(self)
            source = _source(self, t)
            (t / f"{self.name}.hpp").write_text(header)
            (t / f"{self.name}.cpp").write_text(source)
            inc, _ = source_dirs()
            (t / "dynexpr").mkdir()
            shutil.copyfile(inc / "dynexpr" / "exported.hpp", t / "dynexpr" / "exported.hpp")
            rt = cxx.ensure_runtime() / cxx.RUNTIME_LIB
            shutil.copyfile(rt, t / cxx.RUNTIME_LIB)
            seconds = _compile(t, self.name)
            for f in t.glob("*.const"):  # built into the library by .incbin
                f.unlink()
            meta = {
                "function": f"{self.fn.__module__}:{self.fn.__qualname__}",
                "name": self.name,
                "parameters": list(self.specialisations[0].argnames),
                "specialisations": [
                    {"takes": s.signature(), "returns": s.result_text(), "assumes": s.assumed,
                     "example": s.example} for s in self.specialisations],
                "compiler": cxx.toolchain().version,
                "flags": list(cxx.CXXFLAGS),
                "isa": isa.current(),
                "abi": cxx.toolchain().abi,
                "compile_seconds": round(seconds, 2),
                "time": time.time(),
            }
            (t / f"{self.name}.json").write_text(json.dumps(meta, indent=2) + "\n")
            (out / "dynexpr").mkdir(exist_ok=True)
            for f in t.rglob("*"):
                if f.is_file():
                    os.replace(f, out / f.relative_to(t))
        return out


def export(fn, *args: Any, dynamic_shapes=None, name: str | None = None,
           **kwargs: Any) -> Exported:
    """fn exported for the example call fn(*args, **kwargs): an Exported whose
    `save(dir)` writes a C++ header and shared library (see the module's docstring).
    dynamic_shapes, like torch.export's: {param: {axis: dynexpr.Dim(name, min=, max=)}}."""
    return Exported(fn, name).add(*args, dynamic_shapes=dynamic_shapes, **kwargs)


# ------------------------------------------------------------------------- C++ text
def _compile(d: Path, name: str) -> float:
    tc = cxx.toolchain()
    inc, kern = source_dirs()
    pch = cxx.ensure_pch()
    cmd = [tc.cxx, *cxx.CXXFLAGS, "-Winvalid-pch"]
    if pch is not None:
        cmd += ["-I", str(pch)]
    cmd += ["-I", str(inc), "-I", str(kern), "-I", str(d)]
    for s in system_includes():
        cmd += ["-isystem", s]
    # the assembler finds the constants' files (Note [constants in an export]) here
    cmd += [f"-Wa,-I,{d}", *cxx.link_flags(), f"-Wl,-soname,lib{name}.so", str(d / f"{name}.cpp"),
            "-o", str(d / f"lib{name}.so"), str(d / cxx.RUNTIME_LIB), "-Wl,-rpath,$ORIGIN"]
    t0 = time.perf_counter()
    try:
        proc = run_tool(cmd)
    except OSError as e:
        raise ExportError(f"dynexpr.export: cannot start the C++ compiler {cmd[0]}: {e}") \
            from None
    if proc.returncode != 0:
        raise ExportError(
            f"dynexpr internal error: compiling the exported library failed (exit "
            f"{proc.returncode}); the source is {d / (name + '.cpp')}:\n"
            f"{proc.stderr[-3000:]}")
    return time.perf_counter() - t0


def _cstr(text: str) -> str:
    return json.dumps(text)  # a valid C++ string literal for the ASCII we write


def _header(ex: Exported) -> str:
    s0 = ex.specialisations[0]
    lines = [
        (f"// {ex.name}.hpp — generated by dynexpr.export from "
        f"{ex.fn.__module__}:{ex.fn.__qualname__}; do not edit."),
        (f"// Link with lib{ex.name}.so (and libdynexpr_rt.so beside it). Python parameters: "
        f"({', '.join(s0.argnames)})."),
        "// Specialisations, tried in this order (the first whose guards hold runs):",
    ]
    for n, s in enumerate(ex.specialisations):
        lines.append(f"//   [{n}] ({s.signature()})")
        lines.append(f"//       returns {s.result_text()}")
        for a in s.assumed:
            lines.append(f"//       assumes {a}")
    lines += [
        "#pragma once",
        "",
        "#include <dynexpr/exported.hpp>",
        "",
        "#include <string>",
        "#include <vector>",
        "",
        f"namespace {ex.name} {{",
        "",
        "/// The function's results, in the order Python returns them (a tuple or list is",
        "/// flattened; None gives none). Throws dynexpr::exported::error: code",
        "/// no_specialisation when no specialisation takes `args` (the message says why for",
        "/// each), or the kernel's own error (e.g. value_error for shapes that do not fit).",
        "std::vector<dynexpr::exported::Array> run(const std::vector<dynexpr::exported::Arg>& args);",
        "",
        "/// run() without exceptions: returns a dynexpr::exported::status (0: ok) and fills",
        "/// `results` or `message`.",
        "int try_run(const std::vector<dynexpr::exported::Arg>& args,",
        "            std::vector<dynexpr::exported::Array>& results, std::string& message) noexcept;",
        "",
        "/// The specialisations and their guards, as text.",
        "const char* describe();",
        "",
        f"inline constexpr int parameters = {s0.n_params};",
        f"inline constexpr int specialisations = {len(ex.specialisations)};",
        "",
        f"}}  // namespace {ex.name}",
        "",
    ]
    return "\n".join(lines)


def _constants(ex: Exported, d: Path) -> list[str]:
    """Note [constants in an export]: each constant's bytes written to d and built into
    the library's read-only data by the assembler (.incbin: no C++ text of the values), a
    64-byte aligned symbol hidden inside the library, and a read-only Array over it."""
    lines = []
    for n, s in enumerate(ex.specialisations):
        for k, a in enumerate(s.constants):
            sym = f"dxe_{ex.name}_c{n}_{k}"
            path = d / f"{sym}.const"
            path.write_bytes(a.tobytes())
            shape = ", ".join(str(e) for e in a.shape)
            lines += [
                f'__asm__(".pushsection .rodata\\n.balign 64\\n.globl {sym}\\n.hidden {sym}\\n"',
                f'        ".type {sym}, @object\\n{sym}:\\n.incbin \\"{path.name}\\"\\n"',
                f'        ".size {sym}, {max(a.nbytes, 0)}\\n.popsection\\n");',
                f'extern "C" __attribute__((visibility("hidden"))) const unsigned char {sym}[];',
                (f"static const dynexpr::exported::Array& const{n}_{k}() {{  "
                 f"// {s.inputs_const_name(k)}"),
                (f"  static const dynexpr::exported::Array a("
                 f"reinterpret_cast<const {_CTYPE[a.dtype.name]}*>({sym}), {{{shape}}});"),
                "  return a;",
                "}",
            ]
    return lines


def _source(ex: Exported, d: Path) -> str:
    includes: list[str] = []
    units: list[str] = []
    for n, s in enumerate(ex.specialisations):
        if not s.source:
            units.append("")
            continue
        body = []
        for ln in s.source.splitlines():
            if ln.startswith("#include"):
                if ln != '#include "prelude.hpp"' and ln not in includes:
                    includes.append(ln)
            else:
                body.append(ln)
        units.append(f"namespace dxe_spec{n} {{\n" + "\n".join(body) +
                     f"\n}}  // namespace dxe_spec{n}\n")
    out = [
        (f"// {ex.name}.cpp — generated by dynexpr.export; do not edit. The library of "
        f"{ex.name}.hpp:"),
        "// each specialisation's unit (the cpu backend's generated C++) in a namespace of its",
        "// own, then the guards that pick one (Note [guards in C++] in dynexpr/artifacts/export.py).",
        '#include "prelude.hpp"',
        *includes,
        "",
        "#include <dynexpr/exported.hpp>",
        "",
        "#include <cmath>",
        "#include <cstring>",
        "#include <new>",
        "#include <string>",
        "#include <vector>",
        "",
        f'#include "{ex.name}.hpp"',
        "",
        *_constants(ex, d),
        "",
        "// A unit's entry point, not the ABI's exported symbols: one per specialisation.",
        "#undef DYNEXPR_UNIT",
        "#define DYNEXPR_UNIT(RUN, N_IN, N_OUT)                                                  \\",
        "  static std::int32_t unit_entry(const dx_array* in, std::int32_t n_in,                \\",
        "                                 const dx_array* out, std::int32_t n_out, char* err,     \\",
        "                                 std::size_t err_len) {                                  \\",
        "    return ::dynexpr::kernel::guarded(err, err_len, [&] {                               \\",
        "      ::dynexpr::kernel::frame f(in, n_in, out, n_out, (N_IN), (N_OUT));                \\",
        "      RUN(f);                                                                           \\",
        "    });                                                                                 \\",
        "  }",
        "",
        *units,
        '#include "exported_support.hpp"',
        "",
        "namespace {",
        "using namespace ::dynexpr::exported::support;",
    ]
    for n, s in enumerate(ex.specialisations):
        out += _match_fn(n, s) + _run_fn(n, s)
    text = ex.describe()
    out += [
        "}  // namespace",
        "",
        f"namespace {ex.name} {{",
        "",
        "std::vector<dxe::Array> run(const Args& args) {",
        "  static const char* const missing = missing_cpu_feature();",
        "  if (missing)",
        f"    throw dxe::error(dxe::cpu_unsupported, {_cstr(f'dynexpr: lib{ex.name}.so was compiled for ')}",
        f"                     {_cstr(' '.join(cxx.CXXFLAGS))} \"; this CPU lacks \" +",
        ("                     std::string(missing) + \": export again on this machine, or with "
        "DYNEXPR_ISA=x86-64-v3\");"),
        f"  std::string why[{len(ex.specialisations)}];",
    ]
    for n in range(len(ex.specialisations)):
        out.append(f"  if (match{n}(args, why[{n}])) return run{n}(args);")
    out += [
        f"  std::string msg = {_cstr(f'dynexpr: no specialisation of {ex.name} takes (')};",
        ("  for (std::size_t i = 0; i < args.size(); ++i) msg += (i ? \", \" : \"\") + "
        "args[i].describe();"),
        "  msg += \"):\";",
    ]
    for n in range(len(ex.specialisations)):
        out.append(f"  msg += \"\\n  [{n}] \" + why[{n}];")
    out += [
        f"  msg += {_cstr(chr(10) + 'Export again with an example like this call (dynexpr.export(...).add(...)), or mark the differing dimension dynamic.')};",
        "  throw dxe::error(dxe::no_specialisation, msg);",
        "}",
        "",
        ("int try_run(const Args& args, std::vector<dxe::Array>& results, std::string& message) "
        "noexcept {"),
        "  try {",
        "    results = run(args);",
        "    return dxe::ok;",
        "  } catch (const dxe::error& e) {",
        "    message = e.what();",
        "    return e.code;",
        "  } catch (const std::bad_alloc&) {",
        "    message = \"dynexpr: out of memory\";",
        "    return dxe::memory_error;",
        "  } catch (const std::exception& e) {",
        "    message = e.what();",
        "    return dxe::internal_error;",
        "  } catch (...) {",
        "    message = \"dynexpr: unknown exception\";",
        "    return dxe::internal_error;",
        "  }",
        "}",
        "",
        f"const char* describe() {{ return {_cstr(text)}; }}",
        "",
        f"}}  // namespace {ex.name}",
        "",
    ]
    return "\n".join(out)


def _match_fn(n: int, s: Specialisation) -> list[str]:
    names = s.argnames
    out = [f"bool match{n}(const Args& a, std::string& why) {{",
           f"  if (a.size() < {s.required} || a.size() > {s.n_params}) {{",
           (f"    why = \"takes {s.required}\" + std::string({_cstr('' if s.required == s.n_params else f' to {s.n_params}')}) + "
           "\" arguments, got \" + std::to_string(a.size());"),
           "    return false;",
           "  }"]
    for c in s.checks:
        kind, i = c[0], c[1]
        nm = _cstr(names[i])
        if kind == "any":
            continue
        if kind == "kind":
            test = f"want_kind(a, {i}, {nm}, dxe::Arg::{c[2]}, why)"
        elif kind == "dtype":
            test = f"want_dtype(a, {i}, {nm}, dxe::dtype::{_DXE_DTYPE[_NAMES[c[2]]]}, why)"
        elif kind == "ndim":
            test = f"want_ndim(a, {i}, {nm}, {c[2]}, why)"
        elif kind == "dim":
            test = f"want_dim(a, {i}, {nm}, {c[2]}, {c[3]}, why)"
        elif kind == "range":
            test = f"want_range(a, {i}, {nm}, {c[2]}, {c[3]}, {-1 if c[4] is None else c[4]}, why)"
        elif kind == "contiguous":
            test = f"want_contiguous(a, {i}, {nm}, why)"
        elif kind == "value":
            v = c[3]
            if c[2] == "none":
                test = f"want_none(a, {i}, {nm}, why)"
            elif c[2] == "boolean":
                test = f"want_boolean(a, {i}, {nm}, {'true' if v else 'false'}, why)"
            elif c[2] == "integer":
                if not -(1 << 63) <= v < (1 << 63):
                    raise ExportError(f"dynexpr.export: {names[i]} == {v} does not fit int64")
                test = f"want_integer(a, {i}, {nm}, INT64_C({v}), why)" if v != -(1 << 63) \
                    else f"want_integer(a, {i}, {nm}, INT64_MIN, why)"
            else:
                test = f"want_floating(a, {i}, {nm}, {_double(v)}, why)"
            test = f"(a.size() <= {i} || {test})"
        elif kind == "alias":
            text = _cstr(f"{names[i]} and {names[c[2]]}")
            test = f"want_alias(a, {i}, {c[2]}, {text}, {_cstr(c[3])}, why)"
        elif kind == "dim_eq":
            text = _cstr(f"{names[i]}.shape[{c[2]}] == {names[c[3]]}.shape[{c[4]}]")
            test = f"want_dim_eq(a, {i}, {c[2]}, {c[3]}, {c[4]}, {text}, why)"
        else:
            raise AssertionError(kind)
        out.append(f"  if (!{test}) return false;")
    out += ["  return true;", "}", ""]
    return out


def _double(v: float) -> str:
    if math.isnan(v):
        return "std::nan(\"\")"
    if math.isinf(v):
        return "HUGE_VAL" if v > 0 else "-HUGE_VAL"
    return repr(float(v))


def _run_fn(n: int, s: Specialisation) -> list[str]:
    names = s.argnames
    out = [f"std::vector<dxe::Array> run{n}(const Args& a) {{"]
    n_in, n_out = len(s.inputs), len(s.outputs)
    if s.source:
        for k, src in enumerate(s.inputs):
            if src[0] == "scalar":
                ct = _CTYPE[src[2]]
                out.append(f"  {ct} s{k} = static_cast<{ct}>(number(a[{src[1]}]));")
        out.append(f"  dx_array in[{max(n_in, 1)}];")
        for k, src in enumerate(s.inputs):
            if src[0] == "scalar":
                out.append(f"  in[{k}] = host_scalar(&s{k});")
            elif src[0] == "const":
                out.append(f"  in[{k}] = host(const{n}_{src[1]}());")
            elif s.written[k]:
                out.append(f"  in[{k}] = host(writable(a, {src[1]}, {_cstr(names[src[1]])}));")
            else:
                out.append(f"  in[{k}] = host(a[{src[1]}].as_array());")
        out.append("  std::vector<dxe::Array> o;")
        out.append(f"  o.reserve({n_out});")
        for code, dims in s.outputs:
            ext = ", ".join(str(d) if isinstance(d, int) else
                            f"a[{s.inputs[d[0]][1]}].as_array().shape()[{d[1]}]" for d in dims)
            out.append(f"  o.push_back(dxe::Array::empty(dxe::dtype::{_DXE_DTYPE[_NAMES[code]]}, "
                       f"{{{ext}}}));")
        out.append(f"  dx_array out[{max(n_out, 1)}];")
        for k in range(n_out):
            out.append(f"  out[{k}] = host(o[{k}]);")
        out += ["  char err[1024];",
                "  err[0] = '\\0';",
                f"  check(dxe_spec{n}::unit_entry(in, {n_in}, out, {n_out}, err, sizeof err), err);"]
    else:
        out.append("  std::vector<dxe::Array> o;")
    out.append("  std::vector<dxe::Array> r;")
    for r in s.returns:
        if r[0] == "out":
            out.append(f"  r.push_back(o[{r[1]}]{'.copy()' if r[2] else ''});")
        elif r[0] == "input" and s.inputs[r[1]][0] == "const":
            out.append(f"  r.push_back(const{n}_{s.inputs[r[1]][1]}().copy());")
        elif r[0] in ("input", "arg"):
            arg = s.inputs[r[1]][1] if r[0] == "input" else r[1]
            copy = r[0] == "input" and r[2]
            out.append(f"  r.push_back(a[{arg}].as_array(){'.copy()' if copy else ''});")
        else:
            v = r[1]
            if v is None:
                continue
            if type(v) is bool:
                out.append(f"  r.push_back(constant<bool>({'true' if v else 'false'}));")
            elif type(v) is int:
                out.append(f"  r.push_back(constant<std::int64_t>(INT64_C({v})));")
            else:
                out.append(f"  r.push_back(constant<double>({_double(v)}));")
    out += ["  (void)a;", "  return r;", "}", ""]
    return out
