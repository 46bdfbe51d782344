"""A captured function called with CUDA arrays: its graph runs as generated CUDA kernels on
the arguments' device, and returns arrays of the caller's library (issue 14, part 1).

Note [the device path]
The hook is on the miss path only (captured.py), as Dask's is: a CUDA array fails every
entry's NumPy guards, so NumPy calls never reach this module. A call with CUDA arrays
(cuda_arrays.library_of: CuPy, torch CUDA tensors, __cuda_array_interface__ objects):
- is described: each CUDA argument's pointer, shape, element strides, dtype, device, and
  so is each CUDA array the function reads from a global or a closure cell (the global
  names its code and the code nested in it loads, its free variables; a global read only
  by a function it calls is not looked for, so that call breaks the graph). Two arrays on
  two devices, or two that overlap in memory without being the same view, run as plain
  Python (the library decides, as it would without dynexpr);
- is translated on stand-ins: NumPy arrays of each argument's dtype, shape, strides and
  writeability over calloc'd memory never read (DeviceArray.stand_in; an argument passed
  twice is one stand-in; a global's or closure's array is read as its stand-in through
  Session.stand_ins), with `cupy.exp` read as np.exp (cuda_arrays.numpy_equivalent);
- finds its entry by a key (per CUDA array: position or source, library, device, compute
  capability, first position of the same array) and the translation's own guards checked
  on the stand-ins (_Substituted shows the guards a global's or closure's stand-in): dtype,
  shape or the dynamic rule, stride class, aliasing, and every global, closure and scalar
  the graph relied on;
- runs the entry: the graph's kernels (the cuda backend, or the backend the function was
  captured with where that one generates CUDA, the emulation for tests) on the real
  arrays, results allocated through the arguments' library on its current stream.
An entry that cannot run on the device runs the function as plain Python, on the
caller's library op by op, which is the fallback tier: a graph break, a graph the CUDA
codegen does not generate yet (loops), a NumPy array read next to CUDA ones, no
NVRTC or driver, a library that does not speak NumPy using NumPy's API (Note [which
libraries speak NumPy] in backends/cuda_arrays.py). While a kernel compiles in the
background (config.background_compile), its entry runs plain as well, and the first call
that finds it ready switches. `explain` reports each entry's path and reason
(cuda_run.describe).

CUDA arrays inside list, tuple and dict arguments (nested too, the first _ITEMS items of
each: a model's parameter dict) are inputs like the others: the translation and the
guards read a copy of the container with their stand-ins (_replaced), the kernels the
real arrays.

A call whose only CUDA arrays are in globals or closure cells (weights made once, a call
with Python numbers) takes this path too: a CPU miss asks (reads_device_arrays).

Not handled yet, so plain: results that are views of an argument, and resuming after a
graph break (the whole call runs plain).
"""

from __future__ import annotations

import threading
import types
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import backends, background
from .backends import cuda_arrays
from .capture import Unsupported, translate
from .capture.translate import translate_dynamic
from .config import config
from .diagnostics import warn_once
from .guards import GuardSet, resolve

_FLOATS = ("float32", "float64")


class _Plain(Exception):
    """This call runs as plain Python; the message says why (explain prints it)."""


def has_device_arrays(bound) -> bool:
    """Whether a call's bound arguments hold a CUDA array, themselves or as items of lists,
    tuples and dicts (cheap for NumPy arrays and numbers, which library_of answers at
    once)."""
    for a in bound:
        if type(a) in _CONTAINERS:
            if next(_items(a, ("arg", 0)), None) is not None:
                return True
        elif cuda_arrays.library_of(a) is not None:
            return True
    return False


_ITEMS = 256  # items of container arguments looked at for CUDA arrays, per argument
_CONTAINERS = (list, tuple, dict)  # exactly these types: a subclass may index differently


def _entries(container):
    """(index or key, item) of a list, tuple or dict."""
    return container.items() if type(container) is dict else enumerate(container)


def _items(container, source: tuple):
    """(source, CUDA array) for the items of a list, tuple or dict (nested), at most _ITEMS
    items looked at. A dict item's source is ("item", its dict's source, key), as the
    guards write p['w']."""
    stack, seen = [(container, source)], 0
    while stack:
        c, src = stack.pop()
        for j, v in _entries(c):
            seen += 1
            if seen > _ITEMS:
                return
            if type(v) in _CONTAINERS:
                stack.append((v, ("item", src, j)))
            elif cuda_arrays.library_of(v) is not None:
                yield ("item", src, j), v


