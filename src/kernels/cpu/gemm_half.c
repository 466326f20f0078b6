/* oar's f32 GEMM on bf16/f16 matrices. On a CPU without native bf16 a bf16 matmul is f32
 * arithmetic on widened values; the via-f32 path made that an f32 copy of each operand, the f32
 * GEMM and a rounding pass over the result: three passes over memory the GEMM does not need,
 * which made O2 steps slower than f32 ones. Here the widening happens inside the packing the
 * GEMM does anyway, and the rounding when a block of C is stored.
 *
 * Loops (BLIS order): blocks of MC rows, then NC columns, then K blocks of KC. Per K block the
 * [mc x kc] block of op(A) is packed (widened) into k-major panels of MR rows; per column panel
 * a [kc x nr] panel of op(B) is packed (widened), and the micro-kernel of gemm_avx2.c runs over
 * the row panels with that panel in L1. The block of C accumulates in an f32 stage across the K
 * blocks and is rounded into C once. Unlike the f32 kernel nothing is read in place (16-bit
 * values must be widened): column blocks are the outer loop, and op(B)'s panels of a column
 * block (every K block) are packed by its first row block and reused by the others, so a
 * linear's weight is widened once per call, not once per 192 rows (5% of a compiled O2
 * gpt-mini step at the AVX2 cap went to pack_b).
 * Every element gets oar_hgemm_plain's arithmetic, whatever the blocks or the tile width. */
#include "kernels/cpu/gemm_half.h"

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm_avx2.h"
#include "kernels/cpu/nn_half.h"

#include <math.h>
#include <string.h>

#define MR OAR_GEMM_MR
#define KC OAR_GEMM_KC
/* op(B)'s panels are packed once per block of MC rows: 192 rows keep that to a few % of the
 * time on gpt-mini's [1024, 256] activations (thread CPU time at the AVX2 cap, 96 rows: ~5%
 * slower), with the packed A block (192 x 256 floats) and the stage (192 x 512) in L2 */
#define MC 192
#define NC 512
/* op(B)'s packed column block (k x 512 floats) is kept for the other row blocks up to this
 * size (k <= 2048); past it each row block packs its own panels again */
#define B_KEEP_FLOATS ((int64_t)1 << 20)

static float widen1(const void *p, int64_t i, oar_dtype dt) {
    uint16_t h = ((const uint16_t *)p)[i];
    return dt == OAR_BF16 ? oar_bf16_to_f32(h) : oar_f16_to_f32(h);
}

void oar_hgemm_plain(oar_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *A, int64_t lda,
                     const void *B, int64_t ldb, float beta, void *C, int64_t ldc) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            uint16_t *cp = (uint16_t *)C + i * ldc + j;
            float c = beta == 0.0f ? 0.0f : beta == 1.0f ? widen1(cp, 0, dt) : widen1(cp, 0, dt) * beta;
            for (int64_t pc = 0; pc < k; pc += KC) {
                float acc = 0.0f;
                for (int64_t p = pc; p < pc + KC && p < k; p++)
                    acc = fmaf(widen1(A, ta ? p * lda + i : i * lda + p, dt), widen1(B, tb ? j * ldb + p : p * ldb + j, dt),
                               acc);
                c = pc == 0 && beta == 0.0f ? acc : c + acc;
            }
            *cp = dt == OAR_BF16 ? oar_f32_to_bf16(c) : oar_f32_to_f16(c);
        }
}

#ifdef OAR_NN_SIMD

bool oar_hgemm_own_available(void) {
    static int f16c = -1;
    if (f16c < 0) f16c = strstr(oar_cpu_flags(), "f16c") != NULL;
    return f16c && oar_gemm_avx2_available();
}

/* op(A) rows [0, mc) over k [0, kc) (A already offset) into k-major panels of MR rows, zero
 * past mc: panel q at dst + q * kc * MR, element (p, r) at [p * MR + r]. Vector stores write
 * 8 floats where a row of a panel has 6; they go in increasing order, so the next store puts
 * the right values over the 2 extra ones, and the buffer has 8 floats to spare at the end. */
