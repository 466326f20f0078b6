/* Module-level functions over the C API: tensors from Python data, creation, grad mode,
 * oar.autograd.grad, the generator, gradient clipping. */
#include "common.h"

#include <string.h>

static int parse_shape(PyObject *o, int64_t *shape, int *ndim, const char *who) {
    PyObject *seq = PySequence_Fast(o, "shape must be a sequence of ints");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > OAR_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s: expected at most %d dims, got %zd", who, OAR_MAX_DIMS, n);
        Py_DECREF(seq);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyLong_Check(e)) {
            PyErr_Format(PyExc_TypeError, "%s: expected the sizes to be ints, got %s", who, Py_TYPE(e)->tp_name);
            Py_DECREF(seq);
            return -1;
        }
        shape[i] = PyLong_AsLongLong(e);
        if (shape[i] < 0) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_RuntimeError, "%s: Trying to create tensor with negative dimension %lld: expected "
                                                 "sizes >= 0", who, (long long)shape[i]);
            Py_DECREF(seq);
            return -1;
        }
    }
    *ndim = (int)n;
    Py_DECREF(seq);
    return 0;
}

static int parse_dtype(PyObject *o, oar_dtype *dt) {
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < 0 || v >= OAR_DTYPE_COUNT) {
        PyErr_Format(PyExc_ValueError, "expected a dtype code in [0, %d), got %ld", OAR_DTYPE_COUNT, v);
        return -1;
    }
    *dt = (oar_dtype)v;
    return 0;
}

/* from_flat(values, shape, dtype): a new tensor from row-major Python numbers. */
static PyObject *from_flat(PyObject *m, PyObject *args) {
    PyObject *values, *shape_o, *dt_o;
    if (!PyArg_ParseTuple(args, "OOO", &values, &shape_o, &dt_o)) return NULL;
    int64_t shape[OAR_MAX_DIMS];
    int ndim;
    oar_dtype dt;
    if (parse_shape(shape_o, shape, &ndim, "tensor") < 0 || parse_dtype(dt_o, &dt) < 0) return NULL;
    PyObject *seq = PySequence_Fast(values, "tensor: values must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) numel *= shape[i];
    if (numel != n) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "tensor: expected %lld values for the shape, got %zd", (long long)numel, n);
        return NULL;
    }
    bool fl = oar_dtype_is_float(dt);
    void *buf = PyMem_Malloc((size_t)(n ? n : 1) * 8);
    if (!buf) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PySequence_Fast_GET_ITEM(seq, i);
        if (fl) {
            double v = PyFloat_AsDouble(e);
            if (v == -1.0 && PyErr_Occurred()) goto bad;
            ((double *)buf)[i] = v;
        } else {
            if (PyFloat_Check(e)) {
                double v = PyFloat_AS_DOUBLE(e);
                ((int64_t *)buf)[i] = dt == OAR_BOOL ? (v != 0) : (int64_t)v;
                continue;
            }
            long long v = PyLong_AsLongLong(e);
            if (v == -1 && PyErr_Occurred()) {
                /* a uint64 value above 2^63 - 1 travels as its bits: the i64 -> u64 cast keeps them */
                if (dt != OAR_U64 || !PyErr_ExceptionMatches(PyExc_OverflowError)) goto bad;
                PyErr_Clear();
                unsigned long long u = PyLong_AsUnsignedLongLong(e);
                if (u == (unsigned long long)-1 && PyErr_Occurred()) goto bad;
                memcpy(&v, &u, sizeof v);
            }
            ((int64_t *)buf)[i] = dt == OAR_BOOL ? (v != 0) : v;
        }
    }
    Py_DECREF(seq);
    oar_tensor *t = oar_from_data(buf, shape, ndim, fl ? OAR_F64 : OAR_I64);
    PyMem_Free(buf);
    if (t && oar_dtype_of(t) != dt) {
        oar_tensor *c = oar_cast(t, dt);
        oar_release(t);
        t = c;
    }
    return oarpy_wrap(t);