def _replaced(container, source: tuple, subs: dict):
    """A copy of a container argument with the CUDA arrays at `subs`' sources replaced by
    their stand-ins (what the translation and the guards read)."""
    items = {}
    for j, v in _entries(container):
        src = ("item", source, j)
        if src in subs:
            v = subs[src]
        elif type(v) in _CONTAINERS:
            v = _replaced(v, src, subs)
        items[j] = v
    if type(container) is dict:
        return items
    return list(items.values()) if type(container) is list else tuple(items.values())


@dataclass
class _Call:
    key: tuple
    meta: list                    # bound with CUDA arguments replaced by stand-ins
    stand_ins: set               # ids of every stand-in (arguments, globals, closures)
    library: cuda_arrays.Library
    device: int
    arrays: dict                  # position or ("global"/"closure", name) -> DeviceArray
    outside: dict                 # ("global"/"closure", name) -> its stand-in

    def view(self, fn):
        """fn as the guards and the translation see this call: its outside arrays as
        their stand-ins."""
        return _Substituted(fn, self.outside) if self.outside else fn


class _Substituted:
    """A function as guards.resolve reads it (__globals__, __closure__, __code__), with
    the CUDA arrays of some globals and closure cells shown as their stand-ins; what is
    not substituted is the function's own, read at each call."""

    __slots__ = ("__closure__", "__code__", "__globals__")

    def __init__(self, fn, outside: dict) -> None:
        g = {name: x for (kind, name), x in outside.items() if kind == "global"}
        self.__globals__ = _Globals(fn.__globals__, g) if g else fn.__globals__
        self.__code__ = fn.__code__
        cells = fn.__closure__
        if cells and any(kind == "closure" for kind, _ in outside):
            cells = tuple(types.CellType(outside[("closure", name)])
                          if ("closure", name) in outside else cell
                          for name, cell in zip(fn.__code__.co_freevars, cells))
        self.__closure__ = cells


class _Globals(dict):
    """A module's globals with some names read as stand-ins (lookups only)."""

    __slots__ = ("_real",)

    def __init__(self, real: dict, shown: dict) -> None:
        super().__init__(shown)
        self._real = real

    def __missing__(self, name):
        return self._real[name]

    def __contains__(self, name) -> bool:
        return dict.__contains__(self, name) or name in self._real

    def get(self, name, default=None):
        try:
            return self[name]
        except KeyError:
            return default


@dataclass
class Entry:
    key: tuple
    guards: GuardSet | None       # None: a plain entry for every call with this key
    reason: str = ""              # why it runs plain ("" when it runs kernels)
    translation: Any = None
    compiled: Any = None          # f(*inputs) -> outputs, or a background.Job
    library: cuda_arrays.Library | None = None
    calls: int = 0

    @property
    def plain(self) -> bool:
        return self.compiled is None


@dataclass
class State:
    """The device-path entries of one captured function (CapturedFunction._device)."""

    entries: list[Entry] = field(default_factory=list)
    names: tuple | None = None    # the global names fn's code loads (_outside)
    dyn: set = field(default_factory=set)  # (source, axis) seen with two extents
    shapes: dict = field(default_factory=dict)  # source -> the first extents seen
    last: Entry | None = None     # the entry of the latest call (explain)
    lock: threading.RLock = field(default_factory=threading.RLock)


def call(cf, bound: list, args: tuple, kwargs: dict) -> Any:
    fn = cf._fn
    state = _state(cf)
    try:
        c = _describe(bound, _outside(fn, state))
    except _Plain as e:
        state.last = Entry((), None, str(e))
        return fn(*args, **kwargs)
    entry = _find(state, c, fn)
    if entry is None:
        with state.lock:
            entry = _find(state, c, fn)
            if entry is None:
                cf._misses += 1
                entry = _add(cf, state, c, bound)
    else:
        cf._hits += 1
    state.last = entry
    entry.calls += 1
    return _run(entry, bound, args, kwargs, fn)


_NEVER_ARRAYS = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type,
                 np.ufunc)


