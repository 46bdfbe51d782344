// Tests of interop/eigen.hpp: dx::view of Eigen matrices, arrays, maps and blocks (either
// storage order, any strides), dx::as_eigen of tensors and views, and dx::matmul against
// a plain triple loop in double (NumPy's np.matmul rules for 1-D, 2-D and batched 3-D
// operands).
// dynexpr first: Note [GCC 12 AVX-512 intrinsics under -Wuninitialized].
#include "dynexpr/dynexpr.hpp"

#include <doctest/doctest.h>

#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace dx = dynexpr;

namespace doctest {
template <class Tag>
struct StringMaker<dx::dims<Tag>> {
  static String convert(const dx::dims<Tag>& d) { return d.str().c_str(); }
};
}  // namespace doctest

namespace {

using dx::index_t;
using dx::Shape;
using dx::Strides;

template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (...) {
    FAIL("threw an exception of another type");
    return {};
  }
  FAIL("expected an exception");
  return {};
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Small integers (exact in every dtype and in every product sum here) or two-decimal
// floats in [-4, 4].
template <class T>
T value_for(index_t i, unsigned seed) {
  const std::uint64_t h = ((static_cast<std::uint64_t>(i) + 7) * 0x9E3779B97F4A7C15ull) ^ (seed * 0xBF58476D1CE4E5B9ull);
  const auto k = static_cast<std::int64_t>((h >> 17) % 801);
  if constexpr (std::is_integral_v<T>) return static_cast<T>(k % 19 - 9);
  else return static_cast<T>(k - 400) / T(100);
}
template <class T>
dx::Tensor<T> random(const Shape& s, unsigned seed) {
  dx::Tensor<T> t(s);
  for (index_t i = 0; i < t.size(); ++i) t.data()[i] = value_for<T>(i, seed);
  return t;
}

// C = A @ B for 2-D views, in double.
template <class A, class B>
std::vector<double> ref_matmul(const dx::View<A>& a, const dx::View<B>& b) {
  const index_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  std::vector<double> c(static_cast<std::size_t>(m * n), 0.0);
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) {
      double s = 0;
      for (index_t p = 0; p < k; ++p) s += static_cast<double>(a.at(i, p)) * static_cast<double>(b.at(p, j));
      c[static_cast<std::size_t>(i * n + j)] = s;
    }
  return c;
}
// Same, with the bound on |C| used for the tolerance.
template <class A, class B>
std::vector<double> ref_abs(const dx::View<A>& a, const dx::View<B>& b) {
  const index_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  std::vector<double> c(static_cast<std::size_t>(m * n), 0.0);
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) {
      double s = 0;
      for (index_t p = 0; p < k; ++p) s += std::abs(static_cast<double>(a.at(i, p)) * static_cast<double>(b.at(p, j)));
      c[static_cast<std::size_t>(i * n + j)] = s;
    }
  return c;
}

// Error bound of a length-k dot product in T, relative to sum |a_i b_i|: k roundings.
template <class T>
double tolerance(index_t k) {
  if constexpr (std::is_floating_point_v<T>)
    return static_cast<double>(k + 2) * std::numeric_limits<T>::epsilon();
  else return 0;
}

// Checks got (any shape holding m*n elements in C order) against the reference of a @ b.
template <class T, class A, class B>
void expect_matmul(const dx::Tensor<T>& got, const dx::View<A>& a, const dx::View<B>& b) {
  const auto want = ref_matmul(a, b), mag = ref_abs(a, b);
  REQUIRE(static_cast<std::size_t>(got.size()) == want.size());
  int bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = static_cast<double>(got.data()[i]);
    if (std::abs(g - want[i]) > tolerance<T>(a.shape()[1]) * (mag[i] + 1) && bad++ < 5) {
      CAPTURE(i);
      CHECK(g == want[i]);
    }
  }
  CHECK(bad == 0);
}

}  // namespace

// ---------------------------------------------------------------------------------------
// dx::view of Eigen objects
// ---------------------------------------------------------------------------------------

TEST_CASE("dx::view of an Eigen::MatrixXf (column-major)") {
  Eigen::MatrixXf m(3, 4);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) m(i, j) = static_cast<float>(10 * i + j);
  auto v = dx::view(m);
  static_assert(std::is_same_v<decltype(v), dx::View<float>>);
  CHECK(v.shape() == Shape{3, 4});
  CHECK(v.strides() == Strides{1, 3});
  CHECK(v.data() == m.data());
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) CHECK(v.at(i, j) == m(i, j));
  v.at(2, 1) = -7.f;
  CHECK(m(2, 1) == -7.f);
  // as an expression operand and an assignment target
  auto twice = dx::eval(v * 2.f);
  CHECK(twice.at(1, 3) == 2 * m(1, 3));
  dx::assign(dx::view(m), dx::view(m).transpose().transpose() + 1.f);
  CHECK(m(2, 1) == -6.f);
  CHECK(m(0, 0) == 1.f);
  // a const matrix gives a read-only view
  const Eigen::MatrixXf& cm = m;
  auto cv = dx::view(cm);
  static_assert(std::is_same_v<decltype(cv), dx::View<const float>>);
  CHECK(cv.at(1, 2) == m(1, 2));
}

