// dynexpr/eval/reductions.hpp — the public reductions: sum, prod, mean, min, max, argmin,
// argmax, any, all, var and std, over all axes (a scalar), one axis or several (a Tensor),
// with NumPy's result dtypes: sums and products of integers and bools are int64 (NumPy
// gives uint64 for uint8: dynexpr has no uint64), means/var/std of integers are float64,
// argmin/argmax are int64, any/all are bool.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "dynexpr/eval/max_sumexp.hpp"
#include "dynexpr/eval/moments.hpp"
#include "dynexpr/eval/reduce.hpp"

namespace dynexpr {

/// Tag for "every axis" where a reduction also takes keepdims or ddof.
struct all_axes_t {};
inline constexpr all_axes_t all_axes{};

namespace detail {
inline evaluation::axis_set axes_of(int axis) { return {false, Shape{axis}}; }
inline evaluation::axis_set axes_of(const Shape& axes) { return {false, axes}; }
inline evaluation::axis_set axes_of(all_axes_t) { return {}; }
template <class A>
concept AxisSpec = std::is_same_v<A, int> || std::is_same_v<A, Shape> || std::is_same_v<A, all_axes_t>;
}  // namespace detail

#define DYNEXPR_REDUCTION(NAME, KIND)                                                      \
  template <Operand E>                                                                     \
  auto NAME(E&& e) {                                                                       \
    auto x = as_expr(std::forward<E>(e));                                                  \
    return evaluation::reduce_to_tensor<evaluation::reduce_kind::KIND>(x, {}, false).data()[0]; \
  }                                                                                        \
  template <Operand E, class A>                                                            \
    requires detail::AxisSpec<std::remove_cvref_t<A>>                                      \
  auto NAME(E&& e, const A& axes, bool keepdims = false) {                                 \
    auto x = as_expr(std::forward<E>(e));                                                  \
    return evaluation::reduce_to_tensor<evaluation::reduce_kind::KIND>(x, detail::axes_of(axes), keepdims); \
  }
DYNEXPR_REDUCTION(sum, sum)
DYNEXPR_REDUCTION(prod, prod)
DYNEXPR_REDUCTION(min, min)
DYNEXPR_REDUCTION(max, max)
DYNEXPR_REDUCTION(any, any)
DYNEXPR_REDUCTION(all, all)
#undef DYNEXPR_REDUCTION

namespace detail {
template <class X>
index_t reduced_count(const X& x, const evaluation::axis_set& axes) {
  const Shape s = x.shape();
  bool reduce[max_rank];
  axes.mark(s.size(), reduce);
  index_t n = 1;
  for (int i = 0; i < s.size(); ++i)
    if (reduce[i]) n *= s[i];
  return n;
}
/// NumPy raises when an arg-reduction has nothing to choose from, even where the result
/// is empty too (np.zeros((0, 3, 0)).argmin(axis=0)).
template <class X>
void check_nonempty_for(const X& x, const evaluation::axis_set& axes, const char* what) {
  if (reduced_count(x, axes) == 0)
    throw value_error(std::string("dynexpr: attempt to get ") + what +
                      " of an empty sequence: the reduced axis has size 0");
}

template <class X>
auto mean_impl(const X& x, const evaluation::axis_set& axes, bool keepdims) {
  using F = float_result_t<typename X::value_type>;
  auto t = evaluation::reduce_to_tensor<evaluation::reduce_kind::sum>(cast<F>(x), axes, keepdims);
  const F n = static_cast<F>(reduced_count(x, axes));
  for (index_t i = 0; i < t.size(); ++i) t.data()[i] = t.data()[i] / n;  // 0/0 -> NaN, as NumPy
  return t;
}

/// Mean and variance of x over `axes` in one read of x (Note [one-pass moments] in
/// eval/moments.hpp); the variance divided by max(n - ddof, 0) as NumPy (no error: 0/0 is
/// NaN and x/0 is inf), its square root when `root`.
template <class X>
auto moments_impl(const X& x, const evaluation::axis_set& axes, bool keepdims, int ddof, bool root) {
  using F = float_result_t<typename X::value_type>;
  using namespace evaluation;
  const auto low = lower(cast<F>(x));
  const reduce_plan p = plan_for(low, axes, keepdims);
  auto mean = Tensor<F>::empty(p.out_shape);
  auto var = Tensor<F>::empty(p.out_shape);
  std::vector<moment_sums> sums(static_cast<std::size_t>(mean.size()));
  run_moments(low, p, sums.data());
  const double dof = static_cast<double>(std::max<index_t>(p.reduced - ddof, 0));
  for (std::size_t i = 0; i < sums.size(); ++i) {
    const moment_sums& s = sums[i];
    // n = 0: NumPy's NaN mean and variance (0/0)
    mean.data()[i] = s.n == 0 ? std::numeric_limits<F>::quiet_NaN() : static_cast<F>(s.mean());
    const double v = s.m2_of<F>() / dof;  // Note [a constant column's spread is 0]
    var.data()[i] = static_cast<F>(root ? std::sqrt(v) : v);
  }
  return std::pair<Tensor<F>, Tensor<F>>(std::move(mean), std::move(var));
}
/// The max of x over `axes` and the sum of exp(x - max) over them, from one read of x
/// (Note [max and sum of exps together] in eval/max_sumexp.hpp).
template <class X>
auto max_sumexp_impl(const X& x, const evaluation::axis_set& axes, bool keepdims) {
  using F = float_result_t<typename X::value_type>;
  using namespace evaluation;
  const auto low = lower(cast<F>(x));
  const reduce_plan p = plan_for(low, axes, keepdims);
  if (p.reduced == 0)  // as NumPy's max
    throw value_error("dynexpr: zero-size array to reduction operation maximum which has no identity");
  auto m = Tensor<F>::empty(p.out_shape);
  auto s = Tensor<F>::empty(p.out_shape);
  std::vector<max_sumexp_acc> acc(static_cast<std::size_t>(m.size()));
  run_max_sumexp(low, p, acc.data());
  for (std::size_t i = 0; i < acc.size(); ++i) {
    m.data()[i] = static_cast<F>(acc[i].m);
    s.data()[i] = static_cast<F>(acc[i].sum());
  }
  return std::pair<Tensor<F>, Tensor<F>>(std::move(m), std::move(s));
}
}  // namespace detail

// NumPy's reductions with a float result and its own check for empty inputs.
template <Operand E>
auto mean(E&& e) {
  return detail::mean_impl(as_expr(std::forward<E>(e)), {}, false).data()[0];
}
template <Operand E, class A>
  requires detail::AxisSpec<std::remove_cvref_t<A>>
auto mean(E&& e, const A& axes, bool keepdims = false) {
  return detail::mean_impl(as_expr(std::forward<E>(e)), detail::axes_of(axes), keepdims);
}
template <Operand E>
auto var(E&& e) {
  return detail::moments_impl(as_expr(std::forward<E>(e)), {}, false, 0, false).second.data()[0];
}
template <Operand E, class A>
  requires detail::AxisSpec<std::remove_cvref_t<A>>
auto var(E&& e, const A& axes, bool keepdims = false, int ddof = 0) {
  return detail::moments_impl(as_expr(std::forward<E>(e)), detail::axes_of(axes), keepdims, ddof, false).second;
}
template <Operand E>
auto std(E&& e) {
  return detail::moments_impl(as_expr(std::forward<E>(e)), {}, false, 0, true).second.data()[0];
}
template <Operand E, class A>
  requires detail::AxisSpec<std::remove_cvref_t<A>>
auto std(E&& e, const A& axes, bool keepdims = false, int ddof = 0) {
  return detail::moments_impl(as_expr(std::forward<E>(e)), detail::axes_of(axes), keepdims, ddof, true).second;
}
/// The mean and the variance over the same axes, from one read of the input (Note
/// [one-pass moments]): `auto [m, v] = dx::mean_var(x, 0);` is x.mean(0), x.var(0).
template <Operand E, class A>
  requires detail::AxisSpec<std::remove_cvref_t<A>>
auto mean_var(E&& e, const A& axes, bool keepdims = false, int ddof = 0) {
  return detail::moments_impl(as_expr(std::forward<E>(e)), detail::axes_of(axes), keepdims, ddof, false);
}
/// The mean and the standard deviation over the same axes, from one read of the input.
template <Operand E, class A>
  requires detail::AxisSpec<std::remove_cvref_t<A>>
auto mean_std(E&& e, const A& axes, bool keepdims = false, int ddof = 0) {
  return detail::moments_impl(as_expr(std::forward<E>(e)), detail::axes_of(axes), keepdims, ddof, true);
}

/// max(x, axes) and sum(exp(x - max(x, axes, true)), axes), from one read of x (Note [max
/// and sum of exps together]): `auto [m, s] = dx::max_sumexp(x, 0);` starts a column
/// softmax or logsumexp. Float result (integers: float64, and m is then float64 too);
/// s is NaN where m is not finite, as NumPy's two reductions give it.
template <Operand E, class A>
  requires detail::AxisSpec<std::remove_cvref_t<A>>
auto max_sumexp(E&& e, const A& axes, bool keepdims = false) {
  return detail::max_sumexp_impl(as_expr(std::forward<E>(e)), detail::axes_of(axes), keepdims);
}

// ------------------------------------------------------------------ argmin / argmax
namespace detail {
/// Whether x replaces the best so far: strictly better, or the first NaN (NumPy returns
/// the index of the first NaN).
template <bool Max, class T>
bool better(T x, T best) {
  if constexpr (is_float_v<T>) {
    if (best != best) return false;
    if (x != x) return true;
  }
  return Max ? best < x : x < best;
}

template <bool Max, class X>
Tensor<std::int64_t> arg_reduce(const X& x, const evaluation::axis_set& axes, bool keepdims) {
  using namespace evaluation;
  using T = typename X::value_type;
  check_nonempty_for(x, axes, Max ? "argmax" : "argmin");
  const auto low = lower(x);
  using E = std::remove_cvref_t<decltype(low)>;
  const reduce_plan p = plan_for(low, axes, keepdims);
  Tensor<std::int64_t> out(p.out_shape);
  if (out.size() == 0) return out;
  const layout& L = p.L;
  const evaluator<E> ev0(low, L);
  const double work = static_cast<double>(p.kept * p.ni * p.reduced) * (cost_per_element_v<E> + 2);
  parallel::parallel_for(p.kept, 1, 1, work, [&](index_t kb, index_t ke) {
    evaluator<E> ev = ev0;
    index_t idx[max_rank] = {};
    // Not std::vector<T>: vector<bool> hands out proxies, not bools.
    std::unique_ptr<T[]> best(new T[static_cast<std::size_t>(p.ni)]);
    std::vector<std::int64_t> where(static_cast<std::size_t>(p.ni));
    for (index_t k = kb; k < ke; ++k) {
      decode(L, 0, p.nk, k, idx);
      if (!p.outer) {
        const index_t row = L.extent[L.nd - 1];
        T b{};
        std::int64_t w = -1;
        for (index_t r = 0, rows = p.reduced / row; r < rows; ++r) {
          decode(L, p.nk, p.nr - 1, r, idx);
          ev.seek(idx);
          for (index_t j = 0; j < row; ++j) {
            const T v = ev.at(j);
            if (w < 0 || better<Max>(v, b)) b = v, w = r * row + j;
          }
        }
        out.data()[k] = w;
      } else {
        for (index_t r = 0; r < p.reduced; ++r) {
          decode(L, p.nk, p.nr, r, idx);
          ev.seek(idx);
          for (index_t j = 0; j < p.ni; ++j) {
            const T v = ev.at(j);
            if (r == 0 || better<Max>(v, best[j])) best[j] = v, where[j] = r;
          }
        }
        std::copy(where.begin(), where.end(), out.data() + k * p.ni);
      }
    }
  });
  return out;
}
}  // namespace detail

#define DYNEXPR_ARG_REDUCTION(NAME, MAX)                                                    \
  template <Operand E>                                                                      \
  std::int64_t NAME(E&& e) {                                                                \
    return detail::arg_reduce<MAX>(as_expr(std::forward<E>(e)), {}, false).data()[0];       \
  }                                                                                         \
  template <Operand E>                                                                      \
  Tensor<std::int64_t> NAME(E&& e, int axis, bool keepdims = false) {                       \
    return detail::arg_reduce<MAX>(as_expr(std::forward<E>(e)), detail::axes_of(axis), keepdims); \
  }
DYNEXPR_ARG_REDUCTION(argmax, true)
DYNEXPR_ARG_REDUCTION(argmin, false)
#undef DYNEXPR_ARG_REDUCTION

}  // namespace dynexpr
