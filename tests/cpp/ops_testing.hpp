// tests/cpp/ops_testing.hpp — helpers shared by the op-table tests (test_ops_*.cpp):
// references, ulp measure, layouts and the check loops. See test_ops_math.cpp for the notes.
#pragma once

#include <doctest/doctest.h>

#include "dynexpr/dynexpr.hpp"
#include "ops_references.hpp"  // exact_unary, c_unary, exact_binary, c_binary (generated)

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

namespace ops_testing {


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

inline void check_none(const mismatches& m, const std::string& what) {
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
}  // namespace ops_testing
