/* qlinear's fast kernels: int8 x·wᵀ with exact int32 sums, then the shared epilogue
 * (src/ops/quant.h), so integer outputs equal the reference's bit for bit.
 *
 * - avx512-vnni: vpdpbusd multiplies u8 by s8 and adds groups of four into int32 lanes without
 *   intermediate saturation. Weights are packed once per weight (16 columns x 4 k per vector,
 *   kept in a cache named by the weight's storage uid and version) and x is
 *   broadcast four bytes at a time: 6 rows x 64 columns accumulate in 24 registers. It needs u8 activations: s8 ones are shifted by 128 (x ^ 0x80) and
 *   the shift taken back with the weight row sums, as is the zero point:
 *   sum (x - z) w = sum x' w - (z + shift) sum w.
 * - avx2: vpmaddubsw would add two u8·s8 products into a saturating int16 (255·127·2 > 32767:
 *   pytorch#44939), so with 8-bit weights this path widens both operands to int16 first (the
 *   weights when packed, x once per call), subtracts the zero point there (|x - z| <= 255) and
 *   uses vpmaddwd, whose int32 pair sums are exact. No 7-bit range is needed and none is
 *   silently assumed. Weights that fit 7 bits (checked once, when packed) take vpmaddubsw,
 *   exact for them, on the VNNI layout.
 * Both AVX2 forms run the VNNI kernel's GEMM in ymm registers: x broadcast, 3 rows x 16 columns
 * of sums in registers, no horizontal sums. All are spread over oar's pool by blocks of 6 rows
 * x 64 columns. qconv2d runs on the same GEMM after an im2col. */
#include "kernels/cpu/cpu_kernels.h"
#include "ops/quant.h"
#include "ops/quant_add.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#include <immintrin.h>

#include "kernels/cpu/avx2_activation.h"

#define NB 64 /* columns per task */
#define MB 6  /* rows per task (the VNNI tile: 6 rows x 4 vectors of 16 columns) */

typedef struct qgemm_job {
    const uint8_t *x; /* [M, K] u8 or s8 bytes */
    const int32_t *wsum; /* [N] (padded to 16 more): row sums of w (vnni, avx2 7-bit) */
    const int8_t *wp;    /* vnni, avx2 7-bit: w packed as [N/16][K/4][16 columns][4 bytes], zero padded */
    const int16_t *wp16; /* avx2, 8-bit weights: w widened as [N/16][K/2][16 columns][2], zero padded */
    int16_t *xs;         /* and x - zero point widened as [M][K/2][2] (an odd k's pad 0) */
    int64_t m, n, k;
    int32_t xzp, shift;  /* shift: 128 for s8 x on vnni, else 0 */
    bool x_signed;
    oar_qgemm_emit emit;
    void *user;
    int64_t n_blocks;
} qgemm_job;

/* ---- AVX-512 VNNI */
#define VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))

/* Weights packed for broadcast products: 16 columns x 4 consecutive k per 64 bytes, so one
 * vpdpbusd adds x[m, 4q..4q+3] (broadcast) times 16 columns, with no horizontal sums; k and
 * columns past the end are zero. Also the row sums for the zero-point correction. */
static void vnni_pack(const int8_t *w, int64_t n, int64_t k, int8_t *wp, int32_t *wsum) {
    int64_t kq = (k + 3) / 4;
    memset(wp, 0, (size_t)(((n + 15) / 16) * kq * 64));
    for (int64_t c = 0; c < n; c++) {
        const int8_t *src = w + c * k;
        int8_t *d = wp + (c / 16) * kq * 64 + (c % 16) * 4;
        int64_t q = 0;
        for (; 4 * q + 4 <= k; q++) memcpy(d + q * 64, src + 4 * q, 4);
        if (4 * q < k) memcpy(d + q * 64, src + 4 * q, (size_t)(k - 4 * q));
        int32_t s = 0;
        for (int64_t t = 0; t < k; t++) s += src[t];
        wsum[c] = s;
    }
}

/* Weights widened to int16 for vpmaddwd: 16 columns x 2 consecutive k per 64 bytes (8 columns
 * a ymm); k and columns past the end are zero. Also the row sums (unused by this path). */
static void i16_pack(const int8_t *w, int64_t n, int64_t k, int16_t *wp, int32_t *wsum) {
    int64_t kh = (k + 1) / 2;
    memset(wp, 0, sizeof(int16_t) * (size_t)(((n + 15) / 16) * kh * 32));
    for (int64_t c = 0; c < n; c++) {
        int16_t *d = wp + (c / 16) * kh * 32 + (c % 16) * 2;
        int32_t sum = 0;
        for (int64_t t = 0; t < k; t++) d[(t / 2) * 32 + t % 2] = w[c * k + t], sum += w[c * k + t];
        wsum[c] = sum;
    }
}

/* Rows [m0, m0 + MB) (rows past m1 repeat row m0 and are dropped) x nbk blocks of 16 columns
 * from n0: MB x nbk accumulators (24 of the 32 registers), x broadcast 4 bytes at a time
 * straight from memory (vpbroadcastd m32; s8 flipped after), the zero-point and sign-shift
 * correction applied in vector form before the sums are stored. */
