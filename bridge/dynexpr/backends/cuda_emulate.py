"""The host emulation of generated CUDA units: the same source (cuda_codegen.py) compiled
as host C++ by g++ with a small shim, run on NumPy arrays. It checks the kernels' logic
(indexing, broadcasting, strides, reductions, launch order) on machines without a GPU;
it is a test tool and a debugging backend, not a fast path.

    fn = emulate(unit)            # unit: cuda_codegen.CudaUnit
    outputs = fn(*inputs)         # the calling convention of eager.py
    capture(f, backend=CudaEmulationBackend())   # a whole captured function, emulated

Note [the emulation shim]
blockIdx/threadIdx/blockDim/gridDim are globals; a launch loops blockIdx.x over the grid
and calls the kernel once per block. Inside, every phase of a kernel (Note [phases] in
cuda_prelude.py) loops threadIdx.x over the block (DXCU_THREADS), so all threads finish a
phase before any starts the next: that is what __syncthreads() guarantees on the device,
so DXCU_SYNC is empty here, and only here. __shared__ arrays are function-static
(blocks run one after another). Values that outlive a phase are either in shared memory
or computed from blockIdx alone, which the generator keeps to, so the order of every
combination in a reduction is the device's.
"""

from __future__ import annotations

import ctypes
import hashlib
from pathlib import Path

import numpy as np

from .. import cache, codegen, cxx, eager
from ..toolchain import run_tool
from . import cuda_arrays
from .base import Backend, Plan
from .cuda_bind import bind
from .cuda_codegen import CudaUnit, evaluate, generate
from .cuda_prelude import ERRORS

SHIM = r"""// dxcu_emulate.h: CUDA's launch model on the host (Note [the emulation shim]).
#pragma once
struct dxcu_dim3 { unsigned x = 1, y = 1, z = 1; };
inline dxcu_dim3 threadIdx, blockIdx, blockDim, gridDim;
inline int dxcu_error;
#define __global__
#define __device__
#define __host__
#define __launch_bounds__(n)
#define __restrict__
#define DXCU_HD
#define DXCU_THREADS for (threadIdx.x = 0; threadIdx.x < blockDim.x; ++threadIdx.x)
#define DXCU_SYNC
#define DXCU_SHARED static
template <class F> void dxcu_launch(unsigned grid, unsigned block, F body) {
  gridDim.x = grid;
  blockDim.x = block;
  for (blockIdx.x = 0; blockIdx.x < grid; ++blockIdx.x) body();
}
"""

FLAGS = ("-O1", "-std=c++20", "-shared", "-fPIC", "-fno-strict-aliasing",
         "-ffp-contract=off", "-w")


def driver(unit: CudaUnit) -> str:
    """extern "C" int dxcu_run_<s>(void** arrays, const long long* vals), one per segment
    of the unit's launches between two library calls (Note [matmul through the library]
    in cuda_codegen.py), the launches of the segment in order; arrays in unit.arrays
    order; vals the call's run-time numbers in slots(unit) order (grids, strides, dynamic
    extents); each returns the unit's error word."""
    names = list(unit.arrays)
    pos = {slot: k for k, slot in enumerate(slots(unit))}
    lines = ['extern "C" int dxcu_run_0(void** arrays, const long long* vals) {',
             "  (void)vals;", "  dxcu_error = 0;"]
    seg = 0
    for n, la in enumerate(unit.launches):
        if la.library_call is not None:
            seg += 1
            lines += ["  return dxcu_error;", "}",
                      f'extern "C" int dxcu_run_{seg}(void** arrays, const long long* vals) {{',
                      "  (void)vals;"]
            continue
        args = []
        for arg in la.args:
            if arg[0] == "ptr":
                a = unit.arrays[arg[1]]
                args.append(f"({_ct(a.dtype)}*)arrays[{names.index(arg[1])}]")
            elif arg[0] == "scalar":
                args.append(f"({_ct(arg[1])})({codegen.scalar_literal(arg[2], arg[1])})")
            else:
                args.append(f"vals[{pos[arg]}]")
        grid = la.grid if isinstance(la.grid, int) else f"vals[{pos[('grid', n)]}]"
        lines.append(f"  dxcu_launch({grid}, {la.block}, [&] {{ {la.kernel}({', '.join(args)}); }});")
    lines += ["  return dxcu_error;", "}"]
    return "\n".join(lines)


def slots(unit: CudaUnit) -> list:
    """The run-time numbers a call passes: dynamic grids, strides, ("count", expr)s."""
    out = []
    for n, la in enumerate(unit.launches):
        if not isinstance(la.grid, int):
            out.append(("grid", n))
        out += [arg for arg in la.args if arg[0] in ("stride", "count") and arg not in out]
    return out


