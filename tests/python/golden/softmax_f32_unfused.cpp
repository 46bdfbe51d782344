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
DYNEXPR_INLINE hn::Vec<D> k0_at(D d, const float* __restrict__ l0, dx::index_t i) {
  const auto L0 = hn::LoadU(d, l0 + i);
  return L0;
}
struct k0_args { const float* l0; float* out; };
static void k0(void* ctx, dx::index_t r0, dx::index_t r1) {
  const auto& a = *static_cast<const k0_args*>(ctx);
  const float* __restrict__ l0 = a.l0;
  float* __restrict__ out = a.out;
  const hn::ScalableTag<float> d;
  const auto N = static_cast<dx::index_t>(hn::Lanes(d));
  const auto id = hn::Set(d, -std::numeric_limits<float>::infinity());
  for (dx::index_t r = r0; r < r1; ++r) {
    auto acc = id;
    for (dx::index_t b = 0; b < 33; b += 33) {
      const dx::index_t e = std::min<dx::index_t>(b + 33, 33);
      auto a0 = id, a1 = id, a2 = id, a3 = id;
      dx::index_t i = b;
      for (; i + 4 * N <= e; i += 4 * N) {
        a0 = dx::ops::maximum_op::simd(d, a0, k0_at(d, l0 + r * 33, i));
        a1 = dx::ops::maximum_op::simd(d, a1, k0_at(d, l0 + r * 33, i + N));
        a2 = dx::ops::maximum_op::simd(d, a2, k0_at(d, l0 + r * 33, i + 2 * N));
        a3 = dx::ops::maximum_op::simd(d, a3, k0_at(d, l0 + r * 33, i + 3 * N));
      }
      for (; i + N <= e; i += N) a0 = dx::ops::maximum_op::simd(d, a0, k0_at(d, l0 + r * 33, i));
      if (i < e) {  // the last partial vector: real elements, identity lanes
        const dx::index_t m = e - i;
        alignas(64) float t0[dx::simd::max_lanes_v<decltype(d)>];
        for (dx::index_t j = 0; j < N; ++j) {
          t0[j] = l0[r * 33 + i + (j < m ? j : 0)];
        }
        const auto p = k0_at(d, t0, 0);
        a1 = dx::ops::maximum_op::simd(d, a1, hn::IfThenElse(hn::FirstN(d, static_cast<size_t>(m)), p, id));
      }
      const auto s = dx::ops::maximum_op::simd(d, dx::ops::maximum_op::simd(d, a0, a1), dx::ops::maximum_op::simd(d, a2, a3));
      acc = dx::ops::maximum_op::simd(d, acc, s);
    }
    alignas(64) float lanes[dx::simd::max_lanes_v<decltype(d)>];
    hn::Store(acc, d, lanes);
    float x = lanes[0];
    for (dx::index_t j = 1; j < N; ++j) x = dx::ops::maximum_op::scalar(x, lanes[j]);
    out[r] = x;
  }
}

template <class D>
DYNEXPR_INLINE hn::Vec<D> k1_at(D d, const float* __restrict__ l0, hn::Vec<D> W0, dx::index_t i) {
  const auto L0 = hn::LoadU(d, l0 + i);
  const auto v2 = dx::ops::sub_op::simd(d, L0, W0);
  return v2;
}
struct k1_args { const float* l0; const float* w0; float* out; };
static void k1(void* ctx, dx::index_t r0, dx::index_t r1) {
  const auto& a = *static_cast<const k1_args*>(ctx);
  const float* __restrict__ l0 = a.l0;
  const float* __restrict__ w0 = a.w0;
  float* __restrict__ out = a.out;
  const hn::ScalableTag<float> d;
  const auto N = static_cast<dx::index_t>(hn::Lanes(d));
  for (dx::index_t r = r0; r < r1; ++r) {
    const dx::index_t o = r * 33;
    const auto W0 = hn::Set(d, w0[r]);
    dx::index_t i = 0;
    for (; i + N <= 33; i += N) hn::StoreU(k1_at(d, l0 + o, W0, i), d, out + o + i);
    if (i < 33) {  // the row's last partial vector, padded with a real element
      const dx::index_t m = 33 - i;
      alignas(64) float t0[dx::simd::max_lanes_v<decltype(d)>];
      for (dx::index_t j = 0; j < N; ++j) {
        t0[j] = l0[o + i + (j < m ? j : 0)];
      }
      alignas(64) float res[dx::simd::max_lanes_v<decltype(d)>];
      hn::Store(k1_at(d, t0, W0, 0), d, res);
      for (dx::index_t j = 0; j < m; ++j) out[o + i + j] = res[j];
    }
  }
}

