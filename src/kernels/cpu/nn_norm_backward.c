/* AVX2/FMA layer_norm_backward and batch_norm_backward in f32. layer_norm_backward: one pass per row over grad_out, x and weight that
 * accumulates the row's two sums (kept in double) and the dweight/dbias partial sums, then a
 * second pass over the same row, still in L1, that writes dx. Rows are split into a fixed
 * number of parts (independent of the thread count, so results do not depend on it); each part
 * has its own dweight/dbias partials, summed in part order at the end. With a sixth input
 * (layer_norm_backward_add) the residual gradient is added to each dx as it is written.
 * batch_norm_backward and batch_norm_act_backward also take bf16/f16 activations and gradients
 * with f32 weight and statistics (converted in registers, nn_half.h); layer_norm_backward
 * takes them a row at a time through f32 buffers (lnb_parts). */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/nn_half.h"
#include "kernels/cpu/nn_half512.h"
#include "kernels/cpu/nn_kernels.h"

#include <stdlib.h>
#include <string.h>

#ifdef OAR_NN_SIMD

#define LN_PARTS 8
#define F32(t) ((const float *)oar_tensor_ptr(t))

typedef struct lnb_job {
    const void *g, *x; /* of dtype dt, as dx and res */
    const float *w, *mean, *rstd;
    const void *res; /* layer_norm_backward_add: the residual gradient added to dx; else NULL */
    void *dx;
    float *part_w, *part_b; /* part_*: LN_PARTS rows of m partial sums */
    int64_t rows, m, parts;
    oar_dtype dt;
} lnb_job;

/* One row of f32 g, x (and res) into dx, mean and rstd the row's. */
static NN_AVX2 void lnb_row(const lnb_job *j, const float *g, const float *x, const float *res, float *dx, float mean,
                            float rstd, float *pw, float *pb) {
    const int64_t m = j->m, full = m & ~(int64_t)7, rest = m - full;
    const __m256i tail = nn_tail_mask(rest);
    const __m256 vmean = _mm256_set1_ps(mean), vrstd = _mm256_set1_ps(rstd), one = _mm256_set1_ps(1.0f);
    nn_dacc s1 = nn_dacc_zero(), s2 = nn_dacc_zero();
    for (int64_t i = 0; i < m; i += 8) {
        bool last = i == full;
        __m256 gv = last ? nn_load_tail(g + i, tail, 0.0f) : _mm256_loadu_ps(g + i);
        __m256 xv = last ? nn_load_tail(x + i, tail, 0.0f) : _mm256_loadu_ps(x + i);
        __m256 wv = !j->w ? one : last ? nn_load_tail(j->w + i, tail, 0.0f) : _mm256_loadu_ps(j->w + i);
        __m256 xh = _mm256_mul_ps(_mm256_sub_ps(xv, vmean), vrstd), gx = _mm256_mul_ps(gv, wv);
        if (last) xh = _mm256_and_ps(xh, _mm256_castsi256_ps(tail));
        nn_dacc_add(&s1, gx);
        nn_dacc_add(&s2, _mm256_mul_ps(gx, xh));
        if (last) {
            _mm256_maskstore_ps(pw + i, tail, _mm256_fmadd_ps(gv, xh, _mm256_maskload_ps(pw + i, tail)));
            _mm256_maskstore_ps(pb + i, tail, _mm256_add_ps(gv, _mm256_maskload_ps(pb + i, tail)));
        } else {
            _mm256_storeu_ps(pw + i, _mm256_fmadd_ps(gv, xh, _mm256_loadu_ps(pw + i)));
            _mm256_storeu_ps(pb + i, _mm256_add_ps(gv, _mm256_loadu_ps(pb + i)));
        }
        if (last && !rest) break;
    }
    const __m256 m1 = _mm256_set1_ps((float)(nn_dacc_sum(s1) / (double)m));
    const __m256 m2 = _mm256_set1_ps((float)(nn_dacc_sum(s2) / (double)m));
    for (int64_t i = 0; i < m; i += 8) {
        bool last = i == full;
        if (last && !rest) break;
        __m256 gv = last ? nn_load_tail(g + i, tail, 0.0f) : _mm256_loadu_ps(g + i);
        __m256 xv = last ? nn_load_tail(x + i, tail, 0.0f) : _mm256_loadu_ps(x + i);
        __m256 wv = !j->w ? one : last ? nn_load_tail(j->w + i, tail, 0.0f) : _mm256_loadu_ps(j->w + i);
        __m256 xh = _mm256_mul_ps(_mm256_sub_ps(xv, vmean), vrstd), gx = _mm256_mul_ps(gv, wv);
        __m256 d = _mm256_mul_ps(vrstd, _mm256_fnmadd_ps(xh, m2, _mm256_sub_ps(gx, m1)));
        if (res) d = _mm256_add_ps(d, last ? nn_load_tail(res + i, tail, 0.0f) : _mm256_loadu_ps(res + i));
        if (last) _mm256_maskstore_ps(dx + i, tail, d);
        else _mm256_storeu_ps(dx + i, d);
    }
}

