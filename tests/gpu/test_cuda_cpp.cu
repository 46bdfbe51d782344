// The C++ CUDA API (include/dynexpr/cuda/) against the CPU expression templates on the
// same inputs. Every check runs twice: through the host emulation (dx::cuda::
// emulate_assign: the kernels' element bodies in a loop on the CPU; runs anywhere, so
// indexing, broadcasting, strides, overlap and op bodies are tested without a GPU), and
// on the device (skipped, saying so, where no CUDA device is found). Built by Meson when
// nvcc is found; tests/gpu/run.sh builds and runs it on a GPU machine. By hand:
//   nvcc -std=c++20 --expt-relaxed-constexpr -arch=native -I include
//        tests/gpu/test_cuda_cpp.cu -o test_cuda_cpp && ./test_cuda_cpp   (one line)
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <dynexpr/core/config.hpp>
// the CPU evaluation, the reference (not dynexpr.hpp: Eigen's headers warn under nvcc)
#include <dynexpr/eval/assign.hpp>
#include <dynexpr/cuda/cuda.hpp>
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <type_traits>

namespace dx = dynexpr;

namespace {

bool has_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}
const bool no_device = !has_device();

/// Where the arrays live and how an assignment runs: host memory + emulation.
struct emulated {
  template <class T>
  struct array {
    dx::Tensor<T> t;
    dx::cuda::device_view<T> view() { return {t.data(), t.shape()}; }
  };
  template <class T>
  static array<T> upload(const dx::Tensor<T>& h) { return {h}; }
  template <class T>
  static array<T> empty(const dx::Shape& s) { return {dx::Tensor<T>(s)}; }
  template <class T, class E>
  static void assign(const dx::cuda::device_view<T>& out, const E& e) {
    dx::cuda::emulate_assign(out, e);
  }
  template <class T>
  static dx::Tensor<T> download(array<T>& a) { return a.t; }
};

/// Device memory + kernels.
struct device {
  template <class T>
  static dx::cuda::device_tensor<T> upload(const dx::Tensor<T>& h) { return dx::cuda::to_device(h); }
  template <class T>
  static dx::cuda::device_tensor<T> empty(const dx::Shape& s) {
    dx::cuda::device_tensor<T> d(s);
    cudaMemset(d.data(), 0, d.size() * sizeof(T));
    return d;
  }
  template <class T, class E>
  static void assign(const dx::cuda::device_view<T>& out, const E& e) {
    dx::cuda::assign(out, e);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  }
  template <class T>
  static dx::Tensor<T> download(dx::cuda::device_tensor<T>& a) { return dx::cuda::to_host(a); }
};

