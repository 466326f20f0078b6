/* The tracer (see trace.h): op calls become nodes, tensors become values. */
#include "graph/trace.h"
#include "base/device.h"

#include "graph/graph_init.h"
#include "ops/dispatch.h"
#include "profiler/profiler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Open-addressing map from a real tensor to its captured value. */
typedef struct capture_map {
    int cap, n;
    oar_tensor **keys;
    int *vals;
} capture_map;

struct oar_trace {
    uint64_t id;
    oar_program *prog;
    int block;
    capture_map captured;
    const oar_state_source *const *sources;
    int n_sources;
    oar_run_hooks hooks;
    oar_tensor **sym; /* per value: the symbolic tensor standing for it (a reference) */
    int cap_sym;
    bool device_set;  /* prog->device was given or taken from the first tensor seen */
    capture_map moved; /* 0-d host constants -> their copy on the program's device */
    bool host_input;   /* the tensor being captured is an op's host input (stays on the host) */
};

/* Remembers x as the tensor of value v (control flow needs it to take gradients). */
static bool keep_symbol(oar_trace *t, int v, oar_tensor *x) {
    if (v >= t->cap_sym) {
        int cap = t->cap_sym ? t->cap_sym : 256;
        while (cap <= v) cap *= 2;
        void *p = oar_realloc(t->sym, sizeof(oar_tensor *) * (size_t)cap);
        if (!p) return false;
        t->sym = p;
        memset(t->sym + t->cap_sym, 0, sizeof(oar_tensor *) * (size_t)(cap - t->cap_sym));
        t->cap_sym = cap;
    }
    t->sym[v] = oar_retain(x);
    return true;
}

oar_tensor *oar_trace_tensor_of(oar_trace *t, int v) {
    if (v < 0 || v >= t->prog->n_values) return NULL;
    if (t->prog->values[v].tensor) return t->prog->values[v].tensor;
    return v < t->cap_sym ? t->sym[v] : NULL;
}

static uint64_t g_next_id;
static _Thread_local oar_trace *tl_trace;

static size_t slot_of(const capture_map *m, const oar_tensor *t) {
    uintptr_t h = (uintptr_t)t;
    h ^= h >> 17;
    h *= 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 7) & (size_t)(m->cap - 1);
}

static int map_get(const capture_map *m, const oar_tensor *t) {
    if (!m->cap) return -1;
    for (size_t i = slot_of(m, t);; i = (i + 1) & (size_t)(m->cap - 1)) {
        if (!m->keys[i]) return -1;
        if (m->keys[i] == t) return m->vals[i];
    }
}

static bool map_put(capture_map *m, oar_tensor *t, int v) {
    if (2 * (m->n + 1) > m->cap) {
        capture_map bigger = {m->cap ? 2 * m->cap : 64, 0, NULL, NULL};
        bigger.keys = oar_malloc(sizeof(oar_tensor *) * (size_t)bigger.cap);
        bigger.vals = oar_malloc(sizeof(int) * (size_t)bigger.cap);
        if (!bigger.keys || !bigger.vals) {
            free(bigger.keys);
            free(bigger.vals);
            return false;
        }
        for (int i = 0; i < m->cap; i++)
            if (m->keys[i]) map_put(&bigger, m->keys[i], m->vals[i]);
        free(m->keys);
        free(m->vals);
        *m = bigger;
    }
    size_t i = slot_of(m, t);
    while (m->keys[i]) i = (i + 1) & (size_t)(m->cap - 1);
    m->keys[i] = t;
    m->vals[i] = v;
    m->n++;
    return true;
}

void oar_run_hooks_free(oar_run_hooks *h) {
    for (int i = 0; i < h->n; i++)
        if (h->items[i].release) h->items[i].release(h->items[i].user);
    free(h->items);
    memset(h, 0, sizeof *h);
}

oar_trace *oar_trace_current(void) { return tl_trace; }
oar_program *oar_trace_program(oar_trace *t) { return t->prog; }
int oar_trace_block(oar_trace *t) { return t->block; }
void oar_trace_set_device(oar_trace *t, oar_device dev) {
    t->prog->device = dev;
    t->device_set = true;
}

