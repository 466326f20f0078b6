/* CPU kernels of ctc_loss and ctc_loss_backward (f32, f64; portable C), checked against the
 * reference of src/ops/ctc.c by the sweep. The samples run as tasks of the thread pool, each
 * computed alone, so results do not depend on the thread count. Per sample: the frame's
 * emissions gathered once in the extended target's order, the skip rule as an additive mask
 * (0 or -inf) so the recursion has no branch, a three-term log-sum-exp per state, and only the
 * states some complete alignment can pass through: at frame t, s < 2 (t + 1) (reachable from
 * the start) and s >= L - 2 (T - t) (able to reach the end). The states cut off have alpha or
 * beta -inf, and feed no state of the band, so the band's values are exact. */
#include "kernels/cpu/cpu_kernels.h"
#include "ops/ctc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The per-frame loops of one instruction set (portable C, or AVX2 with FMA). */
typedef struct ctc_steps {
    /* one alpha step: a[s] over [lo, hi) from p, the previous frame's alpha ([-2, L) valid) */
    void (*alpha)(const double *p, const double *skip_add, const double *em, int64_t lo, int64_t hi, double *a);
    /* one beta step: b[s] over [lo, hi) from q, the next frame's beta (two -inf pads after L) */
    void (*beta)(const double *q, const double *skip_add, const double *em, int64_t lo, int64_t hi, double *b);
    /* w[s] = exp(a[s] + b[s] - em[s] - ll), 0 where a[s] + b[s] is -inf */
    void (*post)(const double *a, const double *b, const double *em, double ll, int64_t lo, int64_t hi, double *w);
} ctc_steps;

typedef struct ctc_job {
    const ctc_steps *steps;
    const oar_ctc_batch *b;
    const void *lp;
    bool f64, zero_inf;
    const void *g;  /* backward: the losses' gradient [N] */
    void *out;      /* forward: losses [N]; backward: log_probs' gradient [T, N, C] */
    bool *failed;   /* per sample: its workspace could not be allocated */
} ctc_job;

/* A task's buffers, sized for the longest target (and T frames for the backward's tables). */
typedef struct ctc_work {
    int64_t *ext;
    bool *skip;
    double *skip_add;  /* [-2, L + 2): 0 where s may come from s - 2, -inf elsewhere and in the pads */
    double *a, *p;     /* alpha at this and the previous frame, [-2, L) */
    double *em;        /* forward: this frame's emissions; backward: every frame's, [T][L] */
    double *beta;      /* backward: [T][L + 2], two -inf pads after each row */
    double *acc;       /* backward: one frame's gradient by class [C] */
    double *w;         /* backward: one frame's state posteriors [L] */
    void *block;
} ctc_work;

static bool work_alloc(ctc_work *w, const oar_ctc_batch *b, bool backward) {
    size_t L = (size_t)(2 * b->max_len + 1), T = (size_t)(b->T > 0 ? b->T : 1), C = (size_t)b->C;
    size_t doubles = (L + 4) + 2 * (L + 2) + (backward ? T * L + T * (L + 2) + C + L : L);
    w->block = malloc(sizeof(double) * doubles + (sizeof(int64_t) + sizeof(bool)) * L);
    if (!w->block) return false;
    double *d = w->block;
    w->skip_add = d + 2;
    w->a = d + (L + 4) + 2;
    w->p = w->a + L + 2;
    w->em = w->p + L;
    w->beta = backward ? w->em + T * L : NULL;
    w->acc = backward ? w->beta + T * (L + 2) : NULL;
    w->w = backward ? w->acc + C : NULL;
    w->ext = (int64_t *)(d + doubles);
    w->skip = (bool *)(w->ext + L);
    return true;
}

/* log(e^a + e^b + e^c) as m + log1p(e^(x - m) + e^(y - m)), m the largest: two exps, not three.
 * NaN stays NaN (a comparison with it is false, so it lands in x or y). */
static inline double lse3(double a, double b, double c) {
    double hi = a > b ? a : b, y = a > b ? b : a;
    double m = hi > c ? hi : c, x = hi > c ? c : hi;
    if (m == -INFINITY) return a + b + c;
    return m + log(1.0 + exp(x - m) + exp(y - m));
}

static inline double lse2(double a, double b) {
    double m = a > b ? a : b, x = a > b ? b : a;
    if (m == -INFINITY) return a + b;
    return m + log(1.0 + exp(x - m));
}

