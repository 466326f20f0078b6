/* AVX2/FMA normalization kernels in f32: layer_norm over the last dims, group_norm over
 * contiguous (sample, group) blocks, batch_norm in training and inference (and batch_norm_act:
 * batch_norm, residual add and relu in one pass). Statistics are
 * accumulated in double (two passes), the normalization is one fused multiply-add per element,
 * and the work is split over rows, groups, channels or planes. batch_norm and batch_norm_act
 * also take bf16/f16 x (and residual, and y) with f32 parameters: rows are widened and the
 * results rounded in registers (nn_half.h), with the f32 kernel's arithmetic, so they give the
 * bits of the via-f32 path without its f32 copies. */
#include "kernels/cpu/nn_half.h"
#include "kernels/cpu/nn_half512.h"
#include "kernels/cpu/nn_kernels.h"
#include "ops/batch_norm_factor.h"

#include <stdlib.h>
#include <string.h>

#ifdef OAR_NN_SIMD

/* Mean and biased variance of m contiguous floats. The second pass is centred on the mean
 * rounded to float; the exact identity sum((x - mf)^2)/m = var + (mean - mf)^2 removes that
 * rounding again. */
NN_HINL void row_moments_k(const void *x, int64_t m, const int k, double *mean, double *var) {
    const int64_t full = m & ~(int64_t)7, rest = m - full;
    const __m256i tail = nn_tail_mask(rest);
    nn_dacc s = nn_dacc_zero(), q = nn_dacc_zero();
    for (int64_t i = 0; i < full; i += 8) nn_dacc_add(&s, nn_ld(x, i, k));
    if (rest) nn_dacc_add(&s, nn_ld_tail(x, full, rest, tail, 0.0f, k));
    double mu = m ? nn_dacc_sum(s) / (double)m : 0.0;
    float muf = (float)mu;
    const __m256 vmu = _mm256_set1_ps(muf);
    for (int64_t i = 0; i < full; i += 8) nn_dacc_add_sq(&q, _mm256_sub_ps(nn_ld(x, i, k), vmu));
    if (rest) nn_dacc_add_sq(&q, _mm256_sub_ps(nn_ld_tail(x, full, rest, tail, muf, k), vmu));
    double v = m ? nn_dacc_sum(q) / (double)m - (mu - muf) * (mu - muf) : 0.0;
    *mean = mu;
    *var = v > 0 ? v : 0.0;
}

/* row_moments_k of two rows of m values (at x0 and x1) with the same operations on each, in two
 * independent chains that the core overlaps (one row's sums are bound by the adds' latency). */
NN_HINL void row_moments2_k(const void *x0, const void *x1, int64_t m, const int k, double *mean, double *var) {
    const int64_t full = m & ~(int64_t)7, rest = m - full;
    const __m256i tail = nn_tail_mask(rest);
    nn_dacc s0 = nn_dacc_zero(), s1 = nn_dacc_zero(), q0 = nn_dacc_zero(), q1 = nn_dacc_zero();
    for (int64_t i = 0; i < full; i += 8) {
        nn_dacc_add(&s0, nn_ld(x0, i, k));
        nn_dacc_add(&s1, nn_ld(x1, i, k));
    }
    if (rest) {
        nn_dacc_add(&s0, nn_ld_tail(x0, full, rest, tail, 0.0f, k));
        nn_dacc_add(&s1, nn_ld_tail(x1, full, rest, tail, 0.0f, k));
    }
    double mu0 = m ? nn_dacc_sum(s0) / (double)m : 0.0, mu1 = m ? nn_dacc_sum(s1) / (double)m : 0.0;
    float mf0 = (float)mu0, mf1 = (float)mu1;
    const __m256 vm0 = _mm256_set1_ps(mf0), vm1 = _mm256_set1_ps(mf1);
    for (int64_t i = 0; i < full; i += 8) {
        nn_dacc_add_sq(&q0, _mm256_sub_ps(nn_ld(x0, i, k), vm0));
        nn_dacc_add_sq(&q1, _mm256_sub_ps(nn_ld(x1, i, k), vm1));
    }
    if (rest) {
        nn_dacc_add_sq(&q0, _mm256_sub_ps(nn_ld_tail(x0, full, rest, tail, mf0, k), vm0));
        nn_dacc_add_sq(&q1, _mm256_sub_ps(nn_ld_tail(x1, full, rest, tail, mf1, k), vm1));
    }
    double v0 = m ? nn_dacc_sum(q0) / (double)m - (mu0 - mf0) * (mu0 - mf0) : 0.0;
    double v1 = m ? nn_dacc_sum(q1) / (double)m - (mu1 - mf1) * (mu1 - mf1) : 0.0;
    mean[0] = mu0, mean[1] = mu1;
    var[0] = v0 > 0 ? v0 : 0.0;
    var[1] = v1 > 0 ? v1 : 0.0;
}

