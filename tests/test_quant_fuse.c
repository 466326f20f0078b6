/* Int8 programs (issue 16): the fuse_quant pass and what it relies on.
 * - LeNet quantized statically, compiled: with fuse_quant the program quantizes the image once
 *   and stays int8 (ReLU and requantization in the qconv2d/qlinear epilogues, qmax_pool2d
 *   between them), and its logits equal eager's and the unfused program's bit for bit, at
 *   two batch sizes (the rewrites are exact; see src/graph/passes/fuse_quant.c).
 * - values with a second use (a ReLU'd output also returned raw, a pooled value also
 *   returned) are left alone, with results still equal.
 * - qmax_pool2d(quantize(x)) == quantize(max_pool2d(x)) over several window geometries, the
 *   identity the pass uses.
 * - the packed-weight cache of the VNNI kernel: an in-place change of the weights (a new
 *   storage version) is seen on the next call.
 * Runs at every ISA cap (tests/CMakeLists.txt), so the VNNI, AVX2 and reference kernels each
 * compute the same program. */
#include "test_util.h"

#include "ops/op.h"

static oar_status forward_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    out[0] = oar_forward(user, in[0]);
    return out[0] ? OAR_OK : oar_last_status();
}

static int count_op(oar_jit *f, const char *op) {
    static char text[1 << 16];
    if (oar_jit_dump(f, 0, text, sizeof text) < 0) return -1;
    char pat[64];
    snprintf(pat, sizeof pat, " = %s", op);
    int n = 0;
    for (const char *s = strstr(text, pat); s; s = strstr(s + 1, pat)) n += s[strlen(pat)] == '(' || s[strlen(pat)] == '[';
    return n;
}

static oar_jit *compile(oar_module *m, bool fuse) {
    oar_input_spec spec = {OAR_F32, 4, {-1, 1, 28, 28}};
    oar_jit_opts o = {.specs = &spec, .n_specs = 1, .module = m};
    if (!fuse) CHECK(oar_build_strategy_set(&o.strategy, "fuse_quant", false) == OAR_OK);
    return oar_jit_to_static(forward_fn, m, &o);
}

static oar_tensor *run(oar_jit *f, oar_tensor *x) {
    oar_tensor *y = NULL;
    return oar_jit_call(f, &x, 1, &y, 1) == OAR_OK ? y : NULL;
}

static void lenet_int8_program(void) {
    oar_scope_begin();
    oar_manual_seed(3);
    oar_module *m = oar_zoo_create("lenet", NULL);
    oar_module_train(m, false);
    oar_tensor *cal[2] = {oar_randn((int64_t[]){16, 1, 28, 28}, 4, OAR_F32),
                          oar_randn((int64_t[]){16, 1, 28, 28}, 4, OAR_F32)};
    CHECK(oar_quantize_static(m, cal, 2, NULL, NULL, 0, NULL) == OAR_OK);
    oar_jit *fused = compile(m, true), *plain = compile(m, false);
    CHECK(fused && plain);
    for (int64_t b = 1; b <= 5; b += 4) {
        oar_tensor *x = oar_randn((int64_t[]){b, 1, 28, 28}, 4, OAR_F32);
        oar_no_grad_begin();
        oar_tensor *eager = oar_forward(m, x);
        oar_no_grad_end();
        oar_tensor *yf = run(fused, x), *yp = run(plain, x);
        CHECK(eager && oar_dtype_of(eager) == OAR_F32 && oar_shape(eager)[0] == b);
        CHECK(t_same_bits(yf, eager) && t_same_bits(yp, eager));
        /* and twice: the packed weights come from the cache the second time */
        CHECK(t_same_bits(run(fused, x), eager));
    }
    /* (traced by the calls above) fused: one quantize (the image), ReLUs in epilogues, pooling on int8 */
    CHECK(count_op(fused, "quantize") == 1 && count_op(fused, "relu") == 0 && count_op(fused, "max_pool2d") == 0);
    CHECK(count_op(fused, "qmax_pool2d") == 2 && count_op(fused, "qconv2d") == 2 && count_op(fused, "qlinear") == 3);
    CHECK(count_op(plain, "quantize") == 5 && count_op(plain, "relu") == 4 && count_op(plain, "max_pool2d") == 2);
    oar_jit_free(fused);
    oar_jit_free(plain);
    oar_module_free(m);
    oar_scope_end();
}

