/* Sweep cases for grid_sample, roi_align and nms (src/ops/grid_sample.c, roi_align.c, nms.c).
 * roi_align's boxes are fixed f32 values (their batch indices must be valid; boxes get no
 * gradient), as many as the input's batch, so the zero-size pass empties both. */
#include "sweep.h"

#include "oar.h"

#define BOXES2 "c0,0.5,1.2,4.3,5.1,1,2.2,0.3,5.9,3.8f32:2x5"
/* the second box runs past the input (x2 = 9.5 > W) */
#define BOXES2_OUT "c1,-0.7,0.4,3.3,2.9,0,3.1,1.5,9.5,7.25f32:2x5"
/* 6 overlapping boxes over two images, one past the border */
#define BOXES6 "c0,0.5,1.2,9.3,8.1,1,2.2,0.3,12.9,7.8,0,3,3,11,14,1,0,0,17,15,0,4.5,2.5,6,6.5,1,-2,5,8,20f32:6x5"
#define NMS_BOXES "c0,0,4,4,1,1,5,5,0.5,0,4.5,4,10,10,12,12,10.5,10,12,12.5,3,3,3,6f32:6x4"

const sweep_case sweep_cases_vision[] = {
    {"grid_sample", "n:2x3x5x6;u:2x4x3x2", "mode=bilinear padding_mode=zeros align_corners=0"},
    {"grid_sample", "n:2x3x5x6;n:2x4x3x2", "mode=bilinear padding_mode=zeros align_corners=1"},
    {"grid_sample", "n:1x2x4x5;n:1x3x3x2", "mode=bilinear padding_mode=border align_corners=0"},
    {"grid_sample", "n:1x2x4x5;n:1x3x3x2", "mode=bilinear padding_mode=reflection align_corners=0"},
    {"grid_sample", "n:1x2x4x5;n:1x3x3x2", "mode=bilinear padding_mode=reflection align_corners=1"},
    {"grid_sample", "n:2x2x4x5;n:2x3x3x2", "mode=nearest padding_mode=zeros align_corners=0"},
    {"grid_sample", "n:2x2x4x5;n:2x3x3x2", "mode=nearest padding_mode=border align_corners=1"},
    {"grid_sample", "n:1x1x1x1;u:1x2x2x2", "mode=bilinear padding_mode=reflection align_corners=1"},
    {"grid_sample", "n:2x0x3x3;u:2x2x2x2", ""}, /* defaults; no channels */
    /* bicubic: the three padding modes, both align_corners (coordinates past the border reach
     * the padded taps) */
    {"grid_sample", "n:2x3x5x6;n:2x4x3x2", "mode=bicubic padding_mode=zeros align_corners=0"},
    {"grid_sample", "n:1x2x4x5;n:1x3x3x2", "mode=bicubic padding_mode=border align_corners=1"},
    {"grid_sample", "n:1x2x4x5;n:1x3x3x2", "mode=bicubic padding_mode=reflection align_corners=0"},
    {"grid_sample", "n:1x2x4x5;n:1x3x3x2", "mode=bicubic padding_mode=reflection align_corners=1"},
    {"grid_sample", "n:1x1x1x2;u:1x2x2x2", "mode=bicubic padding_mode=border align_corners=0"},
    /* 5-d: trilinear and nearest */
    {"grid_sample", "n:2x2x3x4x5;n:2x2x3x2x3", "mode=bilinear padding_mode=zeros align_corners=0"},
    {"grid_sample", "n:1x2x3x4x3;n:1x2x2x3x3", "mode=bilinear padding_mode=reflection align_corners=1"},
    {"grid_sample", "n:1x2x3x4x3;n:1x2x2x3x3", "mode=bilinear padding_mode=border align_corners=0"},
    {"grid_sample", "n:2x2x3x4x3;n:2x2x2x2x3", "mode=nearest padding_mode=zeros align_corners=1"},
    /* past a forward task's block of points and the threads' size bar (fast kernels, threaded) */
    {"grid_sample", "n:2x16x20x24;n:2x12x14x2", "mode=bilinear padding_mode=zeros align_corners=0", SWEEP_NO_GRAD},
    {"grid_sample", "n:1x8x12x10;n:1x20x15x2", "mode=bicubic padding_mode=reflection align_corners=0",
     SWEEP_NO_GRAD},
    {"grid_sample", "n:2x4x6x8x7;n:2x5x6x7x3", "mode=bilinear padding_mode=border align_corners=1", SWEEP_NO_GRAD},
    {"grid_sample_backward", "n:2x3x4x3;n:2x3x5x6;u:2x4x3x2", "mode=bilinear padding_mode=zeros align_corners=0",
     SWEEP_NO_GRAD},
    {"grid_sample_backward", "n:1x2x3x3;n:1x2x4x5;n:1x3x3x2", "mode=nearest padding_mode=reflection align_corners=1",
     SWEEP_NO_GRAD},
    {"grid_sample_backward", "n:1x2x3x3;n:1x2x4x5;n:1x3x3x2", "mode=bicubic padding_mode=border align_corners=0",
     SWEEP_NO_GRAD},
    {"grid_sample_backward", "n:1x2x3x3;n:1x2x4x5;n:1x3x3x2", "mode=bicubic padding_mode=reflection "
     "align_corners=1", SWEEP_NO_GRAD},
    {"grid_sample_backward", "n:1x2x2x2x3;n:1x2x3x4x3;n:1x2x2x3x3", "mode=bilinear padding_mode=zeros "
     "align_corners=0", SWEEP_NO_GRAD},
    {"grid_sample_backward", "n:2x8x12x14;n:2x8x20x24;n:2x12x14x2", "mode=bilinear padding_mode=reflection "
     "align_corners=0", SWEEP_NO_GRAD}, /* threaded */
    {"roi_align", "n:2x3x6x7;" BOXES2, "output_size=2,2 spatial_scale=1 sampling_ratio=-1 aligned=0"},
    {"roi_align", "n:2x3x6x7;" BOXES2, "output_size=3,2 spatial_scale=1 sampling_ratio=2 aligned=1"},
    {"roi_align", "n:2x2x6x7;" BOXES2_OUT, "output_size=2,3 spatial_scale=0.5 sampling_ratio=-1 aligned=1"},
    {"roi_align", "n:2x2x6x7;" BOXES2_OUT, "output_size=1,1"}, /* defaults: scale 1, adaptive, not aligned */
    {"roi_align", "n:6x16x12x14;" BOXES6, "output_size=4,3 spatial_scale=0.8 sampling_ratio=-1 aligned=1",
     SWEEP_NO_GRAD}, /* threaded */
    /* 7x7 bins of 10x10 samples: past the fast forward's whole-box buffers (4096 samples) and a
     * chunk of 64 samples within a bin */
    {"roi_align", "n:2x3x6x7;" BOXES2, "output_size=7,7 spatial_scale=1 sampling_ratio=10 aligned=0", SWEEP_NO_GRAD},
    {"roi_align_backward", "n:2x3x7x7;" BOXES2, "input_shape=2,3,6,7 output_size=7,7 spatial_scale=1 "
     "sampling_ratio=10 aligned=1", SWEEP_NO_GRAD},
    {"roi_align_backward", "n:2x3x2x2;" BOXES2, "input_shape=2,3,6,7 output_size=2,2 spatial_scale=1 sampling_ratio=-1 "
     "aligned=0"},
    {"roi_align_backward", "n:2x2x2x3;" BOXES2_OUT, "input_shape=2,2,6,7 output_size=2,3 spatial_scale=0.5 "
     "sampling_ratio=3 aligned=1"},
    {"roi_align_backward", "n:6x16x4x3;" BOXES6, "input_shape=2,16,12,14 output_size=4,3 spatial_scale=0.8 "
     "sampling_ratio=2 aligned=0"}, /* threaded, overlapping boxes */
    {"roi_align_backward", "n:0x2x2x3;c0f32:0x5", "input_shape=0,2,6,7 output_size=2,3"}, /* zero batch */
    {"nms", NMS_BOXES ";u:6", "iou_threshold=0.5"},
    {"nms", NMS_BOXES ";c0.5,0.7,0.7,0.5,0.5,0.7:6", "iou_threshold=0.3"}, /* ties: lower index first */
    {"nms", NMS_BOXES ";u:6", "iou_threshold=0"},
    {"nms", NMS_BOXES ";u:6", "iou_threshold=1"},
    {"nms", "u:300x4;u:300", "iou_threshold=0.1"}, /* random (mostly degenerate) boxes: the fast kernels' loops */
    {0},
};

