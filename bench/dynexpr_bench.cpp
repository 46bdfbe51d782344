// bench/dynexpr_bench.cpp — fused vs unfused, and dynexpr vs its peers, measured in one run.
//
// Every case is run by several implementations over the same input buffers:
//   dynexpr        dx::assign(out, expr) into a preallocated output (one fused pass)
//   dynexpr_alloc  dx::Tensor<float> z = expr; a new output every call, as users write it
//                  (allocation, zero fill and first-touch page faults are in the time)
//   unfused        one dynexpr op per pass, every intermediate a new Tensor, as an eager
//                  library (NumPy) runs the same code
//   eigen          Eigen Array expressions on Eigen::Map of the same buffers (one thread:
//                  Eigen never parallelises coefficient-wise expressions)
//   highway_ref    a hand-written Highway loop with the same math (dynexpr::simd::Tanh, hn::Exp),
//                  over the same pool with the same chunking as the evaluator: the practical limit
//   scalar         a plain loop with <cmath>, one thread; also the reference every other
//                  result is checked against before anything is timed
// See bench/README.md for the cases, the timing method and how to read the output.
//
//   g++ -std=c++20 -O2 -march=native -Iinclude -isystem /usr/include/eigen3 -pthread
//       bench/dynexpr_bench.cpp -o dynexpr-bench -lhwy
//   ./dynexpr-bench [--filter NAME] [--sizes 1K,64K,1M,4M,16M] [--reps N] [--threads N]
//                   [--min-time S] [--json PATH]
#include "dynexpr/core/config.hpp"
// config.hpp first: it sets HWY_COMPILE_ONLY_STATIC before Highway is included.
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>
#include <hwy/targets.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dynexpr/dynexpr.hpp"