static NN_AVX2H void row_moments2(const void *x0, const void *x1, int64_t m, int k, double *mean, double *var) {
    if (k == NN_BF16) row_moments2_k(x0, x1, m, NN_BF16, mean, var);
    else if (k == NN_F16) row_moments2_k(x0, x1, m, NN_F16, mean, var);
    else row_moments2_k(x0, x1, m, NN_F32, mean, var);
}

/* one copy per kind, each with its conversions inlined */
static NN_AVX2H void row_moments(const void *x, int64_t m, int k, double *mean, double *var) {
    if (k == NN_BF16) row_moments_k(x, m, NN_BF16, mean, var);
    else if (k == NN_F16) row_moments_k(x, m, NN_F16, mean, var);
    else row_moments_k(x, m, NN_F32, mean, var);
}

/* y = (x - mean) * scale + shift over n floats; w and b (per element, may be NULL) multiply
 * scale and add to shift elementwise. */
static NN_AVX2 void normalize_run(const float *x, float *y, int64_t n, float mean, float scale, float shift,
                                  const float *w, const float *b) {
    const __m256 vm = _mm256_set1_ps(mean), vs = _mm256_set1_ps(scale), vb = _mm256_set1_ps(shift);
    const int64_t full = n & ~(int64_t)7, rest = n - full;
    const __m256i tail = nn_tail_mask(rest);
    for (int64_t i = 0; i <= full; i += 8) {
        bool last = i == full;
        if (last && !rest) break;
        __m256 v = last ? _mm256_maskload_ps(x + i, tail) : _mm256_loadu_ps(x + i);
        __m256 sc = vs, sh = vb;
        if (w) sc = _mm256_mul_ps(sc, last ? _mm256_maskload_ps(w + i, tail) : _mm256_loadu_ps(w + i));
        if (b) sh = last ? _mm256_maskload_ps(b + i, tail) : _mm256_loadu_ps(b + i);
        __m256 r = _mm256_fmadd_ps(_mm256_sub_ps(v, vm), sc, sh);
        if (last) _mm256_maskstore_ps(y + i, tail, r);
        else _mm256_storeu_ps(y + i, r);
    }
}

/* ---- layer_norm: rows of m values, each normalized on its own. A bf16/f16 x with f32
 * parameters (autocast's mixed layer_norm) is widened a row at a time into an f32 buffer on the
 * stack, normalized by the f32 row routine and rounded out (the `cast` kernel's conversions):
 * the bits of via-f32 without its f32 copies of x and y. Converting inside the row routine's
 * loops was slower (docs/amp.md: its statistics passes are bound by their accumulation chains). */
typedef struct ln_job {
    const void *x;
    const float *w, *b;
    void *y;
    float *mean, *rstd;
    int64_t m;
    double eps;
    oar_dtype dt; /* of x and y */
} ln_job;

/* One row of layer_norm; the add_layer_norm kernel calls it too, so both round alike. */
void oar_nn_layer_norm_row(const float *x, const float *w, const float *b, float *y, float *mean_out,
                           float *rstd_out, int64_t m, double eps) {
    double mean, var;
    row_moments(x, m, NN_F32, &mean, &var);
    float rstd = (float)(1.0 / sqrt(var + eps));
    *mean_out = (float)mean;
    *rstd_out = rstd;
    normalize_run(x, y, m, (float)mean, rstd, 0.0f, w, b);
}

/* One row of x of a low dtype through the f32 row routine; xb, yb: m floats of scratch. */
void oar_nn_layer_norm_row_half(const void *x, const float *w, const float *b, void *y, float *mean_out,
                                float *rstd_out, int64_t m, double eps, oar_dtype dt, float *xb, float *yb) {
    oar_cpu_half_to_f32(xb, x, m, dt);
    oar_nn_layer_norm_row(xb, w, b, yb, mean_out, rstd_out, m, eps);
    oar_cpu_f32_to_half(y, yb, m, dt);
}

