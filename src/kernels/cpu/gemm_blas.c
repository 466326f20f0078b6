/* The BLAS call and strided-operand layouts shared by the GEMM-backed kernels. */
#include "kernels/cpu/gemm_blas.h"
#include "kernels/cpu/cpu_kernels.h"

#ifdef OAR_HAVE_OPENBLAS
#include "kernels/cpu/gemm_avx2.h"
#include "kernels/cpu/gemm_dnnl.h"
#include "kernels/cpu/gemm_half.h"
#include "kernels/cpu/gemm_select.h"

#include <cblas.h>
#include <limits.h>

/* OpenBLAS runs on the calling thread only: its own workers spin on sched_yield for about
 * 0.1 s after every threaded call, fighting oar's pool for the cores. oar splits large GEMMs
 * over its pool instead (oar_gemm), so one set of threads exists. */
void oar_gemm_blas_single_thread(void) { openblas_set_num_threads(1); }

/* One GEMM on the calling thread; f32 through the backend chosen for the whole product. */
static void gemm_1(oar_dtype dt, oar_gemm_backend be, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                   const void *A, int64_t lda, const void *B, int64_t ldb, double beta, void *C, int64_t ldc) {
    enum CBLAS_TRANSPOSE fa = ta ? CblasTrans : CblasNoTrans, fb = tb ? CblasTrans : CblasNoTrans;
    if (dt == OAR_BF16 || dt == OAR_F16) { /* oar_gemm sends only oar's kernel here */
        oar_hgemm_own(be == OAR_GEMM_AVX512 ? 32 : 16, dt, ta, tb, m, n, k, A, lda, B, ldb, (float)beta, C, ldc);
        return;
    }
    if (dt == OAR_F32 && be == OAR_GEMM_AVX2) {
        oar_sgemm_avx2(ta, tb, m, n, k, A, lda, B, ldb, (float)beta, C, ldc);
        return;
    }
    if (dt == OAR_F32 && be == OAR_GEMM_AVX512) {
        oar_sgemm_avx512(ta, tb, m, n, k, A, lda, B, ldb, (float)beta, C, ldc);
        return;
    }
    /* should oneDNN decline a call (any status but success), OpenBLAS runs it: the same for
     * every run of that shape */
    if (dt == OAR_F32 && be == OAR_GEMM_DNNL && oar_sgemm_dnnl(ta, tb, m, n, k, A, lda, B, ldb, (float)beta, C, ldc))
        return;
    if (dt == OAR_F32)
        cblas_sgemm(CblasRowMajor, fa, fb, (int)m, (int)n, (int)k, 1.0f, A, (int)lda, B, (int)ldb, (float)beta, C,
                    (int)ldc);
    else
        cblas_dgemm(CblasRowMajor, fa, fb, (int)m, (int)n, (int)k, 1.0, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}

/* Parts of the split dim are multiples of this, a whole number of BLAS micro-tiles. */
#define SPLIT_BLOCK 16

/* Deterministic mode: parts of this many rows (or columns), each one BLAS call whichever thread
 * runs it, so the calls, and the bits, are the same at any thread count. */
#define DET_BLOCK (8 * SPLIT_BLOCK)

bool oar_gemm_splits(int64_t m, int64_t n, int64_t k) {
    return (m >= 2 * SPLIT_BLOCK || n >= 2 * SPLIT_BLOCK) && (double)m * (double)n * (double)k > OAR_GEMM_SPLIT_MIN_MACS &&
           (oar_get_num_threads() > 1 || oar_get_deterministic());
}

typedef struct gemm_job {
    oar_dtype dt;
    oar_gemm_backend be;
    bool ta, tb, split_m, det;
    int64_t m, n, k, lda, ldb, ldc;
    const char *A, *B;
    char *C;
    double beta;
} gemm_job;

/* Blocks [b, e) of rows of C (split_m) or of its columns, with the matching slice of A or B. */
static void gemm_rows(const gemm_job *j, int64_t lo, int64_t hi);

static void gemm_part(void *ctx, int64_t b, int64_t e) {
    const gemm_job *j = ctx;
    int64_t dim = j->split_m ? j->m : j->n;
    if (j->det) { /* one call per fixed block, however the blocks were dealt to threads */
        for (int64_t p = b; p < e; p++) gemm_rows(j, p * DET_BLOCK, (p + 1) * DET_BLOCK < dim ? (p + 1) * DET_BLOCK : dim);
        return;
    }
    gemm_rows(j, b * SPLIT_BLOCK, e * SPLIT_BLOCK < dim ? e * SPLIT_BLOCK : dim);
}

static void gemm_rows(const gemm_job *j, int64_t lo, int64_t hi) {
    int64_t es = (int64_t)oar_dtypes[j->dt].size;
    if (j->split_m)
        gemm_1(j->dt, j->be, j->ta, j->tb, hi - lo, j->n, j->k, j->A + (j->ta ? lo : lo * j->lda) * es, j->lda,
               j->B, j->ldb, j->beta, j->C + lo * j->ldc * es, j->ldc);
    else
        gemm_1(j->dt, j->be, j->ta, j->tb, j->m, hi - lo, j->k, j->A, j->lda, j->B + (j->tb ? lo * j->ldb : lo) * es,
               j->ldb, j->beta, j->C + lo * es, j->ldc);
}

/* A stored rows x cols 16-bit matrix (leading dimension ld) into a dense f32 one, or back */
static void widen_mat(oar_dtype dt, int64_t rows, int64_t cols, const uint16_t *s, int64_t ld, float *d) {
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            d[i * cols + j] = dt == OAR_BF16 ? oar_bf16_to_f32(s[i * ld + j]) : oar_f16_to_f32(s[i * ld + j]);
}

/* bf16/f16 on a library: f32 copies of the operands (and of C unless beta is 0), the f32 GEMM,
 * C rounded. Only the narrow and short shapes, forced backends and CPUs without AVX2 get here. */
static void gemm_half_copies(oar_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *A,
                             int64_t lda, const void *B, int64_t ldb, double beta, void *C, int64_t ldc) {
    int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    size_t bytes = sizeof(float) * (size_t)(ar * ac + br * bc + m * n);
    float *a = oar_alloc(bytes), *b = a ? a + ar * ac : NULL, *c = a ? b + br * bc : NULL;
    if (!a) { /* the same arithmetic as oar's kernel, needing no memory */
        oar_hgemm_plain(dt, ta, tb, m, n, k, A, lda, B, ldb, (float)beta, C, ldc);
        return;
    }
    widen_mat(dt, ar, ac, A, lda, a);
    widen_mat(dt, br, bc, B, ldb, b);
    if (beta != 0.0) widen_mat(dt, m, n, C, ldc, c);
    oar_gemm(OAR_F32, ta, tb, m, n, k, a, ac, b, bc, beta, c, n);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float v = c[i * n + j];
            ((uint16_t *)C)[i * ldc + j] = dt == OAR_BF16 ? oar_f32_to_bf16(v) : oar_f32_to_f16(v);
        }
    oar_free(a, bytes);
}