__attribute__((target("avx512f,avx512bw,avx512vnni"), always_inline)) static inline void
vnni_core(const qgemm_job *j, int64_t m0, int64_t m1, int64_t n0, int64_t n1, int32_t acc[MB][NB], const int nbk,
          const bool flip) {
    int64_t k = j->k, kq = (k + 3) / 4, kfull = k / 4;
    const uint8_t *xr[MB];
    for (int r = 0; r < MB; r++) xr[r] = j->x + (m0 + r < m1 ? m0 + r : m0) * k;
    const __m512i fv = _mm512_set1_epi32((int)0x80808080u);
    __m512i a[MB][4];
    for (int r = 0; r < MB; r++)
        for (int b = 0; b < nbk; b++) a[r][b] = _mm512_setzero_si512();
    const int8_t *wb = j->wp + (n0 / 16) * kq * 64;
    for (int64_t q = 0; q < kq; q++) {
        __m512i wv[4], xb[MB];
#pragma GCC unroll 4
        for (int b = 0; b < nbk; b++) wv[b] = _mm512_loadu_si512(wb + (b * kq + q) * 64);
#pragma GCC unroll 8
        for (int r = 0; r < MB; r++) {
            int32_t v = 0;
            if (__builtin_expect(q < kfull, 1)) memcpy(&v, xr[r] + 4 * q, 4);
            else /* the last partial group: never past the row */
                for (int64_t t = 4 * q; t < k; t++) v |= (int32_t)((uint32_t)xr[r][t] << (8 * (t - 4 * q)));
            xb[r] = flip ? _mm512_xor_si512(_mm512_set1_epi32(v), fv) : _mm512_set1_epi32(v);
        }
#pragma GCC unroll 8
        for (int r = 0; r < MB; r++)
#pragma GCC unroll 4
            for (int b = 0; b < nbk; b++) a[r][b] = _mm512_dpbusd_epi32(a[r][b], xb[r], wv[b]);
    }
    const __m512i corr = _mm512_set1_epi32(j->xzp + j->shift);
    for (int b = 0; b < nbk; b++) {
        int64_t c0 = n0 + b * 16, cn = n1 - c0 < 16 ? n1 - c0 : 16;
        __mmask16 m = cn >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << cn) - 1);
        __m512i sub = _mm512_mullo_epi32(corr, _mm512_maskz_loadu_epi32(m, j->wsum + c0));
        for (int r = 0; r < MB && m0 + r < m1; r++)
            _mm512_mask_storeu_epi32(&acc[r][c0 - n0], m, _mm512_sub_epi32(a[r][b], sub));
    }
}

VNNI static void vnni_block(const qgemm_job *j, int64_t m0, int64_t m1, int64_t n0, int64_t n1, int32_t acc[MB][NB]) {
    bool flip = j->x_signed;
    switch ((n1 - n0 + 15) / 16 * 2 + flip) {
    case 2: vnni_core(j, m0, m1, n0, n1, acc, 1, false); break;
    case 3: vnni_core(j, m0, m1, n0, n1, acc, 1, true); break;
    case 4: vnni_core(j, m0, m1, n0, n1, acc, 2, false); break;
    case 5: vnni_core(j, m0, m1, n0, n1, acc, 2, true); break;
    case 6: vnni_core(j, m0, m1, n0, n1, acc, 3, false); break;
    case 7: vnni_core(j, m0, m1, n0, n1, acc, 3, true); break;
    case 9: vnni_core(j, m0, m1, n0, n1, acc, 4, true); break;
    default: vnni_core(j, m0, m1, n0, n1, acc, 4, false); break;
    }
}

/* ---- AVX2 with 7-bit weights: vpmaddubsw. Its pair sums x0 w0 + x1 w1 of u8 x and s8 w are
 * exact in int16 when every weight lies in [-64, 63] (2 * 255 * -64 = -32640; checked once per
 * packed weight), and vpmaddwd by ones adds the two pairs of each 4 bytes into int32: together
 * the vpdpbusd of VNNI, in two instructions. So this path is the VNNI kernel's GEMM in ymm
 * registers on the same packed weights (8 columns x 4 k a vector): x broadcast 4 bytes at a
 * time, 3 rows x 16 columns of int32 sums in 6 registers (with the 2 weight vectors, the
 * broadcast, a product and the ones, 11 of the 16), no horizontal sums. x is used raw (s8
 * flipped to u8); the zero point (and the flip's 128) comes back with the weight row sums:
 * sum (x - z) w = sum x' w - (z + shift) sum w. Padded k and columns have zero weights. */
#define W7_ROWS 3
#define W7_MAC(acc, xb, w) acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(xb, w), ones))
/* one group of 4 k: 3 broadcasts of x times nv weight vectors (named accumulators, so that
   they stay in registers) */
#define W7_STEP(x0, x1, x2, wq)                                                                  \
    do {                                                                                         \
        __m256i w0 = _mm256_loadu_si256((const __m256i *)(wq)), w1;                              \
        if (nv == 2) w1 = _mm256_loadu_si256((const __m256i *)((wq) + 32));                      \
        __m256i xb = flip ? _mm256_xor_si256(x0, fv) : x0;                                       \
        W7_MAC(a00, xb, w0);                                                                     \
        if (nv == 2) W7_MAC(a01, xb, w1);                                                        \
        xb = flip ? _mm256_xor_si256(x1, fv) : x1;                                               \
        W7_MAC(a10, xb, w0);                                                                     \
        if (nv == 2) W7_MAC(a11, xb, w1);                                                        \
        xb = flip ? _mm256_xor_si256(x2, fv) : x2;                                               \
        W7_MAC(a20, xb, w0);                                                                     \
        if (nv == 2) W7_MAC(a21, xb, w1);                                                        \
    } while (0)

