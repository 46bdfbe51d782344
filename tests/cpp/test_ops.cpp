// Tests of the op table (ops/op_table.hpp, ops/math_ops.hpp, ops/registry.hpp) through the
// real evaluation path: every value checked here comes out of dx::eval of an expression,
// so the SIMD bodies, the operand conversions of eval/evaluator.hpp and the unit, strided
// and tail loops of eval/assign.hpp all take part.
//
// - Float functions (every op of dx::ops::float_unary_ops, then arctan2, hypot, power and
//   true_divide) against a long double reference, in ULPs of the result type (Note [ulp
//   measure]), within each op's declared `acc` bound; the measured maxima are printed.
//   Special values (NaN, ±inf, ±0, out-of-range arguments) must match the C library.
// - Exact ops against the op's own scalar body (Op::scalar) over every dtype they accept,
//   in contiguous, reversed (stride -1) and broadcast layouts, and against hand-written
//   values taken from NumPy 2.4 for the tricky cases (wrap-around, NaN, signed zeros,
//   shifts by counts outside the width, zero divisors, astype).
// - dtype rules: NumPy 2's result dtype for every pair of dtypes, NEP 50 weak scalars.
// - fma contraction: what describe_lowered shows, and that the value is a*b+c rounded once.
//
// Note [ulp measure]
// An error is |got - exact| / ulp(exact), the exact value computed in long double and the
// ulp taken in the result type (subnormal ulps below the normal range), as Highway and
// test_simd_math.cpp measure it. A bound of 0 ("exact") means correctly rounded: at most
// half an ulp, plus the long double reference's own rounding (kReferenceSlack).
#include <doctest/doctest.h>

#include "dynexpr/dynexpr.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

namespace dx = dynexpr;
namespace hana = boost::hana;
namespace ops = dynexpr::ops;
using dx::index_t;
using dx::Shape;
using LD = long double;

// dtype lists for TEST_CASE_TEMPLATE.
#define ALL_DTYPES bool, std::uint8_t, std::int32_t, std::int64_t, float, double
#define ARITH_DTYPES std::uint8_t, std::int32_t, std::int64_t, float, double
#define BITWISE_DTYPES bool, std::uint8_t, std::int32_t, std::int64_t
#define INT_DTYPES std::uint8_t, std::int32_t, std::int64_t

constexpr auto kAllDtypes = hana::tuple_t<bool, std::uint8_t, std::int32_t, std::int64_t, float, double>;

constexpr LD kReferenceSlack = 1.0L / 1024;
constexpr LD kPi = 3.141592653589793238462643383279502884L;

template <class T>
constexpr T nan_v = std::numeric_limits<T>::quiet_NaN();
template <class T>
constexpr T inf_v = std::numeric_limits<T>::infinity();
template <class T>
constexpr T max_v = std::numeric_limits<T>::max();

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

template <class T>
std::string dtype_str() {
  return std::string(dx::dtype_name<T>());
}

template <class T>
std::string show(T v) {
  char buf[64];
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "True" : "False";
  } else if constexpr (std::is_same_v<T, float>) {
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
    return buf;
  } else if constexpr (std::is_same_v<T, double>) {
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
  } else if constexpr (std::is_same_v<T, LD>) {
    std::snprintf(buf, sizeof buf, "%.21Lg", v);
    return buf;
  } else {
    return std::to_string(static_cast<long long>(v));
  }
}

/// Equal values; for floats also the same signed zero, and any NaN matches any NaN.
template <class T>
bool same(T got, T want) {
  if constexpr (dx::is_float_v<T>) {
    if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
    return got == want && std::signbit(got) == std::signbit(want);
  } else {
    return got == want;
  }
}

/// Counts failures of one check and keeps the first few for the report.
struct mismatches {
  std::size_t count = 0;
  std::string first;
  void add(const std::string& what) {
    if (++count <= 10) first += "\n    " + what;
  }
};

void check_none(const mismatches& m, const std::string& what) {
  CHECK_MESSAGE(m.count == 0, (what + ": " + std::to_string(m.count) + " mismatches" + m.first));
}

template <class T>
dx::Tensor<T> make_tensor(const std::vector<T>& v, const Shape& shape) {
  dx::Tensor<T> t(shape);
  REQUIRE(static_cast<std::size_t>(t.size()) == v.size());
  for (std::size_t i = 0; i < v.size(); ++i) t.data()[i] = v[i];
  return t;
}
template <class T>
dx::Tensor<T> make_tensor(const std::vector<T>& v) {
  return make_tensor(v, Shape{static_cast<index_t>(v.size())});
}

/// A stride -1 view of a 1-D tensor: evaluation takes the general (gather) loop.
template <class T>
dx::View<const T> reversed(const dx::Tensor<T>& t) {
  return t.slice(dx::slice(dx::none, dx::none, -1));
}

template <class E>
using value_t = typename std::remove_cvref_t<E>::value_type;

/// The values each dtype is tested with: limits, wrap-around points, shift counts around
/// the width, signed zeros, halves for rounding, NaN and infinities.
template <class T>
std::vector<T> interesting() {
  using L = std::numeric_limits<T>;
  if constexpr (std::is_same_v<T, bool>) {
    return {false, true};
  } else if constexpr (std::is_same_v<T, std::uint8_t>) {
    return {0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 100, 127, 128, 200, 254, 255};
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    return {0,  1,   -1,  2,    -2,     3,     -3,      5,       -7,      7,      8,
            31, 32,  33,  -33,  100,    -100,  46341,   65536,   -65536,  1 << 30, L::max(),
            L::min(), L::max() - 1, L::min() + 1};
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    return {0,   1,    -1,   2,    -2,   3,  -3, 5, -7, 7, 8, 31, 32, 33, 63, 64, 65, -64, 100,
            -100, 3037000500, std::int64_t{1} << 32, (std::int64_t{1} << 53) + 1,
            std::int64_t{1} << 62, L::max(), L::min(), L::max() - 1, L::min() + 1,
            std::numeric_limits<std::int32_t>::max(), std::numeric_limits<std::int32_t>::min()};
  } else {
    const T big_odd = std::ldexp(T(1), L::digits - 1) + 1;  // 2^23 + 1, 2^52 + 1
    return {T(0),     T(-0.0),  T(1),     T(-1),          T(0.5),         T(-0.5),
            T(1.5),   T(-1.5),  T(2.5),   T(-2.5),        T(2),           T(-2),
            T(3),     T(-3),    T(7),     T(-7),          std::nextafter(T(0.5), T(0)),
            T(1e30),  T(-1e30), L::denorm_min(), -L::denorm_min(), L::max(), L::lowest(),
            inf_v<T>, -inf_v<T>, nan_v<T>, big_odd,       -big_odd,       T(300.75),
            T(-300.75)};
  }
}

/// Op's value at one element as the evaluator's scalar path computes it: the operands
/// converted to the op's compute type, Op::scalar, the result converted to its dtype.
template <class Op, class... A>
auto scalar_result(A... a) {
  using C = typename Op::template compute<A...>;
  using R = typename Op::template result<A...>;
  return static_cast<R>(Op::scalar(static_cast<C>(a)...));
}

// ---------------------------------------------------------------------------------------
// Exact ops against their scalar bodies
// ---------------------------------------------------------------------------------------

/// Op over the pairs (a[k], b[k]), contiguous and reversed, against Op::scalar.
template <class Op, class A, class B>
void check_pairs_against_scalar(const std::vector<A>& a, const std::vector<B>& b) {
  const std::string what = std::string(Op::name) + "(" + dtype_str<A>() + ", " + dtype_str<B>() + ")";
  const auto ta = make_tensor(a);
  const auto tb = make_tensor(b);
  const auto got = dx::eval(dx::apply<Op>(ta, tb));
  const auto rev = dx::eval(dx::apply<Op>(reversed(ta), reversed(tb)));
  using R = value_t<decltype(got)>;
  static_assert(std::is_same_v<R, typename Op::template result<A, B>>);
  mismatches bad;
  const std::size_t n = a.size();
  for (std::size_t k = 0; k < n; ++k) {
    const A ak = a[k];  // a copy: std::vector<bool> hands out proxies
    const B bk = b[k];
    const R want = scalar_result<Op>(ak, bk);
    const R g = got.data()[k], r = rev.data()[n - 1 - k];
    if (!same(g, want) || !same(r, want))
      bad.add(std::string(Op::name) + "(" + show(ak) + ", " + show(bk) + "): simd " + show(g) +
              ", reversed " + show(r) + ", scalar body " + show(want));
  }
  check_none(bad, what + " vs Op::scalar");
}

/// Op over every pair of av x bv: flattened (above) and as a broadcast (n, 1) x (1, m).
template <class Op, class A, class B>
void check_binary_against_scalar(const std::vector<A>& av, const std::vector<B>& bv) {
  std::vector<A> a;
  std::vector<B> b;
  for (const A x : av)
    for (const B y : bv) a.push_back(x), b.push_back(y);
  check_pairs_against_scalar<Op>(a, b);

  const index_t n = static_cast<index_t>(av.size()), m = static_cast<index_t>(bv.size());
  const auto col = make_tensor(av, Shape{n, 1});
  const auto row = make_tensor(bv, Shape{1, m});
  const auto got = dx::eval(dx::apply<Op>(col, row));
  REQUIRE(got.shape() == Shape{n, m});
  mismatches bad;
  for (std::size_t k = 0; k < a.size(); ++k) {
    const A ak = a[k];
    const B bk = b[k];
    const auto want = scalar_result<Op>(ak, bk);
    if (!same(got.data()[k], want))
      bad.add(std::string(Op::name) + "(" + show(ak) + ", " + show(bk) + "): broadcast " +
              show(got.data()[k]) + ", scalar body " + show(want));
  }
  check_none(bad, std::string(Op::name) + "(" + dtype_str<A>() + ", " + dtype_str<B>() +
                      ") broadcast (n, 1) x (1, m) vs Op::scalar");
}

template <class Op, class A>
void check_unary_against_scalar(const std::vector<A>& a) {
  // Each value a few times over, so that every value lands in full packets and the tail.
  std::vector<A> x;
  for (int rep = 0; rep < 5; ++rep) x.insert(x.end(), a.begin(), a.end());
  const auto t = make_tensor(x);
  const auto got = dx::eval(dx::apply<Op>(t));
  const auto rev = dx::eval(dx::apply<Op>(reversed(t)));
  using R = value_t<decltype(got)>;
  static_assert(std::is_same_v<R, typename Op::template result<A>>);
  mismatches bad;
  const std::size_t n = x.size();
  for (std::size_t k = 0; k < n; ++k) {
    const A xk = x[k];
    const R want = scalar_result<Op>(xk);
    const R g = got.data()[k], r = rev.data()[n - 1 - k];
    if (!same(g, want) || !same(r, want))
      bad.add(std::string(Op::name) + "(" + show(xk) + "): simd " + show(g) + ", reversed " +
              show(r) + ", scalar body " + show(want));
  }
  check_none(bad, std::string(Op::name) + "(" + dtype_str<A>() + ") vs Op::scalar");
}

// ---------------------------------------------------------------------------------------
// Exact ops against hand-written values (NumPy 2.4 on the same inputs)
// ---------------------------------------------------------------------------------------

