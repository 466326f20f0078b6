/* The backward engine. It finds every node reachable from the roots, counts how many edges
 * lead into each, and runs a node once all the gradients flowing into it have arrived, so
 * each rule runs exactly once per pass. oar_backward accumulates into leaves' .grad;
 * oar_grad captures the gradients of chosen tensors instead. */
#include "autograd/autograd.h"
#include "ops/dispatch.h"
#include "profiler/profiler.h"

#include <stdlib.h>
#include <string.h>

typedef struct run_info {
    int deps;
    oar_tensor **buf; /* summed gradient per output */
} run_info;

typedef struct capture {
    oar_tensor *leaf;   /* capture at a leaf ... */
    oar_node *node;     /* ... or at (node, output_nr) */
    int output_nr;
    oar_tensor *grad;
} capture;

/* A leaf's incoming gradients are summed, then delivered once (hooks see the total). */
typedef struct leaf_info {
    oar_tensor *leaf;
    int deps;
    oar_tensor *buf;
} leaf_info;

typedef struct engine {
    bool create_graph, retain_graph;
    leaf_info *leaves;
    int n_leaves, cap_leaves;
    capture *caps;      /* oar_grad: where to capture; NULL for backward */
    int n_caps;
    oar_node **nodes;   /* every reachable node */
    int n_nodes, cap_nodes;
} engine;

/* Untracked op call for the engine's own arithmetic. */
static oar_tensor *call2(oar_op_id op, oar_tensor *a, oar_tensor *b) {
    oar_tensor *in[2] = {a, b}, *out[1];
    int n = 1;
    return oar_op_call(op, in, 2, NULL, out, &n) == OAR_OK ? out[0] : NULL;
}

/* acc <- acc + g, consuming the reference to g. */
static oar_status accumulate(oar_tensor **acc, oar_tensor *g) {
    if (!*acc) {
        *acc = g;
        return OAR_OK;
    }
    oar_tensor *s = call2(OAR_OP_add, *acc, g);
    oar_tensor_unref(g);
    if (!s) return oar_last_status();
    oar_tensor_unref(*acc);
    *acc = s;
    return OAR_OK;
}

static oar_status run_hooks(oar_hook_entry *h, oar_tensor **g) {
    for (; h && *g; h = h->next) {
        oar_scope_begin();
        oar_tensor *r = h->fn(*g, h->user);
        if (r) oar_retain(r);
        oar_scope_end();
        if (r) {
            if (r->ndim != (*g)->ndim || memcmp(r->shape, (*g)->shape, sizeof(int64_t) * (size_t)r->ndim)) {
                oar_tensor_unref(r);
                return oar_error(OAR_ERR_SHAPE, "backward: a gradient hook returned a tensor of a "
                                                "different shape than the gradient it was given");
            }
            oar_tensor_unref(*g);
            *g = r;
        }
    }
    return OAR_OK;
}

static oar_status push_node(engine *e, oar_node *n) {
    if (n->run) {
        ((run_info *)n->run)->deps++;
        return OAR_OK;
    }
    run_info *ri = oar_malloc(sizeof(run_info) + sizeof(oar_tensor *) * (size_t)n->n_out);
    if (!ri) return OAR_ERR_OOM;
    ri->buf = (oar_tensor **)(ri + 1);
    n->run = ri;
    if (e->n_nodes == e->cap_nodes) {
        int cap = e->cap_nodes ? e->cap_nodes * 2 : 64;
        oar_node **nodes = oar_realloc(e->nodes, sizeof(*nodes) * (size_t)cap);
        if (!nodes) return OAR_ERR_OOM;
        e->nodes = nodes;
        e->cap_nodes = cap;
    }
    e->nodes[e->n_nodes++] = n;
    return OAR_OK;
}

static leaf_info *find_leaf(engine *e, oar_tensor *leaf) {
    for (int i = 0; i < e->n_leaves; i++)
        if (e->leaves[i].leaf == leaf) return &e->leaves[i];
    return NULL;
}

