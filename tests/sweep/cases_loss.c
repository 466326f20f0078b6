/* Sweep cases for the loss family. Reductions: 0 mean, 1 sum, 2 none. */
#include "sweep.h"

#define CE(R, IGN, EPS) "reduction=" #R " ignore_index=" #IGN " label_smoothing=" #EPS

const sweep_case sweep_cases_loss[] = {
    /* cross_entropy: [N, C] (19 classes: vector body and tail of the fast kernels) */
    {"cross_entropy", "n:4x5;i0_5:4", CE(0, -100, 0)},
    {"cross_entropy", "n:4x5;i0_5:4", CE(1, -100, 0)},
    {"cross_entropy", "n:4x5;i0_5:4", CE(2, -100, 0)},
    {"cross_entropy", "n:3x19;i0_19:3", CE(0, -100, 0.1)},
    {"cross_entropy", "n:6x3;i0_3:6", CE(0, 1, 0)},        /* ignore_index hit */
    {"cross_entropy", "n:6x3;i0_3:6", CE(2, 1, 0.1)},
    {"cross_entropy", "n:8x4;i-1_4:8", CE(0, -1, 0.1)},    /* negative ignore_index hit */
    {"cross_entropy", "n:8x4;i-1_4:8", CE(1, -1, 0)},
    {"cross_entropy", "n:1x7;i0_7:1", CE(0, -100, 0)},     /* N = 1 */
    {"cross_entropy", "n:1x1;i0_1:1", CE(0, -100, 0.1)},   /* one class */
    /* every target ignored: the mean is NaN (finite differences too), the gradient 0, as torch */
    {"cross_entropy", "n:6x2;i0_1:6", CE(0, 0, 0.1), SWEEP_NO_GRAD},
    {"cross_entropy", "n:6x2;i0_1:6", CE(1, 0, 0.1)},
    {"cross_entropy", "n:0x4;i0_4:0", CE(1, -100, 0)},     /* empty batch */
    /* [N, C, d...] and [C] */
    {"cross_entropy", "n:2x3x4;i0_3:2x4", CE(0, -100, 0.1)},
    {"cross_entropy", "n:2x3x4;i0_3:2x4", CE(2, 2, 0)},
    {"cross_entropy", "n:2x3x2x3;i0_3:2x2x3", CE(1, 0, 0.2)},
    {"cross_entropy", "n:5;i0_5:", CE(2, -100, 0.1)},
    {"cross_entropy", "n:5;i0_5:", CE(0, -100, 0)},
    {"cross_entropy", "n:4x5;i0_5i32:4", CE(0, -100, 0)},  /* i32 targets */

    /* cross_entropy_backward(grad_output, logits, target, lse); lse is f64 */
    {"cross_entropy_backward", "n:4;n:4x5;i0_5:4;nf64:4", CE(2, -100, 0)},
    {"cross_entropy_backward", "n:;n:4x5;i0_5:4;nf64:4", CE(1, -100, 0.1)},
    {"cross_entropy_backward", "n:;n:6x3;i0_3:6;nf64:6", CE(0, 1, 0.1)},
    {"cross_entropy_backward", "n:;n:3x19;i0_19:3;nf64:3", CE(0, -100, 0)},
    {"cross_entropy_backward", "n:;n:6x2;i0_1:6;nf64:6", CE(0, 0, 0)}, /* every target ignored */
    {"cross_entropy_backward", "n:2x4;n:2x3x4;i0_3:2x4;nf64:2x4", CE(2, 2, 0.2)},
    {"cross_entropy_backward", "n:;n:5;i0_5:;nf64:", CE(0, -100, 0.1)},

    /* nll_loss */
    {"nll_loss", "n:4x5;i0_5:4", CE(0, -100, 0)},
    {"nll_loss", "n:4x5;i0_5:4", CE(1, -100, 0.1)},
    {"nll_loss", "n:6x3;i0_3:6", CE(2, 1, 0)},
    {"nll_loss", "n:8x4;i-1_4:8", CE(0, -1, 0.1)},
    {"nll_loss", "n:1x3;i0_3:1", CE(0, -100, 0)},
    {"nll_loss", "n:2x3x4;i0_3:2x4", CE(0, 2, 0)},
    {"nll_loss", "n:2x3x4;i0_3:2x4", CE(2, -100, 0.1)},
    {"nll_loss", "n:5;i0_5:", CE(1, -100, 0)},

    /* nll_loss_backward(grad_output, target) */
    {"nll_loss_backward", "n:4;i0_5:4", "num_classes=5 " CE(2, -100, 0)},
    {"nll_loss_backward", "n:;i0_3:6", "num_classes=3 " CE(0, 1, 0.1)},
    {"nll_loss_backward", "n:;i0_3:2x4", "num_classes=3 " CE(1, -100, 0)},
    {"nll_loss_backward", "n:;i0_1:3", "num_classes=2 " CE(0, 0, 0)},
    {"nll_loss_backward", "n:;i0_4:", "num_classes=4 " CE(0, -100, 0.1)},

    /* elementwise losses */
    {"mse_loss", "n:3x4;n:3x4", "reduction=0"},
    {"mse_loss", "n:3x4;n:3x4", "reduction=1"},
    {"mse_loss", "n:2x3x2;n:2x3x2", "reduction=2"},
    {"mse_loss", "n:;n:", "reduction=0"},
    {"mse_loss", "n:0x3;n:0x3", "reduction=0"},
    {"l1_loss", "n:3x4;n:3x4", "reduction=0"},
    {"l1_loss", "n:5;n:5", "reduction=1"},
    {"l1_loss", "n:2x3;n:2x3", "reduction=2"},
    {"smooth_l1_loss", "n:3x4;n:3x4", "reduction=0 beta=1"},
    {"smooth_l1_loss", "n:4x5;n:4x5", "reduction=1 beta=0.5"},
    {"smooth_l1_loss", "n:2x6;n:2x6", "reduction=2 beta=2"},
    {"smooth_l1_loss", "n:6;n:6", "reduction=0 beta=0"},
    {"bce_with_logits", "n:3x4;u:3x4", "reduction=0"},
    {"bce_with_logits", "n:12;u:12", "reduction=1"},
    {"bce_with_logits", "n:2x3;u:2x3", "reduction=2"},
    {"bce_with_logits", "n:;u:", "reduction=0"},
    {0},
};

