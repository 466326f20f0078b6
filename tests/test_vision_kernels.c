/* The fast CPU kernels of grid_sample, roi_align and nms (src/kernels/cpu/vision_*.c): every
 * registered one (generic and, where the cap allows, AVX2) gives the same bits at 1 and 2 threads
 * (backward scatter-adds are split by channel, never by point or box) and the reference's values
 * within f32 rounding (nms: the same indices); a bad box is refused with the reference's message.
 * Sizes are past the kernels' size bars, so the threaded paths run. */
#include <math.h>

#include "ops/op.h"
#include "test_util.h"

/* Runs kernel k of op on in; outputs into out (n_out of them); false when it declines or fails. */
static bool run(oar_op_id op, const oar_kernel_entry *k, oar_tensor **in, int n_in, const oar_attr *a,
                oar_tensor **out, int *n_out) {
    oar_meta m[4];
    *n_out = 0;
    if (oar_op_infer(op, in, n_in, a, m, n_out) != OAR_OK) return false;
    for (int i = 0; i < *n_out; i++) out[i] = oar_empty(m[i].shape, m[i].ndim, m[i].dtype);
    if (k->supports && !k->supports(in, n_in, out, *n_out, a)) return false;
    return oar_op_run_kernel(op, k, in, n_in, out, *n_out, a) == OAR_OK;
}

static bool close_to(oar_tensor *got, oar_tensor *want, double tol) {
    int64_t n = oar_numel(want);
    if (!got || oar_numel(got) != n) return false;
    double *g = malloc((size_t)(n ? n : 1) * sizeof(double)), *w = malloc((size_t)(n ? n : 1) * sizeof(double));
    oar_copy_to_buffer(got, g, (size_t)n * sizeof(double), OAR_F64);
    oar_copy_to_buffer(want, w, (size_t)n * sizeof(double), OAR_F64);
    double scale = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(w[i]));
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++) ok = fabs(g[i] - w[i]) <= tol * (1 + scale);
    free(g);
    free(w);
    return ok;
}

/* Every non-reference kernel of op: 1 thread == 2 threads bit for bit, and near the reference. */
static void check_op(oar_op_id op, oar_tensor **in, int n_in, const oar_attr *a, double tol, int want_fast) {
    const oar_kernel_entry *ks, *ref = NULL;
    int nk = oar_op_kernels(op, &ks), fast = 0;
    for (int i = 0; i < nk; i++)
        if (ks[i].device == OAR_CPU && !strcmp(ks[i].impl, "reference")) ref = &ks[i];
    CHECK(ref != NULL);
    oar_tensor *want[4];
    int nw;
    CHECK(run(op, ref, in, n_in, a, want, &nw));
    for (int i = 0; i < nk; i++) {
        if (ks[i].device != OAR_CPU || &ks[i] == ref) continue;
        oar_tensor *got[2][4];
        int ng[2];
        bool ran = true;
        for (int t = 1; t <= 2; t++) {
            oar_set_num_threads(t);
            ran = ran && run(op, &ks[i], in, n_in, a, got[t - 1], &ng[t - 1]);
        }
        oar_set_num_threads(1);
        if (!ran) continue; /* declined (an AVX2 kernel under a lower cap) */
        fast++;
        for (int o = 0; o < nw; o++) {
            if (!t_same_bits(got[0][o], got[1][o]) || !close_to(got[0][o], want[o], tol))
                printf("  %s / %s: output %d differs (threads or reference)\n", oar_op_table[op]->name, ks[i].impl, o);
            CHECK(t_same_bits(got[0][o], got[1][o]));
            CHECK(close_to(got[0][o], want[o], tol));
        }
    }
    CHECK(fast >= want_fast);
}

static oar_tensor *uniform(const int64_t *shape, int nd, double lo, double hi) {
    oar_tensor *u = oar_rand(shape, nd, OAR_F32);
    return oar_add_scalar(oar_mul_scalar(u, hi - lo), lo);
}

