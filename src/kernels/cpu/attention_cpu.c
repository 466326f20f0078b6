/* f32 kernels for fused_attention and attention_backward: one task per batch entry (per
 * batch and head) on the thread pool, so the [L, S] scores of a task are made, normalized and
 * consumed while they sit in cache (128 x 128 floats is 64 KiB). The products are oar_gemm
 * calls, which read the strided head views in place (row stride any, column stride 1) and run
 * on the calling thread inside the parallel loop; the row work (scale, mask, softmax, its
 * backward) is AVX2 with sums of exponentials and of products kept in double, as the
 * softmax kernels do. Causal rows only touch keys j <= i: the rest are zero. */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm_blas.h"
#include "kernels/cpu/nn_half.h"
#include "kernels/cpu/nn_kernels.h"
#include "kernels/cpu/nn_simd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(OAR_NN_SIMD) && defined(OAR_HAVE_OPENBLAS)

typedef struct attn_job {
    oar_tensor *const *in;
    oar_tensor *const *out;
    int64_t L, S, D, Dv;
    float scale;
    bool causal;
    bool failed;        /* a task could not get its scratch buffer */
    const int64_t *ext; /* forward: per query row, 1 + its last unmasked key (0: none) */
    bool uniform;       /* forward: every row sees every key */
} attn_job;

static int64_t batch_offset(const oar_tensor *t, int64_t b) {
    int64_t off = 0;
    for (int d = t->ndim - 3; d >= 0; d--) {
        off += (b % t->shape[d]) * t->strides[d];
        b /= t->shape[d];
    }
    return off;
}

static const float *base_of(const oar_tensor *t, int64_t b) { return (const float *)oar_tensor_ptr(t) + batch_offset(t, b); }
static int64_t ld_of(const oar_tensor *t) { return t->strides[t->ndim - 2]; }

/* x[0, n) <- softmax(x * scale) with masked entries at -inf; x[n, S) <- 0. */
static NN_AVX2 void scaled_softmax_row(float *x, int64_t n, int64_t S, float scale, const char *mrow, int64_t mcs) {
    if (n == 0) { /* every key masked: NaN, as softmax of all -inf */
        for (int64_t j = 0; j < S; j++) x[j] = NAN;
        return;
    }
    const __m256 sc = _mm256_set1_ps(scale);
    const int64_t full = n & ~(int64_t)7, rest = n - full;
    const __m256i tail = nn_tail_mask(rest);
    for (int64_t j = 0; j < full; j += 8) _mm256_storeu_ps(x + j, _mm256_mul_ps(_mm256_loadu_ps(x + j), sc));
    if (rest) _mm256_maskstore_ps(x + full, tail, _mm256_mul_ps(_mm256_maskload_ps(x + full, tail), sc));
    if (mrow)
        for (int64_t j = 0; j < n; j++)
            if (mrow[j * mcs]) x[j] = -INFINITY;
    __m256 vm = _mm256_set1_ps(-INFINITY);
    for (int64_t j = 0; j < full; j += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + j));
    if (rest) vm = _mm256_max_ps(vm, nn_load_tail(x + full, tail, -INFINITY));
    const float mx = nn_hmax256(vm);
    if (mx == -INFINITY) { /* every key masked: NaN, as softmax of all -inf */
        for (int64_t j = 0; j < S; j++) x[j] = NAN;
        return;
    }
    const __m256 m = _mm256_set1_ps(mx);
    nn_dacc acc = nn_dacc_zero();
    for (int64_t j = 0; j < full; j += 8) {
        __m256 e = nn_exp256(_mm256_sub_ps(_mm256_loadu_ps(x + j), m));
        _mm256_storeu_ps(x + j, e);
        nn_dacc_add(&acc, e);
    }
    if (rest) {
        __m256 e = _mm256_and_ps(nn_exp256(_mm256_sub_ps(nn_load_tail(x + full, tail, 0.0f), m)),
                                 _mm256_castsi256_ps(tail));
        _mm256_maskstore_ps(x + full, tail, e);
        nn_dacc_add(&acc, e);
    }
    const __m256 inv = _mm256_set1_ps((float)(1.0 / nn_dacc_sum(acc)));
    for (int64_t j = 0; j < full; j += 8) _mm256_storeu_ps(x + j, _mm256_mul_ps(_mm256_loadu_ps(x + j), inv));
    if (rest) _mm256_maskstore_ps(x + full, tail, _mm256_mul_ps(_mm256_maskload_ps(x + full, tail), inv));
    for (int64_t j = n; j < S; j++) x[j] = 0.0f;
}