namespace {

namespace dx = dynexpr;
namespace hn = hwy::HWY_NAMESPACE;
namespace par = dynexpr::parallel;
using dx::index_t;
using clock_type = std::chrono::steady_clock;

// ------------------------------------------------------------------------- declarations

/// One way of computing a case. `run` computes it once; `result` then points at the
/// `outputs` values that are compared with `scalar`'s.
struct impl {
  std::string name;
  std::function<void()> run;
  std::function<const float*()> result;
};

/// The inputs every case reads: x and y, uniform in [-2, 2), long enough for the largest
/// size; a case of n elements reads the first n of each.
struct inputs {
  dx::Tensor<float> x, y;
};

/// A case at one size: the implementations, and what the ideal traffic and the check are.
struct instance {
  index_t n = 0;        // elements per input (softmax: rows * row length)
  index_t outputs = 0;  // values each implementation's result() holds
  double bytes = 0;     // inputs read once + outputs written once
  double atol = 0, rtol = 0;
  std::vector<impl> impls;  // scalar first
};

struct bench_case {
  const char* name;
  const char* formula;
  instance (*make)(const inputs&, index_t n);
};

struct record {
  std::string case_name;
  index_t n;
  std::string impl;
  double seconds;  // median
  double min_seconds;
  double gbps;
  double ratio;  // seconds / dynexpr's seconds for the same case and size
  int reps;
};

struct options {
  std::string filter;
  std::string json;
  std::vector<index_t> sizes;
  int reps = 0;  // 0: calibrate
  int threads = 0;
  double min_time = 0.3;
};

instance make_tanh_chain(const inputs& in, index_t n);
instance make_affine(const inputs& in, index_t n);
instance make_softmax_rows(const inputs& in, index_t n);
instance make_sum_squares(const inputs& in, index_t n);

const bench_case all_cases[] = {
    {"tanh_chain", "z = tanh(x*2+y)*0.5 + x*y", &make_tanh_chain},
    {"affine", "z = x*2 + y*3 - 1", &make_affine},
    {"softmax_rows", "e = exp(x - max(x, 1, true)); z = e / sum(e, 1, true)", &make_softmax_rows},
    {"sum_squares", "s = sum(x*x)", &make_sum_squares},
};

// ------------------------------------------------------------------ Highway building blocks

constexpr std::size_t max_lanes = HWY_MAX_BYTES / sizeof(float);

/// z[i] = f(d, x[i..], y[i..]) over the pool, in tasks of the evaluator's block size
/// (eval/assign.hpp: items = blocks of block_elements, grain 1, align 1, the same work
/// estimate), so the chunking and the inline/pool decision are dynexpr's own.
template <class F>
void hwy_pointwise(const float* x, const float* y, float* z, index_t n, double work, F f) {
  constexpr index_t block = dx::evaluation::block_elements;
  const index_t nblk = (n + block - 1) / block;
  par::parallel_for(nblk, 1, 1, work, [&](index_t ib, index_t ie) {
    const hn::ScalableTag<float> d;
    const index_t lanes = static_cast<index_t>(hn::Lanes(d));
    index_t i = ib * block;
    const index_t end = std::min(ie * block, n);
    for (; i + lanes <= end; i += lanes)
      hn::StoreU(f(d, hn::LoadU(d, x + i), hn::LoadU(d, y + i)), d, z + i);
    if (i < end) {  // Highway 1.0.3 has no LoadN: go through a padded buffer
      alignas(64) float bx[max_lanes] = {}, by[max_lanes] = {}, bz[max_lanes];
      const auto bytes = static_cast<std::size_t>(end - i) * sizeof(float);
      std::memcpy(bx, x + i, bytes);
      std::memcpy(by, y + i, bytes);
      hn::Store(f(d, hn::Load(d, bx), hn::Load(d, by)), d, bz);
      std::memcpy(z + i, bz, bytes);
    }
  });
}

/// A view of the first n elements of t, with the given shape.
dx::View<const float> prefix(const dx::Tensor<float>& t, dx::Shape shape) {
  return dx::view(static_cast<const float*>(t.data()), shape);
}

using emap = Eigen::Map<Eigen::ArrayXf, Eigen::AlignedMax>;
using cemap = Eigen::Map<const Eigen::ArrayXf, Eigen::AlignedMax>;

// -------------------------------------------------------------------- pointwise cases

/// State shared by the implementations of a two-input pointwise case.
struct pointwise_state {
  index_t n;
  dx::View<const float> x, y;
  dx::Tensor<float> out_scalar, out_dx, out_dx_cached, out_hwy, out_eigen, res_alloc, res_unfused;
  explicit pointwise_state(const inputs& in, index_t n_)
      : n(n_),
        x(prefix(in.x, dx::Shape{n_})),
        y(prefix(in.y, dx::Shape{n_})),
        out_scalar(dx::Shape{n_}),
        out_dx(dx::Shape{n_}),
        out_dx_cached(dx::Shape{n_}),
        out_hwy(dx::Shape{n_}),
        out_eigen(dx::Shape{n_}) {}
};

/// Builds the six implementations of one pointwise chain from its six spellings.
template <class Expr, class Unfused, class Eig, class Hwy, class Scalar>
instance make_pointwise(const inputs& in, index_t n, Expr expr, Unfused unfused, Eig eig, Hwy hwy,
                        Scalar scalar) {
  auto s = std::make_shared<pointwise_state>(in, n);
  using E = decltype(expr(s->x, s->y));
  // The evaluator's own work estimate, so highway_ref goes to the pool exactly when dynexpr does.
  const double work = static_cast<double>(n) * static_cast<double>(dx::cost_per_element_v<E>);
  instance r;
  r.n = n;
  r.outputs = n;
  r.bytes = 12.0 * static_cast<double>(n);  // x, y read, z written: 3 x 4 bytes
  r.atol = 1e-5;
  r.rtol = 1e-5;
  r.impls.push_back({"scalar",
                     [s, scalar] {
                       const float *x = s->x.data(), *y = s->y.data();
                       float* z = s->out_scalar.data();
                       for (index_t i = 0; i < s->n; ++i) z[i] = scalar(x[i], y[i]);
                     },
                     [s] { return s->out_scalar.data(); }});
  r.impls.push_back({"dynexpr", [s, expr] { dx::assign(s->out_dx, expr(s->x, s->y)); },
                     [s] { return s->out_dx.data(); }});
  // The same loop with ordinary stores only: what streaming an output past the cache's
  // size saves or costs (Note [streaming stores] in include/dynexpr/simd/convert.hpp).
  r.impls.push_back({"dynexpr_cached",
                     [s, expr] {
                       const std::size_t saved = dx::evaluation::stream_min_bytes();
                       dx::evaluation::set_stream_min_bytes(SIZE_MAX);
                       dx::assign(s->out_dx_cached, expr(s->x, s->y));
                       dx::evaluation::set_stream_min_bytes(saved);
                     },
                     [s] { return s->out_dx_cached.data(); }});
  r.impls.push_back({"dynexpr_alloc",
                     [s, expr] {
                       dx::Tensor<float> z = expr(s->x, s->y);
                       s->res_alloc = std::move(z);  // frees the previous call's result
                     },
                     [s] { return s->res_alloc.data(); }});
  r.impls.push_back({"unfused", [s, unfused] { s->res_unfused = unfused(s->x, s->y); },
                     [s] { return s->res_unfused.data(); }});
  r.impls.push_back({"eigen",
                     [s, eig] {
                       const cemap x(s->x.data(), s->n), y(s->y.data(), s->n);
                       emap z(s->out_eigen.data(), s->n);
                       eig(x, y, z);
                     },
                     [s] { return s->out_eigen.data(); }});
  r.impls.push_back({"highway_ref",
                     [s, hwy, work] {
                       hwy_pointwise(s->x.data(), s->y.data(), s->out_hwy.data(), s->n, work, hwy);
                     },
                     [s] { return s->out_hwy.data(); }});
  return r;
}

instance make_tanh_chain(const inputs& in, index_t n) {
  return make_pointwise(
      in, n, [](const auto& x, const auto& y) { return dx::tanh(x * 2 + y) * 0.5 + x * y; },
      [](const auto& x, const auto& y) {
        // NumPy's order of evaluation, one temporary per op.
        dx::Tensor<float> t1 = x * 2;
        dx::Tensor<float> t2 = t1 + y;
        dx::Tensor<float> t3 = dx::tanh(t2);
        dx::Tensor<float> t4 = t3 * 0.5;
        dx::Tensor<float> t5 = x * y;
        dx::Tensor<float> z = t4 + t5;
        return z;
      },
      [](const cemap& x, const cemap& y, emap& z) { z = (x * 2.0f + y).tanh() * 0.5f + x * y; },
      [](auto d, auto x, auto y) {
        const auto t = dynexpr::simd::Tanh(d, hn::MulAdd(x, hn::Set(d, 2.0f), y));
        return hn::MulAdd(t, hn::Set(d, 0.5f), hn::Mul(x, y));
      },
      [](float x, float y) { return std::tanh(x * 2.0f + y) * 0.5f + x * y; });
}

instance make_affine(const inputs& in, index_t n) {
  return make_pointwise(
      in, n, [](const auto& x, const auto& y) { return x * 2 + y * 3 - 1; },
      [](const auto& x, const auto& y) {
        dx::Tensor<float> t1 = x * 2;
        dx::Tensor<float> t2 = y * 3;
        dx::Tensor<float> t3 = t1 + t2;
        dx::Tensor<float> z = t3 - 1;
        return z;
      },
      [](const cemap& x, const cemap& y, emap& z) { z = x * 2.0f + y * 3.0f - 1.0f; },
      [](auto d, auto x, auto y) {  // two FMAs: the fewest instructions for this chain
        return hn::MulAdd(x, hn::Set(d, 2.0f), hn::MulSub(y, hn::Set(d, 3.0f), hn::Set(d, 1.0f)));
      },
      [](float x, float y) { return x * 2.0f + y * 3.0f - 1.0f; });
}

// ------------------------------------------------------------------------- softmax_rows

/// Rows of 1024 elements (of n elements when n < 1024): n is rounded down to whole rows.
struct softmax_state {
  index_t rows, len;
  dx::View<const float> x;
  dx::Tensor<float> out_scalar, out_dx, out_hwy, out_eigen, res_alloc, res_unfused, res_softmax;
  softmax_state(const inputs& in, index_t rows_, index_t len_)
      : rows(rows_),
        len(len_),
        x(prefix(in.x, dx::Shape{rows_, len_})),
        out_scalar(dx::Shape{rows_, len_}),
        out_dx(dx::Shape{rows_, len_}),
        out_hwy(dx::Shape{rows_, len_}),
        out_eigen(dx::Shape{rows_, len_}) {}
};

/// One row of softmax with Highway: max, then exp(x - max) stored and summed, then scaled.
void hwy_softmax_row(const float* x, float* z, index_t len) {
  const hn::ScalableTag<float> d;
  const index_t lanes = static_cast<index_t>(hn::Lanes(d));
  index_t i = 0;
  auto vmax = hn::Set(d, -std::numeric_limits<float>::infinity());
  for (; i + lanes <= len; i += lanes) vmax = hn::Max(vmax, hn::LoadU(d, x + i));
  float m = hn::GetLane(hn::MaxOfLanes(d, vmax));
  for (; i < len; ++i) m = std::max(m, x[i]);
  const auto vm = hn::Set(d, m);
  auto vsum = hn::Zero(d);
  for (i = 0; i + lanes <= len; i += lanes) {
    const auto e = hn::Exp(d, hn::Sub(hn::LoadU(d, x + i), vm));
    hn::StoreU(e, d, z + i);
    vsum = hn::Add(vsum, e);
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, vsum));
  for (; i < len; ++i) sum += z[i] = std::exp(x[i] - m);
  const auto vinv = hn::Set(d, 1.0f / sum);
  for (i = 0; i + lanes <= len; i += lanes)
    hn::StoreU(hn::Mul(hn::LoadU(d, z + i), vinv), d, z + i);
  for (; i < len; ++i) z[i] *= 1.0f / sum;
}

