// dynexpr/eval/reduce.hpp — reductions over one axis, several axes or all of them, with
// the pointwise input fused (read through its evaluator, never materialised).
//
// Note [reduction layout]
// The input is walked in the order [kept dims][reduced dims][innermost dim if kept],
// each group coalesced on its own (eval/layout.hpp). Two loops follow from that:
//  - inner: the innermost input dim is reduced. Each output is a reduction of rows, SIMD
//    along the row, in blocks of `reduce_block` elements with four accumulators;
//  - outer: the innermost input dim is kept (column sums). Vectors of outputs accumulate
//    row after row, SIMD across the kept dim.
// Work items are (output, chunk of the reduced space) with chunk boundaries fixed by
// sizes, not by thread count, and partial results are combined in chunk order: the
// result is bitwise the same for 1 and N threads.
//
// Note [summation accuracy]
// Float sums add within a block of at most 1024 elements in the input's precision (as
// NumPy's pairwise sum does within its blocks of 128), across 32 independent lanes, and
// add block totals in double. The error stays well below NumPy's for long rows.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "dynexpr/eval/assign.hpp"

namespace dynexpr {
namespace evaluation {

enum class reduce_kind { sum, prod, min, max, any, all };

/// What one reduction accumulates: the SIMD lane type, the type of block totals, the
/// result type, identities and combining steps.
template <reduce_kind K, class In>
struct reducer {
  static constexpr bool is_float = is_float_v<In>;
  static constexpr bool arith = K == reduce_kind::sum || K == reduce_kind::prod;
  using lane_t = std::conditional_t<
      arith, std::conditional_t<is_float, In, std::int64_t>,
      std::conditional_t<K == reduce_kind::any || K == reduce_kind::all, std::uint8_t,
                         storage_t<In>>>;
  using total_t = std::conditional_t<arith && is_float, double, lane_t>;
  using result_t = std::conditional_t<
      arith, std::conditional_t<is_float, In, std::int64_t>,
      std::conditional_t<K == reduce_kind::any || K == reduce_kind::all, bool, In>>;

