/* Batch norm on bf16/f16 activations with f32 parameters, fused and unfused (nn_norm.c,
 * nn_norm_backward.c, the fuse_bn_act pass):
 *   - the mixed kernels give the bits of the f32 kernels on widened copies, rounded (what the
 *     via-f32 path gave before them), forward and backward, with planes of 81 values (vector
 *     tails) and [N, C] rows, and with NaN (payloads in the low half) and inf parameters;
 *   - batch_norm_act on low inputs equals batch_norm, add and relu run one after another, and
 *     batch_norm_act_backward equals relu_backward then batch_norm_backward, bit for bit (the
 *     fused kernel rounds where the ops round);
 *   - a compiled O2 bf16 ResNet-20 training step fuses every relu(bn) and relu(bn + shortcut)
 *     and their backward (19 and 19) and gives the eager step's bits: losses, parameters,
 *     masters' copies and running statistics. */
#include "fusion_test_util.h"
#include "amp_o2_util.h"
#include "zoo_step_util.h"

#include "oar/amp.h"

#include <string.h>

static oar_attr g_bn_attrs[3];

static oar_tensor *rand_low(const int64_t *shape, int nd, oar_dtype dt, double scale, double shift) {
    oar_tensor *t = oar_randn(shape, nd, OAR_F32);
    return oar_cast(oar_add_scalar(oar_mul_scalar(t, scale), shift), dt);
}

/* the mixed kernel runs for these inputs (not the reference or via-f32: capped ISA) */
static bool mixed_kernel_runs(oar_op_id op, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                              const oar_attr *a) {
    const oar_kernel_entry *k = oar_select_kernel(op, in, n_in, out, n_out, a);
    oar_clear_error();
    return k && strcmp(k->impl, "avx2-mixed") == 0;
}

/* f32 parameters of c channels; with specials, channels 1 to 3 get a NaN with payload bits in
 * its low half (which a bf16 rounding without the NaN rule carries into the exponent: 0x7FC1
 * instead of 0x7FC0), an infinity and a signaling NaN */
static oar_tensor *param(int64_t c, bool weight, bool specials) {
    oar_tensor *t = weight ? oar_add_scalar(oar_rand(&c, 1, OAR_F32), 0.5) : oar_randn(&c, 1, OAR_F32);
    if (!specials || c < 4) return t;
    float v[64];
    CHECK(c <= 64 && oar_copy_to_buffer(t, v, sizeof(float) * (size_t)c, OAR_F32) == OAR_OK);
    const uint32_t bits[3] = {weight ? 0x7FE01234u : 0x7FC0ABCDu, 0x7F800000u, weight ? 0xFF80C001u : 0x7F80E001u};
    for (int i = 0; i < 3; i++) memcpy(&v[1 + i], &bits[i], sizeof(float));
    return oar_from_data(v, &c, 1, OAR_F32);
}

