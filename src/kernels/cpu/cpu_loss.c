/* CPU fast kernels for cross_entropy and cross_entropy_backward on [N, C] f32 logits with i64
 * targets, threaded over rows. The row loops come in two builds: AVX2/FMA with an accurate
 * vector exp (chosen at run time) and portable C. Row sums are taken in double, and reduced
 * losses add fixed blocks of rows in order, so results do not depend on the thread count. */
#include "kernels/cpu/cpu_kernels.h"
#include "ops/loss.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define OAR_LOSS_AVX2 1
#define AVX2_FN __attribute__((target("avx2,fma")))
#endif


/* The row loops of one instruction set. */
typedef struct row_ops {
    /* max, sum of exp(x - max) and sum of x over a row of c values */
    void (*stats)(const float *x, int64_t c, float *max, double *sum_exp, double *sum_x);
    /* dx = a * exp(x - lse) - b over a row; lse = hi + lo, so that x - hi is exact for the
     * classes that matter (those near the max) */
    void (*grad)(const float *x, int64_t c, float lse_hi, float lse_lo, float a, float b, float *dx);
} row_ops;

/* ---- portable rows */
static void stats_c(const float *x, int64_t n, float *max, double *sum_exp, double *sum_x) {
    float m = -INFINITY;
    for (int64_t c = 0; c < n; c++)
        if (x[c] > m) m = x[c];
    double e = 0, s = 0;
    for (int64_t c = 0; c < n; c++) {
        e += expf(x[c] - m);
        s += x[c];
    }
    *max = m;
    *sum_exp = e;
    *sum_x = s;
}

static void grad_c(const float *x, int64_t n, float hi, float lo, float a, float b, float *dx) {
    for (int64_t c = 0; c < n; c++) dx[c] = a * expf((x[c] - hi) - lo) - b;
}

static const row_ops rows_c = {stats_c, grad_c};

/* ---- AVX2 rows */
#ifdef OAR_LOSS_AVX2
/* e^x = 2^n e^r with n = round(x / ln2) and |r| <= ln2 / 2. ln2 is split in a short high
 * part (n * hi is exact) and a low part, and e^r is its degree-7 Taylor polynomial, whose
 * truncation error (< 6e-9 relative) is below float rounding. 2^n is applied as two
 * factors so that n in [-150, 128] covers subnormal results and overflow to inf. */
AVX2_FN static inline __m256 exp8(__m256 x) {
    const __m256 ln2_hi = _mm256_set1_ps(0.693359375f), ln2_lo = _mm256_set1_ps(-2.12194440e-4f);
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(88.75f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, ln2_hi, xc);
    r = _mm256_fnmadd_ps(n, ln2_lo, r);
    __m256 p = _mm256_set1_ps(1.0f / 5040);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i ni = _mm256_cvtps_epi32(n), bias = _mm256_set1_epi32(127);
    __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    /* the clamp above turned NaN into a number; give it back */
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

AVX2_FN static inline float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

AVX2_FN static inline double hsum4(__m256d v) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

/* adds the 8 floats of v to two 4-lane double accumulators */
AVX2_FN static inline void add_wide(__m256 v, __m256d *lo, __m256d *hi) {
    *lo = _mm256_add_pd(*lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    *hi = _mm256_add_pd(*hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

AVX2_FN static void stats_avx2(const float *x, int64_t n, float *max, double *sum_exp, double *sum_x) {
    int64_t c = 0;
    __m256 vm = _mm256_set1_ps(-INFINITY);
    for (; c + 8 <= n; c += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + c));
    float m = hmax8(vm);
    for (; c < n; c++)
        if (x[c] > m) m = x[c];
    vm = _mm256_set1_ps(m);
    __m256d e0 = _mm256_setzero_pd(), e1 = e0, s0 = e0, s1 = e0;
    for (c = 0; c + 8 <= n; c += 8) {
        __m256 v = _mm256_loadu_ps(x + c);
        add_wide(exp8(_mm256_sub_ps(v, vm)), &e0, &e1);
        add_wide(v, &s0, &s1);
    }
    double e = hsum4(_mm256_add_pd(e0, e1)), s = hsum4(_mm256_add_pd(s0, s1));
    for (; c < n; c++) {
        e += expf(x[c] - m);
        s += x[c];
    }
    *max = m;
    *sum_exp = e;
    *sum_x = s;
}

AVX2_FN static void grad_avx2(const float *x, int64_t n, float hi, float lo, float a, float b, float *dx) {
    __m256 vh = _mm256_set1_ps(hi), vl = _mm256_set1_ps(lo), va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
    int64_t c = 0;
    for (; c + 8 <= n; c += 8) {
        __m256 d = _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + c), vh), vl);
        _mm256_storeu_ps(dx + c, _mm256_fmsub_ps(va, exp8(d), vb));
    }
    for (; c < n; c++) dx[c] = a * expf((x[c] - hi) - lo) - b;
}

