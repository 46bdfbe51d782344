// dynexpr generated unit (format 1). Do not edit: this text is the
// compile cache's key. Graph:
//   %0 = input(index=0) : float32[8,33]
//   %1 = max(%0, axes=(-1), keepdims=True) : float32[8,1]
//   %2 = subtract(%0, %1) : float32[8,33]
//   %3 = exp(%2) : float32[8,33]
//   %4 = sum(%3, axes=(-1), keepdims=True) : float32[8,1]
//   %5 = true_divide(%3, %4) : float32[8,33]
//   return (%5)
// 5 kernel(s): reduction, pointwise, pointwise, reduction, pointwise (unfused)
#include "prelude.hpp"

namespace dx = dynexpr;
namespace dxk = dynexpr::kernel;
namespace hn = hwy::HWY_NAMESPACE;

template <class D>
DYNEXPR_INLINE void k0_at(D d, const float* __restrict__ l0, float* __restrict__ out, dx::index_t i) {
  const auto L0 = hn::LoadU(d, l0 + i);
  const auto v3 = dx::ops::exp_op::simd(d, L0);
  hn::StoreU(v3, d, out + i);
}
struct k0_args { const float* l0; float* out; };
static void k0(void* ctx, dx::index_t b, dx::index_t e) {
  const auto& a = *static_cast<const k0_args*>(ctx);
  const float* __restrict__ l0 = a.l0;
  float* __restrict__ out = a.out;
  const hn::ScalableTag<float> d;
  const auto N = static_cast<dx::index_t>(hn::Lanes(d));
  dx::index_t i = b;
  for (; i + N <= e; i += N) k0_at(d, l0, out, i);
  if (i < e) {  // the last partial vector, padded with a real element
    const dx::index_t m = e - i;
    alignas(64) float t0[dx::simd::max_lanes_v<decltype(d)>];
    alignas(64) float r[dx::simd::max_lanes_v<decltype(d)>];
    for (dx::index_t j = 0; j < N; ++j) {
      t0[j] = l0[i + (j < m ? j : 0)];
    }
    k0_at(d, t0, r, 0);
    for (dx::index_t j = 0; j < m; ++j) out[i + j] = r[j];
  }
}


static void run([[maybe_unused]] dxk::frame& f) {
  const auto x0 = f.input<float>(0, {8, 33});
  const auto o0 = f.output<float>(0, {8, 33});
  // kernel 0: reduction -> tmp[0]
  auto t0 = dxk::tensor<float>(dx::max(x0, dx::Shape{1}, true));
  // kernel 1: pointwise -> tmp[1]
  auto t1 = dxk::eval_fresh<true>(dxk::typed<float>(x0 - t0));
  // kernel 2: pointwise -> tmp[2]
  auto t2 = dx::Tensor<float>::empty(dx::Shape{8, 33});
  {
    k0_args args{t1.data(), t2.data()};
    dxk::run_blocks(t2.size(), 12, k0, &args);
  }
  // kernel 3: reduction -> tmp[3]
  auto t3 = dxk::tensor<float>(dx::sum(t2, dx::Shape{1}, true));
  // kernel 4: pointwise -> out[0]
  dxk::assign_fresh<true>(o0, dxk::typed<float>(t2 / t3));
}

DYNEXPR_UNIT(run, 1, 1)
