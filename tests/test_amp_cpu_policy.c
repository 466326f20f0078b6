/* Autocast's CPU policy (oar_amp_cpu_policy, include/oar/amp.h): on a CPU without native bf16
 * (here: capped at avx2 by ctest's _avx2 and _generic runs) a bf16 region keeps low ops on f32
 * inputs in f32 unless a kernel runs them in bf16 for no more than f32 costs (conv2d: bf16
 * storage around oneDNN's f32 convolution); with native bf16 the class table applies.
 *   - matmul and linear on f32 inputs: f32 without native bf16, bf16 with it;
 *   - matmul with one input bf16 already: bf16 (the other is cast down) on every CPU;
 *   - conv2d on f32 inputs: bf16 where oneDNN runs the f32 convolution (the storage kernel);
 *   - OAR_AMP_CPU_TABLE, custom_low and f16 regions: the table on every CPU;
 *   - a compiled O1 step of an MLP without native bf16 has no cast and gives the f32 step's
 *     bits, and equals its eager O1 step;
 *   - a bad cpu_policy is refused. */
#include "kernels/cpu/bf16_native.h"
#include "ops/op.h"
#include "test_util.h"

#include "oar/amp.h"

#include <string.h>

static bool begin_bf16(oar_amp_cpu_policy policy, const char *const *low, int n_low) {
    oar_autocast_opts o = oar_autocast_defaults();
    o.cpu_policy = policy;
    o.custom_low = low, o.n_custom_low = n_low;
    return oar_autocast_begin(&o) == OAR_OK;
}

/* whether oneDNN runs this f32 convolution (then the bf16 one has the storage kernel) */
static bool onednn_conv(oar_tensor *x, oar_tensor *w, const oar_attr *a) {
    oar_tensor *y = oar_op_call1(OAR_OP_conv2d, (oar_tensor *[]){x, w, NULL}, 3, a);
    const oar_kernel_entry *k = y ? oar_select_kernel(OAR_OP_conv2d, (oar_tensor *[]){x, w, NULL}, 3, &y, 1, a) : NULL;
    oar_clear_error();
    return k && !strcmp(k->impl, "onednn");
}

static void test_dtypes(void) {
    oar_scope_begin();
    const bool native = oar_cpu_bf16_native();
    int64_t xs[2] = {4, 8}, ws[2] = {8, 3}, lw[2] = {3, 8}, cx[4] = {2, 16, 6, 6}, cw[4] = {16, 16, 3, 3};
    oar_tensor *x = oar_randn(xs, 2, OAR_F32), *w = oar_randn(ws, 2, OAR_F32), *l = oar_randn(lw, 2, OAR_F32);
    oar_tensor *im = oar_randn(cx, 4, OAR_F32), *k = oar_randn(cw, 4, OAR_F32);
    int64_t s[2] = {1, 1}, p[2] = {1, 1}, d[2] = {1, 1};
    oar_attr conv[4] = {oar_attr_ints(s, 2), oar_attr_ints(p, 2), oar_attr_ints(d, 2), oar_attr_int(1)};
    const oar_dtype low_or_f32 = native ? OAR_BF16 : OAR_F32;
    const bool conv_low = native || onednn_conv(im, k, conv);

    CHECK(begin_bf16(OAR_AMP_CPU_AUTO, NULL, 0));
    CHECK(oar_dtype_of(oar_matmul(x, w)) == low_or_f32);
    CHECK(oar_dtype_of(oar_linear(x, l, NULL)) == low_or_f32);
    CHECK(oar_dtype_of(oar_matmul(oar_cast(x, OAR_BF16), w)) == OAR_BF16); /* an input low already */
    oar_tensor *y = oar_op_call1(OAR_OP_conv2d, (oar_tensor *[]){im, k, NULL}, 3, conv);
    CHECK(y && oar_dtype_of(y) == (conv_low ? OAR_BF16 : OAR_F32));
    CHECK(oar_amp_op_class("matmul", OAR_BF16) == OAR_AMP_LOW); /* the class itself is unchanged */
    oar_autocast_end();
    printf("  native bf16 %s: AUTO runs matmul in %s, conv2d in %s\n", native ? "yes" : "no",
           oar_dtype_name(low_or_f32), conv_low ? "bf16" : "f32");

    CHECK(begin_bf16(OAR_AMP_CPU_TABLE, NULL, 0));
    CHECK(oar_dtype_of(oar_matmul(x, w)) == OAR_BF16);
    oar_autocast_end();
    const char *low[] = {"matmul"};
    CHECK(begin_bf16(OAR_AMP_CPU_AUTO, low, 1));
    CHECK(oar_dtype_of(oar_matmul(x, w)) == OAR_BF16);
    CHECK(oar_dtype_of(oar_linear(x, l, NULL)) == low_or_f32);
    oar_autocast_end();
    oar_autocast_opts o = oar_autocast_defaults();
    o.dtype = OAR_F16;
    CHECK(oar_autocast_begin(&o) == OAR_OK);
    CHECK(oar_dtype_of(oar_matmul(x, w)) == OAR_F16);
    oar_autocast_end();

    o = oar_autocast_defaults();
    o.cpu_policy = (oar_amp_cpu_policy)7;
    CHECK_ERR(oar_autocast_begin(&o), "oar_autocast_begin: expected cpu_policy OAR_AMP_CPU_AUTO or OAR_AMP_CPU_TABLE, got 7");
    CHECK(!oar_autocast_enabled());
    oar_scope_end();
}

