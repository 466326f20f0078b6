/* Static post-training quantization as a program rewrite (issue 16; src/quant/program.c).
 * - LeNet: the exported fp32 program quantized by oar_quantize_static_model runs in the
 *   predictor and equals, bit for bit, the same LeNet quantized at module level
 *   (oar_quantize_static: same observers, same calibration) run eagerly; the loaded program
 *   after the inference passes is one quantize of the image and int8 to the logits.
 * - ResNet-20 (batch norms with non-trivial running statistics): BN folded into the convs, no
 *   batch_norm left, one quantize per residual block, shortcut additions and ReLUs fused into
 *   the qconv2d epilogues, the int8 logits close to fp32's; the predictor with fuse_quant and
 *   without it give the same bits (the fused program = the unfused one).
 * - the rule (keep first / last / skip by name) and the per-layer report (weight and output SQNR).
 * - 7-bit weights (weight_bits = 7, for CPUs without VNNI): every qconv2d / qlinear weight in
 *   [-63, 63], the logits still close to fp32's.
 * - bad input: no batches, NaN in a batch, a batch of the wrong shape, a missing model, a model
 *   without conv/linear left to quantize: clear errors and no output file.
 * Runs at every ISA cap (tests/CMakeLists.txt). */
#include "test_util.h"

#include "quant_program_util.h"

static double sqnr(oar_tensor *ref, oar_tensor *y) {
    double db = 0;
    CHECK(oar_sqnr(ref, y, &db) == OAR_OK);
    return db;
}

static void lenet_program_equals_module(void) {
    oar_scope_begin();
    oar_tensor *cal[3];
    for (int i = 0; i < 3; i++) cal[i] = oar_randn((int64_t[]){8, 1, 28, 28}, 4, OAR_F32);
    oar_manual_seed(5);
    oar_module *m = oar_zoo_create("lenet", NULL);
    oar_module_train(m, false);
    export_fp32(m, 1, 28, path_in("lenet"));
    const char *kinds[] = {"minmax", "moving_average", "percentile"};
    for (int k = 0; k < 3; k++) {
        oar_quant_static_opts so = {.observer = kinds[k]};
        oar_quant_layer layers[8];
        int n = 0;
        CHECK(oar_quantize_static_model(path_in("lenet"), path_in("lenet-int8"), cal, 3, &so, layers, 8, &n) == OAR_OK);
        CHECK(n == 5);
        CHECK(!strcmp(layers[0].name, "c1") && !strcmp(layers[0].type, "Conv2d"));
        CHECK(!strcmp(layers[4].name, "f3") && !strcmp(layers[4].type, "Linear") && layers[4].weights == 84 * 10);
        for (int i = 0; i < n; i++)
            CHECK(layers[i].weight_sqnr_db > 30 && layers[i].output_sqnr_db > 15 && layers[i].output_sqnr_db < 80);
        oar_manual_seed(5); /* the same weights, quantized at module level */
        oar_module *q = oar_zoo_create("lenet", NULL);
        oar_module_train(q, false);
        CHECK(oar_quantize_static(q, cal, 3, &so, NULL, 0, NULL) == OAR_OK);
        for (int64_t b = 1; b <= 7; b += 6) {
            oar_tensor *x = oar_randn((int64_t[]){b, 1, 28, 28}, 4, OAR_F32);
            oar_no_grad_begin();
            oar_tensor *eager = oar_forward(q, x), *fp32 = oar_forward(m, x);
            oar_no_grad_end();
            oar_tensor *y = predict(path_in("lenet-int8"), x, NULL);
            CHECK(y && t_same_bits(y, eager));
            CHECK(sqnr(fp32, y) > 15);
        }
        oar_module_free(q);
    }
    /* int8 from the image's quantize to the logits */
    CHECK(count_after_passes(path_in("lenet-int8"), OAR_OP_quantize) == 1);
    CHECK(count_after_passes(path_in("lenet-int8"), OAR_OP_qconv2d) == 2);
    CHECK(count_after_passes(path_in("lenet-int8"), OAR_OP_qlinear) == 3);
    CHECK(count_after_passes(path_in("lenet-int8"), OAR_OP_qmax_pool2d) == 2);
    CHECK(count_after_passes(path_in("lenet-int8"), OAR_OP_relu) == 0);
    /* the rule: first and last kept, and one by name */
    oar_quant_layer layers[8];
    int n = 0;
    const char *skip[] = {"f1", NULL};
    oar_quant_static_opts so = {.keep_first = true, .keep_last = true, .skip = skip};
    CHECK(oar_quantize_static_model(path_in("lenet"), path_in("lenet-kept"), cal, 3, &so, layers, 8, &n) == OAR_OK);
    CHECK(n == 2 && !strcmp(layers[0].name, "c2") && !strcmp(layers[1].name, "f2"));
    CHECK(count_after_passes(path_in("lenet-kept"), OAR_OP_qconv2d) == 1);
    CHECK(count_after_passes(path_in("lenet-kept"), OAR_OP_qlinear) == 1);
    oar_module_free(m);
    oar_scope_end();
}

