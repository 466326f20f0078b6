/* Convolutions on NC[D]HW data: conv1d, conv2d / conv3d, conv_transpose2d / conv_transpose3d
 * and the backward ops of conv2d / conv3d. Each of them is one of the three linear maps of one
 * loop nest (conv_nest.h): the forward map (x, w) -> y, its adjoint in x (convNd_grad_input,
 * which is also conv_transposeNd) and its adjoint in w (convNd_grad_weight). Every gradient
 * rule is again one of the three, so gradients of any order stay convolutions. The 2-d and 3-d
 * ops are one code with the rank as a parameter; conv1d is the 2-d nest with a unit height. */
#include "ops/conv_nest.h"

#include <string.h>

/* What differs between the 2-d and 3-d ops: their names, ids and the layouts messages show. */
typedef struct conv_rank {
    int nsp;
    const char *fwd, *gin, *gw, *tr;
    oar_op_id fwd_id, gin_id, gw_id;
    const char *x_layout, *w_layout, *g_layout, *tw_layout;
} conv_rank;

static const conv_rank RANK2 = {2, "conv2d", "conv2d_grad_input", "conv2d_grad_weight", "conv_transpose2d",
                                OAR_OP_conv2d, OAR_OP_conv2d_grad_input, OAR_OP_conv2d_grad_weight,
                                "[N, C, H, W]", "[out, in / groups, kh, kw]", "[N, out, oh, ow]",
                                "[in, out / groups, kh, kw]"};
static const conv_rank RANK3 = {3, "conv3d", "conv3d_grad_input", "conv3d_grad_weight", "conv_transpose3d",
                                OAR_OP_conv3d, OAR_OP_conv3d_grad_input, OAR_OP_conv3d_grad_weight,
                                "[N, C, D, H, W]", "[out, in / groups, kd, kh, kw]", "[N, out, od, oh, ow]",
                                "[in, out / groups, kd, kh, kw]"};

/* The rank of a call whose input 0 is an activation or a grad (2 + nsp dims). */
static const conv_rank *rank_of(const oar_tensor *t) { return t->ndim == 5 ? &RANK3 : &RANK2; }

/* The op's output meta: dtype of in[0], shape [n, c, grid of g]. */
static void conv_meta(oar_meta *out, oar_dtype dt, int nsp, int64_t n, int64_t c, const int64_t *grid) {
    out->dtype = dt;
    out->ndim = 2 + nsp;
    out->shape[0] = n, out->shape[1] = c;
    memcpy(out->shape + 2, grid, sizeof(int64_t) * (size_t)nsp);
}

/* ---- gradient helpers: the three maps as op calls */
/* convNd of x with w under attrs spdg (stride, padding, dilation, groups), cut to the grid of
 * `like` (the tensor whose adjoint is wanted, see conv_nest.h). */
static oar_tensor *conv_call(oar_tensor *x, oar_tensor *w, const oar_attr *spdg, const oar_tensor *like) {
    oar_tensor *in[3] = {x, w, NULL};
    oar_tensor *y = oar_op_call1(rank_of(x)->fwd_id, in, 3, spdg);
    for (int d = 2; y && d < y->ndim; d++)
        if (y->shape[d] > like->shape[d]) y = oar_slice(y, d, 0, like->shape[d], 1);
    return y;
}

static oar_tensor *grad_input_call(oar_tensor *gy, oar_tensor *w, const oar_tensor *x, const oar_attr *spdg) {
    oar_attr a[5] = {oar_attr_ints(x->shape, x->ndim), spdg[0], spdg[1], spdg[2], spdg[3]};
    oar_tensor *in[2] = {gy, w};
    return oar_op_call1(rank_of(gy)->gin_id, in, 2, a);
}

static oar_tensor *grad_weight_call(oar_tensor *x, oar_tensor *gy, const oar_tensor *w, const oar_attr *spdg) {
    oar_attr a[5] = {oar_attr_ints(w->shape, w->ndim), spdg[0], spdg[1], spdg[2], spdg[3]};
    oar_tensor *in[2] = {x, gy};
    return oar_op_call1(rank_of(x)->gw_id, in, 2, a);
}

/* Sums over every dim but the channels. */
static oar_tensor *bias_grad(oar_tensor *gy) {
    int dims[4] = {0, 2, 3, 4};
    return oar_sum(gy, dims, gy->ndim - 1, false);
}