oar_trace *oar_trace_begin(const oar_state_source *const *sources, int n_sources) {
    oar_init();
    if (tl_trace) {
        oar_error(OAR_ERR_STATE, "jit: a trace is already running on this thread; compiled functions called "
                                 "inside a traced function are traced inline");
        return NULL;
    }
    oar_trace *t = OAR_NEW(oar_trace);
    if (!t) return NULL;
    if (!(t->prog = oar_program_new())) {
        free(t);
        return NULL;
    }
    t->id = __atomic_add_fetch(&g_next_id, 1, __ATOMIC_RELAXED);
    t->block = OAR_MAIN_BLOCK;
    t->sources = sources;
    t->n_sources = n_sources;
    tl_trace = t;
    oar_active_trace = t->id;
    return t;
}

oar_tensor *oar_trace_block_input(oar_trace *t, int block, const oar_meta *m, const char *name) {
    int v = oar_program_add_input(t->prog, block, m, name);
    if (v < 0) return NULL;
    oar_tensor *x = oar_tensor_shell(m->dtype, m->shape, m->ndim);
    if (!x) return NULL;
    x->device = t->prog->device;
    x->trace_value = v;
    if (!keep_symbol(t, v, x)) {
        oar_tensor_unref(x);
        return NULL;
    }
    return x;
}

oar_tensor *oar_trace_input(oar_trace *t, const oar_meta *m, uint32_t dyn_dims, const char *name) {
    oar_tensor *x = oar_trace_block_input(t, OAR_MAIN_BLOCK, m, name);
    if (x) t->prog->values[x->trace_value].dyn_dims = dyn_dims;
    return x;
}

/* x's name from the first source that owns it, written to buf; NULL when none does. */
static const char *name_of(const oar_trace *t, const oar_tensor *x, char *buf, size_t size) {
    for (int s = 0; s < t->n_sources; s++) {
        const oar_state_source *src = t->sources[s];
        int n = src->count(src->owner);
        for (int i = 0; i < n; i++) {
            const char *nm = NULL;
            if (src->tensor(src->owner, i, &nm) != x || !nm) continue;
            snprintf(buf, size, "%s%s", src->prefix ? src->prefix : "", nm);
            return buf;
        }
    }
    return NULL;
}

int oar_trace_value(oar_trace *t, oar_tensor *x) {
    if (!x->storage) {
        if (x->trace_id == t->id) return x->trace_value;
        oar_error(OAR_ERR_STATE, "jit: a symbolic tensor from another trace reached '%s'; tensors made while "
                                 "tracing must not be kept between calls", x->trace_op ? x->trace_op : "an op");
        return -1;
    }
    int v = map_get(&t->captured, x);
    if (v >= 0) return v;
    /* one device per program; 0-d host tensors join any program, as they join eager calls */
    bool host_scalar = x->device == OAR_CPU && (x->ndim == 0 || t->host_input);
    if (!host_scalar && !t->device_set) {
        t->prog->device = x->device;
        t->device_set = true;
    }
    if (!host_scalar && x->device != t->prog->device) {
        oar_error(OAR_ERR_INVALID_ARG, "jit: a tensor on %s reached '%s' in a program on %s; a compiled program "
                                       "runs on one device: move the model (oar_module_to) and its inputs to one "
                                       "device before calling it", oar_device_name(x->device),
                  x->trace_op ? x->trace_op : "an op", oar_device_name(t->prog->device));
        return -1;
    }
    /* made during this trace: a constant; made before: state bound by reference */
    oar_value_kind kind = x->trace_id == t->id ? OAR_VAL_CONST : OAR_VAL_PARAM;
    char name[256];
    v = oar_program_add_tensor(t->prog, kind, x, kind == OAR_VAL_PARAM ? name_of(t, x, name, sizeof name) : NULL);
    if (v < 0 || !map_put(&t->captured, x, v)) return -1;
    return v;
}

/* The symbolic outputs of a recorded node; a view's start from its input's layout (view_of).
 * *made counts those made, which the caller releases on failure. */
