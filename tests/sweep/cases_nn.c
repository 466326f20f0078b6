/* Sweep cases for the nn family: normalizations, softmax, dropout, embedding, one_hot.
 * Large cases (SWEEP_NO_GRAD) exist to run the vectorized kernels, tails included. Running
 * statistics are fixed to f32 so the f64 gradient pass does not treat them as differentiable. */
#include "sweep.h"

#include "ops/batch_norm_factor.h"

#define BN_TRAIN "training=1 momentum=0.1 eps=1e-5"
#define BN_EVAL "training=0 momentum=0.1 eps=1e-5"
#define BN_CMA "training=1 momentum=-1 eps=1e-5" /* cumulative average: factor 1 / (counter + 1) */

const sweep_case sweep_cases_nn[] = {
    /* softmax / log_softmax */
    {"softmax", "n:3x5", "dim=-1"},
    {"softmax", "n:2x3x4", "dim=1"},
    {"softmax", "n:2x3x4", "dim=0"},
    {"softmax", "n:4x1", "dim=1"},
    {"softmax", "n:", "dim=0"},
    {"softmax", "n:2x0x3", "dim=-1"},
    {"softmax", "n:3x13", "dim=-1"},
    {"softmax", "n:5x300", "dim=-1", SWEEP_NO_GRAD},
    {"softmax", "n:3x7x19", "dim=1", SWEEP_NO_GRAD},
    {"softmax", "n:2x5x3x11", "dim=-3", SWEEP_NO_GRAD},
    {"log_softmax", "n:3x5", "dim=-1"},
    {"log_softmax", "n:2x3x4", "dim=1"},
    {"log_softmax", "n:4x1", "dim=-1"},
    {"log_softmax", "n:", "dim=-1"},
    {"log_softmax", "n:2x3x0", "dim=1"},
    {"log_softmax", "n:2x11", "dim=1"},
    {"log_softmax", "n:5x300", "dim=-1", SWEEP_NO_GRAD},
    {"log_softmax", "n:4x9x17", "dim=-2", SWEEP_NO_GRAD},
    /* their backward ops (gradient, forward output): y is any tensor here, not only a softmax */
    {"softmax_backward", "n:3x5;u:3x5", "dim=-1"},
    {"softmax_backward", "n:2x3x4;u:2x3x4", "dim=1"},
    {"softmax_backward", "n:2x3x4;u:2x3x4", "dim=0"},
    {"softmax_backward", "n:4x1;u:4x1", "dim=1"},
    {"softmax_backward", "n:;u:", "dim=0"},
    {"softmax_backward", "n:2x0x3;u:2x0x3", "dim=-1"},
    {"softmax_backward", "n:3x13;u:3x13", "dim=-1"},
    {"softmax_backward", "n:5x300;u:5x300", "dim=-1", SWEEP_NO_GRAD},
    {"softmax_backward", "n:2x4x128x128;u:2x4x128x128", "dim=-1", SWEEP_NO_GRAD}, /* attention, threads */
    {"softmax_backward", "n:3x7x19;u:3x7x19", "dim=1", SWEEP_NO_GRAD},
    {"softmax_backward", "n:2x5x3x11;u:2x5x3x11", "dim=-3", SWEEP_NO_GRAD},
    {"log_softmax_backward", "n:3x5;u:3x5", "dim=-1"},
    {"log_softmax_backward", "n:2x3x4;u:2x3x4", "dim=1"},
    {"log_softmax_backward", "n:4x1;u:4x1", "dim=-1"},
    {"log_softmax_backward", "n:;u:", "dim=-1"},
    {"log_softmax_backward", "n:2x3x0;u:2x3x0", "dim=1"},
    {"log_softmax_backward", "n:2x11;u:2x11", "dim=1"},
    {"log_softmax_backward", "n:5x300;u:5x300", "dim=-1", SWEEP_NO_GRAD},
    {"log_softmax_backward", "n:4x9x17;u:4x9x17", "dim=-2", SWEEP_NO_GRAD},
    /* dropout: the sweep resets the generator before each run, so masks repeat */
    {"dropout", "n:4x5", "p=0.3 training=1"},
    {"dropout", "n:2x3x4", "p=0.5 training=1"},
    {"dropout", "n:3x4", "p=0 training=1"},
    {"dropout", "n:3x4", "p=0.5 training=0"},
    {"dropout", "n:2x3", "p=1 training=1"},
    {"dropout", "n:", "p=0.2 training=1"},
    {"dropout", "n:0x3", "p=0.2 training=1"},
    {"dropout", "n:40x37", "p=0.2 training=1", SWEEP_NO_GRAD},
    {"dropout", "n:97x91", "p=0.35 training=1", SWEEP_NO_GRAD}, /* split over threads */
    /* embedding and its backward (indices of any integer type and shape) */
    {"embedding", "n:5x3;i0_5:2x4", ""},
    {"embedding", "n:5x3;i0_5:7", ""},
    {"embedding", "n:4x2;i0_4i32:3x1x2", ""},
    {"embedding", "n:6x1;i0_6u8:", ""},
    {"embedding", "n:5x3;i0_5:0", ""},
    {"embedding", "i0_9:5x3;i0_5:4", ""},
    {"embedding_backward", "n:2x4x3;i0_5:2x4", "num_weights=5"},
    {"embedding_backward", "n:6x2;i0_3i32:6", "num_weights=4"},
    {"embedding_backward", "n:3;i0_2:", "num_weights=2"},
    {"embedding_backward", "n:0x3;i0_2:0", "num_weights=2"},
    /* the column kernel (nn_embedding_backward.c): repeated rows, a partial column range, byte
     * indices, and gpt-mini's token embedding (large enough to thread) */
    {"embedding_backward", "n:40x70;i0_3i8:40", "num_weights=3"},
    {"embedding_backward", "n:5x2x130;i0_200u8:5x2", "num_weights=200"},
    {"embedding_backward", "n:8x128x256;i0_256:8x128", "num_weights=256", SWEEP_NO_GRAD},
    /* one_hot */
    {"one_hot", "i0_4:5", "num_classes=4"},
    {"one_hot", "i0_4:2x3", "num_classes=-1"},
    {"one_hot", "i0_3i32:4", "num_classes=5"},
    {"one_hot", "i0_5u8:", "num_classes=-1"},
    {"one_hot", "i0_1:0", "num_classes=3"},
    /* layer_norm */
    {"layer_norm", "n:3x4;n:4;n:4", "normalized_ndim=1 eps=1e-5"},
    {"layer_norm", "n:2x3x4;n:3x4;n:3x4", "normalized_ndim=2 eps=1e-5"},
    {"layer_norm", "n:2x3x4;none;none", "normalized_ndim=1 eps=1e-5"},
    {"layer_norm", "n:2x3x4;n:4;none", "normalized_ndim=1 eps=1e-5"},
    {"layer_norm", "n:2x3x4;none;n:2x3x4", "normalized_ndim=3 eps=0.1"},
    {"layer_norm", "n:5;n:5;n:5", "normalized_ndim=1 eps=1e-5"},
    {"layer_norm", "n:3x1;n:1;n:1", "normalized_ndim=1 eps=1e-5"},
    {"layer_norm", "n:0x4;n:4;n:4", "normalized_ndim=1 eps=1e-5"},
    {"layer_norm", "n:5x300;n:300;n:300", "normalized_ndim=1 eps=1e-5", SWEEP_NO_GRAD},
    {"layer_norm", "n:3x4x37;none;none", "normalized_ndim=1 eps=1e-5", SWEEP_NO_GRAD},
    {"layer_norm", "n:4x6x32;n:6x32;n:6x32", "normalized_ndim=2 eps=1e-5", SWEEP_NO_GRAD},
    {"layer_norm", "n:7x3;n:3;n:3", "normalized_ndim=1 eps=1e-5", SWEEP_NO_GRAD},
    /* f16/bf16 input with f32 weight and bias (AMP's mixed form): statistics f32 */
    {"layer_norm", "nbf16:4x6x32;nf32:6x32;nf32:6x32", "normalized_ndim=2 eps=1e-5", 0, 3.2e-2},
    {"layer_norm", "nf16:7x3;nf32:3;none", "normalized_ndim=1 eps=1e-5", 0, 2e-3},
    {"layer_norm", "nbf16:5x64;none;nf32:64", "normalized_ndim=1 eps=1e-5", 0, 3.2e-2},
    /* group_norm */
    {"group_norm", "n:2x6x3;n:6;n:6", "groups=3 eps=1e-5"},
    {"group_norm", "n:2x4x2x2;none;none", "groups=2 eps=1e-5"},
    {"group_norm", "n:3x4;n:4;n:4", "groups=2 eps=1e-5"},
    {"group_norm", "n:1x6x5;n:6;none", "groups=1 eps=1e-5"},
    {"group_norm", "n:2x4x2x3;none;n:4", "groups=4 eps=1e-3"},
    {"group_norm", "n:0x4x3;n:4;n:4", "groups=2 eps=1e-5"},
    {"group_norm", "n:4x32x7x7;n:32;n:32", "groups=8 eps=1e-5", SWEEP_NO_GRAD},
    {"group_norm", "nbf16:2x6x3;nf32:6;nf32:6", "groups=3 eps=1e-5", 0, 3.2e-2},
    {"group_norm", "nf16:4x32x7x7;nf32:32;none", "groups=8 eps=1e-5", 0, 2e-3},
    /* batch_norm, training: batch statistics, running statistics updated in place */
    {"batch_norm", "n:4x3;n:3;n:3;nf32:3;pf32:3;none", BN_TRAIN},
    {"batch_norm", "n:2x3x4;n:3;n:3;nf32:3;pf32:3;none", BN_TRAIN},
    {"batch_norm", "n:2x3x2x2;none;none;none;none;none", BN_TRAIN},
    {"batch_norm", "n:2x3x2x2;n:3;none;nf32:3;pf32:3;none", "training=1 momentum=0.5 eps=1e-3"},
    {"batch_norm", "n:3x2x1;none;n:2;nf32:2;pf32:2;none", BN_TRAIN},
    {"batch_norm", "n:0x3x2;n:3;n:3;nf32:3;pf32:3;none", BN_TRAIN},
    /* batch_norm, cumulative average (torch's momentum=None): the counter gives the factor */
    {"batch_norm", "n:4x3;n:3;n:3;nf32:3;pf32:3;i0_20:", BN_CMA},
    {"batch_norm", "n:2x3x4;none;n:3;nf32:3;pf32:3;i0_5i32:", BN_CMA},
    {"batch_norm", "n:4x16x50;n:16;n:16;nf32:16;pf32:16;i3_9:", BN_CMA, SWEEP_NO_GRAD},
    {"batch_norm", "n:2x3x4;n:3;n:3;nf32:3;pf32:3;i0_20:", "training=0 momentum=-1 eps=1e-5"},
    /* batch_norm, inference: running statistics normalize */
    {"batch_norm", "n:2x3x4;n:3;n:3;nf32:3;pf32:3;none", BN_EVAL},
    {"batch_norm", "n:2x3x2x2;none;none;nf32:3;pf32:3;none", BN_EVAL},
    {"batch_norm", "n:1x4;n:4;none;nf32:4;pf32:4;none", BN_EVAL},
    {"batch_norm", "n:1x3x5;n:3;n:3;n:3;p:3;none", BN_EVAL, SWEEP_NO_GRAD},
    /* vectorized paths */
    {"batch_norm", "n:4x16x50;n:16;n:16;nf32:16;pf32:16;none", BN_TRAIN, SWEEP_NO_GRAD},
    {"batch_norm", "n:4x16x50;n:16;n:16;nf32:16;pf32:16;none", BN_EVAL, SWEEP_NO_GRAD},
    {"batch_norm", "n:64x37;none;n:37;nf32:37;pf32:37;none", BN_TRAIN, SWEEP_NO_GRAD},
    {"batch_norm", "n:64x37;n:37;none;nf32:37;pf32:37;none", BN_EVAL, SWEEP_NO_GRAD},
    {"batch_norm", "n:3x5x3x7;n:5;n:5;none;none;none", BN_TRAIN, SWEEP_NO_GRAD},
    /* f16/bf16 input with f32 parameters and running statistics (AMP: the mixed form): y in the
     * input's dtype, mean and invstd f32; the low dtypes' tolerances (the via-f32 kernel rounds an
     * f32 result, the reference a double one) */
    {"batch_norm", "nbf16:2x3x4;nf32:3;nf32:3;nf32:3;pf32:3;none", BN_TRAIN, 0, 3.2e-2},
    {"batch_norm", "nf16:2x3x4;nf32:3;nf32:3;nf32:3;pf32:3;none", BN_TRAIN, 0, 2e-3},
    {"batch_norm", "nbf16:2x3x4;nf32:3;nf32:3;nf32:3;pf32:3;none", BN_EVAL, 0, 3.2e-2},
    {"batch_norm", "nbf16:2x3x2x2;none;none;nf32:3;pf32:3;none", BN_TRAIN, 0, 3.2e-2},
    {"batch_norm", "nbf16:4x16x50;nf32:16;none;nf32:16;pf32:16;i3_9:", BN_CMA, 0, 3.2e-2},
    {"batch_norm", "nf16:4x16x50;none;nf32:16;nf32:16;pf32:16;none", BN_EVAL, 0, 2e-3},
    {"batch_norm", "nbf16:64x37;nf32:37;nf32:37;nf32:37;pf32:37;none", BN_TRAIN, 0, 3.2e-2},
    /* 4096 values per channel or more: the GPU kernels split each channel over several blocks */
    {"batch_norm", "n:8x4x24x24;n:4;n:4;nf32:4;pf32:4;none", BN_TRAIN, SWEEP_NO_GRAD},
    {"batch_norm", "n:8x4x24x24;none;n:4;nf32:4;pf32:4;i3_9:", BN_CMA, SWEEP_NO_GRAD},
    {"batch_norm", "n:8x4x24x24;n:4;n:4;nf32:4;pf32:4;none", BN_EVAL, SWEEP_NO_GRAD},
    {0},
};