static const char *const XWB[3] = {"x", "weight", "bias"};

#define CONV_ATTRS(ONE, ZERO) {"stride", OAR_ATTR_INTS, ONE}, {"padding", OAR_ATTR_INTS, ZERO}, \
                   {"dilation", OAR_ATTR_INTS, ONE}, {"groups", OAR_ATTR_INT, "1"}

/* Wrappers that fix the rank of a shared implementation. */
#define RANKED_INFER(fn, r)                                                                                   \
    static oar_status fn##_##r(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) { \
        (void)n_in;                                                                                           \
        return fn(&RANK##r, in, a, out, n_out);                                                               \
    }
#define RANKED_REF(fn, r)                                                                                     \
    static oar_status fn##_##r(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,  \
                               int n_out, const oar_attr *a) {                                                \
        (void)ctx; (void)n_in; (void)n_out;                                                                   \
        return fn(&RANK##r, in, out, a);                                                                      \
    }

/* ---- convNd(x, weight, bias?; stride, padding, dilation, groups) */
static oar_status forward_geom(const conv_rank *r, oar_tensor *const *in, const oar_attr *a, oar_conv_geom *g) {
    oar_status st;
    const char *op = r->fwd;
    if ((st = oar_conv_check_dtypes(op, in, 3, XWB)) != OAR_OK) return st;
    if ((st = oar_conv_check_ndim(op, in[0], "x", 2 + r->nsp, r->x_layout)) != OAR_OK) return st;
    if ((st = oar_conv_check_ndim(op, in[1], "weight", 2 + r->nsp, r->w_layout)) != OAR_OK) return st;
    if ((st = oar_conv_read_params(op, &a[0], &a[1], &a[2], &a[3], r->nsp, g)) != OAR_OK) return st;
    if ((st = oar_conv_fill_geom(op, in[0]->shape, in[1]->shape, "x", "weight", r->nsp, g)) != OAR_OK) return st;
    return oar_conv_check_bias(op, in[2], g->co);
}

static oar_status forward_infer(const conv_rank *r, oar_tensor *const *in, const oar_attr *a, oar_meta *out,
                                int *n_out) {
    oar_conv_geom g;
    oar_status st = forward_geom(r, in, a, &g);
    if (st != OAR_OK) return st;
    conv_meta(out, in[0]->dtype, r->nsp, g.n, g.co, g.o + 3 - r->nsp);
    *n_out = 1;
    return OAR_OK;
}

static oar_status forward_ref(const conv_rank *r, oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a) {
    oar_conv_geom g;
    forward_geom(r, in, a, &g);
    return oar_conv_ref_run(OAR_CONV_FORWARD, &g, in[0], in[1], out[0], in[2]);
}

static oar_status forward_grad(oar_grad_ctx *g) {
    oar_tensor *gy = oar_conv_dense(g->gout[0]), *x = g->in[0], *w = g->in[1];
    if (g->needs[0]) g->gin[0] = grad_input_call(gy, w, x, g->attrs);
    if (g->needs[1]) g->gin[1] = grad_weight_call(x, gy, w, g->attrs);
    if (g->needs[2]) g->gin[2] = bias_grad(gy);
    return oar_conv_grads_done(g);
}

RANKED_INFER(forward_infer, 2)
RANKED_INFER(forward_infer, 3)
RANKED_REF(forward_ref, 2)
RANKED_REF(forward_ref, 3)

const oar_op_def oar_opdef_conv2d = {
    .name = "conv2d", .n_inputs = 3, .n_outputs = 1, .n_attrs = 4, .attrs = {CONV_ATTRS("1,1", "0,0")},
    .flags = OAR_OPF_AMP_ALLOW | OAR_OPF_QUANTIZABLE, .ref_dtypes = OAR_FLOAT_DTYPES, .optional_inputs = 1u << 2,
    .infer = forward_infer_2, .reference = forward_ref_2, .grad = forward_grad,
};

const oar_op_def oar_opdef_conv3d = {
    .name = "conv3d", .n_inputs = 3, .n_outputs = 1, .n_attrs = 4, .attrs = {CONV_ATTRS("1,1,1", "0,0,0")},
    .flags = OAR_OPF_AMP_ALLOW, .ref_dtypes = OAR_FLOAT_DTYPES, .optional_inputs = 1u << 2,
    .infer = forward_infer_3, .reference = forward_ref_3, .grad = forward_grad,
};

/* ---- convNd_grad_input(grad, weight; input_shape, stride, padding, dilation, groups):
 * the adjoint of convNd in x, onto a zero tensor of input_shape. */
static oar_status grad_input_geom(const conv_rank *r, oar_tensor *const *in, const oar_attr *a, oar_conv_geom *g) {
    static const char *const names[2] = {"grad", "weight"};
    const char *op = r->gin;
    const int nd = 2 + r->nsp;
    oar_status st;
    if ((st = oar_conv_check_dtypes(op, in, 2, names)) != OAR_OK) return st;
    if ((st = oar_conv_check_ndim(op, in[0], "grad", nd, r->g_layout)) != OAR_OK) return st;
    if ((st = oar_conv_check_ndim(op, in[1], "weight", nd, r->w_layout)) != OAR_OK) return st;
    if (a[0].n != nd)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected input_shape to have %d entries %s, got %d", op, nd,
                         r->x_layout, a[0].n);
    for (int i = 0; i < nd; i++)
        if (a[0].ints[i] < 0)
            return oar_error(OAR_ERR_INVALID_ARG, "%s: expected input_shape entries >= 0, got %lld", op,
                             (long long)a[0].ints[i]);
    if ((st = oar_conv_read_params(op, &a[1], &a[2], &a[3], &a[4], r->nsp, g)) != OAR_OK) return st;
    if ((st = oar_conv_fill_geom(op, a[0].ints, in[1]->shape, "input_shape", "weight", r->nsp, g)) != OAR_OK)
        return st;
    if (in[0]->shape[0] != g->n || in[0]->shape[1] != g->co)
        return oar_error(OAR_ERR_SHAPE, "%s: expected grad.shape[0:2] == [%lld, %lld] (batch of input_shape, "
                                        "weight.shape[0]), got [%lld, %lld]", op, (long long)g->n,
                         (long long)g->co, (long long)in[0]->shape[0], (long long)in[0]->shape[1]);
    return oar_conv_take_grid(op, in[0], r->nsp, g, "input_shape");
}

