// dynexpr/ops/op_table.hpp — the op table: arithmetic, comparison, logical and bitwise
// ops. Transcendental ops are in ops/math_ops.hpp; both are listed in ops/registry.hpp.
//
// One struct per op is the single source of that op (STYLE.md): its NumPy name, arity,
// dtype rule (ops/rules.hpp), cost (rough cycles per element, for the threading
// threshold), accuracy (ulp), scalar body, Highway body, and CUDA body (a format string
// over {0}, {1}, ...). Highway bodies take the tag `d` of the compute type and vectors
// (or masks, for bool compute types) of it. Integer ops Highway cannot do in registers
// fall back to the scalar body lane by lane (simd::lanewise), keeping one semantics.
#pragma once

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>

#include "dynexpr/ops/rules.hpp"
#include "dynexpr/simd/convert.hpp"

namespace dynexpr::ops {

namespace hn = hwy::HWY_NAMESPACE;

namespace detail {
/// Integer arithmetic that wraps modulo 2^bits as NumPy's does (signed overflow is
/// undefined behaviour in C++, so go through the unsigned type).
template <class T, class F>
constexpr T wrapping(F f, T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(f(static_cast<U>(a), static_cast<U>(b)));
  } else {
    return static_cast<T>(f(a, b));
  }
}
/// An integer division by zero: 0, as NumPy gives, with NumPy's "divide by zero"
/// floating-point flag (its integer loops set it; Note [floating-point errors]).
template <class T>
T divide_by_zero() {
  std::feraiseexcept(FE_DIVBYZERO);
  return T(0);
}
/// MIN // -1 wraps to MIN, with NumPy's "overflow" flag.
template <class T>
T overflowed(T wrapped) {
  std::feraiseexcept(FE_OVERFLOW);
  return wrapped;
}
/// Calls Op's scalar body lane by lane on vectors of tag d.
template <class Op, class D, class... V>
DYNEXPR_INLINE hn::Vec<D> by_lane(D d, V... v) {
  return simd::lanewise(d, [](auto... x) { return Op::scalar(x...); }, d, v...);
}
/// A predicate's scalar body lane by lane, as a mask.
template <class Op, class D, class... V>
DYNEXPR_INLINE hn::Mask<D> by_lane_mask(D d, V... v) {
  using T = hn::TFromD<D>;
  const auto r = simd::lanewise(d, [](auto... x) { return T(Op::scalar(x...) ? 1 : 0); }, d, v...);
  return simd::nonzero(d, r);
}
// NaN-propagating min/max (NumPy's minimum/maximum; ties give the 2nd operand, as x86
// min/max do). Built from quiet compares: x86 min/max raise "invalid" on a NaN operand,
// which NumPy's minimum/maximum never report (Note [floating-point errors]).
template <class D, class V>
DYNEXPR_INLINE V nan_min(D, V a, V b) {
  if constexpr (is_float_v<hn::TFromD<D>>)
    return hn::IfThenElse(hn::Or(hn::IsNaN(a), hn::Lt(a, b)), a, b);
  else
    return hn::Min(a, b);
}
template <class D, class V>
DYNEXPR_INLINE V nan_max(D, V a, V b) {
  if constexpr (is_float_v<hn::TFromD<D>>)
    return hn::IfThenElse(hn::Or(hn::IsNaN(a), hn::Gt(a, b)), a, b);
  else
    return hn::Max(a, b);
}
template <class T>
constexpr T scalar_min(T a, T b) {
  if constexpr (is_float_v<T>)
    if (a != a || b != b) return a != a ? a : b;
  return a < b ? a : b;  // ties (-0 vs +0) give the second operand, as NumPy and x86 do
}
template <class T>
constexpr T scalar_max(T a, T b) {
  if constexpr (is_float_v<T>)
    if (a != a || b != b) return a != a ? a : b;
  return a > b ? a : b;  // ties give the second operand
}
}  // namespace detail

#define DYNEXPR_NOT_TWO_BOOLS(NAME, ALT) \
  DYNEXPR_OP_CHECK(NAME, !arith_rule::all_bool<A...>, "not defined for two bool operands; " ALT)

