/* oneDNN kernels (f32, bf16) for conv2d / conv3d and their backward ops, and (f32) conv_transpose3d. */
#ifndef OAR_CONV_DNNL_H
#define OAR_CONV_DNNL_H

/* Registers them above the im2col kernels; does nothing in a build without oneDNN. */
void oar_cpu_conv_register_dnnl(void);

#include "ops/op.h"

/* For tests of the layout choice: 1 when a conv2d_act call (its inputs, output and attributes)
 * converts its activations (x, y) into another layout around oneDNN's primitive, 0 when oneDNN
 * reads and writes them where they lie, -1 when oneDNN declines the call (or is absent). */
int oar_dnnl_conv_act_converts(oar_tensor *const *in, oar_tensor *out, const oar_attr *a);

/* For tests of the row split: how many row parts each image of such a call is cut into at the
 * current thread count (1: not cut), -1 when oneDNN declines the call (or is absent). */
int oar_dnnl_conv_act_rows(oar_tensor *const *in, oar_tensor *out, const oar_attr *a);

/* For tests of the forward rule: 1 when a conv2d call runs on oneDNN's backward-data
 * primitive of the transposed problem (flip_rule in conv_dnnl.c), 0 when on its forward one,
 * -1 when oneDNN declines the call (or is absent). */
int oar_dnnl_conv_flipped(oar_tensor *const *in, oar_tensor *out, const oar_attr *a);

/* For tests of the kept dy (conv_dnnl_memo.h): how many backward calls so far took the dy the
 * call before them had converted; -1 without oneDNN. */
int64_t oar_dnnl_dy_taken(void);

#endif
