/* Dynamic int8 quantization of LSTM and GRU (oar_quantize_dynamic, src/nn/rnn_qlayer.c) against
 * PyTorch 1.13 (tests/golden/qrnn.txt, made by tests/golden/gen_qrnn.py), plus save/load,
 * tracing and bad input.
 *
 * Per golden case the oar module gets torch's parameters by name and is checked three ways:
 * - emul8: torch's dynamic scheme written with torch's quantization primitives at 8 bits (what
 *   oar computes), in float64. Only float rounding differs (xs * ws rounded to f32 in the
 *   epilogue, f32 gates), so a quantized h rarely lands on another level: 1e-4 of (1 + |v|).
 * - torch_q: torch's own DynamicQuantizedLSTM / GRU, whose activations are 7-bit (reduce_range):
 *   the difference is the 7-bit rounding (about twice the 8-bit one); bound 0.05, printed.
 * - fp32: torch's float module; the quantization error is bounded by 0.05 (printed), and
 *   must not be zero (the int8 path ran). */
#include "golden_util.h"
#include "nn/module.h"
#include "ops/quant.h"
#include "test_util.h"

#include <unistd.h>

#define MAX_LINE (1 << 20)
#define MAX_T 16

typedef struct qcase {
    char kind[8], attrs[256];
    char pname[MAX_T][64], iname[4][64];
    oar_tensor *param[MAX_T], *input[4], *fp32[3], *torch_q[3], *emul8[3];
    int n_param, n_input, n_out;
} qcase;

static double worst[3]; /* largest |a - b| / (1 + |b|) against emul8, torch_q, fp32 */

static int64_t attr(const qcase *c, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "%s=", key);
    const char *p = strstr(c->attrs, pat);
    return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

/* max |a - b| / (1 + |b|) over the elements; +inf on a shape mismatch */
static double rel_diff(oar_tensor *a, oar_tensor *b) {
    if (!a || !b || oar_numel(a) != oar_numel(b)) return INFINITY;
    int64_t n = oar_numel(a);
    double *x = malloc(sizeof(double) * (size_t)n), *y = malloc(sizeof(double) * (size_t)n), d = 0;
    oar_copy_to_buffer(a, x, sizeof(double) * (size_t)n, OAR_F64);
    oar_copy_to_buffer(b, y, sizeof(double) * (size_t)n, OAR_F64);
    for (int64_t i = 0; i < n; i++) {
        double e = fabs(x[i] - y[i]) / (1 + fabs(y[i]));
        d = e > d || e != e ? e : d;
    }
    free(x);
    free(y);
    return d;
}

static oar_module *build(const qcase *c) {
    oar_module *(*make)(int64_t, int64_t, int, bool) = !strcmp(c->kind, "lstm") ? oar_nn_lstm : oar_nn_gru;
    oar_module *m = make(attr(c, "input"), attr(c, "hidden"), (int)attr(c, "layers"), false);
    for (int i = 0; m && i < c->n_param; i++) {
        oar_tensor *p = oar_module_get(m, c->pname[i]);
        CHECK(p && oar_copy_(p, c->param[i]) == OAR_OK);
    }
    if (m) oar_module_train(m, false);
    return m;
}

/* forward_n of m on the case's inputs cast to f32; outputs tracked in the current scope */
static oar_status run(oar_module *m, const qcase *c, oar_tensor **out) {
    oar_tensor *in[3] = {NULL, NULL, NULL};
    for (int i = 0; i < c->n_input; i++) {
        int k = !strcmp(c->iname[i], "x") ? 0 : !strcmp(c->iname[i], "h0") ? 1 : 2;
        in[k] = oar_cast(c->input[i], OAR_F32);
    }
    int n_in = !strcmp(c->kind, "lstm") ? 3 : 2;
    return oar_forward_n(m, in, n_in, out, c->n_out);
}

