/* The CPU feature switch (src/base/cpu_isa.c, docs/cpu-isa.md): names, refusals, and that the
 * cap reaches every runtime choice: kernel dispatch, the GEMM rule and its per-shape cache,
 * the direct-conv rule and its test hook, oneDNN's use. Runs at whatever cap OAR_CPU_ISA
 * gives it (CTest runs it native, avx2 and generic) and sets each cap the CPU allows. */
#include "kernels/cpu/conv_direct.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm_select.h"
#ifdef OAR_HAVE_ONEDNN
#include "kernels/cpu/dnnl_engine.h"
#endif
#include "ops/op.h"
#include "test_util.h"

static const char *impl_for(oar_op_id op, oar_tensor *x) {
    oar_meta m[1];
    int n_out = 1;
    if (oar_op_infer(op, &x, 1, NULL, m, &n_out) != OAR_OK) return "?";
    oar_tensor *out = oar_empty(m[0].shape, m[0].ndim, m[0].dtype);
    const oar_kernel_entry *k = oar_select_kernel(op, &x, 1, &out, 1, NULL);
    return k ? k->impl : "?";
}

static void test_names(void) {
    oar_cpu_isa isa;
    CHECK(oar_cpu_isa_from_name("avx2", &isa) == OAR_OK && isa == OAR_CPU_ISA_AVX2);
    CHECK(oar_cpu_isa_from_name("AVX512", &isa) == OAR_OK && isa == OAR_CPU_ISA_AVX512);
    CHECK(oar_cpu_isa_from_name("generic", &isa) == OAR_OK && isa == OAR_CPU_ISA_GENERIC);
    CHECK(oar_cpu_isa_from_name("sse4", &isa) == OAR_ERR_INVALID_ARG);
    CHECK(strstr(oar_last_error(), "expected one of generic, avx2, avx512, got 'sse4'") != NULL);
    for (int i = 0; i <= OAR_CPU_ISA_AVX512; i++)
        CHECK(oar_cpu_isa_from_name(oar_cpu_isa_name((oar_cpu_isa)i), &isa) == OAR_OK && isa == (oar_cpu_isa)i);
    CHECK(!strcmp(oar_cpu_isa_name((oar_cpu_isa)9), "unknown"));
}

/* The cap starts from OAR_CPU_ISA (CTest's capped runs), else the best the CPU has. */
static void test_default(void) {
    oar_cpu_isa native = oar_cpu_isa_native(), want = native, cap = oar_get_cpu_isa();
    const char *env = getenv("OAR_CPU_ISA");
    if (env && oar_cpu_isa_from_name(env, &want) == OAR_OK && want > native) want = native;
    CHECK(cap == want);
    CHECK(cap <= native);
    /* the flags the native ISA rests on are listed */
    const char *flags = oar_cpu_flags();
    if (native >= OAR_CPU_ISA_AVX2) CHECK(strstr(flags, "avx2") && strstr(flags, "fma"));
    if (native >= OAR_CPU_ISA_AVX512) CHECK(strstr(flags, "avx512f") != NULL);
    CHECK(oar_cpu_model() != NULL);
}

static void test_refusals(void) {
    oar_cpu_isa before = oar_get_cpu_isa();
    CHECK(oar_set_cpu_isa((oar_cpu_isa)7) == OAR_ERR_INVALID_ARG);
    CHECK(strstr(oar_last_error(), "got 7") != NULL);
    if (oar_cpu_isa_native() < OAR_CPU_ISA_AVX512) {
        CHECK(oar_set_cpu_isa(OAR_CPU_ISA_AVX512) == OAR_ERR_UNSUPPORTED);
        CHECK(strstr(oar_last_error(), "lacks avx512") && strstr(oar_last_error(), "ask for"));
    }
    CHECK(oar_get_cpu_isa() == before); /* a refusal changes nothing */
}

