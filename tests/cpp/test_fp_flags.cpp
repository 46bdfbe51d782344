// tests/cpp/test_fp_flags.cpp — floating-point exception flags: evaluation raises the
// flags NumPy's loops would for the same values and no others (the Python bridge reports
// them as np.errstate says: Note [floating-point errors] in bridge/native/kernel.c), and
// parallel_for leaves every pool thread's flags on the caller (Note [flags of pool
// threads]). Paired with tests/python/test_numerics_trust.py.
#include <doctest/doctest.h>

#include <atomic>
#include <cfenv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <thread>
#include <vector>

#include "dynexpr/dynexpr.hpp"

namespace dx = dynexpr;
namespace par = dynexpr::parallel;

namespace {

using dx::index_t;
using dx::Shape;

constexpr int kReported = FE_DIVBYZERO | FE_OVERFLOW | FE_INVALID;  // NumPy's default 'warn'

// The flags (of kReported) that f raises on this thread.
template <class F>
int flags_of(F&& f) {
  std::feclearexcept(FE_ALL_EXCEPT);
  f();
  const int raised = std::fetestexcept(kReported);
  std::feclearexcept(FE_ALL_EXCEPT);
  return raised;
}

template <class T>
dx::Tensor<T> full(index_t n, T v) {
  dx::Tensor<T> t(Shape{n});
  for (index_t i = 0; i < n; ++i) t.data()[i] = v;
  return t;
}

}  // namespace

TEST_CASE("parallel_for: the flags a worker's chunk raises reach the caller") {
  par::set_num_threads(4);
  bool worker_raised = false;
  for (int attempt = 0; attempt < 50 && !worker_raised; ++attempt) {
    std::atomic<bool> on_worker{false};
    const int raised = flags_of([&] {
      par::parallel_for(1 << 16, 1, 1, std::numeric_limits<double>::infinity(),
                        [&](index_t, index_t) {
                          // Slow enough that sleeping workers wake and take chunks.
                          std::this_thread::sleep_for(std::chrono::microseconds(300));
                          if (!par::in_worker()) return;
                          on_worker = true;
                          std::feraiseexcept(FE_DIVBYZERO);
                        });
    });
    if (on_worker) {
      CHECK(raised == FE_DIVBYZERO);
      worker_raised = true;
    } else {
      CHECK(raised == 0);
    }
  }
  CHECK(worker_raised);  // a worker ran a chunk in one of the attempts
  // The worker's own flags were handed over, not left behind for the next call.
  const int later = flags_of([&] {
    par::parallel_for(1 << 16, 1, 1, std::numeric_limits<double>::infinity(),
                      [](index_t, index_t) {});
  });
  CHECK(later == 0);
  par::set_num_threads(1);
}

TEST_CASE_TEMPLATE("eval: a row's tail computes no padding lanes of its own", T, float, double) {
  // Zeros in the padding lanes made 1/1 raise "invalid" (0/0) and log(1) "divide by zero".
  for (index_t n = 1; n <= 40; ++n) {
    const auto one = full<T>(n, T(1)), two = full<T>(n, T(2));
    CHECK(flags_of([&] { dx::Tensor<T> r = one / one; }) == 0);
    CHECK(flags_of([&] { dx::Tensor<T> r = dx::log(one); }) == 0);
    CHECK(flags_of([&] { dx::Tensor<T> r = dx::floor_divide(two, one); }) == 0);
    CHECK(flags_of([&] { dx::Tensor<T> r = dx::arctanh(one / two); }) == 0);
    // A real lane still raises its flag, in the tail too.
    auto zero_last = full<T>(n, T(1));
    zero_last.data()[n - 1] = T(0);
    CHECK(flags_of([&] { dx::Tensor<T> r = one / zero_last; }) == FE_DIVBYZERO);
  }
}

TEST_CASE_TEMPLATE("eval: NaN and infinities raise what NumPy raises", T, float, double) {
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  const T big = std::numeric_limits<T>::max();
  for (index_t n : {index_t{3}, index_t{16}, index_t{37}}) {
    const auto x = full<T>(n, nan), one = full<T>(n, T(1)), i = full<T>(n, inf);
    // NumPy reports nothing for these.
    CHECK(flags_of([&] { dx::Tensor<T> r = dx::maximum(x, one) + dx::minimum(one, x); }) == 0);
    CHECK(flags_of([&] { dx::Tensor<bool> r = x < one; }) == 0);
    CHECK(flags_of([&] { dx::Tensor<T> r = dx::exp(x) + dx::tanh(x) + dx::cosh(i); }) == 0);
    CHECK(flags_of([&] { dx::Tensor<T> r = dx::floor_divide(one, x) + dx::remainder(x, one); }) == 0);
    CHECK(flags_of([&] { dx::Tensor<T> r = dx::arctan2(x, one) + dx::hypot(i, x); }) == 0);
    CHECK(flags_of([&] { dx::Tensor<T> r = dx::pow(x, one) + dx::pow(i, one); }) == 0);
    const auto huge = full<T>(n, big);
    CHECK(flags_of([&] { dx::Tensor<T> r = dx::tanh(huge) + dx::tanh(-huge); }) == 0);
    CHECK(flags_of([&] { dx::Tensor<T> r = dx::arcsinh(huge) + dx::arccosh(huge); }) == 0);
    // ... and these, what NumPy reports.
    CHECK(flags_of([&] { dx::Tensor<T> r = dx::sqrt(-one); }) == FE_INVALID);
    CHECK(flags_of([&] { dx::Tensor<T> r = dx::exp(one * T(1000)); }) == FE_OVERFLOW);
    CHECK(flags_of([&] { dx::Tensor<T> r = dx::log(one - one); }) == FE_DIVBYZERO);
    CHECK(flags_of([&] { dx::Tensor<T> r = dx::pow(-one, one / T(2)); }) == FE_INVALID);
  }
}

