/* _C.AmpMasters: O2's f32 master weights for oar.amp.decorate (oar_amp_decorate_params). The
 * parameters are converted to f16/bf16 in place (the Python objects stay the model's); the
 * masters are the tensors the optimizer's C optimizer updates. */
#include "common.h"

typedef struct {
    PyObject_HEAD
    oar_amp_masters *w;
} MastersObject;

#define CHECK_W                                                                  \
    if (!self->w) {                                                              \
        PyErr_SetString(PyExc_RuntimeError, "AmpMasters: not initialized");     \
        return NULL;                                                             \
    }

/* AmpMasters(params, names, keep, dtype): params a list of tensors, names a list of str, keep a
 * list of bools (the parameter stays f32 and is its own master), dtype the low dtype's code. */
static int masters_init(MastersObject *self, PyObject *args, PyObject *kw) {
    PyObject *params, *names, *keep;
    int dtype;
    if (!PyArg_ParseTuple(args, "O!O!O!i", &PyList_Type, &params, &PyList_Type, &names, &PyList_Type, &keep, &dtype))
        return -1;
    if (self->w) {
        PyErr_SetString(PyExc_RuntimeError, "AmpMasters: already initialized");
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(params);
    if (PyList_GET_SIZE(names) != n || PyList_GET_SIZE(keep) != n) {
        PyErr_Format(PyExc_ValueError, "AmpMasters: expected as many names and keep flags as parameters (%zd), got "
                     "%zd and %zd", n, PyList_GET_SIZE(names), PyList_GET_SIZE(keep));
        return -1;
    }
    oar_tensor **ps = PyMem_Calloc((size_t)(n ? n : 1), sizeof *ps);
    const char **nm = PyMem_Calloc((size_t)(n ? n : 1), sizeof *nm);
    bool *kp = PyMem_Calloc((size_t)(n ? n : 1), sizeof *kp);
    int rc = -1;
    if (!ps || !nm || !kp) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int k = PyObject_IsTrue(PyList_GET_ITEM(keep, i));
        if (!(ps[i] = oarpy_tensor(PyList_GET_ITEM(params, i), "AmpMasters parameter")) || k < 0 ||
            !(nm[i] = PyUnicode_AsUTF8(PyList_GET_ITEM(names, i))))
            goto done;
        kp[i] = k;
    }
    self->w = oar_amp_decorate_params(ps, nm, kp, (int)n, (oar_dtype)dtype);
    if (!self->w)
        oarpy_raise();
    else
        rc = 0;
done:
    PyMem_Free(ps);
    PyMem_Free(nm);
    PyMem_Free(kp);
    return rc;
}

static void masters_dealloc(MastersObject *self) {
    oar_amp_masters_free(self->w);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* masters() -> [(name, master)]: f32; a kept parameter is its own master */
static PyObject *masters_list(MastersObject *self, PyObject *u) {
    CHECK_W;
    int n = oar_amp_masters_count(self->w);
    PyObject *l = PyList_New(n);
    for (int i = 0; l && i < n; i++) {
        const char *name;
        oar_tensor *t = oar_amp_master(self->w, i, &name);
        PyObject *pair = t ? Py_BuildValue("(sN)", name, oarpy_wrap(oar_retain(t))) : oarpy_raise();
        if (!pair) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, i, pair);
    }
    return l;
}

static PyObject *sync_grads(MastersObject *self, PyObject *u) {
    CHECK_W;
    if (oarpy_check(oar_amp_masters_sync_grads(self->w))) return NULL;
    Py_RETURN_NONE;
}

static PyObject *sync_params(MastersObject *self, PyObject *u) {
    CHECK_W;
    if (oarpy_check(oar_amp_masters_sync_params(self->w))) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef masters_methods[] = {
    {"masters", (PyCFunction)masters_list, METH_NOARGS, "[(name, f32 master)]"},
    {"sync_grads", (PyCFunction)sync_grads, METH_NOARGS, "moves the low gradients, widened, to the masters"},
    {"sync_params", (PyCFunction)sync_params, METH_NOARGS, "rounds the masters into the low parameters"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject Masters_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "oar._C.AmpMasters",
    .tp_basicsize = sizeof(MastersObject),
    .tp_dealloc = (destructor)masters_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_methods = masters_methods,
    .tp_init = (initproc)masters_init,
    .tp_new = PyType_GenericNew,
};

int oarpy_amp_masters_init(PyObject *m) {
    if (PyType_Ready(&Masters_Type) < 0) return -1;
    Py_INCREF(&Masters_Type);
    if (PyModule_AddObject(m, "AmpMasters", (PyObject *)&Masters_Type) < 0) {
        Py_DECREF(&Masters_Type);
        return -1;
    }
    return 0;
}
