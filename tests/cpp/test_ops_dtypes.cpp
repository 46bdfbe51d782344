// Op-table tests, dtype rules: NumPy 2 result dtypes of every pair (checked at compile
// time), mixed-dtype values, where, astype, NEP 50 scalars, fma contraction, registry.
// Shared helpers and notes: ops_testing.hpp, test_ops_math.cpp.

#include "ops_testing.hpp"

namespace {
using namespace ops_testing;

constexpr dtype_table kAddDtypes{{"xBilfd", "BBilfd", "iiildd", "lllldd", "ffddfd", "dddddd"}};
constexpr dtype_table kDivideDtypes{{"ddddfd", "ddddfd", "dddddd", "dddddd", "ffddfd", "dddddd"}};
constexpr dtype_table kCompareDtypes{{"??????", "??????", "??????", "??????", "??????", "??????"}};
constexpr dtype_table kArctan2Dtypes{{"xxddfd", "xxddfd", "dddddd", "dddddd", "ffddfd", "dddddd"}};
constexpr dtype_table kBitwiseDtypes{{"?Bilxx", "BBilxx", "iiilxx", "llllxx", "xxxxxx", "xxxxxx"}};

static_assert(result_dtypes_match<ops::add_op, kAddDtypes>());
static_assert(result_dtypes_match<ops::sub_op, kAddDtypes>());
static_assert(result_dtypes_match<ops::mul_op, kAddDtypes>());
static_assert(result_dtypes_match<ops::floor_divide_op, kAddDtypes>());
static_assert(result_dtypes_match<ops::mod_op, kAddDtypes>());
static_assert(result_dtypes_match<ops::maximum_op, kAddDtypes>());
static_assert(result_dtypes_match<ops::pow_op, kAddDtypes>());
static_assert(result_dtypes_match<ops::div_op, kDivideDtypes>());
static_assert(result_dtypes_match<ops::equal_op, kCompareDtypes>());
static_assert(result_dtypes_match<ops::less_op, kCompareDtypes>());
static_assert(result_dtypes_match<ops::greater_equal_op, kCompareDtypes>());
static_assert(result_dtypes_match<ops::logical_and_op, kCompareDtypes>());
static_assert(result_dtypes_match<ops::arctan2_op, kArctan2Dtypes>());
static_assert(result_dtypes_match<ops::hypot_op, kArctan2Dtypes>());
static_assert(result_dtypes_match<ops::bitwise_and_op, kBitwiseDtypes>());
static_assert(result_dtypes_match<ops::left_shift_op, dtype_table{{"xxxxxx", "xBilxx", "xiilxx", "xlllxx", "xxxxxx", "xxxxxx"}}>());

// Unary ops: float functions give float64 for int32/int64 (NumPy gives float16 for bool
// and uint8, which dynexpr rejects); rounding keeps integer dtypes; predicates give bool.
template <class Op, class T>
using unary_result_t = value_t<decltype(dx::apply<Op>(std::declval<dx::Tensor<T>&>()))>;
static_assert(std::is_same_v<unary_result_t<ops::exp_op, float>, float>);
static_assert(std::is_same_v<unary_result_t<ops::exp_op, double>, double>);
static_assert(std::is_same_v<unary_result_t<ops::exp_op, std::int32_t>, double>);
static_assert(std::is_same_v<unary_result_t<ops::sqrt_op, std::int64_t>, double>);
static_assert(std::is_same_v<unary_result_t<ops::rint_op, std::int32_t>, double>);
static_assert(std::is_same_v<unary_result_t<ops::floor_op, std::int32_t>, std::int32_t>);
static_assert(std::is_same_v<unary_result_t<ops::ceil_op, std::uint8_t>, std::uint8_t>);
static_assert(std::is_same_v<unary_result_t<ops::trunc_op, bool>, bool>);
static_assert(std::is_same_v<unary_result_t<ops::abs_op, bool>, bool>);
static_assert(std::is_same_v<unary_result_t<ops::neg_op, std::uint8_t>, std::uint8_t>);
static_assert(std::is_same_v<unary_result_t<ops::isnan_op, std::int64_t>, bool>);
static_assert(std::is_same_v<unary_result_t<ops::logical_not_op, float>, bool>);
static_assert(std::is_same_v<unary_result_t<ops::invert_op, bool>, bool>);

// Mixed dtypes
// ---------------------------------------------------------------------------------------

// Operand conversions are covered pair by pair by the cast test below and each op body by
// the same-dtype tests; these pairs check that the two meet at NumPy's promoted type. (Every
// pair would cost a few minutes of compile time: one evaluation loop per pair and op.)
using mixed_pairs = hana::tuple<hana::tuple<hana::type<bool>, hana::type<std::int32_t>>,
                                hana::tuple<hana::type<std::uint8_t>, hana::type<std::int32_t>>,
                                hana::tuple<hana::type<std::uint8_t>, hana::type<float>>,
                                hana::tuple<hana::type<std::int32_t>, hana::type<float>>,
                                hana::tuple<hana::type<std::int32_t>, hana::type<std::int64_t>>,
                                hana::tuple<hana::type<std::int64_t>, hana::type<double>>,
                                hana::tuple<hana::type<float>, hana::type<double>>,
                                hana::tuple<hana::type<bool>, hana::type<float>>>;

TEST_CASE("mixed dtypes: add, less, true_divide, floor_divide against the scalar body") {
  hana::for_each(mixed_pairs{}, [](auto pair) {
    using A = typename decltype(+hana::at_c<0>(pair))::type;
    using B = typename decltype(+hana::at_c<1>(pair))::type;
    const auto va = interesting<A>();
    const auto vb = interesting<B>();
    check_binary_against_scalar<ops::add_op>(va, vb);
    check_binary_against_scalar<ops::floor_divide_op>(vb, va);
    check_binary_against_scalar<ops::less_op>(va, vb);
    check_binary_against_scalar<ops::div_op>(vb, va);
  });
}

TEST_CASE("mixed dtypes: values follow the promoted dtype") {
  // int64 2^53 + 1 compares at float64, where it is 2^53 (NumPy: equal is True).
  const dx::Tensor<std::int64_t> big = make_tensor<std::int64_t>({(std::int64_t{1} << 53) + 1});
  const dx::Tensor<double> p53 = make_tensor<double>({9007199254740992.0});
  CHECK(dx::eval(dx::equal(big, p53)).at(0));
  CHECK_FALSE(dx::eval(dx::less(p53, big)).at(0));
  // uint8 with int32 computes at int32: no uint8 wrap-around.
  const dx::Tensor<std::uint8_t> u = make_tensor<std::uint8_t>({250, 0});
  const dx::Tensor<std::int32_t> i = make_tensor<std::int32_t>({10, -1});
  const auto s = dx::eval(dx::add(u, i));
  static_assert(std::is_same_v<value_t<decltype(s)>, std::int32_t>);
  CHECK(s.at(0) == 260);
  CHECK(s.at(1) == -1);
  // bool with float32 gives float32.
  const dx::Tensor<bool> t = make_tensor<bool>({true, false});
  const dx::Tensor<float> f = make_tensor<float>({0.5f, 0.25f});
  const auto bf = dx::eval(t + f);
  static_assert(std::is_same_v<value_t<decltype(bf)>, float>);
  CHECK(bf.at(0) == 1.5f);
  CHECK(bf.at(1) == 0.25f);
}

// ---------------------------------------------------------------------------------------
// where and cast
// ---------------------------------------------------------------------------------------

/// where(c, a, b) over values of each dtype, contiguous and reversed, against c ? a : b at
/// the promoted dtype.
template <class C, class A, class B>
void check_where() {
  using R = dx::promote_t<A, B>;
  const auto vc = interesting<C>();
  const auto va = interesting<A>();
  const auto vb = interesting<B>();
  const std::size_t n = 3 * std::max({vc.size(), va.size(), vb.size()}) + 1;
  std::vector<C> c(n);
  std::vector<A> a(n);
  std::vector<B> b(n);
  for (std::size_t k = 0; k < n; ++k)
    c[k] = vc[k % vc.size()], a[k] = va[(k * 7) % va.size()], b[k] = vb[(k * 5 + 1) % vb.size()];
  const dx::Tensor<C> tc = make_tensor(c);
  const dx::Tensor<A> ta = make_tensor(a);
  const dx::Tensor<B> tb = make_tensor(b);
  const auto got = dx::eval(dx::where(tc, ta, tb));
  static_assert(std::is_same_v<value_t<decltype(got)>, R>);
  const auto rev = dx::eval(dx::where(reversed(tc), reversed(ta), reversed(tb)));
  mismatches bad;
  for (std::size_t k = 0; k < n; ++k) {
    const C ck = c[k];
    const A ak = a[k];
    const B bk = b[k];
    const R want = ck != C(0) ? static_cast<R>(ak) : static_cast<R>(bk);
    if (!same(got.data()[k], want) || !same(rev.data()[n - 1 - k], want))
      bad.add("where(" + show(ck) + ", " + show(ak) + ", " + show(bk) + ") = " + show(got.data()[k]) +
              " / reversed " + show(rev.data()[n - 1 - k]) + ", expected " + show(want));
  }
  check_none(bad, "where(" + dtype_str<C>() + ", " + dtype_str<A>() + ", " + dtype_str<B>() + ")");
}

// The condition is read as a mask of the result's lane type: every (condition, result)
// dtype pair, then branches of two dtypes (their conversions are the cast test's).
TEST_CASE_TEMPLATE("where: every dtype of condition with every result dtype", C, ALL_DTYPES) {
  hana::for_each(kAllDtypes, [](auto r) {
    using R = typename decltype(r)::type;
    check_where<C, R, R>();
  });
}

TEST_CASE("where: branches of different dtypes promote") {
  hana::for_each(mixed_pairs{}, [](auto pair) {
    using A = typename decltype(+hana::at_c<0>(pair))::type;
    using B = typename decltype(+hana::at_c<1>(pair))::type;
    check_where<bool, A, B>();
    check_where<float, B, A>();
  });
}

TEST_CASE("where: weak scalar branches and a scalar condition") {
  const dx::Tensor<float> x = make_tensor<float>({-1.5f, 2.0f, nan_v<float>});
  const auto r = dx::eval(dx::where(x > 0.0f, x, 0.0));  // 0.0 is weak: stays float32
  static_assert(std::is_same_v<value_t<decltype(r)>, float>);
  CHECK(r.at(0) == 0.0f);
  CHECK(r.at(1) == 2.0f);
  CHECK(r.at(2) == 0.0f);
  const dx::Tensor<std::int32_t> i = make_tensor<std::int32_t>({1, 2});
  const auto w = dx::eval(dx::where(i > 1, i, 2.5));  // an int32 array with a float: float64
  static_assert(std::is_same_v<value_t<decltype(w)>, double>);
  CHECK(w.at(0) == 2.5);
  CHECK(w.at(1) == 2.0);
}

/// np.ndarray.astype(To) for one value; false where NumPy's result is not defined
/// (float to integer out of range, NaN or inf).
template <class To, class From>
bool astype(From v, To& out) {
  if constexpr (std::is_same_v<To, bool>) {
    out = v != From(0);  // NaN is true, -0.0 is false
  } else if constexpr (std::is_same_v<From, bool>) {
    out = v ? To(1) : To(0);
  } else if constexpr (dx::is_float_v<From> && !dx::is_float_v<To>) {
    if (!std::isfinite(v)) return false;
    const LD t = std::trunc(static_cast<LD>(v));
    if (t < static_cast<LD>(std::numeric_limits<To>::min()) || t > static_cast<LD>(std::numeric_limits<To>::max()))
      return false;
    out = static_cast<To>(t);
  } else {
    out = static_cast<To>(v);  // int -> int wraps (C++20), -> float rounds to nearest
  }
  return true;
}

TEST_CASE_TEMPLATE("cast<To>: astype between every pair of dtypes", From, ALL_DTYPES) {
  hana::for_each(kAllDtypes, [](auto to) {
    using To = typename decltype(to)::type;
    std::vector<From> x;
    std::vector<To> want;
    auto extra = interesting<From>();
    if constexpr (dx::is_float_v<From>)
      for (const From v : {From(2.7), From(-2.7), From(255.9), From(-0.9), From(1e10), From(16777217.0), From(127.5)})
        extra.push_back(v);
    for (int rep = 0; rep < 3; ++rep)
      for (const From v : extra) {
        To w{};
        if (astype(v, w)) x.push_back(v), want.push_back(w);
      }
    const dx::Tensor<From> t = make_tensor(x);
    const auto got = dx::eval(dx::cast<To>(t));
    static_assert(std::is_same_v<value_t<decltype(got)>, To>);
    const auto rev = dx::eval(dx::cast<To>(reversed(t)));
    mismatches bad;
    const std::size_t n = x.size();
    for (std::size_t k = 0; k < n; ++k) {
      const From xk = x[k];
      const To wk = want[k];
      if (!same(got.data()[k], wk) || !same(rev.data()[n - 1 - k], wk))
        bad.add("astype<" + dtype_str<To>() + ">(" + show(xk) + ") = " + show(got.data()[k]) +
                " / reversed " + show(rev.data()[n - 1 - k]) + ", expected " + show(wk));
    }
    check_none(bad, "cast<" + dtype_str<To>() + ">(" + dtype_str<From>() + ")");
  });
}

TEST_CASE("cast<To>: hand-written astype values (NumPy 2.4)") {
  const dx::Tensor<double> d = make_tensor<double>({2.7, -2.7, -0.5, 255.9, 0.1, -0.0, nan_v<double>, 1e300, 1 + 0x1p-30});
  const auto di = dx::eval(dx::cast<std::int32_t>(d.slice(dx::slice(0, 5))));
  CHECK(di.at(0) == 2);
  CHECK(di.at(1) == -2);
  CHECK(di.at(2) == 0);
  CHECK(di.at(3) == 255);
  const auto du = dx::eval(dx::cast<std::uint8_t>(d.slice(dx::slice(2, 4))));
  CHECK(du.at(0) == 0);
  CHECK(du.at(1) == 255);
  const auto db = dx::eval(dx::cast<bool>(d));
  CHECK(db.at(4));        // 0.1
  CHECK_FALSE(db.at(5));  // -0.0
  CHECK(db.at(6));        // NaN
  const auto df = dx::eval(dx::cast<float>(d));
  CHECK(df.at(7) == inf_v<float>);
  CHECK(df.at(8) == 1.0f);

  const dx::Tensor<std::int32_t> i = make_tensor<std::int32_t>({300, -1, 256, 16777217, 255});
  const auto iu = dx::eval(dx::cast<std::uint8_t>(i));
  CHECK(iu.at(0) == 44);
  CHECK(iu.at(1) == 255);
  CHECK(iu.at(2) == 0);
  CHECK(iu.at(4) == 255);
  CHECK(dx::eval(dx::cast<float>(i)).at(3) == 16777216.0f);

  const dx::Tensor<std::int64_t> l = make_tensor<std::int64_t>(
      {std::int64_t{1} << 31, -(std::int64_t{1} << 31) - 1, (std::int64_t{1} << 32) + 5, -1,
       (std::int64_t{1} << 53) + 1, (std::int64_t{1} << 53) + 3, std::numeric_limits<std::int64_t>::max()});
  const auto li = dx::eval(dx::cast<std::int32_t>(l));
  CHECK(li.at(0) == std::numeric_limits<std::int32_t>::min());
  CHECK(li.at(1) == std::numeric_limits<std::int32_t>::max());
  CHECK(li.at(2) == 5);
  CHECK(li.at(3) == -1);
  CHECK(dx::eval(dx::cast<std::uint8_t>(l)).at(3) == 255);
  const auto ld = dx::eval(dx::cast<double>(l));
  CHECK(ld.at(4) == 9007199254740992.0);  // ties to even
  CHECK(ld.at(5) == 9007199254740996.0);
  CHECK(ld.at(6) == 9223372036854775808.0);

  const dx::Tensor<bool> b = make_tensor<bool>({true, false});
  CHECK(dx::eval(dx::cast<double>(b)).at(0) == 1.0);
  CHECK(dx::eval(dx::cast<std::int64_t>(b)).at(1) == 0);
  const dx::Tensor<std::uint8_t> u = make_tensor<std::uint8_t>({255, 0});
  CHECK(dx::eval(dx::cast<std::int32_t>(u)).at(0) == 255);
  CHECK(dx::eval(dx::cast<float>(u)).at(0) == 255.0f);
}

// ---------------------------------------------------------------------------------------
// Weak scalars (NEP 50) and strong scalars
// ---------------------------------------------------------------------------------------

TEST_CASE("NEP 50: C++ scalars are weak, dx::scalar<T> is strong") {
  const dx::Tensor<float> f = make_tensor<float>({1.5f, -2.0f, 3.0f});
  const dx::Tensor<std::int32_t> i = make_tensor<std::int32_t>({1, -2, std::numeric_limits<std::int32_t>::max()});
  const dx::Tensor<bool> b = make_tensor<bool>({true, false});
  const dx::Tensor<std::uint8_t> u = make_tensor<std::uint8_t>({250, 255});
  const dx::Tensor<std::int64_t> l = make_tensor<std::int64_t>({1, 2});

  const auto f2 = dx::eval(f * 2.0);
  static_assert(std::is_same_v<value_t<decltype(f2)>, float>);
  CHECK(f2.at(0) == 3.0f);
  static_assert(std::is_same_v<value_t<decltype(2.0 * f)>, float>);
  static_assert(std::is_same_v<value_t<decltype(f + 1)>, float>);

  const auto i25 = dx::eval(i * 2.5);
  static_assert(std::is_same_v<value_t<decltype(i25)>, double>);
  CHECK(i25.at(1) == -5.0);
  CHECK(i25.at(2) == 2.5 * 2147483647.0);

  const auto b1 = dx::eval(b + 1);
  static_assert(std::is_same_v<value_t<decltype(b1)>, std::int64_t>);
  CHECK(b1.at(0) == 2);
  CHECK(b1.at(1) == 1);
  static_assert(std::is_same_v<value_t<decltype(b * 2.5)>, double>);
  static_assert(std::is_same_v<value_t<decltype(i + true)>, std::int32_t>);

  const auto u1 = dx::eval(u + 1);
  static_assert(std::is_same_v<value_t<decltype(u1)>, std::uint8_t>);
  CHECK(u1.at(0) == 251);
  CHECK(u1.at(1) == 0);  // uint8 arithmetic wraps
  CHECK(dx::eval(u + 10).at(0) == 4);
  static_assert(std::is_same_v<value_t<decltype(u * 2.5)>, double>);

  // A Python int out of the array's range is NumPy 2's OverflowError.
  CHECK_THROWS_AS((void)(u + 300), dx::value_error);
  CHECK_THROWS_AS((void)(u + (-1)), dx::value_error);
  CHECK_THROWS_AS((void)(i + (std::int64_t{1} << 40)), dx::value_error);
  CHECK_NOTHROW((void)(l + (std::int64_t{1} << 40)));
  CHECK_NOTHROW((void)(u + 255));

  const auto il = dx::eval(i + dx::scalar<std::int64_t>(1));
  static_assert(std::is_same_v<value_t<decltype(il)>, std::int64_t>);
  CHECK(il.at(2) == std::int64_t{2147483648});  // no int32 wrap-around
  const auto fd = dx::eval(f * dx::scalar<double>(2));
  static_assert(std::is_same_v<value_t<decltype(fd)>, double>);
  CHECK(fd.at(0) == 3.0);
  static_assert(std::is_same_v<value_t<decltype(u + dx::scalar<std::int32_t>(300))>, std::int32_t>);
  CHECK(dx::eval(u + dx::scalar<std::int32_t>(300)).at(0) == 550);
}

// ---------------------------------------------------------------------------------------
// fma contraction (Note [fma contraction] in eval/rewrite.hpp)
// ---------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("fma contraction: a*b+c over floats is one rounding", T, float, double) {
  constexpr index_t n = 1001;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> dist(0.5, 2.0);
  dx::Tensor<T> x(Shape{n}), y(Shape{n}), z(Shape{n});
  for (index_t k = 0; k < n; ++k)
    x.data()[k] = static_cast<T>(dist(rng)), y.data()[k] = static_cast<T>(dist(rng)), z.data()[k] = static_cast<T>(dist(rng));