int main(void) {
    oar_init();
    oar_manual_seed(14);
    oar_scope_begin();
    const char *modes[3] = {"bilinear", "nearest", "bicubic"}, *pads[3] = {"zeros", "border", "reflection"};
    oar_tensor *x = oar_randn((int64_t[]){2, 16, 20, 24}, 4, OAR_F32);
    oar_tensor *grid = uniform((int64_t[]){2, 18, 22, 2}, 4, -1.3, 1.3);
    oar_tensor *gy = oar_randn((int64_t[]){2, 16, 18, 22}, 4, OAR_F32);
    for (int m = 0; m < 3; m++) {
        oar_attr a[3] = {oar_attr_str(modes[m]), oar_attr_str(pads[m]), oar_attr_int(m == 1)};
        oar_tensor *fin[2] = {x, grid}, *bin[3] = {gy, x, grid};
        check_op(OAR_OP_grid_sample, fin, 2, a, 1e-5, 1);
        check_op(OAR_OP_grid_sample_backward, bin, 3, a, 1e-4, 1);
    }
    { /* 5-d */
        oar_tensor *x5 = oar_randn((int64_t[]){1, 8, 6, 10, 12}, 5, OAR_F32);
        oar_tensor *g5 = uniform((int64_t[]){1, 7, 9, 11, 3}, 5, -1.2, 1.2);
        oar_tensor *gy5 = oar_randn((int64_t[]){1, 8, 7, 9, 11}, 5, OAR_F32);
        oar_attr a[3] = {oar_attr_str("bilinear"), oar_attr_str("border"), oar_attr_int(0)};
        oar_tensor *fin[2] = {x5, g5}, *bin[3] = {gy5, x5, g5};
        check_op(OAR_OP_grid_sample, fin, 2, a, 1e-5, 1);
        check_op(OAR_OP_grid_sample_backward, bin, 3, a, 1e-4, 1);
    }
    /* roi_align: 40 overlapping boxes over 2 images, some past the border */
    int64_t k = 40;
    float bx[40 * 5];
    for (int i = 0; i < k; i++) {
        float x1 = (float)((i * 7) % 30) - 4, y1 = (float)((i * 5) % 24) - 3;
        float v[5] = {(float)(i % 2), x1, y1, x1 + 4 + (float)(i % 9) * 2.5f, y1 + 3 + (float)(i % 7) * 2.0f};
        memcpy(bx + i * 5, v, sizeof v);
    }
    oar_tensor *boxes = oar_from_data(bx, (int64_t[]){k, 5}, 2, OAR_F32);
    /* 12 channels, and 37: the channels-last kernel's full vectors and tail (16 and 8 wide) */
    oar_tensor *rx = oar_randn((int64_t[]){2, 12, 20, 24}, 4, OAR_F32);
    for (int t = 0; t < 4; t++) {
        int ratio = t % 2 ? 2 : -1;
        int64_t ch = t < 2 ? 12 : 37;
        oar_tensor *xin = t < 2 ? rx : oar_randn((int64_t[]){2, ch, 20, 24}, 4, OAR_F32);
        int64_t size[2] = {5, 4}, shape[4] = {2, ch, 20, 24};
        oar_attr a[5] = {oar_attr_ints(shape, 4), oar_attr_ints(size, 2), oar_attr_float(0.8), oar_attr_int(ratio),
                         oar_attr_int(ratio > 0)};
        oar_tensor *fin[2] = {xin, boxes};
        check_op(OAR_OP_roi_align, fin, 2, a + 1, 1e-5, 2); /* bins and channels */
        oar_tensor *rgy = oar_randn((int64_t[]){k, ch, 5, 4}, 4, OAR_F32);
        oar_tensor *bin[2] = {rgy, boxes};
        check_op(OAR_OP_roi_align_backward, bin, 2, a, 1e-5, 1);
    }
    /* nms: 700 boxes, many overlaps; exact indices */
    oar_tensor *corner = uniform((int64_t[]){700, 2}, 2, 0, 100), *side = uniform((int64_t[]){700, 2}, 2, 2, 30);
    oar_tensor *cat[2] = {corner, oar_add(corner, side)};
    oar_tensor *nb = oar_concat(cat, 2, 1), *ns = oar_rand((int64_t[]){700}, 1, OAR_F32);
    for (double thr = 0.1; thr < 1; thr += 0.4) {
        oar_attr a[1] = {oar_attr_float(thr)};
        oar_tensor *in[2] = {nb, ns};
        check_op(OAR_OP_nms, in, 2, a, 0, 1);
    }
    /* nms over clusters far apart (batched NMS's class offsets: the x-culled path), at a positive
     * and a zero threshold, and with a negative one and a NaN box (both the full scan) */
    {
        int64_t nc = 3000, shp[2] = {3000, 2};
        oar_tensor *cls = oar_floor(uniform((int64_t[]){3000, 1}, 2, 0, 30));
        oar_tensor *lo = oar_add(uniform(shp, 2, 0, 60), oar_mul_scalar(cls, 1000.0)), *wh = uniform(shp, 2, 1, 25);
        oar_tensor *parts[2] = {lo, oar_add(lo, wh)};
        oar_tensor *cb = oar_contiguous(oar_concat(parts, 2, 1)), *cs = oar_rand(&nc, 1, OAR_F32);
        double thrs[3] = {0.45, 0, -0.1};
        for (int t = 0; t < 3; t++) {
            oar_attr a[1] = {oar_attr_float(thrs[t])};
            check_op(OAR_OP_nms, (oar_tensor *[]){cb, cs}, 2, a, 0, 1);
        }
        ((float *)oar_data(cb))[17] = NAN;
        check_op(OAR_OP_nms, (oar_tensor *[]){cb, cs}, 2, (oar_attr[]){oar_attr_float(0.45)}, 0, 1);
    }
    /* a bad box through the fast kernel: the reference's message */
    bx[5] = 7; /* box 1 of batch 7 of 2 */
    oar_tensor *bad = oar_from_data(bx, (int64_t[]){k, 5}, 2, OAR_F32);
    int64_t size[2] = {2, 2};
    oar_attr a[4] = {oar_attr_ints(size, 2), oar_attr_float(1), oar_attr_int(-1), oar_attr_int(0)};
    CHECK_ERR(oar_op_call1(OAR_OP_roi_align, (oar_tensor *[]){rx, bad}, 2, a),
              "roi_align: box 1 has batch index 7; expected an integer in [0, 2)");
    oar_scope_end();
    return test_summary("test_vision_kernels");
}
