/* bridge/_native.c — dynexpr._native: the CPython side of the call path.
 *
 *   Kernel(path, inputs, outputs, results)   a compiled unit, loaded (dlopen) and
 *       checked against DYNEXPR_ABI_VERSION; calling it with the graph's input arrays
 *       checks them, allocates the outputs, releases the GIL, runs dynexpr_kernel and
 *       returns a tuple. Arguments:
 *         inputs   tuple of (dtype code, ndim, written): `written` inputs are updated in
 *                  place by the unit (mutated arguments) and must be writeable;
 *         outputs  tuple of (dtype code, dims): each dim an int, or (input, axis) for a
 *                  dynamic size read from that input's shape;
 *         results  tuple of ints: k >= 0 is output k, -(i+1) is input i itself;
 *         quiet    (optional) NumPy FPE bits never reported (1 divide, 2 over, 4 under,
 *                  8 invalid: the graph's own np.errstate blocks, capture/np_table.py);
 *         where    (optional) the op named in each kind's report (dynexpr.fperr.op_names).
 *       dtype codes are kernels/abi.h's (0 bool, 1 uint8, 2 int32, 3 int64, 4 float32,
 *       5 float64). Strided inputs are passed with their strides (never copied);
 *       unaligned or byte-swapped ones are copied for the call (and copied back when
 *       written: Note [inputs a kernel cannot read in place]); an unsupported dtype
 *       raises TypeError. Floating-point flags the kernel raises are reported as NumPy's
 *       error state says (Note [floating-point errors]).
 *       The unit's status becomes ValueError (2), IndexError (3), MemoryError (4),
 *       TypeError (5) or RuntimeError (anything else), with the unit's message.
 *
 *   GuardSet(guards)   guards as data, exactly as bridge/dynexpr/guards.py defines them
 *       (its sources: arg, global, closure, attr, item, type; its kinds: TYPE, DTYPE,
 *       NDIM, SHAPE, STRIDES_CLASS, VALUE, ID, LEN, DICT_KEYS, WRITEABLE, ALIAS, DYN_SHAPE,
 *       DIM_EQ), given as guards.Guard objects or (kind, source, expected) tuples. One
 *       extension: a SHAPE entry None matches any extent.
 *       .check(args, fn=None) -> bool; .failing(args, fn=None) -> first failing guard or
 *       None; args are the bound arguments, fn the captured function (for global and
 *       closure sources). A guard that cannot be evaluated fails; nothing raises.
 *
 *   select(entries, args, fn=None)  the value of the first (GuardSet, value) entry whose
 *       guards hold, or None: a code object's list of cache entries, checked in C.
 *
 *   buffer_cache(), trim_buffers()  the freed output buffers kept for the next outputs
 *       of the same size (Note [output buffer cache]).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <dlfcn.h>
#include <stdint.h>
#include <fenv.h>
#include <math.h>
#include <string.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL dynexpr_native_ARRAY_API
#include <numpy/arrayobject.h>

#include "../kernels/abi.h"

#define DX_MAX_RANK 8 /* dynexpr::max_rank */
#define DX_ERR_LEN 1024

_Static_assert(sizeof(npy_intp) == sizeof(int64_t), "dynexpr needs a 64-bit npy_intp");

/* dx_typenum, dx_itemsize, dx_name, dx_code_of: generated from the dtype manifest. */
#include "dx_dtypes.h"

/* ==================================================================== outputs */
/* Note [output buffer cache]
 * A kernel's output is a new array each call, as NumPy's semantics want. A large one
 * (from DX_CACHE_MIN bytes) comes from fresh pages whenever glibc has handed the last
 * one back to the system (an mmap per call, or a heap trimmed after other large frees):
 * the page faults and zeroing of a 4 MiB output cost a quarter of a millisecond, more
 * than the arithmetic of many kernels. So outputs are allocated through NumPy's memory
 * handler API with an allocator that keeps freed output buffers (up to DX_CACHE_SLOTS
 * of them and $DYNEXPR_BUFFER_CACHE_MB, default 256 MiB; the oldest make room) and gives
 * one of the same size back to the next output: pages already faulted in, nothing else
 * shared. A fresh buffer of 4 MiB and more asks for huge pages, as NumPy's own do. Arrays made
 * this way are ordinary NumPy arrays; NumPy frees them through the same handler. */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#define DX_CACHE_MIN ((size_t)1 << 20)
#define DX_CACHE_SLOTS 16
#define DX_HDR 64 /* a header holding the size; keeps the data 64-byte aligned */

#define DX_HUGE ((size_t)4 << 20) /* from here fresh buffers ask for huge pages, as NumPy's */

static struct {
  pthread_mutex_t mu;
  void* base[DX_CACHE_SLOTS];
  size_t size[DX_CACHE_SLOTS];
  unsigned long long age[DX_CACHE_SLOTS]; /* when kept: the oldest goes first */
  size_t bytes, cap;
  unsigned long long reused, fresh, clock;
} dx_cache = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void* dx_take(size_t n) {
  void* base = NULL;
  pthread_mutex_lock(&dx_cache.mu);
  for (int i = 0; i < DX_CACHE_SLOTS; ++i) {
    if (dx_cache.base[i] && dx_cache.size[i] == n) {
      base = dx_cache.base[i];
      dx_cache.base[i] = NULL;
      dx_cache.bytes -= n;
      break;
    }
  }
  if (base) ++dx_cache.reused; else ++dx_cache.fresh;
  pthread_mutex_unlock(&dx_cache.mu);
  return base;
}

/* Keeps a freed buffer, evicting the oldest kept ones while it does not fit (the last
 * sizes used are the likely next ones); 0 when it is not kept. */
static int dx_keep(void* base, size_t n) {
  if (n < DX_CACHE_MIN || n > dx_cache.cap) return 0;
  void* evicted[DX_CACHE_SLOTS];
  int n_evicted = 0, slot = -1;
  pthread_mutex_lock(&dx_cache.mu);
  for (;;) {
    slot = -1;
    int oldest = -1;
    for (int i = 0; i < DX_CACHE_SLOTS; ++i) {
      if (!dx_cache.base[i]) {
        if (slot < 0) slot = i;
      } else if (oldest < 0 || dx_cache.age[i] < dx_cache.age[oldest]) {
        oldest = i;
      }
    }
    if (slot >= 0 && dx_cache.bytes + n <= dx_cache.cap) break;
    if (oldest < 0) break; /* cannot happen: n <= cap */
    evicted[n_evicted++] = dx_cache.base[oldest];
    dx_cache.bytes -= dx_cache.size[oldest];
    dx_cache.base[oldest] = NULL;
  }
  if (slot >= 0) {
    dx_cache.base[slot] = base;
    dx_cache.size[slot] = n;
    dx_cache.age[slot] = ++dx_cache.clock;
    dx_cache.bytes += n;
  }
  pthread_mutex_unlock(&dx_cache.mu);
  for (int i = 0; i < n_evicted; ++i) free(evicted[i]);
  return slot >= 0;
}

