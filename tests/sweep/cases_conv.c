/* Sweep cases for convolutions and pooling. Small inputs (<= ~60 elements) carry the
 * gradient checks; the larger SWEEP_NO_GRAD ones exercise the fast kernels' blocking and
 * threading against the reference. Max pooling uses distinct values (d) so no window ties. */
#include "sweep.h"

#define C2(s, p, d, g) "stride=" s " padding=" p " dilation=" d " groups=" g
#define CT(s, p, op, d, g) "stride=" s " padding=" p " output_padding=" op " dilation=" d " groups=" g
#define NG SWEEP_NO_GRAD
#define MP(k, s, p, d, c) "kernel=" k " stride=" s " padding=" p " dilation=" d " ceil_mode=" c
#define AP(k, s, p, c, i) "kernel=" k " stride=" s " padding=" p " ceil_mode=" c " count_include_pad=" i

const sweep_case sweep_cases_conv[] = {
    /* conv2d */
    {"conv2d", "n:1x2x5x5;n:3x2x3x3;n:3", C2("1,1", "0,0", "1,1", "1")},
    {"conv2d", "n:2x2x4x4;n:2x2x2x2;none", C2("2,2", "1,1", "1,1", "1")},
    {"conv2d", "n:1x2x6x5;n:2x2x2x3;n:2", C2("2,1", "1,0", "2,1", "1")},
    {"conv2d", "n:1x4x4x4;n:4x2x2x2;n:4", C2("1,1", "1,1", "1,1", "2")},
    {"conv2d", "n:1x3x4x4;n:3x1x3x3;n:3", C2("1,1", "1,1", "1,1", "3")},       /* depthwise */
    {"conv2d", "n:1x2x4x4;n:4x1x3x3;none", C2("1,2", "1,1", "1,1", "2")},      /* depthwise x2 */
    {"conv2d", "n:1x1x7x3;n:2x1x3x1;n:2", C2("3,1", "2,0", "2,1", "1")},
    {"conv2d", "n:0x2x5x5;n:3x2x3x3;n:3", C2("1,1", "0,0", "1,1", "1")},       /* empty batch */
    {"conv2d", "n:2x3x12x12;n:4x3x3x3;n:4", C2("1,1", "1,1", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d", "n:2x4x13x11;n:6x2x3x3;n:6", C2("2,2", "2,1", "2,2", "2"), SWEEP_NO_GRAD},
    {"conv2d", "n:3x8x7x7;n:5x8x1x1;none", C2("1,1", "0,0", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d", "n:4x1x28x28;n:6x1x5x5;n:6", C2("1,1", "2,2", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d", "n:2x6x9x9;n:6x1x3x3;n:6", C2("2,2", "1,1", "1,1", "6"), SWEEP_NO_GRAD},
    /* ResNet-like channel counts, where oneDNN picks blocked layouts and reorders */
    {"conv2d", "n:2x16x10x10;n:32x16x3x3;n:32", C2("2,2", "1,1", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d", "n:2x32x6x6;n:64x32x1x1;none", C2("2,2", "0,0", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d", "n:2x16x8x8;n:16x1x3x3;n:16", C2("1,1", "2,2", "2,2", "16"), SWEEP_NO_GRAD},
    /* no bias, at most 16 output channels: at oneDNN's AVX2 level the forward runs on its
     * backward-data primitive (conv_dnnl.c's flip_rule); pads 1, 0 and k - 1 */
    {"conv2d", "n:3x8x9x10;n:6x8x3x3;none", C2("1,1", "1,1", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d", "n:2x12x7x11;n:16x12x3x5;none", C2("1,1", "0,4", "1,1", "1"), SWEEP_NO_GRAD},
    /* and 3 x 3 convs of 32-128 channels in and out at the widths measured (k_flip_wide) */
    {"conv2d", "n:2x32x6x7;n:32x32x3x3;none", C2("1,1", "1,1", "1,1", "1"), SWEEP_NO_GRAD},
    /* conv1d */
    {"conv1d", "n:2x3x8;n:4x3x3;n:4", C2("1", "1", "1", "1")},
    {"conv1d", "n:1x4x9;n:4x2x2;none", C2("2", "0", "2", "2")},
    {"conv1d", "n:4x6x30;n:8x3x5;n:8", C2("2", "2", "1", "2"), SWEEP_NO_GRAD},
    /* conv_transpose2d: weight [in, out / groups, kh, kw] */
    {"conv_transpose2d", "n:1x2x3x3;n:2x3x3x3;n:3", CT("2,2", "1,1", "1,1", "1,1", "1")},
    {"conv_transpose2d", "n:1x4x3x3;n:4x1x2x2;none", CT("1,1", "0,0", "0,0", "2,2", "2")},
    {"conv_transpose2d", "n:1x1x4x4;n:1x2x3x3;n:2", CT("1,1", "1,1", "1,0", "2,1", "1")}, /* op >= stride */
    {"conv_transpose2d", "n:2x1x3x2;n:1x1x2x3;n:1", CT("2,3", "0,1", "1,2", "1,1", "1")},
    {"conv_transpose2d", "n:2x4x7x7;n:4x3x3x3;n:6", CT("2,2", "1,1", "1,1", "1,1", "2"), SWEEP_NO_GRAD},
    {"conv_transpose2d", "n:2x3x6x5;n:3x4x4x4;none", CT("1,1", "2,1", "0,0", "1,2", "1"), SWEEP_NO_GRAD},
    /* the backward ops (their rules give the second-order gradients of conv2d) */
    {"conv2d_grad_input", "n:1x3x3x3;n:3x2x3x3", "input_shape=1,2,5,5 " C2("1,1", "0,0", "1,1", "1")},
    {"conv2d_grad_input", "n:1x4x2x2;n:4x1x2x2", "input_shape=1,2,4,5 " C2("2,2", "1,1", "1,1", "2")},
    {"conv2d_grad_input", "n:1x2x2x3;n:2x2x2x2", "input_shape=1,2,5,6 " C2("2,2", "0,1", "2,1", "1")},
    {"conv2d_grad_input", "n:2x4x12x12;n:4x3x3x3", "input_shape=2,3,12,12 " C2("1,1", "1,1", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d_grad_input", "n:2x6x7x5;n:6x2x3x3", "input_shape=2,4,13,11 " C2("2,2", "2,1", "2,2", "2"), SWEEP_NO_GRAD},
    {"conv2d_grad_input", "n:2x32x5x5;n:32x16x3x3", "input_shape=2,16,10,10 " C2("2,2", "1,1", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d_grad_input", "n:2x16x4x4;n:16x8x3x3", "input_shape=2,16,8,8 " C2("2,2", "1,1", "1,1", "2"), SWEEP_NO_GRAD},
    {"conv2d_grad_weight", "n:1x2x5x5;n:1x3x3x3", "weight_shape=3,2,3,3 " C2("1,1", "0,0", "1,1", "1")},
    {"conv2d_grad_weight", "n:2x2x4x4;n:2x2x2x2", "weight_shape=2,1,2,2 " C2("2,2", "1,1", "1,1", "2")},
    {"conv2d_grad_weight", "n:1x2x5x6;n:1x2x2x3", "weight_shape=2,2,2,2 " C2("2,2", "0,1", "2,1", "1")},
    {"conv2d_grad_weight", "n:2x3x12x12;n:2x4x12x12", "weight_shape=4,3,3,3 " C2("1,1", "1,1", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d_grad_weight", "n:2x4x13x11;n:2x6x7x5", "weight_shape=6,2,3,3 " C2("2,2", "2,1", "2,2", "2"), SWEEP_NO_GRAD},
    {"conv2d_grad_weight", "n:3x8x7x7;n:3x5x7x7", "weight_shape=5,8,1,1 " C2("1,1", "0,0", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d_grad_weight", "n:2x16x10x10;n:2x32x5x5", "weight_shape=32,16,3,3 " C2("2,2", "1,1", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d_grad_weight", "n:2x16x8x8;n:2x16x8x8", "weight_shape=16,1,3,3 " C2("1,1", "2,2", "2,2", "16"), SWEEP_NO_GRAD},
    /* the direct kernels (conv_direct.c: stride 1, <= 16 channels, kernels <= 7): LeNet's two
     * convs at odd batches (grad_weight sums chunks of 8 images) and the main job's batch 16,
     * output channels off the 6 / 8 / 4 / 3 tiles, widths off the 16-lane vectors, padding 0..3,
     * kernels 5..7 wide and 1..7 high, a grad grid smaller than the full output, with/without bias */
    {"conv2d", "n:3x1x28x28;n:6x1x5x5;n:6", C2("1,1", "2,2", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d", "n:5x6x14x14;n:16x6x5x5;n:16", C2("1,1", "0,0", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d", "n:16x6x14x14;n:16x6x5x5;n:16", C2("1,1", "0,0", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d", "n:2x3x7x11;n:7x3x5x5;n:7", C2("1,1", "2,2", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d", "n:2x1x33x37;n:3x1x7x7;none", C2("1,1", "3,3", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d", "n:3x16x10x9;n:16x16x5x5;n:16", C2("1,1", "2,2", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d", "n:1x4x6x20;n:13x4x2x6;n:13", C2("1,1", "1,0", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d", "n:2x3x5x5;n:9x3x1x5;none", C2("1,1", "0,2", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d", "n:2x3x13x12;n:5x3x5x5;n:5", C2("1,1", "2,2", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d", "n:1x2x4x5;n:3x2x3x5;n:3", C2("1,1", "1,2", "1,1", "1")},
    {"conv2d", "n:2x1x5x4;n:2x1x5x5;none", C2("1,1", "2,2", "1,1", "1")},
    {"conv2d_grad_input", "n:3x16x10x10;n:16x6x5x5", "input_shape=3,6,14,14 " C2("1,1", "0,0", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d_grad_input", "n:16x16x10x10;n:16x6x5x5", "input_shape=16,6,14,14 " C2("1,1", "0,0", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d_grad_input", "n:2x7x7x11;n:7x3x5x5", "input_shape=2,3,7,11 " C2("1,1", "2,2", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d_grad_input", "n:1x5x30x27;n:5x16x7x7", "input_shape=1,16,30,27 " C2("1,1", "3,3", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d_grad_input", "n:2x9x3x2;n:9x2x3x5", "input_shape=2,2,6,6 " C2("1,1", "0,0", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d_grad_input", "n:1x2x3x4;n:2x2x3x5", "input_shape=1,2,3,4 " C2("1,1", "1,2", "1,1", "1")},
    /* zero-size batches: the sweep's automatic pass cannot empty input_shape */
    {"conv2d_grad_input", "n:0x3x3x3;n:3x2x3x3", "input_shape=0,2,5,5 " C2("1,1", "0,0", "1,1", "1")},
    {"conv2d_grad_input", "n:0x4x2x2;n:4x1x2x2", "input_shape=0,2,4,5 " C2("2,2", "1,1", "1,1", "2")},
    /* 7056-term sums of unit products (magnitude ~84) to results near 1: f32 orders differ by ~2e-4 */
    {"conv2d_grad_weight", "n:9x1x28x28;n:9x6x28x28", "weight_shape=6,1,5,5 " C2("1,1", "2,2", "1,1", "1"), SWEEP_NO_GRAD, 1e-3},
    {"conv2d_grad_weight", "n:17x6x14x14;n:17x16x10x10", "weight_shape=16,6,5,5 " C2("1,1", "0,0", "1,1", "1"), SWEEP_NO_GRAD},
    /* 12544-term sums of unit products to results near 0.05: oneDNN's f32 order is 1.5e-4 off */
    {"conv2d_grad_weight", "n:16x1x28x28;n:16x6x28x28", "weight_shape=6,1,5,5 " C2("1,1", "2,2", "1,1", "1"), SWEEP_NO_GRAD, 1e-3},
    {"conv2d_grad_weight", "n:2x2x9x10;n:2x5x5x4", "weight_shape=5,2,5,7 " C2("1,1", "0,0", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d_grad_weight", "n:3x3x7x11;n:3x7x7x11", "weight_shape=7,3,5,5 " C2("1,1", "2,2", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d_grad_weight", "n:1x2x8x8;n:1x3x3x3", "weight_shape=3,2,5,5 " C2("1,1", "0,0", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d_grad_weight", "n:1x16x9x6;n:1x16x9x6", "weight_shape=16,16,5,5 " C2("1,1", "2,2", "1,1", "1"), SWEEP_NO_GRAD},
    {"conv2d_grad_weight", "n:1x1x3x4;n:1x2x3x4", "weight_shape=2,1,5,5 " C2("1,1", "2,2", "1,1", "1")},
    /* max pooling */
    {"max_pool2d", "d:1x2x5x5", MP("2,2", "2,2", "0,0", "1,1", "0")},
    {"max_pool2d", "d:1x2x5x5", MP("3,3", "2,2", "1,1", "1,1", "1")},
    {"max_pool2d", "d:2x1x6x5", MP("2,3", "1,2", "1,1", "2,1", "0")},
    {"max_pool2d", "d:2x5x5", MP("3,3", "1,1", "1,1", "1,1", "0")},               /* unbatched */
    {"max_pool2d", "d:1x1x4x7", MP("2,2", "3,3", "1,1", "1,1", "1")},
    {"max_pool2d", "d:2x3x12x12", MP("3,3", "2,2", "1,1", "1,1", "1"), SWEEP_NO_GRAD},
    {"max_pool2d", "d:2x4x13x11", MP("2,2", "2,2", "0,0", "1,1", "1"), SWEEP_NO_GRAD},
    {"max_pool2d", "d:2x3x11x12", MP("3,2", "1,3", "1,1", "2,3", "0"), SWEEP_NO_GRAD},
    /* max_pool2d_nhwc (x [N, H, W, C]; inference only): channels 1, 5, 8, 16, 19, 35 cover the
     * AVX-512 kernel's full and masked blocks and the AVX2 kernel's vectors and scalar tail;
     * NaN and -inf in windows (a NaN wins, as in max_pool2d) */
    {"max_pool2d_nhwc", "d:1x5x5x1", MP("2,2", "2,2", "0,0", "1,1", "0"), NG},
    {"max_pool2d_nhwc", "d:2x5x6x5", MP("3,3", "2,2", "1,1", "1,1", "1"), NG},
    {"max_pool2d_nhwc", "d:1x6x5x8", MP("2,3", "1,2", "1,1", "2,1", "0"), NG},
    {"max_pool2d_nhwc", "n:2x7x7x16", MP("3,3", "2,2", "1,1", "1,1", "0"), NG},
    {"max_pool2d_nhwc", "n:1x9x8x19", MP("3,2", "1,3", "1,1", "2,3", "0"), NG},
    {"max_pool2d_nhwc", "n:2x12x12x35", MP("3,3", "2,2", "1,1", "1,1", "1"), NG},
    {"max_pool2d_nhwc", "c1,nan,-inf,3,-2,nan,0.5,7,-inf:1x3x3x19", MP("2,2", "1,1", "0,0", "1,1", "0"), NG},
    /* avg_pool2d_nhwc: the same channel counts over both kernels' blocks and tails; padding
     * counted or not, ceil_mode windows hanging past the padding */
    {"avg_pool2d_nhwc", "d:1x5x5x1", AP("2,2", "2,2", "0,0", "0", "1"), NG},
    {"avg_pool2d_nhwc", "d:2x5x6x5", AP("3,3", "2,2", "1,1", "1", "0"), NG},
    {"avg_pool2d_nhwc", "d:1x6x5x8", AP("2,3", "1,2", "1,1", "0", "1"), NG},
    {"avg_pool2d_nhwc", "n:2x7x7x16", AP("3,3", "2,2", "1,1", "1", "1"), NG},
    {"avg_pool2d_nhwc", "n:1x9x8x19", AP("3,2", "1,3", "1,1", "0", "0"), NG},
    {"avg_pool2d_nhwc", "n:2x12x12x35", AP("3,3", "2,2", "1,1", "1", "0"), NG},
    {"max_pool2d_backward", "n:1x2x2x2;d:1x2x5x5", MP("2,2", "2,2", "0,0", "1,1", "0")},
    {"max_pool2d_backward", "n:1x2x3x3;d:1x2x5x5", MP("3,3", "2,2", "1,1", "1,1", "1")},
    {"max_pool2d_backward", "n:2x3x7x7;d:2x3x12x12", MP("3,3", "2,2", "1,1", "1,1", "1"), SWEEP_NO_GRAD},
    /* 2x2 stride 2 (the AVX2 kernel): full vectors, tails, odd sizes, ceil mode (declined) */
    {"max_pool2d", "d:2x3x28x28", MP("2,2", "2,2", "0,0", "1,1", "0"), SWEEP_NO_GRAD},
    {"max_pool2d", "d:3x2x10x10", MP("2,2", "2,2", "0,0", "1,1", "0")},
    {"max_pool2d", "d:2x2x7x37", MP("2,2", "2,2", "0,0", "1,1", "0"), SWEEP_NO_GRAD},
    {"max_pool2d", "d:2x7x9", MP("2,2", "2,2", "0,0", "1,1", "1"), SWEEP_NO_GRAD},
    {"max_pool2d_backward", "n:2x3x14x14;d:2x3x28x28", MP("2,2", "2,2", "0,0", "1,1", "0"), SWEEP_NO_GRAD},
    {"max_pool2d_backward", "n:3x2x5x5;d:3x2x10x10", MP("2,2", "2,2", "0,0", "1,1", "0")},
    {"max_pool2d_backward", "n:2x2x3x18;d:2x2x7x37", MP("2,2", "2,2", "0,0", "1,1", "0"), SWEEP_NO_GRAD},
    {"max_pool2d_backward", "n:2x4x7x6;d:2x4x13x11", MP("2,2", "2,2", "0,0", "1,1", "1"), SWEEP_NO_GRAD},
    {"max_pool2d_backward", "n:64x6x14x14;d:64x6x28x28", MP("2,2", "2,2", "0,0", "1,1", "0"), SWEEP_NO_GRAD},
    {"max_pool2d_gather", "n:1x2x5x5;d:1x2x5x5", MP("2,2", "2,2", "0,0", "1,1", "0")},
    {"max_pool2d_gather", "n:2x5x5;d:2x5x5", MP("3,3", "2,2", "1,1", "1,1", "1")},
    /* average pooling */
    {"avg_pool2d", "n:1x2x5x5", AP("2,2", "2,2", "0,0", "0", "1")},
    {"avg_pool2d", "n:1x2x5x5", AP("3,3", "2,2", "1,1", "1", "1")},
    {"avg_pool2d", "n:1x2x5x5", AP("3,3", "2,2", "1,1", "1", "0")},
    {"avg_pool2d", "n:2x6x5", AP("3,2", "1,2", "1,1", "1", "0")},                 /* unbatched */
    {"avg_pool2d", "n:1x1x4x7", AP("2,2", "3,3", "1,1", "1", "1")},
    {"avg_pool2d", "n:2x3x12x12", AP("3,3", "2,2", "1,1", "1", "1"), SWEEP_NO_GRAD},
    {"avg_pool2d", "n:2x4x13x11", AP("3,2", "2,3", "1,1", "1", "0"), SWEEP_NO_GRAD},
    {"avg_pool2d", "n:2x3x12x12", AP("2,2", "2,2", "0,0", "0", "1"), SWEEP_NO_GRAD},
    {"avg_pool2d_backward", "n:1x2x3x3", "input_shape=1,2,5,5 " AP("3,3", "2,2", "1,1", "1", "0")},
    {"avg_pool2d_backward", "n:2x3x2", "input_shape=2,6,5 " AP("3,2", "2,3", "1,1", "0", "1")},
    {"avg_pool2d_backward", "n:2x4x7x4", "input_shape=2,4,13,11 " AP("3,2", "2,3", "1,1", "1", "0"), SWEEP_NO_GRAD},
    {"avg_pool2d_backward", "n:0x2x3x3", "input_shape=0,2,5,5 " AP("3,3", "2,2", "1,1", "1", "0")},
    /* adaptive average pooling: bins [floor(i*H/oh), ceil((i+1)*H/oh)) */
    {"adaptive_avg_pool2d", "n:1x2x5x7", "output_size=3,4"},
    {"adaptive_avg_pool2d", "n:2x5x5", "output_size=2,2"},
    {"adaptive_avg_pool2d", "n:1x1x4x4", "output_size=1,1"},
    {"adaptive_avg_pool2d", "n:1x2x3x3", "output_size=5,4"},
    {"adaptive_avg_pool2d", "n:2x3x12x12", "output_size=5,7", SWEEP_NO_GRAD},
    {"adaptive_avg_pool2d_backward", "n:1x2x3x4", "input_shape=1,2,5,7"},
    {"adaptive_avg_pool2d_backward", "n:2x4x3", "input_shape=2,3,2"},
    /* even bins (the output size divides the input size): oneDNN's average pooling where
     * present (pool_dnnl.c); batches of 3 and 5 give parts of two sizes at 2+ threads */
    {"adaptive_avg_pool2d", "n:3x4x8x8", "output_size=1,1"},
    {"adaptive_avg_pool2d", "n:2x3x12x10", "output_size=3,5"},
    {"adaptive_avg_pool2d", "n:4x6x6", "output_size=2,3"},
    {"adaptive_avg_pool2d", "n:32x64x8x8", "output_size=1,1", SWEEP_NO_GRAD}, /* ResNet-20's head */
    {"adaptive_avg_pool2d", "n:5x7x9x9", "output_size=9,9", SWEEP_NO_GRAD},
    {"adaptive_avg_pool2d_backward", "n:3x4x1x1", "input_shape=3,4,8,8"},
    {"adaptive_avg_pool2d_backward", "n:2x3x3x5", "input_shape=2,3,12,10"},
    {"adaptive_avg_pool2d_backward", "n:4x2x3", "input_shape=4,6,6"},
    {"adaptive_avg_pool2d_backward", "n:32x64x1x1", "input_shape=32,64,8,8", SWEEP_NO_GRAD},
    {"adaptive_avg_pool2d_backward", "n:5x7x3x3", "input_shape=5,7,9,9", SWEEP_NO_GRAD},
    {"adaptive_avg_pool2d_backward", "n:0x2x3x4", "input_shape=0,2,5,7"},
    {0},
};

/* ---- bad inputs */
static oar_tensor *zeros4(int64_t a, int64_t b, int64_t c, int64_t d, oar_dtype dt) {
    int64_t s[4] = {a, b, c, d};
    return oar_zeros(s, 4, dt);
}

static bool conv_channels(void) {
    return oar_conv2d(zeros4(1, 4, 5, 5, OAR_F32), zeros4(2, 3, 3, 3, OAR_F32), NULL, NULL) != NULL;
}
static bool conv_groups(void) {
    oar_conv_opts o = {.groups = 2};
    return oar_conv2d(zeros4(1, 4, 5, 5, OAR_F32), zeros4(3, 2, 3, 3, OAR_F32), NULL, &o) != NULL;
}
static bool conv_unbatched(void) {
    int64_t s[3] = {3, 5, 5};
    return oar_conv2d(oar_zeros(s, 3, OAR_F32), zeros4(2, 3, 3, 3, OAR_F32), NULL, NULL) != NULL;
}
static bool conv_kernel_too_big(void) {
    return oar_conv2d(zeros4(1, 1, 4, 4, OAR_F32), zeros4(1, 1, 5, 5, OAR_F32), NULL, NULL) != NULL;
}
static bool conv_bias_shape(void) {
    int64_t s[1] = {3};
    return oar_conv2d(zeros4(1, 1, 4, 4, OAR_F32), zeros4(2, 1, 3, 3, OAR_F32), oar_zeros(s, 1, OAR_F32), NULL) != NULL;
}
static bool conv_dtype(void) {
    return oar_conv2d(zeros4(1, 1, 4, 4, OAR_F32), zeros4(2, 1, 3, 3, OAR_F64), NULL, NULL) != NULL;
}
static bool conv_int(void) {
    return oar_conv2d(zeros4(1, 1, 4, 4, OAR_I64), zeros4(2, 1, 3, 3, OAR_I64), NULL, NULL) != NULL;
}
static bool conv_stride(void) {
    oar_conv_opts o = {.stride = {-1, 1}};
    return oar_conv2d(zeros4(1, 1, 4, 4, OAR_F32), zeros4(2, 1, 3, 3, OAR_F32), NULL, &o) != NULL;
}
static bool conv1d_ndim(void) {
    int64_t w[3] = {2, 1, 3};
    return oar_conv1d(zeros4(1, 1, 4, 4, OAR_F32), oar_zeros(w, 3, OAR_F32), NULL, NULL) != NULL;
}
static bool transpose_opad(void) {
    oar_conv_opts o = {.stride = {2, 2}, .output_padding = {2, 0}};
    return oar_conv_transpose2d(zeros4(1, 2, 3, 3, OAR_F32), zeros4(2, 3, 3, 3, OAR_F32), NULL, &o) != NULL;
}
static bool transpose_channels(void) {
    return oar_conv_transpose2d(zeros4(1, 2, 3, 3, OAR_F32), zeros4(3, 3, 3, 3, OAR_F32), NULL, NULL) != NULL;
}
static bool pool_padding(void) {
    oar_pool_opts o = {.kernel = {3, 3}, .padding = {2, 2}};
    return oar_max_pool2d(zeros4(1, 1, 5, 5, OAR_F32), &o) != NULL;
}
static bool pool_too_small(void) {
    oar_pool_opts o = {.kernel = {3, 3}};
    return oar_max_pool2d(zeros4(1, 1, 2, 2, OAR_F32), &o) != NULL;
}
static bool pool_null_opts(void) { return oar_max_pool2d(zeros4(1, 1, 2, 2, OAR_F32), NULL) != NULL; }
static bool pool_int(void) {
    oar_pool_opts o = {.kernel = {2, 2}};
    return oar_max_pool2d(zeros4(1, 1, 4, 4, OAR_I32), &o) != NULL;
}
static bool avg_dilation(void) {
    oar_pool_opts o = {.kernel = {2, 2}, .dilation = {2, 2}};
    return oar_avg_pool2d(zeros4(1, 1, 6, 6, OAR_F32), &o) != NULL;
}
static bool avg_ndim(void) {
    int64_t s[2] = {6, 6};
    oar_pool_opts o = {.kernel = {2, 2}};
    return oar_avg_pool2d(oar_zeros(s, 2, OAR_F32), &o) != NULL;
}
static bool adaptive_negative(void) {
    return oar_adaptive_avg_pool2d(zeros4(1, 1, 6, 6, OAR_F32), -1, 2) != NULL;
}

/* Attributes whose arithmetic passes 2^63 (they reach inference from model files too) */
static bool conv_huge_padding(void) {
    oar_conv_opts o = {.padding = {INT64_MAX / 2, 0}};
    return oar_conv2d(zeros4(1, 1, 4, 4, OAR_F32), zeros4(1, 1, 3, 3, OAR_F32), NULL, &o) != NULL;
}
static bool conv_huge_dilation(void) {
    oar_conv_opts o = {.dilation = {INT64_MAX / 2, 1}};
    return oar_conv2d(zeros4(1, 1, 4, 4, OAR_F32), zeros4(1, 1, 5, 3, OAR_F32), NULL, &o) != NULL;
}
static bool transpose_huge_stride(void) {
    oar_conv_opts o = {.stride = {INT64_MAX / 2, 1}};
    return oar_conv_transpose2d(zeros4(1, 2, 3, 3, OAR_F32), zeros4(2, 3, 3, 3, OAR_F32), NULL, &o) != NULL;
}
static bool pool_huge_dilation(void) {
    oar_pool_opts o = {.kernel = {INT64_MAX / 2, 2}, .dilation = {4, 1}};
    return oar_max_pool2d(zeros4(1, 1, 4, 4, OAR_F32), &o) != NULL;
}

const sweep_bad sweep_bad_conv[] = {
    {"conv2d with padding past 2^62", conv_huge_padding, "expected an output size below 2^63"},
    {"conv2d with dilation past 2^62", conv_huge_dilation, "at least as large as the dilated kernel [9223372036854775807"},
    {"conv_transpose2d with stride past 2^62", transpose_huge_stride, "expected an output size below 2^63"},
    {"max_pool2d with a dilated kernel past 2^63", pool_huge_dilation, "expected an output of at least 1 x 1"},
    {"conv2d with mismatched channels", conv_channels, "expected weight.shape[1] * groups == x.shape[1], got 3 * 1 != 4"},
    {"conv2d with out channels not divisible by groups", conv_groups, "divisible by groups, got 3 % 2 != 0"},
    {"conv2d of an unbatched image", conv_unbatched, "add a batch dim with oar_unsqueeze(x, 0)"},
    {"conv2d with a kernel larger than the input", conv_kernel_too_big, "at least as large as the dilated kernel [5, 5]"},
    {"conv2d with a bias of the wrong size", conv_bias_shape, "expected bias of shape [2]"},
    {"conv2d of f32 with an f64 weight", conv_dtype, "expected weight to have x's dtype f32, got f64"},
    {"conv2d of integers", conv_int, "expected x to have a floating dtype"},
    {"conv2d with a negative stride", conv_stride, "expected stride entries >= 1, got [-1, 1]"},
    {"conv1d of a 4-d input", conv1d_ndim, "expected x to be 3-d [N, C, L]"},
    {"conv_transpose2d with output_padding >= stride", transpose_opad, "expected output_padding smaller than stride or dilation"},
    {"conv_transpose2d with mismatched channels", transpose_channels, "expected weight.shape[0] == x.shape[1]"},
    {"max_pool2d with padding over half the kernel", pool_padding, "expected padding at most half the kernel"},
    {"max_pool2d with a kernel larger than the input", pool_too_small, "expected an output of at least 1 x 1, got 0 x 0"},
    {"max_pool2d without options", pool_null_opts, "got NULL opts"},
    {"max_pool2d of integers", pool_int, "expected x to have a floating dtype"},
    {"avg_pool2d with dilation", avg_dilation, "average pooling has no dilation"},
    {"avg_pool2d of a 2-d input", avg_ndim, "expected x to be 3-d [C, H, W] or 4-d [N, C, H, W], got shape [6, 6]"},
    {"adaptive_avg_pool2d to a negative size", adaptive_negative, "expected output_size entries >= 0, got [-1, 2]"},
    {0},
};