template <class D>
DYNEXPR_INLINE hn::Vec<D> k2_at(D d, const float* __restrict__ l0, dx::index_t i) {
  const auto L0 = hn::LoadU(d, l0 + i);
  const auto v3 = dx::ops::exp_op::simd(d, L0);
  return v3;
}
struct k2_args { const float* l0; float* out; };
static void k2(void* ctx, dx::index_t b, dx::index_t e) {
  const auto& a = *static_cast<const k2_args*>(ctx);
  const float* __restrict__ l0 = a.l0;
  float* __restrict__ out = a.out;
  const hn::ScalableTag<float> d;
  const auto N = static_cast<dx::index_t>(hn::Lanes(d));
  dx::index_t i = b;
  for (; i + N <= e; i += N) hn::StoreU(k2_at(d, l0, i), d, out + i);
  if (i < e) {  // the last partial vector, padded with a real element
    const dx::index_t m = e - i;
    alignas(64) float t0[dx::simd::max_lanes_v<decltype(d)>];
    for (dx::index_t j = 0; j < N; ++j) {
      t0[j] = l0[i + (j < m ? j : 0)];
    }
    alignas(64) float r[dx::simd::max_lanes_v<decltype(d)>];
    hn::Store(k2_at(d, t0, 0), d, r);
    for (dx::index_t j = 0; j < m; ++j) out[i + j] = r[j];
  }
}

template <class D>
DYNEXPR_INLINE hn::Vec<D> k3_at(D d, const float* __restrict__ l0, dx::index_t i) {
  const auto L0 = hn::LoadU(d, l0 + i);
  return L0;
}
struct k3_args { const float* l0; float* out; };
static void k3(void* ctx, dx::index_t r0, dx::index_t r1) {
  const auto& a = *static_cast<const k3_args*>(ctx);
  const float* __restrict__ l0 = a.l0;
  float* __restrict__ out = a.out;
  const hn::ScalableTag<float> d;
  const auto N = static_cast<dx::index_t>(hn::Lanes(d));
  const auto id = hn::Set(d, 0);
  for (dx::index_t r = r0; r < r1; ++r) {
    double total = 0;
    for (dx::index_t b = 0; b < 33; b += 1024) {
      const dx::index_t e = std::min<dx::index_t>(b + 1024, 33);
      auto a0 = id, a1 = id, a2 = id, a3 = id;
      dx::index_t i = b;
      for (; i + 4 * N <= e; i += 4 * N) {
        a0 = hn::Add(a0, k3_at(d, l0 + r * 33, i));
        a1 = hn::Add(a1, k3_at(d, l0 + r * 33, i + N));
        a2 = hn::Add(a2, k3_at(d, l0 + r * 33, i + 2 * N));
        a3 = hn::Add(a3, k3_at(d, l0 + r * 33, i + 3 * N));
      }
      for (; i + N <= e; i += N) a0 = hn::Add(a0, k3_at(d, l0 + r * 33, i));
      if (i < e) {  // the last partial vector: real elements, identity lanes
        const dx::index_t m = e - i;
        alignas(64) float t0[dx::simd::max_lanes_v<decltype(d)>];
        for (dx::index_t j = 0; j < N; ++j) {
          t0[j] = l0[r * 33 + i + (j < m ? j : 0)];
        }
        const auto p = k3_at(d, t0, 0);
        a1 = hn::Add(a1, hn::IfThenElse(hn::FirstN(d, static_cast<size_t>(m)), p, id));
      }
      const auto s = hn::Add(hn::Add(a0, a1), hn::Add(a2, a3));
      total += static_cast<double>(hn::GetLane(hn::SumOfLanes(d, s)));
    }
    out[r] = static_cast<float>(total);
  }
}

