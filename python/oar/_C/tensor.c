/* oar._C.TensorBase: a Python object holding one oar tensor reference. oar.Tensor (Python)
 * subclasses it and adds torch's method names; this file keeps what must touch the handle:
 * properties, autograd entry points, gradient hooks, printing, lifetime. */
#include "common.h"

PyObject *oarpy_tensor_class; /* oar.Tensor, registered at import */

PyObject *oarpy_wrap_as(PyTypeObject *cls, oar_tensor *t) {
    if (!t) return oarpy_raise();
    TensorObject *o = (TensorObject *)cls->tp_alloc(cls, 0);
    if (!o) {
        oar_release(t);
        return NULL;
    }
    o->t = t;
    return (PyObject *)o;
}

PyObject *oarpy_wrap(oar_tensor *t) {
    PyTypeObject *cls = oarpy_tensor_class ? (PyTypeObject *)oarpy_tensor_class : &TensorBase_Type;
    return oarpy_wrap_as(cls, t);
}

oar_tensor *oarpy_tensor(PyObject *o, const char *what) {
    if (!o || !PyObject_TypeCheck(o, &TensorBase_Type)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a Tensor, got %s", what, o ? Py_TYPE(o)->tp_name : "NULL");
        return NULL;
    }
    oar_tensor *t = ((TensorObject *)o)->t;
    if (!t) {
        PyErr_Format(PyExc_RuntimeError, "%s: the Tensor holds no data (it was made with Tensor.__new__ and "
                                         "never initialized); make tensors with oar.tensor or oar.empty", what);
        return NULL;
    }
    return t;
}

#define SELF_T(what)                                \
    oar_tensor *t = oarpy_tensor(self, what);       \
    if (!t) return NULL

/* ---- lifetime: hooks and instance attributes may hold cycles back to this object */
static int tensor_traverse(TensorObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->hooks);
    Py_VISIT(self->dict);
    return 0;
}

static void remove_hooks(TensorObject *self) {
    if (!self->hooks || !self->t) return;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(self->hooks, &pos, &key, &value)) oar_remove_hook(self->t, (int)PyLong_AsLong(key));
    oar_clear_error();
}

static int tensor_clear(TensorObject *self) {
    remove_hooks(self);
    Py_CLEAR(self->hooks);
    Py_CLEAR(self->dict);
    return 0;
}

static void tensor_dealloc(TensorObject *self) {
    PyObject_GC_UnTrack(self);
    if (self->weakrefs) PyObject_ClearWeakRefs((PyObject *)self);
    tensor_clear(self);
    oar_release(self->t);
    self->t = NULL;
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* ---- properties */
static PyObject *get_shape(PyObject *self, void *c) {
    SELF_T("Tensor.shape");
    int nd = oar_ndim(t);
    if (nd < 0) return oarpy_raise();
    const int64_t *s = oar_shape(t);
    PyObject *tup = PyTuple_New(nd);
    for (int i = 0; tup && i < nd; i++) PyTuple_SET_ITEM(tup, i, PyLong_FromLongLong(s[i]));
    return tup;
}

static PyObject *get_strides(PyObject *self, void *c) {
    SELF_T("Tensor.stride");
    int nd = oar_ndim(t);
    if (nd < 0) return oarpy_raise();
    const int64_t *s = oar_strides(t);
    PyObject *tup = PyTuple_New(nd);
    for (int i = 0; tup && i < nd; i++) PyTuple_SET_ITEM(tup, i, PyLong_FromLongLong(s[i]));
    return tup;
}

static PyObject *get_dtype(PyObject *self, void *c) {
    SELF_T("Tensor.dtype");
    return PyLong_FromLong((long)oar_dtype_of(t));
}

static PyObject *get_device(PyObject *self, void *c) {
    SELF_T("Tensor.device");
    return PyLong_FromLong((long)oar_device_of(t));
}

static PyObject *get_ndim(PyObject *self, void *c) {
    SELF_T("Tensor.ndim");
    return PyLong_FromLong(oar_ndim(t));
}

static PyObject *get_requires_grad(PyObject *self, void *c) {
    SELF_T("Tensor.requires_grad");
    return PyBool_FromLong(oar_requires_grad(t));
}

static int set_requires_grad(PyObject *self, PyObject *v, void *c) {
    oar_tensor *t = oarpy_tensor(self, "Tensor.requires_grad");
    if (!t) return -1;
    if (!v) {
        PyErr_SetString(PyExc_TypeError, "Tensor.requires_grad cannot be deleted");
        return -1;
    }
    int b = PyObject_IsTrue(v);
    if (b < 0) return -1;
    if (!b && !oar_is_leaf(t)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "you can only change requires_grad flags of leaf variables. If you want to use a computed "
                        "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach().");
        return -1;
    }
    if (!oar_is_leaf(t)) return 0; /* already requires grad */
    return oarpy_check(oar_set_requires_grad(t, b));
}