/* Rows are taken in blocks of ROW_BLOCK; a block only multiplies the keys [0, n) where n is
 * its rows' largest key extent (past the last unmasked key: probabilities there are 0), so a
 * causal mask skips about 3/8 of the products at L = S = 128. Without masked tails one block
 * takes all rows. */
#define ROW_BLOCK 32

static int64_t block_rows(const attn_job *j) { return j->uniform ? j->L : ROW_BLOCK; }

static int64_t block_extent(const int64_t *ext, int64_t i0, int64_t i1) {
    int64_t n = 0;
    for (int64_t i = i0; i < i1; i++) n = ext[i] > n ? ext[i] : n;
    return n;
}

/* One batch entry: q [L, D], k [S, D], v [S, Dv] with row strides ldq, ldk, ldv into p [L, S]
 * and o [L, Dv], dense. */
static void forward_entry(const attn_job *j, const float *qb, int64_t ldq, const float *kb, int64_t ldk,
                          const float *vb, int64_t ldv, float *p, float *o) {
    const oar_tensor *mask = j->in[3];
    const int64_t L = j->L, S = j->S, bm = block_rows(j);
    for (int64_t i0 = 0; i0 < L; i0 += bm) {
        int64_t i1 = i0 + bm < L ? i0 + bm : L, nb = block_extent(j->ext, i0, i1);
        if (nb > 0) oar_gemm(OAR_F32, false, true, i1 - i0, nb, j->D, qb + i0 * ldq, ldq, kb, ldk, 0.0, p + i0 * S, S);
        for (int64_t i = i0; i < i1; i++) {
            const char *mrow = mask ? (const char *)oar_tensor_ptr(mask) + i * mask->strides[0] : NULL;
            int64_t n = j->causal && i + 1 < nb ? i + 1 : nb;
            scaled_softmax_row(p + i * S, n, S, j->scale, mrow, mask ? mask->strides[1] : 0);
        }
        if (nb > 0)
            oar_gemm(OAR_F32, false, false, i1 - i0, j->Dv, nb, p + i0 * S, S, vb, ldv, 0.0, o + i0 * j->Dv, j->Dv);
        else
            for (int64_t x = i0 * j->Dv; x < i1 * j->Dv; x++) o[x] = NAN; /* every key masked */
    }
}

static void forward_range(void *ctx, int64_t begin, int64_t end) {
    attn_job *j = ctx;
    const oar_tensor *q = j->in[0], *k = j->in[1], *v = j->in[2];
    for (int64_t b = begin; b < end; b++)
        forward_entry(j, base_of(q, b), ld_of(q), base_of(k, b), ld_of(k), base_of(v, b), ld_of(v),
                      (float *)oar_tensor_ptr(j->out[1]) + b * j->L * j->S,
                      (float *)oar_tensor_ptr(j->out[0]) + b * j->L * j->Dv);
}

/* ds <- scale * p * (dp - sum(dp * p)), in place over dp. */
static NN_AVX2 void softmax_backward_scaled_row(float *dp, const float *p, int64_t S, float scale) {
    const int64_t full = S & ~(int64_t)7, rest = S - full;
    const __m256i tail = nn_tail_mask(rest);
    nn_dacc acc = nn_dacc_zero();
    for (int64_t j = 0; j < full; j += 8) nn_dacc_add(&acc, _mm256_mul_ps(_mm256_loadu_ps(dp + j), _mm256_loadu_ps(p + j)));
    if (rest) nn_dacc_add(&acc, _mm256_mul_ps(nn_load_tail(dp + full, tail, 0.0f), nn_load_tail(p + full, tail, 0.0f)));
    const __m256 r = _mm256_set1_ps((float)nn_dacc_sum(acc)), sc = _mm256_set1_ps(scale);
    for (int64_t j = 0; j < full; j += 8) {
        __m256 d = _mm256_mul_ps(_mm256_loadu_ps(p + j), _mm256_sub_ps(_mm256_loadu_ps(dp + j), r));
        _mm256_storeu_ps(dp + j, _mm256_mul_ps(d, sc));
    }
    if (rest) {
        __m256 d = _mm256_mul_ps(nn_load_tail(p + full, tail, 0.0f), _mm256_sub_ps(nn_load_tail(dp + full, tail, 0.0f), r));
        _mm256_maskstore_ps(dp + full, tail, _mm256_mul_ps(d, sc));
    }
}