static oar_status count_leaf(engine *e, oar_tensor *leaf) {
    leaf_info *li = find_leaf(e, leaf);
    if (!li) {
        if (e->n_leaves == e->cap_leaves) {
            int cap = e->cap_leaves ? e->cap_leaves * 2 : 32;
            leaf_info *l = oar_realloc(e->leaves, sizeof(*l) * (size_t)cap);
            if (!l) return OAR_ERR_OOM;
            e->leaves = l;
            e->cap_leaves = cap;
        }
        li = &e->leaves[e->n_leaves++];
        *li = (leaf_info){.leaf = leaf};
    }
    li->deps++;
    return OAR_OK;
}

/* Discovers all reachable nodes and leaves; deps counts edges from reachable nodes. */
static oar_status discover(engine *e, int first) {
    for (int k = first; k < e->n_nodes; k++) {
        oar_node *n = e->nodes[k];
        for (int i = 0; i < n->n_in; i++) {
            oar_status st = OAR_OK;
            if (n->edges[i].node) st = push_node(e, n->edges[i].node);
            else if (n->edges[i].leaf) st = count_leaf(e, n->edges[i].leaf);
            if (st != OAR_OK) return st;
        }
    }
    return OAR_OK;
}

static capture *find_leaf_capture(engine *e, oar_tensor *leaf) {
    for (int i = 0; i < e->n_caps; i++)
        if (e->caps[i].leaf == leaf) return &e->caps[i];
    return NULL;
}

/* A gradient reached a leaf: run its hooks, then capture it or add it to .grad. */
static oar_status deliver_to_leaf(engine *e, oar_tensor *leaf, oar_tensor *g) {
    oar_status st = run_hooks(leaf->hooks, &g);
    if (st != OAR_OK) {
        oar_tensor_unref(g);
        return st;
    }
    if (e->caps) {
        capture *c = find_leaf_capture(e, leaf);
        if (c) return accumulate(&c->grad, g);
        oar_tensor_unref(g);
        return OAR_OK;
    }
    if (oar_active_trace && leaf->grad && leaf->grad->storage) {
        oar_tensor_unref(g);
        return oar_error(OAR_ERR_STATE, "backward: while tracing, a parameter already holds a gradient, which "
                                        "the compiled function would add to only at tracing; call zero_grad "
                                        "inside the function before backward (or before each call)");
    }
    if (!leaf->grad) {
        if (e->create_graph || !g->storage || (g->refcount == 1 && g->contiguous && !g->grad_fn)) {
            leaf->grad = g;
        } else {
            leaf->grad = oar_tensor_contiguous_copy(g);
            oar_tensor_unref(g);
            if (!leaf->grad) return OAR_ERR_OOM;
        }
        return OAR_OK;
    }
    if (e->create_graph || !g->storage) return accumulate(&leaf->grad, g);
    /* in place: leaf.grad += g */
    oar_tensor *in[2] = {leaf->grad, g};
    const oar_kernel_entry *k = oar_select_kernel(OAR_OP_add, in, 2, &leaf->grad, 1, NULL);
    int64_t t0 = oar_prof_spans_on() ? oar_prof_now() : 0;
    st = k ? oar_op_run_kernel(OAR_OP_add, k, in, 2, &leaf->grad, 1, NULL) : oar_last_status();
    if (t0 && st == OAR_OK) oar_prof_kernel_end("add_", k->impl, in, 2, &leaf->grad, 1, t0);
    if (st == OAR_OK && oar_prof_check_on())
        st = oar_check_outputs("add_ (gradient accumulation)", in, 2, &leaf->grad, 1);
    leaf->grad->storage->version++;
    oar_tensor_unref(g);
    return st;
}