  CHECK(dx::describe(x * y + z) == "add(mul(x, y), z)");
  CHECK(dx::describe_lowered(x * y + z) == "fma(x, y, z)");
  CHECK(dx::describe_lowered(z + x * y) == "fma(x, y, z)");  // leaves named in lowered order
  CHECK(dx::describe_lowered(x * y - z) == "fms(x, y, z)");
  CHECK(dx::describe_lowered(z - x * y) == "fnma(x, y, z)");
  CHECK(dx::describe_lowered(x * 2 + y) == "fma(x, 2, y)");
  CHECK(dx::describe_lowered(x + y) == "add(x, y)");

  const auto got = dx::eval(x * y + z);
  const auto got_sub = dx::eval(x * y - z);
  mismatches bad;
  for (index_t k = 0; k < n; ++k) {
    const T a = x.data()[k], b = y.data()[k], c = z.data()[k];
    volatile T product = a * b;  // volatile: the reference itself must not be contracted
    const T two_roundings = product + c;
    if (got.data()[k] != std::fma(a, b, c) || ulp_steps(got.data()[k], two_roundings) > 1 ||
        got_sub.data()[k] != std::fma(a, b, -c))
      bad.add("fma(" + show(a) + ", " + show(b) + ", " + show(c) + ") = " + show(got.data()[k]) +
              ", std::fma " + show(std::fma(a, b, c)) + ", two roundings " + show(two_roundings));
  }
  check_none(bad, "x * y + z (" + dtype_str<T>() + ") vs std::fma");

