/* Sweep cases for layer_norm_backward and batch_norm_backward. layer_norm_backward: with and without weight, one and two normalized dims,
 * mean and rstd as independent inputs (rstd positive). The large cases (no finite
 * differences) run the vectorized kernel with row tails and several row parts. */
#include "sweep.h"

const sweep_case sweep_cases_norm_backward[] = {
    {"layer_norm_backward", "n:3x5;n:3x5;n:5;n:3x1;p:3x1", "normalized_ndim=1"},
    {"layer_norm_backward", "n:2x3x4;n:2x3x4;none;n:2x3x1;p:2x3x1", "normalized_ndim=1"},
    {"layer_norm_backward", "n:2x3x4;n:2x3x4;n:3x4;n:2x1x1;p:2x1x1", "normalized_ndim=2"},
    {"layer_norm_backward", "n:4x9;n:4x9;n:9;n:4x1;p:4x1", "normalized_ndim=1"},
    {"layer_norm_backward", "n:64x300;n:64x300;n:300;n:64x1;p:64x1", "normalized_ndim=1", SWEEP_NO_GRAD},
    {"layer_norm_backward", "n:3x333x256;n:3x333x256;n:256;n:3x333x1;p:3x333x1", "normalized_ndim=1",
     SWEEP_NO_GRAD, 2e-4},
    {"layer_norm_backward", "n:5x7x3;n:5x7x3;none;n:5x1x1;p:5x1x1", "normalized_ndim=2", SWEEP_NO_GRAD},
    {"batch_norm_backward", "n:3x4;n:3x4;n:4;n:4;p:4", ""},
    {"batch_norm_backward", "n:2x3x5;n:2x3x5;none;n:3;p:3", ""},
    {"batch_norm_backward", "n:2x3x2x3;n:2x3x2x3;n:3;n:3;p:3", ""},
    {"batch_norm_backward", "n:4x2x9;n:4x2x9;n:2;n:2;p:2", ""},
    /* the vectorized kernel: plane tails (s = 9, 1, 13), full vectors, several channel chunks */
    {"batch_norm_backward", "n:8x16x32x32;n:8x16x32x32;n:16;n:16;p:16", "", SWEEP_NO_GRAD, 2e-4},
    {"batch_norm_backward", "n:5x7x3x3;n:5x7x3x3;none;n:7;p:7", "", SWEEP_NO_GRAD},
    {"batch_norm_backward", "n:64x10;n:64x10;n:10;n:10;p:10", "", SWEEP_NO_GRAD},
    {"batch_norm_backward", "n:3x70x13;n:3x70x13;n:70;n:70;p:70", "", SWEEP_NO_GRAD},
    /* f16/bf16 grad_out and x with f32 weight and statistics (the norms' mixed form): dx in x's
     * dtype, dweight and dbias f32 */
    {"layer_norm_backward", "nbf16:4x6;nbf16:4x6;nf32:6;nf32:4x1;pf32:4x1", "normalized_ndim=1", 0, 3.2e-2},
    {"layer_norm_backward", "nf16:2x3x8;nf16:2x3x8;none;nf32:2x1x1;pf32:2x1x1", "normalized_ndim=2", 0, 2e-3},
    {"layer_norm_backward", "nbf16:16x96;nbf16:16x96;nf32:96;nf32:16x1;pf32:16x1", "normalized_ndim=1", 0, 3.2e-2},
    {"batch_norm_backward", "nbf16:3x4x5;nbf16:3x4x5;nf32:4;nf32:4;pf32:4", "", 0, 3.2e-2},
    {"batch_norm_backward", "nf16:2x3x2x3;nf16:2x3x2x3;none;nf32:3;pf32:3", "", 0, 2e-3},
    {"batch_norm_backward", "nbf16:8x16x9x9;nbf16:8x16x9x9;nf32:16;nf32:16;pf32:16", "", 0, 3.2e-2},
    {"batch_norm_backward", "nbf16:64x10;nbf16:64x10;nf32:10;nf32:10;pf32:10", "", 0, 3.2e-2},
    {"batch_norm_act", "nbf16:2x3x4;nf32:3;nf32:3;nf32:3;pf32:3;nbf16:2x3x4;none", "training=1 momentum=0.1 eps=1e-5",
     0, 3.2e-2},
    {"batch_norm_act", "nf16:8x16x9x9;nf32:16;nf32:16;nf32:16;pf32:16;none;none", "training=0 momentum=0.1 eps=1e-5",
     0, 2e-3},
    {"batch_norm_act_backward", "nbf16:3x4x5;nbf16:3x4x5;nf32:4;nf32:4;pf32:4;nbf16:3x4x5", "masked_out=1", 0, 3.2e-2},
    /* the mixed kernels' vector bodies and tails (nn_norm.c, nn_norm_backward.c): planes of 81
     * values (ten vectors and one), [N, C] rows of 21, f16 through F16C */
    {"batch_norm_act", "nbf16:4x8x9x9;nf32:8;nf32:8;nf32:8;pf32:8;nbf16:4x8x9x9;i3_9:", "training=1 momentum=-1 eps=1e-5",
     SWEEP_NO_GRAD, 3.2e-2},
    {"batch_norm_act", "nf16:4x8x9x9;nf32:8;none;nf32:8;pf32:8;nf16:4x8x9x9;none", "training=1 momentum=0.1 eps=1e-5",
     SWEEP_NO_GRAD, 2e-3},
    {"batch_norm_act", "nbf16:16x21;nf32:21;nf32:21;nf32:21;pf32:21;nbf16:16x21;none", "training=1 momentum=0.1 eps=1e-5",
     SWEEP_NO_GRAD, 3.2e-2},
    {"batch_norm_act", "nbf16:16x21;none;nf32:21;nf32:21;pf32:21;none;none", "training=0 momentum=0.1 eps=1e-5",
     SWEEP_NO_GRAD, 3.2e-2},
    {"batch_norm_act_backward", "nbf16:4x8x9x9;nbf16:4x8x9x9;nf32:8;nf32:8;pf32:8;nbf16:4x8x9x9", "masked_out=0",
     SWEEP_NO_GRAD, 3.2e-2},
    {"batch_norm_act_backward", "nf16:4x8x9x9;nf16:4x8x9x9;none;nf32:8;pf32:8;nf16:4x8x9x9", "masked_out=1",
     SWEEP_NO_GRAD, 2e-3},
    {"batch_norm_backward", "nf16:16x21;nf16:16x21;nf32:21;nf32:21;pf32:21", "", SWEEP_NO_GRAD, 2e-3},
    /* the fused forms fuse_bn_act makes (fused_bn_act.c): relu kinks are met with probability 0
     * at random points, so finite differences apply */
    {"batch_norm_act", "n:4x3;n:3;n:3;nf32:3;pf32:3;none;none", "training=1 momentum=0.1 eps=1e-5"},
    {"batch_norm_act", "n:2x3x4;n:3;n:3;nf32:3;pf32:3;n:2x3x4;none", "training=1 momentum=0.1 eps=1e-5"},
    {"batch_norm_act", "n:2x3x2x2;none;none;none;none;n:2x3x2x2;none", "training=1 momentum=0.5 eps=1e-3"},
    {"batch_norm_act", "n:2x3x4;n:3;n:3;nf32:3;pf32:3;n:2x3x4;none", "training=0 momentum=0.1 eps=1e-5"},
    {"batch_norm_act", "n:8x16x9x9;n:16;n:16;nf32:16;pf32:16;n:8x16x9x9;none", "training=1 momentum=0.1 eps=1e-5",
     SWEEP_NO_GRAD},
    {"batch_norm_act", "n:33x10;n:10;n:10;nf32:10;pf32:10;none;none", "training=1 momentum=0.1 eps=1e-5", SWEEP_NO_GRAD},
    {"batch_norm_act", "n:2x3x4;n:3;n:3;nf32:3;pf32:3;n:2x3x4;i0_20:", "training=1 momentum=-1 eps=1e-5"},
    {"batch_norm_act", "n:8x16x9x9;n:16;n:16;nf32:16;pf32:16;none;i2_7:", "training=1 momentum=-1 eps=1e-5",
     SWEEP_NO_GRAD},
    {"batch_norm_act", "n:8x4x24x24;n:4;n:4;nf32:4;pf32:4;n:8x4x24x24;none", "training=1 momentum=0.1 eps=1e-5",
     SWEEP_NO_GRAD},
    {"batch_norm_act", "n:8x4x24x24;n:4;n:4;nf32:4;pf32:4;n:8x4x24x24;none", "training=0 momentum=0.1 eps=1e-5",
     SWEEP_NO_GRAD},
    {"batch_norm_act_backward", "n:3x4;n:3x4;n:4;n:4;p:4;n:3x4", "masked_out=0"},
    {"batch_norm_act_backward", "n:2x3x5;n:2x3x5;none;n:3;p:3;n:2x3x5", "masked_out=1"},
    {"batch_norm_act_backward", "n:8x16x32x32;n:8x16x32x32;n:16;n:16;p:16;n:8x16x32x32", "masked_out=1",
     SWEEP_NO_GRAD, 2e-4},
    {"batch_norm_act_backward", "n:5x7x3x3;n:5x7x3x3;n:7;n:7;p:7;n:5x7x3x3", "masked_out=0", SWEEP_NO_GRAD},
    {0},
};

