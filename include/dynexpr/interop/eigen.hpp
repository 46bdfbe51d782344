// dynexpr/interop/eigen.hpp — Eigen interop: views of Eigen matrices/arrays/maps (either
// storage order), Eigen::Map of dynexpr tensors and views, and the definition of
// detail::product, dx::matmul's fallback through Eigen's GEMM on our buffers (the rest of
// dx::matmul is in dynexpr/interop/matmul.hpp: Note [matmul without Eigen in units]).
#pragma once

#include <Eigen/Core>
#include <optional>
#include <type_traits>

#include "dynexpr/eval/assign.hpp"
#include "dynexpr/interop/matmul.hpp"
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
/// c = alpha a b + beta c (2-D views; beta 0: c's old content is not read; c does not
/// overlap a or b): BLAS where hooked, else Eigen's GEMM with the rows of a split over
/// dynexpr's pool (Eigen threads itself only under OpenMP, which units lack).
template <class T>
void product(const View<const T>& a, const View<const T>& b, const View<T>& c, T alpha, T beta) {
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

}  // namespace dynexpr