/* Each cap the CPU allows, set at run time, reaches every choice. */
static void test_each_cap(void) {
    oar_scope_begin();
    oar_tensor *x = oar_randn((int64_t[]){64}, 1, OAR_F32);
    oar_cpu_isa before = oar_get_cpu_isa();
    for (int i = 0; i <= (int)oar_cpu_isa_native(); i++) {
        oar_cpu_isa isa = (oar_cpu_isa)i;
        CHECK(oar_set_cpu_isa(isa) == OAR_OK && oar_get_cpu_isa() == isa);
        bool avx2 = isa >= OAR_CPU_ISA_AVX2, avx512 = isa >= OAR_CPU_ISA_AVX512;
        CHECK(oar_cpu_has_avx2() == avx2 && oar_cpu_has_avx512() == avx512);
#if defined(__x86_64__)
        /* dispatch: exp's AVX2 kernel only where the cap allows it */
        CHECK(!strcmp(impl_for(OAR_OP_exp, x), avx2 ? "avx2" : "reference"));
#endif
        /* GEMM: oar's kernels and their tile width follow the cap, and so does the per-shape
         * cache (the same shape asked under each cap) */
        CHECK(oar_gemm_backend_available(OAR_GEMM_AVX2) == avx2);
        CHECK(oar_gemm_backend_available(OAR_GEMM_AVX512) == avx512);
        oar_gemm_backend b = oar_gemm_choose(false, true, 32, 64, 64, 1);
        CHECK(b == (avx512 ? OAR_GEMM_AVX512 : avx2 ? OAR_GEMM_AVX2 : b));
        if (!avx2) CHECK(b != OAR_GEMM_AVX2 && b != OAR_GEMM_AVX512);
        /* direct convs: the rule, and the test hook that forces an instruction set */
        int64_t one[2] = {1, 1}, zero[2] = {0, 0};
        CHECK(oar_conv_direct_takes(OAR_CONV_DIRECT_FORWARD, 1, 6, 5, 5, one, zero, one, 1) == avx2);
        CHECK((oar_conv_direct_force_isa(OAR_CONV_DIRECT_AVX512) >= 0) == avx512);
        oar_conv_direct_force_isa(OAR_CONV_DIRECT_AUTO);
#ifdef OAR_HAVE_ONEDNN
        /* oneDNN runs only while oar's cap is at or above the level it was fixed at */
        CHECK(oar_dnnl_usable() == (isa >= oar_dnnl_isa()));
        CHECK(oar_gemm_backend_available(OAR_GEMM_DNNL) == (isa >= oar_dnnl_isa()));
#endif
    }
    CHECK(oar_set_cpu_isa(before) == OAR_OK);
    oar_scope_end();
}

/* A program compiled under one cap keeps the kernels chosen then: lowering the cap below the
 * level oneDNN was fixed at must not make its oneDNN convs fail (they decline only when a
 * kernel is chosen). Runs first, so oneDNN is fixed at this run's starting cap. */
static oar_status conv_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in; (void)n_out;
    out[0] = oar_forward(user, in[0]);
    return out[0] ? OAR_OK : oar_last_status();
}

static void test_compiled_keeps_kernels(void) {
    oar_scope_begin();
    oar_cpu_isa before = oar_get_cpu_isa();
    oar_manual_seed(3);
    oar_conv_opts co = {.stride = {1, 1}, .padding = {1, 1}};
    oar_module *m = oar_nn_conv2d(16, 16, 3, &co, true);
    oar_module_train(m, false);
    oar_tensor *x = oar_randn((int64_t[]){2, 16, 12, 12}, 4, OAR_F32), *y[1] = {0}, *z[1] = {0};
    oar_jit *f = oar_jit_to_static(conv_fn, m, &(oar_jit_opts){.module = m});
    CHECK(oar_jit_call(f, &x, 1, y, 1) == OAR_OK);
    CHECK(oar_set_cpu_isa(OAR_CPU_ISA_GENERIC) == OAR_OK);
    CHECK(oar_jit_call(f, &x, 1, z, 1) == OAR_OK);
    CHECK(y[0] && z[0] && t_same_bits(y[0], z[0]));
    /* eager, the cap applies at once: still the same convolution, within rounding */
    oar_tensor *e = oar_forward(m, x);
    double worst = 0;
    for (int64_t i = 0; e && i < oar_numel(e); i += 7) worst = fmax(worst, fabs(t_at(e, i) - t_at(y[0], i)));
    CHECK(e && worst < 1e-4);
    CHECK(oar_set_cpu_isa(before) == OAR_OK);
    oar_jit_free(f);
    oar_module_free(m);
    oar_scope_end();
}

int main(void) {
    oar_init();
    test_compiled_keeps_kernels();
    test_names();
    test_default();
    test_refusals();
    test_each_cap();
    return test_summary("test_cpu_isa");
}
