/* Control flow: If onto oar_cond, Loop onto oar_while. The subgraphs were read with the model
 * (onnx_graph.c); here they are interpreted as the blocks' functions, reading the enclosing
 * graphs' values from the interpreter's table (ONNX's outer scope; oar's blocks take outer
 * tensors as free values the same way).
 *
 * - If with a known condition (a constant, or folded) runs the branch taken in place: no control
 *   op, and the branches may differ in shape as ONNX allows. Otherwise oar_cond, whose branches
 *   must give the same dtypes and shapes.
 * - Loop in a traced program becomes oar_while over (iteration number, [condition], the
 *   loop-carried values); its condition block is `i < M` and/or the carried condition. Scan
 *   outputs (one slice per iteration, stacked) have a size that depends on the trip count, which
 *   a while_loop with fixed shapes cannot carry: a Loop with scan outputs is unrolled, which
 *   needs the trip count and the conditions known when the program is compiled; at most
 *   OX_MAX_UNROLL iterations. A Loop whose inputs are all known runs now (folded), the same way. */
#include "io/onnx/onnx_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OX_MAX_UNROLL 4096
#define CTL_VARS 16 /* oar_cond/oar_while: at most 16 values in and out */

/* A scalar made with the trace paused, a constant of the running trace. */
static oar_tensor *const_scalar(double v, oar_dtype dt) {
    uint64_t t = oar_active_trace;
    oar_active_trace = 0;
    oar_tensor *x = oar_scalar(v, dt);
    oar_active_trace = t;
    return ox_as_constant(x);
}

/* x (one element) as a scalar of dtype dt; NULL with the error set. */
static oar_tensor *scalar_of(ox_ctx *c, oar_tensor *x, oar_dtype dt, const char *what) {
    if (x->numel != 1) {
        ox_fail(c, OAR_ERR_SHAPE, "%s has %lld elements; expected one", what, (long long)x->numel);
        return NULL;
    }
    int64_t none[1] = {0};
    oar_tensor *y = x->ndim ? oar_reshape(x, none, 0) : x;
    return y && y->dtype != dt ? oar_cast(y, dt) : y;
}

/* Binds value id v to tensor t (not a sequence). */
static void bind(ox_ctx *c, int v, oar_tensor *t) {
    c->vals[v] = t;
    c->env->sq[v] = NULL;
}

/* Outputs first..first+n of subgraph g (just run) into out[] (a sequence or optional into sout[],
 * out[] NULL; sout NULL: refused, for the blocks of oar's cond and while_loop, which carry
 * tensors). While tracing, a value g's nodes did not make (an input, an outer value, a
 * constant) is cloned, so a block yields a value of its own. A dtype the subgraph declares is
 * checked. */
static oar_status graph_outputs(ox_ctx *c, const ox_graph *g, int first, int n, oar_tensor **out, ox_seq **sout,
                                const char *what) {
    for (int k = first; k < first + n; k++) {
        const ox_io *io = &g->out[k];
        oar_tensor *y = c->vals[io->value];
        ox_seq *q = c->env->sq[io->value];
        if (q) {
            if (!sout)
                return ox_unsupported(c, "%s output %d ('%s') is %s, and the node runs as oar's %s, which carries "
                                         "tensors only: %s", what, k, io->name,
                                      q->none ? "an optional with no element" : "a sequence",
                                      strcmp(c->node->p->op_type, "If") ? "while_loop" : "cond",
                                      strcmp(c->node->p->op_type, "If")
                                          ? "a Loop carrying a sequence is unrolled, so its trip count and condition "
                                            "must be known when the model is compiled"
                                          : "an If giving sequences or optionals needs a condition known when the "
                                            "model is compiled");
            if (io->kind == OX_TENSOR && io->dtype != OAR_DTYPE_COUNT)
                return ox_fail(c, OAR_ERR_DTYPE, "%s output %d ('%s') is a sequence or optional; the subgraph declares "
                                                 "a tensor", what, k, io->name);
            if (!q->none && q->n && io->dtype != OAR_DTYPE_COUNT && q->dtype != io->dtype)
                return ox_fail(c, OAR_ERR_DTYPE, "%s output %d ('%s') holds %s tensors; the subgraph declares %s", what,
                               k, io->name, oar_dtype_name(q->dtype), oar_dtype_name(io->dtype));
            out[k - first] = NULL;
            sout[k - first] = q;
            continue;
        }
        if (sout) sout[k - first] = NULL;
        if (!y) return ox_fail(c, OAR_ERR_INTERNAL, "%s output '%s' has no value", what, io->name);
        if (io->kind == OX_SEQ)
            return ox_fail(c, OAR_ERR_DTYPE, "%s output %d ('%s') is a tensor; the subgraph declares a sequence", what,
                           k, io->name);
        if (io->dtype != OAR_DTYPE_COUNT && y->dtype != io->dtype)
            return ox_fail(c, OAR_ERR_DTYPE, "%s output %d ('%s') is %s; the subgraph declares %s", what, k, io->name,
                           oar_dtype_name(y->dtype), oar_dtype_name(io->dtype));
        bool made = false;
        for (int i = 0; i < g->n_nodes && !made; i++)
            for (int j = 0; j < g->nodes[i].n_out && !made; j++) made = g->nodes[i].out[j] == io->value;
        if (oar_active_trace && (y->storage || !made) && !(y = oar_clone(y))) return oar_last_status();
        out[k - first] = y;
    }
    return OAR_OK;
}

