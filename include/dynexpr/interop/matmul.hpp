// dynexpr/interop/matmul.hpp — np.matmul for dynexpr arrays without Eigen's headers:
// dx::matmul and dx::matmul_into, the BLAS calls (Note [BLAS hook] in
// dynexpr/interop/blas.hpp), and the declaration of the Eigen fallback detail::product.
//
// Note [matmul without Eigen in units]
// A generated unit with a matmul used to include dynexpr/interop/eigen.hpp, and g++ then
// parsed Eigen and instantiated its GEMM for the unit's dtype: 5.4 s of CPU for a unit of
// one matrix-vector product and one tanh, against 0.9 s for the same unit without the
// product (measured on this project's 2-core machine). Units include this header instead.
// Nor does libdynexpr_rt.so compile Eigen: instantiating its float and double GEMM there
// took the runtime library from 2 s to 9-10 s of g++, paid by every new cache before its
// first unit. A unit's float product is detail::unit_product (instantiated once in the
// runtime library, kernels/runtime.cpp): NumPy's BLAS, the one np.matmul calls, with any
// operand or destination BLAS cannot take in place copied through a row-major temporary;
// only without a BLAS (DYNEXPR_BLAS=0, a NumPy built without CBLAS) the vectorised row
// loop loop_product, as NumPy's own loop does then. Integer products, which no BLAS has,
// always run loop_product, as fast as NumPy's own; Eigen's integer GEMMs would have cost
// the runtime library another 10 s. Everywhere else (a C++ program that includes the
// headers) dx::matmul's fallback is Eigen's GEMM split over the pool (detail::product,
// defined in eigen.hpp, which this header then brings in, so it is complete on its own).
#pragma once

#include <optional>
#include <type_traits>

#include "dynexpr/eval/assign.hpp"
#include "dynexpr/interop/blas.hpp"