  static constexpr lane_t identity() {
    if constexpr (K == reduce_kind::sum || K == reduce_kind::any) return lane_t(0);
    else if constexpr (K == reduce_kind::prod || K == reduce_kind::all) return lane_t(1);
    else if constexpr (K == reduce_kind::min)
      return is_float ? std::numeric_limits<lane_t>::infinity() : std::numeric_limits<lane_t>::max();
    else
      return is_float ? -std::numeric_limits<lane_t>::infinity() : std::numeric_limits<lane_t>::lowest();
  }
  template <class D>
  static DYNEXPR_INLINE hn::Vec<D> combine(D d, hn::Vec<D> a, hn::Vec<D> b) {
    if constexpr (K == reduce_kind::sum) return hn::Add(a, b);
    else if constexpr (K == reduce_kind::prod) return ops::mul_op::simd(d, a, b);
    else if constexpr (K == reduce_kind::min || K == reduce_kind::all) return ops::minimum_op::simd(d, a, b);
    else return ops::maximum_op::simd(d, a, b);
  }
  static total_t combine_total(total_t a, total_t b) {
    if constexpr (K == reduce_kind::sum) return a + b;
    else if constexpr (K == reduce_kind::prod) return ops::mul_op::scalar(a, b);
    else if constexpr (K == reduce_kind::min || K == reduce_kind::all) return ops::detail::scalar_min(a, b);
    else return ops::detail::scalar_max(a, b);
  }
  template <class D>
  static total_t reduce_lanes(D d, hn::Vec<D> v) {
    alignas(64) lane_t buf[simd::max_lanes_v<D>];
    hn::Store(v, d, buf);
    total_t t = static_cast<total_t>(identity());
    for (std::size_t i = 0; i < hn::Lanes(d); ++i) t = combine_total(t, static_cast<total_t>(buf[i]));
    return t;
  }
  /// Lanes j.. of the input as lane_t. any/all read truth values as 0/1 bytes: converting
  /// the value itself to a byte would truncate (256 -> 0, 0.5 -> 0, NaN -> 0).
  template <mode M, class Ev, class DL, class DA>
  static DYNEXPR_INLINE hn::Vec<DA> read(const Ev& ev, DL dl, DA da, index_t j) {
    if constexpr (K == reduce_kind::any || K == reduce_kind::all)
      return hn::IfThenElseZero(mask_as<M>(ev, dl, da, j), hn::Set(da, lane_t(1)));
    else return value_as<M>(ev, dl, da, j);
  }
  static result_t finish(total_t t) {
    if constexpr (std::is_same_v<result_t, bool>) return t != 0;
    else return static_cast<result_t>(t);
  }
};

/// Elements of the reduced space that one work item covers.
inline constexpr index_t reduce_block = 1024;
inline constexpr index_t reduce_chunk = 32768;
/// Outputs one outer-loop item accumulates side by side (a multiple of every lane count).
inline constexpr index_t outer_width = 512;
/// Rows accumulated in the input's precision before flushing into the totals.
inline constexpr index_t outer_flush = 128;

/// The plan of one reduction: the grouped layout and the sizes of each group.
struct reduce_plan {
  layout L;
  int nk = 0, nr = 0;       // coalesced dims in the kept and reduced groups
  bool outer = false;       // an innermost kept dim exists (the last coalesced dim)
  index_t kept = 1;         // number of outputs along the kept group (excl. the inner dim)
  index_t reduced = 1;      // elements reduced into each output
  index_t ni = 1;           // extent of the innermost kept dim (outer loop only)
  Shape out_shape;          // result shape (with or without kept 1s)
};

/// Groups: 0 kept, 1 reduced, 2 innermost kept.
inline reduce_plan make_reduce_plan(const Shape& in, const bool* reduce_axis, bool keepdims,
                                    const Strides* operands, std::size_t n_operands) {
  reduce_plan p;
  const int n = in.size();
  int order[max_rank], groups[max_rank], t = 0;
  const bool inner_kept = n > 0 && !reduce_axis[n - 1] && in[n - 1] != 1;
  for (int i = 0; i < n; ++i) groups[i] = reduce_axis[i] ? 1 : 0;
  if (inner_kept) groups[n - 1] = 2;
  for (int g = 0; g < 3; ++g)
    for (int i = 0; i < n; ++i)
      if (groups[i] == g) order[t++] = i;
  p.L = make_layout(in, operands, n_operands, order, groups);
  for (int i = 0; i < n; ++i) {
    if (!reduce_axis[i]) p.out_shape.push_back(in[i]);
    else if (keepdims) p.out_shape.push_back(1);
  }
  for (int k = 0; k < p.L.nd; ++k) {
    if (p.L.last[k] < 0) continue;  // the lone size-1 dim of a single element
    if (p.L.group[k] == 0) ++p.nk, p.kept *= p.L.extent[k];
    else if (p.L.group[k] == 1) ++p.nr, p.reduced *= p.L.extent[k];
    else p.outer = true, p.ni = p.L.extent[k];
  }
  // Size-0 dims are never dropped; a reduced axis of size 0 makes `reduced` 0.
  for (int i = 0; i < n; ++i)
    if (reduce_axis[i] && in[i] == 0) p.reduced = 0;
  // Always give the reduced group one dim (a virtual one of extent 1, stride 0), so
  // that the loops below have one shape.
  if (p.nr == 0) {
    const int at = p.nk;
    for (int k = p.L.nd; k > at; --k) {
      p.L.extent[k] = p.L.extent[k - 1];
      p.L.last[k] = p.L.last[k - 1];
      p.L.group[k] = p.L.group[k - 1];
    }
    if (p.L.nd == 1 && p.L.last[0] < 0) {  // single element: replace, don't insert
      p.L.group[0] = 1;
    } else {
      p.L.extent[at] = 1;
      p.L.last[at] = -1;
      p.L.group[at] = 1;
      ++p.L.nd;
    }
    p.nr = 1;
  }
  return p;
}

/// Splits a linear index over dims [first, first + count) of the layout into idx.
inline void decode(const layout& L, int first, int count, index_t lin, index_t* idx) {
  for (int k = first + count - 1; k >= first; --k) {
    idx[k] = lin % L.extent[k];
    lin /= L.extent[k];
  }
}

/// The inner loop's work item (output k, chunk c of its reduced space): calls
/// segment(jb, je) for each piece of a row in it, with ev seeked to that row. For
/// run_moments; run_reduce keeps the same loop written out, because through this
/// lambda its sums of short rows took 10% longer (100000 rows of 16: 1.02 -> 1.15 ms).
template <class Ev, class F>
DYNEXPR_INLINE void for_each_segment(const reduce_plan& p, Ev& ev, index_t* idx, index_t k, index_t c,
                                     F&& segment) {
  const layout& L = p.L;
  const index_t row = L.extent[L.nd - 1];
  index_t pos = c * reduce_chunk;
  const index_t end = std::min(pos + reduce_chunk, p.reduced);
  decode(L, 0, p.nk, k, idx);
  while (pos < end) {
    const index_t r = pos / row, jb = pos % row;
    const index_t je = std::min(row, jb + (end - pos));
    decode(L, p.nk, p.nr - 1, r, idx);
    ev.seek(idx);
    segment(jb, je);
    pos += je - jb;
  }
}

/// Reduces the lanes [jb, je) of the current row into a total.
template <class R, mode M, class DL, class DA, class Ev>
DYNEXPR_INLINE typename R::total_t reduce_segment(DL dl, DA da, const Ev& ev, index_t jb,
                                                  index_t je) {
  using lane_t = typename R::lane_t;
  const index_t n = static_cast<index_t>(hn::Lanes(da));
  const auto id = hn::Set(da, R::identity());
  typename R::total_t total = static_cast<typename R::total_t>(R::identity());
  for (index_t b = jb; b < je; b += reduce_block) {
    const index_t be = std::min(b + reduce_block, je);
    auto a0 = id, a1 = id, a2 = id, a3 = id;
    index_t j = b;
    for (; j + 4 * n <= be; j += 4 * n) {
      a0 = R::combine(da, a0, R::template read<M>(ev, dl, da, j));
      a1 = R::combine(da, a1, R::template read<M>(ev, dl, da, j + n));
      a2 = R::combine(da, a2, R::template read<M>(ev, dl, da, j + 2 * n));
      a3 = R::combine(da, a3, R::template read<M>(ev, dl, da, j + 3 * n));
    }
    for (; j + n <= be; j += n) a0 = R::combine(da, a0, R::template read<M>(ev, dl, da, j));
    if (j < be) {
      const auto x = R::template read<mode::tail>(ev, dl, da, j);
      a1 = R::combine(da, a1, hn::IfThenElse(hn::FirstN(da, static_cast<std::size_t>(be - j)), x, id));
    }
    a0 = R::combine(da, R::combine(da, a0, a1), R::combine(da, a2, a3));
    total = R::combine_total(total, R::reduce_lanes(da, a0));
    (void)sizeof(lane_t);
  }
  return total;
}

/// Note [short rows] (eval/assign.hpp) for reductions along an outer axis: columns of a
/// few outputs (a column sum or std of an (n, 3) array) are taken as sp lane-columns of
/// super-rows of q = sp / ni reduced rows, and lane v is merged into column v % ni, in
/// order; the rows left over (fewer than q) are then merged as plain rows. outer(ev,
/// unit_rows, rb, re, ni, put) is the caller's column loop over rows [rb, re) of ni
/// columns, put(k, j, acc) its result for column j of kept index k; merge(into, acc)
/// combines two results, init is the empty one. done(col) receives the p.kept * p.ni
/// results. Returns false, having done nothing, where no super-row applies (a plan of
/// several reduced dims, many columns, few rows, or an operand that moves with a kept dim).
template <class Acc, class E, class Outer, class Merge, class Done>
bool short_row_columns(const reduce_plan& p, const evaluator<E>& ev0, bool unit, index_t lanes, const Acc& init,
                       Outer&& outer, Merge&& merge, Done&& done) {
  const index_t sp = p.nr == 1 && p.ni < outer_width ? short_row_period(p.ni, p.reduced, lanes) : 0;
  if (sp == 0 || sp > outer_width) return false;
  evaluator<E> ev1 = ev0;
  std::vector<unsigned char> tiles;
  if (!retile_rows(ev1, p.nk, p.ni, sp, tiles)) return false;
  const index_t q = sp / p.ni, supers = p.reduced / q;
  std::vector<Acc> lane(static_cast<std::size_t>(p.kept * sp), init);
  outer(ev1, true, 0, supers, sp, [&](index_t k, index_t j, const Acc& a) { lane[k * sp + j] = a; });
  std::vector<Acc> col(static_cast<std::size_t>(p.kept * p.ni), init);
  for (index_t k = 0; k < p.kept; ++k)
    for (index_t v = 0; v < sp; ++v) merge(col[k * p.ni + v % p.ni], lane[k * sp + v]);
  if (supers * q < p.reduced)
    outer(ev0, unit, supers * q, p.reduced, p.ni,
          [&](index_t k, index_t j, const Acc& a) { merge(col[k * p.ni + j], a); });
  done(col);
  return true;
}

// Note [short inner rows]
// A reduction along a short last axis ((n, 3) points: (v * v).sum(axis=1), a norm per
// point) reduced each row as one partial SIMD packet: a lane-by-lane load through a
// stack buffer, masked lanes, a horizontal reduction, ~35 ns a row, slower than NumPy
// (5000 rows of 3 doubles: 160 us against NumPy's 90 us). Rows shorter than a vector,
// when every leaf is contiguous over both dimensions, a row repeated along the rows or
// a scalar (retile_rows, Note [short rows] in eval/assign.hpp), are read instead as
// super-rows of P elements (a multiple of the row length and the lane count): full
// packets into a small buffer, then each row's few values combined in order, first to
// last, as NumPy adds a row shorter than its 8-way unrolling. The rows left over (fewer
// than P / row) and every other layout take the row-by-row loop. Generated units' direct
// row reductions (codegen._short_rows) do the same for sum, mean, max and min, and also
// spread a per-row operand (m[:, None] * v) over its row's lanes; there the rows left
// over are folded the same way, so a row's result does not depend on the thread count.

/// Reduces the first outputs of an inner-loop plan (one reduced dim, the last, of fewer
/// elements than a vector) as super-rows; returns how many it wrote (0: none applied).
template <class R, class DL, class E>
index_t short_inner_rows(const reduce_plan& p, const evaluator<E>& ev0, double work,
                         typename R::result_t* out) {
  using lane_t = typename R::lane_t;
  using total_t = typename R::total_t;
  const layout& L = p.L;
  const index_t lanes = static_cast<index_t>(hn::Lanes(DL()));
  const index_t row = L.extent[L.nd - 1];
  if (L.nd != 2 || p.nk != 1 || p.nr != 1 || row >= lanes) return 0;
  const index_t sp = short_row_period(row, p.kept, lanes);
  if (sp == 0) return 0;
  evaluator<E> ev1 = ev0;
  std::vector<unsigned char> tiles;
  if (!retile_rows(ev1, 0, row, sp, tiles)) return 0;
  const index_t q = sp / row, supers = p.kept / q;
  parallel::parallel_for(supers, 1, 1, work, [&](index_t sb, index_t se) {
    evaluator<E> ev = ev1;
    const DL dl;
    const hn::Rebind<lane_t, DL> da;
    std::vector<lane_t> buf(static_cast<std::size_t>(sp));
    index_t idx[max_rank] = {};
    for (index_t s = sb; s < se; ++s) {
      idx[0] = s;
      ev.seek(idx);
      for (index_t j = 0; j < sp; j += lanes) hn::StoreU(R::template read<mode::unit>(ev, dl, da, j), da, buf.data() + j);
      const lane_t* v = buf.data();
      typename R::result_t* o = out + s * q;
      for (index_t r = 0; r < q; ++r, v += row) {
        total_t t = static_cast<total_t>(v[0]);
        for (index_t i = 1; i < row; ++i) t = R::combine_total(t, static_cast<total_t>(v[i]));
        o[r] = R::finish(t);
      }
    }
  });
  return supers * q;
}

/// Runs reduction K of expression e (already lowered) with the given plan into out.
template <reduce_kind K, class E>
void run_reduce(const E& e, const reduce_plan& p, typename reducer<K, typename E::value_type>::result_t* out) {
  using In = typename E::value_type;
  using R = reducer<K, In>;
  using lane_t = typename R::lane_t;
  using total_t = typename R::total_t;
  using DL = hn::ScalableTag<lane_carrier_t<std::max(widest<E>::value, sizeof(lane_t))>>;
  const layout& L = p.L;
  const evaluator<E> ev0(e, L);
  const bool unit = ev0.unit();
  const index_t outputs = p.kept * p.ni;
  // NumPy raises for an empty reduced space without an identity even when the result is
  // empty too (np.zeros((0, 3, 0)).min(axis=0)), so this check comes first.
  if constexpr (K == reduce_kind::min || K == reduce_kind::max)
    if (p.reduced == 0)
      throw value_error(std::string("dynexpr: zero-size array to reduction operation ") +
                        (K == reduce_kind::min ? "minimum" : "maximum") + " which has no identity");
  if (outputs == 0) return;
  if (p.reduced == 0) {
    std::fill(out, out + outputs, R::finish(static_cast<total_t>(R::identity())));
    return;
  }
  const int nseek = L.nd - 1;  // dims addressed by seek(); the last one is walked by j
  const double work = static_cast<double>(outputs) * static_cast<double>(p.reduced) *
                      (cost_per_element_v<E> + 1);
  if (!p.outer) {
    // Inner loop: each output reduces `reduced` elements, rows of length `row` each.
    const index_t row = L.extent[L.nd - 1];
    const index_t chunks = (p.reduced + reduce_chunk - 1) / reduce_chunk;
    const index_t items = p.kept * chunks;
    // Outputs [0, first) come from super-rows (Note [short inner rows]).
    const index_t first = short_inner_rows<R, DL>(p, ev0, work, out);
    std::vector<total_t> partial(chunks > 1 ? items : 0);
    const index_t grain = chunks > 1 ? 1 : std::max<index_t>(1, reduce_chunk / p.reduced);
    parallel::parallel_for(items - first, grain, 1, work, [&](index_t ib0, index_t ie0) {
      evaluator<E> ev = ev0;
      const DL dl;
      const hn::Rebind<lane_t, DL> da;
      index_t idx[max_rank] = {};
      for (index_t it = ib0 + first, ie = ie0 + first; it < ie; ++it) {
        const index_t k = it / chunks, c = it % chunks;
        index_t pos = c * reduce_chunk;
        const index_t end = std::min(pos + reduce_chunk, p.reduced);
        decode(L, 0, p.nk, k, idx);
        total_t total = static_cast<total_t>(R::identity());
        while (pos < end) {
          const index_t r = pos / row, jb = pos % row;
          const index_t je = std::min(row, jb + (end - pos));
          decode(L, p.nk, p.nr - 1, r, idx);
          ev.seek(idx);
          total = R::combine_total(total, unit ? reduce_segment<R, mode::unit>(dl, da, ev, jb, je)
                                                : reduce_segment<R, mode::general>(dl, da, ev, jb, je));
          pos += je - jb;
        }
        if (chunks > 1) partial[it] = total;
        else out[k] = R::finish(total);
      }
    });
    if (chunks > 1)
      for (index_t k = 0; k < p.kept; ++k) {
        total_t t = partial[k * chunks];
        for (index_t c = 1; c < chunks; ++c) t = R::combine_total(t, partial[k * chunks + c]);
        out[k] = R::finish(t);
      }
    return;
  }
  // Outer loop: outputs along the innermost kept dim accumulate across reduced rows.
  // totals(k, j, t) receives the total of column j (of ni) for kept index k; rows
  // [rb0, re0) of the reduced dims are walked with evs, seeked through L.
  auto outer_loop = [&](const evaluator<E>& evs, const bool unit_rows, index_t rb0, index_t re0,
                        index_t ni, auto&& totals) {
    const index_t rows = re0 - rb0;
    const double range_work = static_cast<double>(p.kept * rows * ni) * (cost_per_element_v<E> + 1);
    const index_t jblocks = (ni + outer_width - 1) / outer_width;
    const index_t rows_per_chunk = std::max<index_t>(outer_flush, reduce_chunk / std::min(ni, outer_width));
    const index_t rchunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
    const index_t items = p.kept * jblocks * rchunks;
    std::vector<total_t> partial(rchunks > 1 ? static_cast<std::size_t>(items) * outer_width : 0);
    parallel::parallel_for(items, 1, 1, range_work, [&](index_t ib, index_t ie) {
      evaluator<E> ev = evs;
      const DL dl;
      const hn::Rebind<lane_t, DL> da;
      const index_t n = static_cast<index_t>(hn::Lanes(da));
      alignas(64) lane_t acc[outer_width];
      total_t tot[outer_width];
      index_t idx[max_rank] = {};
      for (index_t it = ib; it < ie; ++it) {
        const index_t k = it / (jblocks * rchunks);
        const index_t jbk = (it / rchunks) % jblocks, c = it % rchunks;
        const index_t jb = jbk * outer_width, w = std::min(outer_width, ni - jb);
        const index_t r0 = rb0 + c * rows_per_chunk, r1 = std::min(re0, r0 + rows_per_chunk);
        std::fill(tot, tot + w, static_cast<total_t>(R::identity()));
        decode(L, 0, p.nk, k, idx);
        for (index_t rb = r0; rb < r1; rb += outer_flush) {
          std::fill(acc, acc + outer_width, R::identity());
          for (index_t r = rb, re = std::min(r1, rb + outer_flush); r < re; ++r) {
            decode(L, p.nk, p.nr, r, idx);
            ev.seek(idx);
            index_t v = 0;
            for (; v + n <= w; v += n) {
              const auto x = unit_rows ? R::template read<mode::unit>(ev, dl, da, jb + v)
                                       : R::template read<mode::general>(ev, dl, da, jb + v);
              hn::Store(R::combine(da, hn::Load(da, acc + v), x), da, acc + v);
            }
            if (v < w) {
              const auto x = R::template read<mode::tail>(ev, dl, da, jb + v);
              const auto m = hn::FirstN(da, static_cast<std::size_t>(w - v));
              hn::Store(R::combine(da, hn::Load(da, acc + v), hn::IfThenElse(m, x, hn::Set(da, R::identity()))), da, acc + v);
            }
          }
          for (index_t v = 0; v < w; ++v) tot[v] = R::combine_total(tot[v], static_cast<total_t>(acc[v]));
        }
        if (rchunks > 1) std::copy(tot, tot + w, partial.begin() + it * outer_width);
        else
          for (index_t v = 0; v < w; ++v) totals(k, jb + v, tot[v]);
      }
    });
    if (rchunks > 1)
      for (index_t k = 0; k < p.kept; ++k)
        for (index_t jbk = 0; jbk < jblocks; ++jbk) {
          const index_t jb = jbk * outer_width, w = std::min(outer_width, ni - jb);
          const index_t base = (k * jblocks + jbk) * rchunks;
          for (index_t v = 0; v < w; ++v) {
            total_t t = partial[base * outer_width + v];
            for (index_t c = 1; c < rchunks; ++c) t = R::combine_total(t, partial[(base + c) * outer_width + v]);
            totals(k, jb + v, t);
          }
        }
  };

  const index_t lanes = static_cast<index_t>(hn::Lanes(DL()));
  if (short_row_columns(
          p, ev0, unit, lanes, static_cast<total_t>(R::identity()), outer_loop,
          [](total_t& into, const total_t& t) { into = R::combine_total(into, t); },
          [&](const std::vector<total_t>& col) {
            for (index_t i = 0; i < p.kept * p.ni; ++i) out[i] = R::finish(col[static_cast<std::size_t>(i)]);
          }))
    return;
  outer_loop(ev0, unit, 0, p.reduced, p.ni,
             [&](index_t k, index_t j, total_t t) { out[k * p.ni + j] = R::finish(t); });
  (void)nseek;
}

/// Which axes a call reduces: all, one, or a list (negative axes count from the end).
struct axis_set {
  bool all = true;
  Shape list;
  void mark(int ndim, bool* reduce) const {
    for (int i = 0; i < ndim; ++i) reduce[i] = all;
    if (all) return;
    for (index_t a : list) {
      const int ax = normalize_axis(static_cast<int>(a), ndim);
      if (reduce[ax]) throw value_error("dynexpr: duplicate value in 'axis'");
      reduce[ax] = true;
    }
  }
};

template <class E>
reduce_plan plan_for(const E& e, const axis_set& axes, bool keepdims) {
  const Shape in = e.shape();
  bool reduce[max_rank];
  axes.mark(in.size(), reduce);
  std::array<Strides, leaf_count_v<E> + 1> operands;
  std::size_t n_ops = 0;
  for_each_leaf(e, [&](const auto& leaf) {
    operands[n_ops++] = broadcast_strides(leaf.shape(), leaf.strides(), in);
  });
  return make_reduce_plan(in, reduce, keepdims, operands.data(), n_ops);
}

/// Reduction K of expression x over `axes` into a new Tensor.
template <reduce_kind K, class X>
auto reduce_to_tensor(const X& x, const axis_set& axes, bool keepdims) {
  using R = reducer<K, typename X::value_type>;
  const auto low = lower(x);
  const reduce_plan p = plan_for(low, axes, keepdims);
  auto out = Tensor<typename R::result_t>::empty(p.out_shape);
  run_reduce<K>(low, p, out.data());
  return out;
}

}  // namespace evaluation
}  // namespace dynexpr
