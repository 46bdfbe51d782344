// dynexpr/ops/math_ops.hpp — transcendental ops of the op table (float_unary_rule).
//
// Note [guarded math]
// Highway's contrib math is exact to a few ulp only inside a stated valid range (exp to
// +104 in float, sin/cos within +-39000, log on (0, max]) and gives unspecified values
// outside it. NumPy gives inf, 0, NaN or a correct value there. Each SIMD body below
// therefore tests its lanes against the range; a packet with any lane outside it (rare
// in practice: NaN, inf, huge arguments, log of 0) takes the C library's answer for those
// lanes (with the C library's floating-point flags, which are NumPy's: the fast body
// never runs on them). The fast path costs one compare and one branch per packet.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "dynexpr/core/config.hpp"
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include "dynexpr/ops/op_table.hpp"
#include "dynexpr/simd/math.hpp"

namespace dynexpr::ops {

namespace detail {
template <class D, class V, class Fast, class Exact>
DYNEXPR_INLINE V guarded(D d, V x, hn::Mask<D> ok, Fast fast, Exact exact) {
  if (HWY_LIKELY(hn::AllTrue(d, ok))) return fast(x);
  // The fast body sees only in-range values: on the others its intermediate results
  // raise floating-point flags NumPy would not (exp(NaN) converts NaN to an integer:
  // "invalid"; tanh(400) overflows inside). Those lanes take an in-range lane's value
  // there, and the C library's answer, with the C library's flags (NumPy's), in the
  // result; the in-range lanes likewise give the library a quiet value.
  const std::intptr_t first = hn::FindFirstTrue(d, ok);
  if (first < 0) return simd::lanewise(d, exact, d, x);
  alignas(64) hn::TFromD<D> lanes[simd::max_lanes_v<D>];
  hn::Store(x, d, lanes);
  const V safe = hn::Set(d, lanes[first]);
  return hn::IfThenElse(ok, fast(hn::IfThenElse(ok, x, safe)),
                        simd::lanewise(d, exact, d, hn::IfThenElse(ok, safe, x)));
}
/// guarded for two arguments: fast(a, b) on the lanes where ok holds, exact elsewhere.
template <class D, class V, class Fast, class Exact>
DYNEXPR_INLINE V guarded2(D d, V a, V b, hn::Mask<D> ok, Fast fast, Exact exact) {
  if (HWY_LIKELY(hn::AllTrue(d, ok))) return fast(a, b);
  const std::intptr_t first = hn::FindFirstTrue(d, ok);
  if (first < 0) return simd::lanewise(d, exact, d, a, b);
  alignas(64) hn::TFromD<D> la[simd::max_lanes_v<D>], lb[simd::max_lanes_v<D>];
  hn::Store(a, d, la);
  hn::Store(b, d, lb);
  const V sa = hn::Set(d, la[first]), sb = hn::Set(d, lb[first]);
  return hn::IfThenElse(ok, fast(hn::IfThenElse(ok, a, sa), hn::IfThenElse(ok, b, sb)),
                        simd::lanewise(d, exact, d, hn::IfThenElse(ok, sa, a),
                                       hn::IfThenElse(ok, sb, b)));
}
template <class D, class V>
DYNEXPR_INLINE hn::Mask<D> within(D d, V x, double lo, double hi) {
  using T = hn::TFromD<D>;
  return hn::And(hn::Ge(x, hn::Set(d, static_cast<T>(lo))), hn::Le(x, hn::Set(d, static_cast<T>(hi))));
}
template <class D, class V>
DYNEXPR_INLINE hn::Mask<D> above_within(D d, V x, double lo, double hi) {
  using T = hn::TFromD<D>;
  return hn::And(hn::Gt(x, hn::Set(d, static_cast<T>(lo))), hn::Le(x, hn::Set(d, static_cast<T>(hi))));
}
/// f(x) for odd functions with f(0) = 0: +-0 lanes return x itself, so the sign of zero
/// survives as in libm and NumPy (Highway's polynomials give +0 for sin(-0), expm1(-0)).
template <class D, class V>
DYNEXPR_INLINE V keep_zero(D d, V x, V r) {
  return hn::IfThenElse(hn::Eq(x, hn::Zero(d)), x, r);
}
template <class T>
inline constexpr double max_finite = static_cast<double>(std::numeric_limits<T>::max());
}  // namespace detail

// One float unary op: NAME, CUDA function, cost, accuracy, the C library reference
// STD, and the SIMD body BODY (over `d` and `x`) valid where OK (over `d`, `x`, T).
#define DYNEXPR_FLOAT_UNARY_OP(ID, NAME, CUDA, COST, ACC, STD, OK, BODY)                \
  struct ID : float_unary_rule {                                                        \
    static constexpr std::string_view name = NAME, cuda = CUDA "({0})";                 \
    static constexpr int arity = 1, cost = COST;                                        \
    static constexpr accuracy acc = accuracy ACC;                                                \
    template <class A> static constexpr void check() {                                  \
      DYNEXPR_OP_CHECK(NAME, !is_narrow_v<A>,                                           \
                       "bool/uint8 input gives float16 in NumPy, which dynexpr does not have; " \
                       "cast first, e.g. dx::cast<float>(x)");                          \
    }                                                                                   \
    template <class T> static T scalar(T x) { return STD; }                             \
    template <class D, class V> static V simd(D d, V x) {                               \
      using T = hn::TFromD<D>;                                                          \
      (void)sizeof(T);                                                                  \
      return detail::guarded(d, x, OK, [&](V x) { return BODY; }, [](T x) { return STD; }); \
    }                                                                                   \
  };

#define DYNEXPR_ALL hn::Eq(x, x)  // every non-NaN lane
#define DYNEXPR_FINITE detail::within(d, x, -detail::max_finite<T>, detail::max_finite<T>)
#define DYNEXPR_EXP_RANGE                                                                 \
  detail::within(d, x, sizeof(T) == 4 ? -87.0 : -708.0, sizeof(T) == 4 ? 88.7 : 709.0)

DYNEXPR_FLOAT_UNARY_OP(sqrt_op, "sqrt", "sqrt", 4, ({0, 0, 0, 1e6}), std::sqrt(x), DYNEXPR_ALL, hn::Sqrt(x))
DYNEXPR_FLOAT_UNARY_OP(exp_op, "exp", "exp", 12, ({1, 1, -80, 80}), std::exp(x), DYNEXPR_EXP_RANGE, hn::Exp(d, x))
DYNEXPR_FLOAT_UNARY_OP(expm1_op, "expm1", "expm1", 14, ({4, 4, -80, 80}), std::expm1(x), DYNEXPR_EXP_RANGE, detail::keep_zero(d, x, hn::Expm1(d, x)))
DYNEXPR_FLOAT_UNARY_OP(exp2_op, "exp2", "exp2", 14, ({1, 1, -120, 120}), std::exp2(x), DYNEXPR_FINITE, simd::Exp2(d, x))
DYNEXPR_FLOAT_UNARY_OP(log_op, "log", "log", 12, ({4, 4, 1e-30, 1e30}), std::log(x),
                       detail::above_within(d, x, 0, detail::max_finite<T>), hn::Log(d, x))
DYNEXPR_FLOAT_UNARY_OP(log1p_op, "log1p", "log1p", 14, ({2, 2, -0.99, 1e30}), std::log1p(x),
                       detail::above_within(d, x, -1, detail::max_finite<T>), detail::keep_zero(d, x, hn::Log1p(d, x)))
DYNEXPR_FLOAT_UNARY_OP(log2_op, "log2", "log2", 12, ({2, 2, 1e-30, 1e30}), std::log2(x),
                       detail::above_within(d, x, 0, detail::max_finite<T>), hn::Log2(d, x))
DYNEXPR_FLOAT_UNARY_OP(log10_op, "log10", "log10", 12, ({2, 2, 1e-30, 1e30}), std::log10(x),
                       detail::above_within(d, x, 0, detail::max_finite<T>), hn::Log10(d, x))
DYNEXPR_FLOAT_UNARY_OP(sin_op, "sin", "sin", 16, ({3, 3, -1000, 1000}), std::sin(x),
                       detail::within(d, x, -39000, 39000), detail::keep_zero(d, x, hn::Sin(d, x)))
DYNEXPR_FLOAT_UNARY_OP(cos_op, "cos", "cos", 16, ({3, 3, -1000, 1000}), std::cos(x),
                       detail::within(d, x, -39000, 39000), hn::Cos(d, x))
DYNEXPR_FLOAT_UNARY_OP(tan_op, "tan", "tan", 30, ({1, 1, -1.5, 1.5}), std::tan(x),
                       detail::within(d, x, -39000, 39000), detail::keep_zero(d, x, simd::Tan(d, x)))
DYNEXPR_FLOAT_UNARY_OP(tanh_op, "tanh", "tanh", 16, ({4, 4, -20, 20}), std::tanh(x), DYNEXPR_FINITE, detail::keep_zero(d, x, simd::Tanh(d, x)))
DYNEXPR_FLOAT_UNARY_OP(sinh_op, "sinh", "sinh", 16, ({4, 4, -80, 80}), std::sinh(x), DYNEXPR_EXP_RANGE, detail::keep_zero(d, x, hn::Sinh(d, x)))
DYNEXPR_FLOAT_UNARY_OP(cosh_op, "cosh", "cosh", 16, ({1.5, 1.5, -80, 80}), std::cosh(x), DYNEXPR_FINITE, simd::Cosh(d, x))
DYNEXPR_FLOAT_UNARY_OP(arcsin_op, "arcsin", "asin", 16, ({3, 3, -1, 1}), std::asin(x), detail::within(d, x, -1, 1), detail::keep_zero(d, x, hn::Asin(d, x)))
DYNEXPR_FLOAT_UNARY_OP(arccos_op, "arccos", "acos", 16, ({2, 2, -1, 1}), std::acos(x), detail::within(d, x, -1, 1), hn::Acos(d, x))
DYNEXPR_FLOAT_UNARY_OP(arctan_op, "arctan", "atan", 16, ({3, 3, -1e4, 1e4}), std::atan(x), DYNEXPR_FINITE, detail::keep_zero(d, x, hn::Atan(d, x)))
// Highway's asinh/acosh square x: beyond DYNEXPR_SQUARE_SAFE that overflows (a flag
// NumPy does not raise), so larger arguments take the C library's answer.
#define DYNEXPR_SQUARE_SAFE (sizeof(T) == 4 ? 1e18 : 1e150)
DYNEXPR_FLOAT_UNARY_OP(arcsinh_op, "arcsinh", "asinh", 16, ({3, 3, -1e4, 1e4}), std::asinh(x),
                       detail::within(d, x, -DYNEXPR_SQUARE_SAFE, DYNEXPR_SQUARE_SAFE),
                       detail::keep_zero(d, x, hn::Asinh(d, x)))
DYNEXPR_FLOAT_UNARY_OP(arccosh_op, "arccosh", "acosh", 16, ({3, 3, 1, 1e4}), std::acosh(x),
                       detail::within(d, x, 1, DYNEXPR_SQUARE_SAFE), hn::Acosh(d, x))
#undef DYNEXPR_SQUARE_SAFE
DYNEXPR_FLOAT_UNARY_OP(arctanh_op, "arctanh", "atanh", 16, ({3, 3, -0.99, 0.99}), std::atanh(x),
                       hn::And(hn::Gt(x, hn::Set(d, T(-1))), hn::Lt(x, hn::Set(d, T(1)))), detail::keep_zero(d, x, hn::Atanh(d, x)))
DYNEXPR_FLOAT_UNARY_OP(sigmoid_op, "sigmoid", "dx_sigmoid", 14, ({1, 1, -80, 80}),
                       (x >= T(0) ? T(1) / (T(1) + std::exp(-x)) : std::exp(x) / (T(1) + std::exp(x))),
                       DYNEXPR_ALL, simd::Sigmoid(d, x))
DYNEXPR_FLOAT_UNARY_OP(erf_op, "erf", "erf", 20, ({1.5, 1.5, -6, 6}), std::erf(x), DYNEXPR_ALL, detail::keep_zero(d, x, simd::Erf(d, x)))

#undef DYNEXPR_ALL
#undef DYNEXPR_FINITE
#undef DYNEXPR_EXP_RANGE
#undef DYNEXPR_FLOAT_UNARY_OP

/// Two-argument float functions.
#define DYNEXPR_FLOAT_BINARY_OP(ID, NAME, CUDA, COST, ACC, STD, OK, BODY)                 \
  struct ID : float_binary_rule {                                                         \
    static constexpr std::string_view name = NAME, cuda = CUDA "({0}, {1})";              \
    static constexpr int arity = 2, cost = COST;                                          \
    static constexpr accuracy acc = accuracy ACC;                                                  \
    template <class... A> static constexpr void check() {                                 \
      DYNEXPR_OP_CHECK(NAME, !is_narrow_v<promote_all_t<A...>>,                           \
                       "bool/uint8 inputs give float16 in NumPy, which dynexpr does not have; " \
                       "cast first, e.g. dx::cast<float>(x)");                            \
    }                                                                                     \
    template <class T> static T scalar(T a, T b) { return STD(a, b); }                    \
    template <class D, class V> static V simd(D d, V a, V b) {                            \
      using T = hn::TFromD<D>;                                                            \
      return detail::guarded2(d, a, b, OK, [&](V a, V b) { return BODY(d, a, b); },        \
                              [](T a, T b) { return STD(a, b); });                        \
    }                                                                                     \
  };
// Both bodies compute their special cases (NaN, infinities, atan2(0, 0)) on every lane
// and select afterwards, raising "invalid" where NumPy raises nothing: those lanes take
// the C library's answer (Note [guarded math]).
DYNEXPR_FLOAT_BINARY_OP(arctan2_op, "arctan2", "atan2", 30, ({2, 2, -100, 100}), std::atan2,
                        hn::And(hn::And(hn::IsFinite(a), hn::IsFinite(b)),
                                hn::Not(hn::And(hn::Eq(a, hn::Zero(d)), hn::Eq(b, hn::Zero(d))))),
                        simd::Atan2)
DYNEXPR_FLOAT_BINARY_OP(hypot_op, "hypot", "hypot", 8, ({1, 1, -1e10, 1e10}), std::hypot,
                        hn::And(hn::IsFinite(a), hn::IsFinite(b)), simd::Hypot)
#undef DYNEXPR_FLOAT_BINARY_OP

// pow_op is declared with the arithmetic ops (it follows their dtype rule).
template <class T>
T pow_op::scalar(T a, T b) {
  if constexpr (is_float_v<T>) {
    return std::pow(a, b);
  } else {
    if (b < 0) {
      // NumPy 2 raises for every negative exponent, 1 ** -1 and (-1) ** -1 included.
      throw value_error("dynexpr::power: integers to negative integer powers are not allowed; "
                        "use a float base, e.g. dx::cast<double>(x)");
    }
    using U = std::make_unsigned_t<T>;
    U base = static_cast<U>(a), r = 1;
    for (auto e = static_cast<std::make_unsigned_t<T>>(b); e; e >>= 1) {
      if (e & 1) r = static_cast<U>(r * base);
      base = static_cast<U>(base * base);
    }
    return static_cast<T>(r);
  }
}
template <class D, class V>
V pow_op::simd(D d, V a, V b) {
  using T = hn::TFromD<D>;
  if constexpr (is_float_v<T>) {
    // simd::Pow selects its special cases (x <= 0, NaN, infinities) after computing
    // every case on every lane, raising flags NumPy does not (and missing the "invalid"
    // of a negative base with a non-integral exponent): those lanes take std::pow.
    const auto ok = hn::And(hn::And(hn::Gt(a, hn::Zero(d)), hn::IsFinite(a)), hn::IsFinite(b));
    return detail::guarded2(
        d, a, b, ok, [&](V x, V y) { return simd::Pow(d, x, y); },
        [](T x, T y) { return std::pow(x, y); });
  } else {
    return detail::by_lane<pow_op>(d, a, b);
  }
}

}  // namespace dynexpr::ops
