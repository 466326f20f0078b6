/* MultiheadAttention, LSTM and GRU: parameter names, shapes and initialization as torch has
 * them; output shapes in every layout; the causal mask really hides the future; carried
 * state (two halves with (h, c) handed on equal the whole sequence, also past the 64-step
 * blocks of the sequence split); dropout only in training; gradients and double backward
 * against finite differences; bad inputs rejected with a message. Values against torch are
 * in test_golden_rnn.c. */
#include "test_util.h"

/* Largest |a - b| over all elements (shapes must match; INFINITY if they do not). */
static double max_diff(oar_tensor *a, oar_tensor *b) {
    if (!a || !b || oar_ndim(a) != oar_ndim(b) || oar_numel(a) != oar_numel(b)) return INFINITY;
    for (int d = 0; d < oar_ndim(a); d++)
        if (oar_size(a, d) != oar_size(b, d)) return INFINITY;
    int64_t n = oar_numel(a);
    double *x = malloc(sizeof(double) * (size_t)n), *y = malloc(sizeof(double) * (size_t)n);
    oar_copy_to_buffer(a, x, sizeof(double) * (size_t)n, OAR_F64);
    oar_copy_to_buffer(b, y, sizeof(double) * (size_t)n, OAR_F64);
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(x[i] - y[i]));
    free(x);
    free(y);
    return m;
}

static bool has_shape(oar_tensor *t, int ndim, const int64_t *shape) {
    if (!t || oar_ndim(t) != ndim) return false;
    for (int d = 0; d < ndim; d++)
        if (oar_size(t, d) != shape[d]) return false;
    return true;
}
#define SHAPE(t, ...) has_shape(t, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

static oar_tensor *randn(oar_dtype dt, int ndim, const int64_t *shape) { return oar_cast(oar_randn(shape, ndim, OAR_F32), dt); }
#define RANDN(dt, ...) randn(dt, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

/* Every parameter cast to dt (a fresh leaf), for f64 gradient checks. */
static void params_to(oar_module *m, oar_dtype dt) {
    for (int i = 0; i < oar_module_num_parameters(m); i++) {
        const char *name;
        oar_tensor *p = oar_module_parameter(m, i, &name);
        oar_tensor *c = oar_detach(oar_cast(p, dt));
        oar_module_set(m, name, c);
    }
}

static bool all_within(oar_tensor *t, double bound) {
    for (int64_t i = 0; i < oar_numel(t); i++)
        if (fabs(t_at(t, i)) > bound) return false;
    return true;
}

/* ---------------------------------------------------------------- structure */

static void test_mha_structure(void) {
    oar_module *m = oar_nn_multihead_attention(8, 2, true, false, 0.0);
    CHECK(m && !strcmp(oar_module_type(m), "MultiheadAttention"));
    static const char *const names[4] = {"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"};
    static const int64_t shapes[4][2] = {{24, 8}, {24, 0}, {8, 8}, {8, 0}};
    CHECK(oar_module_num_parameters(m) == 4);
    for (int i = 0; i < 4 && oar_module_num_parameters(m) == 4; i++) {
        const char *name;
        oar_tensor *p = oar_module_parameter(m, i, &name);
        CHECK(!strcmp(name, names[i]));
        CHECK(has_shape(p, shapes[i][1] ? 2 : 1, shapes[i]));
        CHECK(oar_requires_grad(p) && oar_dtype_of(p) == OAR_F32);
    }
    /* xavier_uniform on in_proj (bound sqrt(6 / (8 + 24))), Linear's U(±1/sqrt(8)) on out_proj */
    oar_tensor *w = oar_module_get(m, "in_proj_weight");
    CHECK(all_within(w, sqrt(6.0 / 32)) && !all_within(w, 0.5 * sqrt(6.0 / 32)));
    CHECK(all_within(oar_module_get(m, "out_proj.weight"), 1 / sqrt(8.0)));
    CHECK(all_within(oar_module_get(m, "in_proj_bias"), 0) && all_within(oar_module_get(m, "out_proj.bias"), 0));
    char buf[512];
    oar_module_format(m, buf, sizeof buf);
    CHECK(strstr(buf, "MultiheadAttention(embed_dim=8, heads=2, bias=true, causal=false, dropout=0") != NULL);
    CHECK(strstr(buf, "(out_proj): Linear(in_features=8, out_features=8, bias=true)") != NULL); /* as every Linear */
    oar_module_free(m);

    m = oar_nn_multihead_attention(6, 3, false, true, 0.1);
    CHECK(m && oar_module_num_parameters(m) == 2);
    const char *name = NULL;
    oar_module_parameter(m, 1, &name);
    CHECK(name && !strcmp(name, "out_proj.weight"));
    oar_module_free(m);
}