__attribute__((target("avx2"), always_inline)) static inline __m256i w7_bcast(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* the last group's k - 4 * q bytes of a row, the rest zero: never past the row */
__attribute__((target("avx2"), always_inline)) static inline __m256i w7_bcast_tail(const uint8_t *p, int64_t n) {
    uint32_t v = 0;
    for (int64_t t = 0; t < n; t++) v |= (uint32_t)p[t] << (8 * t);
    return _mm256_set1_epi32((int32_t)v);
}

__attribute__((target("avx2"), always_inline)) static inline void
w7_core(const qgemm_job *j, int64_t m0, int64_t m1, int64_t c0, int32_t (*out)[NB], const int nv, const bool flip) {
    int64_t k = j->k, kq = (k + 3) / 4, kfull = k / 4;
    const uint8_t *x0 = j->x + m0 * k, *x1 = m0 + 1 < m1 ? x0 + k : x0, *x2 = m0 + 2 < m1 ? x0 + 2 * k : x0;
    const __m256i ones = _mm256_set1_epi16(1), fv = _mm256_set1_epi32((int)0x80808080u);
    __m256i a00 = _mm256_setzero_si256(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00;
    const int8_t *wb = j->wp + (c0 / 16) * kq * 64;
    for (int64_t q = 0; q < kfull; q++)
        W7_STEP(w7_bcast(x0 + 4 * q), w7_bcast(x1 + 4 * q), w7_bcast(x2 + 4 * q), wb + q * 64);
    if (kfull < kq) {
        int64_t r = k - 4 * kfull;
        W7_STEP(w7_bcast_tail(x0 + 4 * kfull, r), w7_bcast_tail(x1 + 4 * kfull, r), w7_bcast_tail(x2 + 4 * kfull, r),
                wb + kfull * 64);
    }
    const __m256i corr = _mm256_set1_epi32(j->xzp + (flip ? 128 : 0));
    /* columns past n go to out's spare columns (never read); wsum is padded to 16 */
    __m256i s0 = _mm256_mullo_epi32(corr, _mm256_loadu_si256((const __m256i *)(j->wsum + c0)));
    __m256i s1 = _mm256_mullo_epi32(corr, _mm256_loadu_si256((const __m256i *)(j->wsum + c0 + 8)));
    __m256i a[W7_ROWS][2] = {{a00, a01}, {a10, a11}, {a20, a21}};
    for (int r = 0; r < W7_ROWS && m0 + r < m1; r++) {
        _mm256_storeu_si256((__m256i *)&out[r][0], _mm256_sub_epi32(a[r][0], s0));
        if (nv == 2) _mm256_storeu_si256((__m256i *)&out[r][8], _mm256_sub_epi32(a[r][1], s1));
    }
}
#undef W7_STEP
#undef W7_MAC

__attribute__((target("avx2"))) static void w7_block(const qgemm_job *j, int64_t m0, int64_t m1, int64_t n0,
                                                     int64_t n1, int32_t acc[MB][NB]) {
    bool flip = j->x_signed;
    for (int64_t c = n0; c < n1; c += 16) /* each 16-column strip of weights read again from L1 */
        for (int64_t r = m0; r < m1; r += W7_ROWS) {
            int64_t rend = r + W7_ROWS < m1 ? r + W7_ROWS : m1;
            int32_t(*out)[NB] = (int32_t(*)[NB]) & acc[r - m0][c - n0];
            switch ((n1 - c > 8) * 2 + flip) {
            case 0: w7_core(j, r, rend, c, out, 1, false); break;
            case 1: w7_core(j, r, rend, c, out, 1, true); break;
            case 2: w7_core(j, r, rend, c, out, 2, false); break;
            default: w7_core(j, r, rend, c, out, 2, true); break;
            }
        }
}
#undef W7_ROWS

/* ---- AVX2 with 8-bit weights, exact, as a GEMM: vpmaddwd multiplies int16 pairs into exact
 * int32 sums (|x - z| <= 255 and |w| <= 128: 2 * 255 * 128 fits easily), so with both operands
 * widened once (the weights when packed, 8 columns x 2 k a vector; x - z once per call) the
 * VNNI kernel's register tile applies: x - z broadcast 2 values at a time, 3 rows x 16 columns
 * of sums in 6 registers, one vpmaddwd and one vpaddd per 16 products, no horizontal sums. It
 * replaced 2 x 4 dot products with horizontal sums, which widened x again for every column. */
#define I16_MAC(acc, xb, w) acc = _mm256_add_epi32(acc, _mm256_madd_epi16(xb, w))
__attribute__((target("avx2"), always_inline)) static inline void
i16_core(const qgemm_job *j, const int16_t *xs, int64_t kh, int nr, int64_t c0, int32_t (*out)[NB], const int nv) {
    const int16_t *x0 = xs, *x1 = nr > 1 ? xs + 2 * kh : xs, *x2 = nr > 2 ? xs + 4 * kh : xs;
    __m256i a00 = _mm256_setzero_si256(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00;
    const int16_t *wb = j->wp16 + (c0 / 16) * kh * 32;
    for (int64_t p = 0; p < kh; p++) {
        __m256i w0 = _mm256_loadu_si256((const __m256i *)(wb + p * 32)), w1;
        if (nv == 2) w1 = _mm256_loadu_si256((const __m256i *)(wb + p * 32 + 16));
        int32_t v;
        memcpy(&v, x0 + 2 * p, 4);
        __m256i xb = _mm256_set1_epi32(v);
        I16_MAC(a00, xb, w0);
        if (nv == 2) I16_MAC(a01, xb, w1);
        memcpy(&v, x1 + 2 * p, 4);
        xb = _mm256_set1_epi32(v);
        I16_MAC(a10, xb, w0);
        if (nv == 2) I16_MAC(a11, xb, w1);
        memcpy(&v, x2 + 2 * p, 4);
        xb = _mm256_set1_epi32(v);
        I16_MAC(a20, xb, w0);
        if (nv == 2) I16_MAC(a21, xb, w1);
    }
    __m256i a[3][2] = {{a00, a01}, {a10, a11}, {a20, a21}};
    for (int r = 0; r < nr; r++) { /* columns past n go to out's spare columns, never read */
        _mm256_storeu_si256((__m256i *)&out[r][0], a[r][0]);
        if (nv == 2) _mm256_storeu_si256((__m256i *)&out[r][8], a[r][1]);
    }
}
#undef I16_MAC

/* rows [m0, m1) of x minus the zero point into j->xs, as int16 rows of 2 * kh values */
__attribute__((target("avx2"))) static void i16_rows(void *ctx, int64_t m0, int64_t m1) {
    const qgemm_job *j = ctx;
    int64_t k = j->k, kh = (k + 1) / 2;
    const __m256i zp = _mm256_set1_epi16((short)j->xzp);
    for (int64_t r = m0; r < m1; r++) {
        const uint8_t *src = j->x + r * k;
        int16_t *d = j->xs + r * 2 * kh;
        int64_t t = 0;
        for (; t + 16 <= k; t += 16) {
            __m128i b = _mm_loadu_si128((const __m128i *)(src + t));
            __m256i v = j->x_signed ? _mm256_cvtepi8_epi16(b) : _mm256_cvtepu8_epi16(b);
            _mm256_storeu_si256((__m256i *)(d + t), _mm256_sub_epi16(v, zp));
        }
        for (; t < k; t++) d[t] = (int16_t)((j->x_signed ? (int32_t)(int8_t)src[t] : (int32_t)src[t]) - j->xzp);
        if (k % 2) d[k] = 0;
    }
}

__attribute__((target("avx2"))) static void i16_block(const qgemm_job *j, int64_t m0, int64_t m1, int64_t n0,
                                                      int64_t n1, int32_t acc[MB][NB]) {
    int64_t kh = (j->k + 1) / 2;
    const int16_t *xs = j->xs + m0 * 2 * kh;
    for (int64_t c = n0; c < n1; c += 16)
        for (int64_t r = m0; r < m1; r += 3) {
            int nr = (int)(m1 - r < 3 ? m1 - r : 3);
            int32_t(*out)[NB] = (int32_t(*)[NB]) & acc[r - m0][c - n0];
            if (n1 - c > 8) i16_core(j, xs + (r - m0) * 2 * kh, kh, nr, c, out, 2);
            else i16_core(j, xs + (r - m0) * 2 * kh, kh, nr, c, out, 1);
        }
}

/* ---- the task loop: a block of rows x columns, handed to emit */
typedef void (*block_fn)(const qgemm_job *, int64_t, int64_t, int64_t, int64_t, int32_t[MB][NB]);

static void run_block(const qgemm_job *j, block_fn block, int64_t blk) {
    int64_t mb = blk / j->n_blocks, nbk = blk % j->n_blocks;
    int64_t m0 = mb * MB, m1 = m0 + MB < j->m ? m0 + MB : j->m;
    int64_t n0 = nbk * NB, n1 = n0 + NB < j->n ? n0 + NB : j->n;
    int32_t acc[MB][NB];
    block(j, m0, m1, n0, n1, acc);
    j->emit(j->user, m0, m1, n0, n1, &acc[0][0], NB);
}

static void vnni_range(void *ctx, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; i++) run_block(ctx, vnni_block, i);
}
static void avx2_i16_range(void *ctx, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; i++) run_block(ctx, i16_block, i);
}
static void avx2_w7_range(void *ctx, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; i++) run_block(ctx, w7_block, i);
}

