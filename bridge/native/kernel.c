/* bridge/native/kernel.c — dynexpr._native.Kernel: a compiled unit, loaded (dlopen) and
 * checked against DYNEXPR_ABI_VERSION; a call describes the input arrays to the unit
 * (dx_array, kernels/abi.h), allocates the outputs (buffers.c), releases the GIL, runs
 * dynexpr_kernel and reports the floating-point flags it raised as NumPy would.
 * The Python-facing contract is in module.c's header comment. */
#include "native.h"

#include <dlfcn.h>
#include <fenv.h>
#include <string.h>
#include <structmember.h>

#define DX_ERR_LEN 1024

/* The device of every array this loader passes: NumPy arrays live in host memory. */
static const dx_device dx_host = {DX_DEVICE_CPU, 0};

_Static_assert(sizeof(npy_intp) == sizeof(int64_t), "dynexpr needs a 64-bit npy_intp");

/* dx_typenum, dx_itemsize, dx_name, dx_code_of: the dtype table (abi codes <-> NumPy),
 * generated from the op and dtype manifest (include/dynexpr/ops/manifest.py). */
#include "dx_dtypes.h"
#define DX_LAST_DTYPE ((long)(sizeof dx_itemsize / sizeof dx_itemsize[0]) - 1)

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
    if (parse_int(PyTuple_GET_ITEM(t, 0), "dtype code", 0, DX_LAST_DTYPE, &self->ins[i].code) ||
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
    if (parse_int(PyTuple_GET_ITEM(t, 0), "dtype code", 0, DX_LAST_DTYPE, &o->code)) goto fail;
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
  a->device = dx_host; /* a NumPy array: host memory */
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

/* Note [output page offset]
 * Where in its page each output of this call starts (Note [where an output starts in its
 * page] in buffers.c): an offset at which no large input starts within DX_ALIAS_REACH
 * bytes before it. The inputs' offsets are weighed by their bytes and the least
 * weight of inputs so placed wins; the first candidate is the largest input's own offset
 * rounded down to 64 bytes (its stores then trail its loads), so one input, or several
 * in the same place, always get that. -1 (no wish) when no input is large enough for
 * the buffer cache. (An output of another item size than an input drifts through every
 * distance from it along the loop: no offset helps that pair.)
 * _native.output_offset(k) fixes the offset at k instead, for benchmarks that compare
 * placements (bench/python/output_offset_bench.py). */
#define DX_ALIAS_REACH 1024
#define DX_ALIAS_MIN ((npy_intp)128 << 10)

static int output_page_offset(PyArrayObject* const* arr, int32_t n_in) {
  if (dx_output_offset_fixed >= 0) return dx_output_offset_fixed;
  uintptr_t off[DX_STACK_ARGS];
  npy_intp bytes[DX_STACK_ARGS];
  int n = 0;
  npy_intp most = 0;
  int first = -1;
  for (int32_t i = 0; i < n_in && n < DX_STACK_ARGS; ++i) {
    const npy_intp b = PyArray_NBYTES(arr[i]);
    if (b < DX_ALIAS_MIN) continue;
    off[n] = (uintptr_t)PyArray_DATA(arr[i]) & 4095;
    bytes[n] = b;
    if (b > most) most = b, first = (int)(off[n] & ~(uintptr_t)63);
    ++n;
  }
  if (n == 0) return -1;
  int best = first;
  npy_intp best_bad = -1;
  for (int k = 0; k <= 4096 / 64; ++k) {
    const int c = k == 0 ? first : (k - 1) * 64; /* the first candidate, then every offset */
    npy_intp bad = 0;
    for (int j = 0; j < n; ++j) {
      const uintptr_t ahead = ((uintptr_t)c - off[j]) & 4095; /* output after input by */
      if (ahead > 0 && ahead <= DX_ALIAS_REACH) bad += bytes[j];
    }
    if (best_bad < 0 || bad < best_bad) best = c, best_bad = bad;
    if (bad == 0) break;
  }
  return best;
}

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
  const int page_offset = n_out ? output_page_offset(arr, n_in) : -1;
  for (int32_t k = 0; k < n_out; ++k) {
    const out_spec* s = &self->outs[k];
    npy_intp dims[DX_MAX_RANK];
    size_t nbytes = dx_itemsize[s->code];
    for (int j = 0; j < s->ndim; ++j) {
      dims[j] = s->src_in[j] < 0 ? s->dim[j] : PyArray_DIMS(arr[s->src_in[j]])[s->src_axis[j]];
      nbytes *= dims[j] > 0 ? (size_t)dims[j] : 0;
    }
    /* Note [output buffer cache] */
    PyArrayObject* a = dx_new_output(s->ndim, dims, dx_typenum[s->code], nbytes, page_offset);
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
    out[k].device = dx_host;
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

PyTypeObject dx_KernelType = {
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


int dx_kernel_init(void) {
  /* NumPy's error state (NumPy >= 2.0); without it every raised flag asks Python. */
  PyObject* umath = PyImport_ImportModule("numpy._core.umath");
  dx_extobj_var = umath ? PyObject_GetAttrString(umath, "_extobj_contextvar") : NULL;
  Py_XDECREF(umath);
  if (!dx_extobj_var || !PyContextVar_CheckExact(dx_extobj_var)) {
    Py_CLEAR(dx_extobj_var);
    PyErr_Clear();
  }
  return PyType_Ready(&dx_KernelType);
}
