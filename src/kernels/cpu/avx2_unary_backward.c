/* AVX2/FMA f32 kernels for the backward ops of unary activations (src/ops/unary_backward.c):
 * gelu_backward, dx = g * gelu'(x), and relu_backward, dx = x > 0 ? g : 0, each in one pass over
 * contiguous g and x.
 *   tanh form: with z = 2 k (x + c x^3) and s = sigmoid(z) (so (1 + tanh(z/2)) / 2 = s and
 *              1 - tanh^2 = 4 s (1 - s)): gelu' = s + x s (1 - s) z', z' = 2 k (1 + 3 c x^2);
 *   erf form:  gelu' = Phi(x) + x phi(x).
 * Checked against the reference by the op sweep. */
#include "kernels/cpu/cpu_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "kernels/cpu/avx2_activation.h"

#define GB_CHUNK ((int64_t)8192) /* elements per task */

typedef struct gb_job {
    const float *g, *x;
    float *dx;
    int64_t n;
    enum { GB_GELU_ERF, GB_GELU_TANH, GB_RELU } kind;
} gb_job;

static OAR_AVX2 void gb_range(const gb_job *j, int64_t b, int64_t e) {
    const float *g = j->g, *x = j->x;
    float *dx = j->dx;
    int64_t i = b;
    if (j->kind == GB_RELU) {
        for (; i + 8 <= e; i += 8)
            _mm256_storeu_ps(dx + i, oar_v_relu_backward(_mm256_loadu_ps(g + i), _mm256_loadu_ps(x + i)));
    } else if (j->kind == GB_GELU_TANH) {
        for (; i + 8 <= e; i += 8)
            _mm256_storeu_ps(dx + i, _mm256_mul_ps(_mm256_loadu_ps(g + i), oar_v_gelu_prime_tanh(_mm256_loadu_ps(x + i))));
    } else {
        for (; i + 8 <= e; i += 8)
            _mm256_storeu_ps(dx + i, _mm256_mul_ps(_mm256_loadu_ps(g + i), oar_v_gelu_prime_erf(_mm256_loadu_ps(x + i))));
    }
    if (i < e) {
        __m256i mask = oar_v_tail_mask(e - i);
        __m256 xv = _mm256_maskload_ps(x + i, mask), gv = _mm256_maskload_ps(g + i, mask);
        __m256 d = j->kind == GB_RELU ? oar_v_relu_backward(gv, xv)
                   : _mm256_mul_ps(gv, j->kind == GB_GELU_TANH ? oar_v_gelu_prime_tanh(xv) : oar_v_gelu_prime_erf(xv));
        _mm256_maskstore_ps(dx + i, mask, d);
    }
}

static void gb_chunks(void *ctx, int64_t b, int64_t e) {
    const gb_job *j = ctx;
    gb_range(j, b * GB_CHUNK, e * GB_CHUNK < j->n ? e * GB_CHUNK : j->n);
}

static oar_status gb_run(const oar_kctx *ctx, oar_tensor *const *in, oar_tensor *const *out, int kind) {
    gb_job j = {(const float *)oar_tensor_ptr(in[0]), (const float *)oar_tensor_ptr(in[1]),
                (float *)oar_tensor_ptr(out[0]), out[0]->numel, kind};
    int64_t chunks = (j.n + GB_CHUNK - 1) / GB_CHUNK;
    if (ctx->nthreads > 1 && chunks > 1) oar_parallel_for(chunks, 1, gb_chunks, &j);
    else if (chunks) gb_chunks(&j, 0, chunks);
    return OAR_OK;
}

static oar_status gelu_backward_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                     int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    return gb_run(ctx, in, out, a[0].i ? GB_GELU_TANH : GB_GELU_ERF);
}

static oar_status relu_backward_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                     int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out; (void)a;
    return gb_run(ctx, in, out, GB_RELU);
}

static bool avx2_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)in; (void)n_in; (void)out; (void)n_out; (void)a;
    return oar_cpu_has_avx2();
}
#endif

void oar_cpu_register_unary_backward(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    oar_kernel_entry e = {.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32), .impl = "avx2", .priority = 10,
                          .fn = gelu_backward_avx2, .supports = avx2_ok};
    oar_register_kernel(OAR_OP_gelu_backward, e);
    e.fn = relu_backward_avx2;
    oar_register_kernel(OAR_OP_relu_backward, e);
#endif
}
