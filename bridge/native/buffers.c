/* bridge/native/buffers.c — the output-buffer allocator of dynexpr._native: a NumPy
 * memory handler that keeps freed output buffers for the next outputs of the same size,
 * buffer_cache() and trim_buffers(). */
#include "native.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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
 * this way are ordinary NumPy arrays; NumPy frees them through the same handler.
 * Its buffers are 64-byte aligned, NumPy's (malloc's) 16: a full-width AVX-512 store to
 * a 16-mod-64 address splits two cache lines. From 128 KiB on, where that is worth the
 * handler swap (~0.2 us): affine over 64K float32 (a 256 KiB output) 5.7 -> 4.8 us,
 * over 64K float64 9.7 -> 9.2 us; at 64 KiB the swap cost more than it saved
 * (16K float32: 2.34 -> 2.56 us). numba's outputs are 64-byte aligned too. */

/* Note [where an output starts in its page]
 * A load whose address matches, in its low 12 bits, a store still in the store buffer
 * waits as if it depended on it ("4K aliasing"). In a loop out[i] = f(x[i]) the stores
 * of the last few vectors are still in flight when x[i] loads, so an output that starts
 * a little after its input in page-offset terms, (out - x) mod 4096 in about (0, 512]
 * bytes, stalls the loads. NumPy's large arrays start 16 bytes into a page (glibc's
 * mmap header) and this allocator put every output 64 bytes in: 48 bytes after, the
 * worst case for 256-bit vectors. So a buffer has a page of slack and its data start is
 * chosen per call: dx_new_output takes the page offset the caller wants (kernel.c picks
 * it from the inputs: Note [output page offset] there), rounded down to 64 bytes; no
 * wish keeps 64. The header just before the data holds the buffer's base and size.
 * bench/narrow_loop.cpp on the 2-core Zen 4, affine over 1M float64 on two threads, one
 * 256-bit vector a step: output 48 bytes after the input 124 us per call, 16 bytes before
 * it 89 us; 64K: 8.1 vs 5.0 us. bench/python/output_offset_bench.py, captured functions
 * of NumPy arrays, outputs 64 bytes in against placed: a 10-op float64 chain 162 vs 109
 * us at 1M, 13.2 vs 7.8 us at 64K. (Cheap chains no longer show it: their loops take
 * four vectors a step, Note [narrow vectors for cheap loops] in codegen.py.) */

#define DX_CACHE_MIN ((size_t)128 << 10)
#define DX_CACHE_SLOTS 16
#define DX_HDR 64 /* room for the header (base, size); keeps the data 64-byte aligned */

#define DX_HUGE ((size_t)4 << 20) /* from here fresh buffers ask for huge pages, as NumPy's */
#define DX_PAGE ((size_t)4096)
#define DX_SLACK DX_PAGE /* room to start the data anywhere in a page, header included */

/* The page offset the next dx_malloc on this thread gives its data (a multiple of 64),
 * or -1: DX_HDR (Note [where an output starts in its page]). */
static _Thread_local int dx_want_offset = -1;

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
  if (n > SIZE_MAX - DX_SLACK - ((size_t)2 << 20)) return NULL;
  void* base = dx_take(n);
  if (!base) {
    const size_t align = n >= DX_HUGE ? (size_t)2 << 20 : DX_PAGE;
    if (posix_memalign(&base, align, n + DX_SLACK) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    if (n >= DX_HUGE) madvise(base, (n + DX_SLACK) & ~(((size_t)2 << 20) - 1), MADV_HUGEPAGE);
#endif
  }
  /* base is page-aligned: the data starts DX_HDR..DX_PAGE bytes in, at the wanted offset */
  const size_t want = dx_want_offset < 0 ? DX_HDR : (size_t)dx_want_offset & (DX_PAGE - 64);
  char* p = (char*)base + DX_HDR + ((want - DX_HDR) & (DX_PAGE - 1));
  ((void**)p)[-2] = base;
  ((size_t*)p)[-1] = n;
  return p;
}

static void dx_free(void* ctx, void* p, size_t n) {
  (void)ctx;
  (void)n; /* the header has the allocated size (NumPy passes its own view of it) */
  if (!p) return;
  void* base = ((void**)p)[-2];
  const size_t size = ((size_t*)p)[-1];
  if (!dx_keep(base, size)) free(base);
}

static void* dx_calloc(void* ctx, size_t nelem, size_t elsize) {
  if (elsize && nelem > SIZE_MAX / elsize) return NULL;
  void* p = dx_malloc(ctx, nelem * elsize);
  if (p) memset(p, 0, nelem * elsize);
  return p;
}

static void* dx_realloc(void* ctx, void* p, size_t n) {
  if (!p) return dx_malloc(ctx, n);
  const size_t old = ((size_t*)p)[-1];
  void* q = dx_malloc(ctx, n);
  if (!q) return NULL;
  memcpy(q, p, old < n ? old : n);
  dx_free(ctx, p, old);
  return q;
}

static PyDataMem_Handler dx_handler = {
    "dynexpr_output_cache", 1, {NULL, dx_malloc, dx_calloc, dx_realloc, dx_free}};
static PyObject* dx_handler_capsule; /* the "mem_handler" capsule of dx_handler */

PyArrayObject* dx_new_output(int ndim, npy_intp* dims, int typenum, size_t nbytes,
                             int page_offset) {
  PyObject* saved = NULL;
  if (nbytes >= DX_CACHE_MIN && dx_cache.cap) {
    saved = PyDataMem_SetHandler(dx_handler_capsule);
    if (!saved) return NULL;
  }
  dx_want_offset = page_offset;
  PyArrayObject* a = (PyArrayObject*)PyArray_SimpleNew(ndim, dims, typenum);
  dx_want_offset = -1;
  if (saved) {
    PyObject* ours = PyDataMem_SetHandler(saved);
    Py_DECREF(saved);
    Py_XDECREF(ours);
  }
  return a;
}

int dx_buffers_init(void) {
  const char* mb = getenv("DYNEXPR_BUFFER_CACHE_MB");
  dx_cache.cap = (size_t)(mb && *mb ? strtoull(mb, NULL, 10) : 256) << 20;
  dx_handler_capsule = PyCapsule_New(&dx_handler, "mem_handler", NULL);
  return dx_handler_capsule ? 0 : -1;
}

PyObject* dx_buffer_cache(PyObject* mod, PyObject* args) {
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

int dx_output_offset_fixed = -1;

PyObject* dx_output_offset(PyObject* mod, PyObject* const* args, Py_ssize_t n) {
  (void)mod;
  const int was = dx_output_offset_fixed;
  if (n > 1) {
    PyErr_SetString(PyExc_TypeError, "output_offset([k]): one optional argument");
    return NULL;
  }
  if (n == 1) {
    const long k = PyLong_AsLong(args[0]);
    if (k == -1 && PyErr_Occurred()) return NULL;
    if (k < -1 || k >= (long)DX_PAGE) {
      PyErr_Format(PyExc_ValueError, "output_offset: %ld is not a page offset (0..4095) or -1 "
                   "(chosen from the inputs)", k);
      return NULL;
    }
    dx_output_offset_fixed = (int)k;
  }
  return PyLong_FromLong(was);
}

PyObject* dx_trim_buffers(PyObject* mod, PyObject* args) {
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
