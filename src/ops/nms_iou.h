/* nms's overlap test (nms.c), shared by the reference kernel and the CUDA kernel
 * (kernels/cuda/vision.cu): boxes as (x1, y1, x2, y2, area) in double. */
#ifndef OAR_NMS_IOU_H
#define OAR_NMS_IOU_H

#include <math.h>
#include <stdbool.h>

#include "ops/hostdev.h"

static inline OAR_HD double nms_area(const double *b) { return (b[2] - b[0]) * (b[3] - b[1]); }

/* Whether kept box p suppresses box q: IoU(p, q) > thr. */
static inline OAR_HD bool nms_iou_above(const double *p, const double *q, double thr) {
    double w = fmin(p[2], q[2]) - fmax(p[0], q[0]), h = fmin(p[3], q[3]) - fmax(p[1], q[1]);
    double inter = (w > 0 ? w : 0) * (h > 0 ? h : 0);
    return inter / (p[4] + q[4] - inter) > thr;
}

#endif
