/* The small pieces a new user reached for (issue 13, "missing pieces"):
 *   - the scalar family (sub, rsub, div, rdiv, rpow, maximum, minimum, comparisons), exact on
 *     integer tensors and refusing scalars an integer dtype cannot hold;
 *   - oar_accuracy, top-1 and top-k, against hand-counted values and argmax's tie rule;
 *   - oar_dataset_to_tensors: a CSV as X, y without a loader;
 *   - NORMALIZE over more than 16 features, through means/stds;
 *   - a describe callback reads its state through a const module (oar_module_state);
 *   - a scheduler steps without a metric (oar_scheduler_next);
 *   - TransformerEncoderLayer / TransformerDecoderLayer: defaults, printing, errors. */
#include "test_io_util.h"

/* Before oar_module_state took a const module this file did not compile. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic error "-Wdiscarded-qualifiers"
#elif defined(__clang__)
#pragma clang diagnostic error "-Wincompatible-pointer-types-discards-qualifiers"
#endif

static oar_tensor *from(const float *v, int64_t n) { return oar_from_data(v, &n, 1, OAR_F32); }

static void test_scalars(void) {
    oar_scope_begin();
    const float v[4] = {1, -2, 4, 0.5f};
    oar_tensor *x = from(v, 4);
    for (int i = 0; i < 4; i++) {
        CHECK(t_at(oar_sub_scalar(x, 3), i) == (float)(v[i] - 3));
        CHECK(t_at(oar_rsub_scalar(x, 3), i) == (float)(3 - v[i]));
        CHECK(t_at(oar_div_scalar(x, 4), i) == (float)(v[i] / 4));
        CHECK(t_at(oar_rdiv_scalar(x, 2), i) == (float)(2 / v[i]));
        CHECK_NEAR(t_at(oar_rpow_scalar(x, 2), i), pow(2, v[i]), 1e-6);
        CHECK(t_at(oar_maximum_scalar(x, 0), i) == (v[i] > 0 ? v[i] : 0));
        CHECK(t_at(oar_minimum_scalar(x, 0), i) == (v[i] < 0 ? v[i] : 0));
        CHECK(t_at(oar_gt_scalar(x, 0.5), i) == (v[i] > 0.5f));
        CHECK(t_at(oar_ge_scalar(x, 0.5), i) == (v[i] >= 0.5f));
        CHECK(t_at(oar_lt_scalar(x, 1), i) == (v[i] < 1));
        CHECK(t_at(oar_le_scalar(x, 1), i) == (v[i] <= 1));
        CHECK(t_at(oar_eq_scalar(x, 4), i) == (v[i] == 4));
        CHECK(t_at(oar_ne_scalar(x, 4), i) == (v[i] != 4));
    }
    CHECK(oar_dtype_of(oar_gt_scalar(x, 0)) == OAR_BOOL);
    /* NaN stays NaN through maximum, as torch.clamp_min */
    float nan_v = NAN;
    CHECK(isnan(t_at(oar_maximum_scalar(from(&nan_v, 1), 0), 0)));
    /* gradients flow: d/dx sum(2 - x / 4) = -1/4 */
    oar_tensor *p = oar_clone(x);
    oar_set_requires_grad(p, true);
    CHECK(oar_backward(oar_sum(oar_rsub_scalar(oar_div_scalar(p, 4), 2), NULL, 0, false), NULL, false) == OAR_OK);
    CHECK(t_at(oar_grad_get(p), 0) == -0.25);
    /* integer tensors: exact, and a scalar the dtype cannot hold is refused */
    int64_t iv[3] = {3, 4, 5};
    oar_tensor *xi = oar_from_data(iv, (int64_t[]){3}, 1, OAR_I64);
    CHECK(t_at(oar_sub_scalar(xi, 3), 2) == 2 && oar_dtype_of(oar_sub_scalar(xi, 3)) == OAR_I64);
    CHECK(t_at(oar_eq_scalar(xi, 4), 1) == 1);
    CHECK_ERR(oar_eq_scalar(xi, 0.5), "eq_scalar: expected a scalar that i64 holds exactly, got 0.5");
    CHECK(oar_last_status() == OAR_ERR_DTYPE);
    CHECK(oar_sub_scalar(NULL, 1) == NULL);
    oar_scope_end();
}

