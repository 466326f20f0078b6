/* AVX2/FMA f32 kernels for add, sub, mul, div, maximum and minimum. They take contiguous
 * operands in the common broadcast forms: same shape, one operand with a single element, and
 * a row [N] repeated over an [..., N] operand. `supports` declines every other layout. */
#include "kernels/cpu/avx2_elementwise.h"

#if defined(__x86_64__)
#include "kernels/cpu/avx2_math.h"

typedef enum { FORM_FULL, FORM_SCALAR, FORM_ROW } operand_form;

typedef struct binary_job {
    const float *a, *b;
    float *y;
    operand_form fa, fb;
    int64_t row; /* length of the repeated row when an operand is FORM_ROW, else 0 */
} binary_job;

static bool operand_form_of(const oar_tensor *t, const oar_tensor *y, operand_form *f) {
    int64_t last = y->ndim ? y->shape[y->ndim - 1] : 1;
    if (t->numel == y->numel) *f = FORM_FULL; /* broadcasting only adds 1s: same layout */
    else if (t->numel == 1) *f = FORM_SCALAR;
    else if (t->ndim && t->numel == last && t->shape[t->ndim - 1] == last) *f = FORM_ROW;
    else return false;
    return true;
}

/* Fills the job for in -> out; false for a layout these kernels do not take. */
static bool plan(oar_tensor *const *in, oar_tensor *const *out, binary_job *j) {
    const oar_tensor *y = out[0];
    if (!in[0]->contiguous || !in[1]->contiguous || !y->contiguous) return false;
    if (!operand_form_of(in[0], y, &j->fa) || !operand_form_of(in[1], y, &j->fb)) return false;
    if (j->fa != FORM_FULL && j->fb != FORM_FULL) return false;
    j->row = (j->fa == FORM_ROW || j->fb == FORM_ROW) ? y->shape[y->ndim - 1] : 0;
    j->a = (const float *)oar_tensor_ptr(in[0]);
    j->b = (const float *)oar_tensor_ptr(in[1]);
    j->y = (float *)oar_tensor_ptr(y);
    return true;
}

/* maximum/minimum propagate NaN like torch: max_ps returns its second operand when either is
 * NaN, so only a NaN in a needs patching. Ties (+-0) give b, as the reference's a > b ? a : b. */
OAR_V_INLINE __m256 v_maximum(__m256 a, __m256 b) {
    return _mm256_blendv_ps(_mm256_max_ps(a, b), a, oar_v_isnan(a));
}
OAR_V_INLINE __m256 v_minimum(__m256 a, __m256 b) {
    return _mm256_blendv_ps(_mm256_min_ps(a, b), a, oar_v_isnan(a));
}

/* y[0..n) = OP(A, B) with a masked tail; A/B load from i, AM/BM under mask m. */
#define SEG_LOOP(OP, A, B, AM, BM)                                  \
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, OP(A, B));   \
    if (i < n) {                                                    \
        __m256i m = oar_v_tail_mask(n - i);                         \
        _mm256_maskstore_ps(y + i, m, OP(AM, BM));                  \
    }

#define LOAD_A _mm256_loadu_ps(a + i)
#define LOAD_B _mm256_loadu_ps(b + i)
#define MLOAD_A _mm256_maskload_ps(a + i, m)
#define MLOAD_B _mm256_maskload_ps(b + i, m)

/* NAME_seg: one contiguous stretch, a or b possibly a broadcast scalar. NAME_range walks a
 * thread's [begin, end), cut at row ends when an operand is a repeated row. */
