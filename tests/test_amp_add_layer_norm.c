/* The add + layer_norm fusion on O2's bf16/f16 residual stream (docs/amp.md, "Residual add +
 * layer_norm on bf16"):
 *   - add_layer_norm and layer_norm_backward_add on bf16/f16 a, b (grad_out, x, residual) with
 *     f32 weight and bias give the bits of the unfused ops (add, layer_norm; layer_norm_backward,
 *     add), one and two threads, rows in pairs and an odd last row, row tails, weight only; the
 *     avx2-mixed kernel runs where the cap has AVX2, the composed one elsewhere and where the
 *     mixed one declines (rows past its 4096-value buffers, all-bf16 parameters);
 *   - LayerNorm's two-input form (the front end's fusion, gpt-mini's blocks use it) against add
 *     and the one-input form, eagerly, values and gradients, f32, bf16 and f16;
 *   - a compiled O2 gpt-mini step (fuse_attention off: the rest of the step is then eager's
 *     arithmetic) with the pass on has 8 add_layer_norm and 8 layer_norm_backward_add nodes on
 *     bf16 and gives the bits of the program with the pass off: losses, master gradients and
 *     masters after two SGD steps. */
#include "fusion_test_util.h"
#include "amp_o2_gpt_util.h"
#include "amp_via_f32_util.h"
#include "zoo_step_util.h"

#include "oar/amp.h"

#include <string.h>

static oar_tensor *rand_low(const int64_t *shape, int nd, oar_dtype dt, double scale) {
    return oar_cast(oar_mul_scalar(oar_randn(shape, nd, OAR_F32), scale), dt);
}

/* fused against unfused on [rows, m] (normalized over the last dim); pdt: the parameters' dtype */
static void check_ops(oar_dtype dt, int64_t rows, int64_t m, oar_dtype pdt, bool bias, const char *want) {
    oar_scope_begin();
    int64_t xs[2] = {rows, m};
    oar_tensor *a = rand_low(xs, 2, dt, 2.0), *b = rand_low(xs, 2, dt, 2.0);
    oar_tensor *g = rand_low(xs, 2, dt, 1.0), *r = rand_low(xs, 2, dt, 1.0);
    oar_tensor *w = oar_cast(oar_add_scalar(oar_mul_scalar(oar_randn(&m, 1, OAR_F32), 0.5), 1.0), pdt);
    oar_tensor *bb = bias ? oar_cast(oar_randn(&m, 1, OAR_F32), pdt) : NULL;
    oar_attr at[2] = {oar_attr_int(1), oar_attr_float(1e-5)};
    int was = oar_get_num_threads(), diffs = 0;
    const char *impl[2] = {"", ""};
    for (int threads = 1; threads <= 2; threads++) {
        CHECK(oar_set_num_threads(threads) == OAR_OK);
        oar_tensor *s = oar_add(a, b), *ln_in[3] = {s, w, bb}, *ln[3], *fu[4], *in4[4] = {a, b, w, bb};
        int n = 3, nf = 4;
        CHECK(oar_op_call(OAR_OP_layer_norm, ln_in, 3, at, ln, &n) == OAR_OK);
        CHECK(oar_op_call(OAR_OP_add_layer_norm, in4, 4, at, fu, &nf) == OAR_OK && nf == 4);
        impl[0] = amp_kernel_of(OAR_OP_add_layer_norm, in4, 4, fu, 4, at);
        diffs += !t_same_bits(s, fu[0]);
        for (int o = 0; o < 3; o++) diffs += !t_same_bits(ln[o], fu[o + 1]);
        oar_tensor *bw_in[6] = {g, s, w, ln[1], ln[2], r}, *bw[3], *bwa[3];
        n = nf = 3;
        CHECK(oar_op_call(OAR_OP_layer_norm_backward, bw_in, 5, at, bw, &n) == OAR_OK);
        CHECK(oar_op_call(OAR_OP_layer_norm_backward_add, bw_in, 6, at, bwa, &nf) == OAR_OK);
        impl[1] = amp_kernel_of(OAR_OP_layer_norm_backward_add, bw_in, 6, bwa, 3, at);
        diffs += !t_same_bits(oar_add(bw[0], r), bwa[0]) + !t_same_bits(bw[1], bwa[1]) + !t_same_bits(bw[2], bwa[2]);
        for (int o = 0; o < 3; o++) {
            oar_release(ln[o]);
            oar_release(bw[o]);
            oar_release(bwa[o]);
        }
        for (int o = 0; o < 4; o++) oar_release(fu[o]);
    }
    CHECK(oar_set_num_threads(was) == OAR_OK);
    CHECK(diffs == 0);
    CHECK(!strcmp(impl[0], want) && !strcmp(impl[1], want));
    printf("  %s [%lld, %lld], %s parameters%s: %s / %s, %d differences\n", oar_dtype_name(dt), (long long)rows,
           (long long)m, oar_dtype_name(pdt), bias ? "" : " (no bias)", impl[0], impl[1], diffs);
    oar_scope_end();
}

