/* Sweep cases for the quantization ops (src/ops/quant.c). Integer outputs must equal the
 * reference bit for bit in every kernel (qlinear's AVX-512 VNNI kernel at the native ISA, its
 * exact AVX2 kernel in the sweep capped at avx2, the reference at generic).
 * fake_quant is piecewise constant, so finite differences see 0 where its straight-through
 * rule says 1: its gradient is pinned against torch in test_quant_golden instead, and the
 * backward op fake_quant_grad (linear in grad) is checked here by finite differences, with x
 * on grid points away from rounding edges. */
#include "sweep.h"

#include "ops/quant.h"

#include <math.h>

#define NG SWEEP_NO_GRAD
/* qlinear inputs after x: x_scale, x_zero_point, then w, w_scale, bias, y_scale, y_zero_point, residual */
#define XQ_U8 ";c0.02f32:;c128i32:"
#define XQ_S8 ";c0.03f32:;c-3i32:"

const sweep_case sweep_cases_quant[] = {
    /* per tensor, u8 and i8; 0-d; ties at .5 (half to even) and saturation at both ends */
    {"quantize", "n:4x5;c0.05f32:;c3i32:", "axis=0 dtype=u8"},
    {"quantize", "n:4x5;c0.05f32:;c-7i64:", "axis=0 dtype=i8"},
    {"quantize", "n:;c0.1f32:;c10i32:", "axis=0 dtype=u8"},
    {"quantize", "c0.25,0.75,-0.25,-1.25,2.5,1000,-1000,0:8;c0.5f32:;c0i32:", "axis=0 dtype=i8"},
    {"quantize", "c0.25,0.75,-0.25,-1.25,2.5,1000,-1000,0:8;c0.5f32:;c1i32:", "axis=0 dtype=u8"},
    /* per channel along a middle and the last axis */
    {"quantize", "n:4x3x2;c0.1,0.02,0.3f32:3;c0,-5,7i64:3", "axis=1 dtype=i8"},
    {"quantize", "n:2x3;c0.1,0.02,0.3f64:3;c0,5,255i32:3", "axis=-1 dtype=u8"},
    {"quantize", "n:5x67;c0.01f32:;c0i32:", "axis=0 dtype=i8"},
    /* the AVX2 kernel: whole vectors and a tail, u8 and i8, ties and saturation in one vector */
    {"quantize", "n:3x37;c0.02f32:;c128i32:", "axis=0 dtype=u8"},
    {"quantize", "c0.25,0.75,-0.25,-1.25,2.5,1000,-1000,0,1.5,-1.5,0.5:11;c0.5f32:;c-3i32:", "axis=0 dtype=i8"},
    {"dequantize", "i0_256u8:4x5;c0.05f32:;c3i32:", "axis=0"},
    {"dequantize", "i-128_128i8:3x4;c0.1,0.2,0.3,0.4f32:4;c0,1,-1,5i32:4", "axis=1"},
    {"dequantize", "i-128_128i8:3x4;c0.1,0.2,0.3f32:3;c0,1,-1i64:3", "axis=0"},
    {"dequantize", "i0_256u8:;c0.5f32:;c255i32:", "axis=0"},
    /* the AVX2 kernel (per tensor): whole vectors and a tail, u8 and i8, an f64 scale */
    {"dequantize", "i0_256u8:3x37;c0.0371f32:;c200i32:", "axis=0"},
    {"dequantize", "i-128_128i8:2x3x5x5;c0.05f32:;c-3i32:", "axis=0"},
    {"dequantize", "i-128_128i8:19;c0.3f64:;c127i64:", "axis=0"},
    {"fake_quant", "n:4x5;c0.1f32:;c3i32:", "axis=0 quant_min=0 quant_max=255", NG},
    {"fake_quant", "n:4x5;c0.1f32:;c0i32:", "axis=0 quant_min=-8 quant_max=7", NG},
    {"fake_quant", "n:3x4;c0.1,0.02,0.3f32:3;c0,-5,7i32:3", "axis=0 quant_min=-128 quant_max=127", NG},
    {"fake_quant", "c0.25,0.75,-0.25,-1.25,2.5,1000,-1000,0:8;c0.5f32:;c0i32:", "axis=0 quant_min=-4 quant_max=3", NG},
    /* inside [-0.8, 0.7]: -0.5, 0.3, 0.1; outside: -2, -1, 1, 2 (x/scale integral: no rounding edge) */
    {"fake_quant_grad", "n:4x5;c-2,-1,-0.5,0.3,0.1,1,2:4x5;c0.1f32:;c0i32:", "axis=0 quant_min=-8 quant_max=7"},
    {"fake_quant_grad", "n:2x3;c-2,-1,0.5,0.3,0.1,1:2x3;c0.1,0.3,1f32:3;c0,2,-1i32:3",
     "axis=1 quant_min=-8 quant_max=7"},
    /* LSQ: learnable scale and zero point (float, rounded in the op); the gradients are pinned against torch in
     * test_quant_golden and checked by finite differences away from rounding edges in test_qat */
    {"fake_quant_lsq", "n:4x5;c0.1f32:;c1.3f32:", "quant_min=-8 quant_max=7 grad_factor=0.5", NG},
    {"fake_quant_lsq", "n:3x7;c0.02f64:;c128f64:", "quant_min=0 quant_max=255 grad_factor=1", NG},
    {"fake_quant_lsq_grad", "n:4x5;c-2,-1,-0.5,0.3,0.1,1,2:4x5;c0.1f32:;c0f32:",
     "quant_min=-8 quant_max=7 grad_factor=0.25", NG},
    {"fake_quant_lsq_grad", "n:2x3;n:2x3;c0.3f64:;c-2.6f64:", "quant_min=-4 quant_max=3 grad_factor=1", NG},
    /* qlinear: f32 out; relu + requantized u8; s8 x with residual and i8 out over K and N tails */
    {"qlinear", "i0_256u8:5x7" XQ_U8 ";i-128_128i8:3x7;c0.01,0.02,0.03f32:3;nf32:3;none;none;none",
     "activation=0 dtype=f32"},
    {"qlinear", "i0_256u8:5x7" XQ_U8 ";i-128_128i8:3x7;c0.01,0.02,0.03f32:3;nf32:3;c0.05f32:;c10i32:;none",
     "activation=1 dtype=u8"},
    {"qlinear", "i-128_128i8:2x3x70" XQ_S8 ";i-128_128i8:67x70;c0.002f32:;nf32:67;c0.1f32:;c-4i32:;nf32:2x3x67",
     "activation=0 dtype=i8"},
    {"qlinear", "i-128_128i8:9x130" XQ_S8 ";i-128_128i8:131x130;c0.002f32:;none;none;none;nf32:9x131",
     "activation=1 dtype=f32"},
    {"qlinear", "i0_256u8:70" XQ_U8 ";i-128_128i8:5x70;c0.01f32:;nf32:5;none;none;none", "activation=0 dtype=f32"},
    {"qlinear", "i0_256u8:4x0" XQ_U8 ";i-128_128i8:3x0;c0.01f32:;nf32:3;c0.05f32:;c10i32:;none",
     "activation=0 dtype=u8"},
    /* the worst case for 16-bit pair sums (vpmaddubsw): 255 * 127 * 2 and 255 * -128 * 2, and
     * -128 * -128 * 2 for s8 activations; the sums must be exact on every path */
    {"qlinear", "c255u8:3x64;c0.001f32:;c0i32:;c127i8:2x64;c0.001f32:;none;none;none;none", "activation=0 dtype=f32"},
    {"qlinear", "c255u8:3x67;c0.001f32:;c0i32:;c-128i8:5x67;c0.001f32:;none;none;none;none", "activation=0 dtype=f32"},
    {"qlinear", "c-128i8:2x35;c0.001f32:;c0i32:;c-128i8:3x35;c0.001f32:;none;none;none;none", "activation=0 dtype=f32"},
    {"qlinear", "c255,0u8:3x64;c1f32:;c0i32:;c127,-128i8:4x64;c1f32:;none;c1000f32:;c0i32:;none",
     "activation=0 dtype=i8"},
    /* 7-bit weights: the AVX2 kernel's vpmaddubsw path (whole 32-byte chunks and zero-padded
     * tails, K below one chunk, s8 x with a residual, LeNet's first layer) and its worst cases */
    {"qlinear", "i0_256u8:5x70" XQ_U8 ";i-64_64i8:7x70;c0.01f32:;nf32:7;c0.05f32:;c10i32:;none",
     "activation=1 dtype=u8"},
    {"qlinear", "i-128_128i8:3x7" XQ_S8 ";i-64_64i8:5x7;c0.01,0.02,0.03,0.04,0.05f32:5;nf32:5;none;none;nf32:3x5",
     "activation=0 dtype=f32"},
    {"qlinear", "i0_256u8:9x400" XQ_U8 ";i-64_64i8:120x400;c0.001f32:;nf32:120;c0.05f32:;c10i32:;none",
     "activation=1 dtype=u8"},
    {"qlinear", "c255u8:3x96;c0.001f32:;c0i32:;c-64i8:5x96;c0.001f32:;none;none;none;none", "activation=0 dtype=f32"},
    {"qlinear", "c255u8:2x33;c0.001f32:;c0i32:;c63i8:3x33;c0.001f32:;none;none;none;none", "activation=0 dtype=f32"},
    /* i32 outputs, the raw sums (ONNX MatMulInteger): u8 and s8 x, 8-bit and 7-bit weights, K and N tails */
    {"qlinear", "i0_256u8:5x70" XQ_U8 ";i-128_128i8:7x70;c1f32:;none;none;none;none", "activation=0 dtype=i32"},
    {"qlinear", "i-128_128i8:2x3x33" XQ_S8 ";i-64_64i8:19x33;c1f32:;none;none;none;none", "activation=0 dtype=i32"},
    {"qlinear", "c255u8:3x67;c0.001f32:;c0i32:;c-128i8:5x67;c0.001f32:;none;none;none;none", "activation=0 dtype=i32"},
    /* qlut: u8 and i8 codes (i8 indexes entry code + 128), u8 and i8 tables, an empty input */
    {"qlut", "i0_256u8:5x9;i0_256u8:256", ""},
    {"qlut", "i-128_128i8:37;i0_256u8:256", ""},
    {"qlut", "c-128,127,0,-1,1i8:2x5;i-128_128i8:256", ""},
    {"qlut", "i0_256u8:3x0;i-128_128i8:256", ""},
    /* the 7-bit GEMM's tiles (3 rows, 16 columns in 2 vectors, blocks of 6 x 64): 7 rows (two
     * blocks, a 1-row tile), 77 columns (a 64 block, then 13: a whole and a part vector), k 130
     * (a 2-byte group tail); s8 x with 9 columns (a part second vector), k 13, a residual; k 1 */
    {"qlinear", "i0_256u8:7x130" XQ_U8 ";i-64_64i8:77x130;c0.003f32:;nf32:77;none;none;none",
     "activation=0 dtype=f32"},
    {"qlinear", "i-128_128i8:4x5x13" XQ_S8 ";i-64_64i8:9x13;c0.01f32:;nf32:9;c0.05f32:;c3i32:;nf32:4x5x9",
     "activation=1 dtype=i8"},
    {"qlinear", "i0_256u8:8x1" XQ_U8 ";i-64_64i8:20x1;c0.01f32:;none;none;none;none", "activation=0 dtype=f32"},
    /* GELU in the epilogue (f32 outputs; 2: erf, 3: tanh), what fuse_quant makes of gelu(qlinear):
     * whole vectors and a masked tail of columns, with a residual, 7-bit and 8-bit weights */
    {"qlinear", "i0_256u8:5x70" XQ_U8 ";i-128_128i8:13x70;c0.01f32:;nf32:13;none;none;none",
     "activation=3 dtype=f32"},
    {"qlinear", "i-128_128i8:2x3x40" XQ_S8 ";i-64_64i8:21x40;c0.002f32:;nf32:21;none;none;nf32:2x3x21",
     "activation=2 dtype=f32"},
    {"qlinear", "i0_256u8:4x33" XQ_U8 ";i-128_128i8:8x33;c0.05f32:;none;none;none;none", "activation=3 dtype=f32"},
    /* qconv2d: padding (the zero point), stride, dilation, groups, depthwise, requantized and residual */
/* qconv2d_nhwc without an int8 residual: residual_scale, residual_zero_point, out_scale, out_zero_point absent */
#define NO_QRES ";none;none;none;none"
#define CONV(st, pd, dl, g, act, dt) "stride=" st " padding=" pd " dilation=" dl " groups=" g " activation=" act " dtype=" dt
    {"qconv2d", "i0_256u8:2x3x7x6" XQ_U8 ";i-128_128i8:4x3x3x3;c0.01,0.02,0.03,0.04f32:4;nf32:4;none;none;none",
     CONV("1,1", "1,1", "1,1", "1", "0", "f32")},
    {"qconv2d", "i0_256u8:2x3x9x8" XQ_U8 ";i-128_128i8:5x3x3x2;c0.01f32:;nf32:5;c0.05f32:;c10i32:;none",
     CONV("2,1", "0,2", "2,1", "1", "1", "u8")},
    {"qconv2d", "i-128_128i8:3x4x6x6" XQ_S8 ";i-128_128i8:6x2x3x3;c0.01f32:;none;c0.1f32:;c-3i32:;nf32:3x6x6x6",
     CONV("1,1", "1,1", "1,1", "2", "0", "i8")},
    {"qconv2d", "i0_256u8:2x5x7x7" XQ_U8 ";i-128_128i8:5x1x3x3;c0.01,0.02,0.03,0.04,0.05f32:5;nf32:5;none;none;none",
     CONV("2,2", "1,1", "1,1", "5", "1", "f32")}, /* depthwise */
    {"qconv2d", "i0_256u8:2x16x5x5" XQ_U8 ";i-128_128i8:70x16x3x3;c0.001f32:;nf32:70;none;none;none",
     CONV("1,1", "1,1", "1,1", "1", "0", "f32")}, /* K = 144 and N = 70 cross the GEMM's blocks */
    /* the direct VNNI kernel: stride 1 on the padded grid with dilation and a non-square kernel;
     * rows wider than 64 bytes (two chunks) on the grid and, with a row stride, unfolded */
    {"qconv2d", "i0_256u8:2x3x9x8" XQ_U8 ";i-128_128i8:5x3x3x2;c0.01f32:;nf32:5;c0.05f32:;c10i32:;none",
     CONV("1,1", "2,1", "2,2", "1", "1", "u8")},
    {"qconv2d", "i-128_128i8:1x2x3x70" XQ_S8 ";i-128_128i8:3x2x1x3;c0.01f32:;nf32:3;none;none;nf32:1x3x3x70",
     CONV("1,1", "0,1", "1,1", "1", "0", "f32")},
    {"qconv2d", "i0_256u8:1x2x5x70" XQ_U8 ";i-128_128i8:3x2x3x3;c0.01f32:;nf32:3;c0.05f32:;c10i32:;none",
     CONV("2,1", "1,1", "1,1", "1", "1", "u8")},
    {"qconv2d", "c255u8:1x8x4x4;c0.001f32:;c0i32:;c127i8:3x8x3x3;c0.001f32:" NO_QRES,
     CONV("1,1", "0,0", "1,1", "1", "0", "f32")}, /* the saturation worst case */
    /* oneDNN's int8 convolution (16+ channels a group, VNNI/AMX): an odd batch over the parts,
     * 20 channels (a partial block of 16), 19 positions, groups, s8 with a residual, stride 2 */
    {"qconv2d", "i0_256u8:3x16x5x4" XQ_U8 ";i-128_128i8:20x16x3x3;c0.001f32:;nf32:20;c0.05f32:;c10i32:;none",
     CONV("1,1", "1,1", "1,1", "1", "1", "u8")},
    {"qconv2d", "i-128_128i8:2x32x6x7" XQ_S8 ";i-128_128i8:32x16x3x3;c0.001f32:;none;c0.1f32:;c-3i32:;nf32:2x32x3x4",
     CONV("2,2", "1,1", "1,1", "2", "0", "i8")},
    {"qconv2d", "i0_256u8:1x17x9x9" XQ_U8 ";i-128_128i8:33x17x1x3;c0.001f32:;nf32:33;none;none;none",
     CONV("1,1", "0,2", "2,1", "1", "0", "f32")},
    /* ResNet-20's first stage: 64 KiB of int32 sums an image, so chunks of 4 images and one of 1 */
    {"qconv2d", "i0_256u8:5x16x32x32" XQ_U8 ";i-128_128i8:16x16x3x3;c0.001f32:;nf32:16;c0.05f32:;c10i32:;nf32:5x16x32x32",
     CONV("1,1", "1,1", "1,1", "1", "1", "u8")},
    /* 7-bit weights: oneDNN's int8 code without VNNI (vpmaddubsw) takes them at the AVX2 cap,
     * with the AVX2 epilogue; the worst case 2 * 255 * -64 for its 16-bit pair sums */
    {"qconv2d", "i0_256u8:3x16x6x5" XQ_U8 ";i-64_64i8:20x16x3x3;c0.001f32:;nf32:20;c0.05f32:;c10i32:;nf32:3x20x6x5",
     CONV("1,1", "1,1", "1,1", "1", "1", "u8")},
    {"qconv2d", "i-128_128i8:2x32x7x6" XQ_S8 ";i-64_64i8:32x16x3x3;c0.001f32:;none;c0.1f32:;c-3i32:;none",
     CONV("2,1", "1,0", "1,1", "2", "0", "i8")},
    {"qconv2d", "c255u8:1x16x4x4;c0.001f32:;c0i32:;c-64i8:17x16x3x3;c0.001f32:" NO_QRES,
     CONV("1,1", "0,0", "1,1", "1", "0", "f32")},
    /* the direct AVX2 kernel (fewer than 16 channels a group, 7-bit weights, vpmaddubsw; at the
     * AVX2 cap): LeNet's two convs (shifted planes), 1 and 3 input channels with stride 2 and
     * padding (unfolded rows), s8 data with a residual, groups with dilation, and the pair sums' worst cases
     * 2 * 255 * -64 and 2 * 255 * 63 */
    {"qconv2d", "i0_256u8:2x1x28x28" XQ_U8 ";i-64_64i8:6x1x5x5;c0.01f32:;nf32:6;c0.05f32:;c10i32:;none",
     CONV("1,1", "2,2", "1,1", "1", "1", "u8")},
    {"qconv2d", "i0_256u8:2x6x14x14" XQ_U8 ";i-64_64i8:16x6x5x5;c0.001f32:;nf32:16;c0.05f32:;c10i32:;none",
     CONV("1,1", "0,0", "1,1", "1", "1", "u8")},
    {"qconv2d", "i-128_128i8:2x3x9x7" XQ_S8 ";i-64_64i8:5x3x3x3;c0.01f32:;nf32:5;none;none;nf32:2x5x5x4",
     CONV("2,2", "1,1", "1,1", "1", "0", "f32")},
    {"qconv2d", "i0_256u8:3x1x11x10" XQ_U8 ";i-64_64i8:3x1x3x2;c0.01,0.02,0.03f32:3;nf32:3;c0.05f32:;c10i32:;none",
     CONV("2,3", "2,1", "1,1", "1", "1", "u8")},
    {"qconv2d", "i-128_128i8:2x6x7x9" XQ_S8 ";i-64_64i8:4x3x3x3;c0.01f32:;nf32:4;c0.1f32:;c-3i32:;nf32:2x4x7x9",
     CONV("1,1", "2,2", "2,2", "2", "1", "i8")},
    {"qconv2d", "i0_256u8:2x3x8x11" XQ_U8 ";i-64_64i8:6x3x2x3;c0.01f32:;nf32:6;none;none;nf32:2x6x8x5",
     CONV("1,2", "1,0", "2,1", "1", "0", "f32")}, /* shifted planes with a column stride */
    {"qconv2d", "c255u8:1x3x5x5;c0.001f32:;c0i32:;c-64i8:4x3x3x3;c0.001f32:" NO_QRES,
     CONV("1,1", "1,1", "1,1", "1", "0", "f32")},
    {"qconv2d", "c255u8:1x6x5x5;c0.001f32:;c0i32:;c63i8:3x6x3x3;c0.001f32:" NO_QRES,
     CONV("1,1", "0,0", "1,1", "1", "0", "f32")},
    /* an ImageNet stem (3 -> 16+ channels, 7x7 stride 2): oneDNN's kernel rather than the direct one */
    {"qconv2d", "i0_256u8:1x3x13x12" XQ_U8 ";i-128_128i8:16x3x7x7;c0.001f32:;nf32:16;c0.05f32:;c10i32:;none",
     CONV("2,2", "3,3", "1,1", "1", "1", "u8")},
    /* qconv2d_nhwc (x [N, H, W, C], residual and y [N, OH, OW, O]; the quant_nhwc pass's): oneDNN's
     * int8 convolution with the NHWC epilogue (16 or 8 channels of a position a vector): a partial
     * vector of 20 channels over an odd batch, s8 with groups, stride and a residual, an unpadded
     * 1x1 stride-2 projection read in place, ResNet-20's first stage with its residual, 7-bit
     * weights (oneDNN's AVX2 code at the AVX2 cap), 3 input channels, dilation, the worst cases */
    {"qconv2d_nhwc", "i0_256u8:3x5x4x16" XQ_U8 ";i-128_128i8:20x16x3x3;c0.001f32:;nf32:20;c0.05f32:;c10i32:;none"
                     NO_QRES,
     CONV("1,1", "1,1", "1,1", "1", "1", "u8")},
    {"qconv2d_nhwc", "i-128_128i8:2x6x7x32" XQ_S8 ";i-128_128i8:32x16x3x3;c0.001f32:;none;c0.1f32:;c-3i32:;nf32:2x3x4x32"
                     NO_QRES,
     CONV("2,2", "1,1", "1,1", "2", "0", "i8")},
    {"qconv2d_nhwc", "i0_256u8:2x8x8x16" XQ_U8 ";i-128_128i8:32x16x1x1;c0.001f32:;nf32:32;none;none;none" NO_QRES,
     CONV("2,2", "0,0", "1,1", "1", "0", "f32")},
    {"qconv2d_nhwc", "i0_256u8:5x32x32x16" XQ_U8 ";i-128_128i8:16x16x3x3;c0.001f32:;nf32:16;c0.05f32:;c10i32:;nf32:5x32x32x16"
                     NO_QRES,
     CONV("1,1", "1,1", "1,1", "1", "1", "u8")},
    {"qconv2d_nhwc", "i0_256u8:3x6x5x16" XQ_U8 ";i-64_64i8:20x16x3x3;c0.001f32:;nf32:20;none;none;nf32:3x6x5x20"
                     NO_QRES,
     CONV("1,1", "1,1", "1,1", "1", "1", "f32")},
    {"qconv2d_nhwc", "i0_256u8:2x9x8x3" XQ_U8 ";i-64_64i8:16x3x3x2;c0.01f32:;nf32:16;c0.05f32:;c10i32:;none" NO_QRES,
     CONV("1,1", "2,1", "2,2", "1", "1", "u8")},
    {"qconv2d_nhwc", "i0_256u8:1x9x9x17" XQ_U8 ";i-128_128i8:33x17x1x3;c0.001f32:;nf32:33;none;none;none" NO_QRES,
     CONV("1,1", "0,2", "2,1", "1", "0", "f32")},
    {"qconv2d_nhwc", "c255u8:1x4x4x16;c0.001f32:;c0i32:;c127i8:17x16x3x3;c0.001f32:;none;none;none;none" NO_QRES,
     CONV("1,1", "0,0", "1,1", "1", "0", "f32")},
    {"qconv2d_nhwc", "c255u8:1x4x4x16;c0.001f32:;c0i32:;c-64i8:17x16x3x3;c0.001f32:;none;none;none;none" NO_QRES,
     CONV("1,1", "0,0", "1,1", "1", "0", "f32")},
    /* qconv2d_nhwc with an int8 residual (the fuse_qadd pass's qadd in the epilogue; then residual_scale,
     * residual_zero_point, out_scale, out_zero_point): a partial vector of 20 channels with ReLU and a
     * residual zero point far from the codes'; s8 codes and residual with groups and stride, no ReLU;
     * ResNet-20's first stage with 7-bit weights (oneDNN's AVX2 code at the AVX2 cap); saturation at both
     * u8 ends, of the conv's codes (y_scale 0.004) and of the sum (out_scale 0.01); sums whose product by
     * 1 / out_scale and quotient round apart (163 / 0.75638056 = 215.5: the bias gives the codes, lanes 0
     * and 17), which must divide */
    {"qconv2d_nhwc", "i0_256u8:3x5x4x16" XQ_U8 ";i-128_128i8:20x16x3x3;c0.001f32:;nf32:20;c0.05f32:;c10i32:;"
                     "i0_256u8:3x5x4x20;c0.04f32:;c200i32:;c0.07f32:;c5i32:",
     CONV("1,1", "1,1", "1,1", "1", "1", "u8")},
    {"qconv2d_nhwc", "i-128_128i8:2x6x7x32" XQ_S8 ";i-128_128i8:32x16x3x3;c0.001f32:;none;c0.1f32:;c-3i32:;"
                     "i-128_128i8:2x3x4x32;c0.05f32:;c7i32:;c0.12f32:;c-10i32:",
     CONV("2,2", "1,1", "1,1", "2", "0", "i8")},
    {"qconv2d_nhwc", "i0_256u8:5x32x32x16" XQ_U8 ";i-64_64i8:16x16x3x3;c0.001f32:;nf32:16;c0.05f32:;c10i32:;"
                     "i0_256u8:5x32x32x16;c0.03f32:;c0i32:;c0.06f32:;c0i32:",
     CONV("1,1", "1,1", "1,1", "1", "1", "u8")},
    {"qconv2d_nhwc", "i0_256u8:2x6x6x16" XQ_U8 ";i-128_128i8:24x16x3x3;c0.004f32:;nf32:24;c0.004f32:;c128i32:;"
                     "i0_256u8:2x6x6x24;c0.02f32:;c100i32:;c0.01f32:;c128i32:",
     CONV("1,1", "1,1", "1,1", "1", "0", "u8")},
    {"qconv2d_nhwc", "c128u8:1x2x2x16" XQ_U8 ";i-128_128i8:20x16x1x1;c0.001f32:;"
                     "c163,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,163,18,19f32:20;c1f32:;c0i32:;"
                     "c0u8:1x2x2x20;c1f32:;c0i32:;c0.756380558013916f32:;c0i32:",
     CONV("1,1", "0,0", "1,1", "1", "0", "u8")},
    {"qconv2d_nhwc", "c128u8:1x2x2x16" XQ_U8 ";i-128_128i8:20x16x1x1;c0.001f32:;"
                     "c219,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,219,18,19f32:20;c1f32:;c0i32:;"
                     "c0u8:1x2x2x20;c1f32:;c0i32:;c1.5368419885635376f32:;c0i32:",
     CONV("1,1", "0,0", "1,1", "1", "1", "u8")},
    /* max_pool2d_nhwc on u8/i8 codes (qmax_pool2d of NHWC data, the quant_nhwc pass's) */
    {"max_pool2d_nhwc", "i0_256u8:2x8x6x19", "kernel=2,2 stride=2,2 padding=0,0 dilation=1,1 ceil_mode=0"},
    {"max_pool2d_nhwc", "i-128_128i8:1x9x8x5", "kernel=3,3 stride=2,1 padding=1,1 dilation=1,2 ceil_mode=1"},
    /* the AVX2 byte kernel: 32-channel vectors and a scalar tail, padded edges (resnet18's stem pooling), i8 */
    {"max_pool2d_nhwc", "i0_256u8:2x9x9x70", "kernel=3,3 stride=2,2 padding=1,1 dilation=1,1 ceil_mode=0"},
    {"max_pool2d_nhwc", "i-128_128i8:1x8x7x40", "kernel=2,3 stride=1,2 padding=1,1 dilation=2,1 ceil_mode=0"},
    /* qmax_pool2d: LeNet's 2x2 windows; padding, stride, dilation and ceil_mode on s8 */
    {"qmax_pool2d", "i0_256u8:2x3x8x6", "kernel=2,2 stride=2,2 padding=0,0 dilation=1,1 ceil_mode=0"},
    {"qmax_pool2d", "i-128_128i8:2x3x9x7", "kernel=2,2 stride=2,2 padding=0,0 dilation=1,1 ceil_mode=0"},
    {"qmax_pool2d", "i0_256u8:1x2x5x5", "kernel=2,2 stride=2,2 padding=0,0 dilation=1,1 ceil_mode=1"},
    /* the vector 2x2 kernel: rows of 8+ outputs (LeNet's 28 -> 14: an overlapping last chunk), of
     * 4 to 7 (10 -> 5), an odd input width, s8 */
    {"qmax_pool2d", "i0_256u8:2x3x28x28", "kernel=2,2 stride=2,2 padding=0,0 dilation=1,1 ceil_mode=0"},
    {"qmax_pool2d", "i-128_128i8:2x4x10x10", "kernel=2,2 stride=2,2 padding=0,0 dilation=1,1 ceil_mode=0"},
    {"qmax_pool2d", "i0_256u8:1x2x6x33", "kernel=2,2 stride=2,2 padding=0,0 dilation=1,1 ceil_mode=0"},
    {"qmax_pool2d", "i-128_128i8:1x3x7x17", "kernel=2,2 stride=2,2 padding=0,0 dilation=1,1 ceil_mode=0"},
    {"qmax_pool2d", "i-128_128i8:1x2x9x8", "kernel=3,3 stride=2,1 padding=1,1 dilation=1,2 ceil_mode=1"},
    /* qadd: u8 + u8 -> u8 with relu over a vector tail; s8 + u8 -> s8; ties at .5 (half to even) and
     * saturation at both ends (a scale of 0.25 on the output) */
    {"qadd", "i0_256u8:3x37;c0.02f32:;c128i32:;i0_256u8:3x37;c0.03f32:;c120i32:;c0.04f32:;c5i32:",
     "activation=1 dtype=u8"},
    {"qadd", "i-128_128i8:2x3x5x5;c0.05f32:;c-3i32:;i0_256u8:2x3x5x5;c0.01f32:;c0i32:;c0.1f32:;c2i32:",
     "activation=0 dtype=i8"},
    {"qadd", "c1,3,5,7,-1,-3,-5,100,-100,127,-128,0,9,11,13,15,17i8:17;c0.5f32:;c0i32:;c0i8:17;c0.5f32:;c0i32:;"
             "c1f32:;c0i32:", "activation=0 dtype=i8"},
    {"qadd", "c1,3,5,7,-1,-3,-5,100,-100,127,-128,0,9,11,13,15,17i8:17;c0.5f32:;c0i32:;c255u8:17;c0.5f32:;c0i32:;"
             "c0.25f32:;c10i32:", "activation=1 dtype=u8"},
    /* the fast kernels multiply by 1 / y_scale unless a lane lies near a half-integer: sums whose
     * rounded product and rounded quotient fall on either side of one (163 / 0.75638056 = 215.5),
     * lane 0 and lane 17 (the AVX2 kernel's third vector, the AVX-512 kernel's second) */
    {"qadd", "c163,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,163,18,19u8:20;c1f32:;c0i32:;c0u8:20;c1f32:;c0i32:;"
             "c0.756380558013916f32:;c0i32:", "activation=0 dtype=u8"},
    {"qadd", "c219,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,219,18,19u8:20;c1f32:;c0i32:;c0u8:20;c1f32:;c0i32:;"
             "c1.5368419885635376f32:;c0i32:", "activation=1 dtype=u8"},
    {"qadd", "c182,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,182,18,19u8:20;c1f32:;c0i32:;c0u8:20;c1f32:;c0i32:;"
             "c3.6767678260803223f32:;c0i32:", "activation=0 dtype=i8"},
    {"choose_qparams", "n:4x5", "dtype=u8 symmetric=0"},
    {"choose_qparams", "u:7", "dtype=i8 symmetric=1"},
    {"choose_qparams", "p:3x2", "dtype=u8 symmetric=1"},
    {"choose_qparams", "c0:3", "dtype=i8 symmetric=0"},
    {0},
};

