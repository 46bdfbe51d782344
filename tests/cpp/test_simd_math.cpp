// Tests of simd/math.hpp: every function against a long double reference (std::exp2l,
// std::powl, ...) over ~1e5 random points of its domain plus edge values, in ULPs of the
// lane type, for full and partial vectors of float and double. The bounds below are the
// ones stated in the table at the top of simd/math.hpp. Special values (NaN, ±inf, signed
// zeros) are checked exactly: a zero reference needs a zero of the same sign, an infinite
// or NaN reference the same infinity or a NaN.
#include <doctest/doctest.h>

#include "dynexpr/core/config.hpp"
// config.hpp must come first (HWY_COMPILE_ONLY_STATIC).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "dynexpr/simd/math.hpp"

namespace {

namespace hn = hwy::HWY_NAMESPACE;
namespace simd = dynexpr::simd;

using FloatFull = hn::ScalableTag<float>;
using FloatPartial = hn::Rebind<float, hn::ScalableTag<double>>;  // as in mixed expressions
using FloatPair = hn::CappedTag<float, 2>;
using DoubleFull = hn::ScalableTag<double>;
using DoublePair = hn::CappedTag<double, 2>;

using LD = long double;
constexpr std::size_t kRandomPoints = std::size_t{1} << 17;

// ---------------------------------------------------------------------------------------
// Error measure
// ---------------------------------------------------------------------------------------

/// |got - ref| in ULPs of T at ref (subnormal ULPs below the normal range); an infinite
/// `got` counts as max + 1 ulp. Special references must be matched exactly, else +inf.
template <class T>
LD ulp_error(T got, LD ref) {
  constexpr LD kFail = std::numeric_limits<LD>::infinity();
  using lim = std::numeric_limits<T>;
  if (std::isnan(ref)) return std::isnan(got) ? 0 : kFail;
  if (std::isnan(got)) return kFail;
  if (std::isinf(ref)) return (LD{got} == ref) ? 0 : kFail;
  if (ref == 0) return (got == 0 && std::signbit(got) == std::signbit(ref)) ? 0 : kFail;
  const LD max = lim::max();
  const LD ulp_max = std::ldexp(LD{1}, lim::max_exponent - lim::digits);
  const LD aref = std::fabs(ref);
  LD ulp = ulp_max;
  if (aref <= max) {
    int e = 0;
    (void)std::frexp(aref, &e);
    ulp = std::ldexp(LD{1}, std::max(e, lim::min_exponent) - lim::digits);
  }
  if (std::isinf(got)) {
    if (std::signbit(got) != std::signbit(ref)) return kFail;
    return aref >= max + ulp_max / 2 ? 0 : (max + ulp_max - aref) / ulp_max;
  }
  return std::fabs(LD{got} - ref) / ulp;
}

// ---------------------------------------------------------------------------------------
// Evaluation over arrays
// ---------------------------------------------------------------------------------------

template <class D, class F>
std::vector<hn::TFromD<D>> apply(D d, F f, const std::vector<hn::TFromD<D>>& x) {
  using T = hn::TFromD<D>;
  const std::size_t n = hn::Lanes(d);
  std::vector<T> in(x), out(x.size() + n);
  in.resize((x.size() + n - 1) / n * n, T{0});
  for (std::size_t i = 0; i < in.size(); i += n) {
    hn::StoreU(f(d, hn::LoadU(d, in.data() + i)), d, out.data() + i);
  }
  out.resize(x.size());
  return out;
}

template <class D, class F>
std::vector<hn::TFromD<D>> apply(D d, F f, const std::vector<hn::TFromD<D>>& x,
                                 const std::vector<hn::TFromD<D>>& y) {
  using T = hn::TFromD<D>;
  const std::size_t n = hn::Lanes(d);
  std::vector<T> a(x), b(y), out(x.size() + n);
  a.resize((x.size() + n - 1) / n * n, T{0});
  b.resize(a.size(), T{0});
  for (std::size_t i = 0; i < a.size(); i += n) {
    hn::StoreU(f(d, hn::LoadU(d, a.data() + i), hn::LoadU(d, b.data() + i)), d, out.data() + i);
  }
  out.resize(x.size());
  return out;
}

struct Worst {
  LD ulp = 0;
  LD x = 0, y = 0;
  std::size_t points = 0;
};

template <class T>
const char* type_name() {
  return sizeof(T) == 4 ? "float" : "double";
}

template <class D>
void report(const char* fn, const char* domain, D d, const Worst& w, double bound) {
  using T = hn::TFromD<D>;
  std::printf(
      "  %-8s %-6s lanes=%zu %-26s points=%-7zu max_ulp=%-8.3Lg bound=%g  at (%.9Lg, %.9Lg)\n", fn,
      type_name<T>(), hn::Lanes(d), domain, w.points, w.ulp, bound, w.x, w.y);
}

template <class D, class F, class R>
Worst measure1(D d, F f, R ref, const std::vector<hn::TFromD<D>>& x) {
  const auto got = apply(d, f, x);
  Worst w;
  w.points = x.size();
  for (std::size_t i = 0; i < x.size(); ++i) {
    const LD e = ulp_error(got[i], ref(LD{x[i]}));
    if (e > w.ulp || std::isnan(e)) {
      w.ulp = std::isnan(e) ? std::numeric_limits<LD>::infinity() : e;
      w.x = x[i];
    }
  }
  return w;
}

template <class D, class F, class R>
Worst measure2(D d, F f, R ref, const std::vector<hn::TFromD<D>>& x,
               const std::vector<hn::TFromD<D>>& y) {
  const auto got = apply(d, f, x, y);
  Worst w;
  w.points = x.size();
  for (std::size_t i = 0; i < x.size(); ++i) {
    const LD e = ulp_error(got[i], ref(LD{x[i]}, LD{y[i]}));
    if (e > w.ulp || std::isnan(e)) {
      w.ulp = std::isnan(e) ? std::numeric_limits<LD>::infinity() : e;
      w.x = x[i];
      w.y = y[i];
    }
  }
  return w;
}

// ---------------------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------------------

template <class T>
struct Gen {
  std::mt19937_64 rng{0x5eed};
  T uniform(double lo, double hi) {
    return static_cast<T>(std::uniform_real_distribution<double>(lo, hi)(rng));
  }
  /// ±m 2^e, m uniform in [1, 2), e uniform in [lo, hi]: covers subnormals and huge values.
  T log_uniform(int lo, int hi, bool random_sign = true) {
    const double m = std::uniform_real_distribution<double>(1.0, 2.0)(rng);
    const int e = std::uniform_int_distribution<int>(lo, hi)(rng);
    const T v = static_cast<T>(std::ldexp(m, e));
    return (random_sign && (rng() & 1)) ? -v : v;
  }
  std::vector<T> uniforms(double lo, double hi, std::size_t n = kRandomPoints) {
    std::vector<T> v(n);
    for (auto& e : v) e = uniform(lo, hi);
    return v;
  }
};

template <class T>
std::vector<T> edge_values() {
  using lim = std::numeric_limits<T>;
  return {T{0},
          -T{0},
          T{1},
          -T{1},
          T{2},
          -T{2},
          T{0.5},
          -T{0.5},
          T{3},
          -T{3},
          T{2.5},
          -T{2.5},
          lim::infinity(),
          -lim::infinity(),
          lim::quiet_NaN(),
          lim::denorm_min(),
          -lim::denorm_min(),
          lim::min(),
          -lim::min(),
          lim::max(),
          -lim::max(),
          lim::epsilon(),
          T{1} + lim::epsilon(),
          T{1} - lim::epsilon() / 2,
          T{100},
          T{-100},
          T{1e6},
          T{-1e6}};
}

template <class T>
void append(std::vector<T>& v, const std::vector<T>& more) {
  v.insert(v.end(), more.begin(), more.end());
}

// Bounds stated in simd/math.hpp, per lane type.
template <class T>
double bound(double for_float, double for_double) {
  return sizeof(T) == 4 ? for_float : for_double;
}

}  // namespace

