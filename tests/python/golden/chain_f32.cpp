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

static void run([[maybe_unused]] dxk::frame& f) {
  const auto x0 = f.input<float>(0, {1024});
  const auto x1 = f.input<float>(1, {1024});
  const auto o0 = f.output<float>(0, {1024});
  const auto o1 = f.output<float>(1, {});
  // kernel 0: pointwise -> out[0]
  const auto v3 = dxk::typed<float>(x0 * 2.0);
  const auto v4 = dxk::typed<float>(v3 + x1);
  dxk::assign_fresh(o0, dxk::typed<float>(dx::tanh(v4)));
  // kernel 1: reduction -> out[1]
  dxk::assign_fresh(o1, dx::sum(o0, dx::all_axes, false));
}

DYNEXPR_UNIT(run, 2, 2)
