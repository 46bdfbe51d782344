// subtract of two bool tensors: NumPy raises TypeError ("use the bitwise_xor, the ^
// operator, or the logical_xor function instead"); dynexpr rejects it at compile time.
// DYNEXPR_EXPECT_OK compiles the corrected twin.
#include "dynexpr/dynexpr.hpp"

namespace dx = dynexpr;

void compile_fail_case() {
  dx::Tensor<bool> a(dx::Shape{4}), b(dx::Shape{4});
#ifdef DYNEXPR_EXPECT_OK
  auto e = dx::logical_xor(a, b);
#else
  auto e = a - b;
#endif
  (void)e;
}
