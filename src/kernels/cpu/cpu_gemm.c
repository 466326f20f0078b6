/* GEMM-backed kernels for matmul and linear through oar_gemm (OpenBLAS, oneDNN or oar's own
 * kernel, chosen per shape: docs/kernels-gemm.md): f32, f64, f16 and bf16 (computed in f32:
 * gemm_half.h). A matrix operand whose last two dims are row-major or column-major (a
 * transposed view) goes to the GEMM as it is, with the Trans flag for the latter; other
 * layouts are packed first. The libraries run single-threaded; large products are split over
 * oar's pool (oar_gemm), so nothing oversubscribes the cores. */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm_blas.h"

#ifdef OAR_HAVE_OPENBLAS
#include <cblas.h>
#include <string.h>

/* The batched product, with torch's promotion of 1-d operands (a [k] is [1, k], b [k] is
 * [k, 1]); the output batch dims are the broadcast of the operands'. Strides in elements;
 * an operand's batch stride is 0 along dims it broadcasts. */
typedef struct mm_plan {
    int nb;
    int64_t batch[OAR_MAX_DIMS], nbatch;
    oar_gemm_mat a, b;
    int64_t a_bs[OAR_MAX_DIMS], b_bs[OAR_MAX_DIMS];
} mm_plan;

static void mm_plan_make(const oar_tensor *a, const oar_tensor *b, mm_plan *p) {
    int na = a->ndim, nb = b->ndim, ba = na > 2 ? na - 2 : 0, bb = nb > 2 ? nb - 2 : 0;
    memset(p, 0, sizeof *p);
    oar_broadcast_shapes(a->shape, ba, b->shape, bb, p->batch, &p->nb);
    p->nbatch = 1;
    for (int d = 0; d < p->nb; d++) p->nbatch *= p->batch[d];
    p->a = (oar_gemm_mat){.rows = na >= 2 ? a->shape[na - 2] : 1, .cols = a->shape[na - 1],
                          .rs = na >= 2 ? a->strides[na - 2] : 0, .cs = a->strides[na - 1]};
    p->b = (oar_gemm_mat){.rows = nb >= 2 ? b->shape[nb - 2] : b->shape[0], .cols = nb >= 2 ? b->shape[nb - 1] : 1,
                          .rs = nb >= 2 ? b->strides[nb - 2] : b->strides[0], .cs = nb >= 2 ? b->strides[nb - 1] : 0};
    for (int d = 0; d < p->nb; d++) {
        int da = d - (p->nb - ba), db = d - (p->nb - bb);
        p->a_bs[d] = da >= 0 && a->shape[da] != 1 ? a->strides[da] : 0;
        p->b_bs[d] = db >= 0 && b->shape[db] != 1 ? b->strides[db] : 0;
    }
    oar_gemm_mat_layout(&p->a);
    oar_gemm_mat_layout(&p->b);
}

static bool batch_invariant(const int64_t *bs, int nb) {
    for (int d = 0; d < nb; d++)
        if (bs[d]) return false;
    return true;
}

static bool matmul_blas_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                                 const oar_attr *attrs) {
    (void)n_in; (void)out; (void)n_out; (void)attrs;
    mm_plan p;
    mm_plan_make(in[0], in[1], &p);
    return oar_gemm_fits(p.a.rows) && oar_gemm_fits(p.a.cols) && oar_gemm_fits(p.b.cols) && oar_gemm_fits(p.a.ld) &&
           oar_gemm_fits(p.b.ld) && oar_gemm_fits(p.a.rows * p.a.cols) && oar_gemm_fits(p.b.rows * p.b.cols);
}

/* When b is the same for every batch and a's rows run on with one stride across the batch
 * dims (a contiguous [.., m, k] times a matrix), the whole batch is one GEMM of nbatch*m rows.
 * A b that needs packing (an expanded view: stride 0) goes through mm_batches, which packs it. */
static bool can_fold(const mm_plan *p) {
    if (!batch_invariant(p->b_bs, p->nb) || p->a.trans || p->a.pack || p->b.pack) return false;
    int64_t expect = p->a.ld * p->a.rows;
    for (int d = p->nb - 1; d >= 0; d--) {
        if (p->batch[d] == 1) continue;
        if (p->a_bs[d] != expect) return false;
        expect *= p->batch[d];
    }
    return oar_gemm_fits(p->nbatch * p->a.rows);
}

