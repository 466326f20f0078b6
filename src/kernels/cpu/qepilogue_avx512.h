/* qconv2d's epilogue on 16 int32 sums of one output channel, in AVX-512 form: the scalar
 * epilogue of src/ops/quant.h with the same roundings (cvtepi32_ps, a fused multiply-add as
 * fmaf, max/min with the NaN order of oar_qmaxf/oar_qminf, cvtps_epi32 rounding half to even
 * as nearbyintf), so the kernels that use it (qconv_vnni.c, qconv_dnnl.c) equal the reference
 * bit for bit. Include only from code compiled for AVX-512 (OAR_QEPI_TARGET). */
#ifndef OAR_KERNELS_CPU_QEPILOGUE_AVX512_H
#define OAR_KERNELS_CPU_QEPILOGUE_AVX512_H

#include "kernels/cpu/qquotient.h"
#include "ops/quant.h"

#include <immintrin.h>
#include <stdbool.h>

#define OAR_QEPI_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni,avx512vl,fma")))

/* acc - sub (the zero points' correction, wrapping) for channel ch, lanes m the real outputs:
 * compressed into consecutive elements of out from index i0, the residual res (NULL: none)
 * read from i0 likewise. dense (a constant): m is a run of low lanes, so plain masked loads and
 * stores do (compress and expand cost several cycles each). */
OAR_QEPI_TARGET static inline __attribute__((always_inline)) void
oar_qepilogue16(const oar_qepilogue *e, __m512i acc, int32_t sub, int64_t ch, const float *res, void *out, int64_t i0,
                __mmask16 m, bool dense) {
    acc = _mm512_sub_epi32(acc, _mm512_set1_epi32(sub));
    __m512 v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_set1_ps(e->comb[ch]),
                               _mm512_set1_ps(e->bias ? e->bias[ch] : 0.0f));
    if (res) v = _mm512_add_ps(v, dense ? _mm512_maskz_loadu_ps(m, res + i0) : _mm512_maskz_expandloadu_ps(m, res + i0));
    if (e->act == OAR_QACT_RELU) v = _mm512_max_ps(v, _mm512_setzero_ps());
    if (e->out_dtype == OAR_F32) {
        if (dense) _mm512_mask_storeu_ps((float *)out + i0, m, v);
        else _mm512_mask_compressstoreu_ps((float *)out + i0, m, v);
        return;
    }
    __m512 t = _mm512_mul_ps(v, _mm512_set1_ps(e->inv_y));
    t = _mm512_max_ps(t, _mm512_set1_ps((float)(e->qmin - e->y_zp)));
    t = _mm512_min_ps(t, _mm512_set1_ps((float)(e->qmax - e->y_zp)));
    __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(t), _mm512_set1_epi32(e->y_zp));
    if (dense) {
        _mm_mask_storeu_epi8((char *)out + i0, m, _mm512_cvtepi32_epi8(q));
        return;
    }
    q = _mm512_maskz_compress_epi32(m, q);
    _mm_mask_storeu_epi8((char *)out + i0, (__mmask16)((1u << __builtin_popcount(m)) - 1), _mm512_cvtepi32_epi8(q));
}

/* The same on NHWC sums (qconv2d_nhwc): 16 consecutive output channels of each of rows positions
 * (acc's rows ld int32 apart), lanes m; sub, comb and bias are those channels' corrections,
 * scales and biases. Output element i0 + r * ld of out (and of the residual res) for row r; full:
 * every lane (m all ones), read and written without masks (a masked byte store compiles to
 * vpmovdb to memory, which took most of the time of the u8 rows). The flags are constants at each call, so every combination compiles to its own loop with no
 * branch or reload in it (a loop reading them through the epilogue struct spent half its time so). */