/* ---- the packed-weight cache (oar_qpacked, ops/quant.h): made once per weight (storage uid,
 * version, offset, shape, layout) instead of on every call. At LeNet's sizes the packing cost
 * as much as the products. refs counts the cache's reference and each running call's, so
 * eviction never frees a packing in use. */
#define QPACK_SLOTS 64
static struct {
    pthread_mutex_t mu;
    oar_qpacked *slot[QPACK_SLOTS];
    uint64_t clock;
} g_qpack = {PTHREAD_MUTEX_INITIALIZER, {0}, 0};

void oar_qpacked_put(oar_qpacked *p) {
    if (p && __atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        free(p->wp);
        free(p->wsum);
        free(p);
    }
}

/* rows of w padded with zeros to whole groups of 4 bytes, and their sums */
static void rows_pack(const int8_t *w, int64_t n, int64_t k, int8_t *wp, int32_t *wsum) {
    int64_t kp = (k + 3) / 4 * 4;
    memset(wp, 0, (size_t)(n * kp));
    for (int64_t c = 0; c < n; c++) {
        memcpy(wp + c * kp, w + c * k, (size_t)k);
        int32_t s = 0;
        for (int64_t t = 0; t < k; t++) s += w[c * k + t];
        wsum[c] = s;
    }
}

static oar_qpacked *qpacked_new(oar_qlayout layout, const int8_t *w, int64_t n, int64_t k) {
    oar_qpacked *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->refs = 1, p->n = n, p->k = k, p->layout = layout;
    p->wsum = calloc((size_t)((n + 15) / 16 * 16 + 16), sizeof(int32_t)); /* padded: read 8 or 16 at a time */
    size_t wbytes = layout == OAR_QLAYOUT_I16_COLUMNS ? sizeof(int16_t) * (size_t)(((n + 15) / 16) * 16 * ((k + 1) / 2) * 2)
                                                      : (size_t)(((n + 15) / 16) * 16 * ((k + 3) / 4) * 4);
    p->wp = malloc(wbytes + 64);
    if (!p->wsum || !p->wp) {
        oar_qpacked_put(p);
        return NULL;
    }
    if (layout == OAR_QLAYOUT_VNNI_COLUMNS) vnni_pack(w, n, k, p->wp, p->wsum);
    else if (layout == OAR_QLAYOUT_ROWS4) rows_pack(w, n, k, p->wp, p->wsum);
    else i16_pack(w, n, k, (int16_t *)p->wp, p->wsum);
    p->w7 = true;
    for (int64_t i = 0; i < n * k; i++) p->w7 &= w[i] >= -64 && w[i] < 64;
    return p;
}

/* the cached packing of w in layout, with a reference, or NULL */
static oar_qpacked *qpacked_find(oar_qlayout layout, const oar_qweight_id *wid, int64_t n, int64_t k) {
    if (!wid || !wid->uid) return NULL;
    oar_qpacked *found = NULL;
    pthread_mutex_lock(&g_qpack.mu);
    for (int i = 0; i < QPACK_SLOTS && !found; i++) {
        oar_qpacked *p = g_qpack.slot[i];
        if (p && p->id.uid == wid->uid && p->id.version == wid->version && p->id.offset == wid->offset &&
            p->n == n && p->k == k && p->layout == layout) {
            __atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
            p->used = ++g_qpack.clock;
            found = p;
        }
    }
    pthread_mutex_unlock(&g_qpack.mu);
    return found;
}

