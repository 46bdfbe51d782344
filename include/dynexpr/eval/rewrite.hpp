// dynexpr/eval/rewrite.hpp — compile-time rewrites applied to an expression before it is
// evaluated (describe() shows the tree as written; describe_lowered() shows this one).
//
// Note [fma contraction]
// add(mul(a, b), c), add(c, mul(a, b)), sub(mul(a, b), c) and sub(c, mul(a, b)) over
// floats become one fused multiply-add: one instruction instead of two and one rounding
// instead of two (the result can differ from NumPy's in the last bit, always toward the
// exact value). Contracted only when the product is already of the sum's compute type, so
// no conversion is skipped. Define DYNEXPR_NO_FMA_CONTRACTION to turn it off.
#pragma once

#include <type_traits>

#include "dynexpr/expr/nodes.hpp"
#include "dynexpr/ops/op_table.hpp"

namespace dynexpr::evaluation {

template <class E>
auto lower(const E& e);

namespace detail {
template <class E>
struct is_mul : std::false_type {};
template <class A, class B>
struct is_mul<map_expr<ops::mul_op, A, B>> : std::true_type {};

template <class Op, class L, class R>
constexpr bool contractible_with() {
#ifdef DYNEXPR_NO_FMA_CONTRACTION
  return false;
#else
  using C = typename Op::template compute<typename L::value_type, typename R::value_type>;
  return is_float_v<C> && is_mul<R>::value && std::is_same_v<typename R::value_type, C>;
#endif
}

template <class Fused, class Mul, class Other, bool MulFirst>
auto contract(const Mul& m, const Other& o) {
  auto a = lower(m.args_.a0);
  auto b = lower(m.args_.a1);
  auto c = lower(o);
  (void)MulFirst;
  return map_expr<Fused, decltype(a), decltype(b), decltype(c)>{make_operands(a, b, c)};
}
}  // namespace detail

template <class E>
auto lower(const E& e) {
  if constexpr (requires { typename E::op_type; }) {
    using Op = typename E::op_type;
    constexpr std::size_t n = decltype(e.args_)::size;
    if constexpr (n == 2 && (std::is_same_v<Op, ops::add_op> || std::is_same_v<Op, ops::sub_op>)) {
      const auto& l = e.args_.a0;
      const auto& r = e.args_.a1;
      using L = std::remove_cvref_t<decltype(l)>;
      using R = std::remove_cvref_t<decltype(r)>;
      if constexpr (detail::contractible_with<Op, R, L>()) {  // mul(a, b) +- r
        using F = std::conditional_t<std::is_same_v<Op, ops::add_op>, ops::fma_op, ops::fms_op>;
        return detail::contract<F, L, R, true>(l, r);
      } else if constexpr (detail::contractible_with<Op, L, R>()) {  // l +- mul(a, b)
        using F = std::conditional_t<std::is_same_v<Op, ops::add_op>, ops::fma_op, ops::fnma_op>;
        return detail::contract<F, R, L, false>(r, l);
      } else {
        return map_expr<Op, decltype(lower(l)), decltype(lower(r))>{
            make_operands(lower(l), lower(r))};
      }
    } else {
      return unpack(e.args_, [](const auto&... a) {
        return map_expr<Op, decltype(lower(a))...>{make_operands(lower(a)...)};
      });
    }
  } else if constexpr (requires { e.tensor_; }) {
    // An owning leaf is read through a view: the original expression keeps it alive.
    using T = typename E::value_type;
    return leaf_expr<T>{View<const T>(e.tensor_->view())};
  } else {
    return e;
  }
}

}  // namespace dynexpr::evaluation
