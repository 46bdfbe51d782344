// dynexpr/core/tensor.hpp — the owning Tensor<T> and the non-owning View<T>.
//
// A View is (pointer, shape, element strides): NumPy's ndarray without ownership. Basic
// indexing (ints, slices with any step, newaxis, ellipsis), transpose/permute, reshape
// and broadcast_to return Views of the same memory. A Tensor owns a 64-byte aligned,
// C-contiguous buffer and has value semantics: copying it copies the elements.
#pragma once

#include <cstdlib>
#if defined(__linux__)
#include <sys/mman.h>
#endif
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "dynexpr/core/config.hpp"
#include "dynexpr/core/dtype.hpp"
#include "dynexpr/core/error.hpp"
#include "dynexpr/core/shape.hpp"

namespace dynexpr {

/// One slice of basic indexing: start:stop:step, NumPy's rules (negative bounds count
/// from the end, out-of-range bounds are clipped, step may be negative, never zero).
struct slice {
  std::optional<index_t> start, stop;
  index_t step = 1;
  slice() = default;
  slice(std::optional<index_t> start_, std::optional<index_t> stop_, index_t step_ = 1)
      : start(start_), stop(stop_), step(step_) {}
};
/// An absent slice bound, as Python's None: `slice(none, none, -1)` is `[::-1]`.
inline constexpr std::nullopt_t none = std::nullopt;
/// `[:]` — the whole dimension (`dx::colon`; `dx::all` is the reduction).
inline const slice colon{};
struct newaxis_t {};
struct ellipsis_t {};
/// Inserts a size-1 dimension (`None` in NumPy indexing).
inline constexpr newaxis_t newaxis{};
/// Stands for as many `colon` as needed (`...` in NumPy indexing).
inline constexpr ellipsis_t ellipsis{};

template <class Arg>
concept IndexArg = std::is_integral_v<std::remove_cvref_t<Arg>> ||
                   std::is_same_v<std::remove_cvref_t<Arg>, slice> ||
                   std::is_same_v<std::remove_cvref_t<Arg>, newaxis_t> ||
                   std::is_same_v<std::remove_cvref_t<Arg>, ellipsis_t>;

namespace detail {
struct index_item {
  enum kind_t { integer, range, new_axis, ellipsis } kind;
  index_t i = 0;
  slice s;
};
inline index_item make_item(index_t i) { return {index_item::integer, i, {}}; }
inline index_item make_item(const slice& s) { return {index_item::range, 0, s}; }
inline index_item make_item(newaxis_t) { return {index_item::new_axis, 0, {}}; }
inline index_item make_item(ellipsis_t) { return {index_item::ellipsis, 0, {}}; }

/// CPython's PySlice_AdjustIndices: clip the bounds, count the elements.
inline index_t adjust_slice(const slice& s, index_t len, index_t& start) {
  const index_t step = s.step;
  if (step == 0) throw value_error("dynexpr: slice step cannot be zero");
  index_t lo = step < 0 ? -1 : 0, hi = step < 0 ? len - 1 : len;
  index_t b = s.start ? *s.start : (step < 0 ? hi : lo);
  index_t e = s.stop ? *s.stop : (step < 0 ? lo : hi);
  if (s.start) b = b < 0 ? std::max(b + len, lo) : std::min(b, hi);
  if (s.stop) e = e < 0 ? std::max(e + len, lo) : std::min(e, hi);
  start = b;
  if (step < 0) return e < b ? (b - e - 1) / (-step) + 1 : 0;
  return b < e ? (e - b - 1) / step + 1 : 0;
}

// Note [block cache]
// Every buffer a Tensor owns comes from acquire_block and goes back through release_block.
// Blocks of 256 KB to 32 MB that are released are kept (64 MB at most, the oldest freed
// first) and handed out again for the same size. A generated unit allocates and frees
// the same temporaries on every call (a loop's carried buffers, a trajectory); freeing
// several MB at once made glibc return the top of its heap to the system, so the next
// call faulted every page in again: 1000-8000 page faults a call, 1-4 ms, more than the
// arithmetic (a 20-step Newton iteration on 200K doubles: 1066 faults a call, 0 for
// NumPy's own temporaries, which are freed one at a time). Smaller blocks are recycled
// by malloc without faults; 32 MB and more are huge pages (Note [huge pages for big
// buffers]). The cache is shared by the units of a process (it lives in libdynexpr_rt.so
// for them, Note [runtime library]); a thread that finds its lock taken (another thread,
// or a fork while it was held) bypasses it. trim_block_cache() frees what it holds.
//
// Note [small blocks]
// The 0-d and tiny temporaries of a rolled loop's body (a tridiagonal solve's m, cp[i],
// dp[i]: three 64-byte blocks an iteration) went through aligned_alloc, which takes
// glibc's slow memalign path, not its per-thread cache: malloc and free were 15% of a
// Thomas solve's time. Each thread keeps up to 32 freed blocks of one alignment unit
// and hands them out again, without a lock; a block freed on another thread joins that
// thread's list, and a thread's list is freed when the thread ends.
struct block_header {
  void* base;         // what aligned_alloc returned
  std::size_t bytes;  // the data's capacity (a multiple of the alignment)
  std::size_t align;
};
inline constexpr std::size_t block_cache_min = std::size_t{256} << 10;
inline constexpr std::size_t block_cache_max_block = std::size_t{32} << 20;
inline constexpr std::size_t block_cache_capacity = std::size_t{64} << 20;

/// A block of `bytes` (a multiple of `align`, a power of two >= 64) at `align`, or null.
DYNEXPR_RT_FN void* acquire_block(std::size_t bytes, std::size_t align) noexcept;
/// Returns a block from acquire_block (null is ignored).
DYNEXPR_RT_FN void release_block(void* data) noexcept;
/// Frees every block the cache holds (and the calling thread's small blocks: Note [small
/// blocks]); returns the bytes of the shared cache's blocks it freed.
DYNEXPR_RT_FN std::size_t trim_block_cache() noexcept;

template <class T>
struct aligned_delete {
  void operator()(T* p) const { release_block(p); }
};
}  // namespace detail

template <class T>
class View;
template <Element T>
class Tensor;

/// Allocates `n` elements at buffer_alignment, zero-filled unless `zero` is false;
/// throws std::bad_alloc.
template <class T>
std::unique_ptr<T[], detail::aligned_delete<T>> allocate_zeroed(index_t n, bool zero = true) {
  const std::size_t bytes =
      ((static_cast<std::size_t>(n) * sizeof(T) + buffer_alignment - 1) / buffer_alignment) *
      buffer_alignment;
  // Note [huge pages for big buffers]: a fresh 64 MB output costs more in page faults
  // (16K of them at 4 KB) than the arithmetic that fills it. Buffers of 32 MB and more are
  // aligned to 2 MB and advised as huge pages, so the kernel faults them in 2 MB at once.
  // Below 32 MB glibc recycles freed blocks without new faults (its mmap threshold grows
  // to that), and measured 1.5x slower with huge pages there (bench, affine 1M-4M).
  const bool huge = bytes >= (std::size_t{32} << 20);
  const std::size_t align = huge ? (std::size_t{2} << 20) : buffer_alignment;
  const std::size_t total = ((bytes ? bytes : buffer_alignment) + align - 1) / align * align;
  void* p = detail::acquire_block(total, align);  // Note [block cache]
  if (!p) throw std::bad_alloc();
  if (zero) std::memset(p, 0, bytes);
  return std::unique_ptr<T[], detail::aligned_delete<T>>(static_cast<T*>(p));
}

// ---------------------------------------------------------------------------------------
// View<T>: T may be const-qualified (a read-only view).
// ---------------------------------------------------------------------------------------
template <class T>
class View {
 public:
  using value_type = std::remove_const_t<T>;
  static_assert(is_supported_v<value_type>,
                "dynexpr::View<T>: T must be one of bool, uint8_t, int32_t, int64_t, float, "
                "double (optionally const)");

