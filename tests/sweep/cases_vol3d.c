/* Sweep cases for the 3-d ops of the video models: convolutions (conv3d, its backward ops,
 * conv_transpose3d) and pooling (max_pool3d, avg_pool3d and their backward ops). Small
 * inputs carry the gradient checks (so conv3d's rule, and through the backward ops' rules its
 * second order, are checked by finite differences); the larger SWEEP_NO_GRAD ones compare
 * oneDNN's kernels (blocked layouts, batch split over threads) with the reference. */
#include "sweep.h"

#define C3(s, p, d, g) "stride=" s " padding=" p " dilation=" d " groups=" g
#define CT3(s, p, op, d, g) "stride=" s " padding=" p " output_padding=" op " dilation=" d " groups=" g
#define NG SWEEP_NO_GRAD
#define MP3(k, s, p, d, c) "kernel=" k " stride=" s " padding=" p " dilation=" d " ceil_mode=" c
#define AP3(k, s, p, c, i, v) "kernel=" k " stride=" s " padding=" p " ceil_mode=" c " count_include_pad=" i \
    " divisor_override=" v

const sweep_case sweep_cases_vol3d[] = {
    {"conv3d", "n:1x2x3x4x3;n:2x2x2x2x2;n:2", C3("1,1,1", "0,0,0", "1,1,1", "1")},
    {"conv3d", "n:2x2x3x3x3;n:2x1x2x2x2;none", C3("2,1,2", "1,0,1", "1,1,1", "2")},
    {"conv3d", "n:1x1x5x3x4;n:2x1x2x1x2;n:2", C3("1,2,1", "1,1,0", "2,1,2", "1")},
    {"conv3d", "n:0x2x3x3x3;n:2x2x2x2x2;n:2", C3("1,1,1", "0,0,0", "1,1,1", "1")}, /* empty batch */
    /* mc3_18 / r3d_18 shapes, scaled: the 3x7x7 stem with stride (1, 2, 2), 3x3x3 blocks,
     * (2, 1, 1) spatial-only and 1x1x1 downsampling, r(2+1)d's 1x3x3 / 3x1x1 pairs */
    {"conv3d", "n:2x3x4x14x14;n:8x3x3x7x7;none", C3("1,2,2", "1,3,3", "1,1,1", "1"), NG},
    {"conv3d", "n:3x16x4x7x7;n:16x16x3x3x3;none", C3("1,1,1", "1,1,1", "1,1,1", "1"), NG},
    {"conv3d", "n:2x16x4x8x8;n:32x16x1x1x1;none", C3("2,2,2", "0,0,0", "1,1,1", "1"), NG},
    {"conv3d", "n:2x8x5x9x9;n:12x8x1x3x3;n:12", C3("1,2,2", "0,1,1", "1,1,1", "1"), NG},
    {"conv3d", "n:2x12x5x5x5;n:8x12x3x1x1;n:8", C3("2,1,1", "1,0,0", "1,1,1", "1"), NG},
    {"conv3d", "n:2x8x6x7x6;n:8x2x3x3x3;n:8", C3("1,2,1", "2,1,2", "2,1,2", "4"), NG},
    {"conv3d", "n:2x16x4x6x6;n:16x1x3x3x3;n:16", C3("1,1,1", "1,1,1", "1,1,1", "16"), NG}, /* depthwise */
    /* the backward ops (their rules give the second-order gradients of conv3d) */
    {"conv3d_grad_input", "n:1x2x2x3x2;n:2x2x2x2x2", "input_shape=1,2,3,4,3 " C3("1,1,1", "0,0,0", "1,1,1", "1")},
    {"conv3d_grad_input", "n:1x2x2x2x2;n:2x1x2x2x2", "input_shape=1,2,3,4,3 " C3("2,2,2", "1,1,1", "1,1,1", "2")},
    {"conv3d_grad_input", "n:3x16x4x7x7;n:16x16x3x3x3", "input_shape=3,16,4,7,7 " C3("1,1,1", "1,1,1", "1,1,1", "1"), NG},
    {"conv3d_grad_input", "n:2x32x2x4x4;n:32x16x1x1x1", "input_shape=2,16,4,8,8 " C3("2,2,2", "0,0,0", "1,1,1", "1"), NG},
    {"conv3d_grad_input", "n:2x8x4x4x4;n:8x2x3x3x3", "input_shape=2,8,6,7,6 " C3("1,2,1", "2,1,2", "2,1,2", "4"), NG},
    /* a grad grid smaller than the full output (after output_padding): oneDNN's right padding */
    {"conv3d_grad_input", "n:2x8x2x3x3;n:8x4x3x3x3", "input_shape=2,4,6,7,7 " C3("2,2,2", "1,1,1", "1,1,1", "1"), NG},
    /* a zero-size batch: the sweep's automatic pass cannot empty input_shape */
    {"conv3d_grad_input", "n:0x2x2x3x2;n:2x2x2x2x2", "input_shape=0,2,3,4,3 " C3("1,1,1", "0,0,0", "1,1,1", "1")},
    {"conv3d_grad_weight", "n:1x2x3x4x3;n:1x2x2x3x2", "weight_shape=2,2,2,2,2 " C3("1,1,1", "0,0,0", "1,1,1", "1")},
    {"conv3d_grad_weight", "n:1x2x3x4x3;n:1x2x2x2x2", "weight_shape=2,1,2,2,2 " C3("2,2,2", "1,1,1", "1,1,1", "2")},
    {"conv3d_grad_weight", "n:3x16x4x7x7;n:3x16x4x7x7", "weight_shape=16,16,3,3,3 " C3("1,1,1", "1,1,1", "1,1,1", "1"), NG},
    {"conv3d_grad_weight", "n:2x3x4x14x14;n:2x8x4x7x7", "weight_shape=8,3,3,7,7 " C3("1,2,2", "1,3,3", "1,1,1", "1"), NG},
    {"conv3d_grad_weight", "n:2x8x6x7x6;n:2x8x4x4x4", "weight_shape=8,2,3,3,3 " C3("1,2,1", "2,1,2", "2,1,2", "4"), NG},
    /* conv_transpose3d: weight [in, out / groups, kd, kh, kw] */
    {"conv_transpose3d", "n:1x2x2x3x2;n:2x2x2x2x2;n:2", CT3("2,1,2", "1,0,1", "1,0,1", "1,1,1", "1")},
    {"conv_transpose3d", "n:1x2x2x2x3;n:2x1x2x2x2;none", CT3("1,1,1", "0,0,0", "0,0,0", "2,1,1", "2")},
    {"conv_transpose3d", "n:2x8x3x4x4;n:8x4x3x3x3;n:4", CT3("2,2,2", "1,1,1", "1,0,1", "1,1,1", "1"), NG},
    {"conv_transpose3d", "n:2x8x3x3x3;n:8x3x2x3x3;none", CT3("1,2,1", "0,1,1", "0,1,0", "1,1,1", "2"), NG},
    /* max pooling (distinct values: no ties); s3d's (1, 3, 3) / (3, 3, 3) windows, ceil_mode,
     * dilation, padding, unbatched */
    {"max_pool3d", "d:1x2x3x4x4", MP3("2,2,2", "2,2,2", "0,0,0", "1,1,1", "0")},
    {"max_pool3d", "d:1x1x3x5x5", MP3("3,3,3", "2,2,2", "1,1,1", "1,1,1", "1")},
    {"max_pool3d", "d:2x1x4x3x5", MP3("2,1,3", "1,2,2", "1,0,1", "2,1,1", "0")},
    {"max_pool3d", "d:2x3x4x4", MP3("1,3,3", "1,2,2", "0,1,1", "1,1,1", "0")},               /* unbatched */
    {"max_pool3d", "d:2x3x6x12x12", MP3("3,3,3", "2,2,2", "1,1,1", "1,1,1", "1"), NG},
    {"max_pool3d", "d:2x4x5x13x11", MP3("1,3,3", "1,2,2", "0,1,1", "1,1,1", "0"), NG},
    {"max_pool3d_backward", "n:1x2x1x2x2;d:1x2x3x4x4", MP3("2,2,2", "2,2,2", "0,0,0", "1,1,1", "0")},
    {"max_pool3d_backward", "n:1x1x2x3x3;d:1x1x3x5x5", MP3("3,3,3", "2,2,2", "1,1,1", "1,1,1", "1")},
    {"max_pool3d_backward", "n:2x3x4x7x7;d:2x3x6x12x12", MP3("3,3,3", "2,2,2", "1,1,1", "1,1,1", "1"), NG},
    {"max_pool3d_gather", "n:1x2x3x4x4;d:1x2x3x4x4", MP3("2,2,2", "2,2,2", "0,0,0", "1,1,1", "0")},
    {"max_pool3d_gather", "n:2x3x4x4;d:2x3x4x4", MP3("1,3,3", "1,2,2", "0,1,1", "1,1,1", "0")},
    /* average pooling: padding counted or not, ceil_mode windows past the padding, divisor_override */
    {"avg_pool3d", "n:1x2x3x4x4", AP3("2,2,2", "2,2,2", "0,0,0", "0", "1", "0")},
    {"avg_pool3d", "n:1x1x3x5x5", AP3("3,3,3", "2,2,2", "1,1,1", "1", "1", "0")},
    {"avg_pool3d", "n:1x1x3x5x5", AP3("3,3,3", "2,2,2", "1,1,1", "1", "0", "0")},
    {"avg_pool3d", "n:2x3x5x4", AP3("2,3,2", "1,2,2", "1,1,1", "0", "1", "5")},              /* unbatched */
    {"avg_pool3d", "n:2x3x6x12x12", AP3("3,3,3", "2,2,2", "1,1,1", "1", "0", "0"), NG},
    {"avg_pool3d", "n:2x8x4x7x7", AP3("4,7,7", "4,7,7", "0,0,0", "0", "1", "0"), NG},        /* a global pool */
    {"avg_pool3d_backward", "n:1x2x1x2x2", "input_shape=1,2,3,4,4 " AP3("2,2,2", "2,2,2", "0,0,0", "0", "1", "0")},
    {"avg_pool3d_backward", "n:1x1x2x3x3", "input_shape=1,1,3,5,5 " AP3("3,3,3", "2,2,2", "1,1,1", "1", "0", "0")},
    {"avg_pool3d_backward", "n:2x4x3x3", "input_shape=2,3,5,4 " AP3("2,3,2", "1,2,2", "1,1,1", "0", "1", "5")},
    {"avg_pool3d_backward", "n:0x1x2x3x3", "input_shape=0,1,3,5,5 " AP3("3,3,3", "2,2,2", "1,1,1", "1", "0", "0")},
    {0},
};

