/* Quantization arithmetic shared by the reference kernels (src/ops/quant.c) and the fast int8
 * kernels (src/kernels/cpu/qgemm_x86.c), so that their integer results agree bit for bit.
 *
 * The affine map is torch's: q = clamp(nearbyint(x * (1/scale)) + zero_point, qmin, qmax), the
 * product taken in the input's precision (f32: 1/scale in float, as fbgemm does), rounding half
 * to even, the zero point added after rounding; x = (q - zero_point) * scale. */
#ifndef OAR_OPS_QUANT_H
#define OAR_OPS_QUANT_H

#include "ops/op.h"

#include <math.h>

/* qlinear's activation codes (attribute "activation"); the GELUs with f32 outputs only, as
 * the gelu op computes them (approximate = 0: erf, 1: tanh), so that gelu(qlinear(...; f32))
 * can become one qlinear with the same bits (the fuse_quant pass) */
enum { OAR_QACT_NONE = 0, OAR_QACT_RELU = 1, OAR_QACT_GELU_ERF = 2, OAR_QACT_GELU_TANH = 3 };

/* The gelu op's reference formula in double (src/ops/unary.c): its f32 result is
 * (float)oar_gelu_ref((double)x, tanh_form). */
double oar_gelu_ref(double x, bool tanh_form);

/* max/min in the order _mm*_max_ps/_min_ps take them: a NaN t gives the bound, as the SIMD code does */
static inline float oar_qmaxf(float t, float b) { return t > b ? t : b; }
static inline float oar_qminf(float t, float b) { return t < b ? t : b; }

/* One value quantized with inv = 1/scale in float; saturating to [qmin, qmax] (clamping before
 * the rounding is the same as after for integer bounds, and keeps huge values out of int). */
static inline int32_t oar_quantize_f32(float x, float inv, int32_t zp, int32_t qmin, int32_t qmax) {
    float t = oar_qminf(oar_qmaxf(x * inv, (float)(qmin - zp)), (float)(qmax - zp));
    return (int32_t)nearbyintf(t) + zp;
}
static inline int32_t oar_quantize_f64(double x, double inv, int32_t zp, int32_t qmin, int32_t qmax) {
    double t = x * inv;
    t = t > qmin - zp ? t : qmin - zp;
    t = t < qmax - zp ? t : qmax - zp;
    return (int32_t)nearbyint(t) + zp;
}

/* The value range of an 8-bit dtype. */
static inline void oar_qrange(oar_dtype dt, int32_t *qmin, int32_t *qmax) {
    *qmin = dt == OAR_U8 ? 0 : -128;
    *qmax = dt == OAR_U8 ? 255 : 127;
}

/* The range [qmin, qmax] of an 8-bit dtype, or with reduce_range its 7-bit half (torch's
 * reduce_range: u8 [0, 127], i8 [-64, 63]). */
static inline void oar_qrange_reduced(oar_dtype dt, bool reduce_range, int32_t *qmin, int32_t *qmax) {
    oar_qrange(dt, qmin, qmax);
    if (reduce_range) *qmin /= 2, *qmax /= 2;
}

/* Scale and zero point covering [lo, hi] and 0 on [qmin, qmax], as torch's observers compute them
 * (float arithmetic, eps = FLT_EPSILON as the least scale): symmetric gives zero point 0 (i8) or
 * 128 (u8; torch refuses u8 symmetric on a reduced range, and so do the callers). */
static inline void oar_qparams_from_qrange(float lo, float hi, oar_dtype dt, bool symmetric, int32_t qmin,
                                           int32_t qmax, float *scale, int32_t *zp) {
    float neg = lo < 0 ? lo : 0, pos = hi > 0 ? hi : 0, s;
    if (symmetric) {
        pos = -neg > pos ? -neg : pos;
        s = pos / ((float)(qmax - qmin) / 2);
        *zp = dt == OAR_U8 ? 128 : 0;
    } else {
        s = (pos - neg) / (float)(qmax - qmin);
    }
    if (!(s > 1.1920929e-07f)) s = 1.1920929e-07f;
    if (!symmetric) {
        float z = (float)qmin - nearbyintf(neg / s);
        *zp = (int32_t)(z < qmin ? qmin : z > qmax ? qmax : z);
    }
    *scale = s;
}

