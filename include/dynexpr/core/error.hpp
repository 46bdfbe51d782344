// dynexpr/core/error.hpp — the exception types dynexpr throws.
#pragma once

#include <stdexcept>
#include <string>

namespace dynexpr {

/// Base of every dynexpr error; callers may catch this one type.
struct error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Shapes that do not broadcast, a reshape that cannot be done, a rank above max_rank.
struct shape_error : error {
  using error::error;
};

/// An index or slice bound outside the dimension it indexes, or an axis out of range.
struct index_error : error {
  using error::error;
};

/// A value the operation cannot take (step 0, a negative size, an empty argmax).
struct value_error : error {
  using error::error;
};

}  // namespace dynexpr
