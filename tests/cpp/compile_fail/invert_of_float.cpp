// ~x of a float tensor: NumPy's invert is defined for integers and bools only.
// DYNEXPR_EXPECT_OK compiles the corrected twin.
#include "dynexpr/dynexpr.hpp"

namespace dx = dynexpr;

void compile_fail_case() {
  dx::Tensor<double> a(dx::Shape{4});
#ifdef DYNEXPR_EXPECT_OK
  auto e = ~dx::cast<std::int64_t>(a);
#else
  auto e = ~a;
#endif
  (void)e;
}