// ----------------------------------------------------------------------- arithmetic
struct add_op : arith_rule {
  static constexpr std::string_view name = "add", cuda = "({0} + {1})";
  static constexpr int arity = 2, cost = 1;
  static constexpr accuracy acc{};
  template <class... A> static constexpr void check() { DYNEXPR_NOT_TWO_BOOLS("add", "use dx::logical_or"); }
  template <class T> static constexpr T scalar(T a, T b) {
    return detail::wrapping([](auto x, auto y) { return x + y; }, a, b);
  }
  template <class D, class V> static V simd(D, V a, V b) { return hn::Add(a, b); }
};

struct sub_op : arith_rule {
  static constexpr std::string_view name = "subtract", cuda = "({0} - {1})";
  static constexpr int arity = 2, cost = 1;
  static constexpr accuracy acc{};
  template <class... A> static constexpr void check() { DYNEXPR_NOT_TWO_BOOLS("subtract", "use dx::logical_xor"); }
  template <class T> static constexpr T scalar(T a, T b) {
    return detail::wrapping([](auto x, auto y) { return x - y; }, a, b);
  }
  template <class D, class V> static V simd(D, V a, V b) { return hn::Sub(a, b); }
};

struct mul_op : arith_rule {
  static constexpr std::string_view name = "multiply", cuda = "({0} * {1})";
  static constexpr int arity = 2, cost = 1;
  static constexpr accuracy acc{};
  template <class... A> static constexpr void check() { DYNEXPR_NOT_TWO_BOOLS("multiply", "use dx::logical_and"); }
  template <class T> static constexpr T scalar(T a, T b) {
    return detail::wrapping([](auto x, auto y) { return x * y; }, a, b);
  }
  template <class D, class V> static V simd(D d, V a, V b) {
    // hn::Mul is a generic wrapper of operator*: test the operator (no u8, no i64 on AVX2).
    if constexpr (requires { a * b; }) return hn::Mul(a, b);
    else return detail::by_lane<mul_op>(d, a, b);
  }
};

/// a * b + c with one rounding; produced by the compile-time contraction of
/// add(mul(a, b), c) (eval/rewrite.hpp), never written by users.
struct fma_op : arith_rule {
  static constexpr std::string_view name = "fma", cuda = "fma({0}, {1}, {2})";
  static constexpr int arity = 3, cost = 1;
  static constexpr accuracy acc{};
  template <class... A> static constexpr void check() {}
  template <class T> static T scalar(T a, T b, T c) { return std::fma(a, b, c); }
  template <class D, class V> static V simd(D, V a, V b, V c) { return hn::MulAdd(a, b, c); }
};

/// a * b - c and c - a * b with one rounding (from sub(mul(a, b), c) and sub(c, mul(a, b))).
struct fms_op : arith_rule {
  static constexpr std::string_view name = "fms", cuda = "fma({0}, {1}, -{2})";
  static constexpr int arity = 3, cost = 1;
  static constexpr accuracy acc{};
  template <class... A> static constexpr void check() {}
  template <class T> static T scalar(T a, T b, T c) { return std::fma(a, b, -c); }
  template <class D, class V> static V simd(D, V a, V b, V c) { return hn::MulSub(a, b, c); }
};
struct fnma_op : arith_rule {
  static constexpr std::string_view name = "fnma", cuda = "fma(-{0}, {1}, {2})";
  static constexpr int arity = 3, cost = 1;
  static constexpr accuracy acc{};
  template <class... A> static constexpr void check() {}
  template <class T> static T scalar(T a, T b, T c) { return std::fma(-a, b, c); }
  template <class D, class V> static V simd(D, V a, V b, V c) { return hn::NegMulAdd(a, b, c); }
};

struct div_op : float_binary_rule {
  static constexpr std::string_view name = "true_divide", cuda = "({0} / {1})";
  static constexpr int arity = 2, cost = 4;
  static constexpr accuracy acc{};
  template <class... A> static constexpr void check() {}
  template <class T> static constexpr T scalar(T a, T b) { return a / b; }
  template <class D, class V> static V simd(D, V a, V b) { return hn::Div(a, b); }
};