/* ---- the front end: LayerNorm's two-input form against add and the one-input form, eagerly:
 * y, the sum and every gradient (the residual stream's and y's reach the sum: the rule then
 * runs layer_norm_backward_add) bitwise; low inputs under autocast (the parameters stay f32);
 * inputs of two dtypes take the unfused path. */
static oar_tensor *ln_loss(oar_tensor *y, oar_tensor *s, oar_tensor *gy, oar_tensor *gs) {
    return oar_add(oar_sum(oar_mul(oar_cast(y, OAR_F32), gy), NULL, 0, false),
                   oar_sum(oar_mul(oar_cast(s, OAR_F32), gs), NULL, 0, false));
}

static void check_module(oar_dtype dt, oar_dtype dt_b) {
    oar_scope_begin();
    int64_t xs[3] = {2, 9, 40}, d = 40;
    oar_module *ln = oar_nn_layer_norm(&d, 1, 1e-5, true);
    CHECK(oar_init_normal_(oar_module_get(ln, "weight"), 1.0, 0.3) == OAR_OK);
    CHECK(oar_init_normal_(oar_module_get(ln, "bias"), 0.0, 0.3) == OAR_OK);
    oar_tensor *a = rand_low(xs, 3, dt, 2.0), *b = rand_low(xs, 3, dt_b, 2.0);
    oar_tensor *gy = oar_randn(xs, 3, OAR_F32), *gs = oar_randn(xs, 3, OAR_F32), *p[4] = {a, b, NULL, NULL};
    p[2] = oar_module_get(ln, "weight");
    p[3] = oar_module_get(ln, "bias");
    for (int i = 0; i < 2; i++) CHECK(oar_set_requires_grad(p[i], true) == OAR_OK);
    oar_autocast_opts ac = oar_autocast_defaults();
    ac.dtype = dt == OAR_F16 ? OAR_F16 : OAR_BF16;
    oar_tensor *y[2], *sum[2], *grads[2][4];
    for (int fused = 0; fused < 2; fused++) {
        if (dt != OAR_F32) CHECK(oar_autocast_begin(&ac) == OAR_OK);
        oar_tensor *ab[2] = {a, b}, *yx[2] = {NULL, NULL};
        if (fused) {
            CHECK(oar_forward_n(ln, ab, 2, yx, 2) == OAR_OK);
        } else {
            yx[1] = oar_add(a, b);
            yx[0] = oar_forward(ln, yx[1]);
        }
        if (dt != OAR_F32) oar_autocast_end();
        y[fused] = yx[0];
        sum[fused] = yx[1];
        CHECK(yx[0] && yx[1] && oar_backward(ln_loss(yx[0], yx[1], gy, gs), NULL, false) == OAR_OK);
        for (int i = 0; i < 4; i++) {
            grads[fused][i] = oar_retain(oar_grad_get(p[i]));
            oar_zero_grad(p[i]);
        }
    }
    int diffs = !t_same_bits(y[0], y[1]) + !t_same_bits(sum[0], sum[1]);
    for (int i = 0; i < 4; i++) diffs += !t_same_bits(grads[0][i], grads[1][i]);
    CHECK(diffs == 0 && oar_dtype_of(y[1]) == oar_dtype_of(y[0]) && oar_dtype_of(sum[1]) == oar_dtype_of(sum[0]));
    printf("  LayerNorm(a, b), %s + %s: y %s, sum %s, %d differences from add + LayerNorm (values, 4 gradients)\n",
           oar_dtype_name(dt), oar_dtype_name(dt_b), oar_dtype_name(oar_dtype_of(y[1])),
           oar_dtype_name(oar_dtype_of(sum[1])), diffs);
    for (int f = 0; f < 2; f++)
        for (int i = 0; i < 4; i++) oar_release(grads[f][i]);
    oar_module_free(ln);
    oar_scope_end();
}

