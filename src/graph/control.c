/* oar_cond and oar_while: the same call works eagerly (a C branch or loop on the tensor's
 * value, with the tape recording whatever runs) and while tracing (a node whose sub-blocks are
 * the traced branch or body functions).
 *
 * Gradients in programs come from the nodes' rules, built at tracing time from the user's own
 * functions: the rule of cond is a cond whose branches recompute their forward pass and take
 * its vector-Jacobian product (oar_grad); the rule of while_loop walks the iterations backwards,
 * recomputing the state of iteration k from the initial one with an inner loop (O(T^2) body
 * runs for T iterations, no stored states). Values a branch or body reads from outside (such
 * as parameters) are extra inputs of the node, so their gradients flow too. */
#include "graph/trace.h"

#include <stdlib.h>
#include <string.h>

#define CTL_MAX 16 /* loop variables, branch inputs and outputs, free variables */

/* What the rules need to differentiate a traced branch or body again. */
typedef struct closure {
    oar_block_fn fn[2]; /* cond: then, else; while: cond, body */
    void *user;
    int n_in, n_out;    /* cond: branch inputs and outputs; while: loop variables (both) */
    int n_free;
    oar_tensor *free[CTL_MAX]; /* outer tensors the blocks read that require grad */
} closure;

static bool differentiable(const oar_tensor *x) { return x && oar_dtype_is_float(x->dtype); }

/* ---- tracing a block */

/* Values read inside block b (or blocks nested in it) but defined outside it. */
static bool defined_within(const oar_program *p, int value_block, int b) {
    for (int x = value_block; x >= 0; x = p->blocks[x].parent)
        if (x == b) return true;
    return false;
}

/* Adds to c the tensors that block b reads from outside and that require grad. */
static oar_status collect_free(oar_trace *t, int b, closure *c) {
    const oar_program *p = oar_trace_program(t);
    for (int i = 0; i < p->n_nodes; i++) {
        const oar_node *n = &p->nodes[i];
        if (!defined_within(p, n->block, b)) continue;
        for (int k = 0; k < n->n_in; k++) {
            int v = n->in[k];
            if (v < 0 || (defined_within(p, p->values[v].block, b) && p->values[v].kind != OAR_VAL_PARAM &&
                                  p->values[v].kind != OAR_VAL_CONST))
                continue;
            oar_tensor *x = oar_trace_tensor_of(t, v);
            if (!x || !x->requires_grad || !differentiable(x)) continue;
            bool seen = false;
            for (int j = 0; j < c->n_free; j++) seen |= c->free[j] == x;
            if (seen) continue;
            if (c->n_free == CTL_MAX)
                return oar_error(OAR_ERR_UNSUPPORTED, "control flow: a branch or body reads more than %d outside "
                                                      "tensors that need gradients; pass them as inputs", CTL_MAX);
            c->free[c->n_free++] = x;
        }
    }
    return OAR_OK;
}

/* Traces fn into a new sub-block whose parameters mirror in[]; metas of what it yields go to
 * out_meta. */
static oar_status trace_block(oar_trace *t, oar_block_fn fn, void *user, oar_tensor *const *in, int n_in,
                              int n_out, int *block, oar_meta *out_meta) {
    int b = oar_trace_push_block(t);
    if (b < 0) return oar_last_status();
    *block = b;
    oar_tensor *args[CTL_MAX] = {0}, *res[CTL_MAX] = {0};
    oar_status st = OAR_OK;
    for (int i = 0; i < n_in && st == OAR_OK; i++) {
        oar_meta m;
        oar_meta_from(&m, in[i]);
        if (!(args[i] = oar_trace_block_input(t, b, &m, NULL))) st = oar_last_status();
    }
    if (st == OAR_OK) {
        oar_scope_begin();
        st = fn(user, args, n_in, res, n_out);
        for (int k = 0; k < n_out && st == OAR_OK; k++) {
            if (!res[k]) st = oar_error(OAR_ERR_INVALID_ARG, "control flow: a block left output %d NULL", k);
            int v = st == OAR_OK ? oar_trace_value(t, res[k]) : -1;
            if (st == OAR_OK && v < 0) st = oar_last_status();
            if (st == OAR_OK) st = oar_program_add_output(oar_trace_program(t), b, v);
            if (st == OAR_OK) out_meta[k] = oar_trace_program(t)->values[v].meta;
        }
        oar_scope_end();
        if (st != OAR_OK && oar_last_status() == OAR_OK) st = oar_error(st, "control flow: a block failed");
    }
    for (int i = 0; i < n_in; i++) oar_tensor_unref(args[i]);
    oar_trace_pop_block(t);
    return st;
}