static const row_ops rows_avx2 = {stats_avx2, grad_avx2};
#endif

/* ---- drivers */
#define BLOCK_ROWS 64 /* fixed, so the order of the reduction does not depend on threads */

typedef struct ce_job {
    const row_ops *ops;
    const float *x, *gout;
    const double *lse_in;
    const int64_t *t;
    float *loss, *dx;
    double *lse; /* f64, see ce_infer */
    double *partial; /* per block of rows, for reduced losses */
    int64_t rows, classes, ignore, count, reduction;
    double eps;
} ce_job;

/* Rows per parallel task: enough work (~32K values) to outweigh the hand-off. */
static int64_t grain_rows(int64_t classes) {
    int64_t g = 32768 / (classes > 0 ? classes : 1);
    return g > 0 ? g : 1;
}

static void forward_blocks(void *ctx, int64_t b0, int64_t b1) {
    const ce_job *j = ctx;
    int64_t C = j->classes;
    for (int64_t b = b0; b < b1; b++) {
        int64_t end = (b + 1) * BLOCK_ROWS < j->rows ? (b + 1) * BLOCK_ROWS : j->rows;
        double acc = 0;
        for (int64_t n = b * BLOCK_ROWS; n < end; n++) {
            const float *row = j->x + n * C;
            float m;
            double sum_exp, sum_x;
            j->ops->stats(row, C, &m, &sum_exp, &sum_x);
            double lse = (double)m + log(sum_exp), loss = 0;
            j->lse[n] = lse;
            int64_t tg = j->t[n];
            if (tg != j->ignore) {
                loss = lse - row[tg];
                /* smoothing only when asked: its sum may be inf (masked logits), 0 * inf = NaN */
                if (j->eps > 0) loss = (1 - j->eps) * loss + j->eps * (lse - sum_x / (double)C);
            }
            if (j->reduction == OAR_REDUCE_NONE) j->loss[n] = (float)loss;
            else acc += loss;
        }
        if (j->reduction != OAR_REDUCE_NONE) j->partial[b] = acc;
    }
}

static oar_status ce_forward(const row_ops *ops, oar_tensor *const *in, oar_tensor *const *out,
                             const oar_attr *a) {
    ce_job j = {.ops = ops, .x = (const float *)oar_tensor_ptr(in[0]), .t = (const int64_t *)oar_tensor_ptr(in[1]),
                .loss = (float *)oar_tensor_ptr(out[0]), .lse = (double *)oar_tensor_ptr(out[1]),
                .rows = in[0]->shape[0], .classes = in[0]->shape[1], .reduction = a[0].i, .ignore = a[1].i,
                .eps = a[2].f};
    oar_status st = oar_loss_count_targets("cross_entropy", in[1], j.classes, j.ignore, &j.count);
    if (st != OAR_OK) return st;
    int64_t blocks = (j.rows + BLOCK_ROWS - 1) / BLOCK_ROWS;
    if (j.reduction != OAR_REDUCE_NONE && blocks > 0 && !(j.partial = oar_malloc(sizeof(double) * (size_t)blocks)))
        return OAR_ERR_OOM;
    int64_t grain = grain_rows(j.classes) / BLOCK_ROWS;
    oar_parallel_for(blocks, grain > 0 ? grain : 1, forward_blocks, &j);
    if (j.reduction != OAR_REDUCE_NONE) {
        double acc = 0;
        for (int64_t b = 0; b < blocks; b++) acc += j.partial[b];
        /* a mean over no counted samples is 0/0 = NaN, as in torch */
        j.loss[0] = (float)(j.reduction == OAR_REDUCE_MEAN ? acc / (double)j.count : acc);
    }
    free(j.partial);
    return OAR_OK;
}

