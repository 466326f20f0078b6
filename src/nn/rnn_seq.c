/* Splitting a sequence into its steps and joining steps into a sequence, for any length.
 * oar_split and oar_stack handle at most 64 pieces, so longer sequences go through blocks
 * of 64, 64^2, ... steps: a logarithmic number of levels, each a view (split) or one copy
 * (stack), with gradients of the same cost. */
#include "nn/rnn.h"

#define RNN_MAX_PIECES 64

/* The smallest block (a power of 64) that cuts n into at most 64 blocks. */
static int64_t block_for(int64_t n) {
    int64_t block = 1;
    while ((n + block - 1) / block > RNN_MAX_PIECES) block *= RNN_MAX_PIECES;
    return block;
}

oar_status oar_rnn_unbind(oar_tensor *x, oar_tensor **steps) {
    if (!x) return oar_last_status();
    int64_t n = oar_size(x, 0), block = block_for(n);
    oar_tensor *parts[RNN_MAX_PIECES];
    int k = oar_split(x, block, 0, parts, RNN_MAX_PIECES);
    if (k < 0) return oar_last_status();
    for (int j = 0; j < k; j++) {
        if (block == 1) {
            if (!(steps[j] = oar_squeeze(parts[j], 0))) return oar_last_status();
        } else {
            oar_status st = oar_rnn_unbind(parts[j], steps + (int64_t)j * block);
            if (st != OAR_OK) return st;
        }
    }
    return OAR_OK;
}

oar_tensor *oar_rnn_join(oar_tensor *const *xs, int64_t n) {
    if (n <= RNN_MAX_PIECES) return oar_stack(xs, (int)n, 0);
    int64_t block = block_for(n);
    oar_tensor *parts[RNN_MAX_PIECES];
    int k = 0;
    for (int64_t at = 0; at < n; at += block, k++) {
        int64_t len = n - at < block ? n - at : block;
        if (!(parts[k] = oar_rnn_join(xs + at, len))) return NULL;
    }
    return oar_concat(parts, k, 0);
}