static bool same_meta(const oar_meta *a, const oar_meta *b) {
    return a->dtype == b->dtype && a->ndim == b->ndim &&
           !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim);
}

static oar_status meta_mismatch(const char *who, const char *a, const char *b, int k, const oar_meta *x,
                                const oar_meta *y) {
    char s1[200], s2[200];
    oar_meta_format(x, 0, s1, sizeof s1);
    oar_meta_format(y, 0, s2, sizeof s2);
    return oar_error(OAR_ERR_SHAPE, "%s: expected %s and %s to give the same dtype and shape for value %d, got %s "
                                    "and %s", who, a, b, k, s1, s2);
}

static oar_status check_counts(const char *who, int n_in, int n_out) {
    if (n_in < 0 || n_in > CTL_MAX || n_out < 1 || n_out > CTL_MAX)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected 0..%d inputs and 1..%d outputs, got %d and %d", who,
                         CTL_MAX, CTL_MAX, n_in, n_out);
    return OAR_OK;
}

/* ---- oar_cond */

static oar_status pred_value(const char *who, oar_tensor *pred, bool *taken) {
    if (!pred) return oar_error(OAR_ERR_INVALID_ARG, "%s: expected a predicate tensor, got NULL", who);
    if (pred->numel != 1)
        return oar_error(OAR_ERR_SHAPE, "%s: expected a one-element predicate, got %lld elements", who,
                         (long long)pred->numel);
    double v;
    oar_status st = oar_item(pred, &v);
    *taken = v != 0;
    return st;
}

static oar_status cond_traced(oar_trace *t, oar_tensor *pred, closure *c, oar_tensor *const *in,
                              oar_tensor **out) {
    int blocks[2];
    oar_meta meta[2][CTL_MAX];
    for (int k = 0; k < 2; k++) {
        oar_status st = trace_block(t, c->fn[k], c->user, in, c->n_in, c->n_out, &blocks[k], meta[k]);
        if (st != OAR_OK) return st;
    }
    for (int k = 0; k < c->n_out; k++)
        if (!same_meta(&meta[0][k], &meta[1][k])) return meta_mismatch("cond", "then_fn", "else_fn", k, &meta[0][k], &meta[1][k]);
    for (int k = 0; k < 2; k++) {
        oar_status st = collect_free(t, blocks[k], c);
        if (st != OAR_OK) return st;
    }
    closure *kept = oar_trace_alloc(t, sizeof *kept);
    if (!kept) return OAR_ERR_OOM;
    *kept = *c;
    oar_tensor *args[1 + 2 * CTL_MAX];
    args[0] = pred;
    memcpy(args + 1, in, sizeof(oar_tensor *) * (size_t)c->n_in);
    memcpy(args + 1 + c->n_in, c->free, sizeof(oar_tensor *) * (size_t)c->n_free);
    oar_attr attrs[2] = {oar_attr_int((int64_t)(intptr_t)kept), oar_attr_int(c->n_in)};
    oar_status st = oar_trace_emit(t, OAR_OP_cond, args, 1 + c->n_in + c->n_free, attrs, meta[0], c->n_out, blocks, 2,
                                   out);
    for (int k = 0; st == OAR_OK && k < c->n_out; k++) oar_track(out[k]); /* like eager results: the scope's */
    return st;
}

