// bitwise_and of float tensors: not defined in NumPy (TypeError), a compile error here.
// DYNEXPR_EXPECT_OK compiles the corrected twin.
#include "dynexpr/dynexpr.hpp"

namespace dx = dynexpr;

void compile_fail_case() {
  dx::Tensor<float> a(dx::Shape{4}), b(dx::Shape{4});
#ifdef DYNEXPR_EXPECT_OK
  auto e = dx::cast<std::int32_t>(a) & dx::cast<std::int32_t>(b);
#else
  auto e = a & b;
#endif
  (void)e;
}
