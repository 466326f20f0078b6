/* Sweep cases for the fused convolution ops (src/ops/fused_conv.c): conv2d_act with and
 * without bias and residual, the three activations. The SWEEP_NO_GRAD cases have ResNet-like
 * channel counts, where oneDNN runs its post-ops on blocked layouts (the residual reordered
 * into the output's layout first). Relu has a kink at 0: finite differences stay away from it
 * on these small random inputs, as for relu's own cases. */
#include "sweep.h"

#define CA(s, p, d, g, act) "stride=" s " padding=" p " dilation=" d " groups=" g " act=" act " layout=nchw"
#define CN(s, p, d, g, act) "stride=" s " padding=" p " dilation=" d " groups=" g " act=" act " layout=nhwc"

const sweep_case sweep_cases_fused_conv[] = {
    {"conv2d_act", "n:1x2x4x4;n:3x2x3x3;n:3;n:1x3x2x2", CA("1,1", "0,0", "1,1", "1", "relu")},
    {"conv2d_act", "n:1x2x4x4;n:2x2x2x2;none;none", CA("2,2", "1,1", "1,1", "1", "relu")},
    {"conv2d_act", "n:1x4x3x3;n:4x2x2x2;n:4;n:1x4x4x4", CA("1,1", "1,1", "1,1", "2", "none")},
    {"conv2d_act", "n:1x2x5x4;n:2x2x3x2;none;n:1x2x2x3", CA("2,1", "0,0", "1,1", "1", "none")},
    {"conv2d_act", "n:2x16x8x8;n:16x16x3x3;n:16;n:2x16x8x8", CA("1,1", "1,1", "1,1", "1", "relu"), SWEEP_NO_GRAD},
    {"conv2d_act", "n:2x16x8x8;n:32x16x3x3;n:32;none", CA("2,2", "1,1", "1,1", "1", "relu"), SWEEP_NO_GRAD},
    {"conv2d_act", "n:3x32x6x6;n:64x32x1x1;none;n:3x64x3x3", CA("2,2", "0,0", "1,1", "1", "none"), SWEEP_NO_GRAD},
    {"conv2d_act", "n:1x3x9x9;n:5x3x3x3;n:5;n:1x5x9x9", CA("1,1", "1,1", "1,1", "1", "relu"), SWEEP_NO_GRAD},
    {"conv2d_act", "n:2x6x7x7;n:6x1x3x3;n:6;n:2x6x7x7", CA("1,1", "1,1", "1,1", "6", "relu"), SWEEP_NO_GRAD},
    /* LeNet's convs with relu, and with a residual (the direct kernels, conv_direct.c) */
    {"conv2d_act", "n:3x1x28x28;n:6x1x5x5;n:6;none", CA("1,1", "2,2", "1,1", "1", "relu"), SWEEP_NO_GRAD},
    {"conv2d_act", "n:2x6x14x14;n:16x6x5x5;n:16;n:2x16x10x10", CA("1,1", "0,0", "1,1", "1", "relu"), SWEEP_NO_GRAD},
    {"conv2d_act", "n:1x3x7x9;n:7x3x5x5;none;n:1x7x7x9", CA("1,1", "2,2", "1,1", "1", "none"), SWEEP_NO_GRAD},
    /* NHWC: x [N, H, W, C], residual and output [N, OH, OW, CO] */
    {"conv2d_act", "n:1x4x4x2;n:3x2x3x3;n:3;n:1x2x2x3", CN("1,1", "0,0", "1,1", "1", "relu")},
    {"conv2d_act", "n:1x3x3x4;n:4x2x2x2;none;n:1x4x4x4", CN("1,1", "1,1", "1,1", "2", "none")},
    {"conv2d_act", "n:2x8x8x16;n:16x16x3x3;n:16;n:2x8x8x16", CN("1,1", "1,1", "1,1", "1", "relu"), SWEEP_NO_GRAD},
    {"conv2d_act", "n:2x8x8x16;n:32x16x3x3;n:32;none", CN("2,2", "1,1", "1,1", "1", "relu"), SWEEP_NO_GRAD},
    {"conv2d_act", "n:3x6x6x32;n:64x32x1x1;none;n:3x3x3x64", CN("2,2", "0,0", "1,1", "1", "none"), SWEEP_NO_GRAD},
    {"conv2d_act", "n:1x9x9x3;n:5x3x3x3;n:5;n:1x9x9x5", CN("1,1", "1,1", "1,1", "1", "relu"), SWEEP_NO_GRAD},
    /* 8 and 24 output channels: oneDNN's AVX2 kernels write nChw8c, which for 8 channels has
     * NHWC's bytes but another descriptor (the output must come back through a reorder into
     * NHWC, not oar's NCHW transpose); at 24 the blocks are apart. Regression cases for the
     * AVX2-only failure of test_fusion_conv's small net: run capped (OAR_CPU_ISA=avx2). */
    {"conv2d_act", "n:2x9x9x3;n:8x3x3x3;n:8;none", CN("1,1", "1,1", "1,1", "1", "relu"), SWEEP_NO_GRAD},
    {"conv2d_act", "n:1x6x6x8;n:8x8x3x3;none;n:1x6x6x8", CN("1,1", "1,1", "1,1", "1", "none"), SWEEP_NO_GRAD},
    {"conv2d_act", "n:2x6x6x8;n:24x8x3x3;n:24;n:2x6x6x24", CN("1,1", "1,1", "1,1", "1", "relu"), SWEEP_NO_GRAD},
    /* relu6 (clip to [0, 6], mobilenet_v2's ReLU6): 18 to 144 products per output, so outputs
     * fall below 0, inside and above 6; oneDNN's clip post-op, the direct and composed kernels */
    {"conv2d_act", "n:1x2x4x4;n:3x2x3x3;n:3;n:1x3x2x2", CA("1,1", "0,0", "1,1", "1", "relu6")},
    {"conv2d_act", "n:1x4x4x2;n:3x2x3x3;n:3;none", CN("1,1", "0,0", "1,1", "1", "relu6")},
    {"conv2d_act", "n:2x16x8x8;n:16x16x3x3;n:16;n:2x16x8x8", CA("1,1", "1,1", "1,1", "1", "relu6"), SWEEP_NO_GRAD},
    {"conv2d_act", "n:2x8x8x16;n:32x16x1x1;n:32;none", CN("1,1", "0,0", "1,1", "1", "relu6"), SWEEP_NO_GRAD},
    {"conv2d_act", "n:2x7x7x24;n:24x1x3x3;n:24;none", CN("2,2", "1,1", "1,1", "24", "relu6"), SWEEP_NO_GRAD},
    {"conv2d_act", "n:2x9x9x3;n:8x3x3x3;n:8;n:2x9x9x8", CN("1,1", "1,1", "1,1", "1", "relu6"), SWEEP_NO_GRAD},
    {"conv2d_act", "n:3x1x28x28;n:6x1x5x5;n:6;none", CA("1,1", "2,2", "1,1", "1", "relu6"), SWEEP_NO_GRAD},
    {0},
};

