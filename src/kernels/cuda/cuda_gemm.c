/* matmul, linear and linear_act on cuBLASLt. Row-major products are computed as their
 * column-major transposes (C^T = B^T A^T), so each operand's layout (row- or column-major
 * inner matrix, one batch stride) maps to a transpose flag and a leading dimension with no
 * copy; a batch that needs more than one stride is made contiguous first. linear's bias is
 * cuBLASLt's bias epilogue. f32 accumulates in f32 (TF32 only when oar_cuda_set_allow_tf32),
 * f64 in f64, f16/bf16 in f32. Algorithms come from cuBLASLt's heuristic, cached per shape. */
#include "cuda_backend.h"
#include "base/device.h"
#include "launch_elementwise.h"
#include "launch_copy.h"

#include <cublasLt.h>
#include <pthread.h>
#include <string.h>

#define WORKSPACE_BYTES ((size_t)32 << 20)

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static cublasLtHandle_t g_lt;
static void *g_workspace;

static oar_status lt_status(cublasStatus_t s, const char *what) {
    if (s == CUBLAS_STATUS_SUCCESS) return OAR_OK;
    return oar_error(s == CUBLAS_STATUS_ALLOC_FAILED ? OAR_ERR_OOM : OAR_ERR_INTERNAL, "%s: cuBLASLt error %d (%s)",
                     what, (int)s, cublasGetStatusString(s));
}

static oar_status lt_ready(const char *what) {
    oar_status st = OAR_OK;
    pthread_mutex_lock(&g_mu);
    if (!g_lt) st = lt_status(cublasLtCreate(&g_lt), what);
    if (st == OAR_OK && !g_workspace) {
        g_workspace = oar_cuda_alloc(WORKSPACE_BYTES);
        if (!g_workspace) st = oar_last_status();
    }
    pthread_mutex_unlock(&g_mu);
    return st;
}

/* One operand of the column-major product: stored rows x cols with leading dim ld, used
 * transposed or not, and its batch stride. */
typedef struct lt_operand {
    const void *ptr;
    uint64_t rows, cols;
    int64_t ld, batch_stride;
    cublasOperation_t op;
} lt_operand;

typedef struct lt_problem {
    oar_dtype dt;
    lt_operand a, b;          /* D = op(a) op(b) */
    uint64_t m, n;            /* D is m x n column-major, ld m */
    int64_t k, batch, d_stride;
    void *d;
    const void *bias;         /* per row of D (length m), or NULL */
    bool d_f32;               /* D in f32 whatever the inputs' dtype (attention's scores) */
} lt_problem;

/* ---- algorithm cache: key is the problem's geometry */
typedef struct algo_entry {
    bool used;
    int dt, opa, opb, has_bias, tf32, d_f32;
    uint64_t m, n, k, lda, ldb, batch, sa, sb, sd;
    cublasLtMatmulAlgo_t algo;
} algo_entry;
#define N_ALGOS 256
static algo_entry g_algos[N_ALGOS];
static int g_algo_next;

static bool same_key(const algo_entry *e, const algo_entry *k) {
    return e->used && e->dt == k->dt && e->opa == k->opa && e->opb == k->opb && e->has_bias == k->has_bias &&
           e->tf32 == k->tf32 && e->d_f32 == k->d_f32 && e->m == k->m && e->n == k->n && e->k == k->k && e->lda == k->lda &&
           e->ldb == k->ldb && e->batch == k->batch && e->sa == k->sa && e->sb == k->sb && e->sd == k->sd;
}

static cudaDataType_t data_type(oar_dtype dt) {
    switch (dt) {
    case OAR_F64: return CUDA_R_64F;
    case OAR_F16: return CUDA_R_16F;
    case OAR_BF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
    }
}