bad:
    Py_DECREF(seq);
    PyMem_Free(buf);
    return NULL;
}

/* creation(kind, shape, dtype, a, b): zeros, ones, empty, full(a), rand, randn, randint(a, b). */
static PyObject *create(PyObject *m, PyObject *args) {
    const char *kind;
    PyObject *shape_o, *dt_o;
    double a = 0, b = 0;
    if (!PyArg_ParseTuple(args, "sOO|dd", &kind, &shape_o, &dt_o, &a, &b)) return NULL;
    int64_t shape[OAR_MAX_DIMS];
    int nd;
    oar_dtype dt;
    if (parse_shape(shape_o, shape, &nd, kind) < 0 || parse_dtype(dt_o, &dt) < 0) return NULL;
    oar_tensor *t;
    if (!strcmp(kind, "zeros")) t = oar_zeros(shape, nd, dt);
    else if (!strcmp(kind, "ones")) t = oar_ones(shape, nd, dt);
    else if (!strcmp(kind, "empty")) t = oar_empty(shape, nd, dt);
    else if (!strcmp(kind, "full")) t = oar_full(shape, nd, a, dt);
    else if (!strcmp(kind, "rand")) t = oar_rand(shape, nd, dt);
    else if (!strcmp(kind, "randn")) t = oar_randn(shape, nd, dt);
    else if (!strcmp(kind, "randint")) t = oar_randint((int64_t)a, (int64_t)b, shape, nd, dt);
    else {
        PyErr_Format(PyExc_ValueError, "create: unknown kind '%s'", kind);
        return NULL;
    }
    return oarpy_wrap(t);
}

static PyObject *arange(PyObject *m, PyObject *args) {
    double s, e, st;
    PyObject *dt_o;
    oar_dtype dt;
    if (!PyArg_ParseTuple(args, "dddO", &s, &e, &st, &dt_o) || parse_dtype(dt_o, &dt) < 0) return NULL;
    return oarpy_wrap(oar_arange(s, e, st, dt));
}

static PyObject *linspace(PyObject *m, PyObject *args) {
    double s, e;
    long long n;
    PyObject *dt_o;
    oar_dtype dt;
    if (!PyArg_ParseTuple(args, "ddLO", &s, &e, &n, &dt_o) || parse_dtype(dt_o, &dt) < 0) return NULL;
    return oarpy_wrap(oar_linspace(s, e, n, dt));
}

static PyObject *eye(PyObject *m, PyObject *args) {
    long long n, k;
    PyObject *dt_o;
    oar_dtype dt;
    if (!PyArg_ParseTuple(args, "LLO", &n, &k, &dt_o) || parse_dtype(dt_o, &dt) < 0) return NULL;
    return oarpy_wrap(oar_eye(n, k, dt));
}

static PyObject *cast(PyObject *m, PyObject *args) {
    PyObject *x, *dt_o;
    oar_dtype dt;
    if (!PyArg_ParseTuple(args, "OO", &x, &dt_o) || parse_dtype(dt_o, &dt) < 0) return NULL;
    oar_tensor *t = oarpy_tensor(x, "Tensor.to");
    return t ? oarpy_wrap(oar_cast(t, dt)) : NULL;
}

static PyObject *clone_(PyObject *m, PyObject *x) {
    oar_tensor *t = oarpy_tensor(x, "Tensor.clone");
    return t ? oarpy_wrap(oar_clone(t)) : NULL;
}

static PyObject *contiguous(PyObject *m, PyObject *x) {
    oar_tensor *t = oarpy_tensor(x, "Tensor.contiguous");
    return t ? oarpy_wrap(oar_contiguous(t)) : NULL;
}

static PyObject *split(PyObject *m, PyObject *args) {
    PyObject *x;
    long long size;
    int dim, chunks;
    if (!PyArg_ParseTuple(args, "OLip", &x, &size, &dim, &chunks)) return NULL;
    oar_tensor *t = oarpy_tensor(x, chunks ? "chunk" : "split");
    if (!t) return NULL;
    oar_tensor *out[64];
    int n = chunks ? oar_chunk(t, (int)size, dim, out, 64) : oar_split(t, size, dim, out, 64);
    if (n < 0) return oarpy_raise();
    PyObject *tup = PyTuple_New(n);
    for (int i = 0; i < n; i++) PyTuple_SET_ITEM(tup, i, oarpy_wrap(out[i]));
    return tup;
}

