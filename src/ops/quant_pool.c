/* qmax_pool2d(q; kernel, stride, padding, dilation, ceil_mode): max pooling of u8/i8 data, with
 * max_pool2d's windows and output shape. Affine quantization is monotone (a larger real value
 * never gets a smaller code), so quantize(max_pool2d(x)) == qmax_pool2d(quantize(x)) exactly:
 * the fuse_quant pass moves a quantize above a max_pool2d this way, so that int8 activations flow
 * from one int8 layer through the pooling into the next. */
#include "ops/quant.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static oar_status qmax_pool_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    const oar_tensor *q = in[0];
    if (q->dtype != OAR_U8 && q->dtype != OAR_I8)
        return oar_error(OAR_ERR_DTYPE, "qmax_pool2d: expected x u8 or i8, got %s; use max_pool2d for float data",
                         oar_dtype_name(q->dtype));
    oar_tensor shell = *q; /* max_pool2d's checks and shape on an f32 stand-in */
    shell.dtype = OAR_F32;
    oar_tensor *sin[1] = {&shell};
    oar_status st = oar_opdef_max_pool2d.infer(sin, 1, a, out, n_out);
    if (st != OAR_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", oar_last_error());
        return oar_error(st, "qmax_pool2d: %s", strncmp(msg, "max_pool2d: ", 12) ? msg : msg + 12);
    }
    out->dtype = q->dtype;
    return OAR_OK;
}

typedef struct qmax_job {
    const char *x;
    char *y;
    bool is_signed;
    int64_t h, w, oh, ow, k[2], s[2], p[2], d[2];
} qmax_job;

/* LeNet's (and most CNNs') window: 2x2, stride 2, no padding or dilation, in a form compilers
 * vectorize. Unsigned bytes compare as they order; signed ones are flipped by 0x80 and back. */
static void qmax_plane_2x2(const uint8_t *x, uint8_t *y, int64_t w, int64_t oh, int64_t ow, uint8_t flip) {
    for (int64_t oy = 0; oy < oh; oy++) {
        const uint8_t *r0 = x + 2 * oy * w, *r1 = r0 + w;
        uint8_t *d = y + oy * ow;
        for (int64_t ox = 0; ox < ow; ox++) {
            uint8_t a = (uint8_t)(r0[2 * ox] ^ flip), b = (uint8_t)(r0[2 * ox + 1] ^ flip);
            uint8_t c = (uint8_t)(r1[2 * ox] ^ flip), e = (uint8_t)(r1[2 * ox + 1] ^ flip);
            uint8_t m0 = a > b ? a : b, m1 = c > e ? c : e;
            d[ox] = (uint8_t)((m0 > m1 ? m0 : m1) ^ flip);
        }
    }
}

static bool is_2x2(const qmax_job *j) {
    return j->k[0] == 2 && j->k[1] == 2 && j->s[0] == 2 && j->s[1] == 2 && !j->p[0] && !j->p[1] && j->d[0] == 1 &&
           j->d[1] == 1 && 2 * j->oh <= j->h && 2 * j->ow <= j->w;
}

/* Any window, separably (the max over a rectangle is the max over its rows of the max down its
 * columns): per output row, row[ix] = the max over the window's input rows at every column (a
 * loop compilers vectorize), then each output the max of row[] over its window's columns. Windows
 * past the input (padding) hold no element; bytes compare as unsigned after the flip. */
static void qmax_plane_any(const qmax_job *j, const uint8_t *x, uint8_t *y, uint8_t *rowp, uint8_t flip) {
    /* rowp: the row with p[1] zeros before it and enough after it for the last window; a zero is
     * the least flipped byte, so a padded position never wins over the element every window has */
    uint8_t *row = rowp + j->p[1];
    for (int64_t oy = 0; oy < j->oh; oy++) {
        bool first = true;
        for (int64_t ky = 0; ky < j->k[0]; ky++) {
            int64_t iy = oy * j->s[0] - j->p[0] + ky * j->d[0];
            if (iy < 0 || iy >= j->h) continue;
            const uint8_t *r = x + iy * j->w;
            if (first)
                for (int64_t ix = 0; ix < j->w; ix++) row[ix] = (uint8_t)(r[ix] ^ flip);
            else
                for (int64_t ix = 0; ix < j->w; ix++) {
                    uint8_t v = (uint8_t)(r[ix] ^ flip);
                    row[ix] = v > row[ix] ? v : row[ix];
                }
            first = false;
        }
        uint8_t *d = y + oy * j->ow;
        for (int64_t ox = 0; ox < j->ow; ox++) {
            const uint8_t *r = rowp + ox * j->s[1];
            uint8_t best = 0; /* max_pool2d's geometry leaves no window empty */
            for (int64_t kx = 0; kx < j->k[1]; kx++) best = r[kx * j->d[1]] > best ? r[kx * j->d[1]] : best;
            d[ox] = (uint8_t)(best ^ flip);
        }
    }
}

