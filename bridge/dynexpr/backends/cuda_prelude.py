"""The text every generated CUDA unit starts with: the op manifest's scalar bodies as
device functions, and the few standard-library pieces they use.

Note [one prelude for NVRTC and the host emulation]
NVRTC has no C++ standard library headers, and the host emulation (cuda_emulate.py)
compiles the same text with g++. So the prelude brings its own: the bodies in
include/dynexpr/ops/manifest.py are written against `std::` and `detail::`, and here they
are compiled inside namespace dxcu::ops, where `std` names dxcu::std (a namespace of our
own, legal to define: only ::std is reserved) holding the math overloads (CUDA's builtin
expf/exp on the device, <math.h>'s on the host) and the traits the bodies use. One text,
one meaning on both sides; the bodies themselves are the manifest's, not copies.

The manifest's device-hostile constructs are mapped at generation time, named here:
  - `throw value_error(...)` (integer power with a negative exponent) sets the unit's
    error word and returns 0: a kernel cannot throw; the launcher reads the word after
    the graph and raises NumPy's ValueError (the emulation does; the device launcher
    does not yet, see cuda_driver.py).
  - detail::divide_by_zero / overflowed return NumPy's values without raising the
    floating-point flags (a GPU has none): errstate reports are not given on this backend.
"""

from __future__ import annotations

import re

from .. import manifest
from ..toolchain import source_dirs

# The CUDA math functions the bodies call, as (name, arity). float and double overloads.
_MATH = (("sqrt", 1), ("exp", 1), ("expm1", 1), ("exp2", 1), ("log", 1), ("log1p", 1),
         ("log2", 1), ("log10", 1), ("sin", 1), ("cos", 1), ("tan", 1), ("tanh", 1),
         ("sinh", 1), ("cosh", 1), ("asin", 1), ("acos", 1), ("atan", 1), ("asinh", 1),
         ("acosh", 1), ("atanh", 1), ("erf", 1), ("floor", 1), ("ceil", 1), ("trunc", 1),
         ("nearbyint", 1), ("fabs", 1), ("pow", 2), ("fmod", 2), ("atan2", 2), ("hypot", 2),
         ("copysign", 2), ("fma", 3))

_HEAD = r"""
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define DXCU_HD __host__ __device__
#define DXCU_DEVICE 1
// Note [phases]: a kernel is a sequence of phases; every thread of a block runs a phase
// before any runs the next. On the device a phase is a plain block and the boundary is
// __syncthreads(); the host emulation (cuda_emulate.py) loops the threads inside each
// phase instead, which orders them the same way without any synchronisation.
#define DXCU_THREADS
#define DXCU_SYNC __syncthreads();
#define DXCU_SHARED __shared__
__device__ int dxcu_error;  // Note [one prelude for NVRTC and the host emulation]
#define DXCU_INFF __int_as_float(0x7f800000)
#define DXCU_NANF __int_as_float(0x7fc00000)
#define DXCU_INF __longlong_as_double(0x7ff0000000000000LL)
#define DXCU_NAN __longlong_as_double(0x7ff8000000000000LL)
#else
#define DXCU_INFF __builtin_huge_valf()
#define DXCU_NANF __builtin_nanf("")
#define DXCU_INF __builtin_huge_val()
#define DXCU_NAN __builtin_nan("")
#include <math.h>
#include "dxcu_emulate.h"
#endif

// What the header text of scalar_support.hpp expects (Note [scalar support as device
// text]; Note [floating-point flags on a device]: the emulation stands for the device).
#define DYNEXPR_HOST_DEVICE DXCU_HD
#define DYNEXPR_FP_FLAGS 0

// Note [vector loads] (cuda_codegen.py): N consecutive elements as one aligned access.
template <class T, int N> struct alignas(sizeof(T) * N) dxcu_vec { T v[N]; };
template <int N, class T> DXCU_HD inline bool dxcu_aligned(const T* p) {
  return (reinterpret_cast<unsigned long long>(p) % (sizeof(T) * N)) == 0;
}

typedef signed char dxcu_i8;
namespace dxcu {
namespace std {
typedef unsigned char uint8_t;
typedef int int32_t;
typedef long long int64_t;
template <class T> struct type_is { using type = T; };
template <class A, class B> constexpr bool is_same_v = false;
template <class A> constexpr bool is_same_v<A, A> = true;
template <class T> constexpr bool is_integral_v =
    is_same_v<T, bool> || is_same_v<T, uint8_t> || is_same_v<T, int32_t> || is_same_v<T, int64_t>;
template <class T> constexpr bool is_unsigned_v = is_same_v<T, bool> || is_same_v<T, uint8_t>;
template <class T> constexpr bool is_signed_v =
    is_same_v<T, int32_t> || is_same_v<T, int64_t> || is_same_v<T, float> || is_same_v<T, double>;
template <class T> struct make_unsigned : type_is<T> {};
template <> struct make_unsigned<int32_t> : type_is<unsigned int> {};
template <> struct make_unsigned<int64_t> : type_is<unsigned long long> {};
template <> struct make_unsigned<unsigned int> : type_is<unsigned int> {};
template <> struct make_unsigned<unsigned long long> : type_is<unsigned long long> {};
template <class T> using make_unsigned_t = typename make_unsigned<T>::type;
template <class T> struct numeric_limits;
template <> struct numeric_limits<int32_t> {
  DXCU_HD static constexpr int32_t min() { return -2147483647 - 1; }
  DXCU_HD static constexpr int32_t max() { return 2147483647; }
};
template <> struct numeric_limits<int64_t> {
  DXCU_HD static constexpr int64_t min() { return -9223372036854775807LL - 1; }
  DXCU_HD static constexpr int64_t max() { return 9223372036854775807LL; }
};
template <> struct numeric_limits<uint8_t> {
  DXCU_HD static constexpr uint8_t min() { return 0; }
  DXCU_HD static constexpr uint8_t max() { return 255; }
};
template <> struct numeric_limits<bool> {
  DXCU_HD static constexpr bool min() { return false; }
  DXCU_HD static constexpr bool max() { return true; }
};
template <> struct numeric_limits<float> {
  DXCU_HD static float infinity() { return DXCU_INFF; }
  DXCU_HD static float quiet_NaN() { return DXCU_NANF; }
  DXCU_HD static constexpr float max() { return 3.402823466e+38F; }
  DXCU_HD static constexpr float min() { return 1.175494351e-38F; }
};
template <> struct numeric_limits<double> {
  DXCU_HD static double infinity() { return DXCU_INF; }
  DXCU_HD static double quiet_NaN() { return DXCU_NAN; }
  DXCU_HD static constexpr double max() { return 1.7976931348623157e+308; }
  DXCU_HD static constexpr double min() { return 2.2250738585072014e-308; }
};
template <class T> DXCU_HD inline bool isnan(T x) { return x != x; }
template <class T> DXCU_HD inline bool isinf(T x) {
  return x == numeric_limits<T>::infinity() || x == -numeric_limits<T>::infinity();
}
template <class T> DXCU_HD inline bool isfinite(T x) { return !isnan(x) && !isinf(x); }
"""

