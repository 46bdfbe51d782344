// Tests of the reductions (eval/reduce.hpp, eval/reductions.hpp): every reduction over
// every axis set of ranks 1..4, with and without keepdims, on contiguous, transposed,
// strided and broadcast inputs and on fused expressions, compared with a long double
// reference loop over the same elements. Expected dtypes, empty-input behaviour, NaN
// handling and errors are NumPy 2's (checked with NumPy 2.4 when this was written).
//
// The structural tests use data whose sums and products are exact in every dtype
// (floats from {±0.5, ±1, ±2}, ints from [-100, 100]), so sum, prod, mean, min, max and the
// arg-reductions are compared exactly; var/std are compared within a relative bound.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <string>
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
using ld = long double;

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

std::uint64_t mix(index_t i, unsigned seed) {
  std::uint64_t h = (static_cast<std::uint64_t>(i) + 0x9E3779B97F4A7C15ull) * (seed * 2 + 1);
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  return h;
}

// Data with exact sums and products (see the header comment).
template <class T>
T exact_value(index_t i, unsigned seed) {
  const std::uint64_t h = mix(i, seed);
  if constexpr (std::is_same_v<T, bool>) return h % 3 == 0;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return static_cast<T>(h % 256);
  else if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<int>(h % 201) - 100);
  else {
    constexpr T table[] = {T(0.5), T(-1), T(2), T(1), T(-0.5), T(-2), T(1)};
    return table[h % 7];
  }
}
// Uniform data in [lo, hi) for the accuracy tests.
template <class T>
T uniform_value(index_t i, unsigned seed, double lo, double hi) {
  const double u = static_cast<double>(mix(i, seed) >> 11) * 0x1.0p-53;
  return static_cast<T>(lo + (hi - lo) * u);
}

template <class T>
dx::Tensor<T> exact_tensor(const Shape& s, unsigned seed) {
  dx::Tensor<T> t(s);
  for (index_t i = 0; i < t.size(); ++i) t.data()[i] = exact_value<T>(i, seed);
  return t;
}
template <class T>
dx::Tensor<T> uniform_tensor(const Shape& s, unsigned seed, double lo, double hi) {
  dx::Tensor<T> t(s);
  for (index_t i = 0; i < t.size(); ++i) t.data()[i] = uniform_value<T>(i, seed, lo, hi);
  return t;
}

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

template <class T>
bool bitwise_equal(const dx::Tensor<T>& a, const dx::Tensor<T>& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

struct thread_count_guard {
  int saved = dx::parallel::num_threads();
  ~thread_count_guard() { dx::parallel::set_num_threads(saved); }
};

// ---------------------------------------------------------------------------- reference
enum class kind { sum, prod, min, max, any, all, mean, var0, var1, std0, std1, argmin, argmax };
const kind all_kinds[] = {kind::sum,  kind::prod, kind::min,  kind::max,  kind::any,
                          kind::all,  kind::mean, kind::var0, kind::var1, kind::std0,
                          kind::std1, kind::argmin, kind::argmax};
const char* kind_name(kind k) {
  static const char* names[] = {"sum",  "prod", "min",  "max",  "any",    "all",   "mean",
                                "var0", "var1", "std0", "std1", "argmin", "argmax"};
  return names[static_cast<int>(k)];
}
bool has_no_identity(kind k) {
  return k == kind::min || k == kind::max || k == kind::argmin || k == kind::argmax;
}
bool is_approximate(kind k) {
  return k == kind::var0 || k == kind::var1 || k == kind::std0 || k == kind::std1;
}

// A reduction's result: an error (value_error), or a shape and values as long double.
struct outcome {
  bool error = false;
  Shape shape;
  std::vector<ld> v;
};

template <class T>
bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(x);
  else return false;
}

// One reduction of `vals` (in C order over the reduced axes), as NumPy defines it.
template <class T>
ld reduce_values(const std::vector<T>& vals, kind k) {
  using F = dx::float_result_t<T>;
  const auto n = static_cast<index_t>(vals.size());
  switch (k) {
    case kind::sum:
    case kind::mean: {
      ld s = 0;
      std::uint64_t si = 0;
      for (T x : vals) {
        if constexpr (std::is_floating_point_v<T>) s += x;
        else si += static_cast<std::uint64_t>(static_cast<std::int64_t>(x));
      }
      if constexpr (!std::is_floating_point_v<T>) s = static_cast<ld>(static_cast<std::int64_t>(si));
      if (k == kind::sum) return s;
      // the exact sum (exact in F for this data) divided once in F, as mean() does
      return static_cast<ld>(static_cast<F>(s) / static_cast<F>(n));
    }
    case kind::prod: {
      ld p = 1;
      std::uint64_t pi = 1;
      for (T x : vals) {
        if constexpr (std::is_floating_point_v<T>) p *= x;
        else pi *= static_cast<std::uint64_t>(static_cast<std::int64_t>(x));  // wraps as NumPy
      }
      if constexpr (!std::is_floating_point_v<T>) p = static_cast<ld>(static_cast<std::int64_t>(pi));
      else p = static_cast<ld>(static_cast<T>(p));  // overflow/underflow of T, as NumPy's
      return p;
    }
    case kind::min:
    case kind::max: {
      ld best = static_cast<ld>(vals[0]);
      for (T x : vals) {
        if (is_nan(x)) return std::numeric_limits<ld>::quiet_NaN();
        const ld y = static_cast<ld>(x);
        if (k == kind::min ? y < best : y > best) best = y;
      }
      return best;
    }
    case kind::any: {
      for (T x : vals)
        if (x != T(0)) return 1;
      return 0;
    }
    case kind::all: {
      for (T x : vals)
        if (x == T(0)) return 0;
      return 1;
    }
    case kind::var0:
    case kind::var1:
    case kind::std0:
    case kind::std1: {
      const int ddof = (k == kind::var1 || k == kind::std1) ? 1 : 0;
      ld m = 0;
      for (T x : vals) m += static_cast<ld>(x);
      m /= static_cast<ld>(n);
      ld ss = 0;
      for (T x : vals) ss += (static_cast<ld>(x) - m) * (static_cast<ld>(x) - m);
      // NumPy divides by max(n - ddof, 0): 0/0 is NaN, x/0 is inf
      const ld var = ss / static_cast<ld>(std::max<index_t>(n - ddof, 0));
      return (k == kind::std0 || k == kind::std1) ? std::sqrt(var) : var;
    }
    case kind::argmin:
    case kind::argmax: {
      index_t w = 0;
      for (index_t i = 0; i < n; ++i) {
        if (is_nan(vals[i])) return static_cast<ld>(i);  // the first NaN wins
        if (k == kind::argmin ? vals[i] < vals[w] : vals[i] > vals[w]) w = i;
      }
      return static_cast<ld>(w);
    }
  }
  return 0;
}

