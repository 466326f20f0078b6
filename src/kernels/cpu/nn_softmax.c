/* AVX2/FMA softmax and log_softmax in f32 along any dim, and their backward ops. Along the last dim each row is one
 * contiguous run, vectorized along it; along an inner dim eight neighbouring columns are
 * handled at once, vectorized across them. Work is split over rows (or column blocks), and
 * sums of exponentials are kept in double. */
#include "kernels/cpu/nn_kernels.h"
#include "kernels/cpu/nn_simd.h"

#ifdef OAR_NN_SIMD

typedef struct sm_job {
    const float *x;
    float *y;
    int64_t n, inner, col_blocks;
    bool log_form;
} sm_job;

static NN_AVX2 void softmax_row(const float *x, float *y, int64_t n, bool log_form) {
    const int64_t full = n & ~(int64_t)7, rest = n - full;
    const __m256i tail = nn_tail_mask(rest);
    __m256 vm = _mm256_set1_ps(-INFINITY);
    for (int64_t i = 0; i < full; i += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + i));
    if (rest) vm = _mm256_max_ps(vm, nn_load_tail(x + full, tail, -INFINITY));
    const __m256 m = _mm256_set1_ps(nn_hmax256(vm));
    nn_dacc acc = nn_dacc_zero();
    for (int64_t i = 0; i < full; i += 8) {
        __m256 e = nn_exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
        if (!log_form) _mm256_storeu_ps(y + i, e);
        nn_dacc_add(&acc, e);
    }
    if (rest) {
        __m256 e = nn_exp256(_mm256_sub_ps(nn_load_tail(x + full, tail, 0.0f), m));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(tail));
        if (!log_form) _mm256_maskstore_ps(y + full, tail, e);
        nn_dacc_add(&acc, e);
    }
    const double s = nn_dacc_sum(acc);
    if (log_form) { /* y = (x - max) - log(sum) */
        const __m256 ls = _mm256_set1_ps((float)log(s));
        for (int64_t i = 0; i < full; i += 8)
            _mm256_storeu_ps(y + i, _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), m), ls));
        if (rest)
            _mm256_maskstore_ps(y + full, tail, _mm256_sub_ps(_mm256_sub_ps(nn_load_tail(x + full, tail, 0.0f), m), ls));
    } else {
        const __m256 inv = _mm256_set1_ps((float)(1.0 / s));
        for (int64_t i = 0; i < full; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), inv));
        if (rest) _mm256_maskstore_ps(y + full, tail, _mm256_mul_ps(_mm256_maskload_ps(y + full, tail), inv));
    }
}

/* Up to 8 columns (width) of an [n, inner] slice; x and y point at the first column. Full
 * blocks use plain loads and stores: masked stores are slow on some CPUs (AMD). */
static inline __attribute__((always_inline)) NN_AVX2 __m256 col_load(const float *p, __m256i mask, bool full,
                                                                     float fill) {
    return full ? _mm256_loadu_ps(p) : nn_load_tail(p, mask, fill);
}
static inline __attribute__((always_inline)) NN_AVX2 void col_store(float *p, __m256i mask, bool full, __m256 v) {
    if (full) _mm256_storeu_ps(p, v);
    else _mm256_maskstore_ps(p, mask, v);
}

static inline __attribute__((always_inline)) NN_AVX2 void softmax_cols_as(const float *x, float *y, int64_t n,
                                                                          int64_t inner, int64_t width,
                                                                          bool log_form, bool full) {
    const __m256i mask = nn_tail_mask(width);
    __m256 vm = _mm256_set1_ps(-INFINITY);
    for (int64_t k = 0; k < n; k++) vm = _mm256_max_ps(vm, col_load(x + k * inner, mask, full, -INFINITY));
    nn_dacc acc = nn_dacc_zero();
    for (int64_t k = 0; k < n; k++) {
        __m256 e = nn_exp256(_mm256_sub_ps(col_load(x + k * inner, mask, full, 0.0f), vm));
        if (!full) e = _mm256_and_ps(e, _mm256_castsi256_ps(mask));
        if (!log_form) col_store(y + k * inner, mask, full, e);
        nn_dacc_add(&acc, e);
    }
    double s[8];
    float f[8];
    nn_dacc_lanes(acc, s);
    for (int j = 0; j < 8; j++) f[j] = s[j] > 0 ? (float)(log_form ? log(s[j]) : 1.0 / s[j]) : 0.0f;
    const __m256 v = _mm256_loadu_ps(f);
    for (int64_t k = 0; k < n; k++) {
        __m256 r = log_form ? _mm256_sub_ps(_mm256_sub_ps(col_load(x + k * inner, mask, full, 0.0f), vm), v)
                            : _mm256_mul_ps(col_load(y + k * inner, mask, full, 0.0f), v);
        col_store(y + k * inner, mask, full, r);
    }
}