TEST_CASE("dx::view of a row-major Eigen::Matrix and an Eigen::ArrayXXd") {
  Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> r(4, 5);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) r(i, j) = i * 5 + j;
  auto v = dx::view(r);
  CHECK(v.shape() == Shape{4, 5});
  CHECK(v.strides() == Strides{5, 1});
  CHECK(v.is_contiguous());
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) CHECK(v.at(i, j) == r(i, j));
  v.at(3, 4) = 100;
  CHECK(r(3, 4) == 100);

  Eigen::ArrayXXd a(2, 7);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 7; ++j) a(i, j) = 0.5 * (i - j);
  auto w = dx::view(a);
  CHECK(w.shape() == Shape{2, 7});
  CHECK(w.strides() == Strides{1, 2});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 7; ++j) CHECK(w.at(i, j) == a(i, j));
  dx::assign(w, dx::sqrt(dx::abs(w)));
  CHECK(a(0, 6) == std::sqrt(3.0));
  // dynexpr reductions over Eigen memory
  CHECK(dx::sum(dx::view(a)) == doctest::Approx(a.sum()));
  // a fixed-size Eigen vector is a (n, 1) view
  Eigen::Vector3f col(1.f, 2.f, 3.f);
  auto c = dx::view(col);
  CHECK(c.shape() == Shape{3, 1});
  CHECK(c.at(2, 0) == 3.f);
}

TEST_CASE("dx::view of an Eigen::Map with strides and of a Block") {
  std::vector<float> buf(64);
  for (int i = 0; i < 64; ++i) buf[i] = static_cast<float>(i);
  // column-major 3x4 map: element (i, j) at buf[2 * i + 10 * j]
  Eigen::Map<Eigen::MatrixXf, 0, Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>> map(
      buf.data(), 3, 4, Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>(10, 2));
  auto v = dx::view(map);
  CHECK(v.shape() == Shape{3, 4});
  CHECK(v.strides() == Strides{2, 10});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      CHECK(v.at(i, j) == map(i, j));
      CHECK(v.at(i, j) == buf[2 * i + 10 * j]);
    }
  v.at(1, 3) = -1.f;
  CHECK(buf[32] == -1.f);
  // row-major map with an outer stride (a pitch)
  Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0, Eigen::OuterStride<>>
      rm(buf.data() + 1, 5, 3, Eigen::OuterStride<>(7));
  auto w = dx::view(rm);
  CHECK(w.strides() == Strides{7, 1});
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 3; ++j) CHECK(w.at(i, j) == rm(i, j));

  Eigen::MatrixXd m(6, 5);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 5; ++j) m(i, j) = i + 0.1 * j;
  auto blk = m.block(1, 2, 4, 3);
  auto b = dx::view(blk);
  CHECK(b.shape() == Shape{4, 3});
  CHECK(b.strides() == Strides{1, 6});
  CHECK(b.data() == &m(1, 2));
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) CHECK(b.at(i, j) == m(1 + i, 2 + j));
  dx::assign(b, dx::scalar<double>(-1));
  CHECK(m(1, 2) == -1);
  CHECK(m(4, 4) == -1);
  CHECK(m(0, 2) == 0 + 0.1 * 2);  // outside the block: untouched
  CHECK(m(5, 4) == 5 + 0.1 * 4);
  CHECK(m(1, 1) == 1 + 0.1 * 1);
  // a block of a row-major matrix, transposed through dynexpr
  Eigen::Matrix<std::int32_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> im(4, 6);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) im(i, j) = 6 * i + j;
  auto ib = im.block(1, 1, 3, 4);
  auto iv = dx::view(ib);
  CHECK(iv.strides() == Strides{6, 1});
  const auto t = dx::eval(iv.transpose() * 2);
  CHECK(t.shape() == Shape{4, 3});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) CHECK(t.at(i, j) == 2 * im(1 + j, 1 + i));
}

