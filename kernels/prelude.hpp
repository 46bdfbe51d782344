// kernels/prelude.hpp — the one header a generated CPU unit includes (precompiled: see
// bridge/dynexpr/cache.py). It brings in the library and the C ABI, and the few helpers
// generated code needs that are not library API: argument checking against the graph's
// dtypes and shapes, dynamic sizes, views of leaves, and the exception barrier.
//
// A unit reads (bridge/dynexpr/codegen.py writes it; tests/python/golden/ hold examples):
//
//   #include "prelude.hpp"
//   namespace dx = dynexpr;
//   namespace dxk = dynexpr::kernel;
//   static void run(dxk::frame& f) {
//     const auto x0 = f.input<float>(0, {1024});
//     const auto o0 = f.output<float>(0, {1024});
//     dx::assign(o0, dxk::typed<float>(dx::tanh(x0 * 2.0)));
//   }
//   DYNEXPR_UNIT(run, 1, 1)
//
// Note [lean units]
// Compile time is the first call's cost, so the prelude and what units instantiate are
// kept small. The prelude includes the library without Eigen (a unit with a matmul adds
// `#include <dynexpr/interop/matmul.hpp>` after it, Eigen-free too: Note [matmul without
// Eigen in units]), and writes into buffers that are new for this call (outputs,
// temporaries) go through assign_fresh/eval_fresh: no aliasing check, no temporary, and
// only the unit-stride and tail loops instantiated (the graph's guards make operands
// contiguous in the common case; other layouts still evaluate correctly, lane by lane).
// Measured on a 10-op float32 chain: the lean prelude's PCH is 137 MB instead of 192 MB,
// and the unit ~20% less CPU to compile.
#pragma once

// Note [no special functions in units]
// A precompiled header is written before GCC instantiates the templates that the
// headers' inline functions use, so every unit repeats those instantiations (GCC's
// "phase lang. deferred": ~85% of an empty unit's 0.4 s). The largest share, ~a third
// of the instantiated code, is libstdc++'s C++17 special functions (std::cyl_bessel_j,
// std::riemann_zeta, ... for float and long double), pulled in by <cmath> and used by
// no unit. libstdc++ gives no switch to leave them out in C++17 and later, so the macro
// that includes them is undefined here, after <version> has defined it and before any
// header includes <cmath>: a unit of one empty function compiles in 0.33 s instead of
// 0.41 s, and the compile step of bench/python/capture_bench.py's 10-op unit takes a
// median 0.78 s instead of 0.875 s over 20 interleaved runs on a loaded 2-core VM (g++
// 12; `-fdump-tree-original` lists what a unit instantiates, `-ftime-report` times it).
// Only units see this; the library's headers are untouched for C++ users.
#include <version>
#if defined(__GLIBCXX__)
#undef _GLIBCXX_USE_STD_SPEC_FUNCS
#endif

// Units link against libdynexpr_rt.so, which holds the thread pool and the argument
// checks (Note [runtime library] in dynexpr/parallel/thread_pool.hpp; kernels/runtime.cpp).
#if !defined(DYNEXPR_RUNTIME_DEFINE)
#define DYNEXPR_RUNTIME_EXTERN 1
#endif

#include <dynexpr/core/config.hpp>
// config.hpp first: it sets Highway's static-dispatch mode before Highway is included.
#include <dynexpr/core/dtype.hpp>
#include <dynexpr/core/error.hpp>
#include <dynexpr/core/shape.hpp>
#include <dynexpr/core/tensor.hpp>
#include <dynexpr/eval/assign.hpp>
#include <dynexpr/eval/reductions.hpp>
#include <dynexpr/ops/operators.hpp>
#include <dynexpr/parallel/thread_pool.hpp>

#include <cstring>
#include <initializer_list>
#include <cstdlib>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

#include "abi.h"

