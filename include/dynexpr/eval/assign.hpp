// dynexpr/eval/assign.hpp — pointwise evaluation: `dx::assign(out, e)`, `dx::eval(e)`, and
// Tensor construction/assignment from expressions. One pass over memory, SIMD along the
// innermost (coalesced) dimension, spread over the thread pool above its threshold.
//
// Note [aliasing]
// An output may appear among its own operands (`x = x * 2 + y`). Reading and writing the
// same element at the same position in one packet is safe, so a leaf that is the output
// itself (same address, same strides after broadcasting) is fine. Any other overlap
// (a shifted slice, a transposed or broadcast read of the output) is evaluated into a
// temporary first, then copied: NumPy's result, never a half-updated read.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>
#if defined(__unix__)
#include <unistd.h>  // sysconf (last_level_cache_bytes)
#endif

#include "dynexpr/eval/evaluator.hpp"
#include "dynexpr/eval/rewrite.hpp"
#include "dynexpr/expr/traverse.hpp"
#include "dynexpr/ops/operators.hpp"
#include "dynexpr/parallel/thread_pool.hpp"

namespace dynexpr {

namespace evaluation {

/// Where a view's elements lie: [lo, hi) in bytes; empty for an empty view.
struct byte_range {
  const char* lo = nullptr;
  const char* hi = nullptr;
};
template <class T>
byte_range extent_of(const View<T>& v) {
  if (v.size() == 0) return {};
  index_t lo = 0, hi = 0;
  for (int k = 0; k < v.ndim(); ++k) {
    const index_t span = (v.shape()[k] - 1) * v.strides()[k];
    (span < 0 ? lo : hi) += span;
  }
  const char* base = reinterpret_cast<const char*>(v.data());
  const auto sz = static_cast<index_t>(sizeof(T));
  return {base + lo * sz, base + (hi + 1) * sz};
}
inline bool overlaps(byte_range a, byte_range b) { return a.lo < b.hi && b.lo < a.hi; }

/// Whether evaluating e straight into out could read an element after writing it.
template <class T, class E>
bool needs_temporary(const View<T>& out, const E& e) {
  const byte_range o = extent_of(out);
  if (!o.lo) return false;
  bool hazard = false;
  for_each_leaf(e, [&](const auto& leaf) {
    if (hazard || !overlaps(o, extent_of(leaf))) return;
    const bool same = static_cast<const void*>(leaf.data()) == static_cast<const void*>(out.data()) &&
                      sizeof(*leaf.data()) == sizeof(T) &&
                      broadcast_strides(leaf.shape(), leaf.strides(), out.shape()) == out.strides();
    hazard = !same;
  });
  return hazard;
}

/// The size in bytes of the last-level cache that CPU 0 sees: the highest level listed in
/// Linux's /sys/devices/system/cpu/cpu0/cache, else glibc's sysconf, else 0. (sysfs
/// first: in a VM on a 2-core AMD EPYC slice, sysconf(_SC_LEVEL3_CACHE_SIZE) said 320 MiB
/// where the L3 that the two cores share is 32 MiB.)
DYNEXPR_RT_FN std::size_t last_level_cache_bytes();
/// The smallest output, in bytes, that the loops write with streaming stores (Note
/// [streaming stores] in simd/convert.hpp): set_stream_min_bytes's value, else
/// $DYNEXPR_STREAM_MIN_MB (an integer number of MiB >= 0, read once), else
/// last_level_cache_bytes(), else 32 MiB. (These three in libdynexpr_rt.so for generated
/// units.)
DYNEXPR_RT_FN std::size_t stream_min_bytes();
/// Sets stream_min_bytes() for every loop that starts afterwards, on every thread:
/// SIZE_MAX never streams, 0 streams every aligned flat output.
DYNEXPR_RT_FN void set_stream_min_bytes(std::size_t bytes);
#if !defined(DYNEXPR_RUNTIME_EXTERN)
DYNEXPR_RT_FN std::size_t last_level_cache_bytes() {
  std::size_t best = 0;
  int best_level = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::FILE* lf = std::fopen((dir + "level").c_str(), "r");
    if (!lf) break;
    int level = 0;
    const bool got_level = std::fscanf(lf, "%d", &level) == 1;
    std::fclose(lf);
    std::FILE* sf = std::fopen((dir + "size").c_str(), "r");
    if (!sf) continue;
    unsigned long long size = 0;
    char unit = 0;
    const int got = std::fscanf(sf, "%llu%c", &size, &unit);
    std::fclose(sf);
    if (!got_level || got < 1 || level < best_level) continue;
    if (got == 2 && (unit == 'K' || unit == 'k')) size <<= 10;
    else if (got == 2 && (unit == 'M' || unit == 'm')) size <<= 20;
    best = static_cast<std::size_t>(size);
    best_level = level;
  }
#if defined(__unix__) && defined(_SC_LEVEL3_CACHE_SIZE)
  if (best == 0) {
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    best = l3 > 0 ? static_cast<std::size_t>(l3) : 0;
  }
#endif
  return best;
}

namespace detail {
inline std::atomic<std::size_t>& stream_min() {
  static std::atomic<std::size_t> bytes{[] {
    const index_t mb = parallel::detail::parse_threshold(std::getenv("DYNEXPR_STREAM_MIN_MB"), -1);
    if (mb >= 0) return static_cast<std::size_t>(std::min<index_t>(mb, index_t{1} << 40)) << 20;
    const std::size_t llc = last_level_cache_bytes();
    return llc > 0 ? llc : std::size_t{32} << 20;
  }()};
  return bytes;
}
}  // namespace detail

DYNEXPR_RT_FN std::size_t stream_min_bytes() {
  return detail::stream_min().load(std::memory_order_relaxed);
}

DYNEXPR_RT_FN void set_stream_min_bytes(std::size_t bytes) {
  detail::stream_min().store(bytes, std::memory_order_relaxed);
}
#endif  // !DYNEXPR_RUNTIME_EXTERN

/// Whether a contiguous output of `count` elements of `elem` bytes at `p` is written with
/// streaming stores: large enough (stream_min_bytes) and 64-byte aligned, so that every
/// packet of a loop whose blocks start at multiples of 64 bytes is aligned.
inline bool stream_output(const void* p, index_t count, std::size_t elem) {
  return reinterpret_cast<std::uintptr_t>(p) % 64 == 0 &&
         static_cast<std::size_t>(count) * elem >= stream_min_bytes();
}

/// Writes packets of T into the output's current row.
template <class T>
struct writer {
  using S = storage_t<T>;
  S* base_;
  S* row_;
  index_t stride_[max_rank] = {};
  index_t inner_;
  index_t len_;
  int nd_;
  bool stream_ = false;  // unit-stride packets streamed (Note [streaming stores])
  writer(const View<T>& out, const layout& L)
      : base_(reinterpret_cast<S*>(out.data())), row_(base_), len_(L.inner()), nd_(L.nd) {
    L.coalesce(out.strides(), stride_);
    inner_ = stride_[nd_ - 1];
  }
  void seek(const index_t* idx) {
    S* p = base_;
    for (int k = 0; k + 1 < nd_; ++k) p += idx[k] * stride_[k];
    row_ = p;
  }
  template <mode M, class D>
  DYNEXPR_INLINE void store(D d, hn::Vec<D> v, index_t j) {
    if constexpr (M == mode::unit) {
      simd::store_or_stream(d, v, row_ + j, stream_);
    } else {
      const index_t lanes = static_cast<index_t>(hn::Lanes(d));
      const index_t n = M == mode::tail ? std::min(len_ - j, lanes) : lanes;
      if (inner_ == 1 && M != mode::tail) hn::StoreU(v, d, row_ + j);
      else simd::store_strided(d, v, row_ + j * inner_, inner_, n);
    }
  }
};

/// Evaluates one row segment [jb, je) of the current row; je is the row's end or a
/// multiple of the lane count, so only the row's end has a partial packet.
template <mode M, class DL, class Ev, class W>
DYNEXPR_INLINE void run_segment(DL dl, const Ev& ev, W& w, index_t jb, index_t je) {
  using T = typename Ev::value_type;
  const hn::Rebind<storage_t<T>, DL> d;
  const index_t n = static_cast<index_t>(hn::Lanes(dl));
  index_t j = jb;
  for (; j + n <= je; j += n) w.template store<M>(d, ev.template packet<M>(dl, j), j);
  if (j < je) w.template store<mode::tail>(d, ev.template packet<mode::tail>(dl, j), j);
}

/// Elements handed to one task: long enough to hide the hand-off, short enough to
/// balance, a multiple of every lane count.
inline constexpr index_t block_elements = 16384;

/// Every packet of [jb, je) read and written lane by lane, strides and broadcasts
/// honoured: the lean loop's answer to a layout that is not unit-stride after all.
template <class DL, class Ev, class W>
DYNEXPR_INLINE void run_segment_any(DL dl, const Ev& ev, W& w, index_t jb, index_t je) {
  using T = typename Ev::value_type;
  const hn::Rebind<storage_t<T>, DL> d;
  const index_t n = static_cast<index_t>(hn::Lanes(dl));
  for (index_t j = jb; j < je; j += n)
    w.template store<mode::tail>(d, ev.template packet<mode::tail>(dl, j), j);
}

// Note [short rows]
// An output whose coalesced layout keeps two dimensions with a short inner one, because
// some operand repeats along the outer one ((n, 8) points minus a (1, 8) centre, x * w
// with w of shape (8,)), would pay a row seek and a partial SIMD packet for every few
// elements: float32 (300000, 8) against a (1, 8) row ran at a fifth of the speed of
// (150000, 16), slower than NumPy. When every leaf is contiguous over both dimensions
// (flat), a row repeated along the outer one (outer stride 0, inner stride 1) or a
// scalar, and the output is contiguous, the loop walks super-rows of P elements instead:
// P a multiple of both the row length and the lane count (about 256 elements), each
// repeated row copied P / inner times into a small tile that every super-row reads with
// stride 0, flat leaves and the output read as P-wide rows. Every element is computed
// from the same operand values as before, so results are bit-identical; the rows left
// over (fewer than P / inner) run as plain rows.

/// The super-row length for rows of `inner` elements and `lanes` lanes, or 0 when short
/// rows do not pay (Note [short rows]).
inline index_t short_row_period(index_t inner, index_t rows, index_t lanes) {
  constexpr index_t target = 256, max_period = 2048;
  if (inner >= target || rows < 2) return 0;
  const index_t l = std::lcm(inner, lanes);
  if (l > max_period) return 0;
  const index_t p = l * std::max<index_t>(1, target / l);
  return rows * inner >= 2 * p ? p : 0;
}

/// Re-plans the view leaves of an evaluator whose coalesced dimension `dim` holds rows of
/// `inner` elements (the last dimension) as super-rows of `p` elements (Note [short
/// rows]): a leaf contiguous over both dimensions steps p along `dim`; a row repeated
/// along `dim` is copied p / inner times into a tile in `tiles`, read with stride 0; a
/// scalar stays. False (nothing changed) when some leaf has another form.
template <class Ev>
bool retile_rows(Ev& ev, int dim, index_t inner, index_t p, std::vector<unsigned char>& tiles) {
  bool ok = true;
  std::size_t tile_bytes = 0;
  auto padded = [&](std::size_t bytes) { return (bytes + 63) / 64 * 64; };
  for_each_view(ev, [&](auto& v) {
    const index_t outer = v.stride_[dim], unit = v.stride_[v.nd_ - 1];
    const bool flat = unit == 1 && outer == inner;
    // A repeated row must be the same one for every kept index before `dim`: one tile
    // stands for all of them.
    bool fixed = true;
    for (int k = 0; k < dim; ++k) fixed = fixed && v.stride_[k] == 0;
    const bool repeated = unit == 1 && outer == 0 && fixed;
    const bool scalar = unit == 0 && outer == 0;
    ok = ok && v.nd_ == dim + 2 && (flat || repeated || scalar);
    if (repeated) tile_bytes += padded(static_cast<std::size_t>(p) * sizeof(*v.base_));
  });
  if (!ok) return false;
  tiles.resize(tile_bytes + 64);
  auto* at = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<std::uintptr_t>(tiles.data()) + 63) / 64 * 64);
  for_each_view(ev, [&](auto& v) {
    using S = std::remove_cvref_t<decltype(*v.base_)>;
    if (v.stride_[dim] == 0 && v.stride_[v.nd_ - 1] == 1) {
      S* tile = reinterpret_cast<S*>(at);
      for (index_t k = 0; k < p; k += inner) std::copy(v.base_, v.base_ + inner, tile + k);
      at += padded(static_cast<std::size_t>(p) * sizeof(S));
      v.base_ = v.row_ = tile;
    } else if (v.stride_[dim] == inner) {
      v.stride_[dim] = p;
    }
    v.len_ = p;
  });
  return true;
}

