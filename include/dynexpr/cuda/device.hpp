// dynexpr/cuda/device.hpp — GPU memory for the C++ CUDA API (dynexpr/cuda/cuda.hpp):
// device_view<T> (pointer, shape, element strides over device memory; an expression
// leaf) and device_tensor<T> (owns a cudaMalloc'd buffer), with host <-> device copies.
// For .cu files compiled by nvcc; the CUDA runtime is the only library it uses.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "dynexpr/core/dtype.hpp"
#include "dynexpr/core/error.hpp"
#include "dynexpr/core/shape.hpp"
#include "dynexpr/core/tensor.hpp"

namespace dynexpr::cuda {

/// A CUDA runtime call that failed: the call, the runtime's reason, and what to check.
struct cuda_error : error {
  using error::error;
};

namespace detail {
inline void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  const std::string why = cudaGetErrorString(e);
  if (e == cudaErrorMemoryAllocation)
    throw cuda_error(std::string("dynexpr::cuda: ") + what + ": out of device memory (" + why +
                     "); free device tensors or use smaller arrays");
  throw cuda_error(std::string("dynexpr::cuda: ") + what + " failed: " + why +
                   " (is a CUDA device present, and the program built for its architecture?)");
}

/// `bytes` from src to dst on `stream`, waited for (the copies of to_device / to_host).
inline void copy_sync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                      cudaStream_t stream, const char* what) {
  check(cudaMemcpyAsync(dst, src, bytes, kind, stream), what);
  check(cudaStreamSynchronize(stream), what);
}
}  // namespace detail

/// Device memory seen as an array: a pointer, a shape, element (not byte) strides (0 for
/// a broadcast dimension, negative allowed). It does not own the memory. As an operand
/// it is a leaf of the same expression templates as dx::Tensor (`x * 2 + dx::tanh(y)`),
/// which only dx::cuda::assign / dx::cuda::eval can evaluate (Note [device leaves]).
template <Element T>
struct device_view {
  using dynexpr_expr_tag = void;
  using value_type = T;

  device_view() = default;
  device_view(T* data, Shape shape, Strides strides)
      : data_(data), shape_(shape), strides_(strides) {
    if (shape_.size() != strides_.size())
      throw shape_error("dynexpr::cuda: device view has shape " + shape_.str() + " but " +
                        std::to_string(strides_.size()) + " strides; give one per dimension");
    for (index_t e : shape_)
      if (e < 0) throw shape_error("dynexpr::cuda: negative extent in shape " + shape_.str());
  }
  /// C-contiguous memory of this shape.
  device_view(T* data, Shape shape) : device_view(data, shape, contiguous_strides(shape)) {}

  T* data() const { return data_; }
  Shape shape() const { return shape_; }
  const Strides& strides() const { return strides_; }
  int ndim() const { return shape_.size(); }
  index_t size() const { return shape_size(shape_); }
  bool is_contiguous() const { return dynexpr::is_contiguous(shape_, strides_); }

  T* data_ = nullptr;
  Shape shape_;
  Strides strides_;
};

/// A C-contiguous array in device memory that frees itself (cudaFree). Move-only: a
/// copy of device memory is an explicit dx::cuda::eval(t.view()).
template <Element T>
class device_tensor {
 public:
  using value_type = T;

  device_tensor() = default;
  /// Uninitialised elements (cudaMalloc), as np.empty.
  explicit device_tensor(const Shape& shape) : shape_(shape) {
    const index_t n = shape_size(shape);
    if (n > 0) {
      void* p = nullptr;
      detail::check(cudaMalloc(&p, static_cast<std::size_t>(n) * sizeof(T)),
                    ("cudaMalloc of " + std::to_string(n) + " elements").c_str());
      data_ = static_cast<T*>(p);
    }
  }
  device_tensor(device_tensor&& o) noexcept
      : shape_(o.shape_), data_(std::exchange(o.data_, nullptr)) {}
  device_tensor& operator=(device_tensor&& o) noexcept {
    std::swap(shape_, o.shape_);
    std::swap(data_, o.data_);
    return *this;
  }
  device_tensor(const device_tensor&) = delete;
  device_tensor& operator=(const device_tensor&) = delete;
  ~device_tensor() {
    if (data_) cudaFree(data_);  // no throw from a destructor; a failed free is reported by
                                 // the next runtime call
  }

  T* data() const { return data_; }
  const Shape& shape() const { return shape_; }
  index_t size() const { return shape_size(shape_); }
  device_view<T> view() const { return device_view<T>(data_, shape_); }
  operator device_view<T>() const { return view(); }

 private:
  Shape shape_{0};
  T* data_ = nullptr;
};

/// A device copy of a host array (any strides: copied through a contiguous host copy).
template <Element T>
device_tensor<T> to_device(View<const T> host, cudaStream_t stream = nullptr) {
  device_tensor<T> d(host.shape());
  // A strided view goes through a contiguous host copy (copies are not the hot path).
  Tensor<T> packed;
  if (!host.is_contiguous()) packed = host.copy();
  const T* from = host.is_contiguous() ? host.data() : packed.data();
  if (d.size() > 0) {
    detail::copy_sync(d.data(), from, d.size() * sizeof(T), cudaMemcpyHostToDevice, stream,
                      "copy to the device");
  }
  return d;
}
template <Element T>
device_tensor<T> to_device(const Tensor<T>& host, cudaStream_t stream = nullptr) {
  return to_device(host.view(), stream);
}

/// A host copy of a contiguous device array (dx::cuda::eval(view) packs a strided one).
template <Element T>
Tensor<T> to_host(const device_view<T>& dev, cudaStream_t stream = nullptr) {
  if (!dev.is_contiguous())
    throw value_error("dynexpr::cuda::to_host: the device view " + dev.shape().str() +
                      " is not contiguous; copy dx::cuda::eval(view) instead");
  Tensor<T> host = Tensor<T>::empty(dev.shape());
  if (host.size() > 0) {
    detail::copy_sync(host.data(), dev.data(), host.size() * sizeof(T), cudaMemcpyDeviceToHost,
                      stream, "copy to the host");
  }
  return host;
}
template <Element T>
Tensor<T> to_host(const device_tensor<T>& dev, cudaStream_t stream = nullptr) {
  return to_host(dev.view(), stream);
}

}  // namespace dynexpr::cuda
