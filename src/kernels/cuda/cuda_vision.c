/* CUDA kernels of grid_sample, roi_align and nms (vision.cu), f32, f64, f16 and bf16. The glue
 * reads the attributes as the reference does (ops/grid_sample_taps.h, roi_align_geom.h) and sizes
 * the scratch of the sorts. roi_align reads its boxes on the host (one small copy, which waits for
 * the GPU): their geometry and checks are the reference's own (roi_geom_of), so a bad box fails
 * with the host's message, and the kernels get each box's geometry as the host computed it. That
 * copy cannot be recorded in a CUDA graph, so a compiled step runs roi_align as a plain launch;
 * grid_sample and nms read nothing back. */
#include "cuda_glue.h"
#include "launch_vision.h"
#include "ops/grid_sample_taps.h"
#include "ops/roi_align_geom.h"

#include <stdlib.h>

static void *ptr_of(const oar_tensor *t) { return t->numel ? oar_tensor_ptr(t) : NULL; }

/* ---- grid_sample: attrs mode, padding_mode, align_corners */

/* The launchers' geometry of input x and grid (grid_sample.c's gs_geom_of). */
static oar_status grid_of(const char *op, const oar_tensor *x, const oar_tensor *grid, const oar_attr *a,
                          oar_cu_grid *g) {
    *g = (oar_cu_grid){.n = x->shape[0], .c = x->shape[1], .np = 1, .vol = 1};
    g->geom.dims = x->ndim - 2;
    for (int d = 0; d < g->geom.dims; d++) {
        g->geom.size[d] = x->shape[x->ndim - 1 - d];
        g->vol *= x->shape[2 + d];
        g->np *= grid->shape[1 + d];
    }
    return gs_opts_read(op, a, &g->opts);
}

static oar_status grid_sample_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                   int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    oar_cu_grid g;
    oar_status st = grid_of("grid_sample", in[0], in[1], a, &g);
    if (st != OAR_OK || out[0]->numel == 0) return st;
    int e = oar_cu_grid_sample(oar_tensor_ptr(out[0]), oar_tensor_ptr(in[0]), oar_tensor_ptr(in[1]), in[0]->dtype,
                               &g, oar_cuda_stream_of(ctx));
    return oar_cuda_status((cudaError_t)e, "grid_sample");
}

/* in: grad_out, input, grid; out: grad_input, grad_grid */
static oar_status grid_sample_backward_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                            oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    const char *op = "grid_sample_backward";
    oar_cu_grid g;
    oar_status st = grid_of(op, in[1], in[2], a, &g);
    if (st != OAR_OK || (out[0]->numel == 0 && out[1]->numel == 0)) return st;
    int64_t taps = g.n * g.np * oar_cu_grid_taps(&g);
    if (taps > OAR_CU_VISION_MAX_ENTRIES)
        return oar_error(OAR_ERR_UNSUPPORTED, "%s: the GPU kernel sorts at most %lld taps (grid points times %d), got "
                         "%lld; split the batch, or run it on the host", op, (long long)OAR_CU_VISION_MAX_ENTRIES,
                         oar_cu_grid_taps(&g), (long long)taps);
    size_t bytes = oar_cu_grid_sample_backward_scratch(&g);
    void *scratch = bytes ? oar_cuda_scratch(bytes) : NULL;
    if (bytes && !scratch)
        return oar_error(OAR_ERR_OOM, "%s: out of GPU memory for the sort of %lld taps (%zu bytes)", op,
                         (long long)taps, bytes);
    int e = oar_cu_grid_sample_backward(ptr_of(out[0]), ptr_of(out[1]), ptr_of(in[0]), ptr_of(in[1]), ptr_of(in[2]),
                                        in[1]->dtype, &g, scratch, oar_cuda_stream_of(ctx));
    if (scratch) oar_cuda_scratch_free(scratch, bytes);
    return oar_cuda_status((cudaError_t)e, op);
}

/* ---- roi_align: attrs output_size, spatial_scale, sampling_ratio, aligned */

/* Each box's geometry, computed on the host from a copy of boxes, in GPU memory (*geo, a
 * tensor of bytes the caller releases; NULL without boxes). g: the shapes, set by the caller.
 * With count (the backward's entries), each box's first sample and g's sample count are set. */
static oar_status roi_boxes(const char *op, const oar_kctx *ctx, const oar_tensor *boxes, const oar_attr *a,
                            bool count, oar_cu_roi *g, oar_tensor **geo) {
    *geo = NULL;
    g->samples = 0;
    if (g->k == 0) return OAR_OK;
    oar_tensor *hb = oar_tensor_new(boxes->dtype, boxes->shape, boxes->ndim);
    int64_t bytes = g->k * (int64_t)sizeof(oar_cu_roi_box);
    oar_tensor *hg = oar_tensor_new(OAR_U8, &bytes, 1), *dg = NULL;
    oar_status st = hb && hg ? oar_tensor_copy_strided(hb, boxes) : oar_last_status();
    oar_cu_roi_box *rows = st == OAR_OK ? (oar_cu_roi_box *)oar_tensor_ptr(hg) : NULL;
    double samples = 0; /* in double first: boxes of huge bins must not overflow the count */
    for (int64_t k = 0; k < g->k && st == OAR_OK; k++) {
        st = roi_geom_of(op, hb, k, g->n, a, &rows[k].r);
        rows[k].first = g->samples;
        if (st != OAR_OK || !count) continue;
        double s = (double)g->ph * (double)g->pw * (double)rows[k].r.gh * (double)rows[k].r.gw;
        if (samples + s > (double)(OAR_CU_VISION_MAX_ENTRIES / 4)) {
            st = oar_error(OAR_ERR_UNSUPPORTED, "%s: the GPU kernel takes at most %lld samples over all boxes, got "
                           "more at box %lld (%lld x %lld per bin); give a smaller sampling_ratio, or run it on the "
                           "host", op, (long long)(OAR_CU_VISION_MAX_ENTRIES / 4), (long long)k,
                           (long long)rows[k].r.gh, (long long)rows[k].r.gw);
            break;
        }
        g->samples += (int64_t)s;
        samples += s;
    }
    if (st == OAR_OK) {
        dg = oar_tensor_new_on(ctx->device, OAR_U8, &bytes, 1);
        st = dg ? oar_tensor_copy_strided(dg, hg) : oar_last_status();
    }
    oar_tensor_unref(hb);
    oar_tensor_unref(hg);
    if (st != OAR_OK) {
        oar_tensor_unref(dg);
        return st;
    }
    *geo = dg;
    return OAR_OK;
}

