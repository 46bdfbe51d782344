// Tests of pointwise evaluation (eval/assign.hpp): every result is compared with a plain
// scalar loop computing the same formula in the same type. Formulas are chosen so that
// each element has one correctly rounded answer (x * 2 + y is exact before its one
// rounding); where the library contracts a * b + c into a fused multiply-add (Note [fma
// contraction]) the reference is std::fma, and one case also checks the 1-ulp bound
// against NumPy's two roundings. Aliasing cases follow NumPy's setitem semantics
// (`x[1:] = x[:-1] + 0` reads every element before writing), NaN/inf follow NumPy.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "dynexpr/dynexpr.hpp"

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

#define DX_NUMERIC_DTYPES std::uint8_t, std::int32_t, std::int64_t, float, double
#define DX_FLOAT_DTYPES float, double

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

// Deterministic test data: floats with two decimals in [-8, 8], ints in [-100, 100],
// uint8 over its whole range, bools with about one in three true.
template <class T>
T value_for(index_t i, unsigned seed) {
  const std::uint64_t h = (static_cast<std::uint64_t>(i) + 1) * 2654435761u + seed * 40503u;
  const auto k = static_cast<std::int64_t>((h >> 7) % 1601);
  if constexpr (std::is_same_v<T, bool>) return k % 3 == 0;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return static_cast<T>(k % 256);
  else if constexpr (std::is_integral_v<T>) return static_cast<T>(k % 201 - 100);
  else return static_cast<T>(k - 800) / T(100);
}

template <class T>
void fill(dx::Tensor<T>& t, unsigned seed) {
  for (index_t i = 0; i < t.size(); ++i) t.data()[i] = value_for<T>(i, seed);
}
template <class T>
dx::Tensor<T> random(const Shape& s, unsigned seed) {
  dx::Tensor<T> t(s);
  fill(t, seed);
  return t;
}

// Calls f(idx) for every multi-index of shape s in C order.
template <class F>
void for_each_index(const Shape& s, F&& f) {
  const index_t n = dx::shape_size(s);
  std::vector<index_t> idx(static_cast<std::size_t>(s.size()), 0);
  for (index_t i = 0; i < n; ++i) {
    f(idx);
    for (int k = s.size() - 1; k >= 0; --k) {
      if (++idx[k] < s[k]) break;
      idx[k] = 0;
    }
  }
}

// Element of v at the multi-index `out` of a broadcast result (NumPy alignment from the
// right; size-1 dimensions read index 0).
template <class T>
std::remove_const_t<T> at_b(const dx::View<T>& v, const std::vector<index_t>& out) {
  const int off = static_cast<int>(out.size()) - v.ndim();
  index_t p = 0;
  for (int k = 0; k < v.ndim(); ++k) {
    const index_t i = v.shape()[k] == 1 ? 0 : out[off + k];
    p += i * v.strides()[k];
  }
  return v.data()[p];
}
template <class T>
T at_b(const dx::Tensor<T>& t, const std::vector<index_t>& out) {
  return at_b(t.view(), out);
}

template <class T>
bool same_value(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    if (std::isnan(a) && std::isnan(b)) return true;
  return a == b;
}

// Checks got == ref(idx) for every element; reports the first few mismatches.
template <class T, class F>
void expect_elements(const dx::View<T>& got, const Shape& shape, F&& ref) {
  REQUIRE(got.shape() == shape);
  int bad = 0;
  for_each_index(shape, [&](const std::vector<index_t>& idx) {
    const auto g = at_b(got, idx);
    const auto w = static_cast<std::remove_const_t<T>>(ref(idx));
    if (!same_value(g, w) && bad++ < 5) {
      std::string where = "(";
      for (index_t i : idx) where += std::to_string(i) + ",";
      CAPTURE(where);
      CHECK(+g == +w);  // unary + prints uint8/bool as numbers
    }
  });
  CHECK(bad == 0);
}
template <class T, class F>
void expect_elements(const dx::Tensor<T>& got, const Shape& shape, F&& ref) {
  expect_elements(got.view(), shape, std::forward<F>(ref));
}

// a * b + c as the library evaluates it: one rounding for floats (contracted), wrapping
// for integers.
template <class T>
T mul_add(T a, T b, T c) {
  if constexpr (std::is_floating_point_v<T>) return std::fma(a, b, c);
  else return static_cast<T>(a * b + c);
}

template <class T>
bool bitwise_equal(const dx::Tensor<T>& a, const dx::Tensor<T>& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Restores the pool size when a test that changes it ends (even by a failed REQUIRE).
struct thread_count_guard {
  int saved = dx::parallel::num_threads();
  ~thread_count_guard() { dx::parallel::set_num_threads(saved); }
};

const index_t lengths[] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
                           16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31,
                           32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47,
                           48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63,
                           64, 65, 66, 67, 68, 69, 70, 1023, 1025, 4097};

}  // namespace

// ---------------------------------------------------------------------------------------
// Contiguous evaluation over many lengths
// ---------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("eval: contiguous arithmetic at every length", T, DX_NUMERIC_DTYPES) {
  for (index_t n : lengths) {
    CAPTURE(n);
    const auto x = random<T>(Shape{n}, 1), y = random<T>(Shape{n}, 2);
    // x * 2 + y: exact product, one rounding (also when contracted)
    dx::Tensor<T> z = x * 2 + y;
    expect_elements(z, Shape{n}, [&](const auto& i) {
      return static_cast<T>(x.data()[i[0]] * T(2) + y.data()[i[0]]);
    });
    // a contracted product of two arrays, then more ops
    dx::Tensor<T> w = dx::maximum(x, y) * y + dx::minimum(x, T(3)) - y;
    expect_elements(w, Shape{n}, [&](const auto& i) {
      const T a = x.data()[i[0]], b = y.data()[i[0]];
      return static_cast<T>(mul_add(std::max(a, b), b, std::min(a, T(3))) - b);
    });
    // dx::eval and assignment into an existing tensor give the same values
    auto e = dx::eval(x * 2 + y);
    static_assert(std::is_same_v<decltype(e), dx::Tensor<T>>);
    CHECK(bitwise_equal(e, z));
    dx::Tensor<T> out(Shape{n});
    dx::assign(out, x * 2 + y);
    CHECK(bitwise_equal(out, z));
  }
}

TEST_CASE_TEMPLATE("eval: float functions at every length", T, DX_FLOAT_DTYPES) {
  for (index_t n : lengths) {
    CAPTURE(n);
    const auto x = random<T>(Shape{n}, 3), y = random<T>(Shape{n}, 4);
    // exact ops only: abs, neg, sqrt (correctly rounded), division, floor, square of a
    // 2-decimal value is not exact, so it is left out.
    dx::Tensor<T> z = dx::sqrt(dx::abs(x)) / (y - T(9)) + dx::floor(-x);
    expect_elements(z, Shape{n}, [&](const auto& i) {
      const T a = x.data()[i[0]], b = y.data()[i[0]];
      return std::sqrt(std::abs(a)) / (b - T(9)) + std::floor(-a);
    });
    dx::Tensor<T> c = dx::clip(x, T(-2), T(2.5));
    expect_elements(c, Shape{n}, [&](const auto& i) {
      return std::min(std::max(x.data()[i[0]], T(-2)), T(2.5));
    });
  }
}