/* ---- bad inputs */
static oar_tensor *zeros(const int64_t *s, int nd) { return oar_zeros(s, nd, OAR_F32); }

static bool conv3d_call(const int64_t *xs, int xnd, const int64_t *ws, int64_t groups) {
    oar_tensor *in[3] = {zeros(xs, xnd), zeros(ws, 5), NULL};
    int64_t one[3] = {1, 1, 1}, zero[3] = {0, 0, 0};
    oar_attr a[4] = {oar_attr_ints(one, 3), oar_attr_ints(zero, 3), oar_attr_ints(one, 3), oar_attr_int(groups)};
    return oar_op_call1(OAR_OP_conv3d, in, 3, a) != NULL;
}
static bool conv3d_4d(void) { return conv3d_call((int64_t[]){3, 4, 5, 5}, 4, (int64_t[]){2, 3, 2, 2, 2}, 1); }
static bool conv3d_channels(void) {
    return conv3d_call((int64_t[]){1, 4, 4, 5, 5}, 5, (int64_t[]){2, 3, 2, 2, 2}, 1);
}
static bool conv3d_groups(void) { return conv3d_call((int64_t[]){1, 4, 4, 5, 5}, 5, (int64_t[]){3, 2, 2, 2, 2}, 2); }
static bool conv3d_kernel_too_big(void) {
    return conv3d_call((int64_t[]){1, 1, 2, 5, 5}, 5, (int64_t[]){1, 1, 3, 5, 5}, 1);
}
static bool conv3d_stride_entries(void) {
    oar_tensor *in[3] = {zeros((int64_t[]){1, 1, 4, 4, 4}, 5), zeros((int64_t[]){1, 1, 2, 2, 2}, 5), NULL};
    int64_t one[3] = {1, 1, 1}, zero[3] = {0, 0, 0};
    oar_attr a[4] = {oar_attr_ints(one, 2), oar_attr_ints(zero, 3), oar_attr_ints(one, 3), oar_attr_int(1)};
    return oar_op_call1(OAR_OP_conv3d, in, 3, a) != NULL;
}
static bool transpose3d_channels(void) {
    oar_tensor *in[3] = {zeros((int64_t[]){1, 2, 3, 3, 3}, 5), zeros((int64_t[]){3, 3, 3, 3, 3}, 5), NULL};
    int64_t one[3] = {1, 1, 1}, zero[3] = {0, 0, 0};
    oar_attr a[5] = {oar_attr_ints(one, 3), oar_attr_ints(zero, 3), oar_attr_ints(zero, 3), oar_attr_ints(one, 3),
                     oar_attr_int(1)};
    return oar_op_call1(OAR_OP_conv_transpose3d, in, 3, a) != NULL;
}

