// negative of a bool tensor: NumPy raises TypeError ("use the ~ operator or the
// logical_not function instead"). DYNEXPR_EXPECT_OK compiles the corrected twin.
#include "dynexpr/dynexpr.hpp"

namespace dx = dynexpr;

void compile_fail_case() {
  dx::Tensor<bool> a(dx::Shape{4});
#ifdef DYNEXPR_EXPECT_OK
  auto e = !a;
#else
  auto e = -a;
#endif
  (void)e;
}
