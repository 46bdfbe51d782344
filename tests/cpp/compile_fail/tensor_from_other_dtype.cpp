// Initialising a Tensor<float> from a float64 expression: no silent narrowing; the
// conversion must be spelled dx::cast<float>. DYNEXPR_EXPECT_OK compiles the corrected twin.
#include "dynexpr/dynexpr.hpp"

namespace dx = dynexpr;

void compile_fail_case() {
  dx::Tensor<double> x(dx::Shape{4});
#ifdef DYNEXPR_EXPECT_OK
  dx::Tensor<float> t = dx::cast<float>(x * 2.0);
#else
  dx::Tensor<float> t = x * 2.0;
#endif
  (void)t;
}