/* Two f32 rows (x0, x1) as oar_nn_layer_norm_row normalizes each (the same operations), their
 * statistics in two interleaved chains (row_moments2): a row's sums are bound by latency.
 * The mixed add_layer_norm kernel (nn_add_layer_norm.c) calls it too. */
void oar_nn_layer_norm_row_pair(const float *x0, const float *x1, const float *w, const float *b, float *y0, float *y1,
                                float *mean_out, float *rstd_out, int64_t m, double eps) {
    double mean[2], var[2];
    row_moments2(x0, x1, m, NN_F32, mean, var);
    for (int i = 0; i < 2; i++) {
        float rstd = (float)(1.0 / sqrt(var[i] + eps));
        mean_out[i] = (float)mean[i];
        rstd_out[i] = rstd;
        normalize_run(i ? x1 : x0, i ? y1 : y0, m, (float)mean[i], rstd, 0.0f, w, b);
    }
}

static void ln_rows(void *ctx, int64_t begin, int64_t end) {
    const ln_job *j = ctx;
    const int64_t m = j->m;
    const bool half = j->dt != OAR_F32;
    float xb[half ? 2 * OAR_NN_LN_HALF_MAX : 1], yb[half ? 2 * OAR_NN_LN_HALF_MAX : 1];
    int64_t r = begin;
    for (; r + 2 <= end; r += 2) {
        if (!half) {
            const float *x = (const float *)j->x + r * m;
            float *y = (float *)j->y + r * m;
            oar_nn_layer_norm_row_pair(x, x + m, j->w, j->b, y, y + m, j->mean + r, j->rstd + r, m, j->eps);
            continue;
        }
        oar_cpu_half_to_f32(xb, (const uint16_t *)j->x + r * m, 2 * m, j->dt);
        oar_nn_layer_norm_row_pair(xb, xb + m, j->w, j->b, yb, yb + m, j->mean + r, j->rstd + r, m, j->eps);
        oar_cpu_f32_to_half((uint16_t *)j->y + r * m, yb, 2 * m, j->dt);
    }
    if (r < end && !half)
        oar_nn_layer_norm_row((const float *)j->x + r * m, j->w, j->b, (float *)j->y + r * m, j->mean + r,
                              j->rstd + r, m, j->eps);
    else if (r < end)
        oar_nn_layer_norm_row_half((const uint16_t *)j->x + r * m, j->w, j->b, (uint16_t *)j->y + r * m, j->mean + r,
                                   j->rstd + r, m, j->eps, j->dt, xb, yb);
}

static oar_status layer_norm_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                  int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    const oar_tensor *x = in[0];
    int k = (int)a[0].i;
    int64_t m = 1;
    for (int d = x->ndim - k; d < x->ndim; d++) m *= x->shape[d];
    if (x->numel == 0) {
        /* rows without values: torch's mean of nothing is NaN */
        for (int o = 1; o < 3; o++)
            for (int64_t r = 0; r < out[o]->numel; r++) ((float *)oar_tensor_ptr(out[o]))[r] = NAN;
        return OAR_OK;
    }
    ln_job j = {oar_tensor_ptr(x), in[1] ? (const float *)oar_tensor_ptr(in[1]) : NULL,
                in[2] ? (const float *)oar_tensor_ptr(in[2]) : NULL, oar_tensor_ptr(out[0]),
                (float *)oar_tensor_ptr(out[1]), (float *)oar_tensor_ptr(out[2]), m, a[1].f, x->dtype};
    oar_parallel_for(x->numel / m, 16384 / m + 1, ln_rows, &j);
    return OAR_OK;
}

/* ---- group_norm: each (sample, group) is one contiguous block of cg channels x s values */
typedef struct gn_job {
    const float *x, *w, *b;
    float *y, *mean, *rstd;
    int64_t groups, cg, s;
    double eps;
} gn_job;

