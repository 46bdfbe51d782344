// dynexpr/simd/convert.hpp — lane type conversions with NumPy's astype semantics, mask
// conversions between lane types, and the lane-wise fallback for ops Highway lacks.
//
// Note [lane count of mixed expressions]
// One evaluation loop walks every node of an expression with the same number of lanes,
// taken from the widest type in the tree (eval/evaluator.hpp). A node of a narrower type
// uses hn::Rebind<T, D>: the same lane count in a partial vector. So every conversion
// here keeps the lane count and changes only the lane type.
#pragma once

#include "dynexpr/core/config.hpp"
// config.hpp must come first (HWY_COMPILE_ONLY_STATIC).
#include <hwy/highway.h>

#include <cstdint>
#include <type_traits>
#if HWY_ARCH_X86
#include <xmmintrin.h>  // _mm_sfence (stream_fence)
#endif

#include "dynexpr/core/dtype.hpp"

namespace dynexpr::simd {

namespace hn = hwy::HWY_NAMESPACE;

template <class D>
inline constexpr std::size_t max_lanes_v = hn::MaxLanes(D());

/// Applies a scalar function lane by lane: the correct, slow path for ops that Highway
/// cannot do in registers (integer division, shifts by counts >= the width, ...).
template <class DR, class F, class D, class... V>
DYNEXPR_INLINE hn::Vec<DR> lanewise(DR dr, F&& f, D d, V... v) {
  using TR = hn::TFromD<DR>;
  using T = hn::TFromD<D>;
  constexpr std::size_t n = max_lanes_v<D>;
  alignas(64) T in[sizeof...(V)][n];
  alignas(64) TR out[n];
  std::size_t k = 0;
  ((hn::Store(v, d, in[k++])), ...);
  // Note [a barrier between the stores and the lane loop]: without it GCC 12 at -O2 on
  // AVX-512 vectorises the loop below into loads that it orders before a partial
  // vector's Store (8 uint8 lanes of a 64-bit loop: `(a * 2) * 3` gave garbage), as if
  // the two could not alias. The empty asm with a memory clobber keeps them in order.
  __asm__ volatile("" ::: "memory");
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t j = 0;
    // Unpack the i-th lane of each argument in order.
    out[i] = [&]<std::size_t... I>(std::index_sequence<I...>) {
      return static_cast<TR>(f(in[I][i]...));
    }(std::make_index_sequence<sizeof...(V)>());
    (void)j;
  }
  return hn::Load(dr, out);
}

/// Value conversion From -> To with NumPy's astype semantics (floats truncate toward zero
/// into integers, integers wrap modulo 2^bits). Bool lanes are never passed here: bools
/// travel as masks (see eval/evaluator.hpp).
template <class DTo, class DFrom>
DYNEXPR_INLINE hn::Vec<DTo> convert(DTo dto, DFrom dfrom, hn::Vec<DFrom> v) {
  using To = hn::TFromD<DTo>;
  using From = hn::TFromD<DFrom>;
  static_assert(max_lanes_v<DTo> == max_lanes_v<DFrom>, "convert keeps the lane count");
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, std::uint8_t>) {
    const hn::Rebind<std::int32_t, DFrom> di;
    const auto wide = hn::PromoteTo(di, v);
    if constexpr (std::is_same_v<To, std::int32_t>) return wide;
    else return convert(dto, di, wide);
  } else if constexpr (std::is_same_v<To, std::uint8_t> && std::is_same_v<From, std::int32_t>) {
    // Wrap, as astype does, instead of DemoteTo's saturation.
    return hn::DemoteTo(dto, hn::And(v, hn::Set(dfrom, 0xFF)));
  } else if constexpr (sizeof(To) == sizeof(From) && requires { hn::ConvertTo(dto, v); }) {
    return hn::ConvertTo(dto, v);
  } else if constexpr (sizeof(To) > sizeof(From) && requires { hn::PromoteTo(dto, v); }) {
    return hn::PromoteTo(dto, v);
  } else if constexpr (std::is_same_v<From, double> && std::is_same_v<To, float>) {
    return hn::DemoteTo(dto, v);
  } else if constexpr (std::is_same_v<From, double> && std::is_same_v<To, std::int32_t>) {
    return hn::DemoteTo(dto, v);
  } else {
    return lanewise(dto, [](From x) { return static_cast<To>(x); }, dfrom, v);
  }
}

/// a != b lane by lane, true for NaN lanes as in C++ and NumPy. Highway 1.0.3's float
/// Ne on AVX2 is the ordered compare (false when either lane is NaN), so floats use
/// Not(Eq) instead.
template <class D, class V>
DYNEXPR_INLINE hn::Mask<D> not_equal(D, V a, V b) {
  if constexpr (std::is_floating_point_v<hn::TFromD<D>>) return hn::Not(hn::Eq(a, b));
  else return hn::Ne(a, b);
}
/// Lanes that read as true (non-zero; NaN is true).
template <class D, class V>
DYNEXPR_INLINE hn::Mask<D> nonzero(D d, V v) { return not_equal(d, v, hn::Zero(d)); }

