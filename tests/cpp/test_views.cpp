// Tests of core/tensor.hpp: Tensor construction and value semantics, and View basic
// indexing, transpose/permute, reshape, broadcast_to, dx::view and copy(). The expected
// results of indexing and reshaping were generated with NumPy 2.4 on the same inputs
// (np.arange(...)[index], np.reshape(view, shape, copy=False)); the 1-D slice grid is
// checked against a direct transcription of Python's slice rules, itself checked against
// NumPy on the same grid (28,900 cases) when this file was written.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <numeric>
#include <thread>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
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

#define DX_ALL_DTYPES bool, std::uint8_t, std::int32_t, std::int64_t, float, double

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

bool aligned64(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 64 == 0; }

// The elements of a view in C order, read by walking its strides (independent of copy()).
template <class T>
std::vector<std::remove_const_t<T>> walk(const dx::View<T>& v) {
  std::vector<std::remove_const_t<T>> out;
  const index_t n = v.size();
  std::vector<index_t> idx(static_cast<std::size_t>(v.ndim()), 0);
  for (index_t i = 0; i < n; ++i) {
    index_t off = 0;
    for (int k = 0; k < v.ndim(); ++k) off += idx[k] * v.strides()[k];
    out.push_back(v.data()[off]);
    for (int k = v.ndim() - 1; k >= 0; --k) {
      if (++idx[k] < v.shape()[k]) break;
      idx[k] = 0;
    }
  }
  return out;
}

// np.arange(n).reshape(shape) as int64.
dx::Tensor<std::int64_t> arange(const Shape& shape) {
  dx::Tensor<std::int64_t> t(shape);
  std::iota(t.data(), t.data() + t.size(), std::int64_t{0});
  return t;
}

