// dynexpr generated unit (format 1). Do not edit: this text is the
// compile cache's key. Graph:
//   %0 = input(index=0) : float32[1024]
//   %1 = input(index=1) : float32[1024]
//   %2 = const(value=2.0f, weak='float') : float32[]
//   %3 = multiply(%0, %2) : float32[1024]
//   %4 = add(%3, %1) : float32[1024]
//   %5 = tanh(%4) : float32[1024]
//   %6 = sum(%5, axes=None, keepdims=False) : float32[]
//   return (%5, %6)
// 2 kernel(s): pointwise, reduction
#include "prelude.hpp"

namespace dx = dynexpr;
namespace dxk = dynexpr::kernel;
namespace hn = hwy::HWY_NAMESPACE;

template <class D>
DYNEXPR_INLINE hn::Vec<D> k0_at(D d, const float* __restrict__ l0, const float* __restrict__ l1, dx::index_t i) {
  const auto L0 = hn::LoadU(d, l0 + i);
  const auto L1 = hn::LoadU(d, l1 + i);
  const auto v3 = dx::ops::mul_op::simd(d, L0, hn::Set(d, 2.0f));
  const auto v4 = dx::ops::add_op::simd(d, v3, L1);
  const auto v5 = dx::ops::tanh_op::simd(d, v4);
  return v5;
}
struct k0_args { const float* l0; const float* l1; float* out; };
static void k0(void* ctx, dx::index_t b, dx::index_t e) {
  const auto& a = *static_cast<const k0_args*>(ctx);
  const float* __restrict__ l0 = a.l0;
  const float* __restrict__ l1 = a.l1;
  float* __restrict__ out = a.out;
  const hn::ScalableTag<float> d;
  const auto N = static_cast<dx::index_t>(hn::Lanes(d));
  dx::index_t i = b;
  for (; i + N <= e; i += N) hn::StoreU(k0_at(d, l0, l1, i), d, out + i);
  if (i < e) {  // the last partial vector, padded with a real element
    const dx::index_t m = e - i;
    alignas(64) float t0[dx::simd::max_lanes_v<decltype(d)>];
    alignas(64) float t1[dx::simd::max_lanes_v<decltype(d)>];
    for (dx::index_t j = 0; j < N; ++j) {
      t0[j] = l0[i + (j < m ? j : 0)];
      t1[j] = l1[i + (j < m ? j : 0)];
    }
    alignas(64) float r[dx::simd::max_lanes_v<decltype(d)>];
    hn::Store(k0_at(d, t0, t1, 0), d, r);
    for (dx::index_t j = 0; j < m; ++j) out[i + j] = r[j];
  }
}

template <class D>
DYNEXPR_INLINE hn::Vec<D> k1_at(D d, const float* __restrict__ l0, dx::index_t i) {
  const auto L0 = hn::LoadU(d, l0 + i);
  return L0;
}
struct k1_args { const float* l0; float* out; };
static void k1(void* ctx, dx::index_t r0, dx::index_t r1) {
  const auto& a = *static_cast<const k1_args*>(ctx);
  const float* __restrict__ l0 = a.l0;
  float* __restrict__ out = a.out;
  const hn::ScalableTag<float> d;
  const auto N = static_cast<dx::index_t>(hn::Lanes(d));
  const auto id = hn::Set(d, 0);
  for (dx::index_t r = r0; r < r1; ++r) {
    double total = 0;
    for (dx::index_t b = 0; b < 1024; b += 1024) {
      const dx::index_t e = std::min<dx::index_t>(b + 1024, 1024);
      auto a0 = id, a1 = id, a2 = id, a3 = id;
      dx::index_t i = b;
      for (; i + 4 * N <= e; i += 4 * N) {
        a0 = hn::Add(a0, k1_at(d, l0 + r * 1024, i));
        a1 = hn::Add(a1, k1_at(d, l0 + r * 1024, i + N));
        a2 = hn::Add(a2, k1_at(d, l0 + r * 1024, i + 2 * N));
        a3 = hn::Add(a3, k1_at(d, l0 + r * 1024, i + 3 * N));
      }
      for (; i + N <= e; i += N) a0 = hn::Add(a0, k1_at(d, l0 + r * 1024, i));
      if (i < e) {  // the last partial vector: real elements, identity lanes
        const dx::index_t m = e - i;
        alignas(64) float t0[dx::simd::max_lanes_v<decltype(d)>];
        for (dx::index_t j = 0; j < N; ++j) {
          t0[j] = l0[r * 1024 + i + (j < m ? j : 0)];
        }
        const auto p = k1_at(d, t0, 0);
        a1 = hn::Add(a1, hn::IfThenElse(hn::FirstN(d, static_cast<size_t>(m)), p, id));
      }
      const auto s = hn::Add(hn::Add(a0, a1), hn::Add(a2, a3));
      total += static_cast<double>(hn::GetLane(hn::SumOfLanes(d, s)));
    }
    out[r] = static_cast<float>(total);
  }
}


static void run([[maybe_unused]] dxk::frame& f) {
  const auto x0 = f.input<float>(0, {1024});
  const auto x1 = f.input<float>(1, {1024});
  const auto o0 = f.output<float>(0, {1024});
  const auto o1 = f.output<float>(1, {});
  // kernel 0: pointwise -> out[0]
  {
    dxk::owned keep0;
    dxk::owned keep1;
    k0_args args{dxk::dense(x0, keep0), dxk::dense(x1, keep1), o0.data()};
    dxk::run_blocks(o0.size(), 18, k0, &args);
  }
  // kernel 1: reduction -> out[1]
  {
    dxk::owned keep0;
    k1_args args{dxk::dense(o0, keep0), o1.data()};
    dxk::run_rows(o0.size() / 1024, 1024, 1, k1, &args);
  }
}

DYNEXPR_UNIT(run, 2, 2)
