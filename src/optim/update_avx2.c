/* AVX2 versions of the f32 update loops with square roots and divisions, which the compiler
 * keeps scalar in the portable loops (sqrtf may set errno), and of SGD's, which it keeps to
 * 4-wide SSE (the baseline target) though it streams 5 arrays per element. Each mirrors its portable loop in
 * update_impl.h operation for operation, without FMA, so both give the same bits for every
 * element; the last n % 8 elements of a range take the same scalar code. */
#include "optim/optim.h"

#if OAR_OPTIM_AVX2
#include "kernels/cpu/cpu_kernels.h"

#include <immintrin.h>
#include <math.h>

#define AVX2 __attribute__((target("avx2")))

bool oar_optim_use_avx2(void) { return oar_cpu_has_avx2(); }

AVX2 static inline __m256 bcast(double x) { return _mm256_set1_ps((float)x); }

/* The portable loops handle the tails: include them for f32. */
#define UPD_T float
#define UPD_SQRT sqrtf
#define UPD_SUFFIX f32_tail
#define UPD_AVX2 0
#define UPD_LOOPS_ONLY 1
#include "optim/update_impl.h"

AVX2 void oar_optim_sgd_f32_avx2(void *ctx, int64_t begin, int64_t end) {
    const oar_optim_ctx *c = ctx;
    float *p = c->p, *buf = c->a;
    const float *g = c->g;
    const __m256 lr_neg = bcast(c->lr_neg), wd = bcast(c->wd), mom = bcast(c->k1), damp_c = bcast(c->k1c);
    const bool wd_on = c->wd_on, mom_on = c->flag1, fresh = c->flag2, nesterov = c->flag3;
    int64_t i = begin;
    for (; i + 8 <= end; i += 8) {
        __m256 d = _mm256_loadu_ps(g + i), pi = _mm256_loadu_ps(p + i);
        if (wd_on) d = _mm256_add_ps(d, _mm256_mul_ps(wd, pi));
        if (mom_on) {
            __m256 bi = fresh ? d : _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(buf + i), mom), _mm256_mul_ps(damp_c, d));
            _mm256_storeu_ps(buf + i, bi);
            d = nesterov ? _mm256_add_ps(d, _mm256_mul_ps(mom, bi)) : bi;
        }
        _mm256_storeu_ps(p + i, _mm256_add_ps(pi, _mm256_mul_ps(lr_neg, d)));
    }
    sgd_range_f32_tail(ctx, i, end);
}

AVX2 void oar_optim_adam_f32_avx2(void *ctx, int64_t begin, int64_t end) {
    const oar_optim_ctx *c = ctx;
    float *p = c->p, *m = c->a, *v = c->b, *vmax = c->c;
    const float *g = c->g;
    const __m256 step_neg = bcast(c->lr_neg), wd = bcast(c->wd), b1 = bcast(c->k1), b1c = bcast(c->k1c);
    const __m256 b2 = bcast(c->k2), b2c = bcast(c->k2c), eps = bcast(c->eps), bc2_sqrt = bcast(c->scale);
    const bool l2 = c->wd_on, decoupled = c->flag1, amsgrad = c->flag2;
    int64_t i = begin;
    for (; i + 8 <= end; i += 8) {
        __m256 gi = _mm256_loadu_ps(g + i), pi = _mm256_loadu_ps(p + i);
        if (l2) gi = _mm256_add_ps(gi, _mm256_mul_ps(wd, pi));
        if (decoupled) pi = _mm256_mul_ps(pi, wd);
        __m256 mi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(m + i), b1), _mm256_mul_ps(b1c, gi));
        __m256 vi =
            _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(v + i), b2), _mm256_mul_ps(_mm256_mul_ps(b2c, gi), gi));
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        if (amsgrad) {
            __m256 mx = _mm256_loadu_ps(vmax + i);
            __m256 take = _mm256_or_ps(_mm256_cmp_ps(vi, mx, _CMP_GT_OQ), _mm256_cmp_ps(vi, vi, _CMP_UNORD_Q));
            mx = _mm256_blendv_ps(mx, vi, take);
            _mm256_storeu_ps(vmax + i, mx);
            vi = mx;
        }
        __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), bc2_sqrt), eps);
        _mm256_storeu_ps(p + i, _mm256_add_ps(pi, _mm256_div_ps(_mm256_mul_ps(step_neg, mi), denom)));
    }
    adam_range_f32_tail(ctx, i, end);
}