static oar_tensor *zeros(int64_t a, int64_t b, int64_t c, int64_t d, int nd, oar_dtype dt) {
    int64_t s[4] = {a, b, c, d};
    return oar_zeros(s, nd, dt);
}
static bool gs_3d(void) {
    return oar_grid_sample(zeros(2, 4, 5, 0, 3, OAR_F32), zeros(2, 3, 3, 2, 4, OAR_F32), NULL, NULL, false) != NULL;
}
static bool gs_grid3(void) {
    return oar_grid_sample(zeros(2, 1, 4, 5, 4, OAR_F32), zeros(2, 3, 3, 3, 4, OAR_F32), NULL, NULL, false) != NULL;
}
static bool gs_mode(void) {
    return oar_grid_sample(zeros(2, 1, 4, 5, 4, OAR_F32), zeros(2, 3, 3, 2, 4, OAR_F32), "area", NULL, 0) != NULL;
}
static bool gs_bicubic_5d(void) {
    int64_t xs[5] = {1, 1, 2, 3, 4}, gs[5] = {1, 2, 2, 2, 3};
    return oar_grid_sample(oar_zeros(xs, 5, OAR_F32), oar_zeros(gs, 5, OAR_F32), "bicubic", NULL, 0) != NULL;
}
static bool gs_grid5_of_4d(void) {
    int64_t gs[5] = {2, 2, 2, 2, 3};
    return oar_grid_sample(zeros(2, 1, 4, 5, 4, OAR_F32), oar_zeros(gs, 5, OAR_F32), NULL, NULL, 0) != NULL;
}
static bool gs_batch(void) {
    return oar_grid_sample(zeros(2, 1, 4, 5, 4, OAR_F32), zeros(3, 3, 3, 2, 4, OAR_F32), NULL, NULL, false) != NULL;
}
static bool roi_4cols(void) {
    return oar_roi_align(zeros(1, 2, 4, 4, 4, OAR_F32), zeros(3, 4, 0, 0, 2, OAR_F32), 2, 2, 1, -1, 0) != NULL;
}
static bool roi_bad_batch(void) {
    oar_tensor *boxes = zeros(1, 5, 0, 0, 2, OAR_F32);
    ((float *)oar_data(boxes))[0] = 3;
    return oar_roi_align(zeros(2, 2, 4, 4, 4, OAR_F32), boxes, 2, 2, 1, -1, 0) != NULL;
}
static bool roi_ratio(void) {
    return oar_roi_align(zeros(1, 2, 4, 4, 4, OAR_F32), zeros(3, 5, 0, 0, 2, OAR_F32), 2, 2, 1, 0, 0) != NULL;
}
static bool nms_scores(void) {
    oar_tensor *k, *c;
    return oar_nms(zeros(4, 4, 0, 0, 2, OAR_F32), zeros(3, 0, 0, 0, 1, OAR_F32), 0.5, &k, &c) == OAR_OK;
}
static bool nms_int(void) {
    oar_tensor *k, *c;
    return oar_nms(zeros(4, 4, 0, 0, 2, OAR_I64), zeros(4, 0, 0, 0, 1, OAR_F32), 0.5, &k, &c) == OAR_OK;
}