namespace dynexpr {

namespace detail {
/// An operand as a readable view: leaves as they are, anything else evaluated first
/// (matmul operands are materialised once, then read by GEMM). The storage is optional:
/// an empty Tensor still allocates, which a small product's call would feel.
template <class T, class X>
auto as_matrix_operand(X&& x, std::optional<Tensor<T>>& storage) {
  auto e = as_expr(std::forward<X>(x));
  using E = decltype(e);
  if constexpr (std::is_same_v<E, leaf_expr<T>>) {
    return e.view_;
  } else {
    storage.emplace(dynexpr::eval(cast<T>(std::move(e))));
    return View<const T>(storage->view());
  }
}

// Note [Gram products]
// NumPy's matmul computes `a @ a.T` and `a.T @ a` (b the same memory as a, transposed) with
// syrk, which computes one triangle, half of gemm's multiply-adds, and copies it into the
// other: X.T @ X for a 5000 x 200 X took 3.8 ms in NumPy against 5.3 ms by gemm, which was
// what a captured ridge regression's normal equations ran. The result is also exactly
// symmetric, as NumPy's is. Only where beta is 0: the mirrored triangle would otherwise
// have to be beta times an old c that need not be symmetric.

/// c = alpha a a^T through syrk when b is a's transpose (the same memory with swapped
/// shape and strides), beta is 0 and c is row-major; false otherwise (gemm then).
template <class T>
bool gram_product(const View<const T>& a, const View<const T>& b, const View<T>& c, T alpha, T beta) {
  const index_t m = a.shape()[0], k = a.shape()[1];
  if (beta != T(0) || m < 2 || a.data() != b.data() || b.shape()[0] != k || b.shape()[1] != m ||
      b.strides()[0] != a.strides()[1] || b.strides()[1] != a.strides()[0])
    return false;
  bool ta = false;
  index_t lda = 0;
  if (!blas::layout(m, k, a.strides()[0], a.strides()[1], ta, lda)) return false;
  if (c.strides()[1] != 1 || c.strides()[0] < m) return false;
  const index_t ldc = c.strides()[0];
  T* out = c.data();
  if (!blas::syrk<T>(ta, m, k, alpha, a.data(), lda, T(0), out, ldc)) return false;
  for (index_t i = 1; i < m; ++i)  // the lower triangle from the upper one
    for (index_t j = 0; j < i; ++j) out[i * ldc + j] = out[j * ldc + i];
  return true;
}

/// c (m x n) = alpha a (m x k) b (k x n) + beta c through the hooked BLAS (Note [BLAS
/// hook] in dynexpr/interop/blas.hpp): gemv for a matrix-vector product, gemm otherwise;
/// an operand BLAS cannot read in place is copied first. c must not overlap a or b and
/// must be writable by BLAS (unit stride along one of its rows/columns as gemm/gemv need).
/// false: no BLAS for T, c's layout does not suit, or an empty product (callers fill it).
template <class T>
bool blas_product(View<const T> a, View<const T> b, const View<T>& c, T alpha, T beta) {
  if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, double>) {
    return false;
  } else {
    const index_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
    if (m == 0 || n == 0 || k == 0 || blas::detail::gemm_ptr<T>(blas::current()) == nullptr) return false;
    const bool have_gemv = blas::detail::gemv_ptr<T>(blas::current()) != nullptr;
    std::optional<Tensor<T>> ca, cb;  // copies only where BLAS cannot read in place
    bool ta = false, tb = false;
    index_t lda = 0, ldb = 0;
    if (gram_product<T>(a, b, c, alpha, beta)) return true;
    if (!blas::layout(m, k, a.strides()[0], a.strides()[1], ta, lda)) {
      ca.emplace(a.copy());
      a = View<const T>(ca->view());
      blas::layout(m, k, a.strides()[0], a.strides()[1], ta, lda);
    }
    if (!blas::layout(k, n, b.strides()[0], b.strides()[1], tb, ldb)) {
      cb.emplace(b.copy());
      b = View<const T>(cb->view());
      blas::layout(k, n, b.strides()[0], b.strides()[1], tb, ldb);
    }
    // A stored transposed is a row-major (k x m) matrix with leading stride lda. gemv
    // writes any positive stride of y, so a column or row of c of any stride will do.
    if (n == 1 && k > 1 && have_gemv && b.strides()[0] > 0 && (m == 1 || c.strides()[0] > 0)) {
      const index_t incx = b.strides()[0], incy = m > 1 ? c.strides()[0] : 1;
      return ta ? blas::gemv<T>(true, k, m, alpha, a.data(), lda, b.data(), incx, beta, c.data(), incy)
                : blas::gemv<T>(false, m, k, alpha, a.data(), lda, b.data(), incx, beta, c.data(), incy);
    }
    if (m == 1 && k > 1 && have_gemv && a.strides()[1] > 0 && (n == 1 || c.strides()[1] > 0)) {
      const index_t incx = a.strides()[1], incy = n > 1 ? c.strides()[1] : 1;  // c^T = b^T a^T
      return tb ? blas::gemv<T>(false, n, k, alpha, b.data(), ldb, a.data(), incx, beta, c.data(), incy)
                : blas::gemv<T>(true, k, n, alpha, b.data(), ldb, a.data(), incx, beta, c.data(), incy);
    }
    // gemm writes c row-major: unit stride along rows, a leading stride >= n.
    if ((n > 1 && c.strides()[1] != 1) || (m > 1 && c.strides()[0] < n)) return false;
    return blas::gemm<T>(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(),
                         m > 1 ? c.strides()[0] : std::max<index_t>(n, 1));
  }
}

/// c = alpha a b + beta c for float and double (2-D views; beta 0: c's old content is not
/// read; c does not overlap a or b): BLAS where hooked, else Eigen's GEMM with the rows of
/// a split over dynexpr's pool. Defined in dynexpr/interop/eigen.hpp: C++ programs only,
/// units call unit_product (Note [matmul without Eigen in units]).
template <class T>
void product(const View<const T>& a, const View<const T>& b, const View<T>& c, T alpha = T(1),
             T beta = T(0));

#if defined(__GNUC__) && !defined(__clang__)
// -O2's cost model leaves the row update scalar; this loop is what an integer product is.
#define DYNEXPR_VECTORIZE __attribute__((optimize("vect-cost-model=dynamic")))
#else
#define DYNEXPR_VECTORIZE
#endif

/// c[r, :] += s * b[k, :] along a row: unit strides vectorised, any others element by element.
template <class T>
DYNEXPR_VECTORIZE void row_update(T* DYNEXPR_RESTRICT c, index_t sc, const T* DYNEXPR_RESTRICT b, index_t sb,
                                  T s, index_t n) {
  if (sc == 1 && sb == 1) {
    for (index_t j = 0; j < n; ++j) c[j] += s * b[j];
  } else {
    for (index_t j = 0; j < n; ++j) c[j * sc] += s * b[j * sb];
  }
}
#undef DYNEXPR_VECTORIZE

/// c = alpha a b + beta c without BLAS or Eigen: row r of c is the sum over k of
/// (alpha a[r, k]) b[k, :], one vectorised pass per k, rows split over the pool; integers
/// with NumPy's wrap-around arithmetic. No BLAS has integer products and NumPy's own loop
/// for them is a plain triple loop (Note [matmul without Eigen in units]).
template <class T>
void loop_product(const View<const T>& a, const View<const T>& b, const View<T>& c, T alpha, T beta) {
  // integers: wrap-around multiply-adds without signed overflow
  using W = typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>,
                                        std::type_identity<T>>::type;
  const index_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  if (c.size() == 0) return;
  if (beta == T(0)) dynexpr::assign(c, scalar<T>(T(0)));
  else if (beta != T(1)) dynexpr::assign(c, c * scalar<T>(beta));
  if (k == 0) return;  // an empty sum: BLAS's rule, c = beta c
  const index_t sa0 = a.strides()[0], sa1 = a.strides()[1], sb0 = b.strides()[0], sb1 = b.strides()[1];
  const index_t sc0 = c.strides()[0], sc1 = c.strides()[1];
  const W wa = W(alpha);
  W* cw = reinterpret_cast<W*>(c.data());
  const W* bw = reinterpret_cast<const W*>(b.data());
  parallel::parallel_for(m, 16, 1, double(m) * double(n) * double(k), [&](index_t r0, index_t r1) {
    for (index_t r = r0; r < r1; ++r)
      for (index_t kk = 0; kk < k; ++kk) {
        const W s = W(wa * W(a.data()[r * sa0 + kk * sa1]));
        // A zero row term is skipped for integers only: 0 * inf and 0 * nan are nan.
        if (std::is_floating_point_v<T> || s != W(0))
          row_update<W>(cw + r * sc0, sc1, bw + kk * sb0, sb1, s, n);
      }
  });
}

/// c = alpha a b + beta c for float and double in generated units and libdynexpr_rt.so,
/// where Eigen is not compiled (Note [matmul without Eigen in units]): the hooked BLAS,
/// through a row-major temporary when c's layout does not suit it; loop_product without
/// a BLAS or past what an LP64 BLAS takes. Same contract as product.
template <class T>
void unit_product(const View<const T>& a, const View<const T>& b, const View<T>& c, T alpha, T beta) {
  if (blas_product<T>(a, b, c, alpha, beta)) return;
  const bool empty = c.size() == 0 || a.shape()[1] == 0;
  if (!empty && blas::detail::gemm_ptr<T>(blas::current()) != nullptr) {
    Tensor<T> tmp(c.shape());  // row-major, what gemm writes
    if (beta != T(0)) dynexpr::assign(tmp.view(), c);
    if (blas_product<T>(a, b, tmp.view(), alpha, beta)) {
      dynexpr::assign(c, tmp);
      return;
    }
  }
  loop_product<T>(a, b, c, alpha, beta);
}

#if defined(DYNEXPR_RUNTIME_EXTERN)
extern template void unit_product<float>(const View<const float>&, const View<const float>&,
                                         const View<float>&, float, float);
extern template void unit_product<double>(const View<const double>&, const View<const double>&,
                                          const View<double>&, double, double);
#endif
}  // namespace detail

