/* Launchers of copy.cu: strided copies with dtype conversion, and fills. Plain C; dtypes are
 * oar_dtype values; strides are in elements; each returns a cudaError_t as int. */
#ifndef OAR_CUDA_LAUNCH_COPY_H
#define OAR_CUDA_LAUNCH_COPY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OAR_CU_MAX_DIMS 8

typedef struct oar_cu_strided {
    int ndim;
    int64_t shape[OAR_CU_MAX_DIMS];
    int64_t dst_strides[OAR_CU_MAX_DIMS], src_strides[OAR_CU_MAX_DIMS];
} oar_cu_strided;

int oar_cu_copy_strided(void *dst, int dst_dtype, const void *src, int src_dtype, const oar_cu_strided *layout,
                        int64_t n, void *stream);
int oar_cu_fill(void *dst, int dtype, int64_t n, double value, void *stream);

#ifdef __cplusplus
}
#endif
#endif