/* w packed, with a reference for the caller; from the cache when wid names w's data. */
oar_qpacked *oar_qpacked_get(oar_qlayout layout, const int8_t *w, const oar_qweight_id *wid, int64_t n, int64_t k) {
    if (!wid || !wid->uid) return qpacked_new(layout, w, n, k);
    oar_qpacked *p = qpacked_find(layout, wid, n, k);
    if (p) return p;
    p = qpacked_new(layout, w, n, k);
    if (!p) return NULL;
    p->id = *wid;
    pthread_mutex_lock(&g_qpack.mu); /* replaces an older version of the same weight, else the least recent */
    int slot = 0;
    for (int i = 0; i < QPACK_SLOTS; i++) {
        oar_qpacked *o = g_qpack.slot[i];
        if (!o || (o->id.uid == p->id.uid && o->id.offset == p->id.offset && o->layout == p->layout)) {
            slot = i;
            break;
        }
        if (o->used < g_qpack.slot[slot]->used) slot = i;
    }
    oar_qpacked *old = g_qpack.slot[slot];
    g_qpack.slot[slot] = p;
    p->used = ++g_qpack.clock;
    __atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&g_qpack.mu);
    oar_qpacked_put(old);
    return p;
}

oar_status oar_qgemm(bool vnni, const uint8_t *x, bool x_signed, int32_t x_zp, const int8_t *w,
                     const oar_qweight_id *wid, int64_t m, int64_t n, int64_t k, oar_qgemm_emit emit, void *user) {
    qgemm_job j = {.x = x, .m = m, .n = n, .k = k, .x_signed = x_signed, .xzp = x_zp,
                   .shift = vnni && x_signed ? 128 : 0, .emit = emit, .user = user};
    /* VNNI and AVX2 with 7-bit weights: the packed columns and row sums; AVX2 with 8-bit weights:
       the int16 columns. Whether the weights fit 7 bits is known once packed: an 8-bit weight
       seen before is found in int16, so it holds one cache slot in the steady state (its 8-bit
       packing, made to learn its width, ages out) */
    oar_qpacked *pk = NULL, *pk16 = vnni ? NULL : qpacked_find(OAR_QLAYOUT_I16_COLUMNS, wid, n, k);
    if (!pk16 && (pk = oar_qpacked_get(OAR_QLAYOUT_VNNI_COLUMNS, w, wid, n, k)) && !vnni && !pk->w7) {
        pk16 = oar_qpacked_get(OAR_QLAYOUT_I16_COLUMNS, w, wid, n, k);
        oar_qpacked_put(pk);
        pk = NULL;
    }
    if (pk16 && !(j.xs = malloc(sizeof(int16_t) * (size_t)(m * ((k + 1) / 2) * 2 + 16)))) {
        oar_qpacked_put(pk16);
        pk16 = NULL;
    }
    if (!pk && !pk16) return oar_error(OAR_ERR_OOM, "qgemm: out of memory");
    j.wsum = pk ? pk->wsum : NULL;
    j.wp = pk ? pk->wp : NULL;
    j.wp16 = pk16 ? (const int16_t *)pk16->wp : NULL;
    if (pk16) oar_parallel_for(m, 1 + 4096 / (k + 1), i16_rows, &j); /* x - z widened once */
    j.n_blocks = (n + NB - 1) / NB;
    int64_t blocks = ((m + MB - 1) / MB) * j.n_blocks;
    /* a block is MB*NB*K multiply-adds; a few thousand make a chunk worth a thread */
    int64_t grain = 1 + (1 << 16) / (MB * NB * (k + 1));
    if (blocks) oar_parallel_for(blocks, grain, vnni ? vnni_range : pk16 ? avx2_i16_range : avx2_w7_range, &j);
    free(j.xs);
    oar_qpacked_put(pk16);
    oar_qpacked_put(pk);
    return OAR_OK;
}

oar_qweight_id oar_qweight_id_of(const oar_tensor *w, int64_t off) {
    const oar_storage *st = w->storage;
    return (oar_qweight_id){.uid = st ? st->uid : 0, .version = st ? st->version : 0, .offset = w->offset + off};
}

static bool cpu_has_vnni(void) {
    static int has = -1;
    if (has < 0) {
        unsigned a, b, c, d;
        has = __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((c >> 11) & 1) && ((b >> 30) & 1); /* VNNI, AVX512BW */
    }
    return has == 1;
}

bool oar_cpu_use_vnni(void) { return oar_cpu_has_avx512() && cpu_has_vnni(); }
static bool use_vnni(void) { return oar_cpu_use_vnni(); }

/* ---- qlinear: rows of x times rows of w, the epilogue per output row */
typedef struct linear_emit {
    const oar_qepilogue *e;
    const float *res;
    char *out;
    size_t osz;
    int64_t n;
} linear_emit;

/* fma in the target lets fmaf inline (the reference calls libm's: the same correctly rounded result) */
#define EPI __attribute__((target("avx2,fma")))

/* f32 outputs (the dynamic layers' case) 8 columns at a time with the epilogue's own roundings:
 * (float)acc is cvtdq2ps (round to nearest), fmaf is one vfmadd, the residual one add, and
 * ReLU max(v, 0) as maxps(v, 0) (0 for NaN and -0, as oar_qmaxf); the rest as the reference. */
EPI static inline __attribute__((always_inline)) __m256 linear_act8(const oar_qepilogue *e, __m256 v) {
    if (e->act == OAR_QACT_RELU) return _mm256_max_ps(v, _mm256_setzero_ps());
    if (e->act == OAR_QACT_GELU_TANH) return oar_v_gelu_tanh(v);
    if (e->act == OAR_QACT_GELU_ERF) return oar_v_gelu_erf(v);
    return v;
}

