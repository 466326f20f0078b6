/* Counter-based random numbers (Philox-4x32-10, Salmon et al. 2011). A random op reserves a
 * range of counters from the global generator; element i of its output is a pure function
 * of (seed, first + i), so results never depend on how work is split across threads. */
#include "base.h"

#include <math.h>
#include <pthread.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static oar_rng_state global = {.seed = 0x5eedULL, .offset = 0};

void oar_manual_seed(uint64_t seed) {
    pthread_mutex_lock(&mu);
    global.seed = seed;
    global.offset = 0;
    pthread_mutex_unlock(&mu);
}

oar_rng_state oar_rng_get_state(void) {
    pthread_mutex_lock(&mu);
    oar_rng_state s = global;
    pthread_mutex_unlock(&mu);
    return s;
}

void oar_rng_set_state(oar_rng_state s) {
    pthread_mutex_lock(&mu);
    global = s;
    pthread_mutex_unlock(&mu);
}

oar_rng_state oar_rng_reserve(uint64_t n) {
    pthread_mutex_lock(&mu);
    oar_rng_state s = global;
    global.offset += n;
    pthread_mutex_unlock(&mu);
    return s;
}

static inline uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t *hi) {
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

void oar_philox(uint64_t seed, uint64_t counter, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = mulhilo(0xD2511F53u, c0, &hi0);
        uint32_t lo1 = mulhilo(0xCD9E8D57u, c2, &hi1);
        uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
        c0 = n0; c1 = n1; c2 = n2; c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

double oar_rng_uniform(oar_rng_state s, uint64_t i) {
    uint32_t w[4];
    oar_philox(s.seed, s.offset + i, w);
    /* 53 random bits -> [0, 1) */
    uint64_t bits = ((uint64_t)w[0] << 21) ^ (uint64_t)w[1];
    return (double)(bits & ((1ULL << 53) - 1)) * (1.0 / 9007199254740992.0);
}

double oar_rng_normal(oar_rng_state s, uint64_t i) {
    uint32_t w[4];
    oar_philox(s.seed, s.offset + i, w);
    /* Box-Muller on two independent 32-bit words; u1 in (0, 1] so log is finite. */
    double u1 = ((double)w[2] + 1.0) * (1.0 / 4294967296.0);
    double u2 = (double)w[3] * (1.0 / 4294967296.0);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