instance make_softmax_rows(const inputs& in, index_t n) {
  const index_t len = std::min<index_t>(n, 1024), rows = n / len;
  auto s = std::make_shared<softmax_state>(in, rows, len);
  instance r;
  r.n = rows * len;
  r.outputs = r.n;
  r.bytes = 8.0 * static_cast<double>(r.n);  // x read, z written
  r.atol = 1e-9;                             // values are ~1/len: the check is relative
  r.rtol = 1e-5;
  r.impls.push_back({"scalar",
                     [s] {
                       for (index_t k = 0; k < s->rows; ++k) {
                         const float* x = s->x.data() + k * s->len;
                         float* z = s->out_scalar.data() + k * s->len;
                         float m = x[0];
                         for (index_t i = 1; i < s->len; ++i) m = std::max(m, x[i]);
                         double sum = 0;
                         for (index_t i = 0; i < s->len; ++i) sum += z[i] = std::exp(x[i] - m);
                         for (index_t i = 0; i < s->len; ++i) z[i] = static_cast<float>(z[i] / sum);
                       }
                     },
                     [s] { return s->out_scalar.data(); }});
  r.impls.push_back({"dynexpr",
                     [s] {
                       // e goes into the output, then the output is divided in place
                       // (an output that is also an operand at the same place is safe).
                       dx::assign(s->out_dx, dx::exp(s->x - dx::max(s->x, 1, true)));
                       dx::assign(s->out_dx, s->out_dx / dx::sum(s->out_dx, 1, true));
                     },
                     [s] { return s->out_dx.data(); }});
  r.impls.push_back({"dynexpr_alloc",
                     [s] {
                       dx::Tensor<float> e = dx::exp(s->x - dx::max(s->x, 1, true));
                       dx::Tensor<float> z = e / dx::sum(e, 1, true);
                       s->res_alloc = std::move(z);
                     },
                     [s] { return s->res_alloc.data(); }});
  r.impls.push_back({"dx_softmax",  // the library's one-read softmax (Note [online softmax])
                     [s] { s->res_softmax = dx::softmax(s->x); },
                     [s] { return s->res_softmax.data(); }});
  r.impls.push_back({"unfused",
                     [s] {
                       dx::Tensor<float> m = dx::max(s->x, 1, true);
                       dx::Tensor<float> t = s->x - m;
                       dx::Tensor<float> e = dx::exp(t);
                       dx::Tensor<float> sum = dx::sum(e, 1, true);
                       dx::Tensor<float> z = e / sum;
                       s->res_unfused = std::move(z);
                     },
                     [s] { return s->res_unfused.data(); }});
  r.impls.push_back({"eigen",
                     [s] {
                       for (index_t k = 0; k < s->rows; ++k) {
                         const cemap x(s->x.data() + k * s->len, s->len);
                         emap z(s->out_eigen.data() + k * s->len, s->len);
                         z = (x - x.maxCoeff()).exp();
                         z /= z.sum();
                       }
                     },
                     [s] { return s->out_eigen.data(); }});
  // Rows grouped so one task covers about a block, as the evaluator groups short rows; the
  // work estimate is that of the exp pass (sub + exp per element).
  using X = decltype(dx::exp(s->x - dx::max(s->x, 1, true)));
  const double work = static_cast<double>(r.n) * static_cast<double>(dx::cost_per_element_v<X>);
  const index_t grain = std::max<index_t>(1, dx::evaluation::block_elements / len);
  r.impls.push_back({"highway_ref",
                     [s, work, grain] {
                       par::parallel_for(s->rows, grain, 1, work, [&](index_t kb, index_t ke) {
                         for (index_t k = kb; k < ke; ++k)
                           hwy_softmax_row(s->x.data() + k * s->len, s->out_hwy.data() + k * s->len,
                                           s->len);
                       });
                     },
                     [s] { return s->out_hwy.data(); }});
  return r;
}

