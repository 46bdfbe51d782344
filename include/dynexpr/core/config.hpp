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

// Note [GCC 12 AVX-512 intrinsics under -Wuninitialized]
// GCC 12's <avx512fintrin.h> builds its "undefined" vectors as `__m512 __Y = __Y;`; once
// such an intrinsic is inlined into Eigen's AVX-512 kernels (GEBP, ptranspose,
// predux_half_dowto4), GCC 12 reports -Wuninitialized / -Wmaybe-uninitialized at the
// intrinsic's line even though it is a system header (GCC PR 105593, fixed in GCC 13), so
// a -Werror build breaks on AVX-512 hosts only. Diagnostic pragmas apply by source
// location, so silencing the two warnings around the first inclusion of <immintrin.h>
// silences them for the intrinsics' own lines and nowhere else: every line of dynexpr
// (and of the user's code) keeps both warnings. This works only when this header comes
// before any other include of <immintrin.h> (Eigen, Highway): include dynexpr first.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13 && \
    (defined(__x86_64__) || defined(__i386__))
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
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

// An op's scalar body (ops/manifest.py) is one function for the host and for a CUDA
// device: `__host__ __device__` under nvcc and NVRTC, nothing for the CPU compilers.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define DYNEXPR_HOST_DEVICE __host__ __device__
#else
#define DYNEXPR_HOST_DEVICE
#endif

// Functions that generated units take from libdynexpr_rt.so instead of compiling them
// (Note [runtime library] in dynexpr/parallel/thread_pool.hpp): inline everywhere else.
// A unit (DYNEXPR_RUNTIME_EXTERN) sees them as plain declarations: declared inline and
// never defined, g++ warned about each one in every unit it compiled.
#if defined(DYNEXPR_RUNTIME_DEFINE) || defined(DYNEXPR_RUNTIME_EXTERN)
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