static void gn_blocks(void *ctx, int64_t begin, int64_t end) {
    const gn_job *j = ctx;
    const int64_t m = j->cg * j->s;
    for (int64_t r = begin; r < end; r++) {
        double mean, var;
        row_moments(j->x + r * m, m, NN_F32, &mean, &var);
        float rstd = (float)(1.0 / sqrt(var + j->eps));
        j->mean[r] = (float)mean;
        j->rstd[r] = rstd;
        for (int64_t c = 0; c < j->cg; c++) {
            int64_t ch = (r % j->groups) * j->cg + c, at = r * m + c * j->s;
            float scale = rstd * (j->w ? j->w[ch] : 1.0f), shift = j->b ? j->b[ch] : 0.0f;
            normalize_run(j->x + at, j->y + at, j->s, (float)mean, scale, shift, NULL, NULL);
        }
    }
}

static oar_status group_norm_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                  int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    const oar_tensor *x = in[0];
    const int64_t groups = a[0].i, n = x->shape[0], c = x->shape[1];
    int64_t s = 1;
    for (int d = 2; d < x->ndim; d++) s *= x->shape[d];
    const int64_t m = c / groups * s;
    if (m == 0) {
        for (int o = 1; o < 3; o++)
            for (int64_t r = 0; r < out[o]->numel; r++) ((float *)oar_tensor_ptr(out[o]))[r] = NAN;
        return OAR_OK;
    }
    gn_job j = {(const float *)oar_tensor_ptr(x), in[1] ? (const float *)oar_tensor_ptr(in[1]) : NULL,
                in[2] ? (const float *)oar_tensor_ptr(in[2]) : NULL, (float *)oar_tensor_ptr(out[0]),
                (float *)oar_tensor_ptr(out[1]), (float *)oar_tensor_ptr(out[2]), groups, c / groups, s, a[1].f};
    oar_parallel_for(n * groups, 16384 / m + 1, gn_blocks, &j);
    return OAR_OK;
}

/* ---- batch_norm over [N, C, S]: statistics per channel, then y = (x - mean) * scale + shift.
 * x, y and the residual are of one kind (f32, bf16 or f16: nn_half.h); the rest is f32. */

/* What turns a channel's mean and variance into its normalization (and running statistics). */
typedef struct bn_setup {
    const float *w, *b;
    float *rm, *rv, *om, *oi; /* running mean and variance (or NULL); the saved mean and rstd */
    double momentum, eps;
    int64_t cnt; /* values per channel */
    bool training, update;
} bn_setup;

typedef struct bn_job {
    const void *x;
    void *y;
    int64_t n, c, s;
    double *mean, *var;                /* phase 1 results, per channel */
    const float *vmean, *scale, *shift; /* phase 2 inputs, per channel */
    const void *res;                    /* batch_norm_act: added after the normalization, or NULL */
    bool relu;                          /* batch_norm_act: relu last */
    int k;                              /* the kind of x, y and res */
    bool x512;                          /* bf16/f16 planes 16 values at a time (the avx512 cap) */
    const bn_setup *set;
} bn_job;

/* Channel ch's float mean, scale and shift from its mean and var (the running statistics
 * updated, or read in evaluation), and the saved mean and rstd. */
static void bn_setup_channel(const bn_job *j, int64_t ch) {
    const bn_setup *p = j->set;
    double *mean = j->mean, *var = j->var;
    float *fmean = (float *)j->vmean, *scale = (float *)j->scale, *shift = (float *)j->shift;
    if (p->training && p->cnt == 0) mean[ch] = var[ch] = 0;
    if (!p->training) {
        mean[ch] = p->rm[ch];
        var[ch] = p->rv[ch];
    }
    double invstd = 1.0 / sqrt(var[ch] + p->eps);
    if (p->update) {
        p->rm[ch] = (float)((1 - p->momentum) * p->rm[ch] + p->momentum * mean[ch]);
        p->rv[ch] = (float)((1 - p->momentum) * p->rv[ch] +
                            p->momentum * var[ch] * (double)p->cnt / (double)(p->cnt - 1));
    }
    p->om[ch] = fmean[ch] = (float)mean[ch];
    p->oi[ch] = (float)invstd;
    scale[ch] = (float)(invstd * (p->w ? p->w[ch] : 1.0));
    shift[ch] = p->b ? p->b[ch] : 0.0f;
}

/* One vector of batch_norm (and batch_norm_act's epilogue): the normalization's fma, rounded to
 * the kind as batch_norm's output is; then the residual add in f32 rounded as the add kernel's
 * output is (f32 + f32 for f32, the via-f32 add of two low values otherwise), then max(0, .) as
 * the relu kernel. So the fused node gives the bits of batch_norm, add and relu run one after
 * another, at every kind (the roundings are the identity for f32). */