namespace dynexpr::kernel {

/// What dynexpr_kernel returns; the bridge (bridge/native/kernel.c) raises the matching Python
/// exception. ABI-visible: append only.
enum status : std::int32_t {
  status_ok = 0,
  status_internal = 1,  // RuntimeError: a bug in dynexpr, not in the user's code
  status_value = 2,     // ValueError: shapes that do not broadcast, an empty max, ...
  status_index = 3,     // IndexError
  status_memory = 4,    // MemoryError
  status_type = 5,      // TypeError: an argument of the wrong dtype or rank
};

/// An argument that does not match what the unit was compiled for.
struct argument_error : dynexpr::error {
  std::int32_t code;
  argument_error(std::int32_t c, const std::string& what) : dynexpr::error(what), code(c) {}
};

/// One extent of an argument's shape as the unit expects it: a constant, or dynamic size
/// number `id` (bound by the first argument that has it, checked against the others).
struct extent {
  index_t value = 0;
  int sym = -1;
  constexpr extent(int v) : value(v) {}
  constexpr extent(long v) : value(v) {}
  constexpr extent(long long v) : value(v) {}
};
struct dyn {
  int id;
  operator extent() const {
    extent e(0);
    e.sym = id;
    return e;
  }
};

template <class T>
constexpr std::int32_t code_of() {
  return static_cast<std::int32_t>(dtype_of<T>());
}

/// The device this prelude's units run on (dx_array::device): the CPU, host memory.
inline constexpr std::int32_t unit_device = DX_DEVICE_CPU;

inline std::string device_name(const dx_device& d) {
  const char* kind = d.kind == DX_DEVICE_CPU    ? "cpu"
                     : d.kind == DX_DEVICE_CUDA ? "cuda"
                                                : "unknown";
  return kind + (":" + std::to_string(d.ordinal));
}

inline const char* code_name(std::int32_t c) {
  // dtype_name's views are of string literals: NUL-terminated.
  return c >= 0 && c < n_dtypes ? dtype_name(static_cast<dtype>(c)).data() : "an unknown dtype";
}

/// The arguments of one call, checked as they are bound. Dynamic sizes live here.
class frame {
 public:
  static constexpr int max_symbols = 16;

  frame(const dx_array* in, std::int32_t n_in, const dx_array* out, std::int32_t n_out,
        std::int32_t want_in, std::int32_t want_out)
      : in_(in), out_(out) {
    if (n_in != want_in || n_out != want_out) throw_arity(n_in, n_out, want_in, want_out);
  }

  /// Input i, read-only.
  template <class T>
  View<const T> input(int i, std::initializer_list<extent> shape) {
    return bind<T>(in_[i], "input", i, shape);
  }
  /// Input i, which the graph writes to (an argument mutated in place).
  template <class T>
  View<T> inout(int i, std::initializer_list<extent> shape) {
    return bind<T>(in_[i], "input", i, shape);
  }
  /// Output i, allocated by the caller.
  template <class T>
  View<T> output(int i, std::initializer_list<extent> shape) {
    return bind<T>(out_[i], "output", i, shape);
  }
  /// Binds dynamic size `sym` to a value the unit computes: a loop body's extent that
  /// moves with its loop variable (Note [dynamic extents], bridge/dynexpr/ir.py).
  void bind_extent(int sym, index_t value) {
    if (sym < 0 || sym >= max_symbols)
      throw argument_error(status_internal, "dynexpr: too many dynamic sizes in a loop body");
    sym_[sym] = value < 0 ? 0 : value;
    bound_[sym] = true;
  }
  /// A shape with its dynamic sizes resolved (all bound by the inputs by now).
  Shape shape(std::initializer_list<extent> shape) const {
    Shape s;
    for (const extent& e : shape) s.push_back(e.sym < 0 ? e.value : sym_[e.sym]);
    return s;
  }

 private:
  template <class T>
  View<T> bind(const dx_array& a, const char* role, int i, std::initializer_list<extent> shape) {
    Shape s;
    Strides st;
    check(a, code_of<T>(), role, i, shape, s, st);
    return View<T>(static_cast<T*>(a.data), s, st);
  }
  /// Checks argument `a` against the dtype `code` and the extents `shape` the unit was
  /// compiled for, binds dynamic sizes, and gives its shape and strides. Defined once, in
  /// the runtime library (below, under DYNEXPR_RUNTIME_DEFINE).
  void check(const dx_array& a, std::int32_t code, const char* role, int i,
             std::initializer_list<extent> shape, Shape& s, Strides& st);

  /// The error of a call with the wrong argument counts: out of line, in the runtime
  /// library (its message building was compiled again in every unit).
  [[noreturn]] static void throw_arity(std::int32_t n_in, std::int32_t n_out,
                                       std::int32_t want_in, std::int32_t want_out);

