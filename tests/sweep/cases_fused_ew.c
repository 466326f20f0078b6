/* Sweep cases for the fused ops of the fusion passes (src/ops/fused_ew.c).
 * fused_elementwise programs are words opcode*10000 + a*100 + b (src/ops/fused_ew.h); registers
 * 0..n_in-1 are the inputs, instruction k writes register n_in + k. */
#include "sweep.h"

#define BIG SWEEP_NO_GRAD
#define EMPTY3 " code1= code2= code3="

const sweep_case sweep_cases_fused_ew[] = {
    /* sigmoid(a) * b + c */
    {"fused_elementwise", "n:3x4;n:3x4;n:3x4", "code0=120000,30301,10402" EMPTY3},
    /* tanh(x + bias) * scale: a row and a 0-d operand broadcast */
    {"fused_elementwise", "n:2x3x5;n:5;n:", "code0=10001,130300,30402" EMPTY3},
    /* the LSTM cell: h = sigmoid(o) * tanh(sigmoid(f) * c + sigmoid(i) * tanh(g)) */
    {"fused_elementwise", "n:2x6;n:2x6;n:2x6;n:2x6;n:2x6",
     "code0=120000,130200,30506,120100,30804,10907,120300,131000,31112" EMPTY3},
    {"fused_elementwise", "n:3x67;n:3x67;n:3x67;n:3x67;n:3x67",
     "code0=120000,130200,30506,120100,30804,10907,120300,131000,31112" EMPTY3, BIG},
    /* gelu (erf and tanh forms) with a residual */
    {"fused_elementwise", "n:3x5;n:3x5", "code0=200000,10201" EMPTY3},
    {"fused_elementwise", "n:3x5;n:3x5", "code0=210000,10201" EMPTY3},
    {"fused_elementwise", "n:3x67;n:3x67", "code0=200000,10201" EMPTY3, BIG},
    {"fused_elementwise", "n:3x67;n:3x67", "code0=210000,10201" EMPTY3, BIG},
    /* backward ops: relu_backward(g, x) * s, gelu_backward(g, x) - y in both forms */
    {"fused_elementwise", "n:3x4;d:3x4;n:", "code0=300001,30302" EMPTY3},
    {"fused_elementwise", "n:3x4;n:3x4;n:3x4", "code0=310001,20302" EMPTY3},
    {"fused_elementwise", "n:3x4;n:3x4;n:3x4", "code0=320001,20302" EMPTY3},
    {"fused_elementwise", "n:5x67;n:5x67;n:67", "code0=320001,20302" EMPTY3, BIG},
    /* silu(square(log a / sqrt a - exp(-b))) * (log a / sqrt a) */
    {"fused_elementwise", "p:3x4;n:3x4", "code0=150000,160000,40203,100100,140500,20406,170700,190800,30904" EMPTY3},
    {"fused_elementwise", "p:4x33;n:4x33", "code0=150000,160000,40203,100100,140500,20406,170700,190800,30904" EMPTY3,
     BIG},
    /* abs and relu have kinks: no gradient check */
    {"fused_elementwise", "n:4x9;n:4x9", "code0=180000,110100,30203" EMPTY3, BIG},
    /* one register read twice: x * x + x */
    {"fused_elementwise", "n:2x3", "code0=30000,10100" EMPTY3},
    /* 20 instructions over code0 and code1: ((a + b) + b) + ... In f16/bf16 the reference rounds every
     * instruction (the op's meaning) and the via-f32 kernel once: up to 20 half-ulps apart (measured 4 ulps
     * of f16, 2.5e-3, over the 2e-3 the low-precision pass allows one rounding) */
    {"fused_elementwise", "n:2x5;n:5",
     "code0=10001,10201,10301,10401,10501,10601,10701,10801,10901,11001,11101,11201,11301,11401,11501,11601 "
     "code1=11701,11801,11901,12001 code2= code3=", SWEEP_LONG_CHAIN},
    /* general broadcasts (gathered operands), 0-d, empty */
    {"fused_elementwise", "n:4x1x5;n:3x1;n:1x5", "code0=10001,130300,30402" EMPTY3},
    {"fused_elementwise", "n:7x1x67;n:5x1;n:1x67", "code0=10001,130300,30402" EMPTY3, BIG},
    {"fused_elementwise", "n:;n:", "code0=10001,120200" EMPTY3},
    {"fused_elementwise", "n:0x3;n:3", "code0=10001,110200" EMPTY3},
    /* split over threads, with a tail in each chunk */
    {"fused_elementwise", "n:5x4099;n:5x4099;n:4099", "code0=10001,120300,30402" EMPTY3, BIG},
    /* linear_act: activation 0 none, 1 relu, 2 gelu, 3 gelu (tanh) */
    {"linear_act", "n:4x5;n:3x5;n:3", "activation=0"},
    {"linear_act", "n:4x5;n:3x5;n:3", "activation=1"},
    {"linear_act", "n:4x5;n:3x5;none", "activation=2"},
    {"linear_act", "n:2x3x5;n:7x5;n:7", "activation=3"},
    {"linear_act", "n:5;n:3x5;n:3", "activation=3"},
    {"linear_act", "n:0x5;n:3x5;n:3", "activation=1"},
    {"linear_act", "n:4x0;n:3x0;n:3", "activation=2"},
    {"linear_act", "i-3_3:2x3;i-3_3:4x3;none", "activation=1", SWEEP_NO_GRAD},
    {"linear_act", "n:33x70;n:41x70;n:41", "activation=1", BIG},
    {"linear_act", "n:33x70;n:41x70;n:41", "activation=3", BIG},
    {"linear_act", "n:64x96;n:300x96;n:300", "activation=2", BIG}, /* split over threads */
    {0},
};