template <class T, class R>
struct unary_case {
  T x;
  R want;
};
template <class A, class R, class B = A>
struct binary_case {
  A a;
  B b;
  R want;
};

/// Each case repeated so that it goes through full packets as well as the tail.
constexpr int kRepeats = 5;

template <class Op, class T, class R = typename Op::template result<T>>
void expect_unary(const std::vector<unary_case<T, R>>& cases) {
  std::vector<T> x;
  for (int rep = 0; rep < kRepeats; ++rep)
    for (const auto& c : cases) x.push_back(c.x);
  const auto t = make_tensor(x);
  const auto got = dx::eval(dx::apply<Op>(t));
  static_assert(std::is_same_v<value_t<decltype(got)>, R>);
  mismatches bad;
  for (std::size_t k = 0; k < x.size(); ++k) {
    const auto& c = cases[k % cases.size()];
    if (!same(got.data()[k], c.want))
      bad.add(std::string(Op::name) + "(" + show(c.x) + ") = " + show(got.data()[k]) +
              ", expected " + show(c.want));
  }
  check_none(bad, std::string(Op::name) + "(" + dtype_str<T>() + ") hand-written cases");
}

template <class Op, class T, class R = typename Op::template result<T, T>, class B = T>
void expect_binary(const std::vector<binary_case<T, R, B>>& cases) {
  std::vector<T> a;
  std::vector<B> b;
  for (int rep = 0; rep < kRepeats; ++rep)
    for (const auto& c : cases) a.push_back(c.a), b.push_back(c.b);
  const auto ta = make_tensor(a);
  const auto tb = make_tensor(b);
  const auto got = dx::eval(dx::apply<Op>(ta, tb));
  static_assert(std::is_same_v<value_t<decltype(got)>, R>);
  mismatches bad;
  for (std::size_t k = 0; k < a.size(); ++k) {
    const auto& c = cases[k % cases.size()];
    if (!same(got.data()[k], c.want))
      bad.add(std::string(Op::name) + "(" + show(c.a) + ", " + show(c.b) + ") = " +
              show(got.data()[k]) + ", expected " + show(c.want));
  }
  check_none(bad, std::string(Op::name) + "(" + dtype_str<T>() + ", " + dtype_str<B>() +
                      ") hand-written cases");
}

// ---------------------------------------------------------------------------------------
// Float functions: error measure and references
// ---------------------------------------------------------------------------------------

/// |got - ref| in ULPs of T at ref (Note [ulp measure]); an infinite `got` counts as max + 1
/// ulp. NaN, infinite and zero references must be matched exactly (zero with its sign),
/// else the error is +inf.
template <class T>
LD ulp_error(T got, LD ref) {
  using lim = std::numeric_limits<T>;
  constexpr LD kFail = std::numeric_limits<LD>::infinity();
  if (std::isnan(ref)) return std::isnan(got) ? 0 : kFail;
  if (std::isnan(got)) return kFail;
  if (std::isinf(ref)) return LD{got} == ref ? 0 : kFail;
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

/// Representable values between a and b (finite, same sign or zero).
template <class T>
LD ulp_steps(T a, T b) {
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  constexpr U magnitude = ~(U{1} << (sizeof(T) * 8 - 1));
  auto ordinal = [](T v) {
    const LD m = static_cast<LD>(std::bit_cast<U>(v) & magnitude);
    return std::signbit(v) ? -m : m;
  };
  return std::fabs(ordinal(a) - ordinal(b));
}

/// The accuracy bound of an op for T (Note [ulp measure]).
template <class T>
LD bound_of(const ops::accuracy& acc) {
  const double ulp = sizeof(T) == 4 ? acc.ulp_f32 : acc.ulp_f64;
  return ulp == 0 ? LD{0.5} + kReferenceSlack : LD{ulp};
}
template <class T>
LD stated_ulp(const ops::accuracy& acc) {
  return sizeof(T) == 4 ? acc.ulp_f32 : acc.ulp_f64;
}

LD sigmoid_exact(LD x) { return 1 / (1 + std::exp(-x)); }

/// The exact value (long double) of each float function of one argument, by NumPy name.
/// A name missing here fails the test: a new op of float_unary_ops needs its reference.
bool exact_unary(std::string_view op, LD x, LD& out) {
  struct entry {
    std::string_view name;
    LD (*f)(LD);
  };
  static constexpr entry table[] = {
      {"sqrt", [](LD v) { return std::sqrt(v); }},     {"exp", [](LD v) { return std::exp(v); }},
      {"expm1", [](LD v) { return std::expm1(v); }},   {"exp2", [](LD v) { return std::exp2(v); }},
      {"log", [](LD v) { return std::log(v); }},       {"log1p", [](LD v) { return std::log1p(v); }},
      {"log2", [](LD v) { return std::log2(v); }},     {"log10", [](LD v) { return std::log10(v); }},
      {"sin", [](LD v) { return std::sin(v); }},       {"cos", [](LD v) { return std::cos(v); }},
      {"tan", [](LD v) { return std::tan(v); }},       {"tanh", [](LD v) { return std::tanh(v); }},
      {"sinh", [](LD v) { return std::sinh(v); }},     {"cosh", [](LD v) { return std::cosh(v); }},
      {"arcsin", [](LD v) { return std::asin(v); }},   {"arccos", [](LD v) { return std::acos(v); }},
      {"arctan", [](LD v) { return std::atan(v); }},   {"arcsinh", [](LD v) { return std::asinh(v); }},
      {"arccosh", [](LD v) { return std::acosh(v); }}, {"arctanh", [](LD v) { return std::atanh(v); }},
      {"sigmoid", sigmoid_exact},                      {"erf", [](LD v) { return std::erf(v); }},
      {"rint", [](LD v) { return std::nearbyint(v); }},
  };
  for (const auto& e : table)
    if (e.name == op) {
      out = e.f(x);
      return true;
    }
  return false;
}

/// The C library's answer in T (what NumPy's scalar loops give). sigmoid has no C function:
/// its exact value rounded to T.
template <class T>
T c_unary(std::string_view op, T x) {
  if (op == "sqrt") return std::sqrt(x);
  if (op == "exp") return std::exp(x);
  if (op == "expm1") return std::expm1(x);
  if (op == "exp2") return std::exp2(x);
  if (op == "log") return std::log(x);
  if (op == "log1p") return std::log1p(x);
  if (op == "log2") return std::log2(x);
  if (op == "log10") return std::log10(x);
  if (op == "sin") return std::sin(x);
  if (op == "cos") return std::cos(x);
  if (op == "tan") return std::tan(x);
  if (op == "tanh") return std::tanh(x);
  if (op == "sinh") return std::sinh(x);
  if (op == "cosh") return std::cosh(x);
  if (op == "arcsin") return std::asin(x);
  if (op == "arccos") return std::acos(x);
  if (op == "arctan") return std::atan(x);
  if (op == "arcsinh") return std::asinh(x);
  if (op == "arccosh") return std::acosh(x);
  if (op == "arctanh") return std::atanh(x);
  if (op == "sigmoid") return static_cast<T>(sigmoid_exact(x));
  if (op == "erf") return std::erf(x);
  if (op == "rint") return std::nearbyint(x);
  FAIL_CHECK("no C library reference for ", std::string(op));
  return nan_v<T>;
}

LD exact_binary(std::string_view op, LD a, LD b) {
  if (op == "arctan2") return std::atan2(a, b);
  if (op == "hypot") return std::hypot(a, b);
  if (op == "power") return std::pow(a, b);
  if (op == "true_divide") return a / b;
  FAIL_CHECK("no long double reference for ", std::string(op));
  return std::numeric_limits<LD>::quiet_NaN();
}

template <class T>
T c_binary(std::string_view op, T a, T b) {
  if (op == "arctan2") return std::atan2(a, b);
  if (op == "hypot") return std::hypot(a, b);
  if (op == "power") return std::pow(a, b);
  if (op == "true_divide") return a / b;
  FAIL_CHECK("no C library reference for ", std::string(op));
  return nan_v<T>;
}

/// got must be the C library's `want`: the same NaN-ness, the same infinity, the same
/// signed zero; for a finite non-zero `want`, the same sign and within `steps`
/// representable values (a subnormal may round to the zero of its sign).
template <class T>
bool matches_c(T got, T want, LD steps) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || want == 0 || std::isinf(got)) return same(got, want);
  return std::signbit(got) == std::signbit(want) && ulp_steps(got, want) <= steps;
}

/// n points over [lo, hi]: even indices uniform (lo and hi included), odd ones spread
/// log-uniformly over the magnitudes (12 decades below the largest, both signs where the
/// range has them), so that ranges over many decades are covered at every scale.
template <class T>
std::vector<T> sample(double lo, double hi, std::size_t n) {
  std::vector<T> x(n);
  const double top = std::max(std::fabs(lo), std::fabs(hi));
  for (std::size_t i = 0; i < n; ++i) {
    const double t = static_cast<double>(i) / static_cast<double>(n - 1);
    const double uniform = i + 1 == n ? hi : lo + (hi - lo) * t;
    double v = uniform;
    if (i % 2 == 1) {
      if (lo > 0) {
        v = lo * std::pow(hi / lo, t);
      } else {
        const double m = top * std::pow(10.0, -12.0 * (1 - t));
        v = (i / 2) % 2 ? -m : m;
        if (v < lo || v > hi) v = -v;
        if (v < lo || v > hi) v = uniform;
      }
    }
    x[i] = static_cast<T>(v);
  }
  return x;
}

/// Arguments where the C library's answer is special or where Note [guarded math] sends
/// the lanes to the C library: NaN, ±inf, ±0, subnormals, huge and out-of-range values.
template <class T>
std::vector<T> special_inputs() {
  using L = std::numeric_limits<T>;
  std::vector<T> x = {nan_v<T>, -nan_v<T>, inf_v<T>, -inf_v<T>, T(0), T(-0.0), T(1), T(-1),
                      T(0.5), T(-0.5), T(2), T(-2), T(10), T(-10), L::denorm_min(),
                      -L::denorm_min(), L::min(), -L::min(), L::max(), L::lowest(), T(1e-20),
                      T(-1e-20), T(50), T(-50), T(88.5), T(-88.5), T(89), T(-89), T(100),
                      T(-100), T(104), T(-104), T(150), T(-150), T(710), T(-710), T(1000),
                      T(-1000), T(39000), T(-39000), T(40000), T(-40000), T(1e10), T(-1e10),
                      T(1e30), T(-1e30), T(0.999), T(-0.999), T(1.001), T(-1.001),
                      std::nextafter(T(1), T(2)), std::nextafter(T(-1), T(-2)),
                      std::nextafter(T(1), T(0)), std::nextafter(T(-1), T(0))};
  if constexpr (sizeof(T) == 8) {
    for (const T v : {1e300, 745.0, 746.0, 709.5, 1e-310, 2e5})
      x.insert(x.end(), {v, -v});
  }
  return x;
}

