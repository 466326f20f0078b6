/* nms(boxes [N,4] as (x1, y1, x2, y2), scores [N]; iou_threshold) -> (keep [N] int64, count [] int64):
 * torchvision.ops.nms. Boxes are visited by decreasing score (equal scores by increasing index,
 * as torchvision); a box is kept unless a kept box overlaps it with IoU > iou_threshold. keep
 * holds the kept indices in that order, then -1 up to N: the output's size does not depend on
 * the data, so the op also runs in compiled programs; count says how many are kept (the Python
 * oar.ops.nms returns keep[:count]). A NaN score sorts last. */
#include <math.h>
#include <stdlib.h>

#include "ops/nms_iou.h"
#include "ops/nms_order.h"

static oar_status nms_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const char *op = "nms";
    const oar_tensor *boxes = in[0], *scores = in[1];
    oar_status st = oar_check_float(op, boxes, "boxes");
    if (st == OAR_OK) st = oar_check_float(op, scores, "scores");
    if (st != OAR_OK) return st;
    if (boxes->ndim != 2 || boxes->shape[1] != 4)
        return oar_error(OAR_ERR_SHAPE, "nms: expected boxes [N, 4] as (x1, y1, x2, y2), got %d-d with last dim %lld",
                         boxes->ndim, boxes->ndim ? (long long)boxes->shape[boxes->ndim - 1] : 0LL);
    if (scores->ndim != 1 || scores->shape[0] != boxes->shape[0])
        return oar_error(OAR_ERR_SHAPE, "nms: expected scores [%lld], one per box, got %d-d with %lld elements",
                         (long long)boxes->shape[0], scores->ndim, (long long)scores->numel);
    if (isnan(a[0].f))
        return oar_error(OAR_ERR_INVALID_ARG, "nms: expected a number for iou_threshold, got nan");
    out[0] = (oar_meta){.dtype = OAR_I64, .ndim = 1, .shape = {boxes->shape[0]}};
    out[1] = (oar_meta){.dtype = OAR_I64, .ndim = 0};
    *n_out = 2;
    return OAR_OK;
}

static oar_status nms_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                          const oar_attr *a) {
    (void)ctx, (void)n_in, (void)n_out;
    const oar_tensor *boxes = in[0], *scores = in[1];
    int64_t n = boxes->shape[0];
    const oar_dtype_traits *bt = &oar_dtypes[boxes->dtype], *st = &oar_dtypes[scores->dtype];
    int64_t *keep = (int64_t *)oar_tensor_ptr(out[0]), *count = (int64_t *)oar_tensor_ptr(out[1]);
    size_t m = (size_t)(n ? n : 1);
    nms_item *order = malloc(m * sizeof *order);
    double *b = malloc(m * 5 * sizeof *b); /* x1 y1 x2 y2 area */
    unsigned char *gone = calloc(m, 1);
    if (!order || !b || !gone) {
        free(order), free(b), free(gone);
        return oar_error(OAR_ERR_OOM, "nms: no memory for %lld boxes", (long long)n);
    }
    const char *bp = oar_tensor_ptr(boxes), *sp = oar_tensor_ptr(scores);
    for (int64_t i = 0; i < n; i++) {
        for (int k = 0; k < 4; k++) b[i * 5 + k] = bt->load(bp + (i * 4 + k) * (int64_t)bt->size);
        b[i * 5 + 4] = nms_area(b + i * 5);
        order[i] = (nms_item){st->load(sp + i * (int64_t)st->size), i};
    }
    qsort(order, (size_t)n, sizeof *order, nms_by_score);
    int64_t kept = 0;
    double thr = a[0].f;
    for (int64_t r = 0; r < n; r++) {
        int64_t i = order[r].index;
        if (gone[i]) continue;
        keep[kept++] = i;
        const double *p = b + i * 5;
        for (int64_t s = r + 1; s < n; s++) {
            int64_t j = order[s].index;
            if (gone[j]) continue;
            if (nms_iou_above(p, b + j * 5, thr)) gone[j] = 1;
        }
    }
    for (int64_t i = kept; i < n; i++) keep[i] = -1;
    *count = kept;
    free(order), free(b), free(gone);
    return OAR_OK;
}

const oar_op_def oar_opdef_nms = {
    .name = "nms", .n_inputs = 2, .n_outputs = 2, .n_attrs = 1, .attrs = {{"iou_threshold", OAR_ATTR_FLOAT}},
    .flags = OAR_OPF_NONDIFF | OAR_OPF_AMP_DENY, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = nms_infer, .reference = nms_ref,
};

oar_status oar_nms(oar_tensor *boxes, oar_tensor *scores, double iou_threshold, oar_tensor **keep,
                   oar_tensor **count) {
    oar_attr a[1] = {oar_attr_float(iou_threshold)};
    oar_tensor *in[2] = {boxes, scores}, *out[2];
    int n = 2;
    oar_status s = oar_op_call(OAR_OP_nms, in, 2, a, out, &n);
    if (s != OAR_OK) return s;
    *keep = out[0];
    *count = out[1];
    return OAR_OK;
}
