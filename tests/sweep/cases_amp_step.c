/* Sweep cases for the compiled loss scaler's ops (src/ops/amp_step.c). amp_begin_unscale: scale,
 * inv_scale and found (both written): 1/scale rounded once, found cleared. amp_unscale_grads:
 * found (written), inv_scale, gradients -> unscaled copies; planted inf/nan set found. amp_skip_step: found,
 * skipped (i64, written), then optimizer hyper tensors (f64 [25], written): nothing on a clean
 * step; on a bad one the count and every hyper's skip flag (its last entry) are set.
 * amp_sync_param: a low parameter (written) <- its f32 master, rounded. Also the f16/bf16
 * binary kernels of compiled AMP steps. */
#include "sweep.h"

#define NG SWEEP_NO_GRAD
#define HYPER "c0,0.1,0.9,0,0,0,0,0,0,0,0,0,0,0,1,0,0,0,0,0,0,0,0,0,0f64:25"

const sweep_case sweep_cases_amp_step[] = {
    {"amp_begin_unscale", "c65536f32:;c7f32:;c1f32:", "", NG},
    {"amp_begin_unscale", "c3f32:;c0f32:;c0f32:", "", NG},
    {"amp_begin_unscale", "c1e-30f32:;c0f32:;c1f32:", "", NG},
    {"amp_unscale_grads", "c0f32:;c0.5f32:;n:3x4", "", NG},
    {"amp_unscale_grads", "c0f32:;c0.25f32:;n:5;nbf16:2x3;nf16:4;nf64:3", "", NG},
    {"amp_unscale_grads", "c0f32:;c0.5f32:;n:4;c1,nan,-inf,3f32:2x2", "", NG},
    {"amp_unscale_grads", "c0f32:;c0.5f32:;cinff16:2;n:1000003", "", NG},
    {"amp_skip_step", "c0f32:;c4i64:;" HYPER, "", NG | SWEEP_NO_BATCH},
    {"amp_skip_step", "c1f32:;c4i64:;" HYPER ";" HYPER ";" HYPER, "", NG | SWEEP_NO_BATCH},
    {"amp_sync_param", "nbf16:3x4;n:3x4", "", NG},
    {"amp_sync_param", "nf16:7;c1e-8,70000,-3.3,0.1,nan,inf,2f32:7", "", NG},
    {"amp_sync_param", "n:5;n:5", "", NG},
    {"amp_sync_param", "nbf16:5x14001;n:5x14001", "", NG},
    /* what a compiled AMP step's backward adds: same-shape f16/bf16 operands long enough to be
     * split over threads, with a tail (half_binary.c; here, late in the sweep, so the cases
     * before keep their numbers and random values) */
    {"add", "nbf16:5x14001;nbf16:5x14001", "", NG},
    {"add", "nf16:3x7;nf16:3x7", "", NG},
    {"sub", "nf16:5x14001;nf16:5x14001", "", NG},
    {"mul", "nbf16:5x14001;nbf16:5x14001", "", NG},
    {0},
};

/* ---- bad inputs */
static oar_tensor *s32(double v) { return oar_scalar(v, OAR_F32); }

static bool call(oar_op_id op, oar_tensor **in, int n) {
    oar_tensor *none[1];
    int n_out = 1;
    return oar_op_call(op, in, n, NULL, none, &n_out) == OAR_OK;
}
static bool begin_f64_scale(void) {
    return call(OAR_OP_amp_begin_unscale, (oar_tensor *[]){oar_scalar(2, OAR_F64), s32(0), s32(0)}, 3);
}
static bool sync_shape(void) {
    int64_t a = 3, b = 4;
    return call(OAR_OP_amp_sync_param, (oar_tensor *[]){oar_zeros(&a, 1, OAR_BF16), oar_zeros(&b, 1, OAR_F32)}, 2);
}
static bool skip_no_hyper(void) {
    return call(OAR_OP_amp_skip_step, (oar_tensor *[]){s32(0), oar_scalar(0, OAR_I64)}, 2);
}
static bool skip_f32_count(void) {
    int64_t n = 16;
    return call(OAR_OP_amp_skip_step, (oar_tensor *[]){s32(0), s32(0), oar_zeros(&n, 1, OAR_F64)}, 3);
}
static bool skip_short_hyper(void) {
    int64_t n = 4;
    return call(OAR_OP_amp_skip_step, (oar_tensor *[]){s32(0), oar_scalar(0, OAR_I64), oar_zeros(&n, 1, OAR_F64)}, 3);
}

const sweep_bad sweep_bad_amp_step[] = {
    {"amp_begin_unscale with an f64 scale", begin_f64_scale,
     "amp_begin_unscale: expected input 0 (scale) to be a 0-d f32 tensor, got f64 []"},
    {"amp_sync_param with a master of another shape", sync_shape,
     "amp_sync_param: expected the master to have the parameter's shape [3], got [4]"},
    {"amp_skip_step without hyper tensors", skip_no_hyper,
     "amp_skip_step: expected found, skipped and 1 to 30 optimizer hyper tensors, got 2 inputs"},
    {"amp_skip_step with an f32 count", skip_f32_count,
     "amp_skip_step: expected input 1 (skipped) to be a 0-d i64 tensor, got f32 []"},
    {"amp_skip_step with a short hyper", skip_short_hyper,
     "amp_skip_step: expected input 2 to be an optimizer's contiguous f64 [25] hyper tensor, got f64 [4]"},
    {0},
};
