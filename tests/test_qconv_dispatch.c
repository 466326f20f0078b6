/* Which qconv2d kernel runs for which shape (src/kernels/cpu/qconv_direct_avx2.c,
 * qconv_vnni.c, qconv_dnnl.c):
 *  - the rule oar_qconv_direct_takes is a pure function of the channels per group, checked on
 *    any machine;
 *  - at the AVX2 cap, LeNet's convs (1 -> 6, 6 -> 16) and a first RGB conv select the direct
 *    AVX2 kernel and a 16 -> 16 conv does not; natively with VNNI, the direct VNNI kernel;
 *  - the direct AVX2 kernel equals the reference bit for bit at 1 and 2 threads on LeNet's
 *    shapes with 7-bit weights, and with 8-bit weights (which it hands to the exact GEMM). */
#include "test_util.h"

#include "kernels/cpu/cpu_kernels.h"
#include "ops/op.h"
#include "ops/quant.h"

static void check_rule(void) {
    for (int vnni = 0; vnni < 2; vnni++) {
        CHECK(oar_qconv_direct_takes(vnni, 1, 6, 1));   /* LeNet conv1 */
        CHECK(oar_qconv_direct_takes(vnni, 6, 16, 1));  /* LeNet conv2 */
        CHECK(oar_qconv_direct_takes(vnni, 3, 16, 1));  /* ResNet-20's first conv */
        CHECK(oar_qconv_direct_takes(vnni, 16, 6, 1));
        CHECK(oar_qconv_direct_takes(vnni, 15, 64, 1));
        CHECK(!oar_qconv_direct_takes(vnni, 16, 16, 1)); /* ResNet-20's blocks: oneDNN */
        CHECK(!oar_qconv_direct_takes(vnni, 64, 32, 1));
        CHECK(!oar_qconv_direct_takes(vnni, 3, 64, 4)); /* resnet18's stem, stride 2: oneDNN */
        CHECK(oar_qconv_direct_takes(vnni, 3, 8, 4));   /* strided with few outputs: direct */
    }
}

typedef struct qcase {
    oar_tensor *in[QL_N];
    oar_attr at[6];
    int64_t y[4];
} qcase;

/* x u8 [n, c, h, w], weight [o, c, k, k] in [-wmax, wmax), requantized u8 with ReLU, padding p */
static void make_case(qcase *q, int64_t n, int64_t c, int64_t h, int64_t o, int64_t k, int64_t p, int wmax) {
    static const int64_t one[2] = {1, 1};
    int64_t pd[2] = {p, p};
    memset(q, 0, sizeof *q);
    q->in[QL_X] = oar_randint(0, 256, (int64_t[]){n, c, h, h}, 4, OAR_U8);
    q->in[QL_XS] = oar_scalar(0.02, OAR_F32);
    q->in[QL_XZP] = oar_scalar(3, OAR_I32);
    q->in[QL_W] = oar_randint(-wmax, wmax, (int64_t[]){o, c, k, k}, 4, OAR_I8);
    q->in[QL_WS] = oar_scalar(0.001, OAR_F32);
    q->in[QL_BIAS] = oar_randn((int64_t[]){o}, 1, OAR_F32);
    q->in[QL_YS] = oar_scalar(0.05, OAR_F32);
    q->in[QL_YZP] = oar_scalar(10, OAR_I32);
    q->at[0] = oar_attr_ints(one, 2), q->at[1] = oar_attr_ints(pd, 2), q->at[2] = oar_attr_ints(one, 2);
    q->at[3] = oar_attr_int(1), q->at[4] = oar_attr_int(OAR_QACT_RELU), q->at[5] = oar_attr_dtype(OAR_U8);
    int64_t oh = h + 2 * p - k + 1;
    q->y[0] = n, q->y[1] = o, q->y[2] = oh, q->y[3] = oh;
}

static const char *selected(qcase *q) {
    oar_tensor *y = oar_empty(q->y, 4, OAR_U8);
    const oar_kernel_entry *k = oar_select_kernel(OAR_OP_qconv2d, q->in, QL_N, &y, 1, q->at);
    return k ? k->impl : "none";
}