/* The GELUs are the gelu op's AVX2 kernel's (avx2_activation.h), so that a fused qlinear gives
 * the bits of qlinear then gelu on every CPU path; a row's last columns go through masked
 * loads and stores as that kernel's tail does (the scalar epilogue would round differently). */
EPI static void emit_linear(void *user, int64_t m0, int64_t m1, int64_t n0, int64_t n1, const int32_t *acc, int64_t ld) {
    const linear_emit *l = user;
    const oar_qepilogue *e = l->e;
    bool vec = e->out_dtype == OAR_F32, gelu = e->act == OAR_QACT_GELU_TANH || e->act == OAR_QACT_GELU_ERF;
    for (int64_t r = m0; r < m1; r++) {
        const int32_t *a = acc + (r - m0) * ld;
        const float *res = l->res ? l->res + r * l->n : NULL;
        char *row = l->out + (size_t)(r * l->n) * l->osz;
        int64_t n = n0;
        for (; vec && n + 8 <= n1; n += 8) {
            __m256 v = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(a + (n - n0))));
            v = _mm256_fmadd_ps(v, _mm256_loadu_ps(e->comb + n), e->bias ? _mm256_loadu_ps(e->bias + n) : _mm256_setzero_ps());
            if (res) v = _mm256_add_ps(v, _mm256_loadu_ps(res + n));
            _mm256_storeu_ps((float *)row + n, linear_act8(e, v));
        }
        if (gelu && n < n1) {
            __m256i m = oar_v_tail_mask(n1 - n);
            __m256 v = _mm256_cvtepi32_ps(_mm256_maskload_epi32(a + (n - n0), m));
            v = _mm256_fmadd_ps(v, _mm256_maskload_ps(e->comb + n, m),
                                e->bias ? _mm256_maskload_ps(e->bias + n, m) : _mm256_setzero_ps());
            if (res) v = _mm256_add_ps(v, _mm256_maskload_ps(res + n, m));
            _mm256_maskstore_ps((float *)row + n, m, linear_act8(e, v));
            n = n1;
        }
        oar_qepilogue_row(e, a + (n - n0), res, n, n1, row);
    }
}

static oar_status qlinear_run(oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a, bool vnni) {
    oar_qepilogue e;
    oar_status st = oar_qepilogue_init(&e, in, out[0], a);
    if (st != OAR_OK) return st;
    int64_t n = in[QL_W]->shape[0], k = in[QL_W]->shape[1];
    oar_qweight_id wid = oar_qweight_id_of(in[QL_W], 0);
    linear_emit l = {.e = &e, .res = in[QL_RES] ? (const float *)oar_tensor_ptr(in[QL_RES]) : NULL,
                     .out = oar_tensor_ptr(out[0]), .osz = oar_dtypes[out[0]->dtype].size, .n = n};
    st = oar_qgemm(vnni, (const uint8_t *)oar_tensor_ptr(in[QL_X]), in[QL_X]->dtype == OAR_I8,
                   (int32_t)oar_dtypes[in[QL_XZP]->dtype].load_i64(oar_tensor_ptr(in[QL_XZP])),
                   (const int8_t *)oar_tensor_ptr(in[QL_W]), &wid, n ? out[0]->numel / n : 0, n, k, emit_linear, &l);
    oar_qepilogue_free(&e);
    return st;
}

/* ---- qconv2d: per group, im2col into bytes (padding = the zero point's byte), then the GEMM of
 * positions x output channels, emitted into NCHW */
typedef struct conv_emit {
    const oar_qepilogue *e;
    const float *res;
    char *out;
    int64_t p, o, og, g; /* positions per image, out channels, per group, this group */
} conv_emit;

EPI static void emit_conv(void *user, int64_t m0, int64_t m1, int64_t n0, int64_t n1, const int32_t *acc, int64_t ld) {
    const conv_emit *c = user;
    for (int64_t m = m0; m < m1; m++) {
        int64_t b = m / c->p, p = m % c->p;
        for (int64_t n = n0; n < n1; n++) {
            int64_t ch = c->g * c->og + n, i = (b * c->o + ch) * c->p + p;
            oar_qepilogue_store(c->e, oar_qepilogue_value(c->e, acc[(m - m0) * ld + n - n0], ch, c->res ? c->res + i : NULL),
                                c->out, i);
        }
    }
}

typedef struct im2col_job {
    const oar_qconv_geom *g;
    const uint8_t *x;
    uint8_t *col, pad;
    int64_t gr, cg, kg;
} im2col_job;

/* rows [b, e) of (image, output row): each writes ow positions of kg bytes */
static void im2col_rows(void *ctx, int64_t b, int64_t e) {
    const im2col_job *j = ctx;
    const oar_qconv_geom *g = j->g;
    for (int64_t r = b; r < e; r++) {
        int64_t img = r / g->oh, oy = r % g->oh;
        uint8_t *d = j->col + r * g->ow * j->kg;
        for (int64_t ox = 0; ox < g->ow; ox++)
            for (int64_t c = 0; c < j->cg; c++) {
                const uint8_t *xc = j->x + ((img * g->c + j->gr * j->cg + c) * g->h) * g->w;
                for (int64_t ky = 0; ky < g->kh; ky++) {
                    int64_t iy = oy * g->sh - g->ph + ky * g->dh, ix0 = ox * g->sw - g->pw;
                    bool row_in = iy >= 0 && iy < g->h;
                    if (row_in && g->dw == 1 && ix0 >= 0 && ix0 + g->kw <= g->w) { /* a run inside the row */
                        memcpy(d, xc + iy * g->w + ix0, (size_t)g->kw);
                        d += g->kw;
                        continue;
                    }
                    for (int64_t kx = 0; kx < g->kw; kx++) {
                        int64_t ix = ox * g->sw - g->pw + kx * g->dw;
                        *d++ = row_in && ix >= 0 && ix < g->w ? xc[iy * g->w + ix] : j->pad;
                    }
                }
            }
    }
}

