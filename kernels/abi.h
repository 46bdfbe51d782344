/* kernels/abi.h — the versioned C ABI between the Python bridge and every compiled unit.
 *
 * A compiled unit (a shared object built from generated C++ in dynexpr's expression
 * templates) exports exactly these symbols with C linkage:
 *
 *   int32_t dynexpr_abi_version(void);          returns DYNEXPR_ABI_VERSION
 *   int32_t dynexpr_kernel(const dx_array* in, int32_t n_in,
 *                          const dx_array* out, int32_t n_out,
 *                          char* err, size_t err_len);
 *
 *   void dynexpr_set_schedule(int32_t threads, int32_t chunks_per_thread);
 *                                              (optional) the calling thread's parallel
 *                                              schedule (dynexpr::parallel::schedule);
 *                                              0, 0 restores the default
 *
 * `in` are the kernel's inputs, `out` its outputs, allocated by the caller with the
 * shapes the graph gives (the kernel checks them). Strides are in elements and may be
 * zero or negative. The return value is 0 on success; otherwise a NUL-terminated message
 * is written to err (at most err_len bytes) and non-zero is returned. No C++ exception
 * ever crosses this boundary. The kernel may be called from any thread, concurrently,
 * without the GIL.
 */
#ifndef DYNEXPR_KERNELS_ABI_H
#define DYNEXPR_KERNELS_ABI_H

#include <stddef.h>
#include <stdint.h>

#define DYNEXPR_ABI_VERSION 2 /* 2: dx_array.device */

#ifdef __cplusplus
extern "C" {
#endif

/* dtype codes, in dynexpr::dtype order (include/dynexpr/ops/manifest.py lists the dtypes). */
/* BEGIN GENERATED dtype codes: ops/manifest.py, do not edit */
enum dx_dtype_code {
  DX_BOOL = 0,
  DX_UINT8 = 1,
  DX_INT32 = 2,
  DX_INT64 = 3,
  DX_FLOAT32 = 4,
  DX_FLOAT64 = 5
};
#define DX_N_DTYPES 6
/* END GENERATED dtype codes */

/* Where an array's data lives: the kind of device and which one of that kind. A unit
 * reads arrays of its own backend's device only, and refuses others with a message
 * (status 5, TypeError) instead of touching memory it cannot address. */
enum dx_device_kind { DX_DEVICE_CPU = 0, DX_DEVICE_CUDA = 1 };

typedef struct dx_device {
  int32_t kind;    /* enum dx_device_kind */
  int32_t ordinal; /* which device of that kind; 0 for the CPU */
} dx_device;

typedef struct dx_array {
  void* data;
  int32_t dtype; /* enum dx_dtype_code */
  int32_t ndim;
  const int64_t* shape;
  const int64_t* strides; /* in elements, not bytes */
  dx_device device;       /* since ABI 2 */
} dx_array;

typedef int32_t (*dx_abi_version_fn)(void);
typedef void (*dx_set_schedule_fn)(int32_t threads, int32_t chunks_per_thread);
typedef int32_t (*dx_kernel_fn)(const dx_array* in, int32_t n_in, const dx_array* out,
                                int32_t n_out, char* err, size_t err_len);

#ifdef __cplusplus
}
#endif

#endif /* DYNEXPR_KERNELS_ABI_H */