static void backward_rows(void *ctx, int64_t n0, int64_t n1) {
    const ce_job *j = ctx;
    int64_t C = j->classes;
    for (int64_t n = n0; n < n1; n++) {
        float *dx = j->dx + n * C;
        int64_t tg = j->t[n];
        if (tg == j->ignore) { /* exact zeros, whatever the logits hold */
            memset(dx, 0, sizeof(float) * (size_t)C);
            continue;
        }
        double g = j->gout[j->reduction == OAR_REDUCE_NONE ? n : 0];
        if (j->reduction == OAR_REDUCE_MEAN) g /= (double)j->count;
        /* dx = g * (softmax - q): q is eps / C everywhere plus 1 - eps at the target */
        double lse = j->lse_in[n];
        float hi = (float)lse, lo = (float)(lse - (double)hi);
        j->ops->grad(j->x + n * C, C, hi, lo, (float)g, (float)(g * j->eps / (double)C), dx);
        dx[tg] -= (float)(g * (1 - j->eps));
    }
}

static oar_status ce_backward(const row_ops *ops, oar_tensor *const *in, oar_tensor *const *out,
                              const oar_attr *a) {
    ce_job j = {.ops = ops, .gout = (const float *)oar_tensor_ptr(in[0]), .x = (const float *)oar_tensor_ptr(in[1]),
                .t = (const int64_t *)oar_tensor_ptr(in[2]), .lse_in = (const double *)oar_tensor_ptr(in[3]),
                .dx = (float *)oar_tensor_ptr(out[0]), .rows = in[1]->shape[0], .classes = in[1]->shape[1],
                .reduction = a[0].i, .ignore = a[1].i, .eps = a[2].f};
    oar_status st = oar_loss_count_targets("cross_entropy_backward", in[2], j.classes, j.ignore, &j.count);
    if (st != OAR_OK) return st;
    oar_parallel_for(j.rows, grain_rows(j.classes), backward_rows, &j);
    return OAR_OK;
}

/* ---- registration */
static bool forward_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    return in[0]->dtype == OAR_F32 && in[0]->ndim == 2 && in[1]->dtype == OAR_I64;
}
static bool backward_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    return in[1]->dtype == OAR_F32 && in[1]->ndim == 2 && in[2]->dtype == OAR_I64;
}

#define KERNEL_PAIR(SUFFIX, ROWS)                                                                            \
    static oar_status forward_##SUFFIX(const oar_kctx *ctx, oar_tensor *const *in, int n_in,                 \
                                       oar_tensor *const *out, int n_out, const oar_attr *a) {               \
        return ce_forward(&ROWS, in, out, a);                                                                \
    }                                                                                                        \
    static oar_status backward_##SUFFIX(const oar_kctx *ctx, oar_tensor *const *in, int n_in,                \
                                        oar_tensor *const *out, int n_out, const oar_attr *a) {              \
        return ce_backward(&ROWS, in, out, a);                                                               \
    }

KERNEL_PAIR(c, rows_c)
#ifdef OAR_LOSS_AVX2
KERNEL_PAIR(avx2, rows_avx2)
#endif

/* The AVX2 pair asks the CPU switch at dispatch time, so a cap set after registration holds. */
static bool forward_avx2_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                                  const oar_attr *a) {
    return oar_cpu_has_avx2() && forward_supports(in, n_in, out, n_out, a);
}
static bool backward_avx2_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                                   const oar_attr *a) {
    return oar_cpu_has_avx2() && backward_supports(in, n_in, out, n_out, a);
}

static void register_pair(const char *impl, int priority, oar_kernel_fn fwd, oar_kernel_fn bwd, oar_supports_fn fsup,
                          oar_supports_fn bsup) {
    oar_register_kernel(OAR_OP_cross_entropy, (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32),
                                                                 .impl = impl, .priority = priority, .fn = fwd,
                                                                 .supports = fsup});
    oar_register_kernel(OAR_OP_cross_entropy_backward,
                        (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32), .impl = impl,
                                           .priority = priority, .fn = bwd, .supports = bsup});
}

void oar_cpu_register_loss(void) {
    /* the portable build serves machines without AVX2, and the sweep checks both */
    register_pair("c", 5, forward_c, backward_c, forward_supports, backward_supports);
#ifdef OAR_LOSS_AVX2
    register_pair("avx2", 10, forward_avx2, backward_avx2, forward_avx2_supports, backward_avx2_supports);
#endif
}
