// dynexpr/eval/evaluator.hpp — evaluators: how to read one element or one SIMD packet of
// a node, at position j of the current row. No loops here (eval/assign.hpp, reduce.hpp).
//
// An evaluator is built from a node and a layout. `seek(idx)` moves every leaf to the
// row at outer index idx[0..nd-2]; `at(j)` reads element j of that row; `packet<M>(dl,
// j)` reads lanes j.. as a vector of the node's type in the loop's lane count (Note [lane
// count of mixed expressions]); bool nodes also give `mask<M>(dl, dm, j)`, the truth
// values as a mask of any lane type: bools travel as masks, never as vectors of bool.
//
// The mode M says how leaves read memory: `unit` — every leaf's row is contiguous (or a
// scalar), a plain load; `general` — each leaf checks its own inner stride (1: load, 0:
// broadcast splat, other: gather); `tail` — like general but only `row length - j` lanes
// exist, so nothing past the row is touched. Evaluators are small and copied per thread.
#pragma once

#include <cstdint>
#include <type_traits>

#include "dynexpr/eval/layout.hpp"
#include "dynexpr/expr/nodes.hpp"
#include "dynexpr/ops/op_table.hpp"
#include "dynexpr/simd/convert.hpp"

namespace dynexpr::evaluation {

namespace hn = hwy::HWY_NAMESPACE;

enum class mode { unit, general, tail };

template <class E>
struct evaluator;

/// The lane type whose full vector sets the lane count: an unsigned integer as wide as
/// the widest value or compute type in the tree.
template <class E>
struct widest;
template <class T>
struct widest<leaf_expr<T>> : std::integral_constant<std::size_t, sizeof(T)> {};
template <class T>
struct widest<owning_leaf_expr<T>> : std::integral_constant<std::size_t, sizeof(T)> {};
template <class T>
struct widest<scalar_expr<T>> : std::integral_constant<std::size_t, sizeof(T)> {};
template <class Op, class... A>
struct widest<map_expr<Op, A...>> {
  static constexpr std::size_t compute_size() {
    if constexpr (requires { typename Op::template compute<typename A::value_type...>; })
      return sizeof(typename Op::template compute<typename A::value_type...>);
    else
      return 1;
  }
  static constexpr std::size_t value = std::max(
      {compute_size(), sizeof(typename map_expr<Op, A...>::value_type), widest<A>::value...});
};
template <std::size_t Bytes>
using lane_carrier_t = std::conditional_t<
    Bytes == 1, std::uint8_t,
    std::conditional_t<Bytes == 2, std::uint16_t,
                       std::conditional_t<Bytes == 4, std::uint32_t, std::uint64_t>>>;
/// The loop's tag for expression E.
template <class E>
using loop_tag_t = hn::ScalableTag<lane_carrier_t<widest<E>::value>>;

/// Storage lane type of T: bools are read and written as bytes.
template <class T>
using storage_t = std::conditional_t<std::is_same_v<T, bool>, std::uint8_t, T>;

// ----------------------------------------------------------------------------- leaves
template <class T>
struct view_evaluator {
  using value_type = T;
  using S = storage_t<T>;
  const S* base_;
  const S* row_;
  index_t stride_[max_rank];
  index_t inner_;
  index_t len_;
  int nd_;

  view_evaluator(const View<const T>& v, const layout& L)
      : base_(reinterpret_cast<const S*>(v.data())), row_(base_), len_(L.inner()), nd_(L.nd) {
    L.coalesce(broadcast_strides(v.shape(), v.strides(), L.out_shape), stride_);
    inner_ = stride_[nd_ - 1];
  }
  void seek(const index_t* idx) {
    const S* p = base_;
    for (int k = 0; k + 1 < nd_; ++k) p += idx[k] * stride_[k];
    row_ = p;
  }
  // A leaf broadcast along the row (inner stride 0: a keepdims row statistic read by the
  // row's elements, x - mean(x, 1, true)) is a splat in the unit loop, not a reason to
  // leave it: the lean loop of generated units would go lane by lane (Note [lean units]).
  bool unit() const { return inner_ == 1 || inner_ == 0 || len_ == 1; }
  T at(index_t j) const { return static_cast<T>(row_[j * inner_]); }

