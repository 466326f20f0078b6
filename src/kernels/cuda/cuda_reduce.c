/* CUDA kernels of the reduction family (src/ops/reduce.c, reduce_dim.c): sum, mean, amax,
 * amin, prod, var, std, logsumexp, norm, argmax, argmin, cumsum; f32, f64, f16 and bf16
 * (through double, like the reference), and integers
 * and bool for sum, prod, amax, amin, argmax, argmin and cumsum (as the reference: int64
 * accumulation with wrap-around). Inputs may have
 * any strides (the ops are OAR_OPF_STRIDED): the index plans carry them to the kernels. */
#include "cuda_backend.h"
#include "launch_reduce.h"
#include "ops/reduce_plan.h"

#define FLOATS OAR_FLOAT_DTYPES /* f32, f64, f16, bf16: computed in double, stored rounded */

/* reduce_plan (byte strides) -> the launchers' plan (element strides) */
static void to_cu_plan(const oar_tensor *t, uint32_t mask, oar_cu_rplan *q) {
    reduce_plan p;
    reduce_plan_make(t, mask, &p);
    int64_t es = (int64_t)oar_dtypes[t->dtype].size;
    memset(q, 0, sizeof *q);
    q->n_outer = p.n_outer;
    q->n_inner = p.n_inner;
    for (int d = 0; d < p.n_outer; d++) {
        q->outer_shape[d] = p.outer_shape[d];
        q->outer_stride[d] = p.outer_stride[d] / es;
    }
    for (int d = 0; d < p.n_inner; d++) {
        q->inner_shape[d] = p.inner_shape[d];
        q->inner_stride[d] = p.inner_stride[d] / es;
    }
    q->outer_numel = p.outer_numel;
    q->inner_numel = p.inner_numel;
}

static oar_status run_reduce(const oar_kctx *ctx, int kind, const char *name, const oar_tensor *x, oar_tensor *y,
                             const oar_attr *dims, double p, int64_t correction) {
    uint32_t mask = 0;
    oar_status st = oar_dims_mask(name, dims, x->ndim, &mask);
    if (st != OAR_OK) return st;
    oar_cu_rplan q;
    to_cu_plan(x, mask, &q);
    size_t sb = oar_cu_reduce_scratch_bytes(kind, &q);
    void *scratch = sb ? oar_cuda_scratch(sb) : NULL;
    if (sb && !scratch) return oar_last_status();
    int e = oar_cu_reduce(kind, (int)x->dtype, oar_tensor_ptr(x), oar_tensor_ptr(y), &q, p, correction, scratch,
                          oar_cuda_stream_of(ctx));
    if (scratch) oar_cuda_scratch_free(scratch, sb);
    return oar_cuda_status((cudaError_t)e, name);
}

#define SIMPLE_REDUCE(NAME, KIND)                                                                       \
    static oar_status cu_##NAME(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, \
                                int n_out, const oar_attr *a) {                                        \
        (void)n_in; (void)n_out;                                                                       \
        return run_reduce(ctx, KIND, #NAME, in[0], out[0], &a[0], 0, 0);                                \
    }
SIMPLE_REDUCE(sum, OAR_CU_R_SUM)
SIMPLE_REDUCE(mean, OAR_CU_R_MEAN)
SIMPLE_REDUCE(amax, OAR_CU_R_AMAX)
SIMPLE_REDUCE(amin, OAR_CU_R_AMIN)
SIMPLE_REDUCE(prod, OAR_CU_R_PROD)
SIMPLE_REDUCE(logsumexp, OAR_CU_R_LSE)

static oar_status cu_var(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                         const oar_attr *a) {
    (void)n_in; (void)n_out;
    return run_reduce(ctx, OAR_CU_R_VAR, "var", in[0], out[0], &a[0], 0, a[1].i);
}
static oar_status cu_std(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                         const oar_attr *a) {
    (void)n_in; (void)n_out;
    return run_reduce(ctx, OAR_CU_R_STD, "std", in[0], out[0], &a[0], 0, a[1].i);
}
static oar_status cu_norm(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                          const oar_attr *a) {
    (void)n_in; (void)n_out;
    return run_reduce(ctx, OAR_CU_R_NORM, "norm", in[0], out[0], &a[1], a[0].f, 0);
}

/* A dim attribute against x (a 0-d tensor accepts 0 and -1): the mask of its one dim. */
static oar_status one_dim_mask(const char *name, const oar_tensor *x, int64_t dim, uint32_t *mask) {
    int nd = x->ndim ? x->ndim : 1;
    if (dim < -nd || dim >= nd)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected dim in [%d, %d], got %lld", name, -nd, nd - 1,
                         (long long)dim);
    int d = x->ndim ? (int)(dim < 0 ? dim + nd : dim) : 0;
    *mask = dim_mask(d, x->ndim);
    return OAR_OK;
}