TEST_CASE("eval: bool expressions at every length") {
  for (index_t n : lengths) {
    CAPTURE(n);
    const auto x = random<float>(Shape{n}, 5), y = random<float>(Shape{n}, 6);
    const auto b = random<bool>(Shape{n}, 7), c = random<bool>(Shape{n}, 8);
    dx::Tensor<bool> r = dx::logical_or(dx::logical_and(x < y, !b), dx::logical_xor(b, c));
    expect_elements(r, Shape{n}, [&](const auto& i) {
      const auto k = i[0];
      return (x.data()[k] < y.data()[k] && !b.data()[k]) || (b.data()[k] != c.data()[k]);
    });
    dx::Tensor<bool> s = (b & c) | (~(x >= 0.5f) ^ c);
    expect_elements(s, Shape{n}, [&](const auto& i) {
      const auto k = i[0];
      const bool bc = b.data()[k] && c.data()[k];
      return bc || ((!(x.data()[k] >= 0.5f)) != c.data()[k]);
    });
    // bools in arithmetic (as 0/1) and as a where() condition
    dx::Tensor<float> f = dx::where(b, x, y * 2.f) + c;
    expect_elements(f, Shape{n}, [&](const auto& i) {
      const auto k = i[0];
      return (b.data()[k] ? x.data()[k] : y.data()[k] * 2.f) + (c.data()[k] ? 1.f : 0.f);
    });
    // int8/uint8 and int64 lanes in one tree
    const auto u = random<std::uint8_t>(Shape{n}, 9);
    const auto l = random<std::int64_t>(Shape{n}, 10);
    dx::Tensor<std::int64_t> m = dx::where(u > 100, l, l * 3) + b;
    expect_elements(m, Shape{n}, [&](const auto& i) {
      const auto k = i[0];
      return (u.data()[k] > 100 ? l.data()[k] : l.data()[k] * 3) + (b.data()[k] ? 1 : 0);
    });
  }
}

TEST_CASE_TEMPLATE("eval: integer division, modulo and shifts follow NumPy", T, std::int32_t,
                   std::int64_t) {
  // np.floor_divide / np.remainder round toward -inf, x // 0 == 0 and x % 0 == 0
  for (index_t n : {index_t{7}, index_t{64}, index_t{1025}}) {
    const auto x = random<T>(Shape{n}, 11), y = random<T>(Shape{n}, 12);
    dx::Tensor<T> q = dx::floor_divide(x, y), r = x % y;
    expect_elements(q, Shape{n}, [&](const auto& i) {
      const T a = x.data()[i[0]], b = y.data()[i[0]];
      if (b == 0) return T(0);
      T d = a / b;
      if ((a % b != 0) && ((a < 0) != (b < 0))) --d;
      return d;
    });
    expect_elements(r, Shape{n}, [&](const auto& i) {
      const T a = x.data()[i[0]], b = y.data()[i[0]];
      if (b == 0) return T(0);
      T m = a % b;
      if (m != 0 && ((m < 0) != (b < 0))) m += b;
      return m;
    });
  }
  dx::Tensor<T> v(Shape{4});
  v.at(0) = 1;
  v.at(1) = -8;
  v.at(2) = 5;
  v.at(3) = -1;
  dx::Tensor<T> s(Shape{4});
  s.at(0) = 3;
  s.at(1) = 1;
  s.at(2) = static_cast<T>(sizeof(T) * 8);
  s.at(3) = 70;
  dx::Tensor<T> l = v << s, rr = v >> s;
  CHECK(l.at(0) == 8);
  CHECK(l.at(1) == -16);
  CHECK(l.at(2) == 0);   // shift >= width gives 0
  CHECK(l.at(3) == 0);
  CHECK(rr.at(0) == 0);
  CHECK(rr.at(1) == -4);
  CHECK(rr.at(2) == 0);
  CHECK(rr.at(3) == -1);  // negative shifted right past its width gives -1
}

// ---------------------------------------------------------------------------------------
// Broadcasting
// ---------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("eval: every kind of broadcasting", T, DX_NUMERIC_DTYPES) {
  struct bcase {
    Shape a, b, out;
  };
  const bcase cases[] = {
      {Shape{5, 1}, Shape{1, 7}, Shape{5, 7}},
      {Shape{13}, Shape{6, 13}, Shape{6, 13}},
      {Shape{6, 13}, Shape{13}, Shape{6, 13}},
      {Shape{6, 1}, Shape{6, 40}, Shape{6, 40}},
      {Shape{1, 4, 1}, Shape{3, 1, 37}, Shape{3, 4, 37}},
      {Shape{2, 3, 1, 5}, Shape{4, 1}, Shape{2, 3, 4, 5}},
      {Shape{1, 1}, Shape{9, 33}, Shape{9, 33}},
      {Shape{}, Shape{4, 17}, Shape{4, 17}},
      {Shape{3, 70}, Shape{}, Shape{3, 70}},
      {Shape{1}, Shape{129}, Shape{129}},
      {Shape{1, 1, 1}, Shape{1}, Shape{1, 1, 1}},
      {Shape{0, 1}, Shape{1, 5}, Shape{0, 5}},
      {Shape{2, 1, 3}, Shape{2, 0, 1}, Shape{2, 0, 3}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.a);
    CAPTURE(c.b);
    const auto a = random<T>(c.a, 13), b = random<T>(c.b, 14);
    auto z = dx::eval(a * 2 + b);
    CHECK(z.shape() == c.out);
    expect_elements(z, c.out, [&](const auto& i) {
      return static_cast<T>(at_b(a, i) * T(2) + at_b(b, i));
    });
    auto w = dx::eval(b - a);
    expect_elements(w, c.out, [&](const auto& i) { return static_cast<T>(at_b(b, i) - at_b(a, i)); });
  }
  // weak scalars, strong scalars and rank-0 tensors
  const auto x = random<T>(Shape{5, 11}, 15);
  dx::Tensor<T> s0(Shape{}, T(3));
  dx::Tensor<T> r1 = x + s0, r2 = x + 3, r3 = x + dx::scalar<T>(3), r4 = s0 * x, r5 = 3 + x;
  for (const auto* r : {&r1, &r2, &r3, &r5})
    expect_elements(*r, Shape{5, 11}, [&](const auto& i) { return static_cast<T>(at_b(x, i) + T(3)); });
  expect_elements(r4, Shape{5, 11}, [&](const auto& i) { return static_cast<T>(T(3) * at_b(x, i)); });
  // two rank-0 operands give a rank-0 result
  dx::Tensor<T> t0(Shape{}, T(2));
  auto r0 = dx::eval(s0 * t0 + 1);
  CHECK(r0.ndim() == 0);
  CHECK(r0.at() == T(7));
  // the output broadcasts nothing, the expression broadcasts into it
  dx::Tensor<T> big(Shape{4, 5, 6});
  const auto row = random<T>(Shape{6}, 16);
  dx::assign(big, row + 1);
  expect_elements(big, Shape{4, 5, 6}, [&](const auto& i) { return static_cast<T>(at_b(row, i) + 1); });
  dx::assign(big, dx::scalar<T>(7));
  expect_elements(big, Shape{4, 5, 6}, [&](const auto&) { return T(7); });
}

