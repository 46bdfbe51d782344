// dynexpr/eval/max_sumexp.hpp — the max of x over some axes and the sum of exp(x - max)
// over them, in one read of x.
//
// Note [max and sum of exps together]
// Softmax and logsumexp along an axis other than the last (a column softmax, a softmax
// over a whole array) start with m = max(x) (a read of x) and s = sum(exp(x - m)) (a
// second read). Here both come from one read. The reduced space is cut into blocks that
// stay in cache: `moment_block` elements of a row, or, for column reductions, as many
// rows of a column tile as fit `moment_tile_bytes` (the blocks of Note [one-pass
// moments]). Each block is read twice while in cache: its max mb, then, about the
// running max M' = max(M, mb), the sum of exp(x - M'). The running sum is rescaled once
// per block and column, S = S·exp(M - M') + s_b (Milakov & Gimelshein 2018's online
// softmax, by blocks as Note [online softmax]). Work items (row chunks, column tiles)
// merge in item order, S = S_a·exp(M_a - M) + S_b·exp(M_b - M): the result is the same
// on 1 and N threads.
//
// Values as NumPy's two reductions give them: m is NumPy's max exactly (NaN if any is
// NaN); s is NaN wherever m is not finite (NumPy's x - m there is inf - inf or NaN:
// a reduced set of -inf, one holding +inf or a NaN), else the sum of exp(x - m), where
// -inf entries add 0. exps are added in the input's precision within a block and in
// double across blocks: the error of s is about n_b·u + O(n·u_double), not more than
// NumPy's O(n·u) for a sum along an outer axis.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "dynexpr/eval/moments.hpp"
#include "dynexpr/eval/reduce.hpp"

