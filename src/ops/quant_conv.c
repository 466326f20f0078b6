/* qconv2d(x, x_scale, x_zp, w, w_scale, bias?, y_scale?, y_zp?, residual?; stride, padding,
 * dilation, groups, activation, dtype): int8 convolution on NCHW data, groups and depthwise
 * included, with qlinear's int32 sums and epilogue (src/ops/quant.h): per output channel
 * x_scale * w_scale[o], bias, residual add, ReLU, f32 or requantized u8/i8. Padding holds the
 * zero point, i.e. the real value 0, as in torch's quantized conv. */
#include "ops/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
    int64_t span = in + 2 * p - d * (k - 1) - 1;
    return span < 0 ? 0 : span / s + 1;
}

oar_status oar_qconv_geom_get(const oar_tensor *x, const oar_tensor *w, const oar_attr *a, oar_qconv_geom *g) {
    for (int i = 0; i < 3; i++) {
        static const char *const what[3] = {"stride", "padding", "dilation"};
        if (a[i].n != 2 || a[i].ints[0] < (i == 1 ? 0 : 1) || a[i].ints[1] < (i == 1 ? 0 : 1) || a[i].ints[0] > 1 << 20 ||
            a[i].ints[1] > 1 << 20)
            return oar_error(OAR_ERR_INVALID_ARG, "qconv2d: expected %s as 2 entries >= %d, got %d entries", what[i],
                             i == 1 ? 0 : 1, a[i].n);
    }
    if (x->ndim != 4 || w->ndim != 4)
        return oar_error(OAR_ERR_SHAPE, "qconv2d: expected x [N, C, H, W] and weight [out, in / groups, kh, kw], got "
                                        "%d-d and %d-d", x->ndim, w->ndim);
    *g = (oar_qconv_geom){.n = x->shape[0], .c = x->shape[1], .h = x->shape[2], .w = x->shape[3], .o = w->shape[0],
                          .kh = w->shape[2], .kw = w->shape[3], .sh = a[0].ints[0], .sw = a[0].ints[1],
                          .ph = a[1].ints[0], .pw = a[1].ints[1], .dh = a[2].ints[0], .dw = a[2].ints[1],
                          .groups = a[3].i};
    if (g->groups < 1 || g->o % g->groups || w->shape[1] * g->groups != g->c)
        return oar_error(OAR_ERR_SHAPE, "qconv2d: expected groups >= 1 dividing out channels %lld, with weight.shape[1] "
                                        "* groups == x.shape[1], got groups %lld, %lld * %lld != %lld",
                         (long long)g->o, (long long)g->groups, (long long)w->shape[1], (long long)g->groups,
                         (long long)g->c);
    if (g->c < 1 || g->kh < 1 || g->kw < 1 || g->kh > 1 << 16 || g->kw > 1 << 16)
        return oar_error(OAR_ERR_SHAPE, "qconv2d: expected at least one input channel and a kernel of size >= 1, got "
                                        "%lld channels, kernel %lld x %lld", (long long)g->c, (long long)g->kh,
                         (long long)g->kw);
    g->oh = out_size(g->h, g->kh, g->sh, g->ph, g->dh);
    g->ow = out_size(g->w, g->kw, g->sw, g->pw, g->dw);
    if (g->oh < 1 || g->ow < 1)
        return oar_error(OAR_ERR_SHAPE, "qconv2d: expected the padded input to be at least as large as the dilated "
                                        "kernel, got input %lld x %lld, kernel %lld x %lld", (long long)g->h,
                         (long long)g->w, (long long)g->kh, (long long)g->kw);
    return OAR_OK;
}

static oar_status qconv_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    /* qlinear's checks of everything but the shapes: its infer on a 2-d view of the weight */
    const oar_tensor *x = in[QL_X], *w = in[QL_W];
    if ((x->dtype != OAR_U8 && x->dtype != OAR_I8) || w->dtype != OAR_I8)
        return oar_error(OAR_ERR_DTYPE, "qconv2d: expected x u8 or i8 and weight i8, got %s and %s; quantize them first",
                         oar_dtype_name(x->dtype), oar_dtype_name(w->dtype));
    if (a[4].i != OAR_QACT_NONE && a[4].i != OAR_QACT_RELU)
        return oar_error(OAR_ERR_INVALID_ARG, "qconv2d: expected activation 0 (none) or 1 (relu), got %lld",
                         (long long)a[4].i);
    oar_qconv_geom g;
    oar_status st = oar_qconv_geom_get(x, w, a, &g);
    if (st != OAR_OK) return st;
    oar_tensor xv = *x, wv = *w; /* shape-only stand-ins: [1, K] x [O, K] */
    xv.ndim = 2, xv.shape[0] = 1, xv.shape[1] = w->shape[1] * g.kh * g.kw;
    wv.ndim = 2, wv.shape[0] = g.o, wv.shape[1] = xv.shape[1];
    oar_tensor *lin[QL_N];
    memcpy(lin, in, sizeof lin);
    lin[QL_X] = &xv, lin[QL_W] = &wv, lin[QL_RES] = NULL;
    oar_meta m;
    int n = 1;
    if ((st = oar_opdef_qlinear.infer(lin, QL_N, a + 4, &m, &n)) != OAR_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", oar_last_error());
        return oar_error(st, "qconv2d: %s", strncmp(msg, "qlinear: ", 9) ? msg : msg + 9);
    }
    *out = (oar_meta){.dtype = m.dtype, .ndim = 4, .shape = {g.n, g.o, g.oh, g.ow}};
    const oar_tensor *r = in[QL_RES];
    if (r && (r->dtype != OAR_F32 || r->ndim != 4 || memcmp(r->shape, out->shape, sizeof(int64_t) * 4)))
        return oar_error(OAR_ERR_SHAPE, "qconv2d: expected residual f32 of the output's shape, got %s of %d dims",
                         oar_dtype_name(r->dtype), r->ndim);
    *n_out = 1;
    return OAR_OK;
}