struct floor_divide_op : arith_rule {
  static constexpr std::string_view name = "floor_divide", cuda = "dx_floor_divide({0}, {1})";
  static constexpr int arity = 2, cost = 20;
  static constexpr accuracy acc{};
  template <class... A> static constexpr void check() { DYNEXPR_NOT_TWO_BOOLS("floor_divide", "cast to an integer type first"); }
  // NumPy's npy_floor_divide: integers round toward -inf and give 0 for a zero divisor;
  // floats follow divmod so that a == b * (a // b) + a % b as closely as rounding allows.
  template <class T> static T scalar(T a, T b) {
    if constexpr (is_float_v<T>) {
      // NaN first: the ordered compares below would raise "invalid" on it (NumPy: quiet).
      if (a != a || b != b) return a + b;
      if (b == 0) return a / b;
      T mod = std::fmod(a, b);
      T div = (a - mod) / b;
      if (mod != 0 && ((b < 0) != (mod < 0))) div -= T(1);
      if (div == 0) return std::copysign(T(0), a / b);
      T fl = std::floor(div);
      if (div - fl > T(0.5)) fl += T(1);
      return fl;
    } else {
      if (b == 0) return detail::divide_by_zero<T>();
      if constexpr (std::is_signed_v<T>) {
        if (a == std::numeric_limits<T>::min() && b == T(-1)) return detail::overflowed(a);
        T q = static_cast<T>(a / b);
        if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
        return q;
      } else {
        return static_cast<T>(a / b);
      }
    }
  }
  template <class D, class V> static V simd(D d, V a, V b) { return detail::by_lane<floor_divide_op>(d, a, b); }
};

struct mod_op : arith_rule {
  static constexpr std::string_view name = "remainder", cuda = "dx_mod({0}, {1})";
  static constexpr int arity = 2, cost = 20;
  static constexpr accuracy acc{};
  template <class... A> static constexpr void check() { DYNEXPR_NOT_TWO_BOOLS("remainder", "cast to an integer type first"); }
  // NumPy's npy_remainder: the result has the sign of the divisor; 0 for a zero divisor
  // with integers, NaN with floats.
  template <class T> static T scalar(T a, T b) {
    if constexpr (is_float_v<T>) {
      if (a != a || b != b) return a + b;  // quiet, as in floor_divide_op
      if (b == 0) return std::fmod(a, b);
      T mod = std::fmod(a, b);
      if (mod != 0) {
        if ((b < 0) != (mod < 0)) mod += b;
      } else {
        mod = std::copysign(T(0), b);
      }
      return mod;
    } else {
      if (b == 0) return detail::divide_by_zero<T>();
      if constexpr (std::is_signed_v<T>) {
        if (b == T(-1)) return T(0);
        T r = static_cast<T>(a % b);
        if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
        return r;
      } else {
        return static_cast<T>(a % b);
      }
    }
  }
  template <class D, class V> static V simd(D d, V a, V b) { return detail::by_lane<mod_op>(d, a, b); }
};

struct minimum_op : arith_rule {
  static constexpr std::string_view name = "minimum", cuda = "dx_minimum({0}, {1})";
  static constexpr int arity = 2, cost = 1;
  static constexpr accuracy acc{};
  template <class... A> static constexpr void check() { DYNEXPR_NOT_TWO_BOOLS("minimum", "use dx::logical_and"); }
  template <class T> static constexpr T scalar(T a, T b) { return detail::scalar_min(a, b); }
  template <class D, class V> static V simd(D d, V a, V b) {
    if constexpr (requires { hn::Min(a, b); }) return detail::nan_min(d, a, b);
    else return detail::by_lane<minimum_op>(d, a, b);
  }
};

struct maximum_op : arith_rule {
  static constexpr std::string_view name = "maximum", cuda = "dx_maximum({0}, {1})";
  static constexpr int arity = 2, cost = 1;
  static constexpr accuracy acc{};
  template <class... A> static constexpr void check() { DYNEXPR_NOT_TWO_BOOLS("maximum", "use dx::logical_or"); }
  template <class T> static constexpr T scalar(T a, T b) { return detail::scalar_max(a, b); }
  template <class D, class V> static V simd(D d, V a, V b) {
    if constexpr (requires { hn::Max(a, b); }) return detail::nan_max(d, a, b);
    else return detail::by_lane<maximum_op>(d, a, b);
  }
};