static oar_tensor *pool3d(oar_op_id op, const int64_t *xs, int nd, const int64_t *k, int nk, int64_t divisor) {
    oar_tensor *in[1] = {zeros(xs, nd)};
    int64_t zero[3] = {0, 0, 0}, one[3] = {1, 1, 1};
    oar_attr mp[5] = {oar_attr_ints(k, nk), oar_attr_ints(k, nk), oar_attr_ints(zero, 3), oar_attr_ints(one, 3),
                      oar_attr_int(0)};
    oar_attr ap[6] = {oar_attr_ints(k, nk), oar_attr_ints(k, nk), oar_attr_ints(zero, 3), oar_attr_int(0),
                      oar_attr_int(1), oar_attr_int(divisor)};
    return oar_op_call1(op, in, 1, op == OAR_OP_max_pool3d ? mp : ap);
}
static bool max_pool3d_3d(void) { return pool3d(OAR_OP_max_pool3d, (int64_t[]){4, 4, 4}, 3, (int64_t[]){2, 2, 2}, 3, 0); }
static bool max_pool3d_pair(void) {
    return pool3d(OAR_OP_max_pool3d, (int64_t[]){1, 1, 4, 4, 4}, 5, (int64_t[]){2, 2}, 2, 0);
}
static bool avg_pool3d_divisor(void) {
    return pool3d(OAR_OP_avg_pool3d, (int64_t[]){1, 1, 4, 4, 4}, 5, (int64_t[]){2, 2, 2}, 3, -2);
}
static bool avg_pool3d_too_deep(void) {
    return pool3d(OAR_OP_avg_pool3d, (int64_t[]){1, 1, 1, 4, 4}, 5, (int64_t[]){2, 2, 2}, 3, 0);
}

