/* Sweep cases for the loss-scaling ops (src/ops/amp.c). amp_unscale: found (f32 0-d), inv_scale
 * (f32 0-d), then gradients, all but inv_scale written in place; cases with finite gradients,
 * planted inf/nan, low-precision and f64 gradients, many gradients, an empty one.
 * amp_update_scale: scale, growth_tracker, found; backoff, growth at the interval, the floor. */
#include "sweep.h"

#define NG SWEEP_NO_GRAD
#define UPD "growth_factor=2 backoff_factor=0.5 growth_interval=3 min_scale=1"

const sweep_case sweep_cases_amp[] = {
    {"amp_unscale", "c0f32:;c0.5f32:;n:3x4", "", NG},
    {"amp_unscale", "c0f32:;c0.25f32:;n:5;n:2x3x2;n:", "", NG},
    {"amp_unscale", "c0f32:;c0.5f32:;c1,inf,2f32:3;n:4", "", NG},
    {"amp_unscale", "c0f32:;c0.5f32:;n:4;c1,nan,-inf,3f32:2x2", "", NG},
    {"amp_unscale", "c1f32:;c2f32:;n:7", "", NG},
    {"amp_unscale", "c0f32:;c0.125f32:;nbf16:3x5;nf16:4;nf64:6", "", NG},
    {"amp_unscale", "c0f32:;c0.5f32:;cinff16:2;nbf16:3", "", NG},
    {"amp_unscale", "c0f32:;c0.5f32:;n:0x3;n:1000003", "", NG},
    {"amp_unscale", "c0f32:;c0.5f32:;n:2;n:2;n:2;n:2;n:2;n:2;n:2;n:2;n:2;n:2;n:2;n:2;n:2;n:2;n:2;n:2;n:2;n:2;n:2;"
                    "n:2;n:2;n:2;n:2;n:2;n:2;n:2;n:2;n:2;n:2;n:2", "", NG},
    {"amp_update_scale", "c1024f32:;c0i64:;c0f32:", UPD, NG},
    {"amp_update_scale", "c1024f32:;c2i64:;c0f32:", UPD, NG},
    {"amp_update_scale", "c1024f32:;c1i64:;c1f32:", UPD, NG},
    {"amp_update_scale", "c1.5f32:;c1i64:;c1f32:", UPD, NG},
    {"amp_update_scale", "c0.25f32:;c0i64:;c1f32:", UPD, NG},
    {"amp_update_scale", "c3e38f32:;c2i64:;c0f32:", UPD, NG},
    {0},
};

/* ---- bad inputs */
static oar_tensor *s32(double v) { return oar_scalar(v, OAR_F32); }

static bool call_unscale(oar_tensor **in, int n) {
    oar_tensor *none[1];
    int n_out = 1;
    return oar_op_call(OAR_OP_amp_unscale, in, n, NULL, none, &n_out) == OAR_OK;
}
static bool bad_found(void) {
    int64_t s = 3;
    return call_unscale((oar_tensor *[]){oar_scalar(0, OAR_F64), s32(1), oar_zeros(&s, 1, OAR_F32)}, 3);
}
static bool bad_grad_dtype(void) {
    int64_t s = 3;
    return call_unscale((oar_tensor *[]){s32(0), s32(1), oar_zeros(&s, 1, OAR_I32)}, 3);
}
static bool no_grads(void) { return call_unscale((oar_tensor *[]){s32(0), s32(1)}, 2); }
static bool strided_grad(void) {
    int64_t s[2] = {3, 4};
    return call_unscale((oar_tensor *[]){s32(0), s32(1), oar_transpose(oar_zeros(s, 2, OAR_F32), 0, 1)}, 3);
}
static bool bad_update(void) {
    oar_tensor *in[3] = {s32(8), oar_scalar(0, OAR_I64), s32(0)}, *none[1];
    oar_attr a[4] = {oar_attr_float(2), oar_attr_float(1.5), oar_attr_int(3), oar_attr_float(1)};
    int n_out = 1;
    return oar_op_call(OAR_OP_amp_update_scale, in, 3, a, none, &n_out) == OAR_OK;
}
static bool bad_tracker(void) {
    oar_tensor *in[3] = {s32(8), s32(0), s32(0)}, *none[1];
    oar_attr a[4] = {oar_attr_float(2), oar_attr_float(0.5), oar_attr_int(3), oar_attr_float(1)};
    int n_out = 1;
    return oar_op_call(OAR_OP_amp_update_scale, in, 3, a, none, &n_out) == OAR_OK;
}

const sweep_bad sweep_bad_amp[] = {
    {"amp_unscale with an f64 found", bad_found, "amp_unscale: expected input 0 (found) to be a 0-d f32 tensor, got f64 []"},
    {"amp_unscale of an integer gradient", bad_grad_dtype,
     "amp_unscale: expected gradient 0 (input 2) to be a float tensor, got i32"},
    {"amp_unscale without gradients", no_grads, "amp_unscale: expected found, inv_scale and 1 to 30 gradients, got 2 inputs"},
    {"amp_unscale of a strided gradient", strided_grad, "amp_unscale: expected gradient 0 (input 2) to be contiguous"},
    {"amp_update_scale with backoff 1.5", bad_update, "amp_update_scale: expected growth_factor >= 1, 0 < backoff_factor <= 1"},
    {"amp_update_scale with an f32 tracker", bad_tracker,
     "amp_update_scale: expected input 1 (growth_tracker) to be a 0-d i64 tensor, got f32 []"},
    {0},
};
