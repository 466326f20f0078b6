/* Copies and casts as ops (so they are differentiable and traceable), plus the public
 * element access helpers built on them. */
#include "ops/dispatch.h"
#include "ops/op.h"

#include <string.h>

static oar_status copy_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                           oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out; (void)a;
    return oar_tensor_copy_strided(out[0], in[0]);
}

static oar_status contiguous_grad(oar_grad_ctx *g) {
    g->gin[0] = g->gout[0];
    return OAR_OK;
}

const oar_op_def oar_opdef_contiguous = {
    .name = "contiguous", .n_inputs = 1, .n_outputs = 1,
    .flags = OAR_OPF_STRIDED | OAR_OPF_ELEMENTWISE, .ref_dtypes = OAR_ALL_DTYPES,
    .infer = oar_infer_same_as_input0, .reference = copy_ref, .grad = contiguous_grad,
};

static oar_status cast_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    if (!oar_dtype_valid((oar_dtype)a[0].i))
        return oar_error(OAR_ERR_DTYPE, "cast: expected a target dtype in 0..%d, got %lld",
                         OAR_DTYPE_COUNT - 1, (long long)a[0].i);
    oar_meta_from(out, in[0]);
    out->dtype = (oar_dtype)a[0].i;
    *n_out = 1;
    return OAR_OK;
}

static oar_status cast_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_cast(g->gout[0], g->in[0]->dtype);
    return OAR_OK;
}

const oar_op_def oar_opdef_cast = {
    .name = "cast", .n_inputs = 1, .n_outputs = 1, .n_attrs = 1, .attrs = {{"dtype", OAR_ATTR_DTYPE}},
    .flags = OAR_OPF_STRIDED | OAR_OPF_ELEMENTWISE, .ref_dtypes = OAR_ALL_DTYPES,
    .infer = cast_infer, .reference = copy_ref, .grad = cast_grad,
};

/* to_device: a copy on the device named by the attribute; its gradient goes back. */
static oar_status to_device_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    if (a[0].i != OAR_CPU && a[0].i != OAR_CUDA)
        return oar_error(OAR_ERR_INVALID_ARG, "to_device: expected a device (OAR_CPU or OAR_CUDA), got %lld",
                         (long long)a[0].i);
    oar_meta_from(out, in[0]);
    *n_out = 1;
    return OAR_OK;
}

static oar_status to_device_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_to(g->gout[0], g->in[0]->device);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_to_device = {
    .name = "to_device", .n_inputs = 1, .n_outputs = 1, .n_attrs = 1, .attrs = {{"device", OAR_ATTR_INT}},
    .flags = OAR_OPF_STRIDED | OAR_OPF_TO_DEVICE, .ref_dtypes = OAR_ALL_DTYPES,
    .infer = to_device_infer, .reference = copy_ref, .grad = to_device_grad,
};

oar_tensor *oar_to(oar_tensor *t, oar_device dev) {
    if (t && t->device == dev) return oar_view(t, t->shape, t->ndim); /* a new handle, no copy */
    oar_attr a = oar_attr_int(dev);
    oar_tensor *in[1] = {t};
    return oar_op_call1(OAR_OP_to_device, in, 1, &a);
}

oar_tensor *oar_contiguous(oar_tensor *t) {
    OAR_CHECK_HANDLE("contiguous", t, NULL);
    if (t && t->contiguous) return oar_view(t, t->shape, t->ndim); /* a new handle, no copy */
    oar_tensor *in[1] = {t};
    return oar_op_call1(OAR_OP_contiguous, in, 1, NULL);
}

oar_tensor *oar_clone(oar_tensor *t) {
    oar_tensor *in[1] = {t};
    return oar_op_call1(OAR_OP_contiguous, in, 1, NULL);
}

oar_tensor *oar_cast(oar_tensor *t, oar_dtype dt) {
    oar_attr a = oar_attr_dtype(dt);
    oar_tensor *in[1] = {t};
    return oar_op_call1(OAR_OP_cast, in, 1, &a);
}

oar_status oar_item(const oar_tensor *t, double *out) {
    OAR_CHECK_HANDLE("item", t, oar_last_status());
    if (!t || !out) return oar_error(OAR_ERR_INVALID_ARG, "item: expected a tensor and an output pointer, got NULL");
    if (!t->storage) return oar_symbolic_error("item", t);
    if (t->numel != 1) {
        char s[128];
        oar_format_shape(t->shape, t->ndim, s, sizeof s);
        return oar_error(OAR_ERR_SHAPE, "item: expected a tensor with one element, got shape %s", s);
    }
    if (t->device != OAR_CPU) {
        double v;
        oar_status st = oar_copy_to_buffer(t, &v, sizeof v, OAR_F64);
        if (st == OAR_OK) *out = v;
        return st;
    }
    *out = oar_dtypes[t->dtype].load(oar_tensor_ptr(t));
    return OAR_OK;
}

