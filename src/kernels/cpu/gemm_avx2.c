/* oar's f32 GEMM, BLIS-style, with a 6 x 16 (AVX2/FMA) or 6 x 32 (AVX-512F) register tile:
 * 12 accumulators, each step two loads of op(B), six broadcasts of op(A), twelve FMAs.
 * Small products are where libraries lose most to call overhead, so nothing is copied that
 * need not be: full row panels of op(A) are read in place (either transpose), and op(B) too
 * when it is not transposed (see DIRECT_B_ALIAS); otherwise each [kc x nr] panel of op(B) is
 * packed k-major just before use (8x8 register transposes for B^T). The last, partial row
 * panel of A is copied with zero padding once per K block. Buffers are per-thread scratch
 * that only grows (no allocation per call once warm). Edge tiles run the same micro-kernel
 * into a small tile and copy the valid part, so every element of C sees the same arithmetic,
 * in both tile widths, the arithmetic of oar_sgemm_plain. */
#include "kernels/cpu/gemm_avx2.h"

#include "kernels/cpu/cpu_kernels.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MR OAR_GEMM_MR
/* K blocks of 256 keep a [KC x nr] panel of B (16 or 32 KiB) in L1 while row panels of A
 * pass over it. */
#define KC OAR_GEMM_KC

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* ---- per-thread scratch: grown on demand, freed when the thread exits */
static pthread_key_t g_scratch_key;
static pthread_once_t g_scratch_once = PTHREAD_ONCE_INIT;
static _Thread_local float *tl_scratch;
static _Thread_local size_t tl_scratch_floats;

static void scratch_key_init(void) { (void)pthread_key_create(&g_scratch_key, free); }

float *oar_gemm_scratch(size_t floats) {
    if (floats <= tl_scratch_floats) return tl_scratch;
    pthread_once(&g_scratch_once, scratch_key_init);
    void *p = NULL;
    if (posix_memalign(&p, 64, floats * sizeof(float)) != 0) return NULL;
    free(tl_scratch);
    tl_scratch = p;
    tl_scratch_floats = floats;
    (void)pthread_setspecific(g_scratch_key, p);
    return tl_scratch;
}

/* C = beta * C for beta other than 0 and 1 (0 never reads C; 1 leaves it). */
static void scale_c(int64_t m, int64_t n, float beta, float *C, int64_t ldc) {
    for (int64_t i = 0; i < m; i++) {
        float *c = C + i * ldc;
        if (beta == 0.0f) memset(c, 0, sizeof(float) * (size_t)n);
        else
            for (int64_t j = 0; j < n; j++) c[j] *= beta;
    }
}

/* The defining arithmetic, element by element: per K block of KC, acc = 0, acc = fma(a, b,
 * acc) in k order, then C = acc (first block when beta is 0) or C = C + acc. Also the fallback
 * when no scratch can be had, so a result never depends on memory pressure. */
static void gemm_plain(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B,
                       int64_t ldb, bool first_stores, float *C, int64_t ldc) {
    for (int64_t pc = 0; pc < k; pc += KC) {
        int64_t kc = min64(KC, k - pc);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                float acc = 0.0f;
                for (int64_t p = pc; p < pc + kc; p++)
                    acc = fmaf(ta ? A[p * lda + i] : A[i * lda + p], tb ? B[j * ldb + p] : B[p * ldb + j], acc);
                float *c = C + i * ldc + j;
                *c = pc == 0 && first_stores ? acc : *c + acc;
            }
    }
}

