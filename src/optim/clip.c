/* Gradient clipping, in place on .grad, like torch.nn.utils.clip_grad_norm_ / clip_grad_value_.
 * Norms are summed over fixed blocks in double, so they do not depend on the thread count. */
#include "optim/optim.h"

#include <math.h>

enum { NORM_INF, NORM_L1, NORM_L2, NORM_P };

typedef struct clip_ctx {
    void *x;
    oar_dtype dt;
    int64_t n, block;
    int mode;
    double p, scale, lo, hi;
    double *part;
} clip_ctx;

static inline double norm_term(double a, int mode, double p) {
    a = fabs(a);
    return mode == NORM_L1 ? a : mode == NORM_L2 ? a * a : pow(a, p);
}

static void norm_range(void *ctx, int64_t bbegin, int64_t bend) {
    const clip_ctx *c = ctx;
    for (int64_t blk = bbegin; blk < bend; blk++) {
        int64_t b = blk * c->block, e = b + c->block < c->n ? b + c->block : c->n;
        double acc = 0;
        if (c->mode == NORM_INF) {
            for (int64_t i = b; i < e; i++) {
                double a = c->dt == OAR_F32 ? fabs((double)((const float *)c->x)[i]) : fabs(((const double *)c->x)[i]);
                acc = (a > acc || a != a) ? a : acc; /* NaN propagates, as torch's max */
            }
        } else if (c->dt == OAR_F32) {
            const float *x = c->x;
            for (int64_t i = b; i < e; i++) acc += norm_term(x[i], c->mode, c->p);
        } else {
            const double *x = c->x;
            for (int64_t i = b; i < e; i++) acc += norm_term(x[i], c->mode, c->p);
        }
        c->part[blk] = acc;
    }
}

/* The norm_type-norm of one contiguous tensor. */
static double tensor_norm(oar_tensor *t, int mode, double p) {
    double part[OAR_OPTIM_MAX_BLOCKS];
    clip_ctx c = {.x = oar_tensor_ptr(t), .dt = t->dtype, .n = t->numel, .block = oar_optim_block_size(t->numel),
                  .mode = mode, .p = p, .part = part};
    int64_t n_blocks = (c.n + c.block - 1) / c.block;
    oar_parallel_for(n_blocks, 1, norm_range, &c);
    double acc = 0;
    for (int64_t k = 0; k < n_blocks; k++) {
        if (mode == NORM_INF) acc = (part[k] > acc || part[k] != part[k]) ? part[k] : acc;
        else acc += part[k];
    }
    return mode == NORM_INF || mode == NORM_L1 ? acc : mode == NORM_L2 ? sqrt(acc) : pow(acc, 1 / p);
}

static void scale_range(void *ctx, int64_t b, int64_t e) {
    const clip_ctx *c = ctx;
    if (c->dt == OAR_F32) {
        float *x = c->x, s = (float)c->scale;
        for (int64_t i = b; i < e; i++) x[i] = x[i] * s;
    } else {
        double *x = c->x, s = c->scale;
        for (int64_t i = b; i < e; i++) x[i] = x[i] * s;
    }
}

static void clamp_range(void *ctx, int64_t b, int64_t e) {
    const clip_ctx *c = ctx;
    if (c->dt == OAR_F32) {
        float *x = c->x, lo = (float)c->lo, hi = (float)c->hi;
        for (int64_t i = b; i < e; i++) x[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
    } else {
        double *x = c->x, lo = c->lo, hi = c->hi;
        for (int64_t i = b; i < e; i++) x[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
    }
}

static oar_status check_grads(const char *who, oar_tensor *const *params, int n) {
    if (n < 0 || (n > 0 && !params))
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected a list of n >= 0 tensors, got %s", who,
                         n < 0 ? "n < 0" : "NULL");
    for (int i = 0; i < n; i++) {
        if (!params[i]) return oar_error(OAR_ERR_INVALID_ARG, "%s: expected tensor %d, got NULL", who, i);
        const oar_tensor *g = params[i]->grad;
        if (!g) continue;
        if (!g->storage || g->device != OAR_CPU)
            return oar_error(OAR_ERR_UNSUPPORTED, "%s: expected the gradient of tensor %d to be a CPU tensor with "
                                                  "data, got %s",
                             who, i, g->storage ? "a CUDA tensor" : "a symbolic one");
        if (g->dtype != OAR_F32 && g->dtype != OAR_F64)
            return oar_error(OAR_ERR_DTYPE, "%s: expected the gradient of tensor %d to be f32 or f64, got %s", who, i,
                             oar_dtype_name(g->dtype));
    }
    return OAR_OK;
}

/* Runs fn over every element of t's storage view, through a contiguous copy when t is strided. */
static oar_status apply(oar_tensor *t, oar_range_fn fn, clip_ctx *c) {
    oar_tensor *work = t->contiguous ? t : oar_tensor_contiguous_copy(t);
    if (!work) return oar_last_status();
    c->x = oar_tensor_ptr(work);
    c->dt = work->dtype;
    oar_parallel_for(work->numel, OAR_OPTIM_GRAIN, fn, c);
    if (work != t) {
        oar_tensor_copy_strided(t, work);
        oar_tensor_unref(work);
    }
    t->storage->version++;
    return OAR_OK;
}

oar_status oar_clip_grad_norm(oar_tensor *const *params, int n, double max_norm, double norm_type,
                              double *total_norm) {
    const char *who = "clip_grad_norm";
    if (total_norm) *total_norm = 0;
    oar_status st = check_grads(who, params, n);
    if (st != OAR_OK) return st;
    if (!(max_norm >= 0))
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected max_norm >= 0, got %g", who, max_norm);
    if (!(norm_type > 0))
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected norm_type > 0 (or INFINITY), got %g", who, norm_type);
    int mode = isinf(norm_type) ? NORM_INF : norm_type == 1 ? NORM_L1 : norm_type == 2 ? NORM_L2 : NORM_P;
    double total = 0;
    for (int i = 0; i < n; i++) {
        oar_tensor *g = params[i]->grad;
        if (!g) continue;
        oar_tensor *work = g->contiguous ? g : oar_tensor_contiguous_copy(g);
        if (!work) return oar_last_status();
        double norm = tensor_norm(work, mode, norm_type);
        if (work != g) oar_tensor_unref(work);
        if (mode == NORM_INF) total = (norm > total || norm != norm) ? norm : total;
        else total += norm_term(norm, mode, norm_type);
    }
    if (mode == NORM_L2) total = sqrt(total);
    else if (mode == NORM_P) total = pow(total, 1 / norm_type);
    if (total_norm) *total_norm = total;
    double coef = max_norm / (total + 1e-6);
    if (coef >= 1) return OAR_OK; /* torch multiplies by min(coef, 1): nothing to do */
    clip_ctx c = {.scale = coef};
    for (int i = 0; i < n; i++)
        if (params[i]->grad && (st = apply(params[i]->grad, scale_range, &c)) != OAR_OK) return st;
    return OAR_OK;
}

oar_status oar_clip_grad_value(oar_tensor *const *params, int n, double clip) {
    const char *who = "clip_grad_value";
    oar_status st = check_grads(who, params, n);
    if (st != OAR_OK) return st;
    if (!(clip >= 0)) return oar_error(OAR_ERR_INVALID_ARG, "%s: expected clip >= 0, got %g", who, clip);
    clip_ctx c = {.lo = -clip, .hi = clip};
    for (int i = 0; i < n; i++)
        if (params[i]->grad && (st = apply(params[i]->grad, clamp_range, &c)) != OAR_OK) return st;
    return OAR_OK;
}