static oar_status run_lt(const char *who, const lt_problem *p, cudaStream_t stream) {
    oar_status st = lt_ready(who);
    if (st != OAR_OK) return st;
    bool tf32 = p->dt == OAR_F32 && oar_cuda_get_allow_tf32();
    cublasComputeType_t ct = p->dt == OAR_F64 ? CUBLAS_COMPUTE_64F
                             : tf32          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                             : CUBLAS_COMPUTE_32F;
    cudaDataType_t io = data_type(p->dt), scale = p->dt == OAR_F64 ? CUDA_R_64F : CUDA_R_32F;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasStatus_t s = cublasLtMatmulDescCreate(&op, ct, scale);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &p->a.op, sizeof p->a.op);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &p->b.op, sizeof p->b.op);
    if (s == CUBLAS_STATUS_SUCCESS && p->bias) {
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p->bias, sizeof p->bias);
        cudaDataType_t bt = io;
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
    }
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&la, io, p->a.rows, p->a.cols, p->a.ld);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&lb, io, p->b.rows, p->b.cols, p->b.ld);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&ld, p->d_f32 ? CUDA_R_32F : io, p->m, p->n, (int64_t)p->m);
    if (s == CUBLAS_STATUS_SUCCESS && p->batch > 1) {
        int32_t count = (int32_t)p->batch;
        cublasLtMatrixLayout_t ls[3] = {la, lb, ld};
        int64_t strides[3] = {p->a.batch_stride, p->b.batch_stride, p->d_stride};
        for (int i = 0; i < 3 && s == CUBLAS_STATUS_SUCCESS; i++) {
            s = cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
            if (s == CUBLAS_STATUS_SUCCESS)
                s = cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i],
                                                     sizeof strides[i]);
        }
    }
    algo_entry key = {.used = true, .dt = p->dt, .opa = p->a.op, .opb = p->b.op, .has_bias = p->bias != NULL,
                      .tf32 = tf32, .d_f32 = p->d_f32, .m = p->m, .n = p->n, .k = (uint64_t)p->k, .lda = (uint64_t)p->a.ld,
                      .ldb = (uint64_t)p->b.ld, .batch = (uint64_t)p->batch, .sa = (uint64_t)p->a.batch_stride,
                      .sb = (uint64_t)p->b.batch_stride, .sd = (uint64_t)p->d_stride};
    cublasLtMatmulAlgo_t algo;
    bool found = false;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < N_ALGOS && !found; i++)
        if (same_key(&g_algos[i], &key)) {
            algo = g_algos[i].algo;
            found = true;
        }
    pthread_mutex_unlock(&g_mu);
    if (s == CUBLAS_STATUS_SUCCESS && !found) {
        size_t ws = WORKSPACE_BYTES;
        s = cublasLtMatmulPreferenceCreate(&pref);
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
        cublasLtMatmulHeuristicResult_t res;
        int n_res = 0;
        if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulAlgoGetHeuristic(g_lt, op, la, lb, ld, ld, pref, 1, &res, &n_res);
        if (s == CUBLAS_STATUS_SUCCESS && n_res < 1) s = CUBLAS_STATUS_NOT_SUPPORTED;
        if (s == CUBLAS_STATUS_SUCCESS) {
            algo = res.algo;
            found = true;
            pthread_mutex_lock(&g_mu);
            key.algo = algo;
            g_algos[g_algo_next] = key;
            g_algo_next = (g_algo_next + 1) % N_ALGOS;
            pthread_mutex_unlock(&g_mu);
        }
    }
    if (s == CUBLAS_STATUS_SUCCESS) {
        float one_f = 1.0f, zero_f = 0.0f;
        double one_d = 1.0, zero_d = 0.0;
        const void *alpha = p->dt == OAR_F64 ? (const void *)&one_d : (const void *)&one_f;
        const void *beta = p->dt == OAR_F64 ? (const void *)&zero_d : (const void *)&zero_f;
        s = cublasLtMatmul(g_lt, op, alpha, p->a.ptr, la, p->b.ptr, lb, beta, p->d, ld, p->d, ld, &algo, g_workspace,
                           WORKSPACE_BYTES, stream);
    }
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (op) cublasLtMatmulDescDestroy(op);
    return lt_status(s, who);
}