/* ---- grad mode, generator */
static PyObject *set_grad_enabled(PyObject *m, PyObject *v) {
    int b = PyObject_IsTrue(v);
    if (b < 0) return NULL;
    return PyBool_FromLong(oar_set_grad_enabled(b));
}

static PyObject *is_grad_enabled(PyObject *m, PyObject *u) { return PyBool_FromLong(oar_grad_enabled()); }

static PyObject *set_detect_anomaly(PyObject *m, PyObject *v) {
    int b = PyObject_IsTrue(v);
    if (b < 0) return NULL;
    oar_set_detect_anomaly(b);
    Py_RETURN_NONE;
}

static PyObject *is_anomaly_enabled(PyObject *m, PyObject *u) { return PyBool_FromLong(oar_detect_anomaly_enabled()); }

static PyObject *manual_seed(PyObject *m, PyObject *v) {
    unsigned long long s = PyLong_AsUnsignedLongLongMask(v);
    if (PyErr_Occurred()) return NULL;
    oar_manual_seed(s);
    Py_RETURN_NONE;
}

/* The generator's whole state: Philox's seed and how many draws were taken since (a pair of ints). */
static PyObject *rng_get_state(PyObject *m, PyObject *u) {
    oar_rng_state s = oar_rng_get_state();
    return Py_BuildValue("(KK)", (unsigned long long)s.seed, (unsigned long long)s.offset);
}

static PyObject *rng_set_state(PyObject *m, PyObject *args) {
    unsigned long long seed, offset;
    if (!PyArg_ParseTuple(args, "KK", &seed, &offset)) return NULL;
    oar_rng_set_state((oar_rng_state){seed, offset});
    Py_RETURN_NONE;
}

static PyObject *set_num_threads(PyObject *m, PyObject *v) {
    long n = PyLong_AsLong(v);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (oarpy_check(oar_set_num_threads((int)n))) return NULL;
    Py_RETURN_NONE;
}

static PyObject *get_num_threads(PyObject *m, PyObject *u) { return PyLong_FromLong(oar_get_num_threads()); }

/* ---- autograd.grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused) */
static int tensor_array(PyObject *seq, oar_tensor **arr, int cap, bool none_ok, const char *what) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > cap) {
        PyErr_Format(PyExc_ValueError, "%s: at most %d tensors, got %zd", what, cap, n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        if (o == Py_None && none_ok) {
            arr[i] = NULL;
            continue;
        }
        if (!(arr[i] = oarpy_tensor(o, what))) return -1;
    }
    return (int)n;
}