/* ---- If */

typedef struct branch_ctx {
    ox_ctx *c;
} branch_ctx;

static oar_status run_branch(ox_ctx *c, int k, oar_tensor **out, ox_seq **sout) {
    const ox_graph *g = c->node->sub[k];
    if (g->n_out != c->n_out)
        return ox_fail(c, OAR_ERR_FORMAT, "%s has %d outputs; the node has %d", k ? "else_branch" : "then_branch",
                       g->n_out, c->n_out);
    oar_status st = ox_run_graph(c->m, g, c->env);
    return st == OAR_OK ? graph_outputs(c, g, 0, g->n_out, out, sout, k ? "else_branch" : "then_branch") : st;
}

static oar_status then_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    return run_branch(((branch_ctx *)user)->c, 0, out, NULL);
}

static oar_status else_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    return run_branch(((branch_ctx *)user)->c, 1, out, NULL);
}

/* The branches must agree on what each output is: both tensors, or both sequences (optionals)
 * of one element dtype, where the subgraphs declare it. */
static oar_status branches_agree(ox_ctx *c) {
    const ox_graph *a = c->node->sub[0], *b = c->node->sub[1];
    for (int k = 0; k < a->n_out && k < b->n_out; k++) {
        const ox_io *x = &a->out[k], *y = &b->out[k];
        bool xs = x->kind == OX_SEQ || x->kind == OX_OPT_SEQ, ys = y->kind == OX_SEQ || y->kind == OX_OPT_SEQ;
        bool typed = x->dtype != OAR_DTYPE_COUNT && y->dtype != OAR_DTYPE_COUNT;
        if ((typed && xs != ys) || (typed && x->dtype != y->dtype))
            return ox_fail(c, OAR_ERR_DTYPE, "output %d is %s of %s in then_branch ('%s') and %s of %s in else_branch "
                                             "('%s'); the branches must agree", k, xs ? "a sequence" : "a tensor",
                           oar_dtype_name(x->dtype), x->name, ys ? "a sequence" : "a tensor", oar_dtype_name(y->dtype),
                           y->name);
    }
    return OAR_OK;
}


oar_status ox_If(ox_ctx *c) {
    oar_tensor *pred = OX_IN(c, 0);
    if (!pred) return ox_fail(c, OAR_ERR_FORMAT, "expected a condition input, got none");
    if (pred->numel != 1)
        return ox_fail(c, OAR_ERR_SHAPE, "the condition has %lld elements; expected one", (long long)pred->numel);
    oar_status st = branches_agree(c);
    if (st != OAR_OK) return st;
    if (pred->storage) { /* known now: the branch taken runs in place */
        double v;
        st = oar_item(pred, &v);
        return st == OAR_OK ? run_branch(c, v != 0 ? 0 : 1, c->out, c->sout) : st;
    }
    if (c->n_out > CTL_VARS)
        return ox_unsupported(c, "%d outputs and a condition computed from the inputs; oar's cond carries at most %d",
                              c->n_out, CTL_VARS);
    branch_ctx b = {c};
    oar_tensor *none[1] = {NULL}; /* no block inputs (not NULL: cond copies n_in = 0 of them) */
    st = oar_cond(pred, then_fn, else_fn, &b, none, 0, c->out, c->n_out);
    if (st != OAR_OK && !strstr(oar_last_error(), "onnx: node"))
        return ox_fail(c, st, "%s (oar's cond needs both branches to give the same dtypes and shapes when the "
                              "condition is computed from the inputs)", oar_last_error());
    return st;
}

