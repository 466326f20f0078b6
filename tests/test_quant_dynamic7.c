/* Dynamic quantization with 7-bit weights (oar_quant_dynamic_opts.weight_bits, src/quant/dynamic.c)
 * and the AVX2 vpmaddubsw GEMM that runs them (qgemm_x86.c):
 *  - every Linear's and LSTM's i8 weight lies within [-63, 63], each row's largest at +-63, with
 *    scales 127.5 / 63 times the 8-bit ones; Embedding tables keep 8 bits; the layer's
 *    description says 7-bit;
 *  - the outputs stay close to fp32 (SQNR bounds; the 8-bit model's are printed beside them);
 *  - the 7-bit model gives the same bits at every ISA cap (generic: the reference qlinear; avx2:
 *    the vpmaddubsw GEMM; avx512: VNNI) on shapes that cross the GEMM's tiles (rows 3 a tile,
 *    6 a block; columns 8 a vector, 16 a tile, 64 a block; k in groups of 4, with tails);
 *  - oar_quant_fast_weight_bits per cap: 8 at generic, 7 at avx2, 8 with VNNI;
 *  - weight_bits 6 is refused and nothing changes. */
#include "test_util.h"

#include "nn/module.h"
#include "ops/quant.h"

#include <string.h>

/* Embedding(50, 36) -> Linear(36, 77) -> ReLU -> Linear(77, 20): k 36 and 77 (a tail of 1),
 * n 77 (a block of 64 and 13) and 20 (16 and a part vector) */
static oar_module *model(void) {
    oar_manual_seed(11);
    oar_module *l[4] = {oar_nn_embedding(50, 36), oar_nn_linear(36, 77, true), oar_nn_activation(OAR_ACT_RELU, 0),
                        oar_nn_linear(77, 20, true)};
    oar_module *m = oar_nn_sequential(l, 4);
    oar_module_train(m, false);
    return m;
}

/* the largest |q| of each row of the i8 matrix w, all within [lo_max, hi_max] */
static bool rows_reach(oar_tensor *w, int lo_max, int hi_max) {
    const int8_t *q = (const int8_t *)oar_tensor_ptr(w);
    int64_t n = oar_size(w, 0), k = oar_size(w, 1);
    for (int64_t r = 0; r < n; r++) {
        int mx = 0;
        for (int64_t t = 0; t < k; t++) mx = abs(q[r * k + t]) > mx ? abs(q[r * k + t]) : mx;
        if (mx < lo_max || mx > hi_max) return false;
    }
    return true;
}

static bool scales_ratio(oar_tensor *s7, oar_tensor *s8) {
    const float *a = (const float *)oar_tensor_ptr(s7), *b = (const float *)oar_tensor_ptr(s8);
    for (int64_t i = 0; i < oar_numel(s7); i++)
        if (a[i] != b[i] * (127.5f / 63.0f)) return false;
    return oar_numel(s7) == oar_numel(s8);
}

