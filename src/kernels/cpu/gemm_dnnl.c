/* dnnl_sgemm (row-major, like oar) on the calling thread: oar's pool splits large products
 * (oar_gemm), and an OpenMP team per call would fight it for the cores, as conv_dnnl.c
 * measured. The OpenMP thread count is per calling thread, hence the check on each call. */
#include "kernels/cpu/gemm_dnnl.h"

#ifdef OAR_HAVE_ONEDNN
#include "kernels/cpu/dnnl_engine.h"

#include <oneapi/dnnl/dnnl.h>
#ifdef OAR_HAVE_OPENMP
#include <omp.h>
#endif

/* Through the engine's first use, so dnnl_sgemm never runs before oneDNN's ISA cap is set. */
bool oar_gemm_dnnl_available(void) { return oar_dnnl_usable(); }

bool oar_sgemm_dnnl(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B,
                    int64_t ldb, float beta, float *C, int64_t ldc) {
    if (!oar_dnnl_usable()) return false;
    if (k == 0) { /* dnnl_sgemm leaves C as it was: do the beta part here */
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
        return true;
    }
#ifdef OAR_HAVE_OPENMP
    if (omp_get_max_threads() != 1) omp_set_num_threads(1);
#endif
    return dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, A, lda, B, ldb, beta, C, ldc) == dnnl_success;
}

#else

bool oar_gemm_dnnl_available(void) { return false; }

bool oar_sgemm_dnnl(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B,
                    int64_t ldb, float beta, float *C, int64_t ldc) {
    (void)ta; (void)tb; (void)m; (void)n; (void)k; (void)A; (void)lda; (void)B; (void)ldb; (void)beta; (void)C;
    (void)ldc;
    return false;
}

#endif
