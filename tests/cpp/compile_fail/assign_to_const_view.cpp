// dx::assign into a read-only View<const float>. DYNEXPR_EXPECT_OK compiles the corrected
// twin (a writable View<float> of the same tensor).
#include "dynexpr/dynexpr.hpp"

namespace dx = dynexpr;

void compile_fail_case() {
  dx::Tensor<float> t(dx::Shape{4}), x(dx::Shape{4});
#ifdef DYNEXPR_EXPECT_OK
  dx::View<float> out = t.view();
#else
  dx::View<const float> out = t.view();
#endif
  dx::assign(out, x + 1.0f);
}