namespace detail {
/// The operands of np.matmul as 2-D or 3-D views (1-D ones as NumPy promotes them: a row
/// on the left, a column on the right), the result's shape, and the batch extents.
template <class T>
struct matmul_plan {
  View<const T> a, b;
  Shape out;  // np.matmul's result shape (the added 1-D dimensions removed)
  index_t batch = 1, ba = 1, bb = 1, m = 0, n = 0;
  bool batched = false;
};

template <class T>
matmul_plan<T> plan_matmul(View<const T> va, View<const T> vb) {
  if (va.ndim() == 0 || vb.ndim() == 0 || va.ndim() > 3 || vb.ndim() > 3)
    throw shape_error("dynexpr: matmul takes 1-D, 2-D or 3-D operands, got shapes " + va.shape().str() +
                      " and " + vb.shape().str());
  const bool a_vec = va.ndim() == 1, b_vec = vb.ndim() == 1;
  matmul_plan<T> p;
  p.a = a_vec ? va.reshape(Shape{1, va.shape()[0]}) : va;
  p.b = b_vec ? vb.reshape(Shape{vb.shape()[0], 1}) : vb;
  p.ba = p.a.ndim() == 3 ? p.a.shape()[0] : 1;
  p.bb = p.b.ndim() == 3 ? p.b.shape()[0] : 1;
  const index_t k = p.a.shape()[p.a.ndim() - 1], kb = p.b.shape()[p.b.ndim() - 2];
  p.m = p.a.shape()[p.a.ndim() - 2];
  p.n = p.b.shape()[p.b.ndim() - 1];
  if (kb != k || (p.ba != p.bb && p.ba != 1 && p.bb != 1))
    throw shape_error("dynexpr: matmul: input operand shapes " + va.shape().str() + " and " + vb.shape().str() +
                      " do not match (core dimension " + std::to_string(k) + " vs " + std::to_string(kb) + ")");
  p.batch = std::max(p.ba, p.bb);
  p.batched = p.a.ndim() == 3 || p.b.ndim() == 3;
  if (p.batched) p.out.push_back(p.batch);
  if (!a_vec) p.out.push_back(p.m);
  if (!b_vec) p.out.push_back(p.n);
  return p;
}

template <class T>
View<const T> batch_item(const View<const T>& v, index_t i) {
  return v.ndim() == 3 ? v.slice(v.shape()[0] == 1 ? 0 : i) : v;
}

/// dest (np.matmul's result shape) = alpha a b, or += with accumulate; dest must not
/// overlap a or b.
template <class T>
void product_into(const matmul_plan<T>& p, const View<T>& dest, T alpha, bool accumulate) {
  const Shape mn{p.m, p.n};
  for (index_t i = 0; i < p.batch; ++i) {
    View<T> o = p.batched ? dest.slice(i) : dest;
    if (o.ndim() != 2) o = o.reshape(mn);  // a vector result: a row or column of strides
    const T beta = accumulate ? T(1) : T(0);
    if constexpr (!std::is_floating_point_v<T>)
      loop_product<T>(batch_item(p.a, i), batch_item(p.b, i), o, alpha, beta);
#if defined(DYNEXPR_RUNTIME_EXTERN) || defined(DYNEXPR_RUNTIME_DEFINE)
    else
      unit_product<T>(batch_item(p.a, i), batch_item(p.b, i), o, alpha, beta);
#else
    else
      product<T>(batch_item(p.a, i), batch_item(p.b, i), o, alpha, beta);
#endif
  }
}
}  // namespace detail