/* The column-major view of a row-major rows x cols matrix with strides (rs, cs) that
 * supplies the transposed matrix (cols x rows) to a product: stored as is when cs == 1
 * (op N), or used transposed when rs == 1 (op T). False when neither stride is unit. */
static bool as_transposed(const void *ptr, int64_t rows, int64_t cols, int64_t rs, int64_t cs, lt_operand *o) {
    o->ptr = ptr;
    if (cols == 1) cs = 1;            /* a unit dim's stride is free */
    if (rows == 1) rs = cols;
    if (cs == 1 && rs >= cols) {
        o->op = CUBLAS_OP_N;
        o->rows = (uint64_t)cols;
        o->cols = (uint64_t)rows;
        o->ld = rs > 0 ? rs : 1;
        return true;
    }
    if (rows == 1 || cs >= rows) {
        if (rs != 1 && rows != 1) return false;
        o->op = CUBLAS_OP_T;
        o->rows = (uint64_t)rows;
        o->cols = (uint64_t)cols;
        o->ld = cs > 0 ? cs : 1;
        return true;
    }
    return false;
}

static bool gemm_dtype(oar_dtype dt) { return dt == OAR_F32 || dt == OAR_F64 || dt == OAR_F16 || dt == OAR_BF16; }

/* ---- matmul */
static oar_status matmul_run(const oar_kctx *ctx, oar_tensor *a, oar_tensor *b, oar_tensor *y) {
    int na = a->ndim, nb = b->ndim;
    int64_t m = na >= 2 ? a->shape[na - 2] : 1, k = a->shape[na - 1], n = nb >= 2 ? b->shape[nb - 1] : 1;
    int64_t a_rs = na >= 2 ? a->strides[na - 2] : k, a_cs = a->strides[na - 1];
    int64_t b_rs = nb >= 2 ? b->strides[nb - 2] : b->strides[0], b_cs = nb >= 2 ? b->strides[nb - 1] : 1;
    int64_t batch = m > 0 && n > 0 ? y->numel / (m * n) : 0;
    if (y->numel == 0) return OAR_OK;
    if (k == 0) return oar_cuda_status((cudaError_t)oar_cu_fill(oar_tensor_ptr(y), y->dtype, y->numel, 0.0, ctx->stream), "matmul");
    /* batch strides: one per operand, from its dims before the matrix dims (broadcast: 0) */
    int ba = na > 2 ? na - 2 : 0, bb = nb > 2 ? nb - 2 : 0, ny = y->ndim - (na >= 2) - (nb >= 2);
    int64_t sa = 0, sb = 0;
    bool one_stride = true;
    {
        int64_t span = 1;
        bool first = true;
        for (int d = ny - 1; d >= 0; d--) {
            int da = d - (ny - ba), db = d - (ny - bb);
            int64_t as = da >= 0 && a->shape[da] != 1 ? a->strides[da] : 0;
            int64_t bs = db >= 0 && b->shape[db] != 1 ? b->strides[db] : 0;
            if (y->shape[d] == 1) continue;
            if (first) {
                sa = as;
                sb = bs;
                first = false;
            } else if (as != sa * span || bs != sb * span) {
                one_stride = false;
            }
            span *= y->shape[d];
        }
    }
    lt_operand A, B;
    if (!one_stride || !as_transposed(oar_tensor_ptr(b), k, n, b_rs, b_cs, &A) ||
        !as_transposed(oar_tensor_ptr(a), m, k, a_rs, a_cs, &B))
        return oar_error(OAR_ERR_UNSUPPORTED, "matmul: operand layout the GPU kernel does not take");
    A.batch_stride = sb;
    B.batch_stride = sa;
    lt_problem p = {.dt = y->dtype, .a = A, .b = B, .m = (uint64_t)n, .n = (uint64_t)m, .k = k, .batch = batch,
                    .d_stride = m * n, .d = oar_tensor_ptr(y)};
    return run_lt("matmul", &p, oar_cuda_stream_of(ctx));
}