/* The same on dt's full range (torch's MinMaxObserver). */
static inline void oar_qparams_from_range(float lo, float hi, oar_dtype dt, bool symmetric, float *scale, int32_t *zp) {
    int32_t qmin, qmax;
    oar_qrange(dt, &qmin, &qmax);
    oar_qparams_from_qrange(lo, hi, dt, symmetric, qmin, qmax, scale, zp);
}

/* qlinear's epilogue: acc (int32) -> fmaf(acc, x_scale * w_scale[n], bias[n]) (+ residual)
 * (relu) -> f32, or requantized to u8/i8 with y_scale/y_zp, or acc itself as i32. Written once, used by every
 * kernel: the fast kernels differ only in how they compute acc. */
/* qconv2d_nhwc's int8 residual: qadd(its u8/i8 output, residual codes) done in its epilogue (the
 * fuse_qadd pass). The conv's value is rounded to its codes as its output would be, then qadd's
 * arithmetic (src/ops/quant_add.h) runs on those codes and the residual's. */
typedef struct oar_qres {
    float ys, rs, os, inv_o; /* the codes' y_scale, the residual's scale, the output's, 1 / the output's */
    float lo, hi;            /* the output range less its zero point */
    int32_t rzp, ozp;
    bool on, relu, r_signed;
    bool fast;               /* 1 / os normal and finite: qadd's multiplication may stand in for the division */
} oar_qres;

typedef struct oar_qepilogue {
    const float *comb;  /* [N]: x_scale * w_scale[n] (float product) */
    const float *bias;  /* [N] or NULL */
    int act;            /* applied to the conv's value; with an int8 residual, none (qr.relu after the sum) */
    oar_dtype out_dtype;
    float inv_y;        /* 1 / y_scale (float) */
    int32_t y_zp, qmin, qmax;
    oar_qres qr;        /* qconv2d_nhwc with an int8 residual (qr.on) */
} oar_qepilogue;

/* The output code of conv value v (the epilogue's value, no residual, no activation) with residual
 * code r: v quantized to the conv's codes, then qadd(codes, r) (oar_qadd_one's operations). */
static inline int32_t oar_qres_one(const oar_qepilogue *e, float v, uint8_t r) {
    int32_t q = oar_quantize_f32(v, e->inv_y, e->y_zp, e->qmin, e->qmax);
    int32_t ir = e->qr.r_signed ? (int32_t)(int8_t)r : (int32_t)r;
    float va = (float)(q - e->y_zp) * e->qr.ys, vb = (float)(ir - e->qr.rzp) * e->qr.rs;
    float s = va + vb;
    if (e->qr.relu) s = oar_qmaxf(s, 0.0f);
    float t = oar_qminf(oar_qmaxf(s / e->qr.os, e->qr.lo), e->qr.hi);
    return (int32_t)nearbyintf(t) + e->qr.ozp;
}

/* The epilogue of one int32 sum of output channel ch (res: its residual, or NULL), then its store. */
static inline float oar_qepilogue_value(const oar_qepilogue *e, int32_t acc, int64_t ch, const float *res) {
    float v = fmaf((float)acc, e->comb[ch], e->bias ? e->bias[ch] : 0.0f);
    if (res) v = v + *res;
    if (e->act == OAR_QACT_GELU_ERF || e->act == OAR_QACT_GELU_TANH)
        return (float)oar_gelu_ref((double)v, e->act == OAR_QACT_GELU_TANH);
    return e->act == OAR_QACT_RELU ? oar_qmaxf(v, 0.0f) : v;
}
static inline void oar_qepilogue_store(const oar_qepilogue *e, float v, void *out, int64_t i) {
    if (e->out_dtype == OAR_F32) ((float *)out)[i] = v;
    else {
        int32_t q = oar_quantize_f32(v, e->inv_y, e->y_zp, e->qmin, e->qmax);
        if (e->out_dtype == OAR_U8) ((uint8_t *)out)[i] = (uint8_t)q;
        else ((int8_t *)out)[i] = (int8_t)q;
    }
}

