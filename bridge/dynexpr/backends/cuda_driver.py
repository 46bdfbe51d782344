"""The CUDA driver API through ctypes: module load and cuLaunchKernel of a generated unit.

UNTESTED ON A DEVICE. Written against the driver API's documented signatures, but no GPU
was available when it was written (the build machines have no libcuda); nothing here has
run. tests/gpu/test_cuda_launch.py exercises it where a GPU is found and is skipped,
with the reason, elsewhere. Do not rely on it before those tests have passed on a GPU.

    why = available()               # None, or why not (no libcuda.so.1, no device)
    fn = load(unit, cubin_path)     # f(*inputs) -> outputs, inputs/outputs CUDA arrays
                                    # (anything with __cuda_array_interface__ v2/v3)

Outputs, temporaries and workspaces are allocated with CuPy (the caller's library; the
first slice supports CuPy only) on the current device and stream; kernels are launched on
CuPy's current stream, so they are ordered with the caller's own work without a sync.
"""

from __future__ import annotations

import ctypes

import numpy as np

from .cuda_codegen import CudaUnit, evaluate, resolve
from .cuda_prelude import ERRORS

_lib = None
_why: str | None = None
_ctx = None


def _load():
    global _lib, _why
    if _lib is not None or _why is not None:
        return _lib
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        _why = f"no CUDA driver (libcuda.so.1: {e})"
        return None
    if lib.cuInit(0) != 0:
        _why = "the CUDA driver found no usable device (cuInit failed)"
        return None
    count = ctypes.c_int()
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        _why = "the CUDA driver reports no device"
        return None
    _lib = lib
    return lib


def available() -> str | None:
    _load()
    return None if _lib is not None else _why


def _check(rc: int, what: str) -> None:
    if rc != 0:
        name = ctypes.c_char_p()
        _lib.cuGetErrorName(rc, ctypes.byref(name))
        raise RuntimeError(f"dynexpr: {what} failed: {(name.value or b'?').decode()} ({rc})")


def _context():
    """The device's primary context, current on this thread (the one CuPy and torch use)."""
    global _ctx
    lib = _load()
    if lib is None:
        raise RuntimeError(f"dynexpr: the cuda backend cannot run here: {_why}")
    if _ctx is None:
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        _check(lib.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
        _check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        _ctx = ctx
    _check(lib.cuCtxSetCurrent(_ctx), "cuCtxSetCurrent")
    return _ctx


def arch() -> str:
    """sm_XX of device 0."""
    _context()
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(_lib.cuDeviceGetAttribute(ctypes.byref(major), 75, 0), "compute capability")
    _check(_lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, 0), "compute capability")
    return f"sm_{major.value}{minor.value}"


_CTYPES = {"bool": ctypes.c_bool, "uint8": ctypes.c_uint8, "int32": ctypes.c_int32,
           "int64": ctypes.c_int64, "float32": ctypes.c_float, "float64": ctypes.c_double}


def load(unit: CudaUnit, cubin_path) -> callable:
    _context()
    module = ctypes.c_void_p()
    with open(cubin_path, "rb") as fh:
        data = fh.read()
    _check(_lib.cuModuleLoadData(ctypes.byref(module), data), "cuModuleLoadData")
    funcs = {}
    for la in unit.launches:
        fn = ctypes.c_void_p()
        _check(_lib.cuModuleGetFunction(ctypes.byref(fn), module, la.kernel.encode()),
               f"cuModuleGetFunction({la.kernel})")
        funcs[la.kernel] = fn
    err = ctypes.c_void_p()
    size = ctypes.c_size_t()
    _check(_lib.cuModuleGetGlobal_v2(ctypes.byref(err), ctypes.byref(size), module,
                                     b"dxcu_error"), "cuModuleGetGlobal(dxcu_error)")
    s = unit.schedule
    arrays = list(unit.arrays.values())
    # Only integer powers set the error word: other units skip the synchronising read.
    raises = any(v.op == "power" and v.dtype not in ("float32", "float64") for v in s.values)

    def f(*inputs):
        import cupy  # the caller's library (first slice: CuPy only)

        stream = cupy.cuda.get_current_stream().ptr
        bufs, strides = {}, {}
        dims = resolve(unit, inputs)
        for a in arrays:
            if a.name[0] == "x":
                x = inputs[int(a.name[1:])]
                cai = getattr(x, "__cuda_array_interface__", None)
                if cai is None:
                    raise TypeError(f"dynexpr: backend='cuda' takes CUDA arrays; input "
                                    f"{a.name[1:]} is {type(x).__name__} (no silent copies: "
                                    "move it with cupy.asarray, or use backend='cpu')")
                if tuple(cai["shape"]) != a.extents(dims) or np.dtype(cai["typestr"]) != a.dtype:
                    raise TypeError(f"dynexpr: input {a.name[1:]} is not {a.dtype}{list(a.shape)}")
                st = cai.get("strides")
                item = np.dtype(a.dtype).itemsize
                el = ([s_ // item for s_ in st] if st is not None else None)
                if not a.strided and st is not None and el != _c(a.extents(dims)):
                    raise ValueError(f"dynexpr: input {a.name[1:]} was generated as "
                                     "C-contiguous and is not")
                strides[a.name] = el or _c(a.extents(dims))
                bufs[a.name] = (x, cai["data"][0])
            else:
                y = cupy.empty(a.extents(dims), a.dtype)
                bufs[a.name] = (y, y.data.ptr)
        if raises:
            _check(_lib.cuMemsetD32Async(err, 0, 1, ctypes.c_void_p(stream)), "cuMemsetD32Async")
        for la in unit.launches:
            vals = []
            for arg in la.args:
                if arg[0] == "ptr":
                    vals.append(ctypes.c_void_p(bufs[arg[1]][1]))
                elif arg[0] == "stride":
                    vals.append(ctypes.c_longlong(strides[arg[1]][arg[2]]))
                elif arg[0] == "count":
                    vals.append(ctypes.c_longlong(evaluate(arg[1], dims)))
                else:
                    vals.append(_CTYPES[arg[1]](arg[2]))
            params = (ctypes.c_void_p * len(vals))(
                *[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in vals])
            _check(_lib.cuLaunchKernel(funcs[la.kernel], evaluate(la.grid, dims), 1, 1, la.block, 1, 1, 0,
                                       ctypes.c_void_p(stream), params, None),
                   f"cuLaunchKernel({la.kernel})")
        code = ctypes.c_int()
        if raises:
            _check(_lib.cuStreamSynchronize(ctypes.c_void_p(stream)), "cuStreamSynchronize")
            _check(_lib.cuMemcpyDtoH_v2(ctypes.byref(code), err, 4), "reading the error word")
        if code.value:  # a synchronising read: the price of NumPy's ValueError
            raise ValueError(ERRORS.get(code.value, f"dynexpr: CUDA unit error {code.value}"))
        return tuple(inputs[-r - 1] if r < 0 else bufs[f"o{r}"][0] for r in s.results)

    return f


def _c(shape) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= int(d)
    return out[::-1]
