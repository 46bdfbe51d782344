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

#define DX_CACHE_MIN ((size_t)128 << 10)
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

PyArrayObject* dx_new_output(int ndim, npy_intp* dims, int typenum, size_t nbytes) {
  PyObject* saved = NULL;
  if (nbytes >= DX_CACHE_MIN && dx_cache.cap) {
    saved = PyDataMem_SetHandler(dx_handler_capsule);
    if (!saved) return NULL;
  }
  PyArrayObject* a = (PyArrayObject*)PyArray_SimpleNew(ndim, dims, typenum);
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
