/* Resize (opset 10 on) and Upsample (7 to 9): separable interpolation, one axis at a time, as
 * ONNX's reference computes it. For each resized axis the output coordinate x maps to x_ori in
 * the input (coordinate_transformation_mode); the 2 (nearest, linear) or 4 (cubic) input
 * neighbours around x_ori, clamped at the edges, are weighted by the mode's coefficients. The
 * weights depend only on the sizes, so they are computed here once, in double:
 *   nearest: a gather of one index per output position (index_select: exact, any values);
 *   linear, cubic: an [in, out] weight matrix applied by matmul along the axis.
 * tf_crop_and_resize (a region of interest with extrapolation), antialias and the
 * keep_aspect_ratio policies other than stretch are refused. */
#include "io/onnx/onnx_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum { R_NEAREST, R_LINEAR, R_CUBIC } resize_mode;
typedef enum { C_HALF_PIXEL, C_PYTORCH_HALF_PIXEL, C_ALIGN_CORNERS, C_ASYMMETRIC, C_TF_HALF_PIXEL_NN } coord_mode;
typedef enum { N_ROUND_PREFER_FLOOR, N_ROUND_PREFER_CEIL, N_FLOOR, N_CEIL } nearest_mode;

typedef struct resize_spec {
    resize_mode mode;
    coord_mode coord;
    nearest_mode nearest;
    double cubic_a;
    bool exclude_outside;
} resize_spec;

static double original_coord(const resize_spec *s, double x, double scale, int64_t in) {
    double out_width = scale * (double)in; /* as ONNX's reference: the scaled, unrounded length */
    switch (s->coord) {
    case C_ALIGN_CORNERS: return out_width == 1 ? 0 : x * (double)(in - 1) / (out_width - 1);
    case C_ASYMMETRIC: return x / scale;
    case C_PYTORCH_HALF_PIXEL: return out_width == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    case C_TF_HALF_PIXEL_NN: return (x + 0.5) / scale;
    default: return (x + 0.5) / scale - 0.5;
    }
}

