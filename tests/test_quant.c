/* Quantization beyond the op sweep and the torch golden values (test_quant_golden):
 * - qlinear's saturation worst case against exact int64 sums, run at every ISA cap (this test
 *   runs at native, avx2 and generic: VNNI, exact AVX2 and reference kernels);
 * - the histogram observers clip outliers (percentile, kl, mse) where minmax does not, and mse
 *   gives a smaller quantization error than minmax on heavy-tailed data; bad calibration input;
 * - dynamic quantization of an MLP: fp32 vs int8 output (SQNR), the rewritten layers, skip
 *   list, eager = compiled, checkpoint save and load of the int8 model, bad input. */
#include "test_util.h"

#include <unistd.h>

static uint64_t g_state = 0x9E3779B97F4A7C15ull;
static double urand(void) {
    g_state ^= g_state << 13;
    g_state ^= g_state >> 7;
    g_state ^= g_state << 17;
    return (double)(g_state >> 11) * (1.0 / 9007199254740992.0);
}
static double nrand(void) { return sqrt(-2 * log(urand() + 1e-12)) * cos(6.283185307 * urand()); }

static oar_tensor *scalar_f(float v) { return oar_from_data(&v, NULL, 0, OAR_F32); }
static oar_tensor *scalar_i(int32_t v) { return oar_from_data(&v, NULL, 0, OAR_I32); }

/* x: all 255 (u8) or all -128 (s8); w rows alternate the extremes 127 and -128; K long enough
 * that any 16-bit intermediate would saturate many times over */
static void worst_case(oar_dtype xdt) {
    enum { M = 3, N = 4, K = 200 };
    uint8_t xb[M * K];
    int8_t wb[N * K];
    for (int i = 0; i < M * K; i++) xb[i] = xdt == OAR_U8 ? 255 : (uint8_t)(int8_t)-128;
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) wb[n * K + k] = n == 0 ? 127 : n == 1 ? -128 : (k % 2 ? 127 : -128);
    oar_scope_begin();
    oar_tensor *x = oar_from_data(xb, (int64_t[]){M, K}, 2, xdt), *w = oar_from_data(wb, (int64_t[]){N, K}, 2, OAR_I8);
    oar_tensor *y = oar_qlinear(x, scalar_f(1), scalar_i(0), w, scalar_f(1), NULL, NULL);
    CHECK(y != NULL);
    for (int m = 0; y && m < M; m++)
        for (int n = 0; n < N; n++) {
            int64_t want = 0;
            for (int k = 0; k < K; k++)
                want += (int64_t)(xdt == OAR_U8 ? (int)xb[m * K + k] : (int)(int8_t)xb[m * K + k]) * wb[n * K + k];
            if (t_at(y, m * N + n) != (double)want) {
                fprintf(stderr, "worst case %s [%d,%d]: %.0f, exact %lld\n", oar_dtype_name(xdt), m, n,
                        t_at(y, m * N + n), (long long)want);
                CHECK(false);
                m = M;
                break;
            }
        }
    /* requantized: 255 * 127 * 200 / 1000 saturates the i8 output at 127, never wraps */
    oar_qlinear_opts o = {.out_dtype = OAR_I8, .y_scale = scalar_f(1000), .y_zero_point = scalar_i(0)};
    oar_tensor *q = oar_qlinear(x, scalar_f(1), scalar_i(0), w, scalar_f(1), NULL, &o);
    CHECK(q && t_at(q, 0) == (xdt == OAR_U8 ? 127 : -128) && t_at(q, 1) == (xdt == OAR_U8 ? -128 : 127));
    oar_scope_end();
}

/* ---- observers */
static double fq_mse(oar_tensor *x, oar_tensor *s, oar_tensor *z) {
    oar_tensor *y = oar_fake_quant(x, s, z, 0, 0, 255);
    int64_t n = oar_numel(x);
    double *a = malloc(sizeof(double) * (size_t)n), *b = malloc(sizeof(double) * (size_t)n), e = 0;
    oar_copy_to_buffer(x, a, sizeof(double) * (size_t)n, OAR_F64);
    oar_copy_to_buffer(y, b, sizeof(double) * (size_t)n, OAR_F64);
    for (int64_t i = 0; i < n; i++) e += (a[i] - b[i]) * (a[i] - b[i]);
    free(a);
    free(b);
    return e / (double)n;
}