OAR_QEPI_TARGET static inline __attribute__((always_inline)) void
oar_qepilogue16_rows(const oar_qepilogue *e, const int32_t *acc, int64_t rows, int64_t ld, __mmask16 m, __m512i sub,
                     __m512 comb, __m512 bias, const float *res, void *out, int64_t i0, bool has_res, bool relu,
                     bool f32, bool full) {
    const __m512 inv = _mm512_set1_ps(e->inv_y), lo = _mm512_set1_ps((float)(e->qmin - e->y_zp));
    const __m512 hi = _mm512_set1_ps((float)(e->qmax - e->y_zp));
    const __m512i zp = _mm512_set1_epi32(e->y_zp);
    for (int64_t r = 0; r < rows; r++) {
        int64_t i = i0 + r * ld;
        __m512i a = _mm512_sub_epi32(full ? _mm512_loadu_si512(acc + r * ld) : _mm512_maskz_loadu_epi32(m, acc + r * ld), sub);
        __m512 v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), comb, bias);
        if (has_res) v = _mm512_add_ps(v, full ? _mm512_loadu_ps(res + i) : _mm512_maskz_loadu_ps(m, res + i));
        if (relu) v = _mm512_max_ps(v, _mm512_setzero_ps());
        if (f32) {
            if (full) _mm512_storeu_ps((float *)out + i, v);
            else _mm512_mask_storeu_ps((float *)out + i, m, v);
            continue;
        }
        __m512 t = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v, inv), lo), hi);
        __m128i q = _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(t), zp));
        if (full) _mm_storeu_si128((__m128i *)((char *)out + i), q); /* (masked: vpmovdb to memory, slow) */
        else _mm_mask_storeu_epi8((char *)out + i, m, q);
    }
}

/* The same with an int8 residual (e->qr, qconv2d_nhwc's fused qadd): each value rounded to the
 * conv's codes, then qadd's operations on them and the residual's codes res (read, like out, at
 * i0 + r * ld), written as codes. relu, r_signed and fast are e->qr's, constants at each call;
 * full: every lane (m all ones), read and written without masks. */
OAR_QEPI_TARGET static inline __attribute__((always_inline)) void
oar_qres16_rows(const oar_qepilogue *e, const int32_t *acc, int64_t rows, int64_t ld, __mmask16 m, __m512i sub,
                __m512 comb, __m512 bias, const uint8_t *res, uint8_t *out, int64_t i0, bool relu, bool r_signed,
                bool fast, bool full) {
    const oar_qres *q = &e->qr;
    const __m512 inv = _mm512_set1_ps(e->inv_y), lo = _mm512_set1_ps((float)(e->qmin - e->y_zp));
    const __m512 hi = _mm512_set1_ps((float)(e->qmax - e->y_zp)), ys = _mm512_set1_ps(q->ys);
    const __m512 rs = _mm512_set1_ps(q->rs), os = _mm512_set1_ps(q->os), inv_o = _mm512_set1_ps(q->inv_o);
    const __m512 olo = _mm512_set1_ps(q->lo), ohi = _mm512_set1_ps(q->hi);
    const __m512i rzp = _mm512_set1_epi32(q->rzp), ozp = _mm512_set1_epi32(q->ozp);
    for (int64_t r = 0; r < rows; r++) {
        int64_t i = i0 + r * ld;
        __m512i a = _mm512_sub_epi32(full ? _mm512_loadu_si512(acc + r * ld) : _mm512_maskz_loadu_epi32(m, acc + r * ld), sub);
        __m512 v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), comb, bias);
        __m512 t = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v, inv), lo), hi);
        __m512 va = _mm512_mul_ps(_mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), ys); /* (code - y_zp) y_scale */
        __m128i rb = full ? _mm_loadu_si128((const __m128i *)(res + i)) : _mm_maskz_loadu_epi8(m, res + i);
        __m512i ri = r_signed ? _mm512_cvtepi8_epi32(rb) : _mm512_cvtepu8_epi32(rb);
        __m512 s = _mm512_add_ps(va, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(ri, rzp)), rs));
        if (relu) s = _mm512_max_ps(s, _mm512_setzero_ps());
        __m512 u = oar_qclampdiv16(s, os, inv_o, olo, ohi, fast);
        __m128i q = _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(u), ozp));
        if (full) _mm_storeu_si128((__m128i *)(out + i), q); /* (a masked store became vpmovdb to memory: slow) */
        else _mm_mask_storeu_epi8((char *)out + i, m, q);
    }
}

#endif
