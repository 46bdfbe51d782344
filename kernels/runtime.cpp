// kernels/runtime.cpp — libdynexpr_rt.so, the runtime library every generated CPU unit
// links against (Note [runtime library] in dynexpr/parallel/thread_pool.hpp): the thread
// pool and the argument checks of kernels/prelude.hpp, compiled once per toolchain and
// header set by bridge/dynexpr/cache.py, with the units' flags.
#define DYNEXPR_RUNTIME_DEFINE 1
#include "prelude.hpp"
