/* Sweep cases for fused_attention and attention_backward: batched and unbatched, causal and
 * masked, L != S and D != Dv, and sizes past the vector width and block edges so the fast
 * kernels' tails run (those skip the finite-difference check, which the small ones do). */
#include "sweep.h"

#include <math.h>

#define NOMASK "none"

const sweep_case sweep_cases_fused_attention[] = {
    {"fused_attention", "n:2x3x4;n:2x5x4;n:2x5x3;" NOMASK, "scale=0.5 causal=0"},
    {"fused_attention", "n:3x4;n:3x4;n:3x2;" NOMASK, "scale=0.7 causal=1"},
    {"fused_attention", "n:2x2x3x4;n:2x2x5x4;n:2x2x5x4;c0,1,1bool:3x5", "scale=0.5 causal=0"},
    {"fused_attention", "n:1x2x4x3;n:1x2x4x3;n:1x2x4x3;c0,0,1bool:4x4", "scale=1 causal=1"},
    {"fused_attention", "n:2x4x37x16;n:2x4x37x16;n:2x4x37x16;" NOMASK, "scale=0.25 causal=1", SWEEP_NO_GRAD},
    {"fused_attention", "n:3x20x9;n:3x45x9;n:3x45x11;c0,0,0,1,1bool:20x45", "scale=0.3 causal=0", SWEEP_NO_GRAD},
    {"attention_backward", "n:2x3x3;n:2x3x4;n:2x5x4;n:2x5x3;p:2x3x5", "scale=0.5"},
    {"attention_backward", "n:2x2x4x2;n:2x2x4x3;n:2x2x4x3;n:2x2x4x2;p:2x2x4x4", "scale=0.8"},
    {"attention_backward", "n:2x4x37x16;n:2x4x37x16;n:2x4x37x16;n:2x4x37x16;p:2x4x37x37", "scale=0.25",
     SWEEP_NO_GRAD},
    {"attention_backward", "n:3x20x11;n:3x20x9;n:3x45x9;n:3x45x11;p:3x20x45", "scale=0.3", SWEEP_NO_GRAD},
    /* probabilities with zero tails (as masks leave them): the blocked path that skips them */
    {"attention_backward", "n:2x40x8;n:2x40x16;n:2x40x16;n:2x40x8;c0.5,0.25,0,0,0:2x40x40", "scale=0.3",
     SWEEP_NO_GRAD},
    {"attention_backward", "n:2x70x8;n:2x70x16;n:2x45x16;n:2x45x8;c0.5,0,0.25,0,0,0,0:2x70x45", "scale=0.3",
     SWEEP_NO_GRAD},
    {0},
};

static oar_tensor *z(int64_t a, int64_t b, int64_t c, oar_dtype dt) {
    int64_t s[3] = {a, b, c};
    return oar_zeros(s, 3, dt);
}
static bool bad_attention_d(void) {
    return oar_scaled_dot_product_attention(z(2, 3, 4, OAR_F32), z(2, 5, 3, OAR_F32), z(2, 5, 4, OAR_F32), NULL,
                                            1.0, false) != NULL;
}
static bool bad_attention_batch(void) {
    return oar_scaled_dot_product_attention(z(2, 3, 4, OAR_F32), z(3, 5, 4, OAR_F32), z(3, 5, 4, OAR_F32), NULL,
                                            1.0, false) != NULL;
}
static bool bad_attention_mask(void) {
    int64_t s[2] = {5, 3};
    return oar_scaled_dot_product_attention(z(2, 3, 4, OAR_F32), z(2, 5, 4, OAR_F32), z(2, 5, 4, OAR_F32),
                                            oar_zeros(s, 2, OAR_BOOL), 1.0, false) != NULL;
}
static bool bad_attention_dtype(void) {
    return oar_scaled_dot_product_attention(z(2, 3, 4, OAR_F32), z(2, 5, 4, OAR_F64), z(2, 5, 4, OAR_F32), NULL,
                                            1.0, false) != NULL;
}
static bool bad_attention_int(void) {
    return oar_scaled_dot_product_attention(z(2, 3, 4, OAR_I64), z(2, 5, 4, OAR_I64), z(2, 5, 4, OAR_I64), NULL,
                                            1.0, false) != NULL;
}
static bool bad_attention_scale(void) {
    return oar_scaled_dot_product_attention(z(2, 3, 4, OAR_F32), z(2, 5, 4, OAR_F32), z(2, 5, 4, OAR_F32), NULL,
                                            INFINITY, false) != NULL;
}
static bool bad_attention_backward_probs(void) {
    oar_attr a = oar_attr_float(1.0);
    oar_tensor *in[5] = {z(2, 3, 4, OAR_F32), z(2, 3, 4, OAR_F32), z(2, 5, 4, OAR_F32), z(2, 5, 4, OAR_F32),
                         z(2, 3, 4, OAR_F32)};
    return oar_op_call1(OAR_OP_attention_backward, in, 5, &a) != NULL;
}

const sweep_bad sweep_bad_fused_attention[] = {
    {"fused_attention with q and k of different D", bad_attention_d,
     "fused_attention: expected q and k with one last dim D and k and v with one length S, got [2, 3, 4], [2, 5, 3]"},
    {"fused_attention with different batch dims", bad_attention_batch, "with one rank >= 2 and equal leading dims"},
    {"fused_attention with a mask of the wrong shape", bad_attention_mask,
     "fused_attention: expected a bool mask of shape [3, 5] ([L, S]), got bool[5, 3]"},
    {"fused_attention with mixed dtypes", bad_attention_dtype, "fused_attention: expected inputs of one dtype"},
    {"fused_attention of integers", bad_attention_int, "fused_attention: expected q to have a floating dtype"},
    {"fused_attention with an infinite scale", bad_attention_scale, "expected a finite scale, got inf"},
    {"attention_backward with probs of the wrong shape", bad_attention_backward_probs,
     "attention_backward: expected grad_out [..., 3, 4] and probs [..., 3, 5]"},
    {0},
};
