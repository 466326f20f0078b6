/* Mixed precision for oar.autocast and oar.cuda.amp.GradScaler (docs/amp.md, "From Python"):
 * autocast regions (include/oar/amp.h) and a GradScaler object over oar_grad_scaler_*, stepping
 * the C optimizer that a Python optimizer holds (_C.Optimizer). */
#include "common.h"

#include <stdlib.h>
#include <string.h>

/* A list of op names (None: none) as C strings borrowed from the list's str objects, which the
 * caller keeps alive through *keep until the call that reads them returns. */
static int names_of(PyObject *o, const char *what, const char ***names, int *n, PyObject **keep) {
    *names = NULL;
    *n = 0;
    *keep = NULL;
    if (!o || o == Py_None) return 0;
    PyObject *list = PySequence_List(o);
    if (!list) return -1;
    Py_ssize_t len = PyList_GET_SIZE(list);
    *names = PyMem_Calloc((size_t)(len ? len : 1), sizeof **names);
    if (!*names) {
        Py_DECREF(list);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *s = PyList_GET_ITEM(list, i);
        if (!PyUnicode_Check(s) || !((*names)[i] = PyUnicode_AsUTF8(s))) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "autocast: expected %s to hold op names (str), got %.100s at %zd", what,
                             Py_TYPE(s)->tp_name, i);
            PyMem_Free(*names);
            *names = NULL;
            Py_DECREF(list);
            return -1;
        }
    }
    *n = (int)len;
    *keep = list;
    return 0;
}

/* autocast_begin(enabled, dtype, level=1, cpu_policy=1, custom_low=None, custom_fp32=None,
 * custom_follow=None): opens a region (oar_autocast_begin); cpu_policy 1 is TABLE. */
static PyObject *autocast_begin(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"enabled", "dtype", "level", "cpu_policy", "custom_low", "custom_fp32", "custom_follow",
                             NULL};
    int enabled, dtype, level = OAR_AMP_O1, policy = OAR_AMP_CPU_TABLE;
    PyObject *lists[3] = {NULL, NULL, NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "pi|iiOOO", kwlist, &enabled, &dtype, &level, &policy, &lists[0],
                                     &lists[1], &lists[2]))
        return NULL;
    oar_autocast_opts o = oar_autocast_defaults();
    o.enabled = enabled;
    o.dtype = (oar_dtype)dtype;
    o.level = (oar_amp_level)level;
    o.cpu_policy = (oar_amp_cpu_policy)policy;
    static const char *what[3] = {"custom_low", "custom_fp32", "custom_follow"};
    const char **names[3] = {NULL, NULL, NULL};
    int n[3] = {0, 0, 0};
    PyObject *keep[3] = {NULL, NULL, NULL};
    PyObject *res = NULL;
    for (int k = 0; k < 3; k++)
        if (names_of(lists[k], what[k], &names[k], &n[k], &keep[k]) < 0) goto done;
    o.custom_low = names[0], o.n_custom_low = n[0];
    o.custom_fp32 = names[1], o.n_custom_fp32 = n[1];
    o.custom_follow = names[2], o.n_custom_follow = n[2];
    if (oarpy_check(oar_autocast_begin(&o)) == 0) {
        Py_INCREF(Py_None);
        res = Py_None;
    }
done:
    for (int k = 0; k < 3; k++) {
        PyMem_Free(names[k]);
        Py_XDECREF(keep[k]);
    }
    return res;
}

static PyObject *autocast_end(PyObject *self, PyObject *u) {
    oar_autocast_end();
    Py_RETURN_NONE;
}

static PyObject *autocast_enabled(PyObject *self, PyObject *u) { return PyBool_FromLong(oar_autocast_enabled()); }
static PyObject *autocast_dtype(PyObject *self, PyObject *u) { return PyLong_FromLong(oar_autocast_dtype()); }

/* amp_op_class(op, dtype) -> "low", "fp32", "promote" or "follow" */
static PyObject *amp_op_class(PyObject *self, PyObject *args) {
    const char *op;
    int dtype;
    if (!PyArg_ParseTuple(args, "si", &op, &dtype)) return NULL;
    int c = oar_amp_op_class(op, (oar_dtype)dtype);
    return c < 0 ? oarpy_raise() : PyUnicode_FromString(oar_amp_class_name((oar_amp_class)c));
}