/* The band of states [lo, hi) at frame t of a sample of T frames and L states. */
static inline int64_t band_lo(int64_t t, int64_t T, int64_t L) {
    int64_t lo = L - 2 * (T - t);
    return lo > 0 ? lo : 0;
}
static inline int64_t band_hi(int64_t t, int64_t L) { return 2 * (t + 1) < L ? 2 * (t + 1) : L; }

/* em[s] = log_probs[t, n, ext[s]] for s in [lo, hi) */
static void gather(const ctc_job *j, int64_t t, int64_t n, const int64_t *ext, int64_t lo, int64_t hi, double *em) {
    int64_t row = (t * j->b->N + n) * j->b->C;
    if (j->f64) {
        const double *x = (const double *)j->lp + row;
        for (int64_t s = lo; s < hi; s++) em[s] = x[ext[s]];
    } else {
        const float *x = (const float *)j->lp + row;
        for (int64_t s = lo; s < hi; s++) em[s] = x[ext[s]];
    }
}

/* Sets up sample n's extended target and skip mask; returns its state count. */
static int64_t prepare(const ctc_job *j, int64_t n, ctc_work *w) {
    int64_t L = oar_ctc_extend(j->b, n, w->ext, w->skip);
    for (int64_t s = -2; s < L + 2; s++) w->skip_add[s] = s >= 0 && s < L && w->skip[s] ? 0.0 : -INFINITY;
    for (int64_t s = -2; s < L; s++) w->a[s] = w->p[s] = -INFINITY;
    return L;
}

/* One alpha step: a[s] over the band from p, the previous frame's alpha, and the emissions em. */
static void alpha_step_c(const double *p, const double *skip_add, const double *em, int64_t lo, int64_t hi,
                              double *a) {
    for (int64_t s = lo; s < hi; s++) {
        double c = p[s - 2] + skip_add[s]; /* -inf at every blank: two terms there (a branch of period 2) */
        a[s] = (c == -INFINITY ? lse2(p[s], p[s - 1]) : lse3(p[s], p[s - 1], c)) + em[s];
    }
}

/* One beta step, from the next frame's beta q (two -inf pads after its row). */
static void beta_step_c(const double *q, const double *skip_add, const double *em, int64_t lo, int64_t hi,
                             double *b) {
    for (int64_t s = lo; s < hi; s++) {
        double c = q[s + 2] + skip_add[s + 2];
        b[s] = (c == -INFINITY ? lse2(q[s], q[s + 1]) : lse3(q[s], q[s + 1], c)) + em[s];
    }
}

static void post_c(const double *a, const double *b, const double *em, double ll, int64_t lo, int64_t hi,
                   double *w) {
    for (int64_t s = lo; s < hi; s++) {
        double ab = a[s] + b[s];
        w[s] = ab == -INFINITY ? 0.0 : exp(ab - em[s] - ll); /* -inf: off every alignment (also when p = 0) */
    }
}

static const ctc_steps steps_c = {alpha_step_c, beta_step_c, post_c};

/* ---- AVX2 with FMA: four states at a time. e^x and log v in double, from their polynomials:
 * e^x = 2^n e^r, n = round(x / ln 2), |r| <= ln 2 / 2, e^r to degree 12 (truncation < 2e-16);
 * log v for the sums 1 + e^x + e^y in [1, 3] only: v = 2^k w with w in [0.75, 1.5], and
 * log w = 2 atanh(s), s = (w - 1) / (w + 1), |s| <= 0.2, as 2 s (1 + s^2 / 3 + ... + s^22 / 23). */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define AVX2_FN __attribute__((target("avx2,fma")))

AVX2_FN static inline __m256d exp4(__m256d x) {
    const __m256d ln2_hi = _mm256_set1_pd(6.93147180369123816490e-01), ln2_lo = _mm256_set1_pd(1.90821492927058770002e-10);
    __m256d xc = _mm256_min_pd(_mm256_max_pd(x, _mm256_set1_pd(-745.0)), _mm256_set1_pd(709.0));
    __m256d n = _mm256_round_pd(_mm256_mul_pd(xc, _mm256_set1_pd(1.44269504088896338700)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256d r = _mm256_fnmadd_pd(n, ln2_hi, xc);
    r = _mm256_fnmadd_pd(n, ln2_lo, r);
    static const double inv_fact[13] = {1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040,
                                        1.0 / 40320, 1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800, 1.0 / 479001600};
    __m256d q = _mm256_set1_pd(inv_fact[12]);
    for (int k = 11; k >= 0; k--) q = _mm256_fmadd_pd(q, r, _mm256_set1_pd(inv_fact[k]));
    /* 2^n as two factors, so n down to -1075 (subnormal results) stays representable */
    __m128i ni = _mm256_cvtpd_epi32(n), n1 = _mm_srai_epi32(ni, 1), n2 = _mm_sub_epi32(ni, n1);
    __m256i bias = _mm256_set1_epi64x(1023);
    __m256d s1 = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(n1), bias), 52));
    __m256d s2 = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(n2), bias), 52));
    __m256d y = _mm256_mul_pd(_mm256_mul_pd(q, s1), s2);
    y = _mm256_blendv_pd(y, _mm256_setzero_pd(), _mm256_cmp_pd(x, _mm256_set1_pd(-745.0), _CMP_LT_OQ)); /* -inf: 0 */
    return _mm256_blendv_pd(y, x, _mm256_cmp_pd(x, x, _CMP_UNORD_Q)); /* NaN stays */
}