/// clip(x, lo, hi) = minimum(maximum(x, lo), hi), as NumPy 2 defines it (NaN propagates).
struct clip_op : arith_rule {
  static constexpr std::string_view name = "clip", cuda = "dx_minimum(dx_maximum({0}, {1}), {2})";
  static constexpr int arity = 3, cost = 2;
  static constexpr accuracy acc{};
  template <class... A> static constexpr void check() { DYNEXPR_NOT_TWO_BOOLS("clip", "cast to an integer type first"); }
  template <class T> static constexpr T scalar(T x, T lo, T hi) {
    return detail::scalar_min(detail::scalar_max(x, lo), hi);
  }
  template <class D, class V> static V simd(D d, V x, V lo, V hi) {
    return minimum_op::simd(d, maximum_op::simd(d, x, lo), hi);
  }
};

struct neg_op : same_rule {
  static constexpr std::string_view name = "negative", cuda = "(-{0})";
  static constexpr int arity = 1, cost = 1;
  static constexpr accuracy acc{};
  template <class A> static constexpr void check() {
    DYNEXPR_OP_CHECK("negative", !is_bool_v<A>, "not defined for bool (as in NumPy); use dx::logical_not");
  }
  template <class T> static constexpr T scalar(T a) {
    if constexpr (is_float_v<T>) return -a;  // -(+0.0) is -0.0; 0 - x would give +0.0
    else return detail::wrapping([](auto, auto y) { return decltype(y)(0) - y; }, T(0), a);
  }
  template <class D, class V> static V simd(D d, V a) {
    if constexpr (is_float_v<hn::TFromD<D>>) return hn::Neg(a);
    else return hn::Sub(hn::Zero(d), a);
  }
};

struct abs_op : same_rule {
  static constexpr std::string_view name = "absolute", cuda = "dx_abs({0})";
  static constexpr int arity = 1, cost = 1;
  static constexpr accuracy acc{};
  template <class A> static constexpr void check() {}
  template <class T> static constexpr T scalar(T a) {
    if constexpr (std::is_unsigned_v<T> || is_bool_v<T>) return a;
    else if constexpr (is_float_v<T>) return std::fabs(a);
    else return a < 0 ? neg_op::scalar(a) : a;
  }
  template <class D, class V> static V simd(D d, V a) {
    if constexpr (std::is_unsigned_v<hn::TFromD<D>> || std::is_same_v<V, hn::Mask<D>>) return a;
    else if constexpr (requires { hn::Abs(a); }) return hn::Abs(a);
    else return detail::by_lane<abs_op>(d, a);
  }
};

struct square_op : same_rule {
  static constexpr std::string_view name = "square", cuda = "({0} * {0})";
  static constexpr int arity = 1, cost = 1;
  static constexpr accuracy acc{};
  template <class A> static constexpr void check() {
    DYNEXPR_OP_CHECK("square", !is_bool_v<A>, "bool gives int8 in NumPy, which dynexpr does not have; cast first");
  }
  template <class T> static constexpr T scalar(T a) { return mul_op::scalar(a, a); }
  template <class D, class V> static V simd(D d, V a) { return mul_op::simd(d, a, a); }
};

struct reciprocal_op : same_rule {
  static constexpr std::string_view name = "reciprocal", cuda = "(1 / {0})";
  static constexpr int arity = 1, cost = 4;
  static constexpr accuracy acc{};
  template <class A> static constexpr void check() {
    DYNEXPR_OP_CHECK("reciprocal", !is_bool_v<A>, "bool gives int8 in NumPy, which dynexpr does not have; cast first");
  }
  template <class T> static constexpr T scalar(T a) {
    if constexpr (is_float_v<T>) return T(1) / a;
    else return a == 0 ? T(0) : static_cast<T>(T(1) / a);  // integer 1/x truncates
  }
  template <class D, class V> static V simd(D d, V a) {
    if constexpr (is_float_v<hn::TFromD<D>>) return hn::Div(hn::Set(d, 1), a);
    else return detail::by_lane<reciprocal_op>(d, a);
  }
};

