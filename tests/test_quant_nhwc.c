/* The NHWC int8 graph (the quant_nhwc pass, src/graph/passes/conv_nhwc.c; qconv2d_nhwc): the
 * program with the pass gives the bits of the program without it, every output (u8 and f32):
 * - ResNet-20 static PTQ (BN folded, residuals in the epilogues) at two batch sizes, with the
 *   weight width the CPU runs fastest (7 bits at the AVX2 cap), its convs NHWC but the stem
 *   (3 channels: the direct kernel's);
 * - LeNet static PTQ (every conv on the direct kernels: nothing converted, the same bits);
 * - a traced graph mixing NHWC and NCHW consumers of one u8 value (an NHWC conv, a direct-kernel
 *   conv of 8 outputs, a max pooling of the codes, a conv with an f32 residual from the NCHW
 *   input, a dequantize), outputs u8 and f32;
 * - without VNNI (the AVX2 cap), convs with 8-bit weights (which oneDNN's int8 code would
 *   saturate) run qconv2d_nhwc's exact GEMM, 7-bit ones oneDNN's code;
 * - qadd in the epilogue of the conv making one of its operands (fuse_qadd): the fused op gives
 *   qconv2d_nhwc + qadd's bits, eager; ResNet-20's 8 int8 block tails are fused, with the bits of
 *   the program without the pass; the mixed graph's qadd is fused, with the NCHW program's bits.
 * Runs at every ISA cap (tests/CMakeLists.txt); at generic the NHWC reference kernel runs. */
#include "test_util.h"

#include "ops/quant.h"
#include "ops/quant_add.h"
#include "quant_program_util.h"

enum { MIXED_OUT = 8, MIXED_COPIES = 4 };

/* qconv2d_nhwc nodes with a u8/i8 residual (fuse_qadd's) in the saved program at path after the
 * default inference passes. */
static int count_int8_residual_convs(const char *path) {
    oar_program *p = oar_program_load(path);
    CHECK(p != NULL);
    int n = -1;
    if (p && oar_passes_run(p, oar_build_strategy_mask(NULL), false) == OAR_OK) {
        n = 0;
        for (int i = 0; i < p->n_nodes; i++) {
            const oar_node *nd = &p->nodes[i];
            int r = nd->n_in > QL_RES ? nd->in[QL_RES] : -1;
            n += !nd->dead && nd->op == OAR_OP_qconv2d_nhwc && r >= 0 && p->values[r].meta.dtype != OAR_F32;
        }
    }
    oar_program_free(p);
    return n;
}