/* ---- compiled O1 (AUTO) MLP steps: with no native bf16 they are the f32 step */
typedef struct run {
    oar_module *m;
    oar_optimizer *o;
    bool amp;
} run;

static oar_status step_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    run *r = user;
    oar_optimizer_zero_grad(r->o);
    oar_autocast_opts ac = oar_autocast_defaults();
    ac.enabled = r->amp;
    oar_status st = oar_autocast_begin(&ac);
    if (st != OAR_OK) return st;
    oar_tensor *loss = oar_mse_loss(oar_forward(r->m, in[0]), in[1], OAR_REDUCE_MEAN);
    oar_autocast_end();
    if (!loss) return oar_last_status();
    if ((st = oar_backward(loss, NULL, false)) != OAR_OK) return st;
    if ((st = oar_optimizer_step(r->o)) != OAR_OK) return st;
    out[0] = loss;
    return OAR_OK;
}

static run make_run(bool amp) {
    oar_manual_seed(11);
    int64_t ln[1] = {16};
    oar_module *layers[4] = {oar_nn_linear(8, 16, true), oar_nn_activation(OAR_ACT_GELU, 0),
                             oar_nn_layer_norm(ln, 1, 1e-5, true), oar_nn_linear(16, 4, true)};
    run r = {oar_nn_sequential(layers, 4), NULL, amp};
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_ADAM);
    oo.lr = 0.01;
    r.o = oar_optimizer_for(r.m, &oo);
    return r;
}

static void test_compiled(void) {
    oar_scope_begin();
    run f32 = make_run(false), eager = make_run(true), comp = make_run(true);
    oar_jit_opts jo = {.module = comp.m, .optimizer = comp.o};
    oar_jit *f = oar_jit_to_static(step_fn, &comp, &jo);
    CHECK(f != NULL);
    int64_t xs[2] = {32, 8}, ys[2] = {32, 4};
    oar_tensor *in[2] = {oar_randn(xs, 2, OAR_F32), oar_randn(ys, 2, OAR_F32)};
    int same_eager = 0, same_f32 = 0;
    for (int step = 0; step < 4 && f; step++) {
        oar_tensor *lf = NULL, *le = NULL, *lc = NULL;
        CHECK(step_fn(&f32, in, 2, &lf, 1) == OAR_OK && step_fn(&eager, in, 2, &le, 1) == OAR_OK);
        CHECK(oar_jit_call(f, in, 2, &lc, 1) == OAR_OK);
        same_eager += t_same_bits(le, lc);
        same_f32 += t_same_bits(lf, lc);
        oar_release(lf), oar_release(le), oar_release(lc);
    }
    CHECK(same_eager == 4);
    static char dump[1 << 18];
    int casts = 0;
    if (f && oar_jit_dump(f, 0, dump, sizeof dump) > 0)
        for (const char *p = dump; (p = strstr(p, "cast(")) != NULL; p++) casts++;
    if (!oar_cpu_bf16_native()) {
        CHECK(casts == 0 && same_f32 == 4);
        for (int i = 0; i < oar_module_num_parameters(f32.m); i++)
            CHECK(t_same_bits(oar_module_parameter(f32.m, i, NULL), oar_module_parameter(comp.m, i, NULL)));
    } else {
        CHECK(casts > 0);
    }
    printf("  compiled O1 MLP: %d cast nodes, %d of 4 losses equal to the f32 step's, %d to the eager O1 step's\n", casts,
           same_f32, same_eager);
    oar_jit_free(f);
    run *rs[3] = {&f32, &eager, &comp};
    for (int i = 0; i < 3; i++) oar_optimizer_free(rs[i]->o), oar_module_free(rs[i]->m);
    oar_scope_end();
}

int main(void) {
    oar_manual_seed(2);
    test_dtypes();
    test_compiled();
    return test_summary("test_amp_cpu_policy");
}