  // Contracted only when the product already has the sum's compute type.
  const dx::Tensor<double> zd = make_tensor<double>(std::vector<double>(n, 0.25));
  if constexpr (std::is_same_v<T, float>) {
    CHECK(dx::describe_lowered(x * y + zd) == "add(mul(x, y), z)");
    const dx::Tensor<std::int32_t> yi(Shape{n}, 3);
    // float32 * int32 is float64 already: contracted, at float64.
    CHECK(dx::describe_lowered(x * yi + z) == "fma(x, y, z)");
    const auto m = dx::eval(x * yi + z);
    static_assert(std::is_same_v<value_t<decltype(m)>, double>);
    CHECK(m.at(3) == std::fma(static_cast<double>(x.at(3)), 3.0, static_cast<double>(z.at(3))));
  } else {
    CHECK(dx::describe_lowered(x * y + zd) == "fma(x, y, z)");
  }
}

TEST_CASE_TEMPLATE("fma contraction: not for integers (exact wrap-around)", T, std::int32_t, std::int64_t) {
  const dx::Tensor<T> x = make_tensor<T>({std::numeric_limits<T>::max(), 3, -4});
  const dx::Tensor<T> y = make_tensor<T>({2, 5, 6});
  const dx::Tensor<T> z = make_tensor<T>({3, 1, 24});
  CHECK(dx::describe_lowered(x * y + z) == "add(mul(x, y), z)");
  CHECK(dx::describe_lowered(x * y - z) == "sub(mul(x, y), z)");
  const auto r = dx::eval(x * y + z);
  CHECK(r.at(0) == 1);  // max * 2 = -2, + 3
  CHECK(r.at(1) == 16);
  CHECK(r.at(2) == 0);
}

