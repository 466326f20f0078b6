/* qconv2d_nhwc(x, x_scale, x_zp, w, w_scale, bias?, y_scale?, y_zp?, residual?, residual_scale?,
 * residual_zp?, out_scale?, out_zp?; the attributes of qconv2d): qconv2d on NHWC data. x is
 * [N, H, W, C], the residual and y are [N, OH, OW, O], the weight stays [O, C / groups, kh, kw];
 * y[n, oy, ox, o] = qconv2d(permute(x, NCHW), ...)[n, o, oy, ox] with the same int32 sums and
 * epilogue (src/ops/quant.h), so the same bits. Inference only: the quant_nhwc pass makes it, so
 * that oneDNN's int8 convolutions, which compute NHWC, read and write it with no transposes
 * (src/kernels/cpu/qconv_dnnl.c). The reference below defines it.
 *
 * An f32 residual is added before the activation, as qconv2d's. A u8/i8 residual (with its scale
 * and zero point, and the output's: the fuse_qadd pass's) is an int8 block tail in the epilogue:
 *     y = qadd(qconv2d_nhwc(x, ...; activation none, dtype), residual; activation, dtype)
 * the conv's value rounded to its codes with y_scale and y_zp as that output would be, then qadd's
 * dequantize (with y_scale, y_zp), sum, ReLU and requantize with out_scale, out_zp: the bits of
 * the two ops, with no pass over the conv's codes in between. */
#include "ops/quant.h"

#include <math.h>
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

static bool is_q8(oar_dtype dt) { return dt == OAR_U8 || dt == OAR_I8; }

static const char *const QN_NAMES[QN_N - QN_RS] = {"residual_scale", "residual_zero_point", "out_scale",
                                                   "out_zero_point"};

/* A u8/i8 residual: its parameters and the output's present and 0-d, the output u8/i8. */
static oar_status int8_residual_check(oar_tensor *const *in, int n_in, const oar_attr *a) {
    for (int k = QN_RS; k < QN_N; k++) {
        const oar_tensor *t = k < n_in ? in[k] : NULL;
        bool scale = k == QN_RS || k == QN_OS;
        if (!t || t->ndim != 0 || (scale ? t->dtype != OAR_F32 : oar_dtypes[t->dtype].is_float))
            return oar_error(OAR_ERR_INVALID_ARG, "qconv2d_nhwc: a %s residual needs %s as a 0-d %s, got %s",
                             oar_dtype_name(in[QL_RES]->dtype), QN_NAMES[k - QN_RS], scale ? "f32" : "integer",
                             t ? oar_dtype_name(t->dtype) : "none");
    }
    if (!is_q8((oar_dtype)a[5].i) || (a[4].i != OAR_QACT_NONE && a[4].i != OAR_QACT_RELU))
        return oar_error(OAR_ERR_INVALID_ARG, "qconv2d_nhwc: a u8/i8 residual needs a u8/i8 output and activation "
                                              "none or relu, got %s and %lld", oar_dtype_name((oar_dtype)a[5].i),
                         (long long)a[4].i);
    return OAR_OK;
}

static oar_status qconv_nhwc_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    if (in[QL_X]->ndim != 4) {
        char s[128];
        oar_format_shape(in[QL_X]->shape, in[QL_X]->ndim, s, sizeof s);
        return oar_error(OAR_ERR_SHAPE, "qconv2d_nhwc: expected x 4-d [N, H, W, C], got shape %s", s);
    }
    bool qres = in[QL_RES] && is_q8(in[QL_RES]->dtype);
    oar_status st;
    if (qres && (st = int8_residual_check(in, n_in, a)) != OAR_OK) return st;
    if (!qres)
        for (int k = QN_RS; k < n_in && k < QN_N; k++)
            if (in[k])
                return oar_error(OAR_ERR_INVALID_ARG, "qconv2d_nhwc: %s is for a u8/i8 residual, got %s",
                                 QN_NAMES[k - QN_RS], in[QL_RES] ? "an f32 residual" : "no residual");
    oar_tensor x = nchw_shell(in[QL_X]), r = in[QL_RES] ? nchw_shell(in[QL_RES]) : (oar_tensor){0};
    oar_tensor *shells[QL_N];
    memcpy(shells, in, sizeof shells);
    shells[QL_X] = &x;
    if (in[QL_RES]) shells[QL_RES] = &r;
    if (qres) r.dtype = OAR_F32; /* qconv2d checks its shape */
    st = oar_opdef_qconv2d.infer(shells, QL_N, a, out, n_out);
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