template <class Op, class T>
void check_unary_accuracy() {
  constexpr std::size_t n = 20011;  // not a multiple of any lane count: the tail runs
  LD probe = 0;
  REQUIRE_MESSAGE(exact_unary(Op::name, 1, probe), "no long double reference for ", std::string(Op::name));
  const std::vector<T> x = sample<T>(Op::acc.lo, Op::acc.hi, n);
  const dx::Tensor<T> in = make_tensor(x);
  const auto out = dx::eval(dx::apply<Op>(in));
  static_assert(std::is_same_v<value_t<decltype(out)>, T>);
  LD worst = 0;
  T worst_x = 0, worst_got = 0;
  for (std::size_t i = 0; i < n; ++i) {
    LD ref = 0;
    exact_unary(Op::name, static_cast<LD>(x[i]), ref);
    const LD e = ulp_error(out.data()[i], ref);
    if (!(e <= worst)) worst = e, worst_x = x[i], worst_got = out.data()[i];
  }
  const LD bound = bound_of<T>(Op::acc);
  char line[200];
  std::snprintf(line, sizeof line, "%-8s %-7s max_ulp=%-7.3Lf stated=%-3Lg over [%g, %g]  worst at x=%s (got %s)",
                std::string(Op::name).c_str(), dtype_str<T>().c_str(), worst, stated_ulp<T>(Op::acc),
                Op::acc.lo, Op::acc.hi, show(worst_x).c_str(), show(worst_got).c_str());
  MESSAGE(line);
  CHECK_MESSAGE(worst <= bound, line);

  // The same op through a reversed view runs the general (gather) loop: the same bits.
  const auto rev = dx::eval(dx::apply<Op>(reversed(in)));
  mismatches bad;
  for (std::size_t i = 0; i < n; ++i)
    if (!same(rev.data()[n - 1 - i], out.data()[i]))
      bad.add(std::string(Op::name) + "(" + show(x[i]) + "): contiguous " + show(out.data()[i]) +
              ", reversed " + show(rev.data()[n - 1 - i]));
  check_none(bad, std::string(Op::name) + "(" + dtype_str<T>() + ") reversed vs contiguous");
}

template <class Op, class T>
void check_unary_specials() {
  const std::vector<T> xs = special_inputs<T>();
  const LD steps = stated_ulp<T>(Op::acc);
  const dx::Tensor<T> mixed = make_tensor(xs);
  const auto out = dx::eval(dx::apply<Op>(mixed));
  mismatches bad;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const T want = c_unary<T>(Op::name, xs[i]);
    // Alone in a tensor: full packets of only this value, then a tail.
    const dx::Tensor<T> alone(Shape{19}, xs[i]);
    const auto out1 = dx::eval(dx::apply<Op>(alone));
    bool ok = matches_c(out.data()[i], want, steps);
    for (index_t k = 0; k < out1.size(); ++k) ok = ok && matches_c(out1.data()[k], want, steps);
    if (!ok)
      bad.add(std::string(Op::name) + "(" + show(xs[i]) + ") = " + show(out.data()[i]) +
              " (in a mixed packet), " + show(out1.data()[0]) + " (alone); C library " + show(want));
  }
  check_none(bad, std::string(Op::name) + "(" + dtype_str<T>() + ") special values vs the C library");
}

// ---------------------------------------------------------------------------------------
// dtype rules
// ---------------------------------------------------------------------------------------

/// NumPy's dtype.char: '?' bool, 'B' uint8, 'i' int32, 'l' int64, 'f' float32, 'd' float64.
template <class T>
constexpr char dtype_char() {
  switch (dx::dtype_of<T>()) {
    case dx::dtype::bool_: return '?';
    case dx::dtype::uint8: return 'B';
    case dx::dtype::int32: return 'i';
    case dx::dtype::int64: return 'l';
    case dx::dtype::float32: return 'f';
    case dx::dtype::float64: return 'd';
  }
  return '-';
}

/// Result dtypes of a binary op: rows are the first operand, columns the second, both in
/// the order bool, uint8, int32, int64, float32, float64; 'x' where dynexpr rejects the
/// pair at compile time (see compile_fail/).
struct dtype_table {
  char rows[6][7];
};

template <class Op, class A, class B>
using binary_result_t =
    value_t<decltype(dx::apply<Op>(std::declval<dx::Tensor<A>&>(), std::declval<dx::Tensor<B>&>()))>;

using dtype_list = std::tuple<bool, std::uint8_t, std::int32_t, std::int64_t, float, double>;

template <class Op, dtype_table Table, std::size_t I, std::size_t J>
constexpr bool result_dtype_matches() {
  if constexpr (Table.rows[I][J] == 'x') {
    return true;
  } else {
    using A = std::tuple_element_t<I, dtype_list>;
    using B = std::tuple_element_t<J, dtype_list>;
    constexpr bool ok = dtype_char<binary_result_t<Op, A, B>>() == Table.rows[I][J];
    static_assert(ok, "result dtype differs from NumPy's (see the template arguments)");
    return ok;
  }
}
template <class Op, dtype_table Table, std::size_t... K>
constexpr bool all_result_dtypes_match(std::index_sequence<K...>) {
  return (result_dtype_matches<Op, Table, K / 6, K % 6>() && ...);
}
template <class Op, dtype_table Table>
constexpr bool result_dtypes_match() {
  return all_result_dtypes_match<Op, Table>(std::make_index_sequence<36>());
}

// From NumPy 2.4: np.OP(np.ones(1, a), np.ones(1, b)).dtype.char.
constexpr dtype_table kAddDtypes{{"xBilfd", "BBilfd", "iiildd", "lllldd", "ffddfd", "dddddd"}};
constexpr dtype_table kDivideDtypes{{"ddddfd", "ddddfd", "dddddd", "dddddd", "ffddfd", "dddddd"}};
constexpr dtype_table kCompareDtypes{{"??????", "??????", "??????", "??????", "??????", "??????"}};
constexpr dtype_table kArctan2Dtypes{{"xxddfd", "xxddfd", "dddddd", "dddddd", "ffddfd", "dddddd"}};
constexpr dtype_table kBitwiseDtypes{{"?Bilxx", "BBilxx", "iiilxx", "llllxx", "xxxxxx", "xxxxxx"}};

static_assert(result_dtypes_match<ops::add_op, kAddDtypes>());
static_assert(result_dtypes_match<ops::sub_op, kAddDtypes>());
static_assert(result_dtypes_match<ops::mul_op, kAddDtypes>());
static_assert(result_dtypes_match<ops::floor_divide_op, kAddDtypes>());
static_assert(result_dtypes_match<ops::mod_op, kAddDtypes>());
static_assert(result_dtypes_match<ops::maximum_op, kAddDtypes>());
static_assert(result_dtypes_match<ops::pow_op, kAddDtypes>());
static_assert(result_dtypes_match<ops::div_op, kDivideDtypes>());
static_assert(result_dtypes_match<ops::equal_op, kCompareDtypes>());
static_assert(result_dtypes_match<ops::less_op, kCompareDtypes>());
static_assert(result_dtypes_match<ops::greater_equal_op, kCompareDtypes>());
static_assert(result_dtypes_match<ops::logical_and_op, kCompareDtypes>());
static_assert(result_dtypes_match<ops::arctan2_op, kArctan2Dtypes>());
static_assert(result_dtypes_match<ops::hypot_op, kArctan2Dtypes>());
static_assert(result_dtypes_match<ops::bitwise_and_op, kBitwiseDtypes>());
static_assert(result_dtypes_match<ops::left_shift_op, dtype_table{{"xxxxxx", "xBilxx", "xiilxx", "xlllxx", "xxxxxx", "xxxxxx"}}>());

// Unary ops: float functions give float64 for int32/int64 (NumPy gives float16 for bool
// and uint8, which dynexpr rejects); rounding keeps integer dtypes; predicates give bool.
template <class Op, class T>
using unary_result_t = value_t<decltype(dx::apply<Op>(std::declval<dx::Tensor<T>&>()))>;
static_assert(std::is_same_v<unary_result_t<ops::exp_op, float>, float>);
static_assert(std::is_same_v<unary_result_t<ops::exp_op, double>, double>);
static_assert(std::is_same_v<unary_result_t<ops::exp_op, std::int32_t>, double>);
static_assert(std::is_same_v<unary_result_t<ops::sqrt_op, std::int64_t>, double>);
static_assert(std::is_same_v<unary_result_t<ops::rint_op, std::int32_t>, double>);
static_assert(std::is_same_v<unary_result_t<ops::floor_op, std::int32_t>, std::int32_t>);
static_assert(std::is_same_v<unary_result_t<ops::ceil_op, std::uint8_t>, std::uint8_t>);
static_assert(std::is_same_v<unary_result_t<ops::trunc_op, bool>, bool>);
static_assert(std::is_same_v<unary_result_t<ops::abs_op, bool>, bool>);
static_assert(std::is_same_v<unary_result_t<ops::neg_op, std::uint8_t>, std::uint8_t>);
static_assert(std::is_same_v<unary_result_t<ops::isnan_op, std::int64_t>, bool>);
static_assert(std::is_same_v<unary_result_t<ops::logical_not_op, float>, bool>);
static_assert(std::is_same_v<unary_result_t<ops::invert_op, bool>, bool>);

// ---------------------------------------------------------------------------------------
// Float functions of one argument
// ---------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("float unary ops: within the stated ulp of a long double reference", T, float, double) {
  hana::for_each(ops::float_unary_ops, [](auto op) {
    using Op = typename decltype(op)::type;
    CAPTURE(Op::name);
    check_unary_accuracy<Op, T>();
  });
}

TEST_CASE_TEMPLATE("float unary ops: special values as the C library gives them", T, float, double) {
  hana::for_each(ops::float_unary_ops, [](auto op) {
    using Op = typename decltype(op)::type;
    check_unary_specials<Op, T>();
  });

  // The cases NumPy users meet most, spelled out.
  const dx::Tensor<T> x = make_tensor<T>({T(1000), T(-1000), T(0), T(-1), T(2), T(1e10), nan_v<T>,
                                          inf_v<T>, -inf_v<T>, T(-0.0)});
  const auto exp = dx::eval(dx::exp(x));
  CHECK(exp.at(0) == inf_v<T>);
  CHECK(exp.at(1) == T(0));
  CHECK_FALSE(std::signbit(exp.at(1)));
  CHECK(exp.at(2) == T(1));
  CHECK(std::isnan(exp.at(6)));
  CHECK(exp.at(7) == inf_v<T>);
  CHECK(exp.at(8) == T(0));
  const auto log = dx::eval(dx::log(x));
  CHECK(log.at(2) == -inf_v<T>);
  CHECK(log.at(9) == -inf_v<T>);
  CHECK(std::isnan(log.at(3)));
  CHECK(std::isnan(log.at(8)));
  CHECK(log.at(7) == inf_v<T>);
  const auto sin = dx::eval(dx::sin(x));
  CHECK(ulp_steps(sin.at(5), std::sin(T(1e10))) <= stated_ulp<T>(ops::sin_op::acc));
  CHECK(std::isnan(sin.at(7)));
  CHECK(same(sin.at(9), T(-0.0)));
  const auto asin = dx::eval(dx::arcsin(x));
  CHECK(std::isnan(asin.at(4)));
  CHECK(ulp_error(asin.at(3), -kPi / 2) <= bound_of<T>(ops::arcsin_op::acc));
  CHECK(same(dx::eval(dx::sqrt(x)).at(9), T(-0.0)));
  CHECK(std::isnan(dx::eval(dx::sqrt(x)).at(3)));
  CHECK(same(dx::eval(dx::log1p(x)).at(3), -inf_v<T>));
  CHECK(same(dx::eval(dx::sigmoid(x)).at(1), T(0)));
  CHECK(same(dx::eval(dx::sigmoid(x)).at(0), T(1)));
  CHECK(same(dx::eval(dx::tanh(x)).at(8), T(-1)));
  CHECK(same(dx::eval(dx::erf(x)).at(8), T(-1)));
  CHECK(same(dx::eval(dx::arctanh(x)).at(3), -inf_v<T>));
  CHECK(same(dx::eval(dx::cosh(x)).at(1), inf_v<T>));
}

