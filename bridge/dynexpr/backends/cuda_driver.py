"""The CUDA driver API through ctypes: module load and cuLaunchKernel of a generated unit.

UNTESTED ON A DEVICE. Written against the driver API's documented signatures, but no GPU
was available when it was written (the build machines have no libcuda); nothing here has
run. tests/gpu/test_cuda_launch.py exercises it where a GPU is found and is skipped,
with the reason, elsewhere. Do not rely on it before those tests have passed on a GPU.

    why = available()               # None, or why not (no libcuda.so.1, no device)
    fn = load(unit, cubin_path, device)   # f(*inputs) -> outputs, CUDA arrays in and out

Outputs, temporaries and workspaces are allocated through the arguments' library (CuPy,
torch: cuda_arrays.Library, cuda_bind.py) on their device; kernels are launched on that
library's current stream, so they are ordered with the caller's own work without a sync.
"""

from __future__ import annotations

import ctypes

from .cuda_bind import bind
from .cuda_codegen import CudaUnit, evaluate
from .cuda_prelude import ERRORS

_lib = None
_why: str | None = None
_ctx: dict[int, ctypes.c_void_p] = {}  # device ordinal -> its retained primary context


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


def _context(device: int = 0):
    """The device's primary context, current on this thread (the one CuPy and torch use)."""
    lib = _load()
    if lib is None:
        raise RuntimeError(f"dynexpr: the cuda backend cannot run here: {_why}")
    ctx = _ctx.get(device)
    if ctx is None:
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        _check(lib.cuDeviceGet(ctypes.byref(dev), device), "cuDeviceGet")
        _check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        _ctx[device] = ctx
    _check(lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return ctx


def capability(device: int = 0) -> tuple[int, int]:
    """(major, minor) compute capability of `device`."""
    _context(device)
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(_lib.cuDeviceGetAttribute(ctypes.byref(major), 75, device), "compute capability")
    _check(_lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, device), "compute capability")
    return major.value, minor.value


def arch(device: int = 0) -> str:
    """sm_XX of `device`."""
    major, minor = capability(device)
    return f"sm_{major}{minor}"


def device_of_pointer(ptr: int) -> int:
    """The ordinal of the device a device pointer belongs to (cuPointerGetAttribute,
    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)."""
    _context(0)
    ordinal = ctypes.c_int()
    _check(_lib.cuPointerGetAttribute(ctypes.byref(ordinal), 9, ctypes.c_uint64(ptr)),
           "cuPointerGetAttribute(device ordinal)")
    return ordinal.value


_CTYPES = {"bool": ctypes.c_bool, "uint8": ctypes.c_uint8, "int32": ctypes.c_int32,
           "int64": ctypes.c_int64, "float32": ctypes.c_float, "float64": ctypes.c_double}


def load(unit: CudaUnit, cubin_path, device: int = 0) -> callable:
    """f(*inputs) -> outputs: unit's launches on `device`, on the current stream of the
    arguments' library, results allocated through it (cuda_bind.py)."""
    _context(device)
    module = ctypes.c_void_p()
    with open(cubin_path, "rb") as fh:
        data = fh.read()
    _check(_lib.cuModuleLoadData(ctypes.byref(module), data), "cuModuleLoadData")
    funcs = {}
    for la in unit.launches:
        if la.library_call is not None:
            continue
        fn = ctypes.c_void_p()
        _check(_lib.cuModuleGetFunction(ctypes.byref(fn), module, la.kernel.encode()),
               f"cuModuleGetFunction({la.kernel})")
        funcs[la.kernel] = fn
    err = ctypes.c_void_p()
    size = ctypes.c_size_t()
    _check(_lib.cuModuleGetGlobal_v2(ctypes.byref(err), ctypes.byref(size), module,
                                     b"dxcu_error"), "cuModuleGetGlobal(dxcu_error)")
    s = unit.schedule
    # Only integer powers set the error word: other units skip the synchronising read.
    raises = any(v.op == "power" and v.dtype not in ("float32", "float64") for v in s.values)

    def f(*inputs):
        b = bind(unit, inputs, host=False)
        if b.device != device:
            raise TypeError(f"dynexpr: this unit was loaded for CUDA device {device}; the "
                            f"arguments are on device {b.device}")
        _context(device)
        stream = b.library.stream(device, inputs)
        dims = b.dims
        if raises:
            _check(_lib.cuMemsetD32Async(err, 0, 1, ctypes.c_void_p(stream)), "cuMemsetD32Async")
        for la in unit.launches:
            if la.library_call is not None:  # Note [matmul through the library]
                op, *names = la.library_call
                getattr(b.library, op)(*[b.arrays[n] for n in names[:-1]], out=b.arrays[names[-1]])
                continue
            vals = []
            for arg in la.args:
                if arg[0] == "ptr":
                    vals.append(ctypes.c_void_p(b.ptr[arg[1]]))
                elif arg[0] == "stride":
                    vals.append(ctypes.c_longlong(b.strides[arg[1]][arg[2]]))
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
        return b.results(unit, inputs)

    return f