static void* dx_malloc(void* ctx, size_t n) {
  (void)ctx;
  void* base = dx_take(n);
  if (!base) {
    const size_t align = n >= DX_HUGE ? (size_t)2 << 20 : DX_HDR;
    if (posix_memalign(&base, align, n + DX_HDR) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    if (n >= DX_HUGE) madvise(base, (n + DX_HDR) & ~(((size_t)2 << 20) - 1), MADV_HUGEPAGE);
#endif
  }
  *(size_t*)base = n;
  return (char*)base + DX_HDR;
}

static void dx_free(void* ctx, void* p, size_t n) {
  (void)ctx;
  (void)n; /* the header has the allocated size (NumPy passes its own view of it) */
  if (!p) return;
  void* base = (char*)p - DX_HDR;
  if (!dx_keep(base, *(size_t*)base)) free(base);
}

static void* dx_calloc(void* ctx, size_t nelem, size_t elsize) {
  if (elsize && nelem > SIZE_MAX / elsize) return NULL;
  void* p = dx_malloc(ctx, nelem * elsize);
  if (p) memset(p, 0, nelem * elsize);
  return p;
}

static void* dx_realloc(void* ctx, void* p, size_t n) {
  if (!p) return dx_malloc(ctx, n);
  const size_t old = *(size_t*)((char*)p - DX_HDR);
  void* q = dx_malloc(ctx, n);
  if (!q) return NULL;
  memcpy(q, p, old < n ? old : n);
  dx_free(ctx, p, old);
  return q;
}

static PyDataMem_Handler dx_handler = {
    "dynexpr_output_cache", 1, {NULL, dx_malloc, dx_calloc, dx_realloc, dx_free}};
static PyObject* dx_handler_capsule; /* the "mem_handler" capsule of dx_handler */

static PyObject* native_buffer_cache(PyObject* mod, PyObject* args) {
  (void)mod;
  (void)args;
  pthread_mutex_lock(&dx_cache.mu);
  int held = 0;
  for (int i = 0; i < DX_CACHE_SLOTS; ++i) held += dx_cache.base[i] != NULL;
  PyObject* r = Py_BuildValue("{s:i,s:n,s:n,s:K,s:K}", "buffers", held, "bytes",
                              (Py_ssize_t)dx_cache.bytes, "cap", (Py_ssize_t)dx_cache.cap,
                              "reused", dx_cache.reused, "fresh", dx_cache.fresh);
  pthread_mutex_unlock(&dx_cache.mu);
  return r;
}

static PyObject* native_trim_buffers(PyObject* mod, PyObject* args) {
  (void)mod;
  (void)args;
  pthread_mutex_lock(&dx_cache.mu);
  for (int i = 0; i < DX_CACHE_SLOTS; ++i) {
    free(dx_cache.base[i]);
    dx_cache.base[i] = NULL;
  }
  dx_cache.bytes = 0;
  pthread_mutex_unlock(&dx_cache.mu);
  Py_RETURN_NONE;
}

/* ================================================================== Kernel */
typedef struct {
  int32_t code, ndim, written;
} in_spec;
typedef struct {
  int32_t code, ndim;
  int64_t dim[DX_MAX_RANK];    /* >= 0: static extent */
  int32_t src_in[DX_MAX_RANK]; /* >= 0: extent of input src_in along src_axis */
  int32_t src_axis[DX_MAX_RANK];
} out_spec;

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  dx_kernel_fn fn;
  dx_set_schedule_fn set_schedule; /* NULL in units built before it existed */
  int32_t sched_threads, sched_chunks; /* mode="max-autotune"'s choice; 0, 0: default */
  int32_t quiet; /* NumPy FPE bits never reported (Note [errstate inside captured code]) */
  PyObject* where; /* a tuple of 4 op names for the reports, or NULL */
  void* handle;
  int32_t n_in, n_out, n_res;
  in_spec* ins;
  out_spec* outs;
  int32_t* res;
  PyObject* path;
} KernelObject;

static void Kernel_dealloc(PyObject* obj) {
  KernelObject* self = (KernelObject*)obj;
  /* The unit stays loaded: units share dynexpr's thread pool (a process-wide symbol),
   * and another thread may still be inside it. */
  PyMem_Free(self->ins);
  PyMem_Free(self->outs);
  PyMem_Free(self->res);
  Py_XDECREF(self->path);
  Py_XDECREF(self->where);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

static int parse_int(PyObject* o, const char* what, long lo, long hi, int32_t* out) {
  long v = PyLong_AsLong(o);
  if (v == -1 && PyErr_Occurred()) return -1;
  if (v < lo || v > hi) {
    PyErr_Format(PyExc_ValueError, "dynexpr._native.Kernel: %s %ld out of range", what, v);
    return -1;
  }
  *out = (int32_t)v;
  return 0;
}

static PyObject* Kernel_call(KernelObject* self, PyObject* const* args, size_t nargsf,
                             PyObject* kwnames);

static PyObject* Kernel_new(PyTypeObject* type, PyObject* args, PyObject* kw) {
  static char* kwlist[] = {"path", "inputs", "outputs", "results", "quiet", "where", NULL};
  PyObject *path, *inputs, *outputs, *results, *where = NULL;
  int quiet = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "UO!O!O!|iO!", kwlist, &path, &PyTuple_Type,
                                   &inputs, &PyTuple_Type, &outputs, &PyTuple_Type, &results,
                                   &quiet, &PyTuple_Type, &where))
    return NULL;
  if (where && PyTuple_GET_SIZE(where) != 4) where = NULL; /* one name per kind, or none */
  KernelObject* self = (KernelObject*)type->tp_alloc(type, 0);
  if (!self) return NULL;
  self->vectorcall = (vectorcallfunc)Kernel_call;
  self->quiet = quiet & 15;
  Py_XINCREF(where);
  self->where = where;
  Py_INCREF(path);
  self->path = path;
  self->n_in = (int32_t)PyTuple_GET_SIZE(inputs);
  self->n_out = (int32_t)PyTuple_GET_SIZE(outputs);
  self->n_res = (int32_t)PyTuple_GET_SIZE(results);
  self->ins = PyMem_Calloc(self->n_in + 1, sizeof(in_spec));
  self->outs = PyMem_Calloc(self->n_out + 1, sizeof(out_spec));
  self->res = PyMem_Calloc(self->n_res + 1, sizeof(int32_t));
  if (!self->ins || !self->outs || !self->res) {
    PyErr_NoMemory();
    goto fail;
  }
  for (int32_t i = 0; i < self->n_in; ++i) {
    PyObject* t = PyTuple_GET_ITEM(inputs, i);
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3) {
      PyErr_SetString(PyExc_TypeError, "dynexpr._native.Kernel: inputs are (code, ndim, written)");
      goto fail;
    }
    if (parse_int(PyTuple_GET_ITEM(t, 0), "dtype code", 0, 5, &self->ins[i].code) ||
        parse_int(PyTuple_GET_ITEM(t, 1), "ndim", 0, DX_MAX_RANK, &self->ins[i].ndim))
      goto fail;
    int w = PyObject_IsTrue(PyTuple_GET_ITEM(t, 2));
    if (w < 0) goto fail;
    self->ins[i].written = w;
  }
  for (int32_t k = 0; k < self->n_out; ++k) {
    PyObject* t = PyTuple_GET_ITEM(outputs, k);
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 2 || !PyTuple_Check(PyTuple_GET_ITEM(t, 1))) {
      PyErr_SetString(PyExc_TypeError, "dynexpr._native.Kernel: outputs are (code, dims)");
      goto fail;
    }
    out_spec* o = &self->outs[k];
    PyObject* dims = PyTuple_GET_ITEM(t, 1);
    if (parse_int(PyTuple_GET_ITEM(t, 0), "dtype code", 0, 5, &o->code)) goto fail;
    if (PyTuple_GET_SIZE(dims) > DX_MAX_RANK) {
      PyErr_SetString(PyExc_ValueError, "dynexpr._native.Kernel: output rank above 8");
      goto fail;
    }
    o->ndim = (int32_t)PyTuple_GET_SIZE(dims);
    for (int32_t j = 0; j < o->ndim; ++j) {
      PyObject* d = PyTuple_GET_ITEM(dims, j);
      o->src_in[j] = -1;
      if (PyTuple_Check(d) && PyTuple_GET_SIZE(d) == 2) {
        if (parse_int(PyTuple_GET_ITEM(d, 0), "dim source input", 0, self->n_in - 1,
                      &o->src_in[j]) ||
            parse_int(PyTuple_GET_ITEM(d, 1), "dim source axis", 0,
                      self->ins[o->src_in[j]].ndim - 1, &o->src_axis[j]))
          goto fail;
      } else {
        int64_t v = PyLong_AsLongLong(d);
        if (v == -1 && PyErr_Occurred()) goto fail;
        if (v < 0) {
          PyErr_SetString(PyExc_ValueError, "dynexpr._native.Kernel: negative output extent");
          goto fail;
        }
        o->dim[j] = v;
      }
    }
  }
  for (int32_t r = 0; r < self->n_res; ++r) {
    if (parse_int(PyTuple_GET_ITEM(results, r), "result", -(long)self->n_in,
                  (long)self->n_out - 1, &self->res[r]))
      goto fail;
  }
  const char* cpath = PyUnicode_AsUTF8(path);
  if (!cpath) goto fail;
  self->handle = dlopen(cpath, RTLD_NOW | RTLD_LOCAL);
  if (!self->handle) {
    PyErr_Format(PyExc_ImportError, "dynexpr: cannot load compiled unit %s: %s", cpath, dlerror());
    goto fail;
  }
  /* ISO C has no object-to-function pointer conversion; POSIX guarantees this copy. */
  dx_abi_version_fn ver = NULL;
  void* sym_ver = dlsym(self->handle, "dynexpr_abi_version");
  void* sym_fn = dlsym(self->handle, "dynexpr_kernel");
  if (sym_ver) memcpy(&ver, &sym_ver, sizeof ver);
  if (sym_fn) memcpy(&self->fn, &sym_fn, sizeof self->fn);
  void* sym_sched = dlsym(self->handle, "dynexpr_set_schedule");
  if (sym_sched) memcpy(&self->set_schedule, &sym_sched, sizeof self->set_schedule);
  if (!ver || !self->fn) {
    PyErr_Format(PyExc_ImportError, "dynexpr: %s does not export the dynexpr kernel ABI", cpath);
    goto fail;
  }
  if (ver() != DYNEXPR_ABI_VERSION) {
    PyErr_Format(PyExc_ImportError,
                 "dynexpr: %s was built for kernel ABI %d, this extension speaks %d; "
                 "clear the cache directory (DYNEXPR_CACHE_DIR) and recompile",
                 cpath, (int)ver(), DYNEXPR_ABI_VERSION);
    goto fail;
  }
  return (PyObject*)self;