/* ---- a compiled O2 gpt-mini step, the pass on and off */

static int count_dtype(oar_jit *f, oar_op_id op, oar_dtype dt) {
    const oar_program *p = f->entries[0].program;
    int n = 0;
    for (int i = 0; i < p->n_nodes; i++)
        n += !p->nodes[i].dead && p->nodes[i].op == op && p->values[p->nodes[i].out[0]].meta.dtype == dt;
    return n;
}

static void check_gpt_mini_o2(void) {
    o2_run a, b;
    const char *passes[2] = {"fuse_attention", "fuse_add_layer_norm"};
    oar_jit *fa = o2_init(&a, passes, (bool[]){false, true}, 2), *fb = o2_init(&b, passes, (bool[]){false, false}, 2);
    CHECK(fa && fb);
    oar_manual_seed(8);
    const oar_zoo_info *info = oar_zoo_find("gpt-mini");
    int diffs = 0;
    for (int step = 0; step < 2 && fa && fb; step++) {
        oar_scope_begin();
        oar_tensor *io[2], *la = NULL, *lb = NULL;
        zoo_batch(info, 2, 40, &io[0], &io[1]);
        CHECK(oar_jit_call(fa, io, 2, &la, 1) == OAR_OK);
        CHECK(oar_jit_call(fb, io, 2, &lb, 1) == OAR_OK);
        diffs += !t_same_bits(la, lb);
        for (int i = 0; i < oar_amp_masters_count(a.w); i++) {
            oar_tensor *ma = oar_amp_master(a.w, i, NULL), *mb = oar_amp_master(b.w, i, NULL);
            diffs += !t_same_bits(ma, mb) + !t_same_bits(oar_grad_get(ma), oar_grad_get(mb));
        }
        oar_release(la);
        oar_release(lb);
        oar_scope_end();
    }
    int fwd = fa ? count_dtype(fa, OAR_OP_add_layer_norm, OAR_BF16) : -1;
    int bwd = fa ? count_dtype(fa, OAR_OP_layer_norm_backward_add, OAR_BF16) : -1;
    int off = fb ? fusion_count_op(fb, OAR_OP_add_layer_norm) + fusion_count_op(fb, OAR_OP_layer_norm_backward_add) : -1;
    printf("  gpt-mini O2 bf16, 2 SGD steps: %d add_layer_norm, %d layer_norm_backward_add on bf16, %d differences "
           "from the unfused program\n", fwd, bwd, diffs);
    CHECK(diffs == 0 && fwd == 8 && bwd == 8 && off == 8); /* pass off: the blocks' ln2 (front end), 4 + 4 */
    if (fa) oar_jit_free(fa);
    if (fb) oar_jit_free(fb);
    o2_free(&a);
    o2_free(&b);
}

int main(void) {
    const char *mixed = amp_half_expected() ? OAR_IMPL_HALF_MIXED : "composed";
    for (int i = 0; i < 2; i++) {
        oar_dtype dt = i ? OAR_F16 : OAR_BF16;
        check_ops(dt, 64, 300, OAR_F32, true, mixed);  /* a row tail of 4, rows in pairs */
        check_ops(dt, 37, 256, OAR_F32, true, mixed);  /* gpt-mini's width; an odd last row */
        check_ops(dt, 9, 13, OAR_F32, false, mixed);   /* weight only, rows shorter than a vector pair */
        check_ops(dt, 3, 4097, OAR_F32, true, "composed"); /* past the mixed kernels' row buffers */
        check_ops(dt, 6, 40, dt, true, "composed");        /* all parameters low: not the mixed form */
    }
    check_module(OAR_F32, OAR_F32);
    check_module(OAR_BF16, OAR_BF16);
    check_module(OAR_F16, OAR_F16);
    check_module(OAR_BF16, OAR_F32); /* two dtypes: add promotes, then the one-input form */
    check_gpt_mini_o2();
    return test_summary("test_amp_add_layer_norm");
}
