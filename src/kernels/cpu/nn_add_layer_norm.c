/* AVX2/FMA kernels of the add + layer_norm fusion in f32 (ops in src/ops/fused_add_ln.c).
 *
 * add_layer_norm: per row, sum = a + b is written and, while the row is still in L1, normalized
 * by the same row routine as the layer_norm kernel (nn_norm.c), so sum, y, mean and rstd are
 * bitwise those of the unfused add and layer_norm kernels (an f32 add rounds once per element
 * whatever the vector width). Rows are split over threads as layer_norm splits them.
 * layer_norm_backward_add: the layer_norm_backward kernel itself (nn_norm_backward.c), which
 * adds the residual to each dx value as it writes it: the one rounding the separate add did. */
#include "kernels/cpu/nn_kernels.h"
#include "kernels/cpu/nn_simd.h"

#include <math.h>

#ifdef OAR_NN_SIMD

typedef struct aln_job {
    const float *a, *b, *w, *bias;
    float *sum, *y, *mean, *rstd;
    int64_t m;
    double eps;
} aln_job;

static NN_AVX2 void add_row(const float *a, const float *b, float *s, int64_t m) {
    const int64_t full = m & ~(int64_t)7, rest = m - full;
    for (int64_t i = 0; i < full; i += 8)
        _mm256_storeu_ps(s + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    if (rest) {
        const __m256i tail = nn_tail_mask(rest);
        _mm256_maskstore_ps(s + full, tail, _mm256_add_ps(_mm256_maskload_ps(a + full, tail),
                                                          _mm256_maskload_ps(b + full, tail)));
    }
}

static void aln_rows(void *ctx, int64_t begin, int64_t end) {
    const aln_job *j = ctx;
    for (int64_t r = begin; r < end; r++) {
        const int64_t at = r * j->m;
        add_row(j->a + at, j->b + at, j->sum + at, j->m);
        oar_nn_layer_norm_row(j->sum + at, j->w, j->bias, j->y + at, j->mean + r, j->rstd + r, j->m, j->eps);
    }
}

static oar_status add_layer_norm_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                      int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    const oar_tensor *x = in[0];
    int k = (int)a[0].i;
    int64_t m = 1;
    for (int d = x->ndim - k; d < x->ndim; d++) m *= x->shape[d];
    if (x->numel == 0) { /* rows without values: NaN statistics, as layer_norm gives */
        for (int o = 2; o < 4; o++)
            for (int64_t r = 0; r < out[o]->numel; r++) ((float *)oar_tensor_ptr(out[o]))[r] = NAN;
        return OAR_OK;
    }
    aln_job j = {(const float *)oar_tensor_ptr(in[0]), (const float *)oar_tensor_ptr(in[1]),
                 in[2] ? (const float *)oar_tensor_ptr(in[2]) : NULL, in[3] ? (const float *)oar_tensor_ptr(in[3]) : NULL,
                 (float *)oar_tensor_ptr(out[0]), (float *)oar_tensor_ptr(out[1]), (float *)oar_tensor_ptr(out[2]),
                 (float *)oar_tensor_ptr(out[3]), m, a[1].f};
    oar_parallel_for(x->numel / m, 16384 / m + 1, aln_rows, &j);
    return OAR_OK;
}

#endif

void oar_cpu_register_add_layer_norm(void) {
#ifdef OAR_NN_SIMD
    oar_kernel_entry e = {.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32), .impl = "avx2", .priority = 10,
                          .fn = add_layer_norm_avx2, .supports = oar_nn_dense_f32_ok};
    oar_register_kernel(OAR_OP_add_layer_norm, e);
    e.fn = oar_nn_layer_norm_backward_avx2;
    oar_register_kernel(OAR_OP_layer_norm_backward_add, e);
#endif
}
