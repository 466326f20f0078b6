/* Transformer fusions: the fused_attention / attention_backward ops against the plain
 * composition (eager, causal and masked, strided heads), finite differences in f64, and the
 * fuse_attention pass on traced programs: node counts, and fused against unfused results,
 * gradients and parameter updates (gpt-mini, MultiheadAttention), with the pass switched by
 * name; layer_norm's backward op against the composition and by finite differences.
 *
 * Tolerances. The fused kernels compute the same function with another rounding order: the
 * [L, S] scores and the products are f32 GEMMs split into other blocks, and the softmax
 * backward is folded into one row pass. Each result is a sum of at most S or D products of
 * O(1) values in f32 (relative rounding 6e-8 per operation), so results agree to about 1e-6
 * relative to their magnitude; checks use 2e-5 relative to the largest magnitude, which a
 * wrong mask, scale, transpose or dropped term exceeds by orders of magnitude (those give
 * O(1) relative errors). Gradients through a whole model compound this over 4 layers and the
 * loss; they are checked at 1e-4 of the largest gradient. */
#include "test_util.h"

/* ---- helpers */

static double *values(oar_tensor *t) {
    double *b = malloc(sizeof(double) * (size_t)(oar_numel(t) + 1));
    oar_copy_to_buffer(t, b, sizeof(double) * (size_t)oar_numel(t), OAR_F64);
    return b;
}

/* max |a - b| / max(|b|) (0-safe); 1e30 when shapes differ or either is missing. */
static double rel_diff(oar_tensor *a, oar_tensor *b) {
    if (!a || !b || oar_numel(a) != oar_numel(b)) return 1e30;
    double *x = values(a), *y = values(b), d = 0, m = 1e-30;
    for (int64_t i = 0; i < oar_numel(a); i++) {
        if (isnan(x[i]) != isnan(y[i])) d = 1e30;
        else if (!isnan(x[i])) d = fmax(d, fabs(x[i] - y[i]));
        if (!isnan(y[i])) m = fmax(m, fabs(y[i]));
    }
    free(x);
    free(y);
    return d / m;
}

/* The unfused composition, as gpt-mini writes it. */
static oar_tensor *naive_attention(oar_tensor *q, oar_tensor *k, oar_tensor *v, oar_tensor *mask, double scale) {
    oar_tensor *s = oar_mul_scalar(oar_matmul(q, oar_transpose(k, -2, -1)), scale);
    if (mask) s = oar_masked_fill(s, mask, -INFINITY);
    return oar_matmul(oar_softmax(s, -1), v);
}

static oar_tensor *causal_mask(int64_t L, int64_t S) {
    int64_t s[2] = {L, S};
    return oar_triu(oar_ones(s, 2, OAR_BOOL), 1);
}

static oar_tensor *leaf(const int64_t *shape, int nd, oar_dtype dt) {
    oar_tensor *t = oar_randn(shape, nd, dt);
    oar_set_requires_grad(t, true);
    return t;
}

