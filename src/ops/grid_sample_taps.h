/* grid_sample's options read from its attributes; the sampling geometry is in
 * grid_sample_geom.h (shared with the fast CPU and the CUDA kernels). */
#ifndef OAR_GRID_SAMPLE_TAPS_H
#define OAR_GRID_SAMPLE_TAPS_H

#include <string.h>

#include "ops/grid_sample_geom.h"
#include "ops/op.h"

static inline oar_status gs_opts_read(const char *op, const oar_attr *a, gs_opts *o) {
    *o = (gs_opts){0};
    if (strcmp(a[0].s, "bilinear") == 0) o->mode = GS_BILINEAR;
    else if (strcmp(a[0].s, "nearest") == 0) o->mode = GS_NEAREST;
    else if (strcmp(a[0].s, "bicubic") == 0) o->mode = GS_BICUBIC;
    else
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected mode 'bilinear', 'nearest' or 'bicubic', got '%s'", op,
                         a[0].s);
    if (strcmp(a[1].s, "zeros") == 0) o->pad = GS_ZEROS;
    else if (strcmp(a[1].s, "border") == 0) o->pad = GS_BORDER;
    else if (strcmp(a[1].s, "reflection") == 0) o->pad = GS_REFLECTION;
    else
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected padding_mode 'zeros', 'border' or 'reflection', got '%s'",
                         op, a[1].s);
    o->align = a[2].i != 0;
    return OAR_OK;
}

#endif
