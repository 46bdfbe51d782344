/* bridge/native/dispatch.c — dynexpr._native.Dispatch: the base of
 * dynexpr.captured.CapturedFunction, whose calls it answers in C when it can.
 *
 * Note [the native hit path]
 * A hit on a captured function used to cost ~0.8 us of Python on top of its kernel: the
 * class's __call__ frame with its *args tuple and **kwargs dict, entries.run, the fetch
 * lambda, the output's index. That is more than NumPy takes for a whole 64 x 64
 * matrix-vector product (1.3 us), so the smallest captured functions ran slower than the
 * plain ones. Dispatch is a vectorcall type: a positional call with the function's own
 * argument count (CapturedFunction._simple_nargs) selects the entry from _centries here
 * (the guards as data, guards.c) and, for the common entry, calls its kernel directly:
 *   - every input is an argument (Entry.arg_index),
 *   - the return value is one output as it is (Entry.direct),
 *   - the entry is not being judged (Entry.judge is None: judge.py),
 *   - and its callable is a loaded Kernel (kernel.c).
 * A judged entry's call goes straight to its judge (judge.call), as _call would send it:
 * an entry whose verdict is "plain" then costs one select and the judge's own lines.
 * Those are read from the entry on every call, not copied when the entry is added,
 * because a background compile (background.py) and a judge's verdict change them later.
 * Every other call goes to the Python method _call (CapturedFunction._call), which
 * selects again and does everything else: a call that leaves the fast path pays one
 * more select (~60 ns). _centries, _fn, _simple_nargs and _hits are this type's members,
 * so the Python code reads and replaces them as it did when they were instance
 * attributes; a hit here counts in _hits as a Python hit does.
 *
 * Note [a plain verdict in C]
 * An entry judged "plain" (judge.py) runs the plain function, and for a function of a few
 * microseconds the judge's Python lines were most of what the capture added: a tuple and
 * a dict for the arguments, the frame of Judge.call, `fn(*args, **kwargs)`, about 0.5 us.
 * Seven calls in eight of Judge.call's plain branch only count down `calls_left`, so
 * plain_call does those here: it reads `plain` and `calls_left`, stores the count and
 * calls the function. Every eighth call, and any judge it cannot read, goes to
 * Judge.call, which reads the clock and may start the re-check. Judge.call's plain
 * branch and this function must count alike. The judge of an entry that is a graph
 * break at its start (judge.BREAK: the whole call is plain Python, for good) says so
 * with `calls_left = None`, and its calls go straight to the function.
 *
 * Python 3.11 does not give a heap subclass the vectorcall flag, but its tp_call
 * (PyVectorcall_Call, inherited) still reaches Dispatch_vectorcall: through an args
 * tuple, and still without a Python frame. */
#include "native.h"

#include <structmember.h>

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* centries;  /* list of (GuardSet, Entry) tuples, or None: guards in Python */
  PyObject* fn;        /* the wrapped function (global and closure guard sources) */
  Py_ssize_t nargs;    /* positional calls with this many arguments bind as they are */
  Py_ssize_t hits;
} DispatchObject;

static PyObject *s_judge, *s_arg_index, *s_direct, *s_compiled, *s__call, *s_call, *s_plain,
    *s_calls_left;
static PyObject* s_miss; /* fast_call's "take the Python path" */

#define MAX_FAST_ARGS 16

/* A judged entry (judge.py: being timed, or running plain): judge.call(cf, entry,
 * bound, args, kwargs), as CapturedFunction._call would call it for this call. */
static PyObject* judged_call(PyObject* cf, PyObject* judge, PyObject* entry,
                             PyObject* const* args, Py_ssize_t nargs) {
  PyObject* bound = PyTuple_New(nargs);
  if (!bound) return NULL;
  for (Py_ssize_t i = 0; i < nargs; ++i) PyTuple_SET_ITEM(bound, i, Py_NewRef(args[i]));
  PyObject* kwargs = PyDict_New();
  PyObject* r = kwargs ? PyObject_CallMethodObjArgs(judge, s_call, cf, entry, bound, bound,
                                                    kwargs, NULL)
                       : NULL;
  Py_XDECREF(kwargs);
  Py_DECREF(bound);
  return r;
}

/* The plain function on the call's arguments, for an entry whose verdict is "plain"
 * (Note [a plain verdict in C]); `s_miss` (a new reference) where judge.call must run. */
