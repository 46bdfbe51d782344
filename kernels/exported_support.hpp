// kernels/exported_support.hpp — what the library of an exported function (dynexpr.export,
// bridge/dynexpr/artifacts/export.py) is built from besides its units: the C++ guards over
// dynexpr::exported::Arg that pick a specialisation (Note [guards in C++] in export.py),
// dx_array views of the arguments, and the check of the CPU's instruction sets. Included
// by the generated NAME.cpp after the prelude and the units; not part of any unit.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <dynexpr/exported.hpp>
#include <string>
#include <vector>

#include "abi.h"

namespace dynexpr::exported::support {
namespace dxe = ::dynexpr::exported;
using Args = std::vector<dxe::Arg>;

inline const char* kind_name(dxe::Arg::kind_t k) {
  switch (k) {
    case dxe::Arg::array:
      return "an array";
    case dxe::Arg::boolean:
      return "a bool";
    case dxe::Arg::integer:
      return "an integer";
    case dxe::Arg::floating:
      return "a floating-point number";
    case dxe::Arg::none:
      return "None";
  }
  return "?";
}

inline bool want_kind(const Args& a, std::size_t i, const char* name, dxe::Arg::kind_t k,
                      std::string& why) {
  if (a[i].kind() == k) return true;
  why = std::string(name) + " is " + kind_name(a[i].kind()) + ", not " + kind_name(k);
  return false;
}
inline bool want_dtype(const Args& a, std::size_t i, const char* name, dxe::dtype t,
                       std::string& why) {
  if (a[i].as_array().type() == t) return true;
  why = std::string(name) + ".dtype is " + dxe::dtype_name(a[i].as_array().type()) + ", not " +
        dxe::dtype_name(t);
  return false;
}
inline bool want_ndim(const Args& a, std::size_t i, const char* name, int n, std::string& why) {
  if (a[i].as_array().ndim() == n) return true;
  why = std::string(name) + ".ndim is " + std::to_string(a[i].as_array().ndim()) + ", not " +
        std::to_string(n);
  return false;
}
inline bool want_dim(const Args& a, std::size_t i, const char* name, int axis, std::int64_t n,
                     std::string& why) {
  const std::int64_t e = a[i].as_array().shape()[axis];
  if (e == n) return true;
  why = std::string(name) + ".shape[" + std::to_string(axis) + "] is " + std::to_string(e) +
        ", not " + std::to_string(n);
  return false;
}
inline bool want_range(const Args& a, std::size_t i, const char* name, int axis, std::int64_t lo,
                       std::int64_t hi, std::string& why) {
  const std::int64_t e = a[i].as_array().shape()[axis];
  if (e >= lo && (hi < 0 || e <= hi)) return true;
  why = std::string(name) + ".shape[" + std::to_string(axis) + "] is " + std::to_string(e) +
        ", outside " + std::to_string(lo) + ".." +
        (hi < 0 ? std::string("inf") : std::to_string(hi));
  return false;
}
inline bool want_contiguous(const Args& a, std::size_t i, const char* name, std::string& why) {
  if (a[i].as_array().c_contiguous()) return true;
  why = std::string(name) + " is not C-contiguous";
  return false;
}
inline bool want_floating(const Args& a, std::size_t i, const char* name, double v,
                          std::string& why) {
  if (a[i].kind() == dxe::Arg::floating &&
      (a[i].as_floating() == v || (std::isnan(v) && std::isnan(a[i].as_floating()))))
    return true;
  why = std::string(name) + " is " + a[i].describe() + ", not the float " + dxe::Arg(v).describe();
  return false;
}
inline bool want_integer(const Args& a, std::size_t i, const char* name, std::int64_t v,
                         std::string& why) {
  if (a[i].kind() == dxe::Arg::integer && a[i].as_integer() == v) return true;
  why = std::string(name) + " is " + a[i].describe() + ", not the integer " + std::to_string(v);
  return false;
}
inline bool want_boolean(const Args& a, std::size_t i, const char* name, bool v, std::string& why) {
  if (a[i].kind() == dxe::Arg::boolean && (a[i].as_integer() != 0) == v) return true;
  why = std::string(name) + " is " + a[i].describe() + ", not " + (v ? "True" : "False");
  return false;
}
inline bool want_none(const Args& a, std::size_t i, const char* name, std::string& why) {
  if (a[i].kind() == dxe::Arg::none) return true;
  why = std::string(name) + " is " + a[i].describe() + ", not None";
  return false;
}
// The bytes an array's elements span, [lo, hi): np.may_share_memory's bounds test.
inline void span(const dxe::Array& x, std::uintptr_t& lo, std::uintptr_t& hi) {
  std::int64_t first = 0, last = 0;
  for (int d = 0; d < x.ndim(); ++d) {
    if (x.shape()[d] == 0) {
      lo = hi = 0;
      return;
    }
    const std::int64_t step = x.strides()[d] * (x.shape()[d] - 1);
    (step < 0 ? first : last) += step;
  }
  const auto w = static_cast<std::int64_t>(dxe::itemsize(x.type()));
  const auto base = reinterpret_cast<std::uintptr_t>(x.data());
  lo = base + static_cast<std::uintptr_t>(first * w);
  hi = base + static_cast<std::uintptr_t>((last + 1) * w);
}
inline const char* relation(const dxe::Array& x, const dxe::Array& y) {
  if (x.data() == y.data() && x.type() == y.type() && x.shape() == y.shape() &&
      x.strides() == y.strides())
    return "same";
  std::uintptr_t a0, a1, b0, b1;
  span(x, a0, a1);
  span(y, b0, b1);
  return (a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1) ? "overlap" : "disjoint";
}
inline bool want_alias(const Args& a, std::size_t i, std::size_t j, const char* names,
                       const char* rel, std::string& why) {
  const char* r = relation(a[i].as_array(), a[j].as_array());
  if (std::strcmp(r, rel) == 0) return true;
  why = std::string(names) + ": " + r + ", not " + rel;
  return false;
}
inline bool want_dim_eq(const Args& a, std::size_t i, int ai, std::size_t j, int aj,
                        const char* text, std::string& why) {
  if (a[i].as_array().shape()[ai] == a[j].as_array().shape()[aj]) return true;
  why = std::string(text) + " does not hold";
  return false;
}

inline dx_array host(const dxe::Array& x) {
  dx_array d;
  d.data = x.data();
  d.dtype = static_cast<std::int32_t>(x.type());
  d.ndim = x.ndim();
  d.shape = x.shape().data();
  d.strides = x.strides().data();
  d.device = dx_device{DX_DEVICE_CPU, 0};
  return d;
}
template <class T>
inline dx_array host_scalar(T* v) {
  static const std::int64_t none[1] = {0};
  dx_array d;
  d.data = v;
  d.dtype = static_cast<std::int32_t>(dxe::dtype_of<T>());
  d.ndim = 0;
  d.shape = none;
  d.strides = none;
  d.device = dx_device{DX_DEVICE_CPU, 0};
  return d;
}
inline double number(const dxe::Arg& a) {
  return a.kind() == dxe::Arg::floating ? a.as_floating() : static_cast<double>(a.as_integer());
}
inline const dxe::Array& writable(const Args& a, std::size_t i, const char* name) {
  const dxe::Array& x = a[i].as_array();
  if (x.readonly())
    throw dxe::error(dxe::type_error, std::string("dynexpr: ") + name +
                                          " is updated in place, but was passed read-only "
                                          "(a const view); pass a writable array");
  return x;
}
inline void check(std::int32_t rc, const char* err) {
  if (rc != 0) throw dxe::error(rc, err);
}
template <class T>
inline dxe::Array constant(T v) {
  dxe::Array a = dxe::Array::empty(dxe::dtype_of<T>(), {});
  *a.data_as<T>() = v;
  return a;
}

// The instruction sets this library was compiled for, checked before the first call.
inline const char* missing_cpu_feature() {
  __builtin_cpu_init();
#if defined(__AVX512F__)
  if (!__builtin_cpu_supports("avx512f")) return "avx512f";
#endif
#if defined(__AVX512BW__)
  if (!__builtin_cpu_supports("avx512bw")) return "avx512bw";
#endif
#if defined(__AVX512DQ__)
  if (!__builtin_cpu_supports("avx512dq")) return "avx512dq";
#endif
#if defined(__AVX512VL__)
  if (!__builtin_cpu_supports("avx512vl")) return "avx512vl";
#endif
#if defined(__AVX2__)
  if (!__builtin_cpu_supports("avx2")) return "avx2";
#endif
#if defined(__FMA__)
  if (!__builtin_cpu_supports("fma")) return "fma";
#endif
#if defined(__BMI2__)
  if (!__builtin_cpu_supports("bmi2")) return "bmi2";
#endif
#if defined(__SSE4_2__)
  if (!__builtin_cpu_supports("sse4.2")) return "sse4.2";
#endif
  return nullptr;
}
}  // namespace dynexpr::exported::support