/* log v for v in [1, 3] */
AVX2_FN static inline __m256d log4_1_3(__m256d v) {
    __m256d big = _mm256_cmp_pd(v, _mm256_set1_pd(1.5), _CMP_GE_OQ);
    __m256d w = _mm256_blendv_pd(v, _mm256_mul_pd(v, _mm256_set1_pd(0.5)), big);
    __m256d one = _mm256_set1_pd(1.0);
    __m256d s = _mm256_div_pd(_mm256_sub_pd(w, one), _mm256_add_pd(w, one)), z = _mm256_mul_pd(s, s);
    __m256d q = _mm256_set1_pd(1.0 / 23);
    for (int k = 21; k >= 1; k -= 2) q = _mm256_fmadd_pd(q, z, _mm256_set1_pd(1.0 / k));
    __m256d lw = _mm256_mul_pd(_mm256_add_pd(s, s), q);
    return _mm256_add_pd(lw, _mm256_and_pd(big, _mm256_set1_pd(0.69314718055994530942)));
}

/* log(e^x0 + e^x1 + e^x2) + e, and NaN where any term is NaN */
AVX2_FN static inline __m256d lse3_4(__m256d x0, __m256d x1, __m256d x2, __m256d e) {
    __m256d hi = _mm256_max_pd(x0, x1), y = _mm256_min_pd(x0, x1);
    __m256d m = _mm256_max_pd(hi, x2), x = _mm256_min_pd(hi, x2);
    __m256d ninf = _mm256_set1_pd(-INFINITY);
    __m256d shift = _mm256_blendv_pd(m, _mm256_setzero_pd(), _mm256_cmp_pd(m, ninf, _CMP_EQ_OQ)); /* all -inf: 0 */
    __m256d sum = _mm256_add_pd(_mm256_add_pd(_mm256_set1_pd(1.0), exp4(_mm256_sub_pd(x, shift))),
                                exp4(_mm256_sub_pd(y, shift)));
    __m256d r = _mm256_add_pd(_mm256_add_pd(m, log4_1_3(sum)), e);
    __m256d nan = _mm256_or_pd(_mm256_cmp_pd(x0, x1, _CMP_UNORD_Q), _mm256_cmp_pd(x2, x2, _CMP_UNORD_Q));
    return _mm256_blendv_pd(r, _mm256_set1_pd(NAN), nan);
}

AVX2_FN static void alpha_step_avx2(const double *p, const double *skip_add, const double *em, int64_t lo, int64_t hi,
                                    double *a) {
    int64_t s = lo;
    for (; s + 4 <= hi; s += 4) {
        __m256d x2 = _mm256_add_pd(_mm256_loadu_pd(p + s - 2), _mm256_loadu_pd(skip_add + s));
        _mm256_storeu_pd(a + s, lse3_4(_mm256_loadu_pd(p + s), _mm256_loadu_pd(p + s - 1), x2, _mm256_loadu_pd(em + s)));
    }
    alpha_step_c(p, skip_add, em, s, hi, a);
}

AVX2_FN static void beta_step_avx2(const double *q, const double *skip_add, const double *em, int64_t lo, int64_t hi,
                                   double *b) {
    int64_t s = lo;
    for (; s + 4 <= hi; s += 4) {
        __m256d x2 = _mm256_add_pd(_mm256_loadu_pd(q + s + 2), _mm256_loadu_pd(skip_add + s + 2));
        _mm256_storeu_pd(b + s, lse3_4(_mm256_loadu_pd(q + s), _mm256_loadu_pd(q + s + 1), x2, _mm256_loadu_pd(em + s)));
    }
    beta_step_c(q, skip_add, em, s, hi, b);
}

