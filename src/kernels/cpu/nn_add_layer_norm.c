/* AVX2/FMA kernels of the add + layer_norm fusion in f32 (ops in src/ops/fused_add_ln.c).
 *
 * add_layer_norm: per row, sum = a + b is written and, while the row is still in L1, normalized
 * by the same row routine as the layer_norm kernel (nn_norm.c), so sum, y, mean and rstd are
 * bitwise those of the unfused add and layer_norm kernels (an f32 add rounds once per element
 * whatever the vector width). Rows are split over threads as layer_norm splits them.
 * layer_norm_backward_add: the layer_norm_backward kernel itself (nn_norm_backward.c), which
 * adds the residual to each dx value as it writes it: the one rounding the separate add did.
 *
 * On bf16/f16 a, b (sum, y) with f32 weight and bias (O2's mixed layer_norm), rows go in pairs:
 * a and b widened and added in registers, the sum rounded (the avx2-half add's bits) and stored
 * both into sum and, widened, into an f32 buffer on the stack, which the mixed layer_norm
 * kernel's row-pair routine normalizes; y rounded out: one pass over the row for what the unfused ops do
 * in two, each rounding where they round. The backward is the mixed layer_norm_backward kernel,
 * which rounds dx before adding the residual. Where these decline, add_layer_norm_composed.c
 * runs the unfused ops' kernels. */
#include "kernels/cpu/nn_kernels.h"
#include "kernels/cpu/nn_half.h"
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
    /* strided activations (a residual branch's transposed view, as attention with batch_first
     * makes) are read from dense copies: a copy costs far less than the reference's per-element
     * strided walk, and the rows then take the same vector path */
    oar_tensor *dense[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++)
        if (!in[i]->contiguous && !(dense[i] = oar_tensor_contiguous_copy(in[i]))) {
            oar_tensor_unref(dense[0]);
            return oar_last_status() != OAR_OK ? oar_last_status() : OAR_ERR_OOM;
        }
    const oar_tensor *xa = dense[0] ? dense[0] : in[0], *xb = dense[1] ? dense[1] : in[1];
    aln_job j = {(const float *)oar_tensor_ptr(xa), (const float *)oar_tensor_ptr(xb),
                 in[2] ? (const float *)oar_tensor_ptr(in[2]) : NULL, in[3] ? (const float *)oar_tensor_ptr(in[3]) : NULL,
                 (float *)oar_tensor_ptr(out[0]), (float *)oar_tensor_ptr(out[1]), (float *)oar_tensor_ptr(out[2]),
                 (float *)oar_tensor_ptr(out[3]), m, a[1].f};
    oar_parallel_for(x->numel / m, 16384 / m + 1, aln_rows, &j);
    oar_tensor_unref(dense[0]);
    oar_tensor_unref(dense[1]);
    return OAR_OK;
}

/* f32 activations in any layout (strided ones are copied dense), dense f32 weight and bias, AVX2;
 * the outputs are dense (the dispatcher allocates them). */
static bool aln_f32_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)a;
    if (!oar_cpu_has_avx2() || in[0]->dtype != OAR_F32 || in[1]->dtype != OAR_F32) return false;
    for (int i = 2; i < 4; i++)
        if (in[i] && (in[i]->dtype != OAR_F32 || !in[i]->contiguous)) return false;
    for (int o = 0; o < n_out; o++)
        if (out[o] && !out[o]->contiguous) return false;
    return in[0]->numel == in[1]->numel;
}

typedef struct aln_half_job {
    const uint16_t *a, *b;
    const float *w, *bias;
    uint16_t *sum, *y;
    float *mean, *rstd;
    int64_t m;
    double eps;
    oar_dtype dt;
} aln_half_job;

/* n values of sum = a + b rounded to kind k (the avx2-half add's operations), stored, and the
 * rounded sums widened into xb (what layer_norm's widening of sum reads), in one pass */
NN_HINL void add_round_k(const uint16_t *a, const uint16_t *b, uint16_t *sum, float *xb, int64_t n, const int k) {
    const int64_t full = n & ~(int64_t)7, rest = n - full;
    for (int64_t i = 0; i < full; i += 8) {
        __m256 v = nn_round(_mm256_add_ps(nn_ld(a, i, k), nn_ld(b, i, k)), k);
        nn_st_exact(sum, i, v, k);
        _mm256_storeu_ps(xb + i, v);
    }
    if (rest) {
        const __m256i tail = nn_tail_mask(rest);
        __m256 v = nn_round(_mm256_add_ps(nn_ld_tail(a, full, rest, tail, 0.0f, k), nn_ld_tail(b, full, rest, tail, 0.0f, k)),
                            k);
        nn_st_tail_exact(sum, full, rest, tail, v, k);
        _mm256_maskstore_ps(xb + full, tail, v);
    }
}