static void test_rnn_structure(void) {
    for (int kind = 0; kind < 2; kind++) {
        oar_module *m = kind ? oar_nn_gru(3, 4, 2, false) : oar_nn_lstm(3, 4, 2, false);
        int64_t G = kind ? 12 : 16;
        CHECK(m && !strcmp(oar_module_type(m), kind ? "GRU" : "LSTM"));
        CHECK(oar_module_num_parameters(m) == 8);
        static const char *const names[8] = {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                                             "weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1"};
        const int64_t shapes[8][2] = {{G, 3}, {G, 4}, {G, 0}, {G, 0}, {G, 4}, {G, 4}, {G, 0}, {G, 0}};
        for (int i = 0; i < 8 && oar_module_num_parameters(m) == 8; i++) {
            const char *name;
            oar_tensor *p = oar_module_parameter(m, i, &name);
            CHECK(!strcmp(name, names[i]));
            CHECK(has_shape(p, shapes[i][1] ? 2 : 1, shapes[i]));
            CHECK(all_within(p, 0.5) && !all_within(p, 0.25)); /* U(-1/sqrt(4), 1/sqrt(4)) */
        }
        char buf[256];
        oar_module_format(m, buf, sizeof buf);
        CHECK(strstr(buf, kind ? "GRU(input=3, hidden=4, layers=2, batch_first=false)"
                               : "LSTM(input=3, hidden=4, layers=2, batch_first=false)") != NULL);
        oar_module_free(m);
    }
}

/* ---------------------------------------------------------------- attention */

static void test_mha_shapes(void) {
    oar_module *m = oar_nn_multihead_attention(8, 2, true, false, 0.0);
    oar_tensor *x = RANDN(OAR_F32, 2, 5, 8);
    CHECK(SHAPE(oar_forward(m, x), 2, 5, 8));
    oar_tensor *out[2];
    CHECK(oar_forward_n(m, &x, 1, out, 2) == OAR_OK);
    CHECK(SHAPE(out[0], 2, 5, 8) && SHAPE(out[1], 2, 5, 5));
    /* averaged weights are still distributions over keys */
    oar_tensor *rows = oar_sum(out[1], (const int[]){-1}, 1, false);
    CHECK(max_diff(rows, oar_ones_like(rows)) < 1e-6);
    /* cross-attention with another length */
    oar_tensor *qkv[3] = {RANDN(OAR_F32, 2, 3, 8), RANDN(OAR_F32, 2, 7, 8), RANDN(OAR_F32, 2, 7, 8)};
    CHECK(oar_forward_n(m, qkv, 3, out, 2) == OAR_OK);
    CHECK(SHAPE(out[0], 2, 3, 8) && SHAPE(out[1], 2, 3, 7));
    /* self-attention given as three equal inputs is the same as one input */
    oar_tensor *same[3] = {x, x, x}, *y1 = oar_forward(m, x), *y3 = NULL;
    CHECK(oar_forward_n(m, same, 3, &y3, 1) == OAR_OK);
    CHECK(max_diff(y1, y3) < 1e-6);
    /* unbatched [L, E] */
    oar_tensor *u = RANDN(OAR_F32, 5, 8);
    CHECK(oar_forward_n(m, &u, 1, out, 2) == OAR_OK);
    CHECK(SHAPE(out[0], 5, 8) && SHAPE(out[1], 5, 5));
    oar_tensor *ub = oar_forward(m, oar_unsqueeze(u, 0));
    CHECK(max_diff(out[0], oar_squeeze(ub, 0)) < 1e-6);
    oar_module_free(m);
}