/// out[...] = e, where e's value type is T, shapes already checked, no hazardous alias.
///
/// Lean (generated units, Note [lean units] in kernels/prelude.hpp): the caller expects
/// every operand to be unit-stride along the coalesced inner dimension, so only that loop
/// and the tail are instantiated — about a third less code to compile. A layout that is
/// not unit-stride anyway still gets the right answer, lane by lane.
template <class T, class E, bool Lean = false>
void run(const View<T>& out, const E& e) {
  if (out.ndim() == 0) {
    // Note [0-d results]
    // A 0-d result (a rolled loop's scalar recurrence: m = b[i] - a[i] * cp[i - 1]) is one
    // element: it is read through the evaluators' scalar path, without the strides,
    // layout, pool and SIMD-tail machinery of the loop below, which cost more than the
    // arithmetic. Every operand is 0-d too (nothing else broadcasts into a 0-d output),
    // so the default layout (one dimension of extent 1, stride 0) reads each one's element.
    layout L0;
    L0.out_shape = out.shape();
    const evaluator<E> ev0(e, L0);
    *out.data() = static_cast<T>(ev0.at(0));
    return;
  }
  using DL = loop_tag_t<E>;
  // Fixed-size: a vector here cost ~110 ns per call (bench, 8 elements).
  std::array<Strides, leaf_count_v<E> + 1> operands;
  std::size_t n_ops = 0;
  for_each_leaf(e, [&](const auto& leaf) {
    operands[n_ops++] = broadcast_strides(leaf.shape(), leaf.strides(), out.shape());
  });
  operands[n_ops++] = out.strides();
  const layout L = make_layout(out.shape(), operands.data(), n_ops);
  const evaluator<E> ev0(e, L);
  writer<T> w0(out, L);
  // Note [streaming stores]: one flat dimension, so every block starts at a multiple of
  // block_elements, and through the unit-stride loop only.
  w0.stream_ =
      L.nd == 1 && w0.inner_ == 1 && stream_output(out.data(), out.size(), sizeof(storage_t<T>));
  const index_t lanes = static_cast<index_t>(hn::Lanes(DL()));

  // Rows [rb, re) of a layout whose rows have `inner` elements, on the pool.
  auto rows_loop = [&](const evaluator<E>& evr, const writer<T>& wr, const layout& Lr,
                      index_t inner, index_t rb, index_t re) {
    const bool unit = evr.unit() && (wr.inner_ == 1 || inner == 1);
    const index_t nblk = (inner + block_elements - 1) / block_elements;
    const index_t items = (re - rb) * nblk;
    const double work = static_cast<double>((re - rb) * inner) * cost_per_element_v<E>;
    // Rows shorter than a block are grouped so one task still covers ~block_elements.
    const index_t grain =
        nblk == 1 ? std::max<index_t>(1, block_elements / std::max<index_t>(inner, 1)) : 1;
    parallel::parallel_for(items, grain, 1, work, [&](index_t ib, index_t ie) {
      evaluator<E> ev = evr;
      writer<T> w = wr;
      index_t idx[max_rank] = {};
      auto decode = [&](index_t row) {
        for (int k = Lr.nd - 2; k >= 0; --k) {
          idx[k] = row % Lr.extent[k];
          row /= Lr.extent[k];
        }
      };
      const DL dl;
      for (index_t it = ib; it < ie; ++it) {
        const index_t row = rb + it / nblk;
        const index_t jb = (it % nblk) * block_elements;
        const index_t je = std::min(jb + block_elements, inner);
        decode(row);
        ev.seek(idx);
        w.seek(idx);
        if (unit) run_segment<mode::unit>(dl, ev, w, jb, je);
        else if constexpr (Lean) run_segment_any(dl, ev, w, jb, je);
        else run_segment<mode::general>(dl, ev, w, jb, je);
      }
      if (w.stream_) simd::stream_fence();
    });
  };

  const index_t inner = L.inner(), rows = L.rows();
  if (const index_t p = L.nd == 2 ? short_row_period(inner, rows, lanes) : 0) {
    evaluator<E> ev1 = ev0;
    writer<T> w1 = w0;
    std::vector<unsigned char> tiles;
    if (w1.stride_[0] == inner && w1.stride_[1] == 1 && retile_rows(ev1, 0, inner, p, tiles)) {
      w1.stride_[0] = p;
      w1.len_ = p;
      layout L1 = L;
      const index_t supers = rows * inner / p;
      L1.extent[0] = supers;
      L1.extent[1] = p;
      rows_loop(ev1, w1, L1, p, 0, supers);
      rows_loop(ev0, w0, L, inner, supers * (p / inner), rows);  // fewer than p / inner
      return;
    }
  }
  rows_loop(ev0, w0, L, inner, 0, rows);
}

