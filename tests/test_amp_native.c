/* AMP's fast CPU paths (docs/amp.md "CPU kernels"): the f32 <-> bf16 conversions, bit for bit
 * against an oracle on whichever ISA path the run is capped to (ties to even, denormals, NaN,
 * infinities, tails, the threaded split), and the native bf16 kernels (oneDNN's bf16 conv, its
 * two backward ops, the fused conv2d_act, matmul and linear): chosen exactly where the CPU has
 * AVX512_BF16 and the cap is avx512, elsewhere a fast f32 fallback (never the reference loops),
 * and on shapes larger than the sweep's (blocked layouts, AMX tiles, a split batch) equal to
 * the reference at bf16's tolerance at 1 and 2 threads, and the same bits when run again. */
#include "test_util.h"

#include "ops/op.h"
#include "tensor/tensor.h"

/* The oracle: the nearest bf16, ties to the even one; NaN stays NaN (quiet, sign kept). */
static uint16_t bf16_oracle(uint32_t x) {
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40u);
    uint32_t lo = x >> 16, rest = x & 0xFFFFu;
    if (rest > 0x8000u || (rest == 0x8000u && (lo & 1u))) lo++;
    return (uint16_t)lo;
}

static void test_conversions(void) {
    static const uint32_t special[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu, 0x00008000u,
                                       0x00018000u, 0x3F808000u, 0x3F818000u, 0x3F80FFFFu, 0x7F7FFFFFu,
                                       0xFF7FFFFFu, 0x7F800000u, 0xFF800000u, 0x7F800001u, 0xFFC00000u,
                                       0x7FFFFFFFu, 0x3F7FFFFFu, 0x477FE000u};
    const int64_t sizes[3] = {7, 16 * 5 + 9, ((int64_t)1 << 17) + 13}; /* tails; the pool's split */
    for (int s = 0; s < 3; s++) {
        int64_t n = sizes[s];
        uint32_t *bits = malloc(sizeof(uint32_t) * (size_t)n);
        uint64_t st = 0x2545F4914F6CDD1DULL ^ (uint64_t)n;
        for (int64_t i = 0; i < n; i++) {
            st ^= st << 13, st ^= st >> 7, st ^= st << 17;
            bits[i] = i < (int64_t)(sizeof special / sizeof *special) ? special[i] : (uint32_t)st;
            if (i % 3 == 1) bits[i] = (bits[i] & 0xFFFF0000u) | 0x8000u; /* exact ties */
        }
        oar_scope_begin();
        oar_tensor *f = oar_from_data(bits, &n, 1, OAR_F32);
        oar_tensor *h = oar_cast(f, OAR_BF16), *back = h ? oar_cast(h, OAR_F32) : NULL;
        CHECK(h && back);
        if (h && back) {
            const uint16_t *hv = (const uint16_t *)oar_tensor_ptr(h);
            const uint32_t *bv = (const uint32_t *)oar_tensor_ptr(back);
            int64_t bad = 0, bad_back = 0;
            for (int64_t i = 0; i < n; i++) {
                bad += hv[i] != bf16_oracle(bits[i]);
                bad_back += bv[i] != (uint32_t)hv[i] << 16;
            }
            if (bad || bad_back)
                fprintf(stderr, "conversions at %s, n=%lld: %lld narrowed and %lld widened values differ\n",
                        oar_cpu_isa_name(oar_get_cpu_isa()), (long long)n, (long long)bad, (long long)bad_back);
            CHECK(bad == 0 && bad_back == 0);
        }
        oar_scope_end();
        free(bits);
    }
}

static bool cpu_has_bf16(void) { return strstr(oar_cpu_flags(), "avx512_bf16") != NULL; }

static oar_tensor *randn_bf16(const int64_t *shape, int nd) {
    return oar_cast(oar_randn(shape, nd, OAR_F32), OAR_BF16);
}

static const oar_kernel_entry *ref_kernel(oar_op_id op) {
    const oar_kernel_entry *k;
    int n = oar_op_kernels(op, &k);
    for (int i = 0; i < n; i++)
        if (!strcmp(k[i].impl, "reference") && k[i].device == OAR_CPU) return &k[i];
    return NULL;
}

/* Runs op through dispatch's choice and through the reference; checks which kernel was chosen
 * and that the two agree within bf16's rounding of the result (scaled by its largest value). */
static void check_call(const char *what, oar_op_id op, oar_tensor **in, int n_in, const int64_t *ys, int ynd,
                       const oar_attr *attrs, bool native) {
    oar_tensor *got = oar_empty(ys, ynd, OAR_BF16), *want = oar_empty(ys, ynd, OAR_BF16);
    const oar_kernel_entry *k = oar_select_kernel(op, in, n_in, &got, 1, attrs), *ref = ref_kernel(op);
    CHECK(k && ref);
    if (!k || !ref) return;
    bool is_native = !strcmp(k->impl, "onednn-bf16");
    if (is_native != native || !strcmp(k->impl, "reference"))
        fprintf(stderr, "%s: kernel '%s' chosen, native bf16 %s\n", what, k->impl, native ? "expected" : "not expected");
    CHECK(is_native == native && strcmp(k->impl, "reference") != 0);
    CHECK(oar_op_run_kernel(op, k, in, n_in, &got, 1, attrs) == OAR_OK);
    CHECK(oar_op_run_kernel(op, ref, in, n_in, &want, 1, attrs) == OAR_OK);
    oar_tensor *gf = oar_cast(got, OAR_F32), *wf = oar_cast(want, OAR_F32);
    const float *g = (const float *)oar_tensor_ptr(gf), *r = (const float *)oar_tensor_ptr(wf);
    double scale = 1, err = 0;
    for (int64_t i = 0; i < oar_numel(want); i++) scale = fmax(scale, fabs(r[i]));
    for (int64_t i = 0; i < oar_numel(want); i++) err = fmax(err, fabs((double)g[i] - r[i]));
    if (err > 1e-2 * scale) fprintf(stderr, "%s: max error %g against the reference (scale %g)\n", what, err, scale);
    CHECK(err <= 1e-2 * scale);
    oar_tensor *again = oar_empty(ys, ynd, OAR_BF16);
    CHECK(oar_op_run_kernel(op, k, in, n_in, &again, 1, attrs) == OAR_OK);
    CHECK(t_same_bits(again, got));
}