TEST_CASE("simd math: SIMD target") {
  std::printf("simd math: Highway target %s\n", hwy::TargetName(HWY_TARGET));
  CHECK(hn::Lanes(FloatFull()) >= 4);
}

TEST_CASE_TEMPLATE("simd::Exp2 stays within its ULP bound", D, FloatFull, FloatPartial, FloatPair,
                   DoubleFull, DoublePair) {
  using T = hn::TFromD<D>;
  const D d;
  Gen<T> g;
  const double lo = sizeof(T) == 4 ? -160 : -1080, hi = sizeof(T) == 4 ? 130 : 1030;
  auto x = g.uniforms(lo, hi);
  append(x, g.uniforms(-1, 1, 4096));
  append(x, edge_values<T>());
  for (int k = static_cast<int>(lo); k <= hi; ++k) {  // integers and half-integers
    x.push_back(static_cast<T>(k));
    x.push_back(static_cast<T>(k + 0.5));
  }
  const auto w = measure1(
      d, [](auto dd, auto v) { return simd::Exp2(dd, v); }, [](LD v) { return std::exp2l(v); }, x);
  report("Exp2", "[lo, hi] + edges", d, w, bound<T>(1, 1));
  CHECK(w.ulp <= bound<T>(1, 1));
}

TEST_CASE_TEMPLATE("simd::ExpInRange stays within its ULP bound on its range", D, FloatFull,
                   FloatPartial, FloatPair, DoubleFull, DoublePair) {
  using T = hn::TFromD<D>;
  const D d;
  Gen<T> g;
  const double lo = sizeof(T) == 4 ? -86.9 : -707.5, hi = sizeof(T) == 4 ? 88.3 : 709.0;
  auto x = g.uniforms(lo, hi);
  append(x, g.uniforms(-2, 2, 4096));
  for (T v : {T(lo), T(hi), T(0), T(-0.0), T(1), T(-1), T(0.5), T(-0.5)}) x.push_back(v);
  for (int k = static_cast<int>(lo); k <= hi; ++k) x.push_back(static_cast<T>(k));
  const auto w = measure1(
      d, [](auto dd, auto v) { return simd::ExpInRange(dd, v); }, [](LD v) { return std::exp(v); }, x);
  report("ExpInRange", "[lo, hi] + edges", d, w, bound<T>(1.01, 1));
  CHECK(w.ulp <= bound<T>(1.01, 1));
}