/* ---- Loop */

typedef struct loop_ctx {
    ox_ctx *c;
    oar_tensor *M;   /* the trip count as an i64 scalar, or NULL */
    bool has_cond;   /* the Loop's cond input is given (else the body's condition is ignored) */
    int nv;          /* loop-carried values */
    const char *why; /* why the loop is unrolled */
    bool must_unroll; /* scan outputs or sequences: unrolled when traced too */
} loop_ctx;

/* Binds the body's inputs: iteration number, condition, carried values (vs[j]: a sequence or
 * optional instead of v[j]; vs may be NULL). */
static oar_status bind_body(ox_ctx *c, oar_tensor *iter, oar_tensor *cond, oar_tensor *const *v, ox_seq *const *vs,
                            int nv) {
    const ox_graph *body = c->node->sub[0];
    if (!cond && !(cond = const_scalar(1, OAR_BOOL))) return oar_last_status();
    bind(c, body->in[0].value, iter);
    bind(c, body->in[1].value, cond);
    for (int j = 0; j < nv; j++) {
        const ox_io *io = &body->in[2 + j];
        ox_seq *q = vs ? vs[j] : NULL;
        if (q) {
            if (io->kind == OX_TENSOR && io->dtype != OAR_DTYPE_COUNT)
                return ox_fail(c, OAR_ERR_DTYPE, "loop-carried value %d is a sequence or optional; the body's input "
                                                 "'%s' is a tensor", j, io->name);
            if (!q->none && q->n && io->dtype != OAR_DTYPE_COUNT && q->dtype != io->dtype)
                return ox_fail(c, OAR_ERR_DTYPE, "loop-carried sequence %d holds %s tensors; the body's input '%s' "
                                                 "holds %s", j, oar_dtype_name(q->dtype), io->name,
                               oar_dtype_name(io->dtype));
            c->vals[io->value] = NULL;
            c->env->sq[io->value] = q;
            continue;
        }
        if (io->kind == OX_SEQ)
            return ox_fail(c, OAR_ERR_DTYPE, "loop-carried value %d is a tensor; the body's input '%s' is a sequence",
                           j, io->name);
        if (io->dtype != OAR_DTYPE_COUNT && io->dtype != v[j]->dtype)
            return ox_fail(c, OAR_ERR_DTYPE, "loop-carried value %d is %s; the body's input '%s' is %s", j,
                           oar_dtype_name(v[j]->dtype), io->name, oar_dtype_name(io->dtype));
        bind(c, io->value, v[j]);
    }
    return OAR_OK;
}

static oar_status loop_cond_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    const loop_ctx *L = user;
    oar_tensor *r = L->M ? oar_lt(in[0], L->M) : NULL;
    if (L->has_cond) r = r ? oar_logical_and(r, in[1]) : oar_clone(in[1]);
    out[0] = r;
    return r ? OAR_OK : oar_last_status();
}

static oar_status loop_body_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    const loop_ctx *L = user;
    ox_ctx *c = L->c;
    const ox_graph *body = c->node->sub[0];
    int off = 1 + L->has_cond;
    oar_status st = bind_body(c, in[0], L->has_cond ? in[1] : NULL, in + off, NULL, L->nv);
    if (st == OAR_OK) st = ox_run_graph(c->m, body, c->env);
    if (st != OAR_OK) return st;
    if (!(out[0] = oar_add_scalar(in[0], 1))) return oar_last_status();
    if (L->has_cond && !(out[1] = scalar_of(c, c->vals[body->out[0].value], OAR_BOOL, "the body's condition")))
        return oar_last_status();
    return graph_outputs(c, body, 1, L->nv, out + off, NULL, "body");
}

