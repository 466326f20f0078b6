/* AVX2/FMA f32 kernels for unary elementwise ops on contiguous tensors (and inputs whose rows are
 * contiguous: see unary_rows_job). Each op is one vector
 * expression of v (8 inputs) and parameters p0, p1 (taken from its attributes); the loop runs
 * in chunks of OAR_EW_GRAIN elements on the thread pool, with a masked tail. */
#include "kernels/cpu/avx2_elementwise.h"

#if defined(__x86_64__)
#include "kernels/cpu/avx2_activation.h"

typedef struct unary_job {
    const float *x;
    float *y;
    float p0, p1;
} unary_job;

/* NAME_range(job, begin, end): y[i] = EXPR for x[i] in v. */
#define UNARY_RANGE(NAME, EXPR)                                                 \
    static OAR_AVX2 void NAME##_range(void *vjob, int64_t begin, int64_t end) { \
        const unary_job *j = vjob;                                              \
        const __m256 p0 = _mm256_set1_ps(j->p0), p1 = _mm256_set1_ps(j->p1);    \
        (void)p0;                                                               \
        (void)p1;                                                               \
        int64_t i = begin;                                                      \
        for (; i + 8 <= end; i += 8) {                                          \
            __m256 v = _mm256_loadu_ps(j->x + i);                               \
            _mm256_storeu_ps(j->y + i, EXPR);                                   \
        }                                                                       \
        if (i < end) {                                                          \
            __m256i m = oar_v_tail_mask(end - i);                               \
            __m256 v = _mm256_maskload_ps(j->x + i, m);                         \
            _mm256_maskstore_ps(j->y + i, m, EXPR);                             \
        }                                                                       \
    }

/* An input whose rows (last dim) are contiguous but spaced apart: a slice of gates [:, k*h:(k+1)*h],
 * a column block, a view with padding (what recurrent cells and attention splits make). Rows run
 * one at a time through the same vector loop, so each element gets the contiguous path's bits. */
typedef struct unary_rows_job {
    oar_range_fn fn;
    const float *x;
    float *y;
    int64_t row, n_outer;
    int64_t shape[OAR_MAX_DIMS], stride[OAR_MAX_DIMS]; /* the outer dims (all but the last) */
    float p0, p1;
} unary_rows_job;

static void unary_rows_range(void *vjob, int64_t begin, int64_t end) {
    const unary_rows_job *r = vjob;
    for (int64_t q = begin; q < end; q++) {
        int64_t off = 0, rest = q;
        for (int64_t d = r->n_outer - 1; d >= 0; d--) {
            off += (rest % r->shape[d]) * r->stride[d];
            rest /= r->shape[d];
        }
        unary_job j = {r->x + off, r->y + q * r->row, r->p0, r->p1};
        r->fn(&j, 0, r->row);
    }
}

static oar_status run_unary(oar_range_fn fn, oar_tensor *const *in, oar_tensor *const *out, float p0, float p1) {
    const oar_tensor *x = in[0];
    if (x->contiguous) {
        unary_job j = {(const float *)oar_tensor_ptr(in[0]), (float *)oar_tensor_ptr(out[0]), p0, p1};
        oar_parallel_for(out[0]->numel, OAR_EW_GRAIN, fn, &j);
        return OAR_OK;
    }
    unary_rows_job r = {.fn = fn, .x = (const float *)oar_tensor_ptr(in[0]), .y = (float *)oar_tensor_ptr(out[0]),
                        .row = x->shape[x->ndim - 1], .n_outer = x->ndim - 1, .p0 = p0, .p1 = p1};
    for (int d = 0; d < x->ndim - 1; d++) {
        r.shape[d] = x->shape[d];
        r.stride[d] = x->strides[d];
    }
    int64_t rows = x->numel / r.row;
    oar_parallel_for(rows, OAR_EW_GRAIN / r.row + 1, unary_rows_range, &r);
    return OAR_OK;
}

/* NAME_avx2: the kernel entry; P0 and P1 may read the attributes a. */
#define UNARY_KERNEL(NAME, EXPR, P0, P1)                                                        \
    UNARY_RANGE(NAME, EXPR)                                                                     \
    static oar_status NAME##_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in,         \
                                  oar_tensor *const *out, int n_out, const oar_attr *a) {       \
        (void)ctx; (void)n_in; (void)n_out; (void)a;                                            \
        return run_unary(NAME##_range, in, out, (P0), (P1));                                    \
    }

/* x > 0 ? x : x * slope; NaN takes the slope side and stays NaN. */
OAR_V_INLINE __m256 v_leaky_relu(__m256 v, __m256 slope) {
    return _mm256_blendv_ps(_mm256_mul_ps(v, slope), v, _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GT_OQ));
}

