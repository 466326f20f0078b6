/* _C's distributed part (include/oar/dist.h) for oar.distributed and
 * oar.nn.parallel.DistributedDataParallel: the job (init, rank, size), the collectives as work
 * handles (_C.DistWork), and data parallel over a Python module's parameters (_C.DataParallel).
 *
 * Data parallel in C wraps an oar_module; a Python module is not one, so DataParallel builds a
 * holder module whose tree mirrors the Python names ("layers.0.weight" becomes child "layers",
 * child "0", parameter "weight") and whose tensors are the Python module's own (the same oar
 * tensors, so rank 0's broadcast and the averaged gradients land in them). Frozen parameters
 * go in as buffers: broadcast once, never averaged, and their requires_grad left alone. */
#include "common.h"

/* ---------------------------------------------------------------- work handles */

typedef struct {
    PyObject_HEAD
    oar_dist_work *w;
    PyObject *keep; /* the tensors the collective reads and writes, alive until the wait */
} WorkObject;

static oar_status wait_released(oar_dist_work *w) {
    oar_status st;
    Py_BEGIN_ALLOW_THREADS
    st = oar_dist_wait(w);
    Py_END_ALLOW_THREADS
    return st;
}

static PyObject *work_wait(WorkObject *self, PyObject *unused) {
    (void)unused;
    if (!self->w) Py_RETURN_TRUE; /* waited already */
    oar_dist_work *w = self->w;
    self->w = NULL;
    oar_status st = wait_released(w);
    Py_CLEAR(self->keep);
    if (oarpy_check(st) < 0) return NULL;
    Py_RETURN_TRUE;
}

static PyObject *work_is_completed(WorkObject *self, PyObject *unused) {
    (void)unused;
    return PyBool_FromLong(!self->w || oar_dist_test(self->w));
}

