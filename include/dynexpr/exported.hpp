// dynexpr/exported.hpp — what a function exported by `dynexpr.export(fn, ...).save(dir)`
// takes and returns in C++, with no Python at run time.
//
// An export directory holds NAME.hpp (one namespace NAME with `run`), libNAME.so, the
// runtime library it links against (libdynexpr_rt.so, found through the library's
// $ORIGIN rpath) and a copy of this header as dynexpr/exported.hpp, so that
// `g++ -std=c++17 -I DIR prog.cpp -L DIR -lNAME -Wl,-rpath,DIR` is all a program needs:
//
//   #include "rolling.hpp"
//   namespace dxe = dynexpr::exported;
//   std::vector<float> x(1000);
//   dxe::Array xa(x.data(), {1000});            // a view of the caller's memory
//   std::vector<dxe::Array> out = rolling::run({xa, 0.5});
//   float* y = out[0].data_as<float>();          // owned by out[0]
//
// An argument is an Array (a view of caller memory: data pointer, dtype, shape and strides
// in elements; dx::Tensor and dx::View convert), a number or None (`nullptr`). `run` picks
// the first specialisation whose guards hold (dtype, rank, extents and their ranges,
// layout, aliasing, numbers by value) and throws dynexpr::exported::error when none does,
// saying for each why; `try_run` returns the same status code instead of throwing.
// Results are new arrays owned by the Array (shared), or the caller's own argument where
// the Python function returned it. This header is C++17 and needs only the standard library.
#ifndef DYNEXPR_EXPORTED_HPP
#define DYNEXPR_EXPORTED_HPP

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace dynexpr {
namespace exported {

/// The element types, with the codes of kernels/abi.h's dx_dtype_code.
enum class dtype : std::int32_t {
  bool_ = 0,
  uint8 = 1,
  int32 = 2,
  int64 = 3,
  float32 = 4,
  float64 = 5
};

inline const char* dtype_name(dtype d) {
  switch (d) {
    case dtype::bool_:
      return "bool";
    case dtype::uint8:
      return "uint8";
    case dtype::int32:
      return "int32";
    case dtype::int64:
      return "int64";
    case dtype::float32:
      return "float32";
    case dtype::float64:
      return "float64";
  }
  return "an unknown dtype";
}

inline std::size_t itemsize(dtype d) {
  switch (d) {
    case dtype::bool_:
    case dtype::uint8:
      return 1;
    case dtype::int32:
    case dtype::float32:
      return 4;
    case dtype::int64:
    case dtype::float64:
      return 8;
  }
  return 0;
}

template <class T>
constexpr dtype dtype_of() {
  using U = std::remove_cv_t<T>;
  static_assert(
      std::is_same_v<U, bool> || std::is_same_v<U, std::uint8_t> ||
          std::is_same_v<U, std::int32_t> || std::is_same_v<U, std::int64_t> ||
          std::is_same_v<U, float> || std::is_same_v<U, double>,
      "dynexpr::exported: element types are bool, uint8_t, int32_t, int64_t, float, double");
  if constexpr (std::is_same_v<U, bool>)
    return dtype::bool_;
  else if constexpr (std::is_same_v<U, std::uint8_t>)
    return dtype::uint8;
  else if constexpr (std::is_same_v<U, std::int32_t>)
    return dtype::int32;
  else if constexpr (std::is_same_v<U, std::int64_t>)
    return dtype::int64;
  else if constexpr (std::is_same_v<U, float>)
    return dtype::float32;
  else
    return dtype::float64;
}

/// What `try_run` returns and `error::code` holds. 1-5 are the kernels' own (as Python's
/// RuntimeError, ValueError, IndexError, MemoryError, TypeError).
enum status : int {
  ok = 0,
  internal_error = 1,
  value_error = 2,
  index_error = 3,
  memory_error = 4,
  type_error = 5,
  no_specialisation = 6,  // no specialisation's guards hold for these arguments
  cpu_unsupported = 7,    // this CPU lacks an instruction set the library was built for
};

struct error : std::runtime_error {
  int code;
  error(int c, const std::string& what) : std::runtime_error(what), code(c) {}
};

/// An n-dimensional array: a view of memory the caller owns, or a result that owns its
/// buffer (shared between copies of the Array). Strides are in elements.
class Array {
 public:
  Array() = default;
  /// A view of `data` with `shape`; C-contiguous when `strides` is empty.
  template <class T>
  Array(T* data, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides = {})
      : data_(const_cast<std::remove_cv_t<T>*>(data)),
        dtype_(dtype_of<T>()),
        shape_(std::move(shape)),
        strides_(std::move(strides)),
        readonly_(std::is_const_v<T>) {
    if (strides_.empty()) strides_ = contiguous_strides(shape_);
    check();
  }
  /// A view of a dx::Tensor, dx::View or anything with data(), shape() and strides() (in
  /// elements). A const one is read-only: a function that writes into it refuses it.
  template <class V, class = std::enable_if_t<!std::is_same_v<std::decay_t<V>, Array>>,
            class = decltype(std::declval<V&>().data()),
            class = decltype(std::declval<V&>().strides().begin())>
  Array(V& v) : Array(v.data(), dims(v.shape()), dims(v.strides())) {}

  /// A new C-contiguous array of `shape`, 64-byte aligned, its elements uninitialised.
  static Array empty(dtype t, const std::vector<std::int64_t>& shape) {
    Array a;
    a.dtype_ = t;
    a.shape_ = shape;
    a.strides_ = contiguous_strides(shape);
    a.check();
    std::size_t bytes = itemsize(t);
    for (std::int64_t e : shape) bytes *= static_cast<std::size_t>(e);
    bytes = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, bytes ? bytes : 64);
    if (!p) throw error(memory_error, "dynexpr: out of memory allocating a result");
    a.owner_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
    a.data_ = p;
    return a;
  }
  /// A new C-contiguous copy of this array's elements.
  Array copy() const {
    Array c = empty(dtype_, shape_);
    const std::size_t w = itemsize(dtype_);
    const std::int64_t n = size();
    std::vector<std::int64_t> idx(shape_.size(), 0);
    char* dst = static_cast<char*>(c.data_);
    for (std::int64_t k = 0; k < n; ++k) {
      std::int64_t off = 0;
      for (std::size_t d = 0; d < idx.size(); ++d) off += idx[d] * strides_[d];
      std::memcpy(dst + k * static_cast<std::int64_t>(w),
                  static_cast<const char*>(data_) + off * static_cast<std::int64_t>(w), w);
      for (std::size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < shape_[d]) break;
        idx[d] = 0;
      }
    }
    return c;
  }

  void* data() const { return data_; }
  dtype type() const { return dtype_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  const std::vector<std::int64_t>& strides() const { return strides_; }
  std::int64_t size() const {
    std::int64_t n = 1;
    for (std::int64_t e : shape_) n *= e;
    return n;
  }
  bool owns_data() const { return owner_ != nullptr; }
  bool readonly() const { return readonly_; }
  /// NumPy's C-contiguity: extents of 1 may have any stride; an empty array is contiguous.
  bool c_contiguous() const {
    if (size() == 0) return true;
    std::int64_t want = 1;
    for (std::size_t d = shape_.size(); d-- > 0;) {
      if (shape_[d] != 1 && strides_[d] != want) return false;
      want *= shape_[d];
    }
    return true;
  }
  /// The data as T*; throws error(type_error) when the dtype is not T's.
  template <class T>
  T* data_as() const {
    if (dtype_of<T>() != dtype_)
      throw error(type_error, std::string("dynexpr: the array holds ") + dtype_name(dtype_) +
                                  ", not " + dtype_name(dtype_of<T>()));
    return static_cast<T*>(data_);
  }
  /// Element at an index (no negative indices; checked against the shape).
  template <class T, class... I>
  T& at(I... i) const {
    const std::int64_t idx[] = {static_cast<std::int64_t>(i)..., 0};
    if (static_cast<int>(sizeof...(I)) != ndim())
      throw error(index_error, "dynexpr: at() got " + std::to_string(sizeof...(I)) +
                                   " indices for an array of dimension " + std::to_string(ndim()));
    std::int64_t off = 0;
    for (int d = 0; d < ndim(); ++d) {
      if (idx[d] < 0 || idx[d] >= shape_[d])
        throw error(index_error, "dynexpr: index " + std::to_string(idx[d]) +
                                     " is out of bounds for axis " + std::to_string(d) +
                                     " with size " + std::to_string(shape_[d]));
      off += idx[d] * strides_[d];
    }
    return data_as<T>()[off];
  }
  /// "float32[1000, 3]" (and " strided" when not C-contiguous).
  std::string describe() const {
    std::string s = std::string(dtype_name(dtype_)) + "[";
    for (std::size_t d = 0; d < shape_.size(); ++d)
      s += (d ? ", " : "") + std::to_string(shape_[d]);
    return s + "]" + (c_contiguous() ? "" : " strided");
  }

 private:
  template <class D>
  static std::vector<std::int64_t> dims(const D& d) {
    std::vector<std::int64_t> out;
    for (auto e : d) out.push_back(static_cast<std::int64_t>(e));
    return out;
  }
  static std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t>& shape) {
    std::vector<std::int64_t> st(shape.size());
    std::int64_t acc = 1;
    for (std::size_t d = shape.size(); d-- > 0;) {
      st[d] = acc;
      acc *= shape[d] > 0 ? shape[d] : 1;
    }
    return st;
  }
  void check() const {
    if (shape_.size() != strides_.size())
      throw error(value_error, "dynexpr: an Array's shape and strides differ in length");
    if (shape_.size() > 8) throw error(value_error, "dynexpr: arrays have at most 8 dimensions");
    for (std::int64_t e : shape_)
      if (e < 0) throw error(value_error, "dynexpr: an Array's extents must not be negative");
  }

  void* data_ = nullptr;
  dtype dtype_ = dtype::float64;
  std::vector<std::int64_t> shape_;
  std::vector<std::int64_t> strides_;
  bool readonly_ = false;
  std::shared_ptr<void> owner_;
};

