// dynexpr/expr/operands.hpp — the operands of a map node (map_expr::args_) and of its
// evaluator: a plain aggregate of one, two or three members, and the three walks over it
// the library needs (unpack, for_each_operand, operand<I>).
//
// Note [operands, not hana]
// A generated unit's compile time grows with the functions its expression types
// instantiate. With boost::hana::tuple as the operand list, each node of a fused chain
// brought in some twenty functions of Hana's (tuple, basic_tuple, ebo, unpack_t,
// transform_t, for_each_t, make_t, fold_left, ...), more than half of all the functions
// of a 10-op unit, each parsed, instantiated and optimised by g++ before inlining made
// them vanish. These members and walks cost one function per use, and the precompiled
// prelude no longer carries Hana at all (ops/registry.hpp still uses it for the tests'
// compile-time op lists). Every op has one to three operands (ops/manifest.py).
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include "dynexpr/core/config.hpp"

namespace dynexpr {

template <class... A>
struct operands {
  static_assert(sizeof...(A) >= 1 && sizeof...(A) <= 3,
                "dynexpr: a map node has one to three operands (ops/manifest.py)");
};
template <class A>
struct operands<A> {
  static constexpr std::size_t size = 1;
  A a0;
};
template <class A, class B>
struct operands<A, B> {
  static constexpr std::size_t size = 2;
  A a0;
  B a1;
};
template <class A, class B, class C>
struct operands<A, B, C> {
  static constexpr std::size_t size = 3;
  A a0;
  B a1;
  C a2;
};

/// The operands a..., stored by value (hana::make_tuple's replacement).
template <class... A>
constexpr operands<std::decay_t<A>...> make_operands(A&&... a) {
  return {std::forward<A>(a)...};
}

/// f(a0, a1, ...): the operands as arguments, const or not as `o` is.
template <class O, class F>
DYNEXPR_INLINE constexpr decltype(auto) unpack(O&& o, F&& f) {
  constexpr std::size_t n = std::remove_cvref_t<O>::size;
  if constexpr (n == 1) return f(o.a0);
  else if constexpr (n == 2) return f(o.a0, o.a1);
  else return f(o.a0, o.a1, o.a2);
}

/// f(a) for every operand, left to right.
template <class O, class F>
DYNEXPR_INLINE constexpr void for_each_operand(O&& o, F&& f) {
  constexpr std::size_t n = std::remove_cvref_t<O>::size;
  f(o.a0);
  if constexpr (n > 1) f(o.a1);
  if constexpr (n > 2) f(o.a2);
}

/// Operand I (a reference, const as `o` is).
template <std::size_t I, class O>
DYNEXPR_INLINE constexpr auto& operand(O& o) {
  static_assert(I < O::size, "dynexpr: operand index out of range");
  if constexpr (I == 0) return o.a0;
  else if constexpr (I == 1) return o.a1;
  else return o.a2;
}

}  // namespace dynexpr
