/* bridge/native/native.h — what the files of dynexpr._native share (private to them).
 *
 * The extension has four jobs, one file each, and a module file that ties them:
 *   module.c   PyInit__native: NumPy's C API, the module's functions and types
 *   kernel.c   Kernel: loading a compiled unit, describing inputs, calling it,
 *              floating-point error reporting; the dtype table (one section)
 *   buffers.c  the output-buffer allocator (NumPy memory handler + buffer cache)
 *   guards.c   GuardSet, select: guards as data, checked in C
 *   dispatch.c Dispatch: a captured function's calls, answered in C on a hit
 * Only module.c imports NumPy's C API (import_array); the others use the same table
 * through PY_ARRAY_UNIQUE_SYMBOL. Names shared between files start with dx_; the module
 * is built with hidden visibility, so only PyInit__native is exported.
 */
#ifndef DYNEXPR_BRIDGE_NATIVE_H
#define DYNEXPR_BRIDGE_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL dynexpr_native_ARRAY_API
#ifndef DX_NATIVE_IMPORTS_ARRAY /* defined by module.c only */
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#include "../../kernels/abi.h"

#define DX_MAX_RANK 8 /* dynexpr::max_rank */

/* kernel.c */
extern PyTypeObject dx_KernelType;
int dx_kernel_init(void); /* Kernel ready, NumPy's error state found; 0 or -1 */

/* buffers.c (Note [output buffer cache]) */
int dx_buffers_init(void);
/* A new C-ordered array of nbytes bytes (the caller computed them from dims), from the
 * buffer cache when it is large enough to be worth it, its data page_offset bytes into a
 * page (rounded down to 64; -1: no wish; Note [where an output starts in its page]).
 * New reference, or NULL. */
PyArrayObject* dx_new_output(int ndim, npy_intp* dims, int typenum, size_t nbytes,
                             int page_offset);
PyObject* dx_buffer_cache(PyObject* mod, PyObject* args);
/* output_offset([k]): the page offset every output gets (k in 0..4095), or -1 (the
 * default): chosen per call from the inputs (Note [output page offset] in kernel.c). */
extern int dx_output_offset_fixed;
PyObject* dx_output_offset(PyObject* mod, PyObject* const* args, Py_ssize_t n);
PyObject* dx_trim_buffers(PyObject* mod, PyObject* args);

/* guards.c */
extern PyTypeObject dx_GuardSetType;
/* GuardSet ready, numpy.may_share_memory found, module.GUARD_KINDS added */
int dx_guards_init(PyObject* module);
PyObject* dx_select(PyObject* mod, PyObject* const* a, Py_ssize_t n);
/* The second item of the first (GuardSet, value, ...) tuple of list entries whose guards
 * hold for bound arguments items[0..n): borrowed; Py_None if none; NULL on a bad list. */
PyObject* dx_select_of(PyObject* entries, PyObject* const* items, Py_ssize_t n,
                       PyObject* fn);

/* dispatch.c (Note [the native hit path]) */
extern PyTypeObject dx_DispatchType;
int dx_dispatch_init(void);

#endif /* DYNEXPR_BRIDGE_NATIVE_H */