/* Output at t must not depend on inputs after t. */
static void test_mha_causal(void) {
    oar_module *m = oar_nn_multihead_attention(8, 4, true, true, 0.0);
    oar_tensor *x = RANDN(OAR_F32, 2, 6, 8);
    oar_tensor *x2 = oar_clone(x);
    float *p = oar_data(x2);
    for (int n = 0; n < 2; n++)
        for (int t = 3; t < 6; t++)
            for (int e = 0; e < 8; e++) p[(n * 6 + t) * 8 + e] += 1.0f + (float)e;
    oar_tensor *o1[2], *o2[2];
    CHECK(oar_forward_n(m, &x, 1, o1, 2) == OAR_OK && oar_forward_n(m, &x2, 1, o2, 2) == OAR_OK);
    CHECK(max_diff(oar_slice(o1[0], 1, 0, 3, 1), oar_slice(o2[0], 1, 0, 3, 1)) == 0);
    CHECK(max_diff(oar_slice(o1[0], 1, 3, 6, 1), oar_slice(o2[0], 1, 3, 6, 1)) > 1e-3);
    /* the weights of future keys are exactly zero */
    CHECK(max_diff(oar_triu(o1[1], 1), oar_zeros_like(o1[1])) == 0);
    CHECK(max_diff(oar_tril(o1[1], 0), oar_zeros_like(o1[1])) > 0);
    /* gradients do not flow backwards in time either: d out[:, 1] / d x[:, 2:] = 0 */
    oar_tensor *xg = oar_clone(x), *g = NULL;
    oar_set_requires_grad(xg, true);
    oar_tensor *loss = oar_sum(oar_slice(oar_forward(m, xg), 1, 1, 2, 1), NULL, 0, false);
    CHECK(oar_grad(&loss, 1, NULL, &xg, 1, &g, NULL) == OAR_OK);
    CHECK(max_diff(oar_slice(g, 1, 2, 6, 1), oar_zeros_like(oar_slice(g, 1, 2, 6, 1))) == 0);
    CHECK(max_diff(oar_slice(g, 1, 0, 2, 1), oar_zeros_like(oar_slice(g, 1, 0, 2, 1))) > 0);
    oar_release(g);
    oar_module_free(m);
}

static void test_mha_dropout(void) {
    oar_module *m = oar_nn_multihead_attention(8, 2, true, false, 0.5);
    oar_module *plain = oar_nn_multihead_attention(8, 2, true, false, 0.0);
    for (int i = 0; i < oar_module_num_parameters(m); i++) {
        const char *name;
        oar_tensor *p = oar_module_parameter(m, i, &name);
        oar_module_set(plain, name, p);
    }
    oar_tensor *x = RANDN(OAR_F32, 2, 5, 8);
    oar_module_train(m, false);
    CHECK(!oar_module_is_training(m) && !oar_module_is_training(oar_module_child(m, "out_proj")));
    oar_tensor *e1 = oar_forward(m, x), *e2 = oar_forward(m, x);
    CHECK(max_diff(e1, e2) == 0);                    /* eval: deterministic */
    CHECK(max_diff(e1, oar_forward(plain, x)) == 0); /* and no dropout at all */
    oar_module_train(m, true);
    oar_tensor *out[2];
    CHECK(oar_forward_n(m, &x, 1, out, 2) == OAR_OK);
    CHECK(max_diff(out[0], e1) > 1e-3); /* training drops weights */
    /* dropped weights are 0, kept ones scaled by 2: rows no longer all sum to 1 */
    oar_tensor *rows = oar_sum(out[1], (const int[]){-1}, 1, false);
    CHECK(max_diff(rows, oar_ones_like(rows)) > 1e-3);
    oar_module_free(m);
    oar_module_free(plain);
}

