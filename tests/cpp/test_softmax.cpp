// Tests of dx::softmax, dx::log_softmax and dx::logsumexp (eval/softmax.hpp, Note [online
// softmax]): against a long double reference of the three-pass definition, on rows of
// one block, several blocks and a ragged last block, on strided, transposed and fused
// inputs, integer input (float64 result), another axis than the last, the special values
// (-inf entries, rows of -inf, NaN, values near the float range's top) and thread counts.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "dynexpr/dynexpr.hpp"

namespace dx = dynexpr;
using dx::index_t;
using dx::Shape;
using ld = long double;

namespace {

template <class T>
dx::Tensor<T> random_tensor(const Shape& s, unsigned seed, double lo, double hi) {
  auto t = dx::Tensor<T>::empty(s);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (index_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<T>(u(gen));
  return t;
}

/// The reference rows of x (C-contiguous, last axis): softmax, log_softmax and logsumexp
/// as the three passes define them, in long double.
struct reference {
  std::vector<ld> soft, logsoft, lse;
};
template <class T>
reference reference_rows(const dx::Tensor<T>& x) {
  const index_t L = x.shape()[x.shape().size() - 1], rows = x.size() / L;
  reference r;
  for (index_t i = 0; i < rows; ++i) {
    const T* row = x.data() + i * L;
    ld m = -std::numeric_limits<ld>::infinity();
    for (index_t j = 0; j < L; ++j) m = std::max<ld>(m, row[j]);
    ld s = 0;
    for (index_t j = 0; j < L; ++j) s += std::exp(static_cast<ld>(row[j]) - m);
    for (index_t j = 0; j < L; ++j) {
      r.soft.push_back(std::exp(static_cast<ld>(row[j]) - m) / s);
      r.logsoft.push_back(static_cast<ld>(row[j]) - m - std::log(s));
    }
    r.lse.push_back(m + std::log(s));
  }
  return r;
}

template <class T>
void check_close(const dx::Tensor<T>& got, const std::vector<ld>& want, double rel, double abs) {
  REQUIRE(static_cast<std::size_t>(got.size()) == want.size());
  int bad = 0;
  for (index_t i = 0; i < got.size() && bad < 5; ++i) {
    const ld g = got.data()[i], w = want[static_cast<std::size_t>(i)];
    if (!(std::fabs(g - w) <= abs + rel * std::fabs(w))) {
      ++bad;
      CAPTURE(i);
      CAPTURE(static_cast<double>(g));
      CAPTURE(static_cast<double>(w));
      CHECK(std::fabs(g - w) <= abs + rel * std::fabs(w));
    }
  }
  CHECK(bad == 0);
}

template <class T>
void check_rows(const dx::Tensor<T>& x) {
  CAPTURE(x.shape().str());
  // float: x - max rounds to half an ulp of |x - max| (up to 40 here), 2.4e-6 in exp's result
  const double rel = std::is_same_v<T, float> ? 5e-6 : 1e-14;
  const reference r = reference_rows(x);
  const auto soft = dx::softmax(x);
  const auto logsoft = dx::log_softmax(x);
  const auto lse = dx::logsumexp(x);
  static_assert(std::is_same_v<decltype(soft), const dx::Tensor<T>>);
  CHECK(soft.shape() == x.shape());
  CHECK(lse.shape().size() == x.shape().size() - 1);
  check_close(soft, r.soft, rel, 1e-30);
  check_close(logsoft, r.logsoft, rel, rel);
  check_close(lse, r.lse, rel, rel);
}

}  // namespace

TEST_CASE_TEMPLATE("softmax rows: one block, several blocks, a ragged last block", T, float, double) {
  for (index_t L : {1, 5, 16, 100, 2048, 2049, 5000, 20000}) {
    check_rows(random_tensor<T>(Shape{7, L}, 1 + static_cast<unsigned>(L), -20, 20));
  }
  check_rows(random_tensor<T>(Shape{3, 4, 300}, 2, -5, 5));  // 3-D: rows of the last axis
  check_rows(random_tensor<T>(Shape{100000}, 3, -5, 5));     // one long row
  // Rising blocks: each block's max is above the last (the running sum is rescaled at
  // every block), then falling blocks.
  auto up = dx::Tensor<T>::empty(Shape{2, 10000});
  for (index_t j = 0; j < 10000; ++j) {
    up.at(0, j) = static_cast<T>(j * 0.01);
    up.at(1, j) = static_cast<T>(-j * 0.01);
  }
  check_rows(up);
}

TEST_CASE("softmax: large values do not overflow, the sum of each row is 1") {
  auto x = random_tensor<float>(Shape{16, 3000}, 4, 80, 88);  // exp(88) is near FLT_MAX
  const auto s = dx::softmax(x);
  for (index_t i = 0; i < 16; ++i) {
    double sum = 0;
    for (index_t j = 0; j < 3000; ++j) sum += s.at(i, j);
    CHECK(sum == doctest::Approx(1.0).epsilon(1e-5));
  }
  CHECK(std::isfinite(dx::logsumexp(x).at(0)));
}

TEST_CASE("softmax: strided, transposed and fused inputs; integer input; another axis") {
  const auto x = random_tensor<double>(Shape{60, 4100}, 5, -3, 3);
  const auto strided = x.slice(dx::slice(dx::none, dx::none, 2), dx::slice(dx::none, dx::none, 3));
  check_close(dx::softmax(strided), reference_rows(dx::eval(strided)).soft, 1e-14, 1e-300);
  check_close(dx::softmax(x * 2.0 + 1.0), reference_rows(dx::eval(x * 2.0 + 1.0)).soft, 1e-14, 1e-300);
  const auto t = x.transpose();  // rows of t are columns of x
  check_close(dx::log_softmax(t), reference_rows(dx::eval(t)).logsoft, 1e-13, 1e-13);
  // integers: float64 results
  auto ints = dx::Tensor<std::int32_t>::empty(Shape{9, 50});
  for (index_t i = 0; i < ints.size(); ++i) ints.data()[i] = static_cast<std::int32_t>(i % 17) - 8;
  const auto si = dx::softmax(ints);
  static_assert(std::is_same_v<decltype(si), const dx::Tensor<double>>);
  check_close(si, reference_rows(dx::eval(dx::cast<double>(ints))).soft, 1e-14, 1e-300);
  // axis 0 is the softmax of the transpose, transposed back
  const auto a0 = dx::softmax(x, 0);
  const auto want = dx::eval(dx::softmax(x.transpose()).view().transpose());
  for (index_t i = 0; i < x.size(); i += 97) CHECK(a0.data()[i] == doctest::Approx(want.data()[i]).epsilon(1e-13));
  const auto l0 = dx::logsumexp(x, 0, true);
  CHECK(l0.shape() == Shape{1, 4100});
  const auto lt = dx::logsumexp(x.transpose(), -1);
  for (index_t j = 0; j < 4100; j += 41) CHECK(l0.at(0, j) == doctest::Approx(lt.at(j)).epsilon(1e-13));
}

TEST_CASE_TEMPLATE("softmax: -inf entries, rows of -inf, NaN", T, float, double) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  auto x = random_tensor<T>(Shape{4, 5000}, 6, -2, 2);
  // row 0: a masked first block (all -inf) and scattered -inf entries
  for (index_t j = 0; j < 2048; ++j) x.at(0, j) = -inf;
  for (index_t j = 3000; j < 5000; j += 7) x.at(0, j) = -inf;
  for (index_t j = 0; j < 5000; ++j) x.at(1, j) = -inf;  // row 1: all -inf
  x.at(2, 4321) = std::numeric_limits<T>::quiet_NaN();    // row 2: one NaN
  const auto s = dx::softmax(x);
  const auto ls = dx::log_softmax(x);
  const auto lse = dx::logsumexp(x);
  double sum = 0;
  for (index_t j = 0; j < 5000; ++j) sum += s.at(0, j);
  CHECK(sum == doctest::Approx(1.0).epsilon(1e-5));
  CHECK(s.at(0, 10) == 0);
  CHECK(s.at(0, 3000) == 0);
  CHECK(ls.at(0, 3000) == -inf);
  CHECK(std::isfinite(ls.at(0, 3001)));
  CHECK(std::isnan(s.at(1, 0)));
  CHECK(std::isnan(ls.at(1, 0)));
  CHECK(lse.at(1) == -inf);
  CHECK(std::isnan(s.at(2, 0)));
  CHECK(std::isnan(lse.at(2)));
  CHECK(std::isfinite(lse.at(3)));
}

