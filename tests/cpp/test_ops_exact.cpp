// Op-table tests, exact ops: arithmetic, rounding, comparisons, logic, bitwise, shifts,
// integer division and powers, each against its scalar body and NumPy 2.4 values.
// Shared helpers and notes: ops_testing.hpp, test_ops_math.cpp.

#include <random>

#include "ops_testing.hpp"

namespace {
using namespace ops_testing;

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

// The packed path of Note [integer division through double]: whole packets of in-range
// lanes (which the all-pairs test above rarely makes), its range edges, and packets mixing
// in-range lanes with zero divisors, MIN // -1 and int64 lanes past 2^52.
TEST_CASE_TEMPLATE("floor_divide and remainder of integers: packed path against the scalar body", T, INT_DTYPES) {
  std::mt19937_64 rng(20261206);
  std::vector<T> a, b;
  using L = std::numeric_limits<T>;
  const auto push = [&](long double x, long double y) {
    if (x < (long double)L::min() || x > (long double)L::max()) return;
    a.push_back(static_cast<T>(x));
    b.push_back(static_cast<T>(y));
  };
  // Magnitudes from 1 to the type's (or 2^52's) top, both signs, both operands.
  const int top = std::is_same_v<T, std::int64_t> ? 53 : (std::is_same_v<T, std::uint8_t> ? 8 : 31);
  for (int k = 0; k < 20000; ++k) {
    const int ea = int(rng() % top), eb = int(rng() % top);
    T x = static_cast<T>(rng() & ((std::uint64_t(1) << ea) | ((std::uint64_t(1) << ea) - 1)));
    T y = static_cast<T>(rng() & ((std::uint64_t(1) << eb) | ((std::uint64_t(1) << eb) - 1)));
    if constexpr (std::is_signed_v<T>) {
      if (rng() & 1) x = static_cast<T>(-x);
      if (rng() & 1) y = static_cast<T>(-y);
    }
    if (y == 0) y = 1;
    push(x, y);
  }
  // Exact multiples and their neighbours, where a rounded quotient would show.
  for (int k = 0; k < 4000; ++k) {
    const T y = static_cast<T>(std::is_signed_v<T> ? T(int(rng() % 2001) - 1000) : T(1 + rng() % 200));
    if (y == 0) continue;
    const long double qmax = std::is_same_v<T, std::int64_t> ? 4.0e15L / (y < 0 ? -y : y) : (long double)L::max() / (y < 0 ? -y : y);
    const long double q = std::floor((long double)(rng() % 1000003) / 1000003.0L * qmax);
    for (int d = -1; d <= 1; ++d) push((std::is_signed_v<T> && (rng() & 1) ? -q : q) * y + d, y);
  }
  if constexpr (std::is_signed_v<T>) {
    // The packed path's limit (2^51 for int64) and lanes just past it.
    const T edge = std::is_same_v<T, std::int64_t> ? static_cast<T>((std::int64_t(1) << 51) - 1) : L::max();
    const bool wide = std::is_same_v<T, std::int64_t>;
    for (const T e : {edge, static_cast<T>(wide ? edge + 1 : edge - 1),
                      static_cast<T>(wide ? (std::int64_t(1) << 52) + 3 : edge - 2)})
      for (const T y : {T(1), T(-1), T(2), T(-3), T(7), e, static_cast<T>(-e), edge, static_cast<T>(-edge)})
        push(e, y), push(-e, y), push(static_cast<T>(e - 1), y), push(static_cast<T>(1 - e), y);
    // Lanes the packed path must hand to the scalar body, among in-range ones.
    push(L::min(), -1), push(7, 0), push(L::max(), 3), push(L::min(), 5), push(-5, L::min());
  } else {
    push(200, 0), push(255, 1);
  }
  check_pairs_against_scalar<ops::floor_divide_op>(a, b);
  check_pairs_against_scalar<ops::mod_op>(a, b);
}

// Note [division by a scalar]: every uint8 dividend by every uint8 divisor, and int32 and
// int64 dividends (both ends, 2^50, exact multiples and their neighbours, random) by
// divisors of every size and sign, through the prepared divisor, against the scalar body.
// Twice: alone (full vectors, and a tail) and beside an int64 operand (the loop's lanes set
// by int64, so the divided vectors are partial).
template <class T, class Op>
void check_by_scalar(const std::vector<T>& a, T b) {
  const index_t n = static_cast<index_t>(a.size());
  dx::Tensor<T> x(Shape{n});
  std::copy(a.begin(), a.end(), x.data());
  dx::Tensor<std::int64_t> zero(Shape{n});
  std::fill(zero.data(), zero.data() + n, std::int64_t{0});
  const dx::Tensor<T> alone = dx::eval(dx::apply<Op>(x, b));
  const dx::Tensor<std::int64_t> mixed = dx::eval(dx::apply<Op>(x, b) + zero);
  int bad = 0, first = -1;
  for (index_t i = 0; i < n; ++i) {
    const T want = Op::scalar(a[i], b);
    const bool wrong = alone.data()[i] != want || mixed.data()[i] != std::int64_t(want);
    if (wrong && first < 0) first = int(i);
    bad += wrong;
  }
  CHECK_MESSAGE(bad == 0, Op::name << " by " << +b << ": " << bad << " of " << n << " wrong, first "
                                   << +a[first < 0 ? 0 : first]);
}

TEST_CASE("floor_divide and remainder by a scalar: every uint8 pair") {
  std::vector<std::uint8_t> a;
  for (int rep = 0; rep < 3; ++rep)  // 768 elements: whole packets and a partial one
    for (int v = 0; v < 256; ++v) a.push_back(std::uint8_t(rep == 1 ? 255 - v : v));
  a.resize(a.size() - 5);
  for (int b = 0; b < 256; ++b) {
    check_by_scalar<std::uint8_t, ops::floor_divide_op>(a, std::uint8_t(b));
    check_by_scalar<std::uint8_t, ops::mod_op>(a, std::uint8_t(b));
  }
}

TEST_CASE_TEMPLATE("floor_divide and remainder by a scalar: int32, int64", T, std::int32_t, std::int64_t) {
  using L = std::numeric_limits<T>;
  constexpr bool wide = std::is_same_v<T, std::int64_t>;
  constexpr int bits = wide ? 63 : 31;
  const T p50 = wide ? T(std::int64_t(1) << 50) : L::max();  // int64's packed limit
  std::mt19937_64 rng(20261207);
  const auto draw = [&] {  // magnitudes of every bit length, both signs
    const int e = int(rng() % (bits + 1));
    const auto v = static_cast<T>(rng() & ((std::uint64_t(1) << e) - 1));
    return rng() & 1 ? v : static_cast<T>(-v);
  };
  std::vector<T> divisors = {1, -1, 2, -2, 3, -3, 7, -7, 10, -10, 255, 256, -256, 1000003, -65537,
                             L::max(), L::min(), T(L::min() + 1), T(L::max() - 1), 0, T(p50 - 1),
                             T(1 - p50), p50, T(-p50), T(p50 / 3), T(-(p50 / 3))};
  for (int k = 0; k < 40; ++k) divisors.push_back(draw());
  for (const T b : divisors) {
    std::vector<T> a = {0, 1, -1, L::max(), L::min(), T(L::max() - 1), T(L::min() + 1),
                        T(p50 - 1), T(1 - p50), p50, T(-p50)};
    for (int k = 0; k < 2000; ++k) a.push_back(draw());
    if (b != 0) {  // exact multiples of b and their neighbours, up to the packed limit
      const long double qmax = (long double)(wide ? p50 : L::max()) / std::fabs((long double)b);
      for (int k = 0; k < 1000; ++k) {
        const long double q = std::floor((long double)(rng() % 1000003) / 1000003.0L * qmax);
        for (int d = -1; d <= 1; ++d) {
          const long double v = (rng() & 1 ? -q : q) * (long double)b + d;
          if (v >= (long double)L::min() && v <= (long double)L::max()) a.push_back(static_cast<T>(v));
        }
      }
    }
    check_by_scalar<T, ops::floor_divide_op>(a, b);
    check_by_scalar<T, ops::mod_op>(a, b);
  }
}

// Ops that run their scalar body lane by lane (uint8 multiply, shifts) on the result of
// another op, in a loop whose lanes are set by a wider operand (an int64 scalar): the
// partial uint8 vectors went through detail::by_lane with GCC reordering the lane loop's
// loads before the vector's store (Note [a barrier between the stores and the lane loop]
// in simd/convert.hpp); every element was wrong at -O2 on AVX-512.
TEST_CASE("uint8 ops lane by lane on computed operands, beside an int64 scalar") {
  const index_t n = 100;
  dx::Tensor<std::uint8_t> a(Shape{n}), b(Shape{n});
  for (index_t i = 0; i < n; ++i) a.data()[i] = std::uint8_t(i * 7 % 256), b.data()[i] = 64;
  const auto expect = [&](const char* what, const dx::Tensor<std::uint8_t>& got, auto want) {
    int bad = 0;
    for (index_t i = 0; i < n; ++i) bad += got.data()[i] != std::uint8_t(want(int(a.data()[i])));
    CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << n << " elements wrong");
  };
  const std::int64_t two = 2, three = 3;
  expect("(a * 2) * 3", dx::eval((a * two) * three), [](int x) { return x * 6; });
  expect("maximum(a, b) * 3", dx::eval(dx::maximum(a, b) * three), [](int x) { return std::max(x, 64) * 3; });
  expect("(a // b) * 3", dx::eval(dx::floor_divide(a, b) * three), [](int x) { return x / 64 * 3; });
  expect("(a >> 6) * 3", dx::eval((a >> std::uint8_t{6}) * three), [](int x) { return (x >> 6) * 3; });
  expect("(a % b) * 3", dx::eval(dx::remainder(a, b) * three), [](int x) { return x % 64 * 3; });
}