// Python's slice rules written out directly: the indices range(len)[start:stop:step] picks.
std::vector<index_t> python_slice(index_t n, std::optional<index_t> start,
                                  std::optional<index_t> stop, index_t step) {
  auto norm = [n](index_t v, index_t lo, index_t hi) {
    if (v < 0) v += n;
    return std::min(std::max(v, lo), hi);
  };
  std::vector<index_t> out;
  if (step > 0) {
    const index_t b = start ? norm(*start, 0, n) : 0, e = stop ? norm(*stop, 0, n) : n;
    for (index_t i = b; i < e; i += step) out.push_back(i);
  } else {
    const index_t b = start ? norm(*start, -1, n - 1) : n - 1;
    const index_t e = stop ? norm(*stop, -1, n - 1) : -1;
    for (index_t i = b; i > e; i += step) out.push_back(i);
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Tensor construction
// ---------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("Tensor: zero-filled, aligned, C-contiguous", T, DX_ALL_DTYPES) {
  for (const Shape& s : {Shape{7}, Shape{3, 4}, Shape{2, 3, 5}, Shape{1, 1, 9, 1}, Shape{65},
                         Shape{1000}, Shape{0}, Shape{3, 0, 2}}) {
    CAPTURE(s);
    dx::Tensor<T> t(s);
    CHECK(t.shape() == s);
    CHECK(t.ndim() == s.size());
    CHECK(t.size() == dx::shape_size(s));
    CHECK(t.strides() == dx::contiguous_strides(s));
    CHECK(t.view().is_contiguous());
    REQUIRE(t.data() != nullptr);
    CHECK(aligned64(t.data()));
    bool all_zero = true;
    for (index_t i = 0; i < t.size(); ++i) all_zero = all_zero && t.data()[i] == T(0);
    CHECK(all_zero);
  }
  // C order strides, NumPy's strides / itemsize
  CHECK(dx::Tensor<T>(Shape{2, 3, 4}).strides() == Strides{12, 4, 1});
  CHECK(dx::Tensor<T>(Shape{5}).strides() == Strides{1});
}

TEST_CASE_TEMPLATE("Tensor: fill constructor and element access", T, DX_ALL_DTYPES) {
  dx::Tensor<T> t(Shape{2, 3}, T(1));
  for (index_t i = 0; i < t.size(); ++i) CHECK(t.data()[i] == T(1));
  t.at(1, 2) = T(0);
  CHECK(t.data()[5] == T(0));
  CHECK(t.at(-1, -1) == T(0));
  CHECK(t.at(-2, 0) == T(1));
  CHECK_THROWS_AS(t.at(2, 0), dx::index_error);
  CHECK_THROWS_AS(t.at(0, -4), dx::index_error);
  CHECK_THROWS_AS(t.at(0), dx::index_error);        // too few indices
  CHECK_THROWS_AS(t.at(0, 0, 0), dx::index_error);  // too many
}

TEST_CASE("Tensor: rank 0, rank 8, rank 9") {
  dx::Tensor<double> r0(Shape{});
  CHECK(r0.ndim() == 0);
  CHECK(r0.size() == 1);
  CHECK(r0.shape().str() == "()");
  CHECK(aligned64(r0.data()));
  r0.at() = 2.5;
  CHECK(r0.data()[0] == 2.5);
  CHECK(r0.view().copy().at() == 2.5);

  const Shape s8{2, 1, 2, 1, 2, 1, 2, 3};
  dx::Tensor<float> r8(s8);
  CHECK(r8.ndim() == 8);
  CHECK(r8.size() == 48);
  CHECK(r8.strides() == Strides{24, 24, 12, 12, 6, 6, 3, 1});
  r8.at(1, 0, 1, 0, 1, 0, 1, 2) = 7.f;
  CHECK(r8.data()[47] == 7.f);

  CHECK_THROWS_AS(dx::Tensor<float>(Shape{1, 1, 1, 1, 1, 1, 1, 1, 1}), dx::shape_error);
  const std::string msg =
      message_of<dx::shape_error>([] { dx::Tensor<float> t(Shape{1, 2, 1, 2, 1, 2, 1, 2, 1}); });
  CHECK(contains(msg, "rank 9"));
  // A newaxis past rank 8 is the same mistake.
  CHECK_THROWS_AS(r8.slice(dx::newaxis), dx::shape_error);
  CHECK_THROWS_AS(dx::Tensor<float>(Shape{3, -1}), dx::shape_error);
}

TEST_CASE("Tensor: buffers of 256 KB to 32 MB are recycled, zero-filled again") {
  // Note [block cache] in core/tensor.hpp.
  dx::detail::trim_block_cache();
  const Shape mid{1000, 100};  // 800 KB of doubles
  const double* first = nullptr;
  {
    dx::Tensor<double> a(mid);
    first = a.data();
    a.data()[12345] = 7.0;
  }
  {
    dx::Tensor<double> b(mid);
    CHECK(b.data() == first);  // the released block, handed out again
    CHECK(b.data()[12345] == 0.0);  // and zero-filled like any new Tensor
    CHECK(aligned64(b.data()));
    dx::Tensor<double> c(mid);  // the cache held one block: c is new
    CHECK(c.data() != b.data());
  }
  CHECK(dx::detail::trim_block_cache() == 2 * 800000);
  CHECK(dx::detail::trim_block_cache() == 0);
  { dx::Tensor<float> small(Shape{1000}); }    // malloc recycles these itself
  { dx::Tensor<std::uint8_t> big(Shape{40 << 20}); }  // huge pages: not held
  CHECK(dx::detail::trim_block_cache() == 0);
  {  // more than the capacity: the oldest blocks are freed first, the rest stays bounded
    std::vector<dx::Tensor<std::uint8_t>> many;
    for (int i = 0; i < 10; ++i) many.emplace_back(Shape{index_t{9} << 20});
  }
  const std::size_t held = dx::detail::trim_block_cache();
  CHECK(held <= dx::detail::block_cache_capacity);
  CHECK(held == 7 * (std::size_t{9} << 20));
}

TEST_CASE("Tensor: tiny buffers are recycled per thread, zero-filled again") {
  // Note [small blocks] in core/tensor.hpp.
  dx::detail::trim_block_cache();
  const double* first = nullptr;
  {
    dx::Tensor<double> a(Shape{});
    first = a.data();
    a.data()[0] = 5.0;
  }
  dx::Tensor<double> b(Shape{});
  CHECK(b.data() == first);  // the block just freed, handed out again
  CHECK(b.data()[0] == 0.0);
  CHECK(aligned64(b.data()));
  dx::Tensor<std::int32_t> c(Shape{16});  // 64 bytes: the same size class
  CHECK(aligned64(c.data()));
  CHECK(c.data()[15] == 0);
  {  // more than a thread keeps: the rest go back to malloc, all still usable
    std::vector<dx::Tensor<float>> many;
    for (int i = 0; i < 100; ++i) many.emplace_back(Shape{3});
    for (auto& t : many) CHECK(t.data()[2] == 0.f);
  }
  // a tiny tensor made on one thread and freed on another joins that thread's list
  dx::detail::trim_block_cache();  // (this thread's list is full after the 100 above)
  std::optional<dx::Tensor<double>> moved;
  std::thread maker([&] { moved.emplace(Shape{2}); });
  maker.join();
  const double* from_other = moved->data();
  moved.reset();
  dx::Tensor<double> d(Shape{2});
  CHECK(d.data() == from_other);
  CHECK(dx::detail::trim_block_cache() == 0);  // tiny blocks are not the shared cache's
}

TEST_CASE("Tensor: the block cache under threads") {
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &bad] {
      for (int i = 0; i < 200; ++i) {
        dx::Tensor<double> a(Shape{index_t{40000} + 8 * (i % 3)});
        a.data()[0] = t;
        a.data()[a.size() - 1] = i;
        if (a.data()[0] != t || a.data()[a.size() - 1] != i || a.data()[1] != 0.0) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(bad.load() == 0);
  dx::detail::trim_block_cache();
}

TEST_CASE("Tensor: default constructed is empty of shape (0,)") {
  dx::Tensor<int> t;
  CHECK(t.shape() == Shape{0});
  CHECK(t.size() == 0);
  CHECK(t.ndim() == 1);
}

TEST_CASE_TEMPLATE("Tensor: copy is deep, move transfers the buffer", T, DX_ALL_DTYPES) {
  dx::Tensor<T> a(Shape{3, 5});
  for (index_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<T>(i % 7);

  dx::Tensor<T> b = a;  // copy
  CHECK(b.shape() == a.shape());
  CHECK(b.strides() == a.strides());
  CHECK(b.data() != a.data());
  CHECK(aligned64(b.data()));
  CHECK(walk(b.view()) == walk(a.view()));
  b.at(0, 0) = static_cast<T>(1);
  CHECK(a.at(0, 0) == T(0));

  dx::Tensor<T> c(Shape{2});
  c = a;  // copy assignment replaces the shape too
  CHECK(c.shape() == Shape{3, 5});
  CHECK(walk(c.view()) == walk(a.view()));
  CHECK(c.data() != a.data());
  auto& self = c;
  c = self;  // self-assignment keeps the contents
  CHECK(walk(c.view()) == walk(a.view()));

  const T* p = a.data();
  dx::Tensor<T> d = std::move(a);
  CHECK(d.data() == p);
  CHECK(d.shape() == Shape{3, 5});
  CHECK(a.size() == 0);  // NOLINT(bugprone-use-after-move): moved-from is valid and empty
  CHECK(a.shape() == Shape{0});
  a = dx::Tensor<T>(Shape{2}, T(1));  // moved-from objects can be reused
  CHECK(a.size() == 2);

  dx::Tensor<T> e(Shape{4});
  const T* q = d.data();
  e = std::move(d);
  CHECK(e.data() == q);
  CHECK(e.shape() == Shape{3, 5});
}

TEST_CASE("Tensor: const tensors give read-only views") {
  const dx::Tensor<float> t(Shape{2, 2}, 1.f);
  static_assert(std::is_same_v<decltype(t.view()), dx::View<const float>>);
  static_assert(std::is_same_v<decltype(t.slice(0)), dx::View<const float>>);
  static_assert(std::is_same_v<decltype(t.transpose()), dx::View<const float>>);
  dx::Tensor<float> u(Shape{2, 2});
  static_assert(std::is_same_v<decltype(u.view()), dx::View<float>>);
  dx::View<const float> ro = u.view();  // writable -> read-only converts
  CHECK(ro.data() == u.data());
  CHECK(t.at(1, 1) == 1.f);
}

// ---------------------------------------------------------------------------------------
// Basic indexing
// ---------------------------------------------------------------------------------------

TEST_CASE("View: basic indexing equals NumPy on a (4, 5, 6) array") {
  const auto a = arange(Shape{4, 5, 6});
  const auto v = a.view();
  int n_cases = 0;
#define CASE(TEXT, VIEW, SHAPE, ...)                                         \
  do {                                                                       \
    const std::string text = TEXT;                                           \
    CAPTURE(text);                                                           \
    const auto got = VIEW;                                                   \
    CHECK(got.shape() == SHAPE);                                             \
    CHECK(walk(got) == std::vector<std::int64_t> __VA_ARGS__);               \
    CHECK(walk(got.copy().view()) == std::vector<std::int64_t> __VA_ARGS__); \
    ++n_cases;                                                               \
  } while (0)
  CASE("a[1]", v.slice(1), (Shape{5, 6}), {30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59});
  CASE("a[-1]", v.slice(-1), (Shape{5, 6}), {90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119});
  CASE("a[-4]", v.slice(-4), (Shape{5, 6}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29});
  CASE("a[1, 2]", v.slice(1, 2), (Shape{6}), {42, 43, 44, 45, 46, 47});
  CASE("a[1, 2, 3]", v.slice(1, 2, 3), (Shape{}), {45});
  CASE("a[-1, -1, -1]", v.slice(-1, -1, -1), (Shape{}), {119});
  CASE("a[3, -5, 0]", v.slice(3, -5, 0), (Shape{}), {90});
  CASE("a[1:3]", v.slice(dx::slice(1, 3)), (Shape{2, 5, 6}), {30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89});
  CASE("a[::2]", v.slice(dx::slice(dx::none, dx::none, 2)), (Shape{2, 5, 6}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89});
  CASE("a[::-1]", v.slice(dx::slice(dx::none, dx::none, -1)), (Shape{4, 5, 6}), {90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29});
  CASE("a[:, ::-2]", v.slice(dx::colon, dx::slice(dx::none, dx::none, -2)), (Shape{4, 3, 6}), {24, 25, 26, 27, 28, 29, 12, 13, 14, 15, 16, 17, 0, 1, 2, 3, 4, 5, 54, 55, 56, 57, 58, 59, 42, 43, 44, 45, 46, 47, 30, 31, 32, 33, 34, 35, 84, 85, 86, 87, 88, 89, 72, 73, 74, 75, 76, 77, 60, 61, 62, 63, 64, 65, 114, 115, 116, 117, 118, 119, 102, 103, 104, 105, 106, 107, 90, 91, 92, 93, 94, 95});
  CASE("a[:, :, -2:]", v.slice(dx::colon, dx::colon, dx::slice(-2, dx::none)), (Shape{4, 5, 2}), {4, 5, 10, 11, 16, 17, 22, 23, 28, 29, 34, 35, 40, 41, 46, 47, 52, 53, 58, 59, 64, 65, 70, 71, 76, 77, 82, 83, 88, 89, 94, 95, 100, 101, 106, 107, 112, 113, 118, 119});
  CASE("a[-100:100]", v.slice(dx::slice(-100, 100)), (Shape{4, 5, 6}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119});
  CASE("a[100:-100:-1]", v.slice(dx::slice(100, -100, -1)), (Shape{4, 5, 6}), {90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29});
  CASE("a[3:1:-1]", v.slice(dx::slice(3, 1, -1)), (Shape{2, 5, 6}), {90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89});
  CASE("a[1:3:-1]", v.slice(dx::slice(1, 3, -1)), (Shape{0, 5, 6}), {});
  CASE("a[5:10]", v.slice(dx::slice(5, 10)), (Shape{0, 5, 6}), {});
  CASE("a[:, 4:0:-3]", v.slice(dx::colon, dx::slice(4, 0, -3)), (Shape{4, 2, 6}), {24, 25, 26, 27, 28, 29, 6, 7, 8, 9, 10, 11, 54, 55, 56, 57, 58, 59, 36, 37, 38, 39, 40, 41, 84, 85, 86, 87, 88, 89, 66, 67, 68, 69, 70, 71, 114, 115, 116, 117, 118, 119, 96, 97, 98, 99, 100, 101});
  CASE("a[None]", v.slice(dx::newaxis), (Shape{1, 4, 5, 6}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119});
  CASE("a[None, 1, None]", v.slice(dx::newaxis, 1, dx::newaxis), (Shape{1, 1, 5, 6}), {30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59});
  CASE("a[..., 2]", v.slice(dx::ellipsis, 2), (Shape{4, 5}), {2, 8, 14, 20, 26, 32, 38, 44, 50, 56, 62, 68, 74, 80, 86, 92, 98, 104, 110, 116});
  CASE("a[1, ...]", v.slice(1, dx::ellipsis), (Shape{5, 6}), {30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59});
  CASE("a[...]", v.slice(dx::ellipsis), (Shape{4, 5, 6}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119});
  CASE("a[1, ..., None, 3]", v.slice(1, dx::ellipsis, dx::newaxis, 3), (Shape{5, 1}), {33, 39, 45, 51, 57});
  CASE("a[..., None]", v.slice(dx::ellipsis, dx::newaxis), (Shape{4, 5, 6, 1}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119});
  CASE("a[::-1, ::-1, ::-1]", v.slice(dx::slice(dx::none, dx::none, -1), dx::slice(dx::none, dx::none, -1), dx::slice(dx::none, dx::none, -1)), (Shape{4, 5, 6}), {119, 118, 117, 116, 115, 114, 113, 112, 111, 110, 109, 108, 107, 106, 105, 104, 103, 102, 101, 100, 99, 98, 97, 96, 95, 94, 93, 92, 91, 90, 89, 88, 87, 86, 85, 84, 83, 82, 81, 80, 79, 78, 77, 76, 75, 74, 73, 72, 71, 70, 69, 68, 67, 66, 65, 64, 63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43, 42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0});
  CASE("a[-1::-2, 2, 1:-1:3]", v.slice(dx::slice(-1, dx::none, -2), 2, dx::slice(1, -1, 3)), (Shape{2, 2}), {103, 106, 43, 46});
  CASE("a[0, ..., 0, 0]", v.slice(0, dx::ellipsis, 0, 0), (Shape{}), {0});
  CASE("a[:-5:-1]", v.slice(dx::slice(dx::none, -5, -1)), (Shape{4, 5, 6}), {90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29});
  CASE("a[-5::-1]", v.slice(dx::slice(-5, dx::none, -1)), (Shape{0, 5, 6}), {});
  CASE("a[:, 2:2]", v.slice(dx::colon, dx::slice(2, 2)), (Shape{4, 0, 6}), {});
  CASE("a[::3, ::4, ::5]", v.slice(dx::slice(dx::none, dx::none, 3), dx::slice(dx::none, dx::none, 4), dx::slice(dx::none, dx::none, 5)), (Shape{2, 2, 2}), {0, 5, 24, 29, 90, 95, 114, 119});
  CASE("a[None, None, ..., None]", v.slice(dx::newaxis, dx::newaxis, dx::ellipsis, dx::newaxis), (Shape{1, 1, 4, 5, 6, 1}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119});
  CASE("a[:, None, ::-3, -2]", v.slice(dx::colon, dx::newaxis, dx::slice(dx::none, dx::none, -3), -2), (Shape{4, 1, 2}), {28, 10, 58, 40, 88, 70, 118, 100});
  CASE("a[..., ::-1, None]", v.slice(dx::ellipsis, dx::slice(dx::none, dx::none, -1), dx::newaxis), (Shape{4, 5, 6, 1}), {5, 4, 3, 2, 1, 0, 11, 10, 9, 8, 7, 6, 17, 16, 15, 14, 13, 12, 23, 22, 21, 20, 19, 18, 29, 28, 27, 26, 25, 24, 35, 34, 33, 32, 31, 30, 41, 40, 39, 38, 37, 36, 47, 46, 45, 44, 43, 42, 53, 52, 51, 50, 49, 48, 59, 58, 57, 56, 55, 54, 65, 64, 63, 62, 61, 60, 71, 70, 69, 68, 67, 66, 77, 76, 75, 74, 73, 72, 83, 82, 81, 80, 79, 78, 89, 88, 87, 86, 85, 84, 95, 94, 93, 92, 91, 90, 101, 100, 99, 98, 97, 96, 107, 106, 105, 104, 103, 102, 113, 112, 111, 110, 109, 108, 119, 118, 117, 116, 115, 114});
  CASE("a[1:, :-1, 2:5:2]", v.slice(dx::slice(1, dx::none), dx::slice(dx::none, -1), dx::slice(2, 5, 2)), (Shape{3, 4, 2}), {32, 34, 38, 40, 44, 46, 50, 52, 62, 64, 68, 70, 74, 76, 80, 82, 92, 94, 98, 100, 104, 106, 110, 112});
  CASE("a[::100]", v.slice(dx::slice(dx::none, dx::none, 100)), (Shape{1, 5, 6}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29});
  CASE("a[-3:-1, -1, -1:-7:-1]", v.slice(dx::slice(-3, -1), -1, dx::slice(-1, -7, -1)), (Shape{2, 6}), {59, 58, 57, 56, 55, 54, 89, 88, 87, 86, 85, 84});
#undef CASE
  CHECK(n_cases > 30);
}

TEST_CASE("View: 1-D slices follow Python's rules on a grid of bounds and steps") {
  const std::optional<index_t> bounds[] = {std::nullopt, -12, -9, -5, -3, -2, -1, 0,
                                           1,            2,   3,  4,  5,  7,  8,  9, 12};
  const index_t steps[] = {1, 2, 3, 4, 7, -1, -2, -3, -4, -7};
  for (index_t n = 0; n < 10; ++n) {
    const auto a = arange(Shape{n});
    for (auto b : bounds)
      for (auto e : bounds)
        for (index_t st : steps) {
          const auto got = a.slice(dx::slice(b, e, st));
          const auto want = python_slice(n, b, e, st);
          std::vector<std::int64_t> w(want.begin(), want.end());
          if (walk(got) != w) {
            CAPTURE(n);
            CAPTURE(b.value_or(-999));
            CAPTURE(e.value_or(-999));
            CAPTURE(st);
            CHECK(walk(got) == w);
          }
          CHECK(got.shape() == Shape{static_cast<index_t>(want.size())});
        }
  }
}

TEST_CASE("View: slices share memory and step strides") {
  auto a = arange(Shape{4, 6});
  auto v = a.slice(dx::slice(dx::none, dx::none, -1), dx::slice(1, dx::none, 2));
  CHECK(v.shape() == Shape{4, 3});
  CHECK(v.strides() == Strides{-6, 2});
  CHECK(v.data() == a.data() + 19);
  CHECK_FALSE(v.is_contiguous());
  v.at(0, 0) = -1;  // a[3, 1]
  CHECK(a.at(3, 1) == -1);
  // newaxis gives stride 0, an integer index drops the dimension
  auto w = a.slice(dx::newaxis, 2, dx::newaxis);  // a[None, 2, None].shape == (1, 1, 6)
  CHECK(w.shape() == Shape{1, 1, 6});
  CHECK(w.strides()[2] == 1);
  CHECK(w.data() == a.data() + 12);
  // chained slicing composes
  auto u = a.slice(dx::colon, dx::slice(dx::none, dx::none, 2)).slice(dx::slice(1, 3), -1);
  CHECK(walk(u) == std::vector<std::int64_t>{10, 16});
}

TEST_CASE("View: indexing errors") {
  auto a = arange(Shape{4, 5});
  {
    const std::string m =
        message_of<dx::index_error>([&] { (void)a.slice(0, 0, 0); });
    CHECK(contains(m, "too many indices"));
  }
  CHECK_THROWS_AS(a.slice(1, dx::colon, dx::newaxis, 2), dx::index_error);
  CHECK_THROWS_AS(a.slice(dx::ellipsis, 1, 2, 3), dx::index_error);
  CHECK_THROWS_AS(a.slice(dx::ellipsis, dx::ellipsis), dx::index_error);
  {
    const std::string m = message_of<dx::index_error>([&] { (void)a.slice(4); });
    CHECK(contains(m, "index 4 is out of bounds for axis 0 with size 4"));
  }
  CHECK_THROWS_AS(a.slice(-5), dx::index_error);
  CHECK_THROWS_AS(a.slice(0, 5), dx::index_error);
  CHECK_THROWS_AS(a.slice(dx::colon, -6), dx::index_error);
  CHECK_NOTHROW(a.slice(-4, -5));
  {
    const std::string m = message_of<dx::value_error>(
        [&] { (void)a.slice(dx::slice(dx::none, dx::none, 0)); });
    CHECK(contains(m, "step cannot be zero"));
  }
  CHECK_THROWS_AS(a.slice(dx::colon, dx::slice(1, 2, 0)), dx::value_error);
  // every dynexpr error is a dx::error and a std::runtime_error
  CHECK_THROWS_AS(a.slice(9), dx::error);
  CHECK_THROWS_AS(a.slice(9), std::runtime_error);
  // an integer index into an empty dimension is out of bounds, a slice is fine
  auto e = arange(Shape{0, 3});
  CHECK_THROWS_AS(e.slice(0), dx::index_error);
  CHECK(e.slice(dx::slice(1, 5)).shape() == Shape{0, 3});
  CHECK(e.slice(dx::colon, 1).shape() == Shape{0});
}

// ---------------------------------------------------------------------------------------
// transpose / permute
// ---------------------------------------------------------------------------------------

TEST_CASE("View: transpose and permute") {
  auto a = arange(Shape{2, 3, 4});
  auto t = a.transpose();
  CHECK(t.shape() == Shape{4, 3, 2});
  CHECK(t.strides() == Strides{1, 4, 12});
  CHECK(t.data() == a.data());
  CHECK(t.at(3, 2, 1) == a.at(1, 2, 3));
  CHECK(walk(t.transpose()) == walk(a.view()));

  // np.arange(24).reshape(2,3,4).transpose(1,2,0).ravel()
  auto p = a.permute(Shape{1, 2, 0});
  CHECK(p.shape() == Shape{3, 4, 2});
  CHECK(p.strides() == Strides{4, 1, 12});
  CHECK(walk(p) == std::vector<std::int64_t>{0,  12, 1,  13, 2,  14, 3,  15, 4,  16, 5,  17,
                                             6,  18, 7,  19, 8,  20, 9,  21, 10, 22, 11, 23});
  CHECK(a.permute(Shape{-1, 0, -2}).shape() == Shape{4, 2, 3});  // negative axes as NumPy
  CHECK(a.permute(Shape{0, 1, 2}).strides() == a.strides());

  // 1-D and 0-D transposes are the identity
  auto v = arange(Shape{5});
  CHECK(v.transpose().strides() == Strides{1});
  dx::Tensor<float> s(Shape{});
  CHECK(s.transpose().ndim() == 0);

  // a transposed strided view
  auto q = a.slice(dx::colon, dx::slice(dx::none, dx::none, -1), dx::slice(dx::none, dx::none, 2));
  CHECK(walk(q.transpose()) == std::vector<std::int64_t>{8, 20, 4, 16, 0, 12, 10, 22, 6, 18, 2, 14});

  // bad axes
  CHECK_THROWS_AS(a.permute(Shape{0, 1}), dx::error);
  CHECK_THROWS_AS(a.permute(Shape{0, 1, 1}), dx::error);
  CHECK_THROWS_AS(a.permute(Shape{0, 1, 3}), dx::error);
  CHECK_THROWS_AS(a.permute(Shape{0, -4, 1}), dx::error);
  CHECK_THROWS_AS(a.permute(Shape{0, 1, 2, 3}), dx::error);
  CHECK(contains(message_of<dx::shape_error>([&] { (void)a.permute(Shape{2, 2, 0}); }), "repeated"));
}

// ---------------------------------------------------------------------------------------
// reshape
// ---------------------------------------------------------------------------------------

TEST_CASE("View: reshape without copying exactly when NumPy can") {
  auto base = arange(Shape{2, 3, 4});
  const auto v = base.view();
  const std::int64_t* lo = base.data();
  const std::int64_t* hi = base.data() + base.size();
  int ok = 0, fails = 0;
#define RESHAPE_OK(TEXT, VIEW, TARGET, SHAPE, ...)                     \
  do {                                                                 \
    const std::string text = TEXT;                                     \
    CAPTURE(text);                                                     \
    dx::View<const std::int64_t> r;                                    \
    REQUIRE_NOTHROW(r = (VIEW).reshape(TARGET));                       \
    CHECK(r.shape() == SHAPE);                                         \
    CHECK(walk(r) == std::vector<std::int64_t> __VA_ARGS__);           \
    CHECK((r.data() >= lo && r.data() < hi)); /* a view of base */     \
    ++ok;                                                              \
  } while (0)
#define RESHAPE_FAILS(TEXT, VIEW, TARGET)                                            \
  do {                                                                               \
    const std::string text = TEXT;                                                   \
    CAPTURE(text);                                                                   \
    const std::string m = message_of<dx::shape_error>([&] { (void)(VIEW).reshape(TARGET); }); \
    CHECK(contains(m, "copy"));                                                      \
    /* the suggested way out works and gives NumPy's values */                       \
    auto c = (VIEW).copy();                                                          \
    CHECK(walk(c.reshape(TARGET)) == walk(c.view()));                                \
    ++fails;                                                                         \
  } while (0)
  RESHAPE_OK("b.reshape((24,))", (v), (Shape{24}), (Shape{24}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  RESHAPE_OK("b.reshape((-1,))", (v), (Shape{-1}), (Shape{24}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  RESHAPE_OK("b.reshape((4, 6))", (v), (Shape{4, 6}), (Shape{4, 6}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  RESHAPE_OK("b.reshape((6, 4))", (v), (Shape{6, 4}), (Shape{6, 4}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  RESHAPE_OK("b.reshape((2, 12))", (v), (Shape{2, 12}), (Shape{2, 12}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  RESHAPE_OK("b.reshape((2, 3, 4))", (v), (Shape{2, 3, 4}), (Shape{2, 3, 4}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  RESHAPE_OK("b.reshape((6, -1))", (v), (Shape{6, -1}), (Shape{6, 4}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  RESHAPE_OK("b.reshape((1, 24))", (v), (Shape{1, 24}), (Shape{1, 24}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  RESHAPE_OK("b.reshape((24, 1))", (v), (Shape{24, 1}), (Shape{24, 1}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  RESHAPE_OK("b.reshape((2, 1, 3, 1, 4))", (v), (Shape{2, 1, 3, 1, 4}), (Shape{2, 1, 3, 1, 4}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  RESHAPE_OK("b.reshape((3, 8))", (v), (Shape{3, 8}), (Shape{3, 8}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  RESHAPE_OK("b.reshape((2, 6, 2))", (v), (Shape{2, 6, 2}), (Shape{2, 6, 2}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  RESHAPE_OK("b.reshape((1, 1, -1))", (v), (Shape{1, 1, -1}), (Shape{1, 1, 24}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  RESHAPE_OK("b.reshape((1, 2, 3, 4, 1))", (v), (Shape{1, 2, 3, 4, 1}), (Shape{1, 2, 3, 4, 1}), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  RESHAPE_FAILS("b.T.reshape((24,))", (v.transpose()), (Shape{24}));
  RESHAPE_FAILS("b.T.reshape((-1,))", (v.transpose()), (Shape{-1}));
  RESHAPE_FAILS("b.T.reshape((4, 6))", (v.transpose()), (Shape{4, 6}));
  RESHAPE_FAILS("b.T.reshape((6, 4))", (v.transpose()), (Shape{6, 4}));
  RESHAPE_FAILS("b.T.reshape((2, 12))", (v.transpose()), (Shape{2, 12}));
  RESHAPE_FAILS("b.T.reshape((2, 3, 4))", (v.transpose()), (Shape{2, 3, 4}));
  RESHAPE_FAILS("b.T.reshape((6, -1))", (v.transpose()), (Shape{6, -1}));
  RESHAPE_FAILS("b.T.reshape((1, 24))", (v.transpose()), (Shape{1, 24}));
  RESHAPE_FAILS("b.T.reshape((24, 1))", (v.transpose()), (Shape{24, 1}));
  RESHAPE_FAILS("b.T.reshape((2, 1, 3, 1, 4))", (v.transpose()), (Shape{2, 1, 3, 1, 4}));
  RESHAPE_FAILS("b.T.reshape((3, 8))", (v.transpose()), (Shape{3, 8}));
  RESHAPE_FAILS("b.T.reshape((2, 6, 2))", (v.transpose()), (Shape{2, 6, 2}));
  RESHAPE_FAILS("b.T.reshape((1, 1, -1))", (v.transpose()), (Shape{1, 1, -1}));
  RESHAPE_FAILS("b.T.reshape((1, 2, 3, 4, 1))", (v.transpose()), (Shape{1, 2, 3, 4, 1}));
  RESHAPE_FAILS("b[:, ::2].reshape((-1,))", (v.slice(dx::colon, dx::slice(dx::none, dx::none, 2))), (Shape{-1}));
  RESHAPE_FAILS("b[:, ::2].reshape((1, 1, -1))", (v.slice(dx::colon, dx::slice(dx::none, dx::none, 2))), (Shape{1, 1, -1}));
  RESHAPE_OK("b[:, :, ::2].reshape((-1,))", (v.slice(dx::colon, dx::colon, dx::slice(dx::none, dx::none, 2))), (Shape{-1}), (Shape{12}), {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22});
  RESHAPE_OK("b[:, :, ::2].reshape((6, -1))", (v.slice(dx::colon, dx::colon, dx::slice(dx::none, dx::none, 2))), (Shape{6, -1}), (Shape{6, 2}), {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22});
  RESHAPE_OK("b[:, :, ::2].reshape((1, 1, -1))", (v.slice(dx::colon, dx::colon, dx::slice(dx::none, dx::none, 2))), (Shape{1, 1, -1}), (Shape{1, 1, 12}), {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22});
  RESHAPE_OK("b[:, :, ::2].reshape((12,))", (v.slice(dx::colon, dx::colon, dx::slice(dx::none, dx::none, 2))), (Shape{12}), (Shape{12}), {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22});
  RESHAPE_OK("b[:, :, ::2].reshape((3, 4))", (v.slice(dx::colon, dx::colon, dx::slice(dx::none, dx::none, 2))), (Shape{3, 4}), (Shape{3, 4}), {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22});
  RESHAPE_OK("b[:, :, ::2].reshape((4, 3))", (v.slice(dx::colon, dx::colon, dx::slice(dx::none, dx::none, 2))), (Shape{4, 3}), (Shape{4, 3}), {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22});
  RESHAPE_OK("b[:, :, ::2].reshape((2, 2, 3))", (v.slice(dx::colon, dx::colon, dx::slice(dx::none, dx::none, 2))), (Shape{2, 2, 3}), (Shape{2, 2, 3}), {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22});
  RESHAPE_OK("b[:, :, ::2].reshape((6, 2))", (v.slice(dx::colon, dx::colon, dx::slice(dx::none, dx::none, 2))), (Shape{6, 2}), (Shape{6, 2}), {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22});
  RESHAPE_FAILS("b[::-1].reshape((24,))", (v.slice(dx::slice(dx::none, dx::none, -1))), (Shape{24}));
  RESHAPE_FAILS("b[::-1].reshape((-1,))", (v.slice(dx::slice(dx::none, dx::none, -1))), (Shape{-1}));
  RESHAPE_FAILS("b[::-1].reshape((4, 6))", (v.slice(dx::slice(dx::none, dx::none, -1))), (Shape{4, 6}));
  RESHAPE_FAILS("b[::-1].reshape((6, 4))", (v.slice(dx::slice(dx::none, dx::none, -1))), (Shape{6, 4}));
  RESHAPE_OK("b[::-1].reshape((2, 12))", (v.slice(dx::slice(dx::none, dx::none, -1))), (Shape{2, 12}), (Shape{2, 12}), {12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  RESHAPE_OK("b[::-1].reshape((2, 3, 4))", (v.slice(dx::slice(dx::none, dx::none, -1))), (Shape{2, 3, 4}), (Shape{2, 3, 4}), {12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  RESHAPE_FAILS("b[::-1].reshape((6, -1))", (v.slice(dx::slice(dx::none, dx::none, -1))), (Shape{6, -1}));
  RESHAPE_FAILS("b[::-1].reshape((1, 24))", (v.slice(dx::slice(dx::none, dx::none, -1))), (Shape{1, 24}));
  RESHAPE_FAILS("b[::-1].reshape((24, 1))", (v.slice(dx::slice(dx::none, dx::none, -1))), (Shape{24, 1}));
  RESHAPE_OK("b[::-1].reshape((2, 1, 3, 1, 4))", (v.slice(dx::slice(dx::none, dx::none, -1))), (Shape{2, 1, 3, 1, 4}), (Shape{2, 1, 3, 1, 4}), {12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  RESHAPE_FAILS("b[::-1].reshape((3, 8))", (v.slice(dx::slice(dx::none, dx::none, -1))), (Shape{3, 8}));
  RESHAPE_OK("b[::-1].reshape((2, 6, 2))", (v.slice(dx::slice(dx::none, dx::none, -1))), (Shape{2, 6, 2}), (Shape{2, 6, 2}), {12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  RESHAPE_FAILS("b[::-1].reshape((1, 1, -1))", (v.slice(dx::slice(dx::none, dx::none, -1))), (Shape{1, 1, -1}));
  RESHAPE_OK("b[::-1].reshape((1, 2, 3, 4, 1))", (v.slice(dx::slice(dx::none, dx::none, -1))), (Shape{1, 2, 3, 4, 1}), (Shape{1, 2, 3, 4, 1}), {12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  RESHAPE_FAILS("b[:, 1:].reshape((-1,))", (v.slice(dx::colon, dx::slice(1, dx::none))), (Shape{-1}));
  RESHAPE_FAILS("b[:, 1:].reshape((1, 1, -1))", (v.slice(dx::colon, dx::slice(1, dx::none))), (Shape{1, 1, -1}));
  RESHAPE_FAILS("b[:, :, 1:3].reshape((-1,))", (v.slice(dx::colon, dx::colon, dx::slice(1, 3))), (Shape{-1}));
  RESHAPE_OK("b[:, :, 1:3].reshape((6, -1))", (v.slice(dx::colon, dx::colon, dx::slice(1, 3))), (Shape{6, -1}), (Shape{6, 2}), {1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22});
  RESHAPE_FAILS("b[:, :, 1:3].reshape((1, 1, -1))", (v.slice(dx::colon, dx::colon, dx::slice(1, 3))), (Shape{1, 1, -1}));
  RESHAPE_FAILS("b[:, :, 1:3].reshape((12,))", (v.slice(dx::colon, dx::colon, dx::slice(1, 3))), (Shape{12}));
  RESHAPE_FAILS("b[:, :, 1:3].reshape((3, 4))", (v.slice(dx::colon, dx::colon, dx::slice(1, 3))), (Shape{3, 4}));
  RESHAPE_FAILS("b[:, :, 1:3].reshape((4, 3))", (v.slice(dx::colon, dx::colon, dx::slice(1, 3))), (Shape{4, 3}));
  RESHAPE_FAILS("b[:, :, 1:3].reshape((2, 2, 3))", (v.slice(dx::colon, dx::colon, dx::slice(1, 3))), (Shape{2, 2, 3}));
  RESHAPE_OK("b[:, :, 1:3].reshape((6, 2))", (v.slice(dx::colon, dx::colon, dx::slice(1, 3))), (Shape{6, 2}), (Shape{6, 2}), {1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22});
  RESHAPE_OK("b[1, :, None].reshape((-1,))", (v.slice(1, dx::colon, dx::newaxis)), (Shape{-1}), (Shape{12}), {12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  RESHAPE_OK("b[1, :, None].reshape((6, -1))", (v.slice(1, dx::colon, dx::newaxis)), (Shape{6, -1}), (Shape{6, 2}), {12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  RESHAPE_OK("b[1, :, None].reshape((1, 1, -1))", (v.slice(1, dx::colon, dx::newaxis)), (Shape{1, 1, -1}), (Shape{1, 1, 12}), {12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  RESHAPE_OK("b[1, :, None].reshape((12,))", (v.slice(1, dx::colon, dx::newaxis)), (Shape{12}), (Shape{12}), {12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  RESHAPE_OK("b[1, :, None].reshape((3, 4))", (v.slice(1, dx::colon, dx::newaxis)), (Shape{3, 4}), (Shape{3, 4}), {12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  RESHAPE_OK("b[1, :, None].reshape((4, 3))", (v.slice(1, dx::colon, dx::newaxis)), (Shape{4, 3}), (Shape{4, 3}), {12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  RESHAPE_OK("b[1, :, None].reshape((2, 2, 3))", (v.slice(1, dx::colon, dx::newaxis)), (Shape{2, 2, 3}), (Shape{2, 2, 3}), {12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  RESHAPE_OK("b[1, :, None].reshape((6, 2))", (v.slice(1, dx::colon, dx::newaxis)), (Shape{6, 2}), (Shape{6, 2}), {12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  RESHAPE_FAILS("b.transpose(1,0,2).reshape((24,))", (v.permute(Shape{1, 0, 2})), (Shape{24}));
  RESHAPE_FAILS("b.transpose(1,0,2).reshape((-1,))", (v.permute(Shape{1, 0, 2})), (Shape{-1}));
  RESHAPE_FAILS("b.transpose(1,0,2).reshape((4, 6))", (v.permute(Shape{1, 0, 2})), (Shape{4, 6}));
  RESHAPE_FAILS("b.transpose(1,0,2).reshape((6, 4))", (v.permute(Shape{1, 0, 2})), (Shape{6, 4}));
  RESHAPE_FAILS("b.transpose(1,0,2).reshape((2, 12))", (v.permute(Shape{1, 0, 2})), (Shape{2, 12}));
  RESHAPE_FAILS("b.transpose(1,0,2).reshape((2, 3, 4))", (v.permute(Shape{1, 0, 2})), (Shape{2, 3, 4}));
  RESHAPE_FAILS("b.transpose(1,0,2).reshape((6, -1))", (v.permute(Shape{1, 0, 2})), (Shape{6, -1}));
  RESHAPE_FAILS("b.transpose(1,0,2).reshape((1, 24))", (v.permute(Shape{1, 0, 2})), (Shape{1, 24}));
  RESHAPE_FAILS("b.transpose(1,0,2).reshape((24, 1))", (v.permute(Shape{1, 0, 2})), (Shape{24, 1}));
  RESHAPE_FAILS("b.transpose(1,0,2).reshape((2, 1, 3, 1, 4))", (v.permute(Shape{1, 0, 2})), (Shape{2, 1, 3, 1, 4}));
  RESHAPE_FAILS("b.transpose(1,0,2).reshape((3, 8))", (v.permute(Shape{1, 0, 2})), (Shape{3, 8}));
  RESHAPE_FAILS("b.transpose(1,0,2).reshape((2, 6, 2))", (v.permute(Shape{1, 0, 2})), (Shape{2, 6, 2}));
  RESHAPE_FAILS("b.transpose(1,0,2).reshape((1, 1, -1))", (v.permute(Shape{1, 0, 2})), (Shape{1, 1, -1}));
  RESHAPE_FAILS("b.transpose(1,0,2).reshape((1, 2, 3, 4, 1))", (v.permute(Shape{1, 0, 2})), (Shape{1, 2, 3, 4, 1}));
  RESHAPE_FAILS("b[..., ::-1].reshape((24,))", (v.slice(dx::ellipsis, dx::slice(dx::none, dx::none, -1))), (Shape{24}));
  RESHAPE_FAILS("b[..., ::-1].reshape((-1,))", (v.slice(dx::ellipsis, dx::slice(dx::none, dx::none, -1))), (Shape{-1}));
  RESHAPE_FAILS("b[..., ::-1].reshape((4, 6))", (v.slice(dx::ellipsis, dx::slice(dx::none, dx::none, -1))), (Shape{4, 6}));
  RESHAPE_OK("b[..., ::-1].reshape((6, 4))", (v.slice(dx::ellipsis, dx::slice(dx::none, dx::none, -1))), (Shape{6, 4}), (Shape{6, 4}), {3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12, 19, 18, 17, 16, 23, 22, 21, 20});
  RESHAPE_FAILS("b[..., ::-1].reshape((2, 12))", (v.slice(dx::ellipsis, dx::slice(dx::none, dx::none, -1))), (Shape{2, 12}));
  RESHAPE_OK("b[..., ::-1].reshape((2, 3, 4))", (v.slice(dx::ellipsis, dx::slice(dx::none, dx::none, -1))), (Shape{2, 3, 4}), (Shape{2, 3, 4}), {3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12, 19, 18, 17, 16, 23, 22, 21, 20});
  RESHAPE_OK("b[..., ::-1].reshape((6, -1))", (v.slice(dx::ellipsis, dx::slice(dx::none, dx::none, -1))), (Shape{6, -1}), (Shape{6, 4}), {3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12, 19, 18, 17, 16, 23, 22, 21, 20});
  RESHAPE_FAILS("b[..., ::-1].reshape((1, 24))", (v.slice(dx::ellipsis, dx::slice(dx::none, dx::none, -1))), (Shape{1, 24}));
  RESHAPE_FAILS("b[..., ::-1].reshape((24, 1))", (v.slice(dx::ellipsis, dx::slice(dx::none, dx::none, -1))), (Shape{24, 1}));
  RESHAPE_OK("b[..., ::-1].reshape((2, 1, 3, 1, 4))", (v.slice(dx::ellipsis, dx::slice(dx::none, dx::none, -1))), (Shape{2, 1, 3, 1, 4}), (Shape{2, 1, 3, 1, 4}), {3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12, 19, 18, 17, 16, 23, 22, 21, 20});
  RESHAPE_FAILS("b[..., ::-1].reshape((3, 8))", (v.slice(dx::ellipsis, dx::slice(dx::none, dx::none, -1))), (Shape{3, 8}));
  RESHAPE_FAILS("b[..., ::-1].reshape((2, 6, 2))", (v.slice(dx::ellipsis, dx::slice(dx::none, dx::none, -1))), (Shape{2, 6, 2}));
  RESHAPE_FAILS("b[..., ::-1].reshape((1, 1, -1))", (v.slice(dx::ellipsis, dx::slice(dx::none, dx::none, -1))), (Shape{1, 1, -1}));
  RESHAPE_OK("b[..., ::-1].reshape((1, 2, 3, 4, 1))", (v.slice(dx::ellipsis, dx::slice(dx::none, dx::none, -1))), (Shape{1, 2, 3, 4, 1}), (Shape{1, 2, 3, 4, 1}), {3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12, 19, 18, 17, 16, 23, 22, 21, 20});
#undef RESHAPE_OK
#undef RESHAPE_FAILS
  CHECK(ok > 20);
  CHECK(fails > 20);
}

TEST_CASE("View: reshape errors, -1, empty and scalar shapes") {
  auto a = arange(Shape{2, 3, 4});
  CHECK(a.reshape(Shape{-1}).shape() == Shape{24});
  CHECK(a.reshape(Shape{-1, 6}).shape() == Shape{4, 6});
  CHECK(a.reshape(Shape{2, -1, 3}).shape() == Shape{2, 4, 3});
  CHECK(a.reshape(Shape{2, 3, 4}).data() == a.data());
  CHECK_THROWS_AS(a.reshape(Shape{5, -1}), dx::shape_error);      // 24 % 5 != 0
  CHECK_THROWS_AS(a.reshape(Shape{-1, -1}), dx::shape_error);     // two unknowns
  CHECK_THROWS_AS(a.reshape(Shape{25}), dx::shape_error);         // size mismatch
  CHECK_THROWS_AS(a.reshape(Shape{-2, 12}), dx::shape_error);     // negative extent
  CHECK(contains(message_of<dx::shape_error>([&] { (void)a.reshape(Shape{7, 3}); }),
                 "cannot reshape array of size 24 into shape (7, 3)"));
  // a transposed view cannot be flattened in place; the message points at copy()
  auto t = a.transpose();
  const std::string m = message_of<dx::shape_error>([&] { (void)t.reshape(Shape{24}); });
  CHECK(contains(m, "copy"));
  CHECK(contains(m, "(4, 3, 2)"));
  CHECK(walk(t.copy().reshape(Shape{24})) == walk(t));

  dx::Tensor<float> s(Shape{});
  s.at() = 3.f;
  CHECK(s.reshape(Shape{1, 1}).at(0, 0) == 3.f);
  CHECK(s.reshape(Shape{-1}).shape() == Shape{1});
  CHECK(s.reshape(Shape{1}).reshape(Shape{}).ndim() == 0);

  auto e = arange(Shape{0, 4});
  CHECK(e.reshape(Shape{4, 0}).shape() == Shape{4, 0});
  CHECK(e.reshape(Shape{2, 0, 8}).size() == 0);
  CHECK_THROWS_AS(e.reshape(Shape{-1, 0}), dx::shape_error);  // NumPy: cannot infer with 0
  CHECK_THROWS_AS(e.reshape(Shape{1}), dx::shape_error);

  // a reversed (negative-stride) 1-D view reshapes in place
  auto r12 = arange(Shape{12});
  auto r = r12.slice(dx::slice(dx::none, dx::none, -1));
  auto rr = r.reshape(Shape{3, 4});
  CHECK(rr.strides() == Strides{-4, -1});
  CHECK(walk(rr) == walk(r));
}

// ---------------------------------------------------------------------------------------
// broadcast_to
// ---------------------------------------------------------------------------------------

TEST_CASE("View: broadcast_to") {
  auto a = arange(Shape{3, 1});
  // np.broadcast_to(np.arange(3).reshape(3,1), (2,3,4)).strides // 8 == (0, 1, 0)
  auto b = a.broadcast_to(Shape{2, 3, 4});
  CHECK(b.shape() == Shape{2, 3, 4});
  CHECK(b.strides()[0] == 0);
  CHECK(b.strides()[1] == 1);
  CHECK(b.strides()[2] == 0);
  CHECK(b.data() == a.data());
  std::vector<std::int64_t> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) want.push_back(j);
  CHECK(walk(b) == want);
  CHECK(walk(b.copy().view()) == want);
  CHECK(a.broadcast_to(Shape{3, 5}).shape() == Shape{3, 5});
  CHECK(a.broadcast_to(Shape{3, 0}).size() == 0);

  // of a strided, reversed view: np.broadcast_to(np.arange(12).reshape(3,4)[::-1, ::2], (2,3,2))
  auto c34 = arange(Shape{3, 4});
  auto c = c34.slice(dx::slice(dx::none, dx::none, -1), dx::slice(dx::none, dx::none, 2));
  auto cb = c.broadcast_to(Shape{2, 3, 2});
  CHECK(cb.strides() == Strides{0, -4, 2});
  CHECK(walk(cb) == std::vector<std::int64_t>{8, 10, 4, 6, 0, 2, 8, 10, 4, 6, 0, 2});

  // a scalar broadcasts to anything
  dx::Tensor<double> s(Shape{}, 2.0);
  CHECK(walk(s.broadcast_to(Shape{2, 2})) == std::vector<double>{2, 2, 2, 2});

  CHECK_THROWS_AS(a.broadcast_to(Shape{4, 2}), dx::shape_error);
  CHECK_THROWS_AS(a.broadcast_to(Shape{3}), dx::shape_error);   // fewer dimensions
  auto a3 = arange(Shape{3});
  CHECK_THROWS_AS(a3.broadcast_to(Shape{3, 4}), dx::shape_error);
  CHECK(contains(message_of<dx::shape_error>([&] { (void)a.broadcast_to(Shape{4, 2}); }),
                 "(3, 1)"));
}

// ---------------------------------------------------------------------------------------
// dx::view of foreign memory; copy()
// ---------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("dx::view of caller-owned memory", T, std::int32_t, float, double) {
  std::vector<T> buf(20);
  for (int i = 0; i < 20; ++i) buf[i] = static_cast<T>(i);

  auto c = dx::view(buf.data(), Shape{4, 5});
  CHECK(c.strides() == Strides{5, 1});
  CHECK(c.at(2, 3) == T(13));
  c.at(3, 4) = T(-1);
  CHECK(buf[19] == T(-1));
  buf[19] = T(19);

  // rows of 4 with a pitch of 5 (np.lib.stride_tricks.as_strided semantics)
  auto p = dx::view(buf.data(), Shape{3, 4}, Strides{5, 1});
  CHECK(walk(p) == std::vector<T>{0, 1, 2, 3, 5, 6, 7, 8, 10, 11, 12, 13});
  CHECK_FALSE(p.is_contiguous());
  // negative strides from the last element
  auto r = dx::view(buf.data() + 19, Shape{2, 3}, Strides{-10, -3});
  CHECK(walk(r) == std::vector<T>{19, 16, 13, 9, 6, 3});
  // zero strides
  auto z = dx::view(buf.data() + 7, Shape{2, 3}, Strides{0, 0});
  CHECK(walk(z) == std::vector<T>(6, T(7)));
  // read-only view of const memory
  const std::vector<T>& cbuf = buf;
  auto ro = dx::view(cbuf.data(), Shape{20});
  static_assert(std::is_same_v<decltype(ro), dx::View<const T>>);
  CHECK(ro.at(-1) == T(19));

  CHECK_THROWS_AS(dx::view(buf.data(), Shape{4, 5}, Strides{1}), dx::shape_error);
  CHECK_THROWS_AS(dx::view(buf.data(), Shape{-4}), dx::shape_error);
}

TEST_CASE_TEMPLATE("View::copy of strided, reversed, broadcast and empty views", T, DX_ALL_DTYPES) {
  dx::Tensor<T> a(Shape{6, 7});
  for (index_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<T>((i * 5) % 11);
  const std::vector<dx::View<T>> views = {
      a.view(),
      a.slice(dx::slice(1, dx::none, 2), dx::slice(dx::none, dx::none, 3)),
      a.slice(dx::slice(dx::none, dx::none, -1), dx::slice(dx::none, dx::none, -2)),
      a.transpose(),
      a.slice(dx::slice(dx::none, dx::none, -2)).transpose(),
      a.slice(2, dx::newaxis).broadcast_to(Shape{3, 7}),
      a.slice(dx::colon, 4),
      a.slice(dx::slice(4, 2)),
      a.slice(3, 3),
  };
  for (const auto& v : views) {
    CAPTURE(v.shape());
    CAPTURE(v.strides());
    const dx::Tensor<T> c = v.copy();
    CHECK(c.shape() == v.shape());
    CHECK(c.strides() == dx::contiguous_strides(v.shape()));
    CHECK(aligned64(c.data()));
    CHECK(walk(c.view()) == walk(v));
    CHECK(c.data() != v.data());
  }
}
