/* O2 transformer steps on bf16/f16 (docs/amp.md, "At the AVX2 cap: O2's transformer kernels"):
 *   - fused_attention and attention_backward on bf16/f16 q, k, v (strided head views, causal
 *     and masked, rows and widths with vector tails) give the bits of the f32 kernels on
 *     widened copies, rounded (the via-f32 path), and the avx2-half kernel is the one that runs
 *     where the cap allows it;
 *   - sum and mean on bf16/f16 likewise (column sums as bias gradients take, row sums, every
 *     group size's tail);
 *   - the fuse_attention pass takes O2's bf16 chains (casts around the f32 softmax and its
 *     backward): a compiled O2 gpt-mini step has 4 fused_attention and 4 attention_backward
 *     nodes, no softmax and no cast left around them, and its losses, gradients and masters
 *     are as close to the f32 step's as the unfused program's (the fused node rounds at other,
 *     fewer places: below). */
#include "fusion_test_util.h"
#include "amp_o2_gpt_util.h"
#include "amp_via_f32_util.h"
#include "zoo_step_util.h"

#include "kernels/cpu/cpu_kernels.h"
#include "oar/amp.h"

#include <math.h>
#include <string.h>

static oar_tensor *rand_low(const int64_t *shape, int nd, oar_dtype dt, double scale) {
    return oar_cast(oar_mul_scalar(oar_randn(shape, nd, OAR_F32), scale), dt);
}

static void check_attention(oar_dtype dt, int64_t B, int64_t H, int64_t L, int64_t D, bool mask, bool causal) {
    oar_scope_begin();
    /* q, k, v: head views of one [B, L, 3 H D] projection, as gpt-mini's chunk and transposes */
    int64_t ps[3] = {B, L, 3 * H * D}, split[4] = {B, L, H, D};
    oar_tensor *proj = rand_low(ps, 3, dt, 1.0), *qkv[3];
    CHECK(oar_chunk(proj, 3, 2, qkv, 3) == 3);
    for (int i = 0; i < 3; i++) qkv[i] = oar_transpose(oar_reshape(qkv[i], split, 4), 1, 2); /* row stride 3 H D */
    oar_tensor *m = mask ? oar_triu(oar_ones((int64_t[]){L, L}, 2, OAR_BOOL), 1) : NULL;
    oar_attr fa[2] = {oar_attr_float(0.125), oar_attr_int(causal)};
    const char *impl;
    oar_tensor *fin[4] = {qkv[0], qkv[1], qkv[2], m}, *o[2];
    int diffs = against_via_f32(OAR_OP_fused_attention, fin, 4, fa, 2, &impl);
    int n = 2;
    CHECK(oar_op_call(OAR_OP_fused_attention, fin, 4, fa, o, &n) == OAR_OK);
    bool half = !strcmp(impl, "avx2-half");
    /* the backward with the forward's probabilities and a random upstream gradient */
    oar_tensor *g = rand_low((int64_t[]){B, H, L, D}, 4, dt, 1.0);
    oar_tensor *bin[5] = {g, qkv[0], qkv[1], qkv[2], o[1]};
    const char *bimpl;
    diffs += against_via_f32(OAR_OP_attention_backward, bin, 5, fa, 3, &bimpl);
    half &= !strcmp(bimpl, "avx2-half");
    CHECK(diffs == 0);
    CHECK(half == amp_half_expected());
    printf("  %s attention [%lld, %lld, %lld, %lld]%s%s (%s / %s): %d differences\n", oar_dtype_name(dt),
           (long long)B, (long long)H, (long long)L, (long long)D, mask ? " masked" : "", causal ? " causal" : "", impl,
           bimpl, diffs);
    oar_release(o[0]);
    oar_release(o[1]);
    oar_scope_end();
}

/* sum and mean over dims of a contiguous low tensor: column sums (bias gradients: 32-column
 * groups, then 4, then single columns) and row sums (64-value trees, then 8, then single) */
