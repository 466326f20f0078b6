/* The vision CUDA kernels' logic on the CPU: vision.cu's launchers, compiled as host C++ with
 * the CUDA emulation (cuda_emu.h: one thread per launch, CUB's sort as a stable sort), against
 * the reference kernels in f64, bit for bit. Covers every grid_sample mode, padding and
 * align_corners in 4-d and 5-d (forward, input and grid gradients), roi_align with boxes past
 * the border and boxes without samples (forward, backward), nms with ties, NaN, -0 and
 * infinite scores across several mask words. It checks what the GPU runs compute (indices,
 * orders of addition, the sorted scatter, the nms walk); races and launch limits are for the
 * GPU runs (sweep --device cuda, test_cuda). */
#include "launch_vision.h"
#include "ops/op.h"
#include "ops/roi_align_geom.h"
#include "test_util.h"

static uint64_t g_rs = 88172645463325252ULL;
static double rnd(void) { /* xorshift in [0, 1) */
    g_rs ^= g_rs << 13, g_rs ^= g_rs >> 7, g_rs ^= g_rs << 17;
    return (double)(g_rs >> 11) / 9007199254740992.0;
}

static oar_tensor *uniform(const int64_t *shape, int nd, double lo, double hi) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= shape[i];
    double *b = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) b[i] = lo + (hi - lo) * rnd();
    oar_tensor *t = oar_from_data(b, shape, nd, OAR_F64);
    free(b);
    return t;
}

/* The reference kernel's outputs (*n_out of them, untracked; the caller releases them). */
static void reference(oar_op_id op, oar_tensor **in, int n_in, const oar_attr *a, oar_tensor **out, int *n_out) {
    const oar_kernel_entry *ks, *ref = NULL;
    int nk = oar_op_kernels(op, &ks);
    for (int k = 0; k < nk; k++)
        if (strcmp(ks[k].impl, "reference") == 0) ref = &ks[k];
    oar_meta meta[2];
    *n_out = 0;
    if (!ref || oar_op_infer(op, in, n_in, a, meta, n_out) != OAR_OK) {
        CHECK(!"reference: inference");
        *n_out = 0;
        return;
    }
    for (int o = 0; o < *n_out; o++) out[o] = oar_tensor_new(meta[o].dtype, meta[o].shape, meta[o].ndim);
    CHECK(oar_op_run_kernel(op, ref, in, n_in, out, *n_out, a) == OAR_OK);
}

/* got (want's bytes) equal want's bytes; the first difference is printed. */
static void same(const char *what, const void *got, oar_tensor *want) {
    size_t es = oar_dtypes[want->dtype].size;
    bool ok = memcmp(got, oar_tensor_ptr(want), (size_t)want->numel * es) == 0;
    if (!ok)
        for (int64_t i = 0; i < want->numel; i++)
            if (memcmp((const char *)got + i * (int64_t)es, oar_tensor_ptr(want) + i * (int64_t)es, es)) {
                double g, w;
                if (want->dtype == OAR_F64) memcpy(&g, (const char *)got + i * 8, 8), w = ((double *)oar_tensor_ptr(want))[i];
                else g = (double)((const int64_t *)got)[i], w = (double)((int64_t *)oar_tensor_ptr(want))[i];
                fprintf(stderr, "%s: element %lld is %.17g, the reference's %.17g\n", what, (long long)i, g, w);
                break;
            }
    CHECK(ok);
}

static void *buffer(int64_t n) { return malloc((size_t)(n > 0 ? n : 1) * 8); }

