/* add, sub and mul of two bf16 (or f16) tensors of one shape, dense: each value widened in
 * registers, the f32 operation, one rounding to the dtype (nn_half.h). The bits of the via-f32
 * path (widen both, the f32 kernel, round), without its three f32 copies: what a compiled AMP
 * step's backward adds (the residual gradients of ResNet blocks) ran through. Other layouts and
 * broadcasts keep the via-f32 kernels. */
#include "kernels/cpu/nn_half.h"
#include "kernels/cpu/nn_kernels.h"

#ifdef OAR_NN_SIMD

typedef enum { HB_ADD, HB_SUB, HB_MUL } hb_op;

typedef struct hb_job {
    const void *a, *b;
    void *y;
    int k;
    hb_op op;
} hb_job;

NN_HINL __m256 hb_apply(__m256 a, __m256 b, hb_op op) {
    return op == HB_ADD ? _mm256_add_ps(a, b) : op == HB_SUB ? _mm256_sub_ps(a, b) : _mm256_mul_ps(a, b);
}

NN_HINL void hb_range_k(const hb_job *j, int64_t begin, int64_t end, const int k, const hb_op op) {
    int64_t i = begin;
    for (; i + 8 <= end; i += 8) nn_st(j->y, i, hb_apply(nn_ld(j->a, i, k), nn_ld(j->b, i, k), op), k);
    if (i < end) {
        const int64_t n = end - i;
        const __m256i mask = nn_tail_mask(n);
        __m256 v = hb_apply(nn_ld_tail(j->a, i, n, mask, 0.0f, k), nn_ld_tail(j->b, i, n, mask, 0.0f, k), op);
        nn_st_tail(j->y, i, n, mask, v, k);
    }
}

/* one loop per kind and operation, each with its conversions inlined */
static NN_AVX2H void hb_range(void *ctx, int64_t begin, int64_t end) {
    const hb_job *j = ctx;
    const bool bf = j->k == NN_BF16;
    switch (j->op) {
    case HB_ADD: bf ? hb_range_k(j, begin, end, NN_BF16, HB_ADD) : hb_range_k(j, begin, end, NN_F16, HB_ADD); break;
    case HB_SUB: bf ? hb_range_k(j, begin, end, NN_BF16, HB_SUB) : hb_range_k(j, begin, end, NN_F16, HB_SUB); break;
    case HB_MUL: bf ? hb_range_k(j, begin, end, NN_BF16, HB_MUL) : hb_range_k(j, begin, end, NN_F16, HB_MUL); break;
    }
}

static oar_status hb_run(oar_tensor *const *in, oar_tensor *const *out, hb_op op) {
    hb_job j = {oar_tensor_ptr(in[0]), oar_tensor_ptr(in[1]), oar_tensor_ptr(out[0]), nn_kind(out[0]->dtype), op};
    const int64_t n = out[0]->numel, grain = (int64_t)1 << 15; /* a multiple of 8: only the last part has a tail */
    if (n >= 2 * grain) oar_parallel_for(n, grain, hb_range, &j);
    else hb_range(&j, 0, n);
    return OAR_OK;
}

#define HB_KERNEL(name, OP)                                                                                           \
    static oar_status name##_half(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,      \
                                  int n_out, const oar_attr *a) {                                                    \
        (void)ctx, (void)n_in, (void)n_out, (void)a;                                                                 \
        return hb_run(in, out, OP);                                                                                  \
    }
HB_KERNEL(add, HB_ADD)
HB_KERNEL(sub, HB_SUB)
HB_KERNEL(mul, HB_MUL)

/* both operands and the output dense, of one bf16/f16 dtype and one element count (no broadcast) */
static bool hb_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in, (void)n_out, (void)a;
    const int k = nn_kind(out[0]->dtype);
    if (!oar_cpu_has_avx2() || (k != NN_BF16 && k != NN_F16)) return false;
    return oar_nn_half_ok(in[0], k) && oar_nn_half_ok(in[1], k) && oar_nn_half_ok(out[0], k) &&
           in[0]->numel == out[0]->numel && in[1]->numel == out[0]->numel;
}

#endif

void oar_cpu_register_half_binary(void) {
#ifdef OAR_NN_SIMD
    const struct {
        oar_op_id op;
        oar_kernel_fn fn;
    } table[] = {{OAR_OP_add, add_half}, {OAR_OP_sub, sub_half}, {OAR_OP_mul, mul_half}};
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        oar_register_kernel(table[i].op, (oar_kernel_entry){.device = OAR_CPU,
                                                            .dtypes = OAR_DTYPE_BIT(OAR_BF16) | OAR_DTYPE_BIT(OAR_F16),
                                                            .impl = OAR_IMPL_HALF_PARTIAL,
                                                            .priority = 10,
                                                            .fn = table[i].fn,
                                                            .supports = hb_supports});
#endif
}