#define BINARY_KERNEL(NAME, OP)                                                                     \
    static OAR_AVX2 void NAME##_seg(const float *a, bool sa, const float *b, bool sb, float *y,     \
                                    int64_t n) {                                                    \
        int64_t i = 0;                                                                              \
        if (sa) {                                                                                   \
            const __m256 va = _mm256_broadcast_ss(a);                                               \
            SEG_LOOP(OP, va, LOAD_B, va, MLOAD_B)                                                   \
        } else if (sb) {                                                                            \
            const __m256 vb = _mm256_broadcast_ss(b);                                               \
            SEG_LOOP(OP, LOAD_A, vb, MLOAD_A, vb)                                                   \
        } else {                                                                                    \
            SEG_LOOP(OP, LOAD_A, LOAD_B, MLOAD_A, MLOAD_B)                                          \
        }                                                                                           \
    }                                                                                               \
    static OAR_AVX2 void NAME##_range(void *vjob, int64_t begin, int64_t end) {                     \
        const binary_job *j = vjob;                                                                 \
        if (!j->row) {                                                                              \
            NAME##_seg(j->a + (j->fa == FORM_FULL ? begin : 0), j->fa == FORM_SCALAR,               \
                       j->b + (j->fb == FORM_FULL ? begin : 0), j->fb == FORM_SCALAR, j->y + begin, \
                       end - begin);                                                                \
            return;                                                                                 \
        }                                                                                           \
        for (int64_t i = begin; i < end;) {                                                         \
            int64_t col = i % j->row, len = j->row - col;                                           \
            if (len > end - i) len = end - i;                                                       \
            NAME##_seg(j->a + (j->fa == FORM_ROW ? col : i), false,                                 \
                       j->b + (j->fb == FORM_ROW ? col : i), false, j->y + i, len);                 \
            i += len;                                                                               \
        }                                                                                           \
    }                                                                                               \
    static oar_status NAME##_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in,             \
                                  oar_tensor *const *out, int n_out, const oar_attr *attrs) {       \
        (void)ctx; (void)n_in; (void)n_out; (void)attrs;                                            \
        binary_job j;                                                                               \
        if (out[0]->numel == 0) return OAR_OK;                                                      \
        if (!plan(in, out, &j))                                                                     \
            return oar_error(OAR_ERR_INTERNAL, #NAME ": the avx2 kernel got a layout it does not "   \
                                                     "support (dispatch should have asked)");       \
        oar_parallel_for(out[0]->numel, OAR_EW_GRAIN, NAME##_range, &j);                            \
        return OAR_OK;                                                                              \
    }

BINARY_KERNEL(add, _mm256_add_ps)
BINARY_KERNEL(sub, _mm256_sub_ps)
BINARY_KERNEL(mul, _mm256_mul_ps)
BINARY_KERNEL(div, _mm256_div_ps) /* IEEE division: the same f32 result as the double reference */
BINARY_KERNEL(maximum, v_maximum)
BINARY_KERNEL(minimum, v_minimum)

static bool binary_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                            const oar_attr *attrs) {
    (void)n_in; (void)n_out; (void)attrs;
    binary_job j;
    if (!oar_cpu_has_avx2() || in[0]->dtype != OAR_F32 || in[1]->dtype != OAR_F32) return false;
    return out[0]->numel == 0 || plan(in, out, &j);
}

void oar_avx2_register_binary(void) {
    static const struct {
        oar_op_id op;
        oar_kernel_fn fn;
    } table[] = {
        {OAR_OP_add, add_avx2}, {OAR_OP_sub, sub_avx2},         {OAR_OP_mul, mul_avx2},
        {OAR_OP_div, div_avx2}, {OAR_OP_maximum, maximum_avx2}, {OAR_OP_minimum, minimum_avx2},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        oar_register_kernel(table[i].op, (oar_kernel_entry){.device = OAR_CPU,
                                                            .dtypes = OAR_DTYPE_BIT(OAR_F32),
                                                            .impl = "avx2",
                                                            .priority = 10,
                                                            .fn = table[i].fn,
                                                            .supports = binary_supports});
}

#else
/* Not x86-64: nothing to register (cpu_elementwise.c does not call in). */
typedef int oar_avx2_binary_unused;
#endif