NN_AVX2H static void pack_a(oar_dtype dt, bool ta, int64_t kc, int64_t mc, const void *A, int64_t lda, float *dst) {
    const __m256 zero = _mm256_setzero_ps();
    const int kind = nn_kind(dt);
    for (int64_t i0 = 0; i0 < mc; i0 += MR, dst += kc * MR) {
        int64_t h = mc - i0 < MR ? mc - i0 : MR, p = 0;
        if (ta) { /* op(A)[i][p] = A[p][i]: the panel's rows lie together in each row of A */
            __m256i mask = nn_tail_mask(h);
            for (; p < kc; p++)
                _mm256_storeu_ps(dst + p * MR, i0 + 8 <= mc ? nn_ld(A, p * lda + i0, kind)
                                                             : nn_ld_tail(A, p * lda + i0, h, mask, 0.0f, kind));
            continue;
        }
        for (; p + 8 <= kc; p += 8) { /* 8 k values of each row, transposed */
            __m256 r[8];
            for (int q = 0; q < 8; q++) r[q] = q < h ? nn_ld(A, (i0 + q) * lda + p, kind) : zero;
            nn_transpose8(r);
            for (int q = 0; q < 8; q++) _mm256_storeu_ps(dst + (p + q) * MR, r[q]);
        }
        for (; p < kc; p++)
            for (int64_t q = 0; q < MR; q++) dst[p * MR + q] = q < h ? widen1(A, (i0 + q) * lda + p, dt) : 0;
    }
}

/* Columns [j0, j0 + w) of op(B) rows [0, kc) (B already offset to row 0) into one k-major
 * panel of nr columns, zero past w. */
NN_AVX2H static void pack_b(oar_dtype dt, bool tb, int64_t kc, int64_t j0, int64_t w, int nr, const void *B, int64_t ldb,
                            float *restrict dst) {
    const __m256 zero = _mm256_setzero_ps();
    const int kind = nn_kind(dt);
    if (!tb) {
        for (int64_t p = 0; p < kc; p++) {
            float *d = dst + p * nr;
            int64_t c = 0;
            for (; c + 8 <= w; c += 8) _mm256_storeu_ps(d + c, nn_ld(B, p * ldb + j0 + c, kind));
            if (c < w) _mm256_storeu_ps(d + c, nn_ld_tail(B, p * ldb + j0 + c, w - c, nn_tail_mask(w - c), 0.0f, kind));
            for (c = (w + 7) / 8 * 8; c < nr; c += 8) _mm256_storeu_ps(d + c, zero);
        }
        return;
    }
    /* op(B)[p][j] = B[j][p]: blocks of 8 columns x 8 k values transposed in registers */
    for (int64_t c0 = 0; c0 < nr; c0 += 8) {
        int64_t cw = w - c0 < 8 ? (w - c0 > 0 ? w - c0 : 0) : 8, p = 0;
        for (; p + 8 <= kc; p += 8) {
            __m256 r[8];
            for (int q = 0; q < 8; q++) r[q] = q < cw ? nn_ld(B, (j0 + c0 + q) * ldb + p, kind) : zero;
            nn_transpose8(r);
            for (int q = 0; q < 8; q++) _mm256_storeu_ps(dst + (p + q) * nr + c0, r[q]);
        }
        for (; p < kc; p++)
            for (int64_t q = 0; q < 8; q++) dst[p * nr + c0 + q] = q < cw ? widen1(B, (j0 + c0 + q) * ldb + p, dt) : 0;
    }
}

/* Rows [0, mc) of an f32 stage (row stride lds) rounded into C (row stride ldc), n columns */
NN_AVX2H static void store_c(oar_dtype dt, int64_t mc, int64_t n, const float *S, int64_t lds, void *C, int64_t ldc) {
    const int kind = nn_kind(dt);
    for (int64_t i = 0; i < mc; i++) {
        const float *s = S + i * lds;
        int64_t j = 0;
        for (; j + 8 <= n; j += 8) nn_st(C, i * ldc + j, _mm256_loadu_ps(s + j), kind);
        if (j < n) {
            __m256i mask = nn_tail_mask(n - j);
            nn_st_tail(C, i * ldc + j, n - j, mask, _mm256_maskload_ps(s + j, mask), kind);
        }
    }
}

/* The stage before the first K block: beta·C widened (nothing for beta 0: that block stores) */
NN_AVX2H static void load_c(oar_dtype dt, int64_t mc, int64_t n, float beta, const void *C, int64_t ldc, float *S,
                            int64_t lds) {
    const int kind = nn_kind(dt);
    for (int64_t i = 0; i < mc; i++) {
        float *s = S + i * lds;
        int64_t j = 0;
        for (; j + 8 <= n; j += 8) _mm256_storeu_ps(s + j, nn_ld(C, i * ldc + j, kind));
        for (; j < n; j++) s[j] = widen1(C, i * ldc + j, dt);
        if (beta != 1.0f)
            for (j = 0; j < n; j++) s[j] *= beta;
    }
}

