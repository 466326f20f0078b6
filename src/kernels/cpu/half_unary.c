/* gelu and gelu_backward on dense bf16 (or f16) tensors: each value widened in registers, the
 * f32 kernels' vector expressions (avx2_activation.h), one rounding to the dtype (nn_half.h).
 * The bits of the via-f32 path (widen, the f32 kernel, round) without its f32 copies: an O2
 * gpt-mini step at the AVX2 cap spent more in gelu and its backward than the f32 step, all of
 * it in the conversion passes. Strided layouts keep via-f32. */
#include "kernels/cpu/nn_half.h"
#include "kernels/cpu/nn_kernels.h"

#if defined(OAR_NN_SIMD) && defined(__x86_64__)
#include "kernels/cpu/avx2_activation.h"

#define HU_GRAIN ((int64_t)1 << 15) /* a multiple of 8: only the last part has a tail */

typedef enum { HU_GELU_ERF, HU_GELU_TANH } hu_form;

typedef struct hu_job {
    const void *x, *g; /* g: the incoming gradient (backward only) */
    void *y;
    int k;
    hu_form form;
    bool backward;
} hu_job;

NN_HINL __m256 hu_apply(__m256 x, __m256 g, hu_form form, bool backward) {
    if (!backward) return form == HU_GELU_TANH ? oar_v_gelu_tanh(x) : oar_v_gelu_erf(x);
    return _mm256_mul_ps(g, form == HU_GELU_TANH ? oar_v_gelu_prime_tanh(x) : oar_v_gelu_prime_erf(x));
}

/* the f32 kernels load tails with zeros in the other lanes: so do these */
NN_HINL void hu_range_k(const hu_job *j, int64_t begin, int64_t end, const int k, const hu_form form,
                        const bool backward) {
    const __m256 zero = _mm256_setzero_ps();
    int64_t i = begin;
    for (; i + 8 <= end; i += 8) {
        __m256 g = backward ? nn_ld(j->g, i, k) : zero;
        nn_st(j->y, i, hu_apply(nn_ld(j->x, i, k), g, form, backward), k);
    }
    if (i < end) {
        const int64_t n = end - i;
        const __m256i mask = nn_tail_mask(n);
        __m256 g = backward ? nn_ld_tail(j->g, i, n, mask, 0.0f, k) : zero;
        nn_st_tail(j->y, i, n, mask, hu_apply(nn_ld_tail(j->x, i, n, mask, 0.0f, k), g, form, backward), k);
    }
}

/* one loop per kind, form and direction, each with its conversions inlined */
static NN_AVX2H void hu_range(void *ctx, int64_t begin, int64_t end) {
    const hu_job *j = ctx;
    const bool bf = j->k == NN_BF16, tanh = j->form == HU_GELU_TANH;
    if (j->backward) {
        if (bf) tanh ? hu_range_k(j, begin, end, NN_BF16, HU_GELU_TANH, true) : hu_range_k(j, begin, end, NN_BF16, HU_GELU_ERF, true);
        else tanh ? hu_range_k(j, begin, end, NN_F16, HU_GELU_TANH, true) : hu_range_k(j, begin, end, NN_F16, HU_GELU_ERF, true);
    } else {
        if (bf) tanh ? hu_range_k(j, begin, end, NN_BF16, HU_GELU_TANH, false) : hu_range_k(j, begin, end, NN_BF16, HU_GELU_ERF, false);
        else tanh ? hu_range_k(j, begin, end, NN_F16, HU_GELU_TANH, false) : hu_range_k(j, begin, end, NN_F16, HU_GELU_ERF, false);
    }
}

static oar_status hu_run(const void *x, const void *g, oar_tensor *y, int64_t form, bool backward) {
    hu_job j = {x, g, oar_tensor_ptr(y), nn_kind(y->dtype), form ? HU_GELU_TANH : HU_GELU_ERF, backward};
    const int64_t n = y->numel;
    if (n >= 2 * HU_GRAIN) oar_parallel_for(n, HU_GRAIN, hu_range, &j);
    else hu_range(&j, 0, n);
    return OAR_OK;
}

static oar_status gelu_half(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                            const oar_attr *a) {
    (void)ctx, (void)n_in, (void)n_out;
    return hu_run(oar_tensor_ptr(in[0]), NULL, out[0], a[0].i, false);
}

/* gelu_backward(grad, x) */
static oar_status gelu_backward_half(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                     int n_out, const oar_attr *a) {
    (void)ctx, (void)n_in, (void)n_out;
    return hu_run(oar_tensor_ptr(in[1]), oar_tensor_ptr(in[0]), out[0], a[0].i, true);
}

/* every operand dense, of the output's bf16/f16 dtype and element count */
static bool hu_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_out, (void)a;
    const int k = nn_kind(out[0]->dtype);
    if (!oar_cpu_has_avx2() || (k != NN_BF16 && k != NN_F16) || !oar_nn_half_ok(out[0], k)) return false;
    for (int i = 0; i < n_in; i++)
        if (!oar_nn_half_ok(in[i], k) || in[i]->numel != out[0]->numel) return false;
    return true;
}

#endif

void oar_cpu_register_half_unary(void) {
#if defined(OAR_NN_SIMD) && defined(__x86_64__)
    oar_kernel_entry e = {.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_BF16) | OAR_DTYPE_BIT(OAR_F16),
                          .impl = OAR_IMPL_HALF_PARTIAL, .priority = 10, .fn = gelu_half, .supports = hu_supports};
    oar_register_kernel(OAR_OP_gelu, e);
    e.fn = gelu_backward_half;
    oar_register_kernel(OAR_OP_gelu_backward, e);
#endif
}