/* Batch items [b, e) of a batched product, each a GEMM; packed operands get a buffer per
 * call, filled once when the operand does not vary by batch. */
typedef struct mm_job {
    const mm_plan *p;
    oar_dtype dt;
    const char *A0, *B0;
    char *C;
    int oom; /* set (atomically) when a part could not get its buffer */
} mm_job;

static void mm_batches(void *ctx, int64_t b, int64_t e) {
    mm_job *j = ctx;
    const mm_plan *p = j->p;
    int64_t es = (int64_t)oar_dtypes[j->dt].size, m = p->a.rows, k = p->a.cols, n = p->b.cols;
    size_t abytes = p->a.pack ? (size_t)(m * k * es) : 0, bbytes = p->b.pack ? (size_t)(k * n * es) : 0;
    char *buf = NULL;
    if (abytes + bbytes && !(buf = oar_alloc(abytes + bbytes))) {
        __atomic_store_n(&j->oom, 1, __ATOMIC_RELAXED);
        return;
    }
    bool a_once = batch_invariant(p->a_bs, p->nb), b_once = batch_invariant(p->b_bs, p->nb);
    for (int64_t bi = b; bi < e; bi++) {
        int64_t ao = 0, bo = 0, rest = bi;
        for (int d = p->nb - 1; d >= 0; d--) {
            int64_t i = rest % p->batch[d];
            rest /= p->batch[d];
            ao += i * p->a_bs[d];
            bo += i * p->b_bs[d];
        }
        const char *A = j->A0 + ao * es, *B = j->B0 + bo * es;
        if (p->a.pack) {
            if (bi == b || !a_once) oar_gemm_mat_pack(&p->a, A, (size_t)es, buf);
            A = buf;
        }
        if (p->b.pack) {
            if (bi == b || !b_once) oar_gemm_mat_pack(&p->b, B, (size_t)es, buf + abytes);
            B = buf + abytes;
        }
        oar_gemm(j->dt, p->a.trans, p->b.trans, m, n, k, A, p->a.ld, B, p->b.ld, 0.0, j->C + bi * m * n * es, n);
    }
    if (buf) oar_free(buf, abytes + bbytes);
}

static oar_status matmul_blas(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *attrs) {
    (void)n_in; (void)n_out; (void)attrs;
    oar_tensor *y = out[0];
    oar_dtype dt = in[0]->dtype;
    int64_t es = (int64_t)oar_dtypes[dt].size;
    if (y->numel == 0) return OAR_OK;
    char *C = oar_tensor_ptr(y);
    const char *A0 = oar_tensor_ptr(in[0]), *B0 = oar_tensor_ptr(in[1]);
    mm_plan p;
    mm_plan_make(in[0], in[1], &p);
    int64_t m = p.a.rows, k = p.a.cols, n = p.b.cols;
    if (k == 0) {
        memset(C, 0, (size_t)(y->numel * es));
        return OAR_OK;
    }
    if (can_fold(&p)) {
        oar_gemm(dt, false, p.b.trans, p.nbatch * m, n, k, A0, p.a.ld, B0, p.b.ld, 0.0, C, n);
        return OAR_OK;
    }
    mm_job j = {.p = &p, .dt = dt, .A0 = A0, .B0 = B0, .C = C};
    /* threads take whole batch items when there are enough of them (no split GEMM, no shared
     * pack buffer); otherwise each GEMM splits itself if it is large enough */
    bool by_batch = p.nbatch >= ctx->nthreads && (double)p.nbatch * (double)m * (double)n * (double)k > OAR_GEMM_SPLIT_MIN_MACS;
    if (by_batch) oar_parallel_for(p.nbatch, 1, mm_batches, &j);
    else mm_batches(&j, 0, p.nbatch);
    return j.oom ? OAR_ERR_OOM : OAR_OK;
}

