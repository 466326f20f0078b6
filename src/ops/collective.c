/* Collective ops (see collective.h). Their kernels reach the communicator only through the
 * installed backend, so src/ops and src/graph stay below src/dist. */
#include "ops/collective.h"

#include "ops/op.h"

#include <stdio.h>
#include <string.h>

static oar_collective_backend g_backend; /* zeroed: one rank */

void oar_collective_set_backend(const oar_collective_backend *b) {
    g_backend = b ? *b : (oar_collective_backend){0};
}

static oar_status reduce(float *buf, int64_t count, int channel, uint64_t signature, bool fixed, bool average,
                         const char *label) {
    if (!g_backend.start) return OAR_OK; /* one rank: the average (or sum) is the value */
    oar_status st = g_backend.start(g_backend.user, buf, count, channel, signature, fixed, average, label);
    return st == OAR_OK ? g_backend.wait(g_backend.user, channel) : st;
}

static oar_status check_grad(const char *op, const oar_tensor *g, int k) {
    if (g->dtype != OAR_F32)
        return oar_error(OAR_ERR_DTYPE, "%s: expected f32 gradients (data parallel averages f32), got %s for input %d",
                         op, oar_dtype_name(g->dtype), k);
    if (g->device != OAR_CPU)
        return oar_error(OAR_ERR_UNSUPPORTED, "%s: expected gradients on the CPU (collectives on device buffers "
                                              "come with the NCCL backend), got input %d on another device", op, k);
    return OAR_OK;
}

static oar_status check_channel(const char *op, int64_t channel) {
    if (channel < 0 || channel >= OAR_COLLECTIVE_MAX_CHANNEL)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected 0 <= channel < %d, got %lld", op,
                         OAR_COLLECTIVE_MAX_CHANNEL, (long long)channel);
    return OAR_OK;
}

/* ---- grad_allreduce */
static oar_status grad_allreduce_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    oar_status st = check_grad("grad_allreduce", in[0], 0);
    if (st == OAR_OK) st = check_channel("grad_allreduce", a[1].i);
    if (st == OAR_OK && (a[2].i < 0 || a[3].i < 0))
        st = oar_error(OAR_ERR_INVALID_ARG, "grad_allreduce: expected bucket sizes >= 0 bytes (0: the default), got "
                                            "bucket_bytes %lld, first_bucket_bytes %lld", (long long)a[2].i,
                       (long long)a[3].i);
    if (st != OAR_OK) return st;
    oar_meta_from(out, in[0]);
    *n_out = 1;
    return OAR_OK;
}

static oar_status grad_allreduce_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                     int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    memcpy(oar_tensor_ptr(out[0]), oar_tensor_ptr(in[0]), sizeof(float) * (size_t)in[0]->numel);
    char label[96];
    snprintf(label, sizeof label, "gradient of %s", a[0].s);
    uint64_t sig = 14695981039346656037ull; /* FNV-1a of the name and the shape: ranks must agree */
    for (const char *c = a[0].s; *c; c++) sig = (sig ^ (unsigned char)*c) * 1099511628211ull;
    for (int d = 0; d < in[0]->ndim; d++) sig = (sig ^ (uint64_t)in[0]->shape[d]) * 1099511628211ull;
    return reduce((float *)oar_tensor_ptr(out[0]), out[0]->numel, OAR_COLLECTIVE_GRAD_CHANNEL + (int)a[1].i, sig,
                  a[4].i != 0, true, label);
}

const oar_op_def oar_opdef_grad_allreduce = {
    .name = "grad_allreduce", .n_inputs = 1, .n_outputs = 1, .n_attrs = 5,
    .attrs = {{"name", OAR_ATTR_STR}, {"channel", OAR_ATTR_INT}, {"bucket_bytes", OAR_ATTR_INT},
              {"first_bucket_bytes", OAR_ATTR_INT}, {"fixed_order", OAR_ATTR_INT}},
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_DTYPE_BIT(OAR_F32),
    .infer = grad_allreduce_infer, .reference = grad_allreduce_ref,
};

oar_tensor *oar_grad_allreduce(oar_tensor *g, const char *name, int index, int64_t bucket_bytes,
                               int64_t first_bucket_bytes, bool fixed_order) {
    oar_attr a[5] = {oar_attr_str(name ? name : ""), oar_attr_int(index), oar_attr_int(bucket_bytes),
                     oar_attr_int(first_bucket_bytes), oar_attr_int(fixed_order)};
    oar_tensor *in[1] = {g};
    return oar_op_call1(OAR_OP_grad_allreduce, in, 1, a);
}

/* ---- allreduce_start: pack, then start */
static oar_status allreduce_start_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out,
                                        int *n_out) {
    int64_t total = 0;
    for (int k = 0; k < n_in; k++) {
        oar_status st = check_grad("allreduce_start", in[k], k);
        if (st != OAR_OK) return st;
        total += in[k]->numel;
    }
    oar_status st = check_channel("allreduce_start", a[0].i);
    if (st != OAR_OK) return st;
    out->dtype = OAR_F32;
    out->ndim = 1;
    out->shape[0] = total;
    *n_out = 1;
    return OAR_OK;
}

static oar_status allreduce_start_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                      int n_out, const oar_attr *a) {
    (void)ctx; (void)n_out;
    float *buf = (float *)oar_tensor_ptr(out[0]);
    int64_t off = 0;
    for (int k = 0; k < n_in; k++) {
        memcpy(buf + off, oar_tensor_ptr(in[k]), sizeof(float) * (size_t)in[k]->numel);
        off += in[k]->numel;
    }
    if (!g_backend.start) return OAR_OK;
    return g_backend.start(g_backend.user, buf, off, OAR_COLLECTIVE_BUCKET_CHANNEL + (int)a[0].i, (uint64_t)a[1].i,
                           a[2].i != 0, true, a[3].s);
}