fail:
  Py_DECREF(self);
  return NULL;
}

/* Fills *a from array obj (input i); returns 0, 1 when the kernel cannot read the array
 * in place (Note [inputs a kernel cannot read in place]: the caller passes a copy), or -1
 * with an exception set. */
static int describe_input(KernelObject* self, int32_t i, PyArrayObject* arr, dx_array* a,
                          int64_t* strides) {
  const in_spec* s = &self->ins[i];
  PyArray_Descr* d = PyArray_DESCR(arr);
  const int code = dx_code_of(d);
  if (code < 0) {
    PyObject* name = PyObject_Str((PyObject*)d);
    PyErr_Format(PyExc_TypeError,
                 "dynexpr: argument %d has dtype %S, which compiled kernels do not take; "
                 "pass bool/uint8/int32/int64/float32/float64",
                 (int)i, name ? name : Py_None);
    Py_XDECREF(name);
    return -1;
  }
  if (code != s->code) {
    PyErr_Format(PyExc_TypeError,
                 "dynexpr: argument %d has dtype %s, the compiled kernel takes %s", (int)i,
                 dx_name[code], dx_name[s->code]);
    return -1;
  }
  const int nd = PyArray_NDIM(arr);
  if (nd != s->ndim) {
    PyErr_Format(PyExc_TypeError,
                 "dynexpr: argument %d has %d dimensions, the compiled kernel takes %d", (int)i,
                 nd, (int)s->ndim);
    return -1;
  }
  if (s->written && !PyArray_ISWRITEABLE(arr)) {
    PyErr_Format(PyExc_ValueError, "assignment destination is read-only (argument %d)", (int)i);
    return -1;
  }
  /* One flag test on the common path: NumPy's ALIGNED covers the data pointer and every
   * stride (a stride that is not a multiple of the item size is not aligned either). */
  if (!PyArray_ISALIGNED(arr) || PyArray_ISBYTESWAPPED(arr)) return 1;
  const npy_intp item = PyDataType_ELSIZE(d);
  const npy_intp* bs = PyArray_STRIDES(arr);
  for (int k = 0; k < nd; ++k) {
    if (bs[k] % item) return 1;
    strides[k] = bs[k] / item;
  }
  a->data = PyArray_DATA(arr);
  a->dtype = code;
  a->ndim = nd;
  a->shape = (const int64_t*)PyArray_DIMS(arr);
  a->strides = strides;
  return 0;
}

/* Note [inputs a kernel cannot read in place]
 * NumPy computes with any array of a supported dtype: a field of a packed record array
 * (unaligned), non-native byte order, a buffer at an odd offset. A kernel reads aligned
 * native values, so such an input is copied into a new aligned, native, C-ordered array
 * for the call; an input the kernel updates in place (a mutated argument) is then copied
 * back into the caller's array after the kernel ran, as NumPy's in-place ops would have
 * left it. Ordinary arrays never come here (describe_input's one flag test). */
static PyArrayObject* readable_copy(PyArrayObject* arr, int code) {
  PyArray_Descr* native = PyArray_DescrFromType(dx_typenum[code]);
  if (!native) return NULL;
  return (PyArrayObject*)PyArray_FromArray(arr, native, NPY_ARRAY_CARRAY | NPY_ARRAY_ENSURECOPY);
}

/* Note [floating-point errors]
 * NumPy reports the IEEE flags its loops raise (divide by zero, overflow, underflow,
 * invalid) as np.errstate / np.seterr say: ignore, warn, raise, call, print or log. A
 * kernel computes the same values with the same instructions, so it raises the same
 * flags; Kernel_call clears them before the kernel and reads them after it, on the
 * calling thread, which also holds the flags of the pool threads that ran chunks of the
 * call (dynexpr::parallel::parallel_for hands them back, Note [flags of pool threads]).
 * The hot path costs two flag reads. Only when a flag is set does the policy matter: an
 * errstate whose modes for the raised flags are all 'ignore' is recognised by the
 * identity of NumPy's error-state object (a context variable, the same object until
 * errstate/seterr change it), so the default policy (underflow: ignore) costs no Python
 * work; anything else goes to dynexpr.fperr.report, which does what NumPy does. */
#define DX_FE_ALL (FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID)

static PyObject* dx_extobj_var;   /* numpy._core.umath._extobj_contextvar, or NULL */
static PyObject* dx_extobj_seen;  /* the error state dx_ignored was computed for */
static int dx_ignored;            /* NumPy FPE bits whose mode is 'ignore' there */
static PyObject* dx_fp_report;    /* dynexpr.fperr.report, imported on first use */
static PyObject* dx_fp_ignored;   /* dynexpr.fperr.ignored */

/* NumPy's NPY_FPE_* bits of the C flags fe. */
static int numpy_bits(int fe) {
  return ((fe & FE_DIVBYZERO) ? 1 : 0) | ((fe & FE_OVERFLOW) ? 2 : 0) |
         ((fe & FE_UNDERFLOW) ? 4 : 0) | ((fe & FE_INVALID) ? 8 : 0);
}

static int import_fperr(void) {
  if (dx_fp_report) return 0;
  PyObject* m = PyImport_ImportModule("dynexpr.fperr");
  if (!m) return -1;
  dx_fp_report = PyObject_GetAttrString(m, "report");
  dx_fp_ignored = dx_fp_report ? PyObject_GetAttrString(m, "ignored") : NULL;
  Py_DECREF(m);
  if (!dx_fp_ignored) {
    Py_CLEAR(dx_fp_report);
    return -1;
  }
  return 0;
}

/* Applies NumPy's error policy to the flags fe a kernel raised: 0, or -1 with the
 * exception the policy asks for (or a failure of the policy's callback) set. */
static int report_fp(int fe, int quiet, PyObject* where) {
  const int bits = numpy_bits(fe) & ~quiet;
  feclearexcept(DX_FE_ALL);
  if (!bits) return 0;
  if (import_fperr() < 0) return -1;
  if (dx_extobj_var) {
    PyObject* state = NULL;
    if (PyContextVar_Get(dx_extobj_var, NULL, &state) < 0) return -1;
    if (state && state != dx_extobj_seen) {
      PyObject* r = PyObject_CallNoArgs(dx_fp_ignored);
      const long v = r ? PyLong_AsLong(r) : -1;
      Py_XDECREF(r);
      if (v == -1 && PyErr_Occurred()) {
        Py_DECREF(state);
        return -1;
      }
      Py_XSETREF(dx_extobj_seen, state); /* keeps the reference: identity stays valid */
      dx_ignored = (int)v;
    } else {
      Py_XDECREF(state);
    }
    if (state && !(bits & ~dx_ignored)) return 0;
  }
  PyObject* r = where ? PyObject_CallFunction(dx_fp_report, "iO", bits, where)
                      : PyObject_CallFunction(dx_fp_report, "i", bits);
  if (!r) return -1;
  Py_DECREF(r);
  return 0;
}

static PyObject* raise_status(int32_t rc, const char* msg) {
  PyObject* exc = rc == 2   ? PyExc_ValueError
                  : rc == 3 ? PyExc_IndexError
                  : rc == 4 ? PyExc_MemoryError
                  : rc == 5 ? PyExc_TypeError
                            : PyExc_RuntimeError;
  PyErr_SetString(exc, msg[0] ? msg : "dynexpr: compiled kernel failed");
  return NULL;
}

#define DX_STACK_ARGS 16

