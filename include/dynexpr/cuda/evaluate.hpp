// dynexpr/cuda/evaluate.hpp — device evaluation of the pointwise expression templates:
// dx::cuda::assign(out, expr) and dx::cuda::eval(expr), one grid-stride kernel per call.
//
// Note [device leaves]
// The expression is built on the host with the ordinary operators and named functions
// (ops/operators.hpp), over device_view leaves. Before the launch it is rebuilt as a tree
// of device nodes (below): plain structs, trivially copyable into the kernel's parameter
// block, whose at() calls each op's scalar body from the op table (DYNEXPR_HOST_DEVICE:
// the same body the CPU's scalar path and lane-by-lane fallbacks run). Highway bodies are
// never instantiated on the device. Device-capable subset: every elementwise op of the
// manifest, where, cast, C++ scalars (weak and dx::scalar), broadcasting and any strides;
// the fma contraction of eval/rewrite.hpp is applied as on the CPU. Not on the device:
// reductions, matmul, integer power (its negative-exponent error is a C++ exception,
// which a kernel cannot throw), and host leaves (dx::Tensor, dx::View): each is a
// static_assert naming the way out.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "dynexpr/cuda/device.hpp"
#include "dynexpr/eval/rewrite.hpp"
#include "dynexpr/expr/nodes.hpp"
#include "dynexpr/ops/operators.hpp"

// The loops over max_rank dimensions unrolled on the device (the multi-index then lives in
// registers); the host pass of nvcc's g++ does not know the pragma and would warn.
#if defined(__CUDA_ARCH__)
#define DYNEXPR_CUDA_UNROLL _Pragma("unroll")
#else
#define DYNEXPR_CUDA_UNROLL
#endif

