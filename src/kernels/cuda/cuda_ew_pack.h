/* Operands of an elementwise op viewed at its output's shape, for the launchers of elementwise.cu
 * and special.cu (defined in cuda_elementwise.c). */
#ifndef OAR_CUDA_EW_PACK_H
#define OAR_CUDA_EW_PACK_H

#include "cuda_backend.h"
#include "launch_elementwise.h"

/* Strides in elements, 0 on broadcast dims; false past OAR_CU_MAX_DIMS. */
bool oar_cu_ew_pack(oar_cu_ew *e, oar_tensor *const *in, int n_in, oar_tensor *y);

#endif
