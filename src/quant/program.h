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

#endif
