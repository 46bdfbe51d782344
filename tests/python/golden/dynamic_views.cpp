// dynexpr generated unit (format 1). Do not edit: this text is the
// compile cache's key. Graph:
//   %0 = input(index=0) : float64[s0,3]
//   %1 = transpose(%0, axes=(1,0)) : float64[3,s0]
//   %2 = input(index=1) : int32[s0]
//   %3 = astype(%2, dtype='float64') : float64[s0]
//   %4 = const(value=0.5f) : float64[]
//   %5 = multiply(%1, %3) : float64[3,s0]
//   %6 = greater(%5, %4) : bool[3,s0]
//   %7 = where(%6, %5, %4) : float64[3,s0]
//   return (%7)
// 2 kernel(s): pointwise, pointwise
#include "prelude.hpp"

namespace dx = dynexpr;
namespace dxk = dynexpr::kernel;

static void run([[maybe_unused]] dxk::frame& f) {
  const auto x0 = f.input<double>(0, {dxk::dyn{0}, 3});
  const auto x1 = f.input<std::int32_t>(1, {dxk::dyn{0}});
  const auto o0 = f.output<double>(0, {3, dxk::dyn{0}});
  // kernel 0: pointwise -> tmp[0]
  const auto v1 = x0.permute(dx::Shape{1, 0});
  const auto v3 = dx::cast<double>(x1);
  auto t0 = dxk::eval_fresh<true>(dxk::typed<double>(v1 * v3));
  // kernel 1: pointwise -> out[0]
  const auto v6 = dxk::typed<bool>(dx::greater(t0, dx::scalar<double>(0.5)));
  dxk::assign_fresh(o0, dxk::typed<double>(dx::where(v6, t0, dx::scalar<double>(0.5))));
}

DYNEXPR_UNIT(run, 2, 1)