static void linear_model(void) {
    oar_scope_begin();
    oar_module *f = model(), *m8 = model(), *m7 = model(), *bad = model();
    int64_t ids[4 * 5];
    for (int i = 0; i < 20; i++) ids[i] = (i * 13 + 5) % 50;
    oar_tensor *x = oar_from_data(ids, (int64_t[]){4, 5}, 2, OAR_I64); /* 20 rows: blocks of 6, 6, 6, 2 */
    oar_tensor *ref = oar_forward(f, x);
    oar_quant_layer info[3];
    int n = 0;
    CHECK_ERR(oar_quantize_dynamic(bad, &(oar_quant_dynamic_opts){.weight_bits = 6}, NULL, 0, NULL),
              "expected weight_bits 8 (or 0) or 7");
    CHECK(!strcmp(oar_module_type(oar_module_child(bad, "1")), "Linear")); /* nothing changed */
    CHECK(oar_quantize_dynamic(m8, &(oar_quant_dynamic_opts){.embeddings = true}, NULL, 0, NULL) == OAR_OK);
    CHECK(oar_quantize_dynamic(m7, &(oar_quant_dynamic_opts){.embeddings = true, .weight_bits = 7}, info, 3, &n) ==
          OAR_OK);
    CHECK(n == 3);
    for (int i = 0; i < n; i++) {
        printf("7-bit %s %s: weight SQNR %.1f dB\n", info[i].type, info[i].name, info[i].weight_sqnr_db);
        CHECK(info[i].weight_sqnr_db > 28);
    }
    CHECK(rows_reach(oar_module_get(m7, "1.weight"), 63, 63) && rows_reach(oar_module_get(m7, "3.weight"), 63, 63));
    /* 8 bits: amax / 127.5, so a row's largest is 127, or -128 where it is negative */
    CHECK(rows_reach(oar_module_get(m8, "1.weight"), 127, 128));
    CHECK(rows_reach(oar_module_get(m7, "0.weight"), 127, 128)); /* the table keeps 8 bits */
    CHECK(scales_ratio(oar_module_get(m7, "1.weight_scale"), oar_module_get(m8, "1.weight_scale")));
    CHECK(scales_ratio(oar_module_get(m7, "3.weight_scale"), oar_module_get(m8, "3.weight_scale")));
    char d7[256] = "", d8[256] = "";
    oar_module *c7 = oar_module_child(m7, "1"), *c8 = oar_module_child(m8, "1");
    c7->ops->describe(c7, d7, sizeof d7);
    c8->ops->describe(c8, d8, sizeof d8);
    CHECK(strstr(d7, "(7-bit)") && !strstr(d8, "7-bit"));

    /* the same bits at every cap; generic's reference first */
    oar_cpu_isa before = oar_get_cpu_isa();
    oar_tensor *y0 = NULL;
    for (int isa = OAR_CPU_ISA_GENERIC; isa <= (int)oar_cpu_isa_native(); isa++) {
        if (oar_set_cpu_isa((oar_cpu_isa)isa) != OAR_OK) continue;
        int want = isa == OAR_CPU_ISA_GENERIC ? 8 : oar_cpu_use_vnni() ? 8 : 7;
        CHECK(oar_quant_fast_weight_bits() == want);
        oar_tensor *y = oar_forward(m7, x);
        CHECK(y != NULL);
        if (!y0) y0 = y;
        else if (!t_same_bits(y, y0)) {
            printf("7-bit model at %s: outputs differ from the reference's\n", oar_cpu_isa_name((oar_cpu_isa)isa));
            CHECK(false);
        }
    }
    oar_set_cpu_isa(before);
    double db7 = 0, db8 = 0;
    CHECK(y0 && oar_sqnr(ref, y0, &db7) == OAR_OK && oar_sqnr(ref, oar_forward(m8, x), &db8) == OAR_OK);
    printf("output SQNR against fp32: 7-bit weights %.1f dB, 8-bit %.1f dB\n", db7, db8);
    CHECK(db7 > 25 && db7 < db8);
    oar_module_free(f), oar_module_free(m8), oar_module_free(m7), oar_module_free(bad);
    oar_scope_end();
}

/* An LSTM's gate matrices take 7 bits too; its outputs stay close to fp32. */
static void lstm(void) {
    oar_scope_begin();
    oar_manual_seed(3);
    oar_module *f = oar_nn_lstm(20, 24, 2, false);
    oar_manual_seed(3); /* the same weights */
    oar_module *m = oar_nn_lstm(20, 24, 2, false);
    oar_module_train(f, false), oar_module_train(m, false);
    CHECK(oar_quantize_dynamic(m, &(oar_quant_dynamic_opts){.weight_bits = 7}, NULL, 0, NULL) == OAR_OK);
    for (int l = 0; l < 2; l++) {
        char ih[32], hh[32];
        snprintf(ih, sizeof ih, "weight_ih_l%d", l), snprintf(hh, sizeof hh, "weight_hh_l%d", l);
        CHECK(rows_reach(oar_module_get(m, ih), 63, 63) && rows_reach(oar_module_get(m, hh), 63, 63));
    }
    oar_tensor *in[3] = {oar_randn((int64_t[]){7, 3, 20}, 3, OAR_F32), NULL, NULL}, *yf[3] = {0}, *yq[3] = {0};
    CHECK(oar_forward_n(f, in, 3, yf, 3) == OAR_OK && oar_forward_n(m, in, 3, yq, 3) == OAR_OK);
    double db = 0;
    CHECK(yq[0] && oar_sqnr(yf[0], yq[0], &db) == OAR_OK);
    printf("7-bit LSTM output SQNR against fp32 %.1f dB\n", db);
    CHECK(db > 25);
    oar_module_free(f), oar_module_free(m);
    oar_scope_end();
}

int main(void) {
    oar_init();
    linear_model();
    lstm();
    return test_summary("test_quant_dynamic7");
}