static oar_tensor *z(int64_t a, int64_t b, oar_dtype dt) {
    int64_t s[2] = {a, b};
    return oar_zeros(s, b ? 2 : 1, dt);
}
static bool ln_backward(oar_tensor *g, oar_tensor *x, oar_tensor *w, oar_tensor *m, oar_tensor *r) {
    oar_attr a = oar_attr_int(1);
    oar_tensor *in[5] = {g, x, w, m, r};
    return oar_op_call1(OAR_OP_layer_norm_backward, in, 5, &a) != NULL;
}
static bool bad_grad_shape(void) { return ln_backward(z(3, 4, OAR_F32), z(3, 5, OAR_F32), NULL, z(3, 1, OAR_F32), z(3, 1, OAR_F32)); }
static bool bad_stats_shape(void) { return ln_backward(z(3, 5, OAR_F32), z(3, 5, OAR_F32), NULL, z(3, 5, OAR_F32), z(3, 1, OAR_F32)); }
static bool bad_weight(void) { return ln_backward(z(3, 5, OAR_F32), z(3, 5, OAR_F32), z(4, 0, OAR_F32), z(3, 1, OAR_F32), z(3, 1, OAR_F32)); }
static bool bad_dtype(void) { return ln_backward(z(3, 5, OAR_F64), z(3, 5, OAR_F32), NULL, z(3, 1, OAR_F32), z(3, 1, OAR_F32)); }

