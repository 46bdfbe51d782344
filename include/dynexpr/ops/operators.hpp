// dynexpr/ops/operators.hpp — the user-facing spelling of the op table: C++ operators
// and named functions (`dx::exp`, `dx::where`, `dx::cast<T>`, ...), with C++ scalars
// mixed in as NumPy 2 weak scalars (NEP 50): `x_f32 * 2.0` stays float32.
#pragma once

#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "dynexpr/expr/nodes.hpp"
#include "dynexpr/ops/math_ops.hpp"
#include "dynexpr/ops/op_table.hpp"

namespace dynexpr {

/// An argument of an op: an array operand or a C++ scalar.
template <class X>
concept Arg = Operand<X> || WeakScalar<std::remove_cvref_t<X>>;

namespace detail {
template <class X>
struct array_type {
  using type = void;
};
template <Operand X>
struct array_type<X> {
  using type = typename expr_t<X>::value_type;
};
template <class A, class B>
struct join {
  using type = promote_t<A, B>;
};
template <class B>
struct join<void, B> {
  using type = B;
};
template <class A>
struct join<A, void> {
  using type = A;
};
template <>
struct join<void, void> {
  using type = void;
};
// np.result_type of the array arguments only (weak scalars do not take part).
template <class Acc, class... X>
struct arrays_promote {
  using type = Acc;
};
template <class Acc, class X, class... R>
struct arrays_promote<Acc, X, R...> {
  using type =
      typename arrays_promote<typename join<Acc, typename array_type<X>::type>::type, R...>::type;
};

/// A weak scalar as a node of the dtype it takes next to arrays of dtype A. A Python int
/// that does not fit an integer dtype is an error in NumPy 2 (OverflowError); here too.
template <class A, class S>
auto weak_node(S s) {
  using T = promote_weak_t<A, S>;
  if constexpr (std::is_integral_v<S> && !std::is_same_v<S, bool> && is_int_v<T>) {
    if (!std::in_range<T>(s))
      throw value_error("dynexpr: Python integer " + std::to_string(s) +
                        " out of bounds for " + std::string(dtype_name<T>()) +
                        "; use a wider dtype or cast the array first");
  }
  return scalar_expr<T>{static_cast<T>(s)};
}

template <class A, class X>
auto node_of(X&& x) {
  if constexpr (Operand<X>) return as_expr(std::forward<X>(x));
  else return weak_node<A>(x);
}
}  // namespace detail

/// Builds op Op over arguments (at least one array operand): scalars become weak nodes,
/// then the op's dtype check runs (a static_assert naming the op on a bad combination).
template <class Op, Arg... X>
  requires(Operand<X> || ...)
auto apply(X&&... x) {
  using A = typename detail::arrays_promote<void, X...>::type;
  auto node = [](auto&&... n) {
    Op::template check<typename std::remove_cvref_t<decltype(n)>::value_type...>();
    return map_expr<Op, std::remove_cvref_t<decltype(n)>...>{hana::make_tuple(std::move(n)...)};
  };
  return node(detail::node_of<A>(std::forward<X>(x))...);
}

/// A strong (0-d array) scalar of dtype T: `x_f32 * dx::scalar<double>(2)` is float64,
/// as `x * np.float64(2)` is in NumPy 2.
template <Element T>
scalar_expr<T> scalar(T v) {
  return {v};
}

// ------------------------------------------------------------------- named functions
#define DYNEXPR_NAMED(FN, OP)                                    \
  template <Arg... X>                                            \
    requires(Operand<X> || ...)                                  \
  auto FN(X&&... x) {                                            \
    static_assert(sizeof...(X) == ops::OP::arity,                \
                  "dynexpr::" #FN ": wrong number of arguments"); \
    return apply<ops::OP>(std::forward<X>(x)...);                \
  }
DYNEXPR_NAMED(add, add_op)
DYNEXPR_NAMED(subtract, sub_op)
DYNEXPR_NAMED(multiply, mul_op)
DYNEXPR_NAMED(divide, div_op)
DYNEXPR_NAMED(true_divide, div_op)
DYNEXPR_NAMED(floor_divide, floor_divide_op)
DYNEXPR_NAMED(mod, mod_op)
DYNEXPR_NAMED(remainder, mod_op)
DYNEXPR_NAMED(negative, neg_op)
DYNEXPR_NAMED(neg, neg_op)
DYNEXPR_NAMED(abs, abs_op)
DYNEXPR_NAMED(absolute, abs_op)
DYNEXPR_NAMED(minimum, minimum_op)
DYNEXPR_NAMED(maximum, maximum_op)
DYNEXPR_NAMED(pow, pow_op)
DYNEXPR_NAMED(power, pow_op)
DYNEXPR_NAMED(square, square_op)
DYNEXPR_NAMED(reciprocal, reciprocal_op)
DYNEXPR_NAMED(sqrt, sqrt_op)
DYNEXPR_NAMED(exp, exp_op)
DYNEXPR_NAMED(expm1, expm1_op)
DYNEXPR_NAMED(exp2, exp2_op)
DYNEXPR_NAMED(log, log_op)
DYNEXPR_NAMED(log1p, log1p_op)
DYNEXPR_NAMED(log2, log2_op)
DYNEXPR_NAMED(log10, log10_op)
DYNEXPR_NAMED(sin, sin_op)
DYNEXPR_NAMED(cos, cos_op)
DYNEXPR_NAMED(tan, tan_op)
DYNEXPR_NAMED(tanh, tanh_op)
DYNEXPR_NAMED(sinh, sinh_op)
DYNEXPR_NAMED(cosh, cosh_op)
DYNEXPR_NAMED(arcsin, arcsin_op)
DYNEXPR_NAMED(arccos, arccos_op)
DYNEXPR_NAMED(arctan, arctan_op)
DYNEXPR_NAMED(arcsinh, arcsinh_op)
DYNEXPR_NAMED(arccosh, arccosh_op)
DYNEXPR_NAMED(arctanh, arctanh_op)
DYNEXPR_NAMED(arctan2, arctan2_op)
DYNEXPR_NAMED(hypot, hypot_op)
DYNEXPR_NAMED(sigmoid, sigmoid_op)
DYNEXPR_NAMED(erf, erf_op)
DYNEXPR_NAMED(floor, floor_op)
DYNEXPR_NAMED(ceil, ceil_op)
DYNEXPR_NAMED(trunc, trunc_op)
DYNEXPR_NAMED(rint, rint_op)
DYNEXPR_NAMED(sign, sign_op)
DYNEXPR_NAMED(clip, clip_op)
DYNEXPR_NAMED(equal, equal_op)
DYNEXPR_NAMED(not_equal, not_equal_op)
DYNEXPR_NAMED(less, less_op)
DYNEXPR_NAMED(less_equal, less_equal_op)
DYNEXPR_NAMED(greater, greater_op)
DYNEXPR_NAMED(greater_equal, greater_equal_op)
DYNEXPR_NAMED(logical_and, logical_and_op)
DYNEXPR_NAMED(logical_or, logical_or_op)
DYNEXPR_NAMED(logical_xor, logical_xor_op)
DYNEXPR_NAMED(logical_not, logical_not_op)
DYNEXPR_NAMED(isnan, isnan_op)
DYNEXPR_NAMED(isinf, isinf_op)
DYNEXPR_NAMED(isfinite, isfinite_op)
DYNEXPR_NAMED(bitwise_and, bitwise_and_op)
DYNEXPR_NAMED(bitwise_or, bitwise_or_op)
DYNEXPR_NAMED(bitwise_xor, bitwise_xor_op)
DYNEXPR_NAMED(bitwise_not, invert_op)
DYNEXPR_NAMED(invert, invert_op)
DYNEXPR_NAMED(left_shift, left_shift_op)
DYNEXPR_NAMED(right_shift, right_shift_op)
#undef DYNEXPR_NAMED

/// where(cond, a, b): a where cond is true (non-zero), else b; a and b promote (weak
/// scalars against the array among a and b).
template <Arg C, Arg A, Arg B>
  requires(Operand<C> || Operand<A> || Operand<B>)
auto where(C&& c, A&& a, B&& b) {
  using V = typename detail::arrays_promote<void, A, B>::type;
  using VT = std::conditional_t<std::is_void_v<V>, double, V>;
  auto cn = [&] {
    if constexpr (Operand<C>) return as_expr(std::forward<C>(c));
    else return scalar_expr<bool>{static_cast<bool>(c)};
  }();
  auto an = detail::node_of<VT>(std::forward<A>(a));
  auto bn = detail::node_of<VT>(std::forward<B>(b));
  return map_expr<ops::where_op, decltype(cn), decltype(an), decltype(bn)>{
      hana::make_tuple(std::move(cn), std::move(an), std::move(bn))};
}

/// astype: NumPy's unsafe cast of every element to To.
template <Element To, Operand X>
auto cast(X&& x) {
  return map_expr<ops::cast_op<To>, expr_t<X>>{hana::make_tuple(as_expr(std::forward<X>(x)))};
}

// ------------------------------------------------------------------------ operators
#define DYNEXPR_BINARY_OPERATOR(SYM, OP)                  \
  template <Arg L, Arg R>                                 \
    requires(Operand<L> || Operand<R>)                    \
  auto operator SYM(L&& l, R&& r) {                       \
    return apply<ops::OP>(std::forward<L>(l), std::forward<R>(r)); \
  }
DYNEXPR_BINARY_OPERATOR(+, add_op)
DYNEXPR_BINARY_OPERATOR(-, sub_op)
DYNEXPR_BINARY_OPERATOR(*, mul_op)
DYNEXPR_BINARY_OPERATOR(/, div_op)
DYNEXPR_BINARY_OPERATOR(%, mod_op)
DYNEXPR_BINARY_OPERATOR(&, bitwise_and_op)
DYNEXPR_BINARY_OPERATOR(|, bitwise_or_op)
DYNEXPR_BINARY_OPERATOR(^, bitwise_xor_op)
DYNEXPR_BINARY_OPERATOR(<<, left_shift_op)
DYNEXPR_BINARY_OPERATOR(>>, right_shift_op)
DYNEXPR_BINARY_OPERATOR(==, equal_op)
DYNEXPR_BINARY_OPERATOR(!=, not_equal_op)
DYNEXPR_BINARY_OPERATOR(<, less_op)
DYNEXPR_BINARY_OPERATOR(<=, less_equal_op)
DYNEXPR_BINARY_OPERATOR(>, greater_op)
DYNEXPR_BINARY_OPERATOR(>=, greater_equal_op)
#undef DYNEXPR_BINARY_OPERATOR

template <Operand X>
auto operator-(X&& x) {
  return apply<ops::neg_op>(std::forward<X>(x));
}
template <Operand X>
auto operator+(X&& x) {
  return as_expr(std::forward<X>(x));
}
template <Operand X>
auto operator~(X&& x) {
  return apply<ops::invert_op>(std::forward<X>(x));
}
template <Operand X>
auto operator!(X&& x) {
  return apply<ops::logical_not_op>(std::forward<X>(x));
}

}  // namespace dynexpr