const sweep_bad sweep_bad_vision[] = {
    {"grid_sample of a 3-d input", gs_3d, "grid_sample: expected a 4-d input [N, C, H, W] or a 5-d input [N, C, D, H, "
     "W], got 3-d"},
    {"grid_sample with (x, y, z) grid", gs_grid3, "grid_sample: expected a grid [N, H_out, W_out, 2] for a 4-d input, "
     "got 4-d with last dim 3"},
    {"grid_sample 5-d grid of a 4-d input", gs_grid5_of_4d, "grid_sample: expected a grid [N, H_out, W_out, 2] for a "
     "4-d input, got 5-d with last dim 3"},
    {"grid_sample mode 'area'", gs_mode, "grid_sample: expected mode 'bilinear', 'nearest' or 'bicubic', got 'area'"},
    {"grid_sample bicubic in 5-d", gs_bicubic_5d, "grid_sample: bicubic interpolation needs a 4-d input [N, C, H, W], "
     "got 5-d"},
    {"grid_sample batch 2 vs 3", gs_batch, "grid_sample: expected grid and input with the same batch, got 3 and 2"},
    {"roi_align with [K, 4] boxes", roi_4cols, "roi_align: expected boxes [K, 5] (batch index, x1, y1, x2, y2), got 2-d with last dim 4"},
    {"roi_align box of batch 3 of 2", roi_bad_batch, "roi_align: box 0 has batch index 3; expected an integer in [0, 2)"},
    {"roi_align sampling_ratio 0", roi_ratio, "roi_align: expected sampling_ratio > 0, or -1 (adaptive), got 0"},
    {"nms with 3 scores for 4 boxes", nms_scores, "nms: expected scores [4], one per box, got 1-d with 3 elements"},
    {"nms of int64 boxes", nms_int, "nms: expected boxes"},
    {0},
};