  template <mode M, class DL>
  DYNEXPR_INLINE auto load(DL dl, index_t j) const {
    const hn::Rebind<S, DL> d;
    if constexpr (M == mode::unit) {
      if (inner_ == 0) return hn::Set(d, *row_);
      return hn::LoadU(d, row_ + j);
    } else {
      const index_t lanes = static_cast<index_t>(hn::Lanes(d));
      const index_t n = M == mode::tail ? std::min(len_ - j, lanes) : lanes;
      if (inner_ == 0) return hn::Set(d, *row_);
      if (inner_ == 1) {
        if constexpr (M == mode::tail) return simd::load_partial(d, row_ + j, n);
        else return hn::LoadU(d, row_ + j);
      }
      return simd::load_strided(d, row_ + j * inner_, inner_, n);
    }
    (void)dl;
  }
  template <mode M, class DL>
  DYNEXPR_INLINE auto packet(DL dl, index_t j) const {
    if constexpr (std::is_same_v<T, bool>) {
      const hn::Rebind<std::uint8_t, DL> du;
      return hn::Min(load<M>(dl, j), hn::Set(du, 1));  // any non-zero byte reads as true
    } else {
      return load<M>(dl, j);
    }
  }
  template <mode M, class DL, class DM>
  DYNEXPR_INLINE hn::Mask<DM> mask(DL dl, DM dm, index_t j) const {
    const hn::Rebind<S, DL> d;
    const auto v = load<M>(dl, j);
    return simd::mask_cast(dm, d, simd::nonzero(d, v));
  }
};

template <class T>
struct evaluator<leaf_expr<T>> : view_evaluator<T> {
  evaluator(const leaf_expr<T>& e, const layout& L) : view_evaluator<T>(e.view_, L) {}
};
template <class T>
struct evaluator<owning_leaf_expr<T>> : view_evaluator<T> {
  evaluator(const owning_leaf_expr<T>& e, const layout& L)
      : view_evaluator<T>(e.tensor_->view(), L) {}
};

template <class T>
struct evaluator<scalar_expr<T>> {
  using value_type = T;
  T value_;
  evaluator(const scalar_expr<T>& e, const layout&) : value_(e.value_) {}
  void seek(const index_t*) {}
  bool unit() const { return true; }
  T at(index_t) const { return value_; }
  template <mode M, class DL>
  DYNEXPR_INLINE auto packet(DL, index_t) const {
    return hn::Set(hn::Rebind<storage_t<T>, DL>(), static_cast<storage_t<T>>(value_));
  }
  template <mode M, class DL, class DM>
  DYNEXPR_INLINE hn::Mask<DM> mask(DL, DM dm, index_t) const {
    return hn::FirstN(dm, value_ != T(0) ? hn::Lanes(dm) : 0);
  }
};

// ------------------------------------------------------------- operand conversions
/// Child's value as a vector of compute type C (tag dc); bool children become 0/1.
template <mode M, class Child, class DL, class DC>
DYNEXPR_INLINE hn::Vec<DC> value_as(const Child& c, DL dl, DC dc, index_t j) {
  using T = typename Child::value_type;
  if constexpr (std::is_same_v<T, bool>) {
    return hn::IfThenElseZero(c.template mask<M>(dl, dc, j), hn::Set(dc, hn::TFromD<DC>(1)));
  } else {
    return simd::convert(dc, hn::Rebind<T, DL>(), c.template packet<M>(dl, j));
  }
}
/// Child's truth values as a mask of tag dm.
template <mode M, class Child, class DL, class DM>
DYNEXPR_INLINE hn::Mask<DM> mask_as(const Child& c, DL dl, DM dm, index_t j) {
  using T = typename Child::value_type;
  if constexpr (std::is_same_v<T, bool>) {
    return c.template mask<M>(dl, dm, j);
  } else {
    const hn::Rebind<T, DL> dt;
    return simd::mask_cast(dm, dt, simd::nonzero(dt, c.template packet<M>(dl, j)));
  }
}

/// Calls f(view_evaluator<T>&) on every leaf of an evaluator tree that reads a view, in
/// leaf order (scalars are skipped): how a loop re-plans its rows after the evaluators are
/// built (Note [short rows] in eval/assign.hpp).
template <class Ev, class F>
void for_each_view(Ev& ev, F&& f) {
  if constexpr (requires { ev.args_; }) {
    for_each_operand(ev.args_, [&](auto& a) { for_each_view(a, f); });
  } else if constexpr (requires { ev.base_; }) {
    f(static_cast<view_evaluator<typename Ev::value_type>&>(ev));
  }
}

// ------------------------------------------------------------------------- map nodes
template <class Op, class... A>
struct map_evaluator_base {
  operands<evaluator<A>...> args_;  // Note [operands, not hana] in expr/operands.hpp