static void resnet20_bn_folded(void) {
    oar_scope_begin();
    oar_manual_seed(7);
    oar_module *m = oar_zoo_create("resnet20", NULL);
    /* running statistics far from (0, 1): a few training-mode forwards on shifted data */
    oar_module_train(m, true);
    oar_no_grad_begin();
    for (int i = 0; i < 3; i++) {
        oar_tensor *x = oar_add_scalar(oar_mul_scalar(oar_randn((int64_t[]){8, 3, 16, 16}, 4, OAR_F32), 2.0), 0.5);
        CHECK(oar_forward(m, x) != NULL);
    }
    oar_no_grad_end();
    oar_module_train(m, false);
    export_fp32(m, 3, 16, path_in("resnet"));
    oar_tensor *cal[2] = {oar_randn((int64_t[]){8, 3, 16, 16}, 4, OAR_F32),
                          oar_randn((int64_t[]){8, 3, 16, 16}, 4, OAR_F32)};
    oar_quant_layer layers[32];
    int n = 0;
    CHECK(oar_quantize_static_model(path_in("resnet"), path_in("resnet-int8"), cal, 2, NULL, layers, 32, &n) ==
          OAR_OK);
    CHECK(n == 22); /* 19 convs, 2 projection shortcuts, the classifier */
    CHECK(count_after_passes(path_in("resnet-int8"), OAR_OP_batch_norm) == 0);
    CHECK(count_after_passes(path_in("resnet-int8"), OAR_OP_conv2d) == 0);
    CHECK(count_after_passes(path_in("resnet-int8"), OAR_OP_qconv2d) +
              count_after_passes(path_in("resnet-int8"), OAR_OP_qconv2d_nhwc) == 21); /* NHWC: quant_nhwc's */
    int nq = count_after_passes(path_in("resnet-int8"), OAR_OP_quantize);
    /* the image's, the classifier's, and one per residual block whose input is also its shortcut
     * (7 of 9: a block before a projection shortcut hands its output requantized to u8, the
     * projection and the next conv sharing that quantize) */
    CHECK(nq == 9);
    CHECK(count_after_passes(path_in("resnet-int8"), OAR_OP_qadd) == 0);
    /* shortcut additions and ReLUs in the qconv2d epilogues */
    CHECK(count_after_passes(path_in("resnet-int8"), OAR_OP_add) == 0);
    CHECK(count_after_passes(path_in("resnet-int8"), OAR_OP_relu) == 0);
    /* int8_residual: the image's and the classifier's quantize only; each residual addition but
     * the last is a qadd of u8 codes (the conv's and the shortcut's outputs requantized in their
     * epilogues) giving the next block's input codes, which fuse_qadd then puts into the epilogue
     * of the block's second conv; the last block's sum stays f32 for the
     * global pool (its residual in its conv's epilogue) */
    oar_quant_static_opts io = {.int8_residual = true};
    CHECK(oar_quantize_static_model(path_in("resnet"), path_in("resnet-qadd"), cal, 2, &io, NULL, 0, NULL) == OAR_OK);
    int nqi = count_after_passes(path_in("resnet-qadd"), OAR_OP_quantize);
    CHECK(nqi == 2);
    CHECK(count_after_passes_without(path_in("resnet-qadd"), OAR_OP_qadd, "fuse_qadd") == 8);
    CHECK(count_after_passes(path_in("resnet-qadd"), OAR_OP_qadd) == 0); /* each in its conv's epilogue */
    CHECK(count_after_passes(path_in("resnet-qadd"), OAR_OP_add) == 0);
    CHECK(count_after_passes(path_in("resnet-qadd"), OAR_OP_relu) == 0);
    oar_tensor *x = oar_randn((int64_t[]){4, 3, 16, 16}, 4, OAR_F32);
    oar_no_grad_begin();
    oar_tensor *fp32 = oar_forward(m, x);
    oar_no_grad_end();
    oar_tensor *y = predict(path_in("resnet-int8"), x, NULL), *yu = predict(path_in("resnet-int8"), x, "fuse_quant");
    oar_tensor *yi = predict(path_in("resnet-qadd"), x, NULL), *yiu = predict(path_in("resnet-qadd"), x, "fuse_quant");
    CHECK(y && yu && yi && yiu && t_same_bits(y, yu) && t_same_bits(yi, yiu));
    double db = sqnr(fp32, y), dbi = sqnr(fp32, yi), dbq = sqnr(y, yi);
    printf("resnet20 (random weights, BN folded): int8 logits SQNR %.1f dB (int8 residuals: %.1f dB; the two "
           "programs %.1f dB apart), %d quantize nodes (%d)\n", db, dbi, dbq, nq, nqi);
    /* the int8 residuals round each block's sum and the conv output before it once more: within
       3 dB of the f32-residual program's SQNR (measured 43.1 against 44.6) */
    CHECK(db > 12 && dbi > db - 3 && dbq > 40);
    oar_module_free(m);
    oar_scope_end();
}