static void work_dealloc(WorkObject *self) {
    if (self->w) wait_released(self->w); /* never free a buffer the communicator still writes */
    Py_XDECREF(self->keep);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef work_methods[] = {
    {"wait", (PyCFunction)work_wait, METH_NOARGS, "Completes the collective (raises its error)."},
    {"is_completed", (PyCFunction)work_is_completed, METH_NOARGS, "Whether the collective has finished."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject Work_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "oar._C.DistWork",
    .tp_basicsize = sizeof(WorkObject),
    .tp_dealloc = (destructor)work_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A collective in flight (oar_dist_work): wait() completes it.",
    .tp_methods = work_methods,
};

/* Wraps w (NULL: raises the error that made it NULL), keeping `keep` alive until the wait. */
static PyObject *work_new(oar_dist_work *w, PyObject *keep) {
    if (!w) return oarpy_raise();
    WorkObject *o = PyObject_New(WorkObject, &Work_Type);
    if (!o) {
        wait_released(w);
        return NULL;
    }
    o->w = w;
    o->keep = keep;
    Py_XINCREF(keep);
    return (PyObject *)o;
}

/* ---------------------------------------------------------------- the job */

static PyObject *dist_init(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"collective_timeout_ms", "peer_timeout_ms", "heartbeat_ms", NULL};
    oar_dist_opts o = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|iii", names, &o.collective_timeout_ms, &o.peer_timeout_ms,
                                     &o.heartbeat_ms))
        return NULL;
    oar_status st;
    Py_BEGIN_ALLOW_THREADS
    st = oar_dist_init(&o);
    Py_END_ALLOW_THREADS
    if (oarpy_check(st) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *dist_finalize(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    oar_status st;
    Py_BEGIN_ALLOW_THREADS
    st = oar_dist_finalize();
    Py_END_ALLOW_THREADS
    if (oarpy_check(st) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *dist_info(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return Py_BuildValue("{s:O,s:i,s:i,s:i,s:s,s:i}", "initialized", oar_dist_initialized() ? Py_True : Py_False,
                         "rank", oar_dist_rank(), "world_size", oar_dist_world_size(), "local_rank",
                         oar_dist_local_rank(), "backend", oar_dist_backend(), "dead_rank", oar_dist_dead_rank());
}

static int parse_op(const char *s, oar_dist_op *op) {
    static const char *names[] = {"sum", "avg", "max", "min"};
    for (int k = 0; k < 4; k++)
        if (!strcmp(s, names[k])) return *op = (oar_dist_op)k, 0;
    PyErr_Format(PyExc_ValueError, "dist: expected a reduce op sum, avg, max or min, got '%s'", s);
    return -1;
}

/* Wraps w keeping a and b (tensors) and the group object alive until the wait. */
static PyObject *work_keep(oar_dist_work *w, PyObject *a, PyObject *b, PyObject *group) {
    if (!w) return oarpy_raise();
    PyObject *keep = PyTuple_Pack(3, a ? a : Py_None, b ? b : Py_None, group ? group : Py_None);
    if (!keep) {
        wait_released(w);
        return NULL;
    }
    PyObject *o = work_new(w, keep);
    Py_DECREF(keep);
    return o;
}

/* The collectives: each takes an optional last argument, a DistGroup (None: the world); ranks are
 * the group's. */

/* allreduce(tensor, op, fixed_order[, group[, label]]) -> DistWork; a label makes it a protocol
 * step (oar_dist_group_allreduce_labeled: fixed order, checked against the same step only) */
static PyObject *dist_allreduce(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *to, *go = NULL;
    const char *ops, *label = NULL;
    int fixed;
    oar_dist_op op;
    oar_dist_group *g;
    if (!PyArg_ParseTuple(args, "Osp|Oz", &to, &ops, &fixed, &go, &label) || parse_op(ops, &op) < 0 ||
        oarpy_dist_group(go, &g) < 0)
        return NULL;
    oar_tensor *t = oarpy_tensor(to, "all_reduce(tensor)");
    if (!t) return NULL;
    return work_keep(label ? oar_dist_group_allreduce_labeled(g, t, op, label) : oar_dist_group_allreduce(g, t, op, fixed),
                     to, NULL, go);
}

/* broadcast(tensor, root[, group]) */
static PyObject *dist_broadcast(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *to, *go = NULL;
    int root;
    oar_dist_group *g;
    if (!PyArg_ParseTuple(args, "Oi|O", &to, &root, &go) || oarpy_dist_group(go, &g) < 0) return NULL;
    oar_tensor *t = oarpy_tensor(to, "broadcast(tensor)");
    return t ? work_keep(oar_dist_group_broadcast(g, t, root), to, NULL, go) : NULL;
}

/* allgather(out, in[, group]): out holds N * in.numel elements */
static PyObject *dist_allgather(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *oo, *io, *go = NULL;
    oar_dist_group *g;
    if (!PyArg_ParseTuple(args, "OO|O", &oo, &io, &go) || oarpy_dist_group(go, &g) < 0) return NULL;
    oar_tensor *out = oarpy_tensor(oo, "all_gather(output)"), *in = out ? oarpy_tensor(io, "all_gather(input)") : NULL;
    if (!in) return NULL;
    return work_keep(oar_dist_group_allgather(g, out, in), oo, io, go);
}

/* reduce_scatter(out, in, op[, group]): in holds N * out.numel elements */
static PyObject *dist_reduce_scatter(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *oo, *io, *go = NULL;
    const char *ops;
    oar_dist_op op;
    oar_dist_group *g;
    if (!PyArg_ParseTuple(args, "OOs|O", &oo, &io, &ops, &go) || parse_op(ops, &op) < 0 ||
        oarpy_dist_group(go, &g) < 0)
        return NULL;
    oar_tensor *out = oarpy_tensor(oo, "reduce_scatter(output)");
    oar_tensor *in = out ? oarpy_tensor(io, "reduce_scatter(input)") : NULL;
    if (!in) return NULL;
    return work_keep(oar_dist_group_reduce_scatter(g, out, in, op), oo, io, go);
}

/* barrier([group]) */
static PyObject *dist_barrier(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *go = NULL;
    oar_dist_group *g;
    if (!PyArg_ParseTuple(args, "|O", &go) || oarpy_dist_group(go, &g) < 0) return NULL;
    return work_keep(oar_dist_group_barrier(g), NULL, NULL, go);
}

/* send(tensor, peer, tag[, group]) / recv(tensor, peer, tag[, group]) */
static PyObject *dist_p2p(PyObject *args, bool send) {
    PyObject *to, *go = NULL;
    int peer, tag;
    oar_dist_group *g;
    if (!PyArg_ParseTuple(args, "Oii|O", &to, &peer, &tag, &go) || oarpy_dist_group(go, &g) < 0) return NULL;
    oar_tensor *t = oarpy_tensor(to, send ? "send(tensor)" : "recv(tensor)");
    if (!t) return NULL;
    return work_keep(send ? oar_dist_group_send(g, t, peer, tag) : oar_dist_group_recv(g, t, peer, tag), to, NULL, go);
}
static PyObject *dist_send(PyObject *self, PyObject *args) { (void)self; return dist_p2p(args, true); }
static PyObject *dist_recv(PyObject *self, PyObject *args) { (void)self; return dist_p2p(args, false); }

/* ---------------------------------------------------------------- data parallel */

typedef struct {
    PyObject_HEAD
    oar_module *holder;
    oar_dist_dp *dp;
    PyObject *group;  /* the DistGroup, alive as long as the handle */
    PyObject *params; /* the (name, tensor) sequence it was made from (layout() indexes it) */
    PyObject *hook;   /* hook(bucket index), the communication hook's Python side, or NULL */
    PyObject *exc_type, *exc_value, *exc_tb; /* what the hook raised, raised again by sync */
} DPObject;

static oar_status holder_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)m, (void)in, (void)n_in, (void)out, (void)n_out;
    return oar_set_error(OAR_ERR_UNSUPPORTED, "DistributedDataParallel: the holder of a Python module's parameters is "
                                          "not a model; call the Python module");
}
static const oar_module_ops HOLDER = {"PythonParameters", holder_forward, NULL, NULL};

/* Registers t under the dotted name in the holder tree (children made on the way). */
static oar_status add_dotted(oar_module *root, const char *dotted, oar_tensor *t, bool param) {
    char path[512];
    if (strlen(dotted) >= sizeof path)
        return oar_set_error(OAR_ERR_INVALID_ARG, "DistributedDataParallel: parameter name too long: '%.64s...'",
                             dotted);
    strcpy(path, dotted);
    oar_module *m = root;
    char *part = path, *dot;
    while ((dot = strchr(part, '.'))) {
        *dot = 0;
        oar_module *child = oar_module_child(m, part);
        if (!child) { /* not made yet: the lookup's error is not one */
            oar_clear_error();
            if (!(child = oar_module_new(&HOLDER, NULL))) return oar_last_status();
            oar_status st = oar_module_add_child(m, part, child);
            if (st != OAR_OK) return st;
        }
        m = child;
        part = dot + 1;
    }
    return param ? oar_module_add_parameter(m, part, t) : oar_module_add_buffer(m, part, t);
}

static int add_named_list(oar_module *root, PyObject *list, const char *what) {
    PyObject *seq = PySequence_Fast(list, what);
    if (!seq) return -1;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i), *to;
        const char *name;
        if (!PyArg_ParseTuple(item, "sO", &name, &to)) break;
        oar_tensor *t = oarpy_tensor(to, what);
        if (!t) break;
        bool param = !strcmp(what, "parameters") && oar_requires_grad(t);
        if (oarpy_check(add_dotted(root, name, t, param)) < 0) break;
    }
    Py_DECREF(seq);
    return PyErr_Occurred() ? -1 : 0;
}