static PyObject* plain_call(PyObject* cf, PyObject* judge, PyObject* const* args,
                            Py_ssize_t nargs) {
  PyObject* plain = PyObject_GetAttr(judge, s_plain);
  if (!plain) {
    PyErr_Clear();
    return Py_NewRef(s_miss);
  }
  const int is_plain = plain == Py_True;
  Py_DECREF(plain);
  if (!is_plain) return Py_NewRef(s_miss);
  PyObject* left = PyObject_GetAttr(judge, s_calls_left);
  if (!left) {
    PyErr_Clear();
    return Py_NewRef(s_miss);
  }
  PyObject* fn = ((DispatchObject*)cf)->fn;
  if (left == Py_None) { /* judge.BREAK: the whole call is plain, uncounted */
    Py_DECREF(left);
    return fn ? PyObject_Vectorcall(fn, args, (size_t)nargs, NULL) : Py_NewRef(s_miss);
  }
  long n = PyLong_CheckExact(left) ? PyLong_AsLong(left) : 1;
  Py_DECREF(left);
  if (n == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return Py_NewRef(s_miss);
  }
  --n;
  if (!(n & 7)) return Py_NewRef(s_miss); /* judge.call reads the clock on this call */
  PyObject* now = PyLong_FromLong(n);
  if (!now || PyObject_SetAttr(judge, s_calls_left, now) < 0) {
    Py_XDECREF(now);
    return NULL;
  }
  Py_DECREF(now);
  return fn ? PyObject_Vectorcall(fn, args, (size_t)nargs, NULL) : Py_NewRef(s_miss);
}

/* entry's kernel on its arguments and the output it returns (a judged entry: what its
 * judge returns), or `miss` (a new reference to it) where the entry needs the Python
 * path; NULL: the call raised. */
static PyObject* fast_call(PyObject* cf, PyObject* entry, PyObject* const* args,
                           Py_ssize_t nargs, PyObject* miss) {
  /* An attribute that cannot be read (not an Entry) sends the call to the Python path,
   * which says what is wrong, rather than raising from here. */
  PyObject* judge = PyObject_GetAttr(entry, s_judge);
  if (!judge) {
    PyErr_Clear();
    return Py_NewRef(miss);
  }
  if (judge != Py_None) {
    PyObject* r = plain_call(cf, judge, args, nargs);
    if (r == s_miss) {
      Py_DECREF(r);
      r = judged_call(cf, judge, entry, args, nargs);
    }
    Py_DECREF(judge);
    return r;
  }
  Py_DECREF(judge);
  PyObject *idx = NULL, *direct = NULL, *kernel = NULL, *outs = NULL, *r = NULL;
  PyObject* stack[MAX_FAST_ARGS];
  if (!(idx = PyObject_GetAttr(entry, s_arg_index)) ||
      !(direct = PyObject_GetAttr(entry, s_direct)) ||
      !(kernel = PyObject_GetAttr(entry, s_compiled))) {
    PyErr_Clear();
    r = Py_NewRef(miss);
    goto done;
  }
  Py_ssize_t d = -1;
  const Py_ssize_t n = PyTuple_Check(idx) ? PyTuple_GET_SIZE(idx) : -1;
  if (n < 0 || n > MAX_FAST_ARGS || !PyLong_CheckExact(direct) ||
      !Py_IS_TYPE(kernel, &dx_KernelType) || (d = PyLong_AsSsize_t(direct)) < 0) {
    PyErr_Clear();
    r = Py_NewRef(miss);
    goto done;
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    const Py_ssize_t a = PyLong_AsSsize_t(PyTuple_GET_ITEM(idx, i));
    if (a < 0 || a >= nargs) {
      PyErr_Clear();
      r = Py_NewRef(miss);
      goto done;
    }
    stack[i] = args[a];
  }
  outs = PyObject_Vectorcall(kernel, stack, (size_t)n, NULL);
  if (!outs) goto done; /* the kernel's error, raised as entries.run would raise it */
  r = PyTuple_Check(outs) && d < PyTuple_GET_SIZE(outs)
          ? Py_NewRef(PyTuple_GET_ITEM(outs, d))
          : Py_NewRef(miss); /* not a Kernel's answer: the Python path says what it is */
done:
  Py_XDECREF(idx);
  Py_XDECREF(direct);
  Py_XDECREF(kernel);
  Py_XDECREF(outs);
  return r;
}

