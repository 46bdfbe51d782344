// dynexpr/core/dtype.hpp — the element types, their names, and NumPy 2's promotion rules.
#pragma once

#include <cstdint>
#include <string_view>
#include <type_traits>

#include "dynexpr/core/config.hpp"

namespace dynexpr {

// BEGIN GENERATED dtypes: ops/manifest.py, do not edit
/// The dtypes dynexpr computes with, in ABI code order (kernels/abi.h).
enum class dtype : std::uint8_t { bool_, uint8, int32, int64, float32, float64 };
inline constexpr int n_dtypes = 6;

template <class T>
inline constexpr bool is_supported_v =
    std::is_same_v<T, bool> ||
    std::is_same_v<T, std::uint8_t> ||
    std::is_same_v<T, std::int32_t> ||
    std::is_same_v<T, std::int64_t> ||
    std::is_same_v<T, float> ||
    std::is_same_v<T, double>;

template <class T>
concept Element = is_supported_v<T>;

template <Element T>
constexpr dtype dtype_of() {
  if constexpr (std::is_same_v<T, bool>) return dtype::bool_;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return dtype::uint8;
  else if constexpr (std::is_same_v<T, std::int32_t>) return dtype::int32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return dtype::int64;
  else if constexpr (std::is_same_v<T, float>) return dtype::float32;
  else return dtype::float64;
}

/// NumPy's name of the dtype ("float32", "bool", ...).
constexpr std::string_view dtype_name(dtype t) {
  switch (t) {
    case dtype::bool_: return "bool";
    case dtype::uint8: return "uint8";
    case dtype::int32: return "int32";
    case dtype::int64: return "int64";
    case dtype::float32: return "float32";
    case dtype::float64: return "float64";
  }
  return "?";
}
// END GENERATED dtypes

template <class T>
inline constexpr bool is_float_v = std::is_same_v<T, float> || std::is_same_v<T, double>;
template <class T>
inline constexpr bool is_bool_v = std::is_same_v<T, bool>;
/// Integer dtypes proper (bool is not one, as in NumPy's kind 'b' vs 'i'/'u').
template <class T>
inline constexpr bool is_int_v = is_supported_v<T> && std::is_integral_v<T> && !is_bool_v<T>;

template <Element T>
constexpr std::string_view dtype_name() {
  return dtype_name(dtype_of<T>());
}

namespace detail {
// Rank in NumPy's "safe cast" lattice restricted to our dtypes. bool < uint8 < int32 <
// int64 and uint8 < float32 < float64; int32/int64 with float32 go to float64.
template <class A, class B>
struct promote_impl {
  static constexpr auto pick() {
    if constexpr (std::is_same_v<A, B>) return A{};
    else if constexpr (is_bool_v<A>) return B{};
    else if constexpr (is_bool_v<B>) return A{};
    else if constexpr (std::is_same_v<A, double> || std::is_same_v<B, double>) return double{};
    else if constexpr (std::is_same_v<A, float>)
      return std::conditional_t<std::is_same_v<B, std::uint8_t>, float, double>{};
    else if constexpr (std::is_same_v<B, float>)
      return std::conditional_t<std::is_same_v<A, std::uint8_t>, float, double>{};
    else  // both integers: the wider one (uint8 fits in either signed type)
      return std::conditional_t<(sizeof(A) >= sizeof(B)), A, B>{};
  }
  using type = decltype(pick());
};
}  // namespace detail

/// np.result_type of two array dtypes.
template <Element A, Element B>
using promote_t = typename detail::promote_impl<A, B>::type;

/// The kind of a C++ arithmetic scalar seen as a NumPy 2 "weak" Python scalar (NEP 50):
/// a bool acts like Python's bool, any integer like Python's int, any floating type like
/// Python's float. A weak scalar never widens an array's dtype within its kind.
template <class S>
concept WeakScalar = std::is_arithmetic_v<S>;

/// np.result_type(array of dtype A, Python scalar of the kind of S), NEP 50.
template <Element A, WeakScalar S>
using promote_weak_t = std::conditional_t<
    std::is_same_v<S, bool>, A,
    std::conditional_t<std::is_floating_point_v<S>,
                       std::conditional_t<is_float_v<A>, A, double>,
                       // a Python int with a bool array gives the default int, int64
                       std::conditional_t<is_bool_v<A>, std::int64_t, A>>>;

/// The result type of true division and of float functions (exp, sin, ...) of A:
/// floats keep their type, integers go to float64 as in NumPy.
template <Element A>
using float_result_t = std::conditional_t<is_float_v<A>, A, double>;

}  // namespace dynexpr