// -------------------------------------------------------------------------- sum_squares

struct sum_state {
  index_t n;
  dx::View<const float> x;
  float s_scalar = 0, s_dx = 0, s_unfused = 0, s_eigen = 0, s_hwy = 0;
  std::vector<double> partial;  // highway_ref: one total per chunk
  sum_state(const inputs& in, index_t n_) : n(n_), x(prefix(in.x, dx::Shape{n_})) {}
};

instance make_sum_squares(const inputs& in, index_t n) {
  auto s = std::make_shared<sum_state>(in, n);
  constexpr index_t chunk = dx::evaluation::reduce_chunk;
  const index_t chunks = (n + chunk - 1) / chunk;
  s->partial.resize(static_cast<std::size_t>(chunks));
  instance r;
  r.n = n;
  r.outputs = 1;
  r.bytes = 4.0 * static_cast<double>(n);  // x read
  // Float accumulation against a double sum. dynexpr and highway_ref add float blocks into
  // double totals (error ~1e-7); Eigen adds everything in 16 float lanes, ~4e-4 off at 16M.
  // 1e-3 still catches a kernel that skips a single 32K chunk of 16M.
  r.atol = 0;
  r.rtol = 1e-3;
  r.impls.push_back({"scalar",
                     [s] {
                       double acc = 0;  // the reference sums in double
                       const float* x = s->x.data();
                       for (index_t i = 0; i < s->n; ++i) acc += static_cast<double>(x[i]) * x[i];
                       s->s_scalar = static_cast<float>(acc);
                     },
                     [s] { return &s->s_scalar; }});
  // A full reduction returns a scalar: there is no output to preallocate, so dynexpr_alloc
  // would be the same call.
  r.impls.push_back({"dynexpr", [s] { s->s_dx = dx::sum(s->x * s->x); }, [s] { return &s->s_dx; }});
  r.impls.push_back({"unfused",
                     [s] {
                       dx::Tensor<float> t = s->x * s->x;
                       s->s_unfused = dx::sum(t);
                     },
                     [s] { return &s->s_unfused; }});
  r.impls.push_back({"eigen",
                     [s] {
                       const cemap x(s->x.data(), s->n);
                       s->s_eigen = (x * x).sum();
                     },
                     [s] { return &s->s_eigen; }});
  // The reduction's chunking (eval/reduce.hpp): items of reduce_chunk elements, grain 1,
  // work = n * (cost + 1); totals per chunk in double, added in chunk order.
  const double work = 2.0 * static_cast<double>(n);
  r.impls.push_back({"highway_ref",
                     [s, chunks, work] {
                       par::parallel_for(chunks, 1, 1, work, [&](index_t cb, index_t ce) {
                         const hn::ScalableTag<float> d;
                         const index_t lanes = static_cast<index_t>(hn::Lanes(d));
                         const float* x = s->x.data();
                         for (index_t c = cb; c < ce; ++c) {
                           index_t i = c * chunk;
                           const index_t end = std::min(i + chunk, s->n);
                           auto a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0;
                           for (; i + 4 * lanes <= end; i += 4 * lanes) {
                             const auto v0 = hn::LoadU(d, x + i), v1 = hn::LoadU(d, x + i + lanes);
                             const auto v2 = hn::LoadU(d, x + i + 2 * lanes);
                             const auto v3 = hn::LoadU(d, x + i + 3 * lanes);
                             a0 = hn::MulAdd(v0, v0, a0);
                             a1 = hn::MulAdd(v1, v1, a1);
                             a2 = hn::MulAdd(v2, v2, a2);
                             a3 = hn::MulAdd(v3, v3, a3);
                           }
                           for (; i + lanes <= end; i += lanes) {
                             const auto v = hn::LoadU(d, x + i);
                             a0 = hn::MulAdd(v, v, a0);
                           }
                           double t = hn::GetLane(
                               hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
                           for (; i < end; ++i) t += static_cast<double>(x[i]) * x[i];
                           s->partial[static_cast<std::size_t>(c)] = t;
                         }
                       });
                       double t = 0;
                       for (double p : s->partial) t += p;
                       s->s_hwy = static_cast<float>(t);
                     },
                     [s] { return &s->s_hwy; }});
  return r;
}

// ------------------------------------------------------------------------------- driver

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// Mean seconds per call over `inner` back-to-back calls.
double time_batch(const impl& im, int inner) {
  const auto t0 = clock_type::now();
  for (int k = 0; k < inner; ++k) im.run();
  return seconds_since(t0) / inner;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

/// Compares every implementation with scalar's result; false (with a message) on the first
/// value outside atol + rtol * |reference| (NaN included).
/// Errors above a quarter of the tolerance are noted on stderr (values close to failing).
bool verify(const char* case_name, const instance& ins, std::string& message) {
  const float* want = ins.impls.front().result();
  for (std::size_t k = 1; k < ins.impls.size(); ++k) {
    const float* got = ins.impls[k].result();
    if (got == nullptr) {
      message = ins.impls[k].name + " produced no result";
      return false;
    }
    double worst = 0;  // largest |error| / tolerance
    for (index_t i = 0; i < ins.outputs; ++i) {
      const double w = want[i], g = got[i], tol = ins.atol + ins.rtol * std::fabs(w);
      worst = std::max(worst, tol > 0 ? std::fabs(g - w) / tol : 0.0);
      if (!(std::fabs(g - w) <= tol)) {
        char buf[256];
        std::snprintf(buf, sizeof buf,
                      "%s: impl '%s' differs from scalar at index %lld: %.9g vs %.9g "
                      "(tolerance %.3g + %.3g * |ref|)",
                      case_name, ins.impls[k].name.c_str(), static_cast<long long>(i), g, w,
                      ins.atol, ins.rtol);
        message = buf;
        return false;
      }
    }
    if (worst > 0.25)
      std::fprintf(
          stderr,
          "dynexpr-bench: note: %s n=%lld: '%s' is within tolerance but uses %.0f%% of it\n",
          case_name, static_cast<long long>(ins.n), ins.impls[k].name.c_str(), 100 * worst);
  }
  return true;
}

std::string size_label(index_t n) {
  if (n >= (1 << 20) && n % (1 << 20) == 0) return std::to_string(n >> 20) + "M";
  if (n >= (1 << 10) && n % (1 << 10) == 0) return std::to_string(n >> 10) + "K";
  return std::to_string(n);
}

/// Runs one case at one size: check, calibrate, then `reps` repetitions in which every
/// implementation runs once (a batch of calls when one call is short), in an order that
/// rotates each repetition so slow drift (clock, other load) hits all of them alike.
/// Returns false when a result is wrong; nothing is timed then.
bool run_instance(const bench_case& c, const inputs& in, index_t n, const options& opt,
                  std::vector<record>& out) {
  instance ins = c.make(in, n);
  const std::size_t m = ins.impls.size();
  // Warm-up and check: the first call of each (pool start-up, first touch of the outputs
  // of the preallocating ones, instruction cache), then compare with scalar.
  for (const impl& im : ins.impls) im.run();
  std::string message;
  if (!verify(c.name, ins, message)) {
    std::fprintf(stderr, "dynexpr-bench: ERROR: %s; case skipped\n", message.c_str());
    std::printf("%-13s %9s  ERROR: wrong result, case skipped (see stderr)\n", c.name,
                size_label(ins.n).c_str());
    return false;
  }
  // Calibrate: one more timed call each; short calls are batched to >= 50 µs so the clock
  // resolution does not matter, and the repetitions fill min_time in total.
  std::vector<int> inner(m, 1);
  std::vector<double> single(m);
  double per_rep = 0;
  for (std::size_t k = 0; k < m; ++k) {
    const double t = single[k] = time_batch(ins.impls[k], 1);
    inner[k] = static_cast<int>(std::clamp(std::ceil(50e-6 / std::max(t, 1e-9)), 1.0, 10000.0));
    per_rep += t * inner[k];
  }
  const bool huge = ins.n >= (index_t{16} << 20);
  int reps = opt.reps;
  if (reps <= 0)
    reps = static_cast<int>(std::clamp(std::ceil(opt.min_time / std::max(per_rep, 1e-9)),
                                       huge ? 5.0 : 7.0, huge ? 5.0 : 2001.0));
  std::vector<std::vector<double>> times(m);
  for (int r = 0; r < reps; ++r)
    for (std::size_t j = 0; j < m; ++j) {
      const std::size_t k = (j + static_cast<std::size_t>(r)) % m;
      // Note [settle before a long call]: a long call (scalar at 1M is ~0.1 s of one core)
      // leaves this thread owing CPU time to whatever else is runnable, and the scheduler
      // then preempts the call that follows it, whichever that is. A 1 ms sleep before
      // each call of >= 100 µs pays that debt outside the timed region; on an idle
      // machine it changes nothing. Short calls run back to back, as in real loops.
      if (single[k] >= 100e-6) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      times[k].push_back(time_batch(ins.impls[k], inner[k]));
    }
  double dx_seconds = 0;
  for (std::size_t k = 0; k < m; ++k)
    if (ins.impls[k].name == "dynexpr") dx_seconds = median(times[k]);
  // Print in a fixed order (dynexpr first), whatever the construction order.
  static const char* const order[] = {"dynexpr", "dynexpr_cached", "dynexpr_alloc", "dx_softmax",
                                      "unfused", "eigen",          "highway_ref",   "scalar"};
  for (const char* name : order)
    for (std::size_t k = 0; k < m; ++k) {
      if (ins.impls[k].name != name) continue;
      record rec;
      rec.case_name = c.name;
      rec.n = ins.n;
      rec.impl = name;
      rec.seconds = median(times[k]);
      rec.min_seconds = *std::min_element(times[k].begin(), times[k].end());
      rec.gbps = ins.bytes / rec.seconds * 1e-9;
      rec.ratio = dx_seconds > 0 ? rec.seconds / dx_seconds : 0;
      rec.reps = reps;
      std::printf("%-13s %9s  %-14s %12.4e %12.4e %9.2f %9.2fx %6d x%d\n", c.name,
                  size_label(ins.n).c_str(), name, rec.seconds, rec.min_seconds, rec.gbps,
                  rec.ratio, reps, inner[k]);
      out.push_back(rec);
    }
  std::fflush(stdout);
  return true;
}

/// "1K,64K,1M" -> {1024, 65536, 1048576}; K = 1024, M = 1024^2. Empty on a bad item.
std::vector<index_t> parse_sizes(const std::string& text) {
  std::vector<index_t> sizes;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    index_t scale = 1;
    if (end && (*end == 'K' || *end == 'k'))
      scale = 1 << 10, ++end;
    else if (end && (*end == 'M' || *end == 'm'))
      scale = 1 << 20, ++end;
    if (item.empty() || end == item.c_str() || *end != '\0' || v <= 0) return {};
    sizes.push_back(static_cast<index_t>(v) * scale);
    pos = comma + 1;
  }
  return sizes;
}

void usage() {
  std::printf(
      "usage: dynexpr-bench [--filter NAME] [--sizes LIST] [--reps N] [--threads N]\n"
      "                     [--min-time SECONDS] [--json PATH]\n"
      "  --filter NAME   run the cases whose name contains NAME\n"
      "  --sizes LIST    elements per input, e.g. 1K,64K,1M,4M,16M (the default)\n"
      "  --reps N        repetitions per case and size (default: enough for --min-time,\n"
      "                  at least 7; exactly 5 at 16M and above)\n"
      "  --min-time S    seconds each case and size should take in total (default 0.3)\n"
      "  --threads N     dynexpr's pool size, caller included (default: DYNEXPR_NUM_THREADS\n"
      "                  or the hardware's)\n"
      "  --json PATH     also write the records as a JSON list\n"
      "cases:");
  for (const bench_case& c : all_cases) std::printf(" %s", c.name);
  std::printf("\n");
}

bool parse_options(int argc, char** argv, options& opt) {
  opt.sizes = {1 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--help" || a == "-h") {
      usage();
      std::exit(0);
    } else if (a == "--filter" && has_value) {
      opt.filter = argv[++i];
    } else if (a == "--json" && has_value) {
      opt.json = argv[++i];
    } else if (a == "--sizes" && has_value) {
      opt.sizes = parse_sizes(argv[++i]);
      if (opt.sizes.empty()) {
        std::fprintf(stderr, "dynexpr-bench: --sizes '%s': give positive counts like 1K,64K,1M\n",
                     argv[i]);
        return false;
      }
    } else if (a == "--reps" && has_value) {
      opt.reps = std::atoi(argv[++i]);
      if (opt.reps < 1) {
        std::fprintf(stderr, "dynexpr-bench: --reps '%s': give an integer >= 1\n", argv[i]);
        return false;
      }
    } else if (a == "--threads" && has_value) {
      opt.threads = std::atoi(argv[++i]);
      if (opt.threads < 1) {
        std::fprintf(stderr, "dynexpr-bench: --threads '%s': give an integer >= 1\n", argv[i]);
        return false;
      }
    } else if (a == "--min-time" && has_value) {
      opt.min_time = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "dynexpr-bench: unknown or incomplete option '%s'; see --help\n",
                   a.c_str());
      return false;
    }
  }
  return true;
}