static void resnet20(void) {
    oar_scope_begin();
    oar_manual_seed(11);
    oar_module *m = oar_zoo_create("resnet20", NULL);
    oar_module_train(m, true); /* running statistics far from (0, 1) */
    oar_no_grad_begin();
    for (int i = 0; i < 2; i++)
        CHECK(oar_forward(m, oar_add_scalar(oar_mul_scalar(oar_randn((int64_t[]){8, 3, 16, 16}, 4, OAR_F32), 2.0),
                                            0.5)) != NULL);
    oar_no_grad_end();
    oar_module_train(m, false);
    export_fp32(m, 3, 16, path_in("resnet"));
    oar_tensor *cal[2] = {oar_randn((int64_t[]){8, 3, 16, 16}, 4, OAR_F32),
                          oar_randn((int64_t[]){8, 3, 16, 16}, 4, OAR_F32)};
    for (int v = 0; v < 4; v++) { /* 8-bit weights, 7-bit, each with f32 and with int8 residuals */
        int bits = v & 1 ? 7 : 8;
        bool qres = v >= 2;
        oar_quant_static_opts so = {.weight_bits = bits, .int8_residual = qres};
        oar_quant_layer layers[32];
        int n = 0;
        CHECK(oar_quantize_static_model(path_in("resnet"), path_in("resnet-int8"), cal, 2, &so, layers, 32, &n) ==
              OAR_OK);
        /* 21 int8 convs: all but the stem (3 input channels, the direct kernel's) NHWC */
        int nq = count_after_passes(path_in("resnet-int8"), OAR_OP_qconv2d_nhwc);
        int expect = 20;
        /* with int8 residuals the block tails are int8: 8 qadd (the last block's output is f32,
           for the global pool), all NHWC, each in its second conv's epilogue (fuse_qadd); one
           dequantize (the last block's residual, on its twin); with f32 ones the residuals are
           in the epilogues, the block outputs f32 */
        int nadd = count_after_passes(path_in("resnet-int8"), OAR_OP_qadd);
        int nfused = count_int8_residual_convs(path_in("resnet-int8"));
        int nadd_apart = count_after_passes_without(path_in("resnet-int8"), OAR_OP_qadd, "fuse_qadd");
        int ndq = count_after_passes(path_in("resnet-int8"), OAR_OP_dequantize);
        int ncopy = count_after_passes(path_in("resnet-int8"), OAR_OP_contiguous);
        printf("resnet20, %d-bit weights, %s residuals: %d of 21 int8 convs NHWC, %d with an int8 residual, %d qadd "
               "(%d without fuse_qadd), %d dequantize, %d copies\n",
               bits, qres ? "int8" : "f32", nq, nfused, nadd, nadd_apart, ndq, ncopy);
        CHECK(nq == expect);
        CHECK(count_after_passes(path_in("resnet-int8"), OAR_OP_qconv2d) == 21 - expect);
        CHECK(nadd == 0 && nfused == (qres ? 8 : 0) && nadd_apart == (qres ? 8 : 0) && ndq == (qres ? 1 : 0));
        CHECK(ncopy == (qres ? 2 : 3)); /* the stem's u8 output, the global pool's input (and the stem's f32 output) */
        for (int64_t b = 1; b <= 5; b += 4) {
            oar_tensor *x = oar_randn((int64_t[]){b, 3, 16, 16}, 4, OAR_F32);
            oar_tensor *y = predict(path_in("resnet-int8"), x, NULL), *ref = predict(path_in("resnet-int8"), x, "quant_nhwc");
            oar_tensor *apart = predict(path_in("resnet-int8"), x, "fuse_qadd"); /* qadd after the conv */
            CHECK(y && ref && t_same_bits(y, ref));
            CHECK(y && apart && t_same_bits(y, apart));
        }
    }
    oar_module_free(m);
    oar_scope_end();
}

static void lenet(void) {
    oar_scope_begin();
    oar_manual_seed(5);
    oar_module *m = oar_zoo_create("lenet", NULL);
    oar_module_train(m, false);
    export_fp32(m, 1, 28, path_in("lenet"));
    oar_tensor *cal[2] = {oar_randn((int64_t[]){8, 1, 28, 28}, 4, OAR_F32),
                          oar_randn((int64_t[]){8, 1, 28, 28}, 4, OAR_F32)};
    oar_quant_static_opts so = {.weight_bits = oar_quant_fast_weight_bits()};
    oar_quant_layer layers[8];
    int n = 0;
    CHECK(oar_quantize_static_model(path_in("lenet"), path_in("lenet-int8"), cal, 2, &so, layers, 8, &n) == OAR_OK);
    /* 1 -> 6 -> 16 channels: the direct kernels' convs, NCHW */
    CHECK(count_after_passes(path_in("lenet-int8"), OAR_OP_qconv2d_nhwc) == 0);
    CHECK(count_after_passes(path_in("lenet-int8"), OAR_OP_qconv2d) == 2);
    for (int64_t b = 1; b <= 7; b += 6) {
        oar_tensor *x = oar_randn((int64_t[]){b, 1, 28, 28}, 4, OAR_F32);
        oar_tensor *y = predict(path_in("lenet-int8"), x, NULL), *ref = predict(path_in("lenet-int8"), x, "quant_nhwc");
        CHECK(y && ref && t_same_bits(y, ref));
    }
    oar_module_free(m);
    oar_scope_end();
}

