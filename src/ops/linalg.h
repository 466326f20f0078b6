/* The einsum equation resolver, shared by the op (linalg.c) and its GEMM kernel
 * (kernels/cpu/gemm_einsum.c). */
#ifndef OAR_LINALG_H
#define OAR_LINALG_H

#include "ops/op.h"

#define OAR_EINSUM_LABEL_IDS 60 /* distinct label ids: a-z, A-Z and broadcast dims */

/* The equation resolved against operands that passed inference: label ids per operand dim
 * and per output dim, and each label's broadcast size (-1 where unused). */
oar_status oar_einsum_labels(const char *eq, oar_tensor *const *in, int lab[2][OAR_MAX_DIMS],
                             int out[OAR_MAX_DIMS], int *n_out, int64_t size[OAR_EINSUM_LABEL_IDS]);

#endif
