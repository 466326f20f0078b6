/* qconv2d's epilogue on 8 int32 sums of one output channel, in AVX2 form: the scalar epilogue
 * of src/ops/quant.h with the same roundings (cvtepi32_ps, one fused multiply-add as fmaf,
 * max/min with the NaN order of oar_qmaxf/oar_qminf, cvtps_epi32 rounding half to even as
 * nearbyintf), so qconv_dnnl.c on CPUs without AVX-512 equals the reference bit for bit.
 * Include only from code compiled for AVX2 (OAR_QEPI2_TARGET). */
#ifndef OAR_KERNELS_CPU_QEPILOGUE_AVX2_H
#define OAR_KERNELS_CPU_QEPILOGUE_AVX2_H

#include "kernels/cpu/qquotient.h"
#include "ops/quant.h"

#include <immintrin.h>
#include <string.h>

#define OAR_QEPI2_TARGET __attribute__((target("avx2,fma")))

/* The low byte of each of q's 8 lanes (values within a byte's range): 8 bytes in the low half. */
OAR_QEPI2_TARGET static inline __attribute__((always_inline)) __m128i oar_qbytes8(__m256i q) {
    /* 4 bytes per 128-bit half */
    const __m256i low = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1,
                                         -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    q = _mm256_shuffle_epi8(q, low);
    return _mm_unpacklo_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
}

/* v requantized with e's y_scale and zero point: the 8 bytes in the low half of the result. */
OAR_QEPI2_TARGET static inline __attribute__((always_inline)) __m128i oar_qrequant8(const oar_qepilogue *e, __m256 v) {
    __m256 t = _mm256_mul_ps(v, _mm256_set1_ps(e->inv_y));
    t = _mm256_max_ps(t, _mm256_set1_ps((float)(e->qmin - e->y_zp)));
    t = _mm256_min_ps(t, _mm256_set1_ps((float)(e->qmax - e->y_zp)));
    return oar_qbytes8(_mm256_add_epi32(_mm256_cvtps_epi32(t), _mm256_set1_epi32(e->y_zp)));
}

/* acc - sub (the zero points' correction, wrapping) for channel ch: the n (1..8) outputs from
 * index i0 of out, the residual res (NULL: none) read from i0. */
OAR_QEPI2_TARGET static inline __attribute__((always_inline)) void
oar_qepilogue8(const oar_qepilogue *e, __m256i acc, int32_t sub, int64_t ch, const float *res, void *out, int64_t i0,
               int n) {
    acc = _mm256_sub_epi32(acc, _mm256_set1_epi32(sub));
    __m256 v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), _mm256_set1_ps(e->comb[ch]),
                               _mm256_set1_ps(e->bias ? e->bias[ch] : 0.0f));
    if (res && n == 8) {
        v = _mm256_add_ps(v, _mm256_loadu_ps(res + i0));
    } else if (res) {
        float r[8] = {0};
        memcpy(r, res + i0, sizeof(float) * (size_t)n);
        v = _mm256_add_ps(v, _mm256_loadu_ps(r));
    }
    if (e->act == OAR_QACT_RELU) v = _mm256_max_ps(v, _mm256_setzero_ps());
    if (e->out_dtype == OAR_F32) {
        if (n == 8) {
            _mm256_storeu_ps((float *)out + i0, v);
        } else {
            float r[8];
            _mm256_storeu_ps(r, v);
            memcpy((float *)out + i0, r, sizeof(float) * (size_t)n);
        }
        return;
    }
    __m128i b = oar_qrequant8(e, v);
    if (n == 8) {
        _mm_storel_epi64((__m128i *)((uint8_t *)out + i0), b);
        return;
    }
    uint8_t bytes[16];
    _mm_storeu_si128((__m128i *)bytes, b);
    memcpy((uint8_t *)out + i0, bytes, (size_t)n);
}

/* r[i] = row i of an 8 x 8 int32 tile -> r[c] = column c. */
OAR_QEPI2_TARGET static inline __attribute__((always_inline)) void oar_transpose8(__m256i r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(_mm256_castsi256_ps(r[i]), _mm256_castsi256_ps(r[i + 1]));
        t[i + 1] = _mm256_unpackhi_ps(_mm256_castsi256_ps(r[i]), _mm256_castsi256_ps(r[i + 1]));
    }
    for (int i = 0; i < 8; i += 4) { /* half h of u[i + j]: column 4h + j of rows i..i+3 */
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44), u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44), u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int j = 0; j < 4; j++) {
        r[j] = _mm256_castps_si256(_mm256_permute2f128_ps(u[j], u[4 + j], 0x20));
        r[4 + j] = _mm256_castps_si256(_mm256_permute2f128_ps(u[j], u[4 + j], 0x31));
    }
}

