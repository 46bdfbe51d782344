"""What every device test checks first: CuPy, and why no GPU run is possible here (None
where one is). Tests mark themselves `pytestmark = needs_gpu`."""

import pytest
from dynexpr.backends import cuda_driver, nvrtc

WHY = nvrtc.available() or cuda_driver.available()
try:
    import cupy
except ImportError:  # pragma: no cover - depends on the machine
    cupy = None
    WHY = WHY or "CuPy is not installed (pip install cupy-cuda13x)"
needs_gpu = pytest.mark.skipif(WHY is not None, reason=f"no GPU run possible: {WHY}")