/* ---- bad inputs */
static oar_tensor *logits_f(int64_t n, int64_t c, oar_dtype dt) {
    int64_t s[2] = {n, c};
    return oar_zeros(s, 2, dt);
}
static oar_tensor *targets(const int64_t *v, int64_t n) { return oar_from_data(v, &n, 1, OAR_I64); }

static bool ce_target_shape(void) {
    int64_t t[4] = {0, 1, 2, 3};
    return oar_cross_entropy(logits_f(8, 5, OAR_F32), targets(t, 4), NULL) != NULL;
}
static bool ce_spatial_target_shape(void) {
    int64_t xs[3] = {2, 3, 4}, ts[2] = {2, 3};
    return oar_cross_entropy(oar_zeros(xs, 3, OAR_F32), oar_zeros(ts, 2, OAR_I64), NULL) != NULL;
}
static bool ce_target_range_f32(void) { /* served by the fast kernel */
    int64_t t[4] = {0, 7, 2, 3};
    return oar_cross_entropy(logits_f(4, 5, OAR_F32), targets(t, 4), NULL) != NULL;
}
static bool ce_target_range_f64(void) { /* served by the reference kernel */
    int64_t t[4] = {0, 1, 2, 7};
    return oar_cross_entropy(logits_f(4, 5, OAR_F64), targets(t, 4), NULL) != NULL;
}
static bool ce_negative_target(void) {
    int64_t t[3] = {0, -1, 2};
    return oar_cross_entropy(logits_f(3, 5, OAR_F32), targets(t, 3), NULL) != NULL;
}
static bool ce_float_target(void) {
    int64_t s[1] = {4};
    return oar_cross_entropy(logits_f(4, 5, OAR_F32), oar_zeros(s, 1, OAR_F32), NULL) != NULL;
}
static bool ce_scalar_logits(void) {
    return oar_cross_entropy(oar_scalar(1.0, OAR_F32), oar_scalar(0.0, OAR_I64), NULL) != NULL;
}
static bool ce_bad_smoothing(void) {
    int64_t t[2] = {0, 1};
    oar_ce_opts o = oar_ce_defaults();
    o.label_smoothing = 1.5;
    return oar_cross_entropy(logits_f(2, 3, OAR_F32), targets(t, 2), &o) != NULL;
}
static bool ce_bad_reduction(void) {
    int64_t t[2] = {0, 1};
    oar_ce_opts o = oar_ce_defaults();
    o.reduction = (oar_reduction)7;
    return oar_cross_entropy(logits_f(2, 3, OAR_F32), targets(t, 2), &o) != NULL;
}
static bool nll_target_range(void) {
    int64_t t[2] = {3, 0};
    return oar_nll_loss(logits_f(2, 3, OAR_F32), targets(t, 2), NULL) != NULL;
}
static bool mse_shape(void) {
    int64_t a[2] = {4, 1}, b[1] = {4};
    return oar_mse_loss(oar_zeros(a, 2, OAR_F32), oar_zeros(b, 1, OAR_F32), OAR_REDUCE_MEAN) != NULL;
}
static bool bce_dtype(void) {
    int64_t a[1] = {4};
    return oar_bce_with_logits(oar_zeros(a, 1, OAR_F32), oar_zeros(a, 1, OAR_F64), OAR_REDUCE_MEAN) != NULL;
}
static bool l1_int_input(void) {
    int64_t a[1] = {4};
    return oar_l1_loss(oar_zeros(a, 1, OAR_I64), oar_zeros(a, 1, OAR_I64), OAR_REDUCE_SUM) != NULL;
}
static bool smooth_l1_negative_beta(void) {
    int64_t a[1] = {4};
    return oar_smooth_l1_loss(oar_zeros(a, 1, OAR_F32), oar_zeros(a, 1, OAR_F32), OAR_REDUCE_MEAN, -1.0) != NULL;
}