oar_status oar_cond(oar_tensor *pred, oar_block_fn then_fn, oar_block_fn else_fn, void *user,
                    oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    OAR_CHECK_HANDLE("cond", pred, oar_last_status());
    oar_init();
    if (in && n_in > 0 && oar_check_handles("cond", "input", in, n_in) != OAR_OK) return oar_last_status();
    oar_status st = check_counts("cond", n_in, n_out);
    if (st != OAR_OK) return st;
    if (!then_fn || !else_fn || !out || (n_in && !in))
        return oar_error(OAR_ERR_INVALID_ARG, "cond: expected two branch functions, inputs and outputs, got NULL");
    for (int i = 0; i < n_in; i++)
        if (!in[i]) return oar_error(OAR_ERR_INVALID_ARG, "cond: input %d is NULL", i);
    oar_trace *t = oar_trace_current();
    if (t) {
        if (!pred) return oar_error(OAR_ERR_INVALID_ARG, "cond: expected a predicate tensor, got NULL");
        if (pred->numel != 1)
            return oar_error(OAR_ERR_SHAPE, "cond: expected a one-element predicate, got %lld elements",
                             (long long)pred->numel);
        closure c = {{then_fn, else_fn}, user, n_in, n_out, 0, {0}};
        return cond_traced(t, pred, &c, in, out);
    }
    bool taken = false;
    if ((st = pred_value("cond", pred, &taken)) != OAR_OK) return st;
    return (taken ? then_fn : else_fn)(user, in, n_in, out, n_out);
}

/* ---- gradients of a block function: recompute it from leaves, then oar_grad */

typedef struct vjp_ctx {
    const closure *c;
    int which;     /* the function of c to differentiate */
    int n_state;   /* inputs of that function (the rest of the args are output gradients) */
} vjp_ctx;

static oar_status vjp_recorded(const vjp_ctx *v, oar_tensor *const *args, int n_args, oar_tensor **out, int n_out);

/* args: the function's inputs, then a gradient for each of its outputs. Yields the gradients
 * of the inputs, then of the closure's free tensors (zeros where none flows). */
static oar_status vjp_fn(void *user, oar_tensor *const *args, int n_args, oar_tensor **out, int n_out) {
    const vjp_ctx *v = user;
    bool was = oar_set_grad_enabled(true); /* rules run with recording off; this one records */
    oar_status st = vjp_recorded(v, args, n_args, out, n_out);
    oar_set_grad_enabled(was);
    return st;
}

static oar_status vjp_recorded(const vjp_ctx *v, oar_tensor *const *args, int n_args, oar_tensor **out, int n_out) {
    const closure *c = v->c;
    int n = v->n_state, n_fo = n_args - n;
    oar_tensor *leaves[CTL_MAX] = {0}, *res[CTL_MAX] = {0};
    for (int i = 0; i < n; i++) {
        leaves[i] = oar_detach(args[i]); /* a fresh leaf standing for the block input */
        if (differentiable(leaves[i])) oar_set_requires_grad(leaves[i], true);
    }
    oar_status st = c->fn[v->which](c->user, leaves, n, res, n_fo);
    if (st != OAR_OK) return st;
    oar_tensor *wrt[2 * CTL_MAX], *gouts[CTL_MAX], *outs[CTL_MAX], *grads[2 * CTL_MAX] = {0};
    int n_wrt = 0, n_o = 0, where[2 * CTL_MAX];
    for (int i = 0; i < n; i++)
        if (leaves[i]->requires_grad) {
            where[n_wrt] = i;
            wrt[n_wrt++] = leaves[i];
        }
    for (int j = 0; j < c->n_free; j++) {
        where[n_wrt] = n + j;
        wrt[n_wrt++] = c->free[j];
    }
    for (int k = 0; k < n_fo; k++)
        if (res[k] && res[k]->requires_grad) {
            outs[n_o] = res[k];
            gouts[n_o++] = args[n + k];
        }
    if (n_o && n_wrt) {
        oar_grad_opts go = {0};
        go.retain_graph = true;
        go.allow_unused = true;
        if ((st = oar_grad(outs, n_o, gouts, wrt, n_wrt, grads, &go)) != OAR_OK) return st;
        for (int k = 0; k < n_wrt; k++) oar_track(grads[k]);
    }
    for (int k = 0; k < n_out; k++) out[k] = NULL;
    for (int k = 0; k < n_wrt; k++) out[where[k]] = grads[k];
    for (int k = 0; k < n_out; k++)
        if (!out[k]) out[k] = oar_zeros_like(k < n ? args[k] : c->free[k - n]);
    return OAR_OK;
}

/* Branches of the gradient cond: the vjp of then_fn or of else_fn. */
typedef struct vjp_pair {
    vjp_ctx v[2];
} vjp_pair;
static oar_status vjp_first(void *user, oar_tensor *const *a, int n_a, oar_tensor **out, int n_out) {
    return vjp_fn(&((vjp_pair *)user)->v[0], a, n_a, out, n_out);
}
static oar_status vjp_second(void *user, oar_tensor *const *a, int n_a, oar_tensor **out, int n_out) {
    return vjp_fn(&((vjp_pair *)user)->v[1], a, n_a, out, n_out);
}