  View() = default;
  View(T* data, Shape shape, Strides strides)
      : data_(data), shape_(shape), strides_(strides) {
    bool bad = shape_.size() != strides_.size();
    for (index_t e : shape_) bad = bad || e < 0;
    if (bad) throw_bad_view(shape_, strides_);
  }
  View(T* data, Shape shape) : View(data, shape, contiguous_strides(shape)) {}
  /// A read-only view of a writable one.
  template <class U>
    requires(std::is_const_v<T> && std::is_same_v<U, value_type>)
  View(const View<U>& v) : data_(v.data()), shape_(v.shape()), strides_(v.strides()) {}

  T* data() const { return data_; }
  const Shape& shape() const { return shape_; }
  const Strides& strides() const { return strides_; }
  int ndim() const { return shape_.size(); }
  index_t size() const { return shape_size(shape_); }
  bool is_contiguous() const { return dynexpr::is_contiguous(shape_, strides_); }

  /// Element reference with NumPy-style negative indices; bounds-checked.
  template <class... I>
    requires(std::is_integral_v<I> && ...)
  T& at(I... idx) const {
    if (static_cast<int>(sizeof...(I)) != ndim())
      throw index_error("dynexpr: at() got " + std::to_string(sizeof...(I)) +
                        " indices for an array of dimension " + std::to_string(ndim()));
    index_t off = 0;
    int k = 0;
    ((off += strides_[k] * checked_index(static_cast<index_t>(idx), k), ++k), ...);
    return data_[off];
  }

