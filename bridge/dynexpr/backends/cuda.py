"""backend="cuda": a captured graph's schedule rendered as CUDA kernels (cuda_codegen.py),
compiled by NVRTC for the device's sm_XX into the store (nvrtc.py: kernel.cubin and
kernel.ptx, keyed by source, NVRTC version, arch and flags) and launched through the
driver API (cuda_driver.py, UNTESTED ON A DEVICE: see its docstring).

A captured function called with CUDA arrays (CuPy, torch, __cuda_array_interface__)
reaches this backend through capture's device path (cuda_run.py), whichever backend it was
captured with. What works without a GPU: codegen, NVRTC compiles, and the host emulation
of the kernels (cuda_emulate.py, CudaEmulationBackend), which the device path also drives
with a test library whose memory is the host's. Without NVRTC or libcuda, unavailable()
says so and the device path runs the function as plain Python on the caller's library.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .. import cache
from ..schedule import schedule
from . import cuda_arrays, cuda_codegen, nvrtc
from .base import Backend, Plan


class CudaBackend(Backend):
    name = "cuda"
    artifact = nvrtc.ARTIFACT
    targets_cuda = True  # CUDA arrays run on it (cuda_run.py)
    fallbacks = False  # NumPy inputs are the user's error, not a reason to fall back

    def unavailable(self) -> str | None:
        from . import cuda_driver
        return nvrtc.available() or cuda_driver.available()

    def check_inputs(self, example_inputs: Sequence[Any]) -> None:
        cuda_arrays.described_inputs(example_inputs, host=False)

    def codegen(self, graph, example_inputs: Sequence[Any], *, fuse: bool = True) -> Plan:
        described = cuda_arrays.described_inputs(example_inputs, host=False)
        device = cuda_arrays.one_device(described.values())
        contiguous = {i for i, d in described.items() if d.c_contiguous}
        unit = cuda_codegen.generate(schedule(graph, fuse=fuse), contiguous)
        device = 0 if device is None else device
        lib = next(iter(described.values())).library if described else None
        if lib is not None:
            major, minor = lib.capability(device)
            arch = f"sm_{major}{minor}"
        else:
            from . import cuda_driver
            arch = cuda_driver.arch(device)
        return Plan(graph, nvrtc.key(unit.source, arch), unit.source, (unit, arch, device))

    def cached(self, plan: Plan) -> Callable | None:
        from . import cuda_driver
        unit, _, device = plan.detail
        art = cache.lookup(plan.key, nvrtc.ARTIFACT)
        return None if art is None else cuda_driver.load(unit, art.path, device)

    def build(self, plan: Plan) -> Callable:
        from . import cuda_driver
        unit, arch, device = plan.detail
        return cuda_driver.load(unit, nvrtc.compile_cached(unit.source, arch).path, device)