template <class D>
DYNEXPR_INLINE hn::Vec<D> k4_at(D d, const float* __restrict__ l0, hn::Vec<D> W0, dx::index_t i) {
  const auto L0 = hn::LoadU(d, l0 + i);
  const auto v5 = dx::ops::div_op::simd(d, L0, W0);
  return v5;
}
struct k4_args { const float* l0; const float* w0; float* out; };
static void k4(void* ctx, dx::index_t r0, dx::index_t r1) {
  const auto& a = *static_cast<const k4_args*>(ctx);
  const float* __restrict__ l0 = a.l0;
  const float* __restrict__ w0 = a.w0;
  float* __restrict__ out = a.out;
  const hn::ScalableTag<float> d;
  const auto N = static_cast<dx::index_t>(hn::Lanes(d));
  for (dx::index_t r = r0; r < r1; ++r) {
    const dx::index_t o = r * 33;
    const auto W0 = hn::Set(d, w0[r]);
    dx::index_t i = 0;
    for (; i + N <= 33; i += N) hn::StoreU(k4_at(d, l0 + o, W0, i), d, out + o + i);
    if (i < 33) {  // the row's last partial vector, padded with a real element
      const dx::index_t m = 33 - i;
      alignas(64) float t0[dx::simd::max_lanes_v<decltype(d)>];
      for (dx::index_t j = 0; j < N; ++j) {
        t0[j] = l0[o + i + (j < m ? j : 0)];
      }
      alignas(64) float res[dx::simd::max_lanes_v<decltype(d)>];
      hn::Store(k4_at(d, t0, W0, 0), d, res);
      for (dx::index_t j = 0; j < m; ++j) out[o + i + j] = res[j];
    }
  }
}


static void run([[maybe_unused]] dxk::frame& f) {
  const auto x0 = f.input<float>(0, {8, 33});
  const auto o0 = f.output<float>(0, {8, 33});
  // kernel 0: reduction -> tmp[0]
  auto t0 = dx::Tensor<float>::empty(dx::Shape{8, 1});
  {
    dxk::owned keep0;
    k0_args args{dxk::dense(x0, keep0), t0.data()};
    dxk::run_rows(x0.size() / 33, 33, 1, k0, &args);
  }
  // kernel 1: pointwise -> tmp[1]
  auto t1 = dx::Tensor<float>::empty(dx::Shape{8, 33});
  {
    dxk::owned keep0;
    k1_args args{dxk::dense(x0, keep0), t0.data(), t1.data()};
    dxk::run_rows(t1.size() / 33, 33, 1, k1, &args);
  }
  // kernel 2: pointwise -> tmp[2]
  auto t2 = dx::Tensor<float>::empty(dx::Shape{8, 33});
  {
    k2_args args{t1.data(), t2.data()};
    dxk::run_blocks(t2.size(), 12, k2, &args);
  }
  // kernel 3: reduction -> tmp[3]
  auto t3 = dx::Tensor<float>::empty(dx::Shape{8, 1});
  {
    k3_args args{t2.data(), t3.data()};
    dxk::run_rows(t2.size() / 33, 33, 1, k3, &args);
  }
  // kernel 4: pointwise -> out[0]
  {
    k4_args args{t2.data(), t3.data(), o0.data()};
    dxk::run_rows(o0.size() / 33, 33, 4, k4, &args);
  }
}

DYNEXPR_UNIT(run, 1, 1)
