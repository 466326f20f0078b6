/* ONNX sampling and region operators on oar's vision ops (torchvision's semantics, which
 * ONNX's reference shares): GridSample on grid_sample, RoiAlign on roi_align. */
#include "io/onnx/onnx_ops.h"

#include <string.h>

oar_status ox_GridSample(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0), *grid = OX_IN(c, 1);
    if (!x || !grid) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs X and grid");
    if (x->ndim != 4) return ox_unsupported(c, "a %d-D input; oar samples 4-D [N, C, H, W] inputs", x->ndim);
    char mb[16], pb[16];
    const char *mode = ox_attr_str(c, "mode", c->opset >= 20 ? "linear" : "bilinear", mb, sizeof mb);
    const char *pad = ox_attr_str(c, "padding_mode", "zeros", pb, sizeof pb);
    if (mode && !strcmp(mode, "linear")) mode = "bilinear"; /* opset 20's name */
    if (!mode || (strcmp(mode, "bilinear") && strcmp(mode, "nearest")))
        return ox_unsupported(c, "mode '%s'; oar supports bilinear (linear) and nearest", mode ? mode : "?");
    if (!pad || (strcmp(pad, "zeros") && strcmp(pad, "border") && strcmp(pad, "reflection")))
        return ox_unsupported(c, "padding_mode '%s'; expected zeros, border or reflection", pad ? pad : "?");
    if (grid->dtype != x->dtype) grid = oar_cast(grid, x->dtype);
    return ox_set(c, 0, grid ? oar_grid_sample(x, grid, mode, pad, ox_attr_int(c, "align_corners", 0) != 0) : NULL);
}

oar_status ox_RoiAlign(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0), *rois = OX_IN(c, 1), *batch = OX_IN(c, 2);
    if (!x || !rois || !batch) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs X, rois and batch_indices");
    char mb[8], tb[24];
    const char *mode = ox_attr_str(c, "mode", "avg", mb, sizeof mb);
    if (!mode || strcmp(mode, "avg")) return ox_unsupported(c, "mode '%s'; oar supports avg", mode ? mode : "?");
    /* opset 16 added the mode; before it the boxes were not shifted by half a pixel */
    const char *ct_default = c->opset >= 16 ? "half_pixel" : "output_half_pixel";
    const char *ct = ox_attr_str(c, "coordinate_transformation_mode", ct_default, tb, sizeof tb);
    bool aligned = ct && !strcmp(ct, "half_pixel");
    if (!aligned && (!ct || strcmp(ct, "output_half_pixel")))
        return ox_unsupported(c, "coordinate_transformation_mode '%s'; expected half_pixel or output_half_pixel",
                              ct ? ct : "?");
    if (rois->ndim != 2 || rois->shape[1] != 4 || batch->ndim != 1 || batch->shape[0] != rois->shape[0])
        return ox_fail(c, OAR_ERR_SHAPE, "expected rois [R, 4] and batch_indices [R]");
    int64_t sampling = ox_attr_int(c, "sampling_ratio", 0);
    oar_tensor *cols[2] = {oar_unsqueeze(oar_cast(batch, rois->dtype), 1), rois};
    oar_tensor *boxes = cols[0] ? oar_concat(cols, 2, 1) : NULL; /* rows (batch index, x1, y1, x2, y2) */
    if (boxes && boxes->dtype != x->dtype) boxes = oar_cast(boxes, x->dtype);
    if (!boxes) return oar_last_status();
    int64_t out_h = ox_attr_int(c, "output_height", 1), out_w = ox_attr_int(c, "output_width", 1);
    double scale = ox_attr_float(c, "spatial_scale", 1.0);
    return ox_set(c, 0, oar_roi_align(x, boxes, out_h, out_w, scale, sampling > 0 ? sampling : -1, aligned));
}