// ---------------------------------------------------------------------------------------
// dx::as_eigen
// ---------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("dx::as_eigen of tensors and views", T, float, double, std::int32_t, std::int64_t) {
  auto t = random<T>(Shape{5, 7}, 1);
  auto e = dx::as_eigen(t);
  CHECK(e.rows() == 5);
  CHECK(e.cols() == 7);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 7; ++j) CHECK(e(i, j) == t.at(i, j));
  e(4, 6) = T(42);  // writes through
  CHECK(t.at(4, 6) == T(42));
  CHECK(static_cast<double>(e.sum()) == doctest::Approx(static_cast<double>(dx::sum(t))));

  // a transposed view
  auto et = dx::as_eigen(t.transpose());
  CHECK(et.rows() == 7);
  CHECK(et.cols() == 5);
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 5; ++j) CHECK(et(i, j) == t.at(j, i));

  // a strided view (every other row, every third column)
  auto sv = t.slice(dx::slice(dx::none, dx::none, 2), dx::slice(1, dx::none, 3));
  auto es = dx::as_eigen(sv);
  REQUIRE(es.rows() == 3);
  REQUIRE(es.cols() == 2);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) CHECK(es(i, j) == t.at(2 * i, 1 + 3 * j));
  es(2, 1) = T(-3);
  CHECK(t.at(4, 4) == T(-3));

  // a reversed view (negative strides)
  auto rv = t.slice(dx::slice(dx::none, dx::none, -1), dx::slice(dx::none, dx::none, -2));
  auto er = dx::as_eigen(rv);
  REQUIRE(er.rows() == 5);
  REQUIRE(er.cols() == 4);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 4; ++j) CHECK(er(i, j) == t.at(4 - i, 6 - 2 * j));

  // a 1-D tensor maps as a column vector; a strided 1-D view too
  auto v = random<T>(Shape{9}, 2);
  auto ev = dx::as_eigen(v);
  CHECK(ev.rows() == 9);
  CHECK(ev.cols() == 1);
  for (int i = 0; i < 9; ++i) CHECK(ev(i, 0) == v.at(i));
  auto ev2 = dx::as_eigen(v.slice(dx::slice(1, dx::none, 3)));
  CHECK(ev2.rows() == 3);
  for (int i = 0; i < 3; ++i) CHECK(ev2(i, 0) == v.at(1 + 3 * i));

  // a const tensor gives a read-only map
  const auto& ct = t;
  auto ce = dx::as_eigen(ct);
  CHECK(ce(0, 0) == t.at(0, 0));
  static_assert(!std::is_assignable_v<decltype(ce(0, 0)), T>);

  // an Eigen product of maps equals dx::matmul
  auto a = random<T>(Shape{4, 6}, 3), b = random<T>(Shape{6, 3}, 4);
  const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> prod = dx::as_eigen(a) * dx::as_eigen(b);
  const auto mm = dx::matmul(a, b);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) CHECK(prod(i, j) == doctest::Approx(static_cast<double>(mm.at(i, j))));

  // only 1-D and 2-D arrays map
  dx::Tensor<T> three(Shape{2, 2, 2});
  CHECK_THROWS_AS(dx::as_eigen(three), dx::shape_error);
  CHECK(contains(message_of<dx::shape_error>([&] { (void)dx::as_eigen(three); }), "(2, 2, 2)"));
}

// ---------------------------------------------------------------------------------------
// dx::matmul
// ---------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("dx::matmul of 2-D operands", T, float, double, std::int32_t, std::int64_t) {
  struct mnk {
    index_t m, k, n;
  };
  for (const mnk& s : {mnk{1, 1, 1}, mnk{2, 3, 4}, mnk{7, 13, 5}, mnk{64, 33, 70}, mnk{129, 257, 65},
                       mnk{1, 100, 1}, mnk{100, 1, 100}, mnk{0, 3, 4}, mnk{3, 0, 4}}) {
    CAPTURE(s.m);
    CAPTURE(s.k);
    CAPTURE(s.n);
    const auto a = random<T>(Shape{s.m, s.k}, 5), b = random<T>(Shape{s.k, s.n}, 6);
    auto c = dx::matmul(a, b);
    static_assert(std::is_same_v<decltype(c), dx::Tensor<T>>);
    CHECK(c.shape() == Shape{s.m, s.n});
    expect_matmul(c, a.view(), b.view());
  }
  // transposed, strided and reversed operands
  const auto a = random<T>(Shape{40, 30}, 7), b = random<T>(Shape{20, 30}, 8);
  expect_matmul(dx::matmul(a, b.transpose()), a.view(), b.transpose());
  const auto as = a.slice(dx::slice(dx::none, dx::none, 2), dx::slice(dx::none, 20));       // (20, 20)
  const auto bs = b.slice(dx::slice(dx::none, dx::none, -1), dx::slice(dx::none, dx::none, -1)).slice(
      dx::colon, dx::slice(5, 25));                                                          // (20, 20)
  expect_matmul(dx::matmul(as, bs), as, bs);
  expect_matmul(dx::matmul(bs.transpose(), as.transpose()), bs.transpose(), as.transpose());
}