/// Throws the shape_error of dx::assign unless an expression of shape `from` broadcasts to
/// an output of shape `to`. (In libdynexpr_rt.so for generated units.)
DYNEXPR_RT_FN void check_broadcast_into(const Shape& from, const Shape& to);
#if !defined(DYNEXPR_RUNTIME_EXTERN)
DYNEXPR_RT_FN void check_broadcast_into(const Shape& from, const Shape& to) {
  bool ok = from == to;
  if (!ok) {
    try {
      ok = broadcast_shapes(from, to) == to;
    } catch (const shape_error&) {
      ok = false;
    }
  }
  if (!ok)
    throw shape_error("dynexpr: could not broadcast input array from shape " + from.str() +
                      " into shape " + to.str());
}
#endif  // !DYNEXPR_RUNTIME_EXTERN

/// Expression x evaluated into a new C-contiguous Tensor of its dtype and shape (dx::eval;
/// Lean as in run()).
template <bool Lean, class X>
auto evaluate_new(const X& x) {
  using T = typename X::value_type;
  auto out = Tensor<T>::empty(x.shape());
  if (out.size()) {
    const auto lowered = lower(x);
    run<T, std::remove_cvref_t<decltype(lowered)>, Lean>(out.view(), lowered);
  }
  return out;
}

}  // namespace evaluation