static void check_case(const qcase *c) {
    oar_scope_begin();
    oar_no_grad_begin();
    oar_module *m = build(c), *f = build(c);
    oar_tensor *yq[3] = {0}, *yf[3] = {0};
    oar_quant_layer info[2];
    int n = 0;
    CHECK(m && oar_quantize_dynamic(m, NULL, info, 2, &n) == OAR_OK && n == 1);
    CHECK(m && !strcmp(oar_module_type(m), !strcmp(c->kind, "lstm") ? "DynamicQuantizedLSTM" : "DynamicQuantizedGRU"));
    CHECK(n == 1 && info[0].weight_sqnr_db > 35 && info[0].weights > 0);
    CHECK(oar_dtype_of(oar_module_get(m, "weight_hh_l0")) == OAR_I8);
    CHECK(oar_numel(oar_module_get(m, "weight_ih_scale_l0")) == oar_size(oar_module_get(m, "weight_ih_l0"), 0));
    CHECK(run(m, c, yq) == OAR_OK && run(f, c, yf) == OAR_OK);
    double d[3] = {0, 0, 0}, fp = 0;
    for (int k = 0; k < c->n_out; k++) {
        double e = rel_diff(yq[k], c->emul8[k]), t = rel_diff(yq[k], c->torch_q[k]), q = rel_diff(yq[k], c->fp32[k]);
        d[0] = e > d[0] ? e : d[0];
        d[1] = t > d[1] ? t : d[1];
        d[2] = q > d[2] ? q : d[2];
        double g = rel_diff(yf[k], c->fp32[k]);
        fp = g > fp ? g : fp;
    }
    CHECK(fp <= 1e-5);      /* the float module itself matches torch's */
    CHECK(d[0] <= 1e-4);    /* the same scheme as torch's primitives compute it */
    CHECK(d[1] <= 0.05);    /* torch's 7-bit quantized module */
    CHECK(d[2] <= 0.05 && d[2] > 1e-4); /* near fp32, yet not fp32 */
    for (int i = 0; i < 3; i++) worst[i] = d[i] > worst[i] ? d[i] : worst[i];
    printf("  %-4s %-44s  vs emul8 %.1e  vs torch int8 %.1e  vs fp32 %.1e  (weight SQNR %.1f dB)\n", c->kind,
           c->attrs, d[0], d[1], d[2], info[0].weight_sqnr_db);
    oar_no_grad_end();
    oar_module_free(m);
    oar_module_free(f);
    oar_scope_end();
}

static void free_case(qcase *c) {
    for (int i = 0; i < c->n_param; i++) oar_release(c->param[i]);
    for (int i = 0; i < c->n_input; i++) oar_release(c->input[i]);
    for (int k = 0; k < 3; k++) {
        oar_release(c->fp32[k]);
        oar_release(c->torch_q[k]);
        oar_release(c->emul8[k]);
    }
    memset(c, 0, sizeof *c);
}

static int golden(void) {
    const char *src = getenv("OAR_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/golden/qrnn.txt", src ? src : ".");
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("test_quant_rnn: golden cases skipped: %s not found (set OAR_SOURCE_DIR to the repository)\n", path);
        return 0;
    }
    char *line = malloc(MAX_LINE), name[64];
    qcase c = {0};
    int cases = 0, k;
    while (fgets(line, MAX_LINE, f)) {
        if (!strncmp(line, "case ", 5)) {
            sscanf(line + 5, "%7s", c.kind);
            snprintf(c.attrs, sizeof c.attrs, "%s", line + 6 + strlen(c.kind));
            c.attrs[strcspn(c.attrs, "\n")] = 0;
        } else if (sscanf(line, "param %63s", name) == 1 && c.n_param < MAX_T) {
            snprintf(c.pname[c.n_param], sizeof c.pname[0], "%s", name);
            c.param[c.n_param++] = golden_parse_tensor(strchr(line + 6, ' ') + 1);
        } else if (sscanf(line, "input %63s", name) == 1 && c.n_input < 4) {
            snprintf(c.iname[c.n_input], sizeof c.iname[0], "%s", name);
            c.input[c.n_input++] = golden_parse_tensor(strchr(line + 6, ' ') + 1);
        } else if (sscanf(line, "fp32 %d", &k) == 1 && k >= 0 && k < 3) {
            c.fp32[k] = golden_parse_tensor(strchr(line + 5, ' ') + 1);
            c.n_out = k + 1 > c.n_out ? k + 1 : c.n_out;
        } else if (sscanf(line, "torch_q %d", &k) == 1 && k >= 0 && k < 3) {
            c.torch_q[k] = golden_parse_tensor(strchr(line + 8, ' ') + 1);
        } else if (sscanf(line, "emul8 %d", &k) == 1 && k >= 0 && k < 3) {
            c.emul8[k] = golden_parse_tensor(strchr(line + 6, ' ') + 1);
        } else if (!strncmp(line, "end", 3)) {
            check_case(&c);
            free_case(&c);
            cases++;
        }
    }
    free(line);
    fclose(f);
    CHECK(cases >= 4);
    printf("  worst over %d cases: %.1e vs emul8, %.1e vs torch's int8 module, %.1e vs fp32\n", cases, worst[0],
           worst[1], worst[2]);
    return cases;
}