  /// NumPy basic indexing: `v.slice(1, dx::slice(dx::none, dx::none, -1), dx::newaxis)`.
  template <IndexArg... A>
  View slice(A&&... args) const {
    const detail::index_item items[] = {detail::make_item(args)..., detail::make_item(colon)};
    return index(items, static_cast<int>(sizeof...(A)));
  }

  /// Axes reversed, as NumPy's `.T`.
  View transpose() const {
    Shape s;
    Strides st;
    for (int i = ndim() - 1; i >= 0; --i) s.push_back(shape_[i]), st.push_back(strides_[i]);
    return View(data_, s, st);
  }
  /// Axes reordered: result dimension i is this view's dimension axes[i].
  View permute(const Shape& axes) const {
    if (axes.size() != ndim())
      throw shape_error("dynexpr: permute got " + axes.str() + " for an array of dimension " +
                        std::to_string(ndim()) + "; give each axis once");
    bool seen[max_rank] = {};
    Shape s;
    Strides st;
    for (index_t a : axes) {
      const int ax = normalize_axis(static_cast<int>(a), ndim());
      if (seen[ax]) throw shape_error("dynexpr: permute: repeated axis in " + axes.str());
      seen[ax] = true;
      s.push_back(shape_[ax]);
      st.push_back(strides_[ax]);
    }
    return View(data_, s, st);
  }
  /// The same elements with a new shape (one -1 is inferred), without copying. Throws
  /// shape_error when the strides do not allow it; `copy().reshape(...)` always works.
  View reshape(Shape new_shape) const;
  /// Reads this view as `target` by NumPy broadcasting (stride 0 where broadcast).
  View broadcast_to(const Shape& target) const {
    return View(data_, target, broadcast_strides(shape_, strides_, target));
  }
  /// A C-contiguous copy.
  Tensor<value_type> copy() const;

 private:
  index_t checked_index(index_t i, int dim) const {
    const index_t n = shape_[dim];
    if (i < -n || i >= n)
      throw index_error("dynexpr: index " + std::to_string(i) + " is out of bounds for axis " +
                        std::to_string(dim) + " with size " + std::to_string(n));
    return i < 0 ? i + n : i;
  }
  View index(const detail::index_item* items, int count) const;

