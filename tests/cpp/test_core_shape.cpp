// Tests of core/shape.hpp (Shape, Strides, broadcasting) and core/dtype.hpp (dtypes and
// NumPy 2 promotion). Expected values were taken from NumPy 2.x on the same inputs:
// np.broadcast_shapes, np.broadcast_to(...).strides, np.result_type, and array + Python
// scalar for the NEP 50 "weak scalar" rules.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "dynexpr/core/dtype.hpp"
#include "dynexpr/core/error.hpp"
#include "dynexpr/core/shape.hpp"

namespace doctest {
// Failed CHECKs print shapes the way NumPy does: "(3, 4)".
template <class Tag>
struct StringMaker<dynexpr::dims<Tag>> {
  static String convert(const dynexpr::dims<Tag>& d) { return d.str().c_str(); }
};
}  // namespace doctest

namespace {

using dynexpr::index_t;
using dynexpr::Shape;
using dynexpr::Strides;

// The message of the exception `f` throws, which must be of type E.
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("expected an exception");
  return {};
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Shape / Strides
// ---------------------------------------------------------------------------------------

TEST_CASE("Shape: construction and element access") {
  const Shape scalar;
  CHECK(scalar.size() == 0);
  CHECK(scalar.empty());

  const Shape s{3, 4, 5};
  CHECK(s.size() == 3);
  CHECK_FALSE(s.empty());
  CHECK(s[0] == 3);
  CHECK(s[1] == 4);
  CHECK(s[2] == 5);
  CHECK(s.back() == 5);

  const std::vector<int> v{7, 1, 2};
  const Shape from_range(v.begin(), v.end());
  CHECK(from_range == Shape{7, 1, 2});

  const Shape f = Shape::filled(4, 1);
  CHECK(f == Shape{1, 1, 1, 1});
  CHECK(Shape::filled(0, 9) == Shape{});

  index_t total = 0;
  for (index_t e : s) total += e;
  CHECK(total == 12);
}

TEST_CASE("Shape: equality compares rank and extents") {
  CHECK(Shape{3, 4} == Shape{3, 4});
  CHECK_FALSE(Shape{3, 4} == Shape{4, 3});
  CHECK_FALSE(Shape{3} == Shape{3, 1});
  CHECK_FALSE(Shape{1} == Shape{});
  CHECK(Shape{} == Shape{});
}

TEST_CASE("Shape: push_back, insert, erase") {
  Shape s{3, 4};
  s.push_back(5);
  CHECK(s == Shape{3, 4, 5});
  s.insert(0, 2);
  CHECK(s == Shape{2, 3, 4, 5});
  s.insert(2, 1);
  CHECK(s == Shape{2, 3, 1, 4, 5});
  s.insert(s.size(), 6);
  CHECK(s == Shape{2, 3, 1, 4, 5, 6});
  s.erase(2);
  CHECK(s == Shape{2, 3, 4, 5, 6});
  s.erase(0);
  CHECK(s == Shape{3, 4, 5, 6});
  s.erase(s.size() - 1);
  CHECK(s == Shape{3, 4, 5});
  s[1] = 9;
  CHECK(s == Shape{3, 9, 5});
}

TEST_CASE("Shape: rank above max_rank is a shape_error that says so") {
  static_assert(dynexpr::max_rank == 8);
  CHECK_NOTHROW(Shape{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK_THROWS_AS(Shape({1, 2, 3, 4, 5, 6, 7, 8, 9}), dynexpr::shape_error);
  CHECK_THROWS_AS(Shape::filled(9, 1), dynexpr::shape_error);

  Shape full = Shape::filled(8, 2);
  CHECK_THROWS_AS(full.push_back(1), dynexpr::shape_error);
  CHECK_THROWS_AS(full.insert(0, 1), dynexpr::shape_error);
  CHECK(full.size() == 8);  // unchanged by the failed calls

  const std::string msg = message_of<dynexpr::shape_error>([] { Shape::filled(9, 1); });
  CHECK(contains(msg, "rank 9"));
  CHECK(contains(msg, "maximum of 8"));
  // shape_error is a dynexpr::error, which callers may catch as the one base type.
  CHECK_THROWS_AS(Shape::filled(12, 1), dynexpr::error);
}

TEST_CASE("Shape::str prints as NumPy does") {
  CHECK(Shape{3, 4}.str() == "(3, 4)");
  CHECK(Shape{5}.str() == "(5,)");
  CHECK(Shape{}.str() == "()");
  CHECK(Shape{2, 0, 7}.str() == "(2, 0, 7)");
  CHECK(Strides{4, -1}.str() == "(4, -1)");
}

TEST_CASE("shape_size") {
  CHECK(dynexpr::shape_size(Shape{}) == 1);
  CHECK(dynexpr::shape_size(Shape{5}) == 5);
  CHECK(dynexpr::shape_size(Shape{3, 4}) == 12);
  CHECK(dynexpr::shape_size(Shape{2, 3, 4, 5}) == 120);
  CHECK(dynexpr::shape_size(Shape{2, 0, 5}) == 0);
  CHECK(dynexpr::shape_size(Shape{100000, 100000}) == index_t{10000000000});
}

TEST_CASE("contiguous_strides: row-major element strides") {
  CHECK(dynexpr::contiguous_strides(Shape{}) == Strides{});
  CHECK(dynexpr::contiguous_strides(Shape{5}) == Strides{1});
  CHECK(dynexpr::contiguous_strides(Shape{3, 4}) == Strides{4, 1});
  CHECK(dynexpr::contiguous_strides(Shape{2, 3, 4}) == Strides{12, 4, 1});
  // np.empty((3, 1, 4)).strides == (32, 32, 8) bytes for float64: (4, 4, 1) elements.
  CHECK(dynexpr::contiguous_strides(Shape{3, 1, 4}) == Strides{4, 4, 1});
}

TEST_CASE("Shape helpers are usable in constant expressions") {
  static_assert(dynexpr::shape_size(Shape{3, 4}) == 12);
  static_assert(dynexpr::contiguous_strides(Shape{2, 3}) == Strides{3, 1});
  static_assert(dynexpr::is_contiguous(Shape{2, 3}, Strides{3, 1}));
  static_assert(!dynexpr::is_contiguous(Shape{2, 3}, Strides{1, 2}));
  CHECK(true);
}

TEST_CASE("is_contiguous") {
  using dynexpr::contiguous_strides;
  using dynexpr::is_contiguous;
  for (const Shape& s : {Shape{}, Shape{7}, Shape{3, 4}, Shape{2, 3, 4}, Shape{1, 5, 1}}) {
    CAPTURE(s);
    CHECK(is_contiguous(s, contiguous_strides(s)));
  }
  // A transpose is not contiguous.
  CHECK_FALSE(is_contiguous(Shape{4, 3}, Strides{1, 4}));
  // A slice with step 2 leaves gaps.
  CHECK_FALSE(is_contiguous(Shape{3, 2}, Strides{4, 2}));
  CHECK_FALSE(is_contiguous(Shape{5}, Strides{2}));
  // Negative strides (a reversed view) are not row-major order.
  CHECK_FALSE(is_contiguous(Shape{5}, Strides{-1}));
  // Broadcast (stride 0) along a dimension of size > 1 is not contiguous.
  CHECK_FALSE(is_contiguous(Shape{3, 4}, Strides{0, 1}));
  // The stride of a size-1 dimension is never used, so it does not matter.
  CHECK(is_contiguous(Shape{3, 1, 4}, Strides{4, 99, 1}));
  CHECK(is_contiguous(Shape{1, 4}, Strides{0, 1}));
  CHECK(is_contiguous(Shape{1}, Strides{-3}));
  // Empty arrays.
  CHECK(is_contiguous(Shape{3, 0, 4}, contiguous_strides(Shape{3, 0, 4})));
  CHECK(is_contiguous(Shape{3, 4, 0}, Strides{7, 5, 3}));
}

// NumPy flags every empty array C-contiguous, whatever its strides.
TEST_CASE("is_contiguous: an empty array is contiguous whatever its strides") {
  CHECK(dynexpr::is_contiguous(Shape{3, 0, 4}, Strides{7, 5, 3}));
}

// ---------------------------------------------------------------------------------------
// Broadcasting
// ---------------------------------------------------------------------------------------

TEST_CASE("broadcast_shapes matches np.broadcast_shapes") {
  struct Case {
    Shape a, b, out;
  };
  // Each case is checked in both argument orders (broadcasting is symmetric).
  const Case cases[] = {
      {Shape{8, 1, 6, 1}, Shape{7, 1, 5}, Shape{8, 7, 6, 5}},  // the NumPy manual's example
      {Shape{5, 4}, Shape{1}, Shape{5, 4}},
      {Shape{5, 4}, Shape{4}, Shape{5, 4}},
      {Shape{15, 3, 5}, Shape{15, 1, 5}, Shape{15, 3, 5}},
      {Shape{15, 3, 5}, Shape{3, 5}, Shape{15, 3, 5}},
      {Shape{15, 3, 5}, Shape{3, 1}, Shape{15, 3, 5}},
      {Shape{3, 1}, Shape{1, 4}, Shape{3, 4}},
      {Shape{}, Shape{3}, Shape{3}},
      {Shape{}, Shape{2, 3}, Shape{2, 3}},
      {Shape{}, Shape{}, Shape{}},
      {Shape{2, 3}, Shape{2, 3}, Shape{2, 3}},
      {Shape{1}, Shape{1}, Shape{1}},
      // Size-0 dimensions broadcast like any other size: only 1 stretches.
      {Shape{0, 3}, Shape{1, 3}, Shape{0, 3}},
      {Shape{2, 0}, Shape{1}, Shape{2, 0}},
      {Shape{1}, Shape{0}, Shape{0}},
      {Shape{1, 1, 1, 1, 1, 1, 1, 2}, Shape{3, 1}, Shape{1, 1, 1, 1, 1, 1, 3, 2}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.a);
    CAPTURE(c.b);
    CHECK(dynexpr::broadcast_shapes(c.a, c.b) == c.out);
    CHECK(dynexpr::broadcast_shapes(c.b, c.a) == c.out);
  }
}

TEST_CASE("broadcast_shapes: a mismatch is a shape_error naming both shapes") {
  struct Case {
    Shape a, b;
    const char* a_str;
    const char* b_str;
  };
  const Case cases[] = {
      {Shape{3, 4}, Shape{2, 4}, "(3, 4)", "(2, 4)"},
      {Shape{2, 1}, Shape{8, 4, 3}, "(2, 1)", "(8, 4, 3)"},
      {Shape{3}, Shape{4}, "(3,)", "(4,)"},
      {Shape{0}, Shape{2}, "(0,)", "(2,)"},
      {Shape{5, 4}, Shape{5}, "(5, 4)", "(5,)"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.a);
    CAPTURE(c.b);
    CHECK_THROWS_AS(dynexpr::broadcast_shapes(c.a, c.b), dynexpr::shape_error);
    const std::string msg =
        message_of<dynexpr::shape_error>([&] { dynexpr::broadcast_shapes(c.a, c.b); });
    CHECK(contains(msg, "could not be broadcast"));
    CHECK(contains(msg, c.a_str));
    CHECK(contains(msg, c.b_str));
  }
  // The message names the dimension that disagrees, counted from the end as NumPy does.
  const std::string msg = message_of<dynexpr::shape_error>([] {
    dynexpr::broadcast_shapes(Shape{2, 3, 4}, Shape{5, 4});
  });
  CHECK(contains(msg, "dimension -2"));
}

TEST_CASE("broadcast_strides: stride 0 along broadcast dimensions") {
  using dynexpr::broadcast_strides;
  // np.broadcast_to(np.empty((3, 1)), (2, 3, 4)).strides == (0, 8, 0) for float64.
  CHECK(broadcast_strides(Shape{3, 1}, Strides{1, 1}, Shape{2, 3, 4}) == Strides{0, 1, 0});
  // A row vector against a matrix.
  CHECK(broadcast_strides(Shape{4}, Strides{1}, Shape{3, 4}) == Strides{0, 1});
  // A column.
  CHECK(broadcast_strides(Shape{3, 1}, Strides{1, 1}, Shape{3, 4}) == Strides{1, 0});
  // The same shape keeps its strides, except size-1 dimensions, which read stride 0.
  CHECK(broadcast_strides(Shape{2, 3}, Strides{3, 1}, Shape{2, 3}) == Strides{3, 1});
  CHECK(broadcast_strides(Shape{1, 4}, Strides{4, 1}, Shape{1, 4}) == Strides{0, 1});
  // Non-contiguous and negative strides are carried through.
  CHECK(broadcast_strides(Shape{4, 3}, Strides{1, 4}, Shape{2, 4, 3}) == Strides{0, 1, 4});
  CHECK(broadcast_strides(Shape{5}, Strides{-1}, Shape{2, 5}) == Strides{0, -1});
  // Rank 0 to anything: all zeros.
  CHECK(broadcast_strides(Shape{}, Strides{}, Shape{2, 3}) == Strides{0, 0});
  CHECK(broadcast_strides(Shape{}, Strides{}, Shape{}) == Strides{});
}

TEST_CASE("broadcast_strides: a target that is not a broadcast is a shape_error") {
  using dynexpr::broadcast_strides;
  CHECK_THROWS_AS(broadcast_strides(Shape{3}, Strides{1}, Shape{4}), dynexpr::shape_error);
  CHECK_THROWS_AS(broadcast_strides(Shape{2, 3}, Strides{3, 1}, Shape{3}), dynexpr::shape_error);
  CHECK_THROWS_AS(broadcast_strides(Shape{3, 2}, Strides{2, 1}, Shape{3, 4}), dynexpr::shape_error);
  const std::string msg = message_of<dynexpr::shape_error>([] {
    broadcast_strides(Shape{3, 2}, Strides{2, 1}, Shape{3, 4});
  });
  CHECK(contains(msg, "(3, 2)"));
  CHECK(contains(msg, "(3, 4)"));
}

TEST_CASE("normalize_axis") {
  using dynexpr::normalize_axis;
  CHECK(normalize_axis(0, 3) == 0);
  CHECK(normalize_axis(2, 3) == 2);
  CHECK(normalize_axis(-1, 3) == 2);
  CHECK(normalize_axis(-3, 3) == 0);
  CHECK(normalize_axis(0, 1) == 0);
  CHECK(normalize_axis(-1, 1) == 0);

  CHECK_THROWS_AS(normalize_axis(3, 3), dynexpr::index_error);
  CHECK_THROWS_AS(normalize_axis(-4, 3), dynexpr::index_error);
  CHECK_THROWS_AS(normalize_axis(0, 0), dynexpr::index_error);
  CHECK_THROWS_AS(normalize_axis(-1, 0), dynexpr::index_error);
  CHECK_THROWS_AS(normalize_axis(3, 3), dynexpr::error);
  // NumPy: "axis 3 is out of bounds for array of dimension 2".
  CHECK(contains(message_of<dynexpr::index_error>([] { normalize_axis(3, 2); }),
                 "axis 3 is out of bounds for array of dimension 2"));
  CHECK(contains(message_of<dynexpr::index_error>([] { normalize_axis(-4, 3); }),
                 "axis -4 is out of bounds for array of dimension 3"));
}

// ---------------------------------------------------------------------------------------
// dtypes
// ---------------------------------------------------------------------------------------

using all_elements = std::tuple<bool, std::uint8_t, std::int32_t, std::int64_t, float, double>;

TEST_CASE("dtype_of and dtype_name") {
  using dynexpr::dtype;
  using dynexpr::dtype_name;
  using dynexpr::dtype_of;
  static_assert(dtype_of<bool>() == dtype::bool_);
  static_assert(dtype_of<std::uint8_t>() == dtype::uint8);
  static_assert(dtype_of<std::int32_t>() == dtype::int32);
  static_assert(dtype_of<std::int64_t>() == dtype::int64);
  static_assert(dtype_of<float>() == dtype::float32);
  static_assert(dtype_of<double>() == dtype::float64);

  CHECK(std::string(dtype_name(dtype::bool_)) == "bool");
  CHECK(std::string(dtype_name(dtype::uint8)) == "uint8");
  CHECK(std::string(dtype_name(dtype::int32)) == "int32");
  CHECK(std::string(dtype_name(dtype::int64)) == "int64");
  CHECK(std::string(dtype_name(dtype::float32)) == "float32");
  CHECK(std::string(dtype_name(dtype::float64)) == "float64");
  CHECK(std::string(dtype_name<float>()) == "float32");
  CHECK(std::string(dtype_name<std::int64_t>()) == "int64");
}

TEST_CASE("Element, kind traits and float_result_t") {
  static_assert(dynexpr::Element<bool> && dynexpr::Element<std::uint8_t> &&
                dynexpr::Element<std::int32_t> && dynexpr::Element<std::int64_t> &&
                dynexpr::Element<float> && dynexpr::Element<double>);
  // Not supported (see also tests/cpp/compile_fail/dtype_of_unsupported.cpp).
  static_assert(!dynexpr::Element<short> && !dynexpr::Element<std::int8_t> &&
                !dynexpr::Element<std::uint32_t> && !dynexpr::Element<long double> &&
                !dynexpr::Element<char> && !dynexpr::Element<int*>);

  static_assert(dynexpr::is_float_v<float> && dynexpr::is_float_v<double>);
  static_assert(!dynexpr::is_float_v<std::int32_t>);
  static_assert(dynexpr::is_bool_v<bool> && !dynexpr::is_bool_v<std::uint8_t>);
  // bool is not an integer dtype (NumPy kind 'b', not 'i'/'u').
  static_assert(!dynexpr::is_int_v<bool>);
  static_assert(dynexpr::is_int_v<std::uint8_t> && dynexpr::is_int_v<std::int32_t> &&
                dynexpr::is_int_v<std::int64_t>);
  static_assert(!dynexpr::is_int_v<float> && !dynexpr::is_int_v<short>);

  // np.exp of an integer or bool array is float64; of float32 stays float32.
  static_assert(std::is_same_v<dynexpr::float_result_t<float>, float>);
  static_assert(std::is_same_v<dynexpr::float_result_t<double>, double>);
  static_assert(std::is_same_v<dynexpr::float_result_t<std::int32_t>, double>);
  static_assert(std::is_same_v<dynexpr::float_result_t<std::uint8_t>, double>);
  static_assert(std::is_same_v<dynexpr::float_result_t<bool>, double>);
  CHECK(true);
}

namespace {

// np.result_type(ROW, COLUMN) for ROW, COLUMN in all_elements (NumPy 2.x).
constexpr const char* numpy_result_type[6][6] = {
    // bool      uint8      int32      int64      float32    float64
    {"bool", "uint8", "int32", "int64", "float32", "float64"},           // bool
    {"uint8", "uint8", "int32", "int64", "float32", "float64"},          // uint8
    {"int32", "int32", "int32", "int64", "float64", "float64"},          // int32
    {"int64", "int64", "int64", "int64", "float64", "float64"},          // int64
    {"float32", "float32", "float64", "float64", "float32", "float64"},  // float32
    {"float64", "float64", "float64", "float64", "float64", "float64"},  // float64
};

// (array of ROW) + (Python scalar) for the Python scalars True, 1 and 1.5 (NumPy 2,
// NEP 50: a Python scalar is "weak" and does not widen the array's dtype within its kind).
constexpr const char* numpy_weak_result_type[6][3] = {
    // bool      int        float
    {"bool", "int64", "float64"},       // bool
    {"uint8", "uint8", "float64"},      // uint8
    {"int32", "int32", "float64"},      // int32
    {"int64", "int64", "float64"},      // int64
    {"float32", "float32", "float32"},  // float32
    {"float64", "float64", "float64"},  // float64
};

template <std::size_t I>
using element_at = std::tuple_element_t<I, all_elements>;

template <class T>
std::string name_of() {
  return std::string(dynexpr::dtype_name<T>());
}

template <std::size_t... I, class F>
void for_each_index(std::index_sequence<I...>, F&& f) {
  (f(std::integral_constant<std::size_t, I>{}), ...);
}

}  // namespace

TEST_CASE("promote_t matches np.result_type for every pair") {
  constexpr auto n = std::tuple_size_v<all_elements>;
  for_each_index(std::make_index_sequence<n>{}, [](auto i) {
    for_each_index(std::make_index_sequence<n>{}, [](auto j) {
      using A = element_at<decltype(i)::value>;
      using B = element_at<decltype(j)::value>;
      using R = dynexpr::promote_t<A, B>;
      static_assert(dynexpr::Element<R>);
      CAPTURE(name_of<A>());
      CAPTURE(name_of<B>());
      CHECK(name_of<R>() == numpy_result_type[decltype(i)::value][decltype(j)::value]);
    });
  });
}

TEST_CASE_TEMPLATE("promote_t is symmetric and idempotent", A, bool, std::uint8_t, std::int32_t,
                   std::int64_t, float, double) {
  static_assert(std::is_same_v<dynexpr::promote_t<A, A>, A>);
  static_assert(std::is_same_v<dynexpr::promote_t<A, bool>, A>);  // bool is the identity
  for_each_index(std::make_index_sequence<std::tuple_size_v<all_elements>>{}, [](auto j) {
    using B = element_at<decltype(j)::value>;
    CAPTURE(name_of<B>());
    CHECK(std::is_same_v<dynexpr::promote_t<A, B>, dynexpr::promote_t<B, A>>);
  });
}

TEST_CASE("promote_weak_t matches NumPy 2 (NEP 50) for Python bool, int and float") {
  for_each_index(std::make_index_sequence<std::tuple_size_v<all_elements>>{}, [](auto i) {
    using A = element_at<decltype(i)::value>;
    const auto& expected = numpy_weak_result_type[decltype(i)::value];
    CAPTURE(name_of<A>());
    CHECK(name_of<dynexpr::promote_weak_t<A, bool>>() == expected[0]);
    CHECK(name_of<dynexpr::promote_weak_t<A, int>>() == expected[1]);
    CHECK(name_of<dynexpr::promote_weak_t<A, double>>() == expected[2]);
    // Any C++ integer type acts as a Python int and any floating type as a Python float:
    // only the scalar's kind matters, never its C++ width.
    CHECK(name_of<dynexpr::promote_weak_t<A, std::int64_t>>() == expected[1]);
    CHECK(name_of<dynexpr::promote_weak_t<A, unsigned>>() == expected[1]);
    CHECK(name_of<dynexpr::promote_weak_t<A, short>>() == expected[1]);
    CHECK(name_of<dynexpr::promote_weak_t<A, float>>() == expected[2]);
  });
}
