/* The CTC loss (Graves et al. 2006) as torch's ctc_loss with reduction 'none': per sample, minus
 * the log of the summed probability of every alignment of its target to its first input_length
 * frames, computed in log space over the extended target (blank, l1, blank, l2, ..., blank).
 * A state moves to itself, to the next state, or past a blank to the next label when that label
 * differs from the last (repeats need a blank between them). A target that no alignment fits
 * gives inf, or 0 with zero_infinity; an empty target with no frames costs 0, as in torch.
 *
 * ctc_loss_backward gives the exact derivative of the losses with respect to log_probs:
 * -grad * (the posterior of the frame's class over the states with that label), computed from
 * the forward (alpha) and backward (beta) recursions. torch's kernel adds exp(log_probs) to
 * this (the derivative with respect to the logits under log_softmax); through log_softmax both
 * give the same logits' gradient, and only this one agrees with finite differences. Nothing but
 * the losses is saved: the backward recomputes alpha, so memory stays O(T L) per running sample
 * (torch keeps alpha for the whole batch). Reductions are left to the caller (ops of their own). */
#include "ops/ctc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- checks of the data, shared with the fast kernels */
oar_status oar_ctc_batch_init(const char *op, oar_ctc_batch *b, const oar_tensor *log_probs,
                              const oar_tensor *targets, const oar_tensor *input_lengths,
                              const oar_tensor *target_lengths, int64_t blank) {
    memset(b, 0, sizeof *b);
    b->T = log_probs->shape[0];
    b->N = log_probs->shape[1];
    b->C = log_probs->shape[2];
    b->blank = blank;
    b->tg = oar_tensor_ptr(targets);
    b->ttr = &oar_dtypes[targets->dtype];
    if (b->N > 0 && !(b->in_len = oar_malloc(sizeof(int64_t) * 3 * (size_t)b->N))) return OAR_ERR_OOM;
    b->tg_len = b->in_len + b->N;
    b->tg_off = b->tg_len + b->N;
    const oar_dtype_traits *il = &oar_dtypes[input_lengths->dtype], *tl = &oar_dtypes[target_lengths->dtype];
    const char *ip = oar_tensor_ptr(input_lengths), *tp = oar_tensor_ptr(target_lengths);
    bool padded = targets->ndim == 2;
    int64_t width = padded ? targets->shape[1] : 0, at = 0;
    oar_status st = OAR_OK;
    for (int64_t n = 0; n < b->N && st == OAR_OK; n++) {
        int64_t in = il->load_i64(ip + n * (int64_t)il->size), len = tl->load_i64(tp + n * (int64_t)tl->size);
        if (in < 0 || in > b->T)
            st = oar_error(OAR_ERR_INVALID_ARG, "%s: input_lengths[%lld] = %lld is outside [0, %lld] (the frames of "
                           "log_probs)", op, (long long)n, (long long)in, (long long)b->T);
        else if (len < 0)
            st = oar_error(OAR_ERR_INVALID_ARG, "%s: target_lengths[%lld] = %lld is negative", op, (long long)n,
                           (long long)len);
        else if (padded && len > width)
            st = oar_error(OAR_ERR_INVALID_ARG, "%s: target_lengths[%lld] = %lld exceeds the targets' %lld columns",
                           op, (long long)n, (long long)len, (long long)width);
        b->in_len[n] = in;
        b->tg_len[n] = len;
        b->tg_off[n] = padded ? n * width : at;
        at = len > INT64_MAX - at ? INT64_MAX : at + len; /* huge lengths must not wrap past the check below */
        if (len > b->max_len) b->max_len = len;
    }
    if (st == OAR_OK && !padded && at > targets->numel)
        st = oar_error(OAR_ERR_INVALID_ARG, "%s: target_lengths sum to %lld, but targets has %lld labels", op,
                       (long long)at, (long long)targets->numel);
    /* the labels a sample uses (padding past its length is never read, as in torch) */
    for (int64_t n = 0; n < b->N && st == OAR_OK; n++)
        for (int64_t i = 0; i < b->tg_len[n] && st == OAR_OK; i++) {
            int64_t k = b->tg_off[n] + i, lab = b->ttr->load_i64(b->tg + k * (int64_t)b->ttr->size);
            char where[64];
            if (padded) snprintf(where, sizeof where, "targets[%lld][%lld]", (long long)n, (long long)i);
            else snprintf(where, sizeof where, "targets[%lld] (sample %lld)", (long long)k, (long long)n);
            if (lab < 0 || lab >= b->C)
                st = oar_error(OAR_ERR_INVALID_ARG, "%s: %s = %lld is outside [0, %lld) (the classes of log_probs)",
                               op, where, (long long)lab, (long long)b->C);
            else if (lab == blank)
                st = oar_error(OAR_ERR_INVALID_ARG, "%s: %s is the blank (%lld); expected labels in [0, %lld) "
                               "other than the blank", op, where, (long long)blank, (long long)b->C);
        }
    if (st != OAR_OK) oar_ctc_batch_free(b);
    return st;
}