TEST_CASE_TEMPLATE("simd::Pow stays within its ULP bound", D, FloatFull, FloatPartial, FloatPair,
                   DoubleFull, DoublePair) {
  using T = hn::TFromD<D>;
  const D d;
  Gen<T> g;
  const bool f32 = sizeof(T) == 4;
  const int emax = f32 ? 130 : 1030;
  std::vector<T> x, y;
  // Results spread over the whole range: pick log2 of the result, then y.
  for (std::size_t i = 0; i < kRandomPoints; ++i) {
    T xv = (i % 4 == 0) ? static_cast<T>(1 + g.uniform(-1e-3, 1e-3))
                        : g.log_uniform(-emax, emax, false);
    if (xv == 1) xv = T{2};
    const double z = g.uniform(f32 ? -155 : -1080, f32 ? 130 : 1030);
    T yv = static_cast<T>(z / std::log2(static_cast<double>(xv)));
    if (i % 3 == 0) {  // negative x with integral y
      yv = std::nearbyint(yv);
      xv = -xv;
    }
    x.push_back(xv);
    y.push_back(yv);
  }
  for (std::size_t i = 0; i < kRandomPoints / 4; ++i) {  // small integral powers
    x.push_back(g.uniform(-10, 10));
    y.push_back(static_cast<T>(static_cast<int>(g.uniform(-30, 30))));
  }
  const auto e = edge_values<T>();
  for (T a : e) {
    for (T b : e) {
      x.push_back(a);
      y.push_back(b);
    }
  }
  const auto w = measure2(
      d, [](auto dd, auto a, auto b) { return simd::Pow(dd, a, b); },
      [](LD a, LD b) { return std::pow(a, b); }, x, y);
  report("Pow", "targeted + ints + edges", d, w, bound<T>(1, 1));
  CHECK(w.ulp <= bound<T>(1, 1));
}