TEST_CASE("softmax: 1, 2 and 3 threads give bitwise equal results") {
  const int saved = dx::parallel::num_threads();
  const auto x = random_tensor<float>(Shape{300, 3000}, 7, -4, 4);
  dx::parallel::set_num_threads(1);
  const auto s1 = dx::softmax(x);
  const auto l1 = dx::logsumexp(x);
  for (int t : {2, 3}) {
    dx::parallel::set_num_threads(t);
    const auto st = dx::softmax(x);
    const auto lt = dx::logsumexp(x);
    CHECK(std::memcmp(s1.data(), st.data(), sizeof(float) * s1.size()) == 0);
    CHECK(std::memcmp(l1.data(), lt.data(), sizeof(float) * l1.size()) == 0);
  }
  dx::parallel::set_num_threads(saved);
}

TEST_CASE("softmax: bad input is a clear error") {
  CHECK_THROWS_WITH_AS(dx::softmax(dx::Tensor<float>(Shape{3, 0})), doctest::Contains("zero-size array"),
                       dx::value_error);
  CHECK_THROWS_WITH(dx::softmax(dx::Tensor<float>(Shape{3, 4}), 2), doctest::Contains("out of bounds"));
}

// ------------------------------------------------------------------ dx::max_sumexp
// (eval/max_sumexp.hpp, Note [max and sum of exps together])
namespace {
/// max and sum(exp(x - max)) of x (C-contiguous) over axes 0..k-1 of a 2-D view [rows,
/// cols] of it, reduced along the rows (axis 0), in long double.
template <class T>
void reference_columns(const T* x, index_t rows, index_t cols, std::vector<ld>& m, std::vector<ld>& s) {
  m.assign(static_cast<std::size_t>(cols), -std::numeric_limits<ld>::infinity());
  s.assign(static_cast<std::size_t>(cols), 0);
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = 0; c < cols; ++c) m[c] = std::max<ld>(m[c], x[r * cols + c]);
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = 0; c < cols; ++c) s[c] += std::exp(static_cast<ld>(x[r * cols + c]) - m[c]);
}