TEST_CASE_TEMPLATE("eval: short rows against a repeated row (Note [short rows])", T,
                   DX_NUMERIC_DTYPES) {
  // (rows, inner) against a row of `inner` elements repeated along the rows, a scalar and a
  // column: the super-row loop for the first three, plain rows for the column and for the
  // rows left over; row counts that leave a remainder, and enough elements for the pool.
  const index_t inners[] = {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 24, 31, 33, 48, 63, 64, 65, 100, 127,
                            255, 256, 300};
  for (const index_t inner : inners) {
    for (const index_t rows : {index_t{1}, index_t{3}, index_t{37}, index_t{1001},
                               200003 / inner + 1}) {
      CAPTURE(inner);
      CAPTURE(rows);
      const Shape shape{rows, inner};
      const auto x = random<T>(shape, 61);
      const auto w = random<T>(Shape{inner}, 62);
      const auto w2 = random<T>(Shape{1, inner}, 63);
      const auto col = random<T>(Shape{rows, 1}, 64);
      expect_elements(dx::eval(x * 2 + w), shape, [&](const auto& i) {
        return mul_add(at_b(x, i), T(2), at_b(w, i));
      });
      expect_elements(dx::eval(w2 - x + 3), shape, [&](const auto& i) {
        return static_cast<T>(static_cast<T>(at_b(w2, i) - at_b(x, i)) + T(3));
      });
      expect_elements(dx::eval(dx::where(x > w, x - w, w2)), shape, [&](const auto& i) {
        return at_b(x, i) > at_b(w, i) ? static_cast<T>(at_b(x, i) - at_b(w, i)) : at_b(w2, i);
      });
      expect_elements(dx::eval(x - w + col), shape, [&](const auto& i) {
        return static_cast<T>(static_cast<T>(at_b(x, i) - at_b(w, i)) + at_b(col, i));
      });
      // into an existing contiguous tensor, and into every other column of a wider one
      dx::Tensor<T> out(shape);
      dx::assign(out, w - x);
      expect_elements(out, shape, [&](const auto& i) {
        return static_cast<T>(at_b(w, i) - at_b(x, i));
      });
      dx::Tensor<T> wide(Shape{rows, 2 * inner}, T(0));
      dx::assign(wide.slice(dx::colon, dx::slice(dx::none, dx::none, 2)), x + w);
      expect_elements(wide.slice(dx::colon, dx::slice(dx::none, dx::none, 2)), shape,
                      [&](const auto& i) { return static_cast<T>(at_b(x, i) + at_b(w, i)); });
    }
  }
}

TEST_CASE("eval: short rows give the same bits on 1, 2 and 3 threads") {
  thread_count_guard guard;
  const auto x = random<float>(Shape{300001, 8}, 65);
  const auto c = random<float>(Shape{1, 8}, 66), s = random<float>(Shape{8}, 67);
  auto f = [&] { return dx::eval(dx::exp(x - c) / (s * s + 1.f)); };
  dx::parallel::set_num_threads(1);
  const auto r1 = f();
  dx::parallel::set_num_threads(2);
  const auto r2 = f();
  dx::parallel::set_num_threads(3);
  const auto r3 = f();
  CHECK(bitwise_equal(r1, r2));
  CHECK(bitwise_equal(r1, r3));
  for (index_t i = 0; i < 300001; i += 997)
    for (index_t j = 0; j < 8; ++j) {
      const double want = std::exp(double(x.at(i, j)) - c.at(0, j)) / (double(s.at(j)) * s.at(j) + 1);
      CHECK(std::abs(r1.at(i, j) - want) <= 1e-5 * std::abs(want));
    }
}

TEST_CASE("eval: a broadcast mismatch names both shapes") {
  dx::Tensor<float> a(Shape{3, 4}), b(Shape{5}), c(Shape{4, 3});
  {
    const std::string m = message_of<dx::shape_error>([&] { (void)dx::eval(a + b); });
    CHECK(contains(m, "(3, 4)"));
    CHECK(contains(m, "(5,)"));
  }
  {
    const std::string m = message_of<dx::shape_error>([&] { dx::Tensor<float> z = a * 2.f + b; });
    CHECK(contains(m, "(3, 4)"));
    CHECK(contains(m, "(5,)"));
  }
  {
    const std::string m = message_of<dx::shape_error>([&] { dx::assign(a, c + 1.f); });
    CHECK(contains(m, "(4, 3)"));
    CHECK(contains(m, "(3, 4)"));
  }
  // the output never broadcasts: (3, 4) does not fit into (4,) nor (1, 4)
  dx::Tensor<float> r(Shape{4}), r1(Shape{1, 4});
  CHECK_THROWS_AS(dx::assign(r, a + 1.f), dx::shape_error);
  CHECK_THROWS_AS(dx::assign(r1, a + 1.f), dx::shape_error);
  // an empty operand does not broadcast against a non-empty, non-1 one
  dx::Tensor<float> e(Shape{0}), t2(Shape{2});
  CHECK_THROWS_AS(dx::eval(e + t2), dx::shape_error);
  CHECK(contains(message_of<dx::shape_error>([&] { dx::assign(t2, e + 1.f); }), "(0,)"));
  // a size mismatch inside a longer tree
  dx::Tensor<float> d(Shape{2, 3, 4});
  CHECK_THROWS_AS(dx::eval(dx::exp(d) * (c - 1.f)), dx::shape_error);
}

// ---------------------------------------------------------------------------------------
// Strided, transposed and reversed views as inputs and outputs
// ---------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("eval: strided, transposed and reversed inputs", T, DX_NUMERIC_DTYPES) {
  const auto A = random<T>(Shape{9, 150}, 17), B = random<T>(Shape{150, 9}, 18);
  const auto C = random<T>(Shape{9, 50}, 19);
  const dx::View<const T> views_a[] = {
      A.slice(dx::colon, dx::slice(dx::none, dx::none, 3)),             // (9, 50) inner stride 3
      A.slice(dx::slice(dx::none, dx::none, -1), dx::slice(100, dx::none)),  // reversed rows
      A.slice(dx::colon, dx::slice(149, dx::none, -3)),                 // negative inner stride
      B.slice(dx::slice(dx::none, 50)).transpose(),                     // (9, 50) transposed
      B.transpose().slice(dx::colon, dx::slice(dx::none, dx::none, -3)),
      C.view(),
  };
  for (const auto& u : views_a)
    for (const auto& v : views_a) {
      CAPTURE(u.strides());
      CAPTURE(v.strides());
      auto z = dx::eval(u * 2 + v);
      expect_elements(z, Shape{9, 50}, [&](const auto& i) {
        return static_cast<T>(at_b(u, i) * T(2) + at_b(v, i));
      });
    }
  // a strided row broadcast against a transposed matrix
  const auto row = A.slice(3, dx::slice(dx::none, dx::none, -3));  // (50,) stride -3
  auto z = dx::eval(B.slice(dx::slice(dx::none, 50)).transpose() - row);
  expect_elements(z, Shape{9, 50}, [&](const auto& i) {
    return static_cast<T>(B.at(i[1], i[0]) - row.at(i[1]));
  });
}

