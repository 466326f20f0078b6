/* max_pool2d_nhwc's and avg_pool2d_nhwc's geometry, shared by their references (pool_nhwc.c,
 * pool_nhwc_avg.c) and the x86 kernels. */
#ifndef OAR_OPS_POOL_NHWC_H
#define OAR_OPS_POOL_NHWC_H

#include "ops/op.h"

#include <stdio.h>

typedef struct oar_pool_nhwc_geom {
    int64_t n, h, w, c, oh, ow;
    int64_t k[2], s[2], p[2], d[2];
} oar_pool_nhwc_geom;

/* The NHWC op of NCHW pooling op nchw: x must be 4-d; nchw's checks and output size run on an
 * NCHW stand-in of x, their errors named as the NHWC op's (nchw's name + "_nhwc"). */
oar_status oar_pool_nhwc_standin(const oar_tensor *x, const oar_attr *a, const oar_op_def *nchw, int64_t out_hw[2]);
/* The NHWC op's output meta: a float x, nchw's checks on the stand-in, y [N, OH, OW, C]. */
oar_status oar_pool_nhwc_infer(oar_tensor *x, const oar_attr *a, const oar_op_def *nchw, oar_meta *out);

/* x [N, H, W, C] and max_pool2d's attributes; the error names max_pool2d_nhwc. */
oar_status oar_pool_nhwc_read(const oar_tensor *x, const oar_attr *a, oar_pool_nhwc_geom *g);

/* avg_pool2d_nhwc's geometry (pool_nhwc_avg.c), and the window of output (oy, ox) clipped to
 * the input with its divisor exactly as avg_pool2d's (pool.c): count_include_pad counts padding
 * but not the part of a ceil_mode window past it; false for a window with no input element. */
typedef struct oar_avg_nhwc_geom {
    int64_t n, h, w, c, oh, ow;
    int64_t k[2], s[2], p[2];
    bool include_pad;
} oar_avg_nhwc_geom;

/* x [N, H, W, C] and avg_pool2d's attributes; the error names avg_pool2d_nhwc. */
oar_status oar_avg_nhwc_read(const oar_tensor *x, const oar_attr *a, oar_avg_nhwc_geom *g);

static inline bool oar_avg_nhwc_window(const oar_avg_nhwc_geom *g, int64_t oy, int64_t ox, int64_t *y0, int64_t *y1,
                                       int64_t *x0, int64_t *x1, double *divisor) {
    int64_t hs = oy * g->s[0] - g->p[0], ws = ox * g->s[1] - g->p[1];
    int64_t he = hs + g->k[0] < g->h + g->p[0] ? hs + g->k[0] : g->h + g->p[0];
    int64_t we = ws + g->k[1] < g->w + g->p[1] ? ws + g->k[1] : g->w + g->p[1];
    int64_t padded = (he - hs) * (we - ws);
    *y0 = hs > 0 ? hs : 0, *x0 = ws > 0 ? ws : 0;
    *y1 = he < g->h ? he : g->h, *x1 = we < g->w ? we : g->w;
    if (*y0 >= *y1 || *x0 >= *x1) return false;
    *divisor = (double)(g->include_pad ? padded : (*y1 - *y0) * (*x1 - *x0));
    return true;
}

#endif
