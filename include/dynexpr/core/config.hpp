// dynexpr/core/config.hpp — the few definitions every other header needs.
#pragma once

#include <cstddef>
#include <cstdint>

// Highway 1.0.3 stops with "best baseline should be included in dynamic targets" under
// -march=native on recent x86 parts unless it compiles only the static target. dynexpr
// uses static dispatch (generated units are built for the machine that runs them), so
// this is the right mode; it must be set before the first Highway include.
#ifndef HWY_COMPILE_ONLY_STATIC
#define HWY_COMPILE_ONLY_STATIC 1
#endif

#define DYNEXPR_VERSION_MAJOR 0
#define DYNEXPR_VERSION_MINOR 1
#define DYNEXPR_VERSION_PATCH 0

#if defined(__GNUC__) || defined(__clang__)
#define DYNEXPR_INLINE inline __attribute__((always_inline))
#define DYNEXPR_NOINLINE __attribute__((noinline))
#define DYNEXPR_RESTRICT __restrict__
#else
#define DYNEXPR_INLINE inline
#define DYNEXPR_NOINLINE
#define DYNEXPR_RESTRICT
#endif

// Functions that generated units take from libdynexpr_rt.so instead of compiling them
// (Note [runtime library] in dynexpr/parallel/thread_pool.hpp): inline everywhere else.
#if defined(DYNEXPR_RUNTIME_DEFINE)
#define DYNEXPR_RT_FN
#else
#define DYNEXPR_RT_FN inline
#endif

namespace dynexpr {

/// Signed element count / index / stride type (NumPy's npy_intp).
using index_t = std::int64_t;

/// Highest tensor rank supported (NumPy allows 64; 8 covers real workloads and keeps
/// Shape/Strides fixed-size and allocation-free).
inline constexpr int max_rank = 8;

/// Alignment of every buffer dynexpr allocates: a cache line, and a multiple of every
/// SIMD width up to AVX-512.
inline constexpr std::size_t buffer_alignment = 64;

}  // namespace dynexpr
