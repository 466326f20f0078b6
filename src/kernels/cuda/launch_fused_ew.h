/* Launcher of fused_ew.cu: fused_elementwise's straight-line program run per element, each
 * instruction one of the elementwise kinds of launch_elementwise.h, its result rounded to the
 * dtype as the separate ops would store it. */
#ifndef OAR_CUDA_LAUNCH_FUSED_EW_H
#define OAR_CUDA_LAUNCH_FUSED_EW_H

#include "launch_copy.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OAR_CU_FEW_MAX_IN 32
#define OAR_CU_FEW_MAX_CODE 64

typedef struct oar_cu_few_instr {
    int8_t binary;      /* 1: a binary kind (oar_cu_binary), 0: unary (oar_cu_unary) */
    int8_t kind;
    int8_t a, b;        /* registers: 0..n_in-1 inputs, n_in + k instruction k */
    float attr;         /* gelu's approximate */
} oar_cu_few_instr;

typedef struct oar_cu_few {
    int n_in, n_code, ndim, dtype;
    int64_t n;
    int64_t shape[OAR_CU_MAX_DIMS];
    int64_t strides[OAR_CU_FEW_MAX_IN][OAR_CU_MAX_DIMS]; /* elements, 0 on broadcast dims */
    const void *in[OAR_CU_FEW_MAX_IN];
    void *out;
    oar_cu_few_instr code[OAR_CU_FEW_MAX_CODE];
} oar_cu_few;

int oar_cu_fused_ew(const oar_cu_few *p, void *stream);

#ifdef __cplusplus
}
#endif
#endif