/* Fused op vs composition: output and the gradients of q, k, v under a random upstream. */
static void compare_op(const char *what, oar_tensor *q, oar_tensor *k, oar_tensor *v, oar_tensor *mask,
                       bool causal, oar_tensor *const *leaves, int n_leaves) {
    oar_scope_begin();
    double scale = 1.0 / sqrt((double)oar_size(q, -1));
    oar_tensor *m = mask;
    if (causal) {
        oar_tensor *c = causal_mask(oar_size(q, -2), oar_size(k, -2));
        m = mask ? oar_logical_or(mask, c) : c;
    }
    oar_tensor *f = oar_scaled_dot_product_attention(q, k, v, mask, scale, causal);
    oar_tensor *r = naive_attention(q, k, v, m, scale);
    CHECK(f && r);
    double d = rel_diff(f, r);
    CHECK(d < 2e-5);
    oar_tensor *w = oar_randn(oar_shape(r), oar_ndim(r), oar_dtype_of(r));
    oar_tensor *gf[8], *gr[8];
    oar_tensor *lf = oar_sum(oar_mul(f, w), NULL, 0, false), *lr = oar_sum(oar_mul(r, w), NULL, 0, false);
    oar_grad_opts keep = {.retain_graph = true}; /* the leaves' views are shared by both */
    CHECK(oar_grad(&lf, 1, NULL, leaves, n_leaves, gf, &keep) == OAR_OK);
    CHECK(oar_grad(&lr, 1, NULL, leaves, n_leaves, gr, &keep) == OAR_OK);
    double dg = 0;
    for (int i = 0; i < n_leaves; i++) {
        dg = fmax(dg, rel_diff(gf[i], gr[i]));
        oar_release(gf[i]);
        oar_release(gr[i]);
    }
    CHECK(dg < 2e-5);
    printf("  %-40s out %.1e  grads %.1e\n", what, d, dg);
    oar_scope_end();
}

static void test_op_vs_composition(void) {
    oar_manual_seed(1);
    oar_scope_begin();
    int64_t s4[4] = {2, 3, 20, 8}, s4k[4] = {2, 3, 20, 8};
    oar_tensor *q = leaf(s4, 4, OAR_F32), *k = leaf(s4k, 4, OAR_F32), *v = leaf(s4k, 4, OAR_F32);
    oar_tensor *qkv[3] = {q, k, v};
    compare_op("causal attr, [2, 3, 20, 8]", q, k, v, NULL, true, qkv, 3);
    compare_op("triu mask (gpt-mini's), [2, 3, 20, 8]", q, k, v, causal_mask(20, 20), false, qkv, 3);
    compare_op("no mask", q, k, v, NULL, false, qkv, 3);
    /* L != S, D != Dv, a mask leaving each row one key */
    int64_t sq[3] = {3, 7, 5}, sk[3] = {3, 9, 5}, sv[3] = {3, 9, 6}, ms[2] = {7, 9};
    oar_tensor *q2 = leaf(sq, 3, OAR_F32), *k2 = leaf(sk, 3, OAR_F32), *v2 = leaf(sv, 3, OAR_F32);
    oar_tensor *mask = oar_gt(oar_rand(ms, 2, OAR_F32), oar_full((int64_t[]){1}, 1, 0.6, OAR_F32));
    mask = oar_logical_and(mask, oar_logical_not(oar_eye(7, 9, OAR_BOOL)));
    oar_tensor *l2[3] = {q2, k2, v2};
    compare_op("random mask, L=7 S=9 D=5 Dv=6", q2, k2, v2, mask, false, l2, 3);
    compare_op("random mask and causal", q2, k2, v2, mask, true, l2, 3);
    /* strided head views of one projection, past the 32-row blocks (as in gpt-mini) */
    int64_t xs[3] = {2, 70, 3 * 64}, sp[4] = {2, 70, 4, 16};
    oar_tensor *x = leaf(xs, 3, OAR_F32), *c[3];
    CHECK(oar_chunk(x, 3, 2, c, 3) == 3);
    oar_tensor *h[3];
    for (int i = 0; i < 3; i++) h[i] = oar_transpose(oar_reshape(c[i], sp, 4), 1, 2);
    compare_op("strided heads of a projection, L=70 causal", h[0], h[1], h[2], causal_mask(70, 70), false, &x, 1);
    compare_op("strided heads, causal attr", h[0], h[1], h[2], NULL, true, &x, 1);
    oar_scope_end();
}

/* ---- finite differences in f64 */

/* d(sum(f(in) * w))/d in[which] by central differences against autograd. */
typedef oar_tensor *(*attn_fn)(oar_tensor *const *in);

static oar_tensor *fa_causal(oar_tensor *const *in) {
    return oar_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0.6, true);
}

/* Second order: the gradient of q of the fused op (so attention_backward's own rule runs)
 * against a fixed weight, as a function of the inputs. */