/* conv2d_act of x [1, 2, 4, 4] and weight [3, 2, 3, 3] (output [1, 3, 2, 2]) with residual r. */
static bool call_fused_layout(int64_t r_side, const char *act, oar_dtype rdt, const char *layout) {
    int64_t x[4] = {1, 2, 4, 4}, w[4] = {3, 2, 3, 3}, r[4] = {1, 3, r_side, r_side};
    oar_tensor *in[4] = {oar_randn(x, 4, OAR_F32), oar_randn(w, 4, OAR_F32), NULL, oar_randn(r, 4, rdt)};
    int64_t s[2] = {1, 1}, p[2] = {0, 0}, d[2] = {1, 1};
    oar_attr a[6] = {oar_attr_ints(s, 2), oar_attr_ints(p, 2), oar_attr_ints(d, 2), oar_attr_int(1), oar_attr_str(act),
                     oar_attr_str(layout)};
    return oar_op_call1(OAR_OP_conv2d_act, in, 4, a) != NULL;
}
static bool call_fused(int64_t r_side, const char *act, oar_dtype rdt) {
    return call_fused_layout(r_side, act, rdt, "nchw");
}
static bool residual_shape(void) { return call_fused(3, "relu", OAR_F32); }
static bool residual_dtype(void) { return call_fused(2, "relu", OAR_F64); }
static bool bad_act(void) { return call_fused(2, "gelu", OAR_F32); }
static bool bad_layout(void) { return call_fused_layout(2, "relu", OAR_F32, "nwhc"); }
/* x [1, 2, 4, 4] read as NHWC has 4 channels, the weight expects 2 */
static bool nhwc_channels(void) { return call_fused_layout(2, "relu", OAR_F32, "nhwc"); }

const sweep_bad sweep_bad_fused_conv[] = {
    {"conv2d_act with a residual of another shape", residual_shape,
     "expected residual of the output's dtype f32 and shape [1, 3, 2, 2], got f32 [1, 3, 3, 3]"},
    {"conv2d_act with an f64 residual", residual_dtype, "expected residual of the output's dtype f32"},
    {"conv2d_act with an unknown activation", bad_act, "expected act to be relu, relu6 or none, got 'gelu'"},
    {"conv2d_act with an unknown layout", bad_layout, "expected layout to be nchw or nhwc, got 'nwhc'"},
    {"conv2d_act nhwc with mismatched channels", nhwc_channels, "expected weight.shape[1] * groups == x.shape[1], got 2 * 1 != 4"},
    {0},
};