template <class T>
dx::Tensor<T> random(const dx::Shape& s, double lo, double hi, unsigned seed) {
  dx::Tensor<T> t(s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (dx::index_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<T>(u(rng));
  return t;
}

template <class T>
void check_close(const dx::Tensor<T>& got, const dx::Tensor<T>& want, double rtol) {
  REQUIRE(got.shape() == want.shape());
  for (dx::index_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got.data()[i]), w = static_cast<double>(want.data()[i]);
    if (std::isnan(w)) {
      CHECK(std::isnan(g));
    } else if (rtol == 0) {
      CHECK(g == w);
    } else {
      CHECK(std::fabs(g - w) <= rtol * std::fabs(w) + rtol);
    }
  }
}

// ---------------------------------------------------------------- the shared checks
template <class R, class T>
void float_chain() {
  auto hx = random<T>(dx::Shape{37, 65}, -3, 3, 1), hy = random<T>(dx::Shape{65}, -3, 3, 2);
  auto x = R::upload(hx), y = R::upload(hy);
  auto f = [](auto a, auto b) {
    return dx::tanh(a * T(2) + b) * 0.5 + a * b - dx::exp(dx::minimum(a, b)) / (dx::abs(b) + 1);
  };
  dx::Tensor<T> want = f(hx.view(), hy.view());
  auto out = R::template empty<T>(want.shape());
  R::assign(out.view(), f(x.view(), y.view()));
  check_close(R::download(out), want, std::is_same_v<T, float> ? 2e-6 : 1e-13);
}

template <class R>
void integer_ops() {
  dx::Tensor<std::int32_t> ha(dx::Shape{4, 6}), hb(dx::Shape{6});
  const std::int32_t av[] = {7, -7, std::numeric_limits<std::int32_t>::min(), 5, 0, 2147483647};
  const std::int32_t bv[] = {2, 2, -1, 0, -3, 1};
  for (int i = 0; i < 24; ++i) ha.data()[i] = av[i % 6] - (i / 6);
  for (int i = 0; i < 6; ++i) hb.data()[i] = bv[i];
  auto a = R::upload(ha), b = R::upload(hb);
  auto f = [](auto x, auto y) {
    return dx::floor_divide(x, y) + x % y * 3 + dx::maximum(x, y) - (x & 12) + (x ^ y) +
           (x + 2147483647);  // wraps, as NumPy
  };
  dx::Tensor<std::int32_t> want = f(ha.view(), hb.view());
  auto out = R::template empty<std::int32_t>(want.shape());
  R::assign(out.view(), f(a.view(), b.view()));
  check_close(R::download(out), want, 0);
}

template <class R>
void bools_where_cast() {
  dx::Tensor<float> hx = random<float>(dx::Shape{5, 8}, -2, 2, 3);
  hx.data()[3] = std::numeric_limits<float>::quiet_NaN();
  hx.data()[9] = std::numeric_limits<float>::infinity();
  // finite values for the cast to int: NaN and inf to int32 are undefined in C++
  const dx::Tensor<float> hy = random<float>(dx::Shape{8}, -2, 2, 8);
  auto x = R::upload(hx), y = R::upload(hy);
  auto p = [](auto v) { return dx::logical_or(dx::isnan(v), v > 0.5f) != dx::isinf(v); };
  auto w = [](auto v, auto u) {
    return dx::where(v > 0.0f, dx::cast<std::int32_t>(u * 10.0f), dx::cast<double>(v));
  };
  dx::Tensor<bool> wp = p(hx.view());
  dx::Tensor<double> ww = w(hx.view(), hy.view());
  auto op = R::template empty<bool>(wp.shape());
  auto ow = R::template empty<double>(ww.shape());
  R::assign(op.view(), p(x.view()));
  R::assign(ow.view(), w(x.view(), y.view()));
  check_close(R::download(op), wp, 0);
  check_close(R::download(ow), ww, 0);
}

template <class R>
void strided_and_broadcast() {
  // out = a[::-1, ::2].T * b[:, None] + 1, written into the columns of a transposed buffer
  dx::Tensor<double> ha = random<double>(dx::Shape{6, 10}, -1, 1, 4), hb = random<double>(dx::Shape{5}, -1, 1, 5);
  auto a = R::upload(ha), b = R::upload(hb);
  auto read = [](dx::cuda::device_view<double> v) {
    // rows reversed, every second column, transposed: shape (5, 6)
    return dx::cuda::device_view<double>(v.data() + 5 * 10, dx::Shape{5, 6}, dx::Strides{2, -10});
  };
  auto hread = dx::View<const double>(ha.data() + 5 * 10, dx::Shape{5, 6}, dx::Strides{2, -10});
  dx::Tensor<double> want = hread * dx::View<const double>(hb.data(), dx::Shape{5, 1}, dx::Strides{1, 0}) + 1;
  auto out = R::template empty<double>(dx::Shape{6, 5});  // written through its transpose
  const auto ov = out.view();
  const dx::cuda::device_view<double> ot(ov.data(), dx::Shape{5, 6}, dx::Strides{1, 5});
  R::assign(ot, read(a.view()) * dx::cuda::device_view<double>(b.view().data(), dx::Shape{5, 1}, dx::Strides{1, 0}) + 1);
  dx::Tensor<double> got = R::download(out);
  dx::Tensor<double> got_t = dx::View<const double>(got.data(), dx::Shape{5, 6}, dx::Strides{1, 5}) + 0.0;
  // not bit-exact: a * b + 1 is one fma here, and two roundings on a host without FMA
  check_close(got_t, want, 1e-15);
}

template <class R>
void overlap_and_in_place() {
  dx::Tensor<float> hx(dx::Shape{9});
  for (int i = 0; i < 9; ++i) hx.data()[i] = float(i);
  auto x = R::upload(hx);
  const auto v = x.view();
  // x = x * 2 (element for element), then x[1:] = x[:-1] + 1 (NumPy reads the old x)
  R::assign(v, v * 2.0f);
  R::assign(dx::cuda::device_view<float>(v.data() + 1, dx::Shape{8}),
            dx::cuda::device_view<float>(v.data(), dx::Shape{8}) + 1.0f);
  dx::Tensor<float> got = R::download(x);
  CHECK(got.data()[0] == 0.0f);
  for (int i = 1; i < 9; ++i) CHECK(got.data()[i] == 2.0f * (i - 1) + 1.0f);
}

template <class R>
void shapes_and_errors() {
  auto x = R::upload(random<float>(dx::Shape{3, 4}, 0, 1, 6));
  auto bad = R::template empty<float>(dx::Shape{4, 3});
  CHECK_THROWS_AS(R::assign(bad.view(), x.view() + 1.0f), dx::shape_error);
  auto e = R::template empty<float>(dx::Shape{0, 4});
  R::assign(e.view(), dx::cuda::device_view<float>(x.view().data(), dx::Shape{0, 4}) * 2.0f);
  auto s = R::template empty<float>(dx::Shape{});
  R::assign(s.view(), dx::cuda::device_view<float>(x.view().data(), dx::Shape{}) + 1.0f);
  CHECK(R::download(s).data()[0] == doctest::Approx(R::download(x).data()[0] + 1.0f));
  // a weak C++ scalar keeps the array's kind; an int array with a double is float64
  using F = decltype(x.view() * 2.0);
  using D = decltype(dx::cuda::device_view<std::int32_t>() * 2.5);
  static_assert(std::is_same_v<typename F::value_type, float>);
  static_assert(std::is_same_v<typename D::value_type, double>);
}

}  // namespace

#define BOTH(NAME, ...)                                                                 \
  TEST_CASE("emulated: " #NAME) { NAME<emulated __VA_OPT__(,) __VA_ARGS__>(); }           \
  TEST_CASE("device: " #NAME* doctest::skip(no_device)) { NAME<device __VA_OPT__(,) __VA_ARGS__>(); }

BOTH(float_chain, float)
BOTH(integer_ops)
BOTH(bools_where_cast)
BOTH(strided_and_broadcast)
BOTH(overlap_and_in_place)
BOTH(shapes_and_errors)

TEST_CASE("float_chain<double>, emulated") { float_chain<emulated, double>(); }
TEST_CASE("float_chain<double>, device" * doctest::skip(no_device)) { float_chain<device, double>(); }

TEST_CASE("to_host refuses a strided view" * doctest::skip(no_device)) {
  auto x = dx::cuda::to_device(random<float>(dx::Shape{4, 4}, 0, 1, 7));
  const dx::cuda::device_view<float> t(x.data(), dx::Shape{4, 4}, dx::Strides{1, 4});
  CHECK_THROWS_AS(dx::cuda::to_host(t), dx::value_error);
  check_close(dx::cuda::to_host(dx::cuda::eval(t)), dx::Tensor<float>(dx::cuda::to_host(x).transpose() + 0.0f), 0);
}
