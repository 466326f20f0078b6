/* roi_align's box geometry (roi_align.c), shared by the reference kernels, the fast CPU kernels
 * (kernels/cpu/vision_roi_align.c) and the CUDA glue (kernels/cuda/cuda_vision.c): where a box's
 * samples are, from its row of boxes. A box's batch index is checked here, so every kernel refuses
 * a bad box alike. The samples themselves are in roi_align_sample.h. */
#ifndef OAR_ROI_ALIGN_GEOM_H
#define OAR_ROI_ALIGN_GEOM_H

#include <math.h>

#include "ops/op.h"
#include "ops/roi_align_sample.h"

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

#endif