static const oar_kernel_entry *kernel(const char *impl) {
    const oar_kernel_entry *k;
    int n = oar_op_kernels(OAR_OP_qconv2d, &k);
    for (int i = 0; i < n; i++)
        if (!strcmp(k[i].impl, impl)) return &k[i];
    return NULL;
}

static void check_selection(void) {
    qcase c1, c2, rgb, wide;
    make_case(&c1, 2, 1, 28, 6, 5, 2, 64);
    make_case(&c2, 2, 6, 14, 16, 5, 0, 64);
    make_case(&rgb, 2, 3, 12, 16, 3, 1, 64);
    make_case(&wide, 2, 16, 8, 16, 3, 1, 64);
    oar_cpu_isa before = oar_get_cpu_isa();
    if (oar_cpu_isa_native() >= OAR_CPU_ISA_AVX2 && oar_set_cpu_isa(OAR_CPU_ISA_AVX2) == OAR_OK) {
        CHECK(!strcmp(selected(&c1), "avx2-direct"));
        CHECK(!strcmp(selected(&c2), "avx2-direct"));
        CHECK(!strcmp(selected(&rgb), "avx2-direct"));
        const char *w = selected(&wide); /* oneDNN's int8 code where the build has it, else the GEMM */
        CHECK(strcmp(w, "avx2-direct") && (!strcmp(w, "onednn-int8") || !strcmp(w, "avx2-exact")));
        if (strcmp(w, "onednn-int8") && strcmp(w, "avx2-exact")) fprintf(stderr, "  16 -> 16 at avx2: %s\n", w);
    }
    oar_set_cpu_isa(before);
    if (oar_cpu_use_vnni()) {
        CHECK(!strcmp(selected(&c1), "avx512-vnni-direct"));
        CHECK(!strcmp(selected(&c2), "avx512-vnni-direct"));
        CHECK(strcmp(selected(&wide), "avx2-direct"));
    }
    if (oar_set_cpu_isa(OAR_CPU_ISA_GENERIC) == OAR_OK) CHECK(!strcmp(selected(&c1), "reference"));
    oar_set_cpu_isa(before);
}

/* the direct AVX2 kernel against the reference, at the AVX2 cap */
static void check_exact(int threads) {
    const oar_kernel_entry *fast = kernel("avx2-direct"), *ref = kernel("reference");
    oar_cpu_isa before = oar_get_cpu_isa();
    if (!fast || !ref || oar_cpu_isa_native() < OAR_CPU_ISA_AVX2 || oar_set_cpu_isa(OAR_CPU_ISA_AVX2) != OAR_OK) {
        fprintf(stderr, "  test_qconv_dispatch: no AVX2 here, the direct AVX2 kernel is not run\n");
        return;
    }
    int nthreads = oar_get_num_threads();
    CHECK(oar_set_num_threads(threads) == OAR_OK);
    qcase cases[4];
    make_case(&cases[0], 5, 1, 28, 6, 5, 2, 64);   /* LeNet conv1, odd batch */
    make_case(&cases[1], 7, 6, 14, 16, 5, 0, 64);  /* LeNet conv2 */
    make_case(&cases[2], 3, 3, 9, 5, 3, 1, 128);   /* 8-bit weights: the exact GEMM */
    make_case(&cases[3], 1, 2, 13, 3, 1, 0, 64);   /* 1x1 */
    for (int i = 0; i < 4; i++) {
        oar_tensor *got = oar_empty(cases[i].y, 4, OAR_U8), *want = oar_empty(cases[i].y, 4, OAR_U8);
        CHECK(fast->supports(cases[i].in, QL_N, &got, 1, cases[i].at));
        CHECK(oar_op_run_kernel(OAR_OP_qconv2d, fast, cases[i].in, QL_N, &got, 1, cases[i].at) == OAR_OK);
        CHECK(oar_op_run_kernel(OAR_OP_qconv2d, ref, cases[i].in, QL_N, &want, 1, cases[i].at) == OAR_OK);
        CHECK(t_same_bits(got, want));
    }
    oar_set_num_threads(nthreads);
    oar_set_cpu_isa(before);
}

int main(void) {
    oar_init();
    oar_manual_seed(5);
    oar_scope_begin();
    check_rule();
    check_selection();
    check_exact(1);
    check_exact(2);
    oar_scope_end();
    return test_summary("test_qconv_dispatch");
}
