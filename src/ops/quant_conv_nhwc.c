/* qconv2d_nhwc(x, x_scale, x_zp, w, w_scale, bias?, y_scale?, y_zp?, residual?; the attributes of
 * qconv2d): qconv2d on NHWC data. x is [N, H, W, C], the residual and y are [N, OH, OW, O], the
 * weight stays [O, C / groups, kh, kw]; y[n, oy, ox, o] = qconv2d(permute(x, NCHW), ...)[n, o, oy, ox]
 * with the same int32 sums and epilogue (src/ops/quant.h), so the same bits. Inference only: the
 * quant_nhwc pass makes it, so that oneDNN's int8 convolutions, which compute NHWC, read and
 * write it with no transposes (src/kernels/cpu/qconv_dnnl.c). The reference below defines it. */
#include "ops/quant.h"

#include <stdio.h>
#include <string.h>

static const int64_t TO_NCHW[4] = {0, 3, 1, 2};

/* An NCHW stand-in of NHWC tensor t (shape only) */
static oar_tensor nchw_shell(const oar_tensor *t) {
    oar_tensor s = *t;
    if (t->ndim == 4)
        for (int d = 0; d < 4; d++) s.shape[d] = t->shape[TO_NCHW[d]];
    return s;
}

static oar_status qconv_nhwc_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    if (in[QL_X]->ndim != 4) {
        char s[128];
        oar_format_shape(in[QL_X]->shape, in[QL_X]->ndim, s, sizeof s);
        return oar_error(OAR_ERR_SHAPE, "qconv2d_nhwc: expected x 4-d [N, H, W, C], got shape %s", s);
    }
    oar_tensor x = nchw_shell(in[QL_X]), r = in[QL_RES] ? nchw_shell(in[QL_RES]) : (oar_tensor){0};
    oar_tensor *shells[QL_N];
    memcpy(shells, in, sizeof shells);
    shells[QL_X] = &x;
    if (in[QL_RES]) shells[QL_RES] = &r;
    oar_status st = oar_opdef_qconv2d.infer(shells, n_in, a, out, n_out);
    if (st != OAR_OK) { /* qconv2d's message, under this op's name */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", oar_last_error());
        return oar_error(st, "qconv2d_nhwc: %s", strncmp(msg, "qconv2d: ", 9) ? msg : msg + 9);
    }
    int64_t o = out->shape[1];
    out->shape[1] = out->shape[2], out->shape[2] = out->shape[3], out->shape[3] = o;
    return OAR_OK;
}

oar_status oar_qconv_nhwc_geom_get(const oar_tensor *x, const oar_tensor *w, const oar_attr *a, oar_qconv_geom *g) {
    oar_tensor xs = nchw_shell(x);
    return oar_qconv_geom_get(&xs, w, a, g);
}

static oar_status qconv_nhwc_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                 int n_out, const oar_attr *a) {
    (void)ctx, (void)n_in, (void)n_out;
    oar_qconv_geom g;
    oar_status st = oar_qconv_nhwc_geom_get(in[QL_X], in[QL_W], a, &g);
    oar_qepilogue e;
    if (st != OAR_OK || (st = oar_qepilogue_init(&e, in, out[0], a + 4)) != OAR_OK) return st;
    const oar_tensor *x = in[QL_X];
    int32_t xzp = (int32_t)oar_dtypes[in[QL_XZP]->dtype].load_i64(oar_tensor_ptr(in[QL_XZP]));
    const int8_t *w = (const int8_t *)oar_tensor_ptr(in[QL_W]);
    const float *res = in[QL_RES] ? (const float *)oar_tensor_ptr(in[QL_RES]) : NULL;
    int64_t cg = g.c / g.groups, og = g.o / g.groups, i = 0;
    for (int64_t b = 0; b < g.n; b++)
        for (int64_t oy = 0; oy < g.oh; oy++)
            for (int64_t ox = 0; ox < g.ow; ox++)
                for (int64_t o = 0; o < g.o; o++, i++) {
                    int64_t c0 = (o / og) * cg;
                    uint32_t s = 0; /* int32, wrapping as the fast kernels */
                    for (int64_t ky = 0; ky < g.kh; ky++)
                        for (int64_t kx = 0; kx < g.kw; kx++) {
                            int64_t iy = oy * g.sh - g.ph + ky * g.dh, ix = ox * g.sw - g.pw + kx * g.dw;
                            if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue; /* the zero point */
                            int64_t xi = ((b * g.h + iy) * g.w + ix) * g.c + c0;
                            for (int64_t c = 0; c < cg; c++) {
                                int32_t xv = x->dtype == OAR_U8 ? ((const uint8_t *)oar_tensor_ptr(x))[xi + c]
                                                                : ((const int8_t *)oar_tensor_ptr(x))[xi + c];
                                s += (uint32_t)((xv - xzp) * w[((o * cg + c) * g.kh + ky) * g.kw + kx]);
                            }
                        }
                    oar_qepilogue_store(&e, oar_qepilogue_value(&e, (int32_t)s, o, res ? res + i : NULL),
                                        oar_tensor_ptr(out[0]), i);
                }
    oar_qepilogue_free(&e);
    return OAR_OK;
}

const oar_op_def oar_opdef_qconv2d_nhwc = {
    .name = "qconv2d_nhwc", .n_inputs = QL_N, .n_outputs = 1, .key_input = QL_X, .n_attrs = 6,
    .attrs = {{"stride", OAR_ATTR_INTS}, {"padding", OAR_ATTR_INTS}, {"dilation", OAR_ATTR_INTS},
              {"groups", OAR_ATTR_INT}, {"activation", OAR_ATTR_INT}, {"dtype", OAR_ATTR_DTYPE}},
    .optional_inputs = (1u << QL_BIAS) | (1u << QL_YS) | (1u << QL_YZP) | (1u << QL_RES),
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_DTYPE_BIT(OAR_U8) | OAR_DTYPE_BIT(OAR_I8),
    .infer = qconv_nhwc_infer, .reference = qconv_nhwc_ref,
};
