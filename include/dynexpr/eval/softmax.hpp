// dynexpr/eval/softmax.hpp — softmax, log_softmax and logsumexp along an axis, each
// reading its input once.
//
// Note [online softmax]
// Written with the reductions, softmax is max(x) (a read), sum(exp(x - m)) (a read) and
// exp(x - m) / s (a read and a write): three reads of x from memory. Here a row is cut
// into blocks of `softmax_block` elements. For each block, while it is in L1: its max
// mb, then e = exp(x - mb) (stored into the output, for softmax) and their sum. The
// row's running max M and sum S take the block in as the online softmax does (Milakov &
// Gimelshein 2018), S = S·exp(M - M') + s_b·exp(mb - M'), once per block rather than
// once per element. A second pass scales each block of the output by exp(mb - M) / S
// (softmax: the output is in cache for rows up to L2's size), or writes x - M - log(S)
// (log_softmax). One exp per element, as the three-pass form.
//
// Values as scipy.special's (NumPy has no softmax): a row of -inf gives NaN from softmax
// and log_softmax (0/0) and -inf from logsumexp (log 0); a NaN in a row gives NaN for the
// row; -inf entries of a finite row give 0 (softmax) and -inf (log_softmax). Sums are
// taken in the input's precision within a block and in double across blocks.
//
// Rows are split over threads, one row per thread at a time: a single long row (a 1-D
// input) runs on one thread. Another axis than the last takes the max and the sum of
// exps in one read (Note [max and sum of exps together]), then writes the output.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "dynexpr/eval/reductions.hpp"

