/* _C.rnn_layer / _C.rnn_qlayer: one LSTM or GRU layer over a sequence through the C core's layer
 * (oar_rnn_layer_run; oar_rnn_qlayer_run for the dynamically quantized one), so oar.nn.LSTM/GRU
 * and their quantize_dynamic forms compute what the C modules compute, at their speed. */
#include "common.h"

/* (y, h_n, c_n or None) as a Python tuple; releases what it cannot wrap */
static PyObject *outputs(oar_tensor *y, oar_tensor *h, oar_tensor *c) {
    PyObject *py = oarpy_wrap(y), *ph = py ? oarpy_wrap(h) : (oar_release(h), NULL);
    PyObject *pc = !ph ? (c ? (oar_release(c), NULL) : NULL) : c ? oarpy_wrap(c) : Py_NewRef(Py_None);
    if (!pc) {
        Py_XDECREF(py);
        Py_XDECREF(ph);
        return NULL;
    }
    return Py_BuildValue("(NNN)", py, ph, pc);
}

/* the n tensors of o (those from `optional` on may be None) */
static bool tensors(PyObject *const *o, int n, int optional, const char *const *what, oar_tensor **t) {
    for (int i = 0; i < n; i++)
        if (!(i >= optional && o[i] == Py_None) && !(t[i] = oarpy_tensor(o[i], what[i]))) return false;
    return true;
}

/* rnn_layer(lstm, x, w_ih, w_hh, b_ih, b_hh, h0, c0) -> (y, h_n, c_n or None); h0/c0 may be None */
static PyObject *rnn_layer(PyObject *m, PyObject *args) {
    int lstm;
    PyObject *o[7];
    if (!PyArg_ParseTuple(args, "pOOOOOOO:rnn_layer", &lstm, &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6]))
        return NULL;
    static const char *what[7] = {"rnn_layer: x", "rnn_layer: w_ih", "rnn_layer: w_hh", "rnn_layer: b_ih",
                                  "rnn_layer: b_hh", "rnn_layer: h0", "rnn_layer: c0"};
    oar_tensor *t[7] = {NULL};
    if (!tensors(o, 7, 5, what, t)) return NULL;
    oar_tensor *y = NULL, *h = NULL, *c = NULL;
    if (oarpy_check(oar_rnn_layer_run(lstm ? OAR_RNN_CELL_LSTM : OAR_RNN_CELL_GRU, t[0], t[1], t[2], t[3], t[4], t[5],
                                      t[6], &y, &h, lstm ? &c : NULL)))
        return NULL;
    return outputs(y, h, c);
}

/* rnn_qlayer(lstm, x, w_ih, w_ih_scale, w_hh, w_hh_scale, b_ih, b_hh, h0, c0) -> (y, h_n, c_n or None):
 * the dynamically quantized layer (i8 weights and their f32 scales) */
static PyObject *rnn_qlayer(PyObject *m, PyObject *args) {
    int lstm;
    PyObject *o[9];
    if (!PyArg_ParseTuple(args, "pOOOOOOOOO:rnn_qlayer", &lstm, &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7],
                          &o[8]))
        return NULL;
    static const char *what[9] = {"rnn_qlayer: x", "rnn_qlayer: w_ih", "rnn_qlayer: w_ih_scale", "rnn_qlayer: w_hh",
                                  "rnn_qlayer: w_hh_scale", "rnn_qlayer: b_ih", "rnn_qlayer: b_hh", "rnn_qlayer: h0",
                                  "rnn_qlayer: c0"};
    oar_tensor *t[9] = {NULL};
    if (!tensors(o, 9, 7, what, t)) return NULL;
    oar_tensor *y = NULL, *h = NULL, *c = NULL;
    if (oarpy_check(oar_rnn_qlayer_run(lstm ? OAR_RNN_CELL_LSTM : OAR_RNN_CELL_GRU, t[0], t[1], t[2], t[3], t[4], t[5],
                                       t[6], t[7], t[8], &y, &h, lstm ? &c : NULL)))
        return NULL;
    return outputs(y, h, c);
}

static PyMethodDef methods[] = {
    {"rnn_layer", rnn_layer, METH_VARARGS, "One LSTM/GRU layer over [T, N, I] (the C core's nn.LSTM/GRU layer)."},
    {"rnn_qlayer", rnn_qlayer, METH_VARARGS,
     "One dynamically quantized LSTM/GRU layer over [T, N, I] (i8 weights with f32 scales; inference)."},
    {NULL, NULL, 0, NULL},
};

int oarpy_rnn_init(PyObject *m) { return PyModule_AddFunctions(m, methods); }