template <class T>
outcome reference(const dx::View<const T>& in, const std::vector<bool>& red, bool keepdims, kind k) {
  outcome r;
  Shape kept, reduced;
  for (int i = 0; i < in.ndim(); ++i) {
    if (red[i]) {
      reduced.push_back(in.shape()[i]);
      if (keepdims) r.shape.push_back(1);
    } else {
      kept.push_back(in.shape()[i]);
      r.shape.push_back(in.shape()[i]);
    }
  }
  // NumPy: no identity and nothing to reduce is an error, even when the result is empty
  if (dx::shape_size(reduced) == 0 && has_no_identity(k)) {
    r.error = true;
    return r;
  }
  for_each_index(kept, [&](const std::vector<index_t>& ki) {
    std::vector<T> vals;
    for_each_index(reduced, [&](const std::vector<index_t>& ri) {
      index_t off = 0;
      std::size_t a = 0, b = 0;
      for (int i = 0; i < in.ndim(); ++i) off += in.strides()[i] * (red[i] ? ri[b++] : ki[a++]);
      vals.push_back(in.data()[off]);
    });
    if (vals.empty()) {
      const ld nan = std::numeric_limits<ld>::quiet_NaN();
      r.v.push_back(k == kind::prod || k == kind::all ? 1 : (k == kind::sum || k == kind::any) ? 0 : nan);
    } else {
      r.v.push_back(reduce_values(vals, k));
    }
  });
  return r;
}

template <class R>
outcome to_outcome(const dx::Tensor<R>& t) {
  outcome o;
  o.shape = t.shape();
  for (index_t i = 0; i < t.size(); ++i) o.v.push_back(static_cast<ld>(t.data()[i]));
  return o;
}
template <class R>
outcome scalar_outcome(R x) {
  outcome o;
  o.v.push_back(static_cast<ld>(x));
  return o;
}

// Runs reduction k through the public API with an axis spec (int, Shape or all_axes_t).
template <class X, class A>
outcome run_kind(kind k, const X& x, const A& axes, bool keepdims) {
  try {
    switch (k) {
      case kind::sum: return to_outcome(dx::sum(x, axes, keepdims));
      case kind::prod: return to_outcome(dx::prod(x, axes, keepdims));
      case kind::min: return to_outcome(dx::min(x, axes, keepdims));
      case kind::max: return to_outcome(dx::max(x, axes, keepdims));
      case kind::any: return to_outcome(dx::any(x, axes, keepdims));
      case kind::all: return to_outcome(dx::all(x, axes, keepdims));
      case kind::mean: return to_outcome(dx::mean(x, axes, keepdims));
      case kind::var0: return to_outcome(dx::var(x, axes, keepdims, 0));
      case kind::var1: return to_outcome(dx::var(x, axes, keepdims, 1));
      case kind::std0: return to_outcome(dx::std(x, axes, keepdims, 0));
      case kind::std1: return to_outcome(dx::std(x, axes, keepdims, 1));
      case kind::argmin:
        if constexpr (std::is_same_v<A, int>)
          return to_outcome(dx::argmin(x, axes, keepdims));
        break;
      case kind::argmax:
        if constexpr (std::is_same_v<A, int>)
          return to_outcome(dx::argmax(x, axes, keepdims));
        break;
    }
  } catch (const dx::value_error&) {
    outcome o;
    o.error = true;
    return o;
  }
  FAIL("run_kind: not applicable");
  return {};
}
// The scalar forms: dx::sum(x), dx::argmax(x), ...
template <class X>
outcome run_scalar(kind k, const X& x) {
  try {
    switch (k) {
      case kind::sum: return scalar_outcome(dx::sum(x));
      case kind::prod: return scalar_outcome(dx::prod(x));
      case kind::min: return scalar_outcome(dx::min(x));
      case kind::max: return scalar_outcome(dx::max(x));
      case kind::any: return scalar_outcome(dx::any(x));
      case kind::all: return scalar_outcome(dx::all(x));
      case kind::mean: return scalar_outcome(dx::mean(x));
      case kind::var0: return scalar_outcome(dx::var(x));
      case kind::std0: return scalar_outcome(dx::std(x));
      case kind::argmin:
        return scalar_outcome(dx::argmin(x));
      case kind::argmax:
        return scalar_outcome(dx::argmax(x));
      case kind::var1:
      case kind::std1: return scalar_outcome(dx::var(x));  // no scalar ddof form
    }
  } catch (const dx::value_error&) {
    outcome o;
    o.error = true;
    return o;
  }
  return {};
}

bool close(ld got, ld want, ld rel) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return got == want;
  return std::fabs(got - want) <= rel * (std::fabs(want) + 1e-3L);
}

// Compares an outcome with the reference; `what` names the case in failure messages.
template <class T>
void expect_same(const outcome& got, const outcome& want, kind k, const std::string& what) {
  const ld rel = is_approximate(k) ? (std::is_same_v<T, float> ? 2e-5L : 1e-12L) : 0;
  bool ok = got.error == want.error;
  if (ok && !want.error) {
    ok = got.shape == want.shape && got.v.size() == want.v.size();
    for (std::size_t i = 0; ok && i < want.v.size(); ++i)
      ok = rel == 0 ? (got.v[i] == want.v[i] || (std::isnan(got.v[i]) && std::isnan(want.v[i])))
                    : close(got.v[i], want.v[i], rel);
  }
  if (!ok) {
    const std::string reduction = kind_name(k);
    CAPTURE(what);
    CAPTURE(reduction);
    CAPTURE(got.error);
    CAPTURE(want.error);
    CAPTURE(got.shape);
    CAPTURE(want.shape);
    std::string gv, wv;
    for (std::size_t i = 0; i < std::min<std::size_t>(got.v.size(), 8); ++i) gv += std::to_string(static_cast<double>(got.v[i])) + " ";
    for (std::size_t i = 0; i < std::min<std::size_t>(want.v.size(), 8); ++i) wv += std::to_string(static_cast<double>(want.v[i])) + " ";
    CAPTURE(gv);
    CAPTURE(wv);
    CHECK(ok);
  }
}

// Every kind over every subset of axes of v, in every spelling of the axes.
template <class T>
void check_all_reductions(const dx::View<const T>& v, const std::string& what) {
  const int r = v.ndim();
  for (unsigned mask = 0; mask < (1u << r); ++mask) {
    std::vector<bool> red(static_cast<std::size_t>(r));
    Shape axes, neg_axes;
    for (int i = 0; i < r; ++i) {
      red[i] = (mask >> i) & 1u;
      if (red[i]) axes.push_back(i), neg_axes.push_back(i - r);
    }
    for (bool keep : {false, true}) {
      const std::string w = what + " axes" + axes.str() + (keep ? " keepdims" : "");
      for (kind k : all_kinds) {
        const outcome want = reference(v, red, keep, k);
        if (k != kind::argmin && k != kind::argmax) {
          expect_same<T>(run_kind(k, v, axes, keep), want, k, w);
          expect_same<T>(run_kind(k, v, neg_axes, keep), want, k, w + " (negative)");
          if (axes.size() == r) expect_same<T>(run_kind(k, v, dx::all_axes, keep), want, k, w + " all_axes");
        }
        if (axes.size() == 1) {
          const int a = static_cast<int>(axes[0]);
          expect_same<T>(run_kind(k, v, a, keep), want, k, w + " int");
          expect_same<T>(run_kind(k, v, a - r, keep), want, k, w + " negative int");
        }
        if (axes.size() == r && !keep && k != kind::var1 && k != kind::std1) {
          // the scalar form reduces everything
          // the scalar form reduces everything; argmin/argmax give the C-order flat index
          outcome s = run_scalar(k, v);
          s.shape = Shape{};
          expect_same<T>(s, want, k, w + " scalar");
        }
      }
    }
  }
}