def reads_device_arrays(fn) -> bool:
    """Whether the globals and closure cells fn reads hold a CUDA array now: a call that
    passes none itself runs on the device too. Asked on a CPU miss, not on hits."""
    return next(_outside_arrays(fn, _global_names(fn.__code__)), None) is not None


def _state(cf) -> State:
    s = cf._device
    if s is None:
        s = cf._device = State()
    return s


# -- one call described ----------------------------------------------------------------
def _global_names(code) -> set:
    """The names `code` and the code objects nested in it (comprehensions, lambdas) may
    load as globals."""
    names = set(code.co_names)
    for k in code.co_consts:
        if isinstance(k, types.CodeType):
            names |= _global_names(k)
    return names


def _outside(fn, state: State) -> list:
    """[(source, CUDA array)] of the globals and closure cells fn reads that hold CUDA
    arrays now (Note [the device path])."""
    if state.names is None:
        g = fn.__globals__
        state.names = tuple(sorted(n for n in _global_names(fn.__code__) if n in g))
    return list(_outside_arrays(fn, state.names))


def _outside_arrays(fn, names):
    """(source, CUDA array) for the globals among `names` and the closure cells of fn
    that hold one now. An object that fails the question (a __getattr__ that raises)
    counts as no array; an empty cell is skipped (the translation says so)."""
    g = fn.__globals__
    found = [(("global", name), g.get(name)) for name in names]
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            found.append((("closure", name), cell.cell_contents))
        except ValueError:  # an empty cell
            continue
    for source, v in found:
        if v is None or isinstance(v, _NEVER_ARRAYS):
            continue
        try:
            lib = cuda_arrays.library_of(v)
        except Exception:  # noqa: BLE001, S112 -- any object may be a global
            continue
        if lib is not None:
            yield source, v


@dataclass
class _Shape:
    """What calls with the same layouts, devices and repeats share (cached by _describe):
    the entry key, the stand-ins by argument position, their ids."""

    key: tuple
    stand_ins: dict        # position or source -> its stand-in
    ids: set


_shapes: OrderedDict = OrderedDict()
_SHAPES = 512
_shapes_lock = threading.Lock()


def _describe(bound: list, outside: list) -> _Call:
    """The call's CUDA arrays, arguments (keyed by position) and `outside` ones (keyed by
    source), described, with their stand-ins."""
    arrays: dict = {}
    objects: dict = {}
    found = [*enumerate(bound), *outside]
    for i, a in enumerate(bound):
        if type(a) in _CONTAINERS:
            found += _items(a, ("arg", i))
    for key, a in found:
        lib = cuda_arrays.library_of(a)
        if lib is not None:
            try:
                arrays[key] = cuda_arrays.read(a, key, lib)
            except TypeError as e:
                raise _Plain(str(e)) from None
            objects[key] = a
    items = list(arrays.items())
    lib = items[0][1].library
    if any(d.library is not lib for d in arrays.values()):
        names = sorted({e.library.name for e in arrays.values()})
        raise _Plain(f"CUDA arrays of several libraries ({', '.join(names)})")
    try:
        device = cuda_arrays.one_device(arrays.values())
    except TypeError as e:
        raise _Plain(str(e)) from None
    same: dict[int, int] = {}
    for k, (i, d) in enumerate(items[1:], 1):
        lo, hi = d.span()
        for j, e in items[:k]:
            if j in same:
                continue  # a repeat: its first occurrence answers for it
            if objects[j] is objects[i] or d.same_view(e):
                same[i] = j
                break
            elo, ehi = e.span()
            if lo < ehi and elo < hi:
                raise _Plain(f"{cuda_arrays.source_text(j)} and {cuda_arrays.source_text(i)} overlap in device memory without "
                             "being the same view; dynexpr does not model partial overlap")
    look = tuple((i, type(objects[i]), d.layout, d.readonly, d.device, same.get(i))
                 for i, d in items)
    shape = _shapes.get(look)
    if shape is None:
        shape = _shape(look, arrays, lib, device)
    meta = list(bound)
    outside_stand_ins, in_items = {}, {}
    for i, x in shape.stand_ins.items():
        if isinstance(i, int):
            meta[i] = x
        elif i[0] == "item":
            in_items[i] = x
        else:
            outside_stand_ins[i] = x
    if in_items:
        for i, a in enumerate(bound):
            if type(a) in _CONTAINERS:
                meta[i] = _replaced(a, ("arg", i), in_items)
    return _Call(shape.key, meta, shape.ids, lib, device, arrays, outside_stand_ins)



