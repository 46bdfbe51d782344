// dynexpr/ops/rules.hpp — dtype rules shared by the ops of ops/op_table.hpp.
//
// Each op derives from one rule. A rule gives two types for the op's operand types A...:
//   compute<A...>: the lane type the op's body runs in (operands are converted to it;
//                  `bool` means the body works on masks),
//   result<A...>:  the dtype of the op's value (bool for predicates),
// and each op's check<A...>() holds static_asserts, naming the op, that reject dtype
// combinations NumPy rejects or that would need a dtype dynexpr does not have.
#pragma once

#include <cstdint>
#include <string_view>
#include <type_traits>

#include "dynexpr/core/dtype.hpp"

// A static_assert whose message names the op; used inside each op's check().
#define DYNEXPR_OP_CHECK(NAME, COND, WHY) static_assert((COND), "dynexpr::" NAME ": " WHY)

namespace dynexpr::ops {

/// Max error of an op's SIMD body against the exact result, in units in the last place
/// of the result type, over [lo, hi] (the range the tests sample); 0 means exact.
struct accuracy {
  double ulp_f32 = 0, ulp_f64 = 0;
  double lo = -100, hi = 100;
};

namespace detail {
template <class A, class... R>
struct promote_all {
  using type = A;
};
template <class A, class B, class... R>
struct promote_all<A, B, R...> {
  using type = typename promote_all<promote_t<A, B>, R...>::type;
};
}  // namespace detail

/// np.result_type over several dtypes.
template <class... A>
using promote_all_t = typename detail::promote_all<A...>::type;

template <class T>
inline constexpr bool is_narrow_v = is_bool_v<T> || std::is_same_v<T, std::uint8_t>;

/// Same kind as the operands: add, sub, mul, minimum, maximum, floor_divide, mod, pow,
/// clip. Two bools have no arithmetic here (NumPy makes add/mul of bools logical or/and).
struct arith_rule {
  template <class... A>
  using compute = promote_all_t<A...>;
  template <class... A>
  using result = promote_all_t<A...>;
  template <class... A>
  static constexpr bool all_bool = (is_bool_v<A> && ...);
};

/// true_divide and two-argument float functions: integers go to float64.
struct float_binary_rule {
  template <class... A>
  using compute = float_result_t<promote_all_t<A...>>;
  template <class... A>
  using result = compute<A...>;
};

/// exp, sin, sqrt, ...: floats keep their type, int32/int64 go to float64. NumPy gives
/// float16 for bool and uint8, which dynexpr does not have: those are rejected.
struct float_unary_rule {
  template <class A>
  using compute = float_result_t<A>;
  template <class A>
  using result = float_result_t<A>;
};

/// neg, abs, square, sign, reciprocal, floor, ...: the operand's own type.
struct same_rule {
  template <class A>
  using compute = A;
  template <class A>
  using result = A;
};

/// Comparisons: compare at the promoted type, give bool. Two bools compare as 0/1 bytes.
struct compare_rule {
  template <class A, class B>
  using compute = std::conditional_t<is_bool_v<promote_t<A, B>>, std::uint8_t, promote_t<A, B>>;
  template <class A, class B>
  using result = bool;
};

/// logical_and/or/xor/not: truth values in, bool out; the body works on masks.
struct logical_rule {
  template <class... A>
  using compute = bool;
  template <class... A>
  using result = bool;
};

/// isnan, isinf, isfinite: a predicate on the operand's own lanes.
struct predicate_rule {
  template <class A>
  using compute = std::conditional_t<is_bool_v<A>, std::uint8_t, A>;
  template <class A>
  using result = bool;
};

/// bitwise_and/or/xor/not, shifts: integers (and, except for shifts, bools).
struct bitwise_rule {
  template <class... A>
  using compute = promote_all_t<A...>;
  template <class... A>
  using result = promote_all_t<A...>;
};

}  // namespace dynexpr::ops