static oar_tensor *fa_grad_q(oar_tensor *const *in) {
    oar_tensor *o = oar_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0.6, true);
    oar_tensor *ramp = oar_reshape(oar_arange(0, (double)oar_numel(o), 1, OAR_F64), oar_shape(o), oar_ndim(o));
    oar_tensor *w = oar_add(oar_full(oar_shape(o), oar_ndim(o), 0.5, OAR_F64), oar_mul_scalar(ramp, 0.01));
    oar_tensor *l = oar_sum(oar_mul(o, w), NULL, 0, false), *g[1];
    oar_grad_opts go = {.create_graph = true};
    if (oar_grad(&l, 1, NULL, in, 1, g, &go) != OAR_OK) return NULL;
    return oar_keep(g[0]) ? g[0] : NULL;
}

static oar_tensor *ln_input_grad(oar_tensor *const *in) {
    /* the gradient of x, made with create_graph: its own gradient runs layer_norm_backward's rule */
    oar_tensor *y = oar_layer_norm(in[0], 1, in[1], in[2], 1e-5);
    oar_tensor *ramp = oar_reshape(oar_arange(0, (double)oar_numel(y), 1, OAR_F64), oar_shape(y), oar_ndim(y));
    oar_tensor *l = oar_sum(oar_mul(oar_mul(y, y), ramp), NULL, 0, false), *g[1];
    oar_grad_opts go = {.create_graph = true};
    if (oar_grad(&l, 1, NULL, in, 1, g, &go) != OAR_OK) return NULL;
    return oar_keep(g[0]) ? g[0] : NULL;
}

static double fd_check(attn_fn f, oar_tensor *const *in, int n_in) {
    double worst = 0;
    oar_scope_begin();
    oar_tensor *y = f(in);
    oar_tensor *w = oar_randn(oar_shape(y), oar_ndim(y), OAR_F64);
    oar_tensor *l = oar_sum(oar_mul(y, w), NULL, 0, false), *g[3];
    CHECK(oar_grad(&l, 1, NULL, in, n_in, g, NULL) == OAR_OK);
    for (int i = 0; i < n_in; i++) {
        double *an = values(g[i]);
        for (int64_t e = 0; e < oar_numel(in[i]); e++) {
            double *p = (double *)oar_data(in[i]) + e, keep = *p, h = 1e-6, lp, lm;
            *p = keep + h;
            oar_scope_begin();
            oar_item(oar_sum(oar_mul(f(in), w), NULL, 0, false), &lp);
            oar_scope_end();
            *p = keep - h;
            oar_scope_begin();
            oar_item(oar_sum(oar_mul(f(in), w), NULL, 0, false), &lm);
            oar_scope_end();
            *p = keep;
            worst = fmax(worst, fabs((lp - lm) / (2 * h) - an[e]) / (1 + fabs(an[e])));
        }
        free(an);
        oar_release(g[i]);
    }
    oar_scope_end();
    return worst;
}

static void test_finite_differences(void) {
    oar_manual_seed(2);
    oar_scope_begin();
    int64_t s[3] = {2, 5, 3}, sv[3] = {2, 5, 4};
    oar_tensor *in[3] = {leaf(s, 3, OAR_F64), leaf(s, 3, OAR_F64), leaf(sv, 3, OAR_F64)};
    double e1 = fd_check(fa_causal, in, 3), e2 = fd_check(fa_grad_q, in, 3);
    printf("  finite differences (f64): first order %.1e, second order (attention_backward's rule) %.1e\n", e1, e2);
    CHECK(e1 < 1e-6);
    CHECK(e2 < 1e-6);
    int64_t xs[2] = {3, 6}, ws = 6;
    oar_tensor *ln[3] = {leaf(xs, 2, OAR_F64), leaf(&ws, 1, OAR_F64), leaf(&ws, 1, OAR_F64)};
    double e3 = fd_check(ln_input_grad, ln, 3);
    printf("  finite differences (f64): layer_norm second order (layer_norm_backward's rule) %.1e\n", e3);
    CHECK(e3 < 1e-6);
    oar_scope_end();
}