static void check_kernels(oar_dtype dt, const int64_t *xs, int nd, bool specials) {
    oar_scope_begin();
    const int64_t c = xs[1];
    oar_tensor *x = rand_low(xs, nd, dt, 1.5, 0.7), *res = rand_low(xs, nd, dt, 1.0, -0.2);
    oar_tensor *w = param(c, true, specials), *b = param(c, false, specials);
    oar_tensor *rs[4][2];
    for (int k = 0; k < 4; k++) {
        rs[k][0] = oar_zeros(&c, 1, OAR_F32);
        rs[k][1] = oar_ones(&c, 1, OAR_F32);
    }
    g_bn_attrs[0] = oar_attr_int(1);
    g_bn_attrs[1] = oar_attr_float(0.1);
    g_bn_attrs[2] = oar_attr_float(1e-5);
    /* batch_norm on x against the f32 op on widened x, rounded */
    oar_tensor *out[3], *ref[3];
    int n = 3;
    oar_tensor *in[6] = {x, w, b, rs[0][0], rs[0][1], NULL};
    CHECK(oar_op_call(OAR_OP_batch_norm, in, 6, g_bn_attrs, out, &n) == OAR_OK);
    oar_tensor *xf = oar_cast(x, OAR_F32), *inf[6] = {xf, w, b, rs[1][0], rs[1][1], NULL};
    n = 3;
    CHECK(oar_op_call(OAR_OP_batch_norm, inf, 6, g_bn_attrs, ref, &n) == OAR_OK);
    const bool mixed = mixed_kernel_runs(OAR_OP_batch_norm, in, 6, out, 3, g_bn_attrs);
    int diffs = 0;
    if (mixed) {
        diffs += !t_same_bits(out[0], oar_cast(ref[0], dt)) + !t_same_bits(out[1], ref[1]) +
                 !t_same_bits(out[2], ref[2]);
        diffs += !t_same_bits(rs[0][0], rs[1][0]) + !t_same_bits(rs[0][1], rs[1][1]);
    }
    /* batch_norm_act against batch_norm, add, relu (fresh running statistics for each) */
    oar_tensor *y_ops = oar_relu(oar_add(oar_batch_norm(x, w, b, rs[2][0], rs[2][1], true, 0.1, 1e-5), res));
    oar_tensor *ain[7] = {x, w, b, rs[3][0], rs[3][1], res, NULL}, *fused[3];
    n = 3;
    CHECK(oar_op_call(OAR_OP_batch_norm_act, ain, 7, g_bn_attrs, fused, &n) == OAR_OK);
    diffs += !t_same_bits(y_ops, fused[0]) + !t_same_bits(rs[2][0], rs[3][0]) + !t_same_bits(rs[2][1], rs[3][1]);
    /* the backward ops, with the statistics of the forward */
    oar_tensor *g = rand_low(xs, nd, dt, 1.0, 0.0), *dx[3], *dxf[3], *dfused[4];
    oar_tensor *gz = oar_op_call1(OAR_OP_relu_backward, (oar_tensor *[]){g, fused[0]}, 2, NULL);
    oar_tensor *bin[5] = {gz, x, w, fused[1], fused[2]};
    n = 3;
    CHECK(oar_op_call(OAR_OP_batch_norm_backward, bin, 5, NULL, dx, &n) == OAR_OK);
    oar_attr masked = oar_attr_int(1);
    oar_tensor *fin[6] = {g, x, w, fused[1], fused[2], fused[0]};
    n = 4;
    CHECK(oar_op_call(OAR_OP_batch_norm_act_backward, fin, 6, &masked, dfused, &n) == OAR_OK);
    for (int k = 0; k < 3; k++) diffs += !t_same_bits(dx[k], dfused[k]);
    diffs += !t_same_bits(gz, dfused[3]);
    if (mixed) {
        oar_tensor *binf[5] = {oar_cast(gz, OAR_F32), xf, w, fused[1], fused[2]};
        n = 3;
        CHECK(oar_op_call(OAR_OP_batch_norm_backward, binf, 5, NULL, dxf, &n) == OAR_OK);
        diffs += !t_same_bits(dx[0], oar_cast(dxf[0], dt)) + !t_same_bits(dx[1], dxf[1]) + !t_same_bits(dx[2], dxf[2]);
    }
    for (int k = 0; k < 3; k++) {
        oar_release(out[k]);
        oar_release(ref[k]);
        oar_release(fused[k]);
        oar_release(dx[k]);
        oar_release(dfused[k]);
        if (mixed) oar_release(dxf[k]);
    }
    oar_release(dfused[3]);
    CHECK(diffs == 0);
    printf("  %s %dd%s (%s kernel): %d differences\n", oar_dtype_name(dt), nd,
           specials ? ", NaN and inf parameters" : "", mixed ? "mixed" : "fallback", diffs);
    oar_scope_end();
}

/* ---- a compiled O2 bf16 ResNet-20 step against the eager one */
typedef struct o2_run {
    zoo_run z;
    oar_amp_masters *w;
    oar_optimizer *o;
} o2_run;

static oar_tensor *o2_loss(void *user, oar_tensor *const *in) {
    o2_run *r = user;
    return oar_cross_entropy(oar_forward(r->z.m, in[0]), in[1], NULL);
}