AVX2_FN static void post_avx2(const double *a, const double *b, const double *em, double ll, int64_t lo, int64_t hi,
                              double *w) {
    int64_t s = lo;
    __m256d vll = _mm256_set1_pd(ll), ninf = _mm256_set1_pd(-INFINITY);
    for (; s + 4 <= hi; s += 4) {
        __m256d ab = _mm256_add_pd(_mm256_loadu_pd(a + s), _mm256_loadu_pd(b + s));
        __m256d v = exp4(_mm256_sub_pd(_mm256_sub_pd(ab, _mm256_loadu_pd(em + s)), vll));
        _mm256_storeu_pd(w + s, _mm256_blendv_pd(v, _mm256_setzero_pd(), _mm256_cmp_pd(ab, ninf, _CMP_EQ_OQ)));
    }
    post_c(a, b, em, ll, s, hi, w);
}

static const ctc_steps steps_avx2 = {alpha_step_avx2, beta_step_avx2, post_avx2};
#define OAR_CTC_AVX2 1
#endif

static void swap(double **x, double **y) {
    double *t = *x;
    *x = *y;
    *y = t;
}

/* ---- forward: the log-likelihood of sample n */
static double forward_sample(const ctc_job *j, int64_t n, ctc_work *w) {
    int64_t T = j->b->in_len[n], L = prepare(j, n, w);
    if (T == 0) return L == 1 ? 0.0 : -INFINITY;
    double *a = w->a, *p = w->p;
    int64_t hi = band_hi(0, L);
    gather(j, 0, n, w->ext, 0, hi, w->em);
    for (int64_t s = band_lo(0, T, L); s < hi; s++) a[s] = w->em[s];
    for (int64_t t = 1; t < T; t++) {
        swap(&a, &p);
        int64_t lo = band_lo(t, T, L);
        hi = band_hi(t, L);
        gather(j, t, n, w->ext, lo, hi, w->em);
        j->steps->alpha(p, w->skip_add, w->em, lo, hi, a);
    }
    return L > 1 ? lse2(a[L - 1], a[L - 2]) : a[0];
}

static void forward_task(void *ctx, int64_t n0, int64_t n1) {
    const ctc_job *j = ctx;
    ctc_work w;
    if (!work_alloc(&w, j->b, false)) {
        for (int64_t n = n0; n < n1; n++) j->failed[n] = true;
        return;
    }
    for (int64_t n = n0; n < n1; n++) {
        double nll = -forward_sample(j, n, &w);
        if (j->zero_inf && isinf(nll)) nll = 0;
        if (j->f64) ((double *)j->out)[n] = nll;
        else ((float *)j->out)[n] = (float)nll;
    }
    free(w.block);
}

/* ---- backward: beta for every frame, then alpha frame by frame with the gradient of that frame */
static void store_row(const ctc_job *j, int64_t t, int64_t n, const double *v, double g, bool nan) {
    int64_t C = j->b->C, row = (t * j->b->N + n) * C;
    for (int64_t c = 0; c < C; c++) {
        /* classes on no alignment get exact zeros, whatever g is */
        double d = nan ? NAN : v && v[c] != 0 ? -g * v[c] : 0.0;
        if (j->f64) ((double *)j->out)[row + c] = d;
        else ((float *)j->out)[row + c] = (float)d;
    }
}

static void backward_sample(const ctc_job *j, int64_t n, ctc_work *w) {
    int64_t T = j->b->in_len[n], L = prepare(j, n, w), R = L + 2, C = j->b->C;
    double g = j->f64 ? ((const double *)j->g)[n] : ((const float *)j->g)[n];
    for (int64_t t = T; t < j->b->T; t++) store_row(j, t, n, NULL, 0, false); /* past the input: no gradient */
    if (T == 0) return;
    double *em = w->em, *beta = w->beta;
    for (int64_t i = 0; i < T * R; i++) beta[i] = -INFINITY;
    for (int64_t t = 0; t < T; t++) gather(j, t, n, w->ext, band_lo(t, T, L), band_hi(t, L), em + t * L);
    for (int64_t s = band_lo(T - 1, T, L); s < band_hi(T - 1, L); s++)
        beta[(T - 1) * R + s] = s >= L - 2 ? em[(T - 1) * L + s] : -INFINITY;
    for (int64_t t = T - 2; t >= 0; t--) {
        const double *q = beta + (t + 1) * R, *e = em + t * L;
        double *b = beta + t * R;
        j->steps->beta(q, w->skip_add, e, band_lo(t, T, L), band_hi(t, L), b);
    }
    double ll = L > 1 ? lse2(beta[0], beta[1]) : beta[0];
    if (ll == -INFINITY) { /* no alignment: zero_infinity gives zeros, torch's kernel NaN otherwise */
        for (int64_t t = 0; t < T; t++) store_row(j, t, n, NULL, 0, !j->zero_inf);
        return;
    }
    double *a = w->a, *p = w->p, *acc = w->acc;
    memset(acc, 0, sizeof(double) * (size_t)C);
    for (int64_t t = 0; t < T; t++) {
        int64_t lo = band_lo(t, T, L), hi = band_hi(t, L);
        const double *e = em + t * L, *b = beta + t * R;
        if (t == 0) {
            for (int64_t s = lo; s < hi; s++) a[s] = e[s];
        } else {
            swap(&a, &p);
            j->steps->alpha(p, w->skip_add, e, lo, hi, a);
        }
        j->steps->post(a, b, e, ll, lo, hi, w->w);
        for (int64_t s = lo; s < hi; s++) acc[w->ext[s]] += w->w[s];
        store_row(j, t, n, acc, g, false);
        for (int64_t s = lo; s < hi; s++) acc[w->ext[s]] = 0;
    }
}

