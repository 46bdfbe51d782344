#!/usr/bin/env bash
# The device checks of the cuda backend, on a machine with an NVIDIA GPU, its driver,
# the CUDA toolkit (NVRTC) and CuPy: the tests in this folder (they skip, saying why, on
# a machine without them), then bench/python/run_gpu.py --quick (the peer table on the GPU).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
export DYNEXPR_CACHE_DIR=${DYNEXPR_CACHE_DIR:-$PWD/build-gpu-cache}
# The C++ CUDA API (include/dynexpr/cuda/): its doctest suite, emulated and device cases,
# built for the device's own architecture, and the example.
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
mkdir -p build-gpu
NVFLAGS=(-std=c++20 --expt-relaxed-constexpr -arch=native -I include)
timeout 300 "$NVCC" "${NVFLAGS[@]}" tests/gpu/test_cuda_cpp.cu -o build-gpu/test_cuda_cpp
timeout 120 build-gpu/test_cuda_cpp
timeout 300 "$NVCC" "${NVFLAGS[@]}" examples/cuda/quickstart.cu -o build-gpu/quickstart_cuda
timeout 60 build-gpu/quickstart_cuda
timeout 480 "$PY" -m pytest tests/gpu -q -rs -p no:cacheprovider "$@"
timeout 420 "$PY" bench/python/run_gpu.py --quick --json build-gpu/run_gpu.json