static PyObject *get_is_leaf(PyObject *self, void *c) {
    SELF_T("Tensor.is_leaf");
    return PyBool_FromLong(oar_is_leaf(t));
}

static PyObject *get_grad(PyObject *self, void *c) {
    SELF_T("Tensor.grad");
    oar_clear_error(); /* NULL means "no gradient yet" unless this call sets an error */
    oar_tensor *g = oar_grad_get(t);
    if (!g) {
        if (oar_last_status() != OAR_OK && oar_last_error()[0]) return oarpy_raise();
        Py_RETURN_NONE;
    }
    return oarpy_wrap(oar_retain(g));
}

static int set_grad(PyObject *self, PyObject *v, void *c) {
    oar_tensor *t = oarpy_tensor(self, "Tensor.grad");
    if (!t) return -1;
    if (!v || v == Py_None) {
        oar_zero_grad(t);
        return 0;
    }
    oar_tensor *g = oarpy_tensor(v, "Tensor.grad (the assigned value)");
    if (!g) return -1;
    return oarpy_check(oar_grad_set(t, g));
}

static PyObject *get_dict(PyObject *self, void *c) {
    TensorObject *o = (TensorObject *)self;
    if (!o->dict && !(o->dict = PyDict_New())) return NULL;
    Py_INCREF(o->dict);
    return o->dict;
}