NN_HINL __m256 bn_vec(__m256 x, __m256 mean, __m256 scale, __m256 shift, const bn_job *j, int64_t at, bool last,
                      int64_t rest, __m256i tail, const int k) {
    __m256 v = _mm256_fmadd_ps(_mm256_sub_ps(x, mean), scale, shift);
    if (!j->res && !j->relu) return v;
    v = nn_round(v, k);
    if (j->res)
        v = nn_round(_mm256_add_ps(v, last ? nn_ld_tail(j->res, at, rest, tail, 0.0f, k) : nn_ld(j->res, at, k)), k);
    if (j->relu) v = _mm256_max_ps(_mm256_setzero_ps(), v);
    return v;
}

/* Channel statistics when each channel is N planes of s contiguous values: plane moments are
 * merged one by one with Chan's update, which stays accurate for any mean. The planes' moments
 * are computed two at a time (row_moments2: each plane's own sums, the same values). */
static void bn_stats_planes(void *ctx, int64_t begin, int64_t end) {
    const bn_job *j = ctx;
    const size_t es = j->k == NN_F32 ? sizeof(float) : sizeof(uint16_t);
    for (int64_t ch = begin; ch < end; ch++) {
        double cnt = 0, mean = 0, m2 = 0, s = (double)j->s;
        double mu[2] = {0, 0}, var[2] = {0, 0}; /* planes i and i + 1 from even i on */
        for (int64_t i = 0; i < j->n; i++) {
            const int at = (int)(i % 2);
            const char *plane = (const char *)j->x + (size_t)((i * j->c + ch) * j->s) * es;
            if (!at && i + 1 < j->n) row_moments2(plane, plane + (size_t)(j->c * j->s) * es, j->s, j->k, mu, var);
            else if (!at) row_moments(plane, j->s, j->k, mu, var);
            double tot = cnt + s, delta = mu[at] - mean;
            mean += delta * s / tot;
            m2 += var[at] * s + delta * delta * cnt * s / tot;
            cnt = tot;
        }
        j->mean[ch] = mean;
        j->var[ch] = m2 / cnt;
    }
}

/* Channel statistics of an [N, C] input: eight channels at a time, down the columns. */
static NN_AVX2H void bn_stats_cols(void *ctx, int64_t begin, int64_t end) {
    const bn_job *j = ctx;
    for (int64_t blk = begin; blk < end; blk++) {
        const int64_t c0 = blk * 8, width = j->c - c0 < 8 ? j->c - c0 : 8;
        const __m256i mask = nn_tail_mask(width);
        nn_dacc s = nn_dacc_zero(), q = nn_dacc_zero();
        for (int64_t i = 0; i < j->n; i++) nn_dacc_add(&s, nn_ld_tail(j->x, i * j->c + c0, width, mask, 0.0f, j->k));
        double sum[8], sq[8], mean[8];
        float meanf[8];
        nn_dacc_lanes(s, sum);
        for (int l = 0; l < 8; l++) {
            mean[l] = sum[l] / (double)j->n;
            meanf[l] = (float)mean[l];
        }
        const __m256 vm = _mm256_loadu_ps(meanf);
        for (int64_t i = 0; i < j->n; i++)
            nn_dacc_add_sq(&q, _mm256_sub_ps(nn_ld_tail(j->x, i * j->c + c0, width, mask, 0.0f, j->k), vm));
        nn_dacc_lanes(q, sq);
        for (int l = 0; l < width; l++) { /* centred on the float mean; the identity corrects it */
            double v = sq[l] / (double)j->n - (mean[l] - meanf[l]) * (mean[l] - meanf[l]);
            j->mean[c0 + l] = mean[l];
            j->var[c0 + l] = v > 0 ? v : 0.0;
        }
    }
}

/* bn_vec's operations 16 values at a time over plane p's full 16s (bf16/f16); returns the first
 * element left to the 8-lane loop below */