template <class T, class A>
void check_max_sumexp(const dx::Tensor<T>& x, const A& axes, index_t rows, index_t cols, double rel) {
  // x is [rows, cols] once the reduced axes are moved first (the callers pass such x)
  const auto [m, s] = dx::max_sumexp(x, axes);
  std::vector<ld> wm, ws;
  reference_columns(x.data(), rows, cols, wm, ws);
  REQUIRE(m.size() == cols);
  const auto mx = dx::max(x, axes);
  int bad = 0;
  for (index_t c = 0; c < cols && bad < 5; ++c) {
    const bool ok = m.data()[c] == mx.data()[c] && static_cast<ld>(m.data()[c]) == wm[c] &&
                    std::abs(static_cast<ld>(s.data()[c]) - ws[c]) <= rel * ws[c];
    if (!ok) {
      ++bad;
      FAIL_CHECK("column " << c << ": m " << m.data()[c] << " (want " << static_cast<double>(wm[c])
                           << "), s " << s.data()[c] << " (want " << static_cast<double>(ws[c]) << ")");
    }
  }
}
}  // namespace

TEST_CASE_TEMPLATE("max_sumexp reads once and matches the two reductions", T, float, double) {
  const double rel = std::is_same_v<T, float> ? 2e-5 : 1e-12;
  // column tiles: a ragged last tile (700 = 512 + 188), many row chunks, tiny shapes
  // short rows (Note [short rows]): lanes of super rows merged into columns, rows left over
  for (const auto& [rows, cols] : {std::pair<index_t, index_t>{3000, 700}, {100000, 16}, {7, 5}, {1, 600},
                                   {20011, 3}, {30000, 8}, {4097, 5}, {999, 2}})
    check_max_sumexp(random_tensor<T>(Shape{rows, cols}, 11, -20, 20), 0, rows, cols, rel);
  // all axes (one output, chunks merged), long rows (axis 1 of a transposed copy)
  const auto big = random_tensor<T>(Shape{1000, 300}, 12, -30, 30);
  check_max_sumexp(big.view().reshape(Shape{300000, 1}).copy(), dx::all_axes, 300000, 1, rel);
  const auto rowsx = random_tensor<T>(Shape{3, 70000}, 13, -5, 5);
  const auto [mr, sr] = dx::max_sumexp(rowsx, 1, true);
  CHECK(mr.shape() == Shape{3, 1});
  const auto tr = dx::eval(rowsx.transpose());
  std::vector<ld> wm, ws;
  reference_columns(tr.data(), 70000, 3, wm, ws);
  for (index_t r = 0; r < 3; ++r) {
    CHECK(static_cast<ld>(mr.at(r, 0)) == wm[r]);
    CHECK(std::abs(static_cast<ld>(sr.at(r, 0)) - ws[r]) <= rel * ws[r]);
  }
  // a strided, fused input, 3-D with two reduced axes: the same as its evaluated copy
  const auto x3 = random_tensor<T>(Shape{20, 30, 80}, 14, -3, 3);
  const auto view = x3.slice(dx::slice(dx::none, dx::none, 2), dx::slice(), dx::slice(dx::none, dx::none, 2));
  const auto fused = view * T(2) + T(1);
  const auto [m3, s3] = dx::max_sumexp(fused, Shape{0, 1});
  const auto copy = dx::eval(fused);  // [10, 30, 40] -> rows of 300, 40 columns
  reference_columns(copy.data(), 300, 40, wm, ws);
  for (index_t c = 0; c < 40; ++c) {
    CHECK(static_cast<ld>(m3.at(c)) == wm[c]);
    CHECK(std::abs(static_cast<ld>(s3.at(c)) - ws[c]) <= rel * ws[c]);
  }
}

