/* Internal pieces of the recurrent layers: rnn.c holds the LSTM and GRU modules, rnn_layer.c
 * runs one layer over a whole sequence, rnn_seq.c splits a sequence into steps and joins
 * steps back into a sequence. Everything is written with public ops, so autograd (and
 * double backward) comes from the ops' own gradient rules. */
#ifndef OAR_NN_RNN_H
#define OAR_NN_RNN_H

#include "nn/module.h"

typedef enum oar_rnn_kind { OAR_RNN_LSTM = 0, OAR_RNN_GRU } oar_rnn_kind;

/* x [T, ...] as T views steps[t] = x[t] (dim 0 dropped), tracked in the current scope. One
 * split per 64 steps (oar_split makes at most 64 pieces), so the gradient is a few concats,
 * never one full-size copy per step as slicing would give. steps has room for T entries. */
oar_status oar_rnn_unbind(oar_tensor *x, oar_tensor **steps);

/* Stacks n >= 1 tensors of one shape along a new dim 0, for any n (oar_stack takes at most
 * 64 inputs). */
oar_tensor *oar_rnn_join(oar_tensor *const *xs, int64_t n);

/* One layer over a sequence, in torch's layout: states are [N, H] and every step's gates
 * are separate contiguous [N, H] tensors (one input projection and one recurrent product per
 * gate, over views of the gate's rows of the weights), so the elementwise work runs on the
 * fast contiguous kernels and nothing is ever transposed. */
typedef struct oar_rnn_layer_io {
    oar_tensor *x;                         /* in: [T, N, I], any strides */
    oar_tensor *w_ih, *w_hh, *b_ih, *b_hh; /* in: torch's layout, gates stacked on dim 0 */
    oar_tensor *w_ih_scale, *w_hh_scale;   /* in: f32 [G*H] per-row scales of i8 weights (dynamic
                                              quantization, oar_rnn_qlayer); NULL for float ones */
    oar_tensor *h0, *c0;                   /* in: [N, H], or NULL for zeros (c0: LSTM only) */
    oar_tensor *y;                         /* out: [T, N, H], the hidden state at every step */
    oar_tensor *h_n, *c_n;                 /* out: [N, H], the last step's state (c_n: LSTM only) */
} oar_rnn_layer_io;

/* Fills io's outputs (tracked in the current scope). */
oar_status oar_rnn_layer(oar_rnn_kind kind, oar_rnn_layer_io *io);

/* The same with i8 weights (w_ih_scale and w_hh_scale set): dynamic quantization as torch's
 * quantized LSTM / GRU computes it (rnn_qlayer.c). Inference only (no gradients). */
oar_status oar_rnn_qlayer(oar_rnn_kind kind, oar_rnn_layer_io *io);

/* m is an nn.LSTM or nn.GRU (float weights), or its dynamically quantized form: *kind and
 * *layers say which and how many layers; false for any other module. */
bool oar_rnn_info(oar_module *m, oar_rnn_kind *kind, int *layers, bool *quantized);

/* Makes an nn.LSTM / nn.GRU whose weight_ih_l{k} and weight_hh_l{k} the caller has replaced
 * by i8 buffers with f32 weight_ih_scale_l{k} / weight_hh_scale_l{k} buffers run as a
 * dynamically quantized layer (type DynamicQuantizedLSTM / DynamicQuantizedGRU). */
void oar_rnn_set_quantized(oar_module *m);

#endif