static PyObject* Kernel_call(KernelObject* self, PyObject* const* args, size_t nargsf,
                             PyObject* kwnames) {
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (kwnames && PyTuple_GET_SIZE(kwnames)) {
    PyErr_SetString(PyExc_TypeError, "dynexpr kernel: takes positional arrays only");
    return NULL;
  }
  if (nargs != self->n_in) {
    PyErr_Format(PyExc_TypeError, "dynexpr kernel: takes %d arrays, got %zd", (int)self->n_in,
                 nargs);
    return NULL;
  }
  const int32_t n_in = self->n_in, n_out = self->n_out;
  /* Per-call scratch: on the stack for small calls (kernels run concurrently from
   * several threads, so nothing per-call lives in the object). */
  dx_array in_s[DX_STACK_ARGS], out_s[DX_STACK_ARGS];
  int64_t in_st_s[DX_STACK_ARGS * DX_MAX_RANK], out_st_s[DX_STACK_ARGS * DX_MAX_RANK];
  PyArrayObject* arr_s[DX_STACK_ARGS];
  PyObject* own_s[2 * DX_STACK_ARGS];
  PyArrayObject* outa_s[DX_STACK_ARGS];
  void* heap = NULL;
  dx_array *in = in_s, *out = out_s;
  int64_t *in_st = in_st_s, *out_st = out_st_s;
  PyArrayObject** arr = arr_s;
  PyObject** own = own_s;
  PyArrayObject** outa = outa_s;
  const int32_t nmax = n_in > n_out ? n_in : n_out;
  if (nmax > DX_STACK_ARGS) {
    /* own holds up to two arrays per input (a converted scalar, a readable copy). */
    const size_t per = 2 * sizeof(dx_array) + 2 * DX_MAX_RANK * sizeof(int64_t) +
                       4 * sizeof(void*);
    heap = PyMem_Calloc((size_t)nmax, per);
    if (!heap) return PyErr_NoMemory();
    char* p = heap;
    in = (dx_array*)p, p += nmax * sizeof(dx_array);
    out = (dx_array*)p, p += nmax * sizeof(dx_array);
    in_st = (int64_t*)p, p += nmax * DX_MAX_RANK * sizeof(int64_t);
    out_st = (int64_t*)p, p += nmax * DX_MAX_RANK * sizeof(int64_t);
    arr = (PyArrayObject**)p, p += nmax * sizeof(void*);
    own = (PyObject**)p, p += 2 * nmax * sizeof(void*);
    outa = (PyArrayObject**)p;
  }
  PyObject* result = NULL;
  int32_t n_own = 0, n_made = 0, n_back = 0;
  for (int32_t i = 0; i < n_in; ++i) {
    PyObject* o = args[i];
    if (!PyArray_Check(o)) {
      /* NumPy scalars and 0-d values: converted (a copy, which a scalar is anyway). */
      if (self->ins[i].written) {
        PyErr_Format(PyExc_TypeError, "dynexpr kernel: argument %d must be an ndarray (it is "
                     "updated in place)", (int)i);
        goto done;
      }
      o = PyArray_FromAny(o, NULL, 0, 0, NPY_ARRAY_ALIGNED, NULL);
      if (!o) goto done;
      own[n_own++] = o;
    }
    arr[i] = (PyArrayObject*)o;
    int how = describe_input(self, i, arr[i], &in[i], in_st + (size_t)i * DX_MAX_RANK);
    if (how > 0) { /* Note [inputs a kernel cannot read in place] */
      PyArrayObject* c = readable_copy(arr[i], self->ins[i].code);
      if (!c) goto done;
      own[n_own++] = (PyObject*)c;
      n_back += self->ins[i].written;
      arr[i] = c;
      how = describe_input(self, i, c, &in[i], in_st + (size_t)i * DX_MAX_RANK);
      if (how > 0) {
        PyErr_Format(PyExc_RuntimeError, "dynexpr: argument %d: an aligned copy is still "
                     "not readable by the kernel (a dynexpr bug)", (int)i);
        goto done;
      }
    }
    if (how < 0) goto done;
  }
  for (int32_t k = 0; k < n_out; ++k) {
    const out_spec* s = &self->outs[k];
    npy_intp dims[DX_MAX_RANK];
    size_t nbytes = dx_itemsize[s->code];
    for (int j = 0; j < s->ndim; ++j) {
      dims[j] = s->src_in[j] < 0 ? s->dim[j] : PyArray_DIMS(arr[s->src_in[j]])[s->src_axis[j]];
      nbytes *= dims[j] > 0 ? (size_t)dims[j] : 0;
    }
    PyObject* saved = NULL; /* Note [output buffer cache] */
    if (nbytes >= DX_CACHE_MIN && dx_cache.cap) {
      saved = PyDataMem_SetHandler(dx_handler_capsule);
      if (!saved) goto done;
    }
    PyArrayObject* a = (PyArrayObject*)PyArray_SimpleNew(s->ndim, dims, dx_typenum[s->code]);
    if (saved) {
      PyObject* ours = PyDataMem_SetHandler(saved);
      Py_DECREF(saved);
      Py_XDECREF(ours);
    }
    if (!a) goto done;
    outa[n_made++] = a;
    int64_t* st = out_st + (size_t)k * DX_MAX_RANK;
    int64_t acc = 1;
    for (int j = s->ndim - 1; j >= 0; --j) {
      st[j] = acc;
      acc *= dims[j] > 0 ? dims[j] : 1;
    }
    out[k].data = PyArray_DATA(a);
    out[k].dtype = s->code;
    out[k].ndim = s->ndim;
    out[k].shape = (const int64_t*)PyArray_DIMS(a);
    out[k].strides = st;
  }
  {
    char err[DX_ERR_LEN];
    err[0] = '\0';
    int32_t rc;
    const int tuned = self->set_schedule && (self->sched_threads || self->sched_chunks);
    int fe;
    Py_BEGIN_ALLOW_THREADS
    /* Note [floating-point errors]: flags left by earlier work are not this call's. */
    if (fetestexcept(DX_FE_ALL)) feclearexcept(DX_FE_ALL);
    if (tuned) self->set_schedule(self->sched_threads, self->sched_chunks);
    rc = self->fn(in, n_in, out, n_out, err, sizeof err);
    if (tuned) self->set_schedule(0, 0);
    fe = fetestexcept(DX_FE_ALL);
    Py_END_ALLOW_THREADS
    if (rc != 0) {
      raise_status(rc, err);
      goto done;
    }
    /* Mutated arguments that were copied go back first: NumPy's in-place op has
     * written them when its error handler raises. */
    for (int32_t i = 0; n_back && i < n_in; ++i) {
      if (self->ins[i].written && (PyObject*)arr[i] != args[i] &&
          PyArray_CopyInto((PyArrayObject*)args[i], arr[i]) < 0)
        goto done;
    }
    if (fe && report_fp(fe, self->quiet, self->where) < 0) goto done;
  }
  result = PyTuple_New(self->n_res);
  if (!result) goto done;
  for (int32_t r = 0; r < self->n_res; ++r) {
    const int32_t k = self->res[r];
    PyObject* item = k >= 0 ? (PyObject*)outa[k] : args[-k - 1];
    Py_INCREF(item);
    PyTuple_SET_ITEM(result, r, item);
  }
done:
  for (int32_t k = 0; k < n_made; ++k) Py_DECREF(outa[k]);
  for (int32_t j = 0; j < n_own; ++j) Py_DECREF(own[j]);
  PyMem_Free(heap);
  return result;
}

static PyObject* Kernel_repr(PyObject* obj) {
  KernelObject* self = (KernelObject*)obj;
  return PyUnicode_FromFormat("<dynexpr kernel %U: %d inputs, %d outputs>", self->path,
                              (int)self->n_in, (int)self->n_out);
}

static PyObject* Kernel_set_schedule(KernelObject* self, PyObject* args) {
  int threads, chunks;
  if (!PyArg_ParseTuple(args, "ii:set_schedule", &threads, &chunks)) return NULL;
  if (threads < 0 || chunks < 0 || threads > 4096 || chunks > 4096) {
    PyErr_Format(PyExc_ValueError,
                 "dynexpr: Kernel.set_schedule(%d, %d): pass counts between 0 (the default) "
                 "and 4096", threads, chunks);
    return NULL;
  }
  if (!self->set_schedule && (threads || chunks)) {
    PyErr_Format(PyExc_ValueError,
                 "dynexpr: %U has no schedule hook (built before it existed); clear the "
                 "cache directory (DYNEXPR_CACHE_DIR) to rebuild it", self->path);
    return NULL;
  }
  self->sched_threads = threads;
  self->sched_chunks = chunks;
  Py_RETURN_NONE;
}

static PyObject* Kernel_get_schedule(KernelObject* self, void* closure) {
  (void)closure;
  return Py_BuildValue("(ii)", (int)self->sched_threads, (int)self->sched_chunks);
}

static PyMethodDef Kernel_methods[] = {
    {"set_schedule", (PyCFunction)Kernel_set_schedule, METH_VARARGS,
     "set_schedule(threads, chunks_per_thread): the parallel schedule every later call "
     "uses (dynexpr::parallel::schedule; 0, 0 is the default heuristic)"},
    {NULL},
};

static PyGetSetDef Kernel_getset[] = {
    {"schedule", (getter)Kernel_get_schedule, NULL, "(threads, chunks_per_thread)", NULL},
    {NULL},
};

static PyMemberDef Kernel_members[] = {
    {"path", T_OBJECT, offsetof(KernelObject, path), READONLY, "the loaded unit.so"},
    {0},
};

static PyTypeObject KernelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dynexpr._native.Kernel",
    .tp_basicsize = sizeof(KernelObject),
    .tp_dealloc = Kernel_dealloc,
    .tp_vectorcall_offset = offsetof(KernelObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_repr = Kernel_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A compiled dynexpr unit: call it with the graph's input arrays.",
    .tp_new = Kernel_new,
    .tp_members = Kernel_members,
    .tp_methods = Kernel_methods,
    .tp_getset = Kernel_getset,
};

