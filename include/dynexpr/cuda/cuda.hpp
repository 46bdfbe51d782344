// dynexpr/cuda/cuda.hpp — the C++ CUDA API, for .cu files compiled by nvcc: device
// arrays (dx::cuda::device_view, device_tensor, to_device, to_host) and device
// evaluation of the pointwise expression templates (dx::cuda::assign, dx::cuda::eval).
// See examples/cuda/quickstart.cu and Note [device leaves] in cuda/evaluate.hpp.
//
// nvcc flags: -std=c++20 --expt-relaxed-constexpr (the op bodies call constexpr
// standard-library functions such as std::numeric_limits<T>::max()), and the include
// directories of Highway and Boost.Hana, which the op table includes (op_support.hpp).
#pragma once

#if !defined(__CUDACC__)
#error "dynexpr/cuda/cuda.hpp is for CUDA sources (.cu) compiled by nvcc; C++ code includes dynexpr/dynexpr.hpp"
#endif

#include "dynexpr/core/config.hpp"
// config.hpp first: it sets Highway's static-dispatch mode before Highway is included.
#include "dynexpr/cuda/device.hpp"
#include "dynexpr/cuda/evaluate.hpp"

namespace dynexpr::cuda {
// device_view lives here, so argument-dependent lookup of `x * 2` on device views looks
// here and not in namespace dynexpr, where the operators are: bring them in.
#define DYNEXPR_CUDA_USING(SYM, OP) using dynexpr::operator SYM;
DYNEXPR_BINARY_OPERATORS(DYNEXPR_CUDA_USING)
#undef DYNEXPR_CUDA_USING
using dynexpr::operator~;
using dynexpr::operator!;
}  // namespace dynexpr::cuda
