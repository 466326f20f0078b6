/* Launchers of optim.cu: one parameter's fused optimizer update (the loops of
 * src/optim/update_impl.h on the GPU, same operations in the same order, scalars rounded to
 * the element type like the CPU loops) and vector_norm. Plain C; each returns a cudaError_t
 * as int. */
#ifndef OAR_CUDA_LAUNCH_OPTIM_H
#define OAR_CUDA_LAUNCH_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { OAR_CU_OPT_SGD, OAR_CU_OPT_ADAM, OAR_CU_OPT_RMSPROP, OAR_CU_OPT_ADAGRAD, OAR_CU_OPT_LAMB };

/* The scalars of one run's update (they change with the step count and the hyper tensor). */
typedef struct oar_cu_optim_vals {
    double lr_neg, wd, k1, k1c, k2, k2c, eps, scale, bc1, bc2;
    double lr; /* LAMB: the step is -lr * trust ratio, computed on the GPU */
    int32_t wd_on, flag1, flag2, flag3;
} oar_cu_optim_vals;

/* The fields of oar_optim_ctx (src/optim/optim.h) that the loops read; device pointers. */
typedef struct oar_cu_optim {
    int kind, dtype; /* OAR_CU_OPT_*, OAR_F32 / OAR_F64 */
    int64_t n;
    void *p;
    const void *g;
    void *a, *b, *c;
    oar_cu_optim_vals v;
    /* NULL: the kernels take v as launch arguments; else they read the scalars from this
     * device copy when they run (a replayed CUDA graph: the executor refreshes it per run) */
    const oar_cu_optim_vals *v_dev;
} oar_cu_optim;

/* Device scratch bytes the update (LAMB) and vector_norm need. */
size_t oar_cu_optim_scratch_bytes(void);
int oar_cu_optim_update(const oar_cu_optim *u, void *scratch, void *stream);
/* y (one f64 on the device) = the p-norm of x's n elements (p = INFINITY: the largest
 * magnitude, NaN propagating). */
int oar_cu_vector_norm(int dtype, const void *x, int64_t n, double p, double *y, void *scratch, void *stream);

#ifdef __cplusplus
}
#endif
#endif
