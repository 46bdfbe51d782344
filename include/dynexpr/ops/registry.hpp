// dynexpr/ops/registry.hpp — every op of the op table in one compile-time list, from which
// tests iterate the ops and tools list them (the Python bridge checks its op list
// against `op_names()`; STYLE.md: one source, never kept by hand twice).
#pragma once

#include <string_view>
#include <vector>

#include <boost/hana.hpp>

#include "dynexpr/ops/math_ops.hpp"
#include "dynexpr/ops/op_table.hpp"

namespace dynexpr::ops {

namespace hana = boost::hana;

/// The user-facing ops (fma/fms/fnma are internal rewrites; cast and where have
/// evaluators of their own and are listed too).
inline constexpr auto all_ops = hana::tuple_t<
    add_op, sub_op, mul_op, div_op, floor_divide_op, mod_op, minimum_op, maximum_op, clip_op,
    neg_op, abs_op, square_op, reciprocal_op, sign_op, pow_op, floor_op, ceil_op, trunc_op,
    rint_op, equal_op, not_equal_op, less_op, less_equal_op, greater_op, greater_equal_op,
    isnan_op, isinf_op, isfinite_op, logical_and_op, logical_or_op, logical_xor_op,
    logical_not_op, bitwise_and_op, bitwise_or_op, bitwise_xor_op, invert_op, left_shift_op,
    right_shift_op, sqrt_op, exp_op, expm1_op, exp2_op, log_op, log1p_op, log2_op, log10_op,
    sin_op, cos_op, tan_op, tanh_op, sinh_op, cosh_op, arcsin_op, arccos_op, arctan_op,
    arcsinh_op, arccosh_op, arctanh_op, sigmoid_op, erf_op, arctan2_op, hypot_op, where_op,
    cast_op<double>>;

/// The float functions of one argument, whose accuracy the tests measure.
inline constexpr auto float_unary_ops = hana::tuple_t<
    sqrt_op, exp_op, expm1_op, exp2_op, log_op, log1p_op, log2_op, log10_op, sin_op, cos_op,
    tan_op, tanh_op, sinh_op, cosh_op, arcsin_op, arccos_op, arctan_op, arcsinh_op, arccosh_op,
    arctanh_op, sigmoid_op, erf_op, rint_op>;

/// NumPy names of all ops, in table order.
inline std::vector<std::string_view> op_names() {
  std::vector<std::string_view> names;
  hana::for_each(all_ops, [&](auto t) { names.push_back(decltype(t)::type::name); });
  return names;
}

}  // namespace dynexpr::ops