/* The widest |weight| of the program's int8 layers, and how many there are. */
static int widest_weight(const char *path, int *n_layers) {
    oar_program *p = oar_program_load(path);
    CHECK(p != NULL);
    int widest = -1;
    *n_layers = 0;
    for (int i = 0; p && i < p->n_nodes; i++) {
        const oar_node *nd = &p->nodes[i];
        if (nd->op != OAR_OP_qconv2d && nd->op != OAR_OP_qlinear) continue;
        const oar_tensor *w = p->values[nd->in[3]].tensor; /* qlinear's and qconv2d's input 3 */
        CHECK(w && oar_dtype_of(w) == OAR_I8);
        if (!w) continue;
        (*n_layers)++;
        const int8_t *d = (const int8_t *)oar_tensor_ptr(w);
        for (int64_t k = 0; k < oar_numel(w); k++) widest = abs(d[k]) > widest ? abs(d[k]) : widest;
    }
    oar_program_free(p);
    return widest;
}

static void seven_bit_weights(void) {
    oar_scope_begin();
    oar_manual_seed(11);
    oar_module *m = oar_zoo_create("resnet20", NULL);
    oar_module_train(m, false);
    export_fp32(m, 3, 16, path_in("r7"));
    oar_tensor *cal[2] = {oar_randn((int64_t[]){8, 3, 16, 16}, 4, OAR_F32),
                          oar_randn((int64_t[]){8, 3, 16, 16}, 4, OAR_F32)};
    int n8 = 0, n7 = 0;
    CHECK(oar_quantize_static_model(path_in("r7"), path_in("r7-int8"), cal, 2, NULL, NULL, 0, NULL) == OAR_OK);
    oar_quant_static_opts so = {.weight_bits = 7};
    CHECK(oar_quantize_static_model(path_in("r7"), path_in("r7-int7"), cal, 2, &so, NULL, 0, NULL) == OAR_OK);
    int w8 = widest_weight(path_in("r7-int8"), &n8), w7 = widest_weight(path_in("r7-int7"), &n7);
    printf("resnet20 weights: widest |w| %d with 8 bits, %d with 7 bits (%d int8 layers)\n", w8, w7, n7);
    CHECK(n8 == 22 && n7 == 22);
    CHECK(w8 >= 127 && w7 == 63); /* a channel's widest weight at the edge of its range (8 bits: -128 too) */
    oar_tensor *x = oar_randn((int64_t[]){4, 3, 16, 16}, 4, OAR_F32);
    oar_no_grad_begin();
    oar_tensor *fp32 = oar_forward(m, x);
    oar_no_grad_end();
    oar_tensor *y8 = predict(path_in("r7-int8"), x, NULL), *y7 = predict(path_in("r7-int7"), x, NULL);
    double db8 = sqnr(fp32, y8), db7 = sqnr(fp32, y7);
    printf("resnet20 int8 logits SQNR: %.1f dB (8-bit weights), %.1f dB (7-bit)\n", db8, db7);
    CHECK(db7 > 12);
    so.weight_bits = 6;
    CHECK_ERR(oar_quantize_static_model(path_in("r7"), path_in("r7-int6"), cal, 2, &so, NULL, 0, NULL),
              "expected weight_bits 8 (or 0) or 7, got 6");
    CHECK(access(path_in("r7-int6.json"), F_OK) != 0);
    so.weight_bits = 7;
    CHECK_ERR(oar_quantize_static(m, cal, 2, &so, NULL, 0, NULL), "7-bit weights are for programs");
    int fast = oar_quant_fast_weight_bits();
    CHECK(fast == 7 || fast == 8);
    oar_module_free(m);
    oar_scope_end();
}

/* reduce_range (torch's 7-bit activations) through the rewrite: every int8 layer's input zero point
 * lies in [0, 127], and the first layer's input scale (the image's range, before any int8 layer) is
 * the 8-bit one times 255 / 127. */