/* ---- linear: inputs arrive contiguous (the op is not strided) */
static bool linear_blas_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                                 const oar_attr *attrs) {
    (void)n_in; (void)n_out; (void)attrs;
    const oar_tensor *w = in[1];
    int64_t rows = w->shape[0] ? out[0]->numel / w->shape[0] : 0;
    return oar_gemm_fits(rows) && oar_gemm_fits(w->shape[0]) && oar_gemm_fits(w->shape[1]);
}

static oar_status linear_blas(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *attrs) {
    (void)ctx; (void)n_out; (void)attrs;
    const oar_tensor *x = in[0], *w = in[1], *bias = n_in > 2 ? in[2] : NULL;
    oar_tensor *y = out[0];
    oar_dtype dt = x->dtype;
    int64_t es = (int64_t)oar_dtypes[dt].size, fo = w->shape[0], fi = w->shape[1];
    if (y->numel == 0) return OAR_OK;
    int64_t rows = y->numel / fo;
    char *C = oar_tensor_ptr(y);
    /* the bias goes into C first so that the GEMM adds onto it (beta = 1) */
    if (bias)
        for (int64_t r = 0; r < rows; r++) memcpy(C + r * fo * es, oar_tensor_ptr(bias), (size_t)(fo * es));
    else if (fi == 0)
        memset(C, 0, (size_t)(y->numel * es));
    if (fi == 0) return OAR_OK;
    oar_gemm(dt, false, true, rows, fo, fi, oar_tensor_ptr(x), fi, oar_tensor_ptr(w), fi, bias ? 1.0 : 0.0, C, fo);
    return OAR_OK;
}

/* f16/bf16: the same kernels, oar_gemm reading and writing 16-bit matrices (gemm_half.h);
 * oar_gemm_half_via_copies(true) brings back the earlier path (f32 copies of the inputs, the
 * f32 kernel, the result rounded), the baseline tests hold the direct one to */
static bool g_half_via_copies;

void oar_gemm_half_via_copies(bool on) { __atomic_store_n(&g_half_via_copies, on, __ATOMIC_RELAXED); }

static oar_status matmul_half(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *attrs) {
    if (__atomic_load_n(&g_half_via_copies, __ATOMIC_RELAXED))
        return oar_gemm_via_f32(matmul_blas, ctx, in, n_in, out, attrs);
    return matmul_blas(ctx, in, n_in, out, n_out, attrs);
}

static oar_status linear_half(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *attrs) {
    if (__atomic_load_n(&g_half_via_copies, __ATOMIC_RELAXED))
        return oar_gemm_via_f32(linear_blas, ctx, in, n_in, out, attrs);
    return linear_blas(ctx, in, n_in, out, n_out, attrs);
}

/* oar's pool threads the GEMMs (oar_gemm); OpenBLAS stays on one thread at any count */
static void gemm_threads_hook(int nthreads) {
    (void)nthreads;
    oar_gemm_blas_single_thread();
}
#endif

void oar_cpu_register_gemm(void) {
#ifdef OAR_HAVE_OPENBLAS
    oar_gemm_blas_single_thread(); /* before any GEMM can start OpenBLAS's threads */
    oar_threads_add_library_hook(gemm_threads_hook);
    uint32_t dts = OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64);
    oar_register_kernel(OAR_OP_matmul, (oar_kernel_entry){.device = OAR_CPU, .dtypes = dts, .impl = "gemm",
                                                          .priority = 20, .fn = matmul_blas,
                                                          .supports = matmul_blas_supports});
    oar_register_kernel(OAR_OP_linear, (oar_kernel_entry){.device = OAR_CPU, .dtypes = dts, .impl = "gemm",
                                                          .priority = 20, .fn = linear_blas,
                                                          .supports = linear_blas_supports});
    oar_register_kernel(OAR_OP_matmul, (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_GEMM_HALF_DTYPES,
                                                          .impl = "gemm-half", .priority = 20, .fn = matmul_half,
                                                          .supports = matmul_blas_supports});
    oar_register_kernel(OAR_OP_linear, (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_GEMM_HALF_DTYPES,
                                                          .impl = "gemm-half", .priority = 20, .fn = linear_half,
                                                          .supports = linear_blas_supports});
    oar_cpu_register_gemm_einsum();
#endif
}