static oar_status check_saved(oar_node *n) {
    const oar_op_def *d = oar_op_table[n->op];
    if (n->released)
        return oar_error(OAR_ERR_STATE, "backward: trying to go through the graph of '%s' a second "
                                        "time, but its saved tensors were freed; pass retain_graph = "
                                        "true to the first backward if you need a second one", d->name);
    for (int i = 0; i < n->n_in; i++) {
        oar_tensor *x = n->saved_in[i];
        if (x && x->storage && x->storage->version != n->in_version[i])
            return oar_error(OAR_ERR_STATE, "backward: input %d of '%s' was modified in place after "
                                            "it was used; its gradient would be wrong. Clone the tensor "
                                            "before modifying it", i, d->name);
    }
    return OAR_OK;
}

/* Runs one node's gradient rule and sends the results along its edges. */
static int g_detect_anomaly;
void oar_set_detect_anomaly(bool on) { __atomic_store_n(&g_detect_anomaly, on ? 1 : 0, __ATOMIC_RELAXED); }
bool oar_detect_anomaly_enabled(void) { return __atomic_load_n(&g_detect_anomaly, __ATOMIC_RELAXED) != 0; }

/* Anomaly detection: the first gradient of this rule holding a NaN fails the backward. */
static oar_status check_anomaly(const oar_op_def *d, oar_tensor *const *gin, const bool *needs, int n_in) {
    for (int i = 0; i < n_in; i++)
        if (needs[i] && gin[i] && oar_count_nan(gin[i]) > 0)
            return oar_error(OAR_ERR_NUMERIC, "Function '%sBackward' returned nan values in its %dth output.",
                             d->name, i);
    return OAR_OK;
}

static oar_status run_node(engine *e, oar_node *n, oar_node **ready, int *n_ready) {
    run_info *ri = n->run;
    const oar_op_def *d = oar_op_table[n->op];
    oar_status st = OAR_OK;
    bool any = false;
    for (int o = 0; o < n->n_out; o++) {
        if (!ri->buf[o]) continue;
        st = run_hooks(n->out_hooks[o], &ri->buf[o]);
        if (st != OAR_OK) return st;
        for (int c = 0; c < e->n_caps; c++) {
            if (e->caps[c].node == n && e->caps[c].output_nr == o) {
                st = accumulate(&e->caps[c].grad, oar_retain(ri->buf[o]));
                if (st != OAR_OK) return st;
            }
        }
        any = true;
    }
    oar_tensor *gin[OAR_MAX_INPUTS] = {0};
    bool needs[OAR_MAX_INPUTS] = {0};
    if (any) {
        if ((st = check_saved(n)) != OAR_OK) return st;
        if (!d->grad)
            return oar_error(OAR_ERR_UNSUPPORTED, "backward: '%s' has no gradient rule", d->name);
        bool any_need = false;
        for (int i = 0; i < n->n_in; i++) any_need |= needs[i] = n->edges[i].node || n->edges[i].leaf;
        if (any_need) {
            /* outputs as seen by the rule: with create_graph they lead back to this node */
            oar_tensor *outs[OAR_MAX_OUTPUTS] = {0};
            for (int o = 0; o < n->n_out; o++) {
                if (!n->saved_out[o]) continue;
                outs[o] = oar_tensor_alias(n->saved_out[o]);
                if (outs[o] && e->create_graph && oar_dtypes[outs[o]->dtype].is_float) {
                    outs[o]->requires_grad = true;
                    outs[o]->grad_fn = &n->h;
                    outs[o]->output_nr = o;
                    oar_node_header_retain(&n->h);
                }
            }
            bool prev = oar_set_grad_enabled(e->create_graph);
            oar_scope_begin();
            oar_grad_ctx g = {.attrs = n->attrs, .in = n->saved_in, .n_in = n->n_in, .out = outs,
                              .n_out = n->n_out, .gout = ri->buf, .needs = needs, .gin = gin};
            uint64_t nan_failures = oar_prof_check_on() ? oar_prof_nan_failures() : 0;
            uint64_t errors = oar_error_serial();
            st = d->grad(&g);
            if (st == OAR_OK && oar_prof_check_on() && oar_prof_nan_failures() != nan_failures)
                st = OAR_ERR_NUMERIC; /* an op of the rule made a NaN/Inf (its result, NULL, would read as zero) */
            /* a needed gradient left NULL after an op of the rule failed is that failure, not zero */
            for (int i = 0; i < n->n_in && st == OAR_OK; i++)
                if (needs[i] && !gin[i] && oar_error_serial() != errors)
                    st = oar_last_status() != OAR_OK ? oar_last_status() : OAR_ERR_INTERNAL;
            if (st == OAR_OK && oar_detect_anomaly_enabled()) st = check_anomaly(d, gin, needs, n->n_in);
            for (int i = 0; i < n->n_in; i++) {
                if (st == OAR_OK && gin[i] && needs[i]) oar_retain(gin[i]);
                else gin[i] = NULL;
            }
            oar_scope_end();
            oar_set_grad_enabled(prev);
            for (int o = 0; o < n->n_out; o++) oar_tensor_unref(outs[o]);
            if (st != OAR_OK) {
                oar_error_prefix("backward of %s", d->name);
                return st;
            }
        }
    }
    for (int i = 0; i < n->n_in && st == OAR_OK; i++) {
        oar_tensor *x = n->saved_in[i];
        if (gin[i] && x && (gin[i]->ndim != x->ndim || gin[i]->dtype != x->dtype ||
                            memcmp(gin[i]->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim))) {
            char a[128], b[128];
            oar_format_shape(x->shape, x->ndim, a, sizeof a);
            oar_format_shape(gin[i]->shape, gin[i]->ndim, b, sizeof b);
            st = oar_error(OAR_ERR_INTERNAL, "backward of %s: the gradient rule returned shape %s %s "
                                             "for input %d of shape %s %s; please report this", d->name,
                           b, oar_dtype_name(gin[i]->dtype), i, a, oar_dtype_name(x->dtype));
            break;
        }
        oar_edge *ed = &n->edges[i];
        if (ed->node) {
            run_info *ci = ed->node->run;
            if (gin[i]) {
                st = accumulate(&ci->buf[ed->output_nr], gin[i]);
                gin[i] = NULL;
            }
            if (--ci->deps == 0) ready[(*n_ready)++] = ed->node;
        } else if (ed->leaf) {
            leaf_info *li = find_leaf(e, ed->leaf);
            if (gin[i]) {
                st = accumulate(&li->buf, gin[i]);
                gin[i] = NULL;
            }
            if (--li->deps == 0 && li->buf && st == OAR_OK) {
                st = deliver_to_leaf(e, li->leaf, li->buf);
                li->buf = NULL;
            }
        }
    }
    for (int i = 0; i < n->n_in; i++) oar_tensor_unref(gin[i]);
    if (!e->retain_graph) oar_node_release_saved(n);
    return st;
}

