/* One recurrent layer over a whole sequence, as the C core's nn.LSTM and nn.GRU run it
 * (src/nn/rnn_layer.c; dynamically quantized: src/nn/rnn_qlayer.c): for front ends that keep
 * the parameters themselves (Python's oar.nn.LSTM and its quantize_dynamic form), so a layer
 * written there computes exactly what the C module computes. */
#ifndef OAR_RNN_H
#define OAR_RNN_H

typedef enum oar_rnn_cell { OAR_RNN_CELL_LSTM = 0, OAR_RNN_CELL_GRU = 1 } oar_rnn_cell;

/* x [T, N, I]; w_ih [G*H, I], w_hh [G*H, H], b_ih and b_hh [G*H] (G = 4 for LSTM, 3 for GRU,
 * torch's gate order); h0 and c0 [N, H] or NULL for zeros (c0: LSTM only). Writes y [T, N, H]
 * (every step's hidden state), h_n [N, H] and, for LSTM, c_n [N, H] (c_n may be NULL for GRU).
 * The outputs belong to the caller's current scope (to the caller when none is open); the
 * intermediates not kept by autograd are released. Differentiable. */
OAR_API oar_status oar_rnn_layer_run(oar_rnn_cell cell, oar_tensor *x, oar_tensor *w_ih, oar_tensor *w_hh,
                                     oar_tensor *b_ih, oar_tensor *b_hh, oar_tensor *h0, oar_tensor *c0,
                                     oar_tensor **y, oar_tensor **h_n, oar_tensor **c_n);

/* The same layer dynamically quantized, as oar_quantize_dynamic's LSTM/GRU and torch's
 * quantize_dynamic run it (src/nn/rnn_qlayer.c): w_ih and w_hh are i8 codes of symmetric
 * weights, w_ih_scale and w_hh_scale their f32 scales, [] (per tensor) or [G*H] (per row);
 * the input and each step's hidden state are quantized to u8 over their own range and the gate
 * products summed in int32; biases and nonlinearities in f32. x must be f32. Inference only
 * (no gradients). Outputs as oar_rnn_layer_run's. */
OAR_API oar_status oar_rnn_qlayer_run(oar_rnn_cell cell, oar_tensor *x, oar_tensor *w_ih, oar_tensor *w_ih_scale,
                                      oar_tensor *w_hh, oar_tensor *w_hh_scale, oar_tensor *b_ih, oar_tensor *b_hh,
                                      oar_tensor *h0, oar_tensor *c0, oar_tensor **y, oar_tensor **h_n,
                                      oar_tensor **c_n);

#endif