static oar_status need_trace(const char *who, const oar_attr *attrs, oar_trace **t) {
    *t = oar_trace_current();
    if (!attrs[0].i)
        return oar_error(OAR_ERR_UNSUPPORTED, "%s: this node was loaded from a file, where the functions its "
                                              "gradient needs are gone; differentiate the traced function instead", who);
    if (*t) return OAR_OK;
    return oar_error(OAR_ERR_STATE, "%s: its gradient rule runs only while tracing (eager code is differentiated "
                                    "through the ops it ran)", who);
}

static oar_status cond_grad(oar_grad_ctx *g) {
    oar_trace *t;
    oar_status st = need_trace("cond", g->attrs, &t);
    if (st != OAR_OK) return st;
    const closure *c = (const closure *)(intptr_t)g->attrs[0].i;
    vjp_pair *pair = oar_trace_alloc(t, sizeof *pair);
    if (!pair) return OAR_ERR_OOM;
    pair->v[0] = (vjp_ctx){c, 0, c->n_in};
    pair->v[1] = (vjp_ctx){c, 1, c->n_in};
    oar_tensor *args[2 * CTL_MAX], *res[2 * CTL_MAX] = {0};
    memcpy(args, g->in + 1, sizeof(oar_tensor *) * (size_t)c->n_in);
    for (int k = 0; k < c->n_out; k++) args[c->n_in + k] = g->gout[k] ? g->gout[k] : oar_zeros_like(g->out[k]);
    st = oar_cond(g->in[0], vjp_first, vjp_second, pair, args, c->n_in + c->n_out, res, c->n_in + c->n_free);
    if (st != OAR_OK) return st;
    for (int i = 0; i < c->n_in + c->n_free; i++) g->gin[1 + i] = g->needs[1 + i] ? res[i] : NULL;
    return OAR_OK;
}

/* ---- oar_while */

static oar_status while_traced(oar_trace *t, closure *c, oar_tensor *const *vars, oar_tensor **out) {
    int n = c->n_in, blocks[2];
    oar_meta pred_meta[1], body_meta[CTL_MAX];
    oar_status st = trace_block(t, c->fn[0], c->user, vars, n, 1, &blocks[0], pred_meta);
    if (st == OAR_OK) st = trace_block(t, c->fn[1], c->user, vars, n, n, &blocks[1], body_meta);
    if (st != OAR_OK) return st;
    int64_t numel = 1;
    for (int d = 0; d < pred_meta[0].ndim; d++) numel *= pred_meta[0].shape[d];
    if (numel != 1)
        return oar_error(OAR_ERR_SHAPE, "while: expected cond_fn to return a one-element tensor, got %lld elements",
                         (long long)numel);
    oar_meta meta[CTL_MAX + 1];
    for (int k = 0; k < n; k++) {
        oar_meta_from(&meta[k], vars[k]);
        if (!same_meta(&meta[k], &body_meta[k]))
            return meta_mismatch("while", "the loop variables", "body_fn's results", k, &meta[k], &body_meta[k]);
    }
    meta[n] = (oar_meta){OAR_I64, 0, {0}}; /* the trip count, for the gradient */
    for (int k = 0; k < 2; k++)
        if ((st = collect_free(t, blocks[k], c)) != OAR_OK) return st;
    closure *kept = oar_trace_alloc(t, sizeof *kept);
    if (!kept) return OAR_ERR_OOM;
    *kept = *c;
    oar_tensor *args[2 * CTL_MAX], *res[CTL_MAX + 1] = {0};
    memcpy(args, vars, sizeof(oar_tensor *) * (size_t)n);
    memcpy(args + n, c->free, sizeof(oar_tensor *) * (size_t)c->n_free);
    oar_attr attrs[2] = {oar_attr_int((int64_t)(intptr_t)kept), oar_attr_int(n)};
    st = oar_trace_emit(t, OAR_OP_while_loop, args, n + c->n_free, attrs, meta, n + 1, blocks, 2, res);
    if (st != OAR_OK) return st;
    for (int k = 0; k < n; k++) out[k] = oar_track(res[k]); /* like eager results: the scope's */
    oar_tensor_unref(res[n]); /* the count stays reachable through the node */
    return OAR_OK;
}