/* DataParallel(parameters, buffers, bucket_cap_mb, first_bucket_mb, mpi_allreduce[, group]):
 * parameters and buffers as lists of (dotted name, tensor); a collective (the group's rank 0's
 * values go to every rank of it; the group, a DistGroup or None for the world, is kept). */
static int dp_init(DPObject *self, PyObject *args, PyObject *kw) {
    (void)kw;
    PyObject *params, *buffers, *go = NULL;
    oar_dist_strategy s = {0};
    int mpi = 0;
    oar_dist_group *g;
    if (!PyArg_ParseTuple(args, "OOddp|O", &params, &buffers, &s.fuse_grad_size_in_MB, &s.first_bucket_MB, &mpi,
                          &go) ||
        oarpy_dist_group(go, &g) < 0)
        return -1;
    s.mpi_allreduce = mpi;
    s.group = g;
    if (self->holder) {
        PyErr_SetString(PyExc_RuntimeError, "DataParallel: already initialized");
        return -1;
    }
    if (!(self->holder = oar_module_new(&HOLDER, NULL))) return oarpy_raise(), -1;
    if (add_named_list(self->holder, params, "parameters") < 0 || add_named_list(self->holder, buffers, "buffers") < 0)
        return -1;
    oar_dist_dp *dp;
    Py_BEGIN_ALLOW_THREADS
    dp = oar_dist_data_parallel(self->holder, &s);
    Py_END_ALLOW_THREADS
    if (!dp) return oarpy_raise(), -1;
    self->dp = dp;
    self->group = go && go != Py_None ? go : NULL;
    Py_XINCREF(self->group);
    self->params = params;
    Py_INCREF(params);
    return 0;
}