def _shape(look: tuple, arrays: dict, lib, device: int) -> _Shape:
    cap = _capabilities.get((lib.name, device))
    if cap is None:
        cap = _capabilities[(lib.name, device)] = tuple(lib.capability(device))
    stand_ins: dict[int, np.ndarray] = {}
    for i, _, _, _, _, first in look:
        stand_ins[i] = stand_ins[first] if first is not None else arrays[i].stand_in()
    shape = _Shape(tuple((i, t, dev, cap, first) for i, t, _, _, dev, first in look),
                   stand_ins, {id(x) for x in stand_ins.values()})
    with _shapes_lock:
        _shapes[look] = shape
        while len(_shapes) > _SHAPES:
            _shapes.popitem(last=False)
    return shape


_capabilities: dict[tuple[str, int], tuple[int, int]] = {}


# -- entries ---------------------------------------------------------------------------
def _find(state: State, c: _Call, fn) -> Entry | None:
    seen = c.view(fn)
    for e in state.entries:
        if e.key == c.key and (e.guards is None or e.guards.holds(c.meta, seen)):
            return e
    return None


def _add(cf, state: State, c: _Call, bound: list) -> Entry:
    fn = cf._fn
    if len(state.entries) >= config.recompile_limit:
        warn_once(("device-limit", id(cf)),
                  f"dynexpr: {fn.__qualname__} reached recompile_limit="
                  f"{config.recompile_limit} entries for CUDA arrays; further new "
                  "argument kinds run as plain Python")
        return Entry(c.key, None, f"recompile_limit ({config.recompile_limit}) reached")
    _note_shapes(cf, state, c)
    try:
        tr = _translate(cf, state, c)
    except Unsupported as e:
        entry = Entry(c.key, GuardSet(e.guards), f"graph break: {e.to_reason()}")
        state.entries.append(entry)
        return entry
    entry = Entry(c.key, GuardSet(tr.guards), translation=tr, library=c.library)
    state.entries.append(entry)
    why = _why_plain(tr, c, fn)
    if why is not None:
        entry.reason = why
        return entry
    graph = tr.graph
    if not graph.outputs and not graph.mutations:
        entry.compiled = _nothing
        return entry
    backend = _backend(cf)
    unavailable = backend.unavailable()
    if unavailable is not None:
        entry.reason = f"the {backend.name} backend is not available ({unavailable})"
        warn_once(("device-unavailable", backend.name),
                  f"dynexpr: CUDA arrays: {entry.reason}; captured functions run as plain "
                  "Python on the arrays' library")
        return entry
    inputs = [resolve(s, bound, fn) for s in tr.input_sources]
    try:
        plan = backend.codegen(graph, inputs, fuse=cf.fuse)
    except NotImplementedError as e:
        entry.reason = f"not generated for CUDA yet: {e}"
        warn_once(("device-missing", str(e)),
                  f"dynexpr: {fn.__qualname__}: {entry.reason}; it runs as plain Python "
                  "on the arrays' library")
        return entry
    ready = backend.cached(plan)
    if plan.key is None or ready is not None:
        entry.compiled = _for_mode(ready, cf.mode)
    elif config.background_compile and cf.mode != "max-autotune":
        entry.compiled = background.submit(lambda: _for_mode(backend.build(plan), cf.mode),
                                           f"{fn.__qualname__} (CUDA unit {plan.key[:12]})")
    else:
        entry.compiled = _for_mode(backend.build(plan), cf.mode)
    cf._compiles += 1
    return entry


def _for_mode(compiled, mode: str):
    """mode="reduce-overhead": the unit replayed as CUDA graphs where its launcher can
    (the driver's; Note [CUDA graph replay] in backends/cuda_driver.py)."""
    if mode == "reduce-overhead" and hasattr(compiled, "replayed"):
        return compiled.replayed()
    return compiled