static oar_status as_while(loop_ctx *L, oar_tensor *cond) {
    ox_ctx *c = L->c;
    int off = 1 + L->has_cond, n = off + L->nv;
    if (n > CTL_VARS)
        return ox_unsupported(c, "%d loop-carried values; oar's while_loop carries at most %d (with the iteration "
                                 "number and the condition)", L->nv, CTL_VARS);
    oar_tensor *vars[CTL_VARS], *res[CTL_VARS] = {0};
    if (!(vars[0] = const_scalar(0, OAR_I64))) return oar_last_status();
    if (L->has_cond) vars[1] = cond;
    for (int j = 0; j < L->nv; j++) vars[off + j] = c->in[2 + j];
    oar_status st = oar_while(loop_cond_fn, loop_body_fn, L, vars, n, res);
    if (st != OAR_OK) {
        if (strstr(oar_last_error(), "onnx: node")) return st;
        return ox_fail(c, st, "%s (oar's while_loop carries values of fixed dtype and shape; its values 0%s are the "
                              "iteration number%s)", oar_last_error(), L->has_cond ? " and 1" : "",
                       L->has_cond ? " and the condition" : "");
    }
    for (int j = 0; j < L->nv; j++) c->out[j] = res[off + j];
    return OAR_OK;
}

/* The value of a known one-element tensor, or an error naming what is not known. */
static oar_status known_value(ox_ctx *c, const char *why, oar_tensor *x, const char *what, double *v) {
    if (!x->storage)
        return ox_unsupported(c, "%s is computed from the model's inputs, and the Loop %s: oar unrolls such a "
                                 "loop, so its trip count and conditions must be known when the model is compiled",
                              what, why);
    return oar_item(x, v);
}

/* Runs the body iteration by iteration in the running trace (or eagerly), stacking the scan
 * outputs. */
static oar_status unrolled(loop_ctx *L, oar_tensor *cond) {
    ox_ctx *c = L->c;
    const ox_graph *body = c->node->sub[0];
    int nv = L->nv, ns = c->n_out - nv;
    double trips = INFINITY, go = 1;
    oar_status st = L->M ? known_value(c, L->why, L->M, "the trip count M", &trips) : OAR_OK;
    if (st == OAR_OK && cond) st = known_value(c, L->why, cond, "the condition", &go);
    if (st != OAR_OK) return st;
    oar_tensor *v[OX_MAX_NODE_IO];
    ox_seq *vs[OX_MAX_NODE_IO];
    for (int j = 0; j < nv; j++) v[j] = c->in[2 + j], vs[j] = c->sin[2 + j];
    oar_tensor **scans = NULL;
    int64_t i = 0;
    /* the limit holds while tracing and in the untraced run that learns a sequence model's
     * outputs (the trace would stop there anyway); a folded loop runs to its end */
    bool limited = oar_active_trace || (L->must_unroll && c->m->last && c->m->last->probing);
    for (; st == OAR_OK && i < trips && go != 0; i++) {
        if (limited && i == OX_MAX_UNROLL) {
            st = ox_unsupported(c, "the loop %s and runs more than %d iterations; oar unrolls such a loop and stops "
                                   "there", L->why, OX_MAX_UNROLL);
            break;
        }
        oar_tensor *iter = const_scalar((double)i, OAR_I64);
        if (!iter) st = oar_last_status();
        if (st == OAR_OK) st = bind_body(c, iter, cond, v, vs, nv);
        if (st == OAR_OK) st = ox_run_graph(c->m, body, c->env);
        if (st == OAR_OK && cond) {
            cond = c->vals[body->out[0].value];
            cond = cond ? scalar_of(c, cond, OAR_BOOL, "the body's condition") : NULL;
            if (!cond && oar_last_status() == OAR_OK)
                st = ox_fail(c, OAR_ERR_FORMAT, "the body's condition is a sequence or optional; expected a bool");
            else st = cond ? known_value(c, L->why, cond, "the body's condition", &go) : oar_last_status();
        }
        if (st == OAR_OK) st = graph_outputs(c, body, 1, nv, v, vs, "body");
        if (st == OAR_OK && ns) {
            oar_tensor **grown = realloc(scans, sizeof *scans * (size_t)(i + 1) * (size_t)ns);
            if (!grown) st = OAR_ERR_OOM;
            else scans = grown;
        }
        if (st == OAR_OK && ns) st = graph_outputs(c, body, 1 + nv, ns, scans + i * ns, NULL, "body");
    }
    for (int j = 0; st == OAR_OK && j < nv; j++) c->out[j] = v[j], c->sout[j] = vs[j];
    for (int k = 0; st == OAR_OK && k < ns; k++) {
        if (i == 0) { /* no iteration: [0, shape the body declares] */
            const ox_io *io = &body->out[1 + nv + k];
            bool full = io->dtype != OAR_DTYPE_COUNT && io->ndim >= 0 && io->ndim < OAR_MAX_DIMS;
            int64_t shape[OAR_MAX_DIMS] = {0};
            for (int d = 0; full && d < io->ndim; d++) full = (shape[1 + d] = io->shape[d]) >= 0;
            if (!full) {
                st = ox_unsupported(c, "the loop ran no iteration, so scan output %d's shape is not known; the body "
                                       "output '%s' declares no complete shape", k, io->name);
                break;
            }
            if (!(c->out[nv + k] = oar_zeros(shape, io->ndim + 1, io->dtype))) st = oar_last_status();
            continue;
        }
        oar_tensor **slices = malloc(sizeof *slices * (size_t)i);
        if (!slices) {
            st = OAR_ERR_OOM;
            break;
        }
        for (int64_t t = 0; t < i; t++) slices[t] = scans[t * ns + k];
        if (!(c->out[nv + k] = oar_stack(slices, (int)i, 0))) st = oar_last_status();
        free(slices);
    }
    free(scans);
    return st;
}

