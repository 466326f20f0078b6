/* Sweep cases for the add + layer_norm fusion ops (src/ops/fused_add_ln.c): with and without
 * weight and bias, one and two normalized dims, row tails (m not a multiple of 8), rows split
 * over threads, an empty input; layer_norm_backward_add with rstd positive like layer_norm's;
 * bf16/f16 activations with f32 parameters (O2's mixed form). */
#include "sweep.h"

#define BIG SWEEP_NO_GRAD
#define LN1 "normalized_ndim=1 eps=1e-05"
#define LN2 "normalized_ndim=2 eps=1e-05"

const sweep_case sweep_cases_fused_add_ln[] = {
    {"add_layer_norm", "n:3x5;n:3x5;n:5;n:5", LN1},
    {"add_layer_norm", "n:2x3x4;n:2x3x4;none;none", LN1},
    {"add_layer_norm", "n:2x3x4;n:2x3x4;n:3x4;none", LN2},
    {"add_layer_norm", "n:4x9;n:4x9;none;n:9", LN1},
    {"add_layer_norm", "n:0x6;n:0x6;n:6;n:6", LN1, BIG},
    {"add_layer_norm", "n:64x300;n:64x300;n:300;n:300", LN1, BIG},
    {"add_layer_norm", "n:3x333x256;n:3x333x256;n:256;n:256", LN1, BIG},
    {"add_layer_norm", "n:5x7x3;n:5x7x3;none;none", LN2, BIG},
    /* O2's mixed form: bf16/f16 activations, f32 parameters and statistics */
    {"add_layer_norm", "nbf16:3x5;nbf16:3x5;nf32:5;nf32:5", LN1, 0, 3.2e-2},
    {"add_layer_norm", "nbf16:7x300;nbf16:7x300;nf32:300;nf32:300", LN1, BIG, 3.2e-2},
    {"add_layer_norm", "nf16:4x37;nf16:4x37;nf32:37;none", LN1, 0, 2e-3},
    {"layer_norm_backward_add", "nbf16:4x6;nbf16:4x6;nf32:6;nf32:4x1;pf32:4x1;nbf16:4x6", "normalized_ndim=1", 0, 3.2e-2},
    {"layer_norm_backward_add", "nf16:5x37;nf16:5x37;nf32:37;nf32:5x1;pf32:5x1;nf16:5x37", "normalized_ndim=1", 0, 2e-3},
    {"layer_norm_backward_add", "nbf16:9x300;nbf16:9x300;nf32:300;nf32:9x1;pf32:9x1;nbf16:9x300", "normalized_ndim=1",
     BIG, 3.2e-2},
    {"layer_norm_backward_add", "n:3x5;n:3x5;n:5;n:3x1;p:3x1;n:3x5", "normalized_ndim=1"},
    {"layer_norm_backward_add", "n:2x3x4;n:2x3x4;none;n:2x3x1;p:2x3x1;n:2x3x4", "normalized_ndim=1"},
    {"layer_norm_backward_add", "n:2x3x4;n:2x3x4;n:3x4;n:2x1x1;p:2x1x1;n:2x3x4", "normalized_ndim=2"},
    {"layer_norm_backward_add", "n:4x9;n:4x9;n:9;n:4x1;p:4x1;n:4x9", "normalized_ndim=1"},
    {"layer_norm_backward_add", "n:64x300;n:64x300;n:300;n:64x1;p:64x1;n:64x300", "normalized_ndim=1", BIG},
    {"layer_norm_backward_add", "n:3x333x256;n:3x333x256;n:256;n:3x333x1;p:3x333x1;n:3x333x256",
     "normalized_ndim=1", BIG, 2e-4},
    {"layer_norm_backward_add", "n:5x7x3;n:5x7x3;none;n:5x1x1;p:5x1x1;n:5x7x3", "normalized_ndim=2", BIG},
    {0},
};

static oar_tensor *z(int64_t a, int64_t b, oar_dtype dt) {
    int64_t s[2] = {a, b};
    return oar_zeros(s, b ? 2 : 1, dt);
}
static bool add_ln(oar_tensor *a, oar_tensor *b, oar_tensor *w) {
    oar_attr at[2] = {oar_attr_int(1), oar_attr_float(1e-5)};
    oar_tensor *in[4] = {a, b, w, NULL};
    return oar_op_call1(OAR_OP_add_layer_norm, in, 4, at) != NULL;
}
static bool ln_backward_add(oar_tensor *x, oar_tensor *m, oar_tensor *r) {
    oar_attr at = oar_attr_int(1);
    oar_tensor *in[6] = {z(3, 5, OAR_F32), x, NULL, m, z(3, 1, OAR_F32), r};
    return oar_op_call1(OAR_OP_layer_norm_backward_add, in, 6, &at) != NULL;
}
static bool broadcast_b(void) { return add_ln(z(3, 5, OAR_F32), z(5, 0, OAR_F32), NULL); }
static bool mixed_b(void) { return add_ln(z(3, 5, OAR_F32), z(3, 5, OAR_F64), NULL); }
static bool int_a(void) { return add_ln(z(3, 5, OAR_I32), z(3, 5, OAR_I32), NULL); }
static bool bad_weight(void) { return add_ln(z(3, 5, OAR_F32), z(3, 5, OAR_F32), z(4, 0, OAR_F32)); }
static bool broadcast_residual(void) { return ln_backward_add(z(3, 5, OAR_F32), z(3, 1, OAR_F32), z(1, 5, OAR_F32)); }
static bool bad_stats(void) { return ln_backward_add(z(3, 5, OAR_F32), z(3, 5, OAR_F32), z(3, 5, OAR_F32)); }

const sweep_bad sweep_bad_fused_add_ln[] = {
    {"add_layer_norm with a broadcast operand", broadcast_b,
     "add_layer_norm: expected b of a's shape [3, 5] (no broadcasting), got [5]"},
    {"add_layer_norm with mixed dtypes", mixed_b, "add_layer_norm: expected b of dtype f32 (a's), got f64"},
    {"add_layer_norm on integers", int_a, "add_layer_norm: expected a"},
    {"add_layer_norm with a weight of the wrong shape", bad_weight,
     "add_layer_norm: layer_norm: expected weight of shape [5], got [4]"},
    {"layer_norm_backward_add with a broadcast residual", broadcast_residual,
     "layer_norm_backward_add: expected residual of x's shape [3, 5] (no broadcasting), got [1, 5]"},
    {"layer_norm_backward_add with mean not reduced", bad_stats,
     "layer_norm_backward_add: layer_norm_backward: expected mean of shape [3, 5]"},
    {0},
};