// Integer products (detail::loop_product: Note [matmul without Eigen in units]) wrap
// around modulo 2^bits as NumPy's do; here the values overflow on purpose, and the
// destination is strided with alpha and accumulate (matmul_into, what units call).
TEST_CASE_TEMPLATE("dx::matmul of integers wraps around like NumPy", T, std::uint8_t, std::int32_t,
                   std::int64_t) {
  using U = std::make_unsigned_t<T>;
  const index_t m = 5, k = 37, n = 19;
  dx::Tensor<T> a(Shape{m, k}), b(Shape{k, n}), wide(Shape{m, 2 * n});
  for (index_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<T>(U(0x9E3779B97F4A7C15ull * (i + 1)));
  for (index_t i = 0; i < b.size(); ++i) b.data()[i] = static_cast<T>(U(0xC2B2AE3D27D4EB4Full * (i + 3)));
  for (index_t i = 0; i < wide.size(); ++i) wide.data()[i] = static_cast<T>(U(i * 7 + 1));
  const auto before = wide.view().copy();
  const auto c = dx::matmul(a, b);
  REQUIRE(c.shape() == Shape{m, n});
  const auto dest = wide.slice(dx::colon, dx::slice(dx::none, dx::none, 2));  // (m, n), strides (2n, 2)
  dx::matmul_into(dest, a, b, T(3), true);
  for (index_t r = 0; r < m; ++r)
    for (index_t j = 0; j < n; ++j) {
      U acc = 0;
      for (index_t kk = 0; kk < k; ++kk) acc = U(acc + U(U(a.data()[r * k + kk]) * U(b.data()[kk * n + j])));
      CAPTURE(r);
      CAPTURE(j);
      CHECK(c.data()[r * n + j] == static_cast<T>(acc));
      const index_t at = r * 2 * n + 2 * j;
      CHECK(wide.data()[at] == static_cast<T>(U(U(before.data()[at]) + U(U(3) * acc))));
      CHECK(wide.data()[at + 1] == before.data()[at + 1]);  // between the strided columns
    }
}

TEST_CASE_TEMPLATE("dx::matmul with 1-D operands", T, float, double, std::int32_t, std::int64_t) {
  const auto a = random<T>(Shape{6, 9}, 9), b = random<T>(Shape{9, 4}, 10);
  const auto v = random<T>(Shape{9}, 11), w = random<T>(Shape{6}, 12);
  // matrix @ vector -> (6,)
  auto mv = dx::matmul(a, v);
  CHECK(mv.shape() == Shape{6});
  expect_matmul(mv, a.view(), v.reshape(Shape{9, 1}));
  // vector @ matrix -> (4,)
  auto vm = dx::matmul(v, b);
  CHECK(vm.shape() == Shape{4});
  expect_matmul(vm, v.reshape(Shape{1, 9}), b.view());
  // vector @ vector -> () (a 0-d result, as NumPy's inner product)
  auto vv = dx::matmul(v, v);
  CHECK(vv.ndim() == 0);
  expect_matmul(vv, v.reshape(Shape{1, 9}), v.reshape(Shape{9, 1}));
  // strided and reversed vectors
  const auto big = random<T>(Shape{27}, 13);
  const auto sv = big.slice(dx::slice(dx::none, dx::none, -3));  // (9,)
  auto msv = dx::matmul(a, sv);
  expect_matmul(msv, a.view(), sv.reshape(Shape{9, 1}));
  auto wv = dx::matmul(w, a);
  CHECK(wv.shape() == Shape{9});
  expect_matmul(wv, w.reshape(Shape{1, 6}), a.view());
  // mismatched vector lengths
  CHECK_THROWS_AS(dx::matmul(w, b), dx::shape_error);
  CHECK_THROWS_AS(dx::matmul(a, w), dx::shape_error);
  CHECK_THROWS_AS(dx::matmul(v, w), dx::shape_error);
}

TEST_CASE_TEMPLATE("dx::matmul of batched 3-D operands", T, float, double, std::int32_t, std::int64_t) {
  const index_t nb = 3, m = 5, k = 8, n = 6;
  const auto a = random<T>(Shape{nb, m, k}, 14), b = random<T>(Shape{nb, k, n}, 15);
  auto c = dx::matmul(a, b);
  REQUIRE(c.shape() == Shape{nb, m, n});
  for (index_t i = 0; i < nb; ++i) {
    CAPTURE(i);
    expect_matmul(dx::Tensor<T>(c.slice(i).copy()), a.slice(i), b.slice(i));
  }
  // a batch of 1 broadcasts against the other operand's batch, on either side
  const auto a1 = random<T>(Shape{1, m, k}, 16), b1 = random<T>(Shape{1, k, n}, 17);
  auto c1 = dx::matmul(a1, b);
  REQUIRE(c1.shape() == Shape{nb, m, n});
  for (index_t i = 0; i < nb; ++i) expect_matmul(dx::Tensor<T>(c1.slice(i).copy()), a1.slice(0), b.slice(i));
  auto c2 = dx::matmul(a, b1);
  REQUIRE(c2.shape() == Shape{nb, m, n});
  for (index_t i = 0; i < nb; ++i) expect_matmul(dx::Tensor<T>(c2.slice(i).copy()), a.slice(i), b1.slice(0));
  // a 2-D operand acts as a batch of one (np.matmul broadcasting)
  const auto b2 = random<T>(Shape{k, n}, 18);
  auto c3 = dx::matmul(a, b2);
  REQUIRE(c3.shape() == Shape{nb, m, n});
  for (index_t i = 0; i < nb; ++i) expect_matmul(dx::Tensor<T>(c3.slice(i).copy()), a.slice(i), b2.view());
  const auto a2 = random<T>(Shape{m, k}, 19);
  auto c4 = dx::matmul(a2, b);
  REQUIRE(c4.shape() == Shape{nb, m, n});
  for (index_t i = 0; i < nb; ++i) expect_matmul(dx::Tensor<T>(c4.slice(i).copy()), a2.view(), b.slice(i));
  // batched with a vector: (nb, m, k) @ (k,) -> (nb, m)
  const auto v = random<T>(Shape{k}, 20);
  auto c5 = dx::matmul(a, v);
  REQUIRE(c5.shape() == Shape{nb, m});
  for (index_t i = 0; i < nb; ++i)
    expect_matmul(dx::Tensor<T>(c5.slice(i).copy()), a.slice(i), v.reshape(Shape{k, 1}));
  // a transposed batch (strides permuted)
  const auto bt = random<T>(Shape{nb, n, k}, 21);
  const auto btv = bt.permute(Shape{0, 2, 1});
  auto c6 = dx::matmul(a, btv);
  REQUIRE(c6.shape() == Shape{nb, m, n});
  for (index_t i = 0; i < nb; ++i) expect_matmul(dx::Tensor<T>(c6.slice(i).copy()), a.slice(i), btv.slice(i));
  // batches that do not broadcast
  const auto bad = random<T>(Shape{2, k, n}, 22);
  CHECK_THROWS_AS(dx::matmul(a, bad), dx::shape_error);
}

TEST_CASE_TEMPLATE("dx::matmul of expression operands", T, float, double, std::int32_t, std::int64_t) {
  const auto x = random<T>(Shape{7, 11}, 23), y = random<T>(Shape{5, 11}, 24);
  auto c = dx::matmul(x * 2, y.transpose());
  REQUIRE(c.shape() == Shape{7, 5});
  const auto x2 = dx::eval(x * 2);
  expect_matmul(c, x2.view(), y.transpose());
  auto d = dx::matmul(x - 1, dx::abs(y.transpose()) + x.slice(dx::slice(0, 5)).transpose());
  const auto l = dx::eval(x - 1);
  const auto r = dx::eval(dx::abs(y.transpose()) + x.slice(dx::slice(0, 5)).transpose());
  expect_matmul(d, l.view(), r.view());
  // the result feeds further expressions and reductions
  const auto s = dx::sum(dx::matmul(x, y.transpose()), 1);
  CHECK(s.shape() == Shape{7});
}

TEST_CASE("dx::matmul: promoted dtypes and shape errors") {
  const auto i = random<std::int32_t>(Shape{4, 3}, 25);
  const auto f = random<float>(Shape{3, 2}, 26);
  const auto d = random<double>(Shape{3, 2}, 27);
  auto c = dx::matmul(i, f);  // int32 @ float32 -> float64 (np.result_type)
  static_assert(std::is_same_v<decltype(c), dx::Tensor<double>>);
  const auto fi = dx::eval(dx::cast<double>(f));
  const auto ii = dx::eval(dx::cast<double>(i));
  expect_matmul(c, ii.view(), fi.view());
  auto e = dx::matmul(f.transpose(), d);  // float32 @ float64 -> float64
  static_assert(std::is_same_v<decltype(e), dx::Tensor<double>>);
  CHECK(e.shape() == Shape{2, 2});

  // mismatched core dimensions name both shapes
  const auto a = random<float>(Shape{3, 4}, 28), b = random<float>(Shape{5, 6}, 29);
  const std::string m = message_of<dx::shape_error>([&] { (void)dx::matmul(a, b); });
  CHECK(contains(m, "(3, 4)"));
  CHECK(contains(m, "(5, 6)"));
  CHECK_THROWS_AS(dx::matmul(a, a), dx::shape_error);
  // rank 0 and rank 4 operands are rejected
  dx::Tensor<float> s(Shape{});
  dx::Tensor<float> r4(Shape{1, 1, 4, 4});
  CHECK_THROWS_AS(dx::matmul(s, a), dx::shape_error);
  CHECK_THROWS_AS(dx::matmul(r4, a), dx::shape_error);
  // empty results
  const auto z = dx::matmul(dx::Tensor<float>(Shape{3, 0}), dx::Tensor<float>(Shape{0, 2}));
  CHECK(z.shape() == Shape{3, 2});
  for (index_t k = 0; k < z.size(); ++k) CHECK(z.data()[k] == 0.f);
}

// ---------------------------------------------------------------------------------------
// dx::matmul through a BLAS hook (Note [BLAS hook] in dynexpr/interop/blas.hpp) and threaded
// ---------------------------------------------------------------------------------------

namespace {
// A reference CBLAS (row-major only, as dx::matmul calls it) that counts its calls, so the
// tests check both the values and that the BLAS path, not Eigen, computed them.
int blas_calls = 0;
template <class I, class T>
void fake_gemm(int order, int ta, int tb, I m, I n, I k, T alpha, const T* a, I lda, const T* b, I ldb, T beta,
               T* c, I ldc) {
  REQUIRE(order == 101);
  ++blas_calls;
  for (I i = 0; i < m; ++i)
    for (I j = 0; j < n; ++j) {
      double s = 0;
      for (I p = 0; p < k; ++p)
        s += double(ta == 112 ? a[p * lda + i] : a[i * lda + p]) * double(tb == 112 ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * ldc + j] = T(alpha * s + (beta != T(0) ? double(beta) * double(c[i * ldc + j]) : 0.0));  // beta 0: c unread
    }
}
template <class I, class T>
void fake_gemv(int order, int ta, I rows, I cols, T alpha, const T* a, I lda, const T* x, I incx, T beta, T* y,
               I incy) {
  REQUIRE(order == 101);
  ++blas_calls;
  const I len = ta == 112 ? cols : rows, inner = ta == 112 ? rows : cols;
  for (I i = 0; i < len; ++i) {
    double s = 0;
    for (I p = 0; p < inner; ++p) s += double(ta == 112 ? a[p * lda + i] : a[i * lda + p]) * double(x[p * incx]);
    y[i * incy] = T(alpha * s + (beta != T(0) ? double(beta) * double(y[i * incy]) : 0.0));
  }
}
template <class I>
dx::blas::hooks fake_hooks() {
  dx::blas::hooks h;
  h.sgemm = reinterpret_cast<void*>(&fake_gemm<I, float>);
  h.dgemm = reinterpret_cast<void*>(&fake_gemm<I, double>);
  h.sgemv = reinterpret_cast<void*>(&fake_gemv<I, float>);
  h.dgemv = reinterpret_cast<void*>(&fake_gemv<I, double>);
  h.int64 = sizeof(I) == 8;
  return h;
}
struct hook_guard {
  explicit hook_guard(const dx::blas::hooks& h) { dx::blas::set_blas(h); }
  ~hook_guard() { dx::blas::set_blas({}); }
};
}  // namespace

TEST_CASE_TEMPLATE("dx::matmul calls the hooked BLAS for float and double, any layout", T, float, double) {
  for (const bool ilp64 : {false, true}) {
    CAPTURE(ilp64);
    hook_guard g(ilp64 ? fake_hooks<std::int64_t>() : fake_hooks<int>());
    const auto a = random<T>(Shape{40, 30}, 31), b = random<T>(Shape{30, 20}, 32), bt = random<T>(Shape{20, 30}, 33);
    const auto v = random<T>(Shape{30}, 34), w = random<T>(Shape{40}, 35);
    blas_calls = 0;
    expect_matmul(dx::matmul(a, b), a.view(), b.view());                                // gemm N N
    expect_matmul(dx::matmul(a, bt.transpose()), a.view(), bt.transpose());            // gemm N T
    expect_matmul(dx::matmul(bt, a.transpose()), bt.view(), a.transpose());             // gemm N T
    expect_matmul(dx::matmul(b.transpose(), a.transpose()), b.transpose(), a.transpose());  // gemm T T
    CHECK(blas_calls == 4);
    // matrix-vector both ways and with a transposed matrix: gemv
    const auto av = dx::matmul(a, v), at_w = dx::matmul(a.transpose(), w), va = dx::matmul(w, a);
    CHECK(blas_calls == 7);
    expect_matmul(av, a.view(), v.view().reshape(Shape{30, 1}));
    expect_matmul(at_w, a.transpose(), w.view().reshape(Shape{40, 1}));
    expect_matmul(va, w.view().reshape(Shape{1, 40}), a.view());
    // a strided vector and a matrix with two non-unit strides (copied, then BLAS)
    const auto v60 = random<T>(Shape{60}, 36), a80 = random<T>(Shape{80, 60}, 37);
    const auto vs = v60.slice(dx::slice(dx::none, dx::none, 2));
    expect_matmul(dx::matmul(a, vs), a.view(), vs.reshape(Shape{30, 1}));
    const auto as = a80.slice(dx::slice(dx::none, dx::none, 2), dx::slice(dx::none, dx::none, 2));
    expect_matmul(dx::matmul(as, b), as, b.view());
    const auto ar = a.slice(dx::slice(dx::none, dx::none, -1), dx::colon);  // negative stride: copied
    expect_matmul(dx::matmul(ar, b), ar, b.view());
    CHECK(blas_calls == 10);
    // batched: one call per matrix
    const auto a3 = random<T>(Shape{3, 5, 7}, 38), b3 = random<T>(Shape{3, 7, 4}, 39);
    const auto c3 = dx::matmul(a3, b3);
    CHECK(blas_calls == 13);
    for (index_t i = 0; i < 3; ++i)
      expect_matmul(dx::Tensor<T>(c3.view().slice(i).copy()), a3.view().slice(i), b3.view().slice(i));
    // empty products never reach BLAS; integers never do
    const auto e = dx::matmul(random<T>(Shape{3, 0}, 40), random<T>(Shape{0, 4}, 41));
    for (index_t i = 0; i < e.size(); ++i) CHECK(e.data()[i] == T(0));
    (void)dx::matmul(random<std::int32_t>(Shape{4, 3}, 42), random<std::int32_t>(Shape{3, 2}, 43));
    CHECK(blas_calls == 13);
  }
  CHECK(dx::blas::current().dgemm == nullptr);
}

namespace {
// A reference CBLAS syrk (row-major, upper triangle only, as dx::matmul calls it): the lower
// triangle is left as it was, so a result that is right everywhere was mirrored by dx.
int syrk_calls = 0;
template <class I, class T>
void fake_syrk(int order, int uplo, int trans, I n, I k, T alpha, const T* a, I lda, T beta, T* c, I ldc) {
  REQUIRE(order == 101);
  REQUIRE(uplo == 121);
  ++syrk_calls;
  for (I i = 0; i < n; ++i)
    for (I j = i; j < n; ++j) {
      double s = 0;
      for (I p = 0; p < k; ++p)
        s += trans == 112 ? double(a[p * lda + i]) * double(a[p * lda + j])
                          : double(a[i * lda + p]) * double(a[j * lda + p]);
      c[i * ldc + j] = T(alpha * s + (beta != T(0) ? double(beta) * double(c[i * ldc + j]) : 0.0));
    }
}
template <class I>
dx::blas::hooks fake_hooks_with_syrk() {
  dx::blas::hooks h = fake_hooks<I>();
  h.ssyrk = reinterpret_cast<void*>(&fake_syrk<I, float>);
  h.dsyrk = reinterpret_cast<void*>(&fake_syrk<I, double>);
  return h;
}
template <class T>
bool symmetric(const dx::Tensor<T>& c) {
  const index_t n = c.shape()[0];
  for (index_t i = 0; i < n; ++i)
    for (index_t j = 0; j < i; ++j)
      if (c.data()[i * n + j] != c.data()[j * n + i]) return false;
  return true;
}
}  // namespace

// Note [Gram products] in dynexpr/interop/matmul.hpp.
TEST_CASE_TEMPLATE("dx::matmul of a matrix and its own transpose calls syrk", T, float, double) {
  for (const bool ilp64 : {false, true}) {
    CAPTURE(ilp64);
    hook_guard g(ilp64 ? fake_hooks_with_syrk<std::int64_t>() : fake_hooks_with_syrk<int>());
    const auto x = random<T>(Shape{30, 12}, 60);
    const auto big = random<T>(Shape{60, 12}, 61);
    const auto xs = big.slice(dx::slice(dx::none, dx::none, 2), dx::colon);  // (30, 12), row stride 24
    syrk_calls = blas_calls = 0;
    const auto ata = dx::matmul(x.transpose(), x), aat = dx::matmul(x, x.transpose());
    const auto sts = dx::matmul(xs.transpose(), xs), ssT = dx::matmul(xs, xs.transpose());
    CHECK(syrk_calls == 4);
    CHECK(blas_calls == 0);
    expect_matmul(ata, x.transpose(), x.view());
    expect_matmul(aat, x.view(), x.transpose());
    expect_matmul(sts, xs.transpose(), xs);
    expect_matmul(ssT, xs, xs.transpose());
    CHECK((symmetric(ata) && symmetric(aat) && symmetric(sts) && symmetric(ssT)));
    // not the same memory (an equal copy), or accumulating onto c (beta 1): gemm
    const auto copy = dx::Tensor<T>(x.view().copy());
    expect_matmul(dx::matmul(x.transpose(), copy), x.transpose(), copy.view());
    dx::Tensor<T> acc(Shape{12, 12});
    dx::assign(acc.view(), dx::scalar<T>(T(1)));
    dx::matmul_into(acc.view(), x.transpose(), x, T(1), true);
    CHECK(syrk_calls == 4);
    CHECK(blas_calls == 2);
    const auto ref = ref_matmul(x.transpose(), x.view());
    for (index_t i = 0; i < acc.size(); ++i)
      CHECK(double(acc.data()[i]) == doctest::Approx(ref[size_t(i)] + 1).epsilon(1e-4));
  }
  {  // a BLAS without syrk: gemm
    hook_guard g(fake_hooks<int>());
    const auto x = random<T>(Shape{9, 4}, 62);
    syrk_calls = blas_calls = 0;
    expect_matmul(dx::matmul(x.transpose(), x), x.transpose(), x.view());
    CHECK((syrk_calls == 0 && blas_calls == 1));
  }
}

TEST_CASE_TEMPLATE("dx::matmul of a large product splits rows over the pool", T, double, std::int64_t) {
  const int saved = dx::parallel::num_threads();
  dx::parallel::set_num_threads(4);
  const auto a = random<T>(Shape{300, 120}, 44), b = random<T>(Shape{120, 90}, 45);
  expect_matmul(dx::matmul(a, b), a.view(), b.view());
  expect_matmul(dx::matmul(b.transpose(), a.transpose()), b.transpose(), a.transpose());
  const auto v = random<T>(Shape{120}, 46);
  expect_matmul(dx::matmul(a, v), a.view(), v.view().reshape(Shape{120, 1}));
  dx::parallel::set_num_threads(saved);
}

// ---------------------------------------------------------------------------------------
// dx::matmul_into: the product written into its destination, alpha and accumulate
// ---------------------------------------------------------------------------------------

namespace {
// got (any 1-D/2-D shape) == alpha * ref + beta * old, element by element within the bound.
template <class T>
void expect_axpby(const dx::View<T>& got, const std::vector<double>& ref, const std::vector<double>& old,
                  double alpha, double beta) {
  const auto c = dx::Tensor<T>(got.copy());
  REQUIRE(size_t(c.size()) == ref.size());
  for (index_t i = 0; i < c.size(); ++i) {
    const double want = alpha * ref[i] + beta * old[i];
    CHECK(double(c.data()[i]) == doctest::Approx(want).epsilon(std::is_same_v<T, float> ? 1e-4 : 1e-10));
  }
}
template <class T>
std::vector<double> values(const dx::View<T>& v) {
  const auto c = dx::Tensor<std::remove_const_t<T>>(v.copy());
  return std::vector<double>(c.data(), c.data() + c.size());
}
}  // namespace

// A generated unit's float product (Note [matmul without Eigen in units]): the hooked BLAS,
// also for a destination gemm cannot write (through a temporary); the row loop without one.
TEST_CASE_TEMPLATE("detail::unit_product: BLAS for every layout, the row loop without BLAS", T, float, double) {
  const auto a = random<T>(Shape{7, 5}, 70), b = random<T>(Shape{5, 6}, 71);
  const auto ref = ref_matmul(a.view(), b.view());
  for (const bool hooked : {false, true}) {
    CAPTURE(hooked);
    hook_guard g(hooked ? fake_hooks<int>() : dx::blas::hooks{});
    blas_calls = 0;
    // a column-major destination (gemm writes rows), accumulating onto what is there
    dx::Tensor<T> ct(Shape{6, 7});
    const auto c = ct.view().transpose();
    dx::assign(c, dx::scalar<T>(T(2)));
    dx::detail::unit_product<T>(a.view(), b.view(), c, T(3), T(1));
    expect_axpby<T>(c, ref, std::vector<double>(ref.size(), 2.0), 3, 1);
    // a contiguous one, beta 0: its old content (nan here) is not read
    dx::Tensor<T> d(Shape{7, 6});
    dx::assign(d.view(), dx::scalar<T>(std::numeric_limits<T>::quiet_NaN()));
    dx::detail::unit_product<T>(a.view(), b.view(), d.view(), T(1), T(0));
    expect_axpby<T>(d.view(), ref, std::vector<double>(ref.size(), 0.0), 1, 0);
    CHECK(blas_calls == (hooked ? 2 : 0));
  }
  // the row loop keeps IEEE products: a zero times an infinity is nan, as in NumPy
  dx::Tensor<T> z(Shape{1, 2}), inf(Shape{2, 1}), out(Shape{1, 1});
  dx::assign(z.view(), dx::scalar<T>(T(0)));
  dx::assign(inf.view(), dx::scalar<T>(std::numeric_limits<T>::infinity()));
  dx::detail::unit_product<T>(z.view(), inf.view(), out.view(), T(1), T(0));
  CHECK(std::isnan(out.data()[0]));
}

TEST_CASE_TEMPLATE("dx::matmul_into: alpha, accumulate, strided and overlapping destinations", T, float, double,
                   std::int64_t) {
  for (const bool hooked : {false, true}) {
    CAPTURE(hooked);
    hook_guard g(hooked ? fake_hooks<int>() : dx::blas::hooks{});
    const auto a = random<T>(Shape{6, 5}, 50), b = random<T>(Shape{5, 4}, 51), v = random<T>(Shape{5}, 52);
    const auto ref = ref_matmul(a.view(), b.view());
    const std::vector<double> zeros(ref.size(), 0.0);
    // fresh contiguous destination, alpha = 3
    dx::Tensor<T> c(Shape{6, 4});
    dx::matmul_into(c.view(), a, b, T(3));
    expect_axpby<T>(c.view(), ref, zeros, 3, 0);
    // accumulate onto what is there (the unit writes beta * C first)
    const auto old = values(c.view());
    dx::matmul_into(c.view(), a, b, T(2), true);
    expect_axpby<T>(c.view(), ref, old, 2, 1);
    // a destination with a row stride (every other row of a bigger tensor) and a transposed one
    dx::Tensor<T> big(Shape{12, 4});
    const auto rows = big.view().slice(dx::slice(dx::none, dx::none, 2), dx::colon);
    dx::matmul_into(rows, a, b);
    expect_axpby<T>(rows, ref, zeros, 1, 0);
    dx::Tensor<T> ct(Shape{4, 6});
    const auto ctt = ct.view().transpose();
    dx::matmul_into(ctt, a, b);
    expect_axpby<T>(ctt, ref, zeros, 1, 0);
    // matrix-vector into a strided vector, with accumulate
    dx::Tensor<T> y(Shape{12});
    const auto ys = y.view().slice(dx::slice(dx::none, dx::none, 2));
    dx::assign(ys, dx::scalar<T>(T(1)));
    dx::matmul_into(ys, a, v, T(1), true);
    expect_axpby<T>(ys, ref_matmul(a.view(), v.view().reshape(Shape{5, 1})), std::vector<double>(6, 1.0), 1, 1);
    // destination overlapping an operand: x = A x (square), computed through a temporary
    auto sq = random<T>(Shape{5, 5}, 53);
    auto x = dx::Tensor<T>(v.view().copy());
    const auto want = ref_matmul(sq.view(), x.view().reshape(Shape{5, 1}));
    dx::matmul_into(x.view(), sq, x);
    expect_axpby<T>(x.view(), want, std::vector<double>(5, 0.0), 1, 0);
    // a shape that is not the product's names both
    dx::Tensor<T> wrong(Shape{6, 5});
    const std::string m = message_of<dx::shape_error>([&] { dx::matmul_into(wrong.view(), a, b); });
    CHECK(contains(m, "(6, 4)"));
    CHECK(contains(m, "(6, 5)"));
  }
}