static PyObject *autograd_grad(PyObject *m, PyObject *args) {
    PyObject *outs_o, *ins_o, *gouts_o;
    int retain, create, unused;
    if (!PyArg_ParseTuple(args, "OOOppp", &outs_o, &ins_o, &gouts_o, &retain, &create, &unused)) return NULL;
    enum { CAP = 256 };
    oar_tensor *outs[CAP], *ins[CAP], *gouts[CAP], *grads[CAP];
    PyObject *o = PySequence_Fast(outs_o, "grad: outputs must be a sequence");
    PyObject *i = o ? PySequence_Fast(ins_o, "grad: inputs must be a sequence") : NULL;
    PyObject *g = i && gouts_o != Py_None ? PySequence_Fast(gouts_o, "grad: grad_outputs must be a sequence") : NULL;
    PyObject *res = NULL;
    int no, ni, ng = 0;
    if (!i || (gouts_o != Py_None && !g)) goto done;
    if ((no = tensor_array(o, outs, CAP, false, "grad(outputs)")) < 0) goto done;
    if ((ni = tensor_array(i, ins, CAP, false, "grad(inputs)")) < 0) goto done;
    if (g && (ng = tensor_array(g, gouts, CAP, true, "grad(grad_outputs)")) < 0) goto done;
    if (g && ng != no) {
        PyErr_Format(PyExc_RuntimeError, "grad_outputs: expected %d entries (one per output), got %d", no, ng);
        goto done;
    }
    for (int k = 0; k < no; k++)
        if (!oar_requires_grad(outs[k])) {
            PyErr_Format(PyExc_RuntimeError, "element %d of tensors does not require grad and does not have a grad_fn", k);
            goto done;
        }
    oar_grad_opts opts = {.retain_graph = retain, .create_graph = create, .allow_unused = unused};
    oar_status st = oar_grad(outs, no, g ? gouts : NULL, ins, ni, grads, &opts);
    if (PyErr_Occurred() || oarpy_check(st)) goto done;
    res = PyTuple_New(ni);
    for (int k = 0; k < ni; k++) {
        if (grads[k]) PyTuple_SET_ITEM(res, k, oarpy_wrap(grads[k]));
        else {
            Py_INCREF(Py_None);
            PyTuple_SET_ITEM(res, k, Py_None);
        }
    }
done:
    Py_XDECREF(o);
    Py_XDECREF(i);
    Py_XDECREF(g);
    return res;
}