static void dp_dealloc(DPObject *self) {
    oar_dist_dp_free(self->dp);
    Py_XDECREF(self->group);
    Py_XDECREF(self->params);
    Py_XDECREF(self->hook);
    Py_XDECREF(self->exc_type);
    Py_XDECREF(self->exc_value);
    Py_XDECREF(self->exc_tb);
    oar_module_free(self->holder);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

#define DP_SELF(who)                                                                            \
    if (!self->dp) {                                                                            \
        PyErr_SetString(PyExc_RuntimeError, who ": the DataParallel object is not initialized"); \
        return NULL;                                                                            \
    }

/* Averages the gradients of the last backward across ranks (oar_dist_dp_sync); with a hook, runs
 * the hooks still due and raises what a hook raised during this step. */
static PyObject *dp_sync(DPObject *self, PyObject *unused) {
    (void)unused;
    DP_SELF("DataParallel.sync");
    oar_status st;
    Py_BEGIN_ALLOW_THREADS
    st = oar_dist_dp_sync(self->dp);
    Py_END_ALLOW_THREADS
    if (self->exc_type) {
        PyErr_Restore(self->exc_type, self->exc_value, self->exc_tb);
        self->exc_type = self->exc_value = self->exc_tb = NULL;
        return NULL;
    }
    if (oarpy_check(st) < 0) return NULL;
    Py_RETURN_NONE;
}

/* The C hook: calls the Python side with the bucket's index (from backward, GIL held, or from the
 * sync, GIL released). A Python exception is kept for sync to raise; backward goes on. */
static oar_status comm_hook_call(oar_dist_dp *dp, int bucket, void *user) {
    (void)dp;
    DPObject *self = user;
    PyGILState_STATE gil = PyGILState_Ensure();
    void *scopes = oar_scope_suspend(); /* what the hook makes is owned by Python objects */
    oar_status st = OAR_OK;
    PyObject *r = PyObject_CallFunction(self->hook, "i", bucket);
    if (!r) {
        if (!self->exc_type) PyErr_Fetch(&self->exc_type, &self->exc_value, &self->exc_tb);
        else PyErr_Clear();
        st = oar_set_error(OAR_ERR_INVALID_ARG, "DistributedDataParallel: the communication hook raised on bucket %d",
                           bucket);
    }
    Py_XDECREF(r);
    oar_scope_resume(scopes);
    PyGILState_Release(gil);
    return st;
}

/* set_comm_hook(fn): fn(bucket index) runs as each bucket is due (oar_dist_dp_set_comm_hook). */
static PyObject *dp_set_comm_hook(DPObject *self, PyObject *fn) {
    DP_SELF("DataParallel.set_comm_hook");
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "Communication hook must be callable.");
        return NULL;
    }
    if (oarpy_check(oar_dist_dp_set_comm_hook(self->dp, comm_hook_call, self)) < 0) return NULL;
    Py_INCREF(fn);
    self->hook = fn;
    Py_RETURN_NONE;
}

/* bucket_buffer(i): bucket i's flat gradient tensor (a view of the bucket: writes land in .grad). */
static PyObject *dp_bucket_buffer(DPObject *self, PyObject *arg) {
    DP_SELF("DataParallel.bucket_buffer");
    int i = PyLong_AsLong(arg);
    if (i == -1 && PyErr_Occurred()) return NULL;
    oar_tensor *t = oar_dist_dp_bucket_buffer(self->dp, i);
    return t ? oarpy_wrap(oar_retain(t)) : oarpy_raise();
}

