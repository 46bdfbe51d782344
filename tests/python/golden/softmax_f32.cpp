// dynexpr generated unit (format 1). Do not edit: this text is the
// compile cache's key. Graph:
//   %0 = input(index=0) : float32[8,33]
//   %1 = max(%0, axes=(-1), keepdims=True) : float32[8,1]
//   %2 = subtract(%0, %1) : float32[8,33]
//   %3 = exp(%2) : float32[8,33]
//   %4 = sum(%3, axes=(-1), keepdims=True) : float32[8,1]
//   %5 = true_divide(%3, %4) : float32[8,33]
//   return (%5)
// 4 kernel(s): reduction, pointwise, reduction, pointwise
#include "prelude.hpp"

namespace dx = dynexpr;
namespace dxk = dynexpr::kernel;

static void run([[maybe_unused]] dxk::frame& f) {
  const auto x0 = f.input<float>(0, {8, 33});
  const auto o0 = f.output<float>(0, {8, 33});
  // kernel 0: reduction -> tmp[0]
  auto t0 = dxk::tensor<float>(dx::max(x0, dx::Shape{1}, true));
  // kernel 1: pointwise -> tmp[1]
  const auto v2 = dxk::typed<float>(x0 - t0);
  auto t1 = dxk::eval_fresh<true>(dxk::typed<float>(dx::exp(v2)));
  // kernel 2: reduction -> tmp[2]
  auto t2 = dxk::tensor<float>(dx::sum(t1, dx::Shape{1}, true));
  // kernel 3: pointwise -> out[0]
  dxk::assign_fresh<true>(o0, dxk::typed<float>(t1 / t2));
}

DYNEXPR_UNIT(run, 1, 1)