/* layer_norm_backward_add's dx on a low kind k: d (f32) rounded as layer_norm_backward stores dx,
 * then the add's one f32 addition of the two low values, rounded (the avx2-half add's bits) */
NN_HINL void lnb_add_res_k(const float *d, const uint16_t *res, uint16_t *dx, int64_t n, const int k) {
    const int64_t full = n & ~(int64_t)7, rest = n - full;
    for (int64_t i = 0; i < full; i += 8)
        nn_st(dx, i, _mm256_add_ps(nn_round(_mm256_loadu_ps(d + i), k), nn_ld(res, i, k)), k);
    if (rest) {
        const __m256i tail = nn_tail_mask(rest);
        __m256 v = _mm256_add_ps(nn_round(_mm256_maskload_ps(d + full, tail), k), nn_ld_tail(res, full, rest, tail, 0.0f, k));
        nn_st_tail(dx, full, rest, tail, v, k);
    }
}

static NN_AVX2H void lnb_add_res(oar_dtype dt, const float *d, const uint16_t *res, uint16_t *dx, int64_t n) {
    if (dt == OAR_BF16) lnb_add_res_k(d, res, dx, n, NN_BF16);
    else lnb_add_res_k(d, res, dx, n, NN_F16);
}

/* Rows of a bf16/f16 dtype are widened into f32 buffers on the stack (the `cast` kernel's
 * conversions), go through the f32 row and dx is rounded out: the bits of via-f32 (same parts,
 * same partial sums) without its f32 copies of g, x and dx. A residual is added after dx is
 * rounded, as the unfused layer_norm_backward and add round twice. */
static void lnb_parts(void *ctx, int64_t begin, int64_t end) {
    const lnb_job *j = ctx;
    const int64_t m = j->m;
    const bool half = j->dt != OAR_F32;
    float gb[half ? OAR_NN_LN_HALF_MAX : 1], xb[half ? OAR_NN_LN_HALF_MAX : 1], db[half ? OAR_NN_LN_HALF_MAX : 1];
    for (int64_t p = begin; p < end; p++) {
        float *pw = j->part_w + p * m, *pb = j->part_b + p * m;
        memset(pw, 0, sizeof(float) * (size_t)m);
        memset(pb, 0, sizeof(float) * (size_t)m);
        for (int64_t r = p * j->rows / j->parts, e = (p + 1) * j->rows / j->parts; r < e; r++) {
            if (!half) {
                lnb_row(j, (const float *)j->g + r * m, (const float *)j->x + r * m,
                        j->res ? (const float *)j->res + r * m : NULL, (float *)j->dx + r * m, j->mean[r], j->rstd[r],
                        pw, pb);
                continue;
            }
            uint16_t *dx = (uint16_t *)j->dx + r * m;
            oar_cpu_half_to_f32(gb, (const uint16_t *)j->g + r * m, m, j->dt);
            oar_cpu_half_to_f32(xb, (const uint16_t *)j->x + r * m, m, j->dt);
            lnb_row(j, gb, xb, NULL, db, j->mean[r], j->rstd[r], pw, pb);
            if (j->res) lnb_add_res(j->dt, db, (const uint16_t *)j->res + r * m, dx, m);
            else oar_cpu_f32_to_half(dx, db, m, j->dt);
        }
    }
}

