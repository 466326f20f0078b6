/* ONNX operators whose output sizes depend on the data: NonZero and NonMaxSuppression. A fixed-
 * shape program cannot hold them, so a model that has them runs eagerly, node by node, on every
 * call (onnx_model.c, "eager"); here their inputs are real tensors and the outputs are sized by
 * what the data gives. NonMaxSuppression runs on oar's nms op, class by class. */
#include "io/onnx/onnx_ops.h"

#include <stdlib.h>
#include <string.h>

static bool need_data(ox_ctx *c, const oar_tensor *x, const char *what) {
    if (x->storage) return true;
    ox_fail(c, OAR_ERR_UNSUPPORTED, "%s of values computed in a compiled program: its output size depends on the "
                                    "data (models with it run eagerly; this one is being traced)", what);
    return false;
}

/* The coordinates of x's nonzero elements, [rank, count] i64, in row-major order. */
oar_status ox_NonZero(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    if (!need_data(c, x, "NonZero")) return oar_last_status();
    oar_tensor *hit = oar_contiguous(oar_cast(oar_ne_scalar(oar_cast(x, OAR_F64), 0.0), OAR_U8));
    if (!hit) return oar_last_status();
    const uint8_t *h = (const uint8_t *)oar_tensor_ptr(hit);
    int64_t count = 0, rank = x->ndim > 0 ? x->ndim : 1;
    for (int64_t i = 0; i < x->numel; i++) count += h[i];
    int64_t shape[2] = {rank, count};
    oar_tensor *y = oar_empty(shape, 2, OAR_I64);
    if (!y) return oar_last_status();
    int64_t *p = (int64_t *)oar_tensor_ptr(y), j = 0;
    for (int64_t i = 0; i < x->numel; i++) {
        if (!h[i]) continue;
        int64_t rest = i;
        for (int d = (int)rank - 1; d >= 0; d--) { /* the flat index as coordinates, last dim fastest */
            int64_t size = x->ndim > 0 ? x->shape[d] : 1;
            p[d * count + j] = rest % size;
            rest /= size;
        }
        j++;
    }
    return ox_set(c, 0, y);
}

/* Boxes as (x1, y1, x2, y2) with x1 <= x2 and y1 <= y2: ONNX gives corners in either order
 * (center_point_box 0: y1, x1, y2, x2) or centers and sizes (1: xc, yc, w, h). */
static oar_tensor *corner_boxes(oar_tensor *b, bool centers) {
    oar_tensor *col[4];
    for (int k = 0; k < 4; k++) col[k] = oar_slice(b, 1, k, k + 1, 1);
    oar_tensor *x1, *y1, *x2, *y2;
    if (centers) {
        oar_tensor *hw = oar_mul_scalar(col[2], 0.5), *hh = oar_mul_scalar(col[3], 0.5);
        x1 = oar_sub(col[0], hw), x2 = oar_add(col[0], hw), y1 = oar_sub(col[1], hh), y2 = oar_add(col[1], hh);
    } else {
        x1 = oar_minimum(col[1], col[3]), x2 = oar_maximum(col[1], col[3]);
        y1 = oar_minimum(col[0], col[2]), y2 = oar_maximum(col[0], col[2]);
    }
    oar_tensor *xs[4] = {x1, y1, x2, y2};
    return x1 && y1 && x2 && y2 ? oar_concat(xs, 4, 1) : NULL;
}