/* The mixed graph's weights and qparams (constants of the trace). */
typedef struct mixed {
    oar_tensor *s, *z, *ys, *yz, *w1, *w2, *w3, *w4, *ws, *b16, *b8, *table, *cs, *cz;
} mixed;

static oar_tensor *q8(oar_tensor *x, mixed *g, bool relu, oar_tensor *w, oar_tensor *bias, const oar_conv_opts *c,
                      oar_dtype dt, oar_tensor *res) {
    oar_qlinear_opts o = {.relu = relu, .out_dtype = dt, .residual = res};
    if (dt != OAR_F32) o.y_scale = g->ys, o.y_zero_point = g->yz;
    return oar_qconv2d(x, g->ys, g->yz, w, g->ws, bias, c, &o);
}

/* x f32 [N, 16, 8, 8] -> u8 a = conv1(x) read by an NHWC conv (f32 out, x as residual; and its
 * global average pool), a direct-kernel conv (8 outputs, u8), and a max pooling then a 1x1 conv
 * (u8) and its dequantize; a residual in int8: qadd(relu) of a and another conv of a (u8), then a
 * qlut of the sum and its dequantize per channel; the f32 conv output quantized per channel. */
static oar_status mixed_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    mixed *g = user;
    oar_conv_opts pad1 = {.padding = {1, 1}};
    oar_tensor *q = oar_quantize(in[0], g->s, g->z, 0, OAR_U8);
    oar_qlinear_opts o1 = {.relu = true, .out_dtype = OAR_U8, .y_scale = g->ys, .y_zero_point = g->yz};
    oar_tensor *a = oar_qconv2d(q, g->s, g->z, g->w1, g->ws, g->b16, &pad1, &o1);
    out[0] = q8(a, g, true, g->w2, g->b16, &pad1, OAR_F32, in[0]);
    out[1] = q8(a, g, false, g->w3, g->b8, &pad1, OAR_U8, NULL);
    oar_attr pa[5] = {oar_attr_ints((int64_t[]){2, 2}, 2), oar_attr_ints((int64_t[]){2, 2}, 2),
                      oar_attr_ints((int64_t[]){0, 0}, 2), oar_attr_ints((int64_t[]){1, 1}, 2), oar_attr_int(0)};
    oar_tensor *p = oar_op_call1(OAR_OP_qmax_pool2d, &a, 1, pa);
    out[2] = q8(p, g, true, g->w4, NULL, NULL, OAR_U8, NULL);
    out[3] = oar_dequantize(out[2], g->ys, g->yz, 0);
    out[4] = oar_adaptive_avg_pool2d(out[0], 1, 1); /* an f32 reader with no NHWC form */
    oar_tensor *b = q8(a, g, false, g->w2, NULL, &pad1, OAR_U8, NULL);
    oar_tensor *qa[QA_N] = {a, g->ys, g->yz, b, g->ys, g->yz, g->s, g->z};
    oar_attr at[2] = {oar_attr_int(OAR_QACT_RELU), oar_attr_dtype(OAR_U8)};
    out[5] = oar_qlut(oar_op_call1(OAR_OP_qadd, qa, QA_N, at), g->table);
    out[6] = oar_dequantize(out[5], g->cs, g->cz, 1);
    out[7] = oar_quantize(out[0], g->cs, g->cz, 1, OAR_U8);
    for (int i = 0; i < MIXED_OUT; i++)
        if (!out[i]) return oar_last_status();
    return OAR_OK;
}

