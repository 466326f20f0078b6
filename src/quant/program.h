/* Static post-training quantization as a program rewrite (program.c): the in-memory form of
 * oar_quantize_static_model, for tests and tools that hold a program. */
#ifndef OAR_QUANT_PROGRAM_H
#define OAR_QUANT_PROGRAM_H

#include "graph/ir.h"
#include "oar/quant.h"

/* Folds BN, calibrates, rewrites p's conv2d / linear nodes to int8 in place (see program.c).
 * Bad batches (none, a wrong dtype or shape) fail before p is touched; a failure later (NaN/Inf
 * in an activation, a layer never reached) leaves p with its batch norms folded but nothing
 * quantized (an equivalent fp32 program). */
oar_status oar_quant_program_static(oar_program *p, oar_tensor *const *batches, int n_batches,
                                    const oar_quant_static_opts *opts, oar_quant_layer *layers, int cap,
                                    int *n_layers);

/* Activation qparams given for the layers named (a layer is named as in the skip list: its weight
 * parameter without ".weight"), in place of calibration: what quantization-aware training learned. */
typedef struct oar_quant_given {
    const char *const *names;
    const float *scales;
    const int32_t *zero_points;
    int n;
    int weight_bits; /* 8 (0 means 8) or 7, as oar_quant_static_opts */
} oar_quant_given;
/* The same rewrite with the input scale and zero point of each target from g: targets g does not
 * name stay fp32. The batches still run: they give the folded weights and the output SQNR. */
oar_status oar_quant_program_given(oar_program *p, oar_tensor *const *batches, int n_batches,
                                   const oar_quant_given *g, oar_quant_layer *layers, int cap, int *n_layers);

#endif
