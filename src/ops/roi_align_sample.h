/* roi_align's samples (roi_align.c): where sample (p, i) of a box's bin lies along one side, and
 * the bilinear taps of one sample (torchvision's rules: more than a pixel outside reads 0,
 * otherwise clamped to the border). Shared by the reference, the fast CPU kernels and the CUDA
 * kernels (kernels/cuda/vision.cu), so all sample the same points with the same weights. */
#ifndef OAR_ROI_ALIGN_SAMPLE_H
#define OAR_ROI_ALIGN_SAMPLE_H

#include <stdint.h>

#include "ops/hostdev.h"

/* One box: where its samples are. */
typedef struct roi_geom {
    int64_t batch;
    double y0, x0, bin_h, bin_w;
    int64_t gh, gw; /* samples per bin, each side */
} roi_geom;

/* The coordinate of sample i (of g per bin) of bin p along one side, from the box's origin. */
static inline OAR_HD double roi_sample_at(double origin, double bin, int64_t p, int64_t i, int64_t g) {
    return origin + (double)p * bin + ((double)i + 0.5) * bin / (double)g;
}

/* The bilinear sample at (y, x) of an h x w plane: up to 4 offsets (-1: none) and weights. */
static inline OAR_HD void roi_sample_taps(double y, double x, int64_t h, int64_t w, int64_t at[4], double wt[4]) {
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