_TAIL = r"""
}  // namespace std

namespace ops {
template <class T> constexpr bool is_float_v = std::is_same_v<T, float> || std::is_same_v<T, double>;
template <class T> constexpr bool is_bool_v = std::is_same_v<T, bool>;
template <class T> constexpr bool is_int_v = std::is_integral_v<T> && !is_bool_v<T>;
"""

# The scalar helpers of the manifest's bodies come from the header here, between these
# two parts (Note [scalar support as device text] in include/dynexpr/ops/scalar_support.hpp).
_DETAIL = r"""
namespace detail {
template <class T> DXCU_HD inline T raise_error(int code) {
  dxcu_error = code;  // a benign race: every writer writes a nonzero code
  return T(0);
}
// argmin/argmax: whether (vb, ib) replaces (va, ia); index -1 is "nothing yet". NumPy
// gives the first NaN, else the first extreme: ties go to the smaller index.
template <bool Max, class T>
DXCU_HD inline bool arg_takes(T va, long long ia, T vb, long long ib) {
  if (ib < 0) return false;
  if (ia < 0) return true;
  const bool na = va != va, nb = vb != vb;
  if (na || nb) return nb && (!na || ib < ia);
  if (vb == va) return ib < ia;
  return Max ? vb > va : vb < va;
}
}  // namespace detail
"""

_CAST = r"""
}  // namespace ops

// NumPy's astype (unsafe casting): anything nonzero is true; integers wrap.
template <class To, class From> DXCU_HD inline To cast(From x) {
  if constexpr (std::is_same_v<To, bool>) return x != From(0);
  else return static_cast<To>(x);
}
}  // namespace dxcu
"""

ERRORS = {1: "Integers to negative integer powers are not allowed."}

_THROW = re.compile(r'throw\s+value_error\((?:\s*"[^"]*")+\s*\);')


_BEGIN, _END = "// BEGIN DEVICE TEXT", "// END DEVICE TEXT"
_scalar_support: dict[tuple[str, int], str] = {}


def scalar_support_text() -> str:
    """The device text of include/dynexpr/ops/scalar_support.hpp (the copy the package was
    installed with, or DYNEXPR_SOURCE_ROOT's), read once per file version."""
    path = source_dirs()[0] / "dynexpr" / "ops" / "scalar_support.hpp"
    try:
        key = (str(path), path.stat().st_mtime_ns)
    except OSError as e:
        raise RuntimeError(f"dynexpr: the CUDA prelude needs {path} ({e}); reinstall dynexpr "
                           "(pip install .), whose package carries its headers") from e
    text = _scalar_support.get(key)
    if text is None:
        src = path.read_text()
        if _BEGIN not in src or _END not in src:
            raise RuntimeError(f"dynexpr: {path} lacks its '{_BEGIN}' / '{_END}' markers "
                               "(Note [scalar support as device text])")
        begin = src.index("\n", src.index(_BEGIN)) + 1
        text = _scalar_support[key] = src[begin:src.index(_END)]
    return text


def _math() -> str:
    lines = []
    for name, n in _MATH:
        for T, suffix in (("float", "f"), ("double", "")):
            ps = ", ".join(f"{T} {p}" for p in "abc"[:n])
            args = ", ".join("abc"[:n])
            lines.append(f"DXCU_HD inline {T} {name}({ps}) {{ return ::{name}{suffix}({args}); }}")
    return "\n".join(lines)


def op_struct(o: dict) -> str:
    """One manifest op as `struct add_op { template <class T> static T scalar(T a, T b) }`."""
    body = _THROW.sub("return detail::raise_error<T>(1);", o["scalar"])
    ret = "bool" if o["result"] == "bool" else "T"
    params = ", ".join(f"T {p}" for p in o["params"])
    inner = "\n".join("    " + ln for ln in body.splitlines())
    return (f"struct {o['id']} {{\n  template <class T>\n  DXCU_HD static {ret} scalar({params}) {{\n"
            f"{inner}\n  }}\n}};")


def prelude() -> str:
    ops = [op_struct(o) for o in manifest.OPS.values() if o["scalar"] and not o["raw"]]
    return "\n".join([_HEAD, _math(), _TAIL, scalar_support_text(), _DETAIL, *ops, _CAST])