static void test_accuracy(void) {
    oar_scope_begin();
    /* 4 samples, 3 classes; the targets' ranks are 1, 2, 3 and 1 (sample 3 ties: first max wins) */
    const float l[12] = {0.1f, 0.9f, 0.0f, 0.5f, 0.2f, 0.3f, 0.7f, 0.2f, 0.1f, 0.4f, 0.4f, 0.1f};
    const int64_t y[4] = {1, 2, 2, 0};
    oar_tensor *logits = oar_from_data(l, (int64_t[]){4, 3}, 2, OAR_F32);
    oar_tensor *target = oar_from_data(y, (int64_t[]){4}, 1, OAR_I64);
    double a1 = -1, a2 = -1, a3 = -1;
    CHECK(oar_item(oar_accuracy(logits, target, 1), &a1) == OAR_OK && a1 == 0.5);
    CHECK(oar_item(oar_accuracy(logits, target, 2), &a2) == OAR_OK && a2 == 0.75);
    CHECK(oar_item(oar_accuracy(logits, target, 3), &a3) == OAR_OK && a3 == 1.0);
    /* the same as argmax == target for k = 1 */
    oar_tensor *hit = oar_eq(oar_argmax(logits, 1, false), target);
    double by_argmax = 0;
    CHECK(oar_item(oar_mean(oar_cast(hit, OAR_F64), NULL, 0, false), &by_argmax) == OAR_OK && by_argmax == a1);
    /* i32 targets work; bad inputs are refused with what was expected */
    const int32_t y32[4] = {1, 2, 2, 0};
    CHECK(oar_item(oar_accuracy(logits, oar_from_data(y32, (int64_t[]){4}, 1, OAR_I32), 1), &a1) == OAR_OK &&
          a1 == 0.5);
    CHECK_ERR(oar_accuracy(logits, target, 4), "expected 1 <= k <= C = 3");
    CHECK_ERR(oar_accuracy(logits, oar_cast(target, OAR_F32), 1), "expected integer class indices");
    CHECK_ERR(oar_accuracy(logits, oar_zeros((int64_t[]){3}, 1, OAR_I64), 1),
              "expected logits [N, C] and target [N], got [4, 3] and [3]");
    oar_scope_end();
}

static const char *csv_path(char *buf, size_t size, const char *dir) {
    snprintf(buf, size, "%s/wide.csv", dir);
    return buf;
}

/* 20 features: more than NORMALIZE's 16 fixed slots. */
enum { NF = 20, NS = 5 };

static void test_csv_tensors_and_normalize(const char *dir) {
    oar_scope_begin();
    char path[600];
    FILE *f = fopen(csv_path(path, sizeof path, dir), "w");
    CHECK(f != NULL);
    if (!f) return;
    for (int j = 0; j < NF; j++) fprintf(f, "f%d,", j);
    fprintf(f, "label\n");
    for (int i = 0; i < NS; i++) {
        for (int j = 0; j < NF; j++) fprintf(f, "%d,", i * 100 + j);
        fprintf(f, "%d\n", i % 3);
    }
    fclose(f);
    oar_dataset *d = oar_dataset_csv(path, "label");
    CHECK(d != NULL);
    oar_tensor *x = NULL, *y = NULL;
    CHECK(oar_dataset_to_tensors(d, &x, &y) == OAR_OK);
    CHECK(oar_ndim(x) == 2 && oar_size(x, 0) == NS && oar_size(x, 1) == NF && oar_dtype_of(x) == OAR_F32);
    CHECK(oar_ndim(y) == 1 && oar_size(y, 0) == NS && oar_dtype_of(y) == OAR_I64);
    CHECK(t_at(x, 3 * NF + 7) == 307 && t_at(y, 4) == 1);
    CHECK_ERR(oar_dataset_to_tensors(d, &x, NULL), "dataset_to_tensors: expected a dataset and two output pointers");

    /* NORMALIZE with 20 per-feature means and stds */
    double means[NF], stds[NF];
    for (int j = 0; j < NF; j++) means[j] = j, stds[j] = 2 + j;
    oar_transform tf = {.kind = OAR_TF_NORMALIZE, .n_channels = NF, .means = means, .stds = stds};
    oar_loader *l = oar_loader_new(d, &(oar_loader_opts){.batch_size = NS, .transforms = &tf, .n_transforms = 1});
    CHECK(l != NULL);
    for (int j = 0; j < NF; j++) means[j] = stds[j] = 0; /* the loader keeps its own copy */
    oar_tensor *bx = NULL, *by = NULL;
    CHECK(oar_loader_next(l, &bx, &by, NULL));
    bool ok = bx != NULL;
    for (int i = 0; ok && i < NS; i++)
        for (int j = 0; j < NF; j++) ok &= t_at(bx, i * NF + j) == (float)((float)(i * 100) / (float)(2 + j));
    CHECK(ok);
    oar_loader_free(l);
    /* without means/stds, more than 16 is refused with the remedy */
    oar_transform narrow = {.kind = OAR_TF_NORMALIZE, .n_channels = NF};
    CHECK_ERR(oar_loader_new(d, &(oar_loader_opts){.transforms = &narrow, .n_transforms = 1}),
              "20 channels do not fit mean[16]/std[16]; pass them through means and stds");
    oar_transform half = {.kind = OAR_TF_NORMALIZE, .n_channels = NF, .means = means};
    CHECK_ERR(oar_loader_new(d, &(oar_loader_opts){.transforms = &half, .n_transforms = 1}),
              "expected both means and stds, or neither");
    oar_dataset_free(d);
    oar_scope_end();
}