// The input layouts of one shape: contiguous, transposed, strided (reversed, every other
// element) and broadcast. Bases are kept alive in `keep`.
template <class T>
std::vector<std::pair<std::string, dx::View<const T>>> layouts_of(const Shape& s, unsigned seed,
                                                                  std::deque<dx::Tensor<T>>& keep) {
  std::vector<std::pair<std::string, dx::View<const T>>> out;
  const int r = s.size();
  keep.push_back(exact_tensor<T>(s, seed));
  out.emplace_back("contiguous " + s.str(), keep.back().view());
  Shape rev;
  for (int i = r - 1; i >= 0; --i) rev.push_back(s[i]);
  keep.push_back(exact_tensor<T>(rev, seed + 1));
  out.emplace_back("transposed " + s.str(), keep.back().view().transpose());
  Shape wide = s;
  wide[r - 1] = 2 * s[r - 1];
  keep.push_back(exact_tensor<T>(wide, seed + 2));
  out.emplace_back("strided " + s.str(),
                   keep.back().view().slice(dx::ellipsis, dx::slice(dx::none, dx::none, -2)));
  Shape ones = s;
  for (int i = 0; i < r; i += 2) ones[i] = 1;
  keep.push_back(exact_tensor<T>(ones, seed + 3));
  out.emplace_back("broadcast " + s.str(), keep.back().view().broadcast_to(s));
  for (const auto& p : out) REQUIRE(p.second.shape() == s);
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Every reduction, every axis set, every layout, every dtype
// ---------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("reductions: ranks 1..4, every axis set, every layout", T, DX_ALL_DTYPES) {
  const Shape shapes[] = {
      Shape{7},       Shape{1},          Shape{0},       Shape{300},    Shape{3, 5},
      Shape{1, 6},    Shape{6, 1},       Shape{0, 4},    Shape{4, 0},   Shape{17, 33},
      Shape{2, 3, 4}, Shape{1, 5, 1},    Shape{3, 0, 2}, Shape{4, 1, 9}, Shape{2, 3, 4, 5},
      Shape{2, 1, 3, 1}, Shape{3, 2, 0, 2}, Shape{5, 70}, Shape{0, 3, 0},
  };
  std::deque<dx::Tensor<T>> keep;
  unsigned seed = 1;
  for (const Shape& s : shapes) {
    for (const auto& [name, v] : layouts_of<T>(s, seed += 4, keep)) check_all_reductions<T>(v, name);
  }
  // rank 0: every reduction of a scalar is the scalar (or 0 for var, 0 for the arg-reductions)
  dx::Tensor<T> s0(Shape{}, exact_value<T>(3, 9));
  check_all_reductions<T>(s0.view(), "rank 0");
}

TEST_CASE_TEMPLATE("reductions: column reductions of short rows (Note [short rows])", T,
                   DX_ALL_DTYPES) {
  // Few columns and enough rows for the super-row loop, with rows left over; every axis
  // set and layout (the contiguous ones take the super rows, the others plain rows).
  const Shape shapes[] = {Shape{1001, 3}, Shape{300, 8}, Shape{517, 16}, Shape{3, 345, 5},
                          Shape{260, 33}};
  std::deque<dx::Tensor<T>> keep;
  unsigned seed = 300;
  for (const Shape& s : shapes) {
    for (const auto& [name, v] : layouts_of<T>(s, seed += 4, keep)) check_all_reductions<T>(v, name);
  }
}

TEST_CASE_TEMPLATE("reductions: row reductions of short rows (Note [short inner rows])", T,
                   DX_ALL_DTYPES) {
  // Rows shorter than a vector on AVX2 and AVX-512, enough of them for super-rows, with
  // rows left over; every axis set and layout (only contiguous rows take super-rows).
  const Shape shapes[] = {Shape{2003, 3}, Shape{1000, 1}, Shape{777, 5}, Shape{999, 7},
                          Shape{517, 15}, Shape{5, 301, 2}};
  std::deque<dx::Tensor<T>> keep;
  unsigned seed = 900;
  for (const Shape& s : shapes) {
    for (const auto& [name, v] : layouts_of<T>(s, seed += 4, keep)) check_all_reductions<T>(v, name);
  }
}

TEST_CASE_TEMPLATE("reductions: fused row reductions of short rows", T, float, double) {
  const ld rel = std::is_same_v<T, float> ? 2e-6L : 1e-14L;
  for (const index_t ni : {index_t{1}, index_t{3}, index_t{4}, index_t{7}, index_t{13}}) {
    for (const index_t rows : {index_t{600}, index_t{20011}}) {
      CAPTURE(ni);
      CAPTURE(rows);
      const auto x = uniform_tensor<T>(Shape{rows, ni}, 81, -2, 2);
      const auto c = uniform_tensor<T>(Shape{1, ni}, 82, -1, 1);     // a repeated row
      const auto w = uniform_tensor<T>(Shape{rows, 1}, 83, 0.5, 1);  // a weight per row
      // a repeated row and a scalar (super-rows); a column operand (the row loop)
      const auto s = dx::sum((x - c) * (x - c) + T(1), 1);
      const auto m = dx::max(dx::abs(x - c), 1, true);
      const auto k = dx::sum(w * x * x, 1);
      REQUIRE(s.shape() == Shape{rows});
      REQUIRE(m.shape() == Shape{rows, 1});
      REQUIRE(k.shape() == Shape{rows});
      for (index_t i = 0; i < rows; ++i) {
        ld want = 0, bound = 0, kin = 0, kb = 0;
        T mx = -std::numeric_limits<T>::infinity();
        for (index_t j = 0; j < ni; ++j) {
          const T d = static_cast<T>(x.at(i, j) - c.at(0, j));
          const T e = static_cast<T>(static_cast<T>(d * d) + T(1));
          want += e;
          bound += std::fabs(static_cast<ld>(e));
          mx = std::max(mx, static_cast<T>(std::abs(d)));
          const T q = static_cast<T>(static_cast<T>(w.at(i, 0) * x.at(i, j)) * x.at(i, j));
          kin += q;
          kb += std::fabs(static_cast<ld>(q));
        }
        CHECK(std::fabs(s.at(i) - want) <= rel * 4 * bound);
        CHECK(m.at(i, 0) == mx);
        CHECK(std::fabs(k.at(i) - kin) <= rel * 4 * kb + rel);
      }
    }
  }
}