namespace dynexpr::cuda {

namespace detail {

template <class T>
using storage_t = std::conditional_t<std::is_same_v<T, bool>, std::uint8_t, T>;

// ------------------------------------------------------------------ device nodes
// Each has value_type, flat(i) (element i of a contiguous layout of the output's shape:
// used only when every leaf is one) and at(k) (the element at multi-index k[0..nd)).
template <class T>
struct d_leaf {
  using value_type = T;
  const storage_t<T>* p;
  index_t st[max_rank];
  template <class I>
  __host__ __device__ T flat(I i) const {
    return static_cast<T>(p[i]);  // a bool byte reads as true when non-zero
  }
  template <class I>
  __host__ __device__ T at(const I* k, int nd) const {
    index_t off = 0;
DYNEXPR_CUDA_UNROLL
    for (int d = 0; d < max_rank; ++d)
      if (d < nd) off += static_cast<index_t>(k[d]) * st[d];
    return static_cast<T>(p[off]);
  }
};
template <class T>
struct d_scalar {
  using value_type = T;
  T v;
  template <class I>
  __host__ __device__ T flat(I) const { return v; }
  template <class I>
  __host__ __device__ T at(const I*, int) const { return v; }
};

template <class... A>
struct d_args {};
template <class H, class... R>
struct d_args<H, R...> {
  H head;
  d_args<R...> rest;
};
template <std::size_t N, class H, class... R>
__host__ __device__ constexpr const auto& get(const d_args<H, R...>& a) {
  if constexpr (N == 0) return a.head;
  else return get<N - 1>(a.rest);
}

// An op's value from its operands' values: the compute-type conversion and the result
// cast of evaluation::evaluator<map_expr>::at, so device and host agree element by element.
template <class Op, class... A>
struct d_map {
  using C = typename Op::template compute<typename A::value_type...>;
  using value_type = typename Op::template result<typename A::value_type...>;
  d_args<A...> args;
  template <std::size_t... N, class F>
  __host__ __device__ value_type run(std::index_sequence<N...>, F read) const {
    return static_cast<value_type>(Op::scalar(static_cast<C>(read(get<N>(args)))...));
  }
  template <class I>
  __host__ __device__ value_type flat(I i) const {
    return run(std::index_sequence_for<A...>(), [&](const auto& a) { return a.flat(i); });
  }
  template <class I>
  __host__ __device__ value_type at(const I* k, int nd) const {
    return run(std::index_sequence_for<A...>(), [&](const auto& a) { return a.at(k, nd); });
  }
};
template <class Cond, class A, class B>
struct d_where {
  using value_type = promote_t<typename A::value_type, typename B::value_type>;
  Cond c;
  A a;
  B b;
  template <class I>
  __host__ __device__ value_type flat(I i) const {
    return static_cast<bool>(c.flat(i)) ? static_cast<value_type>(a.flat(i))
                                        : static_cast<value_type>(b.flat(i));
  }
  template <class I>
  __host__ __device__ value_type at(const I* k, int nd) const {
    return static_cast<bool>(c.at(k, nd)) ? static_cast<value_type>(a.at(k, nd))
                                          : static_cast<value_type>(b.at(k, nd));
  }
};
template <class To, class A>
struct d_cast {
  using value_type = To;
  A a;
  template <class I>
  __host__ __device__ To flat(I i) const { return static_cast<To>(a.flat(i)); }
  template <class I>
  __host__ __device__ To at(const I* k, int nd) const { return static_cast<To>(a.at(k, nd)); }
};

// ------------------------------------------------ host tree -> device tree (host side)
/// What the conversion learns about the leaves: whether all read the output's elements
/// in the output's contiguous order (then the kernel indexes flat), and whether one
/// overlaps the output other than element for element (then assign goes via a copy).
struct leaf_facts {
  bool flat = true;
  bool overlaps = false;
};
struct out_info {
  Shape shape;
  Strides strides;
  const char* data;
  std::size_t elem;  // bytes per element
  const char* lo;    // [lo, hi): the bytes the output may touch
  const char* hi;
  bool contiguous;
};

/// The bytes a strided array may touch (a conservative range from its extreme offsets).
inline std::pair<const char*, const char*> byte_range(const void* data, const Shape& s,
                                                      const Strides& st, std::size_t elem) {
  index_t lo = 0, hi = 0;
  for (int d = 0; d < s.size(); ++d) {
    const index_t span = (s[d] > 0 ? s[d] - 1 : 0) * st[d];
    (span < 0 ? lo : hi) += span;
  }
  const char* b = static_cast<const char*>(data);
  const index_t e = static_cast<index_t>(elem);
  return {b + lo * e, b + (hi + 1) * e};
}

template <class Op>
struct cast_target {
  using type = void;
};
template <class To>
struct cast_target<ops::cast_op<To>> {
  using type = To;
};
template <class E>
struct always_false : std::false_type {};
/// Whether op Op over operand types V has a device body (Note [device leaves]).
template <class Op, class... V>
inline constexpr bool device_capable = true;
template <class A, class B>
inline constexpr bool device_capable<ops::pow_op, A, B> =
    is_float_v<typename ops::pow_op::template compute<A, B>>;

template <class H, class... R>
d_args<H, R...> make_args(const H& h, const R&... r) {
  if constexpr (sizeof...(R) == 0) return {h, {}};
  else return {h, make_args(r...)};
}

template <class E>
auto to_device_tree(const E& e, const out_info& out, leaf_facts& f) {
  if constexpr (requires { e.data_; e.strides_; }) {  // device_view
    using T = typename E::value_type;
    d_leaf<T> l{reinterpret_cast<const storage_t<T>*>(e.data()), {}};
    const Strides st = broadcast_strides(e.shape(), e.strides(), out.shape);
    for (int d = 0; d < st.size(); ++d) l.st[d] = st[d];
    f.flat = f.flat && out.contiguous && e.shape() == out.shape && e.is_contiguous();
    if (e.size() > 0) {
      const auto [lo, hi] = byte_range(e.data(), e.shape(), e.strides(), sizeof(T));
      // Reading and writing the same element in the same thread is safe (x = f(x));
      // any other overlap could read an element another thread has already written.
      const bool same = reinterpret_cast<const char*>(e.data()) == out.data &&
                        sizeof(T) == out.elem && e.shape() == out.shape &&
                        e.strides() == out.strides;
      if (lo < out.hi && out.lo < hi && !same) f.overlaps = true;
    }
    return l;
  } else if constexpr (requires { e.value_; }) {  // scalar_expr
    return d_scalar<typename E::value_type>{e.value_};
  } else if constexpr (requires { typename E::op_type; }) {
    using Op = typename E::op_type;
    // The operands' device trees (their order of evaluation does not matter: each only
    // clears f.flat or sets f.overlaps), handed to the node's constructor below.
    auto make = [](auto... k) {
      if constexpr (std::is_same_v<Op, ops::where_op>) {
        return d_where<decltype(k)...>{k...};
      } else if constexpr (!std::is_void_v<typename cast_target<Op>::type>) {
        return d_cast<typename cast_target<Op>::type, decltype(k)...>{k...};
      } else {
        static_assert(device_capable<Op, typename decltype(k)::value_type...>,
                      "dynexpr::cuda: integer power is not device-capable (NumPy raises on a "
                      "negative exponent, which a kernel cannot); cast the base to a float type");
        return d_map<Op, decltype(k)...>{make_args(k...)};
      }
    };
    return dynexpr::unpack(e.args_,
                           [&](const auto&... a) { return make(to_device_tree(a, out, f)...); });
  } else {
    static_assert(always_false<E>::value,
                  "dynexpr::cuda: this operand is in host memory (a dx::Tensor or dx::View, or "
                  "a reduction's result): wrap device memory in dx::cuda::device_view, or copy "
                  "host data there first with dx::cuda::to_device");
    return 0;
  }
}

// ------------------------------------------------------------------------- kernels
// Note [grid-stride loops]: a grid of at most 32 blocks per multiprocessor walks the
// elements in steps of the whole grid, so one launch covers any size with no block-count
// limit, and each thread's accesses stay coalesced. I is the index type: 32-bit when the
// element count and the last step fit (cheaper division and address arithmetic), else 64.
// The element bodies are __host__ __device__: the host emulation (host_runner) runs them
// in a plain loop, which is how the tests check indexing without a GPU.
struct strided_out {
  index_t extent[max_rank];
  index_t stride[max_rank];
  int nd;
};
template <class T, class Tree, class I>
__host__ __device__ inline void flat_element(storage_t<T>* out, const Tree& tree, I i) {
  out[i] = static_cast<storage_t<T>>(static_cast<T>(tree.flat(i)));
}
template <class T, class Tree, class I>
__host__ __device__ inline void strided_element(storage_t<T>* out, const strided_out& o,
                                                const Tree& tree, I i) {
  I k[max_rank] = {};
  I rest = i;
  index_t off = 0;
DYNEXPR_CUDA_UNROLL
  for (int d = max_rank - 1; d >= 0; --d) {
    if (d < o.nd) {
      const I e = static_cast<I>(o.extent[d]);
      const I q = rest / e;
      k[d] = rest - q * e;
      rest = q;
      off += static_cast<index_t>(k[d]) * o.stride[d];
    }
  }
  out[off] = static_cast<storage_t<T>>(static_cast<T>(tree.at(k, o.nd)));
}
template <class T, class Tree, class I>
__global__ void flat_kernel(storage_t<T>* out, Tree tree, I n) {
  const I step = static_cast<I>(blockDim.x) * gridDim.x;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    flat_element<T>(out, tree, i);
}
template <class T, class Tree, class I>
__global__ void strided_kernel(storage_t<T>* out, strided_out o, Tree tree, I n) {
  const I step = static_cast<I>(blockDim.x) * gridDim.x;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    strided_element<T>(out, o, tree, i);
}

template <class T>
strided_out strided_of(const device_view<T>& out) {
  strided_out o{};
  o.nd = out.ndim();
  for (int d = 0; d < o.nd; ++d) o.extent[d] = out.shape()[d], o.stride[d] = out.strides()[d];
  return o;
}

/// Blocks for n elements: enough to fill the device, at most 32 per multiprocessor.
inline unsigned grid_for(index_t n, int threads) {
  static std::atomic<int> sms[64];
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  int m = dev < 64 ? sms[dev].load(std::memory_order_relaxed) : 0;
  if (m == 0) {
    check(cudaDeviceGetAttribute(&m, cudaDevAttrMultiProcessorCount, dev),
          "reading the multiprocessor count");
    if (dev < 64) sms[dev].store(m, std::memory_order_relaxed);
  }
  const index_t want = (n + threads - 1) / threads, most = index_t(m) * 32;
  return static_cast<unsigned>(want < most ? want : most);
}

/// Runs an assignment on the device, on one stream; temporaries are device tensors.
struct device_runner {
  cudaStream_t stream;
  template <class T, class Tree>
  void run(const device_view<T>& out, const Tree& tree, bool flat) const {
    constexpr int threads = 256;
    const index_t n = out.size();
    if (n == 0) return;
    const unsigned blocks = grid_for(n, threads);
    const bool small = n + index_t(blocks) * threads <= std::numeric_limits<std::int32_t>::max();
    auto* p = reinterpret_cast<storage_t<T>*>(out.data());
    if (flat) {
      if (small) flat_kernel<T><<<blocks, threads, 0, stream>>>(p, tree, std::int32_t(n));
      else flat_kernel<T><<<blocks, threads, 0, stream>>>(p, tree, n);
    } else {
      const strided_out o = strided_of(out);
      if (small) strided_kernel<T><<<blocks, threads, 0, stream>>>(p, o, tree, std::int32_t(n));
      else strided_kernel<T><<<blocks, threads, 0, stream>>>(p, o, tree, n);
    }
    check(cudaGetLastError(), "launching dx::cuda::assign's kernel");
  }
  template <class T>
  device_tensor<T> temporary(const Shape& s) const {
    return device_tensor<T>(s);  // freed by cudaFree, which waits for the work using it
  }
};

/// The host emulation: device_views over host memory, the same element bodies in a loop
/// (Note [grid-stride loops]). For tests of the indexing without a device.
struct host_runner {
  template <class T, class Tree>
  void run(const device_view<T>& out, const Tree& tree, bool flat) const {
    auto* p = reinterpret_cast<storage_t<T>*>(out.data());
    const index_t n = out.size();
    if (flat) {
      for (index_t i = 0; i < n; ++i) flat_element<T>(p, tree, i);
    } else {
      const strided_out o = strided_of(out);
      for (index_t i = 0; i < n; ++i) strided_element<T>(p, o, tree, i);
    }
  }
  template <class T>
  struct buffer {
    Tensor<T> t;
    device_view<T> view() { return device_view<T>(t.data(), t.shape()); }
  };
  template <class T>
  buffer<T> temporary(const Shape& s) const {
    return {Tensor<T>::empty(s)};
  }
};

template <class T, class E, class Runner>
void assign_with(const device_view<T>& out, const E& expr, const Runner& runner) {
  const auto lowered = evaluation::lower(expr);
  const Shape full = broadcast_shapes(out.shape(), expr.shape());
  if (!(full == out.shape()))
    throw shape_error("dynexpr::cuda::assign: the expression's shape " + expr.shape().str() +
                      " does not broadcast to the output's " + out.shape().str());
  const auto [lo, hi] = out.size() ? byte_range(out.data(), out.shape(), out.strides(), sizeof(T))
                                   : std::pair<const char*, const char*>{nullptr, nullptr};
  const out_info info{out.shape(), out.strides(), reinterpret_cast<const char*>(out.data()),
                      sizeof(T), lo, hi, out.is_contiguous()};
  leaf_facts facts;
  const auto tree = to_device_tree(lowered, info, facts);
  if (!facts.overlaps) return runner.run(out, tree, facts.flat);
  // An operand overlaps the output other than element for element: evaluate into a
  // temporary first, then copy it, as NumPy does.
  auto tmp = runner.template temporary<T>(out.shape());
  const device_view<T> tv = tmp.view();
  const out_info tinfo{tv.shape(), tv.strides(), reinterpret_cast<const char*>(tv.data()),
                       sizeof(T), nullptr, nullptr, true};
  leaf_facts tfacts;
  runner.run(tv, to_device_tree(lowered, tinfo, tfacts), tfacts.flat);
  assign_with(out, tv, runner);
}

}  // namespace detail

/// out[...] = expr, on the device, on `stream` (asynchronous, as a CUDA kernel launch is).
/// expr broadcasts to out's shape; its value type converts to out's (NumPy's unsafe cast,
/// as dx::cast). out may be read by expr element for element (x = f(x)); any other
/// overlap is evaluated through a temporary, as NumPy does.
template <Element T, class E>
  requires Expr<E>
void assign(const device_view<T>& out, const E& expr, cudaStream_t stream = nullptr) {
  detail::assign_with(out, expr, detail::device_runner{stream});
}
template <Element T, class E>
  requires Expr<E>
void assign(const device_tensor<T>& out, const E& expr, cudaStream_t stream = nullptr) {
  assign(out.view(), expr, stream);
}

/// The host emulation of assign, for tests without a GPU: out's and expr's device_views
/// point to host memory, and the kernels' element bodies run in a loop on the CPU
/// (the same tree, index arithmetic, overlap handling and op bodies as on the device).
template <Element T, class E>
  requires Expr<E>
void emulate_assign(const device_view<T>& out, const E& expr) {
  detail::assign_with(out, expr, detail::host_runner{});
}

/// A C-contiguous device array of expr's shape and value type, computed on `stream`.
template <class E>
  requires Expr<E>
device_tensor<typename E::value_type> eval(const E& expr, cudaStream_t stream = nullptr) {
  device_tensor<typename E::value_type> out(expr.shape());
  assign(out.view(), expr, stream);
  return out;
}

}  // namespace dynexpr::cuda