/* ---- layer_norm's backward as one op (layer_norm_backward) against the composition */

/* layer norm over the last dim written with public ops: its gradients are the composition's. */
static oar_tensor *naive_layer_norm(oar_tensor *x, oar_tensor *w, oar_tensor *b, double eps) {
    const int last = -1;
    oar_tensor *mu = oar_mean(x, &last, 1, true), *xc = oar_sub(x, mu);
    oar_tensor *var = oar_mean(oar_mul(xc, xc), &last, 1, true);
    oar_tensor *y = oar_div(xc, oar_sqrt(oar_add_scalar(var, eps)));
    return oar_add(oar_mul(y, w), b);
}

static void test_layer_norm_backward(void) {
    oar_manual_seed(4);
    oar_scope_begin();
    int64_t xs[3] = {8, 128, 256}, ws = 256;
    oar_tensor *x = leaf(xs, 3, OAR_F32), *w = leaf(&ws, 1, OAR_F32), *b = leaf(&ws, 1, OAR_F32);
    oar_tensor *up = oar_randn(xs, 3, OAR_F32), *leaves[3] = {x, w, b}, *gf[3], *gr[3];
    oar_tensor *lf = oar_sum(oar_mul(oar_layer_norm(x, 1, w, b, 1e-5), up), NULL, 0, false);
    oar_tensor *lr = oar_sum(oar_mul(naive_layer_norm(x, w, b, 1e-5), up), NULL, 0, false);
    CHECK(oar_grad(&lf, 1, NULL, leaves, 3, gf, NULL) == OAR_OK);
    CHECK(oar_grad(&lr, 1, NULL, leaves, 3, gr, NULL) == OAR_OK);
    /* dweight and dbias sum 1024 rows: 1e-5 relative covers f32 summation in another order */
    double d[3];
    for (int i = 0; i < 3; i++) {
        d[i] = rel_diff(gf[i], gr[i]);
        oar_release(gf[i]);
        oar_release(gr[i]);
    }
    printf("  layer_norm backward, one op vs composition: dx %.1e, dweight %.1e, dbias %.1e\n", d[0], d[1], d[2]);
    CHECK(d[0] < 2e-5 && d[1] < 2e-5 && d[2] < 2e-5);
    oar_scope_end();
}

/* ---- the pass on gpt-mini's training step */

typedef struct run {
    oar_module *m;
    oar_optimizer *opt;
} run;

static oar_status gpt_step(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in; (void)n_out;
    run *r = user;
    oar_optimizer_zero_grad(r->opt);
    int64_t s2[2] = {-1, 256}, flat = -1;
    oar_tensor *loss = oar_cross_entropy(oar_reshape(oar_forward(r->m, in[0]), s2, 2), oar_reshape(in[1], &flat, 1), NULL);
    oar_status st = loss ? oar_backward(loss, NULL, false) : oar_last_status();
    if (st == OAR_OK) st = oar_optimizer_step(r->opt);
    out[0] = loss;
    return st;
}

static int count_in_dump(oar_jit *f, const char *what) {
    int n = oar_jit_dump(f, 0, NULL, 0);
    char *buf = malloc((size_t)n + 1);
    oar_jit_dump(f, 0, buf, (size_t)n + 1);
    int c = 0;
    for (const char *p = buf; (p = strstr(p, what)); p++) c++;
    free(buf);
    return c;
}

static void make_gpt(run *r, bool fuse, oar_jit **f) {
    oar_manual_seed(7);
    r->m = oar_zoo_create("gpt-mini", NULL);
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = 0.05;
    r->opt = oar_optimizer_for(r->m, &oo);
    oar_jit_opts jo = {.module = r->m, .optimizer = r->opt};
    CHECK(oar_build_strategy_set(&jo.strategy, "fuse_attention", fuse) == OAR_OK);
    *f = oar_jit_to_static(gpt_step, r, &jo);
}

