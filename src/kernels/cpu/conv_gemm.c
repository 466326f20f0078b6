/* f32 GEMM for the convolution kernels. With OpenBLAS this is oar_gemm, which splits large
 * products over oar's pool; smaller ones run on the calling thread, which is what lets the
 * conv kernels thread over the batch instead. */
#include "kernels/cpu/conv_gemm.h"

#include <string.h>

#ifdef OAR_HAVE_OPENBLAS
#include "kernels/cpu/gemm_blas.h"

void oar_conv_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                    const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    oar_gemm(OAR_F32, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

bool oar_conv_sgemm_threads_itself(int64_t m, int64_t n, int64_t k) { return oar_gemm_splits(m, n, k); }

#else

/* Rows of C accumulate scaled rows of op(B) (contiguous inner loops) when B is [k, n]; with
 * B stored [n, k] each entry is a dot product, split over 8 lanes so it vectorizes. */
void oar_conv_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                    const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    for (int64_t i = 0; i < m; i++) {
        float *restrict ci = c + i * ldc;
        if (beta == 0.0f) memset(ci, 0, sizeof(float) * (size_t)n);
        if (!tb) {
            for (int64_t p = 0; p < k; p++) {
                float av = ta ? a[p * lda + i] : a[i * lda + p];
                const float *restrict bp = b + p * ldb;
                for (int64_t j = 0; j < n; j++) ci[j] += av * bp[j];
            }
            continue;
        }
        for (int64_t j = 0; j < n; j++) {
            const float *restrict bj = b + j * ldb;
            float lane[8] = {0};
            int64_t p = 0;
            if (!ta) {
                const float *restrict ai = a + i * lda;
                for (; p + 8 <= k; p += 8)
                    for (int u = 0; u < 8; u++) lane[u] += ai[p + u] * bj[p + u];
                for (; p < k; p++) lane[0] += ai[p] * bj[p];
            } else {
                for (; p < k; p++) lane[0] += a[p * lda + i] * bj[p];
            }
            ci[j] += ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
        }
    }
}

bool oar_conv_sgemm_threads_itself(int64_t m, int64_t n, int64_t k) {
    (void)m; (void)n; (void)k;
    return false;
}

#endif
