/* The direct convolution kernels (src/kernels/cpu/conv_direct.c): on the shapes they take,
 * the AVX2 and AVX-512 inner loops and 1 or 2 threads give bitwise equal results (the weight
 * gradient sums fixed chunks of images in a fixed order), close to the reference kernel; and
 * the rule takes LeNet's convs and declines what they do not handle. The op sweep compares
 * them with the reference on more shapes (tests/sweep/cases_conv.c). */
#include "kernels/cpu/conv_direct.h"
#include "kernels/cpu/cpu_kernels.h"
#include "ops/op.h"
#include "test_util.h"

static const oar_kernel_entry *kernel_named(oar_op_id op, const char *impl) {
    const oar_kernel_entry *ks;
    int n = oar_op_kernels(op, &ks);
    for (int i = 0; i < n; i++)
        if (!strcmp(ks[i].impl, impl)) return &ks[i];
    return NULL;
}

static oar_tensor *randn4(int64_t a, int64_t b, int64_t c, int64_t d) {
    int64_t s[4] = {a, b, c, d};
    return oar_randn(s, 4, OAR_F32);
}

/* Runs kernel k of op into a fresh output; NULL where it declines or fails. */
static oar_tensor *run(oar_op_id op, const oar_kernel_entry *k, oar_tensor **in, int n_in, const oar_attr *a) {
    oar_meta m[2];
    int n_out = 0;
    if (oar_op_infer(op, in, n_in, a, m, &n_out) != OAR_OK) return NULL;
    oar_tensor *out = oar_empty(m[0].shape, m[0].ndim, OAR_F32);
    if (!out || (k->supports && !k->supports(in, n_in, &out, 1, a))) return NULL;
    if (oar_op_run_kernel(op, k, in, n_in, &out, 1, a) != OAR_OK) return NULL;
    return out;
}

static bool same_bits(oar_tensor *a, oar_tensor *b) {
    return a && b && a->numel == b->numel &&
           !memcmp(oar_tensor_ptr(a), oar_tensor_ptr(b), sizeof(float) * (size_t)a->numel);
}

static double max_rel_diff(oar_tensor *a, oar_tensor *b) {
    const float *x = (const float *)oar_tensor_ptr(a), *y = (const float *)oar_tensor_ptr(b);
    double m = 0;
    for (int64_t i = 0; i < a->numel; i++) {
        double d = fabs((double)x[i] - y[i]) / (1.0 + fabs((double)y[i]));
        if (d > m) m = d;
    }
    return m;
}

/* One op on one shape, where the rule takes it: every (instruction set, threads) pair bitwise
 * equal to the first run, all within 1e-4 of the reference, and dispatch picks the kernel. */
static void check_op(const char *what, oar_op_id op, oar_tensor **in, int n_in, const oar_attr *a, bool taken) {
    const oar_kernel_entry *direct = kernel_named(op, "direct"), *ref = kernel_named(op, "reference");
    CHECK(direct && ref);
    if (!direct || !ref || !taken) return;
    oar_tensor *want = run(op, ref, in, n_in, a), *first = NULL;
    CHECK(want != NULL);
    oar_conv_direct_isa isas[2] = {OAR_CONV_DIRECT_AVX512, OAR_CONV_DIRECT_AVX2};
    for (int i = 0; i < 2; i++) {
        if (oar_conv_direct_force_isa(isas[i]) < 0) continue;
        for (int threads = 1; threads <= 2; threads++) {
            oar_set_num_threads(threads);
            oar_tensor *got = run(op, direct, in, n_in, a);
            if (!got) {
                fprintf(stderr, "%s: the direct kernel declined or failed\n", what);
                CHECK(got != NULL);
                continue;
            }
            if (!first) first = got;
            else if (!same_bits(got, first)) {
                fprintf(stderr, "%s: %s at %d threads differs from the first run\n", what,
                        isas[i] == OAR_CONV_DIRECT_AVX2 ? "AVX2" : "AVX-512", threads);
                CHECK(false);
            }
            if (want) CHECK(max_rel_diff(got, want) < 1e-4);
        }
    }
    CHECK(first != NULL);
    if (first) { /* dispatch picks it over oneDNN and im2col */
        const oar_kernel_entry *k = oar_select_kernel(op, in, n_in, &first, 1, a);
        CHECK(k && !strcmp(k->impl, "direct"));
    }
    oar_conv_direct_force_isa(OAR_CONV_DIRECT_AUTO);
    oar_set_num_threads(1);
}

static bool takes_shape(oar_conv_direct_op op, int64_t ci, int64_t co, int64_t kh, int64_t kw, int64_t p) {
    int64_t one[2] = {1, 1}, pad[2] = {p, p};
    return oar_conv_direct_takes(op, ci, co, kh, kw, one, pad, one, 1);
}