static void test_gpt_mini(void) {
    run a, b;
    oar_jit *fa, *fb;
    make_gpt(&a, true, &fa);
    make_gpt(&b, false, &fb);
    oar_manual_seed(3);
    double dloss = 0, dgrad = 0;
    for (int step = 0; step < 3; step++) {
        oar_scope_begin();
        int64_t s[2] = {2, 40}; /* past one 32-row block */
        oar_tensor *io[2] = {oar_randint(0, 256, s, 2, OAR_I64), oar_randint(0, 256, s, 2, OAR_I64)}, *la, *lb;
        CHECK(oar_jit_call(fa, io, 2, &la, 1) == OAR_OK);
        CHECK(oar_jit_call(fb, io, 2, &lb, 1) == OAR_OK);
        dloss = fmax(dloss, rel_diff(la, lb));
        for (int i = 0; i < oar_module_num_parameters(a.m); i++)
            dgrad = fmax(dgrad, rel_diff(oar_grad_get(oar_module_parameter(a.m, i, NULL)),
                                         oar_grad_get(oar_module_parameter(b.m, i, NULL))));
        oar_release(la);
        oar_release(lb);
        oar_scope_end();
    }
    double dparam = 0;
    for (int i = 0; i < oar_module_num_parameters(a.m); i++)
        dparam = fmax(dparam, rel_diff(oar_module_parameter(a.m, i, NULL), oar_module_parameter(b.m, i, NULL)));
    /* 4 layers: each attention and its backward is one node; no softmax remains */
    CHECK(count_in_dump(fa, "= fused_attention(") == 4);
    CHECK(count_in_dump(fa, "= attention_backward(") == 4);
    CHECK(count_in_dump(fa, "= softmax") == 0 && count_in_dump(fa, "= masked_fill(") == 0);
    CHECK(count_in_dump(fb, "= fused_attention(") == 0 && count_in_dump(fb, "= softmax(") == 4);
    printf("  gpt-mini, 3 SGD steps fused vs unfused: loss %.1e, grads %.1e, params %.1e (relative)\n", dloss, dgrad,
           dparam);
    CHECK(dloss < 2e-5);
    CHECK(dgrad < 1e-4);
    CHECK(dparam < 2e-5);
    oar_jit_free(fa);
    oar_jit_free(fb);
    for (run *r = &a; r; r = r == &a ? &b : NULL) {
        oar_optimizer_free(r->opt);
        oar_module_free(r->m);
    }
}

/* ---- MultiheadAttention: q scaled before the product (scale 1 in the fused node) */

typedef struct mha_run {
    oar_module *m;
    oar_tensor *w;
    bool train;
} mha_run;

static oar_status mha_step(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in; (void)n_out;
    mha_run *r = user;
    oar_module_zero_grad(r->m);
    oar_tensor *y = oar_forward(r->m, in[0]);
    if (!r->train) {
        out[0] = y;
        return y ? OAR_OK : oar_last_status();
    }
    oar_tensor *l = oar_sum(oar_mul(y, r->w), NULL, 0, false);
    out[0] = l;
    return l ? oar_backward(l, NULL, false) : oar_last_status();
}