oar_status oar_qconv_gemm(oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a, bool vnni) {
    oar_qconv_geom g;
    oar_qepilogue e;
    oar_status st = oar_qconv_geom_get(in[QL_X], in[QL_W], a, &g);
    if (st != OAR_OK || (st = oar_qepilogue_init(&e, in, out[0], a + 4)) != OAR_OK) return st;
    int32_t xzp = (int32_t)oar_dtypes[in[QL_XZP]->dtype].load_i64(oar_tensor_ptr(in[QL_XZP]));
    int64_t cg = g.c / g.groups, og = g.o / g.groups, kg = cg * g.kh * g.kw, p = g.oh * g.ow, rows = g.n * p;
    uint8_t *col = malloc((size_t)(rows * kg > 0 ? rows * kg : 1));
    if (!col) {
        oar_qepilogue_free(&e);
        return oar_error(OAR_ERR_OOM, "qconv2d: out of memory for a %lld x %lld column buffer", (long long)rows,
                         (long long)kg);
    }
    const uint8_t *x = (const uint8_t *)oar_tensor_ptr(in[QL_X]);
    uint8_t pad = (uint8_t)xzp;
    conv_emit ce = {.e = &e, .res = in[QL_RES] ? (const float *)oar_tensor_ptr(in[QL_RES]) : NULL,
                    .out = oar_tensor_ptr(out[0]), .p = p, .o = g.o, .og = og};
    for (int64_t gr = 0; gr < g.groups && st == OAR_OK; gr++) {
        im2col_job ij = {.g = &g, .x = x, .col = col, .pad = pad, .gr = gr, .cg = cg, .kg = kg};
        oar_parallel_for(g.n * g.oh, 1 + 4096 / (g.ow * kg + 1), im2col_rows, &ij);
        ce.g = gr;
        oar_qweight_id wid = oar_qweight_id_of(in[QL_W], gr * og * kg);
        st = oar_qgemm(vnni, col, in[QL_X]->dtype == OAR_I8, xzp, (const int8_t *)oar_tensor_ptr(in[QL_W]) + gr * og * kg,
                       &wid, rows, og, kg, emit_conv, &ce);
    }
    free(col);
    oar_qepilogue_free(&e);
    return st;
}

/* qconv2d_nhwc's rows for the GEMM: with NHWC data each tap of a position is a run of cg bytes
 * (K ordered ky, kx, c), the zero point where the tap falls outside */
static void im2col_nhwc_rows(void *ctx, int64_t b, int64_t e) {
    const im2col_job *j = ctx;
    const oar_qconv_geom *g = j->g;
    for (int64_t r = b; r < e; r++) {
        int64_t img = r / g->oh, oy = r % g->oh;
        uint8_t *d = j->col + r * g->ow * j->kg;
        for (int64_t ox = 0; ox < g->ow; ox++)
            for (int64_t ky = 0; ky < g->kh; ky++) {
                int64_t iy = oy * g->sh - g->ph + ky * g->dh;
                for (int64_t kx = 0; kx < g->kw; kx++, d += j->cg) {
                    int64_t ix = ox * g->sw - g->pw + kx * g->dw;
                    if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w) memset(d, j->pad, (size_t)j->cg);
                    else memcpy(d, j->x + ((img * g->h + iy) * g->w + ix) * g->c + j->gr * j->cg, (size_t)j->cg);
                }
            }
    }
}

/* qconv2d_nhwc's rows with an int8 residual (e->qr): the scalar epilogue per code, as the GEMM's
 * u8/i8 outputs (oar_qepilogue_row) */
typedef struct qres_emit {
    const oar_qepilogue *e;
    const uint8_t *res;
    uint8_t *out;
    int64_t n; /* a row's codes */
} qres_emit;

EPI static void emit_qres(void *user, int64_t m0, int64_t m1, int64_t n0, int64_t n1, const int32_t *acc, int64_t ld) {
    const qres_emit *q = user;
    for (int64_t r = m0; r < m1; r++)
        for (int64_t n = n0; n < n1; n++) {
            float v = oar_qepilogue_value(q->e, acc[(r - m0) * ld + n - n0], n, NULL);
            q->out[r * q->n + n] = (uint8_t)oar_qres_one(q->e, v, q->res[r * q->n + n]);
        }
}

/* qconv2d_nhwc as im2col + the exact GEMM, where oneDNN's int8 code is not exact (8-bit weights
 * without VNNI) or not there: the GEMM's rows (positions) x columns (channels) are the NHWC
 * output itself, so qlinear's row epilogue writes it. The weight's K order becomes (ky, kx, c):
 * permuted per call (a few KB) and packed once under a name of its own (a negative offset, which
 * no plain weight has, so the NCHW packing of the same bytes is never taken for it). */
