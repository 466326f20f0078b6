/* _C.Jit: a Python function compiled by oar_jit_to_static. The C tracer calls back into
 * Python with symbolic tensors; persistent tensors are named through a state source that asks
 * a Python callable for (name, tensor) pairs (the modules' parameters and buffers), so Python
 * modules are captured exactly as C ones. oar.jit (Python) adds caching keys, fallback and
 * saving on top. */
#include "common.h"
#include "oar/onnx.h"

#include <string.h>

#define JIT_MAX_OUT 16

typedef struct {
    PyObject_HEAD
    oar_jit *jit;
    PyObject *fn;        /* the Python function: fn(*tensors) -> Tensor or tuple of Tensors */
    PyObject *names;     /* callable -> list of (name, Tensor), or None */
    PyObject *named;     /* the list during a trace */
    PyObject *error;     /* (type, value, traceback) raised by fn while tracing */
    int got_outputs;     /* how many outputs fn returned at the last trace */
    oar_state_source source;
} JitObject;

/* ---- the state source: the pairs the names callable returns, asked once per trace */
static int source_count(void *owner) {
    JitObject *self = owner;
    Py_CLEAR(self->named);
    if (self->names == Py_None) return 0;
    PyObject *l = PyObject_CallNoArgs(self->names);
    if (!l || !PyList_Check(l)) {
        Py_XDECREF(l);
        PyErr_Clear(); /* names are for files and messages: a failure leaves tensors unnamed */
        return 0;
    }
    self->named = l;
    return (int)PyList_GET_SIZE(l);
}

static oar_tensor *source_tensor(void *owner, int i, const char **name) {
    JitObject *self = owner;
    if (!self->named || i >= PyList_GET_SIZE(self->named)) return NULL;
    PyObject *pair = PyList_GET_ITEM(self->named, i);
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) return NULL;
    PyObject *nm = PyTuple_GET_ITEM(pair, 0), *t = PyTuple_GET_ITEM(pair, 1);
    if (!PyUnicode_Check(nm) || !PyObject_TypeCheck(t, &TensorBase_Type)) return NULL;
    *name = PyUnicode_AsUTF8(nm);
    return ((TensorObject *)t)->t;
}

/* ---- the traced function: fn on symbolic tensors; its exception is kept to re-raise */
static oar_status call_python(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    JitObject *self = user;
    PyObject *args = PyTuple_New(n_in);
    if (!args) return oar_set_error(OAR_ERR_OOM, "to_static: out of memory");
    for (int i = 0; i < n_in; i++) {
        PyObject *x = oarpy_wrap(oar_retain(in[i]));
        if (!x) {
            Py_DECREF(args);
            return oar_set_error(OAR_ERR_OOM, "to_static: out of memory");
        }
        PyTuple_SET_ITEM(args, i, x);
    }
    void *scopes = oar_scope_suspend(); /* Python objects own what fn makes, not the trace's scope */
    PyObject *r = PyObject_CallObject(self->fn, args);
    Py_DECREF(args);
    oar_scope_resume(scopes);
    if (!r) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (tb) PyException_SetTraceback(value, tb);
        Py_XDECREF(self->error);
        self->error = Py_BuildValue("(OOO)", type, value, tb ? tb : Py_None);
        PyObject *s = value ? PyObject_Str(value) : NULL;
        oar_status st = oar_set_error(OAR_ERR_STATE, "to_static: the function raised %s: %s",
                                  ((PyTypeObject *)type)->tp_name, s ? PyUnicode_AsUTF8(s) : "?");
        Py_XDECREF(s);
        Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
        return st;
    }
    PyObject *seq = PyTuple_Check(r) || PyList_Check(r) ? PySequence_Tuple(r) : PyTuple_Pack(1, r);
    Py_DECREF(r);
    if (!seq) {
        PyErr_Clear();
        return oar_set_error(OAR_ERR_OOM, "to_static: out of memory");
    }
    int k = (int)PyTuple_GET_SIZE(seq);
    self->got_outputs = k;
    oar_status st = OAR_OK;
    if (k != n_out)
        st = oar_set_error(OAR_ERR_INVALID_ARG, "to_static: expected %d outputs, the function returned %d", n_out, k);
    for (int i = 0; st == OAR_OK && i < k; i++) {
        PyObject *o = PyTuple_GET_ITEM(seq, i);
        if (!PyObject_TypeCheck(o, &TensorBase_Type) || !((TensorObject *)o)->t)
            st = oar_set_error(OAR_ERR_INVALID_ARG, "to_static: expected the function to return tensors, got %s at %d",
                           Py_TYPE(o)->tp_name, i);
        else
            out[i] = oar_retain(((TensorObject *)o)->t);
    }
    Py_DECREF(seq);
    return st;
}

