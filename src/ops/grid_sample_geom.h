/* grid_sample's sampling geometry for one grid point: the input positions it reads (flat offsets
 * into one channel's [D,]H,W volume, -1 for a tap outside that reads 0), each tap's weight, and the
 * weights' derivatives by the pixel coordinates (for the grid's gradient). Shared by the reference
 * kernels (grid_sample.c), the fast CPU kernels (kernels/cpu/vision_grid_sample.c) and the CUDA
 * kernels (kernels/cuda/vision.cu), so all read the same taps with the same weights.
 *
 * Coordinates follow torch 1.13: x runs over W, y over H, z over D; align_corners maps -1 and 1
 * to the corner pixels' centres (true) or outer edges (false). bilinear / nearest (and their
 * 5-d forms, trilinear and nearest) apply the padding mode to the coordinate itself: border
 * clamps it, reflection reflects it at the borders and clamps. bicubic (4-d only) takes the
 * unnormalized coordinate as it is and applies the padding mode to each of its 4x4 integer taps
 * (torch's get_value_bounded), with the cubic convolution of A = -0.75. */
#ifndef OAR_GRID_SAMPLE_GEOM_H
#define OAR_GRID_SAMPLE_GEOM_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "ops/hostdev.h"

enum { GS_BILINEAR, GS_NEAREST, GS_BICUBIC };
enum { GS_ZEROS, GS_BORDER, GS_REFLECTION };
#define GS_MAX_TAPS 16

typedef struct gs_opts {
    int mode, pad;
    bool align;
} gs_opts;

/* The input's spatial sizes by grid component: size[0] = W (x), size[1] = H (y), size[2] = D (z). */
typedef struct gs_geom {
    int dims; /* 2 or 3 */
    int64_t size[3];
} gs_geom;

typedef struct gs_taps {
    int n;
    int64_t at[GS_MAX_TAPS];
    double w[GS_MAX_TAPS], dw[3][GS_MAX_TAPS]; /* dw[d][k]: d(weight k)/d(pixel coordinate d) */
    double dc[3];                              /* d(pixel coordinate d)/d(grid value d) */
} gs_taps;

/* torch's clamp into [0, size - 1]; *d: the derivative (0 where clamped). */
static inline OAR_HD double gs_clip(double c, int64_t size, double *d) {
    double hi = (double)(size - 1);
    if (c <= 0) { *d = 0; return 0; }
    if (c >= hi) { *d = 0; return hi; }
    *d = 1;
    return c;
}

/* Reflects c into [lo2 / 2, hi2 / 2] (twice the bounds, so half-pixel bounds stay integers). */
static inline OAR_HD double gs_reflect(double c, double lo2, double hi2, double *d) {
    if (lo2 == hi2) { *d = 0; return 0; }
    double lo = lo2 / 2, span = (hi2 - lo2) / 2, sign = 1;
    c -= lo;
    if (c < 0) { sign = -1; c = -c; }
    double extra = fmod(c, span), flips = floor(c / span);
    if (fmod(flips, 2) == 0) { *d = sign; return extra + lo; }
    *d = -sign;
    return span - extra + lo;
}

/* The padding mode applied to a pixel coordinate; *d: its derivative. */
static inline OAR_HD double gs_pad(double c, int64_t size, const gs_opts *o, double *d) {
    *d = 1;
    if (o->pad == GS_BORDER) return gs_clip(c, size, d);
    if (o->pad == GS_REFLECTION) {
        double r;
        c = o->align ? gs_reflect(c, 0, 2 * (double)(size - 1), &r) : gs_reflect(c, -1, 2 * (double)size - 1, &r);
        c = gs_clip(c, size, d);
        *d *= r;
    }
    return c;
}

/* Pixel coordinate of normalized g along a dim of size, before padding; *k: its derivative. */
static inline OAR_HD double gs_unnormalize(double g, int64_t size, bool align, double *k) {
    if (align) { *k = (double)(size - 1) / 2; return (g + 1) * *k; }
    *k = (double)size / 2;
    return ((g + 1) * (double)size - 1) / 2;
}

/* Flat offset of integer-valued pixel coordinates c[0..dims) (x, y[, z]), or -1 outside (NaN too). */
static inline OAR_HD int64_t gs_tap_at(const double *c, const gs_geom *g) {
    int64_t at = 0;
    for (int d = g->dims - 1; d >= 0; d--) {
        if (!(c[d] >= 0 && c[d] < (double)g->size[d])) return -1;
        at = at * g->size[d] + (int64_t)c[d];
    }
    return at;
}

