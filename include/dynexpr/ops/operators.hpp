// dynexpr/ops/operators.hpp — the user-facing spelling of the op table: C++ operators
// and named functions (`dx::exp`, `dx::where`, `dx::cast<T>`, ...), with C++ scalars
// mixed in as NumPy 2 weak scalars (NEP 50): `x_f32 * 2.0` stays float32.
#pragma once

#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "dynexpr/expr/nodes.hpp"
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
    return map_expr<Op, std::remove_cvref_t<decltype(n)>...>{make_operands(std::move(n)...)};
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
// One per op of the manifest and its aliases (DYNEXPR_NAMED_OPS, ops/op_table.hpp).
#define DYNEXPR_NAMED(FN, OP)                                    \
  template <Arg... X>                                            \
    requires(Operand<X> || ...)                                  \
  auto FN(X&&... x) {                                            \
    static_assert(sizeof...(X) == ops::OP::arity,                \
                  "dynexpr::" #FN ": wrong number of arguments"); \
    return apply<ops::OP>(std::forward<X>(x)...);                \
  }
DYNEXPR_NAMED_OPS(DYNEXPR_NAMED)
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
      make_operands(std::move(cn), std::move(an), std::move(bn))};
}

/// astype: NumPy's unsafe cast of every element to To.
template <Element To, Operand X>
auto cast(X&& x) {
  return map_expr<ops::cast_op<To>, expr_t<X>>{make_operands(as_expr(std::forward<X>(x)))};
}

// ------------------------------------------------------------------------ operators
#define DYNEXPR_BINARY_OPERATOR(SYM, OP)                  \
  template <Arg L, Arg R>                                 \
    requires(Operand<L> || Operand<R>)                    \
  auto operator SYM(L&& l, R&& r) {                       \
    return apply<ops::OP>(std::forward<L>(l), std::forward<R>(r)); \
  }
DYNEXPR_BINARY_OPERATORS(DYNEXPR_BINARY_OPERATOR)
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