static oar_status run_engine(engine *e, oar_tensor *const *roots, oar_tensor *const *root_grads, int n_roots) {
    oar_status st = OAR_OK;
    /* gradient rules run without autocast: each gradient keeps its input's dtype */
    const oar_amp_policy *amp = oar_dispatch_set_amp(NULL);
    for (int r = 0; r < n_roots && st == OAR_OK; r++)
        if (roots[r]->grad_fn) st = push_node(e, (oar_node *)roots[r]->grad_fn);
    /* roots were pushed with deps counted for duplicates; reset before counting edges */
    for (int k = 0; k < e->n_nodes; k++) ((run_info *)e->nodes[k]->run)->deps = 0;
    if (st == OAR_OK) st = discover(e, 0);
    for (int r = 0; r < n_roots && st == OAR_OK; r++) {
        oar_tensor *g = oar_retain(root_grads[r]);
        if (roots[r]->grad_fn) {
            run_info *ri = ((oar_node *)roots[r]->grad_fn)->run;
            st = accumulate(&ri->buf[roots[r]->output_nr], g);
        } else {
            leaf_info *li = find_leaf(e, roots[r]);
            if (!li && (st = count_leaf(e, roots[r])) == OAR_OK) {
                li = find_leaf(e, roots[r]);
                li->deps = 0; /* a root, not an edge */
            }
            if (st == OAR_OK) st = accumulate(&li->buf, g);
            else oar_tensor_unref(g);
        }
    }
    for (int l = 0; l < e->n_leaves && st == OAR_OK; l++) {
        if (e->leaves[l].deps == 0 && e->leaves[l].buf) {
            st = deliver_to_leaf(e, e->leaves[l].leaf, e->leaves[l].buf);
            e->leaves[l].buf = NULL;
        }
    }
    oar_node **ready = NULL;
    if (st == OAR_OK && e->n_nodes) {
        ready = oar_malloc(sizeof(*ready) * (size_t)e->n_nodes);
        if (!ready) st = OAR_ERR_OOM;
    }
    int n_ready = 0;
    for (int k = 0; k < e->n_nodes && st == OAR_OK; k++)
        if (((run_info *)e->nodes[k]->run)->deps == 0) ready[n_ready++] = e->nodes[k];
    while (n_ready > 0 && st == OAR_OK) {
        /* prefer the most recently created ready node: it frees memory soonest */
        int best = 0;
        for (int k = 1; k < n_ready; k++)
            if (ready[k]->seq > ready[best]->seq) best = k;
        oar_node *n = ready[best];
        ready[best] = ready[--n_ready];
        st = run_node(e, n, ready, &n_ready);
    }
    free(ready);
    for (int k = 0; k < e->n_nodes; k++) {
        oar_node *n = e->nodes[k];
        run_info *ri = n->run;
        for (int o = 0; o < n->n_out; o++) oar_tensor_unref(ri->buf[o]);
        free(ri);
        n->run = NULL;
    }
    free(e->nodes);
    for (int l = 0; l < e->n_leaves; l++) oar_tensor_unref(e->leaves[l].buf);
    free(e->leaves);
    oar_dispatch_set_amp(amp);
    return st;
}

