/* oar's status codes as the Python exceptions PyTorch raises for the same misuse, carrying
 * oar's message (it names the op, what was expected and what was received). */
#include "common.h"

#include <string.h>

static PyObject *exception_for(oar_status st, const char *msg) {
    switch (st) {
    case OAR_ERR_INVALID_ARG:
        /* torch: tensors on two devices are a RuntimeError ("Expected all tensors to be on the same
         * device"); "Dimension out of range" and out-of-range indices are IndexError */
        if (strstr(msg, "on one device")) return PyExc_RuntimeError;
        if (strstr(msg, "expected dim in") || strstr(msg, "expected dims in") || strstr(msg, "out of range") ||
            strstr(msg, "index"))
            return PyExc_IndexError;
        return PyExc_ValueError;
    case OAR_ERR_OOM: return PyExc_MemoryError;
    case OAR_ERR_IO: return PyExc_OSError;
    case OAR_ERR_FORMAT: return PyExc_ValueError;
    case OAR_ERR_DTYPE: return PyExc_TypeError;
    default: return PyExc_RuntimeError; /* SHAPE, STATE, UNSUPPORTED, NUMERIC, INTERNAL */
    }
}

PyObject *oarpy_raise(void) {
    if (PyErr_Occurred()) return NULL; /* a Python error (a hook that raised) comes first */
    oar_status st = oar_last_status();
    const char *msg = oar_last_error();
    if (st == OAR_OK || !msg[0]) {
        PyErr_SetString(PyExc_RuntimeError, "oar: a call failed without a message (a bug in oar; please report it)");
        return NULL;
    }
    PyErr_SetString(exception_for(st, msg), msg);
    oar_clear_error();
    return NULL;
}

int oarpy_check(oar_status st) {
    if (st == OAR_OK) return 0;
    oarpy_raise();
    return -1;
}

/* _C.status_exception(status, message): what an oar status becomes (tested per status). */
static PyObject *status_exception(PyObject *self, PyObject *args) {
    int st;
    const char *msg;
    if (!PyArg_ParseTuple(args, "is", &st, &msg)) return NULL;
    PyObject *e = exception_for((oar_status)st, msg);
    Py_INCREF(e);
    return e;
}

static PyMethodDef methods[] = {
    {"status_exception", status_exception, METH_VARARGS, "The exception class an oar status maps to."},
    {NULL, NULL, 0, NULL},
};

int oarpy_errors_init(PyObject *m) { return PyModule_AddFunctions(m, methods); }