TEST_CASE_TEMPLATE("simd::Atan2 stays within its ULP bound", D, FloatFull, FloatPartial, FloatPair,
                   DoubleFull, DoublePair) {
  using T = hn::TFromD<D>;
  const D d;
  Gen<T> g;
  const int emax = std::numeric_limits<T>::max_exponent - 1;
  const int emin = std::numeric_limits<T>::min_exponent - std::numeric_limits<T>::digits;
  std::vector<T> y, x;
  for (std::size_t i = 0; i < kRandomPoints; ++i) {
    y.push_back(g.log_uniform(emin, emax));
    x.push_back(g.log_uniform(emin, emax));
    y.push_back(g.uniform(-10, 10));
    x.push_back(g.uniform(-10, 10));
  }
  const auto e = edge_values<T>();
  for (T a : e) {
    for (T b : e) {
      y.push_back(a);
      x.push_back(b);
    }
  }
  const auto w = measure2(
      d, [](auto dd, auto a, auto b) { return simd::Atan2(dd, a, b); },
      [](LD a, LD b) { return std::atan2(a, b); }, y, x);
  report("Atan2", "log-uniform + [-10,10] + edges", d, w, bound<T>(2, 2));
  CHECK(w.ulp <= bound<T>(2, 2));
}

TEST_CASE_TEMPLATE("simd::Cosh stays within its ULP bound", D, FloatFull, FloatPartial, FloatPair,
                   DoubleFull, DoublePair) {
  using T = hn::TFromD<D>;
  const D d;
  Gen<T> g;
  const double lim = sizeof(T) == 4 ? 90 : 711;
  auto x = g.uniforms(-lim, lim);
  append(x, g.uniforms(-2, 2, 16384));
  append(x, edge_values<T>());
  append(x, {T{89}, T{-89}, static_cast<T>(89.4), static_cast<T>(89.5), static_cast<T>(710.4),
             static_cast<T>(710.5), static_cast<T>(-710.4)});
  const auto w = measure1(
      d, [](auto dd, auto v) { return simd::Cosh(dd, v); }, [](LD v) { return std::cosh(v); }, x);
  report("Cosh", "[-lim, lim] + edges", d, w, bound<T>(1.5, 1.5));
  CHECK(w.ulp <= bound<T>(1.5, 1.5));
  // No premature overflow: cosh(89) < FLT_MAX.
  const auto c89 = apply(
      d, [](auto dd, auto v) { return simd::Cosh(dd, v); }, std::vector<T>{T{89}});
  CHECK(std::isfinite(c89[0]));
}

TEST_CASE_TEMPLATE("simd::Tan stays within its ULP bound", D, FloatFull, FloatPartial, FloatPair,
                   DoubleFull, DoublePair) {
  using T = hn::TFromD<D>;
  const D d;
  Gen<T> g;
  const auto fn = [](auto dd, auto v) { return simd::Tan(dd, v); };
  const auto ref = [](LD v) { return std::tan(v); };
  const double half_pi = 1.5707963267948966;
  auto x1 = g.uniforms(-(half_pi - 0.01), half_pi - 0.01);
  for (T v : edge_values<T>()) {  // inside the valid range |x| < 1e5, or inf / NaN
    if (!(std::fabs(v) >= T{1e5}) || std::isinf(v)) x1.push_back(v);
  }
  append(x1, {std::numeric_limits<T>::denorm_min(), T{1e-30}, T{-1e-20}});
  const auto w1 = measure1(d, fn, ref, x1);
  report("Tan", "|x| <= pi/2 - 0.01", d, w1, bound<T>(1, 1));
  CHECK(w1.ulp <= bound<T>(1, 1));

  auto x2 = g.uniforms(-1000, 1000);
  for (int k = -636; k <= 636; ++k) {  // next to multiples of pi/2: huge and tiny results
    T v = static_cast<T>(k * half_pi);
    for (int s = 0; s < 3; ++s) {
      x2.push_back(v);
      v = std::nextafter(v, std::numeric_limits<T>::infinity());
    }
  }
  const auto w2 = measure1(d, fn, ref, x2);
  report("Tan", "|x| < 1000, near k pi/2", d, w2, bound<T>(1, 1));
  CHECK(w2.ulp <= bound<T>(1, 1));

  const auto w3 = measure1(d, fn, ref, g.uniforms(-1e5, 1e5, kRandomPoints / 4));
  report("Tan", "|x| < 1e5", d, w3, bound<T>(1, 1));
  CHECK(w3.ulp <= bound<T>(1, 1));
}

