// dynexpr/expr/traverse.hpp — compile-time walks over expression trees:
// leaf visits (for aliasing and layout decisions), node counts and cost estimates.
#pragma once

#include <cstddef>
#include <type_traits>

#include "dynexpr/expr/nodes.hpp"

namespace dynexpr {

namespace detail {
template <class E>
concept MapNode = requires { typename E::op_type; };
template <class E>
concept ScalarNode = requires(const E& e) { e.value_; };
}  // namespace detail

/// Calls f(view) for every array leaf of e, left to right (scalars are not visited).
template <class E, class F>
void for_each_leaf(const E& e, F&& f) {
  if constexpr (detail::MapNode<E>) {
    for_each_operand(e.args_, [&](const auto& a) { for_each_leaf(a, f); });
  } else if constexpr (requires { e.tensor_; }) {
    f(View<const typename E::value_type>(e.tensor_->view()));
  } else if constexpr (requires { e.view_; }) {
    f(e.view_);
  }
}

namespace detail {
template <class E>
struct tree_stats {  // a leaf or a scalar
  static constexpr std::size_t nodes = 1;
  static constexpr std::size_t leaves = ScalarNode<E> ? 0 : 1;
  static constexpr std::size_t cost = ScalarNode<E> ? 0 : 1;
};
template <class Op, class... A>
struct tree_stats<map_expr<Op, A...>> {
  static constexpr std::size_t nodes = (std::size_t{1} + ... + tree_stats<A>::nodes);
  static constexpr std::size_t leaves = (std::size_t{0} + ... + tree_stats<A>::leaves);
  static constexpr std::size_t cost = (std::size_t(Op::cost) + ... + tree_stats<A>::cost);
};
}  // namespace detail

/// Number of nodes (ops, leaves and scalars) of the tree, a compile-time constant.
template <class E>
inline constexpr std::size_t node_count_v = detail::tree_stats<std::remove_cvref_t<E>>::nodes;
/// Number of array leaves, a compile-time constant.
template <class E>
inline constexpr std::size_t leaf_count_v = detail::tree_stats<std::remove_cvref_t<E>>::leaves;
/// Estimated cycles per element: the op table's costs plus one per leaf load.
template <class E>
inline constexpr std::size_t cost_per_element_v = detail::tree_stats<std::remove_cvref_t<E>>::cost;

}  // namespace dynexpr