/* ---- bad inputs */
static oar_tensor *f32(int64_t a, int64_t b, int nd) {
    int64_t s[2] = {a, b};
    return oar_zeros(s, nd, OAR_F32);
}
static oar_tensor *idx(const int64_t *v, int64_t n) { return oar_from_data(v, &n, 1, OAR_I64); }

static bool bad_ln_weight(void) { return oar_layer_norm(f32(2, 4, 2), 1, f32(3, 0, 1), NULL, 1e-5) != NULL; }
static bool bad_ln_bias_dtype(void) {
    int64_t s = 4;
    return oar_layer_norm(f32(2, 4, 2), 1, NULL, oar_zeros(&s, 1, OAR_F64), 1e-5) != NULL;
}
static bool bad_ln_ndim(void) { return oar_layer_norm(f32(2, 4, 2), 3, NULL, NULL, 1e-5) != NULL; }
static bool bad_gn_groups(void) {
    int64_t s[3] = {2, 6, 3};
    return oar_group_norm(oar_zeros(s, 3, OAR_F32), 4, NULL, NULL, 1e-5) != NULL;
}
static bool bad_gn_rank(void) { return oar_group_norm(f32(6, 0, 1), 2, NULL, NULL, 1e-5) != NULL; }
static bool bad_bn_one_value(void) { return oar_batch_norm(f32(1, 3, 2), NULL, NULL, NULL, NULL, true, 0.1, 1e-5) != NULL; }
static bool bad_bn_eval_no_stats(void) {
    return oar_batch_norm(f32(4, 3, 2), NULL, NULL, NULL, NULL, false, 0.1, 1e-5) != NULL;
}
static bool bad_bn_half_stats(void) {
    return oar_batch_norm(f32(4, 3, 2), NULL, NULL, f32(3, 0, 1), NULL, true, 0.1, 1e-5) != NULL;
}
static bool bad_bn_stats_shape(void) {
    return oar_batch_norm(f32(4, 3, 2), NULL, NULL, f32(4, 0, 1), f32(4, 0, 1), true, 0.1, 1e-5) != NULL;
}
static bool bad_bn_stats_grad(void) {
    oar_tensor *rm = f32(3, 0, 1);
    oar_set_requires_grad(rm, true);
    return oar_batch_norm(f32(4, 3, 2), NULL, NULL, rm, f32(3, 0, 1), true, 0.1, 1e-5) != NULL;
}
static bool bad_bn_counter(oar_tensor *counter, double momentum) {
    return oar_batch_norm_counted(f32(4, 3, 2), NULL, NULL, f32(3, 0, 1), f32(3, 0, 1), counter, true, momentum,
                                  1e-5) != NULL;
}
static bool bad_bn_counter_float(void) { return bad_bn_counter(oar_zeros(NULL, 0, OAR_F32), -1); }
static bool bad_bn_counter_vector(void) {
    int64_t v[2] = {1, 2};
    return bad_bn_counter(idx(v, 2), -1);
}
static bool bad_bn_counter_momentum(void) { return bad_bn_counter(oar_zeros(NULL, 0, OAR_I64), 0.1); }
static bool bad_bn_no_counter(void) { return bad_bn_counter(NULL, -1); }
static bool bad_softmax_dim(void) { return oar_softmax(f32(2, 3, 2), 2) != NULL; }
static bool bad_log_softmax_int(void) {
    int64_t v[2] = {1, 2};
    return oar_log_softmax(idx(v, 2), 0) != NULL;
}
static bool bad_softmax_backward(oar_op_id op, oar_tensor *g, oar_tensor *y, int64_t dim) {
    oar_attr a = oar_attr_int(dim);
    oar_tensor *in[2] = {g, y};
    return oar_op_call1(op, in, 2, &a) != NULL;
}
static bool bad_softmax_backward_shape(void) {
    return bad_softmax_backward(OAR_OP_softmax_backward, f32(2, 3, 2), f32(3, 2, 2), -1);
}
static bool bad_softmax_backward_dtype(void) {
    int64_t s[2] = {2, 3};
    return bad_softmax_backward(OAR_OP_softmax_backward, f32(2, 3, 2), oar_zeros(s, 2, OAR_F64), -1);
}
static bool bad_log_softmax_backward_dim(void) {
    return bad_softmax_backward(OAR_OP_log_softmax_backward, f32(2, 3, 2), f32(2, 3, 2), -3);
}
static bool bad_log_softmax_backward_int(void) {
    int64_t v[2] = {1, 2};
    return bad_softmax_backward(OAR_OP_log_softmax_backward, idx(v, 2), idx(v, 2), 0);
}
static bool bad_dropout_p(void) { return oar_dropout(f32(2, 3, 2), 1.5, true) != NULL; }
static bool bad_embedding_range(void) {
    int64_t v[3] = {1, 7, 0};
    return oar_embedding(f32(5, 3, 2), idx(v, 3)) != NULL;
}
static bool bad_embedding_negative(void) {
    int64_t v[2] = {-1, 0};
    return oar_embedding(f32(5, 3, 2), idx(v, 2)) != NULL;
}
static bool bad_embedding_float_idx(void) { return oar_embedding(f32(5, 3, 2), f32(4, 0, 1)) != NULL; }
static bool bad_embedding_weight(void) {
    int64_t v[1] = {0};
    return oar_embedding(f32(5, 0, 1), idx(v, 1)) != NULL;
}
static bool bad_one_hot_negative(void) {
    int64_t v[3] = {0, -1, 2};
    return oar_one_hot(idx(v, 3), 4) != NULL;
}
static bool bad_one_hot_range(void) {
    int64_t v[3] = {0, 4, 2};
    return oar_one_hot(idx(v, 3), 4) != NULL;
}
static bool bad_one_hot_empty(void) {
    int64_t v[1] = {0};
    return oar_one_hot(idx(v, 0), -1) != NULL;
}

