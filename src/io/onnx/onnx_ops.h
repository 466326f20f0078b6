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
/* A 2-D Conv node's geometry as oar_conv_opts when its pads are symmetric (false otherwise, or
 * for another rank; ox_conv then reports or handles it). */
bool ox_conv2d_opts(ox_ctx *c, const oar_tensor *x, const oar_tensor *w, oar_conv_opts *o);

/* QDQ on the int8 ops (onnx_qdq.c). Each returns true when it took the node, with *y the result
 * (NULL with the error set); false leaves the node to its float translation. */
bool ox_qdq_conv(ox_ctx *c, oar_tensor **y);                  /* Conv of DequantizeLinear outputs */
bool ox_qdq_gemm(ox_ctx *c, bool matmul, oar_tensor **y);     /* Gemm (Linear form) or 2-D MatMul */
bool ox_qdq_dequantize(ox_ctx *c, oar_tensor **y);            /* DequantizeLinear, recorded */
bool ox_qdq_quantize(ox_ctx *c, oar_tensor **y);              /* QuantizeLinear per tensor in f32 */
bool ox_qdq_max_pool(ox_ctx *c, const struct oar_attr *at, oar_tensor **y); /* MaxPool of a DQ value (qmax_pool2d's attrs) */
bool ox_qlinear_conv_int8(ox_ctx *c, oar_tensor **y);         /* QLinearConv on qconv2d */
bool ox_qlinear_matmul_int8(ox_ctx *c, oar_tensor **y);       /* QLinearMatMul on qlinear */
bool ox_integer_int8(ox_ctx *c, bool conv, oar_tensor **y);   /* ConvInteger / MatMulInteger, sums < 2^24 */
bool ox_qgemm_int8(ox_ctx *c, oar_tensor **y);                /* com.microsoft QGemm on qlinear */
/* com.microsoft DynamicQuantizeMatMul on qlinear, A already quantized (aq, as, az: u8, 0-d f32, 0-d u8) */
bool ox_dynamic_matmul_int8(ox_ctx *c, oar_tensor *aq, oar_tensor *as, oar_tensor *az, oar_tensor **y);

/* onnx_ops_quant.c's checks and rounding, shared with onnx_ops_ms.c: x u8/i8; a floating scale,
 * positive and finite where known; a zero point of its data's dtype ("x_zero_point" names x);
 * v (f64) rounded half to even, + zp, saturated to dt (u8/i8). */
oar_status ox_check_int8(ox_ctx *c, const oar_tensor *t, const char *what);
oar_status ox_check_scale(ox_ctx *c, oar_tensor *s, const char *what);
oar_status ox_check_zp(ox_ctx *c, const oar_tensor *x, const oar_tensor *zp, const char *what);
oar_tensor *ox_qround(oar_tensor *v, oar_tensor *zp, oar_dtype dt);
/* ONNX's Cast of x to dt (saturate: Cast's attribute, default 1) (onnx_ops_math.c) */
oar_tensor *ox_cast_onnx(oar_tensor *x, oar_dtype dt, bool saturate);
/* DynamicQuantizeLinear's arithmetic on f32 x: *y u8, *scale f32 and *zp u8 (both 0-d). */
oar_status ox_dynamic_quantize(ox_ctx *c, oar_tensor *x, oar_tensor **y, oar_tensor **scale, oar_tensor **zp);

/* onnxruntime's com.microsoft int8 operators (onnx_ops_ms.c), looked up by ox_find_ms_op. */
#define OX_MS_OPS(X)                                                                                                \
    X(QLinearAdd) X(QLinearMul) X(QLinearGlobalAveragePool) X(QLinearAveragePool) X(QLinearConcat)                 \
    X(QLinearSigmoid) X(QLinearLeakyRelu) X(QGemm) X(DynamicQuantizeMatMul)
#define OX_MS_DECL(name) oar_status ox_ms_##name(ox_ctx *c);
OX_MS_OPS(OX_MS_DECL)
#undef OX_MS_DECL

/* Output k <- y (a NULL y returns the error its op set). */
oar_status ox_set(ox_ctx *c, int k, oar_tensor *y);

#endif
