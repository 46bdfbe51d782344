// Compiled with dynexpr_dep and the project's flags; its entry in compile_commands.json is
// the command that expect_fail.py reuses for every compile-fail case (see meson.build).
#include "dynexpr/core/dtype.hpp"

namespace dynexpr_compile_fail_probe {
int probe() { return static_cast<int>(dynexpr::dtype_of<float>()); }
}  // namespace dynexpr_compile_fail_probe