TEST_CASE_TEMPLATE("simd::Hypot stays within its ULP bound", D, FloatFull, FloatPartial, FloatPair,
                   DoubleFull, DoublePair) {
  using T = hn::TFromD<D>;
  const D d;
  Gen<T> g;
  const int emax = std::numeric_limits<T>::max_exponent - 1;
  const int emin = std::numeric_limits<T>::min_exponent - std::numeric_limits<T>::digits;
  std::vector<T> x, y;
  for (std::size_t i = 0; i < kRandomPoints; ++i) {
    x.push_back(g.log_uniform(emin, emax));
    y.push_back(g.log_uniform(emin, emax));
    const T a = g.log_uniform(emin, emax);  // close magnitudes
    x.push_back(a);
    y.push_back(a * g.uniform(-4, 4));
  }
  const auto e = edge_values<T>();
  for (T a : e) {
    for (T b : e) {
      x.push_back(a);
      y.push_back(b);
    }
  }
  const auto w = measure2(
      d, [](auto dd, auto a, auto b) { return simd::Hypot(dd, a, b); },
      [](LD a, LD b) { return std::hypot(a, b); }, x, y);
  report("Hypot", "log-uniform + edges", d, w, bound<T>(1, 1));
  CHECK(w.ulp <= bound<T>(1, 1));
}

TEST_CASE_TEMPLATE("simd::Erf stays within its ULP bound", D, FloatFull, FloatPartial, FloatPair,
                   DoubleFull, DoublePair) {
  using T = hn::TFromD<D>;
  const D d;
  Gen<T> g;
  const double lim = sizeof(T) == 4 ? 5 : 7;
  auto x = g.uniforms(-lim, lim);
  append(x, g.uniforms(-1.5, 1.5, 32768));
  for (int i = 0; i < 4096; ++i)
    x.push_back(g.log_uniform(std::numeric_limits<T>::min_exponent - 23, 0));
  append(x, edge_values<T>());
  const auto w = measure1(
      d, [](auto dd, auto v) { return simd::Erf(dd, v); }, [](LD v) { return std::erf(v); }, x);
  report("Erf", "[-lim, lim] + tiny + edges", d, w, bound<T>(1.5, 1.5));
  CHECK(w.ulp <= bound<T>(1.5, 1.5));
}

TEST_CASE_TEMPLATE("simd::Tanh stays within its ULP bound on finite inputs", D, FloatFull,
                   FloatPartial, FloatPair, DoubleFull, DoublePair) {
  using T = hn::TFromD<D>;
  using lim = std::numeric_limits<T>;
  const D d;
  Gen<T> g;
  auto x = g.uniforms(-25, 25);
  append(x, g.uniforms(-1, 1, 32768));  // n = 0, -1, -2 of the range reduction
  for (int i = 0; i < 8192; ++i)        // tiny to moderate, subnormals included
    x.push_back(g.log_uniform(lim::min_exponent - lim::digits, 4));
  // Zeros are left out: their sign is the caller's (detail::keep_zero in the op's body).
  for (T v : {lim::denorm_min(), lim::min(), lim::max(), -lim::max(), T(20), T(-20), T(10),
              T(0.5), T(1e-8)})
    x.push_back(v);
  const auto fn = [](auto dd, auto v) { return simd::Tanh(dd, v); };
  const auto w = measure1(d, fn, [](LD v) { return std::tanh(v); }, x);
  report("Tanh", "[-25, 25] + tiny + edges", d, w, bound<T>(2.6, 2.6));
  CHECK(w.ulp <= bound<T>(2.6, 2.6));
  const auto ends = apply(d, fn, std::vector<T>{lim::max(), -lim::max(), T(-0.0)});
  CHECK(ends[0] == T(1));
  CHECK(ends[1] == T(-1));
  CHECK(std::signbit(ends[2]));
}