/* Checks the roots and makes the implicit gradient (ones) of one-element roots. */
static oar_status prepare_roots(const char *who, oar_tensor *const *roots, oar_tensor *const *given,
                                int n, oar_tensor **grads) {
    for (int r = 0; r < n; r++) {
        oar_tensor *t = roots[r];
        if (!t) return oar_last_status() != OAR_OK ? oar_last_status()
                                                   : oar_error(OAR_ERR_INVALID_ARG, "%s: output %d is NULL", who, r);
        if (!t->requires_grad)
            return oar_error(OAR_ERR_STATE, "%s: output %d does not require grad and has no grad_fn; "
                                            "did you forget oar_set_requires_grad on the parameters, or "
                                            "run the forward pass in no-grad mode?", who, r);
        oar_tensor *g = given ? given[r] : NULL;
        if (g) {
            if (g->ndim != t->ndim || g->dtype != t->dtype ||
                memcmp(g->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim)) {
                char a[128], b[128];
                oar_format_shape(t->shape, t->ndim, a, sizeof a);
                oar_format_shape(g->shape, g->ndim, b, sizeof b);
                return oar_error(OAR_ERR_SHAPE, "%s: expected the gradient of output %d to have shape %s "
                                                "and dtype %s, got %s %s", who, r, a,
                                 oar_dtype_name(t->dtype), b, oar_dtype_name(g->dtype));
            }
            grads[r] = oar_retain(g);
        } else {
            if (t->numel != 1) {
                char a[128];
                oar_format_shape(t->shape, t->ndim, a, sizeof a);
                return oar_error(OAR_ERR_SHAPE, "%s: a gradient can be created implicitly only for "
                                                "one-element outputs, got shape %s; pass the gradient "
                                                "of the output explicitly", who, a);
            }
            grads[r] = oar_tensor_new_on(t->device, t->dtype, t->shape, t->ndim);
            if (!grads[r]) return OAR_ERR_OOM;
            oar_status st = oar_tensor_fill(grads[r], 1.0);
            if (st != OAR_OK) return st;
        }
    }
    return OAR_OK;
}

