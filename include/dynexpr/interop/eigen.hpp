// dynexpr/interop/eigen.hpp — Eigen interop: views of Eigen matrices/arrays/maps (either
// storage order), Eigen::Map of dynexpr tensors and views, and dx::matmul through Eigen's
// GEMM on our buffers.
#pragma once

#include <Eigen/Core>
#include <optional>
#include <type_traits>

#include "dynexpr/eval/assign.hpp"
#include "dynexpr/interop/blas.hpp"
#include "dynexpr/parallel/thread_pool.hpp"

namespace dynexpr {

template <class M>
concept EigenDense = requires(M& m) {
  m.data();
  m.rows();
  m.cols();
  m.innerStride();
  m.outerStride();
  std::remove_cvref_t<M>::IsRowMajor;
};

/// A 2-D view (rows, cols) of an Eigen dense object with direct access: Matrix, Array,
/// Map, Ref, Block of those. Writable unless the object is const.
template <class M>
  requires EigenDense<M>
auto view(M& m) {
  using S = std::remove_reference_t<decltype(*m.data())>;
  const index_t inner = m.innerStride(), outer = m.outerStride();
  const Strides st = std::remove_cvref_t<M>::IsRowMajor ? Strides{outer, inner} : Strides{inner, outer};
  return View<S>(m.data(), Shape{m.rows(), m.cols()}, st);
}

namespace detail {
template <class T>
using eigen_row_matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using eigen_stride = Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>;
}  // namespace detail

/// An Eigen::Map (row-major, any strides) of a 1-D or 2-D view; a 1-D view maps as a
/// column vector. The map reads and writes the view's memory.
template <class T>
auto as_eigen(const View<T>& v) {
  using Mat = std::conditional_t<std::is_const_v<T>, const detail::eigen_row_matrix<std::remove_const_t<T>>,
                                 detail::eigen_row_matrix<T>>;
  using MapT = Eigen::Map<Mat, Eigen::Unaligned, detail::eigen_stride>;
  if (v.ndim() == 1) return MapT(v.data(), v.shape()[0], 1, detail::eigen_stride(v.strides()[0], v.strides()[0]));
  if (v.ndim() != 2)
    throw shape_error("dynexpr: as_eigen needs a 1-D or 2-D array, got shape " + v.shape().str() +
                      "; reshape or slice it to two dimensions first");
  return MapT(v.data(), v.shape()[0], v.shape()[1], detail::eigen_stride(v.strides()[0], v.strides()[1]));
}
template <Element T>
auto as_eigen(Tensor<T>& t) {
  return as_eigen(t.view());
}
template <Element T>
auto as_eigen(const Tensor<T>& t) {
  return as_eigen(t.view());
}

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

/// c = alpha a b + beta c (2-D views; beta 0: c's old content is not read; c does not
/// overlap a or b): BLAS where hooked, else Eigen's GEMM with the rows of a split over
/// dynexpr's pool (Eigen threads itself only under OpenMP, which units lack).
template <class T>
void product(const View<const T>& a, const View<const T>& b, const View<T>& c, T alpha = T(1),
             T beta = T(0)) {
  if (blas_product<T>(a, b, c, alpha, beta)) return;
  const index_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  if (c.size() == 0) return;
  if (k == 0) {  // an empty sum: BLAS's rule, c = beta c
    if (beta == T(0)) dynexpr::assign(c, scalar<T>(T(0)));
    else if (beta != T(1)) dynexpr::assign(c, c * scalar<T>(beta));
    return;
  }
  const auto B_ = as_eigen(b);
  // Blocks of >= 64 rows keep Eigen's panels full; work counts multiply-adds.
  parallel::parallel_for(m, 64, 1, double(m) * double(n) * double(k), [&](index_t r0, index_t r1) {
    auto C_ = as_eigen(c.slice(dynexpr::slice(r0, r1)));
    const auto A_ = as_eigen(a.slice(dynexpr::slice(r0, r1)));
    if (beta == T(0)) {
      if (alpha == T(1)) C_.noalias() = A_ * B_;
      else C_.noalias() = alpha * (A_ * B_);
    } else {
      if (beta != T(1)) C_ *= beta;
      if (alpha == T(1)) C_.noalias() += A_ * B_;
      else C_.noalias() += alpha * (A_ * B_);
    }
  });
}
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
    product<T>(batch_item(p.a, i), batch_item(p.b, i), o, alpha, accumulate ? T(1) : T(0));
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