/* The n coefficients of the neighbours base - n/2 + 1 ... base + n/2 for ratio in (0, 1]. */
static void coefficients(const resize_spec *s, double r, double *c) {
    double a = s->cubic_a;
    switch (s->mode) {
    case R_LINEAR: c[0] = 1 - r, c[1] = r; return;
    case R_CUBIC: {
        double p = r + 1, q = 1 - r, q1 = q + 1;
        c[0] = ((a * p - 5 * a) * p + 8 * a) * p - 4 * a;
        c[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
        c[2] = ((a + 2) * q - (a + 3)) * q * q + 1;
        c[3] = ((a * q1 - 5 * a) * q1 + 8 * a) * q1 - 4 * a;
        return;
    }
    default: {
        bool right = r == 1 || s->nearest == N_CEIL ||
                     (s->nearest == N_ROUND_PREFER_FLOOR && r > 0.5) || (s->nearest == N_ROUND_PREFER_CEIL && r >= 0.5);
        c[0] = !right, c[1] = right;
    }
    }
}

/* w[o * in + i]: the weight of input i in output o, along one axis. */
static void axis_weights(const resize_spec *s, int64_t in, int64_t out, double scale, double *w) {
    int n = s->mode == R_CUBIC ? 4 : 2;
    memset(w, 0, sizeof(double) * (size_t)(in * out));
    for (int64_t o = 0; o < out; o++) {
        double x = original_coord(s, (double)o, scale, in);
        int64_t base = (int64_t)ceil(x) - 1; /* the neighbour left of x; x itself when x is whole */
        double c[4], sum = 0;
        coefficients(s, x - (double)base, c);
        for (int k = 0; k < n; k++) {
            int64_t i = base - n / 2 + 1 + k;
            if (s->exclude_outside && (i < 0 || i >= in)) c[k] = 0;
            sum += c[k];
        }
        for (int k = 0; k < n; k++) {
            int64_t i = base - n / 2 + 1 + k;
            i = i < 0 ? 0 : i >= in ? in - 1 : i; /* edge padding */
            w[o * in + i] += s->exclude_outside ? c[k] / sum : c[k];
        }
    }
}

/* x resized along axis d from in to out. */
static oar_tensor *resize_axis(const resize_spec *s, oar_tensor *x, int d, int64_t out, double scale) {
    int64_t in = x->shape[d];
    double *w = malloc(sizeof(double) * (size_t)(in * out + 1));
    if (!w) {
        oar_error(OAR_ERR_OOM, "onnx Resize: out of memory for a %lld x %lld weight matrix", (long long)in, (long long)out);
        return NULL;
    }
    axis_weights(s, in, out, scale, w);
    oar_tensor *y = NULL;
    if (s->mode == R_NEAREST) { /* one weight of 1 per output: which input it is */
        int64_t *idx = malloc(sizeof(int64_t) * (size_t)(out + 1));
        if (idx) {
            for (int64_t o = 0; o < out; o++)
                for (int64_t i = 0; i < in; i++)
                    if (w[o * in + i] != 0) idx[o] = i;
            oar_tensor *it = oar_from_data(idx, &out, 1, OAR_I64);
            y = it ? oar_index_select(x, d, it) : NULL;
            free(idx);
        }
    } else { /* the axis last, times the [in, out] matrix, back in place */
        double *wt = malloc(sizeof(double) * (size_t)(in * out + 1));
        if (wt) {
            for (int64_t i = 0; i < in; i++)
                for (int64_t o = 0; o < out; o++) wt[i * out + o] = w[o * in + i];
            int64_t shape[2] = {in, out};
            oar_tensor *m = oar_from_data(wt, shape, 2, OAR_F64);
            oar_tensor *moved = d == x->ndim - 1 ? x : oar_transpose(x, d, x->ndim - 1);
            y = m && moved ? oar_matmul(moved, oar_cast(m, x->dtype)) : NULL;
            if (y && d != x->ndim - 1) y = oar_transpose(y, d, x->ndim - 1);
            free(wt);
        }
    }
    free(w);
    return y;
}

static bool read_floats(ox_ctx *c, int k, double *buf, int max, int *n) {
    oar_tensor *t = OX_IN(c, k);
    *n = 0;
    if (!t || t->numel == 0) return true;
    if (!t->storage) {
        ox_unsupported(c, "input %d (scales) must be known when the model is compiled", k);
        return false;
    }
    if (t->numel > max) {
        ox_fail(c, OAR_ERR_SHAPE, "input %d has %lld values for a %d-D input", k, (long long)t->numel, max);
        return false;
    }
    *n = (int)t->numel;
    return oar_copy_to_buffer(t, buf, sizeof(double) * (size_t)max, OAR_F64) == OAR_OK;
}

/* Resizes x to sizes (when n_sizes) or by scales, on the given axes (all when n_axes is 0). */
static oar_status resize(ox_ctx *c, const resize_spec *s, const double *scales, int n_scales, const int64_t *sizes,
                         int n_sizes, const int64_t *axes, int n_axes) {
    oar_tensor *x = OX_IN(c, 0);
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "expected an input X");
    if (x->dtype != OAR_F32 && x->dtype != OAR_F64 && x->dtype != OAR_F16 && x->dtype != OAR_BF16 &&
        s->mode != R_NEAREST)
        return ox_unsupported(c, "%s input with linear or cubic mode; supported: float types", oar_dtype_name(x->dtype));
    int n = n_sizes ? n_sizes : n_scales, dims[OAR_MAX_DIMS];
    if (n_axes && n != n_axes) return ox_fail(c, OAR_ERR_SHAPE, "expected %d scales or sizes (one per axis), got %d", n_axes, n);
    if (!n_axes && n != x->ndim)
        return ox_fail(c, OAR_ERR_SHAPE, "expected %d scales or sizes (one per dim of X), got %d", x->ndim, n);
    if (!n_sizes && !n_scales) return ox_fail(c, OAR_ERR_FORMAT, "expected scales or sizes");
    for (int k = 0; k < n; k++) {
        int d = n_axes ? ox_axis(c, axes[k], x->ndim, "axes") : k;
        if (d < 0) return oar_last_status();
        dims[k] = d;
    }
    oar_tensor *y = x;
    for (int k = 0; k < n && y; k++) {
        int64_t in = x->shape[dims[k]];
        double scale = n_sizes ? (in ? (double)sizes[k] / (double)in : 1) : scales[k];
        int64_t out = n_sizes ? sizes[k] : (int64_t)floor(scale * (double)in);
        if (!(scale > 0) || out < 0 || out > ((int64_t)1 << 31))
            return ox_fail(c, OAR_ERR_SHAPE, "axis %d: expected a positive scale and size, got scale %g and size %lld",
                           dims[k], scale, (long long)out);
        if (out == in && scale == 1.0) continue; /* every mode maps x to x */
        if (in == 0 || out == 0)
            return ox_unsupported(c, "axis %d resized from %lld to %lld; an empty axis is not supported", dims[k],
                                  (long long)in, (long long)out);
        y = resize_axis(s, y, dims[k], out, scale);
    }
    return ox_set(c, 0, y == x ? oar_clone(x) : y);
}

