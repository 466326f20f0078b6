/* standard_gamma(alpha): one Gamma(alpha, 1) draw per element (torch._standard_gamma), and
 * standard_gamma_grad(alpha, x): the reparameterization derivative dx/dalpha of such a draw at its
 * quantile (torch._standard_gamma_grad), which standard_gamma's gradient rule uses so rsample of the
 * Gamma family backpropagates into alpha. The math is in random_gamma.h.
 *
 * Element i owns generator counters [i * OAR_GAMMA_SLOTS, (i + 1) * OAR_GAMMA_SLOTS) of the call's
 * reservation, so a draw is a function of (seed, offset, i, alpha) only: the same at any thread count.
 * Samples are clamped below to the dtype's smallest normal number, as torch does, so log(x) stays
 * finite for tiny alpha. f32 and f64; CPU only (tests/cuda/cuda_gaps.txt). */
#include "ops/op.h"
#include "ops/random_gamma.h"

#include <float.h>

#define GAMMA_DTYPES (OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64))

/* ---- standard_gamma(alpha) -> x, alpha's shape and dtype */

static oar_status standard_gamma_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out,
                                       int *n_out) {
    (void)n_in; (void)a;
    if (in[0]->dtype != OAR_F32 && in[0]->dtype != OAR_F64)
        return oar_error(OAR_ERR_DTYPE, "standard_gamma: expected alpha of dtype f32 or f64, got %s; cast it "
                                        "with oar_cast", oar_dtype_name(in[0]->dtype));
    oar_meta_from(&out[0], in[0]);
    *n_out = 1;
    return OAR_OK;
}

typedef struct gamma_job {
    const oar_tensor *alpha;
    oar_tensor *x;
    oar_rng_state rng;
} gamma_job;

static void gamma_range(void *p, int64_t begin, int64_t end) {
    const gamma_job *j = p;
    const oar_dtype_traits *tr = &oar_dtypes[j->x->dtype];
    const int64_t es = (int64_t)tr->size;
    const char *ap = oar_tensor_ptr(j->alpha);
    char *xp = oar_tensor_ptr(j->x);
    const double tiny = j->x->dtype == OAR_F32 ? (double)FLT_MIN : DBL_MIN;
    for (int64_t i = begin; i < end; i++) {
        double x = oar_gamma_draw(j->rng.seed, j->rng.offset + (uint64_t)i * OAR_GAMMA_SLOTS, tr->load(ap + i * es));
        tr->store(xp + i * es, x < tiny ? tiny : x); /* NaN passes the comparison unchanged */
    }
}

static oar_status standard_gamma_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                     int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out; (void)a;
    gamma_job j = {in[0], out[0], ctx->rng};
    oar_parallel_for(out[0]->numel, 256, gamma_range, &j);
    return OAR_OK;
}

static int64_t standard_gamma_draws(oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_out; (void)a;
    return out[0]->numel * OAR_GAMMA_SLOTS;
}

/* d x / d alpha at fixed quantile: implicit reparameterization */
static oar_status standard_gamma_grad_rule(oar_grad_ctx *g) {
    if (!g->gout[0]) return OAR_OK;
    g->gin[0] = oar_mul(g->gout[0], oar_standard_gamma_grad(g->in[0], g->out[0]));
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_standard_gamma = {
    .name = "standard_gamma", .n_inputs = 1, .n_outputs = 1,
    .flags = OAR_OPF_RANDOM | OAR_OPF_AMP_DENY, .ref_dtypes = GAMMA_DTYPES,
    .infer = standard_gamma_infer, .reference = standard_gamma_ref, .grad = standard_gamma_grad_rule,
    .draws = standard_gamma_draws,
};

oar_tensor *oar_standard_gamma(oar_tensor *alpha) {
    oar_tensor *in[1] = {alpha};
    return oar_op_call1(OAR_OP_standard_gamma, in, 1, NULL);
}

/* ---- standard_gamma_grad(alpha, x) -> dx/dalpha, broadcast */

static oar_status standard_gamma_grad_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out,
                                            int *n_out) {
    (void)a;
    oar_status st = oar_check_same_dtype("standard_gamma_grad", in, 2);
    if (st != OAR_OK) return st;
    if (in[0]->dtype != OAR_F32 && in[0]->dtype != OAR_F64)
        return oar_error(OAR_ERR_DTYPE, "standard_gamma_grad: expected alpha and x of dtype f32 or f64, got %s; "
                                        "cast them with oar_cast", oar_dtype_name(in[0]->dtype));
    *n_out = 1;
    return oar_infer_broadcast("standard_gamma_grad", in, n_in, in[0]->dtype, out);
}

typedef struct grad_job {
    const oar_tensor *alpha, *x;
    oar_tensor *y;
} grad_job;

static void grad_range(void *p, int64_t begin, int64_t end) {
    const grad_job *j = p;
    const oar_dtype_traits *tr = &oar_dtypes[j->y->dtype];
    const int64_t es = (int64_t)tr->size;
    const char *ap = oar_tensor_ptr(j->alpha), *xp = oar_tensor_ptr(j->x);
    char *yp = oar_tensor_ptr(j->y);
    for (int64_t i = begin; i < end; i++)
        tr->store(yp + i * es, oar_gamma_sample_grad_d(tr->load(ap + i * es), tr->load(xp + i * es)));
}

static oar_status standard_gamma_grad_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                          oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)ctx; (void)n_out; (void)a;
    oar_tensor *y = out[0];
    if (y->numel == 0) return OAR_OK;
    /* the common case (a backward pass: alpha and the draws alike, contiguous) across the threads: each
     * element costs up to a few hundred series or fraction terms; anything else by the strided walk */
    if (in[0]->contiguous && in[1]->contiguous && in[0]->numel == y->numel && in[1]->numel == y->numel) {
        grad_job j = {in[0], in[1], y};
        oar_parallel_for(y->numel, 64, grad_range, &j);
        return OAR_OK;
    }
    oar_tensor *ops[3] = {y, in[0], in[1]};
    oar_iter it;
    oar_iter_init(&it, y->shape, y->ndim, ops, n_in + 1);
    const oar_dtype_traits *tr = &oar_dtypes[y->dtype];
    do tr->store(it.ptr[0], oar_gamma_sample_grad_d(tr->load(it.ptr[1]), tr->load(it.ptr[2])));
    while (oar_iter_next(&it));
    return OAR_OK;
}

/* torch 1.13 defines no derivative of _standard_gamma_grad: refuse rather than return a silent zero */
static oar_status standard_gamma_grad_grad(oar_grad_ctx *g) {
    (void)g;
    return oar_error(OAR_ERR_UNSUPPORTED, "standard_gamma_grad: its derivative is not implemented (as in torch "
                                          "1.13), so a second derivative through Gamma rsample is not available; "
                                          "detach the first-order gradient");
}

const oar_op_def oar_opdef_standard_gamma_grad = {
    .name = "standard_gamma_grad", .n_inputs = 2, .n_outputs = 1,
    .flags = OAR_OPF_ELEMENTWISE | OAR_OPF_STRIDED | OAR_OPF_AMP_DENY, .ref_dtypes = GAMMA_DTYPES,
    .infer = standard_gamma_grad_infer, .reference = standard_gamma_grad_ref, .grad = standard_gamma_grad_grad,
};

oar_tensor *oar_standard_gamma_grad(oar_tensor *alpha, oar_tensor *x) {
    oar_tensor *in[2] = {alpha, x};
    return oar_op_call1(OAR_OP_standard_gamma_grad, in, 2, NULL);
}