static void check_reduce(oar_dtype dt, const int64_t *shape, int nd, const int *dims, int n_dims) {
    oar_scope_begin();
    oar_tensor *x = rand_low(shape, nd, dt, 2.0);
    oar_attr a[2] = {oar_attr_dims(dims, n_dims), oar_attr_int(1)};
    const char *impl[2];
    int diffs = against_via_f32(OAR_OP_sum, &x, 1, a, 1, &impl[0]) + against_via_f32(OAR_OP_mean, &x, 1, a, 1, &impl[1]);
    CHECK(diffs == 0);
    CHECK((!strcmp(impl[0], "avx2-half") && !strcmp(impl[1], "avx2-half")) == amp_half_expected());
    printf("  %s sum and mean over %d of %d dims, %lld values (%s / %s): %d differences\n", oar_dtype_name(dt), n_dims,
           nd, (long long)oar_numel(x), impl[0], impl[1], diffs);
    oar_scope_end();
}

/* ---- a compiled O2 gpt-mini step, fuse_attention on and off */

/* max |a - b| / max |b| over the elements (NaN on either side: 1e30) */
static double rel_diff(oar_tensor *a, oar_tensor *b) {
    if (!a && !b) return 0; /* no gradient on either side */
    if (!a || !b || oar_numel(a) != oar_numel(b)) return 1e30;
    const int64_t n = oar_numel(a);
    double *x = malloc(sizeof(double) * (size_t)(2 * n + 1)), *y = x + n, d = 0, m = 1e-30;
    oar_copy_to_buffer(a, x, sizeof(double) * (size_t)n, OAR_F64);
    oar_copy_to_buffer(b, y, sizeof(double) * (size_t)n, OAR_F64);
    for (int64_t i = 0; i < n; i++) {
        d = isnan(x[i]) || isnan(y[i]) ? 1e30 : fmax(d, fabs(x[i] - y[i]));
        m = fmax(m, fabs(y[i]));
    }
    free(x);
    return d / m;
}

/* max over the masters (or their gradients) of the distance to the f32 model's parameter of
 * the same name (or its gradient) */
static double masters_vs_f32(oar_amp_masters *w, oar_module *f32, bool grads) {
    double d = 0;
    for (int i = 0; i < oar_amp_masters_count(w); i++) {
        const char *name, *other;
        oar_tensor *m = oar_amp_master(w, i, &name);
        for (int j = 0; j < oar_module_num_parameters(f32); j++) {
            oar_tensor *p = oar_module_parameter(f32, j, &other);
            if (!strcmp(name, other)) d = fmax(d, grads ? rel_diff(oar_grad_get(m), oar_grad_get(p)) : rel_diff(m, p));
        }
    }
    return d;
}

/* the same between the masters' gradients of two O2 runs */
static double master_grads_diff(oar_amp_masters *a, oar_amp_masters *b) {
    double d = 0;
    for (int i = 0; i < oar_amp_masters_count(a); i++)
        d = fmax(d, rel_diff(oar_grad_get(oar_amp_master(a, i, NULL)), oar_grad_get(oar_amp_master(b, i, NULL))));
    return d;
}

/* Fused against unfused, each against the f32 step (fused attention too, which matches the
 * unfused f32 chain to 1e-5: test_fusion_transformer). The fused node rounds at other places
 * than O2's unfused chain: the scores stay f32 (the chain rounds the product and the scaled
 * product to bf16), the probabilities reach the product with v unrounded and the backward's
 * softmax reads the bf16 ones (the chain: the reverse), and ds stays f32. So it is not
 * bitwise the unfused program: it must be as close to f32 as that one (within 1.5x; measured
 * below), and near it (a dropped mask, wrong scale or lost term gives O(1) differences). */
