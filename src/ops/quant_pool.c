/* qmax_pool2d(q; kernel, stride, padding, dilation, ceil_mode): max pooling of u8/i8 data, with
 * max_pool2d's windows and output shape. Affine quantization is monotone (a larger real value
 * never gets a smaller code), so quantize(max_pool2d(x)) == qmax_pool2d(quantize(x)) exactly:
 * the fuse_quant pass moves a quantize above a max_pool2d this way, so that int8 activations flow
 * from one int8 layer through the pooling into the next. */
#include "ops/quant.h"

#include <stdint.h>
#include <stdio.h>
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

/* One plane; T is uint8_t or int8_t. Windows past the input (padding) hold no element. */
#define QMAX_PLANE(T)                                                                                              \
    static void qmax_plane_##T(const T *x, T *y, int64_t h, int64_t w, int64_t oh, int64_t ow, const int64_t *k,   \
                               const int64_t *s, const int64_t *p, const int64_t *d) {                             \
        for (int64_t oy = 0; oy < oh; oy++)                                                                        \
            for (int64_t ox = 0; ox < ow; ox++) {                                                                  \
                int best = INT32_MIN;                                                                              \
                for (int64_t ky = 0; ky < k[0]; ky++) {                                                            \
                    int64_t iy = oy * s[0] - p[0] + ky * d[0];                                                     \
                    if (iy < 0 || iy >= h) continue;                                                               \
                    for (int64_t kx = 0; kx < k[1]; kx++) {                                                        \
                        int64_t ix = ox * s[1] - p[1] + kx * d[1];                                                 \
                        if (ix >= 0 && ix < w && x[iy * w + ix] > best) best = x[iy * w + ix];                     \
                    }                                                                                              \
                }                                                                                                  \
                y[oy * ow + ox] = (T)best; /* max_pool2d's geometry leaves no window empty */                     \
            }                                                                                                      \
    }
QMAX_PLANE(uint8_t)
QMAX_PLANE(int8_t)

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

static void qmax_planes(void *ctx, int64_t b, int64_t e) {
    const qmax_job *j = ctx;
    if (is_2x2(j)) {
        for (int64_t i = b; i < e; i++)
            qmax_plane_2x2((const uint8_t *)j->x + i * j->h * j->w, (uint8_t *)j->y + i * j->oh * j->ow, j->w, j->oh,
                           j->ow, j->is_signed ? 0x80 : 0);
        return;
    }
    for (int64_t i = b; i < e; i++) {
        const char *x = j->x + i * j->h * j->w;
        char *y = j->y + i * j->oh * j->ow;
        if (j->is_signed)
            qmax_plane_int8_t((const int8_t *)x, (int8_t *)y, j->h, j->w, j->oh, j->ow, j->k, j->s, j->p, j->d);
        else
            qmax_plane_uint8_t((const uint8_t *)x, (uint8_t *)y, j->h, j->w, j->oh, j->ow, j->k, j->s, j->p, j->d);
    }
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
