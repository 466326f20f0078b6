/* max_pool2d_nhwc(x; kernel, stride, padding, dilation, ceil_mode): max_pool2d of NHWC data.
 * x is [N, H, W, C] (the layout conv_nhwc gives convolutions' outputs), y is [N, OH, OW, C]
 * with y[n, oy, ox, c] = max_pool2d(permute(x, NCHW))[n, c, oy, ox]: the same windows, output
 * sizes, checks and choice as max_pool2d (the first largest value, a NaN winning; -inf where a
 * window holds no element). On u8/i8 codes it is qmax_pool2d of NHWC data (the quant_nhwc
 * pass's). Inference only (the conv_nhwc pass makes it). The reference below
 * defines it; the AVX2/AVX-512 kernels (src/kernels/cpu/pool_nhwc_x86.c) run the channels in
 * the vector lanes and must give its bits (the op sweep checks them at every ISA cap). */
#include "ops/pool_nhwc.h"

#include <math.h>
#include <string.h>

oar_status oar_pool_nhwc_standin(const oar_tensor *x, const oar_attr *a, const oar_op_def *nchw, int64_t out_hw[2]) {
    char name[64];
    snprintf(name, sizeof name, "%s_nhwc", nchw->name);
    if (x->ndim != 4) {
        char s[128];
        oar_format_shape(x->shape, x->ndim, s, sizeof s);
        return oar_error(OAR_ERR_SHAPE, "%s: expected x 4-d [N, H, W, C], got shape %s", name, s);
    }
    static const int64_t TO_NCHW[4] = {0, 3, 1, 2};
    oar_tensor shell = *x;
    for (int d = 0; d < 4; d++) shell.shape[d] = x->shape[TO_NCHW[d]];
    if (x->dtype == OAR_U8 || x->dtype == OAR_I8) shell.dtype = OAR_F32; /* codes: the windows of f32 data */
    oar_tensor *in[1] = {&shell};
    oar_meta m;
    int n_out = 1;
    oar_status st = nchw->infer(in, 1, a, &m, &n_out);
    if (st != OAR_OK) { /* the NCHW op's message, under this op's name */
        char msg[512], prefix[64];
        snprintf(msg, sizeof msg, "%s", oar_last_error());
        int n = snprintf(prefix, sizeof prefix, "%s: ", nchw->name);
        return oar_error(st, "%s: %s", name, strncmp(msg, prefix, (size_t)n) ? msg : msg + n);
    }
    out_hw[0] = m.shape[2], out_hw[1] = m.shape[3];
    return OAR_OK;
}

oar_status oar_pool_nhwc_read(const oar_tensor *x, const oar_attr *a, oar_pool_nhwc_geom *g) {
    int64_t hw[2];
    oar_status st = oar_pool_nhwc_standin(x, a, &oar_opdef_max_pool2d, hw);
    if (st != OAR_OK) return st;
    g->n = x->shape[0], g->h = x->shape[1], g->w = x->shape[2], g->c = x->shape[3];
    g->oh = hw[0], g->ow = hw[1];
    for (int i = 0; i < 2; i++) g->k[i] = a[0].ints[i], g->s[i] = a[1].ints[i], g->p[i] = a[2].ints[i], g->d[i] = a[3].ints[i];
    return OAR_OK;
}

oar_status oar_pool_nhwc_infer(oar_tensor *x, const oar_attr *a, const oar_op_def *nchw, oar_meta *out) {
    char name[64];
    snprintf(name, sizeof name, "%s_nhwc", nchw->name);
    int64_t hw[2];
    /* max pooling also takes int8 codes (qmax_pool2d's meaning: quantization is monotone) */
    bool codes = nchw == &oar_opdef_max_pool2d && (x->dtype == OAR_U8 || x->dtype == OAR_I8);
    oar_status st = codes ? OAR_OK : oar_check_float(name, x, "x");
    if (st == OAR_OK) st = oar_pool_nhwc_standin(x, a, nchw, hw);
    if (st != OAR_OK) return st;
    out->dtype = x->dtype;
    out->ndim = 4;
    out->shape[0] = x->shape[0], out->shape[1] = hw[0], out->shape[2] = hw[1], out->shape[3] = x->shape[3];
    return OAR_OK;
}

static oar_status pool_nhwc_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    *n_out = 1;
    return oar_pool_nhwc_infer(in[0], a, &oar_opdef_max_pool2d, out);
}

static oar_status pool_nhwc_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    oar_pool_nhwc_geom g;
    oar_status st = oar_pool_nhwc_read(in[0], a, &g);
    if (st != OAR_OK) return st;
    const oar_dtype_traits *tr = &oar_dtypes[in[0]->dtype];
    int64_t es = (int64_t)tr->size;
    const char *x = oar_tensor_ptr(in[0]);
    char *y = oar_tensor_ptr(out[0]);
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t oy = 0; oy < g.oh; oy++)
            for (int64_t ox = 0; ox < g.ow; ox++)
                for (int64_t c = 0; c < g.c; c++) {
                    bool any = false;
                    double best = -INFINITY;
                    for (int64_t ky = 0; ky < g.k[0]; ky++) {
                        int64_t iy = oy * g.s[0] - g.p[0] + ky * g.d[0];
                        if (iy < 0 || iy >= g.h) continue;
                        for (int64_t kx = 0; kx < g.k[1]; kx++) {
                            int64_t ix = ox * g.s[1] - g.p[1] + kx * g.d[1];
                            if (ix < 0 || ix >= g.w) continue;
                            double v = tr->load(x + (((n * g.h + iy) * g.w + ix) * g.c + c) * es);
                            if (!any || v > best || isnan(v)) best = v, any = true;
                        }
                    }
                    tr->store(y + (((n * g.oh + oy) * g.ow + ox) * g.c + c) * es, best);
                }
    return OAR_OK;
}

const oar_op_def oar_opdef_max_pool2d_nhwc = {
    .name = "max_pool2d_nhwc", .n_inputs = 1, .n_outputs = 1, .n_attrs = 5,
    .attrs = {{"kernel", OAR_ATTR_INTS}, {"stride", OAR_ATTR_INTS}, {"padding", OAR_ATTR_INTS},
              {"dilation", OAR_ATTR_INTS}, {"ceil_mode", OAR_ATTR_INT}},
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_FLOAT_DTYPES | OAR_DTYPE_BIT(OAR_U8) | OAR_DTYPE_BIT(OAR_I8),
    .infer = pool_nhwc_infer, .reference = pool_nhwc_ref,
};