static void test_native_kernels(int threads) {
    bool native = cpu_has_bf16() && oar_get_cpu_isa() == OAR_CPU_ISA_AVX512;
#ifndef OAR_HAVE_ONEDNN
    native = false;
#endif
    if (threads == 1)
        printf("test_amp_native: %s\n", native ? "native bf16 kernels (oneDNN, AVX512_BF16) checked"
                                               : "no native bf16 here (CPU or cap): the f32 fallbacks are checked");
    int before = oar_get_num_threads();
    CHECK(oar_set_num_threads(threads) == OAR_OK);
    oar_scope_begin();
    oar_manual_seed(5);
    /* conv: 13 images (an odd split), 16 -> 24 channels, 3x3, padding 1 */
    const int64_t xs[4] = {13, 16, 18, 18}, ws[4] = {24, 16, 3, 3}, ys[4] = {13, 24, 18, 18};
    oar_tensor *x = randn_bf16(xs, 4), *w = randn_bf16(ws, 4), *b = randn_bf16(ws, 1), *gy = randn_bf16(ys, 4);
    oar_attr spdg[4] = {oar_attr_ints((int64_t[]){1, 1}, 2), oar_attr_ints((int64_t[]){1, 1}, 2),
                        oar_attr_ints((int64_t[]){1, 1}, 2), oar_attr_int(1)};
    oar_attr gi[5] = {oar_attr_ints(xs, 4), spdg[0], spdg[1], spdg[2], spdg[3]};
    oar_attr gw[5] = {oar_attr_ints(ws, 4), spdg[0], spdg[1], spdg[2], spdg[3]};
    check_call("conv2d bf16", OAR_OP_conv2d, (oar_tensor *[]){x, w, b}, 3, ys, 4, spdg, native);
    check_call("conv2d_grad_input bf16", OAR_OP_conv2d_grad_input, (oar_tensor *[]){gy, w}, 2, xs, 4, gi, native);
    /* conv2d_act (inference programs' fused conv): residual and relu as oneDNN post-ops */
    oar_attr ca[6] = {spdg[0], spdg[1], spdg[2], spdg[3], oar_attr_str("relu"), oar_attr_str("nchw")};
    const int64_t rs[4] = {13, 16, 18, 18};
    const int64_t w16s[4] = {16, 16, 3, 3}, b16s = 16;
    oar_tensor *w16 = randn_bf16(w16s, 4), *b16 = randn_bf16(&b16s, 1), *res = randn_bf16(rs, 4);
    check_call("conv2d_act bf16 (residual, relu)", OAR_OP_conv2d_act, (oar_tensor *[]){x, w16, b16, res}, 4, rs, 4, ca,
               native);
    bool det = oar_get_deterministic(); /* oneDNN's grad_weight declines in deterministic mode */
    check_call("conv2d_grad_weight bf16", OAR_OP_conv2d_grad_weight, (oar_tensor *[]){x, gy}, 2, ws, 4, gw,
               native && !det);
    /* matmul: batched, a broadcast matrix, a transposed view; linear with a bias */
    const int64_t as[3] = {3, 77, 96}, bs[2] = {96, 130}, cs[3] = {3, 77, 130}, bts[2] = {130, 96};
    oar_tensor *a = randn_bf16(as, 3), *bm = randn_bf16(bs, 2), *bt = oar_transpose(randn_bf16(bts, 2), 0, 1);
    check_call("matmul bf16 [3,77,96]x[96,130]", OAR_OP_matmul, (oar_tensor *[]){a, bm}, 2, cs, 3, NULL, native);
    check_call("matmul bf16 x transposed view", OAR_OP_matmul, (oar_tensor *[]){a, bt}, 2, cs, 3, NULL, native);
    const int64_t b3s[3] = {3, 96, 130};
    oar_tensor *b3 = randn_bf16(b3s, 3);
    check_call("matmul bf16 batched both", OAR_OP_matmul, (oar_tensor *[]){a, b3}, 2, cs, 3, NULL, native);
    const int64_t lx[2] = {250, 96}, lw[2] = {130, 96}, lb = 130, ly[2] = {250, 130};
    oar_tensor *xl = randn_bf16(lx, 2), *wl = randn_bf16(lw, 2), *bl = randn_bf16(&lb, 1);
    check_call("linear bf16 with bias", OAR_OP_linear, (oar_tensor *[]){xl, wl, bl}, 3, ly, 2, NULL, native);
    check_call("linear bf16", OAR_OP_linear, (oar_tensor *[]){xl, wl, NULL}, 3, ly, 2, NULL, native);
    oar_scope_end();
    oar_set_num_threads(before);
}

int main(void) {
    test_conversions();
    test_native_kernels(1);
    test_native_kernels(2);
    return test_summary("test_amp_native");
}