oar_status oar_nn_layer_norm_backward_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                          oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)ctx; (void)n_out;
    const oar_tensor *x = in[1];
    int k = (int)a[0].i;
    int64_t m = 1;
    for (int d = x->ndim - k; d < x->ndim; d++) m *= x->shape[d];
    int64_t rows = m ? x->numel / m : 0, parts = rows < LN_PARTS ? rows : LN_PARTS;
    float *dw = (float *)oar_tensor_ptr(out[1]), *db = (float *)oar_tensor_ptr(out[2]);
    if (parts == 0) {
        memset(dw, 0, sizeof(float) * (size_t)m);
        memset(db, 0, sizeof(float) * (size_t)m);
        return OAR_OK;
    }
    float *part = malloc(sizeof(float) * (size_t)(2 * parts * m));
    if (!part) return oar_error(OAR_ERR_OOM, "layer_norm_backward: out of memory");
    lnb_job j = {oar_tensor_ptr(in[0]), oar_tensor_ptr(x), in[2] ? F32(in[2]) : NULL, F32(in[3]), F32(in[4]),
                 n_in > 5 ? oar_tensor_ptr(in[5]) : NULL, oar_tensor_ptr(out[0]),
                 part, part + parts * m, rows, m, parts, x->dtype};
    oar_parallel_for(parts, 1, lnb_parts, &j);
    for (int64_t i = 0; i < m; i++) { /* parts in order: the same sums whatever the threads */
        double sw = 0, sb = 0;
        for (int64_t p = 0; p < parts; p++) {
            sw += j.part_w[p * m + i];
            sb += j.part_b[p * m + i];
        }
        dw[i] = (float)sw;
        db[i] = (float)sb;
    }
    free(part);
    return OAR_OK;
}

/* ---- batch_norm_backward over [N, C, S]: each channel is N planes of S contiguous values.
 * One pass over a channel's grad_out and x accumulates sum(g) and sum(g * xhat), a second
 * pass writes dx (bnb_channel has the arithmetic). Channels are independent, so splitting them over threads changes no
 * sum. With relu_y set (batch_norm_act_backward), g is first masked to relu_y > 0 ? g : 0, an
 * exact select like relu_backward's, and g_out (when set) receives the masked g. */
typedef struct bnb_job {
    const void *g, *x, *relu_y; /* of kind k (nn_half.h), as dx and g_out */
    const float *w, *mean, *rstd;
    void *dx, *g_out;
    float *dw, *db;
    int64_t n, c, s;
    int k;
    bool x512; /* bf16/f16 dx 16 values at a time (the avx512 cap) */
} bnb_job;

NN_HINL __m256 bnb_grad(const bnb_job *j, int64_t at, bool last, int64_t rest, __m256i tail, const int k) {
    __m256 gv = last ? nn_ld_tail(j->g, at, rest, tail, 0.0f, k) : nn_ld(j->g, at, k);
    if (j->relu_y) {
        __m256 yv = last ? nn_ld_tail(j->relu_y, at, rest, tail, 0.0f, k) : nn_ld(j->relu_y, at, k);
        gv = _mm256_and_ps(gv, _mm256_cmp_ps(yv, _mm256_setzero_ps(), _CMP_GT_OQ));
    }
    return gv;
}

/* pass 2 of bnb_channel 16 values at a time over one plane's full 16s (bf16/f16): the same
 * operations per value; returns the first element left to the 8-lane loop */
NN_X512INL int64_t bnb_dx16_k(const bnb_job *j, const void *g2, int64_t base, const float *mabc, const int k) {
    const int64_t full = j->s & ~(int64_t)15;
    const __m512 vm = _mm512_set1_ps(mabc[0]), a = _mm512_set1_ps(mabc[1]), b = _mm512_set1_ps(mabc[2]),
                 c = _mm512_set1_ps(mabc[3]);
    for (int64_t e = 0; e < full; e += 16) {
        __m512 xc = _mm512_sub_ps(nn16_ld(j->x, base + e, k), vm);
        nn16_st(j->dx, base + e, _mm512_fmadd_ps(nn16_ld(g2, base + e, k), a, _mm512_fmadd_ps(xc, b, c)), k);
    }
    return full;
}