static oar_status make_symbols(oar_trace *t, const oar_op_def *d, const oar_meta *meta, const int *ids, int n,
                               const oar_tensor *view_of, oar_tensor **out, int *made) {
    *made = 0;
    for (int i = 0; i < n; i++) {
        oar_tensor *x = oar_tensor_shell(meta[i].dtype, meta[i].shape, meta[i].ndim);
        if (!x) return oar_last_status();
        if (view_of) { /* the view's layout, as eager would make it */
            x->offset = view_of->offset;
            memcpy(x->strides, view_of->strides, sizeof x->strides);
        }
        x->device = t->prog->device;
        x->trace_value = ids[i];
        x->trace_op = d->name;
        out[i] = x;
        *made = i + 1;
        if (!keep_symbol(t, ids[i], x)) return OAR_ERR_OOM;
    }
    return OAR_OK;
}

/* Value id for input i of op d in a program on a device: a constant 0-d host tensor the op
 * reads on the device (not one of its host inputs) is copied there once, at tracing, so the
 * compiled kernels read device memory as eager dispatch would have arranged per call. */
static int on_program_device(oar_trace *t, const oar_op_def *d, int i, oar_tensor *x, int v) {
    oar_value *val = &t->prog->values[v];
    if (t->prog->device == OAR_CPU || x->device != OAR_CPU || !x->storage || val->kind != OAR_VAL_CONST ||
        (i < 32 && ((d->host_inputs >> i) & 1u)))
        return v;
    int moved = map_get(&t->moved, x); /* x stays alive: the program holds it as a constant */
    if (moved >= 0) return moved;
    oar_tensor *c = oar_tensor_new_on(t->prog->device, x->dtype, x->shape, x->ndim);
    if (!c || oar_tensor_copy_strided(c, x) != OAR_OK) {
        oar_tensor_unref(c);
        return -1;
    }
    c->trace_id = t->id;
    moved = oar_program_add_tensor(t->prog, OAR_VAL_CONST, c, NULL);
    oar_tensor_unref(c);
    if (moved < 0 || !map_put(&t->moved, x, moved)) return -1;
    return moved;
}

/* A host tensor with data moved to the program's device (torch.arange(T).to(dev), a mask kept
 * on the host) is moved now, at tracing, and enters the program as a device constant: the
 * program stays on one device, and a GPU program never copies from the host per run. Like any
 * constant the tracer meets, the values are those of the tracing call. Not for tensors that
 * need a gradient (their copy must stay a node). Returns true when it folded. */
static bool fold_host_to_device(oar_trace *t, const oar_op_def *d, oar_tensor *const *in, int n_in,
                                const oar_attr *attrs, oar_tensor **out, int *n_out, oar_status *st) {
    if (!(d->flags & OAR_OPF_TO_DEVICE) || !attrs) return false; /* most ops have no attrs to read */
    oar_device to = (oar_device)attrs[0].i;
    if (n_in != 1 || !in[0] || !in[0]->storage || in[0]->requires_grad || in[0]->device != OAR_CPU ||
        to == OAR_CPU || (t->device_set && to != t->prog->device) || *n_out < 1)
        return false;
    oar_tensor *c = oar_tensor_new_on(to, in[0]->dtype, in[0]->shape, in[0]->ndim);
    if (!c || (*st = oar_tensor_copy_strided(c, in[0])) != OAR_OK) {
        if (!c) *st = oar_last_status();
        oar_tensor_unref(c);
        return true;
    }
    if (!t->device_set) {
        t->prog->device = to;
        t->device_set = true;
    }
    c->trace_id = t->id; /* made during this trace: a constant when an op reads it */
    out[0] = c;
    *n_out = 1;
    *st = OAR_OK;
    return true;
}

