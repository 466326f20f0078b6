/* contiguous and cast on the GPU: their reference kernels copy through the device table's
 * strided copy (copy.cu's kernels, any layout, any dtype pair), so the same function serves
 * as the CUDA kernel. */
#include "cuda_backend.h"

void oar_cuda_register_copy(void) {
    oar_cuda_register(OAR_OP_contiguous, OAR_ALL_DTYPES, oar_op_table[OAR_OP_contiguous]->reference, NULL);
    oar_cuda_register(OAR_OP_cast, OAR_ALL_DTYPES, oar_op_table[OAR_OP_cast]->reference, NULL);
}