/* mabc: mean and pass 2's a, b, c */
static NN_X512 int64_t bnb_dx16(const bnb_job *j, const void *g2, int64_t base, const float *mabc) {
    return j->k == NN_BF16 ? bnb_dx16_k(j, g2, base, mabc, NN_BF16) : bnb_dx16_k(j, g2, base, mabc, NN_F16);
}

/* pass 1 of bnb_channel 16 values at a time from element e while a full 16 fits below lim:
 * the same loads, mask and masked-g store, and the float sums fed the two 8-value halves in
 * order, so they add what the 8-lane loop adds in its order; returns the next element */
NN_X512INL int64_t bnb_sums16_k(const bnb_job *j, void *gbuf, int64_t base, int64_t e, int64_t lim, float mean,
                                __m256 *fb, __m256 *fw, const int k) {
    const __m512 vm = _mm512_set1_ps(mean);
    __m256 b = *fb, w = *fw;
    for (; e + 16 <= lim; e += 16) {
        __m512 gv = nn16_ld(j->g, base + e, k);
        if (j->relu_y) gv = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(nn16_ld(j->relu_y, base + e, k), _mm512_setzero_ps(),
                                                                   _CMP_GT_OQ), gv);
        __m512 xc = _mm512_sub_ps(nn16_ld(j->x, base + e, k), vm);
        __m256 g0 = _mm512_castps512_ps256(gv), x0 = _mm512_castps512_ps256(xc);
        __m256 g1 = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(gv), 1));
        __m256 x1 = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(xc), 1));
        b = _mm256_add_ps(b, g0);
        w = _mm256_fmadd_ps(g0, x0, w);
        b = _mm256_add_ps(b, g1);
        w = _mm256_fmadd_ps(g1, x1, w);
        if (gbuf) nn16_st_exact(gbuf, base + e, gv, k);
    }
    *fb = b;
    *fw = w;
    return e;
}

static NN_X512 int64_t bnb_sums16(const bnb_job *j, void *gbuf, int64_t base, int64_t e, int64_t lim, float mean,
                                  __m256 *fb, __m256 *fw) {
    return j->k == NN_BF16 ? bnb_sums16_k(j, gbuf, base, e, lim, mean, fb, fw, NN_BF16)
                           : bnb_sums16_k(j, gbuf, base, e, lim, mean, fb, fw, NN_F16);
}

#define BNB_CHUNK 128 /* values summed in float before each double accumulation */

/* Pass 1 sums g and g * (x - mean) (rstd is applied to the sum), in float over runs of
 * BNB_CHUNK values and in double across them. Pass 2 writes
 *   dx = rstd * (w g - m1 - xhat m2) = g * a + ((x - mean) * b + c)
 * with a = w rstd, b = -rstd^2 m2, c = -rstd m1 (m1 = w sum(g) / cnt, m2 = w sum(g xhat) / cnt)
 * formed in double: a subtraction and two fused multiply-adds per vector. bf16/f16 tensors are
 * widened in registers and dx rounded once at the store: the bits of the f32 kernel on widened
 * copies (the masked g is a low value already, so keeping it in the low dtype loses nothing). */
