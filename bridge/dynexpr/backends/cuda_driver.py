"""The CUDA driver API through ctypes: module load and cuLaunchKernel of a generated unit.

UNTESTED ON A DEVICE. Written against the driver API's documented signatures, but no GPU
was available when it was written (the build machines have no libcuda); nothing here has
run. tests/gpu/test_cuda_launch.py exercises it where a GPU is found and is skipped,
with the reason, elsewhere. Do not rely on it before those tests have passed on a GPU.

    why = available()               # None, or why not (no libcuda.so.1, no device)
    fn = load(unit, cubin_path, device)   # f(*inputs) -> outputs, CUDA arrays in and out
    g = fn.replayed()               # the same, replayed as a CUDA graph (reduce-overhead)

Outputs, temporaries and workspaces are allocated through the arguments' library (CuPy,
torch: cuda_arrays.Library, cuda_bind.py) on their device; kernels are launched on that
library's current stream, so they are ordered with the caller's own work without a sync.
"""

from __future__ import annotations

import ctypes
import threading
from collections import OrderedDict

from .cuda_bind import Bound, bind, contiguous_strides
from .cuda_codegen import ITEMSIZE, CudaUnit, evaluate
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


def load(unit: CudaUnit, cubin_path, device: int = 0) -> Launcher:
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
    return Launcher(unit, device, funcs, err)


class Launcher:
    """A loaded unit: called, it launches the unit's kernels one by one."""

    def __init__(self, unit: CudaUnit, device: int, funcs: dict, err: ctypes.c_void_p) -> None:
        self.unit, self.device, self.funcs, self.err = unit, device, funcs, err
        # Only integer powers set the error word: other units skip the synchronising read.
        self.raises = any(v.op == "power" and v.dtype not in ("float32", "float64")
                          for v in unit.schedule.values)

    def __call__(self, *inputs):
        b = self.bind(inputs, allocate=True)
        stream = b.library.stream(self.device, inputs)
        self.clear_error(stream)
        for la in self.unit.launches:
            if la.library_call is not None:  # Note [matmul through the library]
                op, *names = la.library_call
                getattr(b.library, op)(*[b.arrays[n] for n in names[:-1]], out=b.arrays[names[-1]])
                continue
            self.launch(la, b, stream)
        self.check_error(stream)
        return b.results(self.unit, inputs)

    def replayed(self) -> Replay:
        """This unit as a CUDA graph replayed on each call (Note [CUDA graph replay])."""
        return Replay(self)

    def bind(self, inputs, *, allocate: bool) -> Bound:
        b = bind(self.unit, inputs, host=False, allocate=allocate)
        if b.device != self.device:
            raise TypeError(f"dynexpr: this unit was loaded for CUDA device {self.device}; "
                            f"the arguments are on device {b.device}")
        _context(self.device)
        return b

    def launch(self, la, b: Bound, stream: int) -> None:
        """cuLaunchKernel of one launch with b's pointers, strides and extents (the driver
        copies the parameter values: the ctypes objects may go after the call)."""
        vals = []
        for arg in la.args:
            if arg[0] == "ptr":
                vals.append(ctypes.c_void_p(b.ptr[arg[1]]))
            elif arg[0] == "stride":
                vals.append(ctypes.c_longlong(b.strides[arg[1]][arg[2]]))
            elif arg[0] == "count":
                vals.append(ctypes.c_longlong(evaluate(arg[1], b.dims)))
            else:
                vals.append(_CTYPES[arg[1]](arg[2]))
        params = (ctypes.c_void_p * max(1, len(vals)))(
            *[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in vals])
        _check(_lib.cuLaunchKernel(self.funcs[la.kernel], evaluate(la.grid, b.dims), 1, 1,
                                   la.block, 1, 1, 0, ctypes.c_void_p(stream), params, None),
               f"cuLaunchKernel({la.kernel})")

    def clear_error(self, stream: int) -> None:
        if self.raises:
            _check(_lib.cuMemsetD32Async(self.err, 0, 1, ctypes.c_void_p(stream)),
                   "cuMemsetD32Async")

    def check_error(self, stream: int) -> None:
        if not self.raises:
            return
        code = ctypes.c_int()
        _check(_lib.cuStreamSynchronize(ctypes.c_void_p(stream)), "cuStreamSynchronize")
        _check(_lib.cuMemcpyDtoH_v2(ctypes.byref(code), self.err, 4), "reading the error word")
        if code.value:  # a synchronising read: the price of NumPy's ValueError
            raise ValueError(ERRORS.get(code.value, f"dynexpr: CUDA unit error {code.value}"))