static NN_AVX2H void add_round(const aln_half_job *j, int64_t at, int64_t n, float *xb) {
    if (j->dt == OAR_BF16) add_round_k(j->a + at, j->b + at, j->sum + at, xb, n, NN_BF16);
    else add_round_k(j->a + at, j->b + at, j->sum + at, xb, n, NN_F16);
}

static void aln_half_rows(void *ctx, int64_t begin, int64_t end) {
    const aln_half_job *j = ctx;
    const int64_t m = j->m;
    float xb[2 * OAR_NN_LN_HALF_MAX], bb[2 * OAR_NN_LN_HALF_MAX];
    int64_t r = begin;
    for (; r + 2 <= end; r += 2) {
        add_round(j, r * m, 2 * m, xb);
        oar_nn_layer_norm_row_pair(xb, xb + m, j->w, j->bias, bb, bb + m, j->mean + r, j->rstd + r, m, j->eps);
        oar_cpu_f32_to_half(j->y + r * m, bb, 2 * m, j->dt);
    }
    if (r < end) {
        add_round(j, r * m, m, xb);
        oar_nn_layer_norm_row(xb, j->w, j->bias, bb, j->mean + r, j->rstd + r, m, j->eps);
        oar_cpu_f32_to_half(j->y + r * m, bb, m, j->dt);
    }
}

static oar_status add_layer_norm_half(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                      int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    const oar_tensor *x = in[0];
    int64_t m = 1;
    for (int d = x->ndim - (int)a[0].i; d < x->ndim; d++) m *= x->shape[d];
    if (x->numel == 0) {
        for (int o = 2; o < 4; o++)
            for (int64_t r = 0; r < out[o]->numel; r++) ((float *)oar_tensor_ptr(out[o]))[r] = NAN;
        return OAR_OK;
    }
    aln_half_job j = {(const uint16_t *)oar_tensor_ptr(in[0]), (const uint16_t *)oar_tensor_ptr(in[1]),
                      in[2] ? (const float *)oar_tensor_ptr(in[2]) : NULL,
                      in[3] ? (const float *)oar_tensor_ptr(in[3]) : NULL, (uint16_t *)oar_tensor_ptr(out[0]),
                      (uint16_t *)oar_tensor_ptr(out[1]),
                      (float *)oar_tensor_ptr(out[2]), (float *)oar_tensor_ptr(out[3]), m, a[1].f, x->dtype};
    oar_parallel_for(x->numel / m, 16384 / m + 1, aln_half_rows, &j);
    return OAR_OK;
}

/* Dense bf16/f16 a, b, sum and y (f16 with F16C) with f32 weight and bias (either may be absent,
 * not both: then the parameter dtype is x's), f32 statistics, rows of at most
 * OAR_NN_LN_HALF_MAX values: where the mixed layer_norm kernel runs on the sum. */
static bool aln_half_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    const int k = in[0]->dtype == OAR_BF16 ? NN_BF16 : in[0]->dtype == OAR_F16 ? NN_F16 : -1;
    if (!oar_cpu_has_avx2() || k < 0 || !oar_nn_half_ok(in[0], k) || !oar_nn_half_ok(in[1], k) ||
        !oar_nn_half_ok(out[0], k) || !oar_nn_half_ok(out[1], k) || out[2]->dtype != OAR_F32 ||
        out[3]->dtype != OAR_F32 || (!in[2] && !in[3]))
        return false;
    for (int i = 2; i < 4; i++)
        if (in[i] && (in[i]->dtype != OAR_F32 || !in[i]->contiguous)) return false;
    int64_t m = 1;
    for (int d = in[0]->ndim - (int)a[0].i; d < in[0]->ndim; d++) m *= in[0]->shape[d];
    return m <= OAR_NN_LN_HALF_MAX;
}

#endif

void oar_cpu_register_add_layer_norm(void) {
#ifdef OAR_NN_SIMD
    oar_kernel_entry e = {.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32), .impl = "avx2", .priority = 10,
                          .fn = add_layer_norm_avx2, .supports = aln_f32_ok};
    oar_register_kernel(OAR_OP_add_layer_norm, e);
    e.supports = oar_nn_dense_f32_ok;
    e.fn = oar_nn_layer_norm_backward_avx2;
    oar_register_kernel(OAR_OP_layer_norm_backward_add, e);
    e.impl = OAR_IMPL_HALF_MIXED;
    e.dtypes = OAR_DTYPE_BIT(OAR_BF16) | OAR_DTYPE_BIT(OAR_F16);
    e.fn = add_layer_norm_half;
    e.supports = aln_half_ok;
    oar_register_kernel(OAR_OP_add_layer_norm, e);
#endif
}