TEST_CASE_TEMPLATE("reductions: fused column reductions of short rows", T, float, double) {
  const ld rel = std::is_same_v<T, float> ? 2e-6L : 1e-14L;
  for (const index_t ni : {index_t{3}, index_t{8}, index_t{12}, index_t{100}}) {
    for (const index_t rows : {index_t{600}, index_t{20011}}) {
      CAPTURE(ni);
      CAPTURE(rows);
      const auto x = uniform_tensor<T>(Shape{rows, ni}, 71, -2, 2);
      const auto c = uniform_tensor<T>(Shape{1, ni}, 72, -1, 1);
      // a repeated row and a scalar in the input, a column sum and a column max
      const auto s = dx::sum((x - c) * (x - c) + T(1), 0);
      const auto m = dx::max(dx::abs(x - c), 0, true);
      REQUIRE(s.shape() == Shape{ni});
      REQUIRE(m.shape() == Shape{1, ni});
      for (index_t j = 0; j < ni; ++j) {
        ld want = 0, bound = 0;
        T mx = -std::numeric_limits<T>::infinity();
        for (index_t i = 0; i < rows; ++i) {
          const T d = static_cast<T>(x.at(i, j) - c.at(0, j));
          want += static_cast<ld>(d) * d + 1;
          bound += static_cast<ld>(d) * d + 1;
          mx = std::max(mx, static_cast<T>(std::abs(d)));
        }
        CHECK(std::fabs(s.at(j) - want) <= rel * 4 * bound);
        CHECK(m.at(0, j) == mx);
      }
      // one-pass moments of super rows: lanes merged into columns, rows left over after
      const auto vr = dx::var(x - c, 0);
      const auto sd = dx::std(x - c, 0, true, 1);
      REQUIRE(vr.shape() == Shape{ni});
      REQUIRE(sd.shape() == Shape{1, ni});
      for (index_t j = 0; j < ni; ++j) {
        ld mean = 0, m2 = 0;
        for (index_t i = 0; i < rows; ++i) mean += static_cast<T>(x.at(i, j) - c.at(0, j));
        mean /= rows;
        for (index_t i = 0; i < rows; ++i) {
          const ld d = static_cast<T>(x.at(i, j) - c.at(0, j)) - mean;
          m2 += d * d;
        }
        CHECK(std::fabs(vr.at(j) - m2 / rows) <= rel * 4 * (m2 / rows));
        CHECK(std::fabs(sd.at(0, j) - std::sqrt(m2 / (rows - 1))) <= rel * 4 * std::sqrt(m2 / (rows - 1)));
      }
      // kept dims in front: a centre per batch repeats along the rows but moves with the
      // batch (plain rows), a shared one does not (super rows)
      const auto b = uniform_tensor<T>(Shape{3, rows / 3, ni}, 73, -2, 2);
      const auto per = uniform_tensor<T>(Shape{3, 1, ni}, 74, -1, 1);
      const auto shared = uniform_tensor<T>(Shape{1, 1, ni}, 75, -1, 1);
      for (const dx::Tensor<T>* centre : {&per, &shared}) {
        const auto r = dx::sum(b - *centre, 1);
        REQUIRE(r.shape() == Shape{3, ni});
        for (index_t k = 0; k < 3; ++k)
          for (index_t j = 0; j < ni; ++j) {
            ld want = 0, bound = 0;
            for (index_t i = 0; i < rows / 3; ++i) {
              const T d = static_cast<T>(b.at(k, i, j) - centre->at(centre->shape()[0] == 1 ? 0 : k, 0, j));
              want += d;
              bound += std::fabs(static_cast<ld>(d));
            }
            CHECK(std::fabs(r.at(k, j) - want) <= rel * 4 * bound + rel);
          }
      }
    }
  }
}

TEST_CASE_TEMPLATE("reductions: result dtypes", T, DX_ALL_DTYPES) {
  using I = std::conditional_t<std::is_floating_point_v<T>, T, std::int64_t>;
  using F = dx::float_result_t<T>;
  dx::Tensor<T> x(Shape{2, 3});
  static_assert(std::is_same_v<decltype(dx::sum(x)), I>);
  static_assert(std::is_same_v<decltype(dx::prod(x)), I>);
  static_assert(std::is_same_v<decltype(dx::sum(x, 0)), dx::Tensor<I>>);
  static_assert(std::is_same_v<decltype(dx::prod(x, Shape{0, 1})), dx::Tensor<I>>);
  static_assert(std::is_same_v<decltype(dx::min(x)), T>);
  static_assert(std::is_same_v<decltype(dx::max(x, 1, true)), dx::Tensor<T>>);
  static_assert(std::is_same_v<decltype(dx::any(x)), bool>);
  static_assert(std::is_same_v<decltype(dx::all(x, dx::all_axes, true)), dx::Tensor<bool>>);
  static_assert(std::is_same_v<decltype(dx::mean(x)), F>);
  static_assert(std::is_same_v<decltype(dx::mean(x, 0)), dx::Tensor<F>>);
  static_assert(std::is_same_v<decltype(dx::var(x)), F>);
  static_assert(std::is_same_v<decltype(dx::std(x, 1, false, 1)), dx::Tensor<F>>);
  static_assert(std::is_same_v<decltype(dx::argmax(x)), std::int64_t>);
  static_assert(std::is_same_v<decltype(dx::argmin(x, 0)), dx::Tensor<std::int64_t>>);
  CHECK(dx::sum(x, dx::all_axes, true).shape() == Shape{1, 1});
  CHECK(dx::sum(x, dx::all_axes).shape() == Shape{});
}