NN_HINL void bnb_channel(const bnb_job *j, int64_t ch, const int k) {
    const int64_t s = j->s, full = s & ~(int64_t)7, rest = s - full, rl = rest ? rest : 8;
    const __m256i tail = nn_tail_mask(rl);
    const float mean = j->mean[ch];
    const __m256 vmean = _mm256_set1_ps(mean);
    /* with a mask, pass 1 keeps the masked g (in g_out, else in dx, which pass 2 overwrites
     * value by value after reading it), so pass 2 reads one stream instead of two */
    void *gbuf = j->relu_y ? (j->g_out ? j->g_out : j->dx) : NULL;
    const void *g2 = gbuf ? gbuf : j->g;
    nn_dacc sb = nn_dacc_zero(), sw = nn_dacc_zero();
    for (int64_t i = 0; i < j->n; i++) {
        const int64_t base = (i * j->c + ch) * s;
        for (int64_t k0 = 0; k0 < s; k0 += BNB_CHUNK) {
            const int64_t k1 = k0 + BNB_CHUNK < s ? k0 + BNB_CHUNK : s;
            __m256 fb = _mm256_setzero_ps(), fw = _mm256_setzero_ps();
            int64_t e = k0;
            if (j->x512) e = bnb_sums16(j, gbuf, base, k0, k1 < full ? k1 : full, mean, &fb, &fw);
            for (; e < k1; e += 8) {
                bool last = e == full;
                __m256 gv = bnb_grad(j, base + e, last, rl, tail, k); /* tail lanes are 0: they add nothing */
                __m256 xc = _mm256_sub_ps(last ? nn_ld_tail(j->x, base + e, rl, tail, mean, k)
                                               : nn_ld(j->x, base + e, k), vmean);
                fb = _mm256_add_ps(fb, gv);
                fw = _mm256_fmadd_ps(gv, xc, fw);
                if (gbuf) { /* g's own values, masked: exact in its kind */
                    if (last) nn_st_tail_exact(gbuf, base + e, rl, tail, gv, k);
                    else nn_st_exact(gbuf, base + e, gv, k);
                }
            }
            nn_dacc_add(&sb, fb);
            nn_dacc_add(&sw, fw);
        }
    }
    const double cnt = (double)(j->n * s), wv = j->w ? j->w[ch] : 1.0, rstd = j->rstd[ch];
    const double b = nn_dacc_sum(sb), w = nn_dacc_sum(sw) * rstd;
    j->db[ch] = (float)b;
    j->dw[ch] = (float)w;
    const double m1 = cnt > 0 ? wv * b / cnt : 0.0, m2 = cnt > 0 ? wv * w / cnt : 0.0;
    const float mabc[4] = {mean, (float)(wv * rstd), (float)(-rstd * rstd * m2), (float)(-rstd * m1)};
    const __m256 va = _mm256_set1_ps(mabc[1]), vb = _mm256_set1_ps(mabc[2]), vc = _mm256_set1_ps(mabc[3]);
    for (int64_t i = 0; i < j->n; i++) {
        const int64_t base = (i * j->c + ch) * s;
        const int64_t from = j->x512 ? bnb_dx16(j, g2, base, mabc) : 0;
        for (int64_t e = from; e < s; e += 8) {
            bool last = e == full;
            __m256 gv = last ? nn_ld_tail(g2, base + e, rl, tail, 0.0f, k) : nn_ld(g2, base + e, k);
            __m256 xc = _mm256_sub_ps(last ? nn_ld_tail(j->x, base + e, rl, tail, mean, k) : nn_ld(j->x, base + e, k),
                                      vmean);
            __m256 d = _mm256_fmadd_ps(gv, va, _mm256_fmadd_ps(xc, vb, vc));
            if (last) nn_st_tail(j->dx, base + e, rl, tail, d, k);
            else nn_st(j->dx, base + e, d, k);
        }
    }
}

/* one copy of the channel loop per kind, each with its conversions inlined */
static NN_AVX2H void bnb_channels(void *ctx, int64_t begin, int64_t end) {
    const bnb_job *j = ctx;
    for (int64_t ch = begin; ch < end; ch++) {
        if (j->k == NN_BF16) bnb_channel(j, ch, NN_BF16);
        else if (j->k == NN_F16) bnb_channel(j, ch, NN_F16);
        else bnb_channel(j, ch, NN_F32);
    }
}

/* batch_norm_backward(grad_out, x, weight, mean, rstd) and, with y (relu_y), batch_norm_act_backward;
 * g_out: batch_norm_act_backward's masked output or NULL. */
static void bnb_run(oar_tensor *const *in, oar_tensor *const *out, const oar_tensor *relu_y, void *g_out) {
    const oar_tensor *x = in[1];
    int64_t s = 1;
    for (int d = 2; d < x->ndim; d++) s *= x->shape[d];
    bnb_job j = {oar_tensor_ptr(in[0]), oar_tensor_ptr(x), relu_y ? oar_tensor_ptr(relu_y) : NULL,
                 in[2] ? F32(in[2]) : NULL, F32(in[3]), F32(in[4]), oar_tensor_ptr(out[0]), g_out,
                 (float *)oar_tensor_ptr(out[1]), (float *)oar_tensor_ptr(out[2]), x->shape[0], x->shape[1], s,
                 nn_kind(x->dtype), nn_kind(x->dtype) != NN_F32 && oar_cpu_has_avx512()};
    int64_t cnt = j.n * s;
    oar_parallel_for(j.c, 16384 / (cnt ? cnt : 1) + 1, bnb_channels, &j);
}