static oar_status roi_align_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                 int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    const oar_tensor *x = in[0], *boxes = in[1];
    oar_cu_roi g = {.k = boxes->shape[0], .n = x->shape[0], .c = x->shape[1], .h = x->shape[2], .w = x->shape[3],
                    .ph = a[0].ints[0], .pw = a[0].ints[1]};
    oar_tensor *geo;
    oar_status st = roi_boxes("roi_align", ctx, boxes, a, false, &g, &geo);
    if (st != OAR_OK || out[0]->numel == 0) {
        oar_tensor_unref(geo);
        return st;
    }
    int e = oar_cu_roi_align(oar_tensor_ptr(out[0]), oar_tensor_ptr(x), x->dtype,
                             (const oar_cu_roi_box *)oar_tensor_ptr(geo), &g, oar_cuda_stream_of(ctx));
    oar_tensor_unref(geo); /* stream-ordered: later work on the stream reuses it after the kernel */
    return oar_cuda_status((cudaError_t)e, "roi_align");
}

/* in: grad_out, boxes; attrs: input_shape, then roi_align's */
static oar_status roi_align_backward_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                          oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    const char *op = "roi_align_backward";
    const oar_tensor *gy = in[0], *boxes = in[1];
    oar_tensor *dx = out[0];
    oar_cu_roi g = {.k = boxes->shape[0], .n = dx->shape[0], .c = dx->shape[1], .h = dx->shape[2],
                    .w = dx->shape[3], .ph = a[1].ints[0], .pw = a[1].ints[1]};
    oar_tensor *geo;
    oar_status st = roi_boxes(op, ctx, boxes, a + 1, true, &g, &geo);
    if (st != OAR_OK || dx->numel == 0) {
        oar_tensor_unref(geo);
        return st;
    }
    size_t bytes = oar_cu_roi_align_backward_scratch(&g);
    void *scratch = bytes ? oar_cuda_scratch(bytes) : NULL;
    if (bytes && !scratch) {
        oar_tensor_unref(geo);
        return oar_error(OAR_ERR_OOM, "%s: out of GPU memory for the sort of %lld samples (%zu bytes)", op,
                         (long long)g.samples, bytes);
    }
    int e = oar_cu_roi_align_backward(oar_tensor_ptr(dx), ptr_of(gy), dx->dtype,
                                      geo ? (const oar_cu_roi_box *)oar_tensor_ptr(geo) : NULL, &g, scratch,
                                      oar_cuda_stream_of(ctx));
    if (scratch) oar_cuda_scratch_free(scratch, bytes);
    oar_tensor_unref(geo);
    return oar_cuda_status((cudaError_t)e, op);
}

/* ---- nms: attr iou_threshold; out: keep [N] int64, count [] int64 */

static oar_status nms_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                           const oar_attr *a) {
    (void)n_in; (void)n_out;
    const oar_tensor *boxes = in[0], *scores = in[1];
    int64_t n = boxes->shape[0];
    if (n > OAR_CU_NMS_MAX_BOXES)
        return oar_error(OAR_ERR_UNSUPPORTED, "nms: the GPU kernel takes at most %lld boxes, got %lld; run it on the "
                         "host, or in batches (batched_nms)", (long long)OAR_CU_NMS_MAX_BOXES, (long long)n);
    size_t bytes = oar_cu_nms_scratch(n);
    void *scratch = bytes ? oar_cuda_scratch(bytes) : NULL;
    if (bytes && !scratch)
        return oar_error(OAR_ERR_OOM, "nms: out of GPU memory for the overlaps of %lld boxes (%zu bytes)",
                         (long long)n, bytes);
    int e = oar_cu_nms(ptr_of(out[0]), (int64_t *)oar_tensor_ptr(out[1]), ptr_of(boxes), boxes->dtype, ptr_of(scores),
                       scores->dtype, n, a[0].f, scratch, oar_cuda_stream_of(ctx));
    if (scratch) oar_cuda_scratch_free(scratch, bytes);
    return oar_cuda_status((cudaError_t)e, "nms");
}

void oar_cuda_register_vision(void) {
    oar_cuda_register(OAR_OP_grid_sample, OAR_FLOAT_DTYPES, grid_sample_cuda, NULL);
    oar_cuda_register(OAR_OP_grid_sample_backward, OAR_FLOAT_DTYPES, grid_sample_backward_cuda, NULL);
    oar_cuda_register(OAR_OP_roi_align, OAR_FLOAT_DTYPES, roi_align_cuda, NULL);
    oar_cuda_register(OAR_OP_roi_align_backward, OAR_FLOAT_DTYPES, roi_align_backward_cuda, NULL);
    oar_cuda_register(OAR_OP_nms, OAR_FLOAT_DTYPES, nms_cuda, NULL);
}
