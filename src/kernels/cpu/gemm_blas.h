/* Helpers shared by the BLAS-backed kernels (cpu_gemm.c, gemm_einsum.c): the GEMM call for
 * f32/f64 and the description of a strided matrix operand, which BLAS reads row-major,
 * column-major (the Trans flag), or after packing it densely. Only built with OpenBLAS. */
#ifndef OAR_GEMM_BLAS_H
#define OAR_GEMM_BLAS_H

#include "ops/op.h"

#ifdef OAR_HAVE_OPENBLAS

/* Row-major C = op(A)·op(B) + beta·C in dtype dt (f32, f64, bf16 or f16: A, B and C all of
 * it). f32 runs on the backend oar_gemm_choose picks for the shape (gemm_select.h), f64 on
 * OpenBLAS; bf16/f16 compute in f32, on oar's kernel reading them directly (gemm_half.h) or
 * on a library through f32 copies, as oar_gemm_choose_half says. A large product is
 * split into row or column blocks over oar's thread pool, each a single-threaded call; inside
 * a parallel loop it runs whole on the calling thread. */
void oar_gemm(oar_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *A, int64_t lda,
              const void *B, int64_t ldb, double beta, void *C, int64_t ldc);
/* Below this many multiply-adds waking a pool worker costs more than it saves (OpenBLAS's
 * own threshold for threading is the same 2^18). */
#define OAR_GEMM_SPLIT_MIN_MACS 262144.0
/* Whether oar_gemm splits an [m, k]·[k, n] product over the pool (when not already inside a
 * parallel loop): callers that could thread over something else should not, then. */
bool oar_gemm_splits(int64_t m, int64_t n, int64_t k);
/* Keeps OpenBLAS on the calling thread: oar's pool does the threading (see oar_gemm). */
void oar_gemm_blas_single_thread(void);

/* A rows x cols matrix with element strides rs (rows) and cs (columns). */
typedef struct oar_gemm_mat {
    int64_t rows, cols, rs, cs;
    bool trans;  /* BLAS reads it column-major */
    bool pack;   /* neither layout fits: copy it into a dense row-major buffer first */
    int64_t ld;
} oar_gemm_mat;

/* Sets trans, pack and ld from the shape and strides. */
void oar_gemm_mat_layout(oar_gemm_mat *m);
/* The transpose of m (rows and columns swapped), layout chosen afresh. */
oar_gemm_mat oar_gemm_mat_t(const oar_gemm_mat *m);
/* Copies the matrix at src into dst, dense row-major (16-bit, f32 or f64 by element size). */
void oar_gemm_mat_pack(const oar_gemm_mat *m, const char *src, size_t es, char *dst);
/* Whether v fits BLAS's int arguments. */
bool oar_gemm_fits(int64_t v);

/* Runs the f32 kernel fn on f32 copies of f16/bf16 inputs and converts its result into
 * out[0]: the copies cost O(inputs + output) against the product's O(mnk). */
oar_status oar_gemm_via_f32(oar_kernel_fn fn, const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                            oar_tensor *const *out, const oar_attr *attrs);
#define OAR_GEMM_HALF_DTYPES (OAR_DTYPE_BIT(OAR_F16) | OAR_DTYPE_BIT(OAR_BF16))

/* For tests: true makes the f16/bf16 matmul and linear kernels take the via-f32 path above
 * (the one before oar_gemm read 16-bit matrices), false (the default) the direct one. */
void oar_gemm_half_via_copies(bool on);

/* Registers the GEMM-backed einsum kernel (gemm_einsum.c). */
void oar_cpu_register_gemm_einsum(void);
#endif

#endif