namespace dynexpr {
namespace evaluation {

/// A running max M and sum S of exp(x - M) (Note [max and sum of exps together]);
/// M = -inf: nothing above -inf taken in yet.
struct max_sumexp_acc {
  double m = -std::numeric_limits<double>::infinity(), s = 0;
  /// Takes in a set whose max is mb and whose sum of exp(x - mb) is sb.
  void merge(double mb, double sb) {
    if (mb != mb) m = mb;  // a NaN max: the result's NaN (s is NaN then too)
    if (m != m || mb == -std::numeric_limits<double>::infinity()) return;
    if (mb > m) {
      s = (m == -std::numeric_limits<double>::infinity() ? 0.0 : s * std::exp(m - mb)) + sb;
      m = mb;
    } else if (mb == m) {  // a block taken about the running max: most of them, no exp
      s += sb;
    } else {
      s += sb * std::exp(mb - m);
    }
  }
  void merge(const max_sumexp_acc& o) { merge(o.m, o.s); }
  /// s as NumPy's sum(exp(x - max(x))): NaN where the max is not finite.
  double sum() const { return std::isfinite(m) ? s : std::numeric_limits<double>::quiet_NaN(); }
};

namespace detail_max_sumexp {
/// Lanes [jb, je) of the current row as blocks of `moment_block`, taken into a.
template <mode M, class DL, class DF, class Ev>
DYNEXPR_INLINE void row_blocks(DL dl, DF df, const Ev& ev, index_t jb, index_t je, max_sumexp_acc& a) {
  using F = hn::TFromD<DF>;
  using R = reducer<reduce_kind::max, F>;
  const index_t n = static_cast<index_t>(hn::Lanes(df));
  const auto lo = hn::Set(df, -std::numeric_limits<F>::infinity());
  for (index_t b = jb; b < je; b += moment_block) {
    const index_t be = std::min(b + moment_block, je);
    // Pass 1: the block's max.
    auto m0 = lo, m1 = lo;
    index_t j = b;
    for (; j + 2 * n <= be; j += 2 * n) {
      m0 = R::combine(df, m0, R::template read<M>(ev, dl, df, j));
      m1 = R::combine(df, m1, R::template read<M>(ev, dl, df, j + n));
    }
    for (; j + n <= be; j += n) m0 = R::combine(df, m0, R::template read<M>(ev, dl, df, j));
    const index_t tail = be - j;
    const auto keep = hn::FirstN(df, static_cast<std::size_t>(tail));
    if (tail > 0) m1 = R::combine(df, m1, hn::IfThenElse(keep, R::template read<mode::tail>(ev, dl, df, j), lo));
    const double mb = static_cast<double>(R::reduce_lanes(df, R::combine(df, m0, m1)));
    if (mb == -std::numeric_limits<double>::infinity()) continue;  // all -inf: exps are 0
    const double mt = mb != mb ? mb : std::max(a.m, mb);  // the max the exps are taken about
    if (!std::isfinite(mt)) {  // +inf or NaN: the result's s is NaN, its m this
      a.merge(mb, 0.0);
      continue;
    }
    // Pass 2, over the block in cache: exp(x - mt).
    const auto vm = hn::Set(df, static_cast<F>(mt));
    auto s0 = hn::Zero(df), s1 = hn::Zero(df);
    j = b;
    for (; j + 2 * n <= be; j += 2 * n) {
      s0 = hn::Add(s0, ops::exp_op::simd(df, hn::Sub(R::template read<M>(ev, dl, df, j), vm)));
      s1 = hn::Add(s1, ops::exp_op::simd(df, hn::Sub(R::template read<M>(ev, dl, df, j + n), vm)));
    }
    for (; j + n <= be; j += n)
      s0 = hn::Add(s0, ops::exp_op::simd(df, hn::Sub(R::template read<M>(ev, dl, df, j), vm)));
    if (tail > 0)
      s1 = hn::Add(s1, hn::IfThenElseZero(keep, ops::exp_op::simd(
                                                    df, hn::Sub(R::template read<mode::tail>(ev, dl, df, j), vm))));
    const double sb = hn::GetLane(hn::SumOfLanes(df, hn::Add(s0, s1)));
    a.merge(mt, sb);
  }
}

/// Rows [rb, re) of the column tile [jb, jb + w) taken into the tile's running maxima
/// and sums (m, s: w doubles each). bm and mt are scratch of w lanes.
template <mode M, class DL, class DF, class Ev>
void tile_block(DL dl, DF df, Ev& ev, const layout& L, const reduce_plan& p, index_t* idx, index_t jb,
                index_t w, index_t rb, index_t re, hn::TFromD<DF>* bm, hn::TFromD<DF>* mt, hn::TFromD<DF>* sb,
                double* m, double* s) {
  using F = hn::TFromD<DF>;
  using R = reducer<reduce_kind::max, F>;
  const index_t n = static_cast<index_t>(hn::Lanes(df));
  const index_t full = w / n * n;
  const auto last = hn::FirstN(df, static_cast<std::size_t>(w - full));
  const auto lo = hn::Set(df, -std::numeric_limits<F>::infinity());
  // Lanes [w, wp) of the last vector are computed and masked off. Their x repeat column
  // w - 1 (Note [padding lanes]), so they hold that column's max, or -inf, not stale
  // scratch, and raise no floating-point flag the real lanes do not (an exp of x less a
  // stale max overflowed).
  const index_t wp = full < w ? full + n : w;
  std::fill(bm, bm + wp, -std::numeric_limits<F>::infinity());
  for (index_t r = rb; r < re; ++r) {  // pass 1: the block's max of each column
    decode(L, p.nk, p.nr, r, idx);
    ev.seek(idx);
    for (index_t v = 0; v < full; v += n)
      hn::Store(R::combine(df, hn::Load(df, bm + v), R::template read<M>(ev, dl, df, jb + v)), df, bm + v);
    if (full < w)
      hn::Store(R::combine(df, hn::Load(df, bm + full),
                           hn::IfThenElse(last, R::template read<mode::tail>(ev, dl, df, jb + full), lo)),
                df, bm + full);
  }
  // The max each column's exps are taken about: the running max with this block's. A
  // column that is all -inf so far takes them about 0 (its x are -inf: exp gives 0), one
  // whose max is +inf or NaN about 0 too (its s is NaN whatever they give).
  for (index_t v = 0; v < w; ++v) {
    const double b = bm[v];
    const double t = b != b ? b : std::max(m[v], b);
    mt[v] = std::isfinite(t) ? static_cast<F>(t) : F(0);
  }
  std::fill(mt + w, mt + wp, mt[w - 1]);
  std::fill(sb, sb + wp, F(0));
  for (index_t r = rb; r < re; ++r) {  // pass 2, over the block in cache
    decode(L, p.nk, p.nr, r, idx);
    ev.seek(idx);
    for (index_t v = 0; v < full; v += n) {
      const auto e = ops::exp_op::simd(df, hn::Sub(R::template read<M>(ev, dl, df, jb + v), hn::Load(df, mt + v)));
      hn::Store(hn::Add(hn::Load(df, sb + v), e), df, sb + v);
    }
    if (full < w) {
      const auto e = hn::IfThenElseZero(
          last, ops::exp_op::simd(df, hn::Sub(R::template read<mode::tail>(ev, dl, df, jb + full),
                                              hn::Load(df, mt + full))));
      hn::Store(hn::Add(hn::Load(df, sb + full), e), df, sb + full);
    }
  }
  for (index_t v = 0; v < w; ++v) {
    max_sumexp_acc a{m[v], s[v]};
    const double b = bm[v];
    if (std::isfinite(b))  // its exps were taken about the new running max
      a.merge(m[v] != m[v] ? m[v] : std::max(m[v], b), static_cast<double>(sb[v]));
    else  // -inf: adds nothing; +inf or NaN: the max, and s NaN
      a.merge(b, 0.0);
    m[v] = a.m, s[v] = a.s;
  }
}
}  // namespace detail_max_sumexp

/// The max and the sum of exp(x - max) of expression e (lowered, of a float type) for
/// every output k of plan p, into out[k] (Note [max and sum of exps together]).
template <class E>
void run_max_sumexp(const E& e, const reduce_plan& p, max_sumexp_acc* out) {
  using F = typename E::value_type;
  static_assert(is_float_v<F>, "dynexpr: max_sumexp is taken of a float expression");
  using DL = hn::ScalableTag<lane_carrier_t<std::max(widest<E>::value, sizeof(F))>>;
  const layout& L = p.L;
  const evaluator<E> ev0(e, L);
  const bool unit = ev0.unit();
  const index_t outputs = p.kept * p.ni;
  if (outputs == 0 || p.reduced == 0) return;
  const double work = static_cast<double>(outputs) * static_cast<double>(p.reduced) *
                      (cost_per_element_v<E> + ops::exp_op::cost + 3);
  if (!p.outer) {  // each output's reduced elements are rows of the last dim
    const DL dl;
    const hn::Rebind<F, DL> df;
    inner_items(p, ev0, work, out, [&](const evaluator<E>& ev, index_t jb, index_t je, max_sumexp_acc& a) {
      if (unit) detail_max_sumexp::row_blocks<mode::unit>(dl, df, ev, jb, je, a);
      else detail_max_sumexp::row_blocks<mode::general>(dl, df, ev, jb, je, a);
    });
    return;
  }
  // Outer loop: column tiles (column_tiles, moments.hpp), each block of rows read twice
  // (max, then exps), over rows [rb0, re0) of the reduced dim(s) and ni columns, walked
  // with evs; put(k, j, acc) receives column j's result for kept index k.
  auto outer = [&](const evaluator<E>& evs, const bool unit_rows, index_t rb0, index_t re0, index_t ni,
                   auto&& put) {
    const column_tiles T(p.kept, ni, re0 - rb0, static_cast<index_t>(sizeof(F)));
    const bool split = T.split();
    const double range_work = static_cast<double>(p.kept * ni * (re0 - rb0)) *
                              (cost_per_element_v<E> + ops::exp_op::cost + 3);
    // per item: its tile's running maxima and sums (split), merged in item order after
    std::vector<double> pm(split ? static_cast<std::size_t>(T.items * outer_width) : 0);
    std::vector<double> ps(pm.size());
    parallel::parallel_for(T.items, 1, 1, range_work, [&](index_t ib, index_t ie) {
      evaluator<E> ev = evs;
      const DL dl;
      const hn::Rebind<F, DL> df;
      alignas(64) F bm[outer_width];
      alignas(64) F mt[outer_width];
      alignas(64) F sb[outer_width];
      double own_m[outer_width], own_s[outer_width];
      index_t idx[max_rank] = {};
      for (index_t it = ib; it < ie; ++it) {
        const auto [k, jb, w, r0, r1] = T.at(it);
        decode(L, 0, p.nk, k, idx);
        double* m = split ? pm.data() + it * outer_width : own_m;
        double* s = split ? ps.data() + it * outer_width : own_s;
        std::fill(m, m + w, -std::numeric_limits<double>::infinity());
        std::fill(s, s + w, 0.0);
        for (index_t rb = rb0 + r0; rb < rb0 + r1; rb += T.block_rows) {
          const index_t re = std::min(rb0 + r1, rb + T.block_rows);
          if (unit_rows) detail_max_sumexp::tile_block<mode::unit>(dl, df, ev, L, p, idx, jb, w, rb, re, bm, mt, sb, m, s);
          else detail_max_sumexp::tile_block<mode::general>(dl, df, ev, L, p, idx, jb, w, rb, re, bm, mt, sb, m, s);
        }
        if (!split)
          for (index_t v = 0; v < w; ++v) put(k, jb + v, max_sumexp_acc{m[v], s[v]});
      }
    });
    if (split)
      for (index_t base = 0; base < T.items; base += T.rchunks) {  // a tile's chunks, in order
        const auto [k, jb, w, r0, r1] = T.at(base);
        for (index_t v = 0; v < w; ++v) {
          max_sumexp_acc t;
          for (index_t c = 0; c < T.rchunks; ++c) {
            const std::size_t at = static_cast<std::size_t>((base + c) * outer_width + v);
            t.merge(pm[at], ps[at]);
          }
          put(k, jb + v, t);
        }
      }
  };

  // Note [short rows] for a few columns (short_row_columns, reduce.hpp)
  const index_t lanes = static_cast<index_t>(hn::Lanes(hn::Rebind<F, DL>()));
  if (short_row_columns(
          p, ev0, unit, lanes, max_sumexp_acc{}, outer, [](auto& into, const max_sumexp_acc& a) { into.merge(a); },
          [&](const std::vector<max_sumexp_acc>& col) { std::copy(col.begin(), col.end(), out); }))
    return;
  outer(ev0, unit, 0, p.reduced, p.ni, [&](index_t k, index_t j, const max_sumexp_acc& a) { out[k * p.ni + j] = a; });
}

}  // namespace evaluation
}  // namespace dynexpr