static void observers(void) {
    enum { N = 20000 };
    static float v[N];
    for (int i = 0; i < N; i++) v[i] = (float)nrand();
    v[7] = 60, v[99] = -45; /* two outliers */
    oar_scope_begin();
    oar_tensor *x = oar_from_data(v, (int64_t[]){N}, 1, OAR_F32);
    const char *kinds[8];
    int nk = oar_observer_kinds(kinds, 8);
    CHECK(nk == 5);
    double scale[8], mse[8];
    for (int k = 0; k < nk; k++) {
        oar_observer *o = oar_observer_create(kinds[k], &(oar_observer_opts){.percentile = 99.9});
        CHECK(o && oar_observer_observe(o, x) == OAR_OK);
        oar_tensor *s = NULL, *z = NULL;
        CHECK(oar_observer_qparams(o, &s, &z) == OAR_OK);
        scale[k] = s ? t_at(s, 0) : 0;
        mse[k] = s ? fq_mse(x, s, z) : INFINITY;
        printf("observer %-15s scale %.5f zero point %3.0f  mse %.3g\n", kinds[k], scale[k], z ? t_at(z, 0) : 0, mse[k]);
        oar_observer_free(o);
    }
    CHECK_NEAR(scale[0], 105.0 / 255, 1e-6); /* minmax: [-45, 60] */
    CHECK(scale[2] < scale[0] / 4 && scale[3] < scale[0] / 4); /* percentile and kl clip the outliers */
    /* at 8 bits clipping a lone outlier costs more than it saves: mse keeps the range, and has the
     * least error of all */
    for (int k = 0; k < nk; k++) CHECK(mse[4] <= mse[k] * 1.01);
    /* on a long tail with mass (Laplace), mse clips and beats minmax */
    for (int i = 0; i < N; i++) v[i] = (float)(urand() < 0.5 ? log(urand() + 1e-12) : -log(urand() + 1e-12));
    oar_tensor *xl = oar_from_data(v, (int64_t[]){N}, 1, OAR_F32);
    double lmse[2], lscale[2];
    for (int k = 0; k < 2; k++) {
        oar_observer *o = oar_observer_create(k ? "mse" : "minmax", NULL);
        oar_tensor *s = NULL, *z = NULL;
        CHECK(oar_observer_observe(o, xl) == OAR_OK && oar_observer_qparams(o, &s, &z) == OAR_OK);
        lscale[k] = s ? t_at(s, 0) : 0;
        lmse[k] = s ? fq_mse(xl, s, z) : INFINITY;
        oar_observer_free(o);
    }
    printf("Laplace data: minmax scale %.4f mse %.3g; mse observer scale %.4f mse %.3g\n", lscale[0], lmse[0],
           lscale[1], lmse[1]);
    CHECK(lscale[1] < lscale[0] && lmse[1] < lmse[0]);

    /* per channel: two channels of different ranges get their own scales */
    float pc[8] = {1, -2, 10, 40, 0.5f, -1, 20, -40};
    oar_tensor *xc = oar_from_data(pc, (int64_t[]){4, 2}, 2, OAR_F32);
    for (int k = 0; k < nk; k++) {
        oar_observer *o = oar_observer_create(kinds[k], &(oar_observer_opts){.dtype = OAR_I8, .symmetric = true,
                                                                             .per_channel = true, .axis = 1});
        oar_tensor *s = NULL, *z = NULL;
        CHECK(oar_observer_observe(o, xc) == OAR_OK && oar_observer_qparams(o, &s, &z) == OAR_OK);
        CHECK(s && oar_ndim(s) == 1 && oar_numel(s) == 2 && t_at(s, 1) > t_at(s, 0) && t_at(z, 0) == 0);
        oar_observer_free(o);
    }
    /* reduce_range: every kind quantizes onto [0, 127] (u8 affine), so the data's range takes half the levels */
    for (int k = 0; k < nk; k++) {
        oar_tensor *s[2] = {0}, *z[2] = {0};
        for (int r = 0; r < 2; r++) {
            oar_observer *o = oar_observer_create(kinds[k], &(oar_observer_opts){.reduce_range = r == 1});
            CHECK(o && oar_observer_observe(o, xc) == OAR_OK && oar_observer_qparams(o, &s[r], &z[r]) == OAR_OK);
            oar_observer_free(o);
        }
        /* 40 - (-40) over 127 levels, not 255 (the histogram kinds may clip, never widen) */
        CHECK(s[0] && s[1] && t_at(s[1], 0) > 1.9 * t_at(s[0], 0) && t_at(s[1], 0) <= 80.0f / 127 * 1.0001f);
        CHECK(z[1] && t_at(z[1], 0) >= 0 && t_at(z[1], 0) <= 127);
    }
    /* bad input */
    CHECK_ERR(oar_observer_create("minmax", &(oar_observer_opts){.symmetric = true, .reduce_range = true}),
              "observer minmax: expected reduce_range with affine u8 or with i8, got it with symmetric u8 (its zero "
              "point 128 lies outside the 7-bit range [0, 127]; torch refuses it too); use affine u8 or symmetric i8");
    CHECK_ERR(oar_observer_create("entropy", NULL), "observer: expected kind minmax, moving_average, percentile, kl or mse, got 'entropy'");
    oar_observer *o = oar_observer_create("kl", NULL);
    oar_tensor *s, *z;
    CHECK_ERR(oar_observer_qparams(o, &s, &z), "observer kl: no data observed; run calibration batches");
    float bad[3] = {1, NAN, 2};
    CHECK_ERR(oar_observer_observe(o, oar_from_data(bad, (int64_t[]){3}, 1, OAR_F32)),
              "observer kl: expected finite calibration data, got nan at element 1 of batch 0");
    CHECK(oar_observer_observe(o, oar_zeros((int64_t[]){0, 3}, 2, OAR_F32)) == OAR_OK); /* empty: nothing */
    CHECK_ERR(oar_observer_qparams(o, &s, &z), "no data observed");
    oar_observer_free(o);
    o = oar_observer_create("minmax", &(oar_observer_opts){.per_channel = true, .axis = 1});
    CHECK(oar_observer_observe(o, xc) == OAR_OK);
    CHECK_ERR(oar_observer_observe(o, oar_zeros((int64_t[]){4, 3}, 2, OAR_F32)),
              "observer minmax: expected 2 channels along axis 1 as before, got 3");
    oar_observer_free(o);
    oar_scope_end();
}