/* The cubic convolution weights of the 4 taps at offsets -1..2 from floor, t in [0, 1), and
 * their derivatives by t. */
static inline OAR_HD void gs_cubic(double t, double w[4], double dw[4]) {
    const double A = -0.75;
    /* near(s) = ((A+2)s - (A+3)) s^2 + 1 for |s| <= 1; far(s) = ((A s - 5A) s + 8A) s - 4A for 1 < |s| < 2 */
#define GS_NEAR(s) ((((A) + 2) * (s) - ((A) + 3)) * (s) * (s) + 1)
#define GS_FAR(s) ((((A) * (s) - 5 * (A)) * (s) + 8 * (A)) * (s) - 4 * (A))
#define GS_DNEAR(s) ((3 * ((A) + 2) * (s) - 2 * ((A) + 3)) * (s))
#define GS_DFAR(s) ((3 * (A) * (s) - 10 * (A)) * (s) + 8 * (A))
    w[0] = GS_FAR(t + 1), dw[0] = GS_DFAR(t + 1);
    w[1] = GS_NEAR(t), dw[1] = GS_DNEAR(t);
    w[2] = GS_NEAR(1 - t), dw[2] = -GS_DNEAR(1 - t);
    w[3] = GS_FAR(2 - t), dw[3] = -GS_DFAR(2 - t);
#undef GS_NEAR
#undef GS_FAR
#undef GS_DNEAR
#undef GS_DFAR
}

/* The taps of the grid point whose components are gv[0..dims). */
static inline OAR_HD void gs_taps_of(const double *gv, const gs_geom *g, const gs_opts *o, gs_taps *t) {
    double c[3], k[3];
    for (int d = 0; d < g->dims; d++) {
        double dp;
        c[d] = gs_unnormalize(gv[d], g->size[d], o->align, &k[d]);
        if (o->mode != GS_BICUBIC) c[d] = gs_pad(c[d], g->size[d], o, &dp);
        else dp = 1;
        t->dc[d] = k[d] * dp;
    }
    if (o->mode == GS_NEAREST) {
        double r[3];
        for (int d = 0; d < g->dims; d++) r[d] = nearbyint(c[d]);
        t->n = 1;
        t->at[0] = gs_tap_at(r, g);
        t->w[0] = 1;
        for (int d = 0; d < 3; d++) t->dw[d][0] = 0;
        return;
    }
    if (o->mode == GS_BILINEAR) {
        double f[3], fr[3];
        for (int d = 0; d < g->dims; d++) f[d] = floor(c[d]), fr[d] = c[d] - f[d];
        t->n = 1 << g->dims;
        for (int k2 = 0; k2 < t->n; k2++) { /* bit d of k2: the upper neighbour along dim d */
            double p[3], wd[3];
            for (int d = 0; d < g->dims; d++) {
                int e = (k2 >> d) & 1;
                p[d] = f[d] + e;
                wd[d] = e ? fr[d] : 1 - fr[d];
            }
            t->at[k2] = gs_tap_at(p, g);
            double w = 1;
            for (int d = 0; d < g->dims; d++) w *= wd[d];
            t->w[k2] = w;
            for (int d = 0; d < 3; d++) {
                if (d >= g->dims) { t->dw[d][k2] = 0; continue; }
                double dv = ((k2 >> d) & 1) ? 1 : -1;
                for (int e = 0; e < g->dims; e++)
                    if (e != d) dv *= wd[e];
                t->dw[d][k2] = dv;
            }
        }
        return;
    }
    /* bicubic, 2-d: 4x4 taps, each at an integer coordinate that the padding mode moves */
    double fx = floor(c[0]), fy = floor(c[1]), wx[4], dwx[4], wy[4], dwy[4];
    gs_cubic(c[0] - fx, wx, dwx);
    gs_cubic(c[1] - fy, wy, dwy);
    t->n = 16;
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < 4; i++) {
            int k2 = j * 4 + i;
            double p[2], dp;
            p[0] = gs_pad(fx - 1 + i, g->size[0], o, &dp);
            p[1] = gs_pad(fy - 1 + j, g->size[1], o, &dp);
            for (int d = 0; d < 2; d++) p[d] = trunc(p[d]);
            t->at[k2] = gs_tap_at(p, g);
            t->w[k2] = wx[i] * wy[j];
            t->dw[0][k2] = dwx[i] * wy[j];
            t->dw[1][k2] = wx[i] * dwy[j];
            t->dw[2][k2] = 0;
        }
}

#endif
