// dynexpr/eval/moments.hpp — mean and variance over any axes in one read of the input.
//
// Note [one-pass moments]
// np.var reads its input twice: the mean, then the squared deviations from it. Here the
// input is read from memory once. The reduced space is cut into blocks small enough to
// stay in cache (`moment_block` elements of a row; for column reductions, as many rows
// of the column tile as fit in `moment_tile_bytes`). Each block is reduced twice while
// it is in cache: its sum, then, about its own mean mb, the sums of d = x - mb and d².
// Its sum is n·mb + S(d) and its M2 is S(d²) - S(d)²/n, the corrected two-pass formula
// (Björck; Chan, Golub & LeVeque 1983), whose rounding error is about n_b·u·M2_b for a
// block of n_b elements in the input's precision u, with no dependence on the size of
// the mean. Blocks are merged in double by Chan's update about a shift (moment_sums),
// M2 = M2_a + M2_b + δ²·n_a·n_b / n, δ = mean_b - mean_a, and the merge adds error only
// at double's precision. So the result's relative error is bounded by about
// (n_b + 2)·u_input + O(n·u_double), against NumPy's two-pass O(n·u_input) for a sum
// along an outer axis: never worse, and better for long reductions. tests/cpp/
// test_reduce.cpp ("var/std read once keep two-pass accuracy") checks it against a
// long-double reference on data whose mean is 10^4 (float32) or 10^8 (float64) times
// its spread, where the one-pass textbook formula (S(x²) - S(x)²/n) loses every digit.
//
// The mean comes from the blocks' sums n·mb + S(d), added in double: as accurate as
// dx::mean or more. Where a block holds an inf or a NaN its plain sum is taken instead,
// so the mean is NumPy's (inf, or NaN), and the variance is NaN, as NumPy's inf - inf.
// Work is split into items by size, not by thread count, and partial results merge in
// item order: the result is bitwise the same for 1 and N threads.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "dynexpr/eval/reduce.hpp"

