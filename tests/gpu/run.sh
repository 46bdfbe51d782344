#!/usr/bin/env bash
# The device checks of the cuda backend, on a machine with an NVIDIA GPU, its driver,
# the CUDA toolkit (NVRTC) and CuPy: the tests in this folder (they skip, saying why, on
# a machine without them). bench/python/run_gpu.py (issue 14, item 6) is not written yet.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
export DYNEXPR_CACHE_DIR=${DYNEXPR_CACHE_DIR:-$PWD/build-gpu-cache}
timeout 480 "$PY" -m pytest tests/gpu -q -rs -p no:cacheprovider "$@"