  const dx_array* in_;
  const dx_array* out_;
  index_t sym_[max_symbols] = {};
  bool bound_[max_symbols] = {};
};

#if !defined(DYNEXPR_RUNTIME_EXTERN)
DYNEXPR_RT_FN void frame::throw_arity(std::int32_t n_in, std::int32_t n_out, std::int32_t want_in,
                                    std::int32_t want_out) {
  throw argument_error(status_type, "dynexpr: kernel called with " + std::to_string(n_in) +
                                        " inputs and " + std::to_string(n_out) +
                                        " outputs; it takes " + std::to_string(want_in) +
                                        " and " + std::to_string(want_out));
}

DYNEXPR_RT_FN void frame::check(const dx_array& a, std::int32_t code, const char* role, int i,
                              std::initializer_list<extent> shape, Shape& s, Strides& st) {
  // Messages are built only on failure: this runs on every call.
  auto fail = [&](std::int32_t status, const std::string& what) {
    throw argument_error(status, std::string("dynexpr: kernel ") + role + " " +
                                   std::to_string(i) + what);
  };
  // One compare per argument: a unit never reads memory of a device it cannot address.
  if (a.device.kind != unit_device)
    fail(status_type, " is on device " + device_name(a.device) +
                          "; this unit runs on the cpu and reads host memory only");
  if (a.dtype != code)
    fail(status_type, std::string(" has dtype ") + code_name(a.dtype) + ", expected " +
                          code_name(code));
  if (a.ndim != static_cast<std::int32_t>(shape.size()))
    fail(status_type, " has " + std::to_string(a.ndim) + " dimensions, expected " +
                          std::to_string(shape.size()));
  if (a.ndim > max_rank || (a.ndim > 0 && (!a.shape || !a.strides)))
    fail(status_type, ": bad descriptor (rank or null shape/strides)");
  index_t size = 1;
  int k = 0;
  for (const extent& e : shape) {
    const index_t got = a.shape[k];
    if (got < 0) fail(status_value, ": negative extent");
    if (e.sym < 0) {
      if (got != e.value)
        fail(status_value, " has extent " + std::to_string(got) + " in dimension " +
                               std::to_string(k) + ", expected " + std::to_string(e.value));
    } else if (e.sym >= max_symbols) {
      fail(status_internal, ": too many dynamic sizes");
    } else if (bound_[e.sym]) {
      if (got != sym_[e.sym])
        fail(status_value, " has extent " + std::to_string(got) + " in dimension " +
                               std::to_string(k) + ", which must equal " +
                               std::to_string(sym_[e.sym]) +
                               " (the same dynamic size elsewhere)");
    } else {
      bound_[e.sym] = true;
      sym_[e.sym] = got;
    }
    s.push_back(got);
    st.push_back(a.strides[k]);
    size *= got;
    ++k;
  }
  if (size > 0 && !a.data) fail(status_type, ": null data pointer");
}
#endif  // !DYNEXPR_RUNTIME_EXTERN

/// e as an expression of dtype T: itself when its dtype is T, else cast (astype). The
/// graph decided every dtype with NumPy's rules; this pins each value to it.
template <Element T, Operand E>
auto typed(E&& e) {
  auto x = as_expr(std::forward<E>(e));
  if constexpr (std::is_same_v<typename decltype(x)::value_type, T>) return x;
  else return cast<T>(std::move(x));
}

/// out[...] = e for an output the caller allocated for this call (Note [lean units]): it
/// cannot overlap any operand, so there is no aliasing check and no temporary, and the
/// loop is the lean one. Broadcasting and dtype are as dx::assign. General: codegen saw
/// an operand that is not unit-stride along the inner dimension (a keepdims reduction,
/// a 0-d value, a transpose): instantiate the strided/broadcast packet loop too, rather
/// than going lane by lane (softmax over rows: 3x slower lean).
// Note [direct pointwise loops] (bridge/dynexpr/codegen.py): what their generated
// functions need besides Highway and the op table.

/// Copies the elements of a strided array (element strides) into dst in C order; in
/// libdynexpr_rt.so, one loop for every dtype (no template per unit).
DYNEXPR_RT_FN void copy_dense(const void* src, const Shape& shape, const Strides& strides,
                              std::size_t itemsize, void* dst);
#if !defined(DYNEXPR_RUNTIME_EXTERN)
DYNEXPR_RT_FN void copy_dense(const void* src, const Shape& shape, const Strides& strides,
                              std::size_t itemsize, void* dst) {
  const int nd = static_cast<int>(shape.size());
  index_t n = 1;
  for (int k = 0; k < nd; ++k) n *= shape[k];
  if (n == 0) return;
  index_t idx[max_rank] = {};
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  for (index_t e = 0; e < n; ++e) {
    index_t off = 0;
    for (int k = 0; k < nd; ++k) off += idx[k] * strides[k];
    std::memcpy(d + e * static_cast<index_t>(itemsize), s + off * static_cast<index_t>(itemsize),
                itemsize);
    for (int k = nd - 1; k >= 0; --k) {
      if (++idx[k] < shape[k]) break;
      idx[k] = 0;
    }
  }
}
#endif

/// Memory dense() copied into, freed with the block that declared it.
struct owned {
  void* p = nullptr;
  owned() = default;
  owned(const owned&) = delete;
  owned& operator=(const owned&) = delete;
  ~owned() { std::free(p); }
};

/// v's elements in C order: v's own memory when it is contiguous, else a copy in keep.
template <class T>
const T* dense(const View<T>& v, owned& keep) {
  if (v.is_contiguous()) return v.data();
  keep.p = std::malloc(static_cast<std::size_t>(std::max<index_t>(v.size(), 1)) * sizeof(T));
  if (keep.p == nullptr) throw std::bad_alloc();
  copy_dense(v.data(), v.shape(), v.strides(), sizeof(T), keep.p);
  return static_cast<const T*>(keep.p);
}

/// fn(ctx, r0, r1) over rows [0, rows) of row_len elements each, on the pool in groups of
/// about evaluation::block_elements elements; a row is never split (the result does not
/// depend on the thread count).
DYNEXPR_RT_FN void run_rows(index_t rows, index_t row_len, double cost_per_element,
                            void (*fn)(void*, index_t, index_t), void* ctx);
#if !defined(DYNEXPR_RUNTIME_EXTERN)
DYNEXPR_RT_FN void run_rows(index_t rows, index_t row_len, double cost_per_element,
                            void (*fn)(void*, index_t, index_t), void* ctx) {
  if (rows == 0) return;
  const index_t grain = std::max<index_t>(1, evaluation::block_elements / std::max<index_t>(row_len, 1));
  parallel::parallel_for(rows, grain, 1,
                         static_cast<double>(rows) * static_cast<double>(row_len) * cost_per_element,
                         [&](index_t r0, index_t r1) { fn(ctx, r0, r1); });
}
#endif

/// `shape` reduced along its last axis: that extent 1 (keepdims) or dropped.
inline Shape reduced_rows(const Shape& shape, bool keepdims) {
  Shape out;
  for (std::size_t k = 0; k + 1 < shape.size(); ++k) out.push_back(shape[k]);
  if (keepdims) out.push_back(1);
  return out;
}

/// fn(ctx, begin, end) over [0, n) in blocks of evaluation::block_elements on the pool,
/// as the expression loop splits a contiguous output (so the SIMD tail is at n only). In
/// libdynexpr_rt.so: the pool's loop is instantiated once, not per unit.
DYNEXPR_RT_FN void run_blocks(index_t n, double cost_per_element,
                              void (*fn)(void*, index_t, index_t), void* ctx);
#if !defined(DYNEXPR_RUNTIME_EXTERN)
DYNEXPR_RT_FN void run_blocks(index_t n, double cost_per_element,
                              void (*fn)(void*, index_t, index_t), void* ctx) {
  if (n == 0) return;
  constexpr index_t B = evaluation::block_elements;
  parallel::parallel_for((n + B - 1) / B, 1, 1, static_cast<double>(n) * cost_per_element,
                         [&](index_t ib, index_t ie) { fn(ctx, ib * B, std::min(ie * B, n)); });
}
#endif

template <bool General = false, class T, Operand E>
void assign_fresh(View<T> out, E&& e) {
  auto x = typed<T>(std::forward<E>(e));
  evaluation::check_broadcast_into(x.shape(), out.shape());
  if (out.size() == 0) return;
  const auto lowered = evaluation::lower(x);
  evaluation::run<T, std::remove_cvref_t<decltype(lowered)>, !General>(out, lowered);
}

/// dx::eval(e) into a new C-contiguous tensor, with the lean loop (Note [lean units]);
/// General as for assign_fresh.
template <bool General = false, Operand E>
auto eval_fresh(E&& e) {
  return evaluation::evaluate_new<!General>(as_expr(std::forward<E>(e)));
}

/// A materialised result (reduction, matmul) as a Tensor of dtype T: itself when its
/// dtype is T, else converted.
template <Element T, Element U>
Tensor<T> tensor(Tensor<U>&& t) {
  if constexpr (std::is_same_v<T, U>) return std::move(t);
  else return dynexpr::eval(cast<T>(t));
}

/// Op applied to scalars as map_expr's evaluator applies it to one element: operands
/// converted to the op's compute type, the body run, the result converted to its result
/// type. What a loop body of 0-d values is written in (Note [scalar loop bodies],
/// bridge/dynexpr/codegen_scalar.py).
template <class Op, class... A>
DYNEXPR_INLINE auto sc(A... a) {
  Op::template check<A...>();
  using C = typename Op::template compute<A...>;
  using R = typename Op::template result<A...>;
  return static_cast<R>(Op::scalar(static_cast<C>(a)...));
}

/// A read-only view of one value repeated over `shape` (np.full without the memory).
template <class T>
View<const T> splat(const T* value, const Shape& shape) {
  return View<const T>(value, shape, Strides::filled(shape.size(), 0));
}

/// np.expand_dims(v, axes), axes already normalised against the result rank, sorted.
template <class T>
View<T> expand_dims(const View<T>& v, std::initializer_list<int> axes) {
  Shape s;
  Strides st;
  int src = 0;
  const int nd = v.ndim() + static_cast<int>(axes.size());
  for (int i = 0; i < nd; ++i) {
    bool inserted = false;
    for (int a : axes) inserted = inserted || a == i;
    if (inserted) s.push_back(1), st.push_back(0);
    else s.push_back(v.shape()[src]), st.push_back(v.strides()[src]), ++src;
  }
  return View<T>(v.data(), s, st);
}

/// np.squeeze(v, axes): axes normalised; each must have extent 1 (checked).
template <class T>
View<T> squeeze(const View<T>& v, std::initializer_list<int> axes) {
  Shape s;
  Strides st;
  for (int i = 0; i < v.ndim(); ++i) {
    bool drop = false;
    for (int a : axes) drop = drop || a == i;
    if (drop && v.shape()[i] != 1)
      throw value_error("dynexpr: cannot select an axis to squeeze out which has size not "
                        "equal to one");
    if (!drop) s.push_back(v.shape()[i]), st.push_back(v.strides()[i]);
  }
  return View<T>(v.data(), s, st);
}

/// np.reshape(v, shape): a view when the strides allow it, else a copy kept in `keep`
/// (NumPy copies in the same cases).
template <class T>
View<const std::remove_const_t<T>> reshape(const View<T>& v, const Shape& shape,
                                           Tensor<std::remove_const_t<T>>& keep) {
  using U = std::remove_const_t<T>;
  try {
    return View<const U>(v.reshape(shape));
  } catch (const shape_error&) {
    if (shape_size(shape) != v.size()) throw;
    keep = v.copy();
    return View<const U>(keep.view().reshape(shape));
  }
}

// Note [row blocks]
// A run of kernels over the same rows (softmax, layernorm, logsumexp: keepdims reductions
// along the inner axes and the pointwise work around them) reads and writes every
// intermediate through memory once per kernel: layernorm's four kernels move six arrays.
// When every value of the run keeps the leading axis (rows do not mix), codegen wraps the
// run in row_blocks: the threads split the rows into blocks of about block_bytes, and
// each block runs all the kernels on row views while its rows are still in cache, so the
// input is read from memory once and the output written once; intermediates used only in
// the run live for one block. 256 KB blocks: measured on softmax/layernorm/logsumexp/
// normalise rows (2-core Zen 3, float32), 16M elements run 1.3-1.9x faster than kernel by
// kernel, and 1M elements (in L3 either way) the same; 64 KB blocks lost up to 1.4x at
// 1M to the per-block cost of starting each kernel. Rows longer than a block, or data that fit in cache anyway,
// run the kernels once over all rows (fn(0, rows)), each kernel threaded as before.
// bridge/dynexpr/row_blocks.py repeats both numbers (BLOCK_BYTES, MIN_BYTES) to leave
// out runs that static extents show would not be split; test_row_blocks.py checks it.
inline constexpr index_t row_block_bytes = 256 * 1024;
inline constexpr index_t row_blocks_min_bytes = 4 * row_block_bytes;

/// Rows [r0, r1) of v (its leading axis).
template <class T>
View<T> rows(const View<T>& v, index_t r0, index_t r1) {
  Shape s = v.shape();
  s[0] = r1 - r0;
  return View<T>(v.data() + r0 * v.strides()[0], s, v.strides());
}
template <Element T>
View<T> rows(Tensor<T>& t, index_t r0, index_t r1) {
  return rows(t.view(), r0, r1);
}

/// Runs fn(r0, r1) over blocks of rows of `shape` (Note [row blocks]); `bytes` is the
/// element size of the widest value and `kernels` how many kernels fn runs.
template <class F>
void row_blocks(const Shape& shape, index_t bytes, int kernels, F&& fn) {
  const index_t n_rows = shape.empty() ? 0 : shape[0];
  if (n_rows == 0) return fn(index_t{0}, n_rows);
  const index_t row_bytes = shape_size(shape) / n_rows * bytes;
  if (row_bytes == 0 || row_bytes > row_block_bytes || n_rows * row_bytes < row_blocks_min_bytes)
    return fn(index_t{0}, n_rows);
  // Blocks of at most row_block_bytes, and at least 4 per thread so that every thread
  // gets work on a many-core machine.
  const index_t per_thread = (n_rows + 4 * parallel::num_threads() - 1) / (4 * parallel::num_threads());
  const index_t per_block = std::max<index_t>(1, std::min(row_block_bytes / row_bytes, per_thread));
  const index_t blocks = (n_rows + per_block - 1) / per_block;
  const double work = static_cast<double>(shape_size(shape)) * kernels;
  parallel::parallel_for(blocks, 1, 1, work, [&](index_t b0, index_t b1) {
    for (index_t b = b0; b < b1; ++b) fn(b * per_block, std::min(n_rows, (b + 1) * per_block));
  });
}

/// A readable view of a Tensor or View (for view operations on materialised values).
template <Element T>
View<const T> view_of(const Tensor<T>& t) {
  return t.view();
}
template <class T>
View<const std::remove_const_t<T>> view_of(const View<T>& v) {
  return v;
}

inline void write_error(char* err, std::size_t len, const char* msg) noexcept {
  if (!err || len == 0) return;
  std::size_t n = std::strlen(msg);
  if (n >= len) n = len - 1;
  std::memcpy(err, msg, n);
  err[n] = '\0';
}

/// Runs a unit's body; every exception becomes a status and a message (no C++ exception
/// crosses the C ABI).
template <class F>
std::int32_t guarded(char* err, std::size_t len, F&& body) noexcept {
  try {
    body();
    return status_ok;
  } catch (const argument_error& e) {
    write_error(err, len, e.what());
    return e.code;
  } catch (const shape_error& e) {
    write_error(err, len, e.what());
    return status_value;
  } catch (const value_error& e) {
    write_error(err, len, e.what());
    return status_value;
  } catch (const index_error& e) {
    write_error(err, len, e.what());
    return status_index;
  } catch (const std::bad_alloc&) {
    write_error(err, len, "dynexpr: out of memory in a compiled kernel");
    return status_memory;
  } catch (const std::exception& e) {
    write_error(err, len, e.what());
    return status_internal;
  } catch (...) {
    write_error(err, len, "dynexpr: unknown C++ exception in a compiled kernel");
    return status_internal;
  }
}

}  // namespace dynexpr::kernel

