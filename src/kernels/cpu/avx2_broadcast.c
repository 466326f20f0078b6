/* AVX2/FMA f32 kernels for add, sub, mul, div, maximum, minimum, the comparisons and where
 * under any broadcast. The output shape is collapsed into outer dims, walked by an odometer,
 * and one inner block in which every operand is contiguous (stride 1) or a repeated scalar
 * (stride 0): a per-channel [C, 1, 1] operand of an [N, C, H, W] tensor becomes a scalar over
 * each H*W block. Outer dims may have any strides; `supports` declines other inner strides. */
#include "kernels/cpu/avx2_broadcast.h"

#if defined(__x86_64__)
#include "kernels/cpu/avx2_elementwise.h"
#include "kernels/cpu/avx2_math.h"

#include <string.h>

#define BC_MAX_IN 3
/* Forced inlining lets each call site with constant scalar flags become its own loop. */
#define BC_INLINE static inline __attribute__((always_inline)) OAR_AVX2

/* One inner block: src[i] points at input i's first element, sc[i] says it is repeated. */
typedef void (*bc_seg_fn)(const char *const *src, const bool *sc, char *y, int64_t n);

typedef struct bc_plan {
    int n_in, nd;                        /* inputs; outer dims */
    int64_t inner;                       /* inner block length */
    int64_t shape[OAR_MAX_DIMS];         /* outer dims */
    int64_t st[BC_MAX_IN][OAR_MAX_DIMS]; /* outer strides of the inputs, in elements */
    bool sc[BC_MAX_IN];                  /* inner stride 0 */
    const char *base[BC_MAX_IN];
    size_t es[BC_MAX_IN], ys;            /* element sizes */
    char *y;
    bc_seg_fn seg;
} bc_plan;

/* Lays out in -> y (shapes only, no data pointers); false for an inner stride other than 0/1
 * or a non-contiguous output. */
static bool bc_layout(oar_tensor *const *in, int n_in, const oar_tensor *y, bc_plan *p) {
    int64_t shape[OAR_MAX_DIMS], st[BC_MAX_IN + 1][OAR_MAX_DIMS]; /* [n_in]: the output */
    int nd = 0, D = y->ndim;
    if (!y->contiguous) return false;
    for (int d = 0; d < D; d++) {
        int64_t n = y->shape[d], s[BC_MAX_IN + 1];
        if (n == 1) continue;
        for (int i = 0; i < n_in; i++) {
            int k = d - (D - in[i]->ndim);
            s[i] = (k < 0 || in[i]->shape[k] == 1) ? 0 : in[i]->strides[k];
        }
        s[n_in] = y->strides[d];
        /* merge with the previous dim when every operand steps over both as one */
        bool merge = nd > 0;
        for (int i = 0; merge && i <= n_in; i++) merge = st[i][nd - 1] == s[i] * n;
        if (merge) shape[nd - 1] *= n;
        else shape[nd++] = n;
        for (int i = 0; i <= n_in; i++) st[i][nd - 1] = s[i];
    }
    if (nd == 0) { /* a single element */
        shape[nd++] = 1;
        for (int i = 0; i <= n_in; i++) st[i][0] = 0;
    }
    p->n_in = n_in;
    p->nd = nd - 1;
    p->inner = shape[nd - 1];
    for (int i = 0; i < n_in; i++) {
        int64_t s = st[i][nd - 1];
        if (s != 0 && s != 1) return false;
        p->sc[i] = s == 0;
        for (int d = 0; d < nd - 1; d++) p->st[i][d] = st[i][d];
    }
    for (int d = 0; d < nd - 1; d++) p->shape[d] = shape[d];
    return true;
}

