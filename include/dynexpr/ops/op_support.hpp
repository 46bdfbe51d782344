// dynexpr/ops/op_support.hpp — what the SIMD bodies of ops/manifest.py share: running a
// scalar body lane by lane, NaN-aware SIMD min/max, and the range guards of the SIMD math
// bodies. The scalar helpers (wrap-around, integer division corner cases, scalar min/max)
// are in ops/scalar_support.hpp, Highway-free, shared with CUDA device code. The ops
// themselves are generated into ops/op_table.hpp (do not add an op here).
//
// Note [guarded math]
// Highway's contrib math is exact to a few ulp only inside a stated valid range (exp to
// +104 in float, sin/cos within +-39000, log on (0, max]) and gives unspecified values
// outside it. NumPy gives inf, 0, NaN or a correct value there. Each SIMD body below
// therefore tests its lanes against the range; a packet with any lane outside it (rare
// in practice: NaN, inf, huge arguments, log of 0) takes the C library's answer for those
// lanes (with the C library's floating-point flags, which are NumPy's: the fast body
// never runs on them). The fast path costs one compare and one branch per packet.
//
// Note [integer division through double]
// x86 has no SIMD integer division, and one idiv per lane costs 20-90 cycles; NumPy
// divides by a scalar with libdivide's multiply-and-shift. int32 and int64 floor division
// and remainder run instead as floor(double(a) / double(b)), which is exact whenever
// |a|, |b| < 2^51:
// - The quotient's rounding error, at most |a/b| * 2^-53, is smaller than 1/|b|, the
//   least distance from a non-integer quotient a/b to an integer; so rounding never
//   carries the quotient onto or across an integer, and floor gives NumPy's result.
// - The remainder a - b * q is an integer below |b| in size, and b * q below 2^52, so it
//   is exact too, with or without a fused multiply-add.
// - 2^52 would do for both; 2^51 lets int64 convert to and from double by adding the
//   magic number 1.5 * 2^52, two instructions on every target (Highway emulates the
//   int64 conversions below AVX-512 with many more).
// Every int32 qualifies, and uint8 divides through float (exact below 2^24, by the same
// argument with float's 2^-24). int64 lanes outside the range, zero divisors (NumPy's 0 and
// "divide by zero" flag) and MIN // -1 (wraps, "overflow") take the scalar body through
// detail::guarded2. A packed double division costs about 2 cycles a lane, for divisors
// that vary lane by lane as well as for constant ones.
#pragma once

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>

#include "dynexpr/core/config.hpp"
#include "dynexpr/core/error.hpp"
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include "dynexpr/ops/rules.hpp"
#include "dynexpr/ops/scalar_support.hpp"
#include "dynexpr/simd/convert.hpp"
#include "dynexpr/simd/math.hpp"

// A check() for the arithmetic ops: NumPy makes + and * of two bools logical, dynexpr
// rejects them with the op to use instead.
#define DYNEXPR_NOT_TWO_BOOLS(NAME, ALT) \
  DYNEXPR_OP_CHECK(NAME, !arith_rule::all_bool<A...>, "not defined for two bool operands; " ALT)