/* clip_grad_norm(params, max_norm, norm_type) -> total norm as a tensor */
static PyObject *clip_grad_norm(PyObject *m, PyObject *args) {
    PyObject *ps;
    double max_norm, norm_type;
    if (!PyArg_ParseTuple(args, "Odd", &ps, &max_norm, &norm_type)) return NULL;
    PyObject *seq = PySequence_Fast(ps, "clip_grad_norm_: parameters must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    oar_tensor **arr = PyMem_Calloc((size_t)(n ? n : 1), sizeof *arr);
    PyObject *res = NULL;
    if (!arr) goto done;
    for (Py_ssize_t k = 0; k < n; k++)
        if (!(arr[k] = oarpy_tensor(PySequence_Fast_GET_ITEM(seq, k), "clip_grad_norm_"))) goto done;
    res = oarpy_wrap(oar_clip_grad_norm_total(arr, (int)n, max_norm, norm_type));
done:
    PyMem_Free(arr);
    Py_DECREF(seq);
    return res;
}

/* init_(kind, t, a, b): the C core's initializers, in place from the global generator
 * (uniform [a, b), normal (mean a, std b), constant a), so layers made from Python draw the
 * same values as the C layers for the same seed. */
static PyObject *init_(PyObject *m, PyObject *args) {
    const char *kind;
    PyObject *x;
    double a, b;
    if (!PyArg_ParseTuple(args, "sOdd", &kind, &x, &a, &b)) return NULL;
    oar_tensor *t = oarpy_tensor(x, "nn.init");
    if (!t) return NULL;
    oar_status st;
    if (!strcmp(kind, "uniform")) st = oar_init_uniform_(t, a, b);
    else if (!strcmp(kind, "normal")) st = oar_init_normal_(t, a, b);
    else if (!strcmp(kind, "constant")) st = oar_init_constant_(t, a);
    else {
        PyErr_Format(PyExc_ValueError, "init_: unknown kind '%s'", kind);
        return NULL;
    }
    if (oarpy_check(st)) return NULL;
    Py_INCREF(x);
    return x;
}

static PyObject *dtype_info(PyObject *m, PyObject *u) {
    PyObject *list = PyList_New(OAR_DTYPE_COUNT);
    for (int i = 0; list && i < OAR_DTYPE_COUNT; i++)
        PyList_SET_ITEM(list, i, Py_BuildValue("(snO)", oar_dtype_name((oar_dtype)i), (Py_ssize_t)oar_dtype_size((oar_dtype)i),
                                               oar_dtype_is_float((oar_dtype)i) ? Py_True : Py_False));
    return list;
}

/* (built with CUDA, GPUs on this machine): what oar.cuda and the device checks read */
static PyObject *cuda_info(PyObject *m, PyObject *unused) {
    (void)m, (void)unused;
    return Py_BuildValue("(Ni)", PyBool_FromLong(oar_cuda_is_built()), oar_cuda_is_built() ? oar_cuda_device_count() : 0);
}

/* Waits for the work queued on device code dev (oar.cuda.synchronize). */
static PyObject *synchronize(PyObject *m, PyObject *dev_o) {
    (void)m;
    long dev = PyLong_AsLong(dev_o);
    if (dev == -1 && PyErr_Occurred()) return NULL;
    if (dev != OAR_CPU && dev != OAR_CUDA) {
        PyErr_Format(PyExc_ValueError, "synchronize: expected device code 0 (cpu) or 1 (cuda), got %ld", dev);
        return NULL;
    }
    if (oarpy_check(oar_synchronize((oar_device)dev))) return NULL;
    Py_RETURN_NONE;
}

/* memory_stats(dev, op): op 0 reads the device's statistics as a dict, 1 resets the peak, 2 empties
 * the cache (then returns None); dev is a device code the caller checked usable */
static PyObject *memory_stats(PyObject *m, PyObject *args) {
    (void)m;
    int dev, op;
    if (!PyArg_ParseTuple(args, "ii", &dev, &op)) return NULL;
    if ((dev != OAR_CPU && dev != OAR_CUDA) || op < 0 || op > 2) {
        PyErr_Format(PyExc_ValueError, "memory_stats: expected device code 0 or 1 and op 0-2, got %d and %d", dev, op);
        return NULL;
    }
    if (op == 1) oar_memory_reset_peak((oar_device)dev);
    if (op == 2) oar_memory_empty_cache((oar_device)dev);
    if (op != 0) Py_RETURN_NONE;
    oar_memory_stats st = oar_memory_stats_get((oar_device)dev);
    return Py_BuildValue("{s:L,s:L,s:L,s:L,s:L}", "allocated_bytes.all.current", (long long)st.current_bytes,
                         "allocated_bytes.all.peak", (long long)st.peak_bytes, "reserved_bytes.all.current",
                         (long long)st.reserved_bytes, "num_alloc_retries", (long long)st.n_oom_retries,
                         "allocation.all.allocated", (long long)st.n_allocs);
}

static PyMethodDef methods[] = {
    {"cuda_info", cuda_info, METH_NOARGS, NULL},
    {"memory_stats", memory_stats, METH_VARARGS, NULL},
    {"synchronize", synchronize, METH_O, NULL},
    {"from_flat", from_flat, METH_VARARGS, NULL},
    {"create", create, METH_VARARGS, NULL},
    {"arange", arange, METH_VARARGS, NULL},
    {"linspace", linspace, METH_VARARGS, NULL},
    {"eye", eye, METH_VARARGS, NULL},
    {"cast", cast, METH_VARARGS, NULL},
    {"clone", clone_, METH_O, NULL},
    {"contiguous", contiguous, METH_O, NULL},
    {"split", split, METH_VARARGS, NULL},
    {"set_grad_enabled", set_grad_enabled, METH_O, NULL},
    {"is_grad_enabled", is_grad_enabled, METH_NOARGS, NULL},
    {"set_detect_anomaly", set_detect_anomaly, METH_O, NULL},
    {"is_anomaly_enabled", is_anomaly_enabled, METH_NOARGS, NULL},
    {"manual_seed", manual_seed, METH_O, NULL},
    {"rng_get_state", rng_get_state, METH_NOARGS, NULL},
    {"rng_set_state", rng_set_state, METH_VARARGS, NULL},
    {"set_num_threads", set_num_threads, METH_O, NULL},
    {"get_num_threads", get_num_threads, METH_NOARGS, NULL},
    {"autograd_grad", autograd_grad, METH_VARARGS, NULL},
    {"clip_grad_norm", clip_grad_norm, METH_VARARGS, NULL},
    {"dtype_info", dtype_info, METH_NOARGS, NULL},
    {"init_", init_, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int oarpy_functions_init(PyObject *m) { return PyModule_AddFunctions(m, methods); }