static oar_status grad_input_infer(const conv_rank *r, oar_tensor *const *in, const oar_attr *a, oar_meta *out,
                                   int *n_out) {
    oar_conv_geom g;
    oar_status st = grad_input_geom(r, in, a, &g);
    if (st != OAR_OK) return st;
    conv_meta(out, in[0]->dtype, r->nsp, a[0].ints[0], a[0].ints[1], a[0].ints + 2);
    *n_out = 1;
    return OAR_OK;
}

static oar_status grad_input_ref(const conv_rank *r, oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a) {
    oar_conv_geom g;
    grad_input_geom(r, in, a, &g);
    return oar_conv_ref_run(OAR_CONV_GRAD_INPUT, &g, out[0], in[1], in[0], NULL);
}

/* dx = A_w(gy): linear in gy (adjoint: convNd) and in w (adjoint: grad_weight). */
static oar_status grad_input_grad(oar_grad_ctx *g) {
    oar_tensor *ggx = g->gout[0], *gy = g->in[0], *w = g->in[1];
    if (g->needs[0]) g->gin[0] = conv_call(ggx, w, g->attrs + 1, gy);
    if (g->needs[1]) g->gin[1] = grad_weight_call(ggx, gy, w, g->attrs + 1);
    return oar_conv_grads_done(g);
}

RANKED_INFER(grad_input_infer, 2)
RANKED_INFER(grad_input_infer, 3)
RANKED_REF(grad_input_ref, 2)
RANKED_REF(grad_input_ref, 3)

const oar_op_def oar_opdef_conv2d_grad_input = {
    .name = "conv2d_grad_input", .n_inputs = 2, .n_outputs = 1, .n_attrs = 5,
    .attrs = {{"input_shape", OAR_ATTR_INTS}, CONV_ATTRS("1,1", "0,0")},
    .flags = OAR_OPF_AMP_ALLOW, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = grad_input_infer_2, .reference = grad_input_ref_2, .grad = grad_input_grad,
};