AVX2 void oar_optim_rmsprop_f32_avx2(void *ctx, int64_t begin, int64_t end) {
    const oar_optim_ctx *c = ctx;
    float *p = c->p, *sq = c->a, *ga = c->b, *buf = c->c;
    const float *g = c->g;
    const __m256 lr_neg = bcast(c->lr_neg), wd = bcast(c->wd), al = bcast(c->k1), alc = bcast(c->k1c);
    const __m256 mom = bcast(c->k2), eps = bcast(c->eps), minus1 = _mm256_set1_ps(-1.0f);
    const bool wd_on = c->wd_on, centered = c->flag1, mom_on = c->flag2;
    int64_t i = begin;
    for (; i + 8 <= end; i += 8) {
        __m256 gi = _mm256_loadu_ps(g + i);
        if (wd_on) gi = _mm256_add_ps(gi, _mm256_mul_ps(wd, _mm256_loadu_ps(p + i)));
        __m256 si =
            _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(sq + i), al), _mm256_mul_ps(_mm256_mul_ps(alc, gi), gi));
        _mm256_storeu_ps(sq + i, si);
        __m256 avg;
        if (centered) {
            __m256 gai = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(ga + i), al), _mm256_mul_ps(alc, gi));
            _mm256_storeu_ps(ga + i, gai);
            avg = _mm256_sqrt_ps(_mm256_add_ps(si, _mm256_mul_ps(_mm256_mul_ps(minus1, gai), gai)));
        } else {
            avg = _mm256_sqrt_ps(si);
        }
        avg = _mm256_add_ps(avg, eps);
        __m256 pi = _mm256_loadu_ps(p + i);
        if (mom_on) {
            __m256 bi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(buf + i), mom), _mm256_div_ps(gi, avg));
            _mm256_storeu_ps(buf + i, bi);
            _mm256_storeu_ps(p + i, _mm256_add_ps(pi, _mm256_mul_ps(lr_neg, bi)));
        } else {
            _mm256_storeu_ps(p + i, _mm256_add_ps(pi, _mm256_div_ps(_mm256_mul_ps(lr_neg, gi), avg)));
        }
    }
    rmsprop_range_f32_tail(ctx, i, end);
}

AVX2 void oar_optim_adagrad_f32_avx2(void *ctx, int64_t begin, int64_t end) {
    const oar_optim_ctx *c = ctx;
    float *p = c->p, *sum = c->a;
    const float *g = c->g;
    const __m256 lr_neg = bcast(c->lr_neg), wd = bcast(c->wd), eps = bcast(c->eps);
    const bool wd_on = c->wd_on;
    int64_t i = begin;
    for (; i + 8 <= end; i += 8) {
        __m256 gi = _mm256_loadu_ps(g + i), pi = _mm256_loadu_ps(p + i);
        if (wd_on) gi = _mm256_add_ps(gi, _mm256_mul_ps(wd, pi));
        __m256 si = _mm256_add_ps(_mm256_loadu_ps(sum + i), _mm256_mul_ps(gi, gi));
        _mm256_storeu_ps(sum + i, si);
        __m256 std = _mm256_add_ps(_mm256_sqrt_ps(si), eps);
        _mm256_storeu_ps(p + i, _mm256_add_ps(pi, _mm256_div_ps(_mm256_mul_ps(lr_neg, gi), std)));
    }
    adagrad_range_f32_tail(ctx, i, end);
}

/* -x exactly (zeros change sign), as the portable loops' unary minus */
AVX2 static inline __m256 negate(__m256 x) { return _mm256_xor_ps(x, _mm256_set1_ps(-0.0f)); }