/* Output elements [begin, end): blocks cut at inner-block ends, outer dims by odometer. */
static void bc_range(void *vp, int64_t begin, int64_t end) {
    const bc_plan *p = vp;
    int64_t o = begin / p->inner, col = begin % p->inner;
    int64_t idx[OAR_MAX_DIMS], off[BC_MAX_IN] = {0};
    for (int d = p->nd - 1; d >= 0; d--) {
        idx[d] = o % p->shape[d];
        o /= p->shape[d];
        for (int i = 0; i < p->n_in; i++) off[i] += idx[d] * p->st[i][d];
    }
    for (int64_t pos = begin; pos < end;) {
        int64_t len = p->inner - col;
        if (len > end - pos) len = end - pos;
        const char *src[BC_MAX_IN];
        for (int i = 0; i < p->n_in; i++)
            src[i] = p->base[i] + (off[i] + (p->sc[i] ? 0 : col)) * (int64_t)p->es[i];
        p->seg(src, p->sc, p->y + pos * (int64_t)p->ys, len);
        pos += len;
        col = 0;
        for (int d = p->nd - 1; d >= 0; d--) {
            for (int i = 0; i < p->n_in; i++) off[i] += p->st[i][d];
            if (++idx[d] < p->shape[d]) break;
            for (int i = 0; i < p->n_in; i++) off[i] -= p->st[i][d] * p->shape[d];
            idx[d] = 0;
        }
    }
}

/* Calls BLK(a, sa, b, sb, ...) with the scalar flags as constants, one loop per case. */
#define BC_DISPATCH2(BLK, a, b, sc, ...)                               \
    do {                                                               \
        if (sc[0] && sc[1]) BLK(a, true, b, true, __VA_ARGS__);        \
        else if (sc[0]) BLK(a, true, b, false, __VA_ARGS__);           \
        else if (sc[1]) BLK(a, false, b, true, __VA_ARGS__);           \
        else BLK(a, false, b, false, __VA_ARGS__);                     \
    } while (0)

/* ---- f32 arithmetic: f32 + - * / are correctly rounded, so they equal the double reference */
OAR_V_INLINE __m256 v_maximum(__m256 a, __m256 b) { /* NaN propagates; ties give b */
    return _mm256_blendv_ps(_mm256_max_ps(a, b), a, oar_v_isnan(a));
}
OAR_V_INLINE __m256 v_minimum(__m256 a, __m256 b) {
    return _mm256_blendv_ps(_mm256_min_ps(a, b), a, oar_v_isnan(a));
}

#define ARITH_KERNEL(NAME, VOP)                                                                   \
    BC_INLINE void NAME##_blk(const float *a, bool sa, const float *b, bool sb, float *y,         \
                              int64_t n) {                                                        \
        const __m256 va = _mm256_broadcast_ss(a), vb = _mm256_broadcast_ss(b);                    \
        int64_t i = 0;                                                                            \
        for (; i + 8 <= n; i += 8)                                                                \
            _mm256_storeu_ps(y + i, VOP(sa ? va : _mm256_loadu_ps(a + i),                         \
                                        sb ? vb : _mm256_loadu_ps(b + i)));                       \
        if (i < n) {                                                                              \
            __m256i m = oar_v_tail_mask(n - i);                                                   \
            _mm256_maskstore_ps(y + i, m, VOP(sa ? va : _mm256_maskload_ps(a + i, m),             \
                                              sb ? vb : _mm256_maskload_ps(b + i, m)));           \
        }                                                                                         \
    }                                                                                             \
    static OAR_AVX2 void NAME##_seg(const char *const *src, const bool *sc, char *y, int64_t n) { \
        const float *a = (const float *)src[0], *b = (const float *)src[1];                       \
        BC_DISPATCH2(NAME##_blk, a, b, sc, (float *)y, n);                                        \
    }

ARITH_KERNEL(add, _mm256_add_ps)
ARITH_KERNEL(sub, _mm256_sub_ps)
ARITH_KERNEL(mul, _mm256_mul_ps)
ARITH_KERNEL(div, _mm256_div_ps)
ARITH_KERNEL(maximum, v_maximum)
ARITH_KERNEL(minimum, v_minimum)

/* ---- comparisons: bool (0/1 bytes) output; ordered predicates except ne, as C's operators */

/* Four 8-lane masks -> 32 bytes of 0/1 in element order (the packs work per 128-bit lane). */
OAR_V_INLINE __m256i bc_pack_bools(__m256 c0, __m256 c1, __m256 c2, __m256 c3) {
    __m256i p01 = _mm256_packs_epi32(_mm256_castps_si256(c0), _mm256_castps_si256(c1));
    __m256i p23 = _mm256_packs_epi32(_mm256_castps_si256(c2), _mm256_castps_si256(c3));
    __m256i b = _mm256_packs_epi16(p01, p23);
    b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    return _mm256_and_si256(b, _mm256_set1_epi8(1));
}

