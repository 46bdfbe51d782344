/* bridge/native/module.c — dynexpr._native: the CPython side of the call path.
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
 *       5 float64). Every array is described to the unit as host memory (dx_array.device:
 *       DX_DEVICE_CPU, 0). Strided inputs are passed with their strides (never copied);
 *       unaligned or byte-swapped ones are copied for the call (and copied back when
 *       written: Note [inputs a kernel cannot read in place]); an unsupported dtype
 *       raises TypeError. Floating-point flags the kernel raises are reported as NumPy's
 *       error state says (Note [floating-point errors]).
 *       The unit's status becomes ValueError (2), IndexError (3), MemoryError (4),
 *       TypeError (5) or RuntimeError (anything else), with the unit's message.
 *
 *   GuardSet(guards)   guards as data, exactly as bridge/dynexpr/guards.py defines them
 *       (its sources: arg, global, closure, attr, item, type; its kinds: those of
 *       bridge/dynexpr/guard_kinds.py marked native, GUARD_KINDS = {name: code}), given as
 *       guards.Guard objects or (kind, source, expected) tuples; a kind checked in Python
 *       only raises ValueError. One extension: a SHAPE entry None matches any extent.
 *       .check(args, fn=None) -> bool; .failing(args, fn=None) -> first failing guard or
 *       None; args are the bound arguments, fn the captured function (for global and
 *       closure sources). A guard that cannot be evaluated fails; nothing raises.
 *
 *   select(entries, args, fn=None)  the value of the first (GuardSet, value) entry whose
 *       guards hold, or None: a code object's list of cache entries, checked in C.
 *
 *   Dispatch   the base type of dynexpr.captured.CapturedFunction: a call that hits an
 *       entry whose inputs are arguments and whose result is one output runs its kernel
 *       from C; every other call goes to the subclass's _call (Note [the native hit path]).
 *
 *   buffer_cache(), trim_buffers(), output_offset()  the freed output buffers kept for
 *       the next outputs of the same size (Note [output buffer cache]), where outputs start
 *       in their page (Note [output page offset]).
 *
 * Where each part lives (bridge/native/native.h declares what they share): Kernel in
 * kernel.c, the output buffers in buffers.c, GuardSet and select in guards.c, Dispatch in
 * dispatch.c.
 */
#define DX_NATIVE_IMPORTS_ARRAY /* the one file that calls import_array */
#include "native.h"

static PyMethodDef native_methods[] = {
    {"select", (PyCFunction)(void (*)(void))dx_select, METH_FASTCALL,
     "select(entries, args, fn=None) -> value of the first (GuardSet, value) entry whose "
     "guards hold, or None"},
    {"buffer_cache", dx_buffer_cache, METH_NOARGS,
     "buffer_cache() -> {buffers, bytes, cap, reused, fresh}: the freed output buffers kept "
     "for reuse (Note [output buffer cache] in bridge/native/buffers.c)"},
    {"trim_buffers", dx_trim_buffers, METH_NOARGS,
     "trim_buffers(): give the kept output buffers back to the system"},
    {"output_offset", (PyCFunction)(void (*)(void))dx_output_offset, METH_FASTCALL,
     "output_offset([k]) -> the previous setting: every output starts k bytes into a page "
     "(rounded down to 64), or -1 (the default) where the inputs say (Note [output page "
     "offset] in bridge/native/kernel.c); for benchmarks"},
    {0},
};

static struct PyModuleDef native_module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "dynexpr._native",
    .m_doc = "dynexpr's native call path: compiled kernels and guard checks (see "
             "bridge/native/module.c).",
    .m_size = -1,
    .m_methods = native_methods,
};

PyMODINIT_FUNC PyInit__native(void) {
  import_array();
  if (dx_kernel_init() < 0 || dx_buffers_init() < 0) return NULL;
  PyObject* m = PyModule_Create(&native_module);
  if (!m) return NULL;
  if (dx_guards_init(m) < 0 || dx_dispatch_init() < 0 ||
      PyModule_AddObjectRef(m, "Kernel", (PyObject*)&dx_KernelType) < 0 ||
      PyModule_AddObjectRef(m, "GuardSet", (PyObject*)&dx_GuardSetType) < 0 ||
      PyModule_AddObjectRef(m, "Dispatch", (PyObject*)&dx_DispatchType) < 0 ||
      PyModule_AddIntConstant(m, "ABI_VERSION", DYNEXPR_ABI_VERSION) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