/* Keys past the last nonzero probability of a row add nothing to any gradient (ds and the
 * row's share of dv are p times something), so the backward reads its blocks' extents off p. */
static int64_t row_extent(const float *p, int64_t S) {
    int64_t n = S;
    while (n > 0 && p[n - 1] == 0.0f) n--;
    return n;
}

/* One batch entry: g [L, Dv], q [L, D], k [S, D], v [S, Dv], p [L, S] (row strides ldg ... ldp)
 * into dense dq [L, D], dk [S, D], dv [S, Dv]; ds [L, S] and ext [L] are scratch. */
static void backward_entry(const attn_job *j, const float *gb, int64_t ldg, const float *qb, int64_t ldq,
                           const float *kb, int64_t ldk, const float *vb, int64_t ldv, const float *pb, int64_t ldp,
                           float *dq, float *dk, float *dv, float *ds, int64_t *ext) {
    const int64_t L = j->L, S = j->S, D = j->D, Dv = j->Dv;
    bool uniform = true;
    for (int64_t i = 0; i < L; i++) uniform &= (ext[i] = row_extent(pb + i * ldp, S)) == S;
    const int64_t rb = uniform ? L : ROW_BLOCK;
    if (!uniform) {
        memset(dk, 0, sizeof(float) * (size_t)(S * D));
        memset(dv, 0, sizeof(float) * (size_t)(S * Dv));
    }
    for (int64_t i0 = 0; i0 < L; i0 += rb) {
        int64_t i1 = i0 + rb < L ? i0 + rb : L, m = i1 - i0, nb = block_extent(ext, i0, i1);
        double beta = uniform ? 0.0 : 1.0;
        if (nb == 0) { /* rows with no probability mass: no gradient */
            memset(dq + i0 * D, 0, sizeof(float) * (size_t)(m * D));
            continue;
        }
        oar_gemm(OAR_F32, true, false, nb, Dv, m, pb + i0 * ldp, ldp, gb + i0 * ldg, ldg, beta, dv, Dv);
        oar_gemm(OAR_F32, false, true, m, nb, Dv, gb + i0 * ldg, ldg, vb, ldv, 0.0, ds, S);
        for (int64_t i = 0; i < m; i++) softmax_backward_scaled_row(ds + i * S, pb + (i0 + i) * ldp, nb, j->scale);
        oar_gemm(OAR_F32, false, false, m, D, nb, ds, S, kb, ldk, 0.0, dq + i0 * D, D);
        oar_gemm(OAR_F32, true, false, nb, D, m, ds, S, qb + i0 * ldq, ldq, beta, dk, D);
    }
}

static void backward_range(void *ctx, int64_t begin, int64_t end) {
    attn_job *j = ctx;
    const oar_tensor *g = j->in[0], *q = j->in[1], *k = j->in[2], *v = j->in[3], *pt = j->in[4];
    const int64_t L = j->L, S = j->S, D = j->D, Dv = j->Dv;
    float *ds = malloc(sizeof(float) * (size_t)(L * S)); /* a whole [L, S] when no row block is cut short */
    int64_t *ext = malloc(sizeof(int64_t) * (size_t)L);
    if (!ds || !ext) {
        free(ds);
        free(ext);
        j->failed = true;
        return;
    }
    for (int64_t b = begin; b < end; b++)
        backward_entry(j, base_of(g, b), ld_of(g), base_of(q, b), ld_of(q), base_of(k, b), ld_of(k), base_of(v, b),
                       ld_of(v), base_of(pt, b), ld_of(pt), (float *)oar_tensor_ptr(j->out[0]) + b * L * D,
                       (float *)oar_tensor_ptr(j->out[1]) + b * S * D, (float *)oar_tensor_ptr(j->out[2]) + b * S * Dv,
                       ds, ext);
    free(ds);
    free(ext);
}

/* ---- bf16/f16 q, k, v (O2 programs at the AVX2 cap, where no native bf16 GEMM runs): each
 * batch entry is widened into f32 scratch, the f32 code above runs on it, and the results are
 * rounded once into the outputs. That is what the via-f32 kernel computes, bit for bit (it
 * widens whole tensors into dense f32 ones, whose row strides these copies have), without its
 * passes over whole tensors: the rows are widened in registers and used while in cache. */