# Note [CUDA graph replay]
# mode="reduce-overhead" on the cuda backend (torch.compile's name and design): a unit's
# launches are captured once into a CUDA graph, per set of extents and input strides, and
# each later call is one cuGraphLaunch on the caller's stream instead of one cuLaunchKernel
# (and its Python argument packing) per kernel. A graph is also per stream: its buffers
# are then used in one stream's order only, and two threads on two streams never copy
# into or out of the same buffers at once.
# - A graph holds every pointer it was captured with. Outputs, temporaries and workspaces
#   are the graph's own buffers, allocated at capture and kept with it.
# - An input is read where it was at capture for as long as each call passes it at that
#   address: a model's parameters, or a buffer the caller refills in place. An input that
#   comes at a new address is from then on copied into a static buffer of the graph
#   before each replay (cuMemcpyDtoDAsync; the library's copy for a strided input), and
#   the graph is captured again once, reading that buffer. So a unit re-captures at most
#   once per input, and the copies are only of inputs that move.
# - Results are copied out of the graph's outputs into new arrays of the caller's library,
#   so that a later replay never overwrites an array a caller holds (torch.compile hands
#   out its static outputs instead and fails on their use after the next replay). The
#   copies are one more kernel per output: reduce-overhead is for small, launch-bound
#   graphs, where they are cheap; large ones are as fast in the default mode.
# - Captured on a stream of dynexpr's own (capture is not allowed on the legacy default
#   stream that CuPy and torch use unless told otherwise), in thread-local mode, and
#   launched on the caller's current stream, so it is ordered after the caller's work.
# - Launched kernel by kernel as in the default mode, and explain says why: units with a
#   library call between kernels (matmul through cuBLAS runs on the library's stream,
#   outside the capture) and units that write an argument in place (a copied-in argument
#   would be written in the graph's buffer, not the caller's).
# - At most GRAPHS_PER_UNIT graphs (sets of extents) are kept; the least recently used
#   goes (cuGraphExecDestroy frees an in-flight graph when it completes).
GRAPHS_PER_UNIT = 8
_CAPTURE_THREAD_LOCAL = 1  # CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
_STREAM_NON_BLOCKING = 1   # CU_STREAM_NON_BLOCKING


class _Graph:
    __slots__ = ("at", "bound", "exec", "static")

    def __init__(self, exec_, bound: Bound, static: dict, at: dict) -> None:
        self.exec = exec_      # the CUgraphExec
        self.bound = bound     # the pointers it holds: its own outputs and temporaries
        self.static = static   # input name -> the graph's buffer it is copied into
        self.at = at           # input name -> the address it is read at, in place


