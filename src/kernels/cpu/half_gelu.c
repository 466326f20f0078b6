/* gelu and gelu_backward on dense bf16 (or f16) tensors without the via-f32 path's f32 copies of
 * x, of the incoming gradient and of the result (a compiled O2 transformer step's MLP
 * activations, [tokens, 4 width] per layer, forward and backward). Blocks of HG_BLOCK values are
 * widened into f32 buffers on the stack (L1), the f32 kernels' vector expressions
 * (avx2_activation.h) run over them, and the block is rounded out: the conversions are the
 * `cast` kernel's (half_f32.c: AVX-512 or AVX2 by the cap, one rounding), so the bits are those
 * of via-f32. Converting inside the activation's loop instead was slower than via-f32 (1350
 * against 1070 us for gelu's tanh form on [1024, 1024] at the AVX2 cap): the conversions'
 * constants crowd out the activation's in 16 ymm registers. The activation itself is the f32
 * kernels' AVX2 code at every cap, as for f32 tensors. */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/nn_half.h"
#include "kernels/cpu/nn_kernels.h"

#ifdef OAR_NN_SIMD
#include "kernels/cpu/avx2_activation.h"

#define HG_BLOCK 1024 /* values per block: two f32 buffers of 4 KB */

typedef enum { HG_ERF, HG_TANH, HG_ERF_BACKWARD, HG_TANH_BACKWARD } hg_fn;

typedef struct hg_job {
    const uint16_t *x, *g; /* g: the incoming gradient (backward only) */
    uint16_t *y;
    oar_dtype dt;
    hg_fn fn;
} hg_job;

/* x[i] <- f(x[i]) (backward: g[i] f'(x[i])) over n values rounded up to whole vectors */
static OAR_AVX2 void hg_block(float *x, const float *g, int64_t n, hg_fn fn) {
    switch (fn) {
    case HG_ERF:
        for (int64_t i = 0; i < n; i += 8) _mm256_store_ps(x + i, oar_v_gelu_erf(_mm256_load_ps(x + i)));
        break;
    case HG_TANH:
        for (int64_t i = 0; i < n; i += 8) _mm256_store_ps(x + i, oar_v_gelu_tanh(_mm256_load_ps(x + i)));
        break;
    case HG_ERF_BACKWARD:
        for (int64_t i = 0; i < n; i += 8)
            _mm256_store_ps(x + i, _mm256_mul_ps(_mm256_load_ps(g + i), oar_v_gelu_prime_erf(_mm256_load_ps(x + i))));
        break;
    case HG_TANH_BACKWARD:
        for (int64_t i = 0; i < n; i += 8)
            _mm256_store_ps(x + i, _mm256_mul_ps(_mm256_load_ps(g + i), oar_v_gelu_prime_tanh(_mm256_load_ps(x + i))));
        break;
    }
}

static void hg_range(void *ctx, int64_t begin, int64_t end) {
    const hg_job *j = ctx;
    const bool bwd = j->fn == HG_ERF_BACKWARD || j->fn == HG_TANH_BACKWARD;
    float xb[HG_BLOCK] __attribute__((aligned(32))), gb[HG_BLOCK] __attribute__((aligned(32)));
    for (int64_t b0 = begin; b0 < end; b0 += HG_BLOCK) {
        const int64_t n = end - b0 < HG_BLOCK ? end - b0 : HG_BLOCK, padded = (n + 7) & ~(int64_t)7;
        oar_cpu_half_to_f32(xb, j->x + b0, n, j->dt);
        if (bwd) oar_cpu_half_to_f32(gb, j->g + b0, n, j->dt);
        for (int64_t i = n; i < padded; i++) xb[i] = gb[i] = 0.0f; /* lanes past the end: computed, not stored */
        hg_block(xb, gb, padded, j->fn);
        oar_cpu_f32_to_half(j->y + b0, xb, n, j->dt);
    }
}

static oar_status hg_run(const oar_tensor *x, const oar_tensor *g, oar_tensor *y, hg_fn fn) {
    hg_job j = {(const uint16_t *)oar_tensor_ptr(x), g ? (const uint16_t *)oar_tensor_ptr(g) : NULL,
                (uint16_t *)oar_tensor_ptr(y), y->dtype, fn};
    const int64_t n = y->numel, grain = (int64_t)1 << 14; /* a multiple of HG_BLOCK */
    if (n >= 2 * grain) oar_parallel_for(n, grain, hg_range, &j);
    else hg_range(&j, 0, n);
    return OAR_OK;
}

static oar_status gelu_half(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                            const oar_attr *a) {
    (void)ctx, (void)n_in, (void)n_out;
    return hg_run(in[0], NULL, out[0], a[0].i ? HG_TANH : HG_ERF);
}

/* gelu_backward(grad, x) */
static oar_status gelu_backward_half(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                     int n_out, const oar_attr *a) {
    (void)ctx, (void)n_in, (void)n_out;
    return hg_run(in[1], in[0], out[0], a[0].i ? HG_TANH_BACKWARD : HG_ERF_BACKWARD);
}

/* every operand dense, of one bf16/f16 dtype and one element count */
static bool hg_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_out, (void)a;
    const int k = nn_kind(out[0]->dtype);
    if (!oar_cpu_has_avx2() || (k != NN_BF16 && k != NN_F16) || !oar_nn_half_ok(out[0], k)) return false;
    for (int i = 0; i < n_in; i++)
        if (!oar_nn_half_ok(in[i], k) || in[i]->numel != out[0]->numel) return false;
    return true;
}

#endif

void oar_cpu_register_half_gelu(void) {
#ifdef OAR_NN_SIMD
    oar_kernel_entry e = {.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_BF16) | OAR_DTYPE_BIT(OAR_F16),
                          .impl = OAR_IMPL_HALF_PARTIAL, .priority = 10, .fn = gelu_half, .supports = hg_supports};
    oar_register_kernel(OAR_OP_gelu, e);
    e.fn = gelu_backward_half;
    oar_register_kernel(OAR_OP_gelu_backward, e);
#endif
}
