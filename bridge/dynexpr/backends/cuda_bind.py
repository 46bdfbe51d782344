"""The buffers of one call of a generated CUDA unit, for both launchers (the driver's,
cuda_driver.py, and the host emulation's, cuda_emulate.py): each input's pointer and
element strides, checked against what the unit was generated for, and every output,
temporary and workspace allocated through the caller's library (cuda_arrays.Library),
on the arguments' device, so that the results are arrays of the library the caller
passed in (CuPy arrays for CuPy arguments, torch tensors for torch's).

    b = bind(unit, inputs, host=False)   # the driver: CUDA arrays only
    b.ptr["x0"], b.strides["x0"], b.arrays["o0"], b.library, b.device, b.dims

host=True (the emulation) also takes NumPy arrays, and the arrays of a library whose
memory is the host's (a test double, Library.host_memory); a real device pointer there
would be read by the CPU, so it is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import cuda_arrays
from .cuda_codegen import CudaUnit, resolve


@dataclass
class Bound:
    dims: dict
    library: cuda_arrays.Library | None  # None: NumPy arrays on the host (emulation only)
    device: int
    ptr: dict[str, int] = field(default_factory=dict)
    strides: dict[str, list[int]] = field(default_factory=dict)
    arrays: dict[str, Any] = field(default_factory=dict)

    def results(self, unit: CudaUnit, inputs) -> tuple:
        return tuple(inputs[-r - 1] if r < 0 else self.arrays[f"o{r}"]
                     for r in unit.schedule.results)


def bind(unit: CudaUnit, inputs, *, host: bool, allocate: bool = True) -> Bound:
    """The call's buffers; allocate=False: the inputs' alone (no outputs, temporaries or
    workspaces: a CUDA graph's replay has its own, Note [CUDA graph replay])."""
    n_in = unit.schedule.n_inputs
    if len(inputs) != n_in:
        raise TypeError(f"dynexpr: this graph takes {n_in} inputs, got {len(inputs)}")
    dims = resolve(unit, inputs)
    described: dict[str, tuple[Any, cuda_arrays.DeviceArray | None]] = {}
    lib, device = None, 0
    for a in unit.arrays.values():
        if a.name[0] != "x":
            continue
        i = int(a.name[1:])
        x = inputs[i]
        d = _describe(x, i, host)
        if d is not None:
            if lib is not None and (d.library is not lib or d.device != device):
                raise TypeError(f"dynexpr: cuda backend: input {i} is a {d.library.name} "
                                f"array on device {d.device}, input(s) before it "
                                f"{lib.name} arrays on device {device}; a unit runs on one "
                                "device with one library's arrays")
            lib, device = d.library, d.device
        described[a.name] = (x, d)
    b = Bound(dims, lib, device)
    for a in unit.arrays.values():
        if a.name in described:
            x, d = described[a.name]
            shape, dtype = (d.shape, d.dtype) if d is not None else (x.shape, x.dtype.name)
            if shape != a.extents(dims) or dtype != a.dtype:
                raise TypeError(f"dynexpr: input {a.name[1:]} is {dtype}{list(shape)}, the "
                                f"unit was generated for {a.dtype}{list(a.extents(dims))}")
            if d is not None:
                ptr, strides, contiguous = d.ptr, list(d.strides), d.c_contiguous
            else:
                ptr, contiguous = x.ctypes.data, x.flags.c_contiguous
                strides = [s // x.itemsize for s in x.strides]
            if not a.strided and not contiguous:
                raise ValueError(f"dynexpr: input {a.name[1:]} was generated as "
                                 "C-contiguous and is not")
            b.ptr[a.name], b.strides[a.name], b.arrays[a.name] = ptr, strides, x
        elif allocate:
            shape = a.extents(dims)
            if lib is None:
                y = np.empty(shape, a.dtype)
                ptr = y.ctypes.data
            else:
                y = lib.empty(shape, a.dtype, device, inputs)
                ptr = int(y.__cuda_array_interface__["data"][0])
            b.ptr[a.name], b.arrays[a.name] = ptr, y
            b.strides[a.name] = contiguous_strides(shape)
    return b


def _describe(x: Any, i: int, host: bool) -> cuda_arrays.DeviceArray | None:
    if isinstance(x, np.ndarray):
        if host:
            return None
        cuda_arrays.describe(x, i)  # raises: NumPy arrays are the user's error here
    lib = cuda_arrays.library_of(x)
    if lib is None:
        raise TypeError(f"dynexpr: backend='cuda' takes CUDA arrays; input {i} is "
                        f"{type(x).__name__} (no silent copies: move it with cupy.asarray, "
                        "or use backend='cpu')")
    if host and not lib.host_memory:
        raise TypeError(f"dynexpr: the CUDA emulation runs kernels on the host; input {i} "
                        f"is a {lib.name} array in device memory: use backend='cuda'")
    return cuda_arrays.read(x, i)


def contiguous_strides(shape) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= int(d)
    return out[::-1]