TEST_CASE_TEMPLATE("max_sumexp: special values as NumPy's two reductions", T, float, double) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  auto x = random_tensor<T>(Shape{5000, 6}, 15, -2, 2);
  for (index_t r = 0; r < 5000; ++r) x.at(r, 0) = -inf;  // column 0: all -inf
  x.at(4000, 1) = std::numeric_limits<T>::quiet_NaN();     // column 1: a NaN late
  x.at(10, 2) = inf;                                        // column 2: +inf early
  for (index_t r = 0; r < 3000; ++r) x.at(r, 3) = -inf;    // column 3: -inf blocks, then values
  x.at(4999, 4) = T(80);                                    // column 4: the max in the last row
  for (const int threads : {1, 2, 3}) {
    const int saved = dx::parallel::num_threads();
    dx::parallel::set_num_threads(threads);
    const auto [m, s] = dx::max_sumexp(x, 0);
    dx::parallel::set_num_threads(saved);
    CHECK(m.at(0) == -inf);
    CHECK(std::isnan(s.at(0)));
    CHECK(std::isnan(m.at(1)));
    CHECK(std::isnan(s.at(1)));
    CHECK(m.at(2) == inf);
    CHECK(std::isnan(s.at(2)));
    std::vector<ld> wm, ws;
    reference_columns(x.data(), 5000, 6, wm, ws);
    for (const index_t c : {3, 4, 5}) {
      CHECK(static_cast<ld>(m.at(c)) == wm[c]);
      CHECK(std::abs(static_cast<ld>(s.at(c)) - ws[c]) <= 2e-5 * ws[c]);
    }
  }
}

TEST_CASE("max_sumexp: 1, 2 and 3 threads give bitwise equal results; empty input") {
  const int saved = dx::parallel::num_threads();
  for (const Shape& shape : {Shape{20000, 700}, Shape{200003, 3}}) {  // column tiles, short rows
    const auto x = random_tensor<float>(shape, 16, -4, 4);
    dx::parallel::set_num_threads(1);
    const auto [m1, s1] = dx::max_sumexp(x, 0);
    const auto [ma1, sa1] = dx::max_sumexp(x, dx::all_axes);
    for (int t : {2, 3}) {
      dx::parallel::set_num_threads(t);
      const auto [mt, st] = dx::max_sumexp(x, 0);
      const auto [mat, sat] = dx::max_sumexp(x, dx::all_axes);
      CHECK(std::memcmp(m1.data(), mt.data(), sizeof(float) * m1.size()) == 0);
      CHECK(std::memcmp(s1.data(), st.data(), sizeof(float) * s1.size()) == 0);
      CHECK(std::memcmp(sa1.data(), sat.data(), sizeof(float)) == 0);
      CHECK(ma1.data()[0] == mat.data()[0]);
    }
  }
  dx::parallel::set_num_threads(saved);
  CHECK_THROWS_WITH_AS(dx::max_sumexp(dx::Tensor<float>(Shape{0, 3}), 0), doctest::Contains("zero-size array"),
                       dx::value_error);
  const auto [me, se] = dx::max_sumexp(dx::Tensor<float>(Shape{4, 0}), 0);  // nothing to reduce into
  CHECK(me.size() == 0);
  CHECK(se.size() == 0);
}

TEST_CASE("softmax along another axis from softmax_pair_min_bytes up (through max_sumexp)") {
  const auto x = random_tensor<double>(Shape{600, 1000}, 17, -30, 30);  // 4.8 MB
  REQUIRE(x.size() * static_cast<index_t>(sizeof(double)) >= dx::detail_softmax::softmax_pair_min_bytes);
  const auto a0 = dx::softmax(x, 0);
  const auto want = dx::eval(dx::softmax(x.transpose()).view().transpose());
  for (index_t i = 0; i < x.size(); i += 37) CHECK(a0.data()[i] == doctest::Approx(want.data()[i]).epsilon(1e-13));
  const auto l0 = dx::log_softmax(x, 0);
  const auto lw = dx::eval(dx::log_softmax(x.transpose()).view().transpose());
  for (index_t i = 0; i < x.size(); i += 37) CHECK(l0.data()[i] == doctest::Approx(lw.data()[i]).epsilon(1e-13));
  const auto s0 = dx::logsumexp(x, 0);
  const auto sw = dx::logsumexp(x.transpose(), -1);
  for (index_t j = 0; j < 1000; ++j) CHECK(s0.at(j) == doctest::Approx(sw.at(j)).epsilon(1e-13));
}