/* Columns [n0, n1) of one qlinear output row: acc[n - n0] are the int32 sums, res_row and
 * out_row the row's residual (may be NULL) and output, indexed by n. */
static inline void oar_qepilogue_row(const oar_qepilogue *e, const int32_t *acc, const float *res_row, int64_t n0,
                                     int64_t n1, void *out_row) {
    if (e->out_dtype == OAR_I32) { /* the raw sums (ONNX MatMulInteger): no scale, nothing rounded */
        for (int64_t n = n0; n < n1; n++) ((int32_t *)out_row)[n] = acc[n - n0];
        return;
    }
    for (int64_t n = n0; n < n1; n++)
        oar_qepilogue_store(e, oar_qepilogue_value(e, acc[n - n0], n, res_row ? res_row + n : NULL), out_row, n);
}

/* qlinear's prepared epilogue for a call (comb is malloc'ed: free with oar_qepilogue_free). */
oar_status oar_qepilogue_init(oar_qepilogue *e, oar_tensor *const *in, oar_tensor *y, const oar_attr *a);
void oar_qepilogue_free(oar_qepilogue *e);
/* The same for qconv2d_nhwc (a: its activation and dtype attributes), with its int8 residual's
 * parameters in e->qr when the residual is u8/i8 (src/ops/quant_conv_nhwc.c). */
oar_status oar_qepilogue_init_nhwc(oar_qepilogue *e, oar_tensor *const *in, oar_tensor *y, const oar_attr *a);

/* qlinear's and qconv2d's input positions */
enum { QL_X, QL_XS, QL_XZP, QL_W, QL_WS, QL_BIAS, QL_YS, QL_YZP, QL_RES, QL_N };
/* qconv2d_nhwc's further inputs, with a u8/i8 residual (QL_RES): its scale and zero point, and the
 * output's (y_scale and y_zp then quantize the conv's own codes, which the sum dequantizes) */
enum { QN_RS = QL_N, QN_RZP, QN_OS, QN_OZP, QN_N };

/* qconv2d's geometry, from its attributes (stride, padding, dilation, groups) and shapes */
typedef struct oar_qconv_geom {
    int64_t n, c, h, w, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, groups;
} oar_qconv_geom;
oar_status oar_qconv_geom_get(const oar_tensor *x, const oar_tensor *w, const oar_attr *a, oar_qconv_geom *g);
/* The same for qconv2d_nhwc's x [N, H, W, C] (src/ops/quant_conv_nhwc.c) */
oar_status oar_qconv_nhwc_geom_get(const oar_tensor *x, const oar_tensor *w, const oar_attr *a, oar_qconv_geom *g);

/* The int8 GEMM of the fast kernels (src/kernels/cpu/qgemm_x86.c): acc[m][n] = sum_k (x[m, k] -
 * x_zp) * w[n, k] for x u8 or s8 [M, K] and w s8 [N, K], exact in int32 (wrapping), handed to
 * emit in blocks of rows [m0, m1) x columns [n0, n1) (acc row-major, leading dimension ld), over
 * oar's thread pool. vnni picks the AVX-512 VNNI kernel, else the exact AVX2 one. */
typedef void (*oar_qgemm_emit)(void *user, int64_t m0, int64_t m1, int64_t n0, int64_t n1, const int32_t *acc,
                               int64_t ld);