/* ================================================================ GuardSet */
/* Guards exactly as bridge/dynexpr/guards.py defines them (that module is the reference;
 * tests/python/test_native_guards.py checks this against it on the same data). */
enum guard_kind {
  G_TYPE, G_DTYPE, G_NDIM, G_SHAPE, G_STRIDES, G_VALUE, G_ID, G_LEN, G_DICT_KEYS,
  G_WRITEABLE, G_ALIAS, G_DYN_SHAPE, G_DIM_EQ
};
static const char* guard_names[] = {"TYPE",  "DTYPE", "NDIM", "SHAPE",     "STRIDES_CLASS",
                                    "VALUE", "ID",    "LEN",  "DICT_KEYS", "WRITEABLE",
                                    "ALIAS", "DYN_SHAPE", "DIM_EQ", NULL};
#define PAIR_KIND(k) ((k) == G_ALIAS || (k) == G_DIM_EQ)
enum alias_rel { A_SAME, A_OVERLAP, A_DISJOINT };

/* The shape of a guard's source, found once (GuardSet_new) so that the common ones are
 * read without walking the tuple: ("arg", i), ("global", name), and attributes of a
 * global such as np.exp or np.linalg.norm, ("attr", ("attr", ("global", name), a), b)
 * (Note [module attributes are guarded] in capture/attrs.py). */
enum source_path { P_OTHER, P_ARG, P_GLOBAL };
#define MAX_ATTRS 4

typedef struct {
  int kind;
  int path;            /* enum source_path */
  PyObject* name;      /* P_GLOBAL: the global's name (borrowed from source) */
  int nattrs;          /* P_GLOBAL: then getattr of these names, outermost last */
  PyObject* attrs[MAX_ATTRS];
  Py_ssize_t arg;      /* >= 0: the source is ("arg", arg), the common case */
  PyObject* source;    /* owned */
  PyObject* expected;  /* owned */
  PyObject* guard;     /* owned: the object given (returned by failing()) */
  PyArray_Descr* descr;
  Py_ssize_t n;        /* NDIM / LEN, SHAPE length, STRIDES_CLASS (0 "C", 1 "strided"),
                          WRITEABLE (0/1), ALIAS relation */
  npy_intp shape[NPY_MAXDIMS]; /* SHAPE/DYN_SHAPE extents; DYN_SHAPE: lo of a dynamic one */
  npy_intp hi[NPY_MAXDIMS];    /* DYN_SHAPE: hi of a dynamic dimension (-1: unbounded) */
  char any[NPY_MAXDIMS];       /* SHAPE: any extent; DYN_SHAPE: a dynamic dimension */
  int axes[2];                 /* DIM_EQ: the two axes */
} guard;

typedef struct {
  PyObject_HEAD
  Py_ssize_t n;
  guard* g;
  PyObject* spec;
} GuardSetObject;

static PyObject* may_share_memory = NULL; /* numpy.may_share_memory */

static void GuardSet_dealloc(PyObject* obj) {
  GuardSetObject* self = (GuardSetObject*)obj;
  for (Py_ssize_t i = 0; i < self->n; ++i) {
    Py_XDECREF(self->g[i].source);
    Py_XDECREF(self->g[i].expected);
    Py_XDECREF(self->g[i].guard);
    Py_XDECREF(self->g[i].descr);
  }
  PyMem_Free(self->g);
  Py_XDECREF(self->spec);
  Py_TYPE(self)->tp_free(obj);
}

static const char* tag_of(PyObject* s) {
  if (!PyTuple_Check(s) || PyTuple_GET_SIZE(s) < 2 || !PyUnicode_Check(PyTuple_GET_ITEM(s, 0)))
    return NULL;
  return PyUnicode_AsUTF8(PyTuple_GET_ITEM(s, 0));
}

static int source_ok(PyObject* s) {
  const char* k = tag_of(s);
  if (!k) return 0;
  const Py_ssize_t n = PyTuple_GET_SIZE(s);
  if (!strcmp(k, "arg")) return n == 2 && PyLong_Check(PyTuple_GET_ITEM(s, 1));
  if (!strcmp(k, "global"))
    return (n == 2 || (n == 3 && source_ok(PyTuple_GET_ITEM(s, 2)))) &&
           PyUnicode_Check(PyTuple_GET_ITEM(s, 1));
  if (!strcmp(k, "closure")) return n == 2 && PyUnicode_Check(PyTuple_GET_ITEM(s, 1));
  if (!strcmp(k, "attr")) return n == 3 && source_ok(PyTuple_GET_ITEM(s, 1)) &&
                                 PyUnicode_Check(PyTuple_GET_ITEM(s, 2));
  if (!strcmp(k, "item")) return n == 3 && source_ok(PyTuple_GET_ITEM(s, 1));
  if (!strcmp(k, "type")) return n == 2 && source_ok(PyTuple_GET_ITEM(s, 1));
  return 0;
}

/* Borrowed or new reference helpers: every item read below is returned as new. */
static PyObject* get_field(PyObject* o, const char* name, Py_ssize_t index) {
  if (PyTuple_Check(o) && PyTuple_GET_SIZE(o) == 3) {
    PyObject* r = PyTuple_GET_ITEM(o, index);
    Py_INCREF(r);
    return r;
  }
  return PyObject_GetAttrString(o, name);
}