static void grid_case(const int64_t *xs, const int64_t *gs, int nd, int mode, int pad, int align) {
    static const char *modes[] = {"bilinear", "nearest", "bicubic"}, *pads[] = {"zeros", "border", "reflection"};
    oar_tensor *x = uniform(xs, nd, -2, 2), *grid = uniform(gs, nd, -1.3, 1.3);
    int64_t ys[5] = {xs[0], xs[1]};
    for (int d = 2; d < nd; d++) ys[d] = gs[d - 1];
    oar_tensor *gy = uniform(ys, nd, -1, 1);
    oar_attr a[3] = {oar_attr_str(modes[mode]), oar_attr_str(pads[pad]), oar_attr_int(align)};
    oar_cu_grid g = {.opts = {.mode = mode, .pad = pad, .align = align}, .n = xs[0], .c = xs[1], .np = 1, .vol = 1};
    g.geom.dims = nd - 2;
    for (int d = 0; d < g.geom.dims; d++) {
        g.geom.size[d] = xs[nd - 1 - d];
        g.vol *= xs[2 + d];
        g.np *= gs[1 + d];
    }
    char what[160];
    snprintf(what, sizeof what, "grid_sample %d-d %s %s align_corners=%d", nd, modes[mode], pads[pad], align);
    oar_tensor *in[3] = {x, grid}, *want[2];
    int n;
    reference(OAR_OP_grid_sample, in, 2, a, want, &n);
    double *y = buffer(n ? want[0]->numel : 0);
    CHECK(oar_cu_grid_sample(y, oar_tensor_ptr(x), oar_tensor_ptr(grid), OAR_F64, &g, NULL) == 0);
    if (n) same(what, y, want[0]);
    for (int o = 0; o < n; o++) oar_tensor_unref(want[o]);
    free(y);

    oar_tensor *bin[3] = {gy, x, grid};
    reference(OAR_OP_grid_sample_backward, bin, 3, a, want, &n);
    size_t bytes = oar_cu_grid_sample_backward_scratch(&g);
    void *scratch = bytes ? malloc(bytes) : NULL;
    double *dx = buffer(x->numel), *dgrid = buffer(grid->numel);
    CHECK(oar_cu_grid_sample_backward(dx, dgrid, oar_tensor_ptr(gy), oar_tensor_ptr(x), oar_tensor_ptr(grid), OAR_F64,
                                      &g, scratch, NULL) == 0);
    if (n == 2) {
        strcat(what, " backward");
        same(what, dx, want[0]);
        same(what, dgrid, want[1]);
    }
    for (int o = 0; o < n; o++) oar_tensor_unref(want[o]);
    free(dx), free(dgrid), free(scratch);
    oar_release(x), oar_release(grid), oar_release(gy);
}

/* k boxes over n images of h x w (every fifth without width: no samples when aligned). The
 * geometry as cuda_vision.c computes it on the host. */
static void roi_case(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t ph, int64_t pw, double scale,
                     int ratio, int aligned) {
    int64_t xs[4] = {n, c, h, w}, bs[2] = {k, 5}, gys[4] = {k, c, ph, pw}, size[2] = {ph, pw};
    oar_tensor *x = uniform(xs, 4, -2, 2), *gy = uniform(gys, 4, -1, 1);
    double *rows = buffer(5 * k);
    for (int64_t i = 0; i < k; i++) {
        double x1 = rnd() * (double)(w + 4) - 3, y1 = rnd() * (double)(h + 4) - 3;
        double v[5] = {(double)(i % n), x1, y1, i % 5 == 3 ? x1 : x1 + rnd() * (double)w, y1 + rnd() * (double)h};
        memcpy(rows + 5 * i, v, sizeof v);
    }
    oar_tensor *boxes = oar_from_data(rows, bs, 2, OAR_F64);
    free(rows);
    oar_attr a[5] = {oar_attr_ints(xs, 4), oar_attr_ints(size, 2), oar_attr_float(scale), oar_attr_int(ratio),
                     oar_attr_int(aligned)};
    oar_cu_roi g = {.k = k, .n = n, .c = c, .h = h, .w = w, .ph = ph, .pw = pw};
    oar_cu_roi_box *geo = calloc((size_t)(k ? k : 1), sizeof *geo);
    for (int64_t i = 0; i < k; i++) {
        CHECK(roi_geom_of("roi_align", boxes, i, n, a + 1, &geo[i].r) == OAR_OK);
        geo[i].first = g.samples;
        g.samples += ph * pw * geo[i].r.gh * geo[i].r.gw;
    }
    char what[160];
    snprintf(what, sizeof what, "roi_align %lld boxes sampling_ratio=%d aligned=%d", (long long)k, ratio, aligned);
    oar_tensor *in[2] = {x, boxes}, *want[1];
    int no;
    reference(OAR_OP_roi_align, in, 2, a + 1, want, &no);
    double *y = buffer(k * c * ph * pw);
    CHECK(oar_cu_roi_align(y, oar_tensor_ptr(x), OAR_F64, geo, &g, NULL) == 0);
    if (no) same(what, y, want[0]), oar_tensor_unref(want[0]);
    free(y);

    oar_tensor *bin[2] = {gy, boxes};
    reference(OAR_OP_roi_align_backward, bin, 2, a, want, &no);
    size_t bytes = oar_cu_roi_align_backward_scratch(&g);
    void *scratch = bytes ? malloc(bytes) : NULL;
    double *dx = buffer(x->numel);
    CHECK(oar_cu_roi_align_backward(dx, oar_tensor_ptr(gy), OAR_F64, geo, &g, scratch, NULL) == 0);
    strcat(what, " backward");
    if (no) same(what, dx, want[0]), oar_tensor_unref(want[0]);
    free(dx), free(scratch), free(geo);
    oar_release(x), oar_release(gy), oar_release(boxes);
}