static oar_tensor *vec(const float *v, int n) { return oar_from_data(v, (int64_t[]){n}, 1, OAR_F32); }
static oar_tensor *scalar_f(float v) { return oar_from_data(&v, NULL, 0, OAR_F32); }
static oar_tensor *scalar_i(int32_t v) { return oar_from_data(&v, NULL, 0, OAR_I32); }
static oar_tensor *zeros(oar_dtype dt, int64_t a, int64_t b) { return oar_zeros((int64_t[]){a, b}, 2, dt); }

static bool bad_zp_dtype(void) {
    return oar_quantize(zeros(OAR_F32, 2, 3), scalar_f(0.1f), scalar_f(0), 0, OAR_U8) != NULL;
}
static bool bad_channels(void) {
    return oar_quantize(zeros(OAR_F32, 2, 3), vec((float[]){1, 1}, 2), oar_zeros((int64_t[]){2}, 1, OAR_I32), 1,
                        OAR_U8) != NULL;
}
static bool bad_qdtype(void) { return oar_quantize(zeros(OAR_F32, 2, 3), scalar_f(0.1f), scalar_i(0), 0, OAR_I32) != NULL; }
static bool bad_scale(void) { return oar_quantize(zeros(OAR_F32, 2, 3), scalar_f(0), scalar_i(0), 0, OAR_U8) != NULL; }
static bool bad_zp_range(void) {
    return oar_quantize(zeros(OAR_F32, 2, 3), scalar_f(0.1f), scalar_i(300), 0, OAR_U8) != NULL;
}
static bool bad_dequant_input(void) { return oar_dequantize(zeros(OAR_F32, 2, 3), scalar_f(1), scalar_i(0), 0) != NULL; }
static bool bad_fq_range(void) {
    return oar_fake_quant(zeros(OAR_F32, 2, 3), scalar_f(1), scalar_i(0), 0, 10, 3) != NULL;
}
static bool bad_lsq_scale(void) {
    return oar_fake_quant_lsq(zeros(OAR_F32, 2, 3), scalar_f(-0.5f), scalar_f(0), -8, 7, 1) != NULL;
}
static bool bad_lsq_per_channel(void) {
    return oar_fake_quant_lsq(zeros(OAR_F32, 2, 3), vec((float[]){1, 1}, 2), scalar_f(0), -8, 7, 1) != NULL;
}
static bool bad_ql_k(void) {
    return oar_qlinear(zeros(OAR_U8, 2, 3), scalar_f(1), scalar_i(0), zeros(OAR_I8, 4, 5), scalar_f(1), NULL, NULL) != NULL;
}
static bool bad_ql_weight(void) {
    return oar_qlinear(zeros(OAR_U8, 2, 3), scalar_f(1), scalar_i(0), zeros(OAR_U8, 4, 3), scalar_f(1), NULL, NULL) != NULL;
}
static bool bad_ql_yparams(void) {
    oar_qlinear_opts o = {.out_dtype = OAR_U8};
    return oar_qlinear(zeros(OAR_U8, 2, 3), scalar_f(1), scalar_i(0), zeros(OAR_I8, 4, 3), scalar_f(1), NULL, &o) != NULL;
}
static bool bad_ql_x(void) {
    return oar_qlinear(zeros(OAR_F32, 2, 3), scalar_f(1), scalar_i(0), zeros(OAR_I8, 4, 3), scalar_f(1), NULL, NULL) != NULL;
}
/* qlinear / qconv2d with activation act (the public API has only ReLU) */
static bool q_act(bool conv, int64_t act, oar_dtype dt) {
    oar_tensor *in[QL_N] = {conv ? oar_zeros((int64_t[]){1, 2, 3, 3}, 4, OAR_U8) : zeros(OAR_U8, 2, 3), scalar_f(1),
                            scalar_i(0), conv ? oar_zeros((int64_t[]){4, 2, 1, 1}, 4, OAR_I8) : zeros(OAR_I8, 4, 3),
                            scalar_f(1), NULL, dt == OAR_U8 || dt == OAR_I8 ? scalar_f(1) : NULL,
                            dt == OAR_U8 || dt == OAR_I8 ? scalar_i(0) : NULL, NULL};
    static const int64_t one[2] = {1, 1}, zero[2] = {0, 0};
    oar_attr at[6] = {oar_attr_ints(one, 2), oar_attr_ints(zero, 2), oar_attr_ints(one, 2), oar_attr_int(1),
                      oar_attr_int(act), oar_attr_dtype(dt)};
    return oar_op_call1(conv ? OAR_OP_qconv2d : OAR_OP_qlinear, in, QL_N, conv ? at : at + 4) != NULL;
}
static bool bad_ql_gelu_u8(void) { return q_act(false, 3, OAR_U8); }
static bool bad_ql_act(void) { return q_act(false, 4, OAR_F32); }
static bool bad_ql_i32_relu(void) { return q_act(false, 1, OAR_I32); }
static bool bad_qlut_table(void) { return oar_qlut(zeros(OAR_U8, 2, 3), oar_zeros((int64_t[]){255}, 1, OAR_U8)) != NULL; }
static bool bad_qlut_x(void) { return oar_qlut(zeros(OAR_F32, 2, 3), oar_zeros((int64_t[]){256}, 1, OAR_U8)) != NULL; }
static bool bad_qconv_gelu(void) { return q_act(true, 2, OAR_F32); }
static bool bad_qconv_groups(void) {
    return oar_qconv2d(oar_zeros((int64_t[]){1, 4, 5, 5}, 4, OAR_U8), scalar_f(1), scalar_i(0),
                       oar_zeros((int64_t[]){6, 3, 3, 3}, 4, OAR_I8), scalar_f(1), NULL,
                       &(oar_conv_opts){.groups = 2}, NULL) != NULL;
}
static bool bad_choose_nan(void) {
    oar_tensor *s, *z;
    return oar_choose_qparams(vec((float[]){1, NAN}, 2), OAR_U8, false, &s, &z) == OAR_OK;
}

