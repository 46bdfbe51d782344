"""Device tests: they need an NVIDIA GPU with its driver (libcuda.so.1), NVRTC and CuPy,
and are skipped, with the reason, where any is missing (CI has no GPU)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
os.environ.setdefault("DYNEXPR_BACKGROUND_COMPILE", "0")
os.environ.setdefault("DYNEXPR_PLAIN_FALLBACK", "0")