oar_status oar_trace_op(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *attrs,
                        oar_tensor **out, int *n_out) {
    oar_trace *t = tl_trace;
    const oar_op_def *d = oar_op_table[op];
    oar_status folded;
    if (fold_host_to_device(t, d, in, n_in, attrs, out, n_out, &folded)) return folded;
    oar_meta meta[OAR_MAX_OUTPUTS];
    int n = 0;
    oar_status st = oar_op_infer_symbolic(op, in, n_in, attrs, meta, &n);
    if (st != OAR_OK) return st;
    if (n > *n_out)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: produces %d outputs but room was given for %d", d->name, n,
                         *n_out);
    int ids[OAR_MAX_INPUTS];
    for (int i = 0; i < n_in; i++) {
        t->host_input = i < 32 && ((d->host_inputs >> i) & 1u);
        ids[i] = in[i] ? oar_trace_value(t, in[i]) : -1;
        t->host_input = false;
        if (in[i] && ids[i] < 0) return oar_last_status();
        if (in[i] && i < 32 && ((d->mutated_inputs >> i) & 1u)) {
            oar_value *v = &t->prog->values[ids[i]];
            if (v->kind != OAR_VAL_PARAM && v->kind != OAR_VAL_CONST)
                return oar_error(OAR_ERR_STATE, "%s: writes its input %d in place; inside a traced function that "
                                                "input must be a parameter, buffer or state made outside it",
                                 d->name, i);
            v->kind = OAR_VAL_PARAM; /* written at every run: never folded */
        }
        if (in[i] && (ids[i] = on_program_device(t, d, i, in[i], ids[i])) < 0) return oar_last_status();
    }
    if ((d->flags & OAR_OPF_TO_DEVICE) && (oar_device)attrs[0].i != t->prog->device)
        return oar_error(OAR_ERR_INVALID_ARG, "jit: to_device moves a tensor to %s inside a program on %s; a "
                                              "compiled program runs on one device: move its inputs before the "
                                              "call and its outputs after it",
                         oar_device_name((oar_device)attrs[0].i), oar_device_name(t->prog->device));
    int out_ids[OAR_MAX_OUTPUTS];
    int node = oar_program_add_node(t->prog, t->block, op, ids, n_in, attrs, meta, n, out_ids);
    if (node < 0) return oar_last_status();
    t->prog->nodes[node].phase = oar_prof_current_phase();
    int made = 0;
    if ((st = make_symbols(t, d, meta, out_ids, n, d->flags & OAR_OPF_VIEW ? in[0] : NULL, out, &made)) != OAR_OK)
        goto fail;
    if (d->flags & OAR_OPF_VIEW) {
        if ((st = d->view(in, n_in, attrs, out, n)) != OAR_OK) goto fail;
        for (int i = 0; i < n; i++) oar_tensor_refresh(out[i]);
    }
    if ((st = oar_dispatch_record(op, in, n_in, attrs, out, n)) != OAR_OK) goto fail;
    *n_out = n;
    return OAR_OK;
fail:
    for (int i = 0; i < made; i++) oar_tensor_unref(out[i]);
    return st;
}

int oar_trace_push_block(oar_trace *t) {
    int b = oar_program_add_block(t->prog, t->block);
    if (b >= 0) t->block = b;
    return b;
}

void oar_trace_pop_block(oar_trace *t) { t->block = t->prog->blocks[t->block].parent; }

oar_status oar_trace_add_run_hook(oar_run_pre_hook pre, oar_run_hook post, oar_run_hook release, void *user) {
    oar_trace *t = tl_trace;
    if (!t) return OAR_OK;
    oar_run_hooks *h = &t->hooks;
    for (int i = 0; i < h->n; i++)
        if (h->items[i].pre == pre && h->items[i].post == post && h->items[i].user == user) return OAR_OK;
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 4;
        void *p = oar_realloc(h->items, sizeof *h->items * (size_t)cap);
        if (!p) return OAR_ERR_OOM;
        h->items = p;
        h->cap = cap;
    }
    h->items[h->n++] = (struct oar_run_hook_entry){pre, post, release, user};
    return OAR_OK;
}

/* Parameters whose .grad is a symbol of this trace: the program writes it after each run. */
static oar_status collect_grad_writes(oar_trace *t) {
    for (int v = 0; v < t->prog->n_values; v++) {
        oar_value *val = &t->prog->values[v];
        if (val->kind != OAR_VAL_PARAM || !val->tensor) continue;
        oar_tensor *p = val->tensor, *g = p->grad;
        if (!g || g->storage) continue;
        int gv = oar_trace_value(t, g);
        if (gv < 0) return oar_last_status();
        oar_status st = oar_program_add_grad_write(t->prog, gv, p);
        if (st != OAR_OK) return st;
    }
    return OAR_OK;
}

