"""backend="cuda": a captured graph's schedule rendered as CUDA kernels (cuda_codegen.py),
compiled by NVRTC for the device's sm_XX into the store (nvrtc.py: kernel.cubin and
kernel.ptx, keyed by source, NVRTC version, arch and flags) and launched through the
driver API (cuda_driver.py, UNTESTED ON A DEVICE: see its docstring).

What works without a GPU: codegen, NVRTC compiles, and the host emulation of the kernels
(cuda_emulate.py, CudaEmulationBackend). On a machine without NVRTC or libcuda,
unavailable() says so and the policy runs the graph with NumPy (with a warning), like
any backend that cannot build. Capture does not yet accept CUDA arrays (CuPy, torch) as
arguments: the launcher is reached through cuda_driver.load for now (issue 14, part 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import cache
from ..schedule import schedule
from . import cuda_codegen, nvrtc
from .base import Backend, Plan


class CudaBackend(Backend):
    name = "cuda"
    artifact = nvrtc.ARTIFACT
    fallbacks = False  # NumPy inputs are the user's error, not a reason to fall back

    def unavailable(self) -> str | None:
        from . import cuda_driver
        return nvrtc.available() or cuda_driver.available()

    def codegen(self, graph, example_inputs: Sequence[Any], *, fuse: bool = True) -> Plan:
        from . import cuda_driver
        for i, x in enumerate(example_inputs):
            if isinstance(x, np.ndarray):
                raise TypeError(
                    f"dynexpr: capture(backend='cuda'): input {i} is a NumPy array; the cuda "
                    "backend takes CUDA arrays (CuPy) and never copies between host and "
                    "device silently: pass cupy.asarray(x), or use backend='cpu'")
        contiguous = {i for i, x in enumerate(example_inputs)
                      if _c_contiguous(getattr(x, "__cuda_array_interface__", None))}
        unit = cuda_codegen.generate(schedule(graph, fuse=fuse), contiguous)
        arch = cuda_driver.arch()
        return Plan(graph, nvrtc.key(unit.source, arch), unit.source, (unit, arch))

    def cached(self, plan: Plan) -> Callable | None:
        from . import cuda_driver
        art = cache.lookup(plan.key, nvrtc.ARTIFACT)
        return None if art is None else cuda_driver.load(plan.detail[0], art.path)

    def build(self, plan: Plan) -> Callable:
        from . import cuda_driver
        unit, arch = plan.detail
        return cuda_driver.load(unit, nvrtc.compile_cached(unit.source, arch).path)


def _c_contiguous(cai) -> bool:
    return cai is not None and cai.get("strides") is None