static bool bn_backward(oar_tensor *g, oar_tensor *x, oar_tensor *w, oar_tensor *m, oar_tensor *r) {
    oar_tensor *in[5] = {g, x, w, m, r};
    return oar_op_call1(OAR_OP_batch_norm_backward, in, 5, NULL) != NULL;
}
static bool bn_act_bad_residual(void) {
    oar_tensor *in[7] = {z(3, 5, OAR_F32), NULL, NULL, NULL, NULL, z(3, 4, OAR_F32), NULL};
    oar_attr a[3] = {oar_attr_int(1), oar_attr_float(0.1), oar_attr_float(1e-5)};
    return oar_op_call1(OAR_OP_batch_norm_act, in, 7, a) != NULL;
}
static bool bn_act_bad_counter(void) {
    oar_tensor *in[7] = {z(3, 5, OAR_F32), NULL, NULL, z(5, 0, OAR_F32), z(5, 0, OAR_F32), NULL, z(5, 0, OAR_F32)};
    oar_attr a[3] = {oar_attr_int(1), oar_attr_float(-1), oar_attr_float(1e-5)};
    return oar_op_call1(OAR_OP_batch_norm_act, in, 7, a) != NULL;
}
static bool bn_act_bad_y(void) {
    oar_tensor *in[6] = {z(3, 5, OAR_F32), z(3, 5, OAR_F32), NULL, z(5, 0, OAR_F32), z(5, 0, OAR_F32), z(3, 5, OAR_F64)};
    oar_attr a = oar_attr_int(0);
    return oar_op_call1(OAR_OP_batch_norm_act_backward, in, 6, &a) != NULL;
}
static bool bn_bad_rank(void) { return bn_backward(z(5, 0, OAR_F32), z(5, 0, OAR_F32), NULL, z(5, 0, OAR_F32), z(5, 0, OAR_F32)); }
static bool bn_bad_grad(void) { return bn_backward(z(3, 4, OAR_F32), z(3, 5, OAR_F32), NULL, z(5, 0, OAR_F32), z(5, 0, OAR_F32)); }
static bool bn_bad_stats(void) { return bn_backward(z(3, 5, OAR_F32), z(3, 5, OAR_F32), NULL, z(5, 0, OAR_F32), z(3, 0, OAR_F32)); }
static bool bn_bad_weight(void) { return bn_backward(z(3, 5, OAR_F32), z(3, 5, OAR_F32), z(5, 0, OAR_F64), z(5, 0, OAR_F32), z(5, 0, OAR_F32)); }

const sweep_bad sweep_bad_norm_backward[] = {
    {"layer_norm_backward with grad_out of another shape", bad_grad_shape,
     "layer_norm_backward: expected grad_out of the input's shape [3, 5], got [3, 4]"},
    {"layer_norm_backward with mean not reduced", bad_stats_shape,
     "layer_norm_backward: expected mean of shape [3, 5] with the last 1 dims at 1 (as layer_norm returns it), got [3, 5]"},
    {"layer_norm_backward with a weight of the wrong shape", bad_weight,
     "layer_norm_backward: expected weight f32[5] (the statistics' dtype), got f32[4]"},
    {"layer_norm_backward with mixed dtypes", bad_dtype, "layer_norm_backward: expected inputs of one dtype"},
    {"batch_norm_backward with a 1-d input", bn_bad_rank, "batch_norm_backward: expected an input of shape [N, C, ...]"},
    {"batch_norm_backward with grad_out of another shape", bn_bad_grad,
     "batch_norm_backward: expected grad_out of the input's shape [3, 5], got [3, 4]"},
    {"batch_norm_backward with rstd per sample", bn_bad_stats,
     "batch_norm_backward: expected rstd f32[5] (one value per channel, the statistics' dtype), got f32[3]"},
    {"batch_norm_backward with a weight of another dtype", bn_bad_weight,
     "batch_norm_backward: expected weight f32[5] (one value per channel, the statistics' dtype), got f64[5]"},
    {"batch_norm_act with a float counter", bn_act_bad_counter,
     "batch_norm: expected num_batches_tracked to be an integer scalar, got f32[5]"},
    {"batch_norm_act with a residual of another shape", bn_act_bad_residual,
     "batch_norm_act: expected residual f32[3, 5] (the input's dtype and shape), got f32[3, 4]"},
    {"batch_norm_act_backward with y of another dtype", bn_act_bad_y,
     "batch_norm_act_backward: expected y f32[3, 5] (the input's dtype and shape), got f64[3, 5]"},
    {0},
};