const sweep_bad sweep_bad_quant[] = {
    {"qlut short table", bad_qlut_table,
     "qlut: expected a table of 256 u8 or i8 entries (one per code of x), got u8 of 1 dims with 255 elements"},
    {"qlut float x", bad_qlut_x, "qlut: expected x u8 or i8, got f32; quantize it first"},
    {"qlinear i32 with relu", bad_ql_i32_relu,
     "qlinear: expected no activation, bias or residual with an i32 output (the raw sums sum_k (x - x_zp) w), got an activation"},
    {"qlinear gelu to u8", bad_ql_gelu_u8, "qlinear: expected f32 output with a GELU activation, got u8; run quantize after it"},
    {"qlinear activation", bad_ql_act,
     "qlinear: expected activation 0 (none), 1 (relu), 2 (gelu, erf) or 3 (gelu, tanh), got 4"},
    {"qconv2d gelu", bad_qconv_gelu, "qconv2d: expected activation 0 (none) or 1 (relu), got 2"},
    {"float zero point", bad_zp_dtype, "quantize: expected an integer zero_point"},
    {"per-channel size", bad_channels, "quantize: expected per-channel scale of size x.shape[1] = 3, got 2"},
    {"quantized dtype", bad_qdtype, "quantize: expected dtype u8 or i8, got i32"},
    {"zero scale", bad_scale, "quantize: expected positive finite scales, got scale[0] = 0"},
    {"zero point range", bad_zp_range, "quantize: expected zero_point within [0, 255], got zero_point[0] = 300"},
    {"dequantize a float", bad_dequant_input, "dequantize: expected a u8 or i8 input, got f32"},
    {"fake_quant range", bad_fq_range, "fake_quant: expected quant_min < quant_max"},
    {"fake_quant_lsq negative scale", bad_lsq_scale, "fake_quant_lsq: expected a positive finite scale, got -0.5"},
    {"fake_quant_lsq per channel", bad_lsq_per_channel,
     "fake_quant_lsq: expected a one-element floating scale and zero point (per tensor), got f32[2]"},
    {"qlinear K", bad_ql_k, "qlinear: expected x.shape[-1] == weight.shape[1], got 3 != 5"},
    {"qlinear weight dtype", bad_ql_weight, "qlinear: expected weight i8 of 2 dims [out, in], got u8"},
    {"qlinear requantize without y params", bad_ql_yparams, "qlinear: expected y_scale and y_zero_point exactly when"},
    {"qlinear float x", bad_ql_x, "qlinear: expected x of dtype u8 or i8"},
    {"qconv2d groups", bad_qconv_groups, "qconv2d: expected groups >= 1 dividing out channels 6, with weight.shape[1] * groups == x.shape[1], got groups 2, 3 * 2 != 4"},
    {"NaN calibration data", bad_choose_nan, "choose_qparams: expected finite values, got nan"},
    {0},
};