/* One class of one batch: the kept box indices (by decreasing score) into sel, at most max_out. */
static oar_status nms_class(ox_ctx *c, oar_tensor *boxes, oar_tensor *scores, double iou, bool has_thr, double thr,
                            int64_t max_out, int64_t *sel, int64_t *n_sel) {
    int64_t n = scores->shape[0], *idx = malloc(sizeof *idx * (size_t)(n ? n : 1)), m = 0;
    double *s = malloc(sizeof *s * (size_t)(n ? n : 1));
    oar_status st = idx && s ? oar_copy_to_buffer(scores, s, sizeof *s * (size_t)n, OAR_F64) : OAR_ERR_OOM;
    for (int64_t i = 0; st == OAR_OK && i < n; i++)
        if (!has_thr || s[i] > thr) idx[m++] = i; /* ONNX: scores above the threshold take part */
    *n_sel = 0;
    if (st == OAR_OK && m > 0) {
        oar_tensor *pick = oar_from_data(idx, &m, 1, OAR_I64), *keep = NULL, *count = NULL;
        st = pick ? oar_nms(oar_index_select(boxes, 0, pick), oar_index_select(scores, 0, pick), iou, &keep, &count)
                  : oar_last_status();
        int64_t *k = st == OAR_OK ? malloc(sizeof *k * (size_t)m) : NULL;
        double kept = 0;
        if (st == OAR_OK && !k) st = OAR_ERR_OOM;
        if (st == OAR_OK) st = oar_item(count, &kept);
        if (st == OAR_OK) st = oar_copy_to_buffer(keep, k, sizeof *k * (size_t)m, OAR_I64);
        for (int64_t j = 0; st == OAR_OK && j < (int64_t)kept && j < max_out; j++) sel[(*n_sel)++] = idx[k[j]];
        free(k);
        oar_release(keep), oar_release(count);
    }
    free(idx), free(s);
    return st == OAR_ERR_OOM ? ox_fail(c, st, "out of memory for %lld boxes", (long long)n) : st;
}

/* selected_indices [count, 3] i64: (batch, class, box), per batch and class by decreasing score. */
oar_status ox_NonMaxSuppression(ox_ctx *c) {
    oar_tensor *boxes = OX_IN(c, 0), *scores = OX_IN(c, 1);
    if (!boxes || !scores) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs boxes and scores");
    if (!need_data(c, boxes, "NonMaxSuppression") || !need_data(c, scores, "NonMaxSuppression"))
        return oar_last_status();
    if (boxes->ndim != 3 || boxes->shape[2] != 4 || scores->ndim != 3 || scores->shape[0] != boxes->shape[0] ||
        scores->shape[2] != boxes->shape[1])
        return ox_fail(c, OAR_ERR_SHAPE, "expected boxes [batch, N, 4] and scores [batch, classes, N]");
    double max_out = 0, iou = 0, thr = 0;
    if (OX_IN(c, 2) && !ox_known_scalar(c, 2, &max_out)) return oar_last_status();
    if (OX_IN(c, 3) && !ox_known_scalar(c, 3, &iou)) return oar_last_status();
    bool has_thr = OX_IN(c, 4) != NULL;
    if (has_thr && !ox_known_scalar(c, 4, &thr)) return oar_last_status();
    if (iou < 0 || iou > 1) return ox_fail(c, OAR_ERR_INVALID_ARG, "expected iou_threshold in [0, 1], got %g", iou);
    int64_t batches = boxes->shape[0], classes = scores->shape[1], n = boxes->shape[1];
    int64_t per_class = max_out >= (double)n ? n : max_out > 0 ? (int64_t)max_out : 0; /* 0: none, as ONNX */
    size_t cap = (size_t)(batches * classes * per_class) + 1;
    int64_t *rows = malloc(sizeof *rows * cap * 3), *sel = malloc(sizeof *sel * (size_t)(n ? n : 1));
    int64_t count = 0;
    oar_status st = rows && sel ? OAR_OK : ox_fail(c, OAR_ERR_OOM, "out of memory for %lld boxes", (long long)n);
    bool centers = ox_attr_int(c, "center_point_box", 0) != 0;
    for (int64_t b = 0; st == OAR_OK && b < batches && per_class > 0; b++) {
        oar_tensor *bx = corner_boxes(oar_squeeze(oar_slice(boxes, 0, b, b + 1, 1), 0), centers);
        for (int64_t k = 0; st == OAR_OK && k < classes; k++) {
            oar_tensor *sc = oar_reshape(oar_slice(oar_slice(scores, 0, b, b + 1, 1), 1, k, k + 1, 1), &n, 1);
            int64_t got = 0;
            st = bx && sc ? nms_class(c, bx, sc, iou, has_thr, thr, per_class, sel, &got) : oar_last_status();
            for (int64_t j = 0; st == OAR_OK && j < got; j++, count++)
                rows[count * 3] = b, rows[count * 3 + 1] = k, rows[count * 3 + 2] = sel[j];
        }
    }
    int64_t shape[2] = {count, 3};
    oar_tensor *y = st == OAR_OK ? oar_from_data(rows, shape, 2, OAR_I64) : NULL;
    free(rows), free(sel);
    return st == OAR_OK ? ox_set(c, 0, y) : st;
}
