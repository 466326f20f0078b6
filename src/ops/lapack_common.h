/* Shared by the LAPACK ops (lapack*.c): the Fortran routines OpenBLAS exports, input checks in the
 * house style, and moving one matrix of a batch between a tensor (row-major, any float dtype) and a
 * column-major double buffer, the layout LAPACK reads. Factorizing in double keeps f32 results
 * within f32 rounding of torch's. Built only with OpenBLAS. */
#ifndef OAR_LAPACK_COMMON_H
#define OAR_LAPACK_COMMON_H
#ifdef OAR_HAVE_OPENBLAS
#include "ops/op.h"

void dgesv_(const int *n, const int *nrhs, double *a, const int *lda, int *ipiv, double *b, const int *ldb,
            int *info);
void dgetrf_(const int *m, const int *n, double *a, const int *lda, int *ipiv, int *info);
void dgetrs_(const char *trans, const int *n, const int *nrhs, const double *a, const int *lda, const int *ipiv,
             double *b, const int *ldb, int *info);
void dtrsm_(const char *side, const char *uplo, const char *transa, const char *diag, const int *m, const int *n,
            const double *alpha, const double *a, const int *lda, double *b, const int *ldb);
void dsyevd_(const char *jobz, const char *uplo, const int *n, double *a, const int *lda, double *w, double *work,
             const int *lwork, int *iwork, const int *liwork, int *info);
void dgesdd_(const char *jobz, const int *m, const int *n, double *a, const int *lda, double *s, double *u,
             const int *ldu, double *vt, const int *ldvt, double *work, const int *lwork, int *iwork, int *info);
void dgeqrf_(const int *m, const int *n, double *a, const int *lda, double *tau, double *work, const int *lwork,
             int *info);
void dorgqr_(const int *m, const int *n, const int *k, double *a, const int *lda, const double *tau, double *work,
             const int *lwork, int *info);
void dgelsd_(const int *m, const int *n, const int *nrhs, double *a, const int *lda, double *b, const int *ldb,
             double *s, const double *rcond, int *rank, double *work, const int *lwork, int *iwork, int *info);
void dgelsy_(const int *m, const int *n, const int *nrhs, double *a, const int *lda, double *b, const int *ldb,
             int *jpvt, const double *rcond, int *rank, double *work, const int *lwork, int *info);
void dgelss_(const int *m, const int *n, const int *nrhs, double *a, const int *lda, double *b, const int *ldb,
             double *s, const double *rcond, int *rank, double *work, const int *lwork, int *info);
void dgels_(const char *trans, const int *m, const int *n, const int *nrhs, double *a, const int *lda, double *b,
            const int *ldb, double *work, const int *lwork, int *info);
void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info);
void dsytrf_(const char *uplo, const int *n, double *a, const int *lda, int *ipiv, double *work, const int *lwork,
             int *info);
void dsytrs_(const char *uplo, const int *n, const int *nrhs, const double *a, const int *lda, const int *ipiv,
             double *b, const int *ldb, int *info);
void dormqr_(const char *side, const char *trans, const int *m, const int *n, const int *k, const double *a,
             const int *lda, const double *tau, double *c, const int *ldc, double *work, const int *lwork, int *info);
void dgeev_(const char *jobvl, const char *jobvr, const int *n, double *a, const int *lda, double *wr, double *wi,
            double *vl, const int *ldvl, double *vr, const int *ldvr, double *work, const int *lwork, int *info);
void dgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k, const double *alpha,
            const double *a, const int *lda, const double *b, const int *ldb, const double *beta, double *c,
            const int *ldc);

/* t (named what) holds f32/f64 matrices in its last two dims, square when asked, small enough for
 * LAPACK's int sizes. */
oar_status la_check_matrix(const char *op, const oar_tensor *t, const char *what, bool square);
/* b's batch dims (all but the last two) equal a's and b has a's dtype; rows: b.shape[-2] must be a.shape[-2]. */
oar_status la_check_pair(const char *op, const oar_tensor *a, const oar_tensor *b, const char *what_b, bool rows);
int64_t la_batch(const oar_tensor *t); /* number of matrices */
/* Matrix b of t (rows x cols) into m, column-major with leading dim ld (>= rows). */
void la_load(const oar_tensor *t, int64_t b, double *m, int ld);
/* m (column-major, leading dim ld) into matrix b of t; t's last two dims give the size written. */
void la_store(oar_tensor *t, int64_t b, const double *m, int ld);
/* A malloc'd buffer of n doubles (at least one), or NULL with an out-of-memory error naming op. */
double *la_alloc(const char *op, int64_t n);

/* Calls a multi-output op; the n outputs are tracked in the current scope (borrowed). */
oar_status la_call(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *a, oar_tensor **out, int n);

/* gradient helpers, written with ops */
oar_tensor *la_mT(oar_tensor *x);                     /* swaps the last two dims */
oar_tensor *la_diag_embed(oar_tensor *v);             /* [..., k] -> [..., k, k] */
oar_tensor *la_eye_like(int64_t k, oar_dtype dt);
/* torch's cholesky rule (lapack.c), shared by linalg_cholesky and linalg_cholesky_ex */
oar_tensor *la_cholesky_grad(oar_tensor *l, oar_tensor *gl);
/* The refusal of an op torch 1.13 does not differentiate (geqrf, ormqr), in torch's words. */
oar_status la_no_derivative(const char *torch_name);
#endif
#endif