/* ---- dynamic quantization */
static oar_module *mlp(void) {
    oar_module *l[5] = {oar_nn_linear(64, 128, true), oar_nn_activation(OAR_ACT_RELU, 0), oar_nn_linear(128, 96, true), oar_nn_activation(OAR_ACT_RELU, 0),
                        oar_nn_linear(96, 10, false)};
    return oar_nn_sequential(l, 5);
}

static oar_status fwd(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    return oar_forward_n(user, in, 1, out, 1);
}

static void dynamic(void) {
    oar_manual_seed(7);
    oar_module *m = mlp(), *m2 = mlp();
    oar_module_train(m, false);
    oar_module_train(m2, false);
    oar_scope_begin();
    oar_tensor *x = oar_randn((int64_t[]){32, 64}, 2, OAR_F32);
    oar_tensor *ref = oar_forward(m, x);
    oar_module *relu = oar_nn_activation(OAR_ACT_RELU, 0);
    oar_module_train(relu, false);
    CHECK_ERR(oar_quantize_dynamic(relu, NULL, NULL, 0, NULL), "quantize_dynamic: expected at least one Linear");
    oar_module_free(relu);
    oar_module_train(m, true);
    CHECK_ERR(oar_quantize_dynamic(m, NULL, NULL, 0, NULL), "expected a model in evaluation mode");
    oar_module_train(m, false);
    oar_quant_layer info[4];
    int n = 0;
    const char *skip[] = {"4", NULL}; /* the last layer stays fp32 */
    CHECK(oar_quantize_dynamic(m, &(oar_quant_dynamic_opts){.skip = skip}, info, 4, &n) == OAR_OK);
    CHECK(n == 2 && !strcmp(info[0].name, "0") && !strcmp(info[1].name, "2"));
    for (int i = 0; i < n; i++) {
        printf("dynamic %s: %lld weights, scales %.3g..%.3g, weight SQNR %.1f dB\n", info[i].name,
               (long long)info[i].weights, info[i].scale_min, info[i].scale_max, info[i].weight_sqnr_db);
        CHECK(info[i].weight_sqnr_db > 35);
    }
    CHECK(!strcmp(oar_module_type(oar_module_child(m, "0")), "DynamicQuantizedLinear"));
    CHECK(!strcmp(oar_module_type(oar_module_child(m, "4")), "Linear"));
    CHECK(oar_dtype_of(oar_module_get(m, "0.weight")) == OAR_I8 && oar_module_get(m, "0.weight_scale"));
    CHECK(oar_module_num_parameters(m) == 3); /* two biases and the fp32 last layer's weight */
    oar_tensor *y = oar_forward(m, x);
    double db = 0;
    CHECK(y && oar_sqnr(ref, y, &db) == OAR_OK);
    printf("dynamic MLP output SQNR %.1f dB\n", db);
    CHECK(db > 25);

    /* compiled = eager, bit for bit */
    oar_input_spec spec = {.dtype = OAR_F32, .ndim = 2, .shape = {-1, 64}};
    oar_jit *f = oar_jit_to_static(fwd, m, &(oar_jit_opts){.specs = &spec, .n_specs = 1, .module = m});
    oar_tensor *yc = NULL;
    CHECK(f && oar_jit_call(f, &x, 1, &yc, 1) == OAR_OK);
    CHECK(yc && t_same_bits(yc, y));
    oar_release(yc);
    oar_jit_free(f);

    /* the int8 model saves and loads: a fresh model quantized the same way takes its state */
    char path[256];
    snprintf(path, sizeof path, "/tmp/oar_test_quant_%d.safetensors", (int)getpid());
    CHECK(oar_checkpoint_save(path, m, NULL, 0) == OAR_OK);
    CHECK(oar_quantize_dynamic(m2, &(oar_quant_dynamic_opts){.skip = skip}, NULL, 0, NULL) == OAR_OK);
    CHECK(oar_checkpoint_load(path, m2, NULL, NULL) == OAR_OK);
    oar_tensor *y2 = oar_forward(m2, x);
    CHECK(y2 && t_same_bits(y2, y));
    /* a file whose int8 weight was cut to fp32's shape elsewhere is refused with the name */
    oar_module *m3 = mlp();
    oar_module_train(m3, false);
    CHECK_ERR(oar_checkpoint_load(path, m3, NULL, NULL), "0.weight");
    remove(path);
    /* NaN reaching a quantized layer is an error, not garbage */
    oar_tensor *xn = oar_mul_scalar(x, NAN);
    CHECK_ERR(oar_forward(m, xn), "choose_qparams: expected finite values");
    /* Embedding tables, on request: i8 rows with a scale each */
    oar_module *el[2] = {oar_nn_embedding(100, 16), oar_nn_linear(16, 8, true)};
    oar_module *e = oar_nn_sequential(el, 2);
    oar_module_train(e, false);
    int64_t ib[20];
    for (int i = 0; i < 20; i++) ib[i] = (i * 37) % 100;
    oar_tensor *idx = oar_from_data(ib, (int64_t[]){4, 5}, 2, OAR_I64), *eref = oar_forward(e, idx);
    oar_quant_layer einfo[2];
    CHECK(oar_quantize_dynamic(e, &(oar_quant_dynamic_opts){.embeddings = true, .per_tensor = true}, einfo, 2, &n) == OAR_OK);
    CHECK(n == 2 && !strcmp(einfo[0].type, "Embedding") && einfo[0].weight_sqnr_db > 35);
    CHECK(!strcmp(oar_module_type(oar_module_child(e, "0")), "QuantizedEmbedding"));
    CHECK(oar_dtype_of(oar_module_get(e, "0.weight")) == OAR_I8 && oar_numel(oar_module_get(e, "0.weight_scale")) == 100);
    oar_tensor *ey = oar_forward(e, idx);
    CHECK(ey && oar_ndim(ey) == 3 && oar_sqnr(eref, ey, &db) == OAR_OK && db > 30);
    printf("dynamic Embedding + Linear output SQNR %.1f dB\n", db);
    oar_scope_end();
    oar_module_free(m);
    oar_module_free(m2);
    oar_module_free(m3);
    oar_module_free(e);
}