namespace dynexpr {
namespace evaluation {

/// Bytes of one column tile's block of rows (see Note [one-pass moments]): the second
/// read of a block comes from L1/L2.
inline constexpr index_t moment_tile_bytes = 131072;
/// Elements of a row's block (16 or 32 KB: in L1 for the second read).
inline constexpr index_t moment_block = 4096;

/// Running moments of n elements about a shift K (the first block's mean): T = S(x - K)
/// and M2 = S((x - mean)²), plus the plain sum for the inf/NaN case. Shifted sums carry
/// errors proportional to the data's spread, not to its distance from 0: the merge's δ
/// is then as accurate as the data (Note [one-pass moments]).
struct moment_sums {
  double n = 0, k = 0, t = 0, m2 = 0, plain = 0;
  /// Chan's merge of another set into this one, in this set's shift.
  void merge(double nb, double kb, double tb, double m2b, double plainb) {
    if (nb == 0) return;
    if (n == 0) {
      n = nb, k = kb, t = tb, m2 = m2b, plain = plainb;
      return;
    }
    tb += nb * (kb - k);
    const double delta = tb / nb - t / n;
    const double total = n + nb;
    m2 += m2b + delta * delta * (n * nb / total);
    t += tb;
    plain += plainb;
    n = total;
  }
  void merge(const moment_sums& o) { merge(o.n, o.k, o.t, o.m2, o.plain); }
  /// The mean, or NumPy's inf/NaN from the plain sum where the shifted one is not finite.
  double mean() const {
    const double m = k + t / n;
    return std::isfinite(m) ? m : plain / n;
  }
  /// M2 of n values of type F, 0 where only equal values can give it (Note [a constant
  /// column's spread is 0]).
  template <class F>
  double m2_of() const {
    const double m = std::abs(mean());
    if (std::isfinite(m) && m >= 1e-250 && std::sqrt(m2) < std::numeric_limits<F>::epsilon() * m / 16) return 0.0;
    return m2;
  }
};

// Note [a constant column's spread is 0]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The moments of a column of one value (a constant feature) carry rounding: the block
// means differ by the last bits of their divisions, so M2 came out as 1e-62 rather than
// 0. Its float32 variance then underflowed as it was rounded to float, and raised the
// underflow flag (an error under np.errstate(all="raise"), where NumPy is silent).
// The exact answer is known: every |x - mean| <= sqrt(M2), and values of type F within
// eps·|mean| / 16 < ulp(mean) / 8 of the mean lie in an interval narrower than the
// spacing of F there (>= ulp(mean) / 2), which holds one value of F at most. So such an
// M2 can only come from equal values, whose M2 is 0. Unequal values differ by at least
// half an ulp, so their true sqrt(M2) >= ulp / 2.9: far above the bound, which no
// rounding of the one-pass sums (relative n·2^-53) crosses. The variance and standard
// deviation are then divided and rooted in double and rounded to F once.

/// The moments of a tile's columns, as arrays (one moment_sums per column, without n:
/// a tile's columns all have the same count).
struct column_moments {
  double k[outer_width], t[outer_width], m2[outer_width], plain[outer_width];
};

/// moment_sums::merge of b's first w columns (nb elements each) into a's (na each), as
/// vectors of doubles: na and nb are the same for every column, so the divisions are
/// two reciprocals.
inline void merge_columns(column_moments& a, double na, const column_moments& b, double nb, index_t w) {
  if (nb == 0) return;
  if (na == 0) {
    std::copy(b.k, b.k + w, a.k), std::copy(b.t, b.t + w, a.t);
    std::copy(b.m2, b.m2 + w, a.m2), std::copy(b.plain, b.plain + w, a.plain);
    return;
  }
  const double inv_na = 1.0 / na, inv_nb = 1.0 / nb, scale = na * nb / (na + nb);
  const hn::ScalableTag<double> dd;
  const index_t n = static_cast<index_t>(hn::Lanes(dd));
  const auto vnb = hn::Set(dd, nb), via = hn::Set(dd, inv_na), vib = hn::Set(dd, inv_nb),
             vsc = hn::Set(dd, scale);
  index_t v = 0;
  for (; v + n <= w; v += n) {
    const auto tb = hn::MulAdd(vnb, hn::Sub(hn::LoadU(dd, b.k + v), hn::LoadU(dd, a.k + v)), hn::LoadU(dd, b.t + v));
    const auto ta = hn::LoadU(dd, a.t + v);
    const auto delta = hn::Sub(hn::Mul(tb, vib), hn::Mul(ta, via));
    const auto m2 = hn::Add(hn::LoadU(dd, a.m2 + v), hn::MulAdd(hn::Mul(delta, delta), vsc, hn::LoadU(dd, b.m2 + v)));
    hn::StoreU(m2, dd, a.m2 + v);
    hn::StoreU(hn::Add(ta, tb), dd, a.t + v);
    hn::StoreU(hn::Add(hn::LoadU(dd, a.plain + v), hn::LoadU(dd, b.plain + v)), dd, a.plain + v);
  }
  for (; v < w; ++v) {
    const double tb = nb * (b.k[v] - a.k[v]) + b.t[v];
    const double delta = tb * inv_nb - a.t[v] * inv_na;
    a.m2[v] += delta * delta * scale + b.m2[v];
    a.t[v] += tb;
    a.plain[v] += b.plain[v];
  }
}

/// The column tiles of a reduction along outer axes (Note [one-pass moments]), shared by
/// run_moments and run_max_sumexp: tiles of up to `outer_width` outputs along the
/// innermost kept dim; their rows in blocks that fit moment_tile_bytes, each block read
/// twice while in cache; at most 16 chunks of rows per tile, so that their partial
/// results stay few. A work item is one chunk of one tile of one kept index.
struct column_tiles {
  index_t ni, rows, jblocks, block_rows, rows_per_chunk, rchunks, items;
  /// ni columns of `rows` rows for each of `kept` kept indices.
  column_tiles(index_t kept, index_t ni_, index_t rows_, index_t elem_bytes) : ni(ni_), rows(rows_) {
    jblocks = (ni + outer_width - 1) / outer_width;
    const index_t tile = std::min(ni, outer_width);
    block_rows = std::clamp<index_t>(moment_tile_bytes / (tile * elem_bytes), 4, outer_flush);
    const index_t want = std::max({outer_flush, reduce_chunk / tile, (rows + 15) / 16});
    rows_per_chunk = (want + block_rows - 1) / block_rows * block_rows;
    rchunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
    items = kept * jblocks * rchunks;
  }
  bool split() const { return rchunks > 1; }
  /// Work item `it`: kept index k, the tile's first column jb and width w, rows [r0, r1).
  struct item {
    index_t k, jb, w, r0, r1;
  };
  item at(index_t it) const {
    const index_t jbk = (it / rchunks) % jblocks, c = it % rchunks;
    const index_t jb = jbk * outer_width, r0 = c * rows_per_chunk;
    return {it / (jblocks * rchunks), jb, std::min(outer_width, ni - jb), r0, std::min(rows, r0 + rows_per_chunk)};
  }
  /// Rows in chunk c of a tile.
  index_t chunk_rows(index_t c) const { return std::min(rows, (c + 1) * rows_per_chunk) - c * rows_per_chunk; }
};

/// The inner loop of run_moments and run_max_sumexp (a plan without an outer kept dim):
/// each output's reduced elements are rows of the last dim, cut into items of
/// `reduce_chunk` elements. `row(ev, jb, je, acc)` takes the lanes [jb, je) of the current
/// row into an Acc; the chunks of one output merge in item order (Acc::merge), so the
/// result is the same on any thread count.
template <class Acc, class Ev, class Row>
void inner_items(const reduce_plan& p, const Ev& ev0, double work, Acc* out, Row row) {
  const index_t chunks = (p.reduced + reduce_chunk - 1) / reduce_chunk;
  const index_t items = p.kept * chunks;
  std::vector<Acc> partial(chunks > 1 ? items : 0);
  const index_t grain = chunks > 1 ? 1 : std::max<index_t>(1, reduce_chunk / p.reduced);
  parallel::parallel_for(items, grain, 1, work, [&](index_t ib, index_t ie) {
    Ev ev = ev0;
    index_t idx[max_rank] = {};
    for (index_t it = ib; it < ie; ++it) {
      const index_t k = it / chunks, c = it % chunks;
      Acc a;
      for_each_segment(p, ev, idx, k, c, [&](index_t jb, index_t je) { row(ev, jb, je, a); });
      if (chunks > 1) partial[it] = a;
      else out[k] = a;
    }
  });
  if (chunks > 1)
    for (index_t k = 0; k < p.kept; ++k) {
      Acc t;
      for (index_t c = 0; c < chunks; ++c) t.merge(partial[k * chunks + c]);
      out[k] = t;
    }
}

namespace detail_moments {
/// Lanes [jb, je) of the current row as blocks of `moment_block`, merged into s.
template <mode M, class DL, class DF, class Ev>
DYNEXPR_INLINE void row_moments(DL dl, DF df, const Ev& ev, index_t jb, index_t je, moment_sums& s) {
  using F = hn::TFromD<DF>;
  using R = reducer<reduce_kind::sum, F>;
  const index_t n = static_cast<index_t>(hn::Lanes(df));
  const auto zero = hn::Zero(df);
  for (index_t b = jb; b < je; b += moment_block) {
    const index_t be = std::min(b + moment_block, je);
    // Pass 1: the block's sum.
    auto a0 = zero, a1 = zero, a2 = zero, a3 = zero;
    index_t j = b;
    for (; j + 4 * n <= be; j += 4 * n) {
      a0 = hn::Add(a0, R::template read<M>(ev, dl, df, j));
      a1 = hn::Add(a1, R::template read<M>(ev, dl, df, j + n));
      a2 = hn::Add(a2, R::template read<M>(ev, dl, df, j + 2 * n));
      a3 = hn::Add(a3, R::template read<M>(ev, dl, df, j + 3 * n));
    }
    for (; j + n <= be; j += n) a0 = hn::Add(a0, R::template read<M>(ev, dl, df, j));
    const index_t tail = be - j;
    if (tail > 0) {
      const auto x = R::template read<mode::tail>(ev, dl, df, j);
      a1 = hn::Add(a1, hn::IfThenElseZero(hn::FirstN(df, static_cast<std::size_t>(tail)), x));
    }
    const double nb = static_cast<double>(be - b);
    // Lanes added in F: the block's mean is only the shift of pass 2, and its plain sum
    // only the inf/NaN answer (Note [one-pass moments]).
    const double sumb = hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
    // Pass 2, over the block in cache: deviations from the block's own mean.
    const auto mb = hn::Set(df, static_cast<F>(sumb / nb));
    auto q0 = zero, q1 = zero, q2 = zero, q3 = zero, d0 = zero, d1 = zero, d2 = zero, d3 = zero;
    j = b;
    for (; j + 4 * n <= be; j += 4 * n) {
      const auto x0 = hn::Sub(R::template read<M>(ev, dl, df, j), mb);
      const auto x1 = hn::Sub(R::template read<M>(ev, dl, df, j + n), mb);
      const auto x2 = hn::Sub(R::template read<M>(ev, dl, df, j + 2 * n), mb);
      const auto x3 = hn::Sub(R::template read<M>(ev, dl, df, j + 3 * n), mb);
      q0 = hn::MulAdd(x0, x0, q0), d0 = hn::Add(d0, x0);
      q1 = hn::MulAdd(x1, x1, q1), d1 = hn::Add(d1, x1);
      q2 = hn::MulAdd(x2, x2, q2), d2 = hn::Add(d2, x2);
      q3 = hn::MulAdd(x3, x3, q3), d3 = hn::Add(d3, x3);
    }
    for (; j + n <= be; j += n) {
      const auto x0 = hn::Sub(R::template read<M>(ev, dl, df, j), mb);
      q0 = hn::MulAdd(x0, x0, q0), d0 = hn::Add(d0, x0);
    }
    if (tail > 0) {
      const auto x = hn::IfThenElseZero(hn::FirstN(df, static_cast<std::size_t>(tail)),
                                        hn::Sub(R::template read<mode::tail>(ev, dl, df, j), mb));
      q1 = hn::MulAdd(x, x, q1), d1 = hn::Add(d1, x);
    }
    const double sq = hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(q0, q1), hn::Add(q2, q3))));
    const double dev = hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(d0, d1), hn::Add(d2, d3))));
    // S(d)² <= n·S(d²), so M2 >= 0; a rounding below 0 (constant data about an inexact
    // shift) would make std NaN where NumPy gives 0.
    s.merge(nb, static_cast<double>(hn::GetLane(mb)), dev, std::max(0.0, sq - dev * dev / nb), sumb);
  }
}