/* layout(): for each bucket, the indices of its parameters in the list DataParallel was made from. */
static PyObject *dp_layout(DPObject *self, PyObject *unused) {
    (void)unused;
    DP_SELF("DataParallel.layout");
    PyObject *seq = PySequence_Fast(self->params, "DataParallel.layout");
    if (!seq) return NULL;
    oar_dist_dp_stats s;
    oar_dist_dp_get_stats(self->dp, &s);
    PyObject *out = PyList_New(s.n_buckets);
    for (int i = 0; out && i < s.n_buckets; i++) {
        int n = oar_dist_dp_bucket_params(self->dp, i);
        PyObject *idx = PyList_New(n);
        if (!idx) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, idx);
        for (int j = 0; j < n; j++) {
            oar_tensor *p = oar_dist_dp_bucket_param(self->dp, i, j);
            Py_ssize_t at = -1;
            for (Py_ssize_t k = 0; at < 0 && k < PySequence_Fast_GET_SIZE(seq); k++) {
                PyObject *item = PySequence_Fast_GET_ITEM(seq, k);
                PyObject *to = PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 2 ? PyTuple_GET_ITEM(item, 1) : NULL;
                if (to && PyObject_TypeCheck(to, &TensorBase_Type) && ((TensorObject *)to)->t == p) at = k;
            }
            PyList_SET_ITEM(idx, j, PyLong_FromSsize_t(at));
        }
    }
    Py_DECREF(seq);
    return out;
}