static void check_gpt_mini_o2(void) {
    o2_run a, b;
    zoo_run f;
    const char *pass = "fuse_attention";
    oar_jit *fa = o2_init(&a, &pass, (bool[]){true}, 1), *fb = o2_init(&b, &pass, (bool[]){false}, 1);
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = 0.05;
    zoo_run_init(&f, "gpt-mini", 3, &oo);
    oar_jit *ff = fusion_compile(zoo_step_fn, &f, NULL, f.m, f.opt);
    CHECK(fa && fb && ff);
    oar_manual_seed(8);
    const oar_zoo_info *info = oar_zoo_find("gpt-mini");
    double dloss = 0, dgrad = 0, lossf[2] = {0, 0}, gradf[2] = {0, 0};
    for (int step = 0; step < 2 && fa && fb && ff; step++) {
        oar_scope_begin();
        oar_tensor *io[2], *la = NULL, *lb = NULL, *lf = NULL;
        zoo_batch(info, 2, 40, &io[0], &io[1]); /* 40 tokens: past one 32-row block */
        CHECK(oar_jit_call(fa, io, 2, &la, 1) == OAR_OK);
        CHECK(oar_jit_call(fb, io, 2, &lb, 1) == OAR_OK);
        CHECK(oar_jit_call(ff, io, 2, &lf, 1) == OAR_OK);
        dloss = fmax(dloss, rel_diff(la, lb));
        lossf[0] = fmax(lossf[0], rel_diff(la, lf));
        lossf[1] = fmax(lossf[1], rel_diff(lb, lf));
        dgrad = fmax(dgrad, master_grads_diff(a.w, b.w));
        gradf[0] = fmax(gradf[0], masters_vs_f32(a.w, f.m, true));
        gradf[1] = fmax(gradf[1], masters_vs_f32(b.w, f.m, true));
        oar_release(la);
        oar_release(lb);
        oar_release(lf);
        oar_scope_end();
    }
    double mf[2] = {masters_vs_f32(a.w, f.m, false), masters_vs_f32(b.w, f.m, false)};
    int fused = fa ? fusion_count_op(fa, OAR_OP_fused_attention) : -1;
    int fused_bwd = fa ? fusion_count_op(fa, OAR_OP_attention_backward) : -1;
    int soft = fa ? fusion_count_op(fa, OAR_OP_softmax) + fusion_count_op(fa, OAR_OP_softmax_backward) : -1;
    int casts = fa && fb ? fusion_count_op(fb, OAR_OP_cast) - fusion_count_op(fa, OAR_OP_cast) : -1;
    printf("  gpt-mini O2 bf16, 2 SGD steps: %d fused_attention, %d attention_backward, %d softmax left, %d casts "
           "fewer\n  fused vs unfused: loss %.1e, grads %.1e; against f32, fused / unfused: loss %.1e / %.1e, grads "
           "%.1e / %.1e, masters %.1e / %.1e (relative to the largest)\n",
           fused, fused_bwd, soft, casts, dloss, dgrad, lossf[0], lossf[1], gradf[0], gradf[1], mf[0], mf[1]);
    CHECK(fused == 4 && fused_bwd == 4 && soft == 0);
    CHECK(casts == 4 * 4); /* per layer: around softmax and around its backward */
    CHECK(dloss < 1e-3 && dgrad < 0.05);
    CHECK(lossf[0] <= 1.5 * lossf[1] + 1e-6 && gradf[0] <= 1.5 * gradf[1] && mf[0] <= 1.5 * mf[1]);
    oar_jit_free(fa);
    oar_jit_free(fb);
    oar_jit_free(ff);
    o2_free(&a);
    o2_free(&b);
    zoo_run_free(&f);
}

int main(void) {
    oar_manual_seed(5);
    for (oar_dtype dt = OAR_F16; dt <= OAR_BF16; dt++) {
        check_attention(dt, 2, 2, 40, 64, true, false); /* gpt-mini's layout, past one 32-row block */
        check_attention(dt, 1, 3, 19, 20, false, false); /* widths and rows with vector tails */
        check_attention(dt, 2, 1, 13, 12, false, true);
        check_reduce(dt, (int64_t[]){2, 40, 768}, 3, (int[]){0, 1}, 2); /* gpt-mini's bias gradients */
        check_reduce(dt, (int64_t[]){39, 37}, 2, (int[]){0}, 1);         /* 32 + 4 + 1 columns, 4k + 3 rows */
        check_reduce(dt, (int64_t[]){5, 203}, 2, (int[]){1}, 1);         /* rows: 3 x 64 + 8 + 3 */
        check_reduce(dt, (int64_t[]){3, 5, 7}, 3, (int[]){0, 2}, 2);     /* outer blocks */
        check_reduce(dt, (int64_t[]){20000, 3}, 2, (int[]){0}, 1);       /* rows split into segments */
    }
    check_gpt_mini_o2();
    return test_summary("test_amp_transformer");
}