// ---------------------------------------------------------------------------------------
// Bools inside mixed expressions
// ---------------------------------------------------------------------------------------

// A bool node feeding an op of another compute type is read as a mask of that type
// (eval/evaluator.hpp): the bool bodies of abs and floor/ceil/trunc must accept masks of
// any lane type, not only of uint8.
TEST_CASE("absolute, floor, ceil, trunc of bool inside mixed expressions") {
  const dx::Tensor<bool> b = make_tensor<bool>({true, false, true, true, false, true, false, false, true, true, false});
  const dx::Tensor<std::int32_t> i(Shape{11}, 10);
  const dx::Tensor<float> f(Shape{11}, 0.5f);
  const auto r1 = dx::eval(dx::abs(b) + i);
  const auto r2 = dx::eval(dx::where(dx::abs(b), f, 2.0f));
  const auto r3 = dx::eval(dx::where(dx::floor(b), f, 2.0f));
  const auto r4 = dx::eval(dx::ceil(b) * f);
  const auto r5 = dx::eval(dx::trunc(b) + dx::cast<double>(i));
  for (index_t k = 0; k < 11; ++k) {
    const bool v = b.at(k);
    CHECK(r1.at(k) == (v ? 11 : 10));
    CHECK(r2.at(k) == (v ? 0.5f : 2.0f));
    CHECK(r3.at(k) == (v ? 0.5f : 2.0f));
    CHECK(r4.at(k) == (v ? 0.5f : 0.0f));
    CHECK(r5.at(k) == (v ? 11.0 : 10.0));
  }
}

// ---------------------------------------------------------------------------------------
// The registry
// ---------------------------------------------------------------------------------------

TEST_CASE("registry: op names are NumPy's and unique; float_unary_ops all have references") {
  const auto names = ops::op_names();
  CHECK(names.size() == static_cast<std::size_t>(hana::length(ops::all_ops)));
  for (std::size_t i = 0; i < names.size(); ++i)
    for (std::size_t j = i + 1; j < names.size(); ++j) CHECK_MESSAGE(names[i] != names[j], std::string(names[i]));
  hana::for_each(ops::float_unary_ops, [](auto op) {
    using Op = typename decltype(op)::type;
    LD out = 0;
    CHECK_MESSAGE(exact_unary(Op::name, 0.5L, out), std::string(Op::name));
    CHECK(Op::arity == 1);
    CHECK(Op::acc.lo < Op::acc.hi);
  });
}


}  // namespace