/* ---- describe through a const module */
typedef struct scaler {
    double factor;
} scaler;

static oar_status scaler_forward(oar_module *self, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    const scaler *s = oar_module_state(self);
    out[0] = oar_mul_scalar(in[0], s->factor);
    return out[0] ? OAR_OK : oar_last_status();
}

static int scaler_describe(const oar_module *self, char *buf, size_t size) {
    const scaler *s = oar_module_state(self); /* a const module: no cast needed */
    return snprintf(buf, size, "factor=%g", s->factor);
}

static const oar_module_ops scaler_ops = {"Scaler", scaler_forward, NULL, scaler_describe};

static void test_describe_const(void) {
    scaler s = {2.5};
    oar_module *m = oar_module_new(&scaler_ops, &s);
    char buf[128];
    oar_module_format(m, buf, sizeof buf);
    CHECK(!strcmp(buf, "Scaler(factor=2.5)"));
    oar_module_free(m);
}

static void test_scheduler_next(void) {
    oar_module *m = oar_nn_linear(2, 2, false);
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = 1;
    oar_optimizer *o = oar_optimizer_for(m, &oo);
    oar_sched_opts so = oar_sched_defaults(OAR_SCHED_COSINE);
    so.t_max = 4;
    oar_scheduler *s = oar_scheduler_new(o, &so);
    CHECK(oar_scheduler_next(s) == OAR_OK && oar_scheduler_next(s) == OAR_OK);
    CHECK(oar_scheduler_t(s) == 2 && fabs(oar_scheduler_lr(s, 0) - 0.5) < 1e-15);
    oar_scheduler_free(s);
    oar_optimizer_free(o);
    oar_module_free(m);
}

/* The transformer layers' options, printing and errors (their numbers: test_golden_transformer). */
static void test_transformer_layers(void) {
    oar_scope_begin();
    oar_transformer_opts d = oar_transformer_defaults(16, 4);
    CHECK(d.dim_feedforward == 2048 && d.dropout == 0.1 && d.activation == OAR_ACT_RELU && d.layer_norm_eps == 1e-5 &&
          !d.batch_first && !d.norm_first);
    d.dim_feedforward = 32;
    oar_module *enc = oar_nn_transformer_encoder_layer(&d);
    CHECK(enc && oar_module_num_parameters(enc) == 12);
    char buf[4096];
    oar_module_format(enc, buf, sizeof buf);
    CHECK(strstr(buf, "TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32, dropout=0.1, activation=relu"));
    CHECK(strstr(buf, "(linear1): Linear(in_features=16, out_features=32, bias=true)"));
    CHECK(strstr(buf, "(norm2): LayerNorm("));
    /* sequence-first [L, N, E] in and out; a wrong d_model is refused with the layout expected */
    oar_tensor *x = oar_randn((int64_t[]){5, 2, 16}, 3, OAR_F32);
    oar_tensor *y = oar_forward(enc, x);
    CHECK(y && oar_ndim(y) == 3 && oar_size(y, 0) == 5 && oar_size(y, 1) == 2 && oar_size(y, 2) == 16);
    CHECK_ERR(oar_forward(enc, oar_randn((int64_t[]){5, 2, 8}, 3, OAR_F32)),
              "TransformerEncoderLayer: expected src of shape [L, N, E] (or [L, E]) with d_model = 16, got [5, 2, 8]");
    oar_module *dec = oar_nn_transformer_decoder_layer(&d);
    CHECK(dec && oar_module_num_parameters(dec) == 18 && oar_module_get(dec, "multihead_attn.out_proj.weight"));
    oar_tensor *in[2] = {x, oar_randn((int64_t[]){3, 2, 16}, 3, OAR_F32)}, *out[1] = {0};
    CHECK(oar_forward_n(dec, in, 2, out, 1) == OAR_OK && oar_size(out[0], 0) == 5);
    CHECK_ERR(oar_forward(dec, x), "TransformerDecoderLayer: expected 2 inputs (tgt, memory)");
    oar_transformer_opts bad = d;
    bad.nhead = 3;
    CHECK_ERR(oar_nn_transformer_encoder_layer(&bad), "expected d_model >= 1 divisible by nhead >= 1, got d_model=16, nhead=3");
    bad = d;
    bad.activation = OAR_ACT_TANH;
    CHECK_ERR(oar_nn_transformer_decoder_layer(&bad), "expected activation OAR_ACT_RELU or OAR_ACT_GELU");
    CHECK_ERR(oar_nn_transformer_encoder_layer(NULL), "start from oar_transformer_defaults");
    oar_module_free(enc);
    oar_module_free(dec);
    oar_scope_end();
}

int main(void) {
    char dir[512];
    if (!io_mkdtemp(dir, sizeof dir)) return 1;
    test_scalars();
    test_accuracy();
    test_csv_tensors_and_normalize(dir);
    test_describe_const();
    test_scheduler_next();
    test_transformer_layers();
    io_rmtree(dir);
    return test_summary("test_user_pieces");
}