TEST_CASE_TEMPLATE("simd::Sigmoid stays within its ULP bound", D, FloatFull, FloatPartial,
                   FloatPair, DoubleFull, DoublePair) {
  using T = hn::TFromD<D>;
  const D d;
  Gen<T> g;
  const double lim = sizeof(T) == 4 ? 110 : 750;
  auto x = g.uniforms(-lim, lim);
  append(x, g.uniforms(-20, 20, 32768));
  append(x, edge_values<T>());
  append(x, {T{1000}, T{-1000}});
  const auto fn = [](auto dd, auto v) { return simd::Sigmoid(dd, v); };
  const auto w = measure1(
      d, fn, [](LD v) { return 1 / (1 + std::exp(-v)); }, x);
  report("Sigmoid", "[-lim, lim] + edges", d, w, bound<T>(1, 1));
  CHECK(w.ulp <= bound<T>(1, 1));
  const auto big = apply(d, fn, std::vector<T>{T{-1000}, T{1000}});
  CHECK(big[0] == T{0});
  CHECK(big[1] == T{1});
}

// Special values compared bit for bit with the C99 results of the host's libm.
TEST_CASE_TEMPLATE("simd math: special values follow C99", D, FloatFull, FloatPartial, DoubleFull,
                   DoublePair) {
  using T = hn::TFromD<D>;
  const D d;
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  const T pi = static_cast<T>(3.14159265358979323846L);
  const auto same = [](T got, T want) {
    return (std::isnan(got) && std::isnan(want)) ||
           (got == want && std::signbit(got) == std::signbit(want));
  };
  struct Case2 {
    T a, b, want;
  };
  const auto pow = [&](T a, T b) {
    return apply(
        d, [](auto dd, auto u, auto v) { return simd::Pow(dd, u, v); }, std::vector<T>{a},
        std::vector<T>{b})[0];
  };
  const std::vector<Case2> pow_cases = {
      {nan, T{0}, T{1}},
      {nan, -T{0}, T{1}},
      {T{1}, nan, T{1}},
      {T{1}, inf, T{1}},
      {-T{1}, inf, T{1}},
      {-T{1}, -inf, T{1}},
      {-T{1}, nan, nan},
      {-T{2}, T{0.5}, nan},
      {-T{2}, T{3}, -T{8}},
      {-T{2}, T{2}, T{4}},
      {T{0}, -T{3}, inf},
      {-T{0}, -T{3}, -inf},
      {-T{0}, -T{2}, inf},
      {-T{0}, -T{0.5}, inf},
      {-T{0}, T{3}, -T{0}},
      {-T{0}, T{2}, T{0}},
      {-T{0}, T{0.5}, T{0}},
      {T{0}, -inf, inf},
      {T{0.5}, inf, T{0}},
      {T{2}, inf, inf},
      {T{0.5}, -inf, inf},
      {T{2}, -inf, T{0}},
      {-inf, T{3}, -inf},
      {-inf, -T{3}, -T{0}},
      {-inf, T{2}, inf},
      {-inf, T{0.5}, inf},
      {-inf, -T{0.5}, T{0}},
      {inf, -T{1}, T{0}},
      {inf, T{1}, inf},
      {T{2}, nan, nan},
      {nan, T{1}, nan},
      {-T{8}, T{1} / 3, nan},
      {T{2}, T{1e4}, inf},
      {T{2}, T{-1e4}, T{0}},
      {-T{2}, T{-1e4 - 1}, -T{0}},
  };
  for (const auto& c : pow_cases) {
    CAPTURE(c.a);
    CAPTURE(c.b);
    CHECK(same(pow(c.a, c.b), c.want));
  }

  const auto atan2 = [&](T a, T b) {
    return apply(
        d, [](auto dd, auto u, auto v) { return simd::Atan2(dd, u, v); }, std::vector<T>{a},
        std::vector<T>{b})[0];
  };
  const std::vector<Case2> atan2_cases = {
      {T{0}, T{0}, T{0}},        {-T{0}, T{0}, -T{0}}, {T{0}, -T{0}, pi},
      {-T{0}, -T{0}, -pi},       {T{0}, -T{1}, pi},    {-T{0}, -T{1}, -pi},
      {T{0}, T{1}, T{0}},        {-T{0}, T{1}, -T{0}}, {T{1}, -inf, pi},
      {-T{1}, -inf, -pi},        {T{1}, inf, T{0}},    {-T{1}, inf, -T{0}},
      {inf, inf, pi / 4},        {-inf, inf, -pi / 4}, {inf, -inf, 3 * pi / 4},
      {-inf, -inf, -3 * pi / 4}, {inf, T{1}, pi / 2},  {-inf, -T{0}, -pi / 2},
      {nan, T{1}, nan},          {T{1}, nan, nan},     {inf, nan, nan},
  };
  for (const auto& c : atan2_cases) {
    CAPTURE(c.a);
    CAPTURE(c.b);
    const T got = atan2(c.a, c.b);
    // pi/4 etc. are the correctly rounded T values only up to the last bit.
    if (std::isfinite(c.want) && c.want != 0) {
      CHECK(ulp_error(got, std::atan2(LD{c.a}, LD{c.b})) <= 1);
    } else {
      CHECK(same(got, c.want));
    }
  }

  const auto hypot = [&](T a, T b) {
    return apply(
        d, [](auto dd, auto u, auto v) { return simd::Hypot(dd, u, v); }, std::vector<T>{a},
        std::vector<T>{b})[0];
  };
  CHECK(same(hypot(inf, nan), inf));
  CHECK(same(hypot(nan, -inf), inf));
  CHECK(same(hypot(nan, T{1}), nan));
  CHECK(same(hypot(-T{0}, -T{0}), T{0}));
  CHECK(same(hypot(std::numeric_limits<T>::max(), std::numeric_limits<T>::max()), inf));
  CHECK(same(hypot(T{3}, -T{4}), T{5}));

  const auto unary = [&](auto fn, T v) { return apply(d, fn, std::vector<T>{v})[0]; };
  const auto exp2 = [](auto dd, auto v) { return simd::Exp2(dd, v); };
  const auto cosh = [](auto dd, auto v) { return simd::Cosh(dd, v); };
  const auto tan = [](auto dd, auto v) { return simd::Tan(dd, v); };
  const auto erf = [](auto dd, auto v) { return simd::Erf(dd, v); };
  const auto sigmoid = [](auto dd, auto v) { return simd::Sigmoid(dd, v); };
  CHECK(same(unary(exp2, inf), inf));
  CHECK(same(unary(exp2, -inf), T{0}));
  CHECK(same(unary(exp2, nan), nan));
  CHECK(same(unary(exp2, T{0}), T{1}));
  CHECK(same(unary(exp2, -T{0}), T{1}));
  CHECK(same(unary(exp2, T{10}), T{1024}));
  CHECK(same(unary(exp2, T{-1}), T{0.5}));
  CHECK(same(unary(exp2, static_cast<T>(std::numeric_limits<T>::min_exponent -
                                        std::numeric_limits<T>::digits)),
             std::numeric_limits<T>::denorm_min()));
  CHECK(same(unary(cosh, inf), inf));
  CHECK(same(unary(cosh, -inf), inf));
  CHECK(same(unary(cosh, nan), nan));
  CHECK(same(unary(cosh, -T{0}), T{1}));
  CHECK(same(unary(tan, -T{0}), -T{0}));
  CHECK(same(unary(tan, T{0}), T{0}));
  CHECK(same(unary(tan, inf), nan));
  CHECK(same(unary(tan, nan), nan));
  CHECK(same(unary(erf, -T{0}), -T{0}));
  CHECK(same(unary(erf, inf), T{1}));
  CHECK(same(unary(erf, -inf), -T{1}));
  CHECK(same(unary(erf, nan), nan));
  CHECK(same(unary(sigmoid, inf), T{1}));
  CHECK(same(unary(sigmoid, -inf), T{0}));
  CHECK(same(unary(sigmoid, nan), nan));
  CHECK(same(unary(sigmoid, T{0}), T{0.5}));
}