const oar_op_def oar_opdef_conv3d_grad_input = {
    .name = "conv3d_grad_input", .n_inputs = 2, .n_outputs = 1, .n_attrs = 5,
    .attrs = {{"input_shape", OAR_ATTR_INTS}, CONV_ATTRS("1,1,1", "0,0,0")},
    .flags = OAR_OPF_AMP_ALLOW, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = grad_input_infer_3, .reference = grad_input_ref_3, .grad = grad_input_grad,
};

/* ---- convNd_grad_weight(x, grad; weight_shape, stride, padding, dilation, groups):
 * the adjoint of convNd in the weight. */
static oar_status grad_weight_geom(const conv_rank *r, oar_tensor *const *in, const oar_attr *a, oar_conv_geom *g) {
    static const char *const names[2] = {"x", "grad"};
    const char *op = r->gw;
    const int nd = 2 + r->nsp;
    oar_status st;
    if ((st = oar_conv_check_dtypes(op, in, 2, names)) != OAR_OK) return st;
    if ((st = oar_conv_check_ndim(op, in[0], "x", nd, r->x_layout)) != OAR_OK) return st;
    if ((st = oar_conv_check_ndim(op, in[1], "grad", nd, r->g_layout)) != OAR_OK) return st;
    if (a[0].n != nd)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected weight_shape to have %d entries %s, got %d", op, nd,
                         r->w_layout, a[0].n);
    if ((st = oar_conv_read_params(op, &a[1], &a[2], &a[3], &a[4], r->nsp, g)) != OAR_OK) return st;
    if ((st = oar_conv_fill_geom(op, in[0]->shape, a[0].ints, "x", "weight_shape", r->nsp, g)) != OAR_OK) return st;
    if (in[1]->shape[0] != g->n || in[1]->shape[1] != g->co)
        return oar_error(OAR_ERR_SHAPE, "%s: expected grad.shape[0:2] == [%lld, %lld] (x.shape[0], "
                                        "weight_shape[0]), got [%lld, %lld]", op, (long long)g->n,
                         (long long)g->co, (long long)in[1]->shape[0], (long long)in[1]->shape[1]);
    return oar_conv_take_grid(op, in[1], r->nsp, g, "x");
}

static oar_status grad_weight_infer(const conv_rank *r, oar_tensor *const *in, const oar_attr *a, oar_meta *out,
                                    int *n_out) {
    oar_conv_geom g;
    oar_status st = grad_weight_geom(r, in, a, &g);
    if (st != OAR_OK) return st;
    conv_meta(out, in[0]->dtype, r->nsp, a[0].ints[0], a[0].ints[1], a[0].ints + 2);
    *n_out = 1;
    return OAR_OK;
}

static oar_status grad_weight_ref(const conv_rank *r, oar_tensor *const *in, oar_tensor *const *out,
                                  const oar_attr *a) {
    oar_conv_geom g;
    grad_weight_geom(r, in, a, &g);
    return oar_conv_ref_run(OAR_CONV_GRAD_WEIGHT, &g, in[0], out[0], in[1], NULL);
}

/* dw = B(x, gy): linear in x (adjoint: grad_input) and in gy (adjoint: convNd). */
static oar_status grad_weight_grad(oar_grad_ctx *g) {
    oar_tensor *ggw = g->gout[0], *x = g->in[0], *gy = g->in[1];
    if (g->needs[0]) g->gin[0] = grad_input_call(gy, ggw, x, g->attrs + 1);
    if (g->needs[1]) g->gin[1] = conv_call(x, ggw, g->attrs + 1, gy);
    return oar_conv_grads_done(g);
}

RANKED_INFER(grad_weight_infer, 2)
RANKED_INFER(grad_weight_infer, 3)
RANKED_REF(grad_weight_ref, 2)
RANKED_REF(grad_weight_ref, 3)

const oar_op_def oar_opdef_conv2d_grad_weight = {
    .name = "conv2d_grad_weight", .n_inputs = 2, .n_outputs = 1, .n_attrs = 5,
    .attrs = {{"weight_shape", OAR_ATTR_INTS}, CONV_ATTRS("1,1", "0,0")},
    .flags = OAR_OPF_AMP_ALLOW, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = grad_weight_infer_2, .reference = grad_weight_ref_2, .grad = grad_weight_grad,
};