static void mixed_graph(bool w8) {
    oar_scope_begin();
    oar_manual_seed(3);
    int64_t lo = w8 ? -128 : -64, hi = w8 ? 128 : 64;
    mixed g = {.s = oar_scalar(0.02, OAR_F32), .z = oar_scalar(128, OAR_I32), .ys = oar_scalar(0.05, OAR_F32),
               .yz = oar_scalar(10, OAR_I32), .ws = oar_scalar(0.002, OAR_F32),
               .w1 = oar_randint(lo, hi, (int64_t[]){16, 16, 3, 3}, 4, OAR_I8),
               .w2 = oar_randint(lo, hi, (int64_t[]){16, 16, 3, 3}, 4, OAR_I8),
               .w3 = oar_randint(lo, hi, (int64_t[]){8, 16, 3, 3}, 4, OAR_I8),
               .w4 = oar_randint(lo, hi, (int64_t[]){16, 16, 1, 1}, 4, OAR_I8),
               .b16 = oar_randn((int64_t[]){16}, 1, OAR_F32), .b8 = oar_randn((int64_t[]){8}, 1, OAR_F32),
               .table = oar_randint(0, 256, (int64_t[]){256}, 1, OAR_U8),
               .cs = oar_add_scalar(oar_mul_scalar(oar_abs(oar_randn((int64_t[]){16}, 1, OAR_F32)), 0.03), 0.01),
               .cz = oar_randint(0, 256, (int64_t[]){16}, 1, OAR_I32)};
    oar_input_spec spec = {OAR_F32, 4, {-1, 16, 8, 8}, "x"};
    oar_jit *f[2];
    for (int k = 0; k < 2; k++) {
        oar_jit_opts o = {.specs = &spec, .n_specs = 1};
        if (k) CHECK(oar_build_strategy_set(&o.strategy, "quant_nhwc", false) == OAR_OK);
        f[k] = oar_jit_to_static(mixed_fn, &g, &o);
        CHECK(f[k] != NULL);
    }
    for (int64_t b = 1; b <= 3; b += 2) {
        oar_tensor *x = oar_randn((int64_t[]){b, 16, 8, 8}, 4, OAR_F32), *y[2][MIXED_OUT] = {{0}};
        for (int k = 0; k < 2; k++) CHECK(f[k] && oar_jit_call(f[k], &x, 1, y[k], MIXED_OUT) == OAR_OK);
        for (int i = 0; i < MIXED_OUT; i++) CHECK(y[0][i] && y[1][i] && t_same_bits(y[0][i], y[1][i]));
    }
    /* the program: 4 convs NHWC, the 8-output one NCHW, the pooling NHWC; qadd, qlut and the
       per-channel quantize and dequantize on the twins (each would read a contiguous copy of
       an NCHW view else: the only copies are the input's conversion, the global pool's input,
       the direct conv's input and the outputs' NCHW views) */
    char *dump = malloc(1 << 16);
    CHECK(dump && oar_jit_dump(f[0], 0, dump, 1 << 16) > 0);
    if (getenv("OAR_TEST_DUMP")) printf("%s\n", dump);
    int nhwc = 0, nchw = 0, pool = 0, copies = 0;
    for (const char *s = dump; s && (s = strstr(s, "= q")) != NULL; s++) {
        nhwc += !strncmp(s, "= qconv2d_nhwc(", 15);
        nchw += !strncmp(s, "= qconv2d(", 10);
    }
    for (const char *s = dump; s && (s = strstr(s, "= max_pool2d_nhwc(")) != NULL; s++) pool++;
    for (const char *s = dump; s && (s = strstr(s, "= contiguous(")) != NULL; s++) copies++;
    /* the qadd is in the epilogue of the conv of a it adds (fuse_qadd): a itself is read by others */
    int qadd = 0;
    for (const char *s = dump; s && (s = strstr(s, "= qadd(")) != NULL; s++) qadd++;
    printf("mixed graph (%d-bit weights): %d convs NHWC, %d NCHW, %d NHWC poolings, %d copies, %d qadd\n", w8 ? 8 : 7,
           nhwc, nchw, pool, copies, qadd);
    CHECK(nhwc == 4 && nchw == 1 && pool == 1 && copies == MIXED_COPIES && qadd == 0);
    free(dump);
    for (int k = 0; k < 2; k++) oar_jit_free(f[k]);
    oar_scope_end();
}