/// Rows [rb, re) of the column tile [jb, jb + w), reduced twice while in cache: their sums
/// into acc, then, about mean_b = acc / n, the sums of d and d² into dev and sq.
template <mode M, class DL, class DF, class Ev>
void tile_block(DL dl, DF df, Ev& ev, const layout& L, const reduce_plan& p, index_t* idx,
                index_t jb, index_t w, index_t rb, index_t re, hn::TFromD<DF>* acc,
                hn::TFromD<DF>* mean_b, hn::TFromD<DF>* sq, hn::TFromD<DF>* dev) {
  using F = hn::TFromD<DF>;
  using R = reducer<reduce_kind::sum, F>;
  const index_t n = static_cast<index_t>(hn::Lanes(df));
  const index_t full = w / n * n;
  const auto last = hn::FirstN(df, static_cast<std::size_t>(w - full));
  // Lanes [w, wp) of the last vector are computed and masked off. Their x repeat column
  // w - 1 (Note [padding lanes]), so they hold zeros and that column's mean, not stale
  // scratch, and raise no floating-point flag the real lanes do not.
  const index_t wp = full < w ? full + n : w;
  std::fill(acc, acc + wp, F(0));
  for (index_t r = rb; r < re; ++r) {
    decode(L, p.nk, p.nr, r, idx);
    ev.seek(idx);
    for (index_t v = 0; v < full; v += n)
      hn::Store(hn::Add(hn::Load(df, acc + v), R::template read<M>(ev, dl, df, jb + v)), df, acc + v);
    if (full < w)
      hn::Store(hn::Add(hn::Load(df, acc + full),
                        hn::IfThenElseZero(last, R::template read<mode::tail>(ev, dl, df, jb + full))),
                df, acc + full);
  }
  const double inv = 1.0 / static_cast<double>(re - rb);
  for (index_t v = 0; v < w; ++v) mean_b[v] = static_cast<F>(static_cast<double>(acc[v]) * inv);
  std::fill(mean_b + w, mean_b + wp, mean_b[w - 1]);
  std::fill(sq, sq + wp, F(0));
  std::fill(dev, dev + wp, F(0));
  for (index_t r = rb; r < re; ++r) {
    decode(L, p.nk, p.nr, r, idx);
    ev.seek(idx);
    for (index_t v = 0; v < full; v += n) {
      const auto d = hn::Sub(R::template read<M>(ev, dl, df, jb + v), hn::Load(df, mean_b + v));
      hn::Store(hn::MulAdd(d, d, hn::Load(df, sq + v)), df, sq + v);
      hn::Store(hn::Add(hn::Load(df, dev + v), d), df, dev + v);
    }
    if (full < w) {
      const auto d = hn::IfThenElseZero(
          last, hn::Sub(R::template read<mode::tail>(ev, dl, df, jb + full), hn::Load(df, mean_b + full)));
      hn::Store(hn::MulAdd(d, d, hn::Load(df, sq + full)), df, sq + full);
      hn::Store(hn::Add(hn::Load(df, dev + full), d), df, dev + full);
    }
  }
}
}  // namespace detail_moments