/* The same on NHWC sums (qconv2d_nhwc): n (1..8) consecutive output channels (lanes m) of each of
 * rows positions (acc's rows ld int32 apart); sub, comb and bias are those channels' corrections,
 * scales and biases. Output element i0 + r * ld of out (and of the residual res) for row r; the
 * flags are constants at each call (one loop per combination); full: n == 8, no masked access. */
OAR_QEPI2_TARGET static inline __attribute__((always_inline)) void
oar_qepilogue8_rows(const oar_qepilogue *e, const int32_t *acc, int64_t rows, int64_t ld, int n, __m256i m,
                    __m256i sub, __m256 comb, __m256 bias, const float *res, void *out, int64_t i0, bool has_res,
                    bool relu, bool f32, bool full) {
    for (int64_t r = 0; r < rows; r++) {
        int64_t i = i0 + r * ld;
        __m256i a = _mm256_sub_epi32(
            full ? _mm256_loadu_si256((const __m256i *)(acc + r * ld)) : _mm256_maskload_epi32(acc + r * ld, m), sub);
        __m256 v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a), comb, bias);
        if (has_res) v = _mm256_add_ps(v, full ? _mm256_loadu_ps(res + i) : _mm256_maskload_ps(res + i, m));
        if (relu) v = _mm256_max_ps(v, _mm256_setzero_ps());
        if (f32) {
            if (full) _mm256_storeu_ps((float *)out + i, v);
            else _mm256_maskstore_ps((float *)out + i, m, v);
            continue;
        }
        __m128i b = oar_qrequant8(e, v);
        if (n == 8) {
            _mm_storel_epi64((__m128i *)((uint8_t *)out + i), b);
        } else {
            uint8_t bytes[16];
            _mm_storeu_si128((__m128i *)bytes, b);
            memcpy((uint8_t *)out + i, bytes, (size_t)n);
        }
    }
}

/* The same with an int8 residual (e->qr, qconv2d_nhwc's fused qadd): each value rounded to the
 * conv's codes, then qadd's operations on them and the residual's codes res (read, like out, at
 * i0 + r * ld, n bytes), written as codes. relu, r_signed and fast are e->qr's, constants at each
 * call; full: n == 8, no masked access. */
OAR_QEPI2_TARGET static inline __attribute__((always_inline)) void
oar_qres8_rows(const oar_qepilogue *e, const int32_t *acc, int64_t rows, int64_t ld, int n, __m256i m, __m256i sub,
               __m256 comb, __m256 bias, const uint8_t *res, uint8_t *out, int64_t i0, bool relu, bool r_signed,
               bool fast, bool full) {
    const oar_qres *q = &e->qr;
    const __m256 inv = _mm256_set1_ps(e->inv_y), lo = _mm256_set1_ps((float)(e->qmin - e->y_zp));
    const __m256 hi = _mm256_set1_ps((float)(e->qmax - e->y_zp)), ys = _mm256_set1_ps(q->ys);
    const __m256 rs = _mm256_set1_ps(q->rs), os = _mm256_set1_ps(q->os), inv_o = _mm256_set1_ps(q->inv_o);
    const __m256 olo = _mm256_set1_ps(q->lo), ohi = _mm256_set1_ps(q->hi);
    const __m256i rzp = _mm256_set1_epi32(q->rzp), ozp = _mm256_set1_epi32(q->ozp);
    for (int64_t r = 0; r < rows; r++) {
        int64_t i = i0 + r * ld;
        __m256i a = _mm256_sub_epi32(
            full ? _mm256_loadu_si256((const __m256i *)(acc + r * ld)) : _mm256_maskload_epi32(acc + r * ld, m), sub);
        __m256 v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a), comb, bias);
        __m256 t = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v, inv), lo), hi);
        __m256 va = _mm256_mul_ps(_mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), ys); /* (code - y_zp) y_scale */
        __m128i rb;
        if (n == 8) {
            rb = _mm_loadl_epi64((const __m128i *)(res + i));
        } else {
            uint8_t bytes[16] = {0};
            memcpy(bytes, res + i, (size_t)n);
            rb = _mm_loadu_si128((const __m128i *)bytes);
        }
        __m256i ri = r_signed ? _mm256_cvtepi8_epi32(rb) : _mm256_cvtepu8_epi32(rb);
        __m256 s = _mm256_add_ps(va, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(ri, rzp)), rs));
        if (relu) s = _mm256_max_ps(s, _mm256_setzero_ps());
        __m256 u = oar_qclampdiv8(s, os, inv_o, olo, ohi, fast);
        __m128i b = oar_qbytes8(_mm256_add_epi32(_mm256_cvtps_epi32(u), ozp));
        if (n == 8) {
            _mm_storel_epi64((__m128i *)(out + i), b);
        } else {
            uint8_t bytes[16];
            _mm_storeu_si128((__m128i *)bytes, b);
            memcpy(out + i, bytes, (size_t)n);
        }
    }
}

#endif