static oar_status o2_step(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    o2_run *r = user;
    return amp_o2_step(r->o, r->w, o2_loss, r, in, out);
}

static void o2_init(o2_run *r) {
    zoo_run_init_sgd(&r->z, "resnet20", 3);
    oar_module_train(r->z.m, true);
    oar_amp_decorate_opts d = oar_amp_decorate_defaults();
    r->w = oar_amp_decorate(r->z.m, &d);
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = 0.05;
    oo.momentum = 0.9;
    r->o = oar_amp_masters_optimizer(r->w, &oo);
}

static void o2_free(o2_run *r) {
    oar_optimizer_free(r->o);
    oar_amp_masters_free(r->w);
    zoo_run_free(&r->z);
}

static void check_resnet20_o2(void) {
    oar_scope_begin();
    o2_run e, c;
    o2_init(&e);
    o2_init(&c);
    const oar_state_source *src[1] = {oar_amp_masters_state_source(c.w)};
    oar_jit_opts jo = {.module = c.z.m, .optimizer = c.o, .state_sources = src, .n_state_sources = 1};
    oar_jit *f = oar_jit_to_static(o2_step, &c, &jo);
    CHECK(f != NULL);
    const oar_zoo_info *info = oar_zoo_find("resnet20");
    int diffs = 0;
    oar_manual_seed(8);
    for (int step = 0; step < 2 && f; step++) {
        oar_scope_begin();
        oar_tensor *io[2], *le = NULL, *lc = NULL;
        zoo_batch(info, 2, 0, &io[0], &io[1]);
        CHECK(o2_step(&e, io, 2, &le, 1) == OAR_OK);
        CHECK(oar_jit_call(f, io, 2, &lc, 1) == OAR_OK);
        diffs += !t_same_bits(le, lc);
        oar_release(le);
        oar_release(lc);
        oar_scope_end();
    }
    for (int i = 0; i < oar_module_num_parameters(e.z.m); i++) {
        const char *name;
        oar_tensor *a = oar_module_parameter(e.z.m, i, &name), *b = oar_module_parameter(c.z.m, i, NULL);
        if (!t_same_bits(a, b)) fprintf(stderr, "compiled O2 resnet20: parameter %s differs\n", name);
        diffs += !t_same_bits(a, b);
    }
    for (int i = 0; i < oar_module_num_buffers(e.z.m); i++)
        diffs += !t_same_bits(oar_module_buffer(e.z.m, i, NULL), oar_module_buffer(c.z.m, i, NULL));
    int fwd = f ? fusion_count_op(f, OAR_OP_batch_norm_act) : -1;
    int bwd = f ? fusion_count_op(f, OAR_OP_batch_norm_act_backward) : -1;
    int left = f ? fusion_count_op(f, OAR_OP_batch_norm) : -1;
    CHECK(diffs == 0);
    /* the stem's and the 18 blocks' batch norms fused; the two projection shortcuts' are not
     * followed by a relu */
    CHECK(fwd == 19 && bwd == 19 && left == 2);
    printf("  resnet20 O2 bf16, 2 steps: %d batch_norm_act, %d batch_norm_act_backward, %d batch_norm left, "
           "%d differences\n", fwd, bwd, left, diffs);
    oar_jit_free(f);
    o2_free(&e);
    o2_free(&c);
    oar_scope_end();
}

int main(void) {
    oar_manual_seed(5);
    const int64_t planes[4] = {4, 8, 9, 9}, rows[2] = {16, 21}, wide[4] = {2, 16, 32, 32};
    for (oar_dtype dt = OAR_F16; dt <= OAR_BF16; dt++) {
        check_kernels(dt, planes, 4, false);
        check_kernels(dt, rows, 2, false);
        check_kernels(dt, wide, 4, false);
        check_kernels(dt, planes, 4, true); /* the roundings' NaN rule (16 lanes at the avx512 cap) */
    }
    check_resnet20_o2();
    return test_summary("test_amp_bn_fused");
}