#define CMP_KERNEL(NAME, PRED, SOP)                                                               \
    BC_INLINE void NAME##_blk(const float *a, bool sa, const float *b, bool sb, uint8_t *y,       \
                              int64_t n) {                                                        \
        const __m256 va = _mm256_broadcast_ss(a), vb = _mm256_broadcast_ss(b);                    \
        int64_t i = 0;                                                                            \
        for (; i + 32 <= n; i += 32) {                                                            \
            __m256 c[4];                                                                          \
            for (int k = 0; k < 4; k++)                                                           \
                c[k] = _mm256_cmp_ps(sa ? va : _mm256_loadu_ps(a + i + 8 * k),                    \
                                     sb ? vb : _mm256_loadu_ps(b + i + 8 * k), PRED);             \
            _mm256_storeu_si256((__m256i *)(y + i), bc_pack_bools(c[0], c[1], c[2], c[3]));       \
        }                                                                                         \
        for (; i < n; i++) y[i] = (sa ? a[0] : a[i]) SOP (sb ? b[0] : b[i]);                      \
    }                                                                                             \
    static OAR_AVX2 void NAME##_seg(const char *const *src, const bool *sc, char *y, int64_t n) { \
        const float *a = (const float *)src[0], *b = (const float *)src[1];                       \
        BC_DISPATCH2(NAME##_blk, a, b, sc, (uint8_t *)y, n);                                      \
    }

CMP_KERNEL(eq, _CMP_EQ_OQ, ==)
CMP_KERNEL(ne, _CMP_NEQ_UQ, !=)
CMP_KERNEL(lt, _CMP_LT_OQ, <)
CMP_KERNEL(le, _CMP_LE_OQ, <=)
CMP_KERNEL(gt, _CMP_GT_OQ, >)
CMP_KERNEL(ge, _CMP_GE_OQ, >=)

/* ---- where(cond, a, b): copies bits (as uint32), like the reference's memcpy */
BC_INLINE void where_blk(const uint32_t *a, bool sa, const uint32_t *b, bool sb, const uint8_t *c,
                         uint32_t *y, int64_t n) {
    const __m256 va = _mm256_broadcast_ss((const float *)a), vb = _mm256_broadcast_ss((const float *)b);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i cv = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(c + i)));
        __m256 off = _mm256_castsi256_ps(_mm256_cmpeq_epi32(cv, _mm256_setzero_si256()));
        __m256 x = sa ? va : _mm256_loadu_ps((const float *)(a + i));
        __m256 z = sb ? vb : _mm256_loadu_ps((const float *)(b + i));
        _mm256_storeu_ps((float *)(y + i), _mm256_blendv_ps(x, z, off));
    }
    for (; i < n; i++) y[i] = c[i] ? (sa ? a[0] : a[i]) : (sb ? b[0] : b[i]);
}