const sweep_bad sweep_bad_nn[] = {
    {"layer_norm weight of the wrong shape", bad_ln_weight, "layer_norm: expected weight of shape [4], got [3]"},
    {"layer_norm bias of another dtype", bad_ln_bias_dtype, "expected bias of dtype f32 (the input's), got f64"},
    {"layer_norm over more dims than the input has", bad_ln_ndim, "expected normalized_ndim in [1, 2]"},
    {"group_norm with groups not dividing C", bad_gn_groups, "dividing the 6 channels, got groups = 4"},
    {"group_norm of a 1-d input", bad_gn_rank, "group_norm: expected an input of shape [N, C, ...]"},
    {"batch_norm training on one value per channel", bad_bn_one_value, "expected more than 1 value per channel"},
    {"batch_norm inference without running stats", bad_bn_eval_no_stats, "expected running_mean and running_var in"},
    {"batch_norm with running_mean only", bad_bn_half_stats, "got only running_mean"},
    {"batch_norm running stats of the wrong shape", bad_bn_stats_shape, "expected running_mean of shape [3], got [4]"},
    {"batch_norm running stats requiring grad", bad_bn_stats_grad, "running statistics are not differentiable"},
    {"batch_norm with a float counter", bad_bn_counter_float,
     "batch_norm: expected num_batches_tracked to be an integer scalar, got f32[]"},
    {"batch_norm with a counter of 2 values", bad_bn_counter_vector,
     "batch_norm: expected num_batches_tracked to be an integer scalar, got i64[2]"},
    {"batch_norm with a counter and a momentum", bad_bn_counter_momentum,
     "batch_norm: expected num_batches_tracked only with a negative momentum"},
    {"batch_norm with a negative momentum and no counter", bad_bn_no_counter,
     "batch_norm: expected num_batches_tracked with a negative momentum"},
    {"softmax over a dim that does not exist", bad_softmax_dim, "softmax: expected dim in [-2, 1]"},
    {"log_softmax of integers", bad_log_softmax_int, "log_softmax: expected the input to have a floating dtype"},
    {"softmax_backward with the output of another shape", bad_softmax_backward_shape,
     "softmax_backward: expected the gradient and the output to have one shape, got [2, 3] and [3, 2]"},
    {"softmax_backward with the output of another dtype", bad_softmax_backward_dtype,
     "softmax_backward: expected inputs of one dtype, got f32 (input 0) and f64 (input 1)"},
    {"log_softmax_backward over a dim that does not exist", bad_log_softmax_backward_dim,
     "log_softmax_backward: expected dim in [-2, 1]"},
    {"log_softmax_backward of integers", bad_log_softmax_backward_int,
     "log_softmax_backward: expected the gradient to have a floating dtype"},
    {"dropout with p > 1", bad_dropout_p, "expected a probability p in [0, 1], got 1.5"},
    {"embedding index past the last row", bad_embedding_range, "index 7 is out of range; expected indices in [0, 5)"},
    {"embedding negative index", bad_embedding_negative, "index -1 is out of range"},
    {"embedding with float indices", bad_embedding_float_idx, "embedding: expected integer indices"},
    {"embedding weight that is not 2-d", bad_embedding_weight, "expected weight of shape [num_embeddings, embedding_dim]"},
    {"one_hot of a negative class", bad_one_hot_negative, "expected class values >= 0, got -1"},
    {"one_hot class beyond num_classes", bad_one_hot_range, "class value 4 is out of range"},
    {"one_hot num_classes = -1 of an empty tensor", bad_one_hot_empty, "cannot infer num_classes from an empty"},
    {0},
};