/* qconv2d_nhwc with an int8 residual (the fuse_qadd pass's) against qconv2d_nhwc then qadd, eager,
 * on whichever kernel the ISA cap leaves (oneDNN natively; at the AVX2 cap oneDNN's AVX2 code for
 * 7-bit weights, the exact GEMM for 8-bit; the reference at generic): u8 and i8 codes and residuals,
 * with and without ReLU, the conv's codes as qadd's first or second operand, a residual zero point
 * far from the codes', scales that saturate the codes and the sum at both ends, channels that fill
 * no whole vector, batch 1 and 3. */
typedef struct fused_case {
    oar_dtype dt, rdt;
    bool relu, conv_second, w8;
    int64_t n, c, o;
    float ys, rs, os;
    int64_t yzp, rzp, ozp;
} fused_case;

static void fused_epilogue(void) {
    oar_scope_begin();
    oar_manual_seed(21);
    static const fused_case cases[] = {
        {OAR_U8, OAR_U8, true, false, true, 3, 16, 20, 0.05f, 0.04f, 0.07f, 10, 200, 5},
        {OAR_U8, OAR_U8, false, true, false, 1, 16, 16, 0.05f, 0.03f, 0.06f, 0, 0, 0},
        {OAR_U8, OAR_U8, false, false, true, 3, 16, 24, 0.004f, 0.02f, 0.01f, 128, 100, 128}, /* saturating */
        {OAR_U8, OAR_U8, true, true, false, 1, 32, 33, 0.004f, 0.02f, 0.01f, 128, 3, 0},     /* saturating */
        {OAR_I8, OAR_I8, false, false, true, 3, 32, 32, 0.1f, 0.05f, 0.12f, -3, 7, -10},
        {OAR_U8, OAR_I8, true, true, true, 1, 16, 20, 0.05f, 0.05f, 0.08f, 20, -20, 0},
    };
    int failed = 0;
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const fused_case *c = &cases[k];
        int64_t lo = c->w8 ? -128 : -64, hi = c->w8 ? 128 : 64, h = 6, w = 5;
        oar_tensor *x = oar_randint(0, 256, (int64_t[]){c->n, h, w, c->c}, 4, OAR_U8);
        oar_tensor *wt = oar_randint(lo, hi, (int64_t[]){c->o, c->c, 3, 3}, 4, OAR_I8);
        oar_tensor *r = c->rdt == OAR_U8 ? oar_randint(0, 256, (int64_t[]){c->n, h, w, c->o}, 4, OAR_U8)
                                         : oar_randint(-128, 128, (int64_t[]){c->n, h, w, c->o}, 4, OAR_I8);
        oar_tensor *xs = oar_scalar(0.02, OAR_F32), *xz = oar_scalar(128, OAR_I32), *ws = oar_scalar(0.002, OAR_F32);
        oar_tensor *bias = oar_randn((int64_t[]){c->o}, 1, OAR_F32), *ys = oar_scalar(c->ys, OAR_F32);
        oar_tensor *yz = oar_scalar((double)c->yzp, OAR_I32), *rs = oar_scalar(c->rs, OAR_F32);
        oar_tensor *rz = oar_scalar((double)c->rzp, OAR_I32), *os = oar_scalar(c->os, OAR_F32);
        oar_tensor *oz = oar_scalar((double)c->ozp, OAR_I32);
        oar_attr ca[6] = {oar_attr_ints((int64_t[]){1, 1}, 2), oar_attr_ints((int64_t[]){1, 1}, 2),
                          oar_attr_ints((int64_t[]){1, 1}, 2), oar_attr_int(1), oar_attr_int(OAR_QACT_NONE),
                          oar_attr_dtype(c->dt)};
        oar_tensor *ci[QN_N] = {x, xs, xz, wt, ws, bias, ys, yz, NULL, NULL, NULL, NULL, NULL};
        oar_tensor *codes = oar_op_call1(OAR_OP_qconv2d_nhwc, ci, QN_N, ca);
        oar_tensor *qa[QA_N] = {codes, ys, yz, r, rs, rz, os, oz};
        if (c->conv_second) qa[0] = r, qa[1] = rs, qa[2] = rz, qa[3] = codes, qa[4] = ys, qa[5] = yz;
        oar_attr aa[2] = {oar_attr_int(c->relu ? OAR_QACT_RELU : OAR_QACT_NONE), oar_attr_dtype(c->dt)};
        oar_tensor *two = codes ? oar_op_call1(OAR_OP_qadd, qa, QA_N, aa) : NULL;
        ci[QL_RES] = r, ci[QN_RS] = rs, ci[QN_RZP] = rz, ci[QN_OS] = os, ci[QN_OZP] = oz;
        ca[4] = aa[0];
        oar_tensor *one = oar_op_call1(OAR_OP_qconv2d_nhwc, ci, QN_N, ca);
        bool same = one && two && t_same_bits(one, two);
        CHECK(same);
        /* the saturating cases must reach both ends, or they test nothing */
        int64_t ends[2] = {0, 0};
        for (int64_t i = 0; one && i < oar_numel(one); i++) {
            int64_t v = (int64_t)t_at(one, i);
            ends[0] += v == (c->dt == OAR_U8 ? 0 : -128), ends[1] += v == (c->dt == OAR_U8 ? 255 : 127);
        }
        if (c->ys < 0.01f) CHECK(ends[0] > 0 && ends[1] > 0);
        failed += !same;
    }
    printf("int8 residual epilogue: %d of %d cases differ from qconv2d_nhwc + qadd\n", failed,
           (int)(sizeof cases / sizeof *cases));
    /* a u8 residual without the output's parameters, or an f32 one with a residual scale: refused, named */
    oar_tensor *x = oar_randint(0, 256, (int64_t[]){1, 4, 4, 16}, 4, OAR_U8), *s = oar_scalar(0.05, OAR_F32);
    oar_tensor *z = oar_scalar(3, OAR_I32), *w = oar_randint(-64, 64, (int64_t[]){16, 16, 3, 3}, 4, OAR_I8);
    oar_tensor *r8 = oar_randint(0, 256, (int64_t[]){1, 4, 4, 16}, 4, OAR_U8);
    oar_tensor *rf = oar_randn((int64_t[]){1, 4, 4, 16}, 4, OAR_F32);
    oar_attr ca[6] = {oar_attr_ints((int64_t[]){1, 1}, 2), oar_attr_ints((int64_t[]){1, 1}, 2),
                      oar_attr_ints((int64_t[]){1, 1}, 2), oar_attr_int(1), oar_attr_int(OAR_QACT_RELU),
                      oar_attr_dtype(OAR_U8)};
    oar_tensor *no_out[QN_N] = {x, s, z, w, s, NULL, s, z, r8, s, z, NULL, NULL};
    CHECK(oar_op_call1(OAR_OP_qconv2d_nhwc, no_out, QN_N, ca) == NULL && strstr(oar_last_error(), "out_scale"));
    oar_tensor *f32_rs[QN_N] = {x, s, z, w, s, NULL, s, z, rf, s, NULL, NULL, NULL};
    CHECK(oar_op_call1(OAR_OP_qconv2d_nhwc, f32_rs, QN_N, ca) == NULL && strstr(oar_last_error(), "residual_scale"));
    oar_scope_end();
}

int main(void) {
    if (!files_begin("/tmp/oar-quant-nhwc-XXXXXX")) return 1;
    fused_epilogue();
    mixed_graph(false);
    mixed_graph(true);
    lenet();
    resnet20();
    files_end();
    return test_summary("test_quant_nhwc");
}