static NN_AVX2 void softmax_cols(const float *x, float *y, int64_t n, int64_t inner, int64_t width, bool log_form) {
    if (width == 8) softmax_cols_as(x, y, n, inner, 8, log_form, true);
    else softmax_cols_as(x, y, n, inner, width, log_form, false);
}

static void rows_fn(void *ctx, int64_t begin, int64_t end) {
    const sm_job *j = ctx;
    for (int64_t r = begin; r < end; r++) softmax_row(j->x + r * j->n, j->y + r * j->n, j->n, j->log_form);
}

static void cols_fn(void *ctx, int64_t begin, int64_t end) {
    const sm_job *j = ctx;
    for (int64_t t = begin; t < end; t++) {
        int64_t o = t / j->col_blocks, c0 = (t % j->col_blocks) * 8;
        int64_t at = o * j->n * j->inner + c0, width = j->inner - c0 < 8 ? j->inner - c0 : 8;
        softmax_cols(j->x + at, j->y + at, j->n, j->inner, width, j->log_form);
    }
}

static oar_status softmax_avx2_as(bool log_form, oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a) {
    const oar_tensor *x = in[0];
    if (x->numel == 0) return OAR_OK;
    int nd = x->ndim ? x->ndim : 1;
    int d = (int)(a[0].i < 0 ? a[0].i + nd : a[0].i); /* validated by inference */
    int64_t outer = 1, n = x->ndim ? x->shape[d] : 1, inner = 1;
    for (int i = 0; i < d && i < x->ndim; i++) outer *= x->shape[i];
    for (int i = d + 1; i < x->ndim; i++) inner *= x->shape[i];
    sm_job j = {(const float *)oar_tensor_ptr(x), (float *)oar_tensor_ptr(out[0]), n, inner, (inner + 7) / 8, log_form};
    if (inner == 1) {
        oar_parallel_for(outer, 16384 / n + 1, rows_fn, &j);
    } else {
        oar_parallel_for(outer * j.col_blocks, 16384 / (8 * n) + 1, cols_fn, &j);
    }
    return OAR_OK;
}

static oar_status softmax_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                               int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    return softmax_avx2_as(false, in, out, a);
}
static oar_status log_softmax_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                   int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    return softmax_avx2_as(true, in, out, a);
}

/* ---- softmax_backward: dx = y * (g - sum(g * y)); log_softmax_backward: dx = g - exp(y) * sum(g).
 * Same layout as the forward: one line per row along the last dim, eight columns at a time
 * along an inner dim; the line's sum is kept in double. */
typedef struct smb_job {
    const float *g, *y;
    float *dx;
    int64_t n, inner, col_blocks;
    bool log_form;
} smb_job;

static NN_AVX2 void softmax_backward_row(const float *g, const float *y, float *dx, int64_t n, bool log_form) {
    const int64_t full = n & ~(int64_t)7, rest = n - full;
    const __m256i tail = nn_tail_mask(rest);
    nn_dacc acc = nn_dacc_zero();
    for (int64_t i = 0; i < full; i += 8) {
        __m256 gv = _mm256_loadu_ps(g + i);
        nn_dacc_add(&acc, log_form ? gv : _mm256_mul_ps(gv, _mm256_loadu_ps(y + i)));
    }
    if (rest) {
        __m256 gv = nn_load_tail(g + full, tail, 0.0f);
        nn_dacc_add(&acc, log_form ? gv : _mm256_mul_ps(gv, nn_load_tail(y + full, tail, 0.0f)));
    }
    const __m256 s = _mm256_set1_ps((float)nn_dacc_sum(acc));
    for (int64_t i = 0; i < full; i += 8) {
        __m256 gv = _mm256_loadu_ps(g + i), yv = _mm256_loadu_ps(y + i);
        _mm256_storeu_ps(dx + i, log_form ? _mm256_fnmadd_ps(nn_exp256(yv), s, gv)
                                          : _mm256_mul_ps(yv, _mm256_sub_ps(gv, s)));
    }
    if (rest) {
        __m256 gv = nn_load_tail(g + full, tail, 0.0f), yv = nn_load_tail(y + full, tail, 0.0f);
        _mm256_maskstore_ps(dx + full, tail, log_form ? _mm256_fnmadd_ps(nn_exp256(yv), s, gv)
                                                      : _mm256_mul_ps(yv, _mm256_sub_ps(gv, s)));
    }
}