bool write_json(const std::string& path, const std::vector<record>& records, int threads) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::perror(path.c_str());
    return false;
  }
  std::fprintf(f, "[\n");
  for (std::size_t i = 0; i < records.size(); ++i) {
    const record& r = records[i];
    std::fprintf(f,
                 "  {\"case\": \"%s\", \"n\": %lld, \"impl\": \"%s\", \"seconds\": %.6e, "
                 "\"min_seconds\": %.6e, \"gbps\": %.4f, \"ratio_to_dynexpr\": %.4f, "
                 "\"reps\": %d, \"threads\": %d, \"target\": \"%s\"}%s\n",
                 r.case_name.c_str(), static_cast<long long>(r.n), r.impl.c_str(), r.seconds,
                 r.min_seconds, r.gbps, r.ratio, r.reps, threads, hwy::TargetName(HWY_TARGET),
                 i + 1 < records.size() ? "," : "");
  }
  std::fprintf(f, "]\n");
  return std::fclose(f) == 0;
}

const record* find(const std::vector<record>& rs, const char* c, index_t n, const char* impl) {
  for (const record& r : rs)
    if (r.case_name == c && r.n == n && r.impl == impl) return &r;
  return nullptr;
}

/// The targets for tanh_chain at 4M and 16M, where both were measured.
void print_targets(const std::vector<record>& rs) {
  bool header = false;
  for (index_t n : {index_t{4} << 20, index_t{16} << 20}) {
    const record* d = find(rs, "tanh_chain", n, "dynexpr");
    if (d == nullptr) continue;
    if (!header) std::printf("\ntargets (tanh_chain):\n"), header = true;
    auto line = [&](const char* what, const char* impl, bool (*ok)(double), const char* want) {
      const record* o = find(rs, "tanh_chain", n, impl);
      if (o == nullptr) return;
      const double v = o->seconds / d->seconds;
      std::printf("  %-4s %-36s %6.2f  (%s)  %s\n", size_label(n).c_str(), what, v, want,
                  ok(v) ? "PASS" : "FAIL");
    };
    line(
        "unfused / dynexpr", "unfused", [](double v) { return v >= 3.0; }, ">= 3");
    line(
        "highway_ref / dynexpr", "highway_ref", [](double v) { return v >= 1.0 / 1.25; },
        ">= 0.80, i.e. dynexpr within 1.25x");
    line(
        "eigen / dynexpr", "eigen", [](double v) { return v >= 1.0; }, ">= 1");
  }
}

}  // namespace