void oar_sgemm_plain(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B,
                     int64_t ldb, float beta, float *C, int64_t ldc) {
    if (m <= 0 || n <= 0) return;
    if (beta != 1.0f && (k == 0 || beta != 0.0f)) scale_c(m, n, beta, C, ldc);
    if (k > 0) gemm_plain(ta, tb, m, n, k, A, lda, B, ldb, beta == 0.0f, C, ldc);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include "kernels/cpu/avx2_math.h"

#define OAR_AVX512 __attribute__((target("avx512f,avx2,fma")))

bool oar_gemm_avx2_available(void) { return oar_cpu_has_avx2(); }

bool oar_gemm_avx512_available(void) { return oar_cpu_has_avx512(); }

typedef oar_gemm_micro_fn micro_fn; /* what it computes: gemm_avx2.h */

/* Row r of the tile to C: c = acc, or c + acc when adding. */
#define OAR_STORE_ROW(P, VEC, r, lo, hi)                                                                   \
    do {                                                                                                   \
        float *cr = c + (r) * ldc;                                                                         \
        if (add) lo = P##_add_ps(P##_loadu_ps(cr), lo), hi = P##_add_ps(P##_loadu_ps(cr + VEC), hi);      \
        P##_storeu_ps(cr, lo);                                                                             \
        P##_storeu_ps(cr + VEC, hi);                                                                       \
    } while (0)

/* One micro-kernel body for both vector widths (VEC lanes of type V, intrinsics prefixed P):
 * per element the same FMA chain, so the 6x16 and 6x32 tiles give bitwise equal results. */
#define OAR_MICRO_KERNEL(NAME, ATTR, V, VEC, P, SET1)                                                      \
    ATTR static void NAME(int64_t kc, const float *a, int64_t ars, int64_t aps, const float *b, int64_t bps, \
                          float *c, int64_t ldc, bool add) {                                               \
        V c00 = P##_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00,        \
          c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;                                          \
        const float *a0 = a, *a1 = a + ars, *a2 = a + 2 * ars, *a3 = a + 3 * ars, *a4 = a + 4 * ars,       \
                    *a5 = a + 5 * ars;                                                                     \
        _Pragma("GCC unroll 4") for (int64_t p = 0; p < kc; p++) {                                         \
            V b0 = P##_loadu_ps(b), b1 = P##_loadu_ps(b + VEC), av;                                        \
            av = SET1(a0), c00 = P##_fmadd_ps(av, b0, c00), c01 = P##_fmadd_ps(av, b1, c01);               \
            av = SET1(a1), c10 = P##_fmadd_ps(av, b0, c10), c11 = P##_fmadd_ps(av, b1, c11);               \
            av = SET1(a2), c20 = P##_fmadd_ps(av, b0, c20), c21 = P##_fmadd_ps(av, b1, c21);               \
            av = SET1(a3), c30 = P##_fmadd_ps(av, b0, c30), c31 = P##_fmadd_ps(av, b1, c31);               \
            av = SET1(a4), c40 = P##_fmadd_ps(av, b0, c40), c41 = P##_fmadd_ps(av, b1, c41);               \
            av = SET1(a5), c50 = P##_fmadd_ps(av, b0, c50), c51 = P##_fmadd_ps(av, b1, c51);               \
            a0 += aps, a1 += aps, a2 += aps, a3 += aps, a4 += aps, a5 += aps;                              \
            b += bps;                                                                                      \
        }                                                                                                  \
        OAR_STORE_ROW(P, VEC, 0, c00, c01);                                                                \
        OAR_STORE_ROW(P, VEC, 1, c10, c11);                                                                \
        OAR_STORE_ROW(P, VEC, 2, c20, c21);                                                                \
        OAR_STORE_ROW(P, VEC, 3, c30, c31);                                                                \
        OAR_STORE_ROW(P, VEC, 4, c40, c41);                                                                \
        OAR_STORE_ROW(P, VEC, 5, c50, c51);                                                                \
    }

#define OAR_BCAST256(p) _mm256_broadcast_ss(p)
#define OAR_BCAST512(p) _mm512_set1_ps(*(p))
OAR_MICRO_KERNEL(micro_6x16, OAR_AVX2, __m256, 8, _mm256, OAR_BCAST256)
OAR_MICRO_KERNEL(micro_6x32, OAR_AVX512, __m512, 16, _mm512, OAR_BCAST512)
#undef OAR_MICRO_KERNEL
#undef OAR_STORE_ROW

oar_gemm_micro_fn oar_gemm_micro(int nr) {
    if (nr == 16 && oar_gemm_avx2_available()) return micro_6x16;
    if (nr == 32 && oar_gemm_avx512_available()) return micro_6x32;
    return NULL;
}

/* 8 rows of 8 floats (row stride ld) transposed into 8 rows at dst (row stride NRmax...). */
OAR_AVX2 static void transpose_8x8(const float *s, int64_t ld, float *d, int64_t dld) {
    __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + ld), r2 = _mm256_loadu_ps(s + 2 * ld),
           r3 = _mm256_loadu_ps(s + 3 * ld), r4 = _mm256_loadu_ps(s + 4 * ld), r5 = _mm256_loadu_ps(s + 5 * ld),
           r6 = _mm256_loadu_ps(s + 6 * ld), r7 = _mm256_loadu_ps(s + 7 * ld);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
           t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
           t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
           u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
           u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
           u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(d + 0 * dld, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(d + 1 * dld, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(d + 2 * dld, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(d + 3 * dld, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(d + 4 * dld, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(d + 5 * dld, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(d + 6 * dld, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(d + 7 * dld, _mm256_permute2f128_ps(u3, u7, 0x31));
}

/* Columns [j0, j0 + w) of op(B) rows [0, kc) (B already offset to row 0) into one k-major
 * panel of nr columns, zero past w. */
OAR_AVX2 static void pack_b_panel(bool tb, int64_t kc, int64_t j0, int64_t w, int nr, const float *B, int64_t ldb,
                                  float *restrict dst) {
    if (!tb) {
        for (int64_t p = 0; p < kc; p++) {
            const float *s = B + p * ldb + j0;
            float *d = dst + p * nr;
            int64_t c = 0;
            for (; c + 8 <= w; c += 8) _mm256_storeu_ps(d + c, _mm256_loadu_ps(s + c));
            for (; c < w; c++) d[c] = s[c];
            for (; c < nr; c++) d[c] = 0.0f;
        }
        return;
    }
    /* op(B)[p][j] = B[j][p]: 8x8 blocks transposed in registers, scalar at the edges */
    for (int64_t c0 = 0; c0 < nr; c0 += 8) {
        int64_t cw = w - c0 < 8 ? (w - c0 > 0 ? w - c0 : 0) : 8, p = 0;
        if (cw == 8)
            for (; p + 8 <= kc; p += 8) transpose_8x8(B + (j0 + c0) * ldb + p, ldb, dst + p * nr + c0, nr);
        for (; p < kc; p++) {
            float *d = dst + p * nr + c0;
            int64_t c = 0;
            for (; c < cw; c++) d[c] = B[(j0 + c0 + c) * ldb + p];
            for (; c < 8; c++) d[c] = 0.0f;
        }
    }
}

/* Rows [i0, i0 + h) of op(A) over k [0, kc) (A already offset) into a k-major [kc x MR]
 * panel, zero past h: only for the last, partial row panel (full ones are read in place). */
static void pack_a_panel(bool ta, int64_t kc, int64_t i0, int64_t h, const float *A, int64_t lda, float *restrict dst) {
    for (int64_t p = 0; p < kc; p++) {
        float *d = dst + p * MR;
        int64_t r = 0;
        for (; r < h; r++) d[r] = ta ? A[p * lda + i0 + r] : A[(i0 + r) * lda + p];
        for (; r < MR; r++) d[r] = 0.0f;
    }
}

typedef struct kernel {
    int nr;
    micro_fn micro;
} kernel;

/* op(B) is read in place when it is not transposed: the loop over row panels of A is
 * innermost, so each [kc x nr] panel of B is fetched once and then reused from L1. Except when
 * its rows lie a multiple of 4 KiB apart: they then share a few L1 sets and evict each other
 * (16 x 1024 x 144 ran at 130 GFLOP/s in place, 142 packed; 32 x 256 x 288 at 222 in place,
 * 179 packed). Otherwise (and always for B^T) each panel is packed just before its use. */
#define DIRECT_B_ALIAS 1024

static void gemm_blocked(const kernel *kn, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *A,
                         int64_t lda, const float *B, int64_t ldb, bool first_stores, float *C, int64_t ldc) {
    const int nr = kn->nr;
    bool direct_b = !tb && ldb % DIRECT_B_ALIAS != 0;
    int64_t kcb = min64(KC, k);
    /* one packed panel of B, an edge panel of A, a tile */
    size_t b_floats = (size_t)(kcb * nr), a_floats = (size_t)(kcb * MR);
    float *buf = oar_gemm_scratch(b_floats + a_floats + (size_t)(MR * nr));
    if (!buf) {
        gemm_plain(ta, tb, m, n, k, A, lda, B, ldb, first_stores, C, ldc);
        return;
    }
    float *Bp = buf, *Ap = buf + b_floats, *tile = Ap + a_floats;
    for (int64_t pc = 0; pc < k; pc += KC) {
        int64_t kc = min64(KC, k - pc);
        bool add = pc > 0 || !first_stores;
        const float *Bk = tb ? B + pc : B + pc * ldb; /* op(B) from row pc */
        if (m % MR) /* the partial row panel, once per K block */
            pack_a_panel(ta, kc, m - m % MR, m % MR, ta ? A + pc * lda : A + pc, lda, Ap);
        for (int64_t j0 = 0; j0 < n; j0 += nr) {
            int64_t w = min64(nr, n - j0), bps = nr;
            const float *b = Bp;
            if (direct_b && w == nr) b = Bk + j0, bps = ldb;
            else pack_b_panel(tb, kc, j0, w, nr, Bk, ldb, Bp);
            /* row panels innermost: the B panel stays in L1 across them */
            for (int64_t i0 = 0; i0 < m; i0 += MR) {
                int64_t h = min64(MR, m - i0);
                float *c = C + i0 * ldc + j0;
                const float *a = ta ? A + pc * lda + i0 : A + i0 * lda + pc;
                int64_t ars = ta ? 1 : lda, aps = ta ? lda : 1;
                if (h < MR) a = Ap, ars = 1, aps = MR;
                if (h == MR && w == nr) {
                    kn->micro(kc, a, ars, aps, b, bps, c, ldc, add);
                    continue;
                }
                kn->micro(kc, a, ars, aps, b, bps, tile, nr, false);
                for (int64_t r = 0; r < h; r++)
                    for (int64_t q = 0; q < w; q++)
                        c[r * ldc + q] = add ? c[r * ldc + q] + tile[r * nr + q] : tile[r * nr + q];
            }
        }
    }
}

static void gemm_driver(const kernel *kn, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *A,
                        int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (m <= 0 || n <= 0) return;
    if (beta != 1.0f && (k == 0 || beta != 0.0f)) scale_c(m, n, beta, C, ldc);
    if (k > 0) gemm_blocked(kn, ta, tb, m, n, k, A, lda, B, ldb, beta == 0.0f, C, ldc);
}

void oar_sgemm_avx2(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B,
                    int64_t ldb, float beta, float *C, int64_t ldc) {
    static const kernel kn = {16, micro_6x16};
    gemm_driver(&kn, ta, tb, m, n, k, A, lda, B, ldb, beta, C, ldc);
}

void oar_sgemm_avx512(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *A, int64_t lda,
                      const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    /* 16 columns or fewer fill at most half a 32-wide tile: the 16-wide one does the same
     * arithmetic on less padding */
    static const kernel kn = {32, micro_6x32}, narrow = {16, micro_6x16};
    gemm_driver(n <= 16 ? &narrow : &kn, ta, tb, m, n, k, A, lda, B, ldb, beta, C, ldc);
}

#else

bool oar_gemm_avx2_available(void) { return false; }
bool oar_gemm_avx512_available(void) { return false; }
oar_gemm_micro_fn oar_gemm_micro(int nr) {
    (void)nr;
    return NULL;
}

/* never chosen on these targets (not available); kept total so that a forced call still
 * computes the product, with the same arithmetic */
void oar_sgemm_avx2(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B,
                    int64_t ldb, float beta, float *C, int64_t ldc) {
    oar_sgemm_plain(ta, tb, m, n, k, A, lda, B, ldb, beta, C, ldc);
}

void oar_sgemm_avx512(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *A, int64_t lda,
                      const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    oar_sgemm_plain(ta, tb, m, n, k, A, lda, B, ldb, beta, C, ldc);
}

#endif