TEST_CASE_TEMPLATE("eval: strided, transposed and reversed outputs", T, DX_NUMERIC_DTYPES) {
  const auto x = random<T>(Shape{9, 50}, 20), y = random<T>(Shape{50}, 21);
  const T sentinel = static_cast<T>(77);
  auto outputs = [&](dx::Tensor<T>& buf) -> std::vector<dx::View<T>> {
    return {
        buf.slice(dx::slice(0, 9), dx::slice(dx::none, 150, 3)),
        buf.slice(dx::slice(8, dx::none, -1), dx::slice(dx::none, 50)),
        buf.slice(dx::slice(0, 9), dx::slice(149, dx::none, -3)),
        buf.slice(dx::slice(dx::none, 50)).transpose().slice(dx::colon, dx::colon),
    };
  };
  for (int k = 0; k < 4; ++k) {
    CAPTURE(k);
    dx::Tensor<T> buf(k == 3 ? Shape{150, 9} : Shape{9, 150}, sentinel);
    dx::View<T> out = outputs(buf)[static_cast<std::size_t>(k)];
    REQUIRE(out.shape() == Shape{9, 50});
    dx::assign(out, x * 2 + y);
    expect_elements(out, Shape{9, 50}, [&](const auto& i) {
      return static_cast<T>(at_b(x, i) * T(2) + at_b(y, i));
    });
    // everything outside the view is untouched
    dx::Tensor<T> mark(buf.shape(), T(0));
    dx::assign(outputs(mark)[static_cast<std::size_t>(k)], dx::scalar<T>(1));
    index_t touched = 0, clobbered = 0;
    for (index_t i = 0; i < buf.size(); ++i) {
      touched += mark.data()[i] == T(1);
      if (mark.data()[i] == T(0) && buf.data()[i] != sentinel) ++clobbered;
    }
    CHECK(touched == 9 * 50);
    CHECK(clobbered == 0);
    // a strided output from strided inputs
    dx::assign(out, x.transpose().transpose() - out);
    expect_elements(out, Shape{9, 50}, [&](const auto& i) {
      return static_cast<T>(at_b(x, i) - static_cast<T>(at_b(x, i) * T(2) + at_b(y, i)));
    });
  }
}

// ---------------------------------------------------------------------------------------
// Empty tensors
// ---------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("eval: empty tensors as inputs and outputs", T, DX_NUMERIC_DTYPES) {
  for (const Shape& s : {Shape{0}, Shape{3, 0}, Shape{0, 4}, Shape{2, 0, 5}}) {
    CAPTURE(s);
    const dx::Tensor<T> a(s), b(s);
    auto z = dx::eval(a * 2 + b);
    CHECK(z.shape() == s);
    CHECK(z.size() == 0);
    dx::Tensor<T> w = a - b;
    CHECK(w.shape() == s);
    dx::Tensor<T> o(s);
    CHECK_NOTHROW(dx::assign(o, a + 1));
  }
  // broadcasting with a 0-length dimension
  const dx::Tensor<T> e(Shape{0, 1}), r = random<T>(Shape{1, 6}, 22);
  CHECK(dx::eval(e + r).shape() == Shape{0, 6});
  CHECK(dx::eval(dx::Tensor<T>(Shape{1}) + dx::Tensor<T>(Shape{0})).shape() == Shape{0});
  // an empty slice of a real tensor as output, and as input
  auto full = random<T>(Shape{5}, 23);
  const auto before = full;
  dx::assign(full.slice(dx::slice(3, 3)), full.slice(dx::slice(4, 1)) * 2);
  CHECK(bitwise_equal(full, before));
  dx::assign(full.slice(dx::slice(2, 2)), dx::scalar<T>(9));
  CHECK(bitwise_equal(full, before));
}

// ---------------------------------------------------------------------------------------
// Mixed dtypes, comparisons, casts
// ---------------------------------------------------------------------------------------

TEST_CASE("eval: mixed-dtype expressions promote as NumPy 2") {
  const index_t n = 37;
  const auto f = random<float>(Shape{n}, 24);
  const auto d = random<double>(Shape{n}, 25);
  const auto i = random<std::int32_t>(Shape{n}, 26);
  const auto l = random<std::int64_t>(Shape{n}, 27);
  const auto u = random<std::uint8_t>(Shape{n}, 28);
  const auto b = random<bool>(Shape{n}, 29);

  auto fd = dx::eval(f + d);
  static_assert(std::is_same_v<decltype(fd), dx::Tensor<double>>);
  expect_elements(fd, Shape{n}, [&](const auto& k) { return double(f.data()[k[0]]) + d.data()[k[0]]; });

  auto i_f = dx::eval(i + f);  // int32 + float32 -> float64
  static_assert(std::is_same_v<decltype(i_f), dx::Tensor<double>>);
  expect_elements(i_f, Shape{n}, [&](const auto& k) { return double(i.data()[k[0]]) + double(f.data()[k[0]]); });

  auto u_f = dx::eval(u * f);  // uint8 * float32 -> float32
  static_assert(std::is_same_v<decltype(u_f), dx::Tensor<float>>);
  expect_elements(u_f, Shape{n}, [&](const auto& k) { return float(u.data()[k[0]]) * f.data()[k[0]]; });

  auto u_i = dx::eval(u - i);  // uint8 - int32 -> int32
  static_assert(std::is_same_v<decltype(u_i), dx::Tensor<std::int32_t>>);
  expect_elements(u_i, Shape{n}, [&](const auto& k) { return std::int32_t(u.data()[k[0]]) - i.data()[k[0]]; });

  auto i_l = dx::eval(i * l);
  static_assert(std::is_same_v<decltype(i_l), dx::Tensor<std::int64_t>>);
  expect_elements(i_l, Shape{n}, [&](const auto& k) { return std::int64_t(i.data()[k[0]]) * l.data()[k[0]]; });

  auto l_d = dx::eval(l - d);
  static_assert(std::is_same_v<decltype(l_d), dx::Tensor<double>>);
  expect_elements(l_d, Shape{n}, [&](const auto& k) { return double(l.data()[k[0]]) - d.data()[k[0]]; });

  // bool in arithmetic: 0/1 of the other operand's type
  auto b_i = dx::eval(b + i);
  static_assert(std::is_same_v<decltype(b_i), dx::Tensor<std::int32_t>>);
  expect_elements(b_i, Shape{n}, [&](const auto& k) { return std::int32_t(b.data()[k[0]]) + i.data()[k[0]]; });
  auto b_f = dx::eval(f * b);
  static_assert(std::is_same_v<decltype(b_f), dx::Tensor<float>>);
  expect_elements(b_f, Shape{n}, [&](const auto& k) { return b.data()[k[0]] ? f.data()[k[0]] : 0.f; });
  auto b1 = dx::eval(b + 1);  // bool array + Python int -> int64
  static_assert(std::is_same_v<decltype(b1), dx::Tensor<std::int64_t>>);
  expect_elements(b1, Shape{n}, [&](const auto& k) { return std::int64_t(b.data()[k[0]]) + 1; });
  auto b15 = dx::eval(b * 1.5);  // bool * Python float -> float64
  static_assert(std::is_same_v<decltype(b15), dx::Tensor<double>>);
  expect_elements(b15, Shape{n}, [&](const auto& k) { return b.data()[k[0]] ? 1.5 : 0.0; });

  // weak scalars keep the array's dtype within its kind
  static_assert(std::is_same_v<decltype(dx::eval(f * 2.0)), dx::Tensor<float>>);
  static_assert(std::is_same_v<decltype(dx::eval(u + 1)), dx::Tensor<std::uint8_t>>);
  static_assert(std::is_same_v<decltype(dx::eval(i * 2.5)), dx::Tensor<double>>);
  static_assert(std::is_same_v<decltype(dx::eval(f * dx::scalar<double>(2))), dx::Tensor<double>>);
  auto i25 = dx::eval(i * 2.5);
  expect_elements(i25, Shape{n}, [&](const auto& k) { return double(i.data()[k[0]]) * 2.5; });
  auto u1 = dx::eval(u + 1);  // wraps at 256 as NumPy's uint8
  expect_elements(u1, Shape{n}, [&](const auto& k) { return std::uint8_t(u.data()[k[0]] + 1); });
  CHECK_THROWS_AS((void)(u + 300), dx::value_error);  // out of range for uint8 (NumPy 2)
  CHECK_THROWS_AS((void)(i + (std::int64_t{1} << 40)), dx::value_error);  // int32

  // where: the condition may be any dtype; the branches promote
  auto wf = dx::eval(dx::where(b, i, f));
  static_assert(std::is_same_v<decltype(wf), dx::Tensor<double>>);
  expect_elements(wf, Shape{n}, [&](const auto& k) {
    return b.data()[k[0]] ? double(i.data()[k[0]]) : double(f.data()[k[0]]);
  });
  auto wi = dx::eval(dx::where(i, u, 0));  // int condition: non-zero is true
  static_assert(std::is_same_v<decltype(wi), dx::Tensor<std::uint8_t>>);
  expect_elements(wi, Shape{n}, [&](const auto& k) { return i.data()[k[0]] != 0 ? u.data()[k[0]] : std::uint8_t(0); });
  auto wb = dx::eval(dx::where(f > 0.f, b, !b));  // bool branches give bool
  static_assert(std::is_same_v<decltype(wb), dx::Tensor<bool>>);
  expect_elements(wb, Shape{n}, [&](const auto& k) { return f.data()[k[0]] > 0.f ? b.data()[k[0]] : !b.data()[k[0]]; });
}