oar_status ox_Loop(ox_ctx *c) {
    oar_tensor *M = OX_IN(c, 0), *cond = OX_IN(c, 1);
    if (!M && !cond)
        return ox_unsupported(c, "neither a trip count M nor a condition is given, so the loop never ends; give one");
    if (c->n_in < 2 || c->node->n_sub != 1 || c->node->sub[0]->n_in != c->n_in || c->n_out < c->n_in - 2 ||
        c->node->sub[0]->n_out != 1 + c->n_out)
        return ox_fail(c, OAR_ERR_FORMAT, "the node has %d inputs and %d outputs and its body %d inputs and %d "
                                          "outputs; expected (M, cond, N values) in, N values + K scan outputs out, "
                                          "and a body of N + 2 inputs and 1 + N + K outputs", c->n_in, c->n_out,
                       c->node->n_sub ? c->node->sub[0]->n_in : 0, c->node->n_sub ? c->node->sub[0]->n_out : 0);
    loop_ctx L = {.c = c, .has_cond = cond != NULL, .nv = c->n_in - 2, .why = "has scan outputs, whose size depends "
                                                                              "on the trip count"};
    if (M && !(L.M = scalar_of(c, M, OAR_I64, "the trip count M"))) return oar_last_status();
    if (cond && !(cond = scalar_of(c, cond, OAR_BOOL, "the condition"))) return oar_last_status();
    bool seqs = false;
    for (int j = 0; j < L.nv; j++) {
        if (!c->in[2 + j] && !c->sin[2 + j])
            return ox_fail(c, OAR_ERR_FORMAT, "loop-carried value %d is \"\"; expected a value", j);
        seqs |= c->sin[2 + j] != NULL;
    }
    const ox_graph *body = c->node->sub[0];
    for (int j = 0; j < body->n_in; j++) seqs |= body->in[j].kind != OX_TENSOR;
    for (int j = 0; j < body->n_out; j++) seqs |= body->out[j].kind != OX_TENSOR;
    if (seqs) L.why = "carries a sequence or optional, which oar's while_loop cannot (it carries tensors)";
    L.must_unroll = c->n_out > L.nv || seqs;
    if (!oar_active_trace || c->n_out > L.nv || seqs) return unrolled(&L, cond);
    return as_while(&L, cond);
}

/* ---- Scan (opset 9 on): the body runs once per slice of the scanned inputs (their length is
 * static, so the loop is unrolled like the recurrent layers), states carried, the scan outputs
 * stacked along their axes; a reverse direction reads (or writes) the slices last first. */