/* ---- values read twice stay as they are: ReLU'd output also returned, pooled value also returned */
static oar_tensor *g_w, *g_ws, *g_b, *g_s, *g_z, *g_s2, *g_z2;

static oar_status relu_and_raw(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    oar_tensor *y = oar_qlinear(oar_quantize(in[0], g_s, g_z, 0, OAR_U8), g_s, g_z, g_w, g_ws, g_b, NULL);
    out[0] = oar_relu(y);
    out[1] = y;
    return out[0] && out[1] ? OAR_OK : oar_last_status();
}

static oar_status pooled_twice(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    oar_tensor *w4 = oar_reshape(g_w, (int64_t[]){6, 1, 2, 2}, 4);
    oar_tensor *y = oar_qconv2d(oar_quantize(in[0], g_s, g_z, 0, OAR_U8), g_s, g_z, w4, g_ws, g_b, NULL, NULL);
    oar_tensor *p = oar_max_pool2d(y, &(oar_pool_opts){.kernel = {2, 2}});
    out[0] = oar_quantize(p, g_s2, g_z2, 0, OAR_U8);
    out[1] = p;
    return out[0] && out[1] ? OAR_OK : oar_last_status();
}

static void shared_values_stay(void) {
    oar_scope_begin();
    oar_manual_seed(8);
    g_w = oar_quantize(oar_randn((int64_t[]){6, 4}, 2, OAR_F32), oar_scalar(0.02, OAR_F32), oar_scalar(0, OAR_I32),
                       0, OAR_I8);
    g_ws = oar_scalar(0.02, OAR_F32), g_b = oar_randn((int64_t[]){6}, 1, OAR_F32);
    g_s = oar_scalar(0.03, OAR_F32), g_z = oar_scalar(128, OAR_I32);
    g_s2 = oar_scalar(0.01, OAR_F32), g_z2 = oar_scalar(7, OAR_I32);
    oar_static_fn fns[2] = {relu_and_raw, pooled_twice};
    oar_tensor *xs[2] = {oar_randn((int64_t[]){5, 4}, 2, OAR_F32), oar_randn((int64_t[]){2, 1, 6, 6}, 4, OAR_F32)};
    for (int t = 0; t < 2; t++) {
        oar_tensor *eager[2] = {0}, *got[2] = {0};
        CHECK(fns[t](NULL, &xs[t], 1, eager, 2) == OAR_OK);
        oar_jit *f = oar_jit_to_static(fns[t], NULL, NULL);
        CHECK(f && oar_jit_call(f, &xs[t], 1, got, 2) == OAR_OK);
        CHECK(t_same_bits(got[0], eager[0]) && t_same_bits(got[1], eager[1]));
        if (t == 0) CHECK(count_op(f, "relu") == 1);
        else CHECK(count_op(f, "max_pool2d") == 1 && count_op(f, "qmax_pool2d") == 0 && count_op(f, "quantize") == 2);
        oar_jit_free(f);
    }
    oar_scope_end();
}

static oar_tensor *qmax(oar_tensor *q, const int64_t *k, const int64_t *s, const int64_t *p, const int64_t *d,
                        bool ceil_mode) {
    oar_attr a[5] = {oar_attr_ints(k, 2), oar_attr_ints(s, 2), oar_attr_ints(p, 2), oar_attr_ints(d, 2),
                     oar_attr_int(ceil_mode)};
    return oar_op_call1(OAR_OP_qmax_pool2d, &q, 1, a);
}