oar_status oar_while(oar_block_fn cond_fn, oar_block_fn body_fn, void *user, oar_tensor *const *vars, int n,
                     oar_tensor **out) {
    oar_init();
    if (vars && n > 0 && oar_check_handles("while", "loop variable", vars, n) != OAR_OK) return oar_last_status();
    oar_status st = check_counts("while", n, n);
    if (st != OAR_OK) return st;
    if (!cond_fn || !body_fn || !vars || !out)
        return oar_error(OAR_ERR_INVALID_ARG, "while: expected cond and body functions, variables and outputs, "
                                              "got NULL");
    for (int i = 0; i < n; i++)
        if (!vars[i]) return oar_error(OAR_ERR_INVALID_ARG, "while: loop variable %d is NULL", i);
    oar_trace *t = oar_trace_current();
    if (t) {
        closure c = {{cond_fn, body_fn}, user, n, n, 0, {0}};
        return while_traced(t, &c, vars, out);
    }
    oar_tensor *cur[CTL_MAX];
    for (int i = 0; i < n; i++) cur[i] = oar_retain(vars[i]);
    for (;;) {
        oar_tensor *p[1] = {0}, *next[CTL_MAX] = {0};
        oar_scope_begin();
        bool taken = false;
        st = cond_fn(user, cur, n, p, 1);
        if (st == OAR_OK) st = pred_value("while", p[0], &taken);
        if (st == OAR_OK && taken) {
            st = body_fn(user, cur, n, next, n);
            for (int i = 0; st == OAR_OK && i < n; i++) {
                if (!next[i]) st = oar_error(OAR_ERR_INVALID_ARG, "while: body_fn left variable %d NULL", i);
                else if (next[i]->dtype != cur[i]->dtype || next[i]->ndim != cur[i]->ndim ||
                         memcmp(next[i]->shape, cur[i]->shape, sizeof(int64_t) * (size_t)cur[i]->ndim)) {
                    oar_meta a, b;
                    oar_meta_from(&a, cur[i]);
                    oar_meta_from(&b, next[i]);
                    st = meta_mismatch("while", "the loop variables", "body_fn's results", i, &a, &b);
                }
            }
            for (int i = 0; st == OAR_OK && i < n; i++) oar_retain(next[i]);
        }
        oar_scope_end();
        if (st != OAR_OK || !taken) break;
        for (int i = 0; i < n; i++) {
            oar_tensor_unref(cur[i]); /* our reference; the caller's scope keeps its own */
            cur[i] = next[i];
        }
    }
    for (int i = 0; i < n; i++) {
        /* results are new references: a variable the loop never replaced is cloned (which
         * keeps its gradient path), the others are handed over */
        if (st == OAR_OK) out[i] = cur[i] == vars[i] ? oar_clone(cur[i]) : oar_track(oar_retain(cur[i]));
        oar_tensor_unref(cur[i]);
        if (st == OAR_OK && !out[i]) st = oar_last_status();
    }
    return st;
}

/* The while rule, as loops of the traced program:
 *   g = gout; acc = 0; k = T - 1
 *   while k >= 0:
 *       s = init; j = 0; while j < k: s = body(s); j += 1   (the state before iteration k)
 *       (g, dfree) = vjp(body)(s, g); acc += dfree; k -= 1 */
typedef struct while_grad_ctx {
    const closure *c;
    vjp_ctx vjp;            /* of the body */
    oar_tensor *const *init; /* the loop's initial variables (outer tensors) */
    oar_tensor *k;          /* the outer loop's counter, while its body is traced */
} while_grad_ctx;

static oar_tensor *i64_scalar(int64_t v) { return oar_scalar((double)v, OAR_I64); }

static oar_status outer_cond(void *user, oar_tensor *const *a, int n_a, oar_tensor **out, int n_out) {
    out[0] = oar_ge(a[0], i64_scalar(0));
    return out[0] ? OAR_OK : oar_last_status();
}

static oar_status inner_cond(void *user, oar_tensor *const *a, int n_a, oar_tensor **out, int n_out) {
    out[0] = oar_lt(a[0], ((while_grad_ctx *)user)->k);
    return out[0] ? OAR_OK : oar_last_status();
}