const oar_op_def oar_opdef_conv3d_grad_weight = {
    .name = "conv3d_grad_weight", .n_inputs = 2, .n_outputs = 1, .n_attrs = 5,
    .attrs = {{"weight_shape", OAR_ATTR_INTS}, CONV_ATTRS("1,1,1", "0,0,0")},
    .flags = OAR_OPF_AMP_ALLOW, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = grad_weight_infer_3, .reference = grad_weight_ref_3, .grad = grad_weight_grad,
};

/* ---- conv_transposeNd(x, weight, bias?; stride, padding, output_padding, dilation, groups)
 * with weight [in, out / groups, k...]: the adjoint of convNd(y, weight), i.e. grad_input
 * with x as the grad. Its geometry is that conv's, with the roles of x and y swapped. */
typedef __int128 wide;
static int64_t sat64(wide v) { return v > INT64_MAX ? INT64_MAX : v < INT64_MIN ? INT64_MIN : (int64_t)v; }

static oar_status transpose_geom(const conv_rank *r, oar_tensor *const *in, const oar_attr *a, oar_conv_geom *g,
                                 int64_t *yshape) {
    const char *op = r->tr;
    const int nsp = r->nsp, lead = 3 - nsp;
    oar_status st;
    if ((st = oar_conv_check_dtypes(op, in, 3, XWB)) != OAR_OK) return st;
    if ((st = oar_conv_check_ndim(op, in[0], "x", 2 + nsp, r->x_layout)) != OAR_OK) return st;
    if ((st = oar_conv_check_ndim(op, in[1], "weight", 2 + nsp, r->tw_layout)) != OAR_OK) return st;
    if ((st = oar_conv_read_params(op, &a[0], &a[1], &a[3], &a[4], nsp, g)) != OAR_OK) return st;
    int64_t opad[3] = {0, 0, 0};
    if ((st = oar_conv_read_list(op, "output_padding", &a[2], nsp, 0, opad)) != OAR_OK) return st;
    const oar_tensor *x = in[0], *w = in[1];
    if (x->shape[1] != w->shape[0])
        return oar_error(OAR_ERR_SHAPE, "%s: expected weight.shape[0] == x.shape[1] (in channels), got %lld != %lld",
                         op, (long long)w->shape[0], (long long)x->shape[1]);
    if (w->shape[0] % g->groups != 0)
        return oar_error(OAR_ERR_SHAPE, "%s: expected weight.shape[0] (in channels) divisible by groups, got "
                                        "%lld %% %lld != 0", op, (long long)w->shape[0], (long long)g->groups);
    const int64_t *s = g->s + lead, *d = g->d + lead, *p = g->p + lead;
    for (int i = 0; i < nsp; i++)
        if (opad[i] >= s[i] && opad[i] >= d[i])
            return oar_error(OAR_ERR_INVALID_ARG, "%s: expected output_padding smaller than stride or dilation, "
                                                  "got output_padding %lld with stride %lld and dilation %lld", op,
                             (long long)opad[i], (long long)s[i], (long long)d[i]);
    yshape[0] = x->shape[0];
    yshape[1] = sat64((wide)w->shape[1] * g->groups);
    for (int i = 0; i < nsp; i++) {
        yshape[2 + i] = sat64(((wide)x->shape[2 + i] - 1) * s[i] - 2 * (wide)p[i] +
                              (wide)d[i] * (w->shape[2 + i] - 1) + opad[i] + 1);
        if (yshape[1] == INT64_MAX || yshape[2 + i] == INT64_MAX)
            return oar_error(OAR_ERR_SHAPE, "%s: expected an output size below 2^63, got a larger one along dim "
                                            "%d; check stride, dilation and groups", op, yshape[1] == INT64_MAX ? 1 : 2 + i);
        if (yshape[2 + i] < 1 || x->shape[2 + i] < 1)
            return oar_error(OAR_ERR_SHAPE, "%s: expected a positive output size, got %lld along dim %d for input "
                                            "size %lld; use less padding", op, (long long)yshape[2 + i], 2 + i,
                             (long long)x->shape[2 + i]);
    }
    if ((st = oar_conv_check_bias(op, in[2], yshape[1])) != OAR_OK) return st;
    /* the conv from y back to x: weight [in, out / groups, k...] is its [co, ci / groups, ..] */
    if ((st = oar_conv_fill_geom(op, yshape, w->shape, "output", "weight", nsp, g)) != OAR_OK) return st;
    for (int i = 0; i < nsp; i++) g->o[lead + i] = x->shape[2 + i];
    return OAR_OK;
}