/// The same lane predicate as a mask of another lane type (same lane count).
template <class DTo, class DFrom>
DYNEXPR_INLINE hn::Mask<DTo> mask_cast(DTo dto, DFrom dfrom, hn::Mask<DFrom> m) {
  using To = hn::TFromD<DTo>;
  using From = hn::TFromD<DFrom>;
  if constexpr (std::is_same_v<To, From>) {
    return m;
  } else if constexpr (sizeof(To) == sizeof(From)) {
    return hn::RebindMask(dto, m);
  } else {
    alignas(8) std::uint8_t bits[8] = {};
    hn::StoreMaskBits(dfrom, m, bits);
    return hn::LoadMaskBits(dto, bits);
  }
}

// Note [padding lanes]
// A partial packet (a row's tail) is computed in full vectors. Its padding lanes repeat
// the last real lane rather than holding zeros: every lane computes what some real lane
// computes, so the padding raises no floating-point flag of its own (log of a padding 0
// would be "divide by zero", 0/0 "invalid": Note [floating-point errors] in
// bridge/native/kernel.c), and range guards (ops/op_support.hpp) see only real values.

/// Loads `count` (< the lane count) elements from p, the remaining lanes repeating the
/// last one (zeros if count is 0), without touching memory past p + count.
template <class D>
DYNEXPR_INLINE hn::Vec<D> load_partial(D d, const hn::TFromD<D>* p, index_t count) {
  alignas(64) hn::TFromD<D> buf[max_lanes_v<D>] = {};
  for (index_t i = 0; i < count; ++i) buf[i] = p[i];
  for (index_t i = count; count > 0 && i < static_cast<index_t>(max_lanes_v<D>); ++i)
    buf[i] = buf[count - 1];
  return hn::Load(d, buf);
}
/// Loads lanes from p, p + stride, p + 2 stride, ... (stride in elements, any sign),
/// `count` of them, the rest repeating the last one (Note [padding lanes]).
template <class D>
DYNEXPR_INLINE hn::Vec<D> load_strided(D d, const hn::TFromD<D>* p, index_t stride,
                                        index_t count) {
  alignas(64) hn::TFromD<D> buf[max_lanes_v<D>] = {};
  for (index_t i = 0; i < count; ++i) buf[i] = p[i * stride];
  for (index_t i = count; count > 0 && i < static_cast<index_t>(max_lanes_v<D>); ++i)
    buf[i] = buf[count - 1];
  return hn::Load(d, buf);
}
// Note [streaming stores]
// An output larger than the last-level cache is gone from the cache before anything reads
// it again, yet an ordinary store first reads each line it writes (the line is fetched
// for ownership): y = f(x) moves three bytes for every two it needs. A non-temporal store
// (hn::Stream: vmovntps/pd, written through the write-combining buffers) writes whole lines
// without reading them. Measured on the 2-core AMD EPYC (Zen 4, AVX3), y = x * 2 + 1 on 2
// threads, the output a reused buffer (as the Python bridge's buffer cache gives): 16M
// float32 3.60 -> 2.79 ms (1.29x), 16M float64 7.74 -> 5.75 ms (1.35x), 4M float64 (32 MB,
// the L3's size) 1.57 -> 1.42 ms; but 4M float32 (16 MB) 0.55 -> 0.67 ms and 1M
// 0.05 -> 0.15 ms slower, since a streamed output leaves the cache and its reader then waits
// for memory. So the expression loop (eval/assign.hpp) streams only a flat output of at
// least stream_min_bytes() (the L3's size, or $DYNEXPR_STREAM_MIN_MB) whose packets are
// aligned; a streaming loop ends with stream_fence(), so that the thread that waits for
// the loop (through the pool's atomics, which do not order these stores) sees every
// element. dynexpr-bench's dynexpr_cached row measures it (affine 16M float32 1.30-1.38x,
// tanh_chain 1.07-1.22x). Generated units do not stream: the Python bridge sets the
// threshold to never in libdynexpr_rt.so (bridge/dynexpr/runtime.py). Their direct loops,
// made to stream the same way and flipped in one process, ran stencil3 16M at 0.69x and
// tanh_chain at 0.55-0.62x of ordinary stores (affine 0.92-1.16x); why they lose where the
// C++ loop gains is not known (-O2 against -O3, the buffer cache's memory, the per-packet
// flag are the differences left to test).

/// hn::Stream(v, d, p) when `stream` and v fills a whole register (Stream writes the full
/// register, so a partial vector is stored normally), else hn::StoreU. p must be aligned
/// to the vector's size when `stream`.
template <class D>
DYNEXPR_INLINE void store_or_stream(D d, hn::Vec<D> v, hn::TFromD<D>* p, bool stream) {
  if constexpr (max_lanes_v<D> * sizeof(hn::TFromD<D>) >= 16) {
    if (stream) {
      hn::Stream(v, d, p);
      return;
    }
  }
  hn::StoreU(v, d, p);
}

/// Orders this thread's streamed stores before its later stores (the pool's "chunk done"
/// among them): sfence on x86, where Stream bypasses the cache; nothing elsewhere.
inline void stream_fence() {
#if HWY_ARCH_X86
  _mm_sfence();
#endif
}

/// Stores the first `count` lanes of v to p, p + stride, ... (stride in elements).
template <class D>
DYNEXPR_INLINE void store_strided(D d, hn::Vec<D> v, hn::TFromD<D>* p, index_t stride,
                                   index_t count) {
  alignas(64) hn::TFromD<D> buf[max_lanes_v<D>];
  hn::Store(v, d, buf);
  for (index_t i = 0; i < count; ++i) p[i * stride] = buf[i];
}

}  // namespace dynexpr::simd