static const void *half_base(const oar_tensor *t, int64_t b) {
    return (const uint16_t *)oar_tensor_ptr(t) + batch_offset(t, b);
}

/* rows x cols of a 16-bit matrix (row stride ld, unit column stride) into dense f32 */
static NN_AVX2H void widen_rows(const void *src, int64_t ld, int64_t rows, int64_t cols, int k, float *dst) {
    const int64_t full = cols & ~(int64_t)7;
    const __m256i tail = nn_tail_mask(cols - full);
    for (int64_t r = 0; r < rows; r++, dst += cols) {
        for (int64_t c = 0; c < full; c += 8) _mm256_storeu_ps(dst + c, nn_ld(src, r * ld + c, k));
        if (full < cols) _mm256_maskstore_ps(dst + full, tail, nn_ld_tail(src, r * ld + full, cols - full, tail, 0.0f, k));
    }
}

/* n dense f32 values rounded into dense 16-bit dst */
static NN_AVX2H void round_into(const float *src, int64_t n, int k, void *dst) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) nn_st(dst, i, _mm256_loadu_ps(src + i), k);
    if (i < n) {
        const __m256i tail = nn_tail_mask(n - i);
        nn_st_tail(dst, i, n - i, tail, _mm256_maskload_ps(src + i, tail), k);
    }
}

static void forward_range_half(void *ctx, int64_t begin, int64_t end) {
    attn_job *j = ctx;
    const oar_tensor *q = j->in[0], *k = j->in[1], *v = j->in[2];
    const int64_t L = j->L, S = j->S, D = j->D, Dv = j->Dv;
    const int kind = nn_kind(q->dtype);
    float *qf = malloc(sizeof(float) * (size_t)(L * D + S * D + S * Dv + L * S + L * Dv));
    if (!qf) {
        j->failed = true;
        return;
    }
    float *kf = qf + L * D, *vf = kf + S * D, *pf = vf + S * Dv, *of = pf + L * S;
    for (int64_t b = begin; b < end; b++) {
        widen_rows(half_base(q, b), ld_of(q), L, D, kind, qf);
        widen_rows(half_base(k, b), ld_of(k), S, D, kind, kf);
        widen_rows(half_base(v, b), ld_of(v), S, Dv, kind, vf);
        forward_entry(j, qf, D, kf, D, vf, Dv, pf, of);
        round_into(pf, L * S, kind, (uint16_t *)oar_tensor_ptr(j->out[1]) + b * L * S);
        round_into(of, L * Dv, kind, (uint16_t *)oar_tensor_ptr(j->out[0]) + b * L * Dv);
    }
    free(qf);
}

static void backward_range_half(void *ctx, int64_t begin, int64_t end) {
    attn_job *j = ctx;
    const oar_tensor *g = j->in[0], *q = j->in[1], *k = j->in[2], *v = j->in[3], *pt = j->in[4];
    const int64_t L = j->L, S = j->S, D = j->D, Dv = j->Dv;
    const int kind = nn_kind(q->dtype);
    size_t floats = (size_t)(L * Dv + L * D + S * D + S * Dv + L * S + L * D + S * D + S * Dv + L * S);
    float *gf = malloc(sizeof(float) * floats);
    int64_t *ext = malloc(sizeof(int64_t) * (size_t)L);
    if (!gf || !ext) {
        free(gf);
        free(ext);
        j->failed = true;
        return;
    }
    float *qf = gf + L * Dv, *kf = qf + L * D, *vf = kf + S * D, *pf = vf + S * Dv;
    float *dq = pf + L * S, *dk = dq + L * D, *dv = dk + S * D, *ds = dv + S * Dv;
    for (int64_t b = begin; b < end; b++) {
        widen_rows(half_base(g, b), ld_of(g), L, Dv, kind, gf);
        widen_rows(half_base(q, b), ld_of(q), L, D, kind, qf);
        widen_rows(half_base(k, b), ld_of(k), S, D, kind, kf);
        widen_rows(half_base(v, b), ld_of(v), S, Dv, kind, vf);
        widen_rows(half_base(pt, b), ld_of(pt), L, S, kind, pf);
        backward_entry(j, gf, Dv, qf, D, kf, D, vf, Dv, pf, S, dq, dk, dv, ds, ext);
        round_into(dq, L * D, kind, (uint16_t *)oar_tensor_ptr(j->out[0]) + b * L * D);
        round_into(dk, S * D, kind, (uint16_t *)oar_tensor_ptr(j->out[1]) + b * S * D);
        round_into(dv, S * Dv, kind, (uint16_t *)oar_tensor_ptr(j->out[2]) + b * S * Dv);
    }
    free(gf);
    free(ext);
}

