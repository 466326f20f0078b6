/* nms's visiting order (nms.c), shared by the reference kernel and the fast CPU kernel
 * (kernels/cpu/vision_nms.c): decreasing score, equal scores by increasing index (as
 * torchvision), a NaN score last. */
#ifndef OAR_NMS_ORDER_H
#define OAR_NMS_ORDER_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "ops/op.h"

typedef struct nms_item {
    double score;
    int64_t index;
} nms_item;

/* qsort comparator of nms_items */
static inline int nms_by_score(const void *pa, const void *pb) {
    const nms_item *a = pa, *b = pb;
    bool na = isnan(a->score), nb = isnan(b->score);
    if (na != nb) return na ? 1 : -1;
    if (!na && a->score != b->score) return a->score > b->score ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

#endif
