/* layer_norm and layer_norm_backward on bf16/f16 rows with f32 weight and bias (nn_norm.c,
 * nn_norm_backward.c, impl avx2-mixed): the values are widened and rounded in registers with
 * the f32 kernel's arithmetic, so the results are the bits of the f32 op on widened copies,
 * rounded (what via-f32 gives): y, mean, rstd; dx, dweight, dbias. Rows of 128 (vectors only)
 * and 21 values (a tail), with weight and bias, weight only, and neither (f32 statistics, the
 * parameter dtype then being x's: the mixed kernel is not the one chosen). At the generic cap
 * the fallback runs: only the impl changes. */
#include "kernels/cpu/cpu_kernels.h"
#include "ops/op.h"
#include "test_util.h"

#include <string.h>

static bool mixed_runs(oar_op_id op, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                       const oar_attr *a) {
    const oar_kernel_entry *k = oar_select_kernel(op, in, n_in, out, n_out, a);
    oar_clear_error();
    return k && !strcmp(k->impl, OAR_IMPL_HALF_MIXED);
}

static oar_tensor *rand_low(const int64_t *shape, int nd, oar_dtype dt, double scale, double shift) {
    return oar_cast(oar_add_scalar(oar_mul_scalar(oar_randn(shape, nd, OAR_F32), scale), shift), dt);
}

static void check(oar_dtype dt, int64_t rows, int64_t m, bool weight, bool bias) {
    oar_scope_begin();
    int64_t xs[2] = {rows, m};
    oar_tensor *x = rand_low(xs, 2, dt, 1.7, 0.4), *g = rand_low(xs, 2, dt, 1.0, 0.0);
    oar_tensor *w = weight ? oar_add_scalar(oar_rand(&m, 1, OAR_F32), 0.5) : NULL;
    oar_tensor *b = bias ? oar_randn(&m, 1, OAR_F32) : NULL;
    oar_attr a[2] = {oar_attr_int(1), oar_attr_float(1e-5)};
    oar_tensor *xf = oar_cast(x, OAR_F32), *gf = oar_cast(g, OAR_F32);
    oar_tensor *y[3], *yf[3], *d[3], *df[3];
    int n = 3;
    CHECK(oar_op_call(OAR_OP_layer_norm, (oar_tensor *[]){x, w, b}, 3, a, y, &n) == OAR_OK);
    n = 3;
    CHECK(oar_op_call(OAR_OP_layer_norm, (oar_tensor *[]){xf, w, b}, 3, a, yf, &n) == OAR_OK);
    const bool f32_params = weight || bias, mixed = mixed_runs(OAR_OP_layer_norm, (oar_tensor *[]){x, w, b}, 3, y, 3, a);
    oar_tensor *bin[5] = {g, x, w, y[1], y[2]}, *binf[5] = {gf, xf, w, yf[1], yf[2]};
    n = 3;
    CHECK(oar_op_call(OAR_OP_layer_norm_backward, bin, 5, a, d, &n) == OAR_OK);
    n = 3;
    CHECK(oar_op_call(OAR_OP_layer_norm_backward, binf, 5, a, df, &n) == OAR_OK);
    const bool bmixed = mixed_runs(OAR_OP_layer_norm_backward, bin, 5, d, 3, a);
    /* with f32 parameters at the avx2 cap and above the mixed kernels must run */
    const bool expect = f32_params && oar_cpu_has_avx2();
    CHECK(mixed == expect && bmixed == expect);
    int diffs = 0;
    if (f32_params) {
        diffs += !t_same_bits(y[0], oar_cast(yf[0], dt)) + !t_same_bits(y[1], yf[1]) + !t_same_bits(y[2], yf[2]);
        diffs += !t_same_bits(d[0], oar_cast(df[0], dt));
        if (weight) diffs += !t_same_bits(d[1], df[1]);
        if (bias || weight) diffs += !t_same_bits(d[2], df[2]);
    }
    CHECK(diffs == 0);
    printf("  %s [%lld, %lld]%s%s: forward %s, backward %s, %d differences\n", oar_dtype_name(dt), (long long)rows,
           (long long)m, weight ? ", weight" : "", bias ? ", bias" : "", mixed ? "mixed" : "fallback",
           bmixed ? "mixed" : "fallback", diffs);
    oar_scope_end();
}

int main(void) {
    oar_manual_seed(7);
    for (oar_dtype dt = OAR_F16; dt <= OAR_BF16; dt++) {
        check(dt, 33, 128, true, true);
        check(dt, 17, 21, true, true);
        check(dt, 9, 40, true, false);
        check(dt, 5, 24, false, false);
    }
    return test_summary("test_amp_ln_mixed");
}
