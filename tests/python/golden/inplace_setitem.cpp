// dynexpr generated unit (format 1). Do not edit: this text is the
// compile cache's key. Graph:
//   %0 = input(index=0) : float64[20]
//   %1 = input(index=1) : float64[5]
//   %2 = setitem(%0, %1, index=(('slice',2,7,None))) : float64[20]
//   %3 = getitem(%2, index=(('slice',None,-1,None))) : float64[19]
//   %4 = const(value=2.0f, weak='float') : float64[]
//   %5 = multiply(%3, %4) : float64[19]
//   %6 = setitem(%2, %5, index=(('slice',1,None,None))) : float64[20]
//   %7 = sum(%6, axes=None, keepdims=False) : float64[]
//   return (%7)
//   mutate input[0] <- %6
// 3 kernel(s): setitem, setitem, reduction
#include "prelude.hpp"

namespace dx = dynexpr;
namespace dxk = dynexpr::kernel;
namespace hn = hwy::HWY_NAMESPACE;

template <class D>
DYNEXPR_INLINE hn::Vec<D> k0_at(D d, const double* __restrict__ l0, dx::index_t i) {
  const auto L0 = hn::LoadU(d, l0 + i);
  return L0;
}
struct k0_args { const double* l0; double* out; };
static void k0(void* ctx, dx::index_t r0, dx::index_t r1) {
  const auto& a = *static_cast<const k0_args*>(ctx);
  const double* __restrict__ l0 = a.l0;
  double* __restrict__ out = a.out;
  const hn::ScalableTag<double> d;
  const auto N = static_cast<dx::index_t>(hn::Lanes(d));
  const auto id = hn::Set(d, 0);
  for (dx::index_t r = r0; r < r1; ++r) {
    double total = 0;
    for (dx::index_t b = 0; b < 20; b += 1024) {
      const dx::index_t e = std::min<dx::index_t>(b + 1024, 20);
      auto a0 = id, a1 = id, a2 = id, a3 = id;
      dx::index_t i = b;
      for (; i + 4 * N <= e; i += 4 * N) {
        a0 = hn::Add(a0, k0_at(d, l0 + r * 20, i));
        a1 = hn::Add(a1, k0_at(d, l0 + r * 20, i + N));
        a2 = hn::Add(a2, k0_at(d, l0 + r * 20, i + 2 * N));
        a3 = hn::Add(a3, k0_at(d, l0 + r * 20, i + 3 * N));
      }
      for (; i + N <= e; i += N) a0 = hn::Add(a0, k0_at(d, l0 + r * 20, i));
      if (i < e) {  // the last partial vector: real elements, identity lanes
        const dx::index_t m = e - i;
        alignas(64) double t0[dx::simd::max_lanes_v<decltype(d)>];
        for (dx::index_t j = 0; j < N; ++j) {
          t0[j] = l0[r * 20 + i + (j < m ? j : 0)];
        }
        const auto p = k0_at(d, t0, 0);
        a1 = hn::Add(a1, hn::IfThenElse(hn::FirstN(d, static_cast<size_t>(m)), p, id));
      }
      const auto s = hn::Add(hn::Add(a0, a1), hn::Add(a2, a3));
      total += static_cast<double>(hn::GetLane(hn::SumOfLanes(d, s)));
    }
    out[r] = static_cast<double>(total);
  }
}


static void run([[maybe_unused]] dxk::frame& f) {
  auto x0 = f.inout<double>(0, {20});
  const auto x1 = f.input<double>(1, {5});
  const auto o0 = f.output<double>(0, {});
  // kernel 0: setitem -> in[0]
  dx::assign(x0.slice(dx::slice(2, 7, 1)), x1);
  // kernel 1: setitem -> in[0]
  const auto v3 = x0.slice(dx::slice(dx::none, -1, 1));
  const auto v5 = dxk::typed<double>(v3 * 2.0);
  dx::assign(x0.slice(dx::slice(1, dx::none, 1)), v5);
  // kernel 2: reduction -> out[0]
  {
    dxk::owned keep0;
    k0_args args{dxk::dense(x0, keep0), o0.data()};
    dxk::run_rows(x0.size() / 20, 20, 1, k0, &args);
  }
}

DYNEXPR_UNIT(run, 2, 1)