/* n boxes, scores in 6 tied levels (special: NaN, -0, 0, -inf, inf among them), scores of sdt. */
static void nms_case(int64_t n, double thr, bool special, oar_dtype sdt) {
    int64_t bs[2] = {n, 4}, ss[1] = {n};
    double *b = buffer(4 * n), *s = buffer(n);
    for (int64_t i = 0; i < n; i++) {
        double x = rnd() * 40, y = rnd() * 40;
        double v[4] = {x, y, x + rnd() * 15, y + rnd() * 15};
        memcpy(b + 4 * i, v, sizeof v);
        s[i] = floor(rnd() * 6) / 6 - 0.5;
        if (special && i % 7 == 0) s[i] = NAN;
        if (special && i % 11 == 0) s[i] = -0.0;
        if (special && i % 13 == 0) s[i] = 0.0;
        if (special && i % 17 == 0) s[i] = -INFINITY;
        if (special && i % 19 == 0) s[i] = INFINITY;
    }
    oar_tensor *boxes = oar_from_data(b, bs, 2, OAR_F64), *s64 = oar_from_data(s, ss, 1, OAR_F64);
    oar_tensor *scores = oar_cast(s64, sdt);
    free(b), free(s);
    oar_attr a = oar_attr_float(thr);
    oar_tensor *in[2] = {boxes, scores}, *want[2];
    int no;
    reference(OAR_OP_nms, in, 2, &a, want, &no);
    size_t bytes = oar_cu_nms_scratch(n);
    void *scratch = bytes ? malloc(bytes) : NULL;
    int64_t *keep = buffer(n), count = -5;
    CHECK(oar_cu_nms(keep, &count, oar_tensor_ptr(boxes), OAR_F64, oar_tensor_ptr(scores), oar_dtype_of(scores), n, thr,
                     scratch, NULL) == 0);
    char what[160];
    snprintf(what, sizeof what, "nms %lld boxes iou_threshold=%g%s", (long long)n, thr, special ? " (NaN, -0, inf)" : "");
    if (no == 2) {
        same(what, keep, want[0]);
        same(what, &count, want[1]);
        oar_tensor_unref(want[0]), oar_tensor_unref(want[1]);
    }
    free(keep), free(scratch);
    oar_release(boxes), oar_release(s64), oar_release(scores);
}

int main(void) {
    oar_init();
    int64_t xs4[4] = {2, 3, 5, 6}, gs4[4] = {2, 7, 9, 2}, xs1[4] = {1, 2, 1, 1}, gs1[4] = {1, 3, 2, 2};
    int64_t xs5[5] = {2, 2, 3, 4, 5}, gs5[5] = {2, 3, 4, 3, 3}, xs0[4] = {2, 0, 5, 6};
    for (int m = GS_BILINEAR; m <= GS_BICUBIC; m++)
        for (int p = GS_ZEROS; p <= GS_REFLECTION; p++)
            for (int al = 0; al < 2; al++) {
                grid_case(xs4, gs4, 4, m, p, al); /* 63 points on 30 pixels */
                grid_case(xs1, gs1, 4, m, p, al); /* a 1 x 1 input */
                if (m != GS_BICUBIC) grid_case(xs5, gs5, 5, m, p, al);
            }
    grid_case(xs0, gs4, 4, GS_BILINEAR, GS_ZEROS, 0); /* no channels: the grid's gradient is 0 */
    for (int al = 0; al < 2; al++) {
        roi_case(2, 3, 9, 11, 12, 3, 2, 1.0, -1, al);
        roi_case(2, 3, 9, 11, 12, 2, 3, 0.7, 2, al);
        roi_case(3, 2, 6, 7, 25, 7, 7, 1.3, -1, al);
        roi_case(1, 2, 6, 7, 0, 2, 2, 1.0, -1, al); /* no boxes: a zero gradient */
        roi_case(1, 1, 1, 1, 3, 2, 2, 1.0, -1, al);
    }
    double thr[4] = {0, 0.3, 0.7, 1};
    for (int t = 0; t < 4; t++) {
        nms_case(6, thr[t], false, OAR_F64);
        nms_case(300, thr[t], true, OAR_F64);
        nms_case(1000, thr[t], false, OAR_F32);
        nms_case(129, thr[t], true, OAR_F32);
    }
    nms_case(0, 0.5, false, OAR_F64);
    nms_case(64, 0.5, true, OAR_F64);
    nms_case(65, 0.5, true, OAR_F64);
    return test_summary("test_vision_emu");
}
