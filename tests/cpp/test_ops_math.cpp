// Tests of the op table (ops/op_table.hpp and ops/registry.hpp, generated from
// ops/manifest.py) through the real evaluation path: every value checked here comes out
// of dx::eval of an expression, so the SIMD bodies, the operand conversions of
// eval/evaluator.hpp and the unit, strided and tail loops of eval/assign.hpp all take part.
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

#include "ops_testing.hpp"

namespace {
using namespace ops_testing;

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


}  // namespace
