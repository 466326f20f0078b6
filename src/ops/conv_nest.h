/* The convolution loop nest that conv.c's ops (1-, 2- and 3-d) share: its geometry from shapes
 * and attributes, the checks every conv op makes (in the house style), and the reference
 * kernel, in double. Each conv op is one of three linear maps of the nest: the forward map
 * (x, w) -> y, its adjoint in x (grad_input, also the transposed conv) and its adjoint in w
 * (grad_weight). Shapes here have up to three spatial dims (depth, height, width); a conv of
 * fewer has unit leading ones, so one nest serves every rank. */
#ifndef OAR_OPS_CONV_NEST_H
#define OAR_OPS_CONV_NEST_H

#include "ops/op.h"

/* The output grid o may be smaller than the full conv output: after a transposed conv with
 * output_padding, the conv of its output is longer than the grid it came from, and the
 * adjoints then cover only that grid. Spatial entries are [depth, height, width]. */
typedef struct oar_conv_geom {
    int64_t n, ci, co, groups; /* x [n, ci, sp...], weight [co, ci / groups, k...], y [n, co, o...] */
    int64_t sp[3], k[3], o[3];
    int64_t s[3], p[3], d[3];  /* stride, padding, dilation */
} oar_conv_geom;

typedef enum { OAR_CONV_FORWARD, OAR_CONV_GRAD_INPUT, OAR_CONV_GRAD_WEIGHT } oar_conv_map;

/* One spatial parameter list (stride, padding, ...) of nsp entries, each >= min. */
oar_status oar_conv_read_list(const char *op, const char *what, const oar_attr *a, int nsp, int64_t min,
                              int64_t *out);
/* Stride, padding, dilation and groups into g; the unused leading spatial dims get neutral ones. */
oar_status oar_conv_read_params(const char *op, const oar_attr *stride, const oar_attr *pad, const oar_attr *dil,
                                const oar_attr *groups, int nsp, oar_conv_geom *g);
/* Shapes of x and weight (2 + nsp entries each) into g, checked; the full output size is left
 * in o. xn / wn name the tensors in messages ("x" or "input_shape"). */
oar_status oar_conv_fill_geom(const char *op, const int64_t *xs, const int64_t *ws, const char *xn, const char *wn,
                              int nsp, oar_conv_geom *g);
/* A grad tensor [n, co, grid...] whose grid must fit the full conv output of xn: sets g->o to it. */
oar_status oar_conv_take_grid(const char *op, const oar_tensor *gy, int nsp, oar_conv_geom *g, const char *xn);

oar_status oar_conv_check_ndim(const char *op, const oar_tensor *t, const char *name, int nd, const char *layout);
/* Inputs float and of one dtype; NULL entries (an absent bias) are skipped. */
oar_status oar_conv_check_dtypes(const char *op, oar_tensor *const *in, int n, const char *const *names);
oar_status oar_conv_check_bias(const char *op, const oar_tensor *b, int64_t channels);

/* Runs map m; the operand it accumulates into is the op's output, which starts at the bias
 * (per channel, dim 1) or at zero. Tensors are contiguous, of any float dtype. */
oar_status oar_conv_ref_run(oar_conv_map m, const oar_conv_geom *g, oar_tensor *x, oar_tensor *w, oar_tensor *y,
                            const oar_tensor *bias);

/* The incoming gradient is often a broadcast (from sum): made dense once rather than by
 * dispatch for each backward op that reads it. */
oar_tensor *oar_conv_dense(oar_tensor *t);
/* Every requested gradient must have been produced. */
oar_status oar_conv_grads_done(const oar_grad_ctx *g);

#endif
