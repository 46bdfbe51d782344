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
  dxk::assign_fresh(o0, dx::sum(x0, dx::all_axes, false));
}

DYNEXPR_UNIT(run, 2, 1)