static PyGetSetDef tensor_getset[] = {
    {"shape", get_shape, NULL, "The sizes, a tuple.", NULL},
    {"_strides", get_strides, NULL, "Strides in elements.", NULL},
    {"_dtype", get_dtype, NULL, "oar dtype code.", NULL},
    {"_device", get_device, NULL, "oar device code.", NULL},
    {"ndim", get_ndim, NULL, "Number of dimensions.", NULL},
    {"requires_grad", get_requires_grad, set_requires_grad, "Whether gradients are computed for it.", NULL},
    {"is_leaf", get_is_leaf, NULL, "Whether it was made by the user rather than by an op.", NULL},
    {"_grad", get_grad, set_grad, "The accumulated gradient (leaves).", NULL},
    {"__dict__", get_dict, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* ---- methods */
static PyObject *m_numel(PyObject *self, PyObject *u) {
    SELF_T("Tensor.numel");
    return PyLong_FromLongLong(oar_numel(t));
}

static PyObject *m_is_contiguous(PyObject *self, PyObject *u) {
    SELF_T("Tensor.is_contiguous");
    return PyBool_FromLong(oar_is_contiguous(t));
}

static PyObject *m_data_ptr(PyObject *self, PyObject *u) {
    SELF_T("Tensor.data_ptr");
    void *p = oar_device_ptr(t);
    if (!p && oar_numel(t) > 0) return oarpy_raise();
    return PyLong_FromVoidPtr(p);
}

/* item(): Python int for integer and bool tensors (exact for i64), float otherwise. */
static PyObject *m_item(PyObject *self, PyObject *u) {
    SELF_T("Tensor.item");
    if (oar_numel(t) != 1) {
        PyErr_Format(PyExc_RuntimeError, "a Tensor with %lld elements cannot be converted to Scalar",
                     (long long)oar_numel(t));
        return NULL;
    }
    oar_dtype dt = oar_dtype_of(t);
    if (dt == OAR_BOOL || !oar_dtype_is_float(dt)) {
        int64_t v;
        if (oarpy_check(oar_copy_to_buffer(t, &v, sizeof v, OAR_I64))) return NULL;
        return dt == OAR_BOOL ? PyBool_FromLong(v != 0)
               : dt == OAR_U64 ? PyLong_FromUnsignedLongLong((uint64_t)v) /* the i64 copy holds the bits */
                               : PyLong_FromLongLong(v);
    }
    double v;
    if (oarpy_check(oar_item(t, &v))) return NULL;
    return PyFloat_FromDouble(v);
}

/* _flat_list(): the elements in row-major order as Python numbers. */
static PyObject *m_flat_list(PyObject *self, PyObject *u) {
    SELF_T("Tensor.tolist");
    int64_t n = oar_numel(t);
    oar_dtype dt = oar_dtype_of(t);
    bool is_float = oar_dtype_is_float(dt);
    void *buf = PyMem_Malloc((size_t)(n ? n : 1) * 8);
    if (!buf) return PyErr_NoMemory();
    if (oar_copy_to_buffer(t, buf, (size_t)n * 8, is_float ? OAR_F64 : OAR_I64) != OAR_OK) {
        PyMem_Free(buf);
        return oarpy_raise();
    }
    PyObject *list = PyList_New(n);
    for (int64_t i = 0; list && i < n; i++) {
        PyObject *v = is_float ? PyFloat_FromDouble(((double *)buf)[i])
                      : dt == OAR_BOOL ? PyBool_FromLong(((int64_t *)buf)[i] != 0)
                      : dt == OAR_U64  ? PyLong_FromUnsignedLongLong(((uint64_t *)buf)[i])
                                       : PyLong_FromLongLong(((int64_t *)buf)[i]);
        PyList_SET_ITEM(list, i, v);
    }
    PyMem_Free(buf);
    return list;
}

static PyObject *m_format(PyObject *self, PyObject *u) {
    SELF_T("Tensor.__repr__");
    int n = oar_format(t, NULL, 0);
    if (n < 0) return oarpy_raise();
    char *buf = PyMem_Malloc((size_t)n + 1);
    if (!buf) return PyErr_NoMemory();
    oar_format(t, buf, (size_t)n + 1);
    PyObject *s = PyUnicode_FromString(buf);
    PyMem_Free(buf);
    return s;
}

static PyObject *m_detach(PyObject *self, PyObject *u) {
    SELF_T("Tensor.detach");
    return oarpy_wrap(oar_detach(t));
}

/* backward(gradient=None, retain_graph=False) */
static PyObject *m_backward(PyObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"gradient", "retain_graph", "create_graph", NULL};
    PyObject *grad = Py_None, *retain = Py_None;
    int create = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOp", names, &grad, &retain, &create)) return NULL;
    SELF_T("Tensor.backward");
    oar_tensor *g = NULL;
    if (grad != Py_None && !(g = oarpy_tensor(grad, "Tensor.backward(gradient)"))) return NULL;
    if (create) {
        PyErr_SetString(PyExc_NotImplementedError,
                        "Tensor.backward: create_graph=True is not offered; use oar.autograd.grad(..., create_graph=True)");
        return NULL;
    }
    if (!g && oar_numel(t) != 1) {
        PyErr_SetString(PyExc_RuntimeError, "grad can be implicitly created only for scalar outputs");
        return NULL;
    }
    if (!oar_requires_grad(t)) {
        PyErr_SetString(PyExc_RuntimeError, "element 0 of tensors does not require grad and does not have a grad_fn");
        return NULL;
    }
    int r = retain == Py_None ? 0 : PyObject_IsTrue(retain);
    if (r < 0) return NULL;
    oar_status st = oar_backward(t, g, r);
    if (PyErr_Occurred()) return NULL; /* a hook raised */
    if (oarpy_check(st)) return NULL;
    Py_RETURN_NONE;
}

/* Gradient hooks: the callable gets the gradient and may return a replacement. */
static oar_tensor *hook_trampoline(oar_tensor *grad, void *user) {
    PyGILState_STATE gil = PyGILState_Ensure();
    oar_tensor *res = NULL;
    if (!PyErr_Occurred()) { /* after a failed hook, the rest are skipped and backward reports it */
        PyObject *g = oarpy_wrap(oar_retain(grad));
        PyObject *r = g ? PyObject_CallOneArg((PyObject *)user, g) : NULL;
        Py_XDECREF(g);
        if (r && r != Py_None) {
            if (PyObject_TypeCheck(r, &TensorBase_Type) && ((TensorObject *)r)->t)
                res = oar_retain(((TensorObject *)r)->t);
            else
                PyErr_Format(PyExc_TypeError, "hook: expected the hook to return a Tensor or None, got %s",
                             Py_TYPE(r)->tp_name);
        }
        Py_XDECREF(r);
    }
    PyGILState_Release(gil);
    return res;
}

static PyObject *m_register_hook(PyObject *self, PyObject *fn) {
    SELF_T("Tensor.register_hook");
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "register_hook: expected a callable, got %s", Py_TYPE(fn)->tp_name);
        return NULL;
    }
    if (!oar_requires_grad(t)) {
        PyErr_SetString(PyExc_RuntimeError, "cannot register a hook on a tensor that doesn't require gradient");
        return NULL;
    }
    TensorObject *o = (TensorObject *)self;
    if (!o->hooks && !(o->hooks = PyDict_New())) return NULL;
    int h = oar_register_hook(t, hook_trampoline, fn);
    if (h < 0) return oarpy_raise();
    PyObject *key = PyLong_FromLong(h);
    if (!key || PyDict_SetItem(o->hooks, key, fn) < 0) {
        Py_XDECREF(key);
        oar_remove_hook(t, h);
        return NULL;
    }
    return key;
}