  map_evaluator_base(const map_expr<Op, A...>& e, const layout& L)
      : args_(unpack(e.args_, [&](const A&... a) {
          return operands<evaluator<A>...>{evaluator<A>(a, L)...};
        })) {}
  void seek(const index_t* idx) {
    for_each_operand(args_, [&](auto& a) { a.seek(idx); });
  }
  bool unit() const {
    return unpack(args_, [](const auto&... a) { return (true && ... && a.unit()); });
  }
  template <class F>
  DYNEXPR_INLINE auto apply(F&& f) const {
    return unpack(args_, std::forward<F>(f));
  }
};

template <class Op, class... A>
struct evaluator<map_expr<Op, A...>> : map_evaluator_base<Op, A...> {
  using base = map_evaluator_base<Op, A...>;
  using C = typename Op::template compute<typename A::value_type...>;
  using value_type = typename map_expr<Op, A...>::value_type;
  using base::base;

  value_type at(index_t j) const {
    return this->apply([&](const auto&... a) {
      return static_cast<value_type>(Op::scalar(static_cast<C>(a.at(j))...));
    });
  }
  template <mode M, class DL>
  DYNEXPR_INLINE auto packet(DL dl, index_t j) const {
    if constexpr (std::is_same_v<value_type, bool>) {
      const hn::Rebind<std::uint8_t, DL> du;
      return hn::IfThenElseZero(mask<M>(dl, du, j), hn::Set(du, 1));
    } else {
      const hn::Rebind<C, DL> dc;
      return this->apply([&](const auto&... a) {
        return Op::simd(dc, value_as<M>(a, dl, dc, j)...);
      });
    }
  }
  template <mode M, class DL, class DM>
  DYNEXPR_INLINE hn::Mask<DM> mask(DL dl, DM dm, index_t j) const {
    static_assert(std::is_same_v<value_type, bool>);
    if constexpr (std::is_same_v<C, bool>) {
      return this->apply([&](const auto&... a) { return Op::simd(dm, mask_as<M>(a, dl, dm, j)...); });
    } else {
      const hn::Rebind<C, DL> dc;
      return simd::mask_cast(dm, dc, this->apply([&](const auto&... a) {
        return Op::simd(dc, value_as<M>(a, dl, dc, j)...);
      }));
    }
  }
};

/// Integer floor division and remainder by a scalar node: the divisor is prepared once
/// per evaluator (Note [division by a scalar] in ops/op_support.hpp).
template <class Op, class A, class T>
  requires((std::is_same_v<Op, ops::floor_divide_op> || std::is_same_v<Op, ops::mod_op>) &&
           std::is_integral_v<typename Op::template compute<typename A::value_type, T>> &&
           !std::is_same_v<T, bool>)
struct evaluator<map_expr<Op, A, scalar_expr<T>>> : map_evaluator_base<Op, A, scalar_expr<T>> {
  using base = map_evaluator_base<Op, A, scalar_expr<T>>;
  using C = typename Op::template compute<typename A::value_type, T>;
  using value_type = typename map_expr<Op, A, scalar_expr<T>>::value_type;
  ops::detail::scalar_divisor<C> divisor_;