static oar_status forward_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    return oar_forward_n(user, in, 1, out, 1);
}

/* batch_first, unbatched, traced and exported (predictor) runs equal the eager sequence-first
 * one bit for bit; the quantized state saves and loads into another quantized module */
static void layouts_and_files(bool lstm) {
    oar_scope_begin();
    oar_manual_seed(3);
    oar_module *(*make)(int64_t, int64_t, int, bool) = lstm ? oar_nn_lstm : oar_nn_gru;
    oar_module *m = make(5, 7, 2, false), *bf = make(5, 7, 2, true), *other = make(5, 7, 2, false);
    oar_module_train(m, false);
    oar_module_train(bf, false);
    oar_module_train(other, false);
    oar_no_grad_begin();
    for (int i = 0; i < oar_module_num_parameters(m); i++) {
        const char *name;
        oar_tensor *p = oar_module_parameter(m, i, &name);
        CHECK(oar_copy_(oar_module_get(bf, name), p) == OAR_OK);
    }
    oar_no_grad_end();
    CHECK(oar_quantize_dynamic(m, NULL, NULL, 0, NULL) == OAR_OK);
    CHECK(oar_quantize_dynamic(bf, NULL, NULL, 0, NULL) == OAR_OK);
    CHECK(oar_quantize_dynamic(other, NULL, NULL, 0, NULL) == OAR_OK);
    int64_t sx[3] = {6, 3, 5};
    oar_tensor *x = oar_randn(sx, 3, OAR_F32);
    oar_no_grad_begin();
    oar_tensor *y = oar_forward(m, x);
    oar_tensor *ybf = oar_forward(bf, oar_contiguous(oar_transpose(x, 0, 1)));
    CHECK(y && t_same_bits(y, oar_contiguous(oar_transpose(ybf, 0, 1))));
    /* unbatched: [T, I] is the batch of one */
    oar_tensor *x0 = oar_contiguous(oar_squeeze(oar_slice(x, 1, 0, 1, 1), 1)), *y0 = oar_forward(m, x0);
    oar_tensor *y_one = oar_forward(m, oar_unsqueeze(x0, 1));
    CHECK(y0 && y_one && t_same_bits(y0, y_one));
    /* traced: the quantized forward is ops only */
    oar_input_spec spec = {OAR_F32, 3, {6, 3, 5}};
    oar_jit *f = oar_jit_to_static(forward_fn, m, &(oar_jit_opts){.specs = &spec, .n_specs = 1, .module = m});
    oar_tensor *yj = NULL;
    CHECK(f && oar_jit_call(f, &x, 1, &yj, 1) == OAR_OK && t_same_bits(y, yj));
    oar_release(yj);
    /* exported (the i8 weights and scales in the program's safetensors) and run by the predictor */
    char dir[] = "/tmp/oar-qrnn-model-XXXXXX", model[64], file[80];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(model, sizeof model, "%s/m", dir);
    CHECK(f && oar_jit_save(f, model) == OAR_OK);
    oar_jit_free(f);
    oar_predictor *p = oar_predictor_create(&(oar_predictor_config){.model_path = model});
    oar_tensor *yp = NULL;
    CHECK(p && oar_predictor_set_input(p, oar_predictor_input_name(p, 0), x) == OAR_OK &&
          oar_predictor_run(p) == OAR_OK && (yp = oar_predictor_get_output(p, oar_predictor_output_name(p, 0))));
    CHECK(yp && t_same_bits(y, yp));
    oar_release(yp);
    oar_predictor_free(p);
    snprintf(file, sizeof file, "%s.json", model);
    unlink(file);
    snprintf(file, sizeof file, "%s.safetensors", model);
    unlink(file);
    rmdir(dir);
    /* saved and loaded: i8 weights with their scales */
    char path[] = "/tmp/oar-qrnn-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    CHECK(oar_checkpoint_save(path, m, NULL, 0) == OAR_OK);
    CHECK(oar_checkpoint_load(path, other, NULL, NULL) == OAR_OK);
    CHECK(t_same_bits(y, oar_forward(other, x)));
    /* an fp32 module cannot take the int8 state (dtypes differ): refused, not misread */
    oar_module *plain = make(5, 7, 2, false);
    oar_clear_error();
    CHECK(oar_checkpoint_load(path, plain, NULL, NULL) != OAR_OK);
    printf("  %s: loading int8 state into a float module: %s\n", lstm ? "LSTM" : "GRU", oar_last_error());
    unlink(path);
    oar_no_grad_end();
    oar_module_free(plain);
    oar_module_free(m);
    oar_module_free(bf);
    oar_module_free(other);
    oar_scope_end();
}

