/* _C.rnn_layer: one LSTM or GRU layer over a sequence through the C core's layer
 * (oar_rnn_layer_run), so oar.nn.LSTM/GRU compute what the C modules compute, at their speed. */
#include "common.h"

/* rnn_layer(lstm, x, w_ih, w_hh, b_ih, b_hh, h0, c0) -> (y, h_n, c_n or None); h0/c0 may be None */
static PyObject *rnn_layer(PyObject *m, PyObject *args) {
    int lstm;
    PyObject *o[7];
    if (!PyArg_ParseTuple(args, "pOOOOOOO:rnn_layer", &lstm, &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6]))
        return NULL;
    static const char *what[7] = {"rnn_layer: x", "rnn_layer: w_ih", "rnn_layer: w_hh", "rnn_layer: b_ih",
                                  "rnn_layer: b_hh", "rnn_layer: h0", "rnn_layer: c0"};
    oar_tensor *t[7] = {NULL};
    for (int i = 0; i < 7; i++)
        if (!(i >= 5 && o[i] == Py_None) && !(t[i] = oarpy_tensor(o[i], what[i]))) return NULL;
    oar_tensor *y = NULL, *h = NULL, *c = NULL;
    if (oarpy_check(oar_rnn_layer_run(lstm ? OAR_RNN_CELL_LSTM : OAR_RNN_CELL_GRU, t[0], t[1], t[2], t[3], t[4], t[5],
                                      t[6], &y, &h, lstm ? &c : NULL)))
        return NULL;
    PyObject *py = oarpy_wrap(y), *ph = py ? oarpy_wrap(h) : (oar_release(h), NULL);
    PyObject *pc = !ph ? (oar_release(c), NULL) : c ? oarpy_wrap(c) : Py_NewRef(Py_None);
    if (!pc) {
        Py_XDECREF(py);
        Py_XDECREF(ph);
        return NULL;
    }
    return Py_BuildValue("(NNN)", py, ph, pc);
}

static PyMethodDef methods[] = {
    {"rnn_layer", rnn_layer, METH_VARARGS, "One LSTM/GRU layer over [T, N, I] (the C core's nn.LSTM/GRU layer)."},
    {NULL, NULL, 0, NULL},
};

int oarpy_rnn_init(PyObject *m) { return PyModule_AddFunctions(m, methods); }