/// The exported functions of kernels/abi.h around `static void RUN(dxk::frame&)`.
#define DYNEXPR_UNIT(RUN, N_IN, N_OUT)                                                      \
  extern "C" __attribute__((visibility("default"))) std::int32_t dynexpr_abi_version(void) { \
    return DYNEXPR_ABI_VERSION;                                                             \
  }                                                                                         \
  extern "C" __attribute__((visibility("default"))) void dynexpr_set_schedule(              \
      std::int32_t threads, std::int32_t chunks_per_thread) {                               \
    ::dynexpr::parallel::schedule& s = ::dynexpr::parallel::thread_schedule();              \
    s.threads = threads;                                                                    \
    s.chunks_per_thread = chunks_per_thread;                                                \
  }                                                                                         \
  extern "C" __attribute__((visibility("default"))) std::int32_t dynexpr_kernel(            \
      const dx_array* in, std::int32_t n_in, const dx_array* out, std::int32_t n_out,       \
      char* err, std::size_t err_len) {                                                     \
    return ::dynexpr::kernel::guarded(err, err_len, [&] {                                   \
      ::dynexpr::kernel::frame f(in, n_in, out, n_out, (N_IN), (N_OUT));                    \
      RUN(f);                                                                               \
    });                                                                                     \
  }