static bool few_call(oar_tensor *a, oar_tensor *b, const int64_t *code, int n_code) {
    oar_attr at[4] = {oar_attr_ints(code, n_code), oar_attr_ints(NULL, 0), oar_attr_ints(NULL, 0),
                      oar_attr_ints(NULL, 0)};
    oar_tensor *in[2] = {a, b};
    return oar_op_call1(OAR_OP_fused_elementwise, in, 2, at) != NULL;
}
static oar_tensor *zeros23(oar_dtype dt) {
    int64_t s[2] = {2, 3};
    return oar_zeros(s, 2, dt);
}
static bool bad_opcode(void) { return few_call(zeros23(OAR_F32), zeros23(OAR_F32), (int64_t[]){990001}, 1); }
static bool bad_register(void) { return few_call(zeros23(OAR_F32), zeros23(OAR_F32), (int64_t[]){10002}, 1); }
static bool bad_unary_operand(void) { return few_call(zeros23(OAR_F32), zeros23(OAR_F32), (int64_t[]){120001}, 1); }
static bool bad_empty(void) { return few_call(zeros23(OAR_F32), zeros23(OAR_F32), NULL, 0); }
static bool bad_dtype(void) { return few_call(zeros23(OAR_F32), zeros23(OAR_F64), (int64_t[]){10001}, 1); }
static bool bad_int(void) { return few_call(zeros23(OAR_I64), zeros23(OAR_I64), (int64_t[]){10001}, 1); }
static bool bad_shape(void) {
    int64_t s[2] = {4, 2};
    return few_call(zeros23(OAR_F32), oar_zeros(s, 2, OAR_F32), (int64_t[]){10001}, 1);
}
static bool bad_gap(void) { /* code1 used while code0 is not full */
    oar_attr at[4] = {oar_attr_ints((int64_t[]){10001}, 1), oar_attr_ints((int64_t[]){10201}, 1),
                      oar_attr_ints(NULL, 0), oar_attr_ints(NULL, 0)};
    oar_tensor *in[2] = {zeros23(OAR_F32), zeros23(OAR_F32)};
    return oar_op_call1(OAR_OP_fused_elementwise, in, 2, at) != NULL;
}

static bool linear_act_call(oar_tensor *x, oar_tensor *w, int64_t act) {
    oar_attr at[1] = {oar_attr_int(act)};
    oar_tensor *in[3] = {x, w, NULL};
    return oar_op_call1(OAR_OP_linear_act, in, 3, at) != NULL;
}
static bool bad_activation(void) { return linear_act_call(zeros23(OAR_F32), zeros23(OAR_F32), 7); }
static bool bad_linear_shape(void) {
    int64_t s[2] = {4, 2};
    return linear_act_call(zeros23(OAR_F32), oar_zeros(s, 2, OAR_F32), 1);
}
static bool bad_gelu_int(void) { return linear_act_call(zeros23(OAR_I64), zeros23(OAR_I64), 2); }

const sweep_bad sweep_bad_fused_ew[] = {
    {"linear_act unknown activation", bad_activation, "linear_act: expected activation 0 (none)"},
    {"linear_act in_features differ", bad_linear_shape, "linear_act: linear: expected x.shape[-1] == weight.shape[1]"},
    {"linear_act gelu on integers", bad_gelu_int, "linear_act"},
    {"fused_elementwise unknown opcode", bad_opcode, "expected instruction 0 as opcode*10000"},
    {"fused_elementwise register not yet written", bad_register, "to read registers below 2"},
    {"fused_elementwise unary with operand b", bad_unary_operand, "expected operand b == 0"},
    {"fused_elementwise empty program", bad_empty, "expected at least one instruction"},
    {"fused_elementwise mixed dtypes", bad_dtype, "fused_elementwise: expected"},
    {"fused_elementwise integer inputs", bad_int, "fused_elementwise"},
    {"fused_elementwise shapes that do not broadcast", bad_shape, "fused_elementwise"},
    {"fused_elementwise code1 after a short code0", bad_gap, "expected code1 empty"},
    {0},
};
