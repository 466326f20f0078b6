/* The vector_norm op: the p-norm of all of a tensor's elements as an f64 scalar, like
 * torch.linalg.vector_norm(x, p, dtype=float64). Gradient clipping is written with it. Terms
 * are summed in double over fixed blocks (in parallel), so the result does not depend on the
 * number of threads; p = INFINITY gives the largest magnitude (NaN propagates). Listed in
 * src/ops/optim.def. */
#include "ops/op.h"
#include "optim/optim.h"

#include <math.h>

#define NAME "vector_norm"

enum { NORM_INF, NORM_L1, NORM_L2, NORM_P };

typedef struct norm_ctx {
    const void *x;
    oar_dtype dt;
    int64_t n, block;
    int mode;
    double p;
    double *part;
} norm_ctx;

static inline double norm_term(double a, int mode, double p) {
    a = fabs(a);
    return mode == NORM_L1 ? a : mode == NORM_L2 ? a * a : pow(a, p);
}

static void norm_range(void *ctx, int64_t bbegin, int64_t bend) {
    const norm_ctx *c = ctx;
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

static oar_status norm_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    double p = a[0].f;
    if (!(p > 0))
        return OAR_FAIL(OAR_ERR_INVALID_ARG, NAME, "expected p > 0 (INFINITY for the largest magnitude), got %g", p);
    if (in[0]->dtype != OAR_F32 && in[0]->dtype != OAR_F64)
        return OAR_FAIL(OAR_ERR_DTYPE, NAME, "expected x to be f32 or f64, got %s; convert it with oar_cast",
                        oar_dtype_name(in[0]->dtype));
    *out = (oar_meta){.dtype = OAR_F64, .ndim = 0};
    *n_out = 1;
    return OAR_OK;
}

static oar_status norm_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                           const oar_attr *a) {
    (void)ctx;
    (void)n_in;
    (void)n_out;
    const oar_tensor *x = in[0];
    double p = a[0].f, part[OAR_OPTIM_MAX_BLOCKS];
    int mode = isinf(p) ? NORM_INF : p == 1 ? NORM_L1 : p == 2 ? NORM_L2 : NORM_P;
    norm_ctx c = {.x = x->numel ? oar_tensor_ptr(x) : NULL, .dt = x->dtype, .n = x->numel,
                  .block = oar_optim_block_size(x->numel), .mode = mode, .p = p, .part = part};
    int64_t n_blocks = (c.n + c.block - 1) / c.block;
    oar_parallel_for(n_blocks, 1, norm_range, &c);
    double acc = 0;
    for (int64_t k = 0; k < n_blocks; k++) {
        if (mode == NORM_INF) acc = (part[k] > acc || part[k] != part[k]) ? part[k] : acc;
        else acc += part[k];
    }
    *(double *)oar_tensor_ptr(out[0]) =
        mode == NORM_INF || mode == NORM_L1 ? acc : mode == NORM_L2 ? sqrt(acc) : pow(acc, 1 / p);
    return OAR_OK;
}

/* The rule of norm over all dims (torch's norm_backward), on x with y and g in x's dtype. */
static oar_status norm_grad(oar_grad_ctx *g) {
    if (!g->gout[0] || !g->needs[0]) return OAR_OK;
    oar_tensor *x = g->in[0];
    oar_tensor *y = oar_cast(g->out[0], x->dtype), *gy = oar_cast(g->gout[0], x->dtype);
    if (!y || !gy) return oar_last_status();
    oar_attr attrs[3] = {oar_attr_float(g->attrs[0].f), oar_attr_dims(NULL, 0), oar_attr_int(0)};
    oar_tensor *in[1] = {x}, *out[1] = {y}, *gout[1] = {gy}, *gin[1] = {NULL};
    bool needs[1] = {true};
    oar_grad_ctx sub = {.attrs = attrs, .in = in, .n_in = 1, .out = out, .n_out = 1, .gout = gout, .needs = needs,
                        .gin = gin};
    oar_status st = oar_opdef_norm.grad(&sub);
    g->gin[0] = gin[0];
    return st;
}

const oar_op_def oar_opdef_vector_norm = {
    .name = NAME, .n_inputs = 1, .n_outputs = 1, .n_attrs = 1, .attrs = {{"p", OAR_ATTR_FLOAT}},
    .flags = OAR_OPF_AMP_DENY, .ref_dtypes = OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64),
    .infer = norm_infer, .reference = norm_ref, .grad = norm_grad,
};

oar_tensor *oar_optim_vector_norm(oar_tensor *x, double p) {
    oar_attr a = oar_attr_float(p);
    return oar_op_call1(OAR_OP_vector_norm, &x, 1, &a);
}