oar_status oar_backward(oar_tensor *root, oar_tensor *grad_root, bool retain_graph) {
    OAR_CHECK_HANDLE("backward", root, oar_last_status());
    OAR_CHECK_HANDLE("backward (grad_root)", grad_root, oar_last_status());
    oar_tensor *g = NULL;
    oar_status st = prepare_roots("backward", &root, grad_root ? &grad_root : NULL, 1, &g);
    if (st == OAR_OK) {
        engine e = {.retain_graph = retain_graph};
        oar_prof_push("backward");
        st = run_engine(&e, &root, &g, 1);
        oar_prof_pop();
    }
    oar_tensor_unref(g);
    return st;
}

oar_status oar_grad(oar_tensor *const *outputs, int n_outputs, oar_tensor *const *grad_outputs,
                    oar_tensor *const *inputs, int n_inputs, oar_tensor **grads,
                    const oar_grad_opts *opts) {
    if ((outputs && oar_check_handles("grad", "output", outputs, n_outputs) != OAR_OK) ||
        (inputs && oar_check_handles("grad", "input", inputs, n_inputs) != OAR_OK) ||
        (grad_outputs && oar_check_handles("grad", "grad_output", grad_outputs, n_outputs) != OAR_OK))
        return oar_last_status();
    oar_grad_opts o = opts ? *opts : (oar_grad_opts){0};
    if (n_outputs < 1 || n_inputs < 1 || n_outputs > OAR_MAX_INPUTS || !outputs || !inputs || !grads)
        return oar_error(OAR_ERR_INVALID_ARG, "grad: expected 1..%d outputs and at least one input, "
                                              "got %d outputs and %d inputs", OAR_MAX_INPUTS, n_outputs, n_inputs);
    for (int i = 0; i < n_inputs; i++) {
        grads[i] = NULL;
        if (!inputs[i] || !inputs[i]->requires_grad)
            return oar_error(OAR_ERR_STATE, "grad: input %d does not require grad; gradients can only "
                                            "be taken with respect to tensors that require grad", i);
    }
    oar_tensor *root_grads[OAR_MAX_INPUTS] = {0};
    capture *caps = oar_malloc(sizeof(capture) * (size_t)n_inputs);
    if (!caps) return OAR_ERR_OOM;
    for (int i = 0; i < n_inputs; i++) {
        if (inputs[i]->grad_fn) {
            caps[i].node = (oar_node *)inputs[i]->grad_fn;
            caps[i].output_nr = inputs[i]->output_nr;
        } else {
            caps[i].leaf = inputs[i];
        }
    }
    oar_status st = prepare_roots("grad", outputs, grad_outputs, n_outputs, root_grads);
    if (st == OAR_OK) {
        engine e = {.create_graph = o.create_graph, .retain_graph = o.retain_graph || o.create_graph,
                    .caps = caps, .n_caps = n_inputs};
        oar_prof_push("backward");
        st = run_engine(&e, outputs, root_grads, n_outputs);
        oar_prof_pop();
    }
    for (int r = 0; r < n_outputs; r++) oar_tensor_unref(root_grads[r]);
    for (int i = 0; i < n_inputs; i++) {
        if (st == OAR_OK && !caps[i].grad && !o.allow_unused)
            st = oar_error(OAR_ERR_STATE, "grad: input %d was not used to compute the outputs; pass "
                                          "allow_unused = true to get NULL for it", i);
    }
    for (int i = 0; i < n_inputs; i++) {
        oar_tensor *g = caps[i].grad;
        if (st == OAR_OK && g && g->scope) {
            /* the same tensor answers two inputs (e.g. both operands of an add): give the
             * second its own handle, so each returned reference is owned exactly once */
            oar_tensor *h = oar_tensor_alias(g);
            if (h) {
                h->requires_grad = g->requires_grad;
                h->grad_fn = g->grad_fn;
                h->output_nr = g->output_nr;
                oar_node_header_retain(g->grad_fn);
            }
            oar_tensor_unref(g);
            g = h;
            if (!g) st = OAR_ERR_OOM;
        }
        if (st == OAR_OK) grads[i] = oar_track(g);
        else oar_tensor_unref(g);
    }
    free(caps);
    return st;
}
