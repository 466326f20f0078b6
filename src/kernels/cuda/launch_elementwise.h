/* Launchers of elementwise.cu: the unary, binary and where families over strided, broadcast
 * inputs (one kernel per family; the op is a runtime kind). Floats compute in double like
 * the CPU reference (the loads are the cost, not the arithmetic), integers in int64. */
#ifndef OAR_CUDA_LAUNCH_ELEMENTWISE_H
#define OAR_CUDA_LAUNCH_ELEMENTWISE_H

#include "launch_copy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Operands viewed at the output's shape: strides in elements, 0 on broadcast dims. */
typedef struct oar_cu_ew {
    int ndim, n_in;
    int64_t n;                                  /* output elements */
    int64_t shape[OAR_CU_MAX_DIMS];
    int64_t strides[3][OAR_CU_MAX_DIMS];        /* per input */
    const void *in[3];
    void *out;
    int in_dtype, out_dtype;                    /* oar_dtype of inputs 0..1 (where: of a, b) */
    int contiguous;                             /* every input contiguous at the output's shape */
    double attr[2];
} oar_cu_ew;

enum oar_cu_unary {
    OAR_CU_NEG, OAR_CU_ABS, OAR_CU_EXP, OAR_CU_LOG, OAR_CU_LOG1P, OAR_CU_SQRT, OAR_CU_RSQRT, OAR_CU_SQUARE,
    OAR_CU_SIN, OAR_CU_COS, OAR_CU_TANH, OAR_CU_SIGMOID, OAR_CU_RELU, OAR_CU_LEAKY_RELU, OAR_CU_ELU,
    OAR_CU_GELU, OAR_CU_SILU, OAR_CU_SOFTPLUS, OAR_CU_ERF, OAR_CU_CLIP, OAR_CU_SIGN, OAR_CU_FLOOR,
    OAR_CU_CEIL, OAR_CU_ROUND, OAR_CU_LOGICAL_NOT, OAR_CU_ERFC, OAR_CU_ASIN, OAR_CU_ACOS, OAR_CU_ATAN,
    OAR_CU_SINH, OAR_CU_ASINH, OAR_CU_ATANH, OAR_CU_EXPM1, OAR_CU_EXP2, OAR_CU_ACOSH, OAR_CU_COSH,
    OAR_CU_LGAMMA, OAR_CU_DIGAMMA, OAR_CU_POLYGAMMA /* attr[0]: n */, OAR_CU_ERFINV, OAR_CU_BITWISE_NOT
};
enum oar_cu_binary {
    OAR_CU_ADD, OAR_CU_SUB, OAR_CU_MUL, OAR_CU_DIV, OAR_CU_POW, OAR_CU_MAX, OAR_CU_MIN, OAR_CU_EQ, OAR_CU_NE,
    OAR_CU_LT, OAR_CU_LE, OAR_CU_GT, OAR_CU_GE, OAR_CU_AND, OAR_CU_OR,
    OAR_CU_RELU_BACKWARD, OAR_CU_GELU_BACKWARD,  /* (grad, x), attr[0]: gelu's approximate */
    OAR_CU_ATAN2, OAR_CU_BITWISE_AND, OAR_CU_BITWISE_OR, OAR_CU_BITWISE_XOR, OAR_CU_GCD, OAR_CU_LCM
};

int oar_cu_unary(int kind, const oar_cu_ew *e, void *stream);
int oar_cu_binary(int kind, const oar_cu_ew *e, void *stream);
int oar_cu_where(const oar_cu_ew *e, void *stream); /* in[0] bool cond, in[1], in[2] of in_dtype */
int oar_cu_increment(void *p, int dtype, int64_t n, void *stream); /* p[i] += 1 on an integer dtype */

#ifdef __cplusplus
}
#endif
#endif
