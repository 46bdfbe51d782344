// exp of a uint8 tensor: NumPy gives float16, which dynexpr does not have, so the float
// functions reject bool/uint8 operands (ops/manifest.py, float_unary_rule) instead of
// silently picking another dtype. DYNEXPR_EXPECT_OK compiles the corrected twin.
#include "dynexpr/dynexpr.hpp"

namespace dx = dynexpr;

void compile_fail_case() {
  dx::Tensor<std::uint8_t> x(dx::Shape{4});
#ifdef DYNEXPR_EXPECT_OK
  auto e = dx::exp(dx::cast<float>(x));
#else
  auto e = dx::exp(x);
#endif
  (void)e;
}