oar_status oar_qepilogue_init_nhwc(oar_qepilogue *e, oar_tensor *const *in, oar_tensor *y, const oar_attr *a) {
    const oar_tensor *r = in[QL_RES];
    if (!r || !is_q8(r->dtype)) return oar_qepilogue_init(e, in, y, a);
    oar_attr plain[2] = {oar_attr_int(OAR_QACT_NONE), a[1]}; /* the conv's own codes: no activation */
    oar_status st = oar_qepilogue_init(e, in, y, plain);
    if (st != OAR_OK) return st;
    oar_qres *q = &e->qr;
    q->ys = (float)oar_dtypes[in[QL_YS]->dtype].load(oar_tensor_ptr(in[QL_YS])); /* as the codes were made with */
    q->rs = *(const float *)oar_tensor_ptr(in[QN_RS]);
    q->os = *(const float *)oar_tensor_ptr(in[QN_OS]);
    int32_t rmin, rmax;
    oar_qrange(r->dtype, &rmin, &rmax);
    int64_t rzp = oar_dtypes[in[QN_RZP]->dtype].load_i64(oar_tensor_ptr(in[QN_RZP]));
    int64_t ozp = oar_dtypes[in[QN_OZP]->dtype].load_i64(oar_tensor_ptr(in[QN_OZP]));
    if (!(q->rs > 0) || isinf(q->rs) || !(q->os > 0) || isinf(q->os) || rzp < rmin || rzp > rmax || ozp < e->qmin ||
        ozp > e->qmax) {
        oar_qepilogue_free(e);
        return oar_error(OAR_ERR_INVALID_ARG, "qconv2d_nhwc: expected positive finite residual and output scales and "
                                              "zero points within their dtypes' ranges, got %g, %g, %lld and %lld",
                         (double)q->rs, (double)q->os, (long long)rzp, (long long)ozp);
    }
    q->rzp = (int32_t)rzp, q->ozp = (int32_t)ozp;
    q->lo = (float)(e->qmin - q->ozp), q->hi = (float)(e->qmax - q->ozp);
    q->inv_o = 1.0f / q->os;
    q->fast = q->os >= 1.17549435e-38f && q->inv_o >= 1.17549435e-38f && q->inv_o < 3.4e38f;
    q->relu = a[0].i == OAR_QACT_RELU, q->r_signed = r->dtype == OAR_I8, q->on = true;
    return OAR_OK;
}

static oar_status qconv_nhwc_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                 int n_out, const oar_attr *a) {
    (void)ctx, (void)n_in, (void)n_out;
    oar_qconv_geom g;
    oar_status st = oar_qconv_nhwc_geom_get(in[QL_X], in[QL_W], a, &g);
    oar_qepilogue e;
    if (st != OAR_OK || (st = oar_qepilogue_init_nhwc(&e, in, out[0], a + 4)) != OAR_OK) return st;
    const oar_tensor *x = in[QL_X];
    int32_t xzp = (int32_t)oar_dtypes[in[QL_XZP]->dtype].load_i64(oar_tensor_ptr(in[QL_XZP]));
    const int8_t *w = (const int8_t *)oar_tensor_ptr(in[QL_W]);
    const float *res = in[QL_RES] && !e.qr.on ? (const float *)oar_tensor_ptr(in[QL_RES]) : NULL;
    const uint8_t *rq = e.qr.on ? (const uint8_t *)oar_tensor_ptr(in[QL_RES]) : NULL;
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
                    float v = oar_qepilogue_value(&e, (int32_t)s, o, res ? res + i : NULL);
                    if (rq) ((uint8_t *)oar_tensor_ptr(out[0]))[i] = (uint8_t)oar_qres_one(&e, v, rq[i]);
                    else oar_qepilogue_store(&e, v, oar_tensor_ptr(out[0]), i);
                }
    oar_qepilogue_free(&e);
    return OAR_OK;
}

const oar_op_def oar_opdef_qconv2d_nhwc = {
    .name = "qconv2d_nhwc", .n_inputs = QN_N, .n_outputs = 1, .key_input = QL_X, .n_attrs = 6,
    .attrs = {{"stride", OAR_ATTR_INTS}, {"padding", OAR_ATTR_INTS}, {"dilation", OAR_ATTR_INTS},
              {"groups", OAR_ATTR_INT}, {"activation", OAR_ATTR_INT}, {"dtype", OAR_ATTR_DTYPE}},
    .optional_inputs = (1u << QL_BIAS) | (1u << QL_YS) | (1u << QL_YZP) | (1u << QL_RES) | (1u << QN_RS) |
                       (1u << QN_RZP) | (1u << QN_OS) | (1u << QN_OZP),
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_DTYPE_BIT(OAR_U8) | OAR_DTYPE_BIT(OAR_I8),
    .infer = qconv_nhwc_infer, .reference = qconv_nhwc_ref,
};
