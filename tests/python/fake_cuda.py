"""A CUDA array library for tests on machines without a GPU: FakeArray exposes
__cuda_array_interface__ v3 over host memory, dispatches NumPy's API to NumPy and wraps
the results (as CuPy dispatches it to its kernels), and `fakecupy` is its namespace
(fakecupy.exp, fakecupy.sum, ...), spelled like CuPy's. FakeLibrary registers it with
dynexpr's device path as a library whose memory is the host's, which the host emulation
of the generated CUDA kernels can run (cuda_arrays.Library.host_memory).

    with fake_library() as lib:      # registered for the block
        x = FakeArray(np.ones(4, np.float32))
        y = captured(x)                  # a FakeArray, computed by emulated kernels
"""

from __future__ import annotations

import sys
import types
from contextlib import contextmanager

import numpy as np
from dynexpr.backends import cuda_arrays
from numpy.lib.mixins import NDArrayOperatorsMixin


def unwrap(x):
    if isinstance(x, FakeArray):
        return x.a
    if isinstance(x, (list, tuple)):
        return type(x)(unwrap(v) for v in x)
    if isinstance(x, dict):
        return {k: unwrap(v) for k, v in x.items()}
    return x


def wrap(r, device=0):
    if isinstance(r, np.ndarray):
        return FakeArray(r, device)
    if isinstance(r, np.generic):  # CuPy returns 0-d arrays where NumPy returns scalars
        return FakeArray(np.asarray(r), device)
    if isinstance(r, tuple):
        return tuple(wrap(v, device) for v in r)
    return r


class FakeArray(NDArrayOperatorsMixin):
    """A "device" array over a NumPy array's memory (never copied)."""

    def __init__(self, a: np.ndarray, device: int = 0):
        self.a = a
        self.device = device

    @property
    def __cuda_array_interface__(self):
        a = self.a
        return {"shape": a.shape, "typestr": a.dtype.str, "version": 3,
                "data": (a.__array_interface__["data"][0], not a.flags.writeable),
                "strides": None if a.flags.c_contiguous else a.strides}

    shape = property(lambda self: self.a.shape)
    dtype = property(lambda self: self.a.dtype)
    ndim = property(lambda self: self.a.ndim)
    size = property(lambda self: self.a.size)
    T = property(lambda self: FakeArray(self.a.T, self.device))

    def get(self) -> np.ndarray:
        """A host copy (CuPy's .get())."""
        return self.a.copy()

    def __array__(self, *_, **__):
        raise TypeError("implicit conversion of a FakeArray to NumPy is not allowed (.get())")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        out = kwargs.get("out")
        r = getattr(ufunc, method)(*unwrap(inputs), **unwrap(kwargs))
        if out is not None:
            return out[0] if len(out) == 1 else out
        return wrap(r, self.device)

    def __array_function__(self, func, types, args, kwargs):
        return wrap(func(*unwrap(args), **unwrap(kwargs)), self.device)

    def __getitem__(self, idx):
        return wrap(self.a[unwrap(idx)], self.device)

    def __setitem__(self, idx, value):
        self.a[unwrap(idx)] = unwrap(value)

    def __len__(self):
        return len(self.a)

    def __bool__(self):
        return bool(self.a)

    def __float__(self):
        return float(self.a)

    def item(self):
        return self.a.item()

    def __getattr__(self, name):  # methods: sum, mean, reshape, astype, copy, ...
        attr = getattr(self.a, name)
        if not callable(attr):
            return attr

        def method(*args, **kwargs):
            return wrap(attr(*unwrap(args), **unwrap(kwargs)), self.device)
        return method

    def __repr__(self):
        return f"FakeArray({self.a!r}, device={self.device})"


def _namespace() -> types.ModuleType:
    mod = types.ModuleType("fakecupy", "CuPy's spelling over FakeArray")
    for name in ("exp", "log", "sqrt", "tanh", "abs", "maximum", "minimum", "where", "sum",
                 "mean", "max", "min", "var", "std", "clip", "square", "log1p", "sin", "cos",
                 "zeros_like", "ones_like", "matmul"):
        np_fn = getattr(np, name)

        def fn(*args, _np_fn=np_fn, **kwargs):
            device = next((a.device for a in args if isinstance(a, FakeArray)), 0)
            return wrap(_np_fn(*unwrap(args), **unwrap(kwargs)), device)
        fn.__name__ = fn.__qualname__ = name
        fn.__module__ = "fakecupy"
        setattr(mod, name, fn)
    mod.float32, mod.float64, mod.pi = np.float32, np.float64, np.pi

    def asarray(x, dtype=None):
        return x if isinstance(x, FakeArray) else FakeArray(np.array(x, dtype=dtype))
    asarray.__module__ = "fakecupy"
    mod.asarray = asarray
    return mod


fakecupy = _namespace()


class FakeLibrary(cuda_arrays.Library):
    name = "fakecuda"
    namespaces = ("fakecupy",)
    host_memory = True

    def __init__(self, capabilities=None, numpy_api=True, name="fakecuda"):
        self.capabilities = capabilities or {0: (9, 0), 1: (8, 0)}
        self.numpy_api = numpy_api
        self.name = name
        self.allocated = 0
        self.matmuls = 0

    def owns(self, x):
        return isinstance(x, FakeArray)

    def device(self, x):
        return x.device

    def capability(self, device):
        return self.capabilities[device]

    def empty(self, shape, dtype, device, like):
        self.allocated += 1
        return FakeArray(np.empty(shape, dtype), device)

    def matmul(self, a, b, out):
        self.matmuls += 1
        np.matmul(a.a, b.a, out=out.a)


@contextmanager
def fake_library(**kw):
    lib = FakeLibrary(**kw)
    sys.modules["fakecupy"] = fakecupy
    cuda_arrays.register(lib)
    try:
        yield lib
    finally:
        cuda_arrays.unregister(lib.name)