int main(int argc, char** argv) {
  options opt;
  if (!parse_options(argc, argv, opt)) return 2;
  if (opt.threads > 0) par::set_num_threads(opt.threads);

  std::vector<const bench_case*> cases;
  for (const bench_case& c : all_cases)
    if (std::strstr(c.name, opt.filter.c_str()) != nullptr) cases.push_back(&c);
  if (cases.empty()) {
    std::fprintf(stderr, "dynexpr-bench: --filter '%s' matches no case; see --help\n",
                 opt.filter.c_str());
    return 2;
  }

  const int threads = par::num_threads();
  std::printf(
      "dynexpr-bench: Highway target %s, dynexpr pool %d thread(s) (caller included), "
      "hardware threads %u\n",
      hwy::TargetName(HWY_TARGET), threads, std::thread::hardware_concurrency());
#ifdef _OPENMP
  std::printf("Eigen %d.%d.%d with OpenMP; coefficient-wise expressions still run on one thread\n",
              EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION);
#else
  std::printf("Eigen %d.%d.%d without OpenMP: eigen runs on one thread; so does scalar\n",
              EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION);
#endif
  std::printf("compiler %s; times are medians; ratio = seconds / dynexpr's seconds\n\n",
              __VERSION__);

  // Inputs once, for the largest size: uniform in [-2, 2), fixed seed.
  const index_t max_n = *std::max_element(opt.sizes.begin(), opt.sizes.end());
  inputs in{dx::Tensor<float>(dx::Shape{max_n}), dx::Tensor<float>(dx::Shape{max_n})};
  {
    std::mt19937 rng(12345);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    for (index_t i = 0; i < max_n; ++i) in.x.data()[i] = u(rng), in.y.data()[i] = u(rng);
  }

  std::printf("%-13s %9s  %-14s %12s %12s %9s %10s %6s %s\n", "case", "n", "impl", "median s",
              "min s", "GB/s", "ratio", "reps", "batch");
  std::vector<record> records;
  bool all_ok = true;
  for (const bench_case* c : cases) {
    std::printf("# %s: %s\n", c->name, c->formula);
    for (index_t n : opt.sizes) all_ok = run_instance(*c, in, n, opt, records) && all_ok;
  }
  print_targets(records);

  if (!opt.json.empty()) {
    if (!write_json(opt.json, records, threads)) return 1;
    std::printf("\nwrote %zu records to %s\n", records.size(), opt.json.c_str());
  }
  return all_ok ? 0 : 1;
}
