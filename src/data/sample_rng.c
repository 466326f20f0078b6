/* Counter-based randomness for data: the epoch's keys come from Philox(seed, epoch), and each
 * draw is Philox(key, counter) with the counter built from (sample index, slot). Nothing is
 * sequential state, so any thread can compute any sample's draws in any order. */
#include "data/data.h"

oar_epoch_keys oar_data_epoch_keys(uint64_t seed, int64_t epoch) {
    uint32_t w[4];
    oar_philox(seed, (uint64_t)epoch, w);
    oar_epoch_keys k = {.shuffle = (uint64_t)w[0] << 32 | w[1], .sample = (uint64_t)w[2] << 32 | w[3]};
    return k;
}

static uint64_t pair(const uint32_t w[4], int word) {
    return word == 0 ? (uint64_t)w[0] << 32 | w[1] : (uint64_t)w[2] << 32 | w[3];
}

uint64_t oar_data_draw(uint64_t key, int64_t i, int slot, int word, uint64_t n) {
    uint32_t w[4];
    oar_philox(key, (uint64_t)i * OAR_DATA_MAX_SLOTS + (uint64_t)slot, w);
    /* 64 random bits mod n: the bias is below n / 2^64, far under anything measurable */
    return n ? pair(w, word) % n : 0;
}

double oar_data_uniform(uint64_t key, int64_t i, int slot) {
    uint32_t w[4];
    oar_philox(key, (uint64_t)i * OAR_DATA_MAX_SLOTS + (uint64_t)slot, w);
    return (double)(pair(w, 0) >> 11) * (1.0 / 9007199254740992.0);
}

void oar_data_permutation(uint64_t key, int64_t *perm, int64_t n) {
    for (int64_t j = 0; j < n; j++) perm[j] = j;
    /* Fisher–Yates from the top: step j swaps j with a uniform position in [0, j]. */
    for (int64_t j = n - 1; j > 0; j--) {
        uint32_t w[4];
        oar_philox(key, (uint64_t)j, w);
        int64_t r = (int64_t)(pair(w, 0) % (uint64_t)(j + 1));
        int64_t t = perm[j];
        perm[j] = perm[r];
        perm[r] = t;
    }
}