static oar_status qconv_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                            const oar_attr *a) {
    oar_qconv_geom g;
    oar_status st = oar_qconv_geom_get(in[QL_X], in[QL_W], a, &g);
    oar_qepilogue e;
    if (st != OAR_OK || (st = oar_qepilogue_init(&e, in, out[0], a + 4)) != OAR_OK) return st;
    const oar_tensor *x = in[QL_X];
    int32_t xzp = (int32_t)oar_dtypes[in[QL_XZP]->dtype].load_i64(oar_tensor_ptr(in[QL_XZP]));
    const int8_t *w = (const int8_t *)oar_tensor_ptr(in[QL_W]);
    const float *res = in[QL_RES] ? (const float *)oar_tensor_ptr(in[QL_RES]) : NULL;
    int64_t cg = g.c / g.groups, og = g.o / g.groups, i = 0;
    for (int64_t b = 0; b < g.n; b++)
        for (int64_t o = 0; o < g.o; o++) {
            int64_t c0 = (o / og) * cg;
            for (int64_t oy = 0; oy < g.oh; oy++)
                for (int64_t ox = 0; ox < g.ow; ox++, i++) {
                    uint32_t s = 0; /* int32, wrapping as the fast kernels */
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t ky = 0; ky < g.kh; ky++)
                            for (int64_t kx = 0; kx < g.kw; kx++) {
                                int64_t iy = oy * g.sh - g.ph + ky * g.dh, ix = ox * g.sw - g.pw + kx * g.dw;
                                if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue; /* the zero point */
                                int64_t xi = ((b * g.c + c0 + c) * g.h + iy) * g.w + ix;
                                int32_t xv = x->dtype == OAR_U8 ? ((const uint8_t *)oar_tensor_ptr(x))[xi]
                                                                : ((const int8_t *)oar_tensor_ptr(x))[xi];
                                s += (uint32_t)((xv - xzp) * w[((o * cg + c) * g.kh + ky) * g.kw + kx]);
                            }
                    oar_qepilogue_store(&e, oar_qepilogue_value(&e, (int32_t)s, o, res ? res + i : NULL),
                                        oar_tensor_ptr(out[0]), i);
                }
        }
    oar_qepilogue_free(&e);
    return OAR_OK;
}

const oar_op_def oar_opdef_qconv2d = {
    .name = "qconv2d", .n_inputs = QL_N, .n_outputs = 1, .key_input = QL_X, .n_attrs = 6,
    .attrs = {{"stride", OAR_ATTR_INTS}, {"padding", OAR_ATTR_INTS}, {"dilation", OAR_ATTR_INTS},
              {"groups", OAR_ATTR_INT}, {"activation", OAR_ATTR_INT}, {"dtype", OAR_ATTR_DTYPE}},
    .optional_inputs = (1u << QL_BIAS) | (1u << QL_YS) | (1u << QL_YZP) | (1u << QL_RES),
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_DTYPE_BIT(OAR_U8) | OAR_DTYPE_BIT(OAR_I8),
    .infer = qconv_infer, .reference = qconv_ref,
};

oar_tensor *oar_qconv2d(oar_tensor *x, oar_tensor *x_scale, oar_tensor *x_zero_point, oar_tensor *weight,
                        oar_tensor *w_scale, oar_tensor *bias, const oar_conv_opts *conv, const oar_qlinear_opts *opts) {
    oar_conv_opts c = conv ? *conv : (oar_conv_opts){0};
    oar_qlinear_opts o = opts ? *opts : (oar_qlinear_opts){0};
    int64_t s[2] = {c.stride[0] ? c.stride[0] : 1, c.stride[1] ? c.stride[1] : 1};
    int64_t d[2] = {c.dilation[0] ? c.dilation[0] : 1, c.dilation[1] ? c.dilation[1] : 1};
    oar_tensor *in[QL_N] = {x, x_scale, x_zero_point, weight, w_scale, bias, o.y_scale, o.y_zero_point, o.residual};
    oar_attr at[6] = {oar_attr_ints(s, 2), oar_attr_ints(c.padding, 2), oar_attr_ints(d, 2),
                      oar_attr_int(c.groups ? c.groups : 1), oar_attr_int(o.relu ? OAR_QACT_RELU : OAR_QACT_NONE),
                      oar_attr_dtype(o.out_dtype)};
    return oar_op_call1(OAR_OP_qconv2d, in, QL_N, at);
}