oar_status oar_cu_gemm_batched(const char *who, oar_dtype dt, const void *a, bool ta, const void *b, bool tb,
                               void *y, bool y_f32, int64_t batch, int64_t m, int64_t n, int64_t k, void *stream) {
    if (batch <= 0 || m <= 0 || n <= 0 || k <= 0)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected a batched product with positive sizes, got batch %lld, "
                         "m %lld, n %lld, k %lld", who, (long long)batch, (long long)m, (long long)n, (long long)k);
    lt_operand A, B; /* row-major a [m, k] is (rs, cs) = (k, 1); stored [k, m] and used transposed, (1, m) */
    if (!as_transposed(b, k, n, tb ? 1 : n, tb ? k : 1, &A) || !as_transposed(a, m, k, ta ? 1 : k, ta ? m : 1, &B))
        return oar_error(OAR_ERR_INTERNAL, "%s: a contiguous operand the GEMM did not take (m %lld, n %lld, k %lld)",
                         who, (long long)m, (long long)n, (long long)k);
    A.batch_stride = k * n;
    B.batch_stride = m * k;
    lt_problem p = {.dt = dt, .a = A, .b = B, .m = (uint64_t)n, .n = (uint64_t)m, .k = k, .batch = batch,
                    .d_stride = m * n, .d = y, .d_f32 = y_f32};
    return run_lt(who, &p, (cudaStream_t)stream);
}

/* operand t expanded to the output's batch dims, contiguous */
static oar_tensor *expand_batch(const oar_tensor *t, const oar_tensor *y, int64_t r, int64_t c) {
    int64_t shape[OAR_MAX_DIMS];
    int nd = y->ndim - 2;
    memcpy(shape, y->shape, sizeof(int64_t) * (size_t)nd);
    shape[nd] = r;
    shape[nd + 1] = c;
    oar_tensor *e = oar_tensor_new_on(t->device, t->dtype, shape, nd + 2);
    if (e && oar_tensor_copy_strided(e, t) != OAR_OK) {
        oar_tensor_unref(e);
        return NULL;
    }
    return e;
}

static oar_status cu_matmul(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                            const oar_attr *attrs) {
    (void)n_in; (void)n_out; (void)attrs;
    oar_status st = matmul_run(ctx, in[0], in[1], out[0]);
    if (st != OAR_ERR_UNSUPPORTED) return st;
    /* no unit inner stride, or batches that need more than one stride: copy to contiguous,
     * expanding broadcast batches when both operands are matrices */
    oar_clear_error();
    oar_tensor *a, *b, *y = out[0];
    if (in[0]->ndim >= 2 && in[1]->ndim >= 2) {
        a = expand_batch(in[0], y, in[0]->shape[in[0]->ndim - 2], in[0]->shape[in[0]->ndim - 1]);
        b = a ? expand_batch(in[1], y, in[1]->shape[in[1]->ndim - 2], in[1]->shape[in[1]->ndim - 1]) : NULL;
    } else {
        a = oar_tensor_contiguous_copy(in[0]);
        b = a ? oar_tensor_contiguous_copy(in[1]) : NULL;
    }
    st = a && b ? matmul_run(ctx, a, b, y) : oar_last_status();
    oar_tensor_unref(a);
    oar_tensor_unref(b);
    return st;
}