TEST_CASE("eval: comparisons give bool tensors that feed where and logical ops") {
  const index_t n = 101;
  const auto f = random<float>(Shape{n}, 30);
  const auto d = random<double>(Shape{n}, 31);
  const auto i = random<std::int32_t>(Shape{n}, 32);
  const auto u = random<std::uint8_t>(Shape{n}, 33);
  const auto l = random<std::int64_t>(Shape{n}, 34);

  auto lt = dx::eval(f < d);
  static_assert(std::is_same_v<decltype(lt), dx::Tensor<bool>>);
  expect_elements(lt, Shape{n}, [&](const auto& k) { return double(f.data()[k[0]]) < d.data()[k[0]]; });
  dx::Tensor<bool> eq = i == u, ne = i != 3, gt = f > i, le = d <= 0.25, ge = u >= i, ile = i <= l;
  expect_elements(eq, Shape{n}, [&](const auto& k) { return i.data()[k[0]] == std::int32_t(u.data()[k[0]]); });
  expect_elements(ne, Shape{n}, [&](const auto& k) { return i.data()[k[0]] != 3; });
  expect_elements(ge, Shape{n}, [&](const auto& k) { return std::int32_t(u.data()[k[0]]) >= i.data()[k[0]]; });
  expect_elements(ile, Shape{n}, [&](const auto& k) { return i.data()[k[0]] <= l.data()[k[0]]; });
  expect_elements(gt, Shape{n}, [&](const auto& k) { return double(f.data()[k[0]]) > double(i.data()[k[0]]); });
  expect_elements(le, Shape{n}, [&](const auto& k) { return d.data()[k[0]] <= 0.25; });

  // int32 vs float32 compares in float64, as NumPy: 16777217 > float(16777216)
  dx::Tensor<std::int32_t> big(Shape{3}, 16777217);
  dx::Tensor<float> fbig(Shape{3}, 16777216.f);
  dx::Tensor<bool> g = big > fbig;
  CHECK(g.at(0));
  CHECK(g.at(2));

  dx::Tensor<float> w = dx::where(dx::logical_and(lt, !(i > 0)), f, -f);
  expect_elements(w, Shape{n}, [&](const auto& k) {
    const bool c = double(f.data()[k[0]]) < d.data()[k[0]] && !(i.data()[k[0]] > 0);
    return c ? f.data()[k[0]] : -f.data()[k[0]];
  });
  dx::Tensor<std::int64_t> cnt = dx::cast<std::int64_t>(lt) + (i > 0) + eq;
  expect_elements(cnt, Shape{n}, [&](const auto& k) {
    return std::int64_t(lt.data()[k[0]]) + (i.data()[k[0]] > 0) + eq.data()[k[0]];
  });
  dx::Tensor<bool> isn = dx::logical_not(dx::isfinite(f / (f - f)));  // 0/0 = NaN, x/0 = inf
  expect_elements(isn, Shape{n}, [&](const auto&) { return true; });
}

TEST_CASE("eval: casts and assignment across dtypes behave like astype / setitem") {
  dx::Tensor<float> f(Shape{6});
  const float fv[] = {-2.75f, -0.5f, 0.f, 0.5f, 2.75f, 300.9f};
  for (int k = 0; k < 6; ++k) f.at(k) = fv[k];
  dx::Tensor<std::int32_t> i = dx::cast<std::int32_t>(f);  // truncation toward zero
  CHECK(i.at(0) == -2);
  CHECK(i.at(1) == 0);
  CHECK(i.at(4) == 2);
  CHECK(i.at(5) == 300);
  dx::Tensor<bool> b = dx::cast<bool>(f);
  CHECK(b.at(0));
  CHECK(b.at(1));
  CHECK_FALSE(b.at(2));
  dx::Tensor<std::uint8_t> u = dx::cast<std::uint8_t>(i);  // wraps: 300 -> 44
  CHECK(u.at(5) == 44);
  CHECK(u.at(0) == 254);
  // assign casts to the output's dtype
  dx::Tensor<std::int64_t> l(Shape{6});
  dx::assign(l, f * 2.f);
  CHECK(l.at(0) == -5);
  CHECK(l.at(5) == 601);
  dx::Tensor<double> d(Shape{2, 6});
  dx::assign(d, f);  // broadcast + widen
  CHECK(d.at(1, 4) == 2.75);
  dx::Tensor<float> back(Shape{6});
  dx::assign(back, b);
  CHECK(back.at(0) == 1.f);
  CHECK(back.at(2) == 0.f);
}

