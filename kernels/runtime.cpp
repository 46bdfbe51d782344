// kernels/runtime.cpp — libdynexpr_rt.so, the runtime library every generated CPU unit
// links against (Note [runtime library] in dynexpr/parallel/thread_pool.hpp): the thread
// pool and the argument checks of kernels/prelude.hpp, compiled once per toolchain and
// header set by bridge/dynexpr/cache.py, with the units' flags.
#define DYNEXPR_RUNTIME_DEFINE 1
#include "prelude.hpp"
#include <dynexpr/interop/matmul.hpp>

#include <climits>
#include <cstdint>

// A unit's float and double products, compiled here once instead of in every unit with a
// product; no Eigen (Note [matmul without Eigen in units] in dynexpr/interop/matmul.hpp).
#define DYNEXPR_INSTANTIATE_PRODUCT(T)                                                         \
  template void dynexpr::detail::unit_product<T>(const dynexpr::View<const T>&,                \
                                                 const dynexpr::View<const T>&,                \
                                                 const dynexpr::View<T>&, T, T);
DYNEXPR_INSTANTIATE_PRODUCT(float)
DYNEXPR_INSTANTIATE_PRODUCT(double)
#undef DYNEXPR_INSTANTIATE_PRODUCT

// dynexpr.config.num_threads reaches the pool through these two C symbols, which the
// bridge calls through ctypes on the runtime library it loaded (bridge/dynexpr/runtime.py);
// no exception crosses the boundary. n <= 0 restores the default: one thread per core.
extern "C" __attribute__((visibility("default"))) int dynexpr_rt_set_num_threads(int n) {
  try {
    if (n <= 0) {
      const unsigned hw = std::thread::hardware_concurrency();
      n = hw == 0 ? 1 : static_cast<int>(std::min<unsigned>(hw, dynexpr::parallel::max_threads));
    }
    dynexpr::parallel::set_num_threads(std::min(n, dynexpr::parallel::max_threads));
    return 0;
  } catch (...) {
    return -1;
  }
}

extern "C" __attribute__((visibility("default"))) int dynexpr_rt_num_threads() {
  return dynexpr::parallel::num_threads();
}

// dynexpr.config.spin_us (Note [spin then block]): how long an idle pool thread spins
// before it sleeps, in microseconds; negative restores the default.
extern "C" __attribute__((visibility("default"))) void dynexpr_rt_set_spin_us(long long us) {
  namespace par = dynexpr::parallel;
  par::set_spin_time(us < 0 ? par::default_spin_time : std::chrono::microseconds{us});
}

extern "C" __attribute__((visibility("default"))) long long dynexpr_rt_spin_us() {
  return static_cast<long long>(dynexpr::parallel::spin_time().count());
}

// The smallest output the units' loops stream (Note [streaming stores] in
// dynexpr/simd/convert.hpp), in bytes; negative: never. What a bench flips to compare the
// two store kinds on the same kernels in one process.
extern "C" __attribute__((visibility("default"))) void dynexpr_rt_set_stream_min_bytes(
    long long bytes) {
  dynexpr::evaluation::set_stream_min_bytes(bytes < 0 ? SIZE_MAX : static_cast<std::size_t>(bytes));
}

extern "C" __attribute__((visibility("default"))) long long dynexpr_rt_stream_min_bytes() {
  const std::size_t b = dynexpr::evaluation::stream_min_bytes();
  return b > static_cast<std::size_t>(LLONG_MAX) ? -1 : static_cast<long long>(b);
}

// The BLAS dx::matmul calls (Note [BLAS hook] in dynexpr/interop/blas.hpp): the bridge
// passes the CBLAS entry points of the library NumPy links (bridge/dynexpr/blas.py);
// nulls remove it (Eigen then). int64: the pointers take 64-bit integers (ILP64).
extern "C" __attribute__((visibility("default"))) void dynexpr_rt_set_blas(void* sgemm, void* dgemm, void* sgemv,
                                                                         void* dgemv, int int64) {
  dynexpr::blas::hooks h;
  h.sgemm = sgemm;
  h.dgemm = dgemm;
  h.sgemv = sgemv;
  h.dgemv = dgemv;
  h.int64 = int64 != 0;
  dynexpr::blas::set_blas(h);
}

// The optional syrk entry points (Note [Gram products] in dynexpr/interop/matmul.hpp), set
// after dynexpr_rt_set_blas, which clears them.
extern "C" __attribute__((visibility("default"))) void dynexpr_rt_set_blas_syrk(void* ssyrk, void* dsyrk) {
  dynexpr::blas::hooks h = dynexpr::blas::current();
  h.ssyrk = ssyrk;
  h.dsyrk = dsyrk;
  dynexpr::blas::set_blas(h);
}