/* Jit(fn, names, specs, output_names): specs a list of (dtype code, shape with -1 dynamic,
 * name or None) or None. */
static int jit_init(JitObject *self, PyObject *args, PyObject *kwargs) {
    (void)kwargs;
    PyObject *fn, *names, *specs, *out_names = Py_None;
    if (!PyArg_ParseTuple(args, "OOO|O", &fn, &names, &specs, &out_names)) return -1;
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "to_static: expected a function");
        return -1;
    }
    Py_INCREF(fn);
    Py_XSETREF(self->fn, fn);
    Py_INCREF(names);
    Py_XSETREF(self->names, names);
    self->source = (oar_state_source){.owner = self, .count = source_count, .tensor = source_tensor};
    const oar_state_source *sources[1] = {&self->source};
    oar_input_spec sp[JIT_MAX_OUT];
    int n_specs = 0;
    if (specs != Py_None) {
        if (!PyList_Check(specs) || PyList_GET_SIZE(specs) > JIT_MAX_OUT) {
            PyErr_Format(PyExc_ValueError, "to_static: expected at most %d input specs", JIT_MAX_OUT);
            return -1;
        }
        n_specs = (int)PyList_GET_SIZE(specs);
        for (int i = 0; i < n_specs; i++) {
            PyObject *shape, *name;
            int dt;
            if (!PyArg_ParseTuple(PyList_GET_ITEM(specs, i), "iOO", &dt, &shape, &name)) return -1;
            memset(&sp[i], 0, sizeof sp[i]);
            sp[i].dtype = (oar_dtype)dt;
            sp[i].ndim = (int)PySequence_Size(shape);
            if (sp[i].ndim < 0 || sp[i].ndim > OAR_MAX_DIMS) {
                PyErr_Format(PyExc_ValueError, "to_static: input spec %d: expected at most %d dims", i, OAR_MAX_DIMS);
                return -1;
            }
            for (int d = 0; d < sp[i].ndim; d++) {
                PyObject *v = PySequence_GetItem(shape, d);
                sp[i].shape[d] = v ? PyLong_AsLongLong(v) : -1;
                Py_XDECREF(v);
                if (PyErr_Occurred()) return -1;
            }
            sp[i].name = name == Py_None ? NULL : PyUnicode_AsUTF8(name);
        }
    }
    const char *outs[JIT_MAX_OUT];
    int n_outs = 0;
    if (out_names != Py_None) { /* the outputs' names in exported files (ONNX) */
        if (!PyList_Check(out_names) || PyList_GET_SIZE(out_names) > JIT_MAX_OUT) {
            PyErr_Format(PyExc_ValueError, "to_static: expected a list of at most %d output names", JIT_MAX_OUT);
            return -1;
        }
        for (; n_outs < (int)PyList_GET_SIZE(out_names); n_outs++)
            if (!(outs[n_outs] = PyUnicode_AsUTF8(PyList_GET_ITEM(out_names, n_outs)))) return -1;
    }
    oar_jit_opts o = {.specs = n_specs ? sp : NULL, .n_specs = n_specs, .state_sources = sources, .n_state_sources = 1,
                      .output_names = n_outs ? outs : NULL, .n_output_names = n_outs};
    oar_jit_free(self->jit);
    self->jit = oar_jit_to_static(call_python, self, &o);
    if (!self->jit) {
        oarpy_raise();
        return -1;
    }
    return 0;
}

/* call(inputs, n_out) -> tuple of n_out tensors. The function's own exception is re-raised
 * as it was; a count mismatch raises _C.OutputCount(actual). */