const sweep_bad sweep_bad_loss[] = {
    {"cross_entropy with a target of the wrong shape", ce_target_shape,
     "cross_entropy: expected target of shape [8] for logits of shape [8, 5]"},
    {"cross_entropy [N, C, d] with a target of the wrong shape", ce_spatial_target_shape,
     "expected target of shape [2, 4] for logits of shape [2, 3, 4] (the class dim 1 removed), got [2, 3]"},
    {"cross_entropy f32 with a target out of range", ce_target_range_f32,
     "expected target values in [0, 5) or equal to ignore_index (-100), got 7 at flat index 1"},
    {"cross_entropy f64 with a target out of range", ce_target_range_f64,
     "expected target values in [0, 5) or equal to ignore_index (-100), got 7 at flat index 3"},
    {"cross_entropy with a negative target", ce_negative_target, "got -1 at flat index 1"},
    {"cross_entropy with a float target", ce_float_target,
     "cross_entropy: expected target to hold integer class indices (i64), got f32"},
    {"cross_entropy of 0-d logits", ce_scalar_logits,
     "expected logits of shape [C], [N, C] or [N, C, d1, ...], got []"},
    {"cross_entropy with label_smoothing 1.5", ce_bad_smoothing, "expected label_smoothing in [0, 1], got 1.5"},
    {"cross_entropy with reduction 7", ce_bad_reduction, "expected reduction OAR_REDUCE_MEAN (0)"},
    {"nll_loss with a target out of range", nll_target_range, "nll_loss: expected target values in [0, 3)"},
    {"mse_loss of [4, 1] against [4]", mse_shape,
     "mse_loss: expected target of shape [4, 1] (the input's shape), got [4]"},
    {"bce_with_logits of f32 against f64", bce_dtype, "expected target of dtype f32 (like the logits), got f64"},
    {"l1_loss of integers", l1_int_input, "l1_loss: expected input to have a floating dtype"},
    {"smooth_l1_loss with beta -1", smooth_l1_negative_beta, "smooth_l1_loss: expected beta >= 0, got -1"},
    {0},
};
