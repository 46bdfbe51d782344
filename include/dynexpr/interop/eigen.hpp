// dynexpr/interop/eigen.hpp — Eigen interop: views of Eigen matrices/arrays/maps (either
// storage order), Eigen::Map of dynexpr tensors and views, and dx::matmul through Eigen's
// GEMM on our buffers.
#pragma once

#include <Eigen/Core>
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
/// (matmul operands are materialised once, then read by GEMM).
template <class T, class X>
auto as_matrix_operand(X&& x, Tensor<T>& storage) {
  auto e = as_expr(std::forward<X>(x));
  using E = decltype(e);
  if constexpr (std::is_same_v<E, leaf_expr<T>>) {
    return e.view_;
  } else {
    storage = dynexpr::eval(cast<T>(std::move(e)));
    return View<const T>(storage.view());
  }
}

/// c (m x n, contiguous, fresh) = a (m x k) b (k x n) through the hooked BLAS (Note [BLAS
/// hook] in dynexpr/interop/blas.hpp): gemv for a matrix-vector product, gemm otherwise;
/// an operand BLAS cannot read in place is copied first. false: no BLAS for T (or an
/// empty product, which Eigen fills).
template <class T>
bool blas_product(View<const T> a, View<const T> b, const View<T>& c) {
  if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, double>) {
    return false;
  } else {
    const index_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
    if (m == 0 || n == 0 || k == 0 || blas::detail::gemm_ptr<T>(blas::current()) == nullptr) return false;
    if (c.strides()[1] != 1 && n > 1) return false;
    if (c.strides()[0] != n && m > 1) return false;
    Tensor<T> ca, cb;
    bool ta = false, tb = false;
    index_t lda = 0, ldb = 0;
    if (!blas::layout(m, k, a.strides()[0], a.strides()[1], ta, lda)) {
      ca = a.copy();
      a = View<const T>(ca.view());
      blas::layout(m, k, a.strides()[0], a.strides()[1], ta, lda);
    }
    if (!blas::layout(k, n, b.strides()[0], b.strides()[1], tb, ldb)) {
      cb = b.copy();
      b = View<const T>(cb.view());
      blas::layout(k, n, b.strides()[0], b.strides()[1], tb, ldb);
    }
    // A stored transposed is a row-major (k x m) matrix with leading stride lda.
    if (n == 1 && k > 1 && blas::detail::gemv_ptr<T>(blas::current()) != nullptr) {
      const index_t incx = b.strides()[0], incy = m > 1 ? c.strides()[0] : 1;
      if (incx > 0)
        return ta ? blas::gemv<T>(true, k, m, a.data(), lda, b.data(), incx, c.data(), incy)
                  : blas::gemv<T>(false, m, k, a.data(), lda, b.data(), incx, c.data(), incy);
    }
    if (m == 1 && k > 1 && blas::detail::gemv_ptr<T>(blas::current()) != nullptr) {
      const index_t incx = a.strides()[1], incy = n > 1 ? c.strides()[1] : 1;
      if (incx > 0)  // c^T = b^T a^T
        return tb ? blas::gemv<T>(false, n, k, b.data(), ldb, a.data(), incx, c.data(), incy)
                  : blas::gemv<T>(true, k, n, b.data(), ldb, a.data(), incx, c.data(), incy);
    }
    return blas::gemm<T>(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, c.data());
  }
}

/// c = a b (2-D views; c fresh): BLAS where hooked, else Eigen's GEMM with the rows of a
/// split over dynexpr's pool (Eigen threads itself only under OpenMP, which units lack).
template <class T>
void product(const View<const T>& a, const View<const T>& b, const View<T>& c) {
  if (blas_product<T>(a, b, c)) return;
  const index_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  const auto B_ = as_eigen(b);
  // Blocks of >= 64 rows keep Eigen's panels full; work counts multiply-adds.
  parallel::parallel_for(m, 64, 1, double(m) * double(n) * double(k), [&](index_t r0, index_t r1) {
    auto C_ = as_eigen(c.slice(dynexpr::slice(r0, r1)));
    C_.noalias() = as_eigen(a.slice(dynexpr::slice(r0, r1))) * B_;
  });
}
}  // namespace detail

/// np.matmul for 1-D, 2-D and batched 3-D operands (a batch of 1 broadcasts), through
/// Eigen. Operands may be expressions; they are materialised first.
template <Operand A, Operand B>
auto matmul(A&& a, B&& b) {
  using TA = typename expr_t<A>::value_type;
  using TB = typename expr_t<B>::value_type;
  using T = promote_t<TA, TB>;
  static_assert(!is_bool_v<T>, "dynexpr::matmul: bool operands are not supported; cast first");
  Tensor<T> sa, sb;
  View<const T> va = detail::as_matrix_operand<T>(std::forward<A>(a), sa);
  View<const T> vb = detail::as_matrix_operand<T>(std::forward<B>(b), sb);
  if (va.ndim() == 0 || vb.ndim() == 0 || va.ndim() > 3 || vb.ndim() > 3)
    throw shape_error("dynexpr: matmul takes 1-D, 2-D or 3-D operands, got shapes " + va.shape().str() +
                      " and " + vb.shape().str());
  // 1-D operands as NumPy: a row vector on the left, a column vector on the right,
  // the added dimension removed from the result.
  const bool a_vec = va.ndim() == 1, b_vec = vb.ndim() == 1;
  if (a_vec) va = va.reshape(Shape{1, va.shape()[0]});
  if (b_vec) vb = vb.reshape(Shape{vb.shape()[0], 1});
  const index_t ba = va.ndim() == 3 ? va.shape()[0] : 1, bb = vb.ndim() == 3 ? vb.shape()[0] : 1;
  auto mat = [](const View<const T>& v, index_t i) { return v.ndim() == 3 ? v.slice(i) : v; };
  const View<const T> a0 = mat(va, 0), b0 = mat(vb, 0);
  const index_t m = a0.shape()[0], k = a0.shape()[1], n = b0.shape()[1];
  if (b0.shape()[0] != k || (ba != bb && ba != 1 && bb != 1))
    throw shape_error("dynexpr: matmul: input operand shapes " + va.shape().str() + " and " + vb.shape().str() +
                      " do not match (core dimension " + std::to_string(k) + " vs " +
                      std::to_string(b0.shape()[0]) + ")");
  const index_t batch = std::max(ba, bb);
  const bool batched = va.ndim() == 3 || vb.ndim() == 3;
  Shape out_shape = batched ? Shape{batch, m, n} : Shape{m, n};
  Tensor<T> out(out_shape);
  for (index_t i = 0; i < batch; ++i) {
    View<T> o = batched ? out.view().slice(i) : out.view();
    detail::product<T>(mat(va, ba == 1 ? 0 : i), mat(vb, bb == 1 ? 0 : i), o);
  }
  if (a_vec && b_vec) return Tensor<T>(out.reshape(batched ? Shape{batch} : Shape{}).copy());
  if (a_vec) return out.reshape(batched ? Shape{batch, n} : Shape{n}).copy();
  if (b_vec) return out.reshape(batched ? Shape{batch, m} : Shape{m}).copy();
  return out;
}

}  // namespace dynexpr