/* ---------------------------------------------------------------- recurrent layers */

typedef oar_module *(*rnn_ctor)(int64_t, int64_t, int, bool);

static void test_rnn_shapes(void) {
    for (int kind = 0; kind < 2; kind++) {
        rnn_ctor make = kind ? oar_nn_gru : oar_nn_lstm;
        int n = kind ? 2 : 3;
        oar_module *m = make(3, 4, 2, false), *mb = make(3, 4, 2, true);
        oar_tensor *x = RANDN(OAR_F32, 5, 2, 3), *out[3] = {NULL, NULL, NULL}, *outb[3] = {NULL, NULL, NULL};
        CHECK(oar_forward_n(m, &x, 1, out, n) == OAR_OK);
        CHECK(SHAPE(out[0], 5, 2, 4) && SHAPE(out[1], 2, 2, 4) && (kind || SHAPE(out[2], 2, 2, 4)));
        CHECK(SHAPE(oar_forward(m, x), 5, 2, 4));
        /* the top layer's last state is the output's last step */
        CHECK(max_diff(oar_squeeze(oar_slice(out[0], 0, 4, 5, 1), 0), oar_squeeze(oar_slice(out[1], 0, 1, 2, 1), 0)) == 0);
        /* batch_first: the same numbers with the first two dims swapped */
        for (int i = 0; i < oar_module_num_parameters(m); i++) {
            const char *name;
            oar_tensor *p = oar_module_parameter(m, i, &name);
            oar_module_set(mb, name, p);
        }
        oar_tensor *xb = oar_contiguous(oar_transpose(x, 0, 1));
        CHECK(oar_forward_n(mb, &xb, 1, outb, n) == OAR_OK);
        CHECK(SHAPE(outb[0], 2, 5, 4) && SHAPE(outb[1], 2, 2, 4));
        CHECK(max_diff(outb[0], oar_transpose(out[0], 0, 1)) < 1e-6 && max_diff(outb[1], out[1]) < 1e-6);
        CHECK(oar_is_contiguous(outb[0]));
        /* unbatched [T, I]: states [layers, H] */
        oar_tensor *u = RANDN(OAR_F32, 5, 3), *h0 = RANDN(OAR_F32, 2, 4), *in[3] = {u, h0, h0};
        CHECK(oar_forward_n(m, in, n, out, n) == OAR_OK);
        CHECK(SHAPE(out[0], 5, 4) && SHAPE(out[1], 2, 4) && (kind || SHAPE(out[2], 2, 4)));
        oar_tensor *inb[3] = {oar_unsqueeze(u, 1), oar_unsqueeze(h0, 1), oar_unsqueeze(h0, 1)};
        CHECK(oar_forward_n(m, inb, n, outb, n) == OAR_OK);
        CHECK(max_diff(out[0], oar_squeeze(outb[0], 1)) < 1e-6 && max_diff(out[1], oar_squeeze(outb[1], 1)) < 1e-6);
        /* inference without autograd gives the same numbers and no graph */
        oar_tensor *y_grad = oar_forward(m, x);
        oar_no_grad_begin();
        oar_tensor *y_nograd = oar_forward(m, x);
        oar_no_grad_end();
        CHECK(max_diff(y_grad, y_nograd) == 0 && oar_requires_grad(y_grad) && !oar_requires_grad(y_nograd));
        /* explicit zero states equal NULL states */
        oar_tensor *z = oar_zeros((int64_t[]){2, 2, 4}, 3, OAR_F32), *inz[3] = {x, z, z}, *inn[3] = {x, NULL, NULL};
        CHECK(oar_forward_n(m, inz, n, out, n) == OAR_OK && oar_forward_n(m, inn, n, outb, n) == OAR_OK);
        CHECK(max_diff(out[0], outb[0]) < 1e-6 && max_diff(out[1], outb[1]) < 1e-6);
        if (!kind) { /* LSTM: only one of the states given */
            oar_tensor *s = RANDN(OAR_F32, 2, 2, 4), *in_c[3] = {x, NULL, s}, *in_cz[3] = {x, z, s};
            CHECK(oar_forward_n(m, in_c, 3, out, 3) == OAR_OK && oar_forward_n(m, in_cz, 3, outb, 3) == OAR_OK);
            CHECK(max_diff(out[0], outb[0]) < 1e-6 && max_diff(out[2], outb[2]) < 1e-6);
            oar_tensor *in_h[3] = {x, s, NULL}, *in_hz[3] = {x, s, z};
            CHECK(oar_forward_n(m, in_h, 3, out, 3) == OAR_OK && oar_forward_n(m, in_hz, 3, outb, 3) == OAR_OK);
            CHECK(max_diff(out[0], outb[0]) < 1e-6 && max_diff(out[2], outb[2]) < 1e-6);
        }
        oar_module_free(m);
        oar_module_free(mb);
    }
}