// ---------------------------------------------------------------------------------------
// Fused inputs
// ---------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("reductions: fused inputs", T, float, double) {
  const ld rel = std::is_same_v<T, float> ? 2e-6L : 1e-14L;
  const index_t r = 37, c = 1029;
  const auto x = uniform_tensor<T>(Shape{r, c}, 1, -6, 6);
  const auto y = uniform_tensor<T>(Shape{c, r}, 2, -1, 1);

  // softmax denominator: sum(exp(x - max(x, 1, keepdims)), 1, keepdims)
  auto den = dx::sum(dx::exp(x - dx::max(x, 1, true)), 1, true);
  REQUIRE(den.shape() == Shape{r, 1});
  for (index_t i = 0; i < r; ++i) {
    ld m = -INFINITY, s = 0;
    for (index_t j = 0; j < c; ++j) m = std::max<ld>(m, x.at(i, j));
    for (index_t j = 0; j < c; ++j) s += std::exp(static_cast<ld>(x.at(i, j)) - m);
    CHECK(close(den.at(i, 0), s, std::is_same_v<T, float> ? 1e-5L : 1e-13L));
  }
  // the softmax itself sums to 1 along each row
  const auto sm = dx::eval(dx::exp(x - dx::max(x, 1, true)) / den);
  const auto rows = dx::sum(sm, 1);
  for (index_t i = 0; i < r; ++i) CHECK(close(rows.at(i), 1, std::is_same_v<T, float> ? 1e-5L : 1e-13L));

  // sum(x * x): no temporary, long double reference
  ld ss = 0;
  for (index_t i = 0; i < x.size(); ++i) ss += static_cast<ld>(x.data()[i]) * x.data()[i];
  CHECK(close(dx::sum(x * x), ss, rel));
  CHECK(close(dx::mean(x * x), ss / x.size(), rel));

  // a transposed leaf and a broadcast row in the fused input, reduced along each axis
  const auto row = uniform_tensor<T>(Shape{c}, 3, -1, 1);
  auto e0 = dx::sum(y.transpose() * 2 + row, 0);
  auto e1 = dx::sum(y.transpose() * 2 + row, 1);
  REQUIRE(e0.shape() == Shape{c});
  REQUIRE(e1.shape() == Shape{r});
  for (index_t j = 0; j < c; ++j) {
    ld s = 0, a = 0;
    for (index_t i = 0; i < r; ++i) s += static_cast<ld>(y.at(j, i)) * 2 + row.at(j), a += 3;
    CHECK(std::fabs(e0.at(j) - s) <= rel * 4 * a);
  }
  for (index_t i = 0; i < r; ++i) {
    ld s = 0, a = 0;
    for (index_t j = 0; j < c; ++j) s += static_cast<ld>(y.at(j, i)) * 2 + row.at(j), a += 3;
    CHECK(std::fabs(e1.at(i) - s) <= rel * 4 * a);
  }

  // exact fused reductions: min/max/arg/any/all of an expression equal the reduction of
  // its evaluated value
  auto ex = dx::abs(x - row) * T(-1);
  const auto mat = dx::eval(ex);
  for (int axis : {0, 1, -1}) {
    CAPTURE(axis);
    CHECK(bitwise_equal(dx::max(ex, axis), dx::max(mat, axis)));
    CHECK(bitwise_equal(dx::min(ex, axis, true), dx::min(mat, axis, true)));
    CHECK(bitwise_equal(dx::argmax(ex, axis), dx::argmax(mat, axis)));
    CHECK(bitwise_equal(dx::argmin(ex, axis), dx::argmin(mat, axis)));
    CHECK(bitwise_equal(dx::any(ex < T(-5.9), axis), dx::any(mat < T(-5.9), axis)));
    CHECK(bitwise_equal(dx::all(ex <= T(0), axis), dx::all(mat <= T(0), axis)));
  }
  CHECK(dx::max(ex) == dx::max(mat));
  CHECK(dx::argmin(ex) == dx::argmin(mat));
  CHECK(dx::all(ex <= T(0)));
  CHECK_FALSE(dx::any(ex > T(0)));
  // an expression over several axes and a broadcast column
  const auto col = uniform_tensor<T>(Shape{r, 1}, 4, 0, 1);
  auto b = dx::max(x * col, Shape{0, 1}, true);
  REQUIRE(b.shape() == Shape{1, 1});
  T m = -std::numeric_limits<T>::infinity();
  for (index_t i = 0; i < r; ++i)
    for (index_t j = 0; j < c; ++j) m = std::max(m, static_cast<T>(x.at(i, j) * col.at(i, 0)));
  CHECK(b.at(0, 0) == m);
}

TEST_CASE("reductions: fused integer and bool inputs") {
  const auto i = exact_tensor<std::int32_t>(Shape{4, 50, 3}, 11);
  const auto b = exact_tensor<bool>(Shape{4, 50, 3}, 12);
  // mean of a cast over axes (0, 2)
  auto m = dx::mean(dx::cast<double>(i) * 0.5, Shape{0, 2});
  static_assert(std::is_same_v<decltype(m), dx::Tensor<double>>);
  REQUIRE(m.shape() == Shape{50});
  for (index_t j = 0; j < 50; ++j) {
    double s = 0;
    for (index_t a = 0; a < 4; ++a)
      for (index_t c = 0; c < 3; ++c) s += i.at(a, j, c) * 0.5;
    CHECK(m.at(j) == s / 12);
  }
  // counting with a bool expression: sum of a comparison is an int64 count
  auto cnt = dx::sum(dx::logical_and(i > 0, b), 1);
  static_assert(std::is_same_v<decltype(cnt), dx::Tensor<std::int64_t>>);
  for (index_t a = 0; a < 4; ++a)
    for (index_t c = 0; c < 3; ++c) {
      std::int64_t n = 0;
      for (index_t j = 0; j < 50; ++j) n += i.at(a, j, c) > 0 && b.at(a, j, c);
      CHECK(cnt.at(a, c) == n);
    }
  CHECK(dx::sum(i > 1000) == 0);
  // a product of many int32 values wraps in int64 as NumPy's does
  auto p = dx::prod(dx::where(b, i, 1), Shape{0, 1, 2});
  static_assert(std::is_same_v<decltype(p), dx::Tensor<std::int64_t>>);
  std::uint64_t pw = 1;
  for (index_t k = 0; k < i.size(); ++k)
    pw *= static_cast<std::uint64_t>(static_cast<std::int64_t>(b.data()[k] ? i.data()[k] : 1));
  CHECK(p.at() == static_cast<std::int64_t>(pw));
  CHECK(dx::argmax(i * -1) == dx::argmin(i));
}

// ---------------------------------------------------------------------------------------
// Accuracy of float sums
// ---------------------------------------------------------------------------------------

TEST_CASE("reductions: float32 sums of 1e7 elements are accurate to 1e-6") {
  const index_t n = 10000000;
  const auto x = uniform_tensor<float>(Shape{n}, 21, 0, 1);
  ld exact = 0;
  for (index_t i = 0; i < n; ++i) exact += x.data()[i];
  const float s = dx::sum(x);
  CAPTURE(static_cast<double>(exact));
  CAPTURE(s);
  CHECK(std::fabs(s - exact) / exact < 1e-6L);
  CHECK(std::fabs(dx::mean(x) - exact / n) / (exact / n) < 1e-6L);
  // strided
  ld exact2 = 0;
  for (index_t i = 0; i < n; i += 2) exact2 += x.data()[i];
  CHECK(std::fabs(dx::sum(x.slice(dx::slice(dx::none, dx::none, 2))) - exact2) / exact2 < 1e-6L);
  // long rows (inner loop) and long columns (outer loop)
  const auto m = x.reshape(Shape{10, 1000000});
  const auto rs = dx::sum(m, 1);
  for (index_t r = 0; r < 10; ++r) {
    ld e = 0;
    for (index_t j = 0; j < 1000000; ++j) e += m.at(r, j);
    CHECK(std::fabs(rs.at(r) - e) / e < 1e-6L);
  }
  const auto t = x.reshape(Shape{1000000, 10});
  const auto cs = dx::sum(t, 0);
  for (index_t c = 0; c < 10; ++c) {
    ld e = 0;
    for (index_t j = 0; j < 1000000; ++j) e += t.at(j, c);
    CHECK(std::fabs(cs.at(c) - e) / e < 1e-6L);
  }
  // over all axes of a 2-D view, with the total in float32
  CHECK(std::fabs(dx::sum(t, dx::all_axes).at() - exact) / exact < 1e-6L);
}