/// The moments of expression e (already lowered, of a float type) for every output k of
/// plan p, into out[k].
template <class E>
void run_moments(const E& e, const reduce_plan& p, moment_sums* out) {
  using F = typename E::value_type;
  static_assert(is_float_v<F>, "dynexpr: moments are taken of a float expression");
  using DL = hn::ScalableTag<lane_carrier_t<std::max(widest<E>::value, sizeof(F))>>;
  const layout& L = p.L;
  const evaluator<E> ev0(e, L);
  const bool unit = ev0.unit();
  const index_t outputs = p.kept * p.ni;
  if (outputs == 0) return;
  if (p.reduced == 0) return;  // n = 0 everywhere
  const double work = static_cast<double>(outputs) * static_cast<double>(p.reduced) *
                      (2 * cost_per_element_v<E> + 3);
  if (!p.outer) {  // each output's reduced elements are rows of the last dim
    const DL dl;
    const hn::Rebind<F, DL> df;
    inner_items(p, ev0, work, out, [&](const evaluator<E>& ev, index_t jb, index_t je, moment_sums& s) {
      if (unit) detail_moments::row_moments<mode::unit>(dl, df, ev, jb, je, s);
      else detail_moments::row_moments<mode::general>(dl, df, ev, jb, je, s);
    });
    return;
  }
  // Outer loop: column tiles, each block of rows read twice (sum, then deviations), over
  // rows [rb0, re0) of the reduced dim(s) and ni columns, walked with evs; put(k, j, sums)
  // receives column j's moments for kept index k.
  auto outer = [&](const evaluator<E>& evs, const bool unit_rows, index_t rb0, index_t re0, index_t ni,
                   auto&& put) {
    const column_tiles T(p.kept, ni, re0 - rb0, static_cast<index_t>(sizeof(F)));
    const bool split = T.split();
    const double range_work = static_cast<double>(p.kept * ni * (re0 - rb0)) * (2 * cost_per_element_v<E> + 3);
    std::unique_ptr<column_moments[]> partial(split ? new column_moments[static_cast<std::size_t>(T.items)] : nullptr);
    parallel::parallel_for(T.items, 1, 1, range_work, [&](index_t ib, index_t ie) {
      evaluator<E> ev = evs;
      const DL dl;
      const hn::Rebind<F, DL> df;
      alignas(64) F acc[outer_width];
      alignas(64) F mean_b[outer_width];
      alignas(64) F sq[outer_width];
      alignas(64) F dev[outer_width];
      column_moments block, own;
      index_t idx[max_rank] = {};
      for (index_t it = ib; it < ie; ++it) {
        const auto [k, jb, w, r0, r1] = T.at(it);
        decode(L, 0, p.nk, k, idx);
        column_moments& tot = split ? partial[static_cast<std::size_t>(it)] : own;
        double na = 0;
        for (index_t rb = rb0 + r0; rb < rb0 + r1; rb += T.block_rows) {
          const index_t re = std::min(rb0 + r1, rb + T.block_rows);
          const double nb = static_cast<double>(re - rb);
          if (unit_rows) detail_moments::tile_block<mode::unit>(dl, df, ev, L, p, idx, jb, w, rb, re, acc, mean_b, sq, dev);
          else detail_moments::tile_block<mode::general>(dl, df, ev, L, p, idx, jb, w, rb, re, acc, mean_b, sq, dev);
          const double inv_nb = 1.0 / nb;
          for (index_t v = 0; v < w; ++v) {
            const double dv = dev[v];
            block.k[v] = mean_b[v], block.t[v] = dv, block.plain[v] = acc[v];
            // S(d)² <= n·S(d²): a rounding below 0 would make std NaN (row_moments)
            block.m2[v] = std::max(0.0, static_cast<double>(sq[v]) - dv * dv * inv_nb);
          }
          merge_columns(tot, na, block, nb, w);
          na += nb;
        }
        if (!split)
          for (index_t v = 0; v < w; ++v) put(k, jb + v, moment_sums{na, tot.k[v], tot.t[v], tot.m2[v], tot.plain[v]});
      }
    });
    if (split)
      for (index_t base = 0; base < T.items; base += T.rchunks) {  // a tile's chunks, in order
        const auto [k, jb, w, r0, r1] = T.at(base);
        column_moments& tot = partial[static_cast<std::size_t>(base)];
        double na = static_cast<double>(T.chunk_rows(0));
        for (index_t c = 1; c < T.rchunks; ++c) {
          const double nb = static_cast<double>(T.chunk_rows(c));
          merge_columns(tot, na, partial[static_cast<std::size_t>(base + c)], nb, w);
          na += nb;
        }
        for (index_t v = 0; v < w; ++v) put(k, jb + v, moment_sums{na, tot.k[v], tot.t[v], tot.m2[v], tot.plain[v]});
      }
  };

  // Note [short rows] for a few columns (short_row_columns, reduce.hpp)
  const index_t lanes = static_cast<index_t>(hn::Lanes(hn::Rebind<F, DL>()));
  if (short_row_columns(
          p, ev0, unit, lanes, moment_sums{}, outer, [](auto& into, const moment_sums& a) { into.merge(a); },
          [&](const std::vector<moment_sums>& col) { std::copy(col.begin(), col.end(), out); }))
    return;
  outer(ev0, unit, 0, p.reduced, p.ni, [&](index_t k, index_t j, const moment_sums& s) { out[k * p.ni + j] = s; });
}

}  // namespace evaluation
}  // namespace dynexpr