static PyObject *m_remove_hook(PyObject *self, PyObject *key) {
    SELF_T("RemovableHandle.remove");
    TensorObject *o = (TensorObject *)self;
    if (!o->hooks || !PyDict_GetItemWithError(o->hooks, key)) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE; /* removed already, as torch allows */
    }
    if (oarpy_check(oar_remove_hook(t, (int)PyLong_AsLong(key)))) return NULL;
    if (PyDict_DelItem(o->hooks, key) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *m_alias(PyObject *self, PyObject *cls) {
    SELF_T("Tensor._alias");
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &TensorBase_Type)) {
        PyErr_SetString(PyExc_TypeError, "_alias: expected a Tensor class");
        return NULL;
    }
    return oarpy_wrap_as((PyTypeObject *)cls, oar_retain(t));
}

/* _set_(other): this object now holds other's tensor (Tensor.data = ..., in-place results). */
static PyObject *m_set(PyObject *self, PyObject *other) {
    oar_tensor *src = oarpy_tensor(other, "Tensor.set_");
    if (!src) return NULL;
    TensorObject *o = (TensorObject *)self;
    remove_hooks(o);
    Py_CLEAR(o->hooks);
    oar_tensor *old = o->t;
    o->t = oar_retain(src);
    oar_release(old);
    Py_RETURN_NONE;
}

/* _set_storage_(src): this object's tensor now reads and writes src's memory (same shape);
 * unlike _set_, the tensor keeps its identity, so C holders of it (optimizers, data parallel)
 * follow (ZeRO's parameters_as_bucket_view). */