void oar_ctc_batch_free(oar_ctc_batch *b) {
    free(b->in_len);
    b->in_len = b->tg_len = b->tg_off = NULL;
}

int64_t oar_ctc_extend(const oar_ctc_batch *b, int64_t n, int64_t *ext, bool *skip) {
    int64_t L = 2 * b->tg_len[n] + 1;
    for (int64_t s = 0; s < L; s++) {
        ext[s] = s % 2 ? b->ttr->load_i64(b->tg + (b->tg_off[n] + s / 2) * (int64_t)b->ttr->size) : b->blank;
        skip[s] = s % 2 && s >= 3 && ext[s] != ext[s - 2];
    }
    return L;
}

/* ---- inference */
static oar_status check_index(const char *op, const oar_tensor *t, const char *what) {
    if (t->dtype == OAR_I32 || t->dtype == OAR_I64) return OAR_OK;
    return oar_error(OAR_ERR_DTYPE, "%s: expected %s of dtype i32 or i64, got %s; convert it with oar_cast", op,
                     what, oar_dtype_name(t->dtype));
}

static oar_status check_lengths(const char *op, const oar_tensor *t, const char *what, const oar_tensor *lp) {
    oar_status st = check_index(op, t, what);
    if (st != OAR_OK || (t->ndim == 1 && t->shape[0] == lp->shape[1])) return st;
    char ls[128], ts[128];
    oar_format_shape(lp->shape, lp->ndim, ls, sizeof ls);
    oar_format_shape(t->shape, t->ndim, ts, sizeof ts);
    return oar_error(OAR_ERR_SHAPE, "%s: expected %s of shape [%lld] (one per sample of log_probs %s), got %s", op,
                     what, (long long)lp->shape[1], ls, ts);
}

/* log_probs [T, N, C] f32/f64, targets [N, S] or [sum of lengths], both lengths [N] */
static oar_status check_inputs(const char *op, oar_tensor *const *in, int64_t blank) {
    const oar_tensor *lp = in[0], *tg = in[1];
    char ls[128], ts[128];
    oar_format_shape(lp->shape, lp->ndim, ls, sizeof ls);
    if (lp->dtype != OAR_F32 && lp->dtype != OAR_F64)
        return oar_error(OAR_ERR_DTYPE, "%s: expected log_probs of dtype f32 or f64, got %s; cast it with oar_cast",
                         op, oar_dtype_name(lp->dtype));
    if (lp->ndim != 3)
        return oar_error(OAR_ERR_SHAPE, "%s: expected log_probs of shape [T, N, C], got %s; unsqueeze(1) makes one "
                         "sample a batch", op, ls);
    if (blank < 0 || blank >= lp->shape[2])
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected blank in [0, %lld) (the classes of log_probs %s), got "
                         "%lld", op, (long long)lp->shape[2], ls, (long long)blank);
    oar_status st = check_index(op, tg, "targets");
    if (st != OAR_OK) return st;
    if (!(tg->ndim == 1 || (tg->ndim == 2 && tg->shape[0] == lp->shape[1]))) {
        oar_format_shape(tg->shape, tg->ndim, ts, sizeof ts);
        return oar_error(OAR_ERR_SHAPE, "%s: expected targets of shape [%lld, S] (padded) or [sum of "
                         "target_lengths] (concatenated) for log_probs %s, got %s", op, (long long)lp->shape[1], ls,
                         ts);
    }
    st = check_lengths(op, in[2], "input_lengths", lp);
    if (st == OAR_OK) st = check_lengths(op, in[3], "target_lengths", lp);
    return st;
}

static oar_status ctc_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    oar_status st = check_inputs("ctc_loss", in, a[0].i);
    if (st != OAR_OK) return st;
    out->dtype = in[0]->dtype;
    out->ndim = 1;
    out->shape[0] = in[0]->shape[1];
    *n_out = 1;
    return OAR_OK;
}

/* ctc_loss_backward(grad [N], log_probs, targets, input_lengths, target_lengths) -> [T, N, C] */
static oar_status ctcb_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const char *op = "ctc_loss_backward";
    oar_status st = check_inputs(op, in + 1, a[0].i);
    if (st != OAR_OK) return st;
    const oar_tensor *g = in[0], *lp = in[1];
    if (g->dtype != lp->dtype || g->ndim != 1 || g->shape[0] != lp->shape[1]) {
        char gs[128];
        oar_format_shape(g->shape, g->ndim, gs, sizeof gs);
        return oar_error(g->dtype != lp->dtype ? OAR_ERR_DTYPE : OAR_ERR_SHAPE, "%s: expected grad of shape [%lld] "
                         "and dtype %s (one per sample, like the losses), got %s %s", op, (long long)lp->shape[1],
                         oar_dtype_name(lp->dtype), gs, oar_dtype_name(g->dtype));
    }
    oar_meta_from(out, lp);
    *n_out = 1;
    return OAR_OK;
}