def _ct(dtype: str) -> str:
    from .cuda_codegen import CT
    return CT[dtype]


def build(unit: CudaUnit) -> Path:
    """The emulation library of unit, from the store (compiled by g++ on a miss)."""
    text = unit.source + "\nnamespace dxcu {\n" + driver(unit) + "\n}\n"
    # the driver is inside namespace dxcu so that scalar literals' std:: is dxcu::std;
    # its extern "C" name is global all the same.
    key = hashlib.sha256(b"dynexpr cuda emulation\0" + SHIM.encode() + text.encode()
                         + cxx.toolchain().fingerprint().encode()).hexdigest()

    def make(tmp: Path, final: Path) -> None:
        (tmp / "dxcu_emulate.h").write_text(SHIM)
        (tmp / "unit.cpp").write_text(text)
        cmd = [cxx.toolchain().cxx, *FLAGS, f"-I{tmp}", str(tmp / "unit.cpp"), "-o",
               str(tmp / "emulate.so")]
        r = run_tool(cmd)
        if r.returncode != 0:
            raise RuntimeError(f"dynexpr: the CUDA emulation unit did not compile "
                               f"({' '.join(cmd)}):\n{r.stderr[-4000:]}")
        cache.stats["compiles"] += 1

    return cache.get_or_build(key, {"backend": "cuda-emulate"}, make, "emulate.so").path


def emulate(unit: CudaUnit):
    """f(*inputs) -> outputs running unit's launches on the host (eager.py's convention)."""
    lib = ctypes.CDLL(str(build(unit)))
    calls = [la.library_call for la in unit.launches if la.library_call is not None]
    segments = [getattr(lib, f"dxcu_run_{s}") for s in range(len(calls) + 1)]
    for run in segments:
        run.restype = ctypes.c_int
        run.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_longlong)]
    names = list(unit.arrays)
    order = slots(unit)

    def f(*inputs):
        b = bind(unit, inputs, host=True)
        ptrs = (ctypes.c_void_p * len(names))(*[b.ptr[n] for n in names])
        vals = []
        for slot in order:
            if slot[0] == "grid":
                vals.append(evaluate(unit.launches[slot[1]].grid, b.dims))
            elif slot[0] == "stride":
                vals.append(b.strides[slot[1]][slot[2]])
            else:
                vals.append(evaluate(slot[1], b.dims))
        cvals = (ctypes.c_longlong * max(1, len(vals)))(*vals)
        err = 0
        for s, run in enumerate(segments):
            if s:  # the library call between segments s-1 and s
                op, *arrays = calls[s - 1]
                args = [b.arrays[n] for n in arrays]
                if b.library is None:
                    getattr(np, op)(*args[:-1], out=args[-1])
                else:
                    getattr(b.library, op)(*args[:-1], out=args[-1])
            err = err or run(ptrs, cvals)
        if err:
            raise ValueError(ERRORS.get(err, f"dynexpr: CUDA unit error {err}"))
        return b.results(unit, inputs)

    return f


class CudaEmulationBackend(Backend):
    """capture(fn, backend=CudaEmulationBackend()): the cuda backend's generated kernels
    run by the host emulation on NumPy arrays (tests, debugging a kernel without a GPU)."""

    name = "cuda-emulate"
    artifact = "emulate.so"
    targets_cuda = True  # the device path drives it with host-memory test arrays

    def __init__(self, strict: bool = False) -> None:
        # strict: a graph the CUDA codegen cannot generate yet raises NotImplementedError
        # (tests); otherwise it runs with NumPy, as a user of a debugging backend expects.
        self.strict = strict

    def codegen(self, graph, example_inputs, *, fuse: bool = True) -> Plan:
        from ..schedule import schedule
        described = cuda_arrays.described_inputs(example_inputs, host=True)
        contiguous = {i for i, x in enumerate(example_inputs)
                      if (x.flags.c_contiguous if isinstance(x, np.ndarray)
                          else i in described and described[i].c_contiguous)}
        try:
            unit = generate(schedule(graph, fuse=fuse), contiguous)
        except NotImplementedError:
            if self.strict or described:  # NumPy cannot run a graph on CUDA arrays
                raise
            return Plan(graph, None, detail=None)  # not generated yet: NumPy runs it
        return Plan(graph, "emulate", unit.source, unit)

    def cached(self, plan: Plan):
        if plan.detail is None:
            return eager.compile_graph(plan.graph)
        return None

    def build(self, plan: Plan):
        return emulate(plan.detail)

