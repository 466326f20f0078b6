/* avg_pool2d_nhwc(x; kernel, stride, padding, ceil_mode, count_include_pad): avg_pool2d of NHWC
 * data. x is [N, H, W, C] (the layout conv_nhwc gives convolutions' outputs), y is
 * [N, OH, OW, C] with y[n, oy, ox, c] = avg_pool2d(permute(x, NCHW))[n, c, oy, ox] bit for bit:
 * the same output sizes and checks (avg_pool2d's infer on an NCHW stand-in), the same windows
 * and divisors (count_include_pad counts padding but not the part of a ceil_mode window past
 * it), the same sum in double over the window's rows then columns, divided in double, rounded
 * once. Inference only (the conv_nhwc pass makes it). The AVX2/AVX-512 kernels
 * (src/kernels/cpu/pool_nhwc_x86.c) run the channels in double lanes in the same order. */
#include "ops/pool_nhwc.h"

#include <string.h>

oar_status oar_avg_nhwc_read(const oar_tensor *x, const oar_attr *a, oar_avg_nhwc_geom *g) {
    int64_t hw[2];
    oar_status st = oar_pool_nhwc_standin(x, a, &oar_opdef_avg_pool2d, hw);
    if (st != OAR_OK) return st;
    g->n = x->shape[0], g->h = x->shape[1], g->w = x->shape[2], g->c = x->shape[3];
    g->oh = hw[0], g->ow = hw[1];
    for (int i = 0; i < 2; i++) g->k[i] = a[0].ints[i], g->s[i] = a[1].ints[i], g->p[i] = a[2].ints[i];
    g->include_pad = a[4].i != 0;
    return OAR_OK;
}

static oar_status avg_nhwc_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    *n_out = 1;
    return oar_pool_nhwc_infer(in[0], a, &oar_opdef_avg_pool2d, out);
}

static oar_status avg_nhwc_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                               int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    oar_avg_nhwc_geom g;
    oar_status st = oar_avg_nhwc_read(in[0], a, &g);
    if (st != OAR_OK) return st;
    const oar_dtype_traits *tr = &oar_dtypes[in[0]->dtype];
    int64_t es = (int64_t)tr->size;
    const char *x = oar_tensor_ptr(in[0]);
    char *y = oar_tensor_ptr(out[0]);
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t oy = 0; oy < g.oh; oy++)
            for (int64_t ox = 0; ox < g.ow; ox++) {
                int64_t y0, y1, x0, x1;
                double div;
                bool any = oar_avg_nhwc_window(&g, oy, ox, &y0, &y1, &x0, &x1, &div);
                for (int64_t c = 0; c < g.c; c++) {
                    double acc = 0;
                    if (any) {
                        for (int64_t iy = y0; iy < y1; iy++)
                            for (int64_t ix = x0; ix < x1; ix++)
                                acc += tr->load(x + (((n * g.h + iy) * g.w + ix) * g.c + c) * es);
                        acc /= div;
                    }
                    tr->store(y + (((n * g.oh + oy) * g.ow + ox) * g.c + c) * es, acc);
                }
            }
    return OAR_OK;
}

const oar_op_def oar_opdef_avg_pool2d_nhwc = {
    .name = "avg_pool2d_nhwc", .n_inputs = 1, .n_outputs = 1, .n_attrs = 5,
    .attrs = {{"kernel", OAR_ATTR_INTS}, {"stride", OAR_ATTR_INTS}, {"padding", OAR_ATTR_INTS, "0,0"},
              {"ceil_mode", OAR_ATTR_INT, "false"}, {"count_include_pad", OAR_ATTR_INT, "true"}},
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = avg_nhwc_infer, .reference = avg_nhwc_ref,
};