void oar_hgemm_own(int nr, oar_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *A,
                   int64_t lda, const void *B, int64_t ldb, float beta, void *C, int64_t ldc) {
    if (m <= 0 || n <= 0) return;
    /* 16 columns or fewer fill at most half a 32-wide tile: the 16-wide one does the same
     * arithmetic on less padding (as oar_sgemm_avx512) */
    if (nr == 32 && n <= 16) nr = 16;
    oar_gemm_micro_fn micro = oar_gemm_micro(nr);
    int64_t kcb = k < KC ? k : KC, mcb = m < MC ? m : MC, ncb = n < NC ? n : NC;
    int64_t ncp = (ncb + nr - 1) / nr * nr; /* a column block's width in whole panels */
    bool keep_b = m > MC && k * ncp <= B_KEEP_FLOATS;
    size_t a_floats = (size_t)(((mcb + MR - 1) / MR * MR) * kcb + 8), b_floats = (size_t)(keep_b ? k * ncp : kcb * nr),
           t_floats = (size_t)(MR * nr), s_floats = (size_t)(mcb * ncb);
    float *buf = micro ? oar_gemm_scratch(a_floats + b_floats + t_floats + s_floats) : NULL;
    if (!buf) { /* no scratch (or no kernel): the same arithmetic, element by element */
        oar_hgemm_plain(dt, ta, tb, m, n, k, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    float *Ap = buf, *Bk = Ap + a_floats, *tile = Bk + b_floats, *S = tile + t_floats;
    const size_t es = sizeof(uint16_t);
    const char *a0 = A, *b0 = B;
    for (int64_t jc = 0; jc < n; jc += NC) {
        int64_t nc = n - jc < NC ? n - jc : NC, lds = nc;
        for (int64_t ic = 0; ic < m; ic += MC) {
            int64_t mc = m - ic < MC ? m - ic : MC;
            if (beta != 0.0f) load_c(dt, mc, nc, beta, (const char *)C + (ic * ldc + jc) * es, ldc, S, lds);
            else if (k == 0) memset(S, 0, sizeof(float) * (size_t)(mc * nc));
            for (int64_t pc = 0; pc < k; pc += KC) {
                int64_t kc = k - pc < KC ? k - pc : KC;
                bool add = pc > 0 || beta != 0.0f;
                pack_a(dt, ta, kc, mc, a0 + (ta ? pc * lda + ic : ic * lda + pc) * es, lda, Ap);
                const char *bk = b0 + (tb ? pc : pc * ldb) * es; /* op(B) from row pc */
                for (int64_t j0 = 0; j0 < nc; j0 += nr) {
                    int64_t w = nc - j0 < nr ? nc - j0 : nr;
                    /* kept: K block pc's panels start at pc * ncp, panel j0 / nr at j0 * kc in it */
                    float *Bp = keep_b ? Bk + pc * ncp + j0 * kc : Bk;
                    if (!keep_b || ic == 0) pack_b(dt, tb, kc, jc + j0, w, nr, bk, ldb, Bp);
                    for (int64_t i0 = 0; i0 < mc; i0 += MR) {
                        int64_t h = mc - i0 < MR ? mc - i0 : MR;
                        const float *a = Ap + i0 * kc; /* panel i0 / MR */
                        float *s = S + i0 * lds + j0;
                        if (h == MR && w == nr) {
                            micro(kc, a, 1, MR, Bp, nr, s, lds, add);
                            continue;
                        }
                        micro(kc, a, 1, MR, Bp, nr, tile, nr, false);
                        for (int64_t r = 0; r < h; r++)
                            for (int64_t q = 0; q < w; q++)
                                s[r * lds + q] = add ? s[r * lds + q] + tile[r * nr + q] : tile[r * nr + q];
                    }
                }
            }
            store_c(dt, mc, nc, S, lds, (char *)C + (ic * ldc + jc) * es, ldc);
        }
    }
}

#else

bool oar_hgemm_own_available(void) { return false; }

void oar_hgemm_own(int nr, oar_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *A,
                   int64_t lda, const void *B, int64_t ldb, float beta, void *C, int64_t ldc) {
    (void)nr;
    oar_hgemm_plain(dt, ta, tb, m, n, k, A, lda, B, ldb, beta, C, ldc);
}

#endif
