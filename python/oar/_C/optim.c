/* _C.Optimizer: the C core's optimizers (one fused update op per parameter) for
 * oar.optim's Python classes, which hold param_groups as torch does and mirror each group's
 * hyper-parameters into the C groups before every step. */
#include "common.h"

#include <string.h>

typedef struct {
    PyObject_HEAD
    oar_optimizer *o;
    PyObject *params; /* list of the parameter objects: the C optimizer borrows their tensors */
} OptimObject;

static int opts_from_dict(PyObject *d, oar_optim_opts *o) {
    if (!d || d == Py_None) return 0;
    PyObject *v;
#define SET_f(name)                                                        \
    if ((v = PyDict_GetItemString(d, #name))) {                            \
        double x = PyFloat_AsDouble(v);                                    \
        if (x == -1.0 && PyErr_Occurred()) return -1;                      \
        o->name = x;                                                       \
    }
#define SET_b(name)                                                        \
    if ((v = PyDict_GetItemString(d, #name))) {                            \
        int x = PyObject_IsTrue(v);                                        \
        if (x < 0) return -1;                                              \
        o->name = x;                                                       \
    }
    SET_f(lr) SET_f(momentum) SET_f(dampening) SET_b(nesterov) SET_f(weight_decay) SET_f(beta1) SET_f(beta2)
    SET_f(eps) SET_b(amsgrad) SET_f(alpha) SET_b(centered) SET_f(lr_decay)
    SET_b(maximize) SET_f(rho) SET_f(momentum_decay) SET_f(lambd) SET_f(t0) SET_f(etaminus) SET_f(etaplus)
    SET_f(step_size_min) SET_f(step_size_max)
    if ((v = PyDict_GetItemString(d, "initial_accumulator_value"))) {
        double x = PyFloat_AsDouble(v);
        if (x == -1.0 && PyErr_Occurred()) return -1;
        o->initial_accumulator = x;
    }
    return 0;
}

static PyObject *opts_to_dict(const oar_optim_opts *o) {
    PyObject *d = Py_BuildValue("{s:d,s:d,s:d,s:O,s:d,s:d,s:d,s:d,s:O,s:d,s:O,s:d,s:d}", "lr", o->lr, "momentum",
                                o->momentum, "dampening", o->dampening, "nesterov", o->nesterov ? Py_True : Py_False,
                                "weight_decay", o->weight_decay, "beta1", o->beta1, "beta2", o->beta2, "eps", o->eps,
                                "amsgrad", o->amsgrad ? Py_True : Py_False, "alpha", o->alpha, "centered",
                                o->centered ? Py_True : Py_False, "lr_decay", o->lr_decay,
                                "initial_accumulator_value", o->initial_accumulator);
    PyObject *more = d ? Py_BuildValue("{s:O,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d}", "maximize",
                                       o->maximize ? Py_True : Py_False, "rho", o->rho, "momentum_decay",
                                       o->momentum_decay, "lambd", o->lambd, "t0", o->t0, "etaminus", o->etaminus,
                                       "etaplus", o->etaplus, "step_size_min", o->step_size_min, "step_size_max",
                                       o->step_size_max)
                       : NULL;
    if (!more || PyDict_Update(d, more) < 0) {
        Py_XDECREF(more);
        Py_XDECREF(d);
        return NULL;
    }
    Py_DECREF(more);
    return d;
}

static int collect(PyObject *params, oar_tensor ***arr, Py_ssize_t *n) {
    *n = PyList_GET_SIZE(params);
    *arr = PyMem_Calloc((size_t)(*n ? *n : 1), sizeof **arr);
    if (!*arr) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < *n; i++)
        if (!((*arr)[i] = oarpy_tensor(PyList_GET_ITEM(params, i), "optimizer parameter"))) return -1;
    return 0;
}

/* Optimizer(params, kind, options) */
static int optim_init(OptimObject *self, PyObject *args, PyObject *kw) {
    PyObject *params, *d;
    int kind;
    if (!PyArg_ParseTuple(args, "OiO", &params, &kind, &d)) return -1;
    if (self->o) {
        PyErr_SetString(PyExc_RuntimeError, "Optimizer: already initialized");
        return -1;
    }
    PyObject *list = PySequence_List(params);
    if (!list) return -1;
    oar_optim_opts o = oar_optim_defaults((oar_optim_kind)kind);
    oar_tensor **arr = NULL;
    Py_ssize_t n;
    if (opts_from_dict(d, &o) < 0 || collect(list, &arr, &n) < 0) {
        PyMem_Free(arr);
        Py_DECREF(list);
        return -1;
    }
    self->o = oar_optimizer_new(arr, (int)n, &o);
    PyMem_Free(arr);
    if (!self->o) {
        Py_DECREF(list);
        oarpy_raise();
        return -1;
    }
    self->params = list;
    return 0;
}

static PyObject *add_group(OptimObject *self, PyObject *args) {
    PyObject *params, *d;
    if (!PyArg_ParseTuple(args, "OO", &params, &d)) return NULL;
    PyObject *list = PySequence_List(params);
    if (!list) return NULL;
    oar_optim_opts o = *oar_optimizer_group_opts(self->o, 0);
    oar_tensor **arr = NULL;
    Py_ssize_t n;
    PyObject *res = NULL;
    if (opts_from_dict(d, &o) < 0 || collect(list, &arr, &n) < 0) goto done;
    int g = oar_optimizer_add_group(self->o, arr, (int)n, &o);
    if (g < 0) {
        oarpy_raise();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyList_Append(self->params, PyList_GET_ITEM(list, i)) < 0) goto done;
    res = PyLong_FromLong(g);
done:
    PyMem_Free(arr);
    Py_DECREF(list);
    return res;
}

#define CHECK_O                                                                    \
    if (!self->o) {                                                                \
        PyErr_SetString(PyExc_RuntimeError, "Optimizer: not initialized");       \
        return NULL;                                                               \
    }

static oar_optim_opts *group(OptimObject *self, PyObject *i) {
    long g = PyLong_AsLong(i);
    if (g == -1 && PyErr_Occurred()) return NULL;
    oar_optim_opts *o = oar_optimizer_group_opts(self->o, (int)g);
    if (!o) oarpy_raise();
    return o;
}

static PyObject *get_group(OptimObject *self, PyObject *i) {
    CHECK_O;
    oar_optim_opts *o = group(self, i);
    return o ? opts_to_dict(o) : NULL;
}

static PyObject *set_group(OptimObject *self, PyObject *args) {
    PyObject *i, *d;
    if (!PyArg_ParseTuple(args, "OO", &i, &d)) return NULL;
    CHECK_O;
    oar_optim_opts *o = group(self, i);
    if (!o) return NULL;
    oar_optim_opts copy = *o;
    if (opts_from_dict(d, &copy) < 0) return NULL;
    *o = copy; /* checked by the next step, as the C API documents */
    Py_RETURN_NONE;
}

static PyObject *step(OptimObject *self, PyObject *u) {
    CHECK_O;
    if (oarpy_check(oar_optimizer_step(self->o))) return NULL;
    Py_RETURN_NONE;
}

static PyObject *zero_grad(OptimObject *self, PyObject *u) {
    CHECK_O;
    oar_optimizer_zero_grad(self->o);
    Py_RETURN_NONE;
}

static PyObject *state(OptimObject *self, PyObject *u) {
    CHECK_O;
    int n = oar_optimizer_num_state(self->o);
    PyObject *d = PyDict_New();
    for (int i = 0; d && i < n; i++) {
        const char *name;
        oar_tensor *t = oar_optimizer_state(self->o, i, &name);
        PyObject *w = t ? oarpy_wrap(oar_retain(t)) : oarpy_raise();
        if (!w || PyDict_SetItemString(d, name, w) < 0) {
            Py_XDECREF(w);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(w);
    }
    return d;
}

static PyObject *load_state(OptimObject *self, PyObject *args) {
    const char *name;
    PyObject *v;
    if (!PyArg_ParseTuple(args, "sO", &name, &v)) return NULL;
    CHECK_O;
    oar_tensor *t = oarpy_tensor(v, "Optimizer.load_state_dict");
    if (!t || oarpy_check(oar_optimizer_load_state(self->o, name, t))) return NULL;
    Py_RETURN_NONE;
}

static PyObject *steps(OptimObject *self, PyObject *u) {
    CHECK_O;
    return PyLong_FromLongLong(oar_optimizer_steps(self->o));
}

static PyObject *set_steps(OptimObject *self, PyObject *arg) {
    CHECK_O;
    long long n = PyLong_AsLongLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (oarpy_check(oar_optimizer_set_steps(self->o, n))) return NULL;
    Py_RETURN_NONE;
}

static int optim_traverse(OptimObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->params);
    return 0;
}

static void optim_dealloc(OptimObject *self) {
    PyObject_GC_UnTrack(self);
    oar_optimizer_free(self->o); /* before the parameters it borrows */
    self->o = NULL;
    Py_CLEAR(self->params);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef optim_methods[] = {
    {"add_group", (PyCFunction)add_group, METH_VARARGS, NULL},
    {"get_group", (PyCFunction)get_group, METH_O, NULL},
    {"set_group", (PyCFunction)set_group, METH_VARARGS, NULL},
    {"step", (PyCFunction)step, METH_NOARGS, NULL},
    {"zero_grad", (PyCFunction)zero_grad, METH_NOARGS, NULL},
    {"state", (PyCFunction)state, METH_NOARGS, NULL},
    {"load_state", (PyCFunction)load_state, METH_VARARGS, NULL},
    {"steps", (PyCFunction)steps, METH_NOARGS, NULL},
    {"set_steps", (PyCFunction)set_steps, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject Optim_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "oar._C.Optimizer",
    .tp_basicsize = sizeof(OptimObject),
    .tp_dealloc = (destructor)optim_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)optim_traverse,
    .tp_methods = optim_methods,
    .tp_init = (initproc)optim_init,
    .tp_new = PyType_GenericNew,
};

oar_optimizer *oarpy_optimizer(PyObject *o, const char *what) {
    if (!PyObject_TypeCheck(o, &Optim_Type)) {
        PyErr_Format(PyExc_TypeError, "%s: expected an oar._C.Optimizer (an oar.optim optimizer's C optimizer), got %.100s",
                     what, Py_TYPE(o)->tp_name);
        return NULL;
    }
    OptimObject *self = (OptimObject *)o;
    if (!self->o) PyErr_Format(PyExc_RuntimeError, "%s: the optimizer is not initialized", what);
    return self->o;
}

int oarpy_optim_init(PyObject *m) {
    if (PyType_Ready(&Optim_Type) < 0) return -1;
    Py_INCREF(&Optim_Type);
    return PyModule_AddObject(m, "Optimizer", (PyObject *)&Optim_Type);
}
