// dynexpr/expr/nodes.hpp — expression nodes. They hold data only (Note [expr is data]):
// how to read an element or a SIMD packet lives in eval/, how to walk memory in eval/ too.
//
// Note [expr is data]
// A node is what the user wrote: an op and its operands. Keeping evaluation out of the
// nodes lets one tree be walked by several evaluators (flat SIMD, strided, reduction
// input, describe) and rewritten at compile time (fma contraction) before evaluation.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

#include "dynexpr/core/dtype.hpp"
#include "dynexpr/core/shape.hpp"
#include "dynexpr/core/tensor.hpp"
#include "dynexpr/expr/operands.hpp"

namespace dynexpr {

/// A leaf that reads a view (of a Tensor the user keeps alive, or of foreign memory).
template <Element T>
struct leaf_expr {
  using dynexpr_expr_tag = void;
  using value_type = T;
  View<const T> view_;
  Shape shape() const { return view_.shape(); }
};

/// A leaf that owns a temporary Tensor (an rvalue operand, or a materialised reduction),
/// so that `dx::exp(x - dx::max(x, 1, true))` does not dangle. Shared, so that copying
/// the expression does not copy the elements.
template <Element T>
struct owning_leaf_expr {
  using dynexpr_expr_tag = void;
  using value_type = T;
  std::shared_ptr<const Tensor<T>> tensor_;
  Shape shape() const { return tensor_->shape(); }
};

/// A scalar broadcast to any shape. Its type is already the promoted type it is used at
/// (NEP 50 weak scalars are converted when the node is built, in ops/operators.hpp).
template <Element T>
struct scalar_expr {
  using dynexpr_expr_tag = void;
  using value_type = T;
  T value_;
  Shape shape() const { return Shape{}; }
};

/// An elementwise op applied to operands; the op's dtype rule gives the value type.
template <class Op, class... Args>
struct map_expr {
  using dynexpr_expr_tag = void;
  using op_type = Op;
  using value_type = typename Op::template result<typename Args::value_type...>;
  operands<Args...> args_;  // Note [operands, not hana] in expr/operands.hpp

  Shape shape() const {
    Shape s;
    for_each_operand(args_, [&](const auto& a) { s = broadcast_shapes(s, a.shape()); });
    return s;
  }
};

template <class E>
concept Expr = requires { typename std::remove_cvref_t<E>::dynexpr_expr_tag; };

namespace detail {
template <class X>
struct is_tensor : std::false_type {};
template <class T>
struct is_tensor<Tensor<T>> : std::true_type {};
template <class X>
struct is_view : std::false_type {};
template <class T>
struct is_view<View<T>> : std::true_type {};
}  // namespace detail

/// Anything that can stand in an expression: a node, a Tensor, or a View.
template <class X>
concept Operand = Expr<X> || detail::is_tensor<std::remove_cvref_t<X>>::value ||
                  detail::is_view<std::remove_cvref_t<X>>::value;

/// The node an operand becomes: nodes as they are, lvalue Tensors and Views as
/// non-owning leaves, rvalue Tensors moved into owning leaves.
template <Operand X>
auto as_expr(X&& x) {
  using R = std::remove_cvref_t<X>;
  if constexpr (Expr<R>) {
    return R(std::forward<X>(x));
  } else if constexpr (detail::is_tensor<R>::value) {
    if constexpr (std::is_lvalue_reference_v<X>)
      return leaf_expr<typename R::value_type>{View<const typename R::value_type>(x.view())};
    else
      return owning_leaf_expr<typename R::value_type>{
          std::make_shared<const R>(std::move(x))};
  } else {
    return leaf_expr<typename R::value_type>{View<const typename R::value_type>(x)};
  }
}
template <Operand X>
using expr_t = decltype(as_expr(std::declval<X>()));

template <class Op, Operand... X>
auto make_map(X&&... x) {
  return map_expr<Op, expr_t<X>...>{make_operands(as_expr(std::forward<X>(x))...)};
}

}  // namespace dynexpr