static void qmax_pool_commutes(void) {
    oar_scope_begin();
    oar_manual_seed(4);
    static const int64_t geo[][9] = {/* kernel, stride, padding, dilation, ceil */
                                     {2, 2, 2, 2, 0, 0, 1, 1, 0}, {3, 3, 2, 1, 1, 1, 1, 2, 1},
                                     {3, 2, 1, 2, 1, 0, 2, 1, 0}, {1, 1, 1, 1, 0, 0, 1, 1, 0}};
    for (int g = 0; g < 4; g++)
        for (int signed_q = 0; signed_q < 2; signed_q++) {
            const int64_t *a = geo[g];
            oar_tensor *x = oar_randn((int64_t[]){2, 3, 9, 8}, 4, OAR_F32);
            oar_tensor *s = oar_scalar(0.02, OAR_F32), *z = oar_scalar(signed_q ? -5 : 120, OAR_I32);
            oar_dtype dt = signed_q ? OAR_I8 : OAR_U8;
            oar_pool_opts po = {.kernel = {a[0], a[1]}, .stride = {a[2], a[3]}, .padding = {a[4], a[5]},
                                .dilation = {a[6], a[7]}, .ceil_mode = a[8] != 0};
            oar_tensor *want = oar_quantize(oar_max_pool2d(x, &po), s, z, 0, dt);
            oar_tensor *got = qmax(oar_quantize(x, s, z, 0, dt), a, a + 2, a + 4, a + 6, a[8] != 0);
            CHECK(want && t_same_bits(got, want));
        }
    /* float input: an error that names the op and the remedy */
    CHECK_ERR(qmax(oar_zeros((int64_t[]){1, 1, 4, 4}, 4, OAR_F32), (int64_t[]){2, 2}, (int64_t[]){2, 2},
                   (int64_t[]){0, 0}, (int64_t[]){1, 1}, false),
              "qmax_pool2d: expected x u8 or i8, got f32; use max_pool2d");
    CHECK_ERR(qmax(oar_zeros((int64_t[]){1, 1, 4, 4}, 4, OAR_U8), (int64_t[]){2, 2}, (int64_t[]){2, 2},
                   (int64_t[]){2, 2}, (int64_t[]){1, 1}, false),
              "qmax_pool2d: expected padding at most half the kernel");
    oar_scope_end();
}

/* The VNNI kernel packs weights once per (storage, version): a write in place must be seen. */
static void packed_weights_follow_writes(void) {
    oar_scope_begin();
    oar_manual_seed(6);
    int64_t m = 3, n = 20, k = 37;
    oar_tensor *x = oar_quantize(oar_rand((int64_t[]){m, k}, 2, OAR_F32), oar_scalar(0.01, OAR_F32),
                                 oar_scalar(3, OAR_I32), 0, OAR_U8);
    oar_tensor *w = oar_quantize(oar_randn((int64_t[]){n, k}, 2, OAR_F32), oar_scalar(0.02, OAR_F32),
                                 oar_scalar(0, OAR_I32), 0, OAR_I8);
    oar_tensor *w2 = oar_quantize(oar_randn((int64_t[]){n, k}, 2, OAR_F32), oar_scalar(0.02, OAR_F32),
                                  oar_scalar(0, OAR_I32), 0, OAR_I8);
    oar_tensor *xs = oar_scalar(0.01, OAR_F32), *xz = oar_scalar(3, OAR_I32), *ws = oar_scalar(0.02, OAR_F32);
    oar_tensor *y1 = oar_qlinear(x, xs, xz, w, ws, NULL, NULL), *y1b = oar_qlinear(x, xs, xz, w, ws, NULL, NULL);
    oar_tensor *want2 = oar_qlinear(x, xs, xz, w2, ws, NULL, NULL);
    CHECK(t_same_bits(y1, y1b));
    CHECK(oar_copy_(w, w2) == OAR_OK);
    oar_tensor *y2 = oar_qlinear(x, xs, xz, w, ws, NULL, NULL);
    CHECK(t_same_bits(y2, want2) && !t_same_bits(y2, y1));
    oar_scope_end();
}

int main(void) {
    lenet_int8_program();
    shared_values_stay();
    qmax_pool_commutes();
    packed_weights_follow_writes();
    return test_summary("test_quant_fuse");
}