TEST_CASE_TEMPLATE("float unary ops of int32/int64 give float64, equal to the op on float64", I,
                   std::int32_t, std::int64_t) {
  std::vector<I> xi;
  for (int v = -40; v <= 40; ++v) xi.push_back(static_cast<I>(v));
  using L = std::numeric_limits<I>;
  for (const I v : {I(100), I(1000), I(-1000), I(100000), L::max(), L::min(), I(L::max() - 1)})
    xi.push_back(v);
  if constexpr (sizeof(I) == 8)
    for (const I v : {(I{1} << 53) + 1, (I{1} << 62) + 1, (I{1} << 40) + 3}) xi.push_back(v), xi.push_back(-v);
  std::vector<double> xd;
  for (const I v : xi) xd.push_back(static_cast<double>(v));
  const dx::Tensor<I> ti = make_tensor(xi);
  const dx::Tensor<double> td = make_tensor(xd);
  hana::for_each(ops::float_unary_ops, [&](auto op) {
    using Op = typename decltype(op)::type;
    const auto got = dx::eval(dx::apply<Op>(ti));
    static_assert(std::is_same_v<value_t<decltype(got)>, double>);
    const auto want = dx::eval(dx::apply<Op>(td));
    mismatches bad;
    for (std::size_t k = 0; k < xi.size(); ++k)
      if (!same(got.data()[k], want.data()[k]))
        bad.add(std::string(Op::name) + "(" + show(xi[k]) + ") = " + show(got.data()[k]) +
                ", on float64 " + show(want.data()[k]));
    check_none(bad, std::string(Op::name) + "(" + dtype_str<I>() + ") vs " + std::string(Op::name) + "(float64)");
  });
  // exp(int32) is float64 and exact where float64 is: exp(0) = 1, sqrt(4) = 2.
  const dx::Tensor<I> small = make_tensor<I>({0, 4, 9});
  const dx::Tensor<double> e = dx::exp(small);
  CHECK(e.at(0) == 1.0);
  const dx::Tensor<double> r = dx::sqrt(small);
  CHECK(r.at(1) == 2.0);
  CHECK(r.at(2) == 3.0);
}

// ---------------------------------------------------------------------------------------
// Float functions of two arguments
// ---------------------------------------------------------------------------------------

template <class Op, class T>
void check_binary_accuracy() {
  constexpr std::size_t n = 20011;
  const double lo = Op::acc.lo, hi = Op::acc.hi;
  const bool is_pow = Op::name == "power";
  // power is measured for bases in [lo, hi] and exponents in [-hi, hi].
  const double ylo = is_pow ? -hi : lo;
  const std::vector<T> xs = sample<T>(lo, hi, n);
  std::vector<T> ys = sample<T>(ylo, hi, n);
  std::mt19937_64 rng(20011);
  std::shuffle(ys.begin(), ys.end(), rng);
  const dx::Tensor<T> a = make_tensor(xs), b = make_tensor(ys);
  const auto out = dx::eval(dx::apply<Op>(a, b));
  static_assert(std::is_same_v<value_t<decltype(out)>, T>);
  LD worst = 0;
  T wx = 0, wy = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const LD e = ulp_error(out.data()[i], exact_binary(Op::name, LD{xs[i]}, LD{ys[i]}));
    if (!(e <= worst)) worst = e, wx = xs[i], wy = ys[i];
  }
  char line[200];
  std::snprintf(line, sizeof line, "%-11s %-7s max_ulp=%-7.3Lf stated=%-3Lg over [%g, %g] x [%g, %g]  worst at (%s, %s)",
                std::string(Op::name).c_str(), dtype_str<T>().c_str(), worst, stated_ulp<T>(Op::acc),
                lo, hi, ylo, hi, show(wx).c_str(), show(wy).c_str());
  MESSAGE(line);
  CHECK_MESSAGE(worst <= bound_of<T>(Op::acc), line);
}

/// Every pair of special values against the C library, as for unary ops.
template <class Op, class T>
void check_binary_specials() {
  using L = std::numeric_limits<T>;
  const std::vector<T> v = {nan_v<T>, inf_v<T>, -inf_v<T>, T(0), T(-0.0), T(1), T(-1), T(2),
                            T(-2), T(0.5), T(-0.5), T(3), T(-3), T(1e-20), L::denorm_min(),
                            -L::denorm_min(), L::max(), L::lowest(), T(1e30), T(-1e30), T(1000),
                            T(-1000), T(2.5), T(-2.5)};
  std::vector<T> a, b;
  for (const T x : v)
    for (const T y : v) a.push_back(x), b.push_back(y);
  const dx::Tensor<T> ta = make_tensor(a), tb = make_tensor(b);
  const auto out = dx::eval(dx::apply<Op>(ta, tb));
  mismatches bad;
  for (std::size_t k = 0; k < a.size(); ++k) {
    const T want = c_binary<T>(Op::name, a[k], b[k]);
    if (!matches_c(out.data()[k], want, stated_ulp<T>(Op::acc)))
      bad.add(std::string(Op::name) + "(" + show(a[k]) + ", " + show(b[k]) + ") = " +
              show(out.data()[k]) + ", C library " + show(want));
  }
  check_none(bad, std::string(Op::name) + "(" + dtype_str<T>() + ") special values vs the C library");
}

/// Hand-written cases: the exact value, within the op's bound (0: correctly rounded).
template <class Op, class T>
void expect_float_binary(const std::vector<std::array<LD, 3>>& cases) {
  std::vector<T> a, b;
  for (int rep = 0; rep < kRepeats; ++rep)
    for (const auto& c : cases) a.push_back(static_cast<T>(c[0])), b.push_back(static_cast<T>(c[1]));
  const dx::Tensor<T> ta = make_tensor(a), tb = make_tensor(b);
  const auto out = dx::eval(dx::apply<Op>(ta, tb));
  mismatches bad;
  for (std::size_t k = 0; k < a.size(); ++k) {
    const auto& c = cases[k % cases.size()];
    if (!(ulp_error(out.data()[k], c[2]) <= bound_of<T>(Op::acc)))
      bad.add(std::string(Op::name) + "(" + show(a[k]) + ", " + show(b[k]) + ") = " +
              show(out.data()[k]) + ", expected " + show(c[2]));
  }
  check_none(bad, std::string(Op::name) + "(" + dtype_str<T>() + ") hand-written cases");
}

TEST_CASE_TEMPLATE("arctan2, hypot, power, true_divide: ulp, special values, C99 cases", T, float, double) {
  hana::for_each(hana::tuple_t<ops::arctan2_op, ops::hypot_op, ops::pow_op, ops::div_op>, [](auto op) {
    using Op = typename decltype(op)::type;
    check_binary_accuracy<Op, T>();
    check_binary_specials<Op, T>();
  });

  constexpr LD nan = std::numeric_limits<LD>::quiet_NaN(), inf = std::numeric_limits<LD>::infinity();
  expect_float_binary<ops::pow_op, T>({{-2, 3, -8},        {-2, 0.5L, nan},   {0, -1, inf},
                                       {-0.0L, -1, -inf},  {-0.0L, -2, inf},  {nan, 0, 1},
                                       {1, nan, 1},        {-1, inf, 1},      {-1, -inf, 1},
                                       {2, inf, inf},      {0.5L, inf, 0},    {2, -inf, 0},
                                       {inf, -1, 0},       {-inf, 3, -inf},   {-inf, -3, -0.0L},
                                       {-inf, 2, inf},     {0, 0, 1},         {2, 10, 1024},
                                       {-2, -2, 0.25L},    {4, 0.5L, 2},      {nan, 1, nan}});
  expect_float_binary<ops::arctan2_op, T>({{0, -0.0L, kPi},      {-0.0L, -0.0L, -kPi},
                                           {0, 0, 0},            {-0.0L, 0, -0.0L},
                                           {inf, inf, kPi / 4},  {-inf, inf, -kPi / 4},
                                           {inf, -inf, 3 * kPi / 4}, {-inf, -inf, -3 * kPi / 4},
                                           {1, -inf, kPi},       {-1, -inf, -kPi},
                                           {1, inf, 0},          {-1, inf, -0.0L},
                                           {1, 0, kPi / 2},      {-1, -0.0L, -kPi / 2},
                                           {inf, 1, kPi / 2},    {nan, 1, nan},
                                           {1, 1, kPi / 4},      {1, -1, 3 * kPi / 4}});
  expect_float_binary<ops::hypot_op, T>({{inf, nan, inf},  {nan, -inf, inf}, {nan, 1, nan},
                                         {3, 4, 5},        {-3, -4, 5},      {0, -0.0L, 0},
                                         {-inf, 0, inf},   {5, 12, 13}});
  expect_float_binary<ops::div_op, T>({{1, 0, inf},  {-1, 0, -inf}, {1, -0.0L, -inf}, {0, 0, nan},
                                       {inf, inf, nan}, {7, 2, 3.5L}, {-0.0L, 5, -0.0L},
                                       {1, inf, 0}, {-1, inf, -0.0L}});
  // max * 2 overflows in the two-argument form, not in hypot.
  expect_float_binary<ops::hypot_op, T>({{static_cast<LD>(max_v<T>) / 2, static_cast<LD>(max_v<T>) / 2,
                                          std::hypot(static_cast<LD>(max_v<T>) / 2, static_cast<LD>(max_v<T>) / 2)}});
}

TEST_CASE_TEMPLATE("true_divide of integers and bools gives float64 (float32 with float32)", T, ALL_DTYPES) {
  check_binary_against_scalar<ops::div_op>(interesting<T>(), interesting<T>());
  if constexpr (dx::is_int_v<T> && std::is_signed_v<T>) {
    expect_binary<ops::div_op, T>({{7, 2, 3.5}, {-7, 2, -3.5}, {1, 0, inf_v<double>},
                                   {-1, 0, -inf_v<double>}, {0, 0, nan_v<double>}, {1, 3, 1.0 / 3}});
  }
}