const sweep_bad sweep_bad_vol3d[] = {
    {"max_pool3d of a 3-d input", max_pool3d_3d,
     "max_pool3d: expected x to be 4-d [C, D, H, W] or 5-d [N, C, D, H, W], got shape [4, 4, 4]"},
    {"max_pool3d with a 2-d kernel", max_pool3d_pair,
     "max_pool3d: expected kernel to have 3 entries (depth, height, width), got [2, 2]"},
    {"avg_pool3d with a negative divisor", avg_pool3d_divisor, "expected divisor_override >= 1 (or 0 for none), got -2"},
    {"avg_pool3d with a window deeper than the clip", avg_pool3d_too_deep,
     "expected an output of at least 1 x 1 x 1, got 0 x 2 x 2 from input 1 x 4 x 4"},
    {"conv3d of an unbatched clip", conv3d_4d,
     "expected x to be 5-d [N, C, D, H, W], got shape [3, 4, 5, 5]; add a batch dim with oar_unsqueeze(x, 0)"},
    {"conv3d with mismatched channels", conv3d_channels, "expected weight.shape[1] * groups == x.shape[1], got 3 * 1 != 4"},
    {"conv3d with out channels not divisible by groups", conv3d_groups, "divisible by groups, got 3 % 2 != 0"},
    {"conv3d with a kernel deeper than the clip", conv3d_kernel_too_big,
     "expected the padded input [2, 5, 5] to be at least as large as the dilated kernel [3, 5, 5]"},
    {"conv3d with two strides", conv3d_stride_entries, "conv3d: expected stride to have 3 entries, got [1, 1]"},
    {"conv_transpose3d with mismatched channels", transpose3d_channels,
     "expected weight.shape[0] == x.shape[1] (in channels), got 3 != 2"},
    {0},
};