/* Running [0, cut) and then [cut, T) with the state handed on equals running [0, T). */
static void check_carry(int kind, int64_t T, int64_t cut, int layers, bool batch_first) {
    rnn_ctor make = kind ? oar_nn_gru : oar_nn_lstm;
    int n = kind ? 2 : 3, td = batch_first ? 1 : 0;
    oar_module *m = make(3, 5, layers, batch_first);
    oar_tensor *x = batch_first ? RANDN(OAR_F32, 2, T, 3) : RANDN(OAR_F32, T, 2, 3);
    oar_tensor *h0 = RANDN(OAR_F32, layers, 2, 5), *c0 = RANDN(OAR_F32, layers, 2, 5);
    oar_tensor *whole[3], *a[3], *b[3];
    oar_tensor *in[3] = {x, h0, c0};
    CHECK(oar_forward_n(m, in, n, whole, n) == OAR_OK);
    oar_tensor *in_a[3] = {oar_slice(x, td, 0, cut, 1), h0, c0};
    CHECK(oar_forward_n(m, in_a, n, a, n) == OAR_OK);
    oar_tensor *in_b[3] = {oar_slice(x, td, cut, T, 1), a[1], kind ? NULL : a[2]};
    CHECK(oar_forward_n(m, in_b, n, b, n) == OAR_OK);
    double d = fmax(max_diff(oar_slice(whole[0], td, 0, cut, 1), a[0]), max_diff(oar_slice(whole[0], td, cut, T, 1), b[0]));
    d = fmax(d, max_diff(whole[1], b[1]));
    if (!kind) d = fmax(d, max_diff(whole[2], b[2]));
    if (!(d < 1e-5)) fprintf(stderr, "carry %s T=%lld cut=%lld: differs by %g\n", kind ? "GRU" : "LSTM", (long long)T, (long long)cut, d);
    CHECK(d < 1e-5);
    oar_module_free(m);
}

static void test_rnn_carry(void) {
    check_carry(0, 8, 4, 2, false);
    check_carry(1, 8, 3, 2, true);
    check_carry(0, 9, 1, 1, true);
    /* past one block of 64 steps (the sequence is split and joined in blocks) */
    check_carry(0, 130, 65, 2, false);
    check_carry(1, 70, 64, 1, false);
}

/* d sum(y * w) / d x for sequences longer than a block reaches the first step. */
static void test_rnn_long_gradient(void) {
    oar_module *m = oar_nn_lstm(2, 3, 1, false);
    oar_tensor *x = RANDN(OAR_F32, 130, 1, 2), *g = NULL;
    oar_set_requires_grad(x, true);
    oar_tensor *loss = oar_sum(oar_forward(m, x), NULL, 0, false);
    CHECK(oar_grad(&loss, 1, NULL, &x, 1, &g, NULL) == OAR_OK);
    CHECK(SHAPE(g, 130, 1, 2));
    CHECK(g && fabs(t_at(g, 0)) > 0 && fabs(t_at(g, 259)) > 0);
    oar_release(g);
    oar_module_free(m);
}