static void backward_task(void *ctx, int64_t n0, int64_t n1) {
    const ctc_job *j = ctx;
    ctc_work w;
    if (!work_alloc(&w, j->b, true)) {
        for (int64_t n = n0; n < n1; n++) j->failed[n] = true;
        return;
    }
    for (int64_t n = n0; n < n1; n++) backward_sample(j, n, &w);
    free(w.block);
}

/* ---- drivers */
static oar_status run(const ctc_steps *steps, const char *op, oar_tensor *const *in, oar_tensor *out, const void *g,
                      const oar_attr *a, oar_range_fn task) {
    oar_ctc_batch b;
    oar_status st = oar_ctc_batch_init(op, &b, in[0], in[1], in[2], in[3], a[0].i);
    if (st != OAR_OK) return st;
    ctc_job j = {.steps = steps, .b = &b, .lp = oar_tensor_ptr(in[0]), .f64 = in[0]->dtype == OAR_F64, .zero_inf = a[1].i != 0,
                 .g = g, .out = oar_tensor_ptr(out)};
    if (b.N > 0 && !(j.failed = oar_malloc(sizeof(bool) * (size_t)b.N))) st = OAR_ERR_OOM;
    if (st == OAR_OK) oar_parallel_for(b.N, 1, task, &j);
    for (int64_t n = 0; n < b.N && st == OAR_OK; n++)
        if (j.failed[n]) st = oar_error(OAR_ERR_OOM, "%s: out of memory for the workspace of sample %lld", op, (long long)n);
    free(j.failed);
    oar_ctc_batch_free(&b);
    return st;
}

/* KERNELS(suffix, steps): the forward and backward kernels of one instruction set */
#define KERNELS(SUFFIX, STEPS)                                                                                 \
    static oar_status forward_##SUFFIX(const oar_kctx *ctx, oar_tensor *const *in, int n_in,                 \
                                       oar_tensor *const *out, int n_out, const oar_attr *a) {               \
        return run(&STEPS, "ctc_loss", in, out[0], NULL, a, forward_task);                                    \
    }                                                                                                        \
    static oar_status backward_##SUFFIX(const oar_kctx *ctx, oar_tensor *const *in, int n_in,                \
                                        oar_tensor *const *out, int n_out, const oar_attr *a) {              \
        return run(&STEPS, "ctc_loss_backward", in + 1, out[0], oar_tensor_ptr(in[0]), a, backward_task);    \
    }

KERNELS(c, steps_c)
#ifdef OAR_CTC_AVX2
KERNELS(avx2, steps_avx2)
/* asks the CPU switch at dispatch time, so a cap set after registration holds */
static bool avx2_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    return oar_cpu_has_avx2();
}
#endif

static void register_pair(const char *impl, int priority, oar_kernel_fn fwd, oar_kernel_fn bwd, oar_supports_fn sup) {
    uint32_t dts = OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64);
    oar_register_kernel(OAR_OP_ctc_loss, (oar_kernel_entry){.device = OAR_CPU, .dtypes = dts, .impl = impl,
                                                            .priority = priority, .fn = fwd, .supports = sup});
    oar_register_kernel(OAR_OP_ctc_loss_backward, (oar_kernel_entry){.device = OAR_CPU, .dtypes = dts, .impl = impl,
                                                                     .priority = priority, .fn = bwd, .supports = sup});
}

void oar_cpu_register_ctc(void) {
    /* the portable build serves machines without AVX2, and the sweep checks both against the reference */
    register_pair("c", 5, forward_c, backward_c, NULL);
#ifdef OAR_CTC_AVX2
    register_pair("avx2", 10, forward_avx2, backward_avx2, avx2_supports);
#endif
}
