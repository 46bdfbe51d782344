"""The CUDA arrays users already have (issue 14, part 1): CuPy arrays, torch CUDA tensors,
anything with `__cuda_array_interface__` (v3), read into one description (pointer, shape,
element strides, dtype, device); the library each belongs to (Library: how dynexpr
allocates a result like it, on its device and its library's current stream); the guard
facts a compiled entry depends on (the device ordinal and its compute capability: a cubin
is built for one sm_XX); and the NumPy functions a library's namespace spells by the same
names (`cupy.exp` is np.exp), so that a function written with `cupy.` captures.

capture's device path (cuda_run.py) is the one user of all this. What is here needs no
GPU: the tests register a fake library whose "device" memory is host memory (Library's
host_memory), which the host emulation of the kernels can run (test_cuda_capture.py).

Note [which libraries speak NumPy]
A captured function is translated with NumPy's semantics. CuPy implements NumPy's API
(functions, methods, promotion, 0-d results), so a call with CuPy arrays, or with
`cupy.` functions, means what the translation means: `numpy_api` is True for it. torch
does not: `t.max(1)` returns values and indices, `t.size` is a method, integer `t / 2`
is float32. For a library with numpy_api False, the device path compiles only graphs
that used no array method, no array attribute but shape/ndim/T, and no function of
NumPy's namespace, on floating-point inputs: operators and indexing mean the same in
both (cuda_run.py checks the translation's record of what it used).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

_DTYPES = {"|b1": "bool", "|u1": "uint8", "<i4": "int32", "<i8": "int64", "<f4": "float32",
           "<f8": "float64"}
_DLPACK_CUDA, _DLPACK_CUDA_MANAGED = 2, 13  # DLDeviceType: kDLCUDA, kDLCUDAManaged


class Library:
    """How dynexpr works with one CUDA array library. Subclasses answer for their arrays;
    register() adds one (the tests register a fake whose memory is the host's)."""

    name = ""
    namespaces: tuple[str, ...] = ()  # module names whose functions are NumPy's by name
    numpy_api = True   # Note [which libraries speak NumPy]
    host_memory = False  # only test doubles: their "device" pointers are host memory

    def owns(self, x: Any) -> bool:
        raise NotImplementedError

    def device(self, x: Any) -> int:
        return 0

    def capability(self, device: int) -> tuple[int, int]:
        raise NotImplementedError

    def empty(self, shape: tuple, dtype: str, device: int, like: Any) -> Any:
        """A new array of this library on `device` (like: an argument of the call),
        allocated on the library's current stream there."""
        raise NotImplementedError

    def stream(self, device: int, like: Any) -> int:
        """The library's current stream on `device` (0: the legacy default stream)."""
        return 0

    def copy(self, x: Any) -> Any:
        return x.copy()

    def copy_into(self, dst: Any, src: Any) -> None:
        """dst[...] = src on the library's current stream (dst: this library's array)."""
        dst[...] = src

    def matmul(self, a: Any, b: Any, out: Any) -> None:
        """out[...] = a @ b by the library (cuBLAS for CuPy and torch), on its current
        stream (Note [matmul through the library] in cuda_codegen.py)."""
        raise NotImplementedError(f"dynexpr: the {self.name} library has no matmul here")

    def __repr__(self) -> str:
        return f"<dynexpr CUDA array library {self.name!r}>"


class CuPy(Library):
    name = "cupy"
    namespaces = ("cupy",)

    def owns(self, x: Any) -> bool:
        cp = sys.modules.get("cupy")
        return cp is not None and isinstance(x, cp.ndarray)

    def device(self, x: Any) -> int:
        return int(x.device.id)

    def capability(self, device: int) -> tuple[int, int]:
        import cupy
        cc = str(cupy.cuda.Device(device).compute_capability)  # "90"
        return int(cc[:-1]), int(cc[-1])

    def empty(self, shape: tuple, dtype: str, device: int, like: Any) -> Any:
        import cupy
        with cupy.cuda.Device(device):
            return cupy.empty(shape, dtype)

    def stream(self, device: int, like: Any) -> int:
        import cupy
        with cupy.cuda.Device(device):
            return int(cupy.cuda.get_current_stream().ptr)

    def matmul(self, a: Any, b: Any, out: Any) -> None:
        import cupy
        with cupy.cuda.Device(out.device.id):
            cupy.matmul(cupy.asarray(a), cupy.asarray(b), out=out)


class Torch(Library):
    name = "torch"
    numpy_api = False

    def owns(self, x: Any) -> bool:
        torch = sys.modules.get("torch")
        return torch is not None and isinstance(x, torch.Tensor) and x.is_cuda

    def device(self, x: Any) -> int:
        return int(x.device.index or 0)

    def capability(self, device: int) -> tuple[int, int]:
        import torch
        return tuple(torch.cuda.get_device_capability(device))

    def empty(self, shape: tuple, dtype: str, device: int, like: Any) -> Any:
        import torch
        return torch.empty(shape, dtype=getattr(torch, dtype), device=f"cuda:{device}")

    def stream(self, device: int, like: Any) -> int:
        import torch
        return int(torch.cuda.current_stream(device).cuda_stream)

    def copy(self, x: Any) -> Any:
        return x.clone()

    def copy_into(self, dst: Any, src: Any) -> None:
        dst.copy_(src)

    def matmul(self, a: Any, b: Any, out: Any) -> None:
        import torch
        torch.matmul(a, b, out=out)


class Interface(Library):
    """Any other object with __cuda_array_interface__ (Numba's device arrays, ...): its
    library has no allocator dynexpr knows, so CuPy (which must be installed) allocates
    the results and names the device and stream; they are CuPy arrays (zero-copy
    convertible with the library's own from-CUDA-array call)."""

    name = "__cuda_array_interface__"

    def owns(self, x: Any) -> bool:
        return hasattr(type(x), "__cuda_array_interface__") or \
            "__cuda_array_interface__" in getattr(x, "__dict__", ())

    def capability(self, device: int) -> tuple[int, int]:
        return _cupy.capability(device)

    def device(self, x: Any) -> int:
        ptr = x.__cuda_array_interface__["data"][0]
        if not ptr:
            return 0
        import cupy
        return int(cupy.cuda.runtime.pointerGetAttributes(ptr).device)

    def empty(self, shape: tuple, dtype: str, device: int, like: Any) -> Any:
        return _cupy.empty(shape, dtype, device, like)

    def stream(self, device: int, like: Any) -> int:
        return _cupy.stream(device, like)

    def copy_into(self, dst: Any, src: Any) -> None:
        import cupy
        dst[...] = cupy.asarray(src)  # dst is CuPy's (empty() above); src read in place

    def matmul(self, a: Any, b: Any, out: Any) -> None:
        _cupy.matmul(a, b, out)


_cupy = CuPy()
_libraries: list[Library] = [_cupy, Torch()]
_generic = Interface()


def register(lib: Library) -> None:
    """Makes capture's device path take lib's arrays (checked before CuPy and torch)."""
    unregister(lib.name)
    _libraries.insert(0, lib)
    _tables.pop(lib.name, None)


def unregister(name: str) -> None:
    _libraries[:] = [lib for lib in _libraries if lib.name != name]
    _tables.pop(name, None)


def library_of(x: Any) -> Library | None:
    """The library of CUDA array x, or None when x is none (NumPy arrays, numbers, ...).
    A torch tensor on the CPU has a __cuda_array_interface__ property that raises: it
    is no CUDA array."""
    if isinstance(x, (np.ndarray, np.generic, int, float, complex, bool, str, type(None))):
        return None
    for lib in _libraries:
        if lib.owns(x):
            return lib
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return None
    return _generic if _generic.owns(x) else None


# -- functions of a library's namespace that are NumPy's ----------------------------------
_tables: dict[str, dict[int, tuple[Any, Any]]] = {}


def numpy_equivalent(value: Any) -> Any:
    """np.<name> for a registered library's <name> (cupy.exp -> np.exp, cupy.sum -> np.sum),
    else None. Only a device-path translation asks (Session.device): a CPU translation
    must not take cupy.exp(numpy_array), which plain Python refuses."""
    mod = getattr(value, "__module__", None) or getattr(type(value), "__module__", "") or ""
    root = mod.partition(".")[0]
    for lib in _libraries:
        if root in lib.namespaces and lib.numpy_api:
            found = _table(lib).get(id(value))
            if found is not None and found[0] is value:
                return found[1]
    return None


def _table(lib: Library) -> dict[int, tuple[Any, Any]]:
    t = _tables.get(lib.name)
    if t is None:
        t = {}
        for ns in lib.namespaces:
            mod = sys.modules.get(ns)
            for name in dir(mod) if mod is not None else ():
                ours, theirs = getattr(mod, name, None), getattr(np, name, None)
                if callable(ours) and callable(theirs) and not isinstance(ours, type):
                    t[id(ours)] = (ours, theirs)
        _tables[lib.name] = t
    return t


@dataclass(frozen=True, eq=False)
class Layout:
    """What an array's __cuda_array_interface__ says besides its pointer: interned (one
    object per distinct interface), so a call compares and hashes it by identity."""

    dtype: str                  # a dynexpr dtype name
    shape: tuple[int, ...]
    strides: tuple[int, ...]    # in elements
    itemsize: int
    c_contiguous: bool
    lo: int                     # the elements occupy bytes [ptr + lo, ptr + hi)
    hi: int


_layouts: dict[tuple, Layout] = {}
_LAYOUTS = 4096


def layout(cai: dict, i: int | tuple) -> Layout:
    """The interned Layout of an interface dict; TypeError naming the way out when
    dynexpr cannot use it (version < 3, a mask, a dtype, unaligned strides)."""
    k = (cai["typestr"], cai["shape"], cai.get("strides"), cai.get("version", 0),
         cai.get("mask") is None)
    try:
        got = _layouts.get(k)
    except TypeError:  # lists instead of tuples: not hashable, read every time
        return _layout(cai, i)
    if got is None:
        got = _layout(cai, i)
        if len(_layouts) >= _LAYOUTS:
            _layouts.clear()
        _layouts[k] = got
    return got


def _layout(cai: dict, i: int | tuple) -> Layout:
    version = cai.get("version", 0)
    if version < 3:
        raise TypeError(f"{_where(i)} has __cuda_array_interface__ version {version}; dynexpr "
                        "needs version 3 (its stream semantics): upgrade the array's library")
    if cai.get("mask") is not None:
        raise TypeError(f"{_where(i)} is a masked CUDA array; fill the masked values first")
    typestr = cai["typestr"]
    dtype = _DTYPES.get(typestr)
    if dtype is None:
        raise TypeError(f"{_where(i)} has dtype {np.dtype(typestr)}, which the cuda backend "
                        "does not support; pass bool/uint8/int32/int64/float32/float64")
    shape = tuple(int(n) for n in cai["shape"])
    size = np.dtype(typestr).itemsize
    if cai.get("strides") is None:
        strides, acc = [], 1
        for n in reversed(shape):
            strides.append(acc)
            acc *= max(n, 1)
        strides = tuple(reversed(strides))
    else:
        if any(s % size for s in cai["strides"]):
            raise TypeError(f"{_where(i)} has byte strides {tuple(cai['strides'])} that are not "
                            f"multiples of its element size {size}; pass a copy (x.copy())")
        strides = tuple(int(s) // size for s in cai["strides"])
    contiguous, expect = True, 1
    for n, st in zip(reversed(shape), reversed(strides)):
        if n != 1 and st != expect:
            contiguous = False
        expect *= n
    if any(n == 0 for n in shape):
        lo = hi = 0
    else:
        lo = sum((n - 1) * st for n, st in zip(shape, strides) if st < 0) * size
        hi = sum((n - 1) * st for n, st in zip(shape, strides) if st > 0) * size + size
    return Layout(dtype, shape, strides, size, contiguous, lo, hi)


class DeviceArray:
    """One CUDA array of a call: its pointer, layout, device and library."""

    __slots__ = ("device", "layout", "library", "ptr", "readonly", "source")

    def __init__(self, ptr: int, layout: Layout, device: int, readonly: bool,
                 source: str = "__cuda_array_interface__", library: Library | None = None):
        self.ptr, self.layout, self.device = ptr, layout, device
        self.readonly, self.source, self.library = readonly, source, library

    shape = property(lambda self: self.layout.shape)
    strides = property(lambda self: self.layout.strides)  # in elements
    dtype = property(lambda self: self.layout.dtype)
    itemsize = property(lambda self: self.layout.itemsize)
    c_contiguous = property(lambda self: self.layout.c_contiguous)

    def span(self) -> tuple[int, int]:
        """The bytes [lo, hi) the array's elements occupy (empty for a size-0 array)."""
        return self.ptr + self.layout.lo, self.ptr + self.layout.hi

    def same_view(self, other: DeviceArray) -> bool:
        return self.ptr == other.ptr and self.layout is other.layout

    def stand_in(self) -> np.ndarray:
        """A NumPy array with this one's dtype, shape, element strides and writeability,
        over zero-filled host memory that is never read: a device-path translation reads
        only metadata (as Dask's does, dask_run.py), and calloc'd pages cost nothing
        until touched."""
        lay = self.layout
        item = lay.itemsize
        buf = np.zeros(max((lay.hi - lay.lo) // item, 1), lay.dtype)
        return np.lib.stride_tricks.as_strided(buf[-lay.lo // item:], lay.shape,
                                               tuple(st * item for st in lay.strides),
                                               writeable=not self.readonly)


def read(x: Any, i: int | tuple, lib: Library | None = None) -> DeviceArray:
    """The description of argument i, a CUDA array of a known library (library_of(x)
    is not None); TypeError naming the problem when it cannot be used."""
    lib = lib or library_of(x)
    try:
        cai = x.__cuda_array_interface__
    except (RuntimeError, AttributeError) as e:  # torch: a tensor that requires grad
        raise TypeError(f"{_where(i)} has no usable __cuda_array_interface__ ({e})") from None
    ptr, readonly = cai["data"]
    return DeviceArray(ptr, layout(cai, i), lib.device(x), readonly, library=lib)


def described_inputs(inputs, *, host: bool) -> dict[int, DeviceArray]:
    """{position: description} of the CUDA arrays among a graph's inputs. host=False (the
    cuda backend): a NumPy array among them is the user's error (TypeError)."""
    out = {}
    for i, x in enumerate(inputs):
        if isinstance(x, np.ndarray):
            if not host:
                describe(x, i)  # raises, naming the way out
            continue
        if library_of(x) is not None:
            out[i] = read(x, i)
    return out


def _where(i: int | tuple) -> str:
    """i: an argument's position, or the source of an array found elsewhere (cuda_run.py:
    a global, a closure cell, an item of a list or tuple argument)."""
    return f"dynexpr: capture(backend='cuda'): {source_text(i)}"


def source_text(s: int | tuple) -> str:
    """Where a CUDA array of a call was found, in words: "argument 0", "global 'W'",
    "closure variable 'b'", "item 2 of argument 1"."""
    if isinstance(s, int):
        return f"argument {s}"
    kind = s[0]
    if kind == "arg":
        return f"argument {s[1]}"
    if kind == "global":
        return f"global {s[1]!r}"
    if kind == "closure":
        return f"closure variable {s[1]!r}"
    if kind == "item":
        return f"item {s[2]!r} of {source_text(s[1])}"
    return repr(s)


def describe(x: Any, i: int = 0, device_of: Callable[[int], int] | None = None) -> DeviceArray | None:
    """x as a DeviceArray, None when x is no array at all (a Python scalar, ...); raises
    TypeError, naming the way out, for a NumPy array or an unusable CUDA array. device_of
    maps a data pointer to its device ordinal (cuPointerGetAttribute on a GPU machine);
    without it, a __cuda_array_interface__ array counts as on device 0."""
    if isinstance(x, np.ndarray):
        raise TypeError(f"{_where(i)} is a NumPy array; the cuda backend takes CUDA arrays "
                        "(CuPy, torch CUDA tensors) and never copies between host and device "
                        "silently: pass cupy.asarray(x), or use backend='cpu'")
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        return _from_cai(cai, i, device_of)
    if hasattr(x, "__dlpack_device__"):
        kind, ordinal = x.__dlpack_device__()
        if int(kind) not in (_DLPACK_CUDA, _DLPACK_CUDA_MANAGED):
            raise TypeError(f"{_where(i)} is a DLPack array on device type {int(kind)}, not a "
                            "CUDA device; move it to the GPU first (x.cuda(), cupy.asarray), "
                            "or use backend='cpu'")
        raise TypeError(f"{_where(i)} offers only __dlpack__; pass it through cupy.from_dlpack(x) "
                        f"(CUDA device {int(ordinal)}): dynexpr reads __cuda_array_interface__")
    return None


def _from_cai(cai: dict, i: int, device_of) -> DeviceArray:
    ptr, readonly = cai["data"]
    device = device_of(ptr) if (device_of is not None and ptr) else 0
    return DeviceArray(int(ptr), layout(cai, i), device, bool(readonly))


def one_device(arrays) -> int | None:
    """The one device all these arrays are on (None for no arrays); TypeError naming the
    devices where they are on several: a kernel runs on one."""
    devices = sorted({a.device for a in arrays})
    if len(devices) > 1:
        raise TypeError(f"dynexpr: the arguments are on CUDA devices {devices}; a kernel runs "
                        "on one: move them to one device first")
    return devices[0] if devices else None


def guard_facts(arrays: list[DeviceArray], capability_of: Callable[[int], tuple[int, int]]) -> tuple:
    """What a compiled entry's guards hold for these arguments besides dtype and shape: one
    device for all (a kernel runs on one), and that device's compute capability (the
    cubin's sm_XX). Raises for arrays on two devices."""
    device = one_device(arrays)
    if device is None:
        return ()
    return (("device", device), ("capability", tuple(capability_of(device))))