/* ---------------------------------------------------------------- gradients, f64 */

typedef struct fd_case {
    oar_module *m;
    oar_tensor *in[3];
    int n_in;
    oar_tensor *w; /* weights of the output in the loss */
} fd_case;

static oar_tensor *output0(fd_case *c) {
    oar_tensor *y = NULL;
    return oar_forward_n(c->m, c->in, c->n_in, &y, 1) == OAR_OK ? y : NULL;
}

static double value_of(oar_tensor *t) {
    double v = NAN;
    if (t) oar_item(t, &v);
    return v;
}

/* L(p) = sum(y * w); G(p) = sum((dL/dx)^2): analytic d/dp against central differences. */
static double loss_value(fd_case *c) { return value_of(oar_sum(oar_mul(output0(c), c->w), NULL, 0, false)); }

static double gradsq_value(fd_case *c, bool create, oar_tensor **keep) {
    oar_tensor *loss = oar_sum(oar_mul(output0(c), c->w), NULL, 0, false), *g = NULL;
    oar_grad_opts o = {.create_graph = create};
    if (oar_grad(&loss, 1, NULL, &c->in[0], 1, &g, &o) != OAR_OK) return NAN;
    oar_tensor *gg = oar_sum(oar_square(g), NULL, 0, false);
    oar_release(g);
    if (keep) *keep = gg;
    return value_of(gg);
}

static void check_fd(const char *what, fd_case *c, const char *pname) {
    oar_tensor *p = oar_module_get(c->m, pname), *gp = NULL, *gx = NULL, *ggp = NULL;
    /* first order, w.r.t. the input and a parameter */
    oar_tensor *loss = oar_sum(oar_mul(output0(c), c->w), NULL, 0, false);
    oar_tensor *wrt[2] = {c->in[0], p}, *g[2] = {NULL, NULL};
    CHECK(oar_grad(&loss, 1, NULL, wrt, 2, g, NULL) == OAR_OK);
    gx = g[0];
    gp = g[1];
    /* second order: d sum((dL/dx)^2) / dp */
    oar_tensor *gg = NULL;
    gradsq_value(c, true, &gg);
    CHECK(gg && oar_grad(&gg, 1, NULL, &p, 1, &ggp, NULL) == OAR_OK);
    const double eps = 1e-6;
    double worst = 0;
    for (int k = 0; k < 2; k++) {
        oar_tensor *t = k ? p : c->in[0];
        double *d = oar_data(t);
        for (int64_t i = 0; i < oar_numel(t); i += 1 + oar_numel(t) / 7) {
            double keep = d[i];
            d[i] = keep + eps;
            double lp = loss_value(c), qp = k ? gradsq_value(c, false, NULL) : 0;
            d[i] = keep - eps;
            double lm = loss_value(c), qm = k ? gradsq_value(c, false, NULL) : 0;
            d[i] = keep;
            double fd = (lp - lm) / (2 * eps), an = t_at(k ? gp : gx, i);
            worst = fmax(worst, fabs(fd - an) / (1 + fabs(an)));
            if (k) {
                double fd2 = (qp - qm) / (2 * eps), an2 = t_at(ggp, i);
                worst = fmax(worst, fabs(fd2 - an2) / (1 + fabs(an2)));
            }
        }
    }
    printf("%s: first and second order gradients vs central differences: worst %.2g\n", what, worst);
    CHECK(worst < 1e-6);
    oar_release(gx);
    oar_release(gp);
    oar_release(ggp);
}

