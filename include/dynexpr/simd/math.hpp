// dynexpr/simd/math.hpp — vector math that Highway 1.0.3's hwy/contrib/math lacks.
//
// Every function is `template <class D, class V> V Name(D d, V x[, V y])` over float and
// double lanes, full or partial vectors (Note [lane count of mixed expressions] in
// simd/convert.hpp). Contracts, as measured by tests/cpp/test_simd_math.cpp on AVX2+FMA
// (g++ 12 -O2 -march=native), against a long double reference, in ULPs of the lane type
// (subnormal results in subnormal ULPs):
//
// | function | lanes  | bound | measured | measured over (2M points + edge values)  | valid    |
// |----------|--------|-------|----------|------------------------------------------|----------|
// | Exp2     | float  | 1     | 0.79     | [-160, 130], integers, half-integers     | all x    |
// |          | double | 1     | 0.75     | [-1080, 1030], integers, half-integers   | all x    |
// | Pow      | float  | 1     | 0.50     | |x| in 2^[-130,130], results over the    | all x, y |
// |          | double | 1     | 0.75     | whole range (|x| in 2^[-1030,1030]), x   | all x, y |
// |          |        |       |          | near 1, x < 0 with integral y            |          |
// | Atan2    | float  | 2     | 1.45     | log-uniform over all finite values,      | all x, y |
// |          | double | 2     | 1.48     | subnormals included, and [-10, 10]^2     | all x, y |
// | Cosh     | float  | 1.5   | 1.08     | |x| <= 90                                | all x    |
// |          | double | 1.5   | 1.01     | |x| <= 711                               | all x    |
// | Tan      | float  | 1     | 0.76     | |x| <= pi/2 - 0.01 (0.74 for |x| < 1000, | |x|<1e5  |
// |          | double | 1     | 0.78     | near k pi/2 too; 0.80 for |x| < 1e5)     | |x|<1e5  |
// | Hypot    | float  | 1     | 0.75     | log-uniform over all finite values       | all x, y |
// |          | double | 1     | 0.75     | log-uniform over all finite values       | all x, y |
// | Erf      | float  | 1.5   | 1.21     | |x| <= 5, tiny |x| down to subnormals    | all x    |
// |          | double | 1.5   | 1.13     | |x| <= 7, tiny |x| down to subnormals    | all x    |
// | Sigmoid  | float  | 1     | 0.82     | |x| <= 110                               | all x    |
// |          | double | 1     | 0.77     | |x| <= 750                               | all x    |
// | ExpIn-   | float  | 1.01  | 1.006    | its valid range, and [-2, 2]             | [-86.9,  |
// | Range    |        |       |          |                                          |  88.3]   |
// |          | double | 1     | 0.98     | its valid range, and [-2, 2]             | [-707.5, |
// |          |        |       |          |                                          |  709]    |
//
// "bound" is what the test checks; "measured" is the largest error seen.
// Special values follow C99 Annex F / NumPy: NaN in gives NaN out (except pow(x, 0) and
// pow(1, y), which are 1), signed zeros and infinities as listed at each declaration.
// Targets without FMA (SSE2/SSSE3/SSE4, i.e. builds without -march=native) use exact
// products by Veltkamp splitting instead; the same tests pass there with the bounds above.
//
// Note [no fast-math]
// The error-free transformations below (TwoSum, TwoProd) and the NaN/inf/zero handling
// rely on IEEE semantics: do not compile with -ffast-math / -fassociative-math.
#pragma once

#include "dynexpr/core/config.hpp"
// config.hpp must come first (HWY_COMPILE_ONLY_STATIC).
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <cmath>