  T* data_ = nullptr;
  Shape shape_;
  Strides strides_;
};

template <class T>
View<T> View<T>::index(const detail::index_item* items, int count) const {
  int consumed = 0, ellipses = 0;
  for (int i = 0; i < count; ++i) {
    if (items[i].kind == detail::index_item::integer || items[i].kind == detail::index_item::range)
      ++consumed;
    ellipses += items[i].kind == detail::index_item::ellipsis;
  }
  if (ellipses > 1) throw index_error("dynexpr: an index can only have a single ellipsis");
  if (consumed > ndim())
    throw index_error("dynexpr: too many indices for array: array is " +
                      std::to_string(ndim()) + "-dimensional, but " + std::to_string(consumed) +
                      " were indexed");
  T* p = data_;
  Shape s;
  Strides st;
  int dim = 0;
  auto take = [&](const detail::index_item& it) {
    switch (it.kind) {
      case detail::index_item::integer:
        p += strides_[dim] * checked_index(it.i, dim);
        ++dim;
        break;
      case detail::index_item::range: {
        index_t start = 0;
        const index_t len = detail::adjust_slice(it.s, shape_[dim], start);
        if (len > 0) p += strides_[dim] * start;
        s.push_back(len);
        st.push_back(strides_[dim] * it.s.step);
        ++dim;
        break;
      }
      case detail::index_item::new_axis:
        s.push_back(1);
        st.push_back(0);
        break;
      case detail::index_item::ellipsis:
        for (int k = 0, n = ndim() - consumed; k < n; ++k, ++dim) {
          s.push_back(shape_[dim]);
          st.push_back(strides_[dim]);
        }
        break;
    }
  };
  for (int i = 0; i < count; ++i) take(items[i]);
  // The trailing `colon` item the caller appended covers one dimension; cover the rest.
  while (dim < ndim()) {
    s.push_back(shape_[dim]);
    st.push_back(strides_[dim]);
    ++dim;
  }
  return View(p, s, st);
}

template <class T>
View<T> View<T>::reshape(Shape ns) const {
  // Infer one -1.
  int infer = -1;
  index_t known = 1;
  for (int i = 0; i < ns.size(); ++i) {
    if (ns[i] == -1) {
      if (infer >= 0) throw shape_error("dynexpr: reshape: can only specify one unknown (-1)");
      infer = i;
    } else if (ns[i] < 0) {
      throw shape_error("dynexpr: reshape: negative dimension in " + ns.str());
    } else {
      known *= ns[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || size() % known != 0)
      throw shape_error("dynexpr: cannot reshape array of size " + std::to_string(size()) +
                        " into shape " + ns.str());
    ns[infer] = size() / known;
  }
  if (shape_size(ns) != size())
    throw shape_error("dynexpr: cannot reshape array of size " + std::to_string(size()) +
                      " into shape " + ns.str());
  // NumPy's no-copy reshape: walk old and new dims in groups of equal element counts;
  // within a group the old dims must be contiguous with each other.
  Shape os;
  Strides ost;
  for (int i = 0; i < ndim(); ++i)
    if (shape_[i] != 1) os.push_back(shape_[i]), ost.push_back(strides_[i]);
  Strides nst = Strides::filled(ns.size(), 0);
  if (size() == 0 || os.size() == 0) return View(data_, ns, contiguous_strides(ns));
  int oi = 0, oj = 1, ni = 0, nj = 1;
  while (ni < ns.size() && oi < os.size()) {
    index_t np = ns[ni], op = os[oi];
    while (np != op) {
      if (np < op) np *= ns[nj++];
      else op *= os[oj++];
    }
    for (int k = oi; k < oj - 1; ++k)
      if (ost[k] != os[k + 1] * ost[k + 1])
        throw shape_error("dynexpr: cannot reshape a view of shape " + shape_.str() +
                          " with strides " + strides_.str() + " into " + ns.str() +
                          " without copying; reshape a copy instead (v.copy().reshape(...))");
    nst[nj - 1] = ost[oj - 1];
    for (int k = nj - 1; k > ni; --k) nst[k - 1] = nst[k] * ns[k];
    ni = nj++;
    oi = oj++;
  }
  // Trailing size-1 dims of the new shape take any stride.
  for (int k = ni; k < ns.size(); ++k) nst[k] = 1;
  return View(data_, ns, nst);
}

// ---------------------------------------------------------------------------------------
// Tensor<T>
// ---------------------------------------------------------------------------------------
template <Element T>
class Tensor {
 public:
  using value_type = T;

  Tensor() : Tensor(Shape{0}) {}
  /// Zero-filled, C-contiguous, 64-byte aligned.
  explicit Tensor(const Shape& shape)
      : shape_(shape), strides_(contiguous_strides(shape)), size_(checked_size(shape)),
        data_(allocate_zeroed<T>(size_)) {}
  /// Uninitialised elements (np.empty): for outputs about to be overwritten, so that the
  /// first touch of fresh pages happens in the (threaded) evaluation, not in a memset.
  static Tensor empty(const Shape& shape) { return Tensor(shape, uninitialized{}); }
  Tensor(const Shape& shape, T fill) : Tensor(shape) {
    for (index_t i = 0; i < size_; ++i) data_[i] = fill;
  }
  Tensor(const Tensor& o) : Tensor(o.shape_) {
    if (size_) std::memcpy(data_.get(), o.data_.get(), size_ * sizeof(T));
  }
  Tensor(Tensor&& o) noexcept
      : shape_(o.shape_), strides_(o.strides_), size_(o.size_), data_(std::move(o.data_)) {
    o.shape_ = Shape{0};
    o.strides_ = Strides{1};
    o.size_ = 0;
    o.data_ = allocate_zeroed_noexcept();
  }
  Tensor& operator=(const Tensor& o) {
    if (this != &o) *this = Tensor(o);
    return *this;
  }
  Tensor& operator=(Tensor&& o) noexcept {
    std::swap(shape_, o.shape_);
    std::swap(strides_, o.strides_);
    std::swap(size_, o.size_);
    std::swap(data_, o.data_);
    return *this;
  }
  // Construction and assignment from expressions live in eval/assign.hpp (they need the
  // evaluator); declared here so that `Tensor<float> z = x * 2 + y;` works.
  template <class E>
    requires requires { typename std::remove_cvref_t<E>::dynexpr_expr_tag; }
  Tensor(E&& e);
  template <class E>
    requires requires { typename std::remove_cvref_t<E>::dynexpr_expr_tag; }
  Tensor& operator=(E&& e);

  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  const Shape& shape() const { return shape_; }
  const Strides& strides() const { return strides_; }
  index_t size() const { return size_; }
  int ndim() const { return shape_.size(); }

  View<T> view() { return View<T>(data(), shape_, strides_); }
  View<const T> view() const { return View<const T>(data(), shape_, strides_); }
  operator View<T>() { return view(); }
  operator View<const T>() const { return view(); }

  template <class... I>
  T& at(I... i) {
    return view().at(i...);
  }
  template <class... I>
  const T& at(I... i) const {
    return view().at(i...);
  }
  template <IndexArg... A>
  View<T> slice(A&&... a) {
    return view().slice(std::forward<A>(a)...);
  }
  template <IndexArg... A>
  View<const T> slice(A&&... a) const {
    return view().slice(std::forward<A>(a)...);
  }
  View<T> transpose() { return view().transpose(); }
  View<const T> transpose() const { return view().transpose(); }
  View<T> permute(const Shape& axes) { return view().permute(axes); }
  View<const T> permute(const Shape& axes) const { return view().permute(axes); }
  View<T> reshape(const Shape& s) { return view().reshape(s); }
  View<const T> reshape(const Shape& s) const { return view().reshape(s); }
  View<T> broadcast_to(const Shape& s) { return view().broadcast_to(s); }
  View<const T> broadcast_to(const Shape& s) const { return view().broadcast_to(s); }

 private:
  struct uninitialized {};
  Tensor(const Shape& shape, uninitialized)
      : shape_(shape), strides_(contiguous_strides(shape)), size_(checked_size(shape)),
        data_(allocate_zeroed<T>(size_, false)) {}
  static index_t checked_size(const Shape& s) {
    for (index_t e : s)
      if (e < 0) throw shape_error("dynexpr: negative extent in shape " + s.str());
    return shape_size(s);
  }
  static std::unique_ptr<T[], detail::aligned_delete<T>> allocate_zeroed_noexcept() noexcept {
    return std::unique_ptr<T[], detail::aligned_delete<T>>(
        static_cast<T*>(detail::acquire_block(buffer_alignment, buffer_alignment)));
  }

  Shape shape_;
  Strides strides_;
  index_t size_ = 0;
  std::unique_ptr<T[], detail::aligned_delete<T>> data_;
};

template <class T>
Tensor<typename View<T>::value_type> View<T>::copy() const {
  Tensor<value_type> out = Tensor<value_type>::empty(shape_);
  // A plain nested walk; the SIMD copy is dx::eval(v) (eval/), which this header must not
  // depend on.
  const int nd = ndim();
  index_t idx[max_rank] = {};
  value_type* o = out.data();
  for (index_t n = 0, total = size(); n < total; ++n) {
    index_t off = 0;
    for (int k = 0; k < nd; ++k) off += idx[k] * strides_[k];
    o[n] = data_[off];
    for (int k = nd - 1; k >= 0; --k) {
      if (++idx[k] < shape_[k]) break;
      idx[k] = 0;
    }
  }
  return out;
}

/// A non-owning view of memory the caller owns: `dx::view(ptr, {n}, {2})`.
template <class T>
View<T> view(T* data, const Shape& shape, const Strides& strides) {
  return View<T>(data, shape, strides);
}
template <class T>
View<T> view(T* data, const Shape& shape) {
  return View<T>(data, shape);
}

// ---------------------------------------------------------------------------------------
// The block cache (Note [block cache]): defined here for header-only users and in
// libdynexpr_rt.so for generated units.
// ---------------------------------------------------------------------------------------
#if !defined(DYNEXPR_RUNTIME_EXTERN)
namespace detail {
struct block_cache {
  struct slot {
    void* data = nullptr;
    std::size_t bytes = 0, align = 0;
    std::uint64_t age = 0;
  };
  std::mutex mutex;
  slot slots[16];
  std::size_t held = 0;
  std::uint64_t clock = 0;
};

inline block_cache& the_block_cache() noexcept {
  static block_cache cache;
  return cache;
}

inline block_header* header_of(void* data) noexcept {
  return reinterpret_cast<block_header*>(static_cast<char*>(data) - sizeof(block_header));
}

inline bool cacheable(std::size_t bytes) noexcept {
  return bytes >= block_cache_min && bytes <= block_cache_max_block;
}

inline void free_block(void* data) noexcept { std::free(header_of(data)->base); }

// Note [small blocks]
struct small_blocks {
  static constexpr int capacity = 32;
  void* items[capacity];
  int n = 0;
  bool open = true;  // false once the thread is ending: later frees go to malloc
  void clear() noexcept {
    while (n > 0) free_block(items[--n]);
  }
  ~small_blocks() {
    clear();
    open = false;
  }
};

inline small_blocks& the_small_blocks() noexcept {
  thread_local small_blocks blocks;
  return blocks;
}

inline bool small(std::size_t bytes, std::size_t align) noexcept {
  return bytes == buffer_alignment && align == buffer_alignment;
}

DYNEXPR_RT_FN void* acquire_block(std::size_t bytes, std::size_t align) noexcept {
  if (small(bytes, align)) {
    small_blocks& l = the_small_blocks();
    if (l.n > 0) return l.items[--l.n];
  } else if (cacheable(bytes)) {
    block_cache& c = the_block_cache();
    std::unique_lock<std::mutex> lock(c.mutex, std::try_to_lock);
    if (lock.owns_lock()) {
      for (auto& s : c.slots) {
        if (s.data && s.bytes == bytes && s.align == align) {
          void* p = s.data;
          s.data = nullptr;
          c.held -= bytes;
          return p;
        }
      }
    }
  }
  // The header sits just below the data, in the first `align` bytes of the block.
  if (bytes > ~std::size_t{0} - align) return nullptr;
  void* base = std::aligned_alloc(align, bytes + align);
  if (!base) return nullptr;
  void* data = static_cast<char*>(base) + align;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (align >= (std::size_t{2} << 20)) ::madvise(base, bytes + align, MADV_HUGEPAGE);
#endif
  *header_of(data) = block_header{base, bytes, align};
  return data;
}

DYNEXPR_RT_FN void release_block(void* data) noexcept {
  if (!data) return;
  const block_header h = *header_of(data);
  if (small(h.bytes, h.align)) {
    small_blocks& l = the_small_blocks();
    if (l.open && l.n < small_blocks::capacity) {
      l.items[l.n++] = data;
      return;
    }
  } else if (cacheable(h.bytes)) {
    block_cache& c = the_block_cache();
    std::unique_lock<std::mutex> lock(c.mutex, std::try_to_lock);
    if (lock.owns_lock()) {
      // Make room: the oldest blocks go first, until this one fits.
      while (c.held + h.bytes > block_cache_capacity) {
        block_cache::slot* oldest = nullptr;
        for (auto& s : c.slots)
          if (s.data && (!oldest || s.age < oldest->age)) oldest = &s;
        if (!oldest) break;
        free_block(oldest->data);
        c.held -= oldest->bytes;
        oldest->data = nullptr;
      }
      if (c.held + h.bytes <= block_cache_capacity) {
        // An empty slot, else the oldest one.
        block_cache::slot* free_slot = &c.slots[0];
        for (auto& s : c.slots) {
          if (!s.data) {
            free_slot = &s;
            break;
          }
          if (s.age < free_slot->age) free_slot = &s;
        }
        if (free_slot->data) {  // all 16 slots taken: the oldest makes way
          free_block(free_slot->data);
          c.held -= free_slot->bytes;
        }
        *free_slot = block_cache::slot{data, h.bytes, h.align, ++c.clock};
        c.held += h.bytes;
        return;
      }
    }
  }
  std::free(h.base);
}

DYNEXPR_RT_FN std::size_t trim_block_cache() noexcept {
  the_small_blocks().clear();  // not counted: the bytes returned are the shared cache's
  block_cache& c = the_block_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  std::size_t freed = 0;
  for (auto& s : c.slots) {
    if (s.data) {
      free_block(s.data);
      freed += s.bytes;
      s.data = nullptr;
    }
  }
  c.held = 0;
  return freed;
}
}  // namespace detail
#endif  // !DYNEXPR_RUNTIME_EXTERN

}  // namespace dynexpr