/* Drops every symbol the trace left on captured tensors (gradients), so nothing symbolic
 * outlives the trace. */
static void drop_symbolic_grads(oar_trace *t) {
    for (int v = 0; v < t->prog->n_values; v++) {
        oar_tensor *p = t->prog->values[v].tensor;
        if (p && p->grad && !p->grad->storage) {
            oar_tensor_unref(p->grad);
            p->grad = NULL;
        }
    }
}

oar_status oar_trace_end(oar_trace *t, oar_status status, oar_tensor *const *outputs, int n_out,
                         oar_program **program, oar_run_hooks *hooks) {
    oar_status st = status;
    for (int i = 0; st == OAR_OK && i < n_out; i++) {
        if (!outputs[i]) {
            st = oar_error(OAR_ERR_INVALID_ARG, "jit: the traced function left output %d NULL", i);
            break;
        }
        int v = oar_trace_value(t, outputs[i]);
        if (v < 0) st = oar_last_status();
        else st = oar_program_add_output(t->prog, OAR_MAIN_BLOCK, v);
    }
    if (st == OAR_OK) st = collect_grad_writes(t);
    drop_symbolic_grads(t);
    for (int v = 0; v < t->cap_sym; v++) oar_tensor_unref(t->sym[v]);
    free(t->sym);
    tl_trace = NULL;
    oar_active_trace = 0;
    free(t->captured.keys);
    free(t->captured.vals);
    free(t->moved.keys);
    free(t->moved.vals);
    if (st == OAR_OK) {
        *program = t->prog;
        *hooks = t->hooks;
    } else {
        oar_program_free(t->prog);
        oar_run_hooks_free(&t->hooks);
    }
    free(t);
    return st;
}

/* An op's result as an internal reference: out of the caller's scope, which would release it a
 * second time at its end, and released here with oar_tensor_unref */
static oar_tensor *owned(oar_tensor *x) {
    if (x) oar_scope_forget(x);
    return x;
}

/* copy_(dst, src) while tracing, dst a symbolic tensor this trace made (an in-place op under no_grad:
 * `out += identity`, `y.relu_()`, `y.zero_()`). A program value is written once, so dst now stands
 * for a new value, src cast and broadcast to dst's dtype and shape (copied unless it is a fresh
 * node result: never an alias of state a later op could write): what eager copy_ leaves in dst, seen by every
 * holder of dst as the written data would be. Refused where the write would have to reach another
 * tensor: dst is a view (its base would keep the old values), views of dst exist (so would they),
 * or dst is an argument of the function (the program does not write its caller's tensors). */