// Note [quiet comparisons] in dynexpr/ops/scalar_support.hpp: 0-d values and the scalar
// bodies (what scalar loop bodies and lane-by-lane fallbacks run) compare a NaN quietly.
TEST_CASE_TEMPLATE("eval: ordered comparisons of a NaN raise nothing, 0-d and scalar too", T, float,
                   double) {
  volatile T vn = std::numeric_limits<T>::quiet_NaN(), v1 = T(1);  // no constant folding
  const T nan = vn, one = v1;
  dx::Tensor<T> a(Shape{}), b(Shape{});
  a.data()[0] = nan;
  b.data()[0] = one;
  CHECK(flags_of([&] {
          dx::Tensor<bool> r = dx::logical_or(dx::logical_or(a < b, a > b), dx::logical_or(b <= a, b >= a));
          CHECK(!r.data()[0]);
        }) == 0);
  bool r = true;
  CHECK(flags_of([&] {
          r = dx::ops::less_op::scalar(nan, one) || dx::ops::greater_op::scalar(one, nan) ||
              dx::ops::less_equal_op::scalar(nan, one) || dx::ops::greater_equal_op::scalar(one, nan);
        }) == 0);
  CHECK(!r);
  CHECK((dx::ops::less_op::scalar(T(1), T(2)) && dx::ops::greater_equal_op::scalar(T(2), T(2)) &&
         !dx::ops::greater_op::scalar(T(2), T(2)) && dx::ops::less_equal_op::scalar(T(-0.0), T(0))));
}

TEST_CASE_TEMPLATE("eval: integer division by zero raises NumPy's flag", T, std::int32_t,
                   std::int64_t) {
  for (index_t n : {index_t{1}, index_t{9}, index_t{40}}) {
    const auto x = full<T>(n, T(7)), zero = full<T>(n, T(0)), one = full<T>(n, T(1));
    dx::Tensor<T> q, r;
    CHECK(flags_of([&] { q = dx::floor_divide(x, zero); }) == FE_DIVBYZERO);
    CHECK(flags_of([&] { r = dx::remainder(x, zero); }) == FE_DIVBYZERO);
    CHECK(q.data()[n - 1] == 0);
    CHECK(r.data()[0] == 0);
    CHECK(flags_of([&] { q = dx::floor_divide(x, one); }) == 0);
    const auto lowest = full<T>(n, std::numeric_limits<T>::min());
    CHECK(flags_of([&] { q = dx::floor_divide(lowest, -one); }) == FE_OVERFLOW);
    CHECK(q.data()[0] == std::numeric_limits<T>::min());
  }
}

TEST_CASE("reductions: column tiles compute no stale padding lanes; a constant column's spread is 0") {
  // Columns fewer than a vector: the last vector's lanes past the columns were computed
  // from stale scratch and masked off (an exp of x less a stale max overflowed), and a
  // constant column's M2 was a rounding (1e-62) that underflowed as float32 (Note [a
  // constant column's spread is 0] in eval/moments.hpp). 2.4 MB and more: dx::softmax
  // along axis 0 takes dx::max_sumexp's column tiles.
  par::set_num_threads(2);
  auto wave = [](index_t rows, index_t cols, double shift) {
    dx::Tensor<float> x(Shape{rows, cols});
    for (index_t i = 0; i < rows * cols; ++i)
      x.data()[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 20.0 + shift);
    return x;
  };
  // Scratch left by a softmax of 48 columns near -1000: the stale maxima an exp of the
  // next call's padding lanes was taken about.
  const auto before = dx::softmax(wave(2400000 / 4 / 48, 48, -1000.0), 0);
  CHECK(before.size() > 0);
  for (const index_t cols : {index_t{3}, index_t{8}, index_t{37}}) {
    const index_t rows = 2400000 / 4 / cols + 3;
    dx::Tensor<float> x = wave(rows, cols, 0.0);
    dx::Tensor<float> sm;
    CHECK(flags_of([&] { sm = dx::softmax(x, 0); }) == 0);
    for (index_t j = 0; j < cols; ++j) {  // each column sums to 1
      double s = 0;
      for (index_t i = 0; i < rows; ++i) s += sm.data()[i * cols + j];
      CHECK(s == doctest::Approx(1.0).epsilon(1e-4));
    }
    for (index_t i = 0; i < rows; ++i) x.data()[i * cols] = 0.1f;  // a constant column
    for (const bool root : {false, true}) {
      dx::Tensor<float> v;
      std::feclearexcept(FE_ALL_EXCEPT);
      v = root ? dx::std(x, 0) : dx::var(x, 0);
      CHECK(std::fetestexcept(FE_ALL_EXCEPT & ~FE_INEXACT) == 0);
      CHECK(v.data()[0] == 0.0f);
      CHECK(v.data()[1] > 0.0f);
    }
  }
  par::set_num_threads(1);
}