// ---------------------------------------------------------------------------------------
// Exact arithmetic
// ---------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("add, subtract, multiply: scalar body, wrap-around, IEEE special values", T, ARITH_DTYPES) {
  const auto v = interesting<T>();
  check_binary_against_scalar<ops::add_op>(v, v);
  check_binary_against_scalar<ops::sub_op>(v, v);
  check_binary_against_scalar<ops::mul_op>(v, v);
  using L = std::numeric_limits<T>;
  if constexpr (std::is_same_v<T, std::int32_t>) {
    expect_binary<ops::add_op, T>({{L::max(), 1, L::min()}, {L::min(), -1, L::max()}, {L::max(), L::max(), -2}});
    expect_binary<ops::sub_op, T>({{L::min(), 1, L::max()}, {0, L::min(), L::min()}, {-1, L::max(), L::min()}});
    expect_binary<ops::mul_op, T>({{L::max(), 2, -2}, {65536, 65536, 0}, {46341, 46341, -2147479015}, {L::min(), -1, L::min()}});
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    expect_binary<ops::add_op, T>({{L::max(), 1, L::min()}, {L::min(), -1, L::max()}});
    expect_binary<ops::sub_op, T>({{L::min(), 1, L::max()}});
    expect_binary<ops::mul_op, T>({{3037000500, 3037000500, -9223372036709301616}, {L::min(), -1, L::min()},
                                   {std::int64_t{1} << 32, std::int64_t{1} << 32, 0}});
  } else if constexpr (std::is_same_v<T, std::uint8_t>) {
    expect_binary<ops::add_op, T>({{255, 1, 0}, {200, 100, 44}, {128, 128, 0}});
    expect_binary<ops::sub_op, T>({{0, 1, 255}, {3, 5, 254}});
    expect_binary<ops::mul_op, T>({{16, 16, 0}, {200, 2, 144}, {255, 255, 1}});
  } else {
    expect_binary<ops::add_op, T>({{max_v<T>, max_v<T>, inf_v<T>}, {inf_v<T>, -inf_v<T>, nan_v<T>},
                                   {T(-0.0), T(0), T(0)}, {T(-0.0), T(-0.0), T(-0.0)}, {nan_v<T>, T(1), nan_v<T>}});
    expect_binary<ops::sub_op, T>({{T(0), T(0), T(0)}, {T(-0.0), T(0), T(-0.0)}, {inf_v<T>, inf_v<T>, nan_v<T>}});
    expect_binary<ops::mul_op, T>({{T(-0.0), T(5), T(-0.0)}, {inf_v<T>, T(0), nan_v<T>}, {max_v<T>, T(2), inf_v<T>},
                                   {T(-1), T(0), T(-0.0)}, {T(-3), -inf_v<T>, inf_v<T>}});
  }
}

TEST_CASE_TEMPLATE("minimum, maximum, clip: scalar body, NaN propagation", T, ARITH_DTYPES) {
  const auto v = interesting<T>();
  check_binary_against_scalar<ops::minimum_op>(v, v);
  check_binary_against_scalar<ops::maximum_op>(v, v);
  // clip over every x and a few (lo, hi), lo > hi included.
  std::vector<T> x, lo, hi;
  const std::vector<T> bounds = {T(0), T(1), T(2), T(7), std::numeric_limits<T>::max()};
  for (const T a : v)
    for (const T l : bounds)
      for (const T h : bounds) x.push_back(a), lo.push_back(l), hi.push_back(h);
  {
    const dx::Tensor<T> tx = make_tensor(x), tl = make_tensor(lo), th = make_tensor(hi);
    const auto got = dx::eval(dx::clip(tx, tl, th));
    static_assert(std::is_same_v<value_t<decltype(got)>, T>);
    mismatches bad;
    for (std::size_t k = 0; k < x.size(); ++k) {
      const T want = scalar_result<ops::clip_op>(x[k], lo[k], hi[k]);
      if (!same(got.data()[k], want))
        bad.add("clip(" + show(x[k]) + ", " + show(lo[k]) + ", " + show(hi[k]) + ") = " +
                show(got.data()[k]) + ", scalar body " + show(want));
    }
    check_none(bad, "clip(" + dtype_str<T>() + ") vs Op::scalar");
  }
  if constexpr (dx::is_float_v<T>) {
    const T nan = nan_v<T>, inf = inf_v<T>;
    expect_binary<ops::minimum_op, T>({{nan, T(1), nan}, {T(1), nan, nan}, {-inf, nan, nan}, {nan, nan, nan},
                                       {T(-1), T(2), T(-1)}, {inf, -inf, -inf}});
    expect_binary<ops::maximum_op, T>({{nan, T(1), nan}, {T(1), nan, nan}, {inf, nan, nan},
                                       {T(-1), T(2), T(2)}, {inf, -inf, inf}});
    // NumPy (x86 MINPD/MAXPD) returns the second operand when the two compare equal.
    expect_binary<ops::minimum_op, T>({{T(-0.0), T(0), T(0)}, {T(0), T(-0.0), T(-0.0)}});
    expect_binary<ops::maximum_op, T>({{T(-0.0), T(0), T(0)}, {T(0), T(-0.0), T(-0.0)}});
    const dx::Tensor<T> cx = make_tensor<T>({nan, T(0.5), T(0.5), T(5), T(-5), T(0.5)});
    const dx::Tensor<T> cl = make_tensor<T>({T(0), nan, T(0), T(3), T(0), T(0)});
    const dx::Tensor<T> ch = make_tensor<T>({T(1), T(1), nan, T(1), T(1), T(1)});
    const auto c = dx::eval(dx::clip(cx, cl, ch));
    CHECK(std::isnan(c.at(0)));
    CHECK(std::isnan(c.at(1)));
    CHECK(std::isnan(c.at(2)));
    CHECK(c.at(3) == T(1));  // lo > hi: hi wins, as minimum(maximum(x, lo), hi)
    CHECK(c.at(4) == T(0));
    CHECK(c.at(5) == T(0.5));
  } else {
    const dx::Tensor<T> cx = make_tensor<T>({std::numeric_limits<T>::min(), T(9), T(4)});
    const auto c = dx::eval(dx::clip(cx, T(2), T(7)));
    CHECK(c.at(0) == T(2));
    CHECK(c.at(1) == T(7));
    CHECK(c.at(2) == T(4));
  }
}

TEST_CASE_TEMPLATE("negative, absolute, square, reciprocal, sign", T, ARITH_DTYPES) {
  const auto v = interesting<T>();
  check_unary_against_scalar<ops::neg_op>(v);
  check_unary_against_scalar<ops::abs_op>(v);
  check_unary_against_scalar<ops::square_op>(v);
  check_unary_against_scalar<ops::reciprocal_op>(v);
  check_unary_against_scalar<ops::sign_op>(v);
  using L = std::numeric_limits<T>;
  if constexpr (std::is_same_v<T, std::uint8_t>) {
    expect_unary<ops::neg_op, T>({{1, 255}, {0, 0}, {255, 1}, {128, 128}});
    expect_unary<ops::square_op, T>({{16, 0}, {15, 225}, {255, 1}});
    expect_unary<ops::reciprocal_op, T>({{0, 0}, {1, 1}, {2, 0}});
    expect_unary<ops::sign_op, T>({{0, 0}, {200, 1}});
  } else if constexpr (dx::is_int_v<T>) {
    expect_unary<ops::neg_op, T>({{L::min(), L::min()}, {L::max(), L::min() + 1}, {0, 0}});
    expect_unary<ops::abs_op, T>({{L::min(), L::min()}, {-5, 5}, {L::max(), L::max()}});
    expect_unary<ops::square_op, T>({{-3, 9}, {L::min(), 0}});
    if constexpr (sizeof(T) == 4) expect_unary<ops::square_op, T>({{46341, -2147479015}, {65536, 0}});
    // Integer 1/x truncates; dynexpr gives 0 for 0 (NumPy's value there is not defined).
    expect_unary<ops::reciprocal_op, T>({{1, 1}, {-1, -1}, {2, 0}, {-2, 0}, {0, 0}});
    expect_unary<ops::sign_op, T>({{L::min(), -1}, {0, 0}, {L::max(), 1}});
  } else {
    const T nan = nan_v<T>, inf = inf_v<T>;
    expect_unary<ops::neg_op, T>({{T(0), T(-0.0)}, {T(-0.0), T(0)}, {inf, -inf}, {nan, nan}});
    expect_unary<ops::abs_op, T>({{T(-0.0), T(0)}, {-inf, inf}, {T(-2.5), T(2.5)}, {nan, nan}});
    expect_unary<ops::square_op, T>({{T(-3), T(9)}, {max_v<T>, inf}, {T(-0.0), T(0)}});
    expect_unary<ops::reciprocal_op, T>({{T(0), inf}, {T(-0.0), -inf}, {T(4), T(0.25)}, {-inf, T(-0.0)}});
    // np.sign(-0.0) is 0.0 (positive), np.sign(nan) is nan.
    expect_unary<ops::sign_op, T>({{nan, nan}, {T(-0.0), T(0)}, {T(0), T(0)}, {-inf, T(-1)}, {L::denorm_min(), T(1)}});
  }
}

TEST_CASE("absolute of bool is bool, unchanged") {
  check_unary_against_scalar<ops::abs_op>(interesting<bool>());
  expect_unary<ops::abs_op, bool>({{true, true}, {false, false}});
}

TEST_CASE_TEMPLATE("floor, ceil, trunc keep integer dtypes; rint gives float64 for integers", T, ALL_DTYPES) {
  const auto v = interesting<T>();
  check_unary_against_scalar<ops::floor_op>(v);
  check_unary_against_scalar<ops::ceil_op>(v);
  check_unary_against_scalar<ops::trunc_op>(v);
  if constexpr (!dx::is_float_v<T>) {
    // Integers (and bools) come back unchanged, in their own dtype.
    std::vector<unary_case<T, T>> same_cases;
    for (const T x : v) same_cases.push_back({x, x});
    expect_unary<ops::floor_op, T>(same_cases);
    expect_unary<ops::ceil_op, T>(same_cases);
    expect_unary<ops::trunc_op, T>(same_cases);
  }
  if constexpr (dx::is_float_v<T>) {
    check_unary_against_scalar<ops::rint_op>(v);
    const T nan = nan_v<T>, inf = inf_v<T>;
    expect_unary<ops::floor_op, T>({{T(-0.5), T(-1)}, {T(-0.0), T(-0.0)}, {T(2.5), T(2)}, {nan, nan}, {-inf, -inf}});
    expect_unary<ops::ceil_op, T>({{T(-0.5), T(-0.0)}, {T(0.2), T(1)}, {T(-2.5), T(-2)}, {inf, inf}});
    expect_unary<ops::trunc_op, T>({{T(-0.5), T(-0.0)}, {T(2.7), T(2)}, {T(-2.7), T(-2)}, {nan, nan}});
    expect_unary<ops::rint_op, T>({{T(0.5), T(0)}, {T(1.5), T(2)}, {T(2.5), T(2)}, {T(-2.5), T(-2)},
                                   {T(-0.5), T(-0.0)}, {T(-0.2), T(-0.0)}, {T(3.5), T(4)},
                                   {std::nextafter(T(0.5), T(0)), T(0)}, {nan, nan}, {-inf, -inf}});
  } else if constexpr (dx::is_int_v<T> && !std::is_same_v<T, std::uint8_t>) {
    check_unary_against_scalar<ops::rint_op>(v);
    std::vector<unary_case<T, double>> cases;
    for (const T x : v) cases.push_back({x, static_cast<double>(x)});
    expect_unary<ops::rint_op, T>(cases);
  }
}

