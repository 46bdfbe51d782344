// short is not a dynexpr element type: dtype_of<short>() must be rejected by the Element
// concept (core/dtype.hpp), not compile to some default dtype.
#include "dynexpr/core/dtype.hpp"

constexpr auto rejected = dynexpr::dtype_of<short>();