/* ---- GradScaler */

typedef struct {
    PyObject_HEAD
    oar_grad_scaler *s;
    oar_grad_scaler_opts opts;
} ScalerObject;

#define CHECK_S                                                                         \
    if (!self->s) {                                                                     \
        PyErr_SetString(PyExc_RuntimeError, "GradScaler: not initialized");             \
        return NULL;                                                                    \
    }

/* GradScaler(init_scale, growth_factor, backoff_factor, growth_interval, dynamic=True) */
static int scaler_init(ScalerObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"init_scale", "growth_factor", "backoff_factor", "growth_interval", "dynamic", NULL};
    oar_grad_scaler_opts o = oar_grad_scaler_defaults();
    long long interval = o.growth_interval;
    int dynamic = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "dddL|p", kwlist, &o.init_scale, &o.growth_factor, &o.backoff_factor,
                                     &interval, &dynamic))
        return -1;
    o.growth_interval = interval;
    o.dynamic = dynamic;
    oar_grad_scaler *s = oar_grad_scaler_new(&o);
    if (!s) {
        oarpy_raise();
        return -1;
    }
    oar_grad_scaler_free(self->s);
    self->s = s;
    self->opts = o;
    return 0;
}

static void scaler_dealloc(ScalerObject *self) {
    oar_grad_scaler_free(self->s);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *scaler_scale(ScalerObject *self, PyObject *arg) {
    CHECK_S;
    oar_tensor *t = oarpy_tensor(arg, "GradScaler.scale");
    return t ? oarpy_wrap(oar_grad_scaler_scale(self->s, t)) : NULL;
}

static PyObject *scaler_unscale(ScalerObject *self, PyObject *arg) {
    CHECK_S;
    oar_optimizer *o = oarpy_optimizer(arg, "GradScaler.unscale_");
    if (!o || oarpy_check(oar_grad_scaler_unscale(self->s, o))) return NULL;
    Py_RETURN_NONE;
}

/* step(optimizer) -> True when the step was skipped (an inf/nan gradient) */
static PyObject *scaler_step(ScalerObject *self, PyObject *arg) {
    CHECK_S;
    oar_optimizer *o = oarpy_optimizer(arg, "GradScaler.step");
    bool skipped = false;
    if (!o || oarpy_check(oar_grad_scaler_step(self->s, o, &skipped))) return NULL;
    return PyBool_FromLong(skipped);
}

static PyObject *scaler_update(ScalerObject *self, PyObject *u) {
    CHECK_S;
    if (oarpy_check(oar_grad_scaler_update(self->s))) return NULL;
    Py_RETURN_NONE;
}

static PyObject *scaler_get_scale(ScalerObject *self, PyObject *u) {
    CHECK_S;
    return PyFloat_FromDouble(oar_grad_scaler_get_scale(self->s));
}

/* (growth_tracker, skipped in total, skipped in a row) */
static PyObject *scaler_counts(ScalerObject *self, PyObject *u) {
    CHECK_S;
    return Py_BuildValue("(LLL)", (long long)oar_grad_scaler_growth_tracker(self->s),
                         (long long)oar_grad_scaler_skipped(self->s), (long long)oar_grad_scaler_skip_streak(self->s));
}

/* state() -> {name: tensor}: the scaler's own tensors (scale, growth_tracker, skipped) */
static PyObject *scaler_state(ScalerObject *self, PyObject *u) {
    CHECK_S;
    PyObject *d = PyDict_New();
    for (int i = 0; d && i < oar_grad_scaler_num_state(self->s); i++) {
        const char *name;
        oar_tensor *t = oar_grad_scaler_state(self->s, i, &name);
        PyObject *w = t ? oarpy_wrap(oar_retain(t)) : oarpy_raise();
        int bad = !w || PyDict_SetItemString(d, name, w) < 0;
        Py_XDECREF(w);
        if (bad) Py_CLEAR(d);
    }
    return d;
}

static PyObject *scaler_load_state(ScalerObject *self, PyObject *args) {
    const char *name;
    PyObject *v;
    if (!PyArg_ParseTuple(args, "sO", &name, &v)) return NULL;
    CHECK_S;
    oar_tensor *t = oarpy_tensor(v, "GradScaler.load_state");
    if (!t || oarpy_check(oar_grad_scaler_load_state(self->s, name, t))) return NULL;
    Py_RETURN_NONE;
}

/* options() -> (growth_factor, backoff_factor, growth_interval) */
static PyObject *scaler_options(ScalerObject *self, PyObject *u) {
    CHECK_S;
    return Py_BuildValue("(ddL)", self->opts.growth_factor, self->opts.backoff_factor,
                         (long long)self->opts.growth_interval);
}

/* set_options(growth_factor, backoff_factor, growth_interval): the C scaler's options are fixed
 * at creation, so a new one takes them and the old one's state (scale, counts). */
static PyObject *scaler_set_options(ScalerObject *self, PyObject *args) {
    CHECK_S;
    oar_grad_scaler_opts o = self->opts;
    long long interval;
    if (!PyArg_ParseTuple(args, "ddL", &o.growth_factor, &o.backoff_factor, &interval)) return NULL;
    o.growth_interval = interval;
    o.init_scale = oar_grad_scaler_get_scale(self->s);
    oar_grad_scaler *s = oar_grad_scaler_new(&o);
    if (!s) return oarpy_raise();
    for (int i = 0; i < oar_grad_scaler_num_state(self->s); i++) {
        const char *name;
        oar_tensor *t = oar_grad_scaler_state(self->s, i, &name);
        if (!t || oar_grad_scaler_load_state(s, name, t) != OAR_OK) {
            oar_grad_scaler_free(s);
            return oarpy_raise();
        }
    }
    oar_grad_scaler_free(self->s);
    self->s = s;
    self->opts = o;
    Py_RETURN_NONE;
}

static PyMethodDef scaler_methods[] = {
    {"scale", (PyCFunction)scaler_scale, METH_O, "loss * scale (oar_grad_scaler_scale)"},
    {"unscale", (PyCFunction)scaler_unscale, METH_O, "divides the optimizer's gradients by the scale"},
    {"step", (PyCFunction)scaler_step, METH_O, "steps the optimizer unless a gradient is inf/nan; True: skipped"},
    {"update", (PyCFunction)scaler_update, METH_NOARGS, "backoff or growth of the scale"},
    {"get_scale", (PyCFunction)scaler_get_scale, METH_NOARGS, NULL},
    {"counts", (PyCFunction)scaler_counts, METH_NOARGS, "(growth_tracker, skipped, skip_streak)"},
    {"state", (PyCFunction)scaler_state, METH_NOARGS, NULL},
    {"load_state", (PyCFunction)scaler_load_state, METH_VARARGS, NULL},
    {"options", (PyCFunction)scaler_options, METH_NOARGS, NULL},
    {"set_options", (PyCFunction)scaler_set_options, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject Scaler_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "oar._C.GradScaler",
    .tp_basicsize = sizeof(ScalerObject),
    .tp_dealloc = (destructor)scaler_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_methods = scaler_methods,
    .tp_init = (initproc)scaler_init,
    .tp_new = PyType_GenericNew,
};

static PyMethodDef methods[] = {
    {"autocast_begin", (PyCFunction)(void (*)(void))autocast_begin, METH_VARARGS | METH_KEYWORDS,
     "opens an autocast region (oar_autocast_begin)"},
    {"autocast_end", autocast_end, METH_NOARGS, "closes the innermost autocast region"},
    {"autocast_enabled", autocast_enabled, METH_NOARGS, "an enabled autocast region is innermost"},
    {"autocast_dtype", autocast_dtype, METH_NOARGS, "its dtype code (f32 outside)"},
    {"amp_op_class", amp_op_class, METH_VARARGS, "an op's autocast class for a dtype"},
    {NULL, NULL, 0, NULL},
};

int oarpy_amp_init(PyObject *m) {
    if (PyType_Ready(&Scaler_Type) < 0 || PyModule_AddFunctions(m, methods) < 0) return -1;
    Py_INCREF(&Scaler_Type);
    if (PyModule_AddObject(m, "GradScaler", (PyObject *)&Scaler_Type) < 0) {
        Py_DECREF(&Scaler_Type);
        return -1;
    }
    return 0;
}