def _translate(cf, state: State, c: _Call):
    fn = cf._fn
    wants = cf.dynamic is True or state.dyn
    if cf.dynamic is not False and wants:
        def policy(source, axis, a):
            ok = source[0] == "arg" and id(a) in c.stand_ins and \
                (cf.dynamic is True or (source, axis) in state.dyn)
            return (2, None) if ok else None

        try:
            tr, _ = translate_dynamic(
                fn, c.meta, policy, run=lambda st: translate(fn, c.meta, st, False, device=True,
                                                             stand_ins=c.outside))
        except Unsupported:
            tr = None
        if tr is not None:
            return tr
    return translate(fn, c.meta, resumable=False, device=True, stand_ins=c.outside)


def _note_shapes(cf, state: State, c: _Call) -> None:
    """dynamic=None: an argument axis seen with two extents is dynamic from then on (as
    captured.py's automatic dynamic shapes)."""
    if cf.dynamic is not None:
        return
    for i, d in c.arrays.items():
        src = ("arg", i) if isinstance(i, int) else i
        seen = state.shapes.setdefault(src, d.shape)
        if len(seen) == len(d.shape):
            state.dyn.update((src, ax) for ax, (a, b) in enumerate(zip(seen, d.shape))
                             if a != b)


def _why_plain(tr, c: _Call, fn) -> str | None:
    if tr.template is None or tr.resume is not None:
        return "graph break"
    for s in tr.input_sources:
        if s[0] == "as0d":  # a scalar argument as a 0-d array: a loop's trip count
            return ("not generated for CUDA yet: a loop (its trip count, a scalar argument, "
                    "is a 0-d array input)")
        v = resolve(s, c.meta, c.view(fn))
        if isinstance(v, np.ndarray) and id(v) not in c.stand_ins:
            where = "argument" if s[0] == "arg" else "global or closure"
            return (f"it reads a NumPy array (a {where}) next to CUDA arrays; kernels read "
                    "device memory only, so plain Python decides (CuPy raises TypeError)")
    bad = _template_kinds(tr.template) - {"out", "src", "tuple", "const", "list", "dict"}
    if bad:
        return f"its result holds {', '.join(sorted(bad))} nodes (views of an argument)"
    if not c.library.numpy_api:
        used = sorted(tr.api)
        if used:
            return (f"{c.library.name} arrays and NumPy's API ({', '.join(used[:4])}): "
                    f"{c.library.name} gives these other meanings, so its own run decides "
                    "(Note [which libraries speak NumPy])")
        kinds = {v.dtype for v in tr.graph.values} | {v.dtype for v in tr.graph.outputs}
        inputs = {d.dtype for d in c.arrays.values()}
        if not inputs <= set(_FLOATS) or not kinds <= {*_FLOATS, "bool"}:
            return (f"{c.library.name} arrays with integer values: {c.library.name}'s "
                    "promotion differs from NumPy's (int / int is float32 there)")
    return None


def _template_kinds(t) -> set:
    kind = t[0]
    if kind in ("tuple", "list"):
        return {kind}.union(*(_template_kinds(x) for x in t[1])) if t[1] else {kind}
    if kind == "dict":
        return {kind}.union(*(_template_kinds(x) for _, x in t[1])) if t[1] else {kind}
    return {kind}


def _backend(fn):
    """The backend CUDA arrays run on: fn's own where it generates CUDA (the cuda backend,
    the emulation), else the cuda backend; fn a captured function or a plain one."""
    b = getattr(fn, "_backend", None)
    return b if getattr(b, "targets_cuda", False) else backends.get("cuda")


def _nothing(*_: Any) -> tuple:
    return ()


# -- running an entry --------------------------------------------------------------------
def _run(entry: Entry, bound: list, args: tuple, kwargs: dict, fn) -> Any:
    compiled = entry.compiled
    if compiled is None:
        return fn(*args, **kwargs)
    if isinstance(compiled, background.Job):
        job = compiled
        if not job.done:
            return fn(*args, **kwargs)  # the caller's library op by op meanwhile
        if job.error is not None:
            if not config.suppress_errors:
                raise job.error
            entry.compiled, entry.reason = None, f"its CUDA unit failed to build: {job.error}"
            warn_once(("device-build", id(entry)), f"dynexpr: {entry.reason}")
            return fn(*args, **kwargs)
        compiled = entry.compiled = job.result
    tr = entry.translation
    outs = compiled(*[resolve(s, bound, fn) for s in tr.input_sources])
    return _result(tr.template, outs, bound, fn, entry.library)