/* ---- reference kernels: whole alpha and beta tables per sample, in double */
static double log_add(double a, double b) {
    if (a == -INFINITY) return b;
    if (b == -INFINITY) return a;
    return (a > b ? a : b) + log1p(exp(-fabs(a - b)));
}

typedef struct ref_sample {
    const oar_dtype_traits *tr;
    const char *lp;
    int64_t N, C, n, T, L;
    const int64_t *ext;
    const bool *skip;
} ref_sample;

static double emit(const ref_sample *r, int64_t t, int64_t s) {
    return r->tr->load(r->lp + ((t * r->N + r->n) * r->C + r->ext[s]) * (int64_t)r->tr->size);
}

/* alpha[t][s]: log of the probability of the first t + 1 frames ending in state s */
static void alpha_table(const ref_sample *r, double *a) {
    int64_t L = r->L;
    for (int64_t s = 0; s < L; s++) a[s] = s < 2 ? emit(r, 0, s) : -INFINITY;
    for (int64_t t = 1; t < r->T; t++)
        for (int64_t s = 0; s < L; s++) {
            const double *p = a + (t - 1) * L;
            double v = p[s];
            if (s >= 1) v = log_add(v, p[s - 1]);
            if (r->skip[s]) v = log_add(v, p[s - 2]);
            a[t * L + s] = v + emit(r, t, s);
        }
}

/* beta[t][s]: log of the probability of frames t.. given state s at frame t (its emission included) */
static void beta_table(const ref_sample *r, double *b) {
    int64_t L = r->L, T = r->T;
    for (int64_t s = 0; s < L; s++) b[(T - 1) * L + s] = s >= L - 2 ? emit(r, T - 1, s) : -INFINITY;
    for (int64_t t = T - 2; t >= 0; t--)
        for (int64_t s = 0; s < L; s++) {
            const double *q = b + (t + 1) * L;
            double v = q[s];
            if (s + 1 < L) v = log_add(v, q[s + 1]);
            if (s + 2 < L && r->skip[s + 2]) v = log_add(v, q[s + 2]);
            b[t * L + s] = v + emit(r, t, s);
        }
}

static double log_likelihood(const double *a_last, int64_t L) {
    return L > 1 ? log_add(a_last[L - 1], a_last[L - 2]) : a_last[0];
}

/* Runs fn over the samples with their tables allocated (alpha only, or both). */
typedef oar_status (*sample_fn)(ref_sample *r, double *alpha, double *beta, void *ctx);

static oar_status each_sample(const char *op, oar_tensor *const *in, const oar_attr *a, bool with_beta,
                              sample_fn fn, void *ctx) {
    oar_ctc_batch b;
    oar_status st = oar_ctc_batch_init(op, &b, in[0], in[1], in[2], in[3], a[0].i);
    if (st != OAR_OK) return st;
    int64_t Lmax = 2 * b.max_len + 1, T = b.T > 0 ? b.T : 1;
    int64_t *ext = malloc(sizeof(int64_t) * (size_t)Lmax);
    bool *skip = malloc(sizeof(bool) * (size_t)Lmax);
    double *alpha = malloc(sizeof(double) * (size_t)(T * Lmax));
    double *beta = with_beta ? malloc(sizeof(double) * (size_t)(T * Lmax)) : NULL;
    if (!ext || !skip || !alpha || (with_beta && !beta)) st = oar_error(OAR_ERR_OOM, "%s: out of memory", op);
    ref_sample r = {.tr = &oar_dtypes[in[0]->dtype], .lp = oar_tensor_ptr(in[0]), .N = b.N, .C = b.C,
                    .ext = ext, .skip = skip};
    for (int64_t n = 0; n < b.N && st == OAR_OK; n++) {
        r.n = n;
        r.T = b.in_len[n];
        r.L = oar_ctc_extend(&b, n, ext, skip);
        if (r.T > 0) {
            alpha_table(&r, alpha);
            if (with_beta) beta_table(&r, beta);
        }
        st = fn(&r, alpha, beta, ctx);
    }
    free(ext);
    free(skip);
    free(alpha);
    free(beta);
    oar_ctc_batch_free(&b);
    return st;
}

typedef struct ref_job {
    const oar_tensor *g;
    oar_tensor *out;
    bool zero_inf;
} ref_job;