/* ---- linear and linear_act */
static oar_status linear_run(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *y, const char *who) {
    oar_tensor *x = in[0], *w = in[1], *bias = n_in > 2 ? in[2] : NULL;
    int64_t fo = w->shape[0], fi = w->shape[1], rows = fo ? y->numel / fo : 0;
    if (y->numel == 0) return OAR_OK;
    /* cuBLASLt's bias epilogue takes f32/f16/bf16; f64 (and an empty product) add it after */
    bool bias_after = bias && (fi == 0 || y->dtype == OAR_F64);
    oar_status st;
    if (fi == 0) {
        st = oar_cuda_status((cudaError_t)oar_cu_fill(oar_tensor_ptr(y), y->dtype, y->numel, 0.0, ctx->stream), who);
    } else {
        /* Y^T (fo x rows) = W (op T of its fi x fo column-major view) . X^T (fi x rows) */
        lt_operand A = {.ptr = oar_tensor_ptr(w), .rows = (uint64_t)fi, .cols = (uint64_t)fo, .ld = fi,
                        .op = CUBLAS_OP_T};
        lt_operand B = {.ptr = oar_tensor_ptr(x), .rows = (uint64_t)fi, .cols = (uint64_t)rows, .ld = fi,
                        .op = CUBLAS_OP_N};
        lt_problem p = {.dt = y->dtype, .a = A, .b = B, .m = (uint64_t)fo, .n = (uint64_t)rows, .k = fi, .batch = 1,
                        .d = oar_tensor_ptr(y), .bias = bias && !bias_after ? oar_tensor_ptr(bias) : NULL};
        st = run_lt(who, &p, oar_cuda_stream_of(ctx));
    }
    if (st != OAR_OK || !bias_after) return st;
    oar_cu_ew e = {.ndim = 2, .n_in = 2, .n = y->numel, .shape = {rows, fo}, .strides = {{fo, 1}, {0, 1}},
                   .in = {oar_tensor_ptr(y), oar_tensor_ptr(bias)}, .out = oar_tensor_ptr(y),
                   .in_dtype = y->dtype, .out_dtype = y->dtype};
    return oar_cuda_status((cudaError_t)oar_cu_binary(OAR_CU_ADD, &e, ctx->stream), who);
}

static oar_status cu_linear(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                            const oar_attr *a) {
    (void)n_out; (void)a;
    return linear_run(ctx, in, n_in, out[0], "linear");
}

static oar_status cu_linear_act(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                int n_out, const oar_attr *a) {
    (void)n_out;
    oar_status st = linear_run(ctx, in, n_in, out[0], "linear_act");
    if (st != OAR_OK || a[0].i == 0 || out[0]->numel == 0) return st;
    oar_cu_ew e = {.ndim = 1, .n_in = 1, .n = out[0]->numel, .shape = {out[0]->numel}, .strides = {{1}},
                   .in = {oar_tensor_ptr(out[0])}, .out = oar_tensor_ptr(out[0]), .in_dtype = out[0]->dtype,
                   .out_dtype = out[0]->dtype, .contiguous = 1};
    int kind = a[0].i == 1 ? OAR_CU_RELU : OAR_CU_GELU;
    e.attr[0] = a[0].i == 3 ? 1.0 : 0.0;
    return oar_cuda_status((cudaError_t)oar_cu_unary(kind, &e, ctx->stream), "linear_act");
}

static bool float_operands(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out; (void)a;
    return gemm_dtype(in[0]->dtype) && out[0]->ndim <= OAR_MAX_DIMS;
}

static bool linear_fits(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_out;
    if (!float_operands(in, n_in, out, n_out, a)) return false;
    if (n_in > 1 && in[1]->ndim != 2) return false;
    return n_in < 4 && (a == NULL || a[0].kind != OAR_ATTR_INT || (a[0].i >= 0 && a[0].i <= 3));
}

void oar_cuda_register_gemm(void) {
    const uint32_t floats = OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64) | OAR_DTYPE_BIT(OAR_F16) |
                            OAR_DTYPE_BIT(OAR_BF16);
    oar_cuda_register(OAR_OP_matmul, floats, cu_matmul, float_operands);
    oar_cuda_register(OAR_OP_linear, floats, cu_linear, linear_fits);
    oar_cuda_register(OAR_OP_linear_act, floats, cu_linear_act, linear_fits);
}