static PyObject *dp_no_sync(DPObject *self, PyObject *on) {
    DP_SELF("DataParallel.no_sync");
    int v = PyObject_IsTrue(on);
    if (v < 0 || oarpy_check(oar_dist_dp_no_sync(self->dp, v)) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *dp_stats(DPObject *self, PyObject *unused) {
    (void)unused;
    DP_SELF("DataParallel.stats");
    oar_dist_dp_stats s;
    if (oarpy_check(oar_dist_dp_get_stats(self->dp, &s)) < 0) return NULL;
    PyObject *buckets = PyList_New(s.n_buckets);
    for (int i = 0; buckets && i < s.n_buckets; i++)
        PyList_SET_ITEM(buckets, i, Py_BuildValue("(Li)", (long long)oar_dist_dp_bucket_numel(self->dp, i),
                                                  oar_dist_dp_bucket_params(self->dp, i)));
    if (!buckets) return NULL;
    return Py_BuildValue("{s:N,s:L,s:L,s:L,s:d,s:d}", "buckets", buckets, "steps", (long long)s.steps,
                         "launched_in_backward", (long long)s.launched_in_backward, "launched_at_sync",
                         (long long)s.launched_at_sync, "comm_seconds", s.comm_seconds, "exposed_seconds",
                         s.exposed_seconds);
}

/* join_notify(divide_by_initial_world_size, throw, broadcast_buffers, sync_backward[, context_count]) -> -1
 * (the count stays in flight until the sync);
 * join_shadow(divide_by_initial_world_size, throw, broadcast_buffers[, context_count]) -> the same, 0 when
 * all joined. context_count: a join context (oar.distributed.algorithms.Join) counted the ranks still
 * training itself (-1 when unknown; notify only) and checked the early termination. */
static PyObject *dp_join_step(DPObject *self, PyObject *args, bool shadow) {
    DP_SELF("DataParallel.join");
    int div = 1, thr = 0, bufs = 0, sync = 1, active = -1;
    PyObject *ctx = Py_None;
    if (!(shadow ? PyArg_ParseTuple(args, "ppp|O", &div, &thr, &bufs, &ctx)
                 : PyArg_ParseTuple(args, "pppp|O", &div, &thr, &bufs, &sync, &ctx)))
        return NULL;
    long count = ctx == Py_None ? -1 : PyLong_AsLong(ctx);
    if (count == -1 && PyErr_Occurred()) return NULL;
    oar_dist_dp_join o = {.divide_by_initial_world_size = div, .throw_on_early_termination = thr,
                          .broadcast_buffers = bufs, .sync_backward = sync, .counted_by_context = ctx != Py_None,
                          .count = (int)count};
    oar_status st;
    Py_BEGIN_ALLOW_THREADS
    st = shadow ? oar_dist_dp_join_shadow(self->dp, &o, &active) : oar_dist_dp_join_notify(self->dp, &o, NULL);
    Py_END_ALLOW_THREADS
    if (oarpy_check(st) < 0) return NULL;
    return PyLong_FromLong(active);
}
static PyObject *dp_join_notify(DPObject *self, PyObject *args) { return dp_join_step(self, args, false); }
static PyObject *dp_join_shadow(DPObject *self, PyObject *args) { return dp_join_step(self, args, true); }

static PyObject *dp_join_end(DPObject *self, PyObject *last) {
    DP_SELF("DataParallel.join_end");
    int v = PyObject_IsTrue(last);
    if (v < 0) return NULL;
    oar_status st;
    Py_BEGIN_ALLOW_THREADS
    st = oar_dist_dp_join_end(self->dp, v);
    Py_END_ALLOW_THREADS
    if (oarpy_check(st) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef dp_methods[] = {
    {"join_notify", (PyCFunction)dp_join_notify, METH_VARARGS, "A training rank's step of join (before forward)."},
    {"join_shadow", (PyCFunction)dp_join_shadow, METH_VARARGS, "A joined rank's shadow of one iteration."},
    {"join_end", (PyCFunction)dp_join_end, METH_O, "The last joiner's model to every rank."},
    {"sync", (PyCFunction)dp_sync, METH_NOARGS, "Averages the last backward's gradients across ranks."},
    {"no_sync", (PyCFunction)dp_no_sync, METH_O, "Gradient accumulation on or off."},
    {"stats", (PyCFunction)dp_stats, METH_NOARGS, "Buckets and overlap counters."},
    {"set_comm_hook", (PyCFunction)dp_set_comm_hook, METH_O, "fn(bucket index) runs as each bucket is due."},
    {"bucket_buffer", (PyCFunction)dp_bucket_buffer, METH_O, "Bucket i's flat gradient tensor."},
    {"layout", (PyCFunction)dp_layout, METH_NOARGS, "Each bucket's parameters as indices of the given list."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject DP_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "oar._C.DataParallel",
    .tp_basicsize = sizeof(DPObject),
    .tp_dealloc = (destructor)dp_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "oar_dist_data_parallel over a Python module's named parameters and buffers.",
    .tp_methods = dp_methods,
    .tp_init = (initproc)dp_init,
    .tp_new = PyType_GenericNew,
};

/* ---------------------------------------------------------------- the program's counters */

static PyObject *dist_program_stats(PyObject *self, PyObject *args) {
    (void)self;
    int reset = 0;
    if (!PyArg_ParseTuple(args, "|p", &reset)) return NULL;
    oar_dist_program_stats s;
    if (oarpy_check(oar_dist_program_stats_get(&s)) < 0) return NULL;
    if (reset) oar_dist_program_stats_reset();
    return Py_BuildValue("{s:L,s:L,s:d,s:d}", "collectives", (long long)s.collectives, "bytes", (long long)s.bytes,
                         "comm_seconds", s.comm_seconds, "exposed_seconds", s.exposed_seconds);
}

static PyMethodDef dist_functions[] = {
    {"dist_init", (PyCFunction)(void (*)(void))dist_init, METH_VARARGS | METH_KEYWORDS, "oar_dist_init"},
    {"dist_finalize", dist_finalize, METH_NOARGS, "oar_dist_finalize"},
    {"dist_info", dist_info, METH_NOARGS, "initialized, rank, world_size, local_rank, backend, dead_rank"},
    {"dist_allreduce", dist_allreduce, METH_VARARGS, "allreduce(tensor, op, fixed_order) -> DistWork"},
    {"dist_broadcast", dist_broadcast, METH_VARARGS, "broadcast(tensor, root) -> DistWork"},
    {"dist_allgather", dist_allgather, METH_VARARGS, "allgather(out, in) -> DistWork"},
    {"dist_reduce_scatter", dist_reduce_scatter, METH_VARARGS, "reduce_scatter(out, in, op) -> DistWork"},
    {"dist_barrier", dist_barrier, METH_VARARGS, "barrier([group]) -> DistWork"},
    {"dist_send", dist_send, METH_VARARGS, "send(tensor, peer, tag) -> DistWork"},
    {"dist_recv", dist_recv, METH_VARARGS, "recv(tensor, peer, tag) -> DistWork"},
    {"dist_program_stats", dist_program_stats, METH_VARARGS, "compiled data parallel's counters ([reset])"},
    {NULL, NULL, 0, NULL},
};

int oarpy_dist_init(PyObject *m) {
    if (PyType_Ready(&Work_Type) < 0 || PyType_Ready(&DP_Type) < 0 || oarpy_dist_group_init(m) < 0) return -1;
    if (PyModule_AddFunctions(m, dist_functions) < 0) return -1;
    Py_INCREF(&DP_Type);
    if (PyModule_AddObject(m, "DataParallel", (PyObject *)&DP_Type) < 0) return -1;
    Py_INCREF(&Work_Type);
    return PyModule_AddObject(m, "DistWork", (PyObject *)&Work_Type);
}