static PyObject* Dispatch_vectorcall(DispatchObject* self, PyObject* const* args,
                                     size_t nargsf, PyObject* kwnames) {
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (!kwnames && nargs == self->nargs && self->centries && PyList_Check(self->centries)) {
    /* The list is a snapshot the Python side replaces, never changes (Note [entry lists
     * are snapshots] in entries.py): hold it while the guards and the kernel run. */
    PyObject* centries = Py_NewRef(self->centries);
    PyObject* entry = dx_select_of(centries, args, nargs, self->fn ? self->fn : Py_None);
    PyObject* r = NULL;
    if (entry && entry != Py_None) {
      Py_INCREF(entry);
      r = fast_call((PyObject*)self, entry, args, nargs, s_miss);
      Py_DECREF(entry);
    } else if (entry == Py_None) {
      r = Py_NewRef(s_miss);
    }
    Py_DECREF(centries);
    if (!r) return NULL;
    if (r != s_miss) {
      ++self->hits;
      return r;
    }
    Py_DECREF(r);
  }
  PyObject* call = PyObject_GetAttr((PyObject*)self, s__call);
  if (!call) return NULL;
  PyObject* r = PyObject_Vectorcall(call, args, nargsf, kwnames);
  Py_DECREF(call);
  return r;
}

static int Dispatch_traverse(DispatchObject* self, visitproc visit, void* arg) {
  Py_VISIT(self->centries);
  Py_VISIT(self->fn);
  return 0;
}

static int Dispatch_clear(DispatchObject* self) {
  Py_CLEAR(self->centries);
  Py_CLEAR(self->fn);
  return 0;
}

/* A heap subclass's type reference is visited and released by CPython's subtype_traverse
 * and subtype_dealloc (this base is a static type), so neither is done here. */
static void Dispatch_dealloc(DispatchObject* self) {
  PyObject_GC_UnTrack(self);
  Dispatch_clear(self);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

static PyObject* Dispatch_new(PyTypeObject* type, PyObject* args, PyObject* kw) {
  (void)args;
  (void)kw;
  DispatchObject* self = (DispatchObject*)type->tp_alloc(type, 0);
  if (!self) return NULL;
  self->vectorcall = (vectorcallfunc)Dispatch_vectorcall;
  self->nargs = -1;
  return (PyObject*)self;
}

static PyMemberDef Dispatch_members[] = {
    {"_centries", T_OBJECT, offsetof(DispatchObject, centries), 0,
     "(GuardSet, Entry) tuples checked in C on each call, or None"},
    {"_fn", T_OBJECT, offsetof(DispatchObject, fn), 0, "the wrapped function"},
    {"_simple_nargs", T_PYSSIZET, offsetof(DispatchObject, nargs), 0,
     "positional calls with this many arguments take the native hit path (-1: none)"},
    {"_hits", T_PYSSIZET, offsetof(DispatchObject, hits), 0, "calls that found an entry"},
    {0},
};

PyTypeObject dx_DispatchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynexpr._native.Dispatch",
    .tp_basicsize = sizeof(DispatchObject),
    .tp_dealloc = (destructor)Dispatch_dealloc,
    .tp_vectorcall_offset = offsetof(DispatchObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC |
                Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "The native call path of a captured function (Note [the native hit path]); "
              "a subclass defines _call(*args, **kwargs), the Python path.",
    .tp_traverse = (traverseproc)Dispatch_traverse,
    .tp_clear = (inquiry)Dispatch_clear,
    .tp_members = Dispatch_members,
    .tp_new = Dispatch_new,
};

int dx_dispatch_init(void) {
  if (!(s_judge = PyUnicode_InternFromString("judge")) ||
      !(s_arg_index = PyUnicode_InternFromString("arg_index")) ||
      !(s_direct = PyUnicode_InternFromString("direct")) ||
      !(s_compiled = PyUnicode_InternFromString("compiled")) ||
      !(s__call = PyUnicode_InternFromString("_call")) ||
      !(s_call = PyUnicode_InternFromString("call")) ||
      !(s_plain = PyUnicode_InternFromString("plain")) ||
      !(s_calls_left = PyUnicode_InternFromString("calls_left")) ||
      !(s_miss = PyObject_CallNoArgs((PyObject*)&PyBaseObject_Type)))
    return -1;
  return PyType_Ready(&dx_DispatchType);
}