static oar_status inner_body(void *user, oar_tensor *const *a, int n_a, oar_tensor **out, int n_out) {
    const closure *c = ((while_grad_ctx *)user)->c;
    out[0] = oar_add(a[0], i64_scalar(1));
    return c->fn[1](c->user, a + 1, n_a - 1, out + 1, n_out - 1);
}

static oar_status outer_body(void *user, oar_tensor *const *a, int n_a, oar_tensor **out, int n_out) {
    while_grad_ctx *w = user;
    const closure *c = w->c;
    int n = c->n_in;
    w->k = a[0];
    oar_tensor *iv[CTL_MAX + 1], *is[CTL_MAX + 1] = {0};
    iv[0] = i64_scalar(0);
    memcpy(iv + 1, w->init, sizeof(oar_tensor *) * (size_t)n);
    oar_status st = oar_while(inner_cond, inner_body, w, iv, n + 1, is);
    if (st != OAR_OK) return st;
    oar_tensor *vargs[2 * CTL_MAX], *vres[2 * CTL_MAX] = {0};
    memcpy(vargs, is + 1, sizeof(oar_tensor *) * (size_t)n);
    memcpy(vargs + n, a + 1, sizeof(oar_tensor *) * (size_t)n);
    if ((st = vjp_fn(&w->vjp, vargs, 2 * n, vres, n + c->n_free)) != OAR_OK) return st;
    out[0] = oar_sub(a[0], i64_scalar(1));
    for (int i = 0; i < n; i++) out[1 + i] = vres[i];
    for (int j = 0; j < c->n_free; j++) out[1 + n + j] = oar_add(a[1 + n + j], vres[n + j]);
    return OAR_OK;
}

static oar_status while_grad(oar_grad_ctx *g) {
    oar_trace *t;
    oar_status st = need_trace("while_loop", g->attrs, &t);
    if (st != OAR_OK) return st;
    const closure *c = (const closure *)(intptr_t)g->attrs[0].i;
    int n = c->n_in;
    while_grad_ctx *w = oar_trace_alloc(t, sizeof *w);
    if (!w) return OAR_ERR_OOM;
    *w = (while_grad_ctx){c, {c, 1, n}, g->in, NULL};
    oar_tensor *v[1 + 2 * CTL_MAX], *res[1 + 2 * CTL_MAX] = {0};
    v[0] = oar_sub(g->out[n], i64_scalar(1));
    for (int i = 0; i < n; i++) v[1 + i] = g->gout[i] ? g->gout[i] : oar_zeros_like(g->out[i]);
    for (int j = 0; j < c->n_free; j++) v[1 + n + j] = oar_zeros_like(c->free[j]);
    st = oar_while(outer_cond, outer_body, w, v, 1 + n + c->n_free, res);
    if (st != OAR_OK) return st;
    for (int i = 0; i < n + c->n_free; i++) g->gin[i] = g->needs[i] ? res[1 + i] : NULL;
    return OAR_OK;
}

/* ---- the two ops: nodes only (dispatch never runs them; the executor runs their blocks) */

static oar_status control_infer(oar_tensor *const *in, int n_in, const oar_attr *attrs, oar_meta *out, int *n_out) {
    return oar_error(OAR_ERR_UNSUPPORTED, "control flow ops are made by oar_cond and oar_while, not called "
                                          "directly");
}

static oar_status control_kernel(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                 int n_out, const oar_attr *attrs) {
    return oar_error(OAR_ERR_UNSUPPORTED, "control flow ops run their blocks in the executor, not as kernels");
}

const oar_op_def oar_opdef_cond = {
    .name = "cond", .n_inputs = -1, .n_outputs = -1, .n_attrs = 2, .attrs = {{"closure", OAR_ATTR_INT}, {"n_in", OAR_ATTR_INT}},
    .flags = OAR_OPF_CONTROL, .ref_dtypes = OAR_ALL_DTYPES, .infer = control_infer, .reference = control_kernel,
    .grad = cond_grad,
};

const oar_op_def oar_opdef_while_loop = {
    .name = "while_loop", .n_inputs = -1, .n_outputs = -1, .n_visible = 0, .n_attrs = 2,
    .attrs = {{"closure", OAR_ATTR_INT}, {"n_in", OAR_ATTR_INT}}, .flags = OAR_OPF_CONTROL, .ref_dtypes = OAR_ALL_DTYPES,
    .infer = control_infer, .reference = control_kernel, .grad = while_grad,
};
