// bench/narrow_loop.cpp — the shape of a cheap flat loop, and where its output starts.
//
// y = ((x*1.5 + 0.5)*0.75 - 0.25)*2 + 1 over float64 (the peer table's affine; cost 6 per
// element, a "narrow" loop: Note [narrow vectors for cheap loops] in bridge/dynexpr/
// codegen.py), through the pool on every thread, at 64K (L2) and 1M (L3) elements. Two
// things vary:
//   - the loop: 256- or 512-bit vectors, one or four vectors a step (all four loaded and
//     computed before any is stored);
//   - the output's start relative to the input's, in page-offset bytes (the input starts
//     16 bytes into a page, as NumPy's large arrays do): Note [where an output starts in
//     its page] in bridge/native/buffers.c. 0 and negative distances are what the bridge
//     picks now; +48 is where it used to put outputs of NumPy inputs.
// Each cell is the best of 7 rounds of the median of a block of calls; the rows of a round
// alternate, so a slow phase of the machine hits every cell alike.
//
// Built by meson as build/bench/narrow-loop; by hand (then ./narrow_loop):
//   g++ -std=c++20 -O2 -march=native -DHWY_COMPILE_ONLY_STATIC=1 -pthread -Iinclude
//       bench/narrow_loop.cpp -o narrow_loop -lhwy
#include <hwy/highway.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "dynexpr/parallel/thread_pool.hpp"

namespace {

namespace hn = hwy::HWY_NAMESPACE;
using dynexpr::index_t;

template <class D>
HWY_INLINE hn::Vec<D> affine(D d, hn::Vec<D> x) {
  x = hn::Mul(x, hn::Set(d, 1.5));
  x = hn::Add(x, hn::Set(d, 0.5));
  x = hn::Mul(x, hn::Set(d, 0.75));
  x = hn::Sub(x, hn::Set(d, 0.25));
  x = hn::Mul(x, hn::Set(d, 2.0));
  return hn::Add(x, hn::Set(d, 1.0));
}

template <class D, int Step>
void loop(const double* HWY_RESTRICT x, double* HWY_RESTRICT y, index_t b, index_t e) {
  const D d;
  const index_t n = static_cast<index_t>(hn::Lanes(d));
  index_t i = b;
  if constexpr (Step == 4) {
    for (; i + 4 * n <= e; i += 4 * n) {
      const auto v0 = affine(d, hn::LoadU(d, x + i));
      const auto v1 = affine(d, hn::LoadU(d, x + i + n));
      const auto v2 = affine(d, hn::LoadU(d, x + i + 2 * n));
      const auto v3 = affine(d, hn::LoadU(d, x + i + 3 * n));
      hn::StoreU(v0, d, y + i);
      hn::StoreU(v1, d, y + i + n);
      hn::StoreU(v2, d, y + i + 2 * n);
      hn::StoreU(v3, d, y + i + 3 * n);
    }
  }
  for (; i + n <= e; i += n) hn::StoreU(affine(d, hn::LoadU(d, x + i)), d, y + i);
  for (; i < e; ++i) y[i] = ((x[i] * 1.5 + 0.5) * 0.75 - 0.25) * 2.0 + 1.0;
}

using loop_fn = void (*)(const double*, double*, index_t, index_t);
struct shape {
  const char* name;
  loop_fn fn;
};
const shape shapes[] = {
    {"256x1", loop<hn::CappedTag<double, 4>, 1>},
    {"256x4", loop<hn::CappedTag<double, 4>, 4>},
    {"fullx1", loop<hn::ScalableTag<double>, 1>},
    {"fullx4", loop<hn::ScalableTag<double>, 4>},
};

double median_us(loop_fn fn, const double* x, double* y, index_t n, int calls) {
  std::vector<double> t(static_cast<std::size_t>(calls));
  for (auto& s : t) {
    const auto t0 = std::chrono::steady_clock::now();
    dynexpr::parallel::parallel_for(n, 4096, 64, 1e18,
                                    [&](index_t b, index_t e) { fn(x, y, b, e); });
    s = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }
  std::nth_element(t.begin(), t.begin() + calls / 2, t.end());
  return t[static_cast<std::size_t>(calls / 2)];
}

}  // namespace

int main() {
  std::printf("target %s, %d threads; y = affine(x), float64, input 16 bytes into a page\n",
              hwy::TargetName(HWY_TARGET), dynexpr::parallel::num_threads());
  const int offsets[] = {-256, -64, -16, 0, 16, 48, 64, 128, 256, 1024, 2048};
  for (const index_t n : {index_t{65536}, index_t{1} << 20}) {
    const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(double) + 3 * 4096;
    auto* xb = static_cast<char*>(std::aligned_alloc(4096, bytes));
    auto* yb = static_cast<char*>(std::aligned_alloc(4096, bytes));
    if (!xb || !yb) return 1;
    auto* x = reinterpret_cast<double*>(xb + 4096 + 16);
    for (index_t i = 0; i < n; ++i) x[i] = 1e-3 * static_cast<double>(i % 1000);
    const int calls = n < 100000 ? 400 : 40;
    std::vector<double> best(std::size(offsets) * std::size(shapes), 1e300);
    for (int round = 0; round < 7; ++round) {
      for (std::size_t o = 0; o < std::size(offsets); ++o) {
        auto* y = reinterpret_cast<double*>(yb + 4096 + 16 + offsets[o]);
        for (std::size_t s = 0; s < std::size(shapes); ++s) {
          double& b = best[o * std::size(shapes) + s];
          b = std::min(b, median_us(shapes[s].fn, x, y, n, calls));
        }
      }
    }
    std::printf("\nn = %ld (us per call)\n  out - in", static_cast<long>(n));
    for (const auto& s : shapes) std::printf("%9s", s.name);
    std::printf("\n");
    for (std::size_t o = 0; o < std::size(offsets); ++o) {
      std::printf("%+10d", offsets[o]);
      for (std::size_t s = 0; s < std::size(shapes); ++s)
        std::printf("%9.1f", best[o * std::size(shapes) + s]);
      std::printf("\n");
    }
    std::free(xb);
    std::free(yb);
  }
}