NN_X512INL int64_t bn_apply_plane16_k(const bn_job *j, int64_t p, const int k) {
    const int64_t ch = p % j->c, base = p * j->s, full = j->s & ~(int64_t)15;
    const __m512 vm = _mm512_set1_ps(j->vmean[ch]), vs = _mm512_set1_ps(j->scale[ch]), vb = _mm512_set1_ps(j->shift[ch]);
    for (int64_t i = 0; i < full; i += 16) {
        __m512 v = _mm512_fmadd_ps(_mm512_sub_ps(nn16_ld(j->x, base + i, k), vm), vs, vb);
        if (!j->res && !j->relu) {
            nn16_st(j->y, base + i, v, k);
            continue;
        }
        v = nn16_round(v, k);
        if (j->res) v = nn16_round(_mm512_add_ps(v, nn16_ld(j->res, base + i, k)), k);
        if (j->relu) v = _mm512_max_ps(_mm512_setzero_ps(), v);
        nn16_st_exact(j->y, base + i, v, k);
    }
    return full;
}

static NN_X512 int64_t bn_apply_plane16(const bn_job *j, int64_t p) {
    return j->k == NN_BF16 ? bn_apply_plane16_k(j, p, NN_BF16) : bn_apply_plane16_k(j, p, NN_F16);
}

/* y = (x - mean[c]) * scale[c] + shift[c] for one plane (s values of channel c) at a time. */
NN_HINL void bn_apply_planes_k(const bn_job *j, int64_t begin, int64_t end, const int k) {
    const int64_t s = j->s, full = s & ~(int64_t)7, rest = s - full;
    const __m256i tail = nn_tail_mask(rest);
    for (int64_t p = begin; p < end; p++) {
        const int64_t ch = p % j->c, base = p * s, from = j->x512 ? bn_apply_plane16(j, p) : 0;
        const __m256 vm = _mm256_set1_ps(j->vmean[ch]), vs = _mm256_set1_ps(j->scale[ch]),
                     vb = _mm256_set1_ps(j->shift[ch]);
        if (j->res || j->relu) { /* bn_vec rounded its result: stored as it is */
            for (int64_t i = from; i < full; i += 8)
                nn_st_exact(j->y, base + i, bn_vec(nn_ld(j->x, base + i, k), vm, vs, vb, j, base + i, false, 8, tail, k),
                            k);
        } else {
            for (int64_t i = from; i < full; i += 8)
                nn_st(j->y, base + i, bn_vec(nn_ld(j->x, base + i, k), vm, vs, vb, j, base + i, false, 8, tail, k), k);
        }
        if (rest) {
            __m256 v = bn_vec(nn_ld_tail(j->x, base + full, rest, tail, 0.0f, k), vm, vs, vb, j, base + full, true,
                              rest, tail, k);
            nn_st_tail(j->y, base + full, rest, tail, v, k);
        }
    }
}

static NN_AVX2H void bn_apply_planes(void *ctx, int64_t begin, int64_t end) {
    const bn_job *j = ctx;
    if (j->k == NN_BF16) bn_apply_planes_k(j, begin, end, NN_BF16);
    else if (j->k == NN_F16) bn_apply_planes_k(j, begin, end, NN_F16);
    else bn_apply_planes_k(j, begin, end, NN_F32);
}

/* Training on [N, C, S]: each channel's statistics, its normalization and its N planes written
 * at once, while they are still in cache (a channel of ResNet-20's first stage is 128 KiB;
 * statistics over the whole tensor first read its 2 MiB twice from further out). The same
 * arithmetic as bn_stats_planes, bn_setup_channel and bn_apply_planes one after another. */
static void bn_train_channels(void *ctx, int64_t begin, int64_t end) {
    const bn_job *j = ctx;
    for (int64_t ch = begin; ch < end; ch++) {
        bn_stats_planes(ctx, ch, ch + 1);
        bn_setup_channel(j, ch);
        for (int64_t i = 0; i < j->n; i++) bn_apply_planes(ctx, i * j->c + ch, i * j->c + ch + 1);
    }
}

