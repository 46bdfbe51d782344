// matmul of bool tensors (NumPy gives a bool "or of ands"; dynexpr sends matmul to Eigen,
// which has no such product). DYNEXPR_EXPECT_OK compiles the corrected twin.
#include "dynexpr/dynexpr.hpp"

namespace dx = dynexpr;

void compile_fail_case() {
  dx::Tensor<bool> a(dx::Shape{2, 3}), b(dx::Shape{3, 2});
#ifdef DYNEXPR_EXPECT_OK
  auto m = dx::matmul(dx::cast<std::int64_t>(a), dx::cast<std::int64_t>(b));
#else
  auto m = dx::matmul(a, b);
#endif
  (void)m;
}
