/* oneDNN's dnnl_sgemm as one of oar_gemm's backends (gemm_dnnl.c). */
#ifndef OAR_GEMM_DNNL_H
#define OAR_GEMM_DNNL_H

#include <stdbool.h>
#include <stdint.h>

/* Whether the build has oneDNN. */
bool oar_gemm_dnnl_available(void);
/* Row-major C = op(A)·op(B) + beta·C on the calling thread; false when oneDNN declines
 * (then C is untouched and the caller runs another backend). */
bool oar_sgemm_dnnl(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B,
                    int64_t ldb, float beta, float *C, int64_t ldc);

#endif
