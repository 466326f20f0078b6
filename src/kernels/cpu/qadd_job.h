/* What the AVX2 and AVX-512 qadd kernels share: the job their loops read, and the launch that
 * fills it, decides whether the multiplication by 1 / y_scale may stand in for the division,
 * picks the loop compiled for unsigned operands where it can, and splits the codes over the
 * threads. The loops themselves are each ISA's. */
#ifndef OAR_KERNELS_CPU_QADD_JOB_H
#define OAR_KERNELS_CPU_QADD_JOB_H

#include "kernels/cpu/cpu_kernels.h"
#include "ops/quant_add.h"

typedef struct qadd_job {
    const uint8_t *a, *b;
    uint8_t *y;
    oar_qadd_params_t p;
    bool fast; /* 1 / y_scale normal and finite: the multiplication may stand in for the division */
} qadd_job;

typedef void (*qadd_range_fn)(void *, int64_t, int64_t);

/* any: every flag combination; uu / uu_relu: unsigned operands, the fast path, without / with relu */
static inline oar_status qadd_launch(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                     int n_out, const oar_attr *a, qadd_range_fn any, qadd_range_fn uu,
                                     qadd_range_fn uu_relu) {
    qadd_job j = {.a = (const uint8_t *)oar_tensor_ptr(in[QA_A]), .b = (const uint8_t *)oar_tensor_ptr(in[QA_B]),
                  .y = (uint8_t *)oar_tensor_ptr(out[0])};
    if (oar_qadd_params(in, out, a, &j.p) != OAR_OK)
        return oar_opdef_qadd.reference(ctx, in, n_in, out, n_out, a); /* its error */
    float inv = 1.0f / j.p.sy;
    j.fast = j.p.sy >= 1.17549435e-38f && inv >= 1.17549435e-38f && inv < 3.4e38f;
    qadd_range_fn fn = any;
    if (j.fast && !j.p.a_signed && !j.p.b_signed) fn = j.p.relu ? uu_relu : uu;
    if (out[0]->numel) oar_parallel_for(out[0]->numel, 1 << 15, fn, &j);
    return OAR_OK;
}

#endif