static oar_status trace_assign(oar_tensor *dst, const oar_tensor *src) {
    oar_trace *t = tl_trace;
    if (!t || dst->trace_id != t->id) return oar_symbolic_error("copy_", dst);
    /* with gradients on, an autograd node may have saved dst (w * dst saves it for w's gradient), and
     * a symbolic tensor has no version counter to tell it was overwritten: refused */
    if (oar_grad_enabled())
        return oar_error(OAR_ERR_STATE, "copy_: writing in place into a tensor made by '%s' in a function being "
                                        "traced by oar_jit_to_static is supported without gradients only (under "
                                        "no_grad); compute a new tensor instead", dst->trace_op ? dst->trace_op : "?");
    const oar_program *p = t->prog;
    int old = dst->trace_value;
    const oar_value *ov = &p->values[old];
    const char *made_by = dst->trace_op ? dst->trace_op : "an op";
    if (ov->kind != OAR_VAL_NODE)
        return oar_error(OAR_ERR_STATE, "copy_: writing in place into an argument of a function being traced by "
                                        "oar_jit_to_static: the program does not write its caller's tensors; "
                                        "compute a new tensor and return it instead");
    if (oar_op_table[p->nodes[ov->node].op]->flags & OAR_OPF_VIEW)
        return oar_error(OAR_ERR_STATE, "copy_: writing in place into a view (made by '%s') in a function being "
                                        "traced by oar_jit_to_static: the write would have to reach the tensor it "
                                        "views; compute a new tensor instead (torch.where, cat)", made_by);
    for (int i = 0; i < p->n_nodes; i++) {
        const oar_node *n = &p->nodes[i];
        if (!n->dead && n->n_in > 0 && n->in[0] == old && (oar_op_table[n->op]->flags & OAR_OPF_VIEW))
            return oar_error(OAR_ERR_STATE, "copy_: writing in place into a tensor (made by '%s') that has views "
                                            "(one made by '%s') in a function being traced by oar_jit_to_static: "
                                            "the views would keep the old values; compute a new tensor instead",
                             made_by, oar_op_table[n->op]->name);
    }
    oar_tensor *c = oar_retain((oar_tensor *)src), *x;
    if (c->dtype != dst->dtype) {
        x = owned(oar_cast(c, dst->dtype));
        oar_tensor_unref(c);
        if (!(c = x)) return oar_last_status();
    }
    if (c->ndim != dst->ndim || memcmp(c->shape, dst->shape, sizeof(int64_t) * (size_t)dst->ndim)) {
        x = owned(oar_expand(c, dst->shape, dst->ndim)); /* oar_copy_ checked that src broadcasts to dst */
        oar_tensor_unref(c);
        if (!(c = x)) return oar_last_status();
    }
    /* a fresh node result (the residual's `add`) is taken as it is: values are never written, so
     * sharing one is safe; state, constants and views are copied */
    const oar_value *cv = c->storage ? NULL : &p->values[c->trace_value];
    bool fresh = cv && c != dst && cv->kind == OAR_VAL_NODE && c->contiguous &&
                 !(oar_op_table[p->nodes[cv->node].op]->flags & OAR_OPF_VIEW);
    x = fresh ? oar_retain(c) : owned(oar_clone(c));
    oar_tensor_unref(c);
    if (!x) return oar_last_status();
    dst->trace_value = x->trace_value;
    dst->offset = x->offset;
    memcpy(dst->strides, x->strides, sizeof dst->strides);
    dst->contiguous = x->contiguous;
    dst->trace_op = x->trace_op;
    oar_tensor_unref(x); /* the trace keeps x's symbol for its value */
    return OAR_OK;
}

void oar_graph_init(void) {
    oar_dispatch_set_tracer(oar_trace_op);
    oar_dispatch_set_trace_assign(trace_assign);
}

oar_status oar_trace_emit(oar_trace *t, oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *attrs,
                          const oar_meta *meta, int n_out, const int *blocks, int n_blocks, oar_tensor **out) {
    const oar_op_def *d = oar_op_table[op];
    int ids[OAR_MAX_INPUTS];
    for (int i = 0; i < n_in; i++)
        if ((ids[i] = oar_trace_value(t, in[i])) < 0) return oar_last_status();
    int out_ids[OAR_MAX_OUTPUTS];
    int node = oar_program_add_node(t->prog, t->block, op, ids, n_in, attrs, meta, n_out, out_ids);
    if (node < 0) return oar_last_status();
    oar_node *n = &t->prog->nodes[node];
    n->phase = oar_prof_current_phase();
    n->blocks = oar_arena_alloc(t->prog->arena, sizeof(int) * (size_t)(n_blocks + 1));
    if (!n->blocks) return OAR_ERR_OOM;
    memcpy(n->blocks, blocks, sizeof(int) * (size_t)n_blocks);
    n->n_blocks = n_blocks;
    int made = 0;
    oar_status st = make_symbols(t, d, meta, out_ids, n_out, NULL, out, &made);
    if (st != OAR_OK) goto fail;
    if ((st = oar_dispatch_record(op, in, n_in, attrs, out, n_out)) == OAR_OK) return OAR_OK;
fail:
    for (int i = 0; i < made; i++) oar_tensor_unref(out[i]);
    return st;
}

void *oar_trace_alloc(oar_trace *t, size_t nbytes) { return oar_arena_alloc(t->prog->arena, nbytes); }
