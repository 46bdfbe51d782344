// dynexpr/ops/scalar_support.hpp — the scalar helpers the op bodies of ops/manifest.py
// call (integer wrap-around, NumPy's integer division corner cases, NaN-aware min/max),
// with no Highway: one text for the host, for nvcc's device code (dynexpr/cuda/) and for
// the NVRTC prelude of generated CUDA units. ops/op_support.hpp adds the SIMD helpers.
//
// Note [scalar support as device text]
// NVRTC has no standard library and cannot compile Highway, so the CUDA prelude
// (bridge/dynexpr/backends/cuda_prelude.py) cannot include op_support.hpp. It reads the
// lines between the BEGIN/END DEVICE TEXT markers below from this file (the copy
// installed with the package: toolchain.source_dirs()) and compiles them inside its own
// namespace, where `std` names its small replacement of the traits used here. So the
// text between the markers may use only: std::is_integral_v, is_signed_v,
// make_unsigned_t, is_float_v (dtype.hpp here, the prelude's own there),
// DYNEXPR_HOST_DEVICE and DYNEXPR_FP_FLAGS; no #include, no other std:: name outside a
// `#if DYNEXPR_FP_FLAGS` block.
//
// Note [floating-point flags on a device]
// NumPy's integer loops report division by zero and MIN // -1 through the floating-point
// status flags (Note [floating-point errors]); a GPU has no such flags. Device code
// (nvcc's device pass, NVRTC, and the host emulation of generated units, which stands for
// the device) gives NumPy's values without the report: DYNEXPR_FP_FLAGS is 0 there.
#pragma once

#include <cfenv>
#include <type_traits>

#include "dynexpr/core/config.hpp"
#include "dynexpr/core/dtype.hpp"

#ifndef DYNEXPR_FP_FLAGS
#if defined(__CUDA_ARCH__)
#define DYNEXPR_FP_FLAGS 0
#else
#define DYNEXPR_FP_FLAGS 1
#endif
#endif

namespace dynexpr::ops {
// BEGIN DEVICE TEXT (Note [scalar support as device text])
namespace detail {
/// Integer arithmetic that wraps modulo 2^bits as NumPy's does (signed overflow is
/// undefined behaviour in C++, so go through the unsigned type).
template <class T, class F>
DYNEXPR_HOST_DEVICE constexpr T wrapping(F f, T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(f(static_cast<U>(a), static_cast<U>(b)));
  } else {
    return static_cast<T>(f(a, b));
  }
}
/// An integer division by zero: 0, as NumPy gives, with NumPy's "divide by zero"
/// floating-point flag (its integer loops set it; Note [floating-point errors]) where
/// there are flags (Note [floating-point flags on a device]).
template <class T>
DYNEXPR_HOST_DEVICE T divide_by_zero() {
#if DYNEXPR_FP_FLAGS
  std::feraiseexcept(FE_DIVBYZERO);
#endif
  return T(0);
}
/// MIN // -1 wraps to MIN, with NumPy's "overflow" flag where there are flags.
template <class T>
DYNEXPR_HOST_DEVICE T overflowed(T wrapped) {
#if DYNEXPR_FP_FLAGS
  std::feraiseexcept(FE_OVERFLOW);
#endif
  return wrapped;
}
// NaN-propagating min/max (NumPy's minimum/maximum): the first NaN operand, else the
// smaller/larger; ties (-0 vs +0) give the second operand, as NumPy and x86 do.
template <class T>
DYNEXPR_HOST_DEVICE constexpr T scalar_min(T a, T b) {
  if constexpr (is_float_v<T>)
    if (a != a || b != b) return a != a ? a : b;
  return a < b ? a : b;
}
template <class T>
DYNEXPR_HOST_DEVICE constexpr T scalar_max(T a, T b) {
  if constexpr (is_float_v<T>)
    if (a != a || b != b) return a != a ? a : b;
  return a > b ? a : b;
}
// Note [quiet comparisons]
// An ordered comparison (<, <=, >, >=) with a NaN operand raises the "invalid" flag on
// the host (x86's comisd), and NumPy's comparisons never report it: `x[0] > x[1]` of a
// captured function warned "invalid value encountered" where NumPy says nothing. The
// scalar bodies compare with the quiet forms (ucomisd), as the SIMD bodies' ordered-quiet
// predicates do; a device has no flags to raise.
template <class T>
DYNEXPR_HOST_DEVICE constexpr bool quiet_lt(T a, T b) {
#if DYNEXPR_FP_FLAGS
  if constexpr (is_float_v<T>) return __builtin_isless(a, b);
#endif
  return a < b;
}
template <class T>
DYNEXPR_HOST_DEVICE constexpr bool quiet_le(T a, T b) {
#if DYNEXPR_FP_FLAGS
  if constexpr (is_float_v<T>) return __builtin_islessequal(a, b);
#endif
  return a <= b;
}
}  // namespace detail
// END DEVICE TEXT
}  // namespace dynexpr::ops