def _result(t: tuple, outs: tuple, bound: list, fn, lib) -> Any:
    """The return value from the output template; a 0-d result stays a 0-d array of the
    library, which is what CuPy and torch return for x.sum()."""
    kind = t[0]
    if kind == "out":
        a = outs[t[1]]
        return lib.copy(a) if t[3] else a
    if kind == "src":
        return resolve(t[1], bound, fn)
    if kind == "tuple":
        return tuple(_result(c, outs, bound, fn, lib) for c in t[1])
    if kind == "list":
        return [_result(c, outs, bound, fn, lib) for c in t[1]]
    if kind == "dict":
        return {k: _result(c, outs, bound, fn, lib) for k, c in t[1]}
    v = t[1]  # "const"
    return type(v)(v) if isinstance(v, (list, dict, set)) else v


# -- explain ---------------------------------------------------------------------------
def describe(cf) -> list[str]:
    """One line per device-path entry of cf: its key and what it runs."""
    s = cf._device
    if s is None:
        return []
    lines = []
    for n, e in enumerate(s.entries, 1):
        lib = e.library.name if e.library is not None else "?"
        if e.compiled is None:
            what = f"plain Python ({e.reason})"
        elif isinstance(e.compiled, background.Job) and not e.compiled.done:
            what = "plain Python while its CUDA unit compiles in the background"
        else:
            what = "CUDA kernels"
            replay = getattr(e.compiled, "describe", None)  # mode="reduce-overhead"
            if replay is not None:
                what += f", {replay()}"
        lines.append(f"device entry {n} ({lib} arrays, {e.calls} calls): {what}")
    return lines


def explain(fn, target, bound: list) -> tuple:
    """dynexpr.explain for a call with CUDA arrays: (graphs, break reasons, guards,
    device lines) of the translation on the stand-ins, the device lines saying what the
    call runs (kernels, or plain Python and why); explain.py prints them."""

    def out(graphs, breaks, guards, device):
        return graphs, breaks, guards, device

    try:
        c = _describe(bound, _outside(target, State()))
    except _Plain as e:
        return out([], [], [], [f"runs as plain Python on the arrays' library: {e}"])
    cap = c.key[0][3]
    where = (f"{c.library.name} arrays on CUDA device {c.device} (compute capability "
             f"{cap[0]}.{cap[1]}; guarded with the library, device and capability)")
    try:
        tr = translate(target, c.meta, resumable=False, device=True, stand_ins=c.outside)
    except Unsupported as e:
        what = ("runs as plain Python on the arrays' library: a graph break (below); "
                "resuming after a break is not done on the device path")
        return out([], [e.to_reason()], list(e.guards), [where, what])
    guards = list(tr.guards)
    why = _why_plain(tr, c, target)
    if why is not None:
        return out([tr.graph], [], guards, [where, f"runs as plain Python: {why}"])
    backend = _backend(fn)
    unavailable = backend.unavailable()
    if unavailable is not None:
        what = (f"would run as CUDA kernels through backend {backend.name!r}, which is not "
                f"available here ({unavailable}): runs as plain Python on the arrays' library")
        return out([tr.graph], [], guards, [where, what])
    try:
        plan = backend.codegen(tr.graph, [resolve(s, bound, target) for s in tr.input_sources],
                               fuse=getattr(fn, "fuse", True))
    except NotImplementedError as e:
        what = f"runs as plain Python: not generated for CUDA yet ({e})"
        return out([tr.graph], [], guards, [where, what])
    unit = plan.detail[0] if isinstance(plan.detail, tuple) else plan.detail
    launches = list(unit.launches) if unit is not None else []
    calls = [la.library_call[0] for la in launches if la.library_call is not None]
    extra = f" and {len(calls)} {c.library.name} calls ({', '.join(calls)})" if calls else ""
    what = (f"runs as one CUDA unit of {len(launches) - len(calls)} kernel launches{extra} "
            f"through backend {backend.name!r}; results are {c.library.name} arrays "
            "allocated on its current stream")
    return out([tr.graph], [], guards, [where, what])