struct sign_op : same_rule {
  static constexpr std::string_view name = "sign", cuda = "dx_sign({0})";
  static constexpr int arity = 1, cost = 2;
  static constexpr accuracy acc{};
  template <class A> static constexpr void check() {
    DYNEXPR_OP_CHECK("sign", !is_bool_v<A>, "not defined for bool (as in NumPy); cast first");
  }
  template <class T> static constexpr T scalar(T a) {
    if constexpr (is_float_v<T>)
      if (a != a) return a;
    return a > T(0) ? T(1) : (a < T(0) ? T(-1) : T(0));
  }
  template <class D, class V> static V simd(D d, V a) {
    using T = hn::TFromD<D>;
    if constexpr (std::is_unsigned_v<T>) {
      return hn::IfThenElseZero(simd::nonzero(d, a), hn::Set(d, 1));
    } else if constexpr (requires { a > a; }) {
      const V pos = hn::IfThenElseZero(hn::Gt(a, hn::Zero(d)), hn::Set(d, T(1)));
      const V r = hn::IfThenElse(hn::Lt(a, hn::Zero(d)), hn::Set(d, T(-1)), pos);
      if constexpr (is_float_v<T>) return hn::IfThenElse(hn::IsNaN(a), a, r);
      else return r;
    } else {
      return detail::by_lane<sign_op>(d, a);
    }
  }
};

/// x ** y. Integer powers follow NumPy: exact with wrap-around; a negative exponent
/// raises (NumPy's ValueError) unless the base is 1 or -1.
struct pow_op : arith_rule {
  static constexpr std::string_view name = "power", cuda = "dx_pow({0}, {1})";
  static constexpr int arity = 2, cost = 40;
  static constexpr accuracy acc{1, 1, 0.01, 10};
  template <class... A> static constexpr void check() { DYNEXPR_NOT_TWO_BOOLS("power", "cast to an integer type first"); }
  template <class T> static T scalar(T a, T b);
  template <class D, class V> static V simd(D d, V a, V b);
};

// --------------------------------------------------------------- rounding (exact)
#define DYNEXPR_ROUNDING_OP(ID, NAME, STD, HWY)                                         \
  struct ID : same_rule {                                                               \
    static constexpr std::string_view name = NAME, cuda = #STD "({0})";                \
    static constexpr int arity = 1, cost = 1;                                           \
    static constexpr accuracy acc{};                                                    \
    template <class A> static constexpr void check() {}                                 \
    template <class T> static T scalar(T a) {                                           \
      if constexpr (is_float_v<T>) return std::STD(a);                                  \
      else return a;                                                                    \
    }                                                                                   \
    template <class D, class V> static V simd(D, V a) {                                 \
      if constexpr (is_float_v<hn::TFromD<D>> && !std::is_same_v<V, hn::Mask<D>>)       \
        return hn::HWY(a);                                                              \
      else                                                                              \
        return a; /* integers and bools (masks) are already whole */                    \
    }                                                                                   \
  };
DYNEXPR_ROUNDING_OP(floor_op, "floor", floor, Floor)
DYNEXPR_ROUNDING_OP(ceil_op, "ceil", ceil, Ceil)
DYNEXPR_ROUNDING_OP(trunc_op, "trunc", trunc, Trunc)
#undef DYNEXPR_ROUNDING_OP

/// Round half to even; integers give float64 as in NumPy.
struct rint_op : float_unary_rule {
  static constexpr std::string_view name = "rint", cuda = "rint({0})";
  static constexpr int arity = 1, cost = 1;
  static constexpr accuracy acc{};
  template <class A> static constexpr void check() {
    DYNEXPR_OP_CHECK("rint", !is_narrow_v<A>, "bool/uint8 input gives float16 in NumPy, which dynexpr does not have; cast first: dx::rint(dx::cast<float>(x))");
  }
  template <class T> static T scalar(T a) { return std::nearbyint(a); }
  template <class D, class V> static V simd(D, V a) { return hn::Round(a); }
};