/// One argument of an exported function: an array, a number or None. Python's bool, int
/// and float are told apart (a function captured with 2.0 is not the one for 2).
class Arg {
 public:
  enum kind_t { array, boolean, integer, floating, none };

  Arg(const Array& a) : kind_(array), array_(a) {}
  template <class V,
            class = std::enable_if_t<!std::is_same_v<std::decay_t<V>, Array> &&
                                     !std::is_same_v<std::decay_t<V>, Arg>>,
            class = decltype(std::declval<V&>().strides().begin())>
  Arg(V& v) : Arg(Array(v)) {}
  Arg(bool b) : kind_(boolean), i_(b) {}
  template <class N, std::enable_if_t<std::is_integral_v<N> && !std::is_same_v<N, bool>, int> = 0>
  Arg(N v) : kind_(integer), i_(static_cast<std::int64_t>(v)) {}
  template <class N, std::enable_if_t<std::is_floating_point_v<N>, int> = 0>
  Arg(N v) : kind_(floating), f_(static_cast<double>(v)) {}
  Arg(std::nullptr_t) : kind_(none) {}

  kind_t kind() const { return kind_; }
  const Array& as_array() const { return array_; }
  std::int64_t as_integer() const { return i_; }
  double as_floating() const { return f_; }
  /// "float32[1000]", "2.5", "3", "true", "None".
  std::string describe() const {
    switch (kind_) {
      case array:
        return array_.describe();
      case boolean:
        return i_ ? "True" : "False";
      case integer:
        return std::to_string(i_);
      case floating: {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.17g", f_);
        std::string s = buf;  // "1.0", not "1": an integer argument differs
        return s.find_first_of(".eni") == std::string::npos ? s + ".0" : s;
      }
      case none:
        return "None";
    }
    return "?";
  }

 private:
  kind_t kind_;
  Array array_;
  std::int64_t i_ = 0;
  double f_ = 0.0;
};

}  // namespace exported
}  // namespace dynexpr

#endif  // DYNEXPR_EXPORTED_HPP
