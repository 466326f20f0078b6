/* Reductions over any set of dims with keepdim. The reference kernel walks the output and,
 * for each output element, the reduced sub-block of the input. */
#include "ops/op.h"

#include <string.h>

/* Output meta for reducing the dims in mask. */
static oar_status reduce_infer(const char *name, const oar_tensor *x, const oar_attr *dims, bool keepdim,
                               oar_dtype out_dt, oar_meta *out, uint32_t *mask_out) {
    uint32_t mask;
    oar_status st = oar_dims_mask(name, dims, x->ndim, &mask);
    if (st != OAR_OK) return st;
    out->dtype = out_dt;
    out->ndim = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (mask & (1u << d)) {
            if (keepdim) out->shape[out->ndim++] = 1;
        } else {
            out->shape[out->ndim++] = x->shape[d];
        }
    }
    if (mask_out) *mask_out = mask;
    return OAR_OK;
}

/* Splits x's dims into kept (outer) and reduced (inner) index spaces. */
typedef struct reduce_plan {
    int n_outer, n_inner;
    int64_t outer_shape[OAR_MAX_DIMS], outer_stride[OAR_MAX_DIMS];
    int64_t inner_shape[OAR_MAX_DIMS], inner_stride[OAR_MAX_DIMS];
    int64_t outer_numel, inner_numel;
} reduce_plan;

static void reduce_plan_make(const oar_tensor *x, uint32_t mask, reduce_plan *p) {
    memset(p, 0, sizeof *p);
    p->outer_numel = p->inner_numel = 1;
    int64_t es = (int64_t)oar_dtypes[x->dtype].size;
    for (int d = 0; d < x->ndim; d++) {
        if (mask & (1u << d)) {
            p->inner_shape[p->n_inner] = x->shape[d];
            p->inner_stride[p->n_inner++] = x->strides[d] * es;
            p->inner_numel *= x->shape[d];
        } else {
            p->outer_shape[p->n_outer] = x->shape[d];
            p->outer_stride[p->n_outer++] = x->strides[d] * es;
            p->outer_numel *= x->shape[d];
        }
    }
}

/* Byte offset of the i-th element of an index space. */
static inline int64_t space_offset(int n, const int64_t *shape, const int64_t *stride, int64_t i) {
    int64_t off = 0;
    for (int d = n - 1; d >= 0; d--) {
        off += (i % shape[d]) * stride[d];
        i /= shape[d];
    }
    return off;
}

static oar_status sum_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    if (in[0]->dtype == OAR_BOOL)
        return oar_error(OAR_ERR_DTYPE, "sum: expected a numeric tensor, got bool; cast it first");
    *n_out = 1;
    return reduce_infer("sum", in[0], &a[0], a[1].i != 0, in[0]->dtype, out, NULL);
}

static oar_status sum_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                          int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    const oar_tensor *x = in[0];
    uint32_t mask;
    oar_dims_mask("sum", &a[0], x->ndim, &mask);
    reduce_plan p;
    reduce_plan_make(x, mask, &p);
    const oar_dtype_traits *tr = &oar_dtypes[x->dtype];
    char *base = oar_tensor_ptr(x), *y = oar_tensor_ptr(out[0]);
    for (int64_t o = 0; o < p.outer_numel; o++) {
        char *xo = base + space_offset(p.n_outer, p.outer_shape, p.outer_stride, o);
        if (tr->is_float) {
            double acc = 0;
            for (int64_t i = 0; i < p.inner_numel; i++)
                acc += tr->load(xo + space_offset(p.n_inner, p.inner_shape, p.inner_stride, i));
            tr->store(y + o * (int64_t)tr->size, acc);
        } else {
            int64_t acc = 0;
            for (int64_t i = 0; i < p.inner_numel; i++)
                acc += tr->load_i64(xo + space_offset(p.n_inner, p.inner_shape, p.inner_stride, i));
            tr->store_i64(y + o * (int64_t)tr->size, acc);
        }
    }
    return OAR_OK;
}

/* Gradient of a reduction: reshape g to keepdim form, then broadcast over the input. */
static oar_tensor *unreduce(oar_tensor *g, const oar_tensor *x, const oar_attr *dims) {
    uint32_t mask;
    if (oar_dims_mask("sum", dims, x->ndim, &mask) != OAR_OK) return NULL;
    int64_t kshape[OAR_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) kshape[d] = (mask & (1u << d)) ? 1 : x->shape[d];
    return oar_expand(oar_reshape(g, kshape, x->ndim), x->shape, x->ndim);
}

static oar_status sum_grad(oar_grad_ctx *g) {
    g->gin[0] = unreduce(g->gout[0], g->in[0], &g->attrs[0]);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_sum = {
    .name = "sum", .n_inputs = 1, .n_outputs = 1, .n_attrs = 2,
    .attrs = {{"dims", OAR_ATTR_INTS}, {"keepdim", OAR_ATTR_INT}},
    .flags = OAR_OPF_STRIDED | OAR_OPF_AMP_DENY, .ref_dtypes = OAR_ALL_DTYPES & ~OAR_DTYPE_BIT(OAR_BOOL),
    .infer = sum_infer, .reference = sum_ref, .grad = sum_grad,
};

static oar_tensor *reduce_call(oar_op_id op, oar_tensor *x, const int *dims, int n_dims, bool keepdim) {
    if (n_dims < 0 || n_dims > OAR_MAX_DIMS) {
        oar_error(OAR_ERR_INVALID_ARG, "%s: expected 0..%d dims, got %d", oar_op_table[op]->name, OAR_MAX_DIMS, n_dims);
        return NULL;
    }
    oar_attr a[2] = {oar_attr_dims(dims, n_dims), oar_attr_int(keepdim)};
    oar_tensor *in[1] = {x};
    return oar_op_call1(op, in, 1, a);
}

oar_tensor *oar_sum(oar_tensor *x, const int *dims, int n_dims, bool keepdim) {
    return reduce_call(OAR_OP_sum, x, dims, n_dims, keepdim);
}