static void test_gradients(void) {
    oar_module *lstm = oar_nn_lstm(2, 3, 2, true), *gru = oar_nn_gru(2, 3, 2, false);
    oar_module *mha = oar_nn_multihead_attention(4, 2, true, true, 0.0);
    params_to(lstm, OAR_F64);
    params_to(gru, OAR_F64);
    params_to(mha, OAR_F64);
    /* nonzero biases so every path carries a gradient */
    oar_init_normal_(oar_module_get(mha, "in_proj_bias"), 0, 0.5);
    oar_init_normal_(oar_module_get(mha, "out_proj.bias"), 0, 0.5);
    fd_case c[3] = {
        {lstm, {RANDN(OAR_F64, 2, 4, 2), RANDN(OAR_F64, 2, 2, 3), RANDN(OAR_F64, 2, 2, 3)}, 3, RANDN(OAR_F64, 2, 4, 3)},
        {gru, {RANDN(OAR_F64, 4, 2, 2), RANDN(OAR_F64, 2, 2, 3)}, 2, RANDN(OAR_F64, 4, 2, 3)},
        {mha, {RANDN(OAR_F64, 2, 3, 4)}, 1, RANDN(OAR_F64, 2, 3, 4)},
    };
    for (int k = 0; k < 3; k++) oar_set_requires_grad(c[k].in[0], true);
    check_fd("LSTM", &c[0], "weight_hh_l0");
    check_fd("GRU", &c[1], "bias_hh_l0");
    check_fd("MultiheadAttention", &c[2], "in_proj_weight");
    oar_module_free(lstm);
    oar_module_free(gru);
    oar_module_free(mha);
}

/* ---------------------------------------------------------------- bad input */

