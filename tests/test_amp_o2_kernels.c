/* The kernels of O2 transformer steps that read bf16/f16 directly (docs/amp.md, "At the AVX2
 * cap: native bf16 gelu and layer norm"), each against the via-f32 path bit for bit (the op on
 * f32 copies, its outputs rounded), at every ISA cap, and the avx2-half kernel is the one that
 * runs where the cap has AVX2:
 *   - gelu and gelu_backward, both forms: lengths with vector tails, past one conversion block
 *     (1024 values) and one parallel part (16384), values up to the activation's saturation and
 *     infinities and NaN;
 *   - layer_norm and layer_norm_backward on bf16/f16 x and grad_out with f32 weight and bias
 *     (autocast's mixed form; the avx2-mixed kernel): row widths with vector tails, up to the
 *     row buffers' 4096 values (one past it runs via-f32), more rows than the backward's 8
 *     parts, weight only. */
#include "amp_via_f32_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static oar_tensor *rand_low(const int64_t *shape, int nd, oar_dtype dt, double scale) {
    return oar_cast(oar_mul_scalar(oar_randn(shape, nd, OAR_F32), scale), dt);
}

/* x with inf, -inf and NaN in its first values (where it has them) */
static oar_tensor *with_specials(const int64_t *shape, int nd, oar_dtype dt) {
    oar_tensor *x = oar_mul_scalar(oar_randn(shape, nd, OAR_F32), 4.0);
    int64_t n = oar_numel(x);
    float *v = malloc(sizeof(float) * (size_t)n);
    oar_copy_to_buffer(x, v, sizeof(float) * (size_t)n, OAR_F32);
    const float sp[3] = {INFINITY, -INFINITY, NAN};
    for (int64_t i = 0; i < n && i < 3; i++) v[i] = sp[i];
    oar_tensor *y = oar_from_data(v, shape, nd, OAR_F32);
    free(v);
    return oar_cast(y, dt);
}

static void check_gelu(oar_dtype dt, int64_t n) {
    oar_scope_begin();
    int64_t shape[2] = {2, n};
    oar_tensor *x = with_specials(shape, 2, dt), *g = rand_low(shape, 2, dt, 1.0);
    int diffs = 0;
    bool half = true;
    for (int tanh_form = 0; tanh_form < 2; tanh_form++) {
        oar_attr a[1] = {oar_attr_int(tanh_form)};
        const char *impl[2];
        oar_tensor *gx[2] = {g, x};
        diffs += against_via_f32(OAR_OP_gelu, &x, 1, a, 1, &impl[0]);
        diffs += against_via_f32(OAR_OP_gelu_backward, gx, 2, a, 1, &impl[1]);
        half &= !strcmp(impl[0], "avx2-half") && !strcmp(impl[1], "avx2-half");
    }
    CHECK(diffs == 0);
    CHECK(half == amp_half_expected());
    printf("  %s gelu and gelu_backward, [2, %lld], both forms (%s): %d differences\n", oar_dtype_name(dt), (long long)n,
           half ? "avx2-half" : "other kernels", diffs);
    oar_scope_end();
}

static void check_layer_norm(oar_dtype dt, int64_t rows, int64_t m, bool bias) {
    oar_scope_begin();
    int64_t xs[2] = {rows, m}, ws[1] = {m};
    oar_tensor *x = rand_low(xs, 2, dt, 3.0), *g = rand_low(xs, 2, dt, 1.0);
    oar_tensor *w = oar_add_scalar(oar_mul_scalar(oar_randn(ws, 1, OAR_F32), 0.5), 1.0);
    oar_tensor *b = bias ? oar_randn(ws, 1, OAR_F32) : NULL;
    oar_attr a[2] = {oar_attr_int(1), oar_attr_float(1e-5)};
    oar_tensor *in[3] = {oar_add_scalar(x, 0.25), w, b}, *stats[3];
    int n = 3;
    CHECK(oar_op_call(OAR_OP_layer_norm, in, 3, a, stats, &n) == OAR_OK);
    const char *impl[2];
    int diffs = against_via_f32(OAR_OP_layer_norm, in, 3, a, 3, &impl[0]);
    oar_tensor *bin[5] = {g, in[0], w, stats[1], stats[2]};
    diffs += against_via_f32(OAR_OP_layer_norm_backward, bin, 5, a, 3, &impl[1]);
    for (int i = 0; i < 3; i++) oar_release(stats[i]);
    bool mixed = !strcmp(impl[0], "avx2-mixed") && !strcmp(impl[1], "avx2-mixed");
    CHECK(diffs == 0);
    CHECK(mixed == (amp_half_expected() && m <= 4096));
    printf("  %s layer_norm and backward, [%lld, %lld]%s (%s / %s): %d differences\n", oar_dtype_name(dt),
           (long long)rows, (long long)m, bias ? "" : ", no bias", impl[0], impl[1], diffs);
    oar_scope_end();
}

int main(void) {
    oar_manual_seed(7);
    for (oar_dtype dt = OAR_F16; dt <= OAR_BF16; dt++) {
        check_gelu(dt, 3);             /* a tail only */
        check_gelu(dt, 1029);          /* a block and a tail */
        check_gelu(dt, 8 * 1024 + 13); /* rows past one parallel part (16384 values) */
        check_layer_norm(dt, 19, 256, true); /* gpt-mini's width; more rows than parts */
        check_layer_norm(dt, 5, 37, true);   /* vector tails */
        check_layer_norm(dt, 3, 13, false);
        check_layer_norm(dt, 2, 4096, true); /* the largest row the kernels take */
        check_layer_norm(dt, 2, 4097, true); /* via-f32 */
    }
    return test_summary("test_amp_o2_kernels");
}
