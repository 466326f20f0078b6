/* Fast kernel for linear_act (src/ops/fused_linear_act.c), f32: the kernel dispatch picks for
 * linear (the same GEMM entry, whatever it is) writes x·Wᵀ + b into the output, then the
 * activation runs over it in place with the unfused AVX2 kernel's vector helper
 * (avx2_activation.h), split over the thread pool. Bitwise equal to linear then the activation.
 *
 * The activation follows the whole GEMM rather than each row block: splitting the GEMM into
 * row blocks would change the shapes BLAS sees and may change its kernel choice and so the
 * rounding. The outputs of the zoo's linears (at most a few hundred KiB) are still in L2 when
 * the epilogue reads them. */
#include "kernels/cpu/avx2_elementwise.h"
#include "ops/fused_ew.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "kernels/cpu/avx2_activation.h"

typedef struct act_job {
    float *y;
    int64_t kind;
} act_job;

static OAR_AVX2 void act_range(void *vjob, int64_t begin, int64_t end) {
    const act_job *j = vjob;
    float *y = j->y;
    int64_t i = begin;
#define ACT_LOOP(EXPR)                                                  \
    for (; i + 8 <= end; i += 8) {                                      \
        __m256 v = _mm256_loadu_ps(y + i);                              \
        _mm256_storeu_ps(y + i, EXPR);                                  \
    }                                                                   \
    if (i < end) {                                                      \
        __m256i m = oar_v_tail_mask(end - i);                           \
        __m256 v = _mm256_maskload_ps(y + i, m);                        \
        _mm256_maskstore_ps(y + i, m, EXPR);                            \
    }
    switch (j->kind) {
    case OAR_LINEAR_ACT_RELU: ACT_LOOP(oar_v_relu(v)) break;
    case OAR_LINEAR_ACT_GELU: ACT_LOOP(oar_v_gelu_erf(v)) break;
    case OAR_LINEAR_ACT_GELU_TANH: ACT_LOOP(oar_v_gelu_tanh(v)) break;
    default: break;
    }
#undef ACT_LOOP
}

static oar_status linear_act_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                  int n_out, const oar_attr *a) {
    const oar_kernel_entry *k = oar_select_kernel(OAR_OP_linear, in, n_in, out, n_out, NULL);
    if (!k) return oar_last_status();
    oar_status st = k->fn(ctx, in, n_in, out, n_out, NULL);
    if (st != OAR_OK || a[0].i == OAR_LINEAR_ACT_NONE || out[0]->numel == 0) return st;
    act_job j = {(float *)oar_tensor_ptr(out[0]), a[0].i};
    oar_parallel_for(out[0]->numel, OAR_EW_GRAIN, act_range, &j);
    return OAR_OK;
}

static bool linear_act_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                                const oar_attr *a) {
    (void)a;
    return oar_cpu_has_avx2() && in[0]->dtype == OAR_F32 && out[0]->contiguous &&
           oar_select_kernel(OAR_OP_linear, in, n_in, out, n_out, NULL) != NULL;
}
#endif

void oar_cpu_register_linear_act(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    oar_register_kernel(OAR_OP_linear_act, (oar_kernel_entry){.device = OAR_CPU,
                                                              .dtypes = OAR_DTYPE_BIT(OAR_F32),
                                                              .impl = "avx2",
                                                              .priority = 10,
                                                              .fn = linear_act_avx2,
                                                              .supports = linear_act_supports});
#endif
}