/* one weight scale per matrix (opts.per_tensor): 0-d scales shared by the gates; near fp32 */
static void per_tensor(bool lstm) {
    oar_scope_begin();
    oar_manual_seed(8);
    oar_module *(*make)(int64_t, int64_t, int, bool) = lstm ? oar_nn_lstm : oar_nn_gru;
    oar_module *m = make(6, 5, 2, false), *f = make(6, 5, 2, false);
    oar_no_grad_begin();
    for (int i = 0; i < oar_module_num_parameters(m); i++) {
        const char *name;
        oar_tensor *p = oar_module_parameter(m, i, &name);
        CHECK(oar_copy_(oar_module_get(f, name), p) == OAR_OK);
    }
    oar_module_train(m, false);
    oar_module_train(f, false);
    CHECK(oar_quantize_dynamic(m, &(oar_quant_dynamic_opts){.per_tensor = true}, NULL, 0, NULL) == OAR_OK);
    CHECK(oar_ndim(oar_module_get(m, "weight_hh_scale_l1")) == 0);
    int64_t sx[3] = {9, 4, 6};
    oar_tensor *x = oar_randn(sx, 3, OAR_F32);
    double db = 0;
    CHECK(oar_sqnr(oar_forward(f, x), oar_forward(m, x), &db) == OAR_OK && db > 30 && db < 200);
    printf("  %s per-tensor weights: output SQNR %.1f dB against fp32\n", lstm ? "LSTM" : "GRU", db);
    oar_no_grad_end();
    oar_module_free(m);
    oar_module_free(f);
    oar_scope_end();
}

/* oar_rnn_qlayer_run (what Python's quantize_dynamic runs) on a quantized module's own weights gives
 * the module's bits, per-row and per-tensor scales alike; its own checks refuse bad weights */
static void layer_api(bool lstm) {
    oar_scope_begin();
    oar_manual_seed(12);
    oar_no_grad_begin();
    for (int per_tensor = 0; per_tensor < 2; per_tensor++) {
        oar_module *m = (lstm ? oar_nn_lstm : oar_nn_gru)(6, 5, 1, false);
        oar_module_train(m, false);
        CHECK(oar_quantize_dynamic(m, &(oar_quant_dynamic_opts){.per_tensor = per_tensor}, NULL, 0, NULL) == OAR_OK);
        int64_t sx[3] = {7, 3, 6};
        oar_tensor *x = oar_randn(sx, 3, OAR_F32), *want[3] = {0}, *y = NULL, *h = NULL, *c = NULL;
        CHECK(oar_forward_n(m, &x, 1, want, lstm ? 3 : 2) == OAR_OK);
        oar_tensor *w_ih = oar_module_get(m, "weight_ih_l0"), *s_ih = oar_module_get(m, "weight_ih_scale_l0");
        oar_tensor *w_hh = oar_module_get(m, "weight_hh_l0"), *s_hh = oar_module_get(m, "weight_hh_scale_l0");
        oar_tensor *b_ih = oar_module_get(m, "bias_ih_l0"), *b_hh = oar_module_get(m, "bias_hh_l0");
        oar_rnn_cell cell = lstm ? OAR_RNN_CELL_LSTM : OAR_RNN_CELL_GRU;
        CHECK(oar_ndim(s_ih) == (per_tensor ? 0 : 1));
        CHECK(oar_rnn_qlayer_run(cell, x, w_ih, s_ih, w_hh, s_hh, b_ih, b_hh, NULL, NULL, &y, &h, &c) == OAR_OK);
        CHECK(y && t_same_bits(y, want[0]) && t_same_bits(h, oar_squeeze(want[1], 0)));
        CHECK(!lstm || t_same_bits(c, oar_squeeze(want[2], 0)));
        oar_release(y);
        oar_release(h);
        if (c) oar_release(c);
        int64_t three = 3;
        oar_tensor *wrong = oar_full(&three, 1, 0.1, OAR_F32), *f32 = oar_cast(w_ih, OAR_F32);
        CHECK_ERR(oar_rnn_qlayer_run(cell, x, w_ih, wrong, w_hh, s_hh, b_ih, b_hh, NULL, NULL, &y, &h, &c),
                  "expected w_ih_scale as f32 of shape [] (per tensor) or [");
        CHECK_ERR(oar_rnn_qlayer_run(cell, x, f32, s_ih, w_hh, s_hh, b_ih, b_hh, NULL, NULL, &y, &h, &c),
                  "expected i8 weights beside their scales, got f32");
        CHECK_ERR(oar_rnn_qlayer_run(cell, x, w_ih, s_ih, w_hh, NULL, b_ih, b_hh, NULL, NULL, &y, &h, &c),
                  "expected w_hh_scale, got NULL");
        CHECK_ERR(oar_rnn_qlayer_run(cell, oar_cast(x, OAR_F64), w_ih, s_ih, w_hh, s_hh, b_ih, b_hh, NULL, NULL, &y, &h,
                                     &c), "expected an f32 input");
        CHECK_ERR(oar_rnn_qlayer_run((oar_rnn_cell)7, x, w_ih, s_ih, w_hh, s_hh, b_ih, b_hh, NULL, NULL, &y, &h, &c),
                  "rnn_qlayer_run: expected the cell");
        oar_module_free(m);
    }
    oar_no_grad_end();
    oar_scope_end();
}