static void test_mha(bool causal, bool train) {
    oar_scope_begin();
    mha_run r[2]; /* fused and unfused; the unfused module also runs eagerly after its trace */
    oar_jit *f[2];
    int64_t xs[3] = {2, 37, 16};
    oar_manual_seed(5);
    oar_tensor *x = oar_randn(xs, 3, OAR_F32), *w = oar_randn(xs, 3, OAR_F32);
    for (int i = 0; i < 2; i++) {
        oar_manual_seed(11);
        r[i] = (mha_run){oar_nn_multihead_attention(16, 4, true, causal, 0.0), w, train};
        oar_module_train(r[i].m, train);
        oar_jit_opts jo = {.module = r[i].m};
        CHECK(oar_build_strategy_set(&jo.strategy, "fuse_attention", i == 0) == OAR_OK);
        f[i] = oar_jit_to_static(mha_step, &r[i], &jo);
    }
    oar_tensor *y[2];
    for (int i = 0; i < 2; i++) CHECK(oar_jit_call(f[i], &x, 1, &y[i], 1) == OAR_OK);
    double d = rel_diff(y[0], y[1]), dg = 0;
    for (int p = 0; train && p < oar_module_num_parameters(r[0].m); p++)
        dg = fmax(dg, rel_diff(oar_grad_get(oar_module_parameter(r[0].m, p, NULL)),
                               oar_grad_get(oar_module_parameter(r[1].m, p, NULL))));
    oar_tensor *ye = NULL; /* and eager, after the trace: the module's cached causal mask must be real */
    CHECK(mha_step(&r[1], &x, 1, &ye, 1) == OAR_OK);
    double de = rel_diff(y[0], ye);
    CHECK(count_in_dump(f[0], "= fused_attention(") == 1);
    CHECK(count_in_dump(f[0], "scale=1 ") == 1);
    CHECK(count_in_dump(f[0], "= attention_backward(") == (train ? 1 : 0));
    CHECK(count_in_dump(f[1], "= fused_attention(") == 0);
    printf("  MultiheadAttention %s %s: output %.1e (vs eager %.1e), grads %.1e\n", causal ? "causal" : "full",
           train ? "training" : "inference", d, de, dg);
    CHECK(d < 2e-5 && de < 2e-5 && dg < 1e-4);
    for (int i = 0; i < 2; i++) {
        oar_release(y[i]);
        oar_jit_free(f[i]);
        oar_module_free(r[i].m);
    }
    oar_scope_end();
}

/* ---- patterns that must stay unfused: the scores are also a result */

static oar_status scores_too(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)user; (void)n_in; (void)n_out;
    oar_tensor *s = oar_mul_scalar(oar_matmul(in[0], oar_transpose(in[1], -2, -1)), 0.5);
    out[0] = oar_matmul(oar_softmax(s, -1), in[2]);
    out[1] = s;
    return out[0] ? OAR_OK : oar_last_status();
}

static oar_status plain_attention(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)user; (void)n_in; (void)n_out;
    out[0] = naive_attention(in[0], in[1], in[2], NULL, 0.5);
    return out[0] ? OAR_OK : oar_last_status();
}

static void test_unfused_patterns(void) {
    oar_scope_begin();
    int64_t s[3] = {2, 6, 4};
    oar_tensor *in[3] = {oar_randn(s, 3, OAR_F32), oar_randn(s, 3, OAR_F32), oar_randn(s, 3, OAR_F32)}, *o[2], *p;
    oar_jit *f = oar_jit_to_static(scores_too, NULL, NULL), *g = oar_jit_to_static(plain_attention, NULL, NULL);
    CHECK(oar_jit_call(f, in, 3, o, 2) == OAR_OK);
    CHECK(count_in_dump(f, "= fused_attention(") == 0); /* the scores have a second use */
    CHECK(oar_jit_call(g, in, 3, &p, 1) == OAR_OK);
    CHECK(count_in_dump(g, "= fused_attention(") == 1 && count_in_dump(g, "scale=0.5 ") == 1);
    CHECK(rel_diff(o[0], p) < 2e-5);
    oar_release(o[0]);
    oar_release(o[1]);
    oar_release(p);
    oar_jit_free(f);
    oar_jit_free(g);
    oar_scope_end();
}

int main(void) {
    test_op_vs_composition();
    test_finite_differences();
    test_layer_norm_backward();
    test_gpt_mini();
    test_mha(true, false);
    test_mha(false, false);
    test_mha(true, true);
    test_unfused_patterns();
    return test_summary("test_fusion_transformer");
}