oar_status oar_qconv_gemm_nhwc(oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a, bool vnni) {
    oar_qconv_geom g;
    oar_qepilogue e;
    oar_status st = oar_qconv_nhwc_geom_get(in[QL_X], in[QL_W], a, &g);
    if (st != OAR_OK || (st = oar_qepilogue_init_nhwc(&e, in, out[0], a + 4)) != OAR_OK) return st;
    int32_t xzp = (int32_t)oar_dtypes[in[QL_XZP]->dtype].load_i64(oar_tensor_ptr(in[QL_XZP]));
    int64_t cg = g.c / g.groups, og = g.o / g.groups, kg = cg * g.kh * g.kw, rows = g.n * g.oh * g.ow;
    uint8_t *col = malloc((size_t)(rows * kg > 0 ? rows * kg : 1));
    int8_t *wp = malloc((size_t)(g.o * kg > 0 ? g.o * kg : 1));
    if (!col || !wp) {
        free(col), free(wp), oar_qepilogue_free(&e);
        return oar_error(OAR_ERR_OOM, "qconv2d_nhwc: out of memory for a %lld x %lld column buffer", (long long)rows,
                         (long long)kg);
    }
    const int8_t *w = (const int8_t *)oar_tensor_ptr(in[QL_W]);
    for (int64_t o = 0; o < g.o; o++)
        for (int64_t c = 0; c < cg; c++)
            for (int64_t t = 0; t < g.kh * g.kw; t++) wp[o * kg + t * cg + c] = w[(o * cg + c) * g.kh * g.kw + t];
    size_t osz = oar_dtypes[out[0]->dtype].size;
    const float *res = in[QL_RES] && !e.qr.on ? (const float *)oar_tensor_ptr(in[QL_RES]) : NULL;
    const uint8_t *rq = e.qr.on ? (const uint8_t *)oar_tensor_ptr(in[QL_RES]) : NULL;
    for (int64_t gr = 0; gr < g.groups && st == OAR_OK; gr++) {
        im2col_job ij = {.g = &g, .x = (const uint8_t *)oar_tensor_ptr(in[QL_X]), .col = col, .pad = (uint8_t)xzp,
                         .gr = gr, .cg = cg, .kg = kg};
        oar_parallel_for(g.n * g.oh, 1 + 4096 / (g.ow * kg + 1), im2col_nhwc_rows, &ij);
        oar_qepilogue eg = e; /* this group's channels */
        eg.comb += gr * og;
        if (eg.bias) eg.bias += gr * og;
        linear_emit l = {.e = &eg, .res = res ? res + gr * og : NULL,
                         .out = (char *)oar_tensor_ptr(out[0]) + (size_t)(gr * og) * osz, .osz = osz, .n = g.o};
        qres_emit qe = {.e = &eg, .res = rq ? rq + gr * og : NULL, .out = (uint8_t *)l.out, .n = g.o};
        oar_qweight_id wid = oar_qweight_id_of(in[QL_W], gr * og * kg);
        wid.offset = -1 - wid.offset;
        st = oar_qgemm(vnni, col, in[QL_X]->dtype == OAR_I8, xzp, wp + gr * og * kg, &wid, rows, og, kg,
                       rq ? emit_qres : emit_linear, rq ? (void *)&qe : (void *)&l);
    }
    free(col), free(wp);
    oar_qepilogue_free(&e);
    return st;
}

static oar_status qconv_nhwc_vnni(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                  int n_out, const oar_attr *a) {
    return oar_qconv_gemm_nhwc(in, out, a, true);
}
static oar_status qconv_nhwc_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                  int n_out, const oar_attr *a) {
    return oar_qconv_gemm_nhwc(in, out, a, false);
}

static oar_status qconv_vnni(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                             int n_out, const oar_attr *a) {
    return oar_qconv_gemm(in, out, a, true);
}
static oar_status qconv_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                             int n_out, const oar_attr *a) {
    return oar_qconv_gemm(in, out, a, false);
}

static oar_status qlinear_vnni(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                               int n_out, const oar_attr *a) {
    return qlinear_run(in, out, a, true);
}
static oar_status qlinear_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                               int n_out, const oar_attr *a) {
    return qlinear_run(in, out, a, false);
}

static bool supports_vnni(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    return use_vnni();
}
/* The exact AVX2 path also serves AVX-512 CPUs without VNNI. */
static bool supports_avx2(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    return oar_cpu_has_avx2() && !use_vnni();
}

void oar_cpu_register_quant(void) {
    oar_cpu_register_qconv_direct();
    oar_cpu_register_qconv_dnnl();
    oar_cpu_register_qconv_direct_avx2();
    oar_cpu_register_qmax_pool();
    oar_cpu_register_quantize_fast();
    oar_cpu_register_qadd_fast();
    oar_cpu_register_qadd_avx512();
    uint32_t dts = OAR_DTYPE_BIT(OAR_U8) | OAR_DTYPE_BIT(OAR_I8);
    oar_register_kernel(OAR_OP_qlinear, (oar_kernel_entry){.device = OAR_CPU, .dtypes = dts, .impl = "avx512-vnni",
                                                           .priority = 20, .fn = qlinear_vnni, .supports = supports_vnni});
    oar_register_kernel(OAR_OP_qlinear, (oar_kernel_entry){.device = OAR_CPU, .dtypes = dts, .impl = "avx2-exact",
                                                           .priority = 10, .fn = qlinear_avx2, .supports = supports_avx2});
    oar_register_kernel(OAR_OP_qconv2d, (oar_kernel_entry){.device = OAR_CPU, .dtypes = dts, .impl = "avx512-vnni",
                                                           .priority = 20, .fn = qconv_vnni, .supports = supports_vnni});
    oar_register_kernel(OAR_OP_qconv2d, (oar_kernel_entry){.device = OAR_CPU, .dtypes = dts, .impl = "avx2-exact",
                                                           .priority = 10, .fn = qconv_avx2, .supports = supports_avx2});
    oar_register_kernel(OAR_OP_qconv2d_nhwc, (oar_kernel_entry){.device = OAR_CPU, .dtypes = dts, .impl = "avx512-vnni",
                                                                .priority = 20, .fn = qconv_nhwc_vnni,
                                                                .supports = supports_vnni});
    oar_register_kernel(OAR_OP_qconv2d_nhwc, (oar_kernel_entry){.device = OAR_CPU, .dtypes = dts, .impl = "avx2-exact",
                                                                .priority = 10, .fn = qconv_nhwc_avx2,
                                                                .supports = supports_avx2});
}

#else
void oar_cpu_register_quant(void) {}
oar_status oar_qgemm(bool vnni, const uint8_t *x, bool x_signed, int32_t x_zp, const int8_t *w,
                     const oar_qweight_id *wid, int64_t m, int64_t n, int64_t k, oar_qgemm_emit emit, void *user) {
    return oar_error(OAR_ERR_UNSUPPORTED, "qgemm: no fast int8 kernel on this architecture");
}
#endif