// ---------------------------------------------------------------------------------------
// NaN and infinities
// ---------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("eval: NaN and inf propagate as in NumPy", T, DX_FLOAT_DTYPES) {
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  const T xs[] = {nan, inf, -inf, T(0), T(-0.0), T(1), T(-2), nan, T(3), inf, nan, T(5),
                  T(6), -inf, T(8), T(9), nan, T(11)};
  const index_t n = 18;
  dx::Tensor<T> x(Shape{n});
  for (index_t k = 0; k < n; ++k) x.at(k) = xs[k];
  dx::Tensor<T> y(Shape{n});
  for (index_t k = 0; k < n; ++k) y.at(k) = xs[n - 1 - k];

  dx::Tensor<T> s = x + y, p = x * y, q = x / y;
  expect_elements(s, Shape{n}, [&](const auto& k) { return x.data()[k[0]] + y.data()[k[0]]; });
  expect_elements(p, Shape{n}, [&](const auto& k) { return x.data()[k[0]] * y.data()[k[0]]; });
  expect_elements(q, Shape{n}, [&](const auto& k) { return x.data()[k[0]] / y.data()[k[0]]; });
  // minimum/maximum/clip propagate NaN from either side (np.minimum, not np.fmin)
  dx::Tensor<T> mn = dx::minimum(x, y), mx = dx::maximum(x, y), cl = dx::clip(x, T(-1), T(4));
  auto nan_min = [](T a, T b) { return (a != a || b != b) ? std::numeric_limits<T>::quiet_NaN() : std::min(a, b); };
  auto nan_max = [](T a, T b) { return (a != a || b != b) ? std::numeric_limits<T>::quiet_NaN() : std::max(a, b); };
  expect_elements(mn, Shape{n}, [&](const auto& k) { return nan_min(x.data()[k[0]], y.data()[k[0]]); });
  expect_elements(mx, Shape{n}, [&](const auto& k) { return nan_max(x.data()[k[0]], y.data()[k[0]]); });
  expect_elements(cl, Shape{n}, [&](const auto& k) { return nan_min(nan_max(x.data()[k[0]], T(-1)), T(4)); });
  // comparisons with NaN are false, != is true
  dx::Tensor<bool> eq = x == x, ne = x != x, lt = x < inf;
  expect_elements(eq, Shape{n}, [&](const auto& k) { return x.data()[k[0]] == x.data()[k[0]]; });
  expect_elements(ne, Shape{n}, [&](const auto& k) { return x.data()[k[0]] != x.data()[k[0]]; });
  expect_elements(lt, Shape{n}, [&](const auto& k) { return x.data()[k[0]] < inf; });
  dx::Tensor<bool> in = dx::isnan(x), ii = dx::isinf(x), fi = dx::isfinite(x);
  expect_elements(in, Shape{n}, [&](const auto& k) { return std::isnan(x.data()[k[0]]); });
  expect_elements(ii, Shape{n}, [&](const auto& k) { return std::isinf(x.data()[k[0]]); });
  expect_elements(fi, Shape{n}, [&](const auto& k) { return std::isfinite(x.data()[k[0]]); });
  // functions at their special values
  dx::Tensor<T> e = dx::exp(x), lg = dx::log(x), sq = dx::sqrt(x), th = dx::tanh(x);
  expect_elements(e, Shape{n}, [&](const auto& k) {
    const T v = x.data()[k[0]];
    return std::isfinite(v) ? e.data()[k[0]] : std::exp(v);  // only the special values here
  });
  for (index_t k = 0; k < n; ++k) {
    const T v = x.at(k);
    CAPTURE(v);
    if (std::isnan(v)) {
      CHECK(std::isnan(lg.at(k)));
      CHECK(std::isnan(sq.at(k)));
      CHECK(std::isnan(th.at(k)));
    }
    if (v == inf) CHECK(th.at(k) == T(1));
    if (v == -inf) {
      CHECK(th.at(k) == T(-1));
      CHECK(std::isnan(lg.at(k)));
      CHECK(std::isnan(sq.at(k)));
    }
    if (v == T(0)) CHECK(lg.at(k) == -inf);
    if (v == T(-2)) {
      CHECK(std::isnan(lg.at(k)));
      CHECK(std::isnan(sq.at(k)));
    }
  }
  // NaN is a true value (bool(nan) is True): in casts, logical ops and where
  dx::Tensor<bool> tb = dx::cast<bool>(x), tn = dx::logical_not(x), ta = dx::logical_and(x, y);
  expect_elements(tb, Shape{n}, [&](const auto& k) { return x.data()[k[0]] != T(0); });
  expect_elements(tn, Shape{n}, [&](const auto& k) { return !(x.data()[k[0]] != T(0)); });
  expect_elements(ta, Shape{n}, [&](const auto& k) { return x.data()[k[0]] != T(0) && y.data()[k[0]] != T(0); });
  // a NaN condition is true in where (bool(nan) is True)
  auto w = dx::eval(dx::where(x, 1.0, 2.0));  // two Python floats: float64, as np.where
  static_assert(std::is_same_v<decltype(w), dx::Tensor<double>>);
  expect_elements(w, Shape{n}, [&](const auto& k) { return x.data()[k[0]] != T(0) ? 1.0 : 2.0; });
}

// ---------------------------------------------------------------------------------------
// Aliasing: outputs among their own operands
// ---------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("eval: aliasing gives NumPy's results", T, DX_NUMERIC_DTYPES) {
  for (index_t n : {index_t{1}, index_t{7}, index_t{64}, index_t{1025}, index_t{50000}}) {
    CAPTURE(n);
    const auto orig = random<T>(Shape{n}, 34), y = random<T>(Shape{n}, 35);

    // x = x * 2 + y, in place
    auto x = orig;
    const T* p = x.data();
    x = x * 2 + y;
    CHECK(x.data() == p);  // same shape: evaluated in place
    expect_elements(x, Shape{n}, [&](const auto& k) {
      return static_cast<T>(orig.data()[k[0]] * T(2) + y.data()[k[0]]);
    });

    // x[1:] = x[:-1] + 0 reads every element before writing: a shift by one
    x = orig;
    dx::assign(x.view().slice(dx::slice(1, dx::none)), x.view().slice(dx::slice(dx::none, -1)) + 0);
    expect_elements(x, Shape{n}, [&](const auto& k) {
      return k[0] == 0 ? orig.data()[0] : orig.data()[k[0] - 1];
    });
    // and the other way round: x[:-1] = x[1:] + 0
    x = orig;
    dx::assign(x.slice(dx::slice(dx::none, -1)), x.slice(dx::slice(1, dx::none)) + 0);
    expect_elements(x, Shape{n}, [&](const auto& k) {
      return k[0] == n - 1 ? orig.data()[n - 1] : orig.data()[k[0] + 1];
    });
    // x[2:] = x[:-2] * 1 + x[1:-1]: two shifted reads of the output
    x = orig;
    if (n > 2) {
      dx::assign(x.slice(dx::slice(2, dx::none)),
                 x.slice(dx::slice(dx::none, -2)) * 1 + x.slice(dx::slice(1, -1)));
      expect_elements(x, Shape{n}, [&](const auto& k) {
        const index_t i = k[0];
        return i < 2 ? orig.data()[i] : static_cast<T>(orig.data()[i - 2] + orig.data()[i - 1]);
      });
    }
    // reversed self: x[...] = x[::-1] + 0
    x = orig;
    dx::assign(x, x.slice(dx::slice(dx::none, dx::none, -1)) + 0);
    expect_elements(x, Shape{n}, [&](const auto& k) { return orig.data()[n - 1 - k[0]]; });
    // a broadcast read of the output: x[...] = x[0] + x
    x = orig;
    dx::assign(x, x.slice(dx::slice(0, 1)) + x);
    expect_elements(x, Shape{n}, [&](const auto& k) {
      return static_cast<T>(orig.data()[0] + orig.data()[k[0]]);
    });
  }
}