static oar_status transpose_infer(const conv_rank *r, oar_tensor *const *in, const oar_attr *a, oar_meta *out,
                                  int *n_out) {
    oar_conv_geom g;
    oar_status st = transpose_geom(r, in, a, &g, out->shape);
    if (st != OAR_OK) return st;
    out->dtype = in[0]->dtype;
    out->ndim = 2 + r->nsp;
    *n_out = 1;
    return OAR_OK;
}

static oar_status transpose_ref(const conv_rank *r, oar_tensor *const *in, oar_tensor *const *out,
                                const oar_attr *a) {
    oar_conv_geom g;
    int64_t ys[5];
    transpose_geom(r, in, a, &g, ys);
    return oar_conv_ref_run(OAR_CONV_GRAD_INPUT, &g, out[0], in[1], in[0], in[2]);
}

static oar_status transpose_grad(oar_grad_ctx *g) {
    oar_tensor *gy = oar_conv_dense(g->gout[0]), *x = g->in[0], *w = g->in[1];
    oar_attr spdg[4] = {g->attrs[0], g->attrs[1], g->attrs[3], g->attrs[4]};
    if (g->needs[0]) g->gin[0] = conv_call(gy, w, spdg, x);
    if (g->needs[1]) g->gin[1] = grad_weight_call(gy, x, w, spdg);
    if (g->needs[2]) g->gin[2] = bias_grad(gy);
    return oar_conv_grads_done(g);
}

RANKED_INFER(transpose_infer, 2)
RANKED_INFER(transpose_infer, 3)
RANKED_REF(transpose_ref, 2)
RANKED_REF(transpose_ref, 3)

#define TRANSPOSE_ATTRS(ONE, ZERO) {"stride", OAR_ATTR_INTS, ONE}, {"padding", OAR_ATTR_INTS, ZERO}, \
    {"output_padding", OAR_ATTR_INTS, ZERO}, {"dilation", OAR_ATTR_INTS, ONE}, {"groups", OAR_ATTR_INT, "1"}

const oar_op_def oar_opdef_conv_transpose2d = {
    .name = "conv_transpose2d", .n_inputs = 3, .n_outputs = 1, .n_attrs = 5,
    .attrs = {{"stride", OAR_ATTR_INTS}, {"padding", OAR_ATTR_INTS}, {"output_padding", OAR_ATTR_INTS},
              {"dilation", OAR_ATTR_INTS}, {"groups", OAR_ATTR_INT}},
    .flags = OAR_OPF_AMP_ALLOW | OAR_OPF_QUANTIZABLE, .ref_dtypes = OAR_FLOAT_DTYPES, .optional_inputs = 1u << 2,
    .infer = transpose_infer_2, .reference = transpose_ref_2, .grad = transpose_grad,
};

const oar_op_def oar_opdef_conv_transpose3d = {
    .name = "conv_transpose3d", .n_inputs = 3, .n_outputs = 1, .n_attrs = 5,
    .attrs = {TRANSPOSE_ATTRS("1,1,1", "0,0,0")},
    .flags = OAR_OPF_AMP_ALLOW, .ref_dtypes = OAR_FLOAT_DTYPES, .optional_inputs = 1u << 2,
    .infer = transpose_infer_3, .reference = transpose_ref_3, .grad = transpose_grad,
};

/* ---- conv1d(x [N, C, L], weight [out, C / groups, k], bias?; stride, padding, dilation, groups) */
static oar_status conv1d_geom(oar_tensor *const *in, const oar_attr *a, oar_conv_geom *g) {
    oar_status st;
    if ((st = oar_conv_check_dtypes("conv1d", in, 3, XWB)) != OAR_OK) return st;
    if ((st = oar_conv_check_ndim("conv1d", in[0], "x", 3, "[N, C, L]")) != OAR_OK) return st;
    if ((st = oar_conv_check_ndim("conv1d", in[1], "weight", 3, "[out, in / groups, k]")) != OAR_OK) return st;
    if ((st = oar_conv_read_params("conv1d", &a[0], &a[1], &a[2], &a[3], 1, g)) != OAR_OK) return st;
    if ((st = oar_conv_fill_geom("conv1d", in[0]->shape, in[1]->shape, "x", "weight", 1, g)) != OAR_OK) return st;
    return oar_conv_check_bias("conv1d", in[2], g->co);
}