static PyObject *jit_call(JitObject *self, PyObject *args) {
    PyObject *inputs;
    int n_out;
    if (!PyArg_ParseTuple(args, "O!i", &PyTuple_Type, &inputs, &n_out)) return NULL;
    int n_in = (int)PyTuple_GET_SIZE(inputs);
    if (n_out < 1 || n_out > JIT_MAX_OUT || n_in > JIT_MAX_OUT) {
        PyErr_Format(PyExc_ValueError, "to_static: expected 1..%d outputs and at most %d inputs", JIT_MAX_OUT,
                     JIT_MAX_OUT);
        return NULL;
    }
    oar_tensor *in[JIT_MAX_OUT], *out[JIT_MAX_OUT] = {0};
    for (int i = 0; i < n_in; i++)
        if (!(in[i] = oarpy_tensor(PyTuple_GET_ITEM(inputs, i), "to_static input"))) return NULL;
    Py_CLEAR(self->error);
    self->got_outputs = -1;
    oar_status st = oar_jit_call(self->jit, in, n_in, out, n_out);
    Py_CLEAR(self->named);
    if (st != OAR_OK) {
        if (self->error) { /* fn's own exception, with its traceback */
            PyObject *e = self->error;
            self->error = NULL;
            PyObject *type = PyTuple_GET_ITEM(e, 0), *value = PyTuple_GET_ITEM(e, 1), *tb = PyTuple_GET_ITEM(e, 2);
            Py_INCREF(type), Py_INCREF(value);
            if (tb != Py_None) Py_INCREF(tb);
            PyErr_Restore(type, value, tb == Py_None ? NULL : tb);
            Py_DECREF(e);
            return NULL;
        }
        if (self->got_outputs >= 0 && self->got_outputs != n_out)
            return Py_BuildValue("(Oi)", Py_None, self->got_outputs); /* retry with the right count */
        return oarpy_raise();
    }
    PyObject *r = PyTuple_New(n_out);
    for (int k = 0; r && k < n_out; k++) {
        PyObject *o = oarpy_wrap(out[k]);
        if (!o) {
            for (int j = k + 1; j < n_out; j++) oar_release(out[j]);
            Py_CLEAR(r);
            break;
        }
        PyTuple_SET_ITEM(r, k, o);
    }
    return r;
}

static PyObject *jit_num_traces(JitObject *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromLongLong(oar_jit_num_traces(self->jit));
}

static PyObject *jit_num_programs(JitObject *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromLong(oar_jit_num_programs(self->jit));
}

static PyObject *jit_dump(JitObject *self, PyObject *arg) {
    int i = (int)PyLong_AsLong(arg);
    if (PyErr_Occurred()) return NULL;
    int n = oar_jit_dump(self->jit, i, NULL, 0);
    if (n < 0) {
        PyErr_Format(PyExc_IndexError, "to_static: no program %d (there are %d)", i, oar_jit_num_programs(self->jit));
        return NULL;
    }
    char *buf = PyMem_Malloc((size_t)n + 1);
    if (!buf) return PyErr_NoMemory();
    oar_jit_dump(self->jit, i, buf, (size_t)n + 1);
    PyObject *s = PyUnicode_FromString(buf);
    PyMem_Free(buf);
    return s;
}

static PyObject *jit_save(JitObject *self, PyObject *arg) {
    const char *path = PyUnicode_AsUTF8(arg);
    if (!path) return NULL;
    if (oarpy_check(oar_jit_save(self->jit, path)) < 0) return NULL;
    Py_RETURN_NONE;
}

/* save_onnx(path, dim_param): the latest program as an ONNX model (oar_onnx_save), its inputs
 * named by the input specs, its outputs by the constructor's output names. */
static PyObject *jit_save_onnx(JitObject *self, PyObject *args) {
    const char *path, *dim_param = NULL;
    if (!PyArg_ParseTuple(args, "sz", &path, &dim_param)) return NULL;
    oar_onnx_save_opts opts = {.dim_param = dim_param};
    if (oarpy_check(oar_onnx_save(self->jit, path, &opts)) < 0) return NULL;
    Py_RETURN_NONE;
}

static int jit_traverse(JitObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->fn);
    Py_VISIT(self->names);
    Py_VISIT(self->named);
    Py_VISIT(self->error);
    return 0;
}

static int jit_clear(JitObject *self) {
    Py_CLEAR(self->fn);
    Py_CLEAR(self->names);
    Py_CLEAR(self->named);
    Py_CLEAR(self->error);
    return 0;
}