// Note [one-pass moments] (eval/moments.hpp): var and std read the input once, in blocks
// reduced twice in cache and merged by Chan's formula. Data whose mean is 10^4 (float32;
// 10^8 for float64) times its spread: the textbook one-pass formula S(x²)/n - mean² loses every digit there (checked
// below, so the data really is hard), the blocked form keeps NumPy's two-pass accuracy.
template <class T>
void check_moments(const Shape& s, int axis, double bound) {
  CAPTURE(s);
  CAPTURE(axis);
  auto x = uniform_tensor<T>(s, 61, -1, 1);
  const double offset = std::is_same_v<T, float> ? 1e4 : 1e8;
  for (index_t k = 0; k < x.size(); ++k) x.data()[k] = static_cast<T>(x.data()[k] + offset);
  const index_t rows = s[0], cols = s[1];
  const index_t outs = axis == 0 ? cols : rows, n = axis == 0 ? rows : cols;
  auto at = [&](index_t o, index_t j) { return axis == 0 ? x.at(j, o) : x.at(o, j); };
  const auto [mean, var] = dx::mean_var(x, axis, false, 1);
  const auto sd = dx::std(x, axis);
  REQUIRE(mean.shape() == Shape{outs});
  REQUIRE(var.shape() == Shape{outs});
  double worst = 0, worst_naive = 0;
  for (index_t o = 0; o < outs; ++o) {
    ld m = 0;
    for (index_t j = 0; j < n; ++j) m += at(o, j);
    m /= n;
    ld ss = 0;
    for (index_t j = 0; j < n; ++j) ss += (at(o, j) - m) * (at(o, j) - m);
    const ld v1 = ss / (n - 1), v0 = ss / n;
    CHECK(std::fabs(mean.at(o) - m) <= bound * std::fabs(m));
    worst = std::max(worst, static_cast<double>(std::fabs(var.at(o) - v1) / v1));
    worst = std::max(worst, static_cast<double>(std::fabs(sd.at(o) - std::sqrt(v0)) / std::sqrt(v0)));
    T sx = 0, sxx = 0;  // the one-pass textbook formula, in T
    for (index_t j = 0; j < n; ++j) sx += at(o, j), sxx += at(o, j) * at(o, j);
    const T naive = (sxx - sx * sx / static_cast<T>(n)) / static_cast<T>(n - 1);
    worst_naive = std::max(worst_naive, static_cast<double>(std::fabs(naive - v1) / v1));
  }
  CAPTURE(worst);
  CAPTURE(worst_naive);
  CHECK(worst <= bound);
  CHECK(worst_naive > 1e-2);
}

TEST_CASE_TEMPLATE("reductions: var/std read once keep two-pass accuracy (Note [one-pass moments])", T,
                   float, double) {
  const double bound = std::is_same_v<T, float> ? 3e-5 : 1e-12;
  check_moments<T>(Shape{4096, 300}, 0, bound);   // column tiles, a ragged last vector
  check_moments<T>(Shape{300, 4096}, 1, bound);   // rows of several blocks
  check_moments<T>(Shape{70000, 3}, 0, bound);    // long columns: chunks merged
  check_moments<T>(Shape{3, 70000}, 1, bound);    // long rows: chunks merged
  check_moments<T>(Shape{1000, 1100}, 0, bound);  // two column tiles
}

TEST_CASE("reductions: mean_var gives mean and var as separate calls, on any thread count") {
  thread_count_guard guard;
  const auto x = uniform_tensor<double>(Shape{3000, 700}, 62, -3, 5);
  for (int t : {1, 2, 3}) {
    CAPTURE(t);
    dx::parallel::set_num_threads(t);
    for (int axis : {0, 1}) {
      const auto [m, v] = dx::mean_var(x * 2.0 + 1.0, axis, true, 0);
      const auto [m2, s] = dx::mean_std(x * 2.0 + 1.0, axis, true, 0);
      const auto ref_m = dx::mean(x * 2.0 + 1.0, axis, true);
      const auto ref_v = dx::var(x * 2.0 + 1.0, axis, true);
      REQUIRE(m.shape() == ref_m.shape());
      CHECK(bitwise_equal(v, ref_v));
      CHECK(bitwise_equal(m, m2));
      for (index_t k = 0; k < m.size(); ++k) {
        CHECK(std::fabs(m.data()[k] - ref_m.data()[k]) <= 1e-13 * std::fabs(ref_m.data()[k]));
        CHECK(s.data()[k] == std::sqrt(v.data()[k]));
      }
      static thread_local dx::Tensor<double> first_v[2];
      if (t == 1) first_v[axis] = v;
      else CHECK(bitwise_equal(first_v[axis], v));
    }
  }
  // inf and NaN as NumPy: the mean is inf, the variance NaN (inf - inf)
  auto y = uniform_tensor<double>(Shape{500, 4}, 63, -1, 1);
  y.at(7, 1) = std::numeric_limits<double>::infinity();
  y.at(400, 2) = std::numeric_limits<double>::quiet_NaN();
  const auto [ym, yv] = dx::mean_var(y, 0);
  CHECK(std::isinf(ym.at(1)));
  CHECK(std::isnan(yv.at(1)));
  CHECK(std::isnan(ym.at(2)));
  CHECK(std::isnan(yv.at(2)));
  CHECK(std::isfinite(yv.at(0)));
}

// ---------------------------------------------------------------------------------------
// NaN, inf, ties
// ---------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("reductions: NaN propagates through min/max/sum, argmax finds the first NaN",
                   T, float, double) {
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  for (index_t n : {1, 2, 7, 8, 9, 16, 17, 64, 1000, 1025, 4097, 40000}) {
    for (index_t p : {index_t{0}, n / 2, n - 1}) {
      CAPTURE(n);
      CAPTURE(p);
      auto x = uniform_tensor<T>(Shape{n}, 31, -1, 1);
      x.at(p) = nan;
      CHECK(std::isnan(dx::min(x)));
      CHECK(std::isnan(dx::max(x)));
      CHECK(std::isnan(dx::sum(x)));
      CHECK(std::isnan(dx::mean(x)));
      CHECK(dx::argmax(x) == p);
      CHECK(dx::argmin(x) == p);
      CHECK(dx::any(x));  // NaN is true
      if (p + 1 < n) {
        x.at(n - 1) = nan;
        CHECK(dx::argmax(x) == p);
        CHECK(dx::argmin(x) == p);
      }
    }
  }
  // per row and per column: only the row/column holding the NaN is NaN
  auto m = uniform_tensor<T>(Shape{6, 1000}, 32, -1, 1);
  m.at(2, 777) = nan;
  m.at(4, 3) = nan;
  const auto rmax = dx::max(m, 1), rmin = dx::min(m, 1), cmax = dx::max(m, 0);
  const auto ram = dx::argmax(m, 1), cam = dx::argmax(m, 0);
  for (index_t i = 0; i < 6; ++i) {
    CHECK(std::isnan(rmax.at(i)) == (i == 2 || i == 4));
    CHECK(std::isnan(rmin.at(i)) == (i == 2 || i == 4));
  }
  CHECK(ram.at(2) == 777);
  CHECK(ram.at(4) == 3);
  for (index_t j = 0; j < 1000; ++j) CHECK(std::isnan(cmax.at(j)) == (j == 777 || j == 3));
  CHECK(cam.at(777) == 2);
  CHECK(cam.at(3) == 4);
  // infinities
  dx::Tensor<T> ninf(Shape{5}, -inf);
  CHECK(dx::max(ninf) == -inf);
  CHECK(dx::argmax(ninf) == 0);
  dx::Tensor<T> mixed(Shape{2});
  mixed.at(0) = inf;
  mixed.at(1) = -inf;
  CHECK(std::isnan(dx::sum(mixed)));
  CHECK(dx::min(mixed) == -inf);
  CHECK(dx::argmin(mixed) == 1);
  // NaN before -inf still wins for max (np.max([nan, -inf]) is nan)
  mixed.at(0) = nan;
  CHECK(std::isnan(dx::max(mixed)));
}