/// out[...] = e with NumPy's rules: e is broadcast to out's shape, its values cast to
/// out's dtype as astype would, and overlap between out and e's operands is handled
/// (Note [aliasing]). Throws shape_error when e does not broadcast to out.
template <class T, Operand E>
void assign(View<T> out, E&& e) {
  static_assert(!std::is_const_v<T>, "dynexpr::assign: the output view is read-only");
  auto x = as_expr(std::forward<E>(e));
  using X = decltype(x);
  if constexpr (!std::is_same_v<typename X::value_type, T>) {
    assign(out, make_map<ops::cast_op<T>>(std::move(x)));
  } else {
    const Shape es = x.shape();
    evaluation::check_broadcast_into(es, out.shape());
    if (out.size() == 0) return;
    if (evaluation::needs_temporary(out, x)) {
      auto tmp = Tensor<T>::empty(es);
      evaluation::run(tmp.view(), evaluation::lower(x));
      evaluation::run(out, evaluation::lower(as_expr(tmp)));
      return;
    }
    evaluation::run(out, evaluation::lower(x));
  }
}
template <Element T, Operand E>
void assign(Tensor<T>& out, E&& e) {
  assign(out.view(), std::forward<E>(e));
}

/// Evaluates e into a new C-contiguous Tensor of e's dtype and broadcast shape.
template <Operand E>
auto eval(E&& e) {
  return evaluation::evaluate_new<false>(as_expr(std::forward<E>(e)));
}

template <Element T>
template <class E>
  requires requires { typename std::remove_cvref_t<E>::dynexpr_expr_tag; }
Tensor<T>::Tensor(E&& e) : Tensor() {
  static_assert(std::is_same_v<typename std::remove_cvref_t<E>::value_type, T>,
                "dynexpr::Tensor<T>: the expression's dtype differs from T; convert explicitly "
                "with dx::cast<T>(expr)");
  *this = dynexpr::eval(std::forward<E>(e));
}

template <Element T>
template <class E>
  requires requires { typename std::remove_cvref_t<E>::dynexpr_expr_tag; }
Tensor<T>& Tensor<T>::operator=(E&& e) {
  static_assert(std::is_same_v<typename std::remove_cvref_t<E>::value_type, T>,
                "dynexpr::Tensor<T>: the expression's dtype differs from T; convert explicitly "
                "with dx::cast<T>(expr)");
  if (e.shape() == shape_) assign(view(), std::forward<E>(e));  // in place (Note [aliasing])
  else *this = dynexpr::eval(std::forward<E>(e));
  return *this;
}

}  // namespace dynexpr