/* x [n, ci, h, w], weight [co, ci, kh, kw], padding p: the three ops. */
static void check_shape(int64_t n, int64_t ci, int64_t h, int64_t w, int64_t co, int64_t kh, int64_t kw, int64_t p,
                        bool bias) {
    char what[128];
    oar_scope_begin();
    int64_t one[2] = {1, 1}, pad[2] = {p, p};
    int64_t oh = h + 2 * p - kh + 1, ow = w + 2 * p - kw + 1;
    int64_t xs[4] = {n, ci, h, w}, ws[4] = {co, ci, kh, kw};
    oar_tensor *x = randn4(n, ci, h, w), *wt = randn4(co, ci, kh, kw), *dy = randn4(n, co, oh, ow);
    int64_t bs[1] = {co};
    oar_tensor *b = bias ? oar_randn(bs, 1, OAR_F32) : NULL;
    oar_attr a[4] = {oar_attr_ints(one, 2), oar_attr_ints(pad, 2), oar_attr_ints(one, 2), oar_attr_int(1)};
    oar_tensor *fin[3] = {x, wt, b};
    snprintf(what, sizeof what, "x [%lld,%lld,%lld,%lld] w [%lld,%lld,%lld,%lld] pad %lld", (long long)n,
             (long long)ci, (long long)h, (long long)w, (long long)co, (long long)ci, (long long)kh, (long long)kw,
             (long long)p);
    check_op(what, OAR_OP_conv2d, fin, 3, a, takes_shape(OAR_CONV_DIRECT_FORWARD, ci, co, kh, kw, p));
    oar_attr g[5] = {oar_attr_ints(xs, 4), a[0], a[1], a[2], a[3]};
    oar_tensor *gin[2] = {dy, wt};
    check_op(what, OAR_OP_conv2d_grad_input, gin, 2, g, takes_shape(OAR_CONV_DIRECT_GRAD_INPUT, ci, co, kh, kw, p));
    g[0] = oar_attr_ints(ws, 4);
    oar_tensor *win[2] = {x, dy};
    check_op(what, OAR_OP_conv2d_grad_weight, win, 2, g, takes_shape(OAR_CONV_DIRECT_GRAD_WEIGHT, ci, co, kh, kw, p));
    oar_scope_end();
}

static bool takes(oar_conv_direct_op op, int64_t ci, int64_t co, int64_t k, int64_t s, int64_t p, int64_t d,
                  int64_t groups) {
    int64_t st[2] = {s, s}, pd[2] = {p, p}, dl[2] = {d, d};
    return oar_conv_direct_takes(op, ci, co, k, k, st, pd, dl, groups);
}

static void check_rule(void) {
    if (!oar_cpu_has_avx2()) return;
    bool avx512 = oar_conv_direct_force_isa(OAR_CONV_DIRECT_AVX512) >= 0;
    oar_conv_direct_force_isa(OAR_CONV_DIRECT_AUTO);
    for (int op = 0; op < 3; op++) {
        CHECK(takes(op, 1, 6, 5, 1, 2, 1, 1));                                        /* LeNet conv1 */
        CHECK(takes(op, 6, 16, 5, 1, 0, 1, 1) == (avx512 || op == OAR_CONV_DIRECT_FORWARD)); /* conv2 */
        CHECK(!takes(op, 1, 6, 5, 2, 0, 1, 1));
        CHECK(!takes(op, 1, 6, 5, 1, 0, 2, 1));
        CHECK(!takes(op, 2, 6, 5, 1, 0, 1, 2));
        CHECK(!takes(op, 17, 1, 5, 1, 0, 1, 1));
        CHECK(!takes(op, 1, 17, 5, 1, 0, 1, 1));
        CHECK(!takes(op, 1, 6, 9, 1, 0, 1, 1));
        CHECK(!takes(op, 1, 6, 5, 1, 5, 1, 1)); /* padding past k - 1 */
    }
    for (int op = 0; op < 3; op++) { /* ResNet-20's 3 x 3 convs: see the rule */
        CHECK(!takes(op, 16, 16, 3, 1, 1, 1, 1));
        CHECK(!takes(op, 3, 16, 3, 1, 1, 1, 1));
    }
    CHECK(oar_conv_direct_force_isa((oar_conv_direct_isa)7) == -1);
}

int main(void) {
    oar_init();
    oar_manual_seed(3);
    check_rule();
    if (oar_cpu_has_avx2()) {
        check_shape(5, 1, 28, 28, 6, 5, 5, 2, true);    /* LeNet conv1, odd batch */
        check_shape(17, 6, 14, 14, 16, 5, 5, 0, true);  /* LeNet conv2, three weight chunks */
        check_shape(16, 6, 14, 14, 16, 5, 5, 0, false); /* the main job's batch */
        check_shape(1, 3, 9, 23, 7, 5, 5, 1, true);     /* off the tiles and vectors */
        check_shape(2, 16, 7, 6, 13, 7, 7, 3, false);
        check_shape(3, 2, 11, 10, 9, 1, 5, 0, true);    /* one kernel row */
        check_shape(2, 4, 10, 9, 16, 5, 5, 2, true);    /* 16 channels: the channel tiles */
        check_shape(3, 3, 13, 12, 5, 5, 5, 2, true);    /* rows of <= 16 outputs: one vector per row, odd rows */
        check_shape(1, 4, 5, 33, 5, 2, 6, 1, true);
        check_shape(2, 3, 9, 9, 4, 3, 3, 1, true);      /* declined: nothing to run */
    }
    return test_summary("test_conv_direct");
}