/* Names w's bytes for the kernels' packed-weight cache: the storage's uid and version and the
 * byte offset of w in it (uid 0: not tracked, packed on every call). Weights of a quantized
 * model are the same bytes call after call, so the VNNI layout is made once per weight. */
typedef struct oar_qweight_id {
    uint64_t uid;
    uint32_t version;
    int64_t offset;
} oar_qweight_id;
oar_qweight_id oar_qweight_id_of(const oar_tensor *w, int64_t byte_offset); /* w's bytes from byte_offset on */

/* Weights packed for a kernel, with their row sums (for zero-point and sign-shift corrections),
 * cached by oar_qweight_id (src/kernels/cpu/qgemm_x86.c). VNNI_COLUMNS: [N/16][K/4][16][4]
 * (qgemm's vector operand); ROWS4: each row zero-padded to a multiple of 4 bytes ([N][K/4][4],
 * broadcast 4 bytes at a time by the direct convolution); I16_COLUMNS: widened to int16 as
 * [N/16][K/2][16][2] (qgemm's AVX2 operand for 8-bit weights). Release with oar_qpacked_put. */
typedef enum { OAR_QLAYOUT_VNNI_COLUMNS, OAR_QLAYOUT_ROWS4, OAR_QLAYOUT_I16_COLUMNS } oar_qlayout;
typedef struct oar_qpacked {
    int refs;
    oar_qlayout layout;
    oar_qweight_id id;
    int64_t n, k;
    uint64_t used;
    int8_t *wp;
    int32_t *wsum;
    bool w7; /* every weight within [-64, 63]: AVX2's vpmaddubsw pair sums cannot saturate */
} oar_qpacked;
oar_qpacked *oar_qpacked_get(oar_qlayout layout, const int8_t *w, const oar_qweight_id *wid, int64_t n, int64_t k);
void oar_qpacked_put(oar_qpacked *p);
bool oar_cpu_use_vnni(void); /* AVX-512 with VNNI, within the ISA cap */
void oar_cpu_register_qconv_direct(void);   /* qconv_vnni.c, registered by oar_cpu_register_quant */
void oar_cpu_register_qconv_dnnl(void);     /* qconv_dnnl.c, likewise */
void oar_cpu_register_qconv_direct_avx2(void); /* qconv_direct_avx2.c, likewise */
void oar_cpu_register_qmax_pool(void);         /* qmax_pool_x86.c, likewise */
/* Which kernel runs a qconv2d of this shape on a CPU with (vnni) or without VNNI (a pure
 * function of the shape, so the dispatch is testable on any machine): the direct kernels
 * (positions in the vector lanes; AVX2 with vpmaddubsw on 7-bit weights, or AVX-512 VNNI) take
 * convolutions with fewer than 16 input or output channels per group, where oneDNN's kernels,
 * vectorized over channels, leave most lanes idle; the rest goes to oneDNN, and so do strided
 * convolutions with 16+ outputs per group (ImageNet stems: resnet18's 3->64 7x7 stride 2 took
 * 0.4 ms per image on oneDNN against 4.6 on the direct VNNI kernel, which unfolds every strided
 * row). stride: the product of the two strides. */
bool oar_qconv_direct_takes(bool vnni, int64_t cg, int64_t og, int64_t stride);
/* qconv2d as im2col + the exact int8 GEMM (qgemm_x86.c; vnni: its VNNI kernel, else AVX2). */
oar_status oar_qconv_gemm(oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a, bool vnni);
/* The same for qconv2d_nhwc (NHWC im2col; the GEMM's rows are the NHWC output's). */
oar_status oar_qconv_gemm_nhwc(oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a, bool vnni);
void oar_cpu_register_quantize_fast(void);  /* quantize_avx2.c, likewise */

oar_status oar_qgemm(bool vnni, const uint8_t *x, bool x_signed, int32_t x_zp, const int8_t *w,
                     const oar_qweight_id *wid, int64_t m, int64_t n, int64_t k, oar_qgemm_emit emit, void *user);

#endif
