/* bridge/native/guards.c — dynexpr._native.GuardSet and select: guards as data
 * (bridge/dynexpr/guards.py defines them and is the reference), checked in C on every
 * call of a captured function. */
#include "native.h"

#include <math.h>
#include <string.h>
#include <structmember.h>

/* ================================================================ GuardSet */
/* Guards exactly as bridge/dynexpr/guards.py defines them (that module is the reference;
 * tests/python/test_native_guards.py checks this against it on the same data). The kinds,
 * their codes and which of them C checks come from bridge/dynexpr/guard_kinds.py, through
 * the header the build generates from it (Note [guard kinds are listed once]). */
#include "dx_guard_kinds.h"

enum guard_kind {
#define DX_KIND_ENUM(name, pair, native) G_##name,
  DX_GUARD_KINDS(DX_KIND_ENUM)
#undef DX_KIND_ENUM
  G_N_KINDS
};
static const struct {
  const char* name;
  char pair;   /* the source is a pair of sources (ALIAS, DIM_EQ) */
  char native; /* checked here; otherwise in Python only, and GuardSet refuses it */
} guard_kinds[G_N_KINDS] = {
#define DX_KIND_ROW(name, pair, native) {#name, pair, native},
    DX_GUARD_KINDS(DX_KIND_ROW)
#undef DX_KIND_ROW
};
#define PAIR_KIND(k) (guard_kinds[k].pair)
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
    for (int k = 0; k < G_N_KINDS; ++k)
      if (!strcmp(kind, guard_kinds[k].name)) g->kind = k;
    Py_DECREF(kindo);
    if (!g->expected) goto fail;
    if (g->kind < 0) {
      PyErr_Format(PyExc_ValueError, "dynexpr GuardSet: guard %zd has an unknown kind", i);
      goto fail;
    }
    if (!guard_kinds[g->kind].native) {
      PyErr_Format(PyExc_ValueError,
                   "dynexpr GuardSet: guard %zd has kind %s, which is checked in Python only "
                   "(dynexpr.guards.GuardSet)", i, guard_kinds[g->kind].name);
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
      case G_STRIDES_CLASS: {
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
    case G_STRIDES_CLASS: {
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
    default: /* a pair kind (above) or one checked in Python only (GuardSet_new refused it) */
      break;
  }
  Py_DECREF(x);
  return ok;
}

/* Index of the first failing guard for bound arguments items[0..n), -1 if all hold. */
static Py_ssize_t first_failure_of(GuardSetObject* self, PyObject* const* items, Py_ssize_t n,
                                   PyObject* fn) {
  global_memo memo = {NULL, NULL};
  Py_ssize_t failed = -1;
  for (Py_ssize_t i = 0; i < self->n && failed < 0; ++i)
    if (!check_one(&self->g[i], items, n, fn, &memo)) failed = i;
  Py_XDECREF(memo.value);
  return failed;
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
  return first_failure_of(self, items, n, fn);
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

PyTypeObject dx_GuardSetType = {
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

/* The second item of the first (GuardSet, value, ...) tuple of list `entries` whose
 * guards hold for bound arguments items[0..n): a borrowed reference; Py_None if none
 * holds; NULL with an exception on a malformed list. */
PyObject* dx_select_of(PyObject* entries, PyObject* const* items, Py_ssize_t n,
                       PyObject* fn) {
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(entries); ++i) {
    PyObject* e = PyList_GET_ITEM(entries, i);
    if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) < 2 ||
        !PyObject_TypeCheck(PyTuple_GET_ITEM(e, 0), &dx_GuardSetType)) {
      PyErr_SetString(PyExc_TypeError, "select: entries are (GuardSet, value) tuples");
      return NULL;
    }
    if (first_failure_of((GuardSetObject*)PyTuple_GET_ITEM(e, 0), items, n, fn) == -1)
      return PyTuple_GET_ITEM(e, 1);
  }
  return Py_None;
}

/* select(entries, args, fn=None): the second item of the first (GuardSet, value, ...)
 * entry whose guards hold, or None: a code object's cache entries checked in C. */
PyObject* dx_select(PyObject* mod, PyObject* const* a, Py_ssize_t n) {
  (void)mod;
  if (n < 2 || n > 3 || !PyList_Check(a[0]) || !(PyTuple_Check(a[1]) || PyList_Check(a[1]))) {
    PyErr_SetString(PyExc_TypeError, "select(entries: list, args: tuple or list, fn=None)");
    return NULL;
  }
  PyObject* const* items = PyTuple_Check(a[1]) ? &PyTuple_GET_ITEM(a[1], 0)
                                               : &PyList_GET_ITEM(a[1], 0);
  PyObject* v = dx_select_of(a[0], items, Py_SIZE(a[1]), n == 3 ? a[2] : Py_None);
  Py_XINCREF(v);
  return v;
}

/* module.GUARD_KINDS: {name: code} of the kinds checked here (codes are guard_kinds.py's). */
static int add_kind_table(PyObject* module) {
  PyObject* d = PyDict_New();
  if (!d) return -1;
  for (int k = 0; k < G_N_KINDS; ++k) {
    if (!guard_kinds[k].native) continue;
    PyObject* code = PyLong_FromLong(k);
    if (!code || PyDict_SetItemString(d, guard_kinds[k].name, code) < 0) {
      Py_XDECREF(code);
      Py_DECREF(d);
      return -1;
    }
    Py_DECREF(code);
  }
  const int r = PyModule_AddObjectRef(module, "GUARD_KINDS", d);
  Py_DECREF(d);
  return r;
}

int dx_guards_init(PyObject* module) {
  if (add_kind_table(module) < 0) return -1;
  PyObject* np = PyImport_ImportModule("numpy");
  if (!np) return -1;
  may_share_memory = PyObject_GetAttrString(np, "may_share_memory");
  Py_DECREF(np);
  if (!may_share_memory) return -1;
  return PyType_Ready(&dx_GuardSetType);
}