static oar_status conv1d_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    oar_conv_geom g;
    oar_status st = conv1d_geom(in, a, &g);
    if (st != OAR_OK) return st;
    conv_meta(out, in[0]->dtype, 1, g.n, g.co, g.o + 2);
    *n_out = 1;
    return OAR_OK;
}

static oar_status conv1d_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                             int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    oar_conv_geom g;
    conv1d_geom(in, a, &g);
    return oar_conv_ref_run(OAR_CONV_FORWARD, &g, in[0], in[1], out[0], in[2]);
}

/* The rule runs the 2-d backward ops on unit-height views. */
static oar_status conv1d_grad(oar_grad_ctx *g) {
    oar_tensor *x4 = oar_unsqueeze(g->in[0], 2), *w4 = oar_unsqueeze(g->in[1], 2);
    oar_tensor *gy4 = oar_unsqueeze(oar_conv_dense(g->gout[0]), 2);
    int64_t s[2] = {1, g->attrs[0].ints[0]}, p[2] = {0, g->attrs[1].ints[0]}, d[2] = {1, g->attrs[2].ints[0]};
    oar_attr spdg[4] = {oar_attr_ints(s, 2), oar_attr_ints(p, 2), oar_attr_ints(d, 2), g->attrs[3]};
    if (g->needs[0]) g->gin[0] = oar_squeeze(grad_input_call(gy4, w4, x4, spdg), 2);
    if (g->needs[1]) g->gin[1] = oar_squeeze(grad_weight_call(x4, gy4, w4, spdg), 2);
    if (g->needs[2]) g->gin[2] = bias_grad(g->gout[0]);
    return oar_conv_grads_done(g);
}

const oar_op_def oar_opdef_conv1d = {
    .name = "conv1d", .n_inputs = 3, .n_outputs = 1, .n_attrs = 4, .attrs = {CONV_ATTRS("1", "0")},
    .flags = OAR_OPF_AMP_ALLOW | OAR_OPF_QUANTIZABLE, .ref_dtypes = OAR_FLOAT_DTYPES, .optional_inputs = 1u << 2,
    .infer = conv1d_infer, .reference = conv1d_ref, .grad = conv1d_grad,
};

/* ---- public API: option structs resolved to explicit attributes (zero fields: defaults) */
static int64_t or_default(int64_t v, int64_t def) { return v ? v : def; }

static oar_tensor *conv_public(oar_op_id op, oar_tensor *x, oar_tensor *w, oar_tensor *b, const oar_conv_opts *o,
                               int nsp) {
    static const oar_conv_opts defaults;
    if (!o) o = &defaults;
    int64_t s[2], p[2], d[2], opad[2];
    for (int i = 0; i < nsp; i++) {
        s[i] = or_default(o->stride[i], 1);
        p[i] = o->padding[i];
        d[i] = or_default(o->dilation[i], 1);
        opad[i] = o->output_padding[i];
    }
    oar_attr groups = oar_attr_int(or_default(o->groups, 1));
    oar_tensor *in[3] = {x, w, b};
    if (op == OAR_OP_conv_transpose2d) {
        oar_attr a[5] = {oar_attr_ints(s, 2), oar_attr_ints(p, 2), oar_attr_ints(opad, 2), oar_attr_ints(d, 2), groups};
        return oar_op_call1(op, in, 3, a);
    }
    oar_attr a[4] = {oar_attr_ints(s, nsp), oar_attr_ints(p, nsp), oar_attr_ints(d, nsp), groups};
    return oar_op_call1(op, in, 3, a);
}

oar_tensor *oar_conv1d(oar_tensor *x, oar_tensor *weight, oar_tensor *bias, const oar_conv_opts *opts) {
    return conv_public(OAR_OP_conv1d, x, weight, bias, opts, 1);
}

oar_tensor *oar_conv2d(oar_tensor *x, oar_tensor *weight, oar_tensor *bias, const oar_conv_opts *opts) {
    return conv_public(OAR_OP_conv2d, x, weight, bias, opts, 2);
}

oar_tensor *oar_conv_transpose2d(oar_tensor *x, oar_tensor *weight, oar_tensor *bias, const oar_conv_opts *opts) {
    return conv_public(OAR_OP_conv_transpose2d, x, weight, bias, opts, 2);
}