static oar_status batch_norm_backward_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                           oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out; (void)a;
    bnb_run(in, out, NULL, NULL);
    return OAR_OK;
}

/* batch_norm_act_backward(grad_out, x, weight, mean, rstd, y; masked_out) */
static oar_status batch_norm_act_backward_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                               oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    bnb_run(in, out, in[5], a[0].i ? oar_tensor_ptr(out[3]) : NULL);
    return OAR_OK;
}

/* The backward ops on bf16/f16 grad_out, x (and y) with f32 weight, mean and rstd: dense
 * tensors, grad_out and y of x's dtype. */
static bool bnb_half_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_out; (void)a;
    const int k = nn_kind(in[1]->dtype);
    if (!oar_cpu_has_avx2() || k == NN_F32 || k < 0 || !oar_nn_half_ok(in[1], k) || !oar_nn_half_ok(in[0], k) ||
        out[0]->dtype != in[1]->dtype)
        return false;
    for (int i = 2; i < 5; i++)
        if (in[i] && (in[i]->dtype != OAR_F32 || !in[i]->contiguous)) return false;
    return n_in < 6 || oar_nn_half_ok(in[5], k);
}

/* layer_norm_backward (and _add) on bf16/f16 grad_out and x (and residual, dx) with f32 weight,
 * mean and rstd, dense, rows of at most OAR_NN_LN_HALF_MAX values */
static bool lnb_half_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_out;
    const int k = nn_kind(in[1]->dtype);
    if (!oar_cpu_has_avx2() || k == NN_F32 || k < 0 || !oar_nn_half_ok(in[1], k) || !oar_nn_half_ok(in[0], k) ||
        !oar_nn_half_ok(out[0], k) || out[1]->dtype != OAR_F32 || out[2]->dtype != OAR_F32)
        return false;
    for (int i = 2; i < 5; i++)
        if (in[i] && (in[i]->dtype != OAR_F32 || !in[i]->contiguous)) return false;
    if (!in[3] || !in[4] || (n_in > 5 && (!in[5] || !oar_nn_half_ok(in[5], k)))) return false;
    int64_t m = 1;
    for (int d = in[1]->ndim - (int)a[0].i; d < in[1]->ndim; d++) m *= in[1]->shape[d];
    return m <= OAR_NN_LN_HALF_MAX;
}

#endif

void oar_cpu_register_norm_backward(void) {
#ifdef OAR_NN_SIMD
    oar_kernel_entry e = {.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32), .impl = "avx2", .priority = 10,
                          .fn = oar_nn_layer_norm_backward_avx2, .supports = oar_nn_dense_f32_ok};
    oar_register_kernel(OAR_OP_layer_norm_backward, e);
    e.fn = batch_norm_backward_avx2;
    oar_register_kernel(OAR_OP_batch_norm_backward, e);
    e.fn = batch_norm_act_backward_avx2;
    oar_register_kernel(OAR_OP_batch_norm_act_backward, e);
    /* bf16/f16 activations and gradients with f32 weight and statistics (autocast's mixed norms) */
    e.impl = OAR_IMPL_HALF_MIXED;
    e.dtypes = OAR_DTYPE_BIT(OAR_BF16) | OAR_DTYPE_BIT(OAR_F16);
    e.supports = bnb_half_ok;
    e.fn = batch_norm_backward_avx2;
    oar_register_kernel(OAR_OP_batch_norm_backward, e);
    e.fn = batch_norm_act_backward_avx2;
    oar_register_kernel(OAR_OP_batch_norm_act_backward, e);
    e.fn = oar_nn_layer_norm_backward_avx2;
    e.supports = lnb_half_ok;
    oar_register_kernel(OAR_OP_layer_norm_backward, e);
    oar_register_kernel(OAR_OP_layer_norm_backward_add, e); /* its sixth input: the residual */
#endif
}