static inline __attribute__((always_inline)) NN_AVX2 void softmax_backward_cols_as(
    const float *g, const float *y, float *dx, int64_t n, int64_t inner, int64_t width, bool log_form, bool full) {
    const __m256i mask = nn_tail_mask(width);
    nn_dacc acc = nn_dacc_zero();
    for (int64_t k = 0; k < n; k++) {
        __m256 gv = col_load(g + k * inner, mask, full, 0.0f);
        nn_dacc_add(&acc, log_form ? gv : _mm256_mul_ps(gv, col_load(y + k * inner, mask, full, 0.0f)));
    }
    double sd[8];
    float sf[8];
    nn_dacc_lanes(acc, sd);
    for (int j = 0; j < 8; j++) sf[j] = (float)sd[j];
    const __m256 s = _mm256_loadu_ps(sf);
    for (int64_t k = 0; k < n; k++) {
        __m256 gv = col_load(g + k * inner, mask, full, 0.0f), yv = col_load(y + k * inner, mask, full, 0.0f);
        col_store(dx + k * inner, mask, full, log_form ? _mm256_fnmadd_ps(nn_exp256(yv), s, gv)
                                                       : _mm256_mul_ps(yv, _mm256_sub_ps(gv, s)));
    }
}

static void smb_rows_fn(void *ctx, int64_t begin, int64_t end) {
    const smb_job *j = ctx;
    for (int64_t r = begin; r < end; r++)
        softmax_backward_row(j->g + r * j->n, j->y + r * j->n, j->dx + r * j->n, j->n, j->log_form);
}

static NN_AVX2 void smb_cols(const smb_job *j, int64_t at, int64_t width) {
    if (width == 8) softmax_backward_cols_as(j->g + at, j->y + at, j->dx + at, j->n, j->inner, 8, j->log_form, true);
    else softmax_backward_cols_as(j->g + at, j->y + at, j->dx + at, j->n, j->inner, width, j->log_form, false);
}

static void smb_cols_fn(void *ctx, int64_t begin, int64_t end) {
    const smb_job *j = ctx;
    for (int64_t t = begin; t < end; t++) {
        int64_t o = t / j->col_blocks, c0 = (t % j->col_blocks) * 8;
        smb_cols(j, o * j->n * j->inner + c0, j->inner - c0 < 8 ? j->inner - c0 : 8);
    }
}

static oar_status softmax_backward_avx2_as(bool log_form, oar_tensor *const *in, oar_tensor *const *out,
                                           const oar_attr *a) {
    const oar_tensor *g = in[0];
    if (g->numel == 0) return OAR_OK;
    int nd = g->ndim ? g->ndim : 1;
    int d = (int)(a[0].i < 0 ? a[0].i + nd : a[0].i); /* validated by inference */
    int64_t outer = 1, n = g->ndim ? g->shape[d] : 1, inner = 1;
    for (int i = 0; i < d && i < g->ndim; i++) outer *= g->shape[i];
    for (int i = d + 1; i < g->ndim; i++) inner *= g->shape[i];
    smb_job j = {(const float *)oar_tensor_ptr(g), (const float *)oar_tensor_ptr(in[1]), (float *)oar_tensor_ptr(out[0]),
                 n, inner, (inner + 7) / 8, log_form};
    if (inner == 1) oar_parallel_for(outer, 16384 / n + 1, smb_rows_fn, &j);
    else oar_parallel_for(outer * j.col_blocks, 16384 / (8 * n) + 1, smb_cols_fn, &j);
    return OAR_OK;
}

static oar_status softmax_backward_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                        oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    return softmax_backward_avx2_as(false, in, out, a);
}
static oar_status log_softmax_backward_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                            oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    return softmax_backward_avx2_as(true, in, out, a);
}

static bool avx2_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)in; (void)n_in; (void)out; (void)n_out; (void)a;
    return oar_cpu_has_avx2();
}

#endif

void oar_cpu_nn_register_softmax(void) {
#ifdef OAR_NN_SIMD
    oar_kernel_entry e = {.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32), .impl = "avx2", .priority = 10,
                          .fn = softmax_avx2, .supports = avx2_ok};
    oar_register_kernel(OAR_OP_softmax, e);
    e.fn = log_softmax_avx2;
    oar_register_kernel(OAR_OP_log_softmax, e);
    e.fn = softmax_backward_avx2;
    oar_register_kernel(OAR_OP_softmax_backward, e);
    e.fn = log_softmax_backward_avx2;
    oar_register_kernel(OAR_OP_log_softmax_backward, e);
#endif
}