static oar_status read_mode(ox_ctx *c, resize_spec *s, const char *def_coord) {
    char buf[48];
    const char *mode = ox_attr_str(c, "mode", "nearest", buf, sizeof buf);
    if (!strcmp(mode, "nearest")) s->mode = R_NEAREST;
    else if (!strcmp(mode, "linear") || !strcmp(mode, "bilinear")) s->mode = R_LINEAR;
    else if (!strcmp(mode, "cubic")) s->mode = R_CUBIC;
    else return ox_unsupported(c, "mode='%s'; supported: nearest, linear, cubic", mode);
    const char *coord = ox_attr_str(c, "coordinate_transformation_mode", def_coord, buf, sizeof buf);
    static const char *const coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                         "tf_half_pixel_for_nn"};
    int k = 0;
    while (k < 5 && strcmp(coord, coords[k])) k++;
    if (k == 5)
        return ox_unsupported(c, "coordinate_transformation_mode='%s'; supported: half_pixel, pytorch_half_pixel, "
                                 "align_corners, asymmetric, tf_half_pixel_for_nn", coord);
    s->coord = (coord_mode)k;
    const char *nearest = ox_attr_str(c, "nearest_mode", "round_prefer_floor", buf, sizeof buf);
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    for (k = 0; k < 4 && strcmp(nearest, nearests[k]); k++) {}
    if (k == 4) return ox_unsupported(c, "nearest_mode='%s'; supported: round_prefer_floor, round_prefer_ceil, floor, ceil", nearest);
    s->nearest = (nearest_mode)k;
    s->cubic_a = ox_attr_float(c, "cubic_coeff_a", -0.75);
    s->exclude_outside = ox_attr_int(c, "exclude_outside", 0) != 0;
    if (ox_attr_int(c, "antialias", 0)) return ox_unsupported(c, "antialias=1; supported: 0");
    const char *policy = ox_attr_str(c, "keep_aspect_ratio_policy", "stretch", buf, sizeof buf);
    if (strcmp(policy, "stretch")) return ox_unsupported(c, "keep_aspect_ratio_policy='%s'; supported: stretch", policy);
    return OAR_OK;
}

oar_status ox_Resize(ox_ctx *c) {
    resize_spec s = {0};
    oar_status st;
    if (c->opset < 11) { /* Resize-10: (X, scales), asymmetric coordinates, nearest rounds down */
        if ((st = read_mode(c, &s, "asymmetric")) != OAR_OK) return st;
        s.coord = C_ASYMMETRIC, s.nearest = N_FLOOR;
        double scales[OAR_MAX_DIMS];
        int n;
        if (!read_floats(c, 1, scales, OAR_MAX_DIMS, &n)) return oar_last_status();
        return resize(c, &s, scales, n, NULL, 0, NULL, 0);
    }
    if ((st = read_mode(c, &s, "half_pixel")) != OAR_OK) return st;
    char buf[48];
    if (!strcmp(ox_attr_str(c, "coordinate_transformation_mode", "half_pixel", buf, sizeof buf), "tf_crop_and_resize"))
        return ox_unsupported(c, "coordinate_transformation_mode='tf_crop_and_resize' (a region of interest)");
    double scales[OAR_MAX_DIMS];
    int64_t sizes[OAR_MAX_DIMS], axes[OAR_MAX_DIMS];
    int n_scales, n_axes = ox_attr_ints(c, "axes", axes, OAR_MAX_DIMS);
    if (n_axes < 0 || !read_floats(c, 2, scales, OAR_MAX_DIMS, &n_scales)) return oar_last_status();
    int n_sizes = ox_known_ints(c, 3, sizes, OAR_MAX_DIMS);
    if (n_sizes < 0) return oar_last_status();
    if (n_sizes && n_scales) return ox_fail(c, OAR_ERR_FORMAT, "expected scales or sizes, got both");
    return resize(c, &s, scales, n_scales, sizes, n_sizes, axes, n_axes);
}

/* Upsample (opset 7 to 9; deprecated since 10): scales as an attribute (7, 8) or input 1 (9). */
oar_status ox_Upsample(ox_ctx *c) {
    resize_spec s = {0};
    oar_status st = read_mode(c, &s, "asymmetric");
    if (st != OAR_OK) return st;
    s.coord = C_ASYMMETRIC, s.nearest = N_FLOOR;
    double scales[OAR_MAX_DIMS];
    int n = 0;
    if (c->opset >= 9) {
        if (!read_floats(c, 1, scales, OAR_MAX_DIMS, &n)) return oar_last_status();
    } else {
        const Onnx__AttributeProto *a = ox_attr(c, "scales");
        if (!a || a->n_floats > OAR_MAX_DIMS) return ox_fail(c, OAR_ERR_FORMAT, "expected the attribute scales");
        for (size_t k = 0; k < a->n_floats; k++) scales[n++] = a->floats[k];
    }
    return resize(c, &s, scales, n, NULL, 0, NULL, 0);
}