AVX2 void oar_optim_adadelta_f32_avx2(void *ctx, int64_t begin, int64_t end) {
    const oar_optim_ctx *c = ctx;
    float *p = c->p, *sq = c->a, *acc = c->b;
    const float *g = c->g;
    const __m256 lr_neg = bcast(c->lr_neg), wd = bcast(c->wd), rho = bcast(c->k1), rho_c = bcast(c->k1c);
    const __m256 eps = bcast(c->eps);
    const bool wd_on = c->wd_on, maximize = c->flag1;
    int64_t i = begin;
    for (; i + 8 <= end; i += 8) {
        __m256 gi = _mm256_loadu_ps(g + i), pi = _mm256_loadu_ps(p + i);
        if (maximize) gi = negate(gi);
        if (wd_on) gi = _mm256_add_ps(gi, _mm256_mul_ps(wd, pi));
        __m256 si =
            _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(sq + i), rho), _mm256_mul_ps(_mm256_mul_ps(rho_c, gi), gi));
        _mm256_storeu_ps(sq + i, si);
        __m256 ai = _mm256_loadu_ps(acc + i);
        __m256 delta = _mm256_mul_ps(_mm256_div_ps(_mm256_sqrt_ps(_mm256_add_ps(ai, eps)),
                                                   _mm256_sqrt_ps(_mm256_add_ps(si, eps))), gi);
        __m256 acc_new = _mm256_add_ps(_mm256_mul_ps(ai, rho), _mm256_mul_ps(_mm256_mul_ps(rho_c, delta), delta));
        _mm256_storeu_ps(acc + i, acc_new);
        _mm256_storeu_ps(p + i, _mm256_add_ps(pi, _mm256_mul_ps(lr_neg, delta)));
    }
    adadelta_range_f32_tail(ctx, i, end);
}

AVX2 void oar_optim_nadam_f32_avx2(void *ctx, int64_t begin, int64_t end) {
    const oar_optim_ctx *c = ctx;
    float *p = c->p, *m = c->a, *v = c->b;
    const float *g = c->g;
    const __m256 wd = bcast(c->wd), b1 = bcast(c->k1), b1c = bcast(c->k1c), b2 = bcast(c->k2), b2c = bcast(c->k2c);
    const __m256 bc2 = bcast(c->bc2), eps = bcast(c->eps), cg = bcast(c->lr_neg), cm = bcast(c->extra);
    const bool wd_on = c->wd_on;
    int64_t i = begin;
    for (; i + 8 <= end; i += 8) {
        __m256 gi = _mm256_loadu_ps(g + i), pi = _mm256_loadu_ps(p + i);
        if (wd_on) gi = _mm256_add_ps(gi, _mm256_mul_ps(wd, pi));
        __m256 mi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(m + i), b1), _mm256_mul_ps(b1c, gi));
        __m256 vi =
            _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(v + i), b2), _mm256_mul_ps(_mm256_mul_ps(b2c, gi), gi));
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        __m256 denom = _mm256_add_ps(_mm256_sqrt_ps(_mm256_div_ps(vi, bc2)), eps);
        pi = _mm256_add_ps(pi, _mm256_div_ps(_mm256_mul_ps(cg, gi), denom));
        _mm256_storeu_ps(p + i, _mm256_add_ps(pi, _mm256_div_ps(_mm256_mul_ps(cm, mi), denom)));
    }
    nadam_range_f32_tail(ctx, i, end);
}

AVX2 void oar_optim_radam_f32_avx2(void *ctx, int64_t begin, int64_t end) {
    const oar_optim_ctx *c = ctx;
    float *p = c->p, *m = c->a, *v = c->b;
    const float *g = c->g;
    const __m256 wd = bcast(c->wd), b1 = bcast(c->k1), b1c = bcast(c->k1c), b2 = bcast(c->k2), b2c = bcast(c->k2c);
    const __m256 bc1 = bcast(c->bc1), lr = bcast(c->lr), eps = bcast(c->eps), bc2_sqrt = bcast(c->scale);
    const __m256 rect = bcast(c->extra);
    const bool wd_on = c->wd_on, rectified = c->flag2;
    int64_t i = begin;
    for (; i + 8 <= end; i += 8) {
        __m256 gi = _mm256_loadu_ps(g + i), pi = _mm256_loadu_ps(p + i);
        if (wd_on) gi = _mm256_add_ps(gi, _mm256_mul_ps(wd, pi));
        __m256 mi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(m + i), b1), _mm256_mul_ps(b1c, gi));
        __m256 vi =
            _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(v + i), b2), _mm256_mul_ps(_mm256_mul_ps(b2c, gi), gi));
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        __m256 x = _mm256_mul_ps(_mm256_div_ps(mi, bc1), lr);
        if (rectified) {
            __m256 adaptive = _mm256_div_ps(bc2_sqrt, _mm256_add_ps(_mm256_sqrt_ps(vi), eps));
            x = _mm256_mul_ps(_mm256_mul_ps(x, adaptive), rect);
        }
        _mm256_storeu_ps(p + i, _mm256_sub_ps(pi, x));
    }
    radam_range_f32_tail(ctx, i, end);
}