TEST_CASE_TEMPLATE("eval: assigning a transposed self", T, DX_NUMERIC_DTYPES) {
  for (index_t n : {index_t{1}, index_t{3}, index_t{17}, index_t{64}, index_t{300}}) {
    CAPTURE(n);
    const auto orig = random<T>(Shape{n, n}, 36);
    // the safe spelling: evaluate into a temporary first
    auto safe = orig;
    dx::assign(safe, dx::eval(safe.transpose() + 0));
    // the aliasing spelling must give the same: NumPy's a[...] = a.T + 0
    auto sq = orig;
    dx::assign(sq.view(), sq.transpose() + 0);
    CHECK(bitwise_equal(sq, safe));
    expect_elements(sq, Shape{n, n}, [&](const auto& k) { return orig.at(k[1], k[0]); });
    // through Tensor::operator= too
    auto sq2 = orig;
    sq2 = sq2.transpose() * 1 + sq2;
    expect_elements(sq2, Shape{n, n}, [&](const auto& k) {
      return static_cast<T>(orig.at(k[1], k[0]) + orig.at(k[0], k[1]));
    });
    // the upper triangle from the lower: a[:, ::-1] = a + 0 (each row reversed)
    auto rv = orig;
    dx::assign(rv.slice(dx::colon, dx::slice(dx::none, dx::none, -1)), rv + 0);
    expect_elements(rv, Shape{n, n}, [&](const auto& k) { return orig.at(k[0], n - 1 - k[1]); });
  }
}

// ---------------------------------------------------------------------------------------
// Threads: large arrays, the threaded path, bitwise reproducibility
// ---------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("eval: large arrays on the threaded path", T, DX_NUMERIC_DTYPES) {
  thread_count_guard guard;
  dx::parallel::set_num_threads(4);
  const index_t n = 300007;  // well above the inline threshold, not a multiple of any width
  const auto x = random<T>(Shape{n}, 37), y = random<T>(Shape{n}, 38);
  dx::Tensor<T> z = x * 2 + y;
  expect_elements(z, Shape{n}, [&](const auto& k) {
    return static_cast<T>(x.data()[k[0]] * T(2) + y.data()[k[0]]);
  });
  // 2-D, strided output, broadcast input
  const index_t r = 613, c = 509;
  const auto m = random<T>(Shape{r, c}, 39), row = random<T>(Shape{c}, 40);
  dx::Tensor<T> buf(Shape{c, 2 * r}, T(5));
  auto out = buf.slice(dx::colon, dx::slice(dx::none, dx::none, 2)).transpose();  // (r, c)
  dx::assign(out, m - row);
  expect_elements(out, Shape{r, c}, [&](const auto& k) {
    return static_cast<T>(m.at(k[0], k[1]) - row.at(k[1]));
  });
  index_t untouched = 0;
  for (index_t i = 0; i < c; ++i)
    for (index_t j = 1; j < 2 * r; j += 2) untouched += buf.at(i, j) == T(5);
  CHECK(untouched == r * c);
}

TEST_CASE("eval: bool and mixed expressions on the threaded path") {
  thread_count_guard guard;
  dx::parallel::set_num_threads(4);
  const index_t n = 400003;
  const auto f = random<float>(Shape{n}, 41);
  const auto b = random<bool>(Shape{n}, 42);
  const auto u = random<std::uint8_t>(Shape{n}, 43);
  dx::Tensor<bool> r = dx::logical_xor(f > 0.f, b) | (u < 30);
  expect_elements(r, Shape{n}, [&](const auto& k) {
    const auto i = k[0];
    return ((f.data()[i] > 0.f) != b.data()[i]) || u.data()[i] < 30;
  });
  dx::Tensor<double> d = dx::where(r, f, u) * dx::scalar<double>(0.5);
  expect_elements(d, Shape{n}, [&](const auto& k) {
    const auto i = k[0];
    return (r.data()[i] ? double(f.data()[i]) : double(u.data()[i])) * 0.5;
  });
}

TEST_CASE("eval: 1, 2 and 4 threads give bitwise equal results") {
  thread_count_guard guard;
  const index_t n = index_t{1} << 22;  // 4M
  const auto x = random<float>(Shape{n}, 44), y = random<float>(Shape{n}, 45);
  auto chain = [&] {
    return dx::eval(dx::tanh(x * 0.5f + 1.f) * y - dx::exp(-x * x) + dx::tanh(dx::tanh(y)));
  };
  dx::parallel::set_num_threads(1);
  const auto r1 = chain();
  dx::parallel::set_num_threads(2);
  const auto r2 = chain();
  dx::parallel::set_num_threads(4);
  const auto r4 = chain();
  CHECK(bitwise_equal(r1, r2));
  CHECK(bitwise_equal(r1, r4));
  // spot-check the values against the scalar functions (tanh/exp within a few ulp)
  for (index_t i = 0; i < n; i += 9973) {
    const float a = x.data()[i], b = y.data()[i];
    const double want = std::tanh(std::fma(double(a), 0.5, 1.0)) * b - std::exp(-double(a) * a) +
                        std::tanh(std::tanh(double(b)));
    CHECK(std::abs(r1.data()[i] - want) <= 1e-5 * (1 + std::abs(want)));
  }

  // strided + broadcast + transposed operands, strided output
  const index_t m = 2048;
  const auto a = random<double>(Shape{m, m}, 46);
  const auto row = random<double>(Shape{m}, 47), col = random<double>(Shape{m, 1}, 48);
  auto strided = [&] {
    dx::Tensor<double> out(Shape{m, 2 * m});
    dx::assign(out.slice(dx::colon, dx::slice(dx::none, dx::none, -2)),
               dx::sqrt(dx::abs(a.transpose() * row - col)) / (1.0 + row));
    return out;
  };
  dx::parallel::set_num_threads(1);
  const auto s1 = strided();
  dx::parallel::set_num_threads(2);
  const auto s2 = strided();
  dx::parallel::set_num_threads(4);
  const auto s4 = strided();
  CHECK(bitwise_equal(s1, s2));
  CHECK(bitwise_equal(s1, s4));
  for (index_t i = 0; i < m; i += 97)
    for (index_t j = 0; j < m; j += 89) {
      const double want = std::sqrt(std::abs(std::fma(a.at(j, i), row.at(j), -col.at(i, 0)))) /
                          (1.0 + row.at(j));
      CHECK(s1.at(i, 2 * m - 1 - 2 * j) == want);
    }
}

// Note [streaming stores]: an output past stream_min_bytes() is written with
// non-temporal stores. Its values must be those of ordinary stores, whatever the lane
// type, the tail, the thread count and the output's alignment.
struct stream_threshold_guard {
  std::size_t saved = dx::evaluation::stream_min_bytes();
  ~stream_threshold_guard() { dx::evaluation::set_stream_min_bytes(saved); }
};

template <class F>
auto with_streaming(bool on, F&& f) {
  dx::evaluation::set_stream_min_bytes(on ? 0 : SIZE_MAX);
  return f();
}

TEST_CASE_TEMPLATE("eval: streamed outputs equal stored ones (Note [streaming stores])", T,
                   DX_NUMERIC_DTYPES, bool) {
  thread_count_guard threads;
  stream_threshold_guard threshold;
  for (const int nthreads : {1, 3}) {
    dx::parallel::set_num_threads(nthreads);
    for (const index_t n : {index_t{1}, index_t{37}, index_t{1000}, index_t{300007}}) {
      const auto x = random<T>(Shape{n}, 51), y = random<T>(Shape{n}, 52);
      auto chain = [&] {
        if constexpr (std::is_same_v<T, bool>) return dx::eval(dx::logical_xor(x, y) | x);
        else return dx::eval(x * 2 + y);
      };
      const auto streamed = with_streaming(true, chain);
      const auto stored = with_streaming(false, chain);
      CHECK(bitwise_equal(streamed, stored));
      expect_elements(streamed, Shape{n}, [&](const auto& k) {
        const T a = x.data()[k[0]], b = y.data()[k[0]];
        if constexpr (std::is_same_v<T, bool>) return (a != b) || a;
        else return static_cast<T>(a * T(2) + b);
      });
    }
  }
}

