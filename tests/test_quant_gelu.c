/* GELU in qlinear's epilogue (a dynamic int8 MLP: gelu(qlinear(...; f32)); src/ops/quant.h,
 * qgemm_x86.c's emit_linear, the fuse_quant pass):
 *  - a program of dynamic-style layers, Linear -> GELU (erf and tanh) -> Linear, compiled with and
 *    without fuse_quant: the GELUs move into the epilogues and the outputs keep their bits;
 *  - qlinear with the GELU activation equals gelu(qlinear) bit for bit, at every ISA cap, on
 *    columns that fill vectors and on a masked tail;
 *  - against the double-precision formula of the gelu op (the reference), the fast epilogue is
 *    within 4 ulps (or 1e-30 absolute, where GELU underflows for very negative inputs) at every
 *    cap; the reference epilogue is exact. */
#include "test_util.h"

#include "ops/op.h"
#include "ops/quant.h"

static oar_tensor *g_w1, *g_w2, *g_s, *g_ws, *g_b1, *g_b2;
static bool g_tanh;

static oar_tensor *qlin(oar_tensor *x, oar_tensor *w, oar_tensor *b) {
    oar_tensor *s, *z;
    if (oar_choose_qparams(x, OAR_U8, false, &s, &z) != OAR_OK) return NULL;
    return oar_qlinear(oar_quantize(x, s, z, 0, OAR_U8), s, z, w, g_ws, b, NULL);
}

static oar_status mlp(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)user, (void)n_in, (void)n_out;
    out[0] = qlin(oar_gelu(qlin(in[0], g_w1, g_b1), g_tanh), g_w2, g_b2);
    return out[0] ? OAR_OK : oar_last_status();
}

static int count_op(oar_jit *f, const char *op) {
    static char text[1 << 16];
    if (oar_jit_dump(f, 0, text, sizeof text) < 0) return -1;
    char pat[64];
    snprintf(pat, sizeof pat, " = %s", op);
    int n = 0;
    for (const char *s = strstr(text, pat); s; s = strstr(s + 1, pat)) n += s[strlen(pat)] == '(' || s[strlen(pat)] == '[';
    return n;
}

static void fused_program(bool tanh_form) {
    oar_scope_begin();
    g_tanh = tanh_form;
    oar_tensor *x = oar_randn((int64_t[]){7, 24}, 2, OAR_F32);
    oar_jit_opts plain_opts = {0};
    CHECK(oar_build_strategy_set(&plain_opts.strategy, "fuse_quant", false) == OAR_OK);
    oar_jit *fused = oar_jit_to_static(mlp, NULL, NULL), *plain = oar_jit_to_static(mlp, NULL, &plain_opts);
    oar_tensor *yf = NULL, *yp = NULL, *eager = NULL;
    CHECK(fused && plain && oar_jit_call(fused, &x, 1, &yf, 1) == OAR_OK && oar_jit_call(plain, &x, 1, &yp, 1) == OAR_OK);
    CHECK(mlp(NULL, &x, 1, &eager, 1) == OAR_OK);
    CHECK(t_same_bits(yf, yp) && t_same_bits(yf, eager));
    CHECK(count_op(fused, "gelu") == 0 && count_op(plain, "gelu") == 1 && count_op(fused, "qlinear") == 2);
    oar_jit_free(fused);
    oar_jit_free(plain);
    oar_scope_end();
}

static oar_tensor *qlinear_act(oar_tensor *xq, oar_tensor *w, int64_t act) {
    oar_tensor *in[QL_N] = {xq, g_s, oar_scalar(3, OAR_I32), w, g_ws, g_b1, NULL, NULL, NULL};
    oar_attr at[2] = {oar_attr_int(act), oar_attr_dtype(OAR_F32)};
    return oar_op_call1(OAR_OP_qlinear, in, QL_N, at);
}

static int64_t ulps(float a, float b) {
    int32_t ia, ib;
    memcpy(&ia, &a, 4), memcpy(&ib, &b, 4);
    if (ia < 0) ia = INT32_MIN - ia;
    if (ib < 0) ib = INT32_MIN - ib;
    return llabs((long long)ia - ib);
}

/* at the current cap: fused == gelu(unfused) bit for bit, and within 4 ulps of the formula */
static void epilogue_gelu(void) {
    oar_scope_begin();
    /* 19 columns: two vectors and a masked tail of 3; scales wide enough to reach GELU's tails */
    oar_tensor *xq = oar_randint(0, 256, (int64_t[]){9, 24}, 2, OAR_U8);
    for (int tf = 0; tf < 2; tf++) {
        oar_tensor *plain = qlinear_act(xq, g_w1, OAR_QACT_NONE);
        oar_tensor *fused = qlinear_act(xq, g_w1, tf ? OAR_QACT_GELU_TANH : OAR_QACT_GELU_ERF);
        CHECK(plain && fused && t_same_bits(fused, oar_gelu(plain, tf)));
        int64_t n = oar_numel(plain), worst = 0, off = 0;
        const float *p = (const float *)oar_tensor_ptr(oar_contiguous(plain));
        const float *f = (const float *)oar_tensor_ptr(oar_contiguous(fused));
        double lo = 0, hi = 0;
        for (int64_t i = 0; i < n; i++) {
            float want = (float)oar_gelu_ref((double)p[i], tf);
            lo = p[i] < lo ? p[i] : lo, hi = p[i] > hi ? p[i] : hi;
            if (fabsf(want) < 1e-30f && fabsf(f[i] - want) <= 1e-30f) continue;
            int64_t u = ulps(f[i], want);
            if (u > worst) worst = u, off = i;
        }
        CHECK(worst <= 4);
        CHECK(lo < -5 && hi > 5); /* the inputs reach both tails */
        if (worst > 4)
            fprintf(stderr, "  gelu %s: %lld ulps at x = %.9g (cap %s)\n", tf ? "tanh" : "erf", (long long)worst,
                    (double)p[off], oar_cpu_isa_name(oar_get_cpu_isa()));
    }
    oar_scope_end();
}

int main(void) {
    oar_init();
    oar_manual_seed(9);
    oar_scope_begin();
    g_w1 = oar_randint(-127, 128, (int64_t[]){19, 24}, 2, OAR_I8);
    g_w2 = oar_randint(-64, 64, (int64_t[]){5, 19}, 2, OAR_I8);
    g_s = oar_scalar(0.05, OAR_F32), g_ws = oar_scalar(0.004, OAR_F32);
    g_b1 = oar_randn((int64_t[]){19}, 1, OAR_F32), g_b2 = oar_randn((int64_t[]){5}, 1, OAR_F32);
    fused_program(false);
    fused_program(true);
    oar_cpu_isa before = oar_get_cpu_isa();
    for (int isa = OAR_CPU_ISA_GENERIC; isa <= (int)oar_cpu_isa_native(); isa++) {
        if (oar_set_cpu_isa((oar_cpu_isa)isa) != OAR_OK) continue;
        epilogue_gelu();
    }
    oar_set_cpu_isa(before);
    oar_scope_end();
    return test_summary("test_quant_gelu");
}