static PyObject* GuardSet_new(PyTypeObject* type, PyObject* args, PyObject* kw) {
  (void)kw;
  PyObject* spec;
  if (!PyArg_ParseTuple(args, "O", &spec)) return NULL;
  PyObject* seq = PySequence_Tuple(spec);
  if (!seq) return NULL;
  GuardSetObject* self = (GuardSetObject*)type->tp_alloc(type, 0);
  if (!self) {
    Py_DECREF(seq);
    return NULL;
  }
  self->spec = seq;
  self->g = PyMem_Calloc(PyTuple_GET_SIZE(seq) + 1, sizeof(guard));
  if (!self->g) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(seq); ++i) {
    PyObject* t = PyTuple_GET_ITEM(seq, i);
    guard* g = &self->g[i];
    g->arg = -1;
    self->n = i + 1;
    Py_INCREF(t);
    g->guard = t;
    PyObject* kindo = get_field(t, "kind", 0);
    if (!kindo) goto fail;
    g->source = get_field(t, "source", 1);
    g->expected = g->source ? get_field(t, "expected", 2) : NULL;
    const char* kind = PyUnicode_Check(kindo) ? PyUnicode_AsUTF8(kindo) : "";
    g->kind = -1;
    for (int k = 0; guard_names[k]; ++k)
      if (!strcmp(kind, guard_names[k])) g->kind = k;
    Py_DECREF(kindo);
    if (!g->expected) goto fail;
    if (g->kind < 0) {
      PyErr_Format(PyExc_ValueError, "dynexpr GuardSet: guard %zd has an unknown kind", i);
      goto fail;
    }
    PyObject* src = g->source;
    const int pair_ok = PAIR_KIND(g->kind) && PyTuple_Check(src) && PyTuple_GET_SIZE(src) == 2 &&
                        source_ok(PyTuple_GET_ITEM(src, 0)) && source_ok(PyTuple_GET_ITEM(src, 1));
    if (PAIR_KIND(g->kind) ? !pair_ok : !source_ok(src)) {
      PyErr_Format(PyExc_ValueError, "dynexpr GuardSet: guard %zd has a malformed source %R", i,
                   src);
      goto fail;
    }
    if (!PAIR_KIND(g->kind)) {
      if (!strcmp(tag_of(src), "arg")) {
        g->arg = PyLong_AsSsize_t(PyTuple_GET_ITEM(src, 1));
        g->path = P_ARG;
      } else {
        /* ("attr", ... ("attr", ("global", name), a1) ..., an), n <= MAX_ATTRS */
        PyObject* s = src;
        int n = 0;
        while (!strcmp(tag_of(s), "attr") && n < MAX_ATTRS) {
          s = PyTuple_GET_ITEM(s, 1);
          ++n;
        }
        if (!strcmp(tag_of(s), "global") && PyTuple_GET_SIZE(s) == 2) {
          g->name = PyTuple_GET_ITEM(s, 1);
          g->nattrs = n;
          for (s = src; n > 0; s = PyTuple_GET_ITEM(s, 1)) g->attrs[--n] = PyTuple_GET_ITEM(s, 2);
          g->path = P_GLOBAL;
        }
      }
    }
    PyObject* exp = g->expected;
    switch (g->kind) {
      case G_DTYPE:
        if (!PyArray_DescrConverter(exp, &g->descr)) goto fail;
        break;
      case G_NDIM:
      case G_LEN:
        g->n = PyLong_AsSsize_t(exp);
        if (g->n == -1 && PyErr_Occurred()) goto fail;
        break;
      case G_SHAPE:
        if (!PyTuple_Check(exp) || PyTuple_GET_SIZE(exp) > NPY_MAXDIMS) {
          PyErr_SetString(PyExc_TypeError, "dynexpr GuardSet: SHAPE expects a tuple");
          goto fail;
        }
        g->n = PyTuple_GET_SIZE(exp);
        for (Py_ssize_t j = 0; j < g->n; ++j) {
          PyObject* d = PyTuple_GET_ITEM(exp, j);
          g->any[j] = d == Py_None; /* None: any extent (a dynamic dimension) */
          if (!g->any[j]) {
            g->shape[j] = PyLong_AsSsize_t(d);
            if (g->shape[j] == -1 && PyErr_Occurred()) goto fail;
          }
        }
        break;
      case G_STRIDES: {
        const char* c = PyUnicode_Check(exp) ? PyUnicode_AsUTF8(exp) : "";
        g->n = !strcmp(c, "C") ? 0 : !strcmp(c, "strided") ? 1 : -1;
        if (g->n < 0) {
          PyErr_SetString(PyExc_ValueError, "dynexpr GuardSet: STRIDES_CLASS is 'C' or 'strided'");
          goto fail;
        }
        break;
      }
      case G_WRITEABLE:
        g->n = PyObject_IsTrue(exp);
        if (g->n < 0) goto fail;
        break;
      case G_DYN_SHAPE:
        /* per dimension an int, or (lo, hi) for a dynamic one (hi None: unbounded) */
        if (!PyTuple_Check(exp) || PyTuple_GET_SIZE(exp) > NPY_MAXDIMS) {
          PyErr_SetString(PyExc_TypeError, "dynexpr GuardSet: DYN_SHAPE expects a tuple");
          goto fail;
        }
        g->n = PyTuple_GET_SIZE(exp);
        for (Py_ssize_t j = 0; j < g->n; ++j) {
          PyObject* d = PyTuple_GET_ITEM(exp, j);
          g->any[j] = PyTuple_Check(d);
          if (g->any[j]) {
            if (PyTuple_GET_SIZE(d) != 2) {
              PyErr_SetString(PyExc_TypeError, "dynexpr GuardSet: DYN_SHAPE range is (lo, hi)");
              goto fail;
            }
            PyObject* hi = PyTuple_GET_ITEM(d, 1);
            g->shape[j] = PyLong_AsSsize_t(PyTuple_GET_ITEM(d, 0));
            g->hi[j] = hi == Py_None ? -1 : PyLong_AsSsize_t(hi);
          } else {
            g->shape[j] = PyLong_AsSsize_t(d);
          }
          if (PyErr_Occurred()) goto fail;
        }
        break;
      case G_DIM_EQ:
        if (!PyTuple_Check(exp) || PyTuple_GET_SIZE(exp) != 2) {
          PyErr_SetString(PyExc_TypeError, "dynexpr GuardSet: DIM_EQ expects (axis, axis)");
          goto fail;
        }
        g->axes[0] = (int)PyLong_AsLong(PyTuple_GET_ITEM(exp, 0));
        g->axes[1] = (int)PyLong_AsLong(PyTuple_GET_ITEM(exp, 1));
        if (PyErr_Occurred()) goto fail;
        break;
      case G_ALIAS: {
        const char* c = PyUnicode_Check(exp) ? PyUnicode_AsUTF8(exp) : "";
        g->n = !strcmp(c, "same") ? A_SAME : !strcmp(c, "overlap") ? A_OVERLAP
               : !strcmp(c, "disjoint") ? A_DISJOINT : -1;
        if (g->n < 0) {
          PyErr_SetString(PyExc_ValueError,
                          "dynexpr GuardSet: ALIAS is 'same', 'overlap' or 'disjoint'");
          goto fail;
        }
        break;
      }
      case G_DICT_KEYS:
        if (!PyTuple_Check(exp)) {
          PyErr_SetString(PyExc_TypeError, "dynexpr GuardSet: DICT_KEYS expects a tuple");
          goto fail;
        }
        break;
      default:
        break;
    }
  }
  return (PyObject*)self;
fail:
  Py_DECREF(self);
  return NULL;
}

/* fn.__globals__[name], else its builtins (guards.py's _lookup_global). New ref or NULL. */
static PyObject* lookup_global(PyObject* fn, PyObject* name) {
  PyObject* g = PyFunction_Check(fn) ? PyFunction_GET_GLOBALS(fn) : NULL;
  PyObject* owned = NULL;
  if (!g) g = owned = PyObject_GetAttrString(fn, "__globals__");
  if (!g || !PyDict_Check(g)) {
    Py_XDECREF(owned);
    return NULL;
  }
  PyObject* r = PyDict_GetItemWithError(g, name);
  if (!r && !PyErr_Occurred()) {
    PyObject* b = PyDict_GetItemString(g, "__builtins__");
    if (!b) b = PyEval_GetBuiltins();
    else if (PyModule_Check(b)) b = PyModule_GetDict(b);
    if (b && PyDict_Check(b)) r = PyDict_GetItemWithError(b, name);
  }
  Py_XINCREF(r);
  Py_XDECREF(owned);
  return r;
}

static PyObject* lookup_closure(PyObject* fn, PyObject* name) {
  if (!PyFunction_Check(fn)) return NULL;
  PyObject* code = PyFunction_GET_CODE(fn);
  PyObject* closure = PyFunction_GET_CLOSURE(fn);
  PyObject* free = PyObject_GetAttrString(code, "co_freevars");
  PyObject* r = NULL;
  if (free && PyTuple_Check(free) && closure && PyTuple_Check(closure)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(free) && i < PyTuple_GET_SIZE(closure); ++i) {
      int eq = PyUnicode_Compare(PyTuple_GET_ITEM(free, i), name) == 0;
      if (eq) {
        r = PyCell_GET(PyTuple_GET_ITEM(closure, i));
        Py_XINCREF(r);
        break;
      }
    }
  }
  Py_XDECREF(free);
  return r;
}

/* getattr(m, name) for an exact module m. A name that does not start with "_" is none of
 * ModuleType's own attributes, so the generic lookup finds it in the module's __dict__
 * first: module_dict_attr reads it there (one dict lookup, no Python code run: np.exp's
 * guard, Note [module attributes are guarded] in capture/attrs.py), NULL without an
 * exception when getattr must decide (another name, or a miss: module __getattr__). */
static PyObject* module_dict_attr(PyObject* m, PyObject* name) {
  if (!PyUnicode_Check(name) || PyUnicode_GET_LENGTH(name) == 0 ||
      PyUnicode_READ_CHAR(name, 0) == '_')
    return NULL;
  PyObject* v = PyDict_GetItemWithError(PyModule_GetDict(m), name);
  Py_XINCREF(v);
  return v;
}

static PyObject* module_attr(PyObject* m, PyObject* name) {
  PyObject* v = module_dict_attr(m, name);
  return v || PyErr_Occurred() ? v : PyObject_GetAttr(m, name);
}

/* New reference to the object a source names, or NULL (no exception) if unreachable. */
static PyObject* resolve(PyObject* src, PyObject* const* args, Py_ssize_t nargs, PyObject* fn) {
  const char* k = tag_of(src);
  PyObject* r = NULL;
  if (!strcmp(k, "arg")) {
    Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(src, 1));
    if (i >= 0 && i < nargs) {
      r = args[i];
      Py_INCREF(r);
    }
  } else if (!strcmp(k, "global")) {
    if (PyTuple_GET_SIZE(src) == 2) {
      r = lookup_global(fn, PyTuple_GET_ITEM(src, 1));
    } else {
      PyObject* f = resolve(PyTuple_GET_ITEM(src, 2), args, nargs, fn);
      if (f) r = lookup_global(f, PyTuple_GET_ITEM(src, 1));
      Py_XDECREF(f);
    }
  } else if (!strcmp(k, "closure")) {
    r = lookup_closure(fn, PyTuple_GET_ITEM(src, 1));
  } else if (!strcmp(k, "attr") || !strcmp(k, "item")) {
    PyObject* base = resolve(PyTuple_GET_ITEM(src, 1), args, nargs, fn);
    if (base) {
      PyObject* key = PyTuple_GET_ITEM(src, 2);
      r = k[0] != 'a'                ? PyObject_GetItem(base, key)
          : PyModule_CheckExact(base) ? module_attr(base, key)
                                      : PyObject_GetAttr(base, key);
      Py_DECREF(base);
    }
  } else if (!strcmp(k, "type")) {
    PyObject* base = resolve(PyTuple_GET_ITEM(src, 1), args, nargs, fn);
    if (base) {
      r = (PyObject*)Py_TYPE(base);
      Py_INCREF(r);
      Py_DECREF(base);
    }
  }
  if (!r) PyErr_Clear();
  return r;
}