static PyObject *m_set_storage(PyObject *self, PyObject *other) {
    SELF_T("Tensor._set_storage_");
    oar_tensor *src = oarpy_tensor(other, "Tensor._set_storage_(src)");
    if (!src || oarpy_check(oar_set_storage_(t, src))) return NULL;
    Py_RETURN_NONE;
}

static PyObject *m_copy_(PyObject *self, PyObject *src) {
    SELF_T("Tensor.copy_");
    oar_tensor *s = oarpy_tensor(src, "Tensor.copy_(src)");
    if (!s || oarpy_check(oar_copy_(t, s))) return NULL;
    Py_INCREF(self);
    return self;
}

static PyObject *m_fill_(PyObject *self, PyObject *v) {
    SELF_T("Tensor.fill_");
    double d = PyFloat_AsDouble(v);
    if (d == -1.0 && PyErr_Occurred()) return NULL;
    if (oarpy_check(oar_fill_(t, d))) return NULL;
    Py_INCREF(self);
    return self;
}

static PyMethodDef tensor_methods[] = {
    {"numel", m_numel, METH_NOARGS, "Number of elements."},
    {"is_contiguous", m_is_contiguous, METH_NOARGS, "Whether the elements are dense in row-major order."},
    {"data_ptr", m_data_ptr, METH_NOARGS, "Address of the first element."},
    {"item", m_item, METH_NOARGS, "The value of a one-element tensor."},
    {"_flat_list", m_flat_list, METH_NOARGS, NULL},
    {"_format", m_format, METH_NOARGS, NULL},
    {"detach", m_detach, METH_NOARGS, "A view outside autograd."},
    {"backward", (PyCFunction)(void (*)(void))m_backward, METH_VARARGS | METH_KEYWORDS, "Backpropagates."},
    {"_register_hook", m_register_hook, METH_O, NULL},
    {"_remove_hook", m_remove_hook, METH_O, NULL},
    {"_alias", m_alias, METH_O, NULL},
    {"_set_", m_set, METH_O, NULL},
    {"_set_storage_", m_set_storage, METH_O, NULL},
    {"copy_", m_copy_, METH_O, "Copies src into self (broadcasting, casting)."},
    {"fill_", m_fill_, METH_O, "Fills self with a value."},
    {"__dlpack__", (PyCFunction)(void (*)(void))oarpy_dlpack, METH_VARARGS | METH_KEYWORDS, "DLPack capsule."},
    {"__dlpack_device__", oarpy_dlpack_device, METH_NOARGS, "(device type, id)."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject TensorBase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "oar._C.TensorBase",
    .tp_basicsize = sizeof(TensorObject),
    .tp_dealloc = (destructor)tensor_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)tensor_traverse,
    .tp_clear = (inquiry)tensor_clear,
    .tp_methods = tensor_methods,
    .tp_getset = tensor_getset,
    .tp_new = PyType_GenericNew,
    .tp_dictoffset = offsetof(TensorObject, dict),
    .tp_weaklistoffset = offsetof(TensorObject, weakrefs),
    .tp_as_buffer = &oarpy_buffer_procs,
};

static PyObject *set_tensor_class(PyObject *m, PyObject *cls) {
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &TensorBase_Type)) {
        PyErr_SetString(PyExc_TypeError, "_set_tensor_class: expected a subclass of TensorBase");
        return NULL;
    }
    Py_INCREF(cls);
    Py_XSETREF(oarpy_tensor_class, cls);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"_set_tensor_class", set_tensor_class, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

int oarpy_tensor_init(PyObject *m) {
    if (PyType_Ready(&TensorBase_Type) < 0) return -1;
    Py_INCREF(&TensorBase_Type);
    if (PyModule_AddObject(m, "TensorBase", (PyObject *)&TensorBase_Type) < 0) return -1;
    return PyModule_AddFunctions(m, module_methods);
}