void oar_gemm(oar_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *A, int64_t lda,
              const void *B, int64_t ldb, double beta, void *C, int64_t ldc) {
    /* chosen for the whole product and the configured thread count, whether or not it is
     * split here, so the same product always runs the same backend */
    bool det = oar_get_deterministic(); /* then neither the backend nor the parts follow the threads */
    int nt = det ? 1 : oar_get_num_threads();
    bool half = dt == OAR_BF16 || dt == OAR_F16;
    oar_gemm_backend be = dt == OAR_F32 ? oar_gemm_choose(ta, tb, m, n, k, nt)
                          : half        ? oar_gemm_choose_half(ta, tb, m, n, k, nt)
                                        : OAR_GEMM_OPENBLAS;
    if (half && be != OAR_GEMM_AVX2 && be != OAR_GEMM_AVX512) {
        if (m > 0 && n > 0) gemm_half_copies(dt, ta, tb, m, n, k, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    if (!oar_gemm_splits(m, n, k)) {
        gemm_1(dt, be, ta, tb, m, n, k, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    /* split the larger dim: each part packs all of the other operand, so that one should be
     * the smaller */
    gemm_job j = {.dt = dt, .be = be, .ta = ta, .tb = tb, .split_m = m >= n, .det = det, .m = m, .n = n, .k = k,
                  .lda = lda, .ldb = ldb, .ldc = ldc, .A = A, .B = B, .C = C, .beta = beta};
    int64_t dim = j.split_m ? m : n, block = det ? DET_BLOCK : SPLIT_BLOCK;
    oar_parallel_for((dim + block - 1) / block, 1, gemm_part, &j);
}

void oar_gemm_mat_layout(oar_gemm_mat *m) {
    int64_t r = m->rows, c = m->cols, r1 = r > 1 ? r : 1, c1 = c > 1 ? c : 1;
    m->trans = m->pack = false;
    /* a dim of size 1 never moves, so its stride does not matter */
    if ((c <= 1 || m->cs == 1) && (r <= 1 || m->rs >= c1)) {
        m->ld = r <= 1 ? c1 : m->rs;
    } else if ((r <= 1 || m->rs == 1) && (c <= 1 || m->cs >= r1)) {
        m->trans = true;
        m->ld = c <= 1 ? r1 : m->cs;
    } else {
        m->pack = true;
        m->ld = c1;
    }
}

oar_gemm_mat oar_gemm_mat_t(const oar_gemm_mat *m) {
    oar_gemm_mat t = {.rows = m->cols, .cols = m->rows, .rs = m->cs, .cs = m->rs};
    oar_gemm_mat_layout(&t);
    return t;
}

void oar_gemm_mat_pack(const oar_gemm_mat *m, const char *src, size_t es, char *dst) {
    if (es == sizeof(uint16_t)) {
        const uint16_t *s = (const uint16_t *)src;
        uint16_t *d = (uint16_t *)dst;
        for (int64_t i = 0; i < m->rows; i++)
            for (int64_t j = 0; j < m->cols; j++) d[i * m->cols + j] = s[i * m->rs + j * m->cs];
    } else if (es == sizeof(float)) {
        const float *s = (const float *)src;
        float *d = (float *)dst;
        for (int64_t i = 0; i < m->rows; i++)
            for (int64_t j = 0; j < m->cols; j++) d[i * m->cols + j] = s[i * m->rs + j * m->cs];
    } else {
        const double *s = (const double *)src;
        double *d = (double *)dst;
        for (int64_t i = 0; i < m->rows; i++)
            for (int64_t j = 0; j < m->cols; j++) d[i * m->cols + j] = s[i * m->rs + j * m->cs];
    }
}

bool oar_gemm_fits(int64_t v) { return v >= 0 && v <= INT_MAX; }

oar_status oar_gemm_via_f32(oar_kernel_fn fn, const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                            oar_tensor *const *out, const oar_attr *attrs) {
    oar_tensor *tin[OAR_MAX_INPUTS] = {0}, *tout = oar_tensor_new(OAR_F32, out[0]->shape, out[0]->ndim);
    oar_status st = tout ? OAR_OK : OAR_ERR_OOM;
    for (int i = 0; i < n_in && st == OAR_OK; i++) {
        if (!in[i]) continue;
        if (!(tin[i] = oar_tensor_new(OAR_F32, in[i]->shape, in[i]->ndim))) {
            st = OAR_ERR_OOM;
        } else if (in[i]->contiguous) {
            oar_cpu_convert_half(tin[i], in[i]); /* vectorized */
        } else { /* a view (attention's transposed keys): the layout copy, then the vectorized
                  * widening; the element-wise strided conversion was a fifth of gpt-mini's O2 step */
            oar_tensor *dense = oar_tensor_new(in[i]->dtype, in[i]->shape, in[i]->ndim);
            if (!dense) {
                st = OAR_ERR_OOM;
                break;
            }
            oar_cpu_copy_layout(ctx, dense, in[i]);
            oar_cpu_convert_half(tin[i], dense);
            oar_tensor_unref(dense);
        }
    }
    if (st == OAR_OK) st = fn(ctx, tin, n_in, &tout, 1, attrs);
    if (st == OAR_OK) oar_cpu_convert_half(out[0], tout);
    for (int i = 0; i < n_in; i++) oar_tensor_unref(tin[i]);
    oar_tensor_unref(tout);
    return st;
}
#endif