// ---------------------------------------------------------------------------------------
// Comparisons, logical ops, predicates
// ---------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("comparisons: all six, every dtype, NaN compares unequal", T, ALL_DTYPES) {
  const auto v = interesting<T>();
  check_binary_against_scalar<ops::equal_op>(v, v);
  check_binary_against_scalar<ops::not_equal_op>(v, v);
  check_binary_against_scalar<ops::less_op>(v, v);
  check_binary_against_scalar<ops::less_equal_op>(v, v);
  check_binary_against_scalar<ops::greater_op>(v, v);
  check_binary_against_scalar<ops::greater_equal_op>(v, v);
  if constexpr (dx::is_float_v<T>) {
    const T nan = nan_v<T>;
    expect_binary<ops::equal_op, T>({{nan, nan, false}, {nan, T(1), false}, {T(0), T(-0.0), true}});
    expect_binary<ops::not_equal_op, T>({{nan, nan, true}, {T(1), nan, true}, {T(0), T(-0.0), false}});
    expect_binary<ops::less_op, T>({{nan, T(1), false}, {T(1), nan, false}, {-inf_v<T>, T(0), true}});
    expect_binary<ops::less_equal_op, T>({{nan, nan, false}, {T(-0.0), T(0), true}});
    expect_binary<ops::greater_op, T>({{nan, T(1), false}, {inf_v<T>, max_v<T>, true}});
    expect_binary<ops::greater_equal_op, T>({{T(1), nan, false}, {T(0), T(-0.0), true}});
  }
  if constexpr (std::is_same_v<T, bool>) {
    expect_binary<ops::less_op, T>({{false, true, true}, {true, false, false}, {true, true, false}});
    expect_binary<ops::greater_equal_op, T>({{true, false, true}, {false, true, false}});
  }
}

TEST_CASE_TEMPLATE("logical_and/or/xor/not: truth values of every dtype (NaN is true)", T, ALL_DTYPES) {
  const auto v = interesting<T>();
  check_binary_against_scalar<ops::logical_and_op>(v, v);
  check_binary_against_scalar<ops::logical_or_op>(v, v);
  check_binary_against_scalar<ops::logical_xor_op>(v, v);
  check_unary_against_scalar<ops::logical_not_op>(v);
  if constexpr (dx::is_float_v<T>) {
    const T nan = nan_v<T>;
    expect_binary<ops::logical_and_op, T>({{nan, T(1), true}, {T(-0.0), T(1), false}, {T(0.5), T(2), true}});
    expect_binary<ops::logical_or_op, T>({{T(-0.0), T(0), false}, {nan, T(0), true}});
    expect_binary<ops::logical_xor_op, T>({{nan, T(0), true}, {nan, nan, false}});
    expect_unary<ops::logical_not_op, T>({{T(-0.0), true}, {nan, false}, {T(1e-30), false}});
  }
}

TEST_CASE_TEMPLATE("isnan, isinf, isfinite: integers are finite", T, ALL_DTYPES) {
  const auto v = interesting<T>();
  check_unary_against_scalar<ops::isnan_op>(v);
  check_unary_against_scalar<ops::isinf_op>(v);
  check_unary_against_scalar<ops::isfinite_op>(v);
  if constexpr (dx::is_float_v<T>) {
    expect_unary<ops::isnan_op, T>({{nan_v<T>, true}, {inf_v<T>, false}, {T(0), false}});
    expect_unary<ops::isinf_op, T>({{nan_v<T>, false}, {-inf_v<T>, true}, {max_v<T>, false}});
    expect_unary<ops::isfinite_op, T>({{nan_v<T>, false}, {inf_v<T>, false}, {max_v<T>, true}});
  } else {
    std::vector<unary_case<T, bool>> f, t;
    for (const T x : v) f.push_back({x, false}), t.push_back({x, true});
    expect_unary<ops::isnan_op, T>(f);
    expect_unary<ops::isinf_op, T>(f);
    expect_unary<ops::isfinite_op, T>(t);
  }
}

// ---------------------------------------------------------------------------------------
// Bitwise ops and shifts
// ---------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("bitwise and/or/xor/invert, bools included", T, BITWISE_DTYPES) {
  const auto v = interesting<T>();
  check_binary_against_scalar<ops::bitwise_and_op>(v, v);
  check_binary_against_scalar<ops::bitwise_or_op>(v, v);
  check_binary_against_scalar<ops::bitwise_xor_op>(v, v);
  check_unary_against_scalar<ops::invert_op>(v);
  if constexpr (std::is_same_v<T, bool>) {
    expect_unary<ops::invert_op, T>({{true, false}, {false, true}});
    expect_binary<ops::bitwise_xor_op, T>({{true, true, false}, {true, false, true}, {false, false, false}});
    expect_binary<ops::bitwise_and_op, T>({{true, true, true}, {true, false, false}});
    expect_binary<ops::bitwise_or_op, T>({{false, false, false}, {true, false, true}});
  } else if constexpr (std::is_same_v<T, std::uint8_t>) {
    expect_unary<ops::invert_op, T>({{0, 255}, {255, 0}, {15, 240}});
    expect_binary<ops::bitwise_xor_op, T>({{255, 15, 240}});
  } else {
    expect_unary<ops::invert_op, T>({{0, -1}, {-1, 0}, {5, -6}, {std::numeric_limits<T>::min(), std::numeric_limits<T>::max()}});
    expect_binary<ops::bitwise_and_op, T>({{-1, 12345, 12345}, {-8, 7, 0}});
  }
}

TEST_CASE_TEMPLATE("left_shift, right_shift: counts outside [0, width) give 0 or -1", T, INT_DTYPES) {
  const auto v = interesting<T>();
  check_binary_against_scalar<ops::left_shift_op>(v, v);
  check_binary_against_scalar<ops::right_shift_op>(v, v);
  using L = std::numeric_limits<T>;
  if constexpr (std::is_same_v<T, std::uint8_t>) {
    expect_binary<ops::left_shift_op, T>({{200, 1, 144}, {1, 7, 128}, {1, 8, 0}, {255, 255, 0}});
    expect_binary<ops::right_shift_op, T>({{255, 8, 0}, {255, 7, 1}, {128, 200, 0}});
  } else {
    constexpr T bits = sizeof(T) * 8;
    expect_binary<ops::left_shift_op, T>({{1, bits - 1, L::min()}, {1, bits, 0}, {1, -1, 0}, {-1, 3, -8},
                                          {5, bits + 1, 0}, {-1, L::max(), 0}, {3, L::min(), 0}});
    expect_binary<ops::right_shift_op, T>({{-8, 1, -4}, {-8, bits, -1}, {8, bits, 0}, {-1, -1, -1},
                                           {8, -1, 0}, {L::min(), bits - 1, -1}, {L::max(), bits - 2, 1},
                                           {-7, L::max(), -1}, {-7, L::min(), -1}});
  }
}

// ---------------------------------------------------------------------------------------
// floor_divide, remainder, power
// ---------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("floor_divide and remainder: NumPy's signs, zero divisors", T, ARITH_DTYPES) {
  const auto v = interesting<T>();
  check_binary_against_scalar<ops::floor_divide_op>(v, v);
  check_binary_against_scalar<ops::mod_op>(v, v);
  using L = std::numeric_limits<T>;
  if constexpr (std::is_same_v<T, std::uint8_t>) {
    expect_binary<ops::floor_divide_op, T>({{7, 2, 3}, {7, 0, 0}, {255, 16, 15}, {0, 0, 0}});
    expect_binary<ops::mod_op, T>({{7, 2, 1}, {7, 0, 0}, {255, 16, 15}});
  } else if constexpr (dx::is_int_v<T>) {
    expect_binary<ops::floor_divide_op, T>({{7, 2, 3}, {-7, 2, -4}, {7, -2, -4}, {-7, -2, 3}, {7, 0, 0},
                                            {-7, 0, 0}, {0, 0, 0}, {L::min(), -1, L::min()}, {L::min(), 1, L::min()},
                                            {-1, 3, -1}, {L::max(), -1, L::min() + 1}});
    expect_binary<ops::mod_op, T>({{7, 2, 1}, {-7, 2, 1}, {7, -2, -1}, {-7, -2, -1}, {7, 0, 0},
                                   {L::min(), -1, 0}, {-1, 3, 2}, {L::min(), L::max(), L::max() - 1}});
  } else {
    const T nan = nan_v<T>, inf = inf_v<T>;
    expect_binary<ops::floor_divide_op, T>({{T(1), T(0), inf}, {T(-1), T(0), -inf}, {T(0), T(0), nan},
                                            {T(-7), T(2), T(-4)}, {T(7), T(-2), T(-4)}, {T(7), T(2), T(3)},
                                            {inf, T(1), nan}, {T(5), inf, T(0)}, {T(-0.0), T(3), T(-0.0)},
                                            {T(0), T(-3), T(-0.0)}, {nan, T(1), nan}, {T(1), T(-0.0), -inf}});
    expect_binary<ops::mod_op, T>({{T(1), T(0), nan}, {T(-7), T(2), T(1)}, {T(7), T(-2), T(-1)},
                                   {T(7), T(2), T(1)}, {inf, T(1), nan}, {T(-0.0), T(2), T(0)},
                                   {T(0), T(-2), T(-0.0)}, {T(5), inf, T(5)}, {T(-5), inf, inf},
                                   {T(5), -inf, -inf}, {T(-5.5), T(2), T(0.5)}});
  }
}

TEST_CASE_TEMPLATE("power of integers: exact, wraps, negative exponents throw", T, INT_DTYPES) {
  const auto v = interesting<T>();
  std::vector<T> a, b;
  for (const T x : v)
    for (const T y : v)
      if (y >= 0 || x == T(1) || (std::is_signed_v<T> && x == static_cast<T>(-1))) a.push_back(x), b.push_back(y);
  check_pairs_against_scalar<ops::pow_op>(a, b);
  using L = std::numeric_limits<T>;
  if constexpr (std::is_same_v<T, std::uint8_t>) {
    expect_binary<ops::pow_op, T>({{2, 8, 0}, {2, 7, 128}, {3, 5, 243}, {0, 0, 1}, {255, 2, 1}, {7, 0, 1}});
  } else {
    constexpr T bits = sizeof(T) * 8;
    expect_binary<ops::pow_op, T>({{2, bits - 1, L::min()}, {2, bits, 0}, {-2, 3, -8}, {0, 0, 1},
                                   {1, -5, 1}, {-1, -5, -1}, {-1, -4, 1}, {-1, L::min(), 1}, {1, L::min(), 1},
                                   {-1, L::max(), -1}, {10, 2, 100}, {0, 5, 0}});
    if constexpr (sizeof(T) == 8)
      expect_binary<ops::pow_op, T>({{3, 40, -6289078614652622815}, {-2, 63, L::min()}});
    else
      expect_binary<ops::pow_op, T>({{3, 40, 689956897}});

    // A negative exponent with any other base is NumPy's ValueError.
    const dx::Tensor<T> base = make_tensor<T>({2, 3, 1});
    const dx::Tensor<T> neg = make_tensor<T>({3, -1, -2});
    CHECK_THROWS_AS(dx::eval(dx::power(base, neg)), dx::value_error);
    CHECK_THROWS_AS(dx::eval(dx::power(base, T(-1))), dx::value_error);
    const dx::Tensor<T> zero = make_tensor<T>({0});
    CHECK_THROWS_AS(dx::eval(dx::power(zero, T(-1))), dx::value_error);
    // Also when the error is raised in a worker thread of a large evaluation.
    dx::Tensor<T> big(Shape{1 << 18}, T(2));
    dx::Tensor<T> exps(Shape{1 << 18}, T(3));
    exps.data()[(1 << 18) - 5] = T(-1);
    CHECK_THROWS_AS(dx::eval(dx::power(big, exps)), dx::value_error);
    exps.data()[(1 << 18) - 5] = T(3);
    CHECK(dx::eval(dx::power(big, exps)).at((1 << 18) - 5) == T(8));
  }
}

