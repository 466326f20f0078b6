/* The BLAS call and strided-operand layouts shared by the GEMM-backed kernels. */
#include "kernels/cpu/gemm_blas.h"

#ifdef OAR_HAVE_OPENBLAS
#include <cblas.h>
#include <limits.h>

void oar_gemm(oar_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *A, int64_t lda,
              const void *B, int64_t ldb, double beta, void *C, int64_t ldc) {
    enum CBLAS_TRANSPOSE fa = ta ? CblasTrans : CblasNoTrans, fb = tb ? CblasTrans : CblasNoTrans;
    if (dt == OAR_F32)
        cblas_sgemm(CblasRowMajor, fa, fb, (int)m, (int)n, (int)k, 1.0f, A, (int)lda, B, (int)ldb, (float)beta, C,
                    (int)ldc);
    else
        cblas_dgemm(CblasRowMajor, fa, fb, (int)m, (int)n, (int)k, 1.0, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
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
    if (es == sizeof(float)) {
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
        if (!(tin[i] = oar_tensor_new(OAR_F32, in[i]->shape, in[i]->ndim))) st = OAR_ERR_OOM;
        else oar_tensor_copy_strided(tin[i], in[i]);
    }
    if (st == OAR_OK) st = fn(ctx, tin, n_in, &tout, 1, attrs);
    if (st == OAR_OK) oar_tensor_copy_strided(out[0], tout);
    for (int i = 0; i < n_in; i++) oar_tensor_unref(tin[i]);
    oar_tensor_unref(tout);
    return st;
}
#endif