// -------------------------------------------------------------------- comparisons
// Highway defines < and <= generically as reversed > and >=, which integer vectors lack
// on AVX2 for >=: each op tests the operator that really exists (TEST) and otherwise
// compares lane by lane.
#define DYNEXPR_COMPARE_OP(ID, NAME, SYM, CALL, TEST)                                   \
  struct ID : compare_rule {                                                            \
    static constexpr std::string_view name = NAME, cuda = "({0} " #SYM " {1})";         \
    static constexpr int arity = 2, cost = 1;                                           \
    static constexpr accuracy acc{};                                                    \
    template <class... A> static constexpr void check() {}                              \
    template <class T> static constexpr bool scalar(T a, T b) { return a SYM b; }       \
    template <class D, class V> static hn::Mask<D> simd(D d, V a, V b) {                \
      if constexpr (requires { TEST; }) return CALL;                                    \
      else return detail::by_lane_mask<ID>(d, a, b);                                    \
    }                                                                                   \
  };
DYNEXPR_COMPARE_OP(equal_op, "equal", ==, hn::Eq(a, b), a == b)
DYNEXPR_COMPARE_OP(not_equal_op, "not_equal", !=, simd::not_equal(d, a, b), a == b)
DYNEXPR_COMPARE_OP(less_op, "less", <, hn::Lt(a, b), b > a)
DYNEXPR_COMPARE_OP(less_equal_op, "less_equal", <=, hn::Le(a, b), b >= a)
DYNEXPR_COMPARE_OP(greater_op, "greater", >, hn::Gt(a, b), a > b)
DYNEXPR_COMPARE_OP(greater_equal_op, "greater_equal", >=, hn::Ge(a, b), a >= b)
#undef DYNEXPR_COMPARE_OP

// ----------------------------------------------------------------- float predicates
#define DYNEXPR_PREDICATE_OP(ID, NAME, STD, HWY, INT_VALUE)                             \
  struct ID : predicate_rule {                                                          \
    static constexpr std::string_view name = NAME, cuda = #STD "({0})";                \
    static constexpr int arity = 1, cost = 1;                                           \
    static constexpr accuracy acc{};                                                    \
    template <class A> static constexpr void check() {}                                 \
    template <class T> static constexpr bool scalar(T a) {                              \
      if constexpr (is_float_v<T>) return std::STD(a);                                  \
      else return INT_VALUE;                                                            \
    }                                                                                   \
    template <class D, class V> static hn::Mask<D> simd(D d, V a) {                     \
      if constexpr (is_float_v<hn::TFromD<D>>) return hn::HWY(a);                       \
      else return hn::FirstN(d, (INT_VALUE) ? hn::Lanes(d) : 0);                        \
    }                                                                                   \
  };
DYNEXPR_PREDICATE_OP(isnan_op, "isnan", isnan, IsNaN, false)
DYNEXPR_PREDICATE_OP(isinf_op, "isinf", isinf, IsInf, false)
DYNEXPR_PREDICATE_OP(isfinite_op, "isfinite", isfinite, IsFinite, true)
#undef DYNEXPR_PREDICATE_OP

// ---------------------------------------------------------- logical (masks in/out)
#define DYNEXPR_LOGICAL_OP(ID, NAME, ARITY, SCALAR, CUDA, ...)                          \
  struct ID : logical_rule {                                                            \
    static constexpr std::string_view name = NAME, cuda = CUDA;                         \
    static constexpr int arity = ARITY, cost = 1;                                       \
    static constexpr accuracy acc{};                                                    \
    template <class... A> static constexpr void check() {}                              \
    template <class... B> static constexpr bool scalar(B... b) { return SCALAR; }       \
    template <class D, class... M> static hn::Mask<D> simd(D, M... m) { return __VA_ARGS__; } \
  };
DYNEXPR_LOGICAL_OP(logical_and_op, "logical_and", 2, (... && b), "({0} && {1})", hn::And(m...))
DYNEXPR_LOGICAL_OP(logical_or_op, "logical_or", 2, (... || b), "({0} || {1})", hn::Or(m...))
DYNEXPR_LOGICAL_OP(logical_xor_op, "logical_xor", 2, (... != b), "({0} != {1})", hn::Xor(m...))
DYNEXPR_LOGICAL_OP(logical_not_op, "logical_not", 1, (!b, ...), "(!{0})", hn::Not(m...))
#undef DYNEXPR_LOGICAL_OP