// ---------------------------------------------------------------------------------------
// Mixed dtypes
// ---------------------------------------------------------------------------------------

// Operand conversions are covered pair by pair by the cast test below and each op body by
// the same-dtype tests; these pairs check that the two meet at NumPy's promoted type. (Every
// pair would cost a few minutes of compile time: one evaluation loop per pair and op.)
using mixed_pairs = hana::tuple<hana::tuple<hana::type<bool>, hana::type<std::int32_t>>,
                                hana::tuple<hana::type<std::uint8_t>, hana::type<std::int32_t>>,
                                hana::tuple<hana::type<std::uint8_t>, hana::type<float>>,
                                hana::tuple<hana::type<std::int32_t>, hana::type<float>>,
                                hana::tuple<hana::type<std::int32_t>, hana::type<std::int64_t>>,
                                hana::tuple<hana::type<std::int64_t>, hana::type<double>>,
                                hana::tuple<hana::type<float>, hana::type<double>>,
                                hana::tuple<hana::type<bool>, hana::type<float>>>;

TEST_CASE("mixed dtypes: add, less, true_divide, floor_divide against the scalar body") {
  hana::for_each(mixed_pairs{}, [](auto pair) {
    using A = typename decltype(+hana::at_c<0>(pair))::type;
    using B = typename decltype(+hana::at_c<1>(pair))::type;
    const auto va = interesting<A>();
    const auto vb = interesting<B>();
    check_binary_against_scalar<ops::add_op>(va, vb);
    check_binary_against_scalar<ops::floor_divide_op>(vb, va);
    check_binary_against_scalar<ops::less_op>(va, vb);
    check_binary_against_scalar<ops::div_op>(vb, va);
  });
}

TEST_CASE("mixed dtypes: values follow the promoted dtype") {
  // int64 2^53 + 1 compares at float64, where it is 2^53 (NumPy: equal is True).
  const dx::Tensor<std::int64_t> big = make_tensor<std::int64_t>({(std::int64_t{1} << 53) + 1});
  const dx::Tensor<double> p53 = make_tensor<double>({9007199254740992.0});
  CHECK(dx::eval(dx::equal(big, p53)).at(0));
  CHECK_FALSE(dx::eval(dx::less(p53, big)).at(0));
  // uint8 with int32 computes at int32: no uint8 wrap-around.
  const dx::Tensor<std::uint8_t> u = make_tensor<std::uint8_t>({250, 0});
  const dx::Tensor<std::int32_t> i = make_tensor<std::int32_t>({10, -1});
  const auto s = dx::eval(dx::add(u, i));
  static_assert(std::is_same_v<value_t<decltype(s)>, std::int32_t>);
  CHECK(s.at(0) == 260);
  CHECK(s.at(1) == -1);
  // bool with float32 gives float32.
  const dx::Tensor<bool> t = make_tensor<bool>({true, false});
  const dx::Tensor<float> f = make_tensor<float>({0.5f, 0.25f});
  const auto bf = dx::eval(t + f);
  static_assert(std::is_same_v<value_t<decltype(bf)>, float>);
  CHECK(bf.at(0) == 1.5f);
  CHECK(bf.at(1) == 0.25f);
}

// ---------------------------------------------------------------------------------------
// where and cast
// ---------------------------------------------------------------------------------------

/// where(c, a, b) over values of each dtype, contiguous and reversed, against c ? a : b at
/// the promoted dtype.
template <class C, class A, class B>
void check_where() {
  using R = dx::promote_t<A, B>;
  const auto vc = interesting<C>();
  const auto va = interesting<A>();
  const auto vb = interesting<B>();
  const std::size_t n = 3 * std::max({vc.size(), va.size(), vb.size()}) + 1;
  std::vector<C> c(n);
  std::vector<A> a(n);
  std::vector<B> b(n);
  for (std::size_t k = 0; k < n; ++k)
    c[k] = vc[k % vc.size()], a[k] = va[(k * 7) % va.size()], b[k] = vb[(k * 5 + 1) % vb.size()];
  const dx::Tensor<C> tc = make_tensor(c);
  const dx::Tensor<A> ta = make_tensor(a);
  const dx::Tensor<B> tb = make_tensor(b);
  const auto got = dx::eval(dx::where(tc, ta, tb));
  static_assert(std::is_same_v<value_t<decltype(got)>, R>);
  const auto rev = dx::eval(dx::where(reversed(tc), reversed(ta), reversed(tb)));
  mismatches bad;
  for (std::size_t k = 0; k < n; ++k) {
    const C ck = c[k];
    const A ak = a[k];
    const B bk = b[k];
    const R want = ck != C(0) ? static_cast<R>(ak) : static_cast<R>(bk);
    if (!same(got.data()[k], want) || !same(rev.data()[n - 1 - k], want))
      bad.add("where(" + show(ck) + ", " + show(ak) + ", " + show(bk) + ") = " + show(got.data()[k]) +
              " / reversed " + show(rev.data()[n - 1 - k]) + ", expected " + show(want));
  }
  check_none(bad, "where(" + dtype_str<C>() + ", " + dtype_str<A>() + ", " + dtype_str<B>() + ")");
}

// The condition is read as a mask of the result's lane type: every (condition, result)
// dtype pair, then branches of two dtypes (their conversions are the cast test's).
TEST_CASE_TEMPLATE("where: every dtype of condition with every result dtype", C, ALL_DTYPES) {
  hana::for_each(kAllDtypes, [](auto r) {
    using R = typename decltype(r)::type;
    check_where<C, R, R>();
  });
}

TEST_CASE("where: branches of different dtypes promote") {
  hana::for_each(mixed_pairs{}, [](auto pair) {
    using A = typename decltype(+hana::at_c<0>(pair))::type;
    using B = typename decltype(+hana::at_c<1>(pair))::type;
    check_where<bool, A, B>();
    check_where<float, B, A>();
  });
}

TEST_CASE("where: weak scalar branches and a scalar condition") {
  const dx::Tensor<float> x = make_tensor<float>({-1.5f, 2.0f, nan_v<float>});
  const auto r = dx::eval(dx::where(x > 0.0f, x, 0.0));  // 0.0 is weak: stays float32
  static_assert(std::is_same_v<value_t<decltype(r)>, float>);
  CHECK(r.at(0) == 0.0f);
  CHECK(r.at(1) == 2.0f);
  CHECK(r.at(2) == 0.0f);
  const dx::Tensor<std::int32_t> i = make_tensor<std::int32_t>({1, 2});
  const auto w = dx::eval(dx::where(i > 1, i, 2.5));  // an int32 array with a float: float64
  static_assert(std::is_same_v<value_t<decltype(w)>, double>);
  CHECK(w.at(0) == 2.5);
  CHECK(w.at(1) == 2.0);
}

/// np.ndarray.astype(To) for one value; false where NumPy's result is not defined
/// (float to integer out of range, NaN or inf).
template <class To, class From>
bool astype(From v, To& out) {
  if constexpr (std::is_same_v<To, bool>) {
    out = v != From(0);  // NaN is true, -0.0 is false
  } else if constexpr (std::is_same_v<From, bool>) {
    out = v ? To(1) : To(0);
  } else if constexpr (dx::is_float_v<From> && !dx::is_float_v<To>) {
    if (!std::isfinite(v)) return false;
    const LD t = std::trunc(static_cast<LD>(v));
    if (t < static_cast<LD>(std::numeric_limits<To>::min()) || t > static_cast<LD>(std::numeric_limits<To>::max()))
      return false;
    out = static_cast<To>(t);
  } else {
    out = static_cast<To>(v);  // int -> int wraps (C++20), -> float rounds to nearest
  }
  return true;
}

TEST_CASE_TEMPLATE("cast<To>: astype between every pair of dtypes", From, ALL_DTYPES) {
  hana::for_each(kAllDtypes, [](auto to) {
    using To = typename decltype(to)::type;
    std::vector<From> x;
    std::vector<To> want;
    auto extra = interesting<From>();
    if constexpr (dx::is_float_v<From>)
      for (const From v : {From(2.7), From(-2.7), From(255.9), From(-0.9), From(1e10), From(16777217.0), From(127.5)})
        extra.push_back(v);
    for (int rep = 0; rep < 3; ++rep)
      for (const From v : extra) {
        To w{};
        if (astype(v, w)) x.push_back(v), want.push_back(w);
      }
    const dx::Tensor<From> t = make_tensor(x);
    const auto got = dx::eval(dx::cast<To>(t));
    static_assert(std::is_same_v<value_t<decltype(got)>, To>);
    const auto rev = dx::eval(dx::cast<To>(reversed(t)));
    mismatches bad;
    const std::size_t n = x.size();
    for (std::size_t k = 0; k < n; ++k) {
      const From xk = x[k];
      const To wk = want[k];
      if (!same(got.data()[k], wk) || !same(rev.data()[n - 1 - k], wk))
        bad.add("astype<" + dtype_str<To>() + ">(" + show(xk) + ") = " + show(got.data()[k]) +
                " / reversed " + show(rev.data()[n - 1 - k]) + ", expected " + show(wk));
    }
    check_none(bad, "cast<" + dtype_str<To>() + ">(" + dtype_str<From>() + ")");
  });
}