TEST_CASE_TEMPLATE("power of integers: exact, wraps, negative exponents throw", T, INT_DTYPES) {
  const auto v = interesting<T>();
  std::vector<T> a, b;
  for (const T x : v)
    for (const T y : v)
      if (y >= 0) a.push_back(x), b.push_back(y);
  check_pairs_against_scalar<ops::pow_op>(a, b);
  using L = std::numeric_limits<T>;
  if constexpr (std::is_same_v<T, std::uint8_t>) {
    expect_binary<ops::pow_op, T>({{2, 8, 0}, {2, 7, 128}, {3, 5, 243}, {0, 0, 1}, {255, 2, 1}, {7, 0, 1}});
  } else {
    constexpr T bits = sizeof(T) * 8;
    expect_binary<ops::pow_op, T>({{2, bits - 1, L::min()}, {2, bits, 0}, {-2, 3, -8}, {0, 0, 1},
                                   {-1, L::max(), -1}, {10, 2, 100}, {0, 5, 0}});
    if constexpr (sizeof(T) == 8)
      expect_binary<ops::pow_op, T>({{3, 40, -6289078614652622815}, {-2, 63, L::min()}});
    else
      expect_binary<ops::pow_op, T>({{3, 40, 689956897}});

    // A negative exponent is NumPy's ValueError, with any base (1 and -1 too: NumPy 2.4).
    const dx::Tensor<T> ones = make_tensor<T>({1, -1});
    CHECK_THROWS_AS(dx::eval(dx::power(ones, make_tensor<T>({-5, -4}))), dx::value_error);
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

}  // namespace