namespace dynexpr {

/// Elements of one block of a row (8 or 16 KB: in L1 between its two reads).
inline constexpr index_t softmax_block = 2048;

namespace detail_softmax {
namespace hn = hwy::HWY_NAMESPACE;

enum class want { softmax, log_softmax, logsumexp };

/// The max of x[b, e), NaN if one is NaN.
template <class D>
hn::TFromD<D> block_max(D d, const hn::TFromD<D>* x, index_t b, index_t e) {
  using F = hn::TFromD<D>;
  const index_t n = static_cast<index_t>(hn::Lanes(d));
  const auto lo = hn::Set(d, -std::numeric_limits<F>::infinity());
  auto m0 = lo, m1 = lo;
  index_t i = b;
  for (; i + 2 * n <= e; i += 2 * n) {
    m0 = ops::maximum_op::simd(d, m0, hn::LoadU(d, x + i));
    m1 = ops::maximum_op::simd(d, m1, hn::LoadU(d, x + i + n));
  }
  for (; i + n <= e; i += n) m0 = ops::maximum_op::simd(d, m0, hn::LoadU(d, x + i));
  alignas(64) F lanes[simd::max_lanes_v<D>];
  hn::Store(ops::maximum_op::simd(d, m0, m1), d, lanes);
  F m = lanes[0];
  for (index_t j = 1; j < n; ++j) m = ops::detail::scalar_max(m, lanes[j]);
  for (; i < e; ++i) m = ops::detail::scalar_max(m, x[i]);
  return m;
}

/// The sum of exp(x - mb) over [b, e), each also stored to out[i] when out is given.
template <class D>
double block_exp_sum(D d, const hn::TFromD<D>* x, hn::TFromD<D>* out, hn::TFromD<D> mb, index_t b,
                     index_t e) {
  using F = hn::TFromD<D>;
  const index_t n = static_cast<index_t>(hn::Lanes(d));
  const auto vm = hn::Set(d, mb);
  auto s0 = hn::Zero(d), s1 = hn::Zero(d);
  index_t i = b;
  for (; i + 2 * n <= e; i += 2 * n) {
    const auto e0 = ops::exp_op::simd(d, hn::Sub(hn::LoadU(d, x + i), vm));
    const auto e1 = ops::exp_op::simd(d, hn::Sub(hn::LoadU(d, x + i + n), vm));
    if (out) hn::StoreU(e0, d, out + i), hn::StoreU(e1, d, out + i + n);
    s0 = hn::Add(s0, e0), s1 = hn::Add(s1, e1);
  }
  for (; i + n <= e; i += n) {
    const auto e0 = ops::exp_op::simd(d, hn::Sub(hn::LoadU(d, x + i), vm));
    if (out) hn::StoreU(e0, d, out + i);
    s0 = hn::Add(s0, e0);
  }
  alignas(64) F lanes[simd::max_lanes_v<D>];
  hn::Store(hn::Add(s0, s1), d, lanes);
  double s = 0;
  for (index_t j = 0; j < n; ++j) s += lanes[j];
  for (; i < e; ++i) {
    const F v = ops::exp_op::scalar(static_cast<F>(x[i] - mb));
    if (out) out[i] = v;
    s += v;
  }
  return s;
}

/// One row of length L: its softmax or log_softmax into out (Note [online softmax]), and
/// its logsumexp returned.
template <want W, class F>
double row(const F* x, F* out, index_t L, F* maxima) {
  const hn::ScalableTag<F> d;
  double M = -std::numeric_limits<double>::infinity(), S = 0;
  bool any = false;  // a block with a max above -inf was taken in
  for (index_t b = 0, k = 0; b < L; b += softmax_block, ++k) {
    const index_t e = std::min(b + softmax_block, L);
    const F mb = block_max(d, x, b, e);
    maxima[k] = mb;
    F* const dst = W == want::softmax ? out : nullptr;
    if (mb == -std::numeric_limits<F>::infinity()) {  // the block is all -inf: exp gives 0
      if (dst) std::fill(dst + b, dst + e, F(0));
      continue;
    }
    const double sb = block_exp_sum(d, x, dst, mb, b, e);
    if (!any) {
      M = mb, S = sb, any = true;
    } else if (mb > M) {
      S = S * std::exp(M - static_cast<double>(mb)) + sb;
      M = mb;
    } else {
      S += sb * std::exp(static_cast<double>(mb) - M);  // NaN in mb: NaN in S
    }
  }
  const double lse = any ? M + std::log(S) : M;  // a row of -inf: -inf
  if constexpr (W == want::softmax) {
    const index_t n = static_cast<index_t>(hn::Lanes(d));
    const double inv = 1.0 / S;  // a row of -inf: S = 0, inf, and 0 * inf is NaN below
    for (index_t b = 0, k = 0; b < L; b += softmax_block, ++k) {
      const index_t e = std::min(b + softmax_block, L);
      const double scale = any ? std::exp(static_cast<double>(maxima[k]) - M) * inv
                               : std::numeric_limits<double>::quiet_NaN();
      const F f = static_cast<F>(scale);
      const auto vf = hn::Set(d, f);
      index_t i = b;
      for (; i + n <= e; i += n) hn::StoreU(hn::Mul(hn::LoadU(d, out + i), vf), d, out + i);
      for (; i < e; ++i) out[i] *= f;
    }
  } else if constexpr (W == want::log_softmax) {
    const index_t n = static_cast<index_t>(hn::Lanes(d));
    const F c = any ? static_cast<F>(lse) : std::numeric_limits<F>::quiet_NaN();
    const auto vc = hn::Set(d, c);
    index_t i = 0;
    for (; i + n <= L; i += n) hn::StoreU(hn::Sub(hn::LoadU(d, x + i), vc), d, out + i);
    for (; i < L; ++i) out[i] = x[i] - c;
  }
  return lse;
}

/// x as a C-contiguous tensor of its float result type: itself when it is one, else
/// evaluated (a pointwise input is fused into that one pass).
template <class F, class X>
auto contiguous(const X& x) {
  using Pair = std::pair<View<const F>, Tensor<F>>;
  if constexpr (std::is_same_v<X, leaf_expr<F>>) {
    if (x.view_.is_contiguous()) return Pair(x.view_, Tensor<F>());
  } else if constexpr (std::is_same_v<X, owning_leaf_expr<F>>) {
    if (x.tensor_->view().is_contiguous()) return Pair(x.tensor_->view(), Tensor<F>());
  }
  auto t = dynexpr::eval(cast<F>(x));
  const View<const F> v = t.view();
  return Pair(v, std::move(t));
}

/// Inputs from this size up take another axis than the last through dx::max_sumexp
/// (measured, dx::softmax(x, 0): 512x512 float32 (1 MB) 0.85x of the three reductions,
/// 1024x1024 1.12x, 4096x4096 1.4-1.55x, 100000x16 1.3x).
inline constexpr index_t softmax_pair_min_bytes = index_t{2} << 20;

/// log(t) + m with keepdims' shape, as `rshape`; a reduced set of -inf gives -inf, as
/// along the last axis.
template <class F>
Tensor<F> finish_logsumexp(const Tensor<F>& m, const Tensor<F>& t, const Shape& rshape) {
  auto out = dynexpr::eval(dynexpr::log(t) + m);
  for (index_t i = 0; i < out.size(); ++i)
    if (m.data()[i] == -std::numeric_limits<F>::infinity()) out.data()[i] = m.data()[i];
  return out.view().reshape(rshape).copy();
}

/// max(x, axis) and sum(exp(x - max), axis), keepdims: from one read (dx::max_sumexp, Note
/// [max and sum of exps together]) from softmax_pair_min_bytes up, else the two
/// reductions, which cost less in cache.
template <class F, class X>
std::pair<Tensor<F>, Tensor<F>> max_and_sum_of_exps(const X& x, int axis) {
  if (shape_size(x.shape()) * static_cast<index_t>(sizeof(F)) >= softmax_pair_min_bytes)
    return dynexpr::max_sumexp(cast<F>(x), axis, true);
  auto m = dynexpr::max(cast<F>(x), axis, true);
  auto t = dynexpr::sum(dynexpr::exp(cast<F>(x) - m), axis, true);
  return {std::move(m), std::move(t)};
}

template <want W, class X>
auto along(const X& x, int axis, bool keepdims) {
  using F = float_result_t<typename X::value_type>;
  const Shape s = x.shape();
  const int nd = s.size();
  if (nd == 0) throw value_error("dynexpr: softmax/logsumexp of a 0-d array: it has no axis to reduce");
  axis = normalize_axis(axis, nd);
  Shape rshape;
  for (int i = 0; i < nd; ++i)
    if (i != axis) rshape.push_back(s[i]);
    else if (keepdims) rshape.push_back(1);
  if (axis != nd - 1) {  // another axis: max and sum of exps, then the output
    auto [m, t] = max_and_sum_of_exps<F>(x, axis);
    if constexpr (W == want::softmax) {
      return dynexpr::eval(dynexpr::exp(cast<F>(x) - m) / t);
    } else if constexpr (W == want::log_softmax) {
      return dynexpr::eval(cast<F>(x) - m - dynexpr::log(t));
    } else {
      return finish_logsumexp(m, t, rshape);
    }
  }
  const index_t L = s[nd - 1];
  if (L == 0)  // as NumPy's max over an empty axis
    throw value_error("dynexpr: zero-size array to reduction operation maximum which has no identity");
  Tensor<F> out = W == want::logsumexp ? Tensor<F>::empty(rshape) : Tensor<F>::empty(s);
  const auto [in, keep] = contiguous<F>(x);
  const index_t rows = in.size() / L;
  const F* const src = in.data();
  F* const dst = out.data();
  const index_t blocks = (L + softmax_block - 1) / softmax_block;
  const double work = static_cast<double>(in.size()) * (ops::exp_op::cost + 4);
  parallel::parallel_for(rows, 1, 1, work, [&](index_t rb, index_t re) {
    std::vector<F> maxima(static_cast<std::size_t>(blocks));
    for (index_t r = rb; r < re; ++r) {
      const double lse = row<W>(src + r * L, W == want::logsumexp ? nullptr : dst + r * L, L, maxima.data());
      if constexpr (W == want::logsumexp) dst[r] = static_cast<F>(lse);
    }
  });
  return out;
}
}  // namespace detail_softmax

/// exp(x - max) / sum(exp(x - max)) along `axis` (default the last), in one read of x
/// (Note [online softmax]); float result (float64 for integer input).
template <Operand E>
auto softmax(E&& e, int axis = -1) {
  return detail_softmax::along<detail_softmax::want::softmax>(as_expr(std::forward<E>(e)), axis, false);
}
/// x - logsumexp(x) along `axis`, in one read of x.
template <Operand E>
auto log_softmax(E&& e, int axis = -1) {
  return detail_softmax::along<detail_softmax::want::log_softmax>(as_expr(std::forward<E>(e)), axis, false);
}
/// log(sum(exp(x))) along `axis`, computed without overflow, in one read of x.
template <Operand E>
auto logsumexp(E&& e, int axis = -1, bool keepdims = false) {
  return detail_softmax::along<detail_softmax::want::logsumexp>(as_expr(std::forward<E>(e)), axis, keepdims);
}

}  // namespace dynexpr