namespace dynexpr::ops {

namespace hn = hwy::HWY_NAMESPACE;

namespace detail {
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
  return hn::And(hn::Ge(x, hn::Set(d, static_cast<T>(lo))),
                 hn::Le(x, hn::Set(d, static_cast<T>(hi))));
}
template <class D, class V>
DYNEXPR_INLINE hn::Mask<D> above_within(D d, V x, double lo, double hi) {
  using T = hn::TFromD<D>;
  return hn::And(hn::Gt(x, hn::Set(d, static_cast<T>(lo))),
                 hn::Le(x, hn::Set(d, static_cast<T>(hi))));
}
/// f(x) for odd functions with f(0) = 0: +-0 lanes return x itself, so the sign of zero
/// survives as in libm and NumPy (Highway's polynomials give +0 for sin(-0), expm1(-0)).
template <class D, class V>
DYNEXPR_INLINE V keep_zero(D d, V x, V r) {
  return hn::IfThenElse(hn::Eq(x, hn::Zero(d)), x, r);
}
#if HWY_TARGET != HWY_SCALAR  // no Half/Combine there (nvcc's host pass of CUDA units)
/// f applied to the upper halves of x and y and to their lower halves, put back together.
template <class D, class V, class F>
DYNEXPR_INLINE V by_halves(D d, V x, V y, F f) {
  const hn::Half<D> dh;
  return hn::Combine(d, f(hn::UpperHalf(dh, x), hn::UpperHalf(dh, y)),
                     f(hn::LowerHalf(dh, x), hn::LowerHalf(dh, y)));
}
#endif
/// Integer floor division (kMod false) or NumPy's remainder (kMod true) of lanes of
/// int32/int64 (uint8: through float), through double where that is exact (Note [integer
/// division through double]); other lanes, and types without the conversions, take Op's
/// scalar body.
template <class Op, bool kMod, class D, class V>
DYNEXPR_INLINE V int_divmod(D d, V a, V b) {
  using T = hn::TFromD<D>;
  const auto exact = [](T x, T y) { return Op::scalar(x, y); };
  if constexpr (sizeof(T) == 8 && std::is_signed_v<T>) {
    // Conversions by the magic number 1.5 * 2^52, exact for |x| < 2^51 and two
    // instructions on every target (Highway emulates int64 <-> double below AVX-512).
    const hn::Rebind<double, D> df;
    const V magic_bits = hn::Set(d, T(0x4338000000000000));
    const auto magic = hn::Set(df, 6755399441055744.0);
    const auto to_double = [&](V x) {
      return hn::Sub(hn::BitCast(df, hn::Add(x, magic_bits)), magic);
    };
    const auto to_int = [&](auto x) {
      return hn::Sub(hn::BitCast(d, hn::Add(x, magic)), magic_bits);
    };
    constexpr T lim = T(1) << 51;
    const V hi = hn::Set(d, lim), lo = hn::Set(d, -lim);
    const auto ok = hn::And(hn::And(hn::Lt(a, hi), hn::Gt(a, lo)),
                            hn::And(hn::And(hn::Lt(b, hi), hn::Gt(b, lo)), hn::Ne(b, hn::Zero(d))));
    return guarded2(d, a, b, ok, [&](V x, V y) {
      const auto fx = to_double(x), fy = to_double(y);
      const auto q = hn::Floor(hn::Div(fx, fy));
      if constexpr (kMod) return to_int(hn::NegMulAdd(fy, q, fx));
      else return to_int(q);
    }, exact);
  }
#if HWY_TARGET != HWY_SCALAR  // no Half/Combine there (nvcc's host pass of CUDA units)
  else if constexpr (sizeof(T) == 4 && std::is_signed_v<T> && simd::max_lanes_v<D> >= 2) {
    const hn::Half<D> dh;
    const hn::Rebind<double, decltype(dh)> df;
    const auto half = [&](auto x, auto y) {
      const auto fx = hn::PromoteTo(df, x), fy = hn::PromoteTo(df, y);
      const auto q = hn::Floor(hn::Div(fx, fy));
      if constexpr (kMod) return hn::DemoteTo(dh, hn::NegMulAdd(fy, q, fx));
      else return hn::DemoteTo(dh, q);
    };
    // Every int32 is exact in double; only a zero divisor (and MIN // -1, which the
    // demotion would saturate) leave the fast path.
    const auto ok = hn::And(hn::Ne(b, hn::Zero(d)),
                            hn::Or(hn::Ne(b, hn::Set(d, T(-1))),
                                   hn::Ne(a, hn::Set(d, std::numeric_limits<T>::min()))));
    return guarded2(d, a, b, ok, [&](V x, V y) { return by_halves(d, x, y, half); }, exact);
  } else if constexpr (std::is_same_v<T, std::uint8_t> && simd::max_lanes_v<D> >= 4) {
    // Through float, exact for operands below 2^24: four quarters of the packet.
    const hn::Half<D> dh;
    const hn::Half<decltype(dh)> dq;
    const hn::Rebind<std::int32_t, decltype(dq)> di;
    const hn::Rebind<float, decltype(dq)> df;
    const auto quarter = [&](auto x, auto y) {
      const auto fx = hn::ConvertTo(df, hn::PromoteTo(di, x));
      const auto fy = hn::ConvertTo(df, hn::PromoteTo(di, y));
      const auto q = hn::Floor(hn::Div(fx, fy));
      if constexpr (kMod) return hn::DemoteTo(dq, hn::ConvertTo(di, hn::NegMulAdd(fy, q, fx)));
      else return hn::DemoteTo(dq, hn::ConvertTo(di, q));
    };
    const auto half = [&](auto x, auto y) { return by_halves(dh, x, y, quarter); };
    return guarded2(d, a, b, hn::Ne(b, hn::Zero(d)),
                    [&](V x, V y) { return by_halves(d, x, y, half); }, exact);
  }
#endif
  else {
    return simd::lanewise(d, exact, d, a, b);
  }
}
template <class T>
inline constexpr double max_finite = static_cast<double>(std::numeric_limits<T>::max());
}  // namespace detail

}  // namespace dynexpr::ops