static void qmax_planes(void *ctx, int64_t b, int64_t e) {
    const qmax_job *j = ctx;
    uint8_t flip = j->is_signed ? 0x80 : 0;
    if (is_2x2(j)) {
        for (int64_t i = b; i < e; i++)
            qmax_plane_2x2((const uint8_t *)j->x + i * j->h * j->w, (uint8_t *)j->y + i * j->oh * j->ow, j->w, j->oh,
                           j->ow, flip);
        return;
    }
    int64_t last = (j->ow - 1) * j->s[1] - j->p[1] + (j->k[1] - 1) * j->d[1]; /* the last window's end */
    int64_t width = j->p[1] + (last + 1 > j->w ? last + 1 : j->w);
    uint8_t *row = calloc((size_t)width, 1);
    for (int64_t i = b; i < e; i++) {
        const uint8_t *x = (const uint8_t *)j->x + i * j->h * j->w;
        uint8_t *y = (uint8_t *)j->y + i * j->oh * j->ow;
        if (row) qmax_plane_any(j, x, y, row, flip);
        else { /* no memory for the row: the same maxima element by element */
            for (int64_t oy = 0; oy < j->oh; oy++)
                for (int64_t ox = 0; ox < j->ow; ox++) {
                    uint8_t best = 0;
                    for (int64_t ky = 0; ky < j->k[0]; ky++) {
                        int64_t iy = oy * j->s[0] - j->p[0] + ky * j->d[0];
                        for (int64_t kx = 0; kx < j->k[1] && iy >= 0 && iy < j->h; kx++) {
                            int64_t ix = ox * j->s[1] - j->p[1] + kx * j->d[1];
                            uint8_t v = ix >= 0 && ix < j->w ? (uint8_t)(x[iy * j->w + ix] ^ flip) : 0;
                            best = v > best ? v : best;
                        }
                    }
                    y[oy * j->ow + ox] = (uint8_t)(best ^ flip);
                }
        }
    }
    free(row);
}

static oar_status qmax_pool_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                int n_out, const oar_attr *a) {
    const oar_tensor *x = in[0], *y = out[0];
    int nd = x->ndim;
    qmax_job j = {.x = oar_tensor_ptr(x), .y = oar_tensor_ptr(y), .is_signed = x->dtype == OAR_I8,
                  .h = x->shape[nd - 2], .w = x->shape[nd - 1], .oh = y->shape[nd - 2], .ow = y->shape[nd - 1]};
    for (int i = 0; i < 2; i++) j.k[i] = a[0].ints[i], j.s[i] = a[1].ints[i], j.p[i] = a[2].ints[i], j.d[i] = a[3].ints[i];
    int64_t planes = j.h > 0 && j.w > 0 ? x->numel / (j.h * j.w) : 0;
    if (planes) oar_parallel_for(planes, 1 + 8192 / (j.oh * j.ow * j.k[0] * j.k[1] + 1), qmax_planes, &j);
    return OAR_OK;
}

const oar_op_def oar_opdef_qmax_pool2d = {
    .name = "qmax_pool2d", .n_inputs = 1, .n_outputs = 1, .n_attrs = 5,
    .attrs = {{"kernel", OAR_ATTR_INTS}, {"stride", OAR_ATTR_INTS}, {"padding", OAR_ATTR_INTS},
              {"dilation", OAR_ATTR_INTS}, {"ceil_mode", OAR_ATTR_INT}},
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_DTYPE_BIT(OAR_U8) | OAR_DTYPE_BIT(OAR_I8),
    .infer = qmax_pool_infer, .reference = qmax_pool_ref,
};