TEST_CASE_TEMPLATE("reductions: argmin/argmax return the first occurrence", T, DX_ALL_DTYPES) {
  // [1, 0, 1, 1, 0, 1] (bools too)
  dx::Tensor<T> x(Shape{6});
  const int v[] = {1, 0, 1, 1, 0, 1};
  for (int i = 0; i < 6; ++i) x.at(i) = static_cast<T>(v[i]);
  CHECK(dx::argmax(x) == 0);
  CHECK(dx::argmin(x) == 1);
  dx::Tensor<T> same(Shape{1025}, T(1));
  CHECK(dx::argmax(same) == 0);
  CHECK(dx::argmin(same) == 0);
  // along an axis: the inner (row) and the outer (column) loops
  dx::Tensor<T> m(Shape{3, 4}, T(0));
  m.at(0, 2) = T(1);
  m.at(0, 3) = T(1);
  m.at(2, 1) = T(1);
  m.at(1, 1) = T(1);
  const auto a1 = dx::argmax(m, 1), a0 = dx::argmax(m, 0), i0 = dx::argmin(m, 0);
  CHECK(a1.at(0) == 2);
  CHECK(a1.at(1) == 1);
  CHECK(a1.at(2) == 1);
  CHECK(a0.at(0) == 0);
  CHECK(a0.at(1) == 1);
  CHECK(a0.at(2) == 0);
  CHECK(a0.at(3) == 0);
  CHECK(i0.at(2) == 1);
  auto k = dx::argmax(m, 1, true);
  CHECK(k.shape() == Shape{3, 1});
}

// ---------------------------------------------------------------------------------------
// Empty reductions and errors
// ---------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("reductions: empty inputs", T, DX_ALL_DTYPES) {
  using F = dx::float_result_t<T>;
  const dx::Tensor<T> e(Shape{0});
  CHECK(dx::sum(e) == 0);
  CHECK(dx::prod(e) == 1);
  CHECK_FALSE(dx::any(e));
  CHECK(dx::all(e));
  CHECK(std::isnan(dx::mean(e)));
  CHECK(std::isnan(dx::var(e)));
  CHECK_THROWS_AS(dx::min(e), dx::value_error);
  CHECK_THROWS_AS(dx::max(e), dx::value_error);
  CHECK_THROWS_AS(dx::argmax(e), dx::value_error);
  CHECK_THROWS_AS(dx::argmin(e), dx::value_error);
  CHECK(contains(message_of<dx::value_error>([&] { (void)dx::max(e); }), "zero-size array"));

  const dx::Tensor<T> e03(Shape{0, 3}), e30(Shape{3, 0}), e00(Shape{0, 0});
  auto s0 = dx::sum(e03, 0);
  CHECK(s0.shape() == Shape{3});
  for (index_t i = 0; i < 3; ++i) CHECK(s0.at(i) == 0);
  auto p1 = dx::prod(e30, 1, true);
  CHECK(p1.shape() == Shape{3, 1});
  for (index_t i = 0; i < 3; ++i) CHECK(p1.at(i, 0) == 1);
  auto m0 = dx::mean(e03, 0);
  static_assert(std::is_same_v<decltype(m0), dx::Tensor<F>>);
  for (index_t i = 0; i < 3; ++i) CHECK(std::isnan(m0.at(i)));
  CHECK(dx::all(e30, 1).at(2));
  CHECK_FALSE(dx::any(e30, 1).at(2));
  CHECK_THROWS_AS(dx::max(e03, 0), dx::value_error);
  CHECK_THROWS_AS(dx::min(e30, 1), dx::value_error);
  CHECK_THROWS_AS(dx::argmax(e30, 1), dx::value_error);
  CHECK_THROWS_AS(dx::max(e30, Shape{0, 1}), dx::value_error);
  // reducing a non-empty axis of an empty array gives an empty result, no error
  CHECK(dx::max(e03, 1).shape() == Shape{0});
  CHECK(dx::argmax(e03, 1).shape() == Shape{0});
  CHECK(dx::sum(e03, 1, true).shape() == Shape{0, 1});
  // NumPy: np.zeros((0, 0)).max(axis=0) and .argmax(axis=0) raise ValueError even though
  // the result would be empty: the reduced axis is empty and max has no identity
  CHECK_THROWS_AS(dx::max(e00, 0), dx::value_error);
  CHECK_THROWS_AS(dx::min(e00, 1), dx::value_error);
  CHECK_THROWS_AS(dx::argmax(e00, 0), dx::value_error);
  CHECK_THROWS_AS(dx::argmin(e00, 1), dx::value_error);
  // sum and friends over no axes at all return the input (np.sum(x, axis=()))
  const auto x = exact_tensor<T>(Shape{2, 3}, 41);
  auto same = dx::sum(x, Shape{});
  CHECK(same.shape() == Shape{2, 3});
  for (index_t i = 0; i < 6; ++i) CHECK(static_cast<ld>(same.data()[i]) == static_cast<ld>(x.data()[i]));
}

TEST_CASE_TEMPLATE("reductions: any/all read truth values, not truncated bytes", T,
                   std::uint8_t, std::int32_t, std::int64_t, float, double) {
  // np.any([0.5]), np.all([256]), np.any([2**40]), np.all([nan]) are all True
  std::vector<T> values = {T(2), static_cast<T>(-1)};
  if constexpr (!std::is_same_v<T, std::uint8_t>) values.push_back(static_cast<T>(256)), values.push_back(static_cast<T>(-256));
  if constexpr (std::is_same_v<T, std::int64_t>) values.push_back(std::int64_t{1} << 40);
  if constexpr (std::is_floating_point_v<T>) {
    values.push_back(T(0.5));
    values.push_back(T(-0.25));
    values.push_back(T(1e-30));
    values.push_back(std::numeric_limits<T>::quiet_NaN());
    values.push_back(std::numeric_limits<T>::infinity());
  }
  for (T v : values) {
    for (index_t n : {1, 9, 40, 1025}) {
      CAPTURE(static_cast<double>(v));
      CAPTURE(n);
      dx::Tensor<T> x(Shape{n}, v);
      CHECK(dx::any(x));
      CHECK(dx::all(x));
      CHECK(dx::any(x, 0).at());
      CHECK(dx::all(x.reshape(Shape{1, n}), 0).at(0));  // the outer (column) loop
      x.at(n - 1) = T(0);
      CHECK(dx::any(x) == (n > 1));
      CHECK_FALSE(dx::all(x));
    }
  }
}

