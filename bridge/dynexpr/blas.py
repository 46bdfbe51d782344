"""dynexpr.blas — finds the CBLAS NumPy calls, for dx::matmul in generated units.

Note [NumPy's BLAS]
A captured `A @ x` must run what `np.matmul` runs: NumPy's BLAS, with its threads. NumPy's
extension module links that library, so dlsym through the module's handle (which searches
its dependencies) finds the CBLAS entry points under the names NumPy's build gives them:
`scipy_cblas_dgemm64_` for the scipy-openblas64 wheels (ILP64), `cblas_dgemm64_` for an
ILP64 system OpenBLAS, plain `cblas_dgemm` for an LP64 one (Debian, conda's MKL or
OpenBLAS). The pointers go to the runtime library (`dynexpr_rt_set_blas`, kernels/
runtime.cpp) once, when it is loaded; without them a unit's product runs a vectorised
row loop split over the pool (detail::loop_product in include/dynexpr/interop/matmul.hpp).
ssyrk/dsyrk under the same names, where the library has them, take `a @ a.T` as NumPy
does (Note [Gram products] there). `DYNEXPR_BLAS=0` turns the hook off.
"""

from __future__ import annotations

import ctypes
import logging
import os

log = logging.getLogger("dynexpr.blas")

# (name pattern, ILP64) in the order tried; {} is sgemm, dgemm, sgemv, dgemv.
_PATTERNS = (("scipy_cblas_{}64_", True), ("cblas_{}64_", True),
             ("scipy_cblas_{}", False), ("cblas_{}", False))
_ROUTINES = ("sgemm", "dgemm", "sgemv", "dgemv")
_OPTIONAL = ("ssyrk", "dsyrk")  # null where the library lacks them
_found: dict = {}


def numpy_cblas() -> tuple[tuple[int, ...], bool, tuple[int | None, ...]] | None:
    """((sgemm, dgemm, sgemv, dgemv) addresses, ILP64, (ssyrk, dsyrk) addresses or None)
    of NumPy's CBLAS, or None when NumPy exposes none (then units run the row loop).
    Looked up once per process."""
    if "v" not in _found:
        _found["v"] = _lookup()
    return _found["v"]


def _lookup():
    if os.environ.get("DYNEXPR_BLAS", "1") == "0":
        return None
    try:
        from numpy._core import _multiarray_umath as mod
    except ImportError:  # NumPy 1.x
        try:
            from numpy.core import _multiarray_umath as mod
        except ImportError:
            return None
    try:
        lib = ctypes.CDLL(mod.__file__)  # already loaded: this maps nothing new
    except OSError as e:
        log.info("dynexpr: NumPy's extension module does not load by path (%s): no BLAS", e)
        return None
    for pattern, ilp64 in _PATTERNS:
        addrs = tuple(_address(lib, pattern.format(r)) for r in _ROUTINES)
        if None not in addrs:
            log.info("dynexpr: matmul calls NumPy's BLAS (%s, %s)", pattern.format("dgemm"),
                     "ILP64" if ilp64 else "LP64")
            optional = tuple(_address(lib, pattern.format(r)) for r in _OPTIONAL)
            return addrs, ilp64, optional
    return None


def _address(lib, name: str) -> int | None:
    try:
        return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
    except AttributeError:
        return None


def install(rt_lib) -> bool:
    """Hands NumPy's CBLAS to the loaded runtime library; whether there was one."""
    found = numpy_cblas()
    if found is None:
        return False
    addrs, ilp64, optional = found
    fn = rt_lib.dynexpr_rt_set_blas
    fn.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int]
    fn.restype = None
    fn(*addrs, int(ilp64))
    set_syrk = getattr(rt_lib, "dynexpr_rt_set_blas_syrk", None)  # absent in older bundles
    if set_syrk is not None:
        set_syrk.argtypes = [ctypes.c_void_p] * 2
        set_syrk.restype = None
        set_syrk(*optional)
    return True
