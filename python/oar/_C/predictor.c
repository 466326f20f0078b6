/* _C.Predictor: an exported model (path.json + path.safetensors) run by oar_predictor, with no
 * model code. torch.jit.load (python/oar/_jit_files.py) wraps it in a module. */
#include "common.h"
#include "oar/cuda_graphs.h"

typedef struct {
    PyObject_HEAD
    oar_predictor *p;
} PredictorObject;

/* Predictor(path, device): device 0 (CPU) or 1 (CUDA), oar_device's numbers. */
static int predictor_init(PredictorObject *self, PyObject *args, PyObject *kwargs) {
    (void)kwargs;
    const char *path;
    int device = OAR_CPU;
    if (!PyArg_ParseTuple(args, "s|i", &path, &device)) return -1;
    if (device != OAR_CPU && device != OAR_CUDA) {
        PyErr_Format(PyExc_ValueError, "Predictor: expected device 0 (cpu) or 1 (cuda), got %d", device);
        return -1;
    }
    oar_predictor_config cfg = {.model_path = path};
    oar_predictor_free(self->p);
    self->p = device == OAR_CPU ? oar_predictor_create(&cfg) : oar_predictor_create_on(&cfg, (oar_device)device);
    if (!self->p) {
        oarpy_raise();
        return -1;
    }
    return 0;
}

static PyObject *names(PredictorObject *self, bool inputs) {
    if (!self->p) return PyErr_Format(PyExc_RuntimeError, "Predictor: not loaded");
    int n = inputs ? oar_predictor_num_inputs(self->p) : oar_predictor_num_outputs(self->p);
    PyObject *l = PyList_New(n);
    for (int i = 0; l && i < n; i++) {
        const char *s = inputs ? oar_predictor_input_name(self->p, i) : oar_predictor_output_name(self->p, i);
        PyObject *u = PyUnicode_FromString(s ? s : "");
        if (!u) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, i, u);
    }
    return l;
}

static PyObject *predictor_input_names(PredictorObject *self, PyObject *unused) {
    (void)unused;
    return names(self, true);
}

static PyObject *predictor_output_names(PredictorObject *self, PyObject *unused) {
    (void)unused;
    return names(self, false);
}

/* run(inputs): the inputs in the order of input_names(); returns the outputs in the order of
 * output_names() (new tensors, never overwritten by a later run). */
static PyObject *predictor_run(PredictorObject *self, PyObject *arg) {
    if (!self->p) return PyErr_Format(PyExc_RuntimeError, "Predictor: not loaded");
    if (!PyTuple_Check(arg)) return PyErr_Format(PyExc_TypeError, "Predictor.run: expected a tuple of tensors");
    int n_in = oar_predictor_num_inputs(self->p), n_out = oar_predictor_num_outputs(self->p);
    if ((int)PyTuple_GET_SIZE(arg) != n_in)
        return PyErr_Format(PyExc_RuntimeError, "the loaded model expects %d input tensor(s), got %d", n_in,
                            (int)PyTuple_GET_SIZE(arg));
    for (int i = 0; i < n_in; i++) {
        oar_tensor *t = oarpy_tensor(PyTuple_GET_ITEM(arg, i), "loaded model input");
        if (!t || oarpy_check(oar_predictor_set_input(self->p, oar_predictor_input_name(self->p, i), t)) < 0)
            return NULL;
    }
    if (oarpy_check(oar_predictor_run(self->p)) < 0) return NULL;
    PyObject *r = PyTuple_New(n_out);
    for (int k = 0; r && k < n_out; k++) {
        PyObject *o = oarpy_wrap(oar_predictor_get_output(self->p, oar_predictor_output_name(self->p, k)));
        if (!o) {
            Py_CLEAR(r);
            break;
        }
        PyTuple_SET_ITEM(r, k, o);
    }
    return r;
}

/* clone(): a predictor sharing the loaded program and weights, with its own inputs, outputs and
 * executors (oar_predictor_clone), for copies of a loaded module. */
static PyObject *predictor_clone(PredictorObject *self, PyObject *unused) {
    (void)unused;
    if (!self->p) return PyErr_Format(PyExc_RuntimeError, "Predictor: not loaded");
    PredictorObject *c = (PredictorObject *)PyType_GenericNew(Py_TYPE(self), NULL, NULL);
    if (!c) return NULL;
    if (!(c->p = oar_predictor_clone(self->p))) {
        Py_DECREF(c);
        return oarpy_raise();
    }
    return (PyObject *)c;
}

static void predictor_dealloc(PredictorObject *self) {
    oar_predictor_free(self->p);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef predictor_methods[] = {
    {"input_names", (PyCFunction)predictor_input_names, METH_NOARGS, NULL},
    {"output_names", (PyCFunction)predictor_output_names, METH_NOARGS, NULL},
    {"clone", (PyCFunction)predictor_clone, METH_NOARGS, "clone() -> a Predictor sharing the weights"},
    {"run", (PyCFunction)predictor_run, METH_O, "run(inputs) -> outputs, both tuples in the model's order"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject Predictor_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "oar._C.Predictor",
    .tp_basicsize = sizeof(PredictorObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)predictor_init,
    .tp_dealloc = (destructor)predictor_dealloc,
    .tp_methods = predictor_methods,
};

int oarpy_predictor_init(PyObject *m) {
    if (PyType_Ready(&Predictor_Type) < 0) return -1;
    Py_INCREF(&Predictor_Type);
    return PyModule_AddObject(m, "Predictor", (PyObject *)&Predictor_Type);
}