const oar_op_def oar_opdef_allreduce_start = {
    .name = "allreduce_start", .n_inputs = -1, .n_outputs = 1, .n_attrs = 4,
    .attrs = {{"channel", OAR_ATTR_INT}, {"signature", OAR_ATTR_INT}, {"fixed_order", OAR_ATTR_INT},
              {"label", OAR_ATTR_STR}},
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_DTYPE_BIT(OAR_F32),
    .infer = allreduce_start_infer, .reference = allreduce_start_ref,
};

/* ---- allreduce_wait */
static oar_status allreduce_wait_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out,
                                       int *n_out) {
    (void)n_in;
    const oar_tensor *b = in[0];
    if (b->dtype != OAR_F32 || b->ndim != 1) {
        char s[64];
        oar_format_shape(b->shape, b->ndim, s, sizeof s);
        return oar_error(OAR_ERR_INVALID_ARG, "allreduce_wait: expected the 1-d f32 bucket of an allreduce_start, "
                                              "got %s %s", oar_dtype_name(b->dtype), s);
    }
    oar_status st = check_channel("allreduce_wait", a[0].i);
    if (st != OAR_OK) return st;
    oar_meta_from(out, b);
    *n_out = 1;
    return OAR_OK;
}

static oar_status allreduce_wait_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                     int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    oar_status st = g_backend.wait ? g_backend.wait(g_backend.user, OAR_COLLECTIVE_BUCKET_CHANNEL + (int)a[0].i)
                                   : OAR_OK;
    if (st == OAR_OK && oar_tensor_ptr(out[0]) != oar_tensor_ptr(in[0])) /* not planned in place: copy */
        memcpy(oar_tensor_ptr(out[0]), oar_tensor_ptr(in[0]), sizeof(float) * (size_t)in[0]->numel);
    return st;
}

const oar_op_def oar_opdef_allreduce_wait = {
    .name = "allreduce_wait", .n_inputs = 1, .n_outputs = 1, .n_attrs = 1,
    .attrs = {{"channel", OAR_ATTR_INT}},
    .flags = OAR_OPF_NONDIFF | OAR_OPF_INPLACE_OK, .ref_dtypes = OAR_DTYPE_BIT(OAR_F32),
    .infer = allreduce_wait_infer, .reference = allreduce_wait_ref,
};

/* ---- allreduce_sum: differentiable, synchronous */
static oar_status allreduce_sum_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    if (in[0]->dtype != OAR_F32)
        return oar_error(OAR_ERR_DTYPE, "allreduce_sum: expected an f32 tensor, got %s", oar_dtype_name(in[0]->dtype));
    if (in[0]->device != OAR_CPU)
        return oar_error(OAR_ERR_UNSUPPORTED, "allreduce_sum: expected a tensor on the CPU (collectives on device "
                                              "buffers come with the NCCL backend)");
    oar_status st = check_channel("allreduce_sum", a[0].i);
    if (st != OAR_OK) return st;
    if (a[1].i < 0)
        return oar_error(OAR_ERR_INVALID_ARG, "allreduce_sum: expected group >= 0 (0: the world, else a process "
                                              "group's id), got %lld", (long long)a[1].i);
    oar_meta_from(out, in[0]);
    *n_out = 1;
    return OAR_OK;
}

static oar_status allreduce_sum_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                    int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    memcpy(oar_tensor_ptr(out[0]), oar_tensor_ptr(in[0]), sizeof(float) * (size_t)in[0]->numel);
    char label[64];
    snprintf(label, sizeof label, "allreduce_sum of %lld values", (long long)in[0]->numel);
    uint64_t sig = 14695981039346656037ull;
    for (int d = 0; d < in[0]->ndim; d++) sig = (sig ^ (uint64_t)in[0]->shape[d]) * 1099511628211ull;
    if (a[1].i > 0) { /* a process group's */
        if (!g_backend.group_sum)
            return oar_error(OAR_ERR_STATE, "allreduce_sum: process group %lld needs the distributed runtime "
                                            "(oar_dist_init; groups come from oar_dist_new_group)", (long long)a[1].i);
        return g_backend.group_sum(g_backend.user, (int)a[1].i, (float *)oar_tensor_ptr(out[0]), out[0]->numel,
                                   OAR_COLLECTIVE_SUM_CHANNEL + (int)a[0].i, sig, label);
    }
    return reduce((float *)oar_tensor_ptr(out[0]), out[0]->numel, OAR_COLLECTIVE_SUM_CHANNEL + (int)a[0].i, sig, true,
                  false, label);
}

static oar_status allreduce_sum_grad(oar_grad_ctx *g) {
    oar_tensor *in[1] = {g->gout[0]};
    g->gin[0] = oar_op_call1(OAR_OP_allreduce_sum, in, 1, g->attrs);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_allreduce_sum = {
    .name = "allreduce_sum", .n_inputs = 1, .n_outputs = 1, .n_attrs = 2,
    .attrs = {{"channel", OAR_ATTR_INT}, {"group", OAR_ATTR_INT}},
    .ref_dtypes = OAR_DTYPE_BIT(OAR_F32),
    .infer = allreduce_sum_infer, .reference = allreduce_sum_ref, .grad = allreduce_sum_grad,
};

oar_tensor *oar_allreduce_sum(oar_tensor *x, int channel, int group) {
    oar_attr a[2] = {oar_attr_int(channel), oar_attr_int(group)};
    oar_tensor *in[1] = {x};
    return oar_op_call1(OAR_OP_allreduce_sum, in, 1, a);
}
