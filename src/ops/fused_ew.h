/* The program of fused_elementwise (fused_ew.c): a straight-line list of elementwise ops over
 * registers. Registers 0..n_in-1 hold the inputs (broadcast to the output shape); instruction
 * k writes register n_in + k; the last instruction's register is the output.
 *
 * Each instruction is one int64, readable in dumps as decimal digits OOAABB:
 * opcode * 10000 + a * 100 + b, with a and b register numbers (b is 0 for unary opcodes).
 * The words are held in the INTS attributes code0..code3, filled in order (16 words each), so
 * a program has at most OAR_FEW_MAX_CODE instructions. Opcodes are fixed numbers, not op ids,
 * so saved programs stay valid when ops are added. */
#ifndef OAR_OPS_FUSED_EW_H
#define OAR_OPS_FUSED_EW_H

#include "ops/op.h"

#define OAR_FEW_CODE_ATTRS 4
#define OAR_FEW_MAX_CODE (OAR_FEW_CODE_ATTRS * OAR_ATTR_MAX_INTS)
#define OAR_FEW_MAX_REGS 100 /* two decimal digits per operand */
#define OAR_FEW_MAX_INPUTS 32

typedef enum oar_few_opcode {
    OAR_FEW_ADD = 1, OAR_FEW_SUB = 2, OAR_FEW_MUL = 3, OAR_FEW_DIV = 4,
    OAR_FEW_NEG = 10, OAR_FEW_RELU = 11, OAR_FEW_SIGMOID = 12, OAR_FEW_TANH = 13, OAR_FEW_EXP = 14,
    OAR_FEW_LOG = 15, OAR_FEW_SQRT = 16, OAR_FEW_SQUARE = 17, OAR_FEW_ABS = 18, OAR_FEW_SILU = 19,
    OAR_FEW_GELU = 20, OAR_FEW_GELU_TANH = 21,
    OAR_FEW_RELU_BACKWARD = 30, OAR_FEW_GELU_BACKWARD = 31, OAR_FEW_GELU_TANH_BACKWARD = 32,
} oar_few_opcode;

/* What an opcode stands for: the op it runs (with `approximate` as its one INT attribute when
 * the op has one, else -1) and its arity. NULL for an unknown opcode. */
typedef struct oar_few_info {
    int opcode;
    oar_op_id op;
    int approximate;
    int arity;
} oar_few_info;
const oar_few_info *oar_few_info_of(int opcode);
/* The opcode of op with attributes a, or 0 when fused_elementwise does not take it. */
int oar_few_opcode_for(oar_op_id op, const oar_attr *a);

typedef struct oar_few_instr {
    int opcode, a, b;
} oar_few_instr;

/* Decodes and checks the program against n_in inputs (house-style errors naming
 * fused_elementwise). *n_code receives the instruction count. */
oar_status oar_few_decode(const oar_attr *attrs, int n_in, oar_few_instr *code, int *n_code);
/* Packs code into the attributes (OAR_FEW_CODE_ATTRS entries); an error when it does not fit. */
oar_status oar_few_encode(const oar_few_instr *code, int n_code, int n_in, oar_attr *attrs);

/* linear_act's activations (its attribute "activation"; fused_linear_act.c). */
typedef enum oar_linear_act_kind {
    OAR_LINEAR_ACT_NONE = 0, OAR_LINEAR_ACT_RELU = 1, OAR_LINEAR_ACT_GELU = 2, OAR_LINEAR_ACT_GELU_TANH = 3,
} oar_linear_act_kind;

#endif