static oar_status forward_sample(ref_sample *r, double *alpha, double *beta, void *ctx) {
    (void)beta;
    ref_job *j = ctx;
    /* no frames: only the empty target has an alignment (probability 1) */
    double nll = r->T == 0 ? (r->L == 1 ? 0 : INFINITY) : -log_likelihood(alpha + (r->T - 1) * r->L, r->L);
    if (j->zero_inf && isinf(nll)) nll = 0;
    r->tr->store((char *)oar_tensor_ptr(j->out) + r->n * (int64_t)r->tr->size, nll);
    return OAR_OK;
}

static oar_status ctc_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                          int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    ref_job j = {.out = out[0], .zero_inf = a[1].i != 0};
    return each_sample("ctc_loss", in, a, false, forward_sample, &j);
}

/* d loss_n / d log_probs[t, n, c] = -sum over states s with label c of exp(alpha + beta - log_probs - ll) */
static oar_status backward_sample(ref_sample *r, double *alpha, double *beta, void *ctx) {
    ref_job *j = ctx;
    const oar_dtype_traits *tr = r->tr;
    int64_t es = (int64_t)tr->size, L = r->L;
    char *dx = oar_tensor_ptr(j->out);
    if (r->T == 0) return OAR_OK; /* no frame to differentiate */
    double ll = log_likelihood(alpha + (r->T - 1) * L, L);
    double g = tr->load((const char *)oar_tensor_ptr(j->g) + r->n * es);
    /* no alignment: zero_infinity zeroes the loss and its gradient; without it the loss is inf and
     * the gradient NaN, as in torch */
    if (ll == -INFINITY && j->zero_inf) return OAR_OK;
    for (int64_t t = 0; t < r->T; t++) {
        char *row = dx + (t * r->N + r->n) * r->C * es;
        if (ll == -INFINITY) {
            for (int64_t c = 0; c < r->C; c++) tr->store(row + c * es, NAN);
            continue;
        }
        for (int64_t s = 0; s < L; s++) {
            double ab = alpha[t * L + s] + beta[t * L + s];
            if (ab == -INFINITY) continue; /* the state is off every alignment (also when its class has p = 0) */
            char *d = row + r->ext[s] * es;
            tr->store(d, tr->load(d) - g * exp(ab - emit(r, t, s) - ll));
        }
    }
    return OAR_OK;
}

static oar_status ctcb_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                           int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    memset(oar_tensor_ptr(out[0]), 0, (size_t)out[0]->numel * oar_dtypes[out[0]->dtype].size);
    ref_job j = {.g = in[0], .out = out[0], .zero_inf = a[1].i != 0};
    return each_sample("ctc_loss_backward", in + 1, a, true, backward_sample, &j);
}

/* ---- gradient rules */
static oar_status ctc_grad(oar_grad_ctx *g) {
    if (!g->needs[0] || !g->gout[0]) return OAR_OK;
    oar_tensor *in[5] = {g->gout[0], g->in[0], g->in[1], g->in[2], g->in[3]};
    g->gin[0] = oar_op_call1(OAR_OP_ctc_loss_backward, in, 5, g->attrs);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

static oar_status ctcb_grad(oar_grad_ctx *g) {
    (void)g;
    return oar_error(OAR_ERR_UNSUPPORTED, "ctc_loss_backward: second-order gradients of ctc_loss are not offered "
                     "(nor in torch); differentiate ctc_loss once");
}

/* ---- definitions (torch's defaults: blank 0, zero_infinity false) */
#define CTC_ATTRS {"blank", OAR_ATTR_INT, "0"}, {"zero_infinity", OAR_ATTR_INT, "false"}
#define CTC_DTYPES (OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64))

const oar_op_def oar_opdef_ctc_loss = {
    .name = "ctc_loss", .n_inputs = 4, .n_outputs = 1, .n_attrs = 2, .attrs = {CTC_ATTRS},
    .flags = OAR_OPF_AMP_DENY, .ref_dtypes = CTC_DTYPES, .infer = ctc_infer, .reference = ctc_ref,
    .grad = ctc_grad,
};

const oar_op_def oar_opdef_ctc_loss_backward = {
    .name = "ctc_loss_backward", .n_inputs = 5, .n_outputs = 1, .key_input = 1, .n_attrs = 2,
    .attrs = {CTC_ATTRS}, .flags = OAR_OPF_AMP_DENY, .ref_dtypes = CTC_DTYPES, .infer = ctcb_infer,
    .reference = ctcb_ref, .grad = ctcb_grad,
};

/* ---- public API */
oar_tensor *oar_ctc_loss(oar_tensor *log_probs, oar_tensor *targets, oar_tensor *input_lengths,
                         oar_tensor *target_lengths, int64_t blank, bool zero_infinity) {
    oar_attr a[2] = {oar_attr_int(blank), oar_attr_int(zero_infinity)};
    oar_tensor *in[4] = {log_probs, targets, input_lengths, target_lengths};
    return oar_op_call1(OAR_OP_ctc_loss, in, 4, a);
}