  evaluator(const map_expr<Op, A, scalar_expr<T>>& e, const layout& L)
      : base(e, L), divisor_(static_cast<C>(e.args_.a1.value_)) {}

  value_type at(index_t j) const {
    return static_cast<value_type>(
        Op::scalar(static_cast<C>(this->args_.a0.at(j)), divisor_.b_));
  }
  template <mode M, class DL>
  DYNEXPR_INLINE auto packet(DL dl, index_t j) const {
    const hn::Rebind<C, DL> dc;
    const auto a = value_as<M>(this->args_.a0, dl, dc, j);
#if HWY_TARGET != HWY_SCALAR
    const C b = divisor_.b_;
    if (divisor_.fast())
      return divisor_.template apply<std::is_same_v<Op, ops::mod_op>>(
          dc, a, [b](C x) { return Op::scalar(x, b); });
#endif
    return Op::simd(dc, a, hn::Set(dc, divisor_.b_));
  }
};

template <class Cond, class A, class B>
struct evaluator<map_expr<ops::where_op, Cond, A, B>> : map_evaluator_base<ops::where_op, Cond, A, B> {
  using base = map_evaluator_base<ops::where_op, Cond, A, B>;
  using value_type = promote_t<typename A::value_type, typename B::value_type>;
  using base::base;

  value_type at(index_t j) const {
    const auto &c = this->args_.a0; const auto &a = this->args_.a1; const auto &b = this->args_.a2;
    return static_cast<bool>(c.at(j)) ? static_cast<value_type>(a.at(j))
                                      : static_cast<value_type>(b.at(j));
  }
  template <mode M, class DL>
  DYNEXPR_INLINE auto packet(DL dl, index_t j) const {
    if constexpr (std::is_same_v<value_type, bool>) {
      const hn::Rebind<std::uint8_t, DL> du;
      return hn::IfThenElseZero(mask<M>(dl, du, j), hn::Set(du, 1));
    } else {
      const auto &c = this->args_.a0; const auto &a = this->args_.a1; const auto &b = this->args_.a2;
      const hn::Rebind<value_type, DL> dv;
      return hn::IfThenElse(mask_as<M>(c, dl, dv, j), value_as<M>(a, dl, dv, j),
                            value_as<M>(b, dl, dv, j));
    }
  }
  template <mode M, class DL, class DM>
  DYNEXPR_INLINE hn::Mask<DM> mask(DL dl, DM dm, index_t j) const {
    const auto &c = this->args_.a0; const auto &a = this->args_.a1; const auto &b = this->args_.a2;
    const auto mc = mask_as<M>(c, dl, dm, j);
    return hn::Or(hn::And(mc, mask_as<M>(a, dl, dm, j)), hn::AndNot(mc, mask_as<M>(b, dl, dm, j)));
  }
};

template <class To, class A>
struct evaluator<map_expr<ops::cast_op<To>, A>> : map_evaluator_base<ops::cast_op<To>, A> {
  using base = map_evaluator_base<ops::cast_op<To>, A>;
  using value_type = To;
  using base::base;

  To at(index_t j) const { return static_cast<To>(this->args_.a0.at(j)); }
  template <mode M, class DL>
  DYNEXPR_INLINE auto packet(DL dl, index_t j) const {
    if constexpr (std::is_same_v<To, bool>) {
      const hn::Rebind<std::uint8_t, DL> du;
      return hn::IfThenElseZero(mask<M>(dl, du, j), hn::Set(du, 1));
    } else {
      return value_as<M>(this->args_.a0, dl, hn::Rebind<To, DL>(), j);
    }
  }
  template <mode M, class DL, class DM>
  DYNEXPR_INLINE hn::Mask<DM> mask(DL dl, DM dm, index_t j) const {
    return mask_as<M>(this->args_.a0, dl, dm, j);
  }
};

}  // namespace dynexpr::evaluation
