// A program outside the dynexpr build that finds the installed headers through
// `pkg-config --cflags dynexpr` (see Makefile and tests/run_all.sh).
//
// It includes only <dynexpr/core/shape.hpp> for now. Once the whole library is in place,
// switch to the umbrella header <dynexpr/dynexpr.hpp> and evaluate a small expression.
#include <cstdio>
#include <dynexpr/core/shape.hpp>

int main() {
  const dynexpr::Shape a{8, 1, 6, 1}, b{7, 1, 5};
  const dynexpr::Shape out = dynexpr::broadcast_shapes(a, b);
  std::printf("broadcast %s with %s -> %s\n", a.str().c_str(), b.str().c_str(), out.str().c_str());
  return out == dynexpr::Shape{8, 7, 6, 5} ? 0 : 1;
}
