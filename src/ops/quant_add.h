/* qadd's parameters and per-element arithmetic (src/ops/quant_add.c), shared with its AVX2
 * kernel (src/kernels/cpu/qadd_avx2.c) so that both give the same bytes. */
#ifndef OAR_OPS_QUANT_ADD_H
#define OAR_OPS_QUANT_ADD_H

#include "ops/quant.h"

/* qadd's input positions */
enum { QA_A, QA_AS, QA_AZP, QA_B, QA_BS, QA_BZP, QA_YS, QA_YZP, QA_N };

typedef struct oar_qadd_params_t {
    float sa, sb, sy, lo, hi; /* lo, hi: the output range less its zero point */
    int32_t za, zb, zy;
    bool relu, a_signed, b_signed, y_signed;
} oar_qadd_params_t;

/* Reads and checks the scales (positive, finite f32) and zero points (within their data's range). */
oar_status oar_qadd_params(oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a, oar_qadd_params_t *p);

/* One output code from the raw bytes of a and b. */
static inline int32_t oar_qadd_one(const oar_qadd_params_t *p, uint8_t a, uint8_t b) {
    int32_t ia = p->a_signed ? (int32_t)(int8_t)a : (int32_t)a, ib = p->b_signed ? (int32_t)(int8_t)b : (int32_t)b;
    float va = (float)(ia - p->za) * p->sa, vb = (float)(ib - p->zb) * p->sb;
    float v = va + vb;
    if (p->relu) v = oar_qmaxf(v, 0.0f);
    float t = oar_qminf(oar_qmaxf(v / p->sy, p->lo), p->hi);
    return (int32_t)nearbyintf(t) + p->zy;
}

/* Registers qadd's AVX2 kernel (src/kernels/cpu/qadd_avx2.c; nothing off x86). */
void oar_cpu_register_qadd_fast(void);
/* Its AVX-512 kernel (src/kernels/cpu/qadd_avx512.c), likewise. */
void oar_cpu_register_qadd_avx512(void);

#endif