static void reduced_activations(void) {
    oar_scope_begin();
    oar_manual_seed(12);
    oar_module *m = oar_zoo_create("lenet", NULL);
    oar_module_train(m, false);
    export_fp32(m, 1, 28, path_in("rr"));
    oar_tensor *cal = oar_randn((int64_t[]){8, 1, 28, 28}, 4, OAR_F32);
    oar_quant_layer l8[8], l7[8];
    int n8 = 0, n7 = 0;
    CHECK(oar_quantize_static_model(path_in("rr"), path_in("rr-8"), &cal, 1, NULL, l8, 8, &n8) == OAR_OK);
    oar_quant_static_opts so = {.observer_opts = {.reduce_range = true}};
    CHECK(oar_quantize_static_model(path_in("rr"), path_in("rr-7"), &cal, 1, &so, l7, 8, &n7) == OAR_OK);
    CHECK(n8 == 5 && n7 == 5);
    double ratio = n7 ? (double)l7[0].scale_min / (double)l8[0].scale_min : 0;
    CHECK(fabs(ratio - 255.0 / 127.0) < 1e-5);
    oar_program *p = oar_program_load(path_in("rr-7"));
    CHECK(p != NULL);
    int nq = 0, widest = -1;
    for (int i = 0; p && i < p->n_nodes; i++) {
        const oar_node *nd = &p->nodes[i];
        if (nd->op != OAR_OP_qconv2d && nd->op != OAR_OP_qlinear) continue;
        const oar_tensor *z = p->values[nd->in[2]].tensor; /* the input's zero point */
        CHECK(z && oar_dtype_of(z) == OAR_I32);
        if (!z) continue;
        nq++;
        int32_t zp = *(const int32_t *)oar_tensor_ptr(z);
        widest = zp > widest ? zp : widest;
        CHECK(zp >= 0 && zp <= 127);
    }
    CHECK(nq == 5);
    oar_program_free(p);
    oar_tensor *x = oar_randn((int64_t[]){4, 1, 28, 28}, 4, OAR_F32);
    double db8 = sqnr(predict(path_in("rr-8"), x, NULL), predict(path_in("rr-7"), x, NULL));
    printf("lenet reduce_range: first input scale x%.5f of 8-bit's, zero points up to %d, logits %.1f dB from "
           "the 8-bit program\n", ratio, widest, db8);
    CHECK(db8 > 15 && db8 < 200); /* close, not equal */
    oar_module_free(m);
    oar_scope_end();
}

static void bad_input(void) {
    oar_scope_begin();
    oar_manual_seed(9);
    oar_module *m = oar_zoo_create("lenet", NULL);
    oar_module_train(m, false);
    export_fp32(m, 1, 28, path_in("bad"));
    oar_tensor *good = oar_randn((int64_t[]){4, 1, 28, 28}, 4, OAR_F32);
    oar_tensor *nan = oar_full((int64_t[]){4, 1, 28, 28}, 4, NAN, OAR_F32);
    oar_tensor *wrong = oar_randn((int64_t[]){4, 1, 32, 32}, 4, OAR_F32);
    const char *out = path_in("bad-int8");
    CHECK_ERR(oar_quantize_static_model(path_in("bad"), out, &good, 0, NULL, NULL, 0, NULL), "at least one calibration");
    oar_tensor *b2[2] = {good, nan};
    CHECK_ERR(oar_quantize_static_model(path_in("bad"), out, b2, 2, NULL, NULL, 0, NULL), "calibration batch 1");
    CHECK_ERR(oar_quantize_static_model(path_in("bad"), out, &wrong, 1, NULL, NULL, 0, NULL),
              "calibration batch 0 does not fit");
    CHECK_ERR(oar_quantize_static_model(path_in("absent"), out, &good, 1, NULL, NULL, 0, NULL), "absent");
    const char *all[] = {"c1", "c2", "f1", "f2", "f3", NULL};
    oar_quant_static_opts so = {.skip = all};
    CHECK_ERR(oar_quantize_static_model(path_in("bad"), out, &good, 1, &so, NULL, 0, NULL), "all kept in fp32");
    CHECK(access(path_in("bad-int8.json"), F_OK) != 0);
    oar_module_free(m);
    oar_scope_end();
}

int main(void) {
    if (!files_begin("/tmp/oar-quant-program-XXXXXX")) return 1;
    lenet_program_equals_module();
    resnet20_bn_folded();
    seven_bit_weights();
    reduced_activations();
    bad_input();
    files_end();
    return test_summary("test_quant_program");
}
