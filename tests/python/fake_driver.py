"""A stand-in for libcuda.so.1 on machines without a GPU, for the driver-API launcher
(backends/cuda_driver.py): it answers the calls the launcher makes, records them, and
runs what a CUDA graph holds on the host.

Kernels launched directly are recorded, not run. A CUDA graph is recorded at capture
(the kernels and their decoded parameters: pointers, strides, counts, grids) and, at each
cuGraphLaunch, run as the host emulation of the unit (cuda_emulate.py) with exactly the
pointers, strides and extents the graph holds. Its arrays live in host memory
(fake_cuda.FakeLibrary), so the results can be compared with NumPy's: what this checks is
the graph's bookkeeping (which buffers it reads and writes, what is copied in and out),
not the driver, which only a GPU can check (tests/gpu/).

    drv = FakeDriver(unit)
    monkeypatch.setattr(cuda_driver, "_lib", drv)   # (see install())
"""

from __future__ import annotations

import ctypes

from dynexpr.backends import cuda_emulate
from dynexpr.backends.cuda_codegen import CudaUnit


def _val(x) -> int:
    """The integer a ctypes argument carries (c_void_p(0).value is None)."""
    v = getattr(x, "value", x)
    return int(v or 0)


class FakeDriver:
    def __init__(self, unit: CudaUnit) -> None:
        self.unit = unit
        self.log: list[tuple] = []         # (call, details) in order
        self.functions: dict[int, str] = {}
        self.capturing: dict[int, list] = {}  # stream -> launches recorded so far
        self.graphs: dict[int, list] = {}
        self.execs: dict[int, list] = {}
        self.destroyed: list[int] = []
        self._next = 0x1000
        self._emulated = None

    def _handle(self) -> int:
        self._next += 16
        return self._next

    def calls(self, name: str) -> list:
        return [d for c, d in self.log if c == name]

    # context and module -----------------------------------------------------------------
    def cuDeviceGet(self, ref, ordinal):
        ref._obj.value = ordinal
        return 0

    def cuDevicePrimaryCtxRetain(self, ref, dev):
        ref._obj.value = 0x77
        return 0

    def cuCtxSetCurrent(self, ctx):
        return 0

    def cuModuleLoadData(self, ref, data):
        ref._obj.value = self._handle()
        return 0

    def cuModuleGetFunction(self, ref, module, name):
        h = self._handle()
        ref._obj.value = h
        self.functions[h] = name.decode()
        return 0

    def cuModuleGetGlobal_v2(self, ref, size_ref, module, name):
        ref._obj.value = self._handle()
        size_ref._obj.value = 4
        return 0

    def cuGetErrorName(self, rc, ref):
        ref._obj.value = b"CUDA_ERROR_FAKE"
        return 0

    # launches ---------------------------------------------------------------------------
    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):
        name = self.functions[_val(fn)]
        la = next(la for la in self.unit.launches if la.kernel == name)
        decoded = []
        for k, arg in enumerate(la.args):
            if arg[0] == "ptr":
                decoded.append(ctypes.c_void_p.from_address(params[k]).value or 0)
            elif arg[0] in ("stride", "count"):
                decoded.append(ctypes.c_longlong.from_address(params[k]).value)
            else:
                decoded.append(None)  # a scalar: the emulation has it in its source
        rec = (name, int(gx), decoded)
        s = _val(stream)
        if s in self.capturing:
            self.capturing[s].append(rec)
        else:
            self.log.append(("launch", rec))
        return 0

    def cuStreamCreate(self, ref, flags):
        ref._obj.value = self._handle()
        self.log.append(("stream", flags))
        return 0

    def cuStreamBeginCapture_v2(self, stream, mode):
        self.capturing[_val(stream)] = []
        self.log.append(("begin capture", (_val(stream), mode)))
        return 0

    def cuStreamEndCapture(self, stream, ref):
        h = self._handle()
        self.graphs[h] = self.capturing.pop(_val(stream))
        ref._obj.value = h
        self.log.append(("end capture", h))
        return 0

    def cuGraphInstantiateWithFlags(self, ref, graph, flags):
        h = self._handle()
        self.execs[h] = list(self.graphs[_val(graph)])
        ref._obj.value = h
        return 0

    def cuGraphDestroy(self, graph):
        del self.graphs[_val(graph)]
        return 0

    def cuGraphExecDestroy(self, exec_):
        self.destroyed.append(_val(exec_))
        del self.execs[_val(exec_)]
        return 0

    def cuGraphLaunch(self, exec_, stream):
        launches = self.execs[_val(exec_)]
        self.log.append(("graph launch", (_val(exec_), _val(stream), launches)))
        self._run(launches)
        return 0

    def cuMemcpyDtoDAsync_v2(self, dst, src, n, stream):
        self.log.append(("memcpy", (_val(dst), _val(src), _val(n))))
        ctypes.memmove(_val(dst), _val(src), _val(n))
        return 0

    # the graph's launches on the host -----------------------------------------------------
    def _run(self, launches: list) -> None:
        """The unit's emulation with the pointers and numbers the graph holds."""
        unit = self.unit
        if self._emulated is None:
            lib = ctypes.CDLL(str(cuda_emulate.build(unit)))
            self._emulated = lib.dxcu_run_0
            self._emulated.restype = ctypes.c_int
            self._emulated.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                                       ctypes.POINTER(ctypes.c_longlong)]
        assert [r[0] for r in launches] == [la.kernel for la in unit.launches], \
            "a graph holds every launch of the unit, in order"
        ptr: dict[str, int] = {}
        value: dict[tuple, int] = {}
        for n, (la, (_, grid, decoded)) in enumerate(zip(unit.launches, launches)):
            value[("grid", n)] = grid
            for arg, v in zip(la.args, decoded):
                if arg[0] == "ptr":
                    assert ptr.setdefault(arg[1], v) == v, f"{arg[1]} at two addresses"
                elif arg[0] in ("stride", "count"):
                    value[arg] = v
        names = list(unit.arrays)
        ptrs = (ctypes.c_void_p * len(names))(*[ptr.get(nm, 0) for nm in names])
        vals = [value[slot] for slot in cuda_emulate.slots(unit)]
        cvals = (ctypes.c_longlong * max(1, len(vals)))(*vals)
        assert self._emulated(ptrs, cvals) == 0