static oar_status run_argext(const oar_kctx *ctx, bool is_min, oar_tensor *const *in, oar_tensor *const *out,
                             const oar_attr *a) {
    const char *name = is_min ? "argmin" : "argmax";
    uint32_t mask = 0;
    oar_status st = one_dim_mask(name, in[0], a[0].i, &mask);
    if (st != OAR_OK) return st;
    oar_cu_rplan q;
    to_cu_plan(in[0], mask, &q);
    int e = oar_cu_argext(is_min, (int)in[0]->dtype, oar_tensor_ptr(in[0]), (int64_t *)oar_tensor_ptr(out[0]), &q,
                          oar_cuda_stream_of(ctx));
    return oar_cuda_status((cudaError_t)e, name);
}
static oar_status cu_argmax(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                            int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    return run_argext(ctx, false, in, out, a);
}
static oar_status cu_argmin(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                            int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    return run_argext(ctx, true, in, out, a);
}

static oar_status cu_cumsum(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                            int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    uint32_t mask = 0;
    oar_status st = one_dim_mask("cumsum", in[0], a[0].i, &mask);
    if (st != OAR_OK) return st;
    oar_cu_rplan qx, qy;
    to_cu_plan(in[0], mask, &qx);
    to_cu_plan(out[0], mask, &qy);
    int e = oar_cu_cumsum((int)in[0]->dtype, oar_tensor_ptr(in[0]), oar_tensor_ptr(out[0]), &qx, &qy,
                          a[1].i != 0, oar_cuda_stream_of(ctx));
    return oar_cuda_status((cudaError_t)e, "cumsum");
}

/* Outputs of the input's dtype (the float ops, and amax/amin of any dtype). */
static bool same_float_out(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)a;
    return n_out >= 1 && out[0]->dtype == in[0]->dtype && in[0]->ndim <= OAR_CU_RPLAN_DIMS;
}
/* sum, prod, cumsum: floats keep their dtype, integers and bool accumulate into int64. */
static bool widening_out(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)a;
    oar_dtype want = oar_dtypes[in[0]->dtype].is_float ? in[0]->dtype : OAR_I64;
    return n_out >= 1 && out[0]->dtype == want && in[0]->ndim <= OAR_CU_RPLAN_DIMS;
}

#define INTS (OAR_INT_DTYPES | OAR_DTYPE_BIT(OAR_BOOL))

void oar_cuda_register_reduce(void) {
    oar_cuda_register(OAR_OP_sum, FLOATS | INTS, cu_sum, widening_out);
    oar_cuda_register(OAR_OP_mean, FLOATS, cu_mean, same_float_out);
    oar_cuda_register(OAR_OP_amax, FLOATS | INTS, cu_amax, same_float_out);
    oar_cuda_register(OAR_OP_amin, FLOATS | INTS, cu_amin, same_float_out);
    oar_cuda_register(OAR_OP_prod, FLOATS | INTS, cu_prod, widening_out);
    oar_cuda_register(OAR_OP_var, FLOATS, cu_var, same_float_out);
    oar_cuda_register(OAR_OP_std, FLOATS, cu_std, same_float_out);
    oar_cuda_register(OAR_OP_logsumexp, FLOATS, cu_logsumexp, same_float_out);
    oar_cuda_register(OAR_OP_norm, FLOATS, cu_norm, same_float_out);
    oar_cuda_register(OAR_OP_argmax, FLOATS | OAR_INT_DTYPES, cu_argmax, NULL);
    oar_cuda_register(OAR_OP_argmin, FLOATS | OAR_INT_DTYPES, cu_argmin, NULL);
    oar_cuda_register(OAR_OP_cumsum, FLOATS | INTS, cu_cumsum, widening_out);
}
