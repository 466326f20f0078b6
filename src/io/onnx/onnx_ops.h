/* The translation functions (onnx_ops_*.c), declared from onnx_ops.def, and their helpers. */
#ifndef OAR_IO_ONNX_OPS_H
#define OAR_IO_ONNX_OPS_H

#include "io/onnx/onnx_internal.h"

#define OX_OP(name, since, known) oar_status ox_##name(ox_ctx *c);
#include "io/onnx/onnx_ops.def"
#undef OX_OP

/* Input k, NULL when absent. */
#define OX_IN(c, k) ((k) < (c)->n_in ? (c)->in[k] : NULL)
/* A Conv node's convolution of x by w (+ b) with its attributes (onnx_ops_nn.c); NULL with the
 * error set. */
oar_tensor *ox_conv(ox_ctx *c, oar_tensor *x, oar_tensor *w, oar_tensor *b);
/* Output k <- y (a NULL y returns the error its op set). */
oar_status ox_set(ox_ctx *c, int k, oar_tensor *y);

#endif