TEST_CASE("reductions: var and std with ddof follow NumPy, including n <= ddof") {
  dx::Tensor<double> x(Shape{2});
  x.at(0) = 1;
  x.at(1) = 2;
  CHECK(dx::var(x) == 0.25);
  CHECK(dx::var(x, 0, false, 1).at() == 0.5);
  CHECK(dx::std(x, 0, false, 0).at() == 0.5);
  // np.var([1., 2.], ddof=2) and ddof=3 are inf (0.5 / max(n - ddof, 0)), not NaN
  CHECK(std::isinf(dx::var(x, 0, false, 2).at()));
  CHECK(std::isinf(dx::var(x, 0, false, 3).at()));
  CHECK(std::isinf(dx::std(x, 0, false, 2).at()));
  // np.var([1., 1.], ddof=2) and np.var([1.], ddof=1) are 0/0 = NaN
  dx::Tensor<double> ones(Shape{2}, 1.0);
  CHECK(std::isnan(dx::var(ones, 0, false, 2).at()));
  dx::Tensor<double> one(Shape{1}, 1.0);
  CHECK(std::isnan(dx::var(one, 0, false, 1).at()));
  // np.var(np.array([True, False, True])) == 0.2222222222222222
  dx::Tensor<bool> b(Shape{3});
  b.at(0) = true;
  b.at(2) = true;
  CHECK(dx::var(b) == doctest::Approx(2.0 / 9).epsilon(1e-15));
  // a large offset: two passes keep the variance accurate
  dx::Tensor<float> f(Shape{1000});
  for (index_t i = 0; i < 1000; ++i) f.at(i) = 10000.f + static_cast<float>(i % 2);
  CHECK(dx::var(f) == doctest::Approx(0.25).epsilon(1e-4));
}

TEST_CASE("reductions: bad axes") {
  dx::Tensor<float> x(Shape{2, 3});
  CHECK_THROWS_AS(dx::sum(x, Shape{0, 0}), dx::value_error);
  CHECK_THROWS_AS(dx::sum(x, Shape{1, -1}), dx::value_error);
  CHECK(contains(message_of<dx::value_error>([&] { (void)dx::max(x, Shape{0, 0}); }), "duplicate"));
  CHECK_THROWS_AS(dx::sum(x, 2), dx::index_error);
  CHECK_THROWS_AS(dx::sum(x, -3), dx::index_error);
  CHECK_THROWS_AS(dx::mean(x, Shape{0, 2}), dx::index_error);
  CHECK_THROWS_AS(dx::var(x, 5), dx::index_error);
  CHECK_THROWS_AS(dx::argmax(x, 2), dx::index_error);
  CHECK_THROWS_AS(dx::argmin(x, -3), dx::index_error);
  CHECK_THROWS_AS(dx::any(x, Shape{0, 1, 2}), dx::error);
  CHECK(contains(message_of<dx::index_error>([&] { (void)dx::sum(x, 2); }),
                 "axis 2 is out of bounds for array of dimension 2"));
  dx::Tensor<float> s(Shape{});
  CHECK_THROWS_AS(dx::sum(s, 0), dx::index_error);
  CHECK(dx::sum(s, dx::all_axes).ndim() == 0);
}

// ---------------------------------------------------------------------------------------
// Threads
// ---------------------------------------------------------------------------------------

TEST_CASE("reductions: 1, 2 and 4 threads give bitwise equal results") {
  thread_count_guard guard;
  const index_t n = 2048;  // 4M elements
  const auto x = uniform_tensor<float>(Shape{n, n}, 51, -1, 1);
  const auto d = uniform_tensor<double>(Shape{n, n}, 52, -1, 1);
  const auto i = exact_tensor<std::int32_t>(Shape{n, n}, 53);
  struct results {
    float full;
    double dfull, mean;
    std::int64_t ifull, am;
    dx::Tensor<float> rows, cols, soft, mx;
    dx::Tensor<double> drows, dcols, v;
    dx::Tensor<std::int64_t> icols, arg;
  };
  auto run = [&] {
    return results{dx::sum(x),
                   dx::sum(d),
                   dx::mean(x.transpose() * 2.0f + 1.0f),
                   dx::sum(i),
                   dx::argmax(x),
                   dx::sum(x, 1),
                   dx::sum(x, 0),
                   dx::sum(dx::exp(x - dx::max(x, 1, true)), 1, true),
                   dx::max(x.transpose(), 1),
                   dx::sum(d, 1),
                   dx::sum(d.slice(dx::slice(dx::none, dx::none, -1)), 0),
                   dx::var(d, 0),
                   dx::sum(i, 0),
                   dx::argmax(x, 0)};
  };
  dx::parallel::set_num_threads(1);
  const results r1 = run();
  for (int t : {2, 4}) {
    CAPTURE(t);
    dx::parallel::set_num_threads(t);
    const results rt = run();
    CHECK(std::memcmp(&r1.full, &rt.full, sizeof(float)) == 0);
    CHECK(std::memcmp(&r1.dfull, &rt.dfull, sizeof(double)) == 0);
    CHECK(std::memcmp(&r1.mean, &rt.mean, sizeof(double)) == 0);
    CHECK(r1.ifull == rt.ifull);
    CHECK(r1.am == rt.am);
    CHECK(bitwise_equal(r1.rows, rt.rows));
    CHECK(bitwise_equal(r1.cols, rt.cols));
    CHECK(bitwise_equal(r1.soft, rt.soft));
    CHECK(bitwise_equal(r1.mx, rt.mx));
    CHECK(bitwise_equal(r1.drows, rt.drows));
    CHECK(bitwise_equal(r1.dcols, rt.dcols));
    CHECK(bitwise_equal(r1.v, rt.v));
    CHECK(bitwise_equal(r1.icols, rt.icols));
    CHECK(bitwise_equal(r1.arg, rt.arg));
  }
  // and the values are right
  ld e = 0;
  for (index_t k = 0; k < x.size(); ++k) e += x.data()[k];
  CHECK(std::fabs(r1.full - e) <= 1e-6L * n * n);
  std::int64_t ie = 0;
  for (index_t k = 0; k < i.size(); ++k) ie += i.data()[k];
  CHECK(r1.ifull == ie);
  for (index_t c = 0; c < n; c += 101) {
    std::int64_t s = 0;
    for (index_t r = 0; r < n; ++r) s += i.at(r, c);
    CHECK(r1.icols.at(c) == s);
  }
}