class Replay:
    """A Launcher's unit replayed as CUDA graphs (Note [CUDA graph replay])."""

    def __init__(self, launcher: Launcher) -> None:
        self.launcher = launcher
        unit = launcher.unit
        self.graphs: OrderedDict = OrderedDict()
        self.moving: set[str] = set()  # inputs seen at a new address: copied in
        self.captures = 0
        self._lock = threading.Lock()
        self._stream: ctypes.c_void_p | None = None  # dynexpr's capture stream
        self.why_not = (
            "it calls a library routine between kernels (a matmul through cuBLAS)"
            if any(la.library_call is not None for la in unit.launches) else
            "it writes an argument in place" if unit.schedule.graph.mutations else None)

    def __call__(self, *inputs):
        if self.why_not is not None:
            return self.launcher(*inputs)
        la = self.launcher
        b = la.bind(inputs, allocate=False)
        stream = b.library.stream(la.device, inputs)
        key = (stream, tuple(sorted(b.dims.items())),
               tuple((n, tuple(st)) for n, st in sorted(b.strides.items())))
        with self._lock:
            g = self.graphs.get(key)
            if g is not None:
                moved = {n for n, p in g.at.items() if b.ptr[n] != p}
                if moved:
                    self.moving |= moved
                    self._drop(key)
                    g = None
            if g is None:
                g = self._capture(inputs, key)
            else:
                self.graphs.move_to_end(key)
            for n, buf in g.static.items():
                self._copy_in(b, n, buf, stream)
            la.clear_error(stream)
            _check(_lib.cuGraphLaunch(g.exec, ctypes.c_void_p(stream)), "cuGraphLaunch")
            la.check_error(stream)
            outs = {r: b.library.copy(g.bound.arrays[f"o{r}"])
                    for r in dict.fromkeys(la.unit.schedule.results) if r >= 0}
        return tuple(inputs[-r - 1] if r < 0 else outs[r] for r in la.unit.schedule.results)

    def _capture(self, inputs, key) -> _Graph:
        la = self.launcher
        full = la.bind(inputs, allocate=True)  # the graph's own outputs and temporaries
        static = {}
        for n in sorted(self.moving & set(full.ptr)):
            if n[0] != "x":
                continue
            a = la.unit.arrays[n]
            shape = tuple(int(d) for d in a.extents(full.dims))
            buf = full.library.empty(shape, a.dtype, la.device, inputs)
            static[n] = buf
            full.ptr[n] = int(buf.__cuda_array_interface__["data"][0])
            full.strides[n] = contiguous_strides(shape)
            full.arrays[n] = buf
        if self._stream is None:
            s = ctypes.c_void_p()
            _check(_lib.cuStreamCreate(ctypes.byref(s), _STREAM_NON_BLOCKING), "cuStreamCreate")
            self._stream = s
        stream = self._stream.value or 0
        _check(_lib.cuStreamBeginCapture_v2(self._stream, _CAPTURE_THREAD_LOCAL),
               "cuStreamBeginCapture")
        graph, exec_ = ctypes.c_void_p(), ctypes.c_void_p()
        try:
            try:
                for launch in la.unit.launches:
                    la.launch(launch, full, stream)
            finally:  # the stream leaves capture mode whatever happened
                ended = _lib.cuStreamEndCapture(self._stream, ctypes.byref(graph))
            _check(ended, "cuStreamEndCapture")
            _check(_lib.cuGraphInstantiateWithFlags(ctypes.byref(exec_), graph,
                                                    ctypes.c_ulonglong(0)),
                   "cuGraphInstantiateWithFlags")
        finally:
            if graph.value:
                _lib.cuGraphDestroy(graph)  # the executable graph keeps what it needs
        at = {n: p for n, p in full.ptr.items() if n[0] == "x" and n not in static}
        g = _Graph(exec_, full, static, at)
        self.graphs[key] = g
        self.captures += 1
        while len(self.graphs) > GRAPHS_PER_UNIT:
            self._drop(next(iter(self.graphs)))
        return g

    def _copy_in(self, b: Bound, name: str, buf, stream: int) -> None:
        a = self.launcher.unit.arrays[name]
        shape = a.extents(b.dims)
        if list(b.strides[name]) == contiguous_strides(shape):
            n = ITEMSIZE[a.dtype]
            for d in shape:
                n *= int(d)
            dst = int(buf.__cuda_array_interface__["data"][0])
            _check(_lib.cuMemcpyDtoDAsync_v2(ctypes.c_uint64(dst), ctypes.c_uint64(b.ptr[name]),
                                             ctypes.c_size_t(n), ctypes.c_void_p(stream)),
                   "cuMemcpyDtoDAsync (an input into the CUDA graph's buffer)")
        else:
            b.library.copy_into(buf, b.arrays[name])

    def _drop(self, key) -> None:
        g = self.graphs.pop(key)
        _lib.cuGraphExecDestroy(g.exec)

    def describe(self) -> str:
        if self.why_not is not None:
            return f"launched kernel by kernel, not as a CUDA graph: {self.why_not}"
        moving = ", ".join(sorted(self.moving)) or "none"
        return (f"a CUDA graph per set of extents ({len(self.graphs)} kept, "
                f"{self.captures} captured); inputs copied in: {moving}")