/* ---- static quantization of a small CNN */
static oar_module *cnn(void) {
    oar_module *l[7] = {oar_nn_conv2d(1, 8, 3, &(oar_conv_opts){.padding = {1, 1}}, true),
                        oar_nn_activation(OAR_ACT_RELU, 0),
                        oar_nn_conv2d(8, 8, 3, &(oar_conv_opts){.stride = {2, 2}, .groups = 8}, true),
                        oar_nn_activation(OAR_ACT_RELU, 0), oar_nn_flatten(1, -1),
                        oar_nn_linear(8 * 5 * 5, 16, true), oar_nn_linear(16, 10, true)};
    oar_module *m = oar_nn_sequential(l, 7);
    oar_module_train(m, false);
    return m;
}

static void static_ptq(void) {
    oar_manual_seed(11);
    oar_module *m = cnn();
    oar_scope_begin();
    oar_tensor *calib[4];
    for (int i = 0; i < 4; i++) calib[i] = oar_randn((int64_t[]){8, 1, 11, 11}, 4, OAR_F32);
    oar_tensor *x = oar_randn((int64_t[]){16, 1, 11, 11}, 4, OAR_F32), *ref = oar_forward(m, x);
    CHECK_ERR(oar_quantize_static(m, calib, 0, NULL, NULL, 0, NULL), "quantize_static: expected at least one calibration batch, got 0");
    oar_tensor *bad[2] = {calib[0], oar_mul_scalar(calib[1], INFINITY)};
    CHECK_ERR(oar_quantize_static(m, bad, 2, NULL, NULL, 0, NULL), "calibration batch 1");
    CHECK_ERR(oar_quantize_static(m, bad, 2, NULL, NULL, 0, NULL), "expected finite calibration data");
    CHECK(!strcmp(oar_module_type(oar_module_child(m, "0")), "Conv2d")); /* unchanged after a failure */
    oar_tensor *y0 = oar_forward(m, x);
    CHECK(y0 && t_same_bits(y0, ref));
    const char *kinds[5];
    int nk = oar_observer_kinds(kinds, 5);
    char path[256]; /* per process: the capped runs of this test may run at once */
    snprintf(path, sizeof path, "/tmp/oar_test_quant_cnn_%d.safetensors", (int)getpid());
    for (int k = 0; k < nk; k++) {
        oar_module *q = cnn();
        CHECK(oar_checkpoint_save(path, m, NULL, 0) == OAR_OK);
        CHECK(oar_checkpoint_load(path, q, NULL, NULL) == OAR_OK);
        oar_quant_layer info[4];
        int n = 0;
        oar_quant_static_opts o = {.observer = kinds[k], .keep_last = true};
        CHECK(oar_quantize_static(q, calib, 4, &o, info, 4, &n) == OAR_OK);
        CHECK(n == 3 && !strcmp(info[0].type, "Conv2d") && !strcmp(info[2].name, "5"));
        CHECK(!strcmp(oar_module_type(oar_module_child(q, "2")), "QuantizedConv2d"));
        CHECK(!strcmp(oar_module_type(oar_module_child(q, "6")), "Linear")); /* keep_last */
        oar_tensor *y = oar_forward(q, x);
        double db = 0;
        CHECK(y && oar_sqnr(ref, y, &db) == OAR_OK);
        printf("static %-15s output SQNR %.1f dB (input scale of layer 0: %.4g)\n", kinds[k], db, info[0].scale_min);
        /* kl clips hardest: on 4 small batches its histograms are sparse and it trades range for
         * resolution, still well above noise */
        CHECK(db > (strcmp(kinds[k], "kl") ? 30 : 12));
        if (k == 0) { /* compiled = eager */
            oar_input_spec spec = {.dtype = OAR_F32, .ndim = 4, .shape = {-1, 1, 11, 11}};
            oar_jit *f = oar_jit_to_static(fwd, q, &(oar_jit_opts){.specs = &spec, .n_specs = 1, .module = q});
            oar_tensor *yc = NULL;
            CHECK(f && oar_jit_call(f, &x, 1, &yc, 1) == OAR_OK);
            CHECK(yc && t_same_bits(yc, y));
            oar_release(yc);
            oar_jit_free(f);
        }
        oar_module_free(q);
    }
    remove(path);
    oar_scope_end();
    oar_module_free(m);
}

int main(void) {

    worst_case(OAR_U8);
    worst_case(OAR_I8);
    observers();
    dynamic();
    static_ptq();
    return test_summary("test_quant");
}
