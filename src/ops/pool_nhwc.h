/* max_pool2d_nhwc's geometry, shared by its reference (pool_nhwc.c) and the x86 kernels. */
#ifndef OAR_OPS_POOL_NHWC_H
#define OAR_OPS_POOL_NHWC_H

#include "ops/op.h"

#include <stdio.h>

typedef struct oar_pool_nhwc_geom {
    int64_t n, h, w, c, oh, ow;
    int64_t k[2], s[2], p[2], d[2];
} oar_pool_nhwc_geom;

/* x [N, H, W, C] and max_pool2d's attributes; the error names max_pool2d_nhwc. */
oar_status oar_pool_nhwc_read(const oar_tensor *x, const oar_attr *a, oar_pool_nhwc_geom *g);

#endif