static void bad_input(void) {
    oar_scope_begin();
    oar_no_grad_begin();
    /* an f64 LSTM: the int8 path takes f32 weights; refused with the way out, nothing changed */
    oar_module *d = oar_nn_lstm(4, 3, 1, false);
    const char *names[4] = {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"};
    for (int i = 0; i < 4; i++) {
        oar_tensor *t = oar_cast(oar_module_get(d, names[i]), OAR_F64);
        CHECK(t && oar_module_remove_local(d, names[i]) == OAR_OK && oar_module_add_parameter(d, names[i], t) == OAR_OK);
    }
    oar_module_train(d, false);
    CHECK_ERR(oar_quantize_dynamic(d, NULL, NULL, 0, NULL), "expected LSTM's weight_ih_l0 f32 of 2 dims on the CPU, got f64");
    printf("  f64 LSTM: %s\n", oar_last_error());
    CHECK(!strcmp(oar_module_type(d), "LSTM") && oar_dtype_of(oar_module_get(d, "weight_ih_l0")) == OAR_F64);
    /* beside a Linear that could be converted: the whole model is left as it was */
    oar_module *seq = oar_nn_sequential(NULL, 0), *lin = oar_nn_linear(4, 4, true);
    CHECK(oar_nn_sequential_append(seq, lin) == OAR_OK && oar_nn_sequential_append(seq, d) == OAR_OK);
    oar_module_train(seq, false);
    CHECK_ERR(oar_quantize_dynamic(seq, NULL, NULL, 0, NULL), "in '1'");
    CHECK(!strcmp(oar_module_type(lin), "Linear") && oar_dtype_of(oar_module_get(lin, "weight")) == OAR_F32);
    oar_module_free(seq);
    /* the quantized layer wants f32 activations; NaN is named; a wrong width is a shape error */
    oar_module *g = oar_nn_gru(4, 3, 1, false);
    oar_module_train(g, false);
    CHECK(oar_quantize_dynamic(g, NULL, NULL, 0, NULL) == OAR_OK);
    int64_t s[3] = {2, 1, 4}, w[3] = {2, 1, 5};
    CHECK_ERR(oar_forward(g, oar_randn(s, 3, OAR_F64)), "expected x of dtype f32");
    printf("  f64 input: %s\n", oar_last_error());
    oar_tensor *nan = oar_randn(s, 3, OAR_F32);
    ((float *)oar_tensor_ptr(nan))[5] = NAN;
    CHECK_ERR(oar_forward(g, nan), "expected finite values");
    printf("  NaN input: %s\n", oar_last_error());
    CHECK_ERR(oar_forward(g, oar_randn(w, 3, OAR_F32)), "with 4 input features");
    /* a batch of no sequences gives empty outputs, as the float layer does */
    int64_t e[3] = {2, 0, 4};
    oar_tensor *ye = oar_forward(g, oar_randn(e, 3, OAR_F32));
    CHECK(ye && oar_ndim(ye) == 3 && oar_size(ye, 0) == 2 && oar_size(ye, 1) == 0 && oar_size(ye, 2) == 3);
    /* nothing left to quantize; a skipped RNN stays float */
    CHECK_ERR(oar_quantize_dynamic(g, NULL, NULL, 0, NULL), "found none");
    oar_module *l = oar_nn_lstm(4, 3, 1, false);
    oar_module_train(l, false);
    const char *skip[] = {"", NULL};
    CHECK_ERR(oar_quantize_dynamic(l, &(oar_quant_dynamic_opts){.skip = skip}, NULL, 0, NULL), "found none");
    CHECK(!strcmp(oar_module_type(l), "LSTM"));
    oar_module_free(l);
    oar_module_free(g);
    oar_no_grad_end();
    oar_scope_end();
}

/* lstm-lm: the LSTM and the decoder become int8 (the embedding on request), and its output
 * stays near fp32's */
static void zoo_lstm_lm(void) {
    oar_scope_begin();
    oar_manual_seed(5);
    oar_module *m = oar_zoo_create("lstm-lm", NULL), *f = oar_zoo_create("lstm-lm", NULL);
    oar_no_grad_begin();
    for (int i = 0; m && f && i < oar_module_num_parameters(m); i++) {
        const char *name;
        oar_tensor *p = oar_module_parameter(m, i, &name);
        CHECK(oar_copy_(oar_module_get(f, name), p) == OAR_OK);
    }
    oar_no_grad_end();
    oar_module_train(m, false);
    oar_module_train(f, false);
    oar_quant_layer info[4];
    int n = 0;
    CHECK(oar_quantize_dynamic(m, NULL, info, 4, &n) == OAR_OK && n == 2);
    CHECK(n == 2 && !strcmp(info[0].name, "rnn") && !strcmp(info[0].type, "LSTM") && !strcmp(info[1].name, "dec"));
    CHECK(n == 2 && info[0].weights == 4 * 200 * 200 * 4);
    int64_t sx[2] = {12, 2};
    oar_tensor *x = oar_randint(0, 10000, sx, 2, OAR_I64);
    oar_no_grad_begin();
    oar_tensor *yq = oar_forward(m, x), *yf = oar_forward(f, x);
    double sqnr = 0;
    CHECK(yq && yf && oar_sqnr(yf, yq, &sqnr) == OAR_OK && sqnr > 25);
    printf("  lstm-lm: %d layers int8 (rnn %lld weights, SQNR %.1f dB), logits SQNR %.1f dB against fp32\n", n,
           (long long)info[0].weights, info[0].weight_sqnr_db, sqnr);
    oar_no_grad_end();
    oar_module_free(m);
    oar_module_free(f);
    oar_scope_end();
}

/* choose_qparams (each layer's per-call range) on long inputs, through the vector kernel where the
 * CPU has one: the reference's range and qparams exactly, and a NaN/Inf named by its element */
static void choose_long(void) {
    oar_scope_begin();
    int64_t n = 1003;
    oar_tensor *x = oar_randn(&n, 1, OAR_F32);
    float *v = (float *)oar_tensor_ptr(x), lo = 0, hi = 0;
    v[17] = -0.0f;
    for (int64_t i = 0; i < n; i++) {
        lo = v[i] < lo ? v[i] : lo;
        hi = v[i] > hi ? v[i] : hi;
    }
    for (int sym = 0; sym < 2; sym++)
        for (int d = 0; d < 2; d++) {
            oar_dtype dt = d ? OAR_I8 : OAR_U8;
            oar_tensor *s, *z;
            float want_s;
            int32_t want_z;
            oar_qparams_from_range(lo, hi, dt, sym, &want_s, &want_z);
            CHECK(oar_choose_qparams(x, dt, sym, &s, &z) == OAR_OK);
            CHECK(*(float *)oar_tensor_ptr(s) == want_s && *(int32_t *)oar_tensor_ptr(z) == want_z);
        }
    oar_tensor *s, *z;
    v[37] = INFINITY;
    v[500] = NAN;
    CHECK_ERR(oar_choose_qparams(x, OAR_U8, false, &s, &z), "got inf at element 37");
    v[37] = 0;
    CHECK_ERR(oar_choose_qparams(x, OAR_U8, false, &s, &z), "got nan at element 500");
    oar_scope_end();
}

int main(void) {
    oar_set_num_threads(1);
    golden();
    layouts_and_files(true);
    layouts_and_files(false);
    per_tensor(true);
    per_tensor(false);
    layer_api(true);
    layer_api(false);
    bad_input();
    zoo_lstm_lm();
    choose_long();
    return test_summary("test_quant_rnn");
}