static void jit_dealloc(JitObject *self) {
    PyObject_GC_UnTrack(self);
    oar_jit_free(self->jit);
    jit_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef jit_methods[] = {
    {"call", (PyCFunction)jit_call, METH_VARARGS, "call(inputs, n_out) -> outputs, or (None, count) to retry"},
    {"num_traces", (PyCFunction)jit_num_traces, METH_NOARGS, NULL},
    {"num_programs", (PyCFunction)jit_num_programs, METH_NOARGS, NULL},
    {"dump", (PyCFunction)jit_dump, METH_O, NULL},
    {"save", (PyCFunction)jit_save, METH_O, NULL},
    {"save_onnx", (PyCFunction)jit_save_onnx, METH_VARARGS, "save_onnx(path, dim_param)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject Jit_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "oar._C.Jit",
    .tp_basicsize = sizeof(JitObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)jit_init,
    .tp_dealloc = (destructor)jit_dealloc,
    .tp_traverse = (traverseproc)jit_traverse,
    .tp_clear = (inquiry)jit_clear,
    .tp_methods = jit_methods,
};

/* ---- oar_cond / oar_while with Python branches (used while tracing; eagerly, oar.cond runs the
 * branch in Python). A block's outputs must number n_out; a mismatch reports the count so the
 * caller can trace again with it. */
typedef struct block_ctx {
    PyObject *fns[2];
    PyObject *error; /* the first exception a block raised */
    int got;
} block_ctx;

static oar_status call_block(block_ctx *c, PyObject *fn, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    PyObject *args = PyTuple_New(n_in);
    if (!args) return oar_set_error(OAR_ERR_OOM, "cond: out of memory");
    for (int i = 0; i < n_in; i++) PyTuple_SET_ITEM(args, i, oarpy_wrap(oar_retain(in[i])));
    void *scopes = oar_scope_suspend();
    PyObject *r = PyObject_CallObject(fn, args);
    oar_scope_resume(scopes);
    Py_DECREF(args);
    if (!r) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (tb) PyException_SetTraceback(value, tb);
        Py_XDECREF(c->error);
        c->error = Py_BuildValue("(OOO)", type, value, tb ? tb : Py_None);
        Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
        return oar_set_error(OAR_ERR_STATE, "a branch raised a Python exception");
    }
    PyObject *seq = PyTuple_Check(r) || PyList_Check(r) ? PySequence_Tuple(r) : PyTuple_Pack(1, r);
    Py_DECREF(r);
    if (!seq) return oar_set_error(OAR_ERR_OOM, "cond: out of memory");
    c->got = (int)PyTuple_GET_SIZE(seq);
    oar_status st = c->got == n_out ? OAR_OK
                                    : oar_set_error(OAR_ERR_INVALID_ARG, "expected %d outputs, got %d", n_out, c->got);
    for (int i = 0; st == OAR_OK && i < n_out; i++) {
        PyObject *o = PyTuple_GET_ITEM(seq, i);
        if (!PyObject_TypeCheck(o, &TensorBase_Type) || !((TensorObject *)o)->t)
            st = oar_set_error(OAR_ERR_INVALID_ARG, "expected tensors from a branch, got %s", Py_TYPE(o)->tp_name);
        else
            out[i] = oar_retain(((TensorObject *)o)->t);
    }
    Py_DECREF(seq);
    return st;
}

static oar_status block0(void *u, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    block_ctx *c = u;
    return call_block(c, c->fns[0], in, n_in, out, n_out);
}

static oar_status block1(void *u, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    block_ctx *c = u;
    return call_block(c, c->fns[1], in, n_in, out, n_out);
}

/* The result tuple, or the branch's exception, or (None, count) to retry with count. */
static PyObject *block_result(block_ctx *c, oar_status st, oar_tensor **out, int n_out) {
    if (c->error) {
        PyObject *e = c->error, *tb = PyTuple_GET_ITEM(e, 2);
        c->error = NULL;
        Py_INCREF(PyTuple_GET_ITEM(e, 0)), Py_INCREF(PyTuple_GET_ITEM(e, 1));
        if (tb != Py_None) Py_INCREF(tb);
        PyErr_Restore(PyTuple_GET_ITEM(e, 0), PyTuple_GET_ITEM(e, 1), tb == Py_None ? NULL : tb);
        Py_DECREF(e);
        return NULL;
    }
    if (st != OAR_OK) {
        if (c->got >= 0 && c->got != n_out) return Py_BuildValue("(Oi)", Py_None, c->got);
        return oarpy_raise();
    }
    PyObject *r = PyTuple_New(n_out);
    for (int k = 0; r && k < n_out; k++) PyTuple_SET_ITEM(r, k, oarpy_wrap(out[k]));
    return r;
}

static int tensors_of(PyObject *tuple, oar_tensor **arr, const char *what) {
    int n = (int)PyTuple_GET_SIZE(tuple);
    if (n > JIT_MAX_OUT) {
        PyErr_Format(PyExc_ValueError, "%s: expected at most %d tensors", what, JIT_MAX_OUT);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (!(arr[i] = oarpy_tensor(PyTuple_GET_ITEM(tuple, i), what))) return -1;
    return n;
}

/* The blocks' context outlives the call: the traced backward calls the blocks again. It is kept
 * by a capsule the caller holds as long as the trace (keep, a list). */
static void ctx_free(PyObject *capsule) {
    block_ctx *c = PyCapsule_GetPointer(capsule, "oar.block_ctx");
    if (!c) return;
    Py_XDECREF(c->fns[0]), Py_XDECREF(c->fns[1]), Py_XDECREF(c->error);
    PyMem_Free(c);
}

static block_ctx *ctx_new(PyObject *f0, PyObject *f1, PyObject *keep) {
    if (!PyList_Check(keep)) {
        PyErr_SetString(PyExc_TypeError, "cond: expected a list to keep the branches in");
        return NULL;
    }
    block_ctx *c = PyMem_Calloc(1, sizeof *c);
    if (!c) return (block_ctx *)PyErr_NoMemory();
    c->got = -1;
    Py_INCREF(f0), Py_INCREF(f1);
    c->fns[0] = f0, c->fns[1] = f1;
    PyObject *cap = PyCapsule_New(c, "oar.block_ctx", ctx_free);
    if (!cap || PyList_Append(keep, cap) < 0) {
        if (!cap) { /* nothing owns c yet */
            Py_DECREF(f0), Py_DECREF(f1);
            PyMem_Free(c);
        }
        Py_XDECREF(cap); /* its destructor frees c */
        return NULL;
    }
    Py_DECREF(cap);
    return c;
}

/* cond(pred, then_fn, else_fn, operands, n_out, keep) */
static PyObject *py_cond(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *pred, *ops, *f0, *f1, *keep;
    int n_out;
    if (!PyArg_ParseTuple(args, "OOOO!iO", &pred, &f0, &f1, &PyTuple_Type, &ops, &n_out, &keep)) return NULL;
    oar_tensor *p = oarpy_tensor(pred, "cond predicate"), *in[JIT_MAX_OUT], *out[JIT_MAX_OUT] = {0};
    int n_in = p ? tensors_of(ops, in, "cond operands") : -1;
    if (n_in < 0) return NULL;
    if (n_out < 1 || n_out > JIT_MAX_OUT) return PyErr_Format(PyExc_ValueError, "cond: expected 1..%d outputs", JIT_MAX_OUT);
    block_ctx *c = ctx_new(f0, f1, keep);
    if (!c) return NULL;
    oar_status st = oar_cond(p, block0, block1, c, in, n_in, out, n_out);
    return block_result(c, st, out, n_out);
}

/* while_loop(cond_fn, body_fn, carried, keep) */
static PyObject *py_while(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *vars, *f0, *f1, *keep;
    if (!PyArg_ParseTuple(args, "OOO!O", &f0, &f1, &PyTuple_Type, &vars, &keep)) return NULL;
    oar_tensor *in[JIT_MAX_OUT], *out[JIT_MAX_OUT] = {0};
    int n = tensors_of(vars, in, "while_loop carried values");
    if (n < 1) return n < 0 ? NULL : PyErr_Format(PyExc_ValueError, "while_loop: expected at least one carried value");
    block_ctx *c = ctx_new(f0, f1, keep);
    if (!c) return NULL;
    oar_status st = oar_while(block0, block1, c, in, n, out);
    return block_result(c, st, out, n);
}

static PyObject *py_is_tracing(PyObject *mod, PyObject *unused) {
    (void)mod, (void)unused;
    return PyBool_FromLong(oar_is_tracing());
}

static PyMethodDef jit_functions[] = {
    {"cond", py_cond, METH_VARARGS, "cond(pred, then_fn, else_fn, operands, n_out)"},
    {"while_loop", py_while, METH_VARARGS, "while_loop(cond_fn, body_fn, carried)"},
    {"is_tracing", py_is_tracing, METH_NOARGS, "Whether a function is being traced on this thread."},
    {NULL, NULL, 0, NULL},
};

int oarpy_jit_init(PyObject *m) {
    if (PyModule_AddFunctions(m, jit_functions) < 0) return -1;
    if (PyType_Ready(&Jit_Type) < 0) return -1;
    Py_INCREF(&Jit_Type);
    return PyModule_AddObject(m, "Jit", (PyObject *)&Jit_Type);
}
