/* roi_align's sampling geometry (roi_align.c), shared by the reference kernels and the fast CPU
 * kernels (kernels/cpu/vision_roi_align.c): where a box's samples are, and the bilinear taps of
 * one sample (torchvision's rules: more than a pixel outside reads 0, otherwise clamped to the
 * border). A box's batch index is checked here, so every kernel refuses a bad box alike. */
#ifndef OAR_ROI_ALIGN_GEOM_H
#define OAR_ROI_ALIGN_GEOM_H

#include <math.h>

#include "ops/op.h"

/* One box: where its samples are. */
typedef struct roi_geom {
    int64_t batch;
    double y0, x0, bin_h, bin_w;
    int64_t gh, gw; /* samples per bin, each side */
} roi_geom;

static inline oar_status roi_geom_of(const char *op, const oar_tensor *boxes, int64_t k, int64_t n, const oar_attr *a,
                              roi_geom *r) {
    *r = (roi_geom){0};
    const oar_dtype_traits *bt = &oar_dtypes[boxes->dtype];
    const char *row = (const char *)oar_tensor_ptr(boxes) + k * 5 * (int64_t)bt->size;
    double v[5];
    for (int i = 0; i < 5; i++) v[i] = bt->load(row + i * (int64_t)bt->size);
    if (!(v[0] >= 0 && v[0] < (double)n) || v[0] != floor(v[0]))
        return oar_error(OAR_ERR_INVALID_ARG, "%s: box %lld has batch index %g; expected an integer in [0, %lld)", op,
                         (long long)k, v[0], (long long)n);
    bool aligned = a[3].i != 0;
    double scale = a[1].f, off = aligned ? 0.5 : 0, ph = (double)a[0].ints[0], pw = (double)a[0].ints[1];
    r->batch = (int64_t)v[0];
    r->x0 = v[1] * scale - off;
    r->y0 = v[2] * scale - off;
    double w = v[3] * scale - off - r->x0, h = v[4] * scale - off - r->y0;
    if (!aligned) {
        w = w > 1 ? w : 1;
        h = h > 1 ? h : 1;
    }
    r->bin_h = h / ph;
    r->bin_w = w / pw;
    r->gh = a[2].i > 0 ? a[2].i : (int64_t)ceil(h / ph);
    r->gw = a[2].i > 0 ? a[2].i : (int64_t)ceil(w / pw);
    if (!isfinite(h) || !isfinite(w) || (double)r->gh * (double)r->gw > (double)(1 << 24))
        return oar_error(OAR_ERR_INVALID_ARG, "%s: box %lld is not finite or needs too many samples per bin "
                         "(%g x %g pixels); give a positive sampling_ratio", op, (long long)k, w, h);
    return OAR_OK;
}

/* The bilinear sample at (y, x) of an h x w plane: up to 4 offsets (-1: none) and weights. */
static inline void roi_sample_taps(double y, double x, int64_t h, int64_t w, int64_t at[4], double wt[4]) {
    for (int i = 0; i < 4; i++) at[i] = -1, wt[i] = 0;
    if (y < -1.0 || y > (double)h || x < -1.0 || x > (double)w) return;
    if (y <= 0) y = 0;
    if (x <= 0) x = 0;
    int64_t yl = (int64_t)y, xl = (int64_t)x, yh, xh;
    if (yl >= h - 1) yh = yl = h - 1, y = (double)yl;
    else yh = yl + 1;
    if (xl >= w - 1) xh = xl = w - 1, x = (double)xl;
    else xh = xl + 1;
    double ly = y - (double)yl, lx = x - (double)xl, hy = 1 - ly, hx = 1 - lx;
    at[0] = yl * w + xl, wt[0] = hy * hx;
    at[1] = yl * w + xh, wt[1] = hy * lx;
    at[2] = yh * w + xl, wt[2] = ly * hx;
    at[3] = yh * w + xh, wt[3] = ly * lx;
}

#endif