/* The same for [N, C] inputs, vectorized along each row's channels. */
static NN_AVX2H void bn_apply_rows(void *ctx, int64_t begin, int64_t end) {
    const bn_job *j = ctx;
    const int64_t full = j->c & ~(int64_t)7, rest = j->c - full;
    const __m256i tail = nn_tail_mask(rest);
    for (int64_t r = begin; r < end; r++) {
        const int64_t base = r * j->c;
        for (int64_t i = 0; i < full; i += 8) {
            __m256 v = bn_vec(nn_ld(j->x, base + i, j->k), _mm256_loadu_ps(j->vmean + i), _mm256_loadu_ps(j->scale + i),
                              _mm256_loadu_ps(j->shift + i), j, base + i, false, 8, tail, j->k);
            nn_st(j->y, base + i, v, j->k);
        }
        if (rest) {
            __m256 v = bn_vec(nn_ld_tail(j->x, base + full, rest, tail, 0.0f, j->k),
                              _mm256_maskload_ps(j->vmean + full, tail), _mm256_maskload_ps(j->scale + full, tail),
                              _mm256_maskload_ps(j->shift + full, tail), j, base + full, true, rest, tail, j->k);
            nn_st_tail(j->y, base + full, rest, tail, v, j->k);
        }
    }
}

/* batch_norm, and batch_norm_act when res or relu is set; counter: num_batches_tracked or NULL */
static oar_status bn_forward(oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a, const void *res,
                             bool relu, const oar_tensor *counter) {
    const oar_tensor *x = in[0];
    const float *w = in[1] ? (const float *)oar_tensor_ptr(in[1]) : NULL;
    const float *b = in[2] ? (const float *)oar_tensor_ptr(in[2]) : NULL;
    float *rm = in[3] ? (float *)oar_tensor_ptr(in[3]) : NULL, *rv = in[4] ? (float *)oar_tensor_ptr(in[4]) : NULL;
    const bool training = a[0].i != 0;
    const double momentum = oar_batch_norm_factor(a[1].f, counter), eps = a[2].f;
    const int64_t n = x->shape[0], c = x->shape[1];
    int64_t s = 1;
    for (int d = 2; d < x->ndim; d++) s *= x->shape[d];
    const int64_t cnt = n * s;
    /* per channel: mean, var (double); the float mean, scale and shift used to normalize */
    char *buf = oar_malloc((size_t)(c ? c : 1) * (2 * sizeof(double) + 3 * sizeof(float)));
    if (!buf) return OAR_ERR_OOM;
    double *mean = (double *)buf, *var = mean + c;
    float *fmean = (float *)(var + c), *scale = fmean + c, *shift = scale + c;
    const bool update = training && rm && cnt > 0; /* an empty batch leaves them alone, as in torch */
    const bn_setup set = {w, b, rm, rv, (float *)oar_tensor_ptr(out[1]), (float *)oar_tensor_ptr(out[2]),
                          momentum, eps, cnt, training, update};
    bn_job j = {oar_tensor_ptr(x), oar_tensor_ptr(out[0]), n, c, s, mean, var, fmean, scale, shift, res, relu,
                nn_kind(x->dtype), nn_kind(x->dtype) != NN_F32 && oar_cpu_has_avx512(), &set};
    if (training && cnt > 0 && s > 1) {
        oar_parallel_for(c, 16384 / cnt + 1, bn_train_channels, &j);
    } else {
        if (training && cnt > 0) oar_parallel_for((c + 7) / 8, 8192 / n + 1, bn_stats_cols, &j);
        for (int64_t ch = 0; ch < c; ch++) bn_setup_channel(&j, ch);
        if (x->numel) {
            if (s == 1) oar_parallel_for(n, 16384 / c + 1, bn_apply_rows, &j);
            else oar_parallel_for(n * c, 16384 / s + 1, bn_apply_planes, &j);
        }
    }
    if (update) { /* once per call, so autograd sees the in-place write */
        in[3]->storage->version++;
        in[4]->storage->version++;
    }
    free(buf);
    return OAR_OK;
}

static oar_status batch_norm_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                  int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    return bn_forward(in, out, a, NULL, false, in[5]);
}

/* batch_norm_act(x, weight, bias, running_mean, running_var, residual, num_batches_tracked;
 * training, momentum, eps) */
static oar_status batch_norm_act_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                      int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    return bn_forward(in, out, a, in[5] ? oar_tensor_ptr(in[5]) : NULL, true, in[6]);
}

/* ---- selection */
static bool avx2_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)in; (void)n_in; (void)out; (void)n_out; (void)a;
    return oar_cpu_has_avx2();
}

