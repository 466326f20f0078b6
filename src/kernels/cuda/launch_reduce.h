/* Launchers of reduce.cu: reductions over an index space split into kept (outer) and reduced
 * (inner) dims, each with its own element strides, so any input layout is read as is. One
 * block per output; floats accumulate in double (the reference's precision), in a fixed
 * order. dtype is a float dtype (OAR_F32, OAR_F64, OAR_F16, OAR_BF16; oar numbering), or an
 * integer dtype / bool for sum
 * and prod (int64 results, wrapping), amax and amin (x's dtype), argmax/argmin and cumsum
 * (int64 results); each returns a cudaError_t as int. */
#ifndef OAR_CUDA_LAUNCH_REDUCE_H
#define OAR_CUDA_LAUNCH_REDUCE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OAR_CU_RPLAN_DIMS 8

typedef struct oar_cu_rplan {
    int n_outer, n_inner;
    int64_t outer_shape[OAR_CU_RPLAN_DIMS], outer_stride[OAR_CU_RPLAN_DIMS]; /* elements */
    int64_t inner_shape[OAR_CU_RPLAN_DIMS], inner_stride[OAR_CU_RPLAN_DIMS];
    int64_t outer_numel, inner_numel;
} oar_cu_rplan;

enum {
    OAR_CU_R_SUM, OAR_CU_R_MEAN, OAR_CU_R_AMAX, OAR_CU_R_AMIN, OAR_CU_R_PROD, OAR_CU_R_VAR, OAR_CU_R_STD,
    OAR_CU_R_LSE, OAR_CU_R_NORM,
};

/* Device scratch (bytes) oar_cu_reduce wants for plan (0: none); without it, it still
 * works, with one block per output. */
size_t oar_cu_reduce_scratch_bytes(int kind, const oar_cu_rplan *plan);
/* y (contiguous, outer_numel elements) = reduction of each inner group of x. p: norm's p;
 * correction: var/std's. scratch: oar_cu_reduce_scratch_bytes of device memory, or NULL. */
int oar_cu_reduce(int kind, int dtype, const void *x, void *y, const oar_cu_rplan *plan, double p,
                  int64_t correction, void *scratch, void *stream);
/* y (int64, outer_numel) = index of the first max (min) of each group; NaN counts as the
 * extreme. */
int oar_cu_argext(int is_min, int dtype, const void *x, int64_t *y, const oar_cu_rplan *plan, void *stream);
/* Inclusive sum along each group (n_inner <= 1): x read with plan_x, y written with plan_y;
 * reverse sums from the end. */
int oar_cu_cumsum(int dtype, const void *x, void *y, const oar_cu_rplan *plan_x, const oar_cu_rplan *plan_y,
                  int reverse, void *stream);

#ifdef __cplusplus
}
#endif
#endif