oar_status oar_copy_to_buffer(const oar_tensor *t, void *buf, size_t capacity, oar_dtype dt) {
    OAR_CHECK_HANDLE("copy_to_buffer", t, oar_last_status());
    if (!t || !buf) return oar_error(OAR_ERR_INVALID_ARG, "copy_to_buffer: expected a tensor and a buffer, got NULL");
    if (!t->storage) return oar_symbolic_error("copy_to_buffer", t);
    if (!oar_dtype_valid(dt)) return oar_error(OAR_ERR_DTYPE, "copy_to_buffer: invalid dtype %d", (int)dt);
    size_t need = (size_t)t->numel * oar_dtypes[dt].size;
    if (capacity < need)
        return oar_error(OAR_ERR_INVALID_ARG, "copy_to_buffer: expected a buffer of at least %zu bytes, "
                                              "got %zu", need, capacity);
    oar_tensor *dst = oar_tensor_shell(dt, t->shape, t->ndim);
    if (!dst) return oar_last_status();
    oar_storage s = {.refcount = 1, .data = buf, .nbytes = need};
    dst->storage = &s;
    oar_status st = oar_tensor_copy_strided(dst, t);
    dst->storage = NULL;
    oar_tensor_unref(dst);
    return st;
}

oar_status oar_copy_(oar_tensor *dst, const oar_tensor *src) {
    OAR_CHECK_HANDLE("copy_ (dst)", dst, oar_last_status());
    OAR_CHECK_HANDLE("copy_ (src)", src, oar_last_status());
    if (!dst || !src) return oar_error(OAR_ERR_INVALID_ARG, "copy_: expected two tensors, got NULL");
    int64_t shape[OAR_MAX_DIMS];
    int nd;
    if (!oar_broadcast_shapes(dst->shape, dst->ndim, src->shape, src->ndim, shape, &nd) || nd != dst->ndim ||
        memcmp(shape, dst->shape, sizeof(int64_t) * (size_t)nd)) {
        char a[128], b[128];
        oar_format_shape(dst->shape, dst->ndim, a, sizeof a);
        oar_format_shape(src->shape, src->ndim, b, sizeof b);
        return oar_error(OAR_ERR_SHAPE, "copy_: expected src to broadcast to dst's shape %s, got %s", a, b);
    }
    if (!dst->storage) return oar_dispatch_trace_assign(dst, src); /* a tensor made in a traced function */
    oar_status wst = oar_trace_check_write("copy_", dst);
    if (wst != OAR_OK) return wst;
    if (!src->storage)
        return oar_error(OAR_ERR_STATE, "copy_: writing a value computed by '%s' into a tensor that holds data (made "
                                        "with data inside the function being traced by oar_jit_to_static, such as "
                                        "zeros) is not something a program records; build the tensor from ops "
                                        "(cat, stack, where) instead", src->trace_op ? src->trace_op : "an op");
    if (dst->requires_grad && !dst->grad_fn && oar_grad_enabled())
        return oar_error(OAR_ERR_STATE, "copy_: dst is a leaf that requires grad; modify it inside "
                                        "oar_no_grad_begin/end (as optimizers do)");
    /* broadcast src into dst's shape through a stride-0 view */
    oar_tensor view = *src;
    int lead = dst->ndim - src->ndim;
    view.ndim = dst->ndim;
    for (int d = dst->ndim - 1; d >= 0; d--) {
        int sd = d - lead;
        view.shape[d] = dst->shape[d];
        view.strides[d] = sd < 0 || src->shape[sd] == 1 ? 0 : src->strides[sd];
    }
    oar_status st = oar_tensor_copy_strided(dst, &view);
    dst->storage->version++;
    return st;
}

oar_status oar_fill_(oar_tensor *dst, double value) {
    OAR_CHECK_HANDLE("fill_", dst, oar_last_status());
    if (!dst) return oar_error(OAR_ERR_INVALID_ARG, "fill_: tensor is NULL");
    if (!dst->storage && !oar_active_trace) return oar_symbolic_error("fill_", dst);
    oar_tensor *s = oar_tensor_new(dst->dtype, NULL, 0);
    if (!s) return oar_last_status();
    oar_dtypes[dst->dtype].store(oar_tensor_ptr(s), value);
    oar_status st = oar_copy_(dst, s);
    oar_tensor_unref(s);
    return st;
}