TEST_CASE("cast<To>: hand-written astype values (NumPy 2.4)") {
  const dx::Tensor<double> d = make_tensor<double>({2.7, -2.7, -0.5, 255.9, 0.1, -0.0, nan_v<double>, 1e300, 1 + 0x1p-30});
  const auto di = dx::eval(dx::cast<std::int32_t>(d.slice(dx::slice(0, 5))));
  CHECK(di.at(0) == 2);
  CHECK(di.at(1) == -2);
  CHECK(di.at(2) == 0);
  CHECK(di.at(3) == 255);
  const auto du = dx::eval(dx::cast<std::uint8_t>(d.slice(dx::slice(2, 4))));
  CHECK(du.at(0) == 0);
  CHECK(du.at(1) == 255);
  const auto db = dx::eval(dx::cast<bool>(d));
  CHECK(db.at(4));        // 0.1
  CHECK_FALSE(db.at(5));  // -0.0
  CHECK(db.at(6));        // NaN
  const auto df = dx::eval(dx::cast<float>(d));
  CHECK(df.at(7) == inf_v<float>);
  CHECK(df.at(8) == 1.0f);

  const dx::Tensor<std::int32_t> i = make_tensor<std::int32_t>({300, -1, 256, 16777217, 255});
  const auto iu = dx::eval(dx::cast<std::uint8_t>(i));
  CHECK(iu.at(0) == 44);
  CHECK(iu.at(1) == 255);
  CHECK(iu.at(2) == 0);
  CHECK(iu.at(4) == 255);
  CHECK(dx::eval(dx::cast<float>(i)).at(3) == 16777216.0f);

  const dx::Tensor<std::int64_t> l = make_tensor<std::int64_t>(
      {std::int64_t{1} << 31, -(std::int64_t{1} << 31) - 1, (std::int64_t{1} << 32) + 5, -1,
       (std::int64_t{1} << 53) + 1, (std::int64_t{1} << 53) + 3, std::numeric_limits<std::int64_t>::max()});
  const auto li = dx::eval(dx::cast<std::int32_t>(l));
  CHECK(li.at(0) == std::numeric_limits<std::int32_t>::min());
  CHECK(li.at(1) == std::numeric_limits<std::int32_t>::max());
  CHECK(li.at(2) == 5);
  CHECK(li.at(3) == -1);
  CHECK(dx::eval(dx::cast<std::uint8_t>(l)).at(3) == 255);
  const auto ld = dx::eval(dx::cast<double>(l));
  CHECK(ld.at(4) == 9007199254740992.0);  // ties to even
  CHECK(ld.at(5) == 9007199254740996.0);
  CHECK(ld.at(6) == 9223372036854775808.0);

  const dx::Tensor<bool> b = make_tensor<bool>({true, false});
  CHECK(dx::eval(dx::cast<double>(b)).at(0) == 1.0);
  CHECK(dx::eval(dx::cast<std::int64_t>(b)).at(1) == 0);
  const dx::Tensor<std::uint8_t> u = make_tensor<std::uint8_t>({255, 0});
  CHECK(dx::eval(dx::cast<std::int32_t>(u)).at(0) == 255);
  CHECK(dx::eval(dx::cast<float>(u)).at(0) == 255.0f);
}

// ---------------------------------------------------------------------------------------
// Weak scalars (NEP 50) and strong scalars
// ---------------------------------------------------------------------------------------

TEST_CASE("NEP 50: C++ scalars are weak, dx::scalar<T> is strong") {
  const dx::Tensor<float> f = make_tensor<float>({1.5f, -2.0f, 3.0f});
  const dx::Tensor<std::int32_t> i = make_tensor<std::int32_t>({1, -2, std::numeric_limits<std::int32_t>::max()});
  const dx::Tensor<bool> b = make_tensor<bool>({true, false});
  const dx::Tensor<std::uint8_t> u = make_tensor<std::uint8_t>({250, 255});
  const dx::Tensor<std::int64_t> l = make_tensor<std::int64_t>({1, 2});

  const auto f2 = dx::eval(f * 2.0);
  static_assert(std::is_same_v<value_t<decltype(f2)>, float>);
  CHECK(f2.at(0) == 3.0f);
  static_assert(std::is_same_v<value_t<decltype(2.0 * f)>, float>);
  static_assert(std::is_same_v<value_t<decltype(f + 1)>, float>);

  const auto i25 = dx::eval(i * 2.5);
  static_assert(std::is_same_v<value_t<decltype(i25)>, double>);
  CHECK(i25.at(1) == -5.0);
  CHECK(i25.at(2) == 2.5 * 2147483647.0);

  const auto b1 = dx::eval(b + 1);
  static_assert(std::is_same_v<value_t<decltype(b1)>, std::int64_t>);
  CHECK(b1.at(0) == 2);
  CHECK(b1.at(1) == 1);
  static_assert(std::is_same_v<value_t<decltype(b * 2.5)>, double>);
  static_assert(std::is_same_v<value_t<decltype(i + true)>, std::int32_t>);

  const auto u1 = dx::eval(u + 1);
  static_assert(std::is_same_v<value_t<decltype(u1)>, std::uint8_t>);
  CHECK(u1.at(0) == 251);
  CHECK(u1.at(1) == 0);  // uint8 arithmetic wraps
  CHECK(dx::eval(u + 10).at(0) == 4);
  static_assert(std::is_same_v<value_t<decltype(u * 2.5)>, double>);

  // A Python int out of the array's range is NumPy 2's OverflowError.
  CHECK_THROWS_AS((void)(u + 300), dx::value_error);
  CHECK_THROWS_AS((void)(u + (-1)), dx::value_error);
  CHECK_THROWS_AS((void)(i + (std::int64_t{1} << 40)), dx::value_error);
  CHECK_NOTHROW((void)(l + (std::int64_t{1} << 40)));
  CHECK_NOTHROW((void)(u + 255));

  const auto il = dx::eval(i + dx::scalar<std::int64_t>(1));
  static_assert(std::is_same_v<value_t<decltype(il)>, std::int64_t>);
  CHECK(il.at(2) == std::int64_t{2147483648});  // no int32 wrap-around
  const auto fd = dx::eval(f * dx::scalar<double>(2));
  static_assert(std::is_same_v<value_t<decltype(fd)>, double>);
  CHECK(fd.at(0) == 3.0);
  static_assert(std::is_same_v<value_t<decltype(u + dx::scalar<std::int32_t>(300))>, std::int32_t>);
  CHECK(dx::eval(u + dx::scalar<std::int32_t>(300)).at(0) == 550);
}

// ---------------------------------------------------------------------------------------
// fma contraction (Note [fma contraction] in eval/rewrite.hpp)
// ---------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("fma contraction: a*b+c over floats is one rounding", T, float, double) {
  constexpr index_t n = 1001;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> dist(0.5, 2.0);
  dx::Tensor<T> x(Shape{n}), y(Shape{n}), z(Shape{n});
  for (index_t k = 0; k < n; ++k)
    x.data()[k] = static_cast<T>(dist(rng)), y.data()[k] = static_cast<T>(dist(rng)), z.data()[k] = static_cast<T>(dist(rng));

  CHECK(dx::describe(x * y + z) == "add(mul(x, y), z)");
  CHECK(dx::describe_lowered(x * y + z) == "fma(x, y, z)");
  CHECK(dx::describe_lowered(z + x * y) == "fma(x, y, z)");  // leaves named in lowered order
  CHECK(dx::describe_lowered(x * y - z) == "fms(x, y, z)");
  CHECK(dx::describe_lowered(z - x * y) == "fnma(x, y, z)");
  CHECK(dx::describe_lowered(x * 2 + y) == "fma(x, 2, y)");
  CHECK(dx::describe_lowered(x + y) == "add(x, y)");

  const auto got = dx::eval(x * y + z);
  const auto got_sub = dx::eval(x * y - z);
  mismatches bad;
  for (index_t k = 0; k < n; ++k) {
    const T a = x.data()[k], b = y.data()[k], c = z.data()[k];
    volatile T product = a * b;  // volatile: the reference itself must not be contracted
    const T two_roundings = product + c;
    if (got.data()[k] != std::fma(a, b, c) || ulp_steps(got.data()[k], two_roundings) > 1 ||
        got_sub.data()[k] != std::fma(a, b, -c))
      bad.add("fma(" + show(a) + ", " + show(b) + ", " + show(c) + ") = " + show(got.data()[k]) +
              ", std::fma " + show(std::fma(a, b, c)) + ", two roundings " + show(two_roundings));
  }
  check_none(bad, "x * y + z (" + dtype_str<T>() + ") vs std::fma");

  // Contracted only when the product already has the sum's compute type.
  const dx::Tensor<double> zd = make_tensor<double>(std::vector<double>(n, 0.25));
  if constexpr (std::is_same_v<T, float>) {
    CHECK(dx::describe_lowered(x * y + zd) == "add(mul(x, y), z)");
    const dx::Tensor<std::int32_t> yi(Shape{n}, 3);
    // float32 * int32 is float64 already: contracted, at float64.
    CHECK(dx::describe_lowered(x * yi + z) == "fma(x, y, z)");
    const auto m = dx::eval(x * yi + z);
    static_assert(std::is_same_v<value_t<decltype(m)>, double>);
    CHECK(m.at(3) == std::fma(static_cast<double>(x.at(3)), 3.0, static_cast<double>(z.at(3))));
  } else {
    CHECK(dx::describe_lowered(x * y + zd) == "fma(x, y, z)");
  }
}

TEST_CASE_TEMPLATE("fma contraction: not for integers (exact wrap-around)", T, std::int32_t, std::int64_t) {
  const dx::Tensor<T> x = make_tensor<T>({std::numeric_limits<T>::max(), 3, -4});
  const dx::Tensor<T> y = make_tensor<T>({2, 5, 6});
  const dx::Tensor<T> z = make_tensor<T>({3, 1, 24});
  CHECK(dx::describe_lowered(x * y + z) == "add(mul(x, y), z)");
  CHECK(dx::describe_lowered(x * y - z) == "sub(mul(x, y), z)");
  const auto r = dx::eval(x * y + z);
  CHECK(r.at(0) == 1);  // max * 2 = -2, + 3
  CHECK(r.at(1) == 16);
  CHECK(r.at(2) == 0);
}

// ---------------------------------------------------------------------------------------
// Bools inside mixed expressions
// ---------------------------------------------------------------------------------------

// A bool node feeding an op of another compute type is read as a mask of that type
// (eval/evaluator.hpp): the bool bodies of abs and floor/ceil/trunc must accept masks of
// any lane type, not only of uint8.
TEST_CASE("absolute, floor, ceil, trunc of bool inside mixed expressions") {
  const dx::Tensor<bool> b = make_tensor<bool>({true, false, true, true, false, true, false, false, true, true, false});
  const dx::Tensor<std::int32_t> i(Shape{11}, 10);
  const dx::Tensor<float> f(Shape{11}, 0.5f);
  const auto r1 = dx::eval(dx::abs(b) + i);
  const auto r2 = dx::eval(dx::where(dx::abs(b), f, 2.0f));
  const auto r3 = dx::eval(dx::where(dx::floor(b), f, 2.0f));
  const auto r4 = dx::eval(dx::ceil(b) * f);
  const auto r5 = dx::eval(dx::trunc(b) + dx::cast<double>(i));
  for (index_t k = 0; k < 11; ++k) {
    const bool v = b.at(k);
    CHECK(r1.at(k) == (v ? 11 : 10));
    CHECK(r2.at(k) == (v ? 0.5f : 2.0f));
    CHECK(r3.at(k) == (v ? 0.5f : 2.0f));
    CHECK(r4.at(k) == (v ? 0.5f : 0.0f));
    CHECK(r5.at(k) == (v ? 11.0 : 10.0));
  }
}

// ---------------------------------------------------------------------------------------
// The registry
// ---------------------------------------------------------------------------------------

TEST_CASE("registry: op names are NumPy's and unique; float_unary_ops all have references") {
  const auto names = ops::op_names();
  CHECK(names.size() == static_cast<std::size_t>(hana::length(ops::all_ops)));
  for (std::size_t i = 0; i < names.size(); ++i)
    for (std::size_t j = i + 1; j < names.size(); ++j) CHECK_MESSAGE(names[i] != names[j], std::string(names[i]));
  hana::for_each(ops::float_unary_ops, [](auto op) {
    using Op = typename decltype(op)::type;
    LD out = 0;
    CHECK_MESSAGE(exact_unary(Op::name, 0.5L, out), std::string(Op::name));
    CHECK(Op::arity == 1);
    CHECK(Op::acc.lo < Op::acc.hi);
  });
}

}  // namespace