static bool axis_list(ox_ctx *c, const char *name, int n, int64_t *buf) {
    int got = ox_attr_ints(c, name, buf, n);
    if (got < 0) return false;
    if (got == 0)
        for (int k = 0; k < n; k++) buf[k] = 0;
    else if (got != n) {
        ox_fail(c, OAR_ERR_FORMAT, "%s has %d entries; expected %d", name, got, n);
        return false;
    }
    return true;
}

oar_status ox_Scan(ox_ctx *c) {
    const ox_graph *body = c->node->sub[0];
    int ni = (int)ox_attr_int(c, "num_scan_inputs", 0), ns = c->n_in - ni, nk = c->n_out - ns;
    int64_t in_axes[OX_MAX_NODE_IO], in_dirs[OX_MAX_NODE_IO], out_axes[OX_MAX_NODE_IO], out_dirs[OX_MAX_NODE_IO];
    if (!axis_list(c, "scan_input_axes", ni, in_axes) || !axis_list(c, "scan_input_directions", ni, in_dirs) ||
        !axis_list(c, "scan_output_axes", nk, out_axes) || !axis_list(c, "scan_output_directions", nk, out_dirs))
        return oar_last_status();
    int64_t len = -1;
    for (int j = 0; j < c->n_in; j++)
        if (!c->in[j]) return ox_fail(c, OAR_ERR_FORMAT, "input %d is \"\"; Scan takes no optional inputs", j);
    for (int j = 0; j < ni; j++) {
        oar_tensor *x = c->in[ns + j];
        int a = ox_axis(c, in_axes[j], x->ndim, "scan_input_axes");
        if (a < 0) return oar_last_status();
        in_axes[j] = a;
        if (len >= 0 && x->shape[a] != len)
            return ox_fail(c, OAR_ERR_SHAPE, "scanned input %d has %lld slices along axis %d; the first has %lld", j,
                           (long long)x->shape[a], a, (long long)len);
        len = x->shape[a];
    }
    if (len <= 0) return ox_unsupported(c, "the scanned inputs are empty; oar cannot give scan outputs of no slice");
    if (oar_active_trace && len > OX_MAX_UNROLL)
        return ox_unsupported(c, "%lld slices; oar unrolls a Scan and stops at %d", (long long)len, OX_MAX_UNROLL);
    oar_tensor **outs = malloc(sizeof *outs * (size_t)(len * (nk ? nk : 1)));
    if (!outs) return OAR_ERR_OOM;
    oar_tensor *state[OX_MAX_NODE_IO];
    for (int j = 0; j < ns; j++) state[j] = c->in[j];
    oar_status st = OAR_OK;
    for (int64_t t = 0; t < len && st == OAR_OK; t++) {
        for (int j = 0; j < ns; j++) bind(c, body->in[j].value, state[j]);
        for (int j = 0; j < ni && st == OAR_OK; j++) {
            int64_t i = in_dirs[j] ? len - 1 - t : t;
            int a = (int)in_axes[j];
            oar_tensor *s = oar_squeeze(oar_slice(c->in[ns + j], a, i, i + 1, 1), a);
            if (!s) st = oar_last_status();
            else bind(c, body->in[ns + j].value, s);
        }
        if (st == OAR_OK) st = ox_run_graph(c->m, body, c->env);
        if (st == OAR_OK) st = graph_outputs(c, body, 0, ns, state, NULL, "body");
        if (st == OAR_OK && nk) st = graph_outputs(c, body, ns, nk, outs + t * nk, NULL, "body");
    }
    for (int j = 0; st == OAR_OK && j < ns; j++) c->out[j] = state[j];
    oar_tensor **slices = st == OAR_OK && nk ? malloc(sizeof *slices * (size_t)len) : NULL;
    if (st == OAR_OK && nk && !slices) st = OAR_ERR_OOM;
    for (int k = 0; st == OAR_OK && k < nk; k++) {
        for (int64_t t = 0; t < len; t++) slices[out_dirs[k] ? len - 1 - t : t] = outs[t * nk + k];
        int rank = slices[0]->ndim + 1, a = ox_axis(c, out_axes[k], rank, "scan_output_axes");
        if (a < 0) st = oar_last_status();
        else if (!(c->out[ns + k] = oar_stack(slices, (int)len, a))) st = oar_last_status();
    }
    free(slices);
    free(outs);
    return st;
}
