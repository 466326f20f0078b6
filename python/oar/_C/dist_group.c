/* _C.DistGroup: a process group (oar_dist_new_group) for oar.distributed.new_group. Made by every
 * rank of the world with the same ranks; rank() and size() are -1 outside the group. The
 * collectives of dist.c take one as their optional last argument (None: the world). */
#include "common.h"

typedef struct {
    PyObject_HEAD
    oar_dist_group *g;
} GroupObject;

static PyTypeObject Group_Type;

/* DistGroup(ranks): a collective over the world. */
static int group_init(GroupObject *self, PyObject *args, PyObject *kw) {
    (void)kw;
    PyObject *ranks;
    if (!PyArg_ParseTuple(args, "O", &ranks)) return -1;
    if (self->g) {
        PyErr_SetString(PyExc_RuntimeError, "DistGroup: already initialized");
        return -1;
    }
    PyObject *seq = PySequence_Fast(ranks, "new_group: expected a sequence of ranks");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int *r = PyMem_Malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (!r) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, k));
        if (v == -1 && PyErr_Occurred()) {
            PyErr_Format(PyExc_TypeError, "new_group: expected integer ranks, got %R",
                         PySequence_Fast_GET_ITEM(seq, k));
            break;
        }
        if (v < -0x7fffffffL || v > 0x7fffffffL) v = -1; /* reported as out of range */
        r[k] = (int)v;
    }
    Py_DECREF(seq);
    oar_dist_group *g = NULL;
    if (!PyErr_Occurred()) {
        Py_BEGIN_ALLOW_THREADS
        g = oar_dist_new_group(r, (int)n);
        Py_END_ALLOW_THREADS
        if (!g) oarpy_raise();
    }
    PyMem_Free(r);
    if (!g) return -1;
    self->g = g;
    return 0;
}

static void group_dealloc(GroupObject *self) {
    if (self->g) oar_dist_group_free(self->g);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

#define GROUP_SELF(who)                                                                       \
    if (!self->g) {                                                                           \
        PyErr_SetString(PyExc_RuntimeError, who ": the process group was destroyed");         \
        return NULL;                                                                          \
    }

static PyObject *group_rank(GroupObject *self, PyObject *unused) {
    (void)unused;
    GROUP_SELF("get_rank");
    return PyLong_FromLong(oar_dist_group_rank(self->g));
}

static PyObject *group_size(GroupObject *self, PyObject *unused) {
    (void)unused;
    GROUP_SELF("get_world_size");
    return PyLong_FromLong(oar_dist_group_size(self->g));
}

static PyObject *group_id(GroupObject *self, PyObject *unused) {
    (void)unused;
    GROUP_SELF("DistGroup.id");
    return PyLong_FromLong(oar_dist_group_id(self->g));
}

static PyObject *group_ranks(GroupObject *self, PyObject *unused) {
    (void)unused;
    GROUP_SELF("DistGroup.ranks");
    int n = oar_dist_group_n_ranks(self->g);
    PyObject *l = PyList_New(n);
    for (int k = 0; l && k < n; k++) PyList_SET_ITEM(l, k, PyLong_FromLong(oar_dist_group_global_rank(self->g, k)));
    return l;
}

/* destroy(): frees the group's communicator now (destroy_process_group(group)). */
static PyObject *group_destroy(GroupObject *self, PyObject *unused) {
    (void)unused;
    oar_dist_group *g = self->g;
    self->g = NULL;
    oar_status st = OAR_OK;
    if (g) {
        Py_BEGIN_ALLOW_THREADS
        st = oar_dist_group_free(g);
        Py_END_ALLOW_THREADS
    }
    if (oarpy_check(st) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef group_methods[] = {
    {"rank", (PyCFunction)group_rank, METH_NOARGS, "This process's rank in the group; -1 outside it."},
    {"size", (PyCFunction)group_size, METH_NOARGS, "The group's size; -1 outside it."},
    {"id", (PyCFunction)group_id, METH_NOARGS, "The id the allreduce_sum op's group attribute takes."},
    {"ranks", (PyCFunction)group_ranks, METH_NOARGS, "The members' world ranks, in group-rank order."},
    {"destroy", (PyCFunction)group_destroy, METH_NOARGS, "Frees the group's communicator."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject Group_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "oar._C.DistGroup",
    .tp_basicsize = sizeof(GroupObject),
    .tp_dealloc = (destructor)group_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A process group of some of the world's ranks (oar_dist_new_group).",
    .tp_methods = group_methods,
    .tp_init = (initproc)group_init,
    .tp_new = PyType_GenericNew,
};

int oarpy_dist_group(PyObject *o, oar_dist_group **out) {
    *out = NULL;
    if (!o || o == Py_None) return 0;
    if (!PyObject_TypeCheck(o, &Group_Type)) {
        PyErr_Format(PyExc_TypeError, "dist: expected a process group (DistGroup) or None, got %R", o);
        return -1;
    }
    if (!((GroupObject *)o)->g) {
        PyErr_SetString(PyExc_RuntimeError, "dist: the process group was destroyed (destroy_process_group)");
        return -1;
    }
    *out = ((GroupObject *)o)->g;
    return 0;
}

int oarpy_dist_group_init(PyObject *m) {
    if (PyType_Ready(&Group_Type) < 0) return -1;
    Py_INCREF(&Group_Type);
    return PyModule_AddObject(m, "DistGroup", (PyObject *)&Group_Type);
}
