/* fused_elementwise on the GPU: the program decoded once per call (ops/fused_ew.h), each
 * opcode mapped to an elementwise kind, the operands passed as strided views at the output's
 * shape. */
#include "cuda_backend.h"
#include "launch_elementwise.h"
#include "launch_fused_ew.h"
#include "ops/fused_ew.h"

#include <string.h>

/* The elementwise kind of an opcode and whether it is binary; false for one it does not know. */
static bool kind_of(int opcode, int *kind, int *binary) {
    static const struct { int opcode, kind, binary; } map[] = {
        {OAR_FEW_ADD, OAR_CU_ADD, 1}, {OAR_FEW_SUB, OAR_CU_SUB, 1}, {OAR_FEW_MUL, OAR_CU_MUL, 1},
        {OAR_FEW_DIV, OAR_CU_DIV, 1}, {OAR_FEW_NEG, OAR_CU_NEG, 0}, {OAR_FEW_RELU, OAR_CU_RELU, 0},
        {OAR_FEW_SIGMOID, OAR_CU_SIGMOID, 0}, {OAR_FEW_TANH, OAR_CU_TANH, 0}, {OAR_FEW_EXP, OAR_CU_EXP, 0},
        {OAR_FEW_LOG, OAR_CU_LOG, 0}, {OAR_FEW_SQRT, OAR_CU_SQRT, 0}, {OAR_FEW_SQUARE, OAR_CU_SQUARE, 0},
        {OAR_FEW_ABS, OAR_CU_ABS, 0}, {OAR_FEW_SILU, OAR_CU_SILU, 0}, {OAR_FEW_GELU, OAR_CU_GELU, 0},
        {OAR_FEW_GELU_TANH, OAR_CU_GELU, 0}, {OAR_FEW_RELU_BACKWARD, OAR_CU_RELU_BACKWARD, 1},
        {OAR_FEW_GELU_BACKWARD, OAR_CU_GELU_BACKWARD, 1}, {OAR_FEW_GELU_TANH_BACKWARD, OAR_CU_GELU_BACKWARD, 1},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].opcode == opcode) {
            *kind = map[i].kind;
            *binary = map[i].binary;
            return true;
        }
    return false;
}

static oar_status cu_fused_ew(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *a) {
    (void)n_out;
    oar_few_instr code[OAR_FEW_MAX_CODE];
    int n_code;
    oar_status st = oar_few_decode(a, n_in, code, &n_code);
    if (st != OAR_OK) return st;
    oar_tensor *y = out[0];
    oar_cu_few p;
    memset(&p, 0, sizeof p);
    p.n_in = n_in;
    p.n_code = n_code;
    p.ndim = y->ndim;
    p.dtype = y->dtype;
    p.n = y->numel;
    p.out = oar_tensor_ptr(y);
    for (int k = 0; k < y->ndim; k++) p.shape[k] = y->shape[k];
    for (int j = 0; j < n_in; j++) {
        int lead = y->ndim - in[j]->ndim;
        for (int k = 0; k < y->ndim; k++) {
            int tk = k - lead;
            p.strides[j][k] = tk < 0 || in[j]->shape[tk] == 1 ? 0 : in[j]->strides[tk];
        }
        p.in[j] = oar_tensor_ptr(in[j]);
    }
    for (int c = 0; c < n_code; c++) {
        int kind, binary;
        if (!kind_of(code[c].opcode, &kind, &binary))
            return oar_error(OAR_ERR_UNSUPPORTED, "fused_elementwise: opcode %d has no GPU form", code[c].opcode);
        p.code[c] = (oar_cu_few_instr){.binary = (int8_t)binary, .kind = (int8_t)kind, .a = (int8_t)code[c].a,
                                       .b = (int8_t)code[c].b,
                                       .attr = code[c].opcode == OAR_FEW_GELU_TANH ||
                                                       code[c].opcode == OAR_FEW_GELU_TANH_BACKWARD
                                                   ? 1.0f
                                                   : 0.0f};
    }
    return oar_cuda_status((cudaError_t)oar_cu_fused_ew(&p, ctx->stream), "fused_elementwise");
}

static bool fits(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)in; (void)n_out; (void)a;
    return n_in <= OAR_CU_FEW_MAX_IN && out[0]->ndim <= OAR_CU_MAX_DIMS;
}

void oar_cuda_register_fused_ew(void) {
    _Static_assert(OAR_FEW_MAX_CODE <= OAR_CU_FEW_MAX_CODE && OAR_FEW_MAX_INPUTS <= OAR_CU_FEW_MAX_IN,
                   "the GPU program holds every program fused_elementwise accepts");
    oar_cuda_register(OAR_OP_fused_elementwise, OAR_FLOAT_DTYPES, cu_fused_ew, fits);
}
