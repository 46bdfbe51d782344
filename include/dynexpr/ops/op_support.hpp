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
//
// Note [division by a scalar]
// `img // 4` and `idx % n` divide every lane by the same integer. detail::scalar_divisor
// prepares that divisor once per kernel call (the evaluator of a map node whose divisor is
// a scalar node, eval/evaluator.hpp) and divides with no division instruction per packet:
// - uint8: a widened to 16 bits, q = (a * m) >> 16 with m = ceil(2^16/b) (MulHigh). With
//   m = (2^16 + e)/b, 0 <= e < b, the product overshoots a/b by a e / (b 2^16) < 1/b
//   (a e <= 255 * 254 < 2^16): never onto the next integer, so q is the exact quotient.
// - int32 and int64, through double: a // b == floor(t), t = (a + c) / b, c = 0.5 sign(b).
//   For b > 0, t lies in [a/b, (a + 1)/b) and is never an integer (2a + 1 is odd, 2b even),
//   so its floor is a's; b < 0 is the mirror image. t is also at least 0.5/|b| away from
//   every integer, so q = floor(a * r + 0.5/|b|), r = 1/b rounded, is exact while the
//   roundings (of r, the product and the sum: three of 2^-53 at most) move t by less than
//   that: for |a| < 2^50, by under 3 * 2^-53 * 2^50/|b| = 0.375/|b|. int64 lanes past 2^50
//   (and divisors there) take the scalar body. The remainder a - q b, an integer below
//   2^51, is exact.
// A packed multiply-add costs a fraction of a packed division. A zero divisor and -1
// (MIN // -1 overflows) keep the op's packet body, with NumPy's flags.
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
// clip(x, lo, hi) where lo and hi are known not to be NaN (constants of a generated unit):
// x < lo ? lo : x, then > hi ? hi : that, as NumPy's own clip loop compares (a -0.0 at a
// 0.0 bound stays -0.0 there). Ordered compares are false on a NaN x, which so stays NaN,
// and raise no "invalid" flag. Two compares and two blends where clip_op's NaN-aware
// maximum and minimum take four of each: clip(x, -1, 1) * 3 over 1M float32 on one thread,
// 251 -> 127 us.
template <class D, class V>
DYNEXPR_INLINE V clip_to_bounds(D, V x, V lo, V hi) {
  if constexpr (is_float_v<hn::TFromD<D>>) {
    const V r = hn::IfThenElse(hn::Lt(x, lo), lo, x);
    return hn::IfThenElse(hn::Gt(r, hi), hi, r);
  } else {
    return hn::Min(hn::Max(x, lo), hi);
  }
}
// maximum or minimum of x and a constant c that is not NaN (IsMax; ConstFirst: c is the
// first operand): one ordered compare and one blend, NaN x passing through, and the second
// operand on equality as NumPy's (maximum(-0.0, 0.0) is 0.0). relu's maximum(x, 0).
template <bool IsMax, bool ConstFirst, class D, class V>
DYNEXPR_INLINE V bound_by_const(D, V x, V c) {
  if constexpr (is_float_v<hn::TFromD<D>>) {
    if constexpr (IsMax) return hn::IfThenElse(ConstFirst ? hn::Lt(x, c) : hn::Le(x, c), c, x);
    else return hn::IfThenElse(ConstFirst ? hn::Gt(x, c) : hn::Ge(x, c), c, x);
  } else {
    return IsMax ? hn::Max(x, c) : hn::Min(x, c);
  }
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
// int64 <-> double by the magic number 1.5 * 2^52: exact for |x| < 2^51 (within_pow2<51>)
// and two instructions on every target (Highway emulates the int64 conversions below AVX-512).
/// |x| < 2^kBits, lane by lane.
template <int kBits, class D>
DYNEXPR_INLINE hn::Mask<D> within_pow2(D d, hn::Vec<D> x) {
  using T = hn::TFromD<D>;
  constexpr T lim = T(1) << kBits;
  return hn::And(hn::Lt(x, hn::Set(d, lim)), hn::Gt(x, hn::Set(d, -lim)));
}
template <class DF, class V>
DYNEXPR_INLINE hn::Vec<DF> i51_to_double(DF df, V x) {
  const hn::DFromV<V> d;
  return hn::Sub(hn::BitCast(df, hn::Add(x, hn::Set(d, hn::TFromV<V>(0x4338000000000000)))),
                 hn::Set(df, 6755399441055744.0));
}
template <class D, class VF>
DYNEXPR_INLINE hn::Vec<D> double_to_i51(D d, VF x) {
  const hn::DFromV<VF> df;
  return hn::Sub(hn::BitCast(d, hn::Add(x, hn::Set(df, 6755399441055744.0))),
                 hn::Set(d, hn::TFromD<D>(0x4338000000000000)));
}
/// Integer floor division (kMod false) or NumPy's remainder (kMod true) of lanes of
/// int32/int64 (uint8: through float), through double where that is exact (Note [integer
/// division through double]); other lanes, and types without the conversions, take Op's
/// scalar body.
template <class Op, bool kMod, class D, class V>
DYNEXPR_INLINE V int_divmod(D d, V a, V b) {
  using T = hn::TFromD<D>;
  const auto exact = [](T x, T y) { return Op::scalar(x, y); };
  if constexpr (sizeof(T) == 8 && std::is_signed_v<T>) {
    const hn::Rebind<double, D> df;
    const auto ok = hn::And(hn::And(within_pow2<51>(d, a), within_pow2<51>(d, b)), hn::Ne(b, hn::Zero(d)));
    return guarded2(d, a, b, ok, [&](V x, V y) {
      const auto fx = i51_to_double(df, x), fy = i51_to_double(df, y);
      const auto q = hn::Floor(hn::Div(fx, fy));
      if constexpr (kMod) return double_to_i51(d, hn::NegMulAdd(fy, q, fx));
      else return double_to_i51(d, q);
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
#if HWY_TARGET != HWY_SCALAR  // no Half/Combine there (nvcc's host pass of CUDA units)
/// f(w) for x promoted to lanes of W (whole when that fits one vector, else by halves),
/// its result narrowed back with narrow(dn, w) into the lane type of x.
template <class W, class D, class V, class Widen, class F, class Narrow>
DYNEXPR_INLINE V through_wider(D d, V x, Widen widen, F f, Narrow narrow) {
  using T = hn::TFromD<D>;
  if constexpr (simd::max_lanes_v<D> < simd::max_lanes_v<hn::ScalableTag<T>>) {
    const hn::Rebind<W, D> dw;
    return narrow(d, f(widen(dw, x)));
  } else {
    const hn::Half<D> dh;
    const hn::Rebind<W, decltype(dh)> dw;
    return hn::Combine(d, narrow(dh, f(widen(dw, hn::UpperHalf(dh, x)))),
                       narrow(dh, f(widen(dw, hn::LowerHalf(dh, x)))));
  }
}
#endif

/// One integer divisor for every lane, prepared once (Note [division by a scalar]): the
/// element types with a path are uint8, int32 and int64.
template <class T>
struct scalar_divisor {
  static constexpr bool kBytes = std::is_same_v<T, std::uint8_t>;
  static constexpr bool kInt32 = std::is_same_v<T, std::int32_t>;
  static constexpr bool kInt64 = std::is_same_v<T, std::int64_t>;

  T b_;
  bool fast_ = false;                    // false: the op's packet body divides
  std::uint16_t magic_ = 0;              // uint8: ceil(2^16 / b), b >= 2
  double recip_ = 0, bias_ = 0;          // int32, int64: 1/b rounded, 0.5/|b|

  explicit scalar_divisor(T b) : b_(b) {
    if constexpr (kBytes) {
      fast_ = b != 0;
      if (b > 1) magic_ = static_cast<std::uint16_t>((0xFFFFu + b) / b);
    } else {
      static_assert(kInt32 || kInt64, "no packed division by a scalar for this type");
      // MIN // -1 overflows (the scalar body raises the flag); int64 divisors past 2^50
      // are outside the exact range.
      const T lim = kInt64 ? T(std::int64_t(1) << 50) : std::numeric_limits<T>::max();
      fast_ = b != 0 && b != -1 && b < lim && b > -lim;
      recip_ = 1.0 / static_cast<double>(b);
      bias_ = 0.5 * std::fabs(recip_);
    }
  }
  bool fast() const { return fast_; }

#if HWY_TARGET != HWY_SCALAR
  /// a // b (kMod false) or NumPy's a % b (kMod true), lane by lane; only when fast().
  /// exact(x) is the scalar body, for int64 lanes at or past 2^50.
  template <bool kMod, class D, class V, class Exact>
  DYNEXPR_INLINE V apply(D d, V a, [[maybe_unused]] Exact exact) const {
    if constexpr (kBytes) {
      if (b_ == 1) return kMod ? hn::Zero(d) : a;
      const auto widen = [](auto dw, auto x) { return hn::PromoteTo(dw, x); };
      const auto narrow = [](auto dn, auto w) {  // values below 256: no saturation
        return hn::DemoteTo(dn, hn::BitCast(hn::Rebind<std::int16_t, decltype(dn)>(), w));
      };
      return through_wider<std::uint16_t>(d, a, widen, [&](auto x) {
        const hn::DFromV<decltype(x)> dw;
        const auto t = hn::MulHigh(x, hn::Set(dw, magic_));
        if constexpr (kMod) return hn::Sub(x, hn::Mul(t, hn::Set(dw, std::uint16_t{b_})));
        else return t;
      }, narrow);
    } else if constexpr (kInt32) {
      const auto widen = [](auto dw, auto x) { return hn::PromoteTo(dw, x); };
      const auto narrow = [](auto dn, auto q) { return hn::DemoteTo(dn, q); };
      return through_wider<double>(d, a, widen, [&](auto fa) { return in_double<kMod>(fa); },
                                   narrow);
    } else {
      const hn::Rebind<double, D> df;
      return guarded(d, a, within_pow2<50>(d, a), [&](V x) {
        return double_to_i51(d, in_double<kMod>(i51_to_double(df, x)));
      }, exact);
    }
  }

 private:
  /// floor((a + c) / b) or a - b floor((a + c) / b) of integers a in double lanes.
  template <bool kMod, class VF>
  DYNEXPR_INLINE VF in_double(VF fa) const {
    const hn::DFromV<VF> df;
    const auto q = hn::Floor(hn::MulAdd(fa, hn::Set(df, recip_), hn::Set(df, bias_)));
    if constexpr (kMod) return hn::NegMulAdd(q, hn::Set(df, double(b_)), fa);  // exact
    else return q;
  }
#endif
};

template <class T>
inline constexpr double max_finite = static_cast<double>(std::numeric_limits<T>::max());
}  // namespace detail

}  // namespace dynexpr::ops