/// np.matmul written into dest: dest = alpha (a @ b), or dest += alpha (a @ b) with
/// `accumulate` (the generated unit first writes `beta * c` into dest, so one BLAS call
/// with beta = 1 gives alpha a b + beta c: issue 13's alpha/beta folding). Operands may
/// be expressions (materialised first); 1-D, 2-D and batched 3-D as np.matmul. dest may
/// have any strides and may overlap the operands (then a temporary takes the product).
template <class D, Operand A, Operand B>
void matmul_into(const View<D>& dest, A&& a, B&& b, std::type_identity_t<D> alpha = D(1),
                 bool accumulate = false) {
  using TA = typename expr_t<A>::value_type;
  using TB = typename expr_t<B>::value_type;
  using T = promote_t<TA, TB>;
  static_assert(!is_bool_v<T>, "dynexpr::matmul: bool operands are not supported; cast first");
  std::optional<Tensor<T>> sa, sb;
  const auto p = detail::plan_matmul<T>(detail::as_matrix_operand<T>(std::forward<A>(a), sa),
                                        detail::as_matrix_operand<T>(std::forward<B>(b), sb));
  if (!(dest.shape() == p.out))
    throw shape_error("dynexpr: matmul_into: the product has shape " + p.out.str() + ", the destination " +
                      dest.shape().str());
  const auto d = evaluation::extent_of(dest);
  const bool overlap = d.lo && (evaluation::overlaps(d, evaluation::extent_of(p.a)) ||
                                evaluation::overlaps(d, evaluation::extent_of(p.b)));
  if constexpr (std::is_same_v<T, D>) {
    if (!overlap) return detail::product_into<T>(p, dest, alpha, accumulate);
  }
  Tensor<T> tmp(p.out);
  detail::product_into<T>(p, tmp.view(), T(1), false);
  if (accumulate) dynexpr::assign(dest, dest + cast<D>(tmp) * scalar<D>(alpha));
  else if (alpha != D(1)) dynexpr::assign(dest, cast<D>(tmp) * scalar<D>(alpha));
  else dynexpr::assign(dest, tmp);
}

/// np.matmul for 1-D, 2-D and batched 3-D operands (a batch of 1 broadcasts): BLAS or
/// Eigen (detail::product). Operands may be expressions; they are materialised first.
template <Operand A, Operand B>
auto matmul(A&& a, B&& b) {
  using TA = typename expr_t<A>::value_type;
  using TB = typename expr_t<B>::value_type;
  using T = promote_t<TA, TB>;
  static_assert(!is_bool_v<T>, "dynexpr::matmul: bool operands are not supported; cast first");
  std::optional<Tensor<T>> sa, sb;
  const auto p = detail::plan_matmul<T>(detail::as_matrix_operand<T>(std::forward<A>(a), sa),
                                        detail::as_matrix_operand<T>(std::forward<B>(b), sb));
  Tensor<T> out(p.out);
  detail::product_into<T>(p, out.view(), T(1), false);
  return out;
}

}  // namespace dynexpr

#if !defined(DYNEXPR_RUNTIME_EXTERN) && !defined(DYNEXPR_RUNTIME_DEFINE)
#include "dynexpr/interop/eigen.hpp"  // detail::product's definition
#endif