TEST_CASE("eval: streaming stores with narrower outputs, unaligned outputs and in place") {
  thread_count_guard threads;
  stream_threshold_guard threshold;
  dx::parallel::set_num_threads(2);
  const index_t n = 200003;
  const auto d = random<double>(Shape{n}, 53);
  const auto i64 = random<std::int64_t>(Shape{n}, 54);
  // double lanes stored as float, int64 lanes stored as uint8 and as bool: the stored
  // vectors are partial (a half or an eighth of a register), so they are never streamed.
  auto narrow = [&] {
    dx::Tensor<float> f(Shape{n});
    dx::assign(f, d * 3.0);
    dx::Tensor<std::uint8_t> u(Shape{n});
    dx::assign(u, i64 + 1);
    dx::Tensor<bool> b = i64 > std::int64_t{0};
    return std::make_tuple(std::move(f), std::move(u), std::move(b));
  };
  const auto [f1, u1, b1] = with_streaming(true, narrow);
  const auto [f0, u0, b0] = with_streaming(false, narrow);
  CHECK(bitwise_equal(f1, f0));
  CHECK(bitwise_equal(u1, u0));
  CHECK(bitwise_equal(b1, b0));
  expect_elements(f1, Shape{n},
                  [&](const auto& k) { return static_cast<float>(d.data()[k[0]] * 3.0); });

  // An output one element past a 64-byte boundary: not aligned, so stored normally.
  dx::Tensor<float> buf(Shape{n + 1}, -1.f);
  auto shifted = buf.slice(dx::slice(1, n + 1));
  dx::evaluation::set_stream_min_bytes(0);
  CHECK(dx::evaluation::stream_output(buf.data(), n + 1, sizeof(float)) ==
        (reinterpret_cast<std::uintptr_t>(buf.data()) % 64 == 0));
  CHECK_FALSE(dx::evaluation::stream_output(shifted.data(), n, sizeof(float)));
  with_streaming(true, [&] {
    dx::assign(shifted, f1 + 1.f);
    return 0;
  });
  CHECK(buf.data()[0] == -1.f);
  for (index_t i = 0; i < n; i += 997) CHECK(shifted.data()[i] == f1.data()[i] + 1.f);

  // In place, streamed: every element read before its line is written.
  dx::Tensor<double> z = d;
  with_streaming(true, [&] {
    dx::assign(z, z * 2.0 + d);
    return 0;
  });
  expect_elements(z, Shape{n},
                  [&](const auto& k) { return std::fma(d.data()[k[0]], 2.0, d.data()[k[0]]); });

  // The threshold: streamed from stream_min_bytes() on, aligned outputs only.
  dx::evaluation::set_stream_min_bytes(1 << 20);
  CHECK(dx::evaluation::stream_min_bytes() == (1u << 20));
  CHECK_FALSE(dx::evaluation::stream_output(buf.data(), (1 << 18) - 1, sizeof(float)));
  CHECK(dx::evaluation::stream_output(reinterpret_cast<const void*>(std::uintptr_t{64} * 1000),
                                      1 << 18, sizeof(float)));
}

// ---------------------------------------------------------------------------------------
// FMA contraction and describe()
// ---------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("eval: a * b + c is one fused rounding, within 1 ulp of two roundings", T,
                   DX_FLOAT_DTYPES) {
  const index_t n = 1031;
  auto x = random<T>(Shape{n}, 49), y = random<T>(Shape{n}, 50), z = random<T>(Shape{n}, 51);
  // positive data: no cancellation, so one and two roundings differ by at most 1 ulp
  dx::assign(x, dx::abs(x) + T(0.37));
  dx::assign(y, dx::abs(y) + T(1.13));
  dx::assign(z, dx::abs(z) + T(0.01));
  dx::Tensor<T> r = x * y + z, s = z - x * y, t = x * y - z;
  expect_elements(r, Shape{n}, [&](const auto& k) { return std::fma(x.data()[k[0]], y.data()[k[0]], z.data()[k[0]]); });
  expect_elements(s, Shape{n}, [&](const auto& k) { return std::fma(-x.data()[k[0]], y.data()[k[0]], z.data()[k[0]]); });
  expect_elements(t, Shape{n}, [&](const auto& k) { return std::fma(x.data()[k[0]], y.data()[k[0]], -z.data()[k[0]]); });
  int far = 0;
  for (index_t k = 0; k < n; ++k) {
    volatile T prod = x.data()[k] * y.data()[k];
    const T two = prod + z.data()[k];
    const T got = r.data()[k];
    if (!(got == two || got == std::nextafter(two, T(0)) || got == std::nextafter(two, T(1e30)))) ++far;
  }
  CHECK(far == 0);
}

TEST_CASE("describe: trees as written and as lowered") {
  dx::Tensor<float> x(Shape{3}), y(Shape{3}), z(Shape{3}), w(Shape{3}), v(Shape{3});
  dx::Tensor<bool> b(Shape{3});
  dx::Tensor<std::int32_t> i(Shape{3});
  CHECK(dx::describe(x * 2.0f + y) == "add(mul(x, 2), y)");
  CHECK(dx::describe_lowered(x * 2.0f + y) == "fma(x, 2, y)");
  CHECK(dx::describe(z - x * y) == "sub(x, mul(y, z))");
  CHECK(dx::describe_lowered(z - x * y) == "fnma(x, y, z)");
  CHECK(dx::describe_lowered(x * y - z) == "fms(x, y, z)");
  CHECK(dx::describe(x * x) == "mul(x, x)");
  CHECK(dx::describe(dx::exp(-x) / (x + 1.5f)) == "div(exp(neg(x)), add(x, 1.5))");
  CHECK(dx::describe(dx::where(x > y, x, z)) == "where(greater(x, y), x, z)");
  CHECK(dx::describe(dx::cast<double>(x) + i) == "add(astype<float64>(x), y)");
  CHECK(dx::describe(dx::logical_and(b, true)) == "logical_and(x, True)");
  CHECK(dx::describe(x + y + z + w + v) == "add(add(add(add(x, y), z), w), a4)");
  CHECK(dx::describe(i / 2) == "div(x, 2)");
  CHECK(dx::describe(dx::abs(x) % 3.f) == "mod(abs(x), 3)");
  // a view of other memory (or another shape) is another leaf
  CHECK(dx::describe(x + x.slice(dx::slice(1, dx::none))) == "add(x, y)");
  CHECK(dx::describe(dx::maximum(x, 0.25f)) == "maximum(x, 0.25)");
  // describing a tree evaluates nothing and keeps names consistent under lowering
  CHECK(dx::describe_lowered(dx::sqrt(x * y + x)) == "sqrt(fma(x, y, x))");
  // compile-time tree statistics
  using E = decltype(x * 2.0f + y);
  static_assert(dx::node_count_v<E> == 5);
  static_assert(dx::leaf_count_v<E> == 2);
}