static void test_bad_input(void) {
    CHECK_ERR(oar_nn_multihead_attention(10, 3, true, false, 0), "MultiheadAttention: expected embed_dim >= 1 divisible by heads");
    CHECK(oar_nn_multihead_attention(10, 3, true, false, 0) == NULL);
    CHECK_ERR(oar_nn_multihead_attention(8, 0, true, false, 0), "got embed_dim=8, heads=0");
    CHECK_ERR(oar_nn_multihead_attention(8, 2, true, false, 1.5), "MultiheadAttention: expected dropout in [0, 1], got 1.5");
    oar_module *m = oar_nn_multihead_attention(8, 2, true, false, 0.0);
    oar_tensor *out[3];
    CHECK_ERR(oar_forward(m, RANDN(OAR_F32, 2, 5, 6)), "MultiheadAttention: expected query of shape [N, L, E] with embed_dim 8");
    CHECK_ERR(oar_forward(m, RANDN(OAR_F32, 1, 2, 5, 8)), "got [1, 2, 5, 8]");
    CHECK_ERR(oar_forward(m, RANDN(OAR_F64, 2, 5, 8)), "MultiheadAttention: expected query of dtype f32 (the parameters' dtype), got f64");
    oar_tensor *q = RANDN(OAR_F32, 2, 5, 8);
    oar_tensor *kb[3] = {q, RANDN(OAR_F32, 3, 5, 8), RANDN(OAR_F32, 3, 5, 8)};
    CHECK_ERR(oar_forward_n(m, kb, 3, out, 1), "expected query, key and value with one batch size, got [2, 5, 8], [3, 5, 8]");
    oar_tensor *kl[3] = {q, RANDN(OAR_F32, 2, 4, 8), RANDN(OAR_F32, 2, 6, 8)};
    CHECK_ERR(oar_forward_n(m, kl, 3, out, 1), "expected key and value with one length S, got [2, 4, 8] and [2, 6, 8]");
    oar_tensor *kd[3] = {q, RANDN(OAR_F32, 4, 8), RANDN(OAR_F32, 4, 8)};
    CHECK_ERR(oar_forward_n(m, kd, 3, out, 1), "expected key of shape [N, L, E]");
    CHECK_ERR(oar_forward_n(m, kd, 2, out, 1), "MultiheadAttention: expected 1 input (self-attention) or 3");
    CHECK_ERR(oar_forward_n(m, &q, 1, out, 3), "MultiheadAttention: expected 1 output, or 2");
    CHECK_ERR(oar_forward(m, RANDN(OAR_F32, 2, 0, 8)), "MultiheadAttention: expected a non-empty query");
    oar_clear_error();
    CHECK(oar_forward(m, NULL) == NULL && strstr(oar_last_error(), "expected a query tensor, got NULL"));
    /* a NULL from a failed op keeps that op's error */
    CHECK_ERR(oar_forward(m, oar_matmul(q, q)), "matmul");
    oar_module_free(m);

    CHECK_ERR(oar_nn_lstm(0, 4, 1, false), "LSTM: expected input >= 1, hidden >= 1 and layers >= 1, got input=0");
    CHECK_ERR(oar_nn_gru(3, 4, 0, false), "GRU: expected input >= 1, hidden >= 1 and layers >= 1, got input=3, hidden=4, layers=0");
    oar_module *l = oar_nn_lstm(3, 4, 2, false), *g = oar_nn_gru(3, 4, 2, true);
    CHECK_ERR(oar_forward(l, RANDN(OAR_F32, 5, 2, 7)), "LSTM: expected x of shape [T, N, I] with 3 input features, got [5, 2, 7]");
    CHECK_ERR(oar_forward(g, RANDN(OAR_F32, 5, 2, 7)), "GRU: expected x of shape [N, T, I] with 3 input features");
    CHECK_ERR(oar_forward(l, RANDN(OAR_F32, 1, 5, 2, 3)), "got [1, 5, 2, 3]");
    CHECK_ERR(oar_forward(l, RANDN(OAR_F32, 0, 2, 3)), "LSTM: expected at least one step, got x of shape [0, 2, 3]");
    CHECK_ERR(oar_forward(l, RANDN(OAR_F64, 5, 2, 3)), "LSTM: expected x of dtype f32 (the parameters' dtype), got f64");
    oar_tensor *x = RANDN(OAR_F32, 5, 2, 3);
    oar_tensor *bad_h[3] = {x, RANDN(OAR_F32, 1, 2, 4), NULL};
    CHECK_ERR(oar_forward_n(l, bad_h, 3, out, 3), "LSTM: expected h0 of shape [2, 2, 4] (layers, batch, hidden), got [1, 2, 4]");
    oar_tensor *bad_c[3] = {x, NULL, RANDN(OAR_F32, 2, 3, 4)};
    CHECK_ERR(oar_forward_n(l, bad_c, 3, out, 3), "LSTM: expected c0 of shape [2, 2, 4] (layers, batch, hidden), got [2, 3, 4]");
    oar_tensor *bad_dt[3] = {x, RANDN(OAR_F64, 2, 2, 4), NULL};
    CHECK_ERR(oar_forward_n(l, bad_dt, 2, out, 1), "LSTM: expected h0 of dtype f32");
    oar_tensor *u_h[2] = {RANDN(OAR_F32, 5, 3), RANDN(OAR_F32, 2, 2, 4)};
    CHECK_ERR(oar_forward_n(l, u_h, 2, out, 2), "LSTM: expected h0 of shape [2, 4] (layers, hidden), got [2, 2, 4]");
    oar_tensor *four[4] = {x, NULL, NULL, NULL};
    CHECK_ERR(oar_forward_n(l, four, 4, out, 1), "LSTM: expected 1 to 3 inputs (x, h0, c0), got 4");
    CHECK_ERR(oar_forward_n(g, four, 3, out, 1), "GRU: expected 1 to 2 inputs (x, h0), got 3");
    CHECK_ERR(oar_forward_n(g, four, 1, out, 3), "GRU: expected 1 to 2 outputs (y, h_n), got 3");
    oar_clear_error();
    CHECK(oar_forward(l, NULL) == NULL && strstr(oar_last_error(), "LSTM: expected an input tensor x, got NULL"));
    oar_module_free(l);
    oar_module_free(g);
}

int main(void) {
    oar_manual_seed(7);
    oar_scope_begin();
    test_mha_structure();
    test_rnn_structure();
    test_mha_shapes();
    test_mha_causal();
    test_mha_dropout();
    test_rnn_shapes();
    test_rnn_carry();
    test_rnn_long_gradient();
    test_gradients();
    test_bad_input();
    oar_scope_end();
    return test_summary("test_rnn_attention");
}