static OAR_AVX2 void where_seg(const char *const *src, const bool *sc, char *yp, int64_t n) {
    const uint8_t *c = (const uint8_t *)src[0];
    const uint32_t *a = (const uint32_t *)src[1], *b = (const uint32_t *)src[2];
    uint32_t *y = (uint32_t *)yp;
    if (!sc[0]) {
        BC_DISPATCH2(where_blk, a, b, (sc + 1), c, y, n);
        return;
    }
    /* one condition for the whole block: a copy or a fill */
    const uint32_t *s = *c ? a : b;
    if (!(*c ? sc[1] : sc[2])) {
        memcpy(y, s, (size_t)n * sizeof *y);
        return;
    }
    const __m256 v = _mm256_broadcast_ss((const float *)s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps((float *)(y + i), v);
    for (; i < n; i++) y[i] = *s;
}

/* ---- dispatch glue */
static bc_seg_fn seg_of(oar_op_id op) {
    switch (op) {
    case OAR_OP_add: return add_seg;
    case OAR_OP_sub: return sub_seg;
    case OAR_OP_mul: return mul_seg;
    case OAR_OP_div: return div_seg;
    case OAR_OP_maximum: return maximum_seg;
    case OAR_OP_minimum: return minimum_seg;
    case OAR_OP_eq: return eq_seg;
    case OAR_OP_ne: return ne_seg;
    case OAR_OP_lt: return lt_seg;
    case OAR_OP_le: return le_seg;
    case OAR_OP_gt: return gt_seg;
    case OAR_OP_ge: return ge_seg;
    case OAR_OP_where: return where_seg;
    default: return NULL;
    }
}

static oar_status bc_run(oar_op_id op, oar_tensor *const *in, int n_in, oar_tensor *y) {
    bc_plan p;
    if (y->numel == 0) return OAR_OK;
    if (!bc_layout(in, n_in, y, &p))
        return oar_error(OAR_ERR_INTERNAL, "%s: the avx2 broadcast kernel got a layout it does "
                                           "not support (dispatch should have asked)",
                         oar_op_table[op]->name);
    for (int i = 0; i < n_in; i++) {
        p.base[i] = oar_tensor_ptr(in[i]);
        p.es[i] = oar_dtypes[in[i]->dtype].size;
    }
    p.y = oar_tensor_ptr(y);
    p.ys = oar_dtypes[y->dtype].size;
    p.seg = seg_of(op);
    oar_parallel_for(y->numel, OAR_EW_GRAIN, bc_range, &p);
    return OAR_OK;
}

#define BC_ENTRY(NAME)                                                                    \
    static oar_status NAME##_bc(const oar_kctx *ctx, oar_tensor *const *in, int n_in,     \
                                oar_tensor *const *out, int n_out, const oar_attr *attrs) { \
        (void)ctx; (void)n_out; (void)attrs;                                              \
        return bc_run(OAR_OP_##NAME, in, n_in, out[0]);                                   \
    }
BC_ENTRY(add) BC_ENTRY(sub) BC_ENTRY(mul) BC_ENTRY(div) BC_ENTRY(maximum) BC_ENTRY(minimum)
BC_ENTRY(eq) BC_ENTRY(ne) BC_ENTRY(lt) BC_ENTRY(le) BC_ENTRY(gt) BC_ENTRY(ge) BC_ENTRY(where)

/* Binary ops and comparisons: f32 inputs (the output dtype follows from the op). */
static bool binary_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                            const oar_attr *attrs) {
    (void)n_out; (void)attrs;
    bc_plan p;
    if (!oar_cpu_has_avx2() || in[0]->dtype != OAR_F32 || in[1]->dtype != OAR_F32) return false;
    return out[0]->numel == 0 || bc_layout(in, n_in, out[0], &p);
}

static bool where_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                           const oar_attr *attrs) {
    (void)n_out; (void)attrs;
    bc_plan p;
    if (!oar_cpu_has_avx2() || in[0]->dtype != OAR_BOOL || in[1]->dtype != OAR_F32 ||
        in[2]->dtype != OAR_F32)
        return false;
    return out[0]->numel == 0 || bc_layout(in, n_in, out[0], &p);
}

void oar_avx2_register_broadcast(void) {
    static const struct {
        oar_op_id op;
        oar_kernel_fn fn;
    } table[] = {
        {OAR_OP_add, add_bc}, {OAR_OP_sub, sub_bc},         {OAR_OP_mul, mul_bc},
        {OAR_OP_div, div_bc}, {OAR_OP_maximum, maximum_bc}, {OAR_OP_minimum, minimum_bc},
        {OAR_OP_eq, eq_bc},   {OAR_OP_ne, ne_bc},           {OAR_OP_lt, lt_bc},
        {OAR_OP_le, le_bc},   {OAR_OP_gt, gt_bc},           {OAR_OP_ge, ge_bc},
        {OAR_OP_where, where_bc},
    };
    /* Priority 5: above the reference, below avx2_binary.c's kernels for their simpler forms. */
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        oar_register_kernel(table[i].op,
                            (oar_kernel_entry){.device = OAR_CPU,
                                               .dtypes = OAR_DTYPE_BIT(OAR_F32),
                                               .impl = "avx2-bcast",
                                               .priority = 5,
                                               .fn = table[i].fn,
                                               .supports = table[i].op == OAR_OP_where
                                                               ? where_supports
                                                               : binary_supports});
}

#else
/* Not x86-64: nothing to register (cpu_elementwise.c does not call in). */
typedef int oar_avx2_broadcast_unused;
#endif
