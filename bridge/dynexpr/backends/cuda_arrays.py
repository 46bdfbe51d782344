"""Recognising the CUDA arrays users already have (issue 14, part 1): CuPy arrays, torch
CUDA tensors, anything with `__cuda_array_interface__` (v3) or `__dlpack__` on a CUDA
device, read into one description (pointer, shape, element strides, dtype, device), and
the guard facts a compiled entry depends on: the device ordinal and its compute
capability (a cubin is built for one sm_XX).

NOT YET WIRED INTO CAPTURE: the translator and the native guard check still take only
NumPy arrays; CudaBackend.codegen and cuda_driver.load are where this is to be called.
What is here needs no GPU and is tested with fake objects (test_cuda_arrays.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

_DTYPES = {"|b1": "bool", "|u1": "uint8", "<i4": "int32", "<i8": "int64", "<f4": "float32",
           "<f8": "float64"}
_DLPACK_CUDA, _DLPACK_CUDA_MANAGED = 2, 13  # DLDeviceType: kDLCUDA, kDLCUDAManaged


@dataclass(frozen=True)
class DeviceArray:
    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    dtype: str                # a dynexpr dtype name
    device: int               # CUDA device ordinal
    readonly: bool
    source: str               # "__cuda_array_interface__" or "__dlpack__"

    @property
    def c_contiguous(self) -> bool:
        expect = 1
        for n, s in zip(reversed(self.shape), reversed(self.strides)):
            if n != 1 and s != expect:
                return False
            expect *= n
        return True


def _where(i: int) -> str:
    return f"dynexpr: capture(backend='cuda'): argument {i}"


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
    ptr, readonly = cai["data"]
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
    device = device_of(ptr) if (device_of is not None and ptr) else 0
    return DeviceArray(int(ptr), shape, strides, dtype, device, bool(readonly),
                       "__cuda_array_interface__")


def guard_facts(arrays: list[DeviceArray], capability_of: Callable[[int], tuple[int, int]]) -> tuple:
    """What a compiled entry's guards hold for these arguments besides dtype and shape: one
    device for all (a kernel runs on one), and that device's compute capability (the
    cubin's sm_XX). Raises for arrays on two devices."""
    devices = sorted({a.device for a in arrays})
    if len(devices) > 1:
        raise TypeError(f"dynexpr: capture(backend='cuda'): the arguments are on CUDA devices "
                        f"{devices}; a kernel runs on one: move them to one device first")
    if not devices:
        return ()
    return (("device", devices[0]), ("capability", tuple(capability_of(devices[0]))))