// ------------------------------------------------------------------------- bitwise
// For two bools the compute type is bool and the bodies get masks.
#define DYNEXPR_BITWISE_OP(ID, NAME, SYM, HWY)                                          \
  struct ID : bitwise_rule {                                                            \
    static constexpr std::string_view name = NAME, cuda = "({0} " #SYM " {1})";         \
    static constexpr int arity = 2, cost = 1;                                           \
    static constexpr accuracy acc{};                                                    \
    template <class... A> static constexpr void check() {                               \
      DYNEXPR_OP_CHECK(NAME, (!is_float_v<A> && ...),                                   \
                       "not defined for float operands (as in NumPy); cast to an integer type"); \
    }                                                                                   \
    template <class T> static constexpr T scalar(T a, T b) { return static_cast<T>(a SYM b); } \
    template <class D, class V> static V simd(D, V a, V b) { return hn::HWY(a, b); }    \
  };
DYNEXPR_BITWISE_OP(bitwise_and_op, "bitwise_and", &, And)
DYNEXPR_BITWISE_OP(bitwise_or_op, "bitwise_or", |, Or)
DYNEXPR_BITWISE_OP(bitwise_xor_op, "bitwise_xor", ^, Xor)
#undef DYNEXPR_BITWISE_OP

struct invert_op : bitwise_rule {
  static constexpr std::string_view name = "invert", cuda = "(~{0})";
  static constexpr int arity = 1, cost = 1;
  static constexpr accuracy acc{};
  template <class A> static constexpr void check() {
    DYNEXPR_OP_CHECK("invert", !is_float_v<A>, "not defined for float operands (as in NumPy); cast to an integer type");
  }
  template <class T> static constexpr T scalar(T a) {
    if constexpr (is_bool_v<T>) return !a;
    else return static_cast<T>(~a);
  }
  template <class D, class V> static V simd(D, V a) { return hn::Not(a); }
};

// Shifts by a count outside [0, bits) give 0 (or -1 for a negative value shifted
// right), as NumPy defines them; C++ leaves those undefined, so they are checked here.
#define DYNEXPR_SHIFT_OP(ID, NAME, BODY, CUDA)                                          \
  struct ID : bitwise_rule {                                                            \
    static constexpr std::string_view name = NAME, cuda = CUDA;                         \
    static constexpr int arity = 2, cost = 2;                                           \
    static constexpr accuracy acc{};                                                    \
    template <class... A> static constexpr void check() {                               \
      DYNEXPR_OP_CHECK(NAME, (is_int_v<A> && ...), "defined for integer operands only; cast first"); \
    }                                                                                   \
    template <class T> static constexpr T scalar(T a, T b) {                            \
      using U = std::make_unsigned_t<T>;                                                \
      constexpr T bits = static_cast<T>(sizeof(T) * 8);                                 \
      (void)sizeof(U);                                                                  \
      BODY                                                                              \
    }                                                                                   \
    template <class D, class V> static V simd(D d, V a, V b) { return detail::by_lane<ID>(d, a, b); } \
  };
DYNEXPR_SHIFT_OP(left_shift_op, "left_shift",
                 if (b < 0 || b >= bits) return T(0);
                 return static_cast<T>(static_cast<U>(a) << b);, "dx_shl({0}, {1})")
DYNEXPR_SHIFT_OP(right_shift_op, "right_shift",
                 if (b < 0 || b >= bits) return a < 0 ? T(-1) : T(0);
                 return static_cast<T>(a >> b);, "dx_shr({0}, {1})")
#undef DYNEXPR_SHIFT_OP

// --------------------------------------------------------------- where and cast
/// where(cond, a, b): cond is read as truth values, a and b promote.
struct where_op {
  static constexpr std::string_view name = "where", cuda = "({0} ? {1} : {2})";
  static constexpr int arity = 3, cost = 1;
  static constexpr accuracy acc{};
  template <class C, class A, class B>
  using result = promote_t<A, B>;
  template <class... A> static constexpr void check() {}
};

/// astype(To): NumPy's unsafe cast (floats truncate into integers, integers wrap,
/// anything non-zero is true).
template <Element To>
struct cast_op {
  static constexpr std::string_view name = "astype", cuda = "static_cast<T>({0})";
  static constexpr int arity = 1, cost = 1;
  static constexpr accuracy acc{};
  template <class A>
  using result = To;
  template <class A> static constexpr void check() {}
};

#undef DYNEXPR_NOT_TWO_BOOLS

}  // namespace dynexpr::ops
