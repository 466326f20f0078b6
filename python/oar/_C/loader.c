/* _C.IdxLoader: the C core's dataset reader and batching loader (shuffle by (seed, epoch),
 * normalization, background workers) for oar.utils.data.IdxLoader, the fast path that feeds
 * training from Python with the same batches `oar train` sees. */
#include "common.h"

typedef struct {
    PyObject_HEAD
    oar_dataset *d;
    oar_loader *l;
} LoaderObject;

/* IdxLoader(images, labels, batch_size, shuffle, drop_last, seed, workers, mean, std), or, with
 * labels None, the windows of a text file as `oar train` cuts them for language models:
 * IdxLoader(path, None, ..., mean=None, std=None, window, random_windows, begin, end). */
static int loader_init(LoaderObject *self, PyObject *args, PyObject *kw) {
    const char *img, *lab;
    long long batch, seed, window = 0;
    int shuffle, drop_last, workers, random_windows = 0;
    double begin = 0, end = 1;
    PyObject *mean, *std;
    if (!PyArg_ParseTuple(args, "szLppLiOO|Lpdd", &img, &lab, &batch, &shuffle, &drop_last, &seed, &workers, &mean,
                          &std, &window, &random_windows, &begin, &end))
        return -1;
    if (!lab && window < 1) {
        PyErr_Format(PyExc_ValueError, "IdxLoader: a text file needs a window of at least 1 token, got %lld", window);
        return -1;
    }
    if (self->d) {
        PyErr_SetString(PyExc_RuntimeError, "IdxLoader: already initialized");
        return -1;
    }
    oar_transform norm = {.kind = OAR_TF_NORMALIZE, .n_channels = 1};
    bool normalize = mean != Py_None;
    if (normalize) {
        norm.mean[0] = PyFloat_AsDouble(mean);
        norm.std[0] = PyFloat_AsDouble(std);
        if (PyErr_Occurred()) return -1;
    }
    if (!(self->d = lab ? oar_dataset_idx(img, lab) : oar_dataset_text_range(img, window, random_windows, begin, end))) {
        oarpy_raise();
        return -1;
    }
    oar_loader_opts lo = {.batch_size = batch, .shuffle = shuffle, .drop_last = drop_last, .seed = (uint64_t)seed,
                          .workers = workers, .transforms = normalize ? &norm : NULL, .n_transforms = normalize};
    if (!(self->l = oar_loader_new(self->d, &lo))) {
        oar_dataset_free(self->d);
        self->d = NULL;
        oarpy_raise();
        return -1;
    }
    return 0;
}

#define CHECK_L                                                                  \
    if (!self->l) {                                                              \
        PyErr_SetString(PyExc_RuntimeError, "IdxLoader: not initialized");      \
        return NULL;                                                             \
    }

static PyObject *start_epoch(LoaderObject *self, PyObject *e) {
    CHECK_L;
    long long epoch = PyLong_AsLongLong(e);
    if (epoch == -1 && PyErr_Occurred()) return NULL;
    if (oarpy_check(oar_loader_start_epoch(self->l, epoch))) return NULL;
    Py_RETURN_NONE;
}

/* next() -> (inputs, targets), or None at the end of the epoch */
static PyObject *next_batch(LoaderObject *self, PyObject *u) {
    CHECK_L;
    oar_tensor *x = NULL, *y = NULL;
    oar_status st = OAR_OK;
    if (!oar_loader_next(self->l, &x, &y, &st)) {
        if (oarpy_check(st)) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *px = oarpy_wrap(x);
    PyObject *py = px ? oarpy_wrap(y) : (oar_release(y), NULL);
    if (!py) {
        Py_XDECREF(px);
        return NULL;
    }
    return Py_BuildValue("(NN)", px, py);
}

static PyObject *num_batches(LoaderObject *self, PyObject *u) {
    CHECK_L;
    return PyLong_FromLongLong(oar_loader_num_batches(self->l));
}

static PyObject *size(LoaderObject *self, PyObject *u) {
    CHECK_L;
    return PyLong_FromLongLong(oar_dataset_size(self->d));
}

static void loader_dealloc(LoaderObject *self) {
    oar_loader_free(self->l); /* before the dataset it borrows */
    oar_dataset_free(self->d);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef loader_methods[] = {
    {"start_epoch", (PyCFunction)start_epoch, METH_O, NULL},
    {"next", (PyCFunction)next_batch, METH_NOARGS, NULL},
    {"num_batches", (PyCFunction)num_batches, METH_NOARGS, NULL},
    {"dataset_size", (PyCFunction)size, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject Loader_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "oar._C.IdxLoader",
    .tp_basicsize = sizeof(LoaderObject),
    .tp_dealloc = (destructor)loader_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_methods = loader_methods,
    .tp_init = (initproc)loader_init,
    .tp_new = PyType_GenericNew,
};

int oarpy_loader_init(PyObject *m) {
    if (PyType_Ready(&Loader_Type) < 0) return -1;
    Py_INCREF(&Loader_Type);
    return PyModule_AddObject(m, "IdxLoader", (PyObject *)&Loader_Type);
}