/* Head views read in place need unit column stride and BLAS-sized leading dims (f32; 16-bit
 * ones are copied); empty sizes and other layouts go to the reference (f32) or via-f32. */
static bool unit_rows(const oar_tensor *t, oar_dtype dt) {
    int nd = t->ndim;
    return t->dtype == dt && t->strides[nd - 1] == 1 && t->strides[nd - 2] >= t->shape[nd - 1] &&
           (dt != OAR_F32 || oar_gemm_fits(t->strides[nd - 2])) && t->numel > 0;
}

static bool attention_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)out; (void)n_out; (void)a;
    const oar_dtype dt = in[0]->dtype;
    if (!oar_cpu_has_avx2() || (dt == OAR_F16 && !oar_nn_has_f16c())) return false;
    int n_dense = n_in == 4 ? 3 : 5; /* fused_attention: q, k, v (and a mask read by strides) */
    for (int i = 0; i < n_dense; i++)
        if (!unit_rows(in[i], dt)) return false;
    return true;
}

static attn_job job_for(oar_tensor *const *qkv, oar_tensor *const *in, oar_tensor *const *out, double scale,
                        bool causal) {
    int nd = qkv[0]->ndim;
    return (attn_job){in, out, qkv[0]->shape[nd - 2], qkv[1]->shape[nd - 2], qkv[0]->shape[nd - 1],
                      qkv[2]->shape[nd - 1], (float)scale, causal, false, NULL, true};
}

static int64_t batches(const oar_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim - 2; d++) n *= t->shape[d];
    return n;
}

static oar_status fused_attention_cpu(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                      int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    attn_job j = job_for(in, in, out, a[0].f, a[1].i != 0);
    const oar_tensor *mask = in[3];
    int64_t *ext = malloc(sizeof(int64_t) * (size_t)j.L);
    if (!ext) return oar_error(OAR_ERR_OOM, "fused_attention: out of memory");
    for (int64_t i = 0; i < j.L; i++) { /* the mask is shared by every batch entry */
        int64_t n = j.causal && i + 1 < j.S ? i + 1 : j.S;
        const char *mrow = mask ? (const char *)oar_tensor_ptr(mask) + i * mask->strides[0] : NULL;
        while (mrow && n > 0 && mrow[(n - 1) * mask->strides[1]]) n--;
        ext[i] = n;
        j.uniform &= n == j.S;
    }
    j.ext = ext;
    oar_parallel_for(batches(in[0]), 1, in[0]->dtype == OAR_F32 ? forward_range : forward_range_half, &j);
    free(ext);
    return j.failed ? oar_error(OAR_ERR_OOM, "fused_attention: out of memory") : OAR_OK;
}

static oar_status attention_backward_cpu(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                         oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    attn_job j = job_for(in + 1, in, out, a[0].f, false);
    oar_parallel_for(batches(in[1]), 1, in[0]->dtype == OAR_F32 ? backward_range : backward_range_half, &j);
    return j.failed ? oar_error(OAR_ERR_OOM, "attention_backward: out of memory") : OAR_OK;
}

#endif

void oar_cpu_register_attention(void) {
#if defined(OAR_NN_SIMD) && defined(OAR_HAVE_OPENBLAS)
    oar_kernel_entry e = {.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32), .impl = "avx2-gemm", .priority = 10,
                          .fn = fused_attention_cpu, .supports = attention_ok};
    oar_register_kernel(OAR_OP_fused_attention, e);
    e.fn = attention_backward_cpu;
    oar_register_kernel(OAR_OP_attention_backward, e);
    /* bf16/f16: the f32 code on widened batch entries (the via-f32 kernel stays for other layouts) */
    e.dtypes = OAR_DTYPE_BIT(OAR_BF16) | OAR_DTYPE_BIT(OAR_F16);
    e.impl = OAR_IMPL_HALF_PARTIAL;
    e.fn = fused_attention_cpu;
    oar_register_kernel(OAR_OP_fused_attention, e);
    e.fn = attention_backward_cpu;
    oar_register_kernel(OAR_OP_attention_backward, e);
#endif
}
