// dynexpr/interop/blas.hpp — an optional BLAS behind dx::matmul (eigen.hpp).
//
// Note [BLAS hook]
// dynexpr links no BLAS. A host that has one hands its CBLAS dgemm/sgemm/dgemv/sgemv
// entry points to set_blas(); dx::matmul then calls them for float and double products
// whose operands BLAS can read in place (one unit stride, a positive leading stride),
// and Eigen otherwise; ssyrk/dsyrk, where given, for a product of a matrix with its own
// transpose. The Python bridge passes the BLAS NumPy itself calls (found
// through NumPy's extension module, bridge/dynexpr/blas.py), so a captured `A @ x` runs
// the same multi-threaded code as NumPy's. The hook lives in libdynexpr_rt.so for
// generated units (Note [runtime library] in dynexpr/parallel/thread_pool.hpp), inline
// for a C++ program that includes the headers. Integer widths differ between BLAS
// builds (LP64: int, ILP64: int64_t); `int64` says which the pointers take.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "dynexpr/core/config.hpp"

namespace dynexpr::blas {

struct hooks {
  void* sgemm = nullptr;  // cblas_sgemm
  void* dgemm = nullptr;  // cblas_dgemm
  void* sgemv = nullptr;  // cblas_sgemv
  void* dgemv = nullptr;  // cblas_dgemv
  void* ssyrk = nullptr;  // cblas_ssyrk (optional: a @ a.T through gemm without it)
  void* dsyrk = nullptr;  // cblas_dsyrk
  bool int64 = false;     // ILP64 interface
};

/// The process's BLAS entry points (all null: none; dx::matmul uses Eigen).
hooks& current();

/// Installs (or, with nulls, removes) the BLAS dx::matmul calls. Not thread-safe
/// against a matmul running at the same time: set it once, at start-up.
inline void set_blas(const hooks& h) { current() = h; }

#if !defined(DYNEXPR_RUNTIME_EXTERN)
DYNEXPR_RT_FN hooks& current() {
  static hooks h;
  return h;
}
#endif

namespace detail {
enum : int { row_major = 101, no_trans = 111, trans = 112, upper = 121 };

template <class I, class T>
using gemm_fn = void (*)(int, int, int, I, I, I, T, const T*, I, const T*, I, T, T*, I);
template <class I, class T>
using gemv_fn = void (*)(int, int, I, I, T, const T*, I, const T*, I, T, T*, I);

template <class I, class T>
using syrk_fn = void (*)(int, int, int, I, I, T, const T*, I, T, T*, I);

template <class T>
void* syrk_ptr(const hooks& h) {
  return std::is_same_v<T, float> ? h.ssyrk : h.dsyrk;
}
template <class T>
void* gemm_ptr(const hooks& h) {
  return std::is_same_v<T, float> ? h.sgemm : h.dgemm;
}
template <class T>
void* gemv_ptr(const hooks& h) {
  return std::is_same_v<T, float> ? h.sgemv : h.dgemv;
}
// An LP64 BLAS cannot take an extent or stride past INT_MAX: Eigen does those.
inline bool fits(const hooks& h, std::initializer_list<index_t> xs) {
  if (h.int64) return true;
  for (index_t x : xs)
    if (x > INT_MAX || x < -INT_MAX) return false;
  return true;
}
}  // namespace detail

/// A row-major operand as BLAS reads it: rows x cols at `data` with leading stride `ld`,
/// transposed when its columns are the unit-stride dimension. false: BLAS cannot read it
/// in place (zero, negative or two non-unit strides); the caller copies it first.
inline bool layout(index_t rows, index_t cols, index_t s0, index_t s1, bool& tr, index_t& ld) {
  if ((cols == 1 || s1 == 1) && (rows == 1 || s0 >= std::max<index_t>(cols, 1))) {
    tr = false;
    ld = rows == 1 ? std::max<index_t>(cols, 1) : s0;
    return true;
  }
  if ((rows == 1 || s0 == 1) && (cols == 1 || s1 >= std::max<index_t>(rows, 1))) {
    tr = true;
    ld = cols == 1 ? std::max<index_t>(rows, 1) : s1;
    return true;
  }
  return false;
}

/// C (m x n, row-major, leading stride ldc) = alpha op(A) op(B) + beta C, through the
/// hooked BLAS. false: no BLAS for T.
template <class T>
bool gemm(bool ta, bool tb, index_t m, index_t n, index_t k, T alpha, const T* a, index_t lda, const T* b,
          index_t ldb, T beta, T* c, index_t ldc) {
  const hooks& h = current();
  void* p = detail::gemm_ptr<T>(h);
  if (p == nullptr || !detail::fits(h, {m, n, k, lda, ldb, ldc})) return false;
  const int oa = ta ? detail::trans : detail::no_trans, ob = tb ? detail::trans : detail::no_trans;
  if (h.int64)
    reinterpret_cast<detail::gemm_fn<std::int64_t, T>>(p)(detail::row_major, oa, ob, m, n, k, alpha, a, lda, b,
                                                          ldb, beta, c, ldc);
  else
    reinterpret_cast<detail::gemm_fn<int, T>>(p)(detail::row_major, oa, ob, int(m), int(n), int(k), alpha, a,
                                                 int(lda), b, int(ldb), beta, c, int(ldc));
  return true;
}

/// The upper triangle of C (n x n, row-major, leading stride ldc) = alpha op(A) op(A)^T
/// + beta C, op(A) n x k as stored (ta: A is k x n), through the hooked BLAS. false: no
/// syrk for T. np.matmul calls syrk for `a @ a.T` and `a.T @ a` (Note [Gram products] in
/// dynexpr/interop/matmul.hpp).
template <class T>
bool syrk(bool ta, index_t n, index_t k, T alpha, const T* a, index_t lda, T beta, T* c, index_t ldc) {
  const hooks& h = current();
  void* p = detail::syrk_ptr<T>(h);
  if (p == nullptr || !detail::fits(h, {n, k, lda, ldc})) return false;
  const int oa = ta ? detail::trans : detail::no_trans;
  if (h.int64)
    reinterpret_cast<detail::syrk_fn<std::int64_t, T>>(p)(detail::row_major, detail::upper, oa, n, k, alpha, a,
                                                          lda, beta, c, ldc);
  else
    reinterpret_cast<detail::syrk_fn<int, T>>(p)(detail::row_major, detail::upper, oa, int(n), int(k), alpha, a,
                                                 int(lda), beta, c, int(ldc));
  return true;
}

/// y (stride incy) = alpha op(A) x + beta y with A rows x cols as stored. false: no BLAS.
template <class T>
bool gemv(bool ta, index_t rows, index_t cols, T alpha, const T* a, index_t lda, const T* x, index_t incx,
          T beta, T* y, index_t incy) {
  const hooks& h = current();
  void* p = detail::gemv_ptr<T>(h);
  if (p == nullptr || !detail::fits(h, {rows, cols, lda, incx, incy})) return false;
  const int oa = ta ? detail::trans : detail::no_trans;
  if (h.int64)
    reinterpret_cast<detail::gemv_fn<std::int64_t, T>>(p)(detail::row_major, oa, rows, cols, alpha, a, lda, x,
                                                          incx, beta, y, incy);
  else
    reinterpret_cast<detail::gemv_fn<int, T>>(p)(detail::row_major, oa, int(rows), int(cols), alpha, a, int(lda),
                                                 x, int(incx), beta, y, int(incy));
  return true;
}

}  // namespace dynexpr::blas