/* torch.clamp: x < lo -> lo, then > hi -> hi. Ordered compares leave NaN inputs alone and
 * ignore a NaN bound, like the reference. Comparing with the f32-rounded bounds gives the
 * same f32 result as comparing in double. */
OAR_V_INLINE __m256 v_clip(__m256 v, __m256 lo, __m256 hi) {
    v = _mm256_blendv_ps(v, lo, _mm256_cmp_ps(v, lo, _CMP_LT_OQ));
    return _mm256_blendv_ps(v, hi, _mm256_cmp_ps(v, hi, _CMP_GT_OQ));
}

UNARY_KERNEL(relu, oar_v_relu(v), 0, 0)
UNARY_KERNEL(neg, _mm256_xor_ps(v, _mm256_set1_ps(-0.0f)), 0, 0)
UNARY_KERNEL(abs, oar_v_abs(v), 0, 0)
UNARY_KERNEL(square, _mm256_mul_ps(v, v), 0, 0)
UNARY_KERNEL(sqrt, _mm256_sqrt_ps(v), 0, 0)
UNARY_KERNEL(exp, oar_v_exp(v), 0, 0)
UNARY_KERNEL(log, oar_v_log(v), 0, 0)
UNARY_KERNEL(tanh, oar_v_tanh(v), 0, 0)
UNARY_KERNEL(sigmoid, oar_v_sigmoid(v), 0, 0)
UNARY_KERNEL(silu, _mm256_mul_ps(v, oar_v_sigmoid(v)), 0, 0)
UNARY_KERNEL(leaky_relu, v_leaky_relu(v, p0), (float)a[0].f, 0)
UNARY_KERNEL(clip, v_clip(v, p0, p1), (float)a[0].f, (float)a[1].f)
/* roundps: the reference's results for every f32 (ties to even, the sign of zero kept, NaN and
 * infinities through) */
UNARY_KERNEL(round, _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), 0, 0)
UNARY_KERNEL(floor, _mm256_round_ps(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC), 0, 0)
UNARY_KERNEL(ceil, _mm256_round_ps(v, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC), 0, 0)
UNARY_RANGE(gelu_erf, oar_v_gelu_erf(v))
UNARY_RANGE(gelu_tanh, oar_v_gelu_tanh(v))

static oar_status gelu_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                            int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    return run_unary(a[0].i ? gelu_tanh_range : gelu_erf_range, in, out, 0, 0);
}

static bool unary_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                           const oar_attr *a) {
    (void)n_in; (void)n_out; (void)a;
    const oar_tensor *x = in[0];
    bool rows = x->ndim >= 2 && x->strides[x->ndim - 1] == 1 && x->shape[x->ndim - 1] >= 8 && x->numel > 0;
    return oar_cpu_has_avx2() && x->dtype == OAR_F32 && (x->contiguous || rows) && out[0]->contiguous;
}

void oar_avx2_register_unary(void) {
    static const struct {
        oar_op_id op;
        oar_kernel_fn fn;
    } table[] = {
        {OAR_OP_relu, relu_avx2},       {OAR_OP_neg, neg_avx2},         {OAR_OP_abs, abs_avx2},
        {OAR_OP_square, square_avx2},   {OAR_OP_sqrt, sqrt_avx2},       {OAR_OP_exp, exp_avx2},
        {OAR_OP_log, log_avx2},         {OAR_OP_tanh, tanh_avx2},       {OAR_OP_sigmoid, sigmoid_avx2},
        {OAR_OP_silu, silu_avx2},       {OAR_OP_gelu, gelu_avx2},       {OAR_OP_leaky_relu, leaky_relu_avx2},
        {OAR_OP_clip, clip_avx2},       {OAR_OP_round, round_avx2},     {OAR_OP_floor, floor_avx2},
        {OAR_OP_ceil, ceil_avx2},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        oar_register_kernel(table[i].op, (oar_kernel_entry){.device = OAR_CPU,
                                                            .dtypes = OAR_DTYPE_BIT(OAR_F32),
                                                            .impl = "avx2",
                                                            .priority = 10,
                                                            .fn = table[i].fn,
                                                            .supports = unary_supports});
}

#else
/* Not x86-64: nothing to register (cpu_elementwise.c does not call in). */
typedef int oar_avx2_unary_unused;
#endif
