/* oar.autograd.Function's link to the core: custom_function(y, output, inputs, record) records y
 * as output `output` of a custom function node (oar_custom_function); its backward calls
 * record._backward(output, grad_output), which returns one gradient (Tensor or None) per input.
 * Each node holds a reference on record, dropped when the core releases the node. */
#include "common.h"

static oar_status backward_trampoline(void *user, int output, oar_tensor *gout, oar_tensor **gin, int n) {
    PyGILState_STATE gil = PyGILState_Ensure();
    void *scopes = oar_scope_suspend(); /* Python objects own what the backward makes */
    oar_status st = OAR_OK;
    PyObject *g = oarpy_wrap(oar_retain(gout));
    PyObject *r = g ? PyObject_CallMethod((PyObject *)user, "_backward", "iO", output, g) : NULL;
    Py_XDECREF(g);
    PyObject *seq = r ? PySequence_Fast(r, "Function.backward: expected a sequence of gradients") : NULL;
    if (seq && PySequence_Fast_GET_SIZE(seq) != n)
        PyErr_Format(PyExc_RuntimeError, "function backward returned %zd gradients for %d tensor inputs",
                     PySequence_Fast_GET_SIZE(seq), n);
    for (int i = 0; seq && !PyErr_Occurred() && i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        if (o == Py_None) continue;
        oar_tensor *t = oarpy_tensor(o, "function backward's gradient");
        if (t) gin[i] = oar_retain(t);
    }
    Py_XDECREF(seq);
    Py_XDECREF(r);
    if (PyErr_Occurred()) { /* Tensor.backward raises it; oar's status only ends the backward */
        for (int i = 0; i < n; i++)
            if (gin[i]) oar_release(gin[i]), gin[i] = NULL;
        st = oar_set_error(OAR_ERR_INVALID_ARG, "a custom function's backward raised a Python exception");
    }
    oar_scope_resume(scopes);
    PyGILState_Release(gil);
    return st;
}

static void release_record(void *user) {
    if (!Py_IsInitialized()) return; /* the interpreter is gone: nothing left to release */
    PyGILState_STATE gil = PyGILState_Ensure();
    Py_DECREF((PyObject *)user);
    PyGILState_Release(gil);
}

static PyObject *custom_function(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *y_obj, *inputs, *record;
    int output;
    if (!PyArg_ParseTuple(args, "OiO!O", &y_obj, &output, &PyTuple_Type, &inputs, &record)) return NULL;
    oar_tensor *y = oarpy_tensor(y_obj, "custom_function(y)");
    if (!y) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(inputs);
    if (n > 62) {
        PyErr_Format(PyExc_ValueError, "Function.apply: expected at most 62 tensor arguments, got %zd", n);
        return NULL;
    }
    oar_tensor *in[62];
    for (Py_ssize_t i = 0; i < n; i++)
        if (!(in[i] = oarpy_tensor(PyTuple_GET_ITEM(inputs, i), "custom_function(inputs)"))) return NULL;
    Py_INCREF(record); /* released by release_record, whether or not a node was recorded */
    return oarpy_wrap(oar_custom_function(y, output, in, (int)n, backward_trampoline, release_record, record));
}

static PyMethodDef methods[] = {
    {"custom_function", custom_function, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int oarpy_custom_fn_init(PyObject *m) { return PyModule_AddFunctions(m, methods); }