namespace dynexpr::simd {

namespace hn = hwy::HWY_NAMESPACE;

/// 2^x. Split x = n + f, |f| <= 1/2; 2^f by polynomial, 2^n by exponent bits in two
/// steps, so subnormal results are rounded once. +inf -> +inf, -inf -> +0.
template <class D, class V>
HWY_INLINE V Exp2(D d, V x);

/// x^y with C99/NumPy special cases: pow(x, ±0) = 1 and pow(1, y) = 1 even for NaN;
/// x < 0 with integral y takes the sign of (-1)^y, with non-integral y gives NaN;
/// pow(±0, y<0) = ±inf for odd integral y else +inf; pow(±0, y>0) = ±0 / +0;
/// pow(-1, ±inf) = 1; infinities per Annex F. float lanes are computed in double;
/// double lanes use a double-double log (Note [pow in double-double]).
template <class D, class V>
HWY_INLINE V Pow(D d, V x, V y);

/// atan2(y, x) with C99 special cases: atan2(±0, +0) = ±0, atan2(±0, -0) = ±pi,
/// atan2(±inf, +inf) = ±pi/4, atan2(±inf, -inf) = ±3pi/4, atan2(±y, -inf) = ±pi.
template <class D, class V>
HWY_INLINE V Atan2(D d, V y, V x);

/// cosh(x), finite up to the true overflow threshold (e.g. cosh(89.0f) is finite).
template <class D, class V>
HWY_INLINE V Cosh(D d, V x);

/// tan(x), odd (tan(-0) = -0), NaN for ±inf.
template <class D, class V>
HWY_INLINE V Tan(D d, V x);

/// hypot(x, y) without intermediate overflow or underflow; hypot(±inf, NaN) = +inf.
template <class D, class V>
HWY_INLINE V Hypot(D d, V x, V y);

/// erf(x), odd (erf(-0) = -0), erf(±inf) = ±1.
template <class D, class V>
HWY_INLINE V Erf(D d, V x);

/// 1 / (1 + exp(-x)) without overflow: sigmoid(-inf) = 0, sigmoid(+inf) = 1, and
/// relative accuracy for large negative x (computed as exp(x) / (1 + exp(x)) there).
template <class D, class V>
HWY_INLINE V Sigmoid(D d, V x);

/// e^x for x in the valid range only (the exp op guards it: Note [guarded math] in
/// ops/op_support.hpp): float [-86.9, 88.3], double [-707.5, 709]; garbage outside.
/// Note [exp in range]: hn::Exp's reduction and polynomial (Cody-Waite with a two-part
/// ln 2, Cephes' coefficients, so its accuracy), with the work hn::Exp spends on all x
/// left out: the nearest integer k of x / ln 2 comes from adding 1.5 * 2^23 (2^52), whose
/// low bits then hold k, so k << 23 (52) added to the polynomial's bits is the scaling,
/// one integer add instead of two float-to-int conversions and two multiplies; the
/// polynomial is Horner's (fewer operations than Estrin's where throughput, not latency,
/// bounds a loop). Measured on AVX-512 (g++ 12 -O2): 2.2x hn::Exp's throughput in float,
/// 3.3x in double. In range, k stays within [-125, 127] ([-1021, 1023]), so the scaled
/// result is a normal number.
template <class D, class V>
HWY_INLINE V ExpInRange(D d, V x);

// ---------------------------------------------------------------------------------------
// Implementation
// ---------------------------------------------------------------------------------------
namespace detail {

template <class T>
inline constexpr int kMantBits = sizeof(T) == 4 ? 23 : 52;
template <class T>
inline constexpr int kExpBias = sizeof(T) == 4 ? 127 : 1023;

/// The float or the double spelling of a constant, each correctly rounded.
template <class T>
constexpr T Pick(float f, double d) {
  if constexpr (sizeof(T) == 4) {
    return f;
  } else {
    return d;
  }
}

template <class D>
HWY_INLINE hn::Vec<D> Val(D d, double c) {
  return hn::Set(d, static_cast<hn::TFromD<D>>(c));
}

// ln 2 = kLn2Hi + kLn2Lo, each rounded to T.
template <class T>
inline constexpr T kLn2Hi = Pick<T>(0.6931471824645996f, 0.6931471805599453);
template <class T>
inline constexpr T kLn2Lo = Pick<T>(-1.9046542121259336e-09f, 2.3190468138462996e-17);

/// hi + lo == a + b exactly (Knuth).
template <class V>
HWY_INLINE void TwoSum(V a, V b, V& hi, V& lo) {
  hi = hn::Add(a, b);
  const V bb = hn::Sub(hi, a);
  lo = hn::Add(hn::Sub(a, hn::Sub(hi, bb)), hn::Sub(b, bb));
}

/// hi + lo == a + b exactly, provided exponent(a) >= exponent(b) or a == 0 (Dekker).
template <class V>
HWY_INLINE void FastTwoSum(V a, V b, V& hi, V& lo) {
  hi = hn::Add(a, b);
  lo = hn::Sub(b, hn::Sub(hi, a));
}

/// p + e == a * b exactly (no overflow assumed).
template <class D, class V>
HWY_INLINE void TwoProd(D d, V a, V b, V& p, V& e) {
  p = hn::Mul(a, b);
#if HWY_NATIVE_FMA
  (void)d;
  e = hn::MulSub(a, b, p);
#else
  // Veltkamp split into halves whose products are exact, then Dekker's product.
  using T = hn::TFromD<D>;
  const V split = Val(d, Pick<T>(4097.0f, 134217729.0));
  const V ca = hn::Mul(a, split), cb = hn::Mul(b, split);
  const V ah = hn::Sub(ca, hn::Sub(ca, a)), bh = hn::Sub(cb, hn::Sub(cb, b));
  const V al = hn::Sub(a, ah), bl = hn::Sub(b, bh);
  e = hn::Add(hn::Add(hn::Add(hn::Sub(hn::Mul(ah, bh), p), hn::Mul(ah, bl)), hn::Mul(al, bh)),
              hn::Mul(al, bl));
#endif
}

/// c - a * b with a single rounding when c is close to a * b (division and square root
/// residuals): one FMA, or an exact product and a Sterbenz subtraction.
template <class D, class V>
HWY_INLINE V Residual(D d, V a, V b, V c) {
#if HWY_NATIVE_FMA
  (void)d;
  return hn::NegMulAdd(a, b, c);
#else
  V p, e;
  TwoProd(d, a, b, p, e);
  return hn::Sub(hn::Sub(c, p), e);
#endif
}

/// c0 + x * (c1 + x * (c2 + ...)).
template <class D, class V>
HWY_INLINE V Horner(D d, V /*x*/, double c0) {
  return Val(d, c0);
}
template <class D, class V, class... C>
HWY_INLINE V Horner(D d, V x, double c0, C... rest) {
  return hn::MulAdd(Horner(d, x, rest...), x, Val(d, c0));
}

/// Lanes whose sign bit is set (true for -0, unlike x < 0).
template <class D, class V>
HWY_INLINE auto SignBitSet(D d, V x) {
  const hn::RebindToSigned<D> di;
  return hn::RebindMask(d, hn::Lt(hn::BitCast(di, x), hn::Zero(di)));
}

/// 2^k for integral k with 1 - bias <= k <= bias: k + bias goes to the low mantissa bits
/// of a large constant, then is shifted into the exponent field.
template <class D, class V>
HWY_INLINE V Pow2I(D d, V k) {
  using T = hn::TFromD<D>;
  const hn::RebindToUnsigned<D> du;
  constexpr double kMagic = 1.5 * static_cast<double>(1ull << kMantBits<T>) + kExpBias<T>;
  const auto bits = hn::BitCast(du, hn::Add(k, Val(d, kMagic)));
  return hn::BitCast(d, hn::ShiftLeft<kMantBits<T>>(bits));
}

/// p * 2^n for integral |n| <= 2 * bias - 4. Two factors keep each one normal, so a
/// subnormal result is rounded only once and an overflowing one becomes inf.
template <class D, class V>
HWY_INLINE V ScaleByPow2(D d, V p, V n) {
  const V n1 = hn::Floor(hn::Mul(n, Val(d, 0.5)));
  return hn::Mul(hn::Mul(p, Pow2I(d, n1)), Pow2I(d, hn::Sub(n, n1)));
}

/// exp(rh + rl) = hi + lo for |rh| <= 0.35 and |rl| <= ulp(rh): Taylor polynomial
/// (truncation below 2^-27 / 2^-57), with 1 + rh kept exact so only the last addition
/// rounds; lo is what that rounding dropped.
template <class D, class V>
HWY_INLINE void ExpCore(D d, V rh, V rl, V& hi, V& lo) {
  using T = hn::TFromD<D>;
  V q;
  if constexpr (sizeof(T) == 4) {
    q = Horner(d, rh, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040);
  } else {
    q = Horner(d, rh, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040, 1.0 / 40320,
               1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800, 1.0 / 479001600, 1.0 / 6227020800.0);
  }
  const V s = hn::MulAdd(hn::Mul(rh, rh), q, hn::MulAdd(rl, rh, rl));
  V th, tl;
  FastTwoSum(Val(d, 1.0), rh, th, tl);
  FastTwoSum(th, hn::Add(tl, s), hi, lo);
}

/// exp(zh + zl) = hi + lo with |zl| <= ulp(zh); overflows to inf, underflows through
/// subnormals to 0. NaN is not propagated (callers do it).
template <class D, class V>
HWY_INLINE void ExpDD(D d, V zh, V zl, V& hi, V& lo) {
  using T = hn::TFromD<D>;
  // Beyond the limit the result is 0 or inf anyway; the clamp keeps n in ScaleByPow2's
  // range.
  const V lim = Val(d, Pick<T>(170.0f, 1400.0));
  zl = hn::IfThenElseZero(hn::And(hn::Le(hn::Abs(zh), lim), hn::IsFinite(zl)), zl);
  zh = hn::Min(hn::Max(zh, hn::Neg(lim)), lim);
  const V n = hn::Round(hn::Mul(zh, Val(d, 1.4426950408889634)));
  // zh - n * ln2_hi is exact: p is within a factor 2 of zh (Sterbenz).
  V p, e;
  TwoProd(d, n, hn::Set(d, kLn2Hi<T>), p, e);
  const V rh0 = hn::Sub(zh, p);
  const V rl0 = hn::Sub(hn::NegMulAdd(n, hn::Set(d, kLn2Lo<T>), zl), e);
  V rh, rl, ph, pl;
  TwoSum(rh0, rl0, rh, rl);
  ExpCore(d, rh, rl, ph, pl);
  // p 2^n in two factors (see ScaleByPow2).
  const V n1 = hn::Floor(hn::Mul(n, Val(d, 0.5)));
  const V f1 = Pow2I(d, n1), f2 = Pow2I(d, hn::Sub(n, n1));
  hi = hn::Mul(hn::Mul(ph, f1), f2);
  lo = hn::Mul(hn::Mul(pl, f1), f2);
}

template <class D, class V>
HWY_INLINE V ExpDD(D d, V zh, V zl) {
  V hi, lo;
  ExpDD(d, zh, zl, hi, lo);
  return hi;
}

// Note [pow in double-double]
// pow(x, y) = exp(y * ln x) needs ln x to about 2^-66 relative: |y ln x| reaches 745
// before the result leaves the double range, and an absolute error of 2^-54 there is
// already 0.5 ulp. LogDD returns ln x as hi + lo: x = 2^k m with m in [sqrt2/2, sqrt2),
// ln m = 2 atanh(s), s = (m-1)/(m+1), |s| <= 0.1716, computed as
// 2s + (2/3)s^3 + (2/5)s^5 + s^7 T(s^2) with the first three terms in double-double and
// the Taylor tail T (error below 2^-70) in double. ExpDD then takes the double-double
// product.

/// ln x = hi + lo (|lo| <= ulp(hi)/2) for double lanes, x positive finite (subnormals
/// included). Other inputs give unspecified values.
template <class D, class V>
HWY_INLINE void LogDD(D d, V x, V& hi, V& lo) {
  static_assert(sizeof(hn::TFromD<D>) == 8, "LogDD is for double lanes");
  const hn::RebindToUnsigned<D> du;
  const auto tiny = hn::Lt(x, Val(d, 2.2250738585072014e-308));
  x = hn::IfThenElse(tiny, hn::Mul(x, Val(d, 18014398509481984.0 /* 2^54 */)), x);
  // musl's trick: offset the bits so that the exponent field rounds m into [sqrt2/2,
  // sqrt2).
  const auto ix =
      hn::Add(hn::BitCast(du, x), hn::Set(du, 0x3ff0000000000000ull - 0x3fe6a09e667f3bcdull));
  const V two52 = Val(d, 4503599627370496.0);
  const V k0 = hn::Sub(hn::BitCast(d, hn::Or(hn::ShiftRight<52>(ix), hn::BitCast(du, two52))),
                       Val(d, 4503599627370496.0 + 1023.0));
  const V k = hn::Sub(k0, hn::IfThenElseZero(tiny, Val(d, 54.0)));
  const V m = hn::BitCast(d, hn::Add(hn::And(ix, hn::Set(du, 0x000fffffffffffffull)),
                                     hn::Set(du, 0x3fe6a09e667f3bcdull)));

  const V one = Val(d, 1.0);
  const V f = hn::Sub(m, one);  // exact
  V ah, al;
  FastTwoSum(one, m, ah, al);  // m + 1, exact
  // s = sh + s_lo: the division's remainder f - sh (ah + al) is computed exactly.
  const V sh = hn::Div(f, ah);
  V pa, ea;
  TwoProd(d, sh, ah, pa, ea);
  const V s_lo = hn::Div(hn::Sub(hn::Sub(hn::Sub(f, pa), ea), hn::Mul(sh, al)), ah);

  // s^3 = p3 + e3 (double-double).
  V p2, e2, p3, e3;
  TwoProd(d, sh, sh, p2, e2);
  TwoProd(d, p2, sh, p3, e3);
  e3 = hn::MulAdd(e2, sh, e3);
  e3 = hn::MulAdd(hn::Mul(Val(d, 3.0), p2), s_lo, e3);
  // (2/3) s^3 = t3h + t3l.
  const V c3h = Val(d, 0.6666666666666666), c3l = Val(d, 3.700743415417188e-17);
  V t3h, t3l;
  TwoProd(d, c3h, p3, t3h, t3l);
  t3l = hn::MulAdd(c3h, e3, hn::MulAdd(c3l, p3, t3l));
  // s^5 = p5 + e5 and (2/5) s^5 = t5h + t5l: in double alone this term would cost
  // 2^-63 relative, 0.5 ulp of pow at |y ln x| = 700.
  const V e2s = hn::MulAdd(hn::Add(sh, sh), s_lo, e2);
  V p5, e5;
  TwoProd(d, p3, p2, p5, e5);
  e5 = hn::MulAdd(p3, e2s, hn::MulAdd(e3, p2, e5));
  const V c5h = Val(d, 0.4), c5l = Val(d, -2.2204460492503132e-17);
  V t5h, t5l;
  TwoProd(d, c5h, p5, t5h, t5l);
  t5l = hn::MulAdd(c5h, e5, hn::MulAdd(c5l, p5, t5l));
  const V tail =
      hn::Mul(hn::Mul(p5, p2), Horner(d, p2, 2.0 / 7, 2.0 / 9, 2.0 / 11, 2.0 / 13, 2.0 / 15,
                                      2.0 / 17, 2.0 / 19, 2.0 / 21, 2.0 / 23, 2.0 / 25));
  // k ln2 with a hi part whose product with k (|k| < 2^11) is exact.
  const V kh = hn::Mul(k, Val(d, 6.93147180369123816490e-01));
  const V kl = hn::Mul(k, Val(d, 1.90821492927058770002e-10));
  V h, l1, l2, l3;
  TwoSum(kh, hn::Add(sh, sh), h, l1);
  TwoSum(h, t3h, h, l2);
  TwoSum(h, t5h, h, l3);
  V l = hn::Add(hn::Add(tail, t5l), hn::Add(t3l, hn::Add(s_lo, s_lo)));
  l = hn::Add(hn::Add(l, kl), hn::Add(hn::Add(l1, l2), l3));
  FastTwoSum(h, l, hi, lo);
}

/// exp(y ln|x|) for double lanes, for x finite nonzero; other lanes are fixed up by
/// PowSpecialCases. kFloatInputs: x and y are promoted floats, so hn::Log and hn::Exp in
/// double (error 2^-43 in y ln x) are far more than enough.
template <bool kFloatInputs, class D, class V>
HWY_INLINE V PowMagnitude(D d, V x, V y) {
  const V ax = hn::Abs(x);
  if constexpr (kFloatInputs) {
    // Beyond ±1000 the float result is 0 or inf; the clamp keeps hn::Exp in range.
    const V lim = Val(d, 1000.0);
    return hn::Exp(d, hn::Min(hn::Max(hn::Mul(y, hn::Log(d, ax)), hn::Neg(lim)), lim));
  } else {
    V lh, ll;
    LogDD(d, ax, lh, ll);
    V zh, ze;
    TwoProd(d, y, lh, zh, ze);
    return ExpDD(d, zh, hn::MulAdd(y, ll, ze));
  }
}

/// pow(x, y) from r = |x|^y (valid for finite nonzero x): signs, NaN for negative x with
/// non-integral y, and the C99 special cases.
template <class D, class V>
HWY_INLINE V PowSpecialCases(D d, V x, V y, V r) {
  const V zero = hn::Zero(d), one = Val(d, 1.0);
  const V inf = Val(d, HUGE_VAL);
  const V ax = hn::Abs(x);
  const auto y_int = hn::Eq(hn::Round(y), y);  // true for ±inf, false for NaN
  const V y_half = hn::Mul(y, Val(d, 0.5));
  const auto y_odd = hn::AndNot(hn::Eq(hn::Round(y_half), y_half), y_int);
  const auto x_neg = hn::Lt(x, zero);
  r = hn::IfThenElse(hn::And(x_neg, y_odd), hn::Neg(r), r);
  r = hn::IfThenElse(hn::AndNot(y_int, x_neg), Val(d, NAN), r);

  // y = ±inf: 1 if |x| == 1, else 0 or inf as |x| - 1 and y agree in sign.
  const V efx = hn::Xor(hn::Sub(ax, one), hn::And(hn::SignBit(d), y));
  const V r_yinf =
      hn::IfThenElse(hn::Eq(efx, zero), one, hn::IfThenElse(hn::Lt(efx, zero), zero, inf));
  r = hn::IfThenElse(hn::IsInf(y), r_yinf, r);

  // x = ±0 or ±inf: inf when (y < 0) == (x == 0), else 0; sign of x for odd y.
  const auto x_zero = hn::Eq(x, zero);
  const auto to_inf = hn::Not(hn::Xor(hn::Lt(y, zero), x_zero));
  V r_edge = hn::IfThenElseZero(to_inf, inf);
  r_edge = hn::IfThenElse(y_odd, hn::CopySign(r_edge, x), r_edge);
  r = hn::IfThenElse(hn::Or(x_zero, hn::IsInf(x)), r_edge, r);

  r = hn::IfThenElse(hn::Or(hn::IsNaN(x), hn::IsNaN(y)), hn::Add(x, y), r);
  return hn::IfThenElse(hn::Or(hn::Eq(y, zero), hn::Eq(x, one)), one, r);
}

/// f(dd, a, b) evaluated in double lanes, for float lanes a, b: one promoted vector when
/// the lane count fits a double vector, else the two halves.
template <class D, class V, class F>
HWY_INLINE V InDouble(D d, V a, V b, F f) {
  if constexpr (hn::MaxLanes(D()) <= hn::MaxLanes(hn::ScalableTag<double>())) {
    const hn::Rebind<double, D> dd;
    return hn::DemoteTo(d, f(dd, hn::PromoteTo(dd, a), hn::PromoteTo(dd, b)));
  } else {
#if HWY_TARGET != HWY_SCALAR  // one lane there: the branch above always holds, and
                              // HWY_SCALAR has no UpperHalf/Combine (nvcc's default target)
    const hn::Half<D> dh;
    const hn::Rebind<double, decltype(dh)> dd;
    const auto lo =
        f(dd, hn::PromoteTo(dd, hn::LowerHalf(dh, a)), hn::PromoteTo(dd, hn::LowerHalf(dh, b)));
    const auto hi =
        f(dd, hn::PromoteTo(dd, hn::UpperHalf(dh, a)), hn::PromoteTo(dd, hn::UpperHalf(dh, b)));
    return hn::Combine(d, hn::DemoteTo(dh, hi), hn::DemoteTo(dh, lo));
#endif
  }
}

}  // namespace detail

template <class D, class V>
HWY_INLINE V Exp2(D d, V x) {
  using T = hn::TFromD<D>;
  const V lim = detail::Val(d, detail::Pick<T>(250.0f, 2000.0));
  const V xc = hn::Min(hn::Max(x, hn::Neg(lim)), lim);
  const V n = hn::Round(xc);
  const V f = hn::Sub(xc, n);  // exact, |f| <= 1/2
  V rh, rl;
  detail::TwoProd(d, f, hn::Set(d, detail::kLn2Hi<T>), rh, rl);
  rl = hn::MulAdd(f, hn::Set(d, detail::kLn2Lo<T>), rl);
  V ph, pl;
  detail::ExpCore(d, rh, rl, ph, pl);
  const V r = detail::ScaleByPow2(d, ph, n);
  return hn::IfThenElse(hn::IsNaN(x), x, r);
}

template <class D, class V>
HWY_INLINE V Pow(D d, V x, V y) {
  if constexpr (sizeof(hn::TFromD<D>) == 8) {
    return detail::PowSpecialCases(d, x, y, detail::PowMagnitude<false>(d, x, y));
  } else {
    // |x|^y in double rounds to float with at most 0.5 ulp + 2^-19 ulp.
    const V r = detail::InDouble(d, x, y, [](auto dd, auto a, auto b) {
      return detail::PowMagnitude</*kFloatInputs=*/true>(dd, a, b);
    });
    return detail::PowSpecialCases(d, x, y, r);
  }
}

template <class D, class V>
HWY_INLINE V Atan2(D d, V y, V x) {
  using T = hn::TFromD<D>;
  const V zero = hn::Zero(d);
  const V ax = hn::Abs(x), ay = hn::Abs(y);
  const V mx = hn::Max(ax, ay), mn = hn::Min(ax, ay);
  const auto both_inf = hn::And(hn::IsInf(x), hn::IsInf(y));
  // 0/0 and inf/inf would be NaN; 0 and 1 give the right angles.
  const V t = hn::IfThenElse(hn::Eq(mx, zero), zero,
                             hn::IfThenElse(both_inf, detail::Val(d, 1.0), hn::Div(mn, mx)));
  // t >= 3/4: atan t = pi/4 + atan u, u = (t - 1) / (t + 1) in [-1/7, 0], where
  // hn::Atan is more accurate. atan(t + dt) = atan t + dt / (1 + t^2), dt the rounding
  // error of mn / mx.
  const V one = detail::Val(d, 1.0);
  const auto upper = hn::Ge(t, detail::Val(d, 0.75));
  const V u = hn::IfThenElse(upper, hn::Div(hn::Sub(t, one), hn::Add(t, one)), t);
  const V v = hn::Atan(d, u);
  const auto finite_ratio = hn::And(hn::Gt(t, zero), hn::Lt(t, one));
#if HWY_NATIVE_FMA
  const V dt = hn::IfThenElseZero(finite_ratio, hn::Div(hn::NegMulAdd(t, mx, mn), mx));
#else
  // Veltkamp splitting over- and underflows at the ends of the range: no correction.
  (void)finite_ratio;
  const V dt = zero;
#endif
  // |result| = c ± (b + v) with c in {0, pi/2, pi} by octant and b in {0, pi/4}: the
  // constants are summed as a pair first, so that only the last addition rounds.
  const auto swap = hn::Gt(ay, ax);
  const auto x_neg = detail::SignBitSet(d, x);
  const auto minus = hn::Xor(swap, x_neg);
  const V pio4h = hn::Set(d, detail::Pick<T>(0.7853981852531433f, 0.7853981633974483));
  const V pio4l = hn::Set(d, detail::Pick<T>(-2.1855694143368964e-08f, 3.061616997868383e-17));
  const V pio2h = hn::Add(pio4h, pio4h), pio2l = hn::Add(pio4l, pio4l);
  const V pih = hn::Add(pio2h, pio2h), pil = hn::Add(pio2l, pio2l);
  const V ch = hn::IfThenElse(swap, pio2h, hn::IfThenElseZero(x_neg, pih));
  const V cl = hn::IfThenElse(swap, pio2l, hn::IfThenElseZero(x_neg, pil));
  const V bh = hn::IfThenElseZero(upper, pio4h);
  const V bl = hn::Add(hn::IfThenElseZero(upper, pio4l), hn::Div(dt, hn::MulAdd(t, t, one)));
  V kh, kl;
  detail::TwoSum(ch, hn::IfThenElse(minus, hn::Neg(bh), bh), kh, kl);
  const V tail = hn::Add(hn::Add(kl, cl), hn::IfThenElse(minus, hn::Neg(bl), bl));
  const V r = hn::CopySign(hn::Add(hn::Add(kh, hn::IfThenElse(minus, hn::Neg(v), v)), tail), y);
  return hn::IfThenElse(hn::Or(hn::IsNaN(x), hn::IsNaN(y)), hn::Add(x, y), r);
}

template <class D, class V>
HWY_INLINE V Cosh(D d, V x) {
  using T = hn::TFromD<D>;
  // cosh|x| = E + 1/(4E) with E = exp(|x| - ln2): E overflows only where cosh does.
  const V ax = hn::Abs(x);
  V zh, zl;
  detail::TwoSum(ax, hn::Neg(hn::Set(d, detail::kLn2Hi<T>)), zh, zl);
  zl = hn::Sub(zl, hn::Set(d, detail::kLn2Lo<T>));
  const V e = detail::ExpDD(d, zh, zl);
  // 1/(4E) is below ulp(E) once E > 2^60; capping E there keeps the quotient from
  // underflowing (a flag NumPy's cosh does not raise) without changing the sum.
  const V r = hn::Add(e, hn::Div(detail::Val(d, 0.25), hn::Min(e, detail::Val(d, 0x1p60))));
  return hn::IfThenElse(hn::IsNaN(x), x, r);
}

template <class D, class V>
HWY_INLINE V Tan(D d, V x) {
  using T = hn::TFromD<D>;
  const V ax = hn::Abs(x);
  // |x| = q pi/2 + r, |r| <= pi/4, pi/2 = p1 + p2 + p3 (72 / 159 bits).
  const V q = hn::Round(hn::Mul(ax, detail::Val(d, 0.6366197723675814)));
  V a, e1, p2, e2;
  detail::TwoProd(d, q, hn::Set(d, detail::Pick<T>(1.5707963705062866f, 1.5707963267948966)), a,
                  e1);
  // |x| - q p1 is a multiple of ulp(p1) below 1, hence representable: both steps exact.
  a = hn::Sub(hn::Sub(ax, a), e1);
  detail::TwoProd(d, q, hn::Set(d, detail::Pick<T>(-4.371138828673793e-08f, 6.123233995736766e-17)),
                  p2, e2);
  V rh, rl;
  detail::TwoSum(a, hn::Neg(p2), rh, rl);
  const V p3 = hn::Set(d, detail::Pick<T>(-1.7151245100058819e-15f, -1.4973849048591698e-33));
  V r, r_lo;  // reduced argument as double-double
  detail::FastTwoSum(rh, hn::Sub(rl, hn::MulAdd(q, p3, e2)), r, r_lo);
  const V r2 = hn::Mul(r, r);
  // Taylor sin and cos on |r| <= pi/4 (truncation below 2^-28 / 2^-62).
  V ps, pc;
  if constexpr (sizeof(T) == 4) {
    ps = detail::Horner(d, r2, -1.0 / 6, 1.0 / 120, -1.0 / 5040, 1.0 / 362880);
    pc = detail::Horner(d, r2, 1.0 / 24, -1.0 / 720, 1.0 / 40320, -1.0 / 3628800);
  } else {
    ps = detail::Horner(d, r2, -1.0 / 6, 1.0 / 120, -1.0 / 5040, 1.0 / 362880, -1.0 / 39916800,
                        1.0 / 6227020800.0, -1.0 / 1307674368000.0, 1.0 / 355687428096000.0);
    pc = detail::Horner(d, r2, 1.0 / 24, -1.0 / 720, 1.0 / 40320, -1.0 / 3628800, 1.0 / 479001600,
                        -1.0 / 87178291200.0, 1.0 / 20922789888000.0, -1.0 / 6402373705728000.0);
  }
  // sin r = sh + sl and cos r = ch + cl, each as a normalized pair.
  V sh, sl;
  detail::FastTwoSum(r, hn::Mul(hn::Mul(r2, r), ps), sh, sl);
  V r2h, r2l, ch, cl;
  detail::TwoProd(d, r, r, r2h, r2l);
  const V half = detail::Val(d, 0.5);
  detail::FastTwoSum(detail::Val(d, 1.0), hn::Neg(hn::Mul(r2h, half)), ch, cl);
  detail::FastTwoSum(ch, hn::MulAdd(hn::Mul(r2h, r2h), pc, hn::NegMulAdd(r2l, half, cl)), ch, cl);
  // tan = sin/cos for even q, -cos/sin for odd q: one division and its residual.
  const V q_half = hn::Mul(q, half);
  const auto q_odd = hn::Ne(hn::Round(q_half), q_half);
  const V num_h = hn::IfThenElse(q_odd, hn::Neg(ch), sh);
  const V num_l = hn::IfThenElse(q_odd, hn::Neg(cl), sl);
  const V den_h = hn::IfThenElse(q_odd, sh, ch);
  const V den_l = hn::IfThenElse(q_odd, sl, cl);
  const V t0 = hn::Div(num_h, den_h);
  const V res = hn::NegMulAdd(t0, den_l, hn::Add(detail::Residual(d, t0, den_h, num_h), num_l));
  // tan(r + r_lo) = tan r + r_lo (1 + tan^2 r); the same holds for -cot.
  const V corr = hn::MulAdd(r_lo, hn::MulAdd(t0, t0, detail::Val(d, 1.0)), hn::Div(res, den_h));
  const V t = hn::Add(t0, corr);
  return hn::Xor(t, hn::And(hn::SignBit(d), x));  // NaN stays NaN
}

template <class D, class V>
HWY_INLINE V Hypot(D d, V x, V y) {
  using T = hn::TFromD<D>;
  const V ax = hn::Abs(x), ay = hn::Abs(y);
  const V mx = hn::Max(ax, ay), mn = hn::Min(ax, ay);
  // Scale by a power of 2 so that both squares are normal and finite where they matter.
  const auto big = hn::Gt(mx, detail::Val(d, detail::Pick<T>(0x1p50f, 0x1p500)));
  const auto small = hn::Lt(mx, detail::Val(d, detail::Pick<T>(0x1p-50f, 0x1p-500)));
  const V one = detail::Val(d, 1.0);
  const V scale =
      hn::IfThenElse(big, detail::Val(d, detail::Pick<T>(0x1p-90f, 0x1p-600)),
                     hn::IfThenElse(small, detail::Val(d, detail::Pick<T>(0x1p90f, 0x1p600)), one));
  const V unscale = hn::IfThenElse(
      big, detail::Val(d, detail::Pick<T>(0x1p90f, 0x1p600)),
      hn::IfThenElse(small, detail::Val(d, detail::Pick<T>(0x1p-90f, 0x1p-600)), one));
  const V a = hn::Mul(mx, scale), b = hn::Mul(mn, scale);
  // a^2 + b^2 as double-double, then one Newton step on its square root.
  V h1, l1, h2, l2, sh, sl;
  detail::TwoProd(d, a, a, h1, l1);
  detail::TwoProd(d, b, b, h2, l2);
  detail::FastTwoSum(h1, h2, sh, sl);
  sl = hn::Add(sl, hn::Add(l1, l2));
  const V r0 = hn::Sqrt(sh);
  const V err = hn::Add(detail::Residual(d, r0, r0, sh), sl);
  const V safe = hn::IfThenElse(hn::Gt(r0, hn::Zero(d)), r0, one);
  const V r = hn::Mul(hn::MulAdd(err, hn::Div(detail::Val(d, 0.5), safe), r0), unscale);
  const V inf = detail::Val(d, HUGE_VAL);
  const V r_nan = hn::IfThenElse(hn::Or(hn::IsNaN(x), hn::IsNaN(y)), hn::Add(x, y), r);
  return hn::IfThenElse(hn::Or(hn::IsInf(x), hn::IsInf(y)), inf, r_nan);
}

// Note [erf approximation]
// |x| < 1:  erf(x) = x + x (P(x^2) - 1), P a Chebyshev fit of erf(x)/x (rel. error 2^-56 /
// 2^-24); the leading 1 stays exact.
// |x| >= 1: erf(x) = 1 - exp(-x^2) G(w), w = 1/(|x| + c), G a fit of exp(x^2) erfc(x) in
// w - w0 on [1, 6] (double, c = 2.5) or [1, 3.95] (float, c = 3); beyond, erf rounds to
// ±1. erfc <= 0.16 there, so G's error (2^-54 / 2^-24) is diluted in 1 - erfc.
// Coefficients from an mpmath fit at Chebyshev nodes.

template <class D, class V>
HWY_INLINE V Erf(D d, V x) {
  using T = hn::TFromD<D>;
  const V one = detail::Val(d, 1.0);
  const V ax = hn::Abs(x);
  const V x2 = hn::Mul(x, x);
  V pa, xb, g;
  if constexpr (sizeof(T) == 4) {
    pa = detail::Horner(d, x2, 0.12837916612625122, -0.3761262595653534, 0.11283594369888306,
                        -0.02685421146452427, 0.005189087241888046, -0.000801686430349946,
                        7.875874871388078e-05);
    xb = hn::Min(hn::Max(ax, one), detail::Val(d, 3.95));
    const V w = hn::Sub(hn::Div(one, hn::Add(xb, detail::Val(d, 3.0))),
                        detail::Val(d, 0.19694244861602783));
    g = detail::Horner(d, w, 0.24735039472579956, 2.5930819511413574, 12.352644920349121,
                       45.51790237426758, 124.0847396850586, 218.2994842529297, 126.48944091796875);
  } else {
    pa = detail::Horner(d, x2, 0.1283791670955126, -0.3761263890318375, 0.11283791670954879,
                        -0.026866170645076792, 0.0052239776248180145, -0.000854832698083379,
                        0.0001205533111164271, -1.4925595266831182e-05, 1.6461000484121368e-06,
                        -1.6350312701054695e-07, 1.4659775274047436e-08, -1.1372848856791674e-09,
                        5.957176147748911e-11);
    xb = hn::Min(hn::Max(ax, one), detail::Val(d, 6.0));
    const V w = hn::Sub(hn::Div(one, hn::Add(xb, detail::Val(d, 2.5))),
                        detail::Val(d, 0.20168067226890757));
    g = detail::Horner(d, w, 0.21394805165754288, 1.8799689541448539, 6.372055640281993,
                       15.797221895485869, 25.05470288424136, 12.059941764946005,
                       -42.08488198587537, -67.20601518299397, 92.97537950205589,
                       245.96417971629162, -350.2674937240706, -871.2519063436438,
                       1902.4711437588396, 2565.703509274968, -11050.755882966872,
                       -2576.1764512045643, 51356.51662633835);
  }
  V zh, zl;
  detail::TwoProd(d, hn::Neg(xb), xb, zh, zl);
  const V erfc = hn::Mul(detail::ExpDD(d, zh, zl), g);
  const V rb = hn::CopySign(hn::Sub(one, erfc), x);
  const V r = hn::IfThenElse(hn::Lt(ax, one), hn::MulAdd(x, pa, x), rb);
  return hn::IfThenElse(hn::IsNaN(x), x, r);
}

namespace detail {
/// x = n ln2 + t for double lanes (|x| < 700): returns t, |t| <= ln2/2 (two-part ln2,
/// Cody-Waite: the head's n·ln2 is exact); nt = n + 1.5·2^52 holds n in its low bits.
template <class D, class V>
HWY_INLINE V ReduceLn2(D d, V x, V& nt) {
  const V shifter = hn::Set(d, 6755399441055744.0);  // 1.5 * 2^52
  nt = hn::MulAdd(x, hn::Set(d, 1.4426950408889634074), shifter);
  const V n = hn::Sub(nt, shifter);
  const V t = hn::MulAdd(n, hn::Set(d, -0.6931471805596629565116018), x);
  return hn::MulAdd(n, hn::Set(d, -0.28235290563031577122588448175e-12), t);
}
/// expm1(t) for double lanes, |t| <= ln2/2: t + t^2 P(t), P Highway's degree-10 exp
/// polynomial.
template <class D, class V>
HWY_INLINE V Expm1Reduced(D d, V t) {
  const V p = Horner(d, t, 0.5, 0.166666666666666851703837, 0.0416666666666665047591422,
                     0.00833333333331652721664984, 0.00138888888889774492207962,
                     0.000198412698960509205564975, 2.4801587159235472998791e-5,
                     2.75572362911928827629423e-6, 2.75573911234900471893338e-7,
                     2.51112930892876518610661e-8, 2.08860621107283687536341e-9);
  return hn::MulAdd(p, hn::Mul(t, t), t);
}
}  // namespace detail

template <class D, class V>
HWY_INLINE V ExpInRange(D d, V x) {
  using T = hn::TFromD<D>;
  if constexpr (sizeof(T) == 4) {
    const hn::Rebind<int32_t, D> di;
    const V shifter = hn::Set(d, 12582912.0f);  // 1.5 * 2^23
    const V t = hn::MulAdd(x, hn::Set(d, 1.44269504088896341f), shifter);
    const V k = hn::Sub(t, shifter);
    V r = hn::MulAdd(k, hn::Set(d, -0.693145751953125f), x);  // exact: 16-bit ln 2 head
    r = hn::MulAdd(k, hn::Set(d, -1.428606765330187045e-6f), r);
    V p = hn::Set(d, 1.9875691500E-4f);
    p = hn::MulAdd(p, r, hn::Set(d, 1.3981999507E-3f));
    p = hn::MulAdd(p, r, hn::Set(d, 8.3334519073E-3f));
    p = hn::MulAdd(p, r, hn::Set(d, 4.1665795894E-2f));
    p = hn::MulAdd(p, r, hn::Set(d, 1.6666665459E-1f));
    p = hn::MulAdd(p, r, hn::Set(d, 5.0000001201E-1f));
    p = hn::Add(hn::MulAdd(p, hn::Mul(r, r), r), hn::Set(d, 1.0f));
    const auto e = hn::ShiftLeft<23>(hn::BitCast(di, t));
    return hn::BitCast(d, hn::Add(hn::BitCast(di, p), e));
  } else {
    const hn::Rebind<int64_t, D> di;
    V nt = hn::Zero(d);
    const V r = detail::ReduceLn2(d, x, nt);
    const V p = hn::Add(detail::Expm1Reduced(d, r), hn::Set(d, 1.0));
    const auto e = hn::ShiftLeft<52>(hn::BitCast(di, nt));
    return hn::BitCast(d, hn::Add(hn::BitCast(di, p), e));
  }
}

template <class D, class V>
HWY_INLINE V Sigmoid(D d, V x) {
  // e = exp(-|x|) in (0, 1] (never overflows), as a pair eh + el; x < 0 gives
  // e / (1 + e), x >= 0 gives 1 / (1 + e), each a division of pairs.
  V eh, el;
  detail::ExpDD(d, hn::Neg(hn::Abs(x)), hn::Zero(d), eh, el);
  V h, l;
  detail::FastTwoSum(detail::Val(d, 1.0), eh, h, l);
  l = hn::Add(l, el);
  const auto neg = detail::SignBitSet(d, x);
  const V num_h = hn::IfThenElse(neg, eh, detail::Val(d, 1.0));
  const V num_l = hn::IfThenElseZero(neg, el);
  const V q = hn::Div(num_h, h);
  const V res = hn::NegMulAdd(q, l, hn::Add(detail::Residual(d, q, h, num_h), num_l));
  const V r = hn::Add(q, hn::Div(res, h));
  return hn::IfThenElse(hn::IsNaN(x), x, r);
}


/// tanh(x) by tanh|x| = -expm1(z) / (2 + expm1(z)), z = -2|x| (|x| capped where tanh
/// rounds to 1), expm1 by one range reduction z = n ln2 + t and a polynomial in t:
/// - float lanes: degree 7, about 20 vector ops, 1.75x faster than hn::Tanh; max 2.5 ulp
///   on (-12, 12);
/// - double lanes: degree 12 (Highway's exp polynomial), n by the 1.5·2^52 addition (no
///   integer conversion), one division; hn::Tanh evaluates the same formula through a
///   general Expm1 (two int32 conversions, two scalings by 2^n, three selects): 1.55x
///   faster, max 2.5 ulp (hn::Tanh 3.0) on this AVX-512 machine.
/// Finite x only: NaN, infinities and the sign of a zero result are left to the caller
/// (the guards and keep_zero of ops/op_support.hpp).
template <class D, class V>
HWY_INLINE V Tanh(D d, V x) {
  if constexpr (sizeof(hn::TFromD<D>) == 8) {
    const hn::RebindToSigned<D> di;
    const V sign = hn::And(x, hn::SignBit(d));
    // tanh(20) rounds to 1 in double; the cap keeps -2|x| and 2^n finite.
    const V z = hn::Mul(hn::Min(hn::Xor(x, sign), hn::Set(d, 20.0)), hn::Set(d, -2.0));
    V nt = hn::Zero(d);
    const V p = detail::Expm1Reduced(d, detail::ReduceLn2(d, z, nt));  // expm1(t)
    // s = 2^n: Pow2I's construction, from the nt the reduction already made (n's low
    // bits shifted into the exponent field, plus the bias), one op fewer than Pow2I(n).
    const V s = hn::BitCast(d, hn::Add(hn::ShiftLeft<52>(hn::BitCast(di, nt)),
                                       hn::Set(di, int64_t{0x3FF} << 52)));
    const V em1 = hn::MulAdd(s, p, hn::Sub(s, hn::Set(d, 1.0)));  // s (expm1(t) + 1) - 1
    return hn::Or(hn::Div(hn::Neg(em1), hn::Add(em1, hn::Set(d, 2.0))), sign);
  } else {
    const hn::RebindToSigned<D> di;
    const V sign = hn::And(x, hn::SignBit(d));
    // |x| capped at 10 before doubling: -2|x| overflows for |x| near FLT_MAX.
    const V z = hn::Mul(hn::Min(hn::Xor(x, sign), hn::Set(d, 10.0f)), hn::Set(d, -2.0f));
    const V n = hn::Round(hn::Mul(z, hn::Set(d, 1.44269504088896341f)));
    // z - n ln2 in two parts (Cody-Waite), exact enough for |n| <= 29.
    V t = hn::MulAdd(n, hn::Set(d, -0.693145751953125f), z);
    t = hn::MulAdd(n, hn::Set(d, -1.428606765330187045e-06f), t);
    V p = hn::MulAdd(t, hn::Set(d, 1.f / 5040), hn::Set(d, 1.f / 720));
    p = hn::MulAdd(t, p, hn::Set(d, 1.f / 120));
    p = hn::MulAdd(t, p, hn::Set(d, 1.f / 24));
    p = hn::MulAdd(t, p, hn::Set(d, 1.f / 6));
    p = hn::MulAdd(t, p, hn::Set(d, 0.5f));
    p = hn::MulAdd(hn::Mul(t, t), p, t);  // expm1(t)
    const V s = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127))));
    const V em1 = hn::MulAdd(s, p, hn::Sub(s, hn::Set(d, 1.0f)));  // expm1(z) = s (expm1(t) + 1) - 1
    return hn::Or(hn::Div(hn::Neg(em1), hn::Add(em1, hn::Set(d, 2.0f))), sign);
  }
}

}  // namespace dynexpr::simd