/* batch_norm reads strided inputs itself: take dense f32 tensors only. */
bool oar_nn_dense_f32_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)out; (void)n_out; (void)a;
    if (!oar_cpu_has_avx2()) return false;
    for (int i = 0; i < n_in; i++)
        if (in[i] && (in[i]->dtype != OAR_F32 || !in[i]->contiguous)) return false;
    return true;
}

/* batch_norm and batch_norm_act: dense f32 tensors, and the integer counter (last input, a
 * scalar the kernel only reads) as it comes. */
static bool bn_dense_f32_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    return oar_nn_dense_f32_ok(in, n_in - 1, out, n_out, a);
}

bool oar_nn_has_f16c(void) {
    static int has = -1;
    if (has < 0) has = strstr(oar_cpu_flags(), "f16c") != NULL;
    return has != 0;
}

/* Whether t is a dense tensor of kind k that the half kernels take (k bf16, or f16 with F16C). */
bool oar_nn_half_ok(const oar_tensor *t, int k) {
    return t->contiguous && nn_kind(t->dtype) == k && (k == NN_BF16 || (k == NN_F16 && oar_nn_has_f16c()));
}

/* batch_norm and batch_norm_act on a dense bf16/f16 x (and residual, of x's dtype) with dense
 * f32 parameters and running statistics, so f32 mean and rstd; the counter (last input) as it
 * comes. */
static bool bn_half_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_out; (void)a;
    const int k = nn_kind(in[0]->dtype);
    if (!oar_cpu_has_avx2() || k == NN_F32 || k < 0 || !oar_nn_half_ok(in[0], k) || out[0]->dtype != in[0]->dtype ||
        out[1]->dtype != OAR_F32 || out[2]->dtype != OAR_F32) /* no f32 parameter: all in x's dtype (via-f32) */
        return false;
    for (int i = 1; i < 5; i++)
        if (in[i] && (in[i]->dtype != OAR_F32 || !in[i]->contiguous)) return false;
    return n_in != 7 || !in[5] || oar_nn_half_ok(in[5], k);
}

/* layer_norm on a dense bf16/f16 x (y of its dtype) with f32 weight and bias (either may be
 * absent, not both: then the parameter dtype is x's and via-f32 runs), rows of at most
 * OAR_NN_LN_HALF_MAX values (the row buffers) */
static bool ln_half_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    const int k = nn_kind(in[0]->dtype);
    if (!oar_cpu_has_avx2() || k == NN_F32 || k < 0 || !oar_nn_half_ok(in[0], k) || !oar_nn_half_ok(out[0], k) ||
        out[1]->dtype != OAR_F32 || out[2]->dtype != OAR_F32 || (!in[1] && !in[2]))
        return false;
    for (int i = 1; i < 3; i++)
        if (in[i] && (in[i]->dtype != OAR_F32 || !in[i]->contiguous)) return false;
    int64_t m = 1;
    for (int d = in[0]->ndim - (int)a[0].i; d < in[0]->ndim; d++) m *= in[0]->shape[d];
    return m <= OAR_NN_LN_HALF_MAX;
}

#endif

void oar_cpu_nn_register_norm(void) {
#ifdef OAR_NN_SIMD
    oar_kernel_entry e = {.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32), .impl = "avx2", .priority = 10,
                          .fn = layer_norm_avx2, .supports = avx2_ok};
    oar_register_kernel(OAR_OP_layer_norm, e);
    e.fn = group_norm_avx2;
    oar_register_kernel(OAR_OP_group_norm, e);
    e.fn = batch_norm_avx2;
    e.supports = bn_dense_f32_ok;
    oar_register_kernel(OAR_OP_batch_norm, e);
    e.fn = batch_norm_act_avx2;
    oar_register_kernel(OAR_OP_batch_norm_act, e);
    /* the same kernels on bf16/f16 activations with f32 parameters (autocast's mixed norms) */
    e.impl = OAR_IMPL_HALF_MIXED;
    e.dtypes = OAR_DTYPE_BIT(OAR_BF16) | OAR_DTYPE_BIT(OAR_F16);
    e.supports = bn_half_ok;
    e.fn = batch_norm_avx2;
    oar_register_kernel(OAR_OP_batch_norm, e);
    e.fn = batch_norm_act_avx2;
    oar_register_kernel(OAR_OP_batch_norm_act, e);
    e.fn = layer_norm_avx2;
    e.supports = ln_half_ok;
    oar_register_kernel(OAR_OP_layer_norm, e);
#endif
}