/* guards.py's strict_equal: equal and of the same type, recursively; NaN equals NaN.
 * 1 / 0; never raises. */
static int strict_equal(PyObject* a, PyObject* b) {
  if (Py_TYPE(a) != Py_TYPE(b)) return 0;
  if (PyTuple_Check(a) || PyList_Check(a)) {
    PyObject* fa = PySequence_Fast(a, "");
    PyObject* fb = fa ? PySequence_Fast(b, "") : NULL;
    int ok = 0;
    if (fa && fb && PySequence_Fast_GET_SIZE(fa) == PySequence_Fast_GET_SIZE(fb)) {
      ok = 1;
      for (Py_ssize_t i = 0; ok && i < PySequence_Fast_GET_SIZE(fa); ++i)
        ok = strict_equal(PySequence_Fast_GET_ITEM(fa, i), PySequence_Fast_GET_ITEM(fb, i));
    }
    Py_XDECREF(fa);
    Py_XDECREF(fb);
    PyErr_Clear();
    return ok;
  }
  if (PyDict_Check(a)) {
    if (PyDict_GET_SIZE(a) != PyDict_GET_SIZE(b)) return 0;
    Py_ssize_t pa = 0, pb = 0;
    PyObject *ka, *va, *kb, *vb;
    while (PyDict_Next(a, &pa, &ka, &va)) {
      if (!PyDict_Next(b, &pb, &kb, &vb)) return 0;
      int eq = PyObject_RichCompareBool(ka, kb, Py_EQ);
      if (eq <= 0) {
        PyErr_Clear();
        return 0;
      }
      if (!strict_equal(va, vb)) return 0;
    }
    return 1;
  }
  int eq = PyObject_RichCompareBool(a, b, Py_EQ);
  if (eq < 0) {
    PyErr_Clear();
    return 0;
  }
  if (eq) return 1;
  /* NaN equals NaN (for float and NumPy floating scalars). */
  if (PyFloat_Check(a)) return isnan(PyFloat_AS_DOUBLE(a)) && isnan(PyFloat_AS_DOUBLE(b));
  if (PyArray_IsScalar(a, Floating)) {
    PyObject* na = PyObject_RichCompare(a, a, Py_NE);
    PyObject* nb = na ? PyObject_RichCompare(b, b, Py_NE) : NULL;
    int ok = na && nb && PyObject_IsTrue(na) == 1 && PyObject_IsTrue(nb) == 1;
    Py_XDECREF(na);
    Py_XDECREF(nb);
    PyErr_Clear();
    return ok;
  }
  return 0;
}

static void extent(PyArrayObject* a, char** lo, char** hi) {
  char* p = PyArray_BYTES(a);
  npy_intp l = 0, h = 0;
  for (int k = 0; k < PyArray_NDIM(a); ++k) {
    const npy_intp n = PyArray_DIMS(a)[k];
    if (n == 0) {
      *lo = *hi = p;
      return;
    }
    const npy_intp span = (n - 1) * PyArray_STRIDES(a)[k];
    if (span < 0) l += span;
    else h += span;
  }
  *lo = p + l;
  *hi = p + h + PyArray_ITEMSIZE(a);
}

/* guards.py's alias_relation; -1 on failure. */
static int alias_relation(PyObject* a, PyObject* b) {
  if (a == b) return A_SAME;
  if (PyArray_Check(a) && PyArray_Check(b)) {
    char *la, *ha, *lb, *hb;
    extent((PyArrayObject*)a, &la, &ha);
    extent((PyArrayObject*)b, &lb, &hb);
    return la < hb && lb < ha && la != ha && lb != hb ? A_OVERLAP : A_DISJOINT;
  }
  PyObject* r = PyObject_CallFunctionObjArgs(may_share_memory, a, b, NULL);
  if (!r) {
    PyErr_Clear();
    return -1;
  }
  int t = PyObject_IsTrue(r);
  Py_DECREF(r);
  if (t < 0) PyErr_Clear();
  return t < 0 ? -1 : t ? A_OVERLAP : A_DISJOINT;
}

/* getattr(x, name) compared with ==, for guards on non-ndarrays (NumPy scalars...). */
static int attr_equals(PyObject* x, const char* name, PyObject* expected) {
  PyObject* v = PyObject_GetAttrString(x, name);
  int ok = v ? PyObject_RichCompareBool(v, expected, Py_EQ) : 0;
  Py_XDECREF(v);
  if (ok < 0 || !v) {
    PyErr_Clear();
    ok = 0;
  }
  return ok;
}

static int flag_of(PyObject* x, const char* flag) {
  PyObject* flags = PyObject_GetAttrString(x, "flags");
  PyObject* v = flags ? PyObject_GetAttrString(flags, flag) : NULL;
  int t = v ? PyObject_IsTrue(v) : -1;
  Py_XDECREF(flags);
  Py_XDECREF(v);
  if (t < 0) PyErr_Clear();
  return t;
}

/* The global that the previous guard read (np for np.sin, np.exp, ...), kept while the
 * guards in between run no Python code: only then is it still what the dict holds. */
typedef struct {
  PyObject* name;  /* borrowed */
  PyObject* value; /* owned, or NULL */
} global_memo;

/* 1 holds, 0 fails; never raises (a guard that cannot be evaluated fails). */
static int check_one(const guard* g, PyObject* const* args, Py_ssize_t nargs, PyObject* fn,
                     global_memo* memo) {
  if (g->path != P_GLOBAL) Py_CLEAR(memo->value);
  if (PAIR_KIND(g->kind)) {
    PyObject* a = resolve(PyTuple_GET_ITEM(g->source, 0), args, nargs, fn);
    PyObject* b = a ? resolve(PyTuple_GET_ITEM(g->source, 1), args, nargs, fn) : NULL;
    int ok;
    if (g->kind == G_ALIAS) {
      ok = a && b && alias_relation(a, b) == g->n;
    } else { /* DIM_EQ: the guards before it made both arrays of the expected rank */
      ok = a && b && PyArray_Check(a) && PyArray_Check(b) &&
           g->axes[0] < PyArray_NDIM((PyArrayObject*)a) &&
           g->axes[1] < PyArray_NDIM((PyArrayObject*)b) &&
           PyArray_DIMS((PyArrayObject*)a)[g->axes[0]] ==
               PyArray_DIMS((PyArrayObject*)b)[g->axes[1]];
    }
    Py_XDECREF(a);
    Py_XDECREF(b);
    return ok;
  }
  PyObject* x;
  if (g->arg >= 0) {
    if (g->arg >= nargs) return 0;
    x = args[g->arg];
    Py_INCREF(x);
  } else if (g->path == P_GLOBAL) {
    if (!memo->value || memo->name != g->name) {
      Py_CLEAR(memo->value);
      memo->value = lookup_global(fn, g->name); /* a dict lookup: runs no Python code */
      memo->name = g->name;
    }
    x = memo->value;
    Py_XINCREF(x);
    for (int j = 0; x && j < g->nattrs; ++j) {
      PyObject* m = x;
      x = PyModule_CheckExact(m) ? module_dict_attr(m, g->attrs[j]) : NULL;
      if (!x && !PyErr_Occurred()) {
        Py_CLEAR(memo->value); /* getattr may run Python code that rebinds the global */
        x = PyObject_GetAttr(m, g->attrs[j]);
      }
      Py_DECREF(m);
    }
    if (!x) {
      PyErr_Clear();
      return 0;
    }
  } else {
    x = resolve(g->source, args, nargs, fn);
    if (!x) return 0;
  }
  const int arr = PyArray_Check(x);
  PyArrayObject* a = (PyArrayObject*)x;
  int ok = 0;
  switch (g->kind) {
    case G_TYPE:
      ok = (PyObject*)Py_TYPE(x) == g->expected;
      break;
    case G_ID:
      ok = x == g->expected;
      break;
    case G_DTYPE:
      ok = arr ? PyArray_EquivTypes(PyArray_DESCR(a), g->descr)
               : attr_equals(x, "dtype", (PyObject*)g->descr);
      break;
    case G_NDIM:
      ok = arr ? PyArray_NDIM(a) == g->n : attr_equals(x, "ndim", g->expected);
      break;
    case G_SHAPE:
      if (arr) {
        if (PyArray_NDIM(a) == g->n) {
          ok = 1;
          for (Py_ssize_t j = 0; j < g->n && ok; ++j)
            ok = g->any[j] || PyArray_DIMS(a)[j] == g->shape[j];
        }
      } else {
        ok = attr_equals(x, "shape", g->expected);
      }
      break;
    case G_DYN_SHAPE:
      ok = arr && PyArray_NDIM(a) == g->n;
      for (Py_ssize_t j = 0; j < g->n && ok; ++j) {
        const npy_intp d = PyArray_DIMS(a)[j];
        ok = g->any[j] ? d >= g->shape[j] && (g->hi[j] < 0 || d <= g->hi[j]) : d == g->shape[j];
      }
      break;
    case G_STRIDES: {
      const int c = arr ? PyArray_IS_C_CONTIGUOUS(a) : flag_of(x, "c_contiguous");
      ok = c >= 0 && (c ? 0 : 1) == g->n;
      break;
    }
    case G_WRITEABLE: {
      const int w = arr ? PyArray_ISWRITEABLE(a) != 0 : flag_of(x, "writeable");
      ok = w >= 0 && w == g->n;
      break;
    }
    case G_VALUE:
      ok = strict_equal(x, g->expected);
      break;
    case G_LEN: {
      Py_ssize_t n = PyObject_Length(x);
      if (n < 0) PyErr_Clear();
      ok = n >= 0 && n == g->n;
      break;
    }
    case G_DICT_KEYS: {
      PyObject* keys = PyDict_Check(x) ? PyDict_Keys(x) : PyMapping_Keys(x);
      PyObject* t = keys ? PySequence_Tuple(keys) : NULL;
      ok = t ? PyObject_RichCompareBool(t, g->expected, Py_EQ) : 0;
      if (ok < 0) ok = 0;
      Py_XDECREF(keys);
      Py_XDECREF(t);
      PyErr_Clear();
      break;
    }
  }
  Py_DECREF(x);
  return ok;
}