/* u = (m / bc1) / (sqrt(v / bc2) + eps) + wd p */
AVX2 static inline __m256 lamb_u(__m256 mi, __m256 vi, __m256 pi, __m256 bc1, __m256 bc2, __m256 eps, __m256 wd) {
    __m256 den = _mm256_add_ps(_mm256_sqrt_ps(_mm256_div_ps(vi, bc2)), eps);
    return _mm256_add_ps(_mm256_div_ps(_mm256_div_ps(mi, bc1), den), _mm256_mul_ps(wd, pi));
}

/* Adds x*x (in double) of 8 floats to lanes 0-3 (lo) and 4-7 (hi). */
AVX2 static inline void add_squares(__m256d *lo, __m256d *hi, __m256 x) {
    __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(x)), b = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
    *lo = _mm256_add_pd(*lo, _mm256_mul_pd(a, a));
    *hi = _mm256_add_pd(*hi, _mm256_mul_pd(b, b));
}

AVX2 void oar_optim_lamb_moments_f32_avx2(void *ctx, int64_t block_begin, int64_t block_end) {
    const oar_optim_ctx *c = ctx;
    float *m = c->a, *v = c->b;
    const float *p = c->p, *g = c->g;
    const __m256 b1 = bcast(c->k1), b1c = bcast(c->k1c), b2 = bcast(c->k2), b2c = bcast(c->k2c);
    const __m256 bc1 = bcast(c->bc1), bc2 = bcast(c->bc2), eps = bcast(c->eps), wd = bcast(c->wd);
    const float bc1s = (float)c->bc1, bc2s = (float)c->bc2, epss = (float)c->eps, wds = (float)c->wd;
    const float b1s = (float)c->k1, b1cs = (float)c->k1c, b2s = (float)c->k2, b2cs = (float)c->k2c;
    for (int64_t blk = block_begin; blk < block_end; blk++) {
        int64_t start = blk * c->block, end = start + c->block < c->n ? start + c->block : c->n;
        __m256d p_lo = _mm256_setzero_pd(), p_hi = p_lo, u_lo = p_lo, u_hi = p_lo;
        int64_t i = start;
        for (; i + 8 <= end; i += 8) {
            __m256 gi = _mm256_loadu_ps(g + i), pi = _mm256_loadu_ps(p + i);
            __m256 mi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(m + i), b1), _mm256_mul_ps(b1c, gi));
            __m256 vi =
                _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(v + i), b2), _mm256_mul_ps(_mm256_mul_ps(b2c, gi), gi));
            _mm256_storeu_ps(m + i, mi);
            _mm256_storeu_ps(v + i, vi);
            add_squares(&p_lo, &p_hi, pi);
            add_squares(&u_lo, &u_hi, lamb_u(mi, vi, pi, bc1, bc2, eps, wd));
        }
        double sp[8], su[8];
        _mm256_storeu_pd(sp, p_lo);
        _mm256_storeu_pd(sp + 4, p_hi);
        _mm256_storeu_pd(su, u_lo);
        _mm256_storeu_pd(su + 4, u_hi);
        for (int j = 0; i < end; i++, j++) { /* the tail, in the portable loop's lanes */
            float gi = g[i];
            float mi = m[i] * b1s + b1cs * gi;
            float vi = v[i] * b2s + b2cs * gi * gi;
            m[i] = mi;
            v[i] = vi;
            float u = mi / bc1s / (sqrtf(vi / bc2s) + epss) + wds * p[i];
            sp[j] += (double)p[i] * (double)p[i];
            su[j] += (double)u * (double)u;
        }
        c->sum_p2[blk] = oar_optim_sum8(sp);
        c->sum_u2[blk] = oar_optim_sum8(su);
    }
}

AVX2 void oar_optim_lamb_apply_f32_avx2(void *ctx, int64_t begin, int64_t end) {
    const oar_optim_ctx *c = ctx;
    float *p = c->p;
    const float *m = c->a, *v = c->b;
    const __m256 bc1 = bcast(c->bc1), bc2 = bcast(c->bc2), eps = bcast(c->eps), wd = bcast(c->wd);
    const __m256 step = bcast(c->lr_neg);
    int64_t i = begin;
    for (; i + 8 <= end; i += 8) {
        __m256 pi = _mm256_loadu_ps(p + i);
        __m256 u = lamb_u(_mm256_loadu_ps(m + i), _mm256_loadu_ps(v + i), pi, bc1, bc2, eps, wd);
        _mm256_storeu_ps(p + i, _mm256_add_ps(pi, _mm256_mul_ps(step, u)));
    }
    lamb_apply_range_f32_tail(ctx, i, end);
}

#endif