/* Index of the first failing guard, -1 if all hold, -2 on a bad call (exception set). */
static Py_ssize_t first_failure(GuardSetObject* self, PyObject* args, PyObject* fn) {
  PyObject* const* items;
  Py_ssize_t n;
  if (PyTuple_Check(args)) {
    items = &PyTuple_GET_ITEM(args, 0);
    n = PyTuple_GET_SIZE(args);
  } else if (PyList_Check(args)) {
    items = &PyList_GET_ITEM(args, 0);
    n = PyList_GET_SIZE(args);
  } else {
    PyErr_SetString(PyExc_TypeError, "dynexpr GuardSet: args must be a tuple or list");
    return -2;
  }
  global_memo memo = {NULL, NULL};
  Py_ssize_t failed = -1;
  for (Py_ssize_t i = 0; i < self->n && failed < 0; ++i)
    if (!check_one(&self->g[i], items, n, fn, &memo)) failed = i;
  Py_XDECREF(memo.value);
  return failed;
}

static int parse_check_args(PyObject* const* a, Py_ssize_t n, PyObject** args, PyObject** fn) {
  if (n < 1 || n > 2) {
    PyErr_SetString(PyExc_TypeError, "GuardSet: expected (args, fn=None)");
    return -1;
  }
  *args = a[0];
  *fn = n == 2 ? a[1] : Py_None;
  return 0;
}

static PyObject* GuardSet_check(PyObject* self, PyObject* const* a, Py_ssize_t n) {
  PyObject *args, *fn;
  if (parse_check_args(a, n, &args, &fn) < 0) return NULL;
  Py_ssize_t r = first_failure((GuardSetObject*)self, args, fn);
  if (r == -2) return NULL;
  return PyBool_FromLong(r == -1);
}

static PyObject* GuardSet_failing(PyObject* self, PyObject* const* a, Py_ssize_t n) {
  PyObject *args, *fn;
  if (parse_check_args(a, n, &args, &fn) < 0) return NULL;
  GuardSetObject* gs = (GuardSetObject*)self;
  Py_ssize_t r = first_failure(gs, args, fn);
  if (r == -2) return NULL;
  if (r == -1) Py_RETURN_NONE;
  Py_INCREF(gs->g[r].guard);
  return gs->g[r].guard;
}

static Py_ssize_t GuardSet_length(PyObject* self) { return ((GuardSetObject*)self)->n; }

static PyMethodDef GuardSet_methods[] = {
    {"check", (PyCFunction)(void (*)(void))GuardSet_check, METH_FASTCALL,
     "check(args, fn=None) -> True if every guard holds for bound arguments args of fn"},
    {"failing", (PyCFunction)(void (*)(void))GuardSet_failing, METH_FASTCALL,
     "failing(args, fn=None) -> the first guard that does not hold, or None"},
    {0},
};

static PyMemberDef GuardSet_members[] = {
    {"guards", T_OBJECT, offsetof(GuardSetObject, spec), READONLY, "the guards, as given"},
    {0},
};

static PySequenceMethods GuardSet_as_sequence = {.sq_length = GuardSet_length};

static PyTypeObject GuardSetType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dynexpr._native.GuardSet",
    .tp_basicsize = sizeof(GuardSetObject),
    .tp_dealloc = GuardSet_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Guards as data (dynexpr.guards), checked in C: GuardSet(guards).check(args, fn).",
    .tp_new = GuardSet_new,
    .tp_methods = GuardSet_methods,
    .tp_members = GuardSet_members,
    .tp_as_sequence = &GuardSet_as_sequence,
};

/* select(entries, args, fn=None): the second item of the first (GuardSet, value, ...)
 * entry whose guards hold, or None: the per-code-object dispatch of the fast path. */
static PyObject* native_select(PyObject* mod, PyObject* const* a, Py_ssize_t n) {
  (void)mod;
  if (n < 2 || n > 3 || !PyList_Check(a[0])) {
    PyErr_SetString(PyExc_TypeError, "select(entries: list, args: tuple, fn=None)");
    return NULL;
  }
  PyObject* entries = a[0];
  PyObject* fn = n == 3 ? a[2] : Py_None;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(entries); ++i) {
    PyObject* e = PyList_GET_ITEM(entries, i);
    if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) < 2 ||
        !PyObject_TypeCheck(PyTuple_GET_ITEM(e, 0), &GuardSetType)) {
      PyErr_SetString(PyExc_TypeError, "select: entries are (GuardSet, value) tuples");
      return NULL;
    }
    Py_ssize_t r = first_failure((GuardSetObject*)PyTuple_GET_ITEM(e, 0), a[1], fn);
    if (r == -2) return NULL;
    if (r == -1) {
      PyObject* v = PyTuple_GET_ITEM(e, 1);
      Py_INCREF(v);
      return v;
    }
  }
  Py_RETURN_NONE;
}

static PyMethodDef native_methods[] = {
    {"select", (PyCFunction)(void (*)(void))native_select, METH_FASTCALL,
     "select(entries, args, fn=None) -> value of the first (GuardSet, value) entry whose "
     "guards hold, or None"},
    {"buffer_cache", native_buffer_cache, METH_NOARGS,
     "buffer_cache() -> {buffers, bytes, cap, reused, fresh}: the freed output buffers kept "
     "for reuse (Note [output buffer cache] in bridge/_native.c)"},
    {"trim_buffers", native_trim_buffers, METH_NOARGS,
     "trim_buffers(): give the kept output buffers back to the system"},
    {0},
};

static struct PyModuleDef native_module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "dynexpr._native",
    .m_doc = "dynexpr's native call path: compiled kernels and guard checks (see bridge/_native.c).",
    .m_size = -1,
    .m_methods = native_methods,
};

PyMODINIT_FUNC PyInit__native(void) {
  import_array();
  PyObject* np = PyImport_ImportModule("numpy");
  if (!np) return NULL;
  may_share_memory = PyObject_GetAttrString(np, "may_share_memory");
  Py_DECREF(np);
  if (!may_share_memory) return NULL;
  /* NumPy's error state (NumPy >= 2.0); without it every raised flag asks Python. */
  PyObject* umath = PyImport_ImportModule("numpy._core.umath");
  dx_extobj_var = umath ? PyObject_GetAttrString(umath, "_extobj_contextvar") : NULL;
  Py_XDECREF(umath);
  if (!dx_extobj_var || !PyContextVar_CheckExact(dx_extobj_var)) {
    Py_CLEAR(dx_extobj_var);
    PyErr_Clear();
  }
  const char* mb = getenv("DYNEXPR_BUFFER_CACHE_MB");
  dx_cache.cap = (size_t)(mb && *mb ? strtoull(mb, NULL, 10) : 256) << 20;
  dx_handler_capsule = PyCapsule_New(&dx_handler, "mem_handler", NULL);
  if (!dx_handler_capsule) return NULL;
  if (PyType_Ready(&KernelType) < 0 || PyType_Ready(&GuardSetType) < 0) return NULL;
  PyObject* m = PyModule_Create(&native_module);
  if (!m) return NULL;
  Py_INCREF(&KernelType);
  Py_INCREF(&GuardSetType);
  if (PyModule_AddObject(m, "Kernel", (PyObject*)&KernelType) < 0 ||
      PyModule_AddObject(m, "GuardSet", (PyObject*)&GuardSetType) < 0 ||
      PyModule_AddIntConstant(m, "ABI_VERSION", DYNEXPR_ABI_VERSION) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
