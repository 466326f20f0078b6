/* The per-shape choice of f32 GEMM backend. The rule is a few comparisons on the shape,
 * derived from `oar bench --workload gemm` (docs/kernels-gemm.md); its answers are kept in a
 * small lock-free hash table so it runs once per shape. Entries are written once under a
 * mutex and never change, so readers need no lock: a slot's key is published by the release
 * store of its state. */
#include "kernels/cpu/gemm_select.h"

#include "kernels/cpu/gemm_avx2.h"
#include "kernels/cpu/gemm_dnnl.h"
#include "kernels/cpu/gemm_half.h"

#include "oar.h"

#include <pthread.h>
#include <string.h>

static const char *const NAMES[OAR_GEMM_BACKEND_COUNT] = {"auto", "openblas", "dnnl", "avx2", "avx512"};

const char *oar_gemm_backend_name(oar_gemm_backend b) {
    return (unsigned)b < OAR_GEMM_BACKEND_COUNT ? NAMES[b] : NULL;
}

int oar_gemm_backend_from_name(const char *name) {
    for (int b = 0; b < OAR_GEMM_BACKEND_COUNT; b++)
        if (name && strcmp(name, NAMES[b]) == 0) return b;
    return -1;
}

bool oar_gemm_backend_available(oar_gemm_backend b) {
    switch (b) {
    case OAR_GEMM_AUTO: return true;
#ifdef OAR_HAVE_OPENBLAS
    case OAR_GEMM_OPENBLAS: return true;
#endif
    case OAR_GEMM_DNNL: return oar_gemm_dnnl_available();
    case OAR_GEMM_AVX2: return oar_gemm_avx2_available();
    case OAR_GEMM_AVX512: return oar_gemm_avx512_available();
    default: return false;
    }
}

/* Measured with best-of-15 timings on one core of the 2-core Zen 5 EPYC the project runs on
 * (AVX-512: dnnl_sgemm and oar's kernel run 512-bit code there, OpenBLAS 256-bit), and with
 * oneDNN held to AVX2 (DNNL_MAX_CPU_ISA=AVX2) for CPUs without AVX-512; docs/kernels-gemm.md
 * has the tables.
 * - Up to 2^21 multiply-adds oar's kernel is the fastest or within noise of it: no call
 *   overhead, no copy of operands it can read in place (32x64x64 NT: 174 GFLOP/s against
 *   oneDNN's 110 and OpenBLAS's 88; 32x64x10 NN: 183 / 96 / 75).
 * - Except where its 6 x 16 (or 6 x 32) tile is mostly padding and the product is not tiny:
 *   at most 16 columns (128x10x512 NT: oneDNN 102, oar 67), or fewer than 24 rows not a
 *   multiple of 6 (16x1024x144 NN: oneDNN 210, oar 142; 20x800x200 NT: 173 / 161).
 * - Above 2^21 the libraries' cache blocking is as good or better (512x512x128 TN: oneDNN
 *   231, oar 209): oneDNN where it runs AVX-512 code, twice OpenBLAS's rate there; on AVX2
 *   OpenBLAS, as fast as oneDNN's AVX2 code on most shapes and never far slower.
 * The split over threads (oar_gemm) runs each part on the chosen backend, so the choice is
 * the same at every thread count. */
#define SMALL_MACS 2097152.0 /* 2^21 */
#define NARROW_MACS 65536.0  /* 2^16 */
#define SHORT_MACS 1048576.0 /* 2^20 */

static int g_forced; /* oar_gemm_backend; AUTO: the rule */

/* where oar's tile is mostly padding and the product is not tiny */
static bool padded_tile(int64_t m, int64_t n, double macs) {
    return (n <= 16 && macs > NARROW_MACS) || (m < 24 && m % 6 != 0 && macs > SHORT_MACS);
}

oar_gemm_backend oar_gemm_rule(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int nthreads) {
    (void)ta; (void)tb; (void)nthreads;
    double macs = (double)m * (double)n * (double)k;
    bool wide = oar_gemm_avx512_available(), own = oar_gemm_avx2_available();
    oar_gemm_backend library = wide && oar_gemm_dnnl_available() ? OAR_GEMM_DNNL : OAR_GEMM_OPENBLAS;
    if (own && macs <= SMALL_MACS && !padded_tile(m, n, macs)) return wide ? OAR_GEMM_AVX512 : OAR_GEMM_AVX2;
    /* narrow products go to oneDNN where it has AVX-512 code, else OpenBLAS */
    return library;
}

/* Above 2^21 multiply-adds oar's f32 kernel runs at the libraries' rate (docs/kernels-gemm.md:
 * AVX2 tiles 120-127 GFLOP/s against OpenBLAS's 116-121, AVX-512 tiles 228-245 against
 * oneDNN's 222-242), so with the f32 copies and the rounding pass a library needs, oar's
 * kernel is ahead or level for 16-bit operands at every size (gpt-mini's products: 1.01-1.33x
 * at the AVX2 cap against OpenBLAS on copies, 0.94-1.42x with AVX-512 tiles against oneDNN's;
 * docs/kernels-gemm.md). */
oar_gemm_backend oar_gemm_rule_half(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int nthreads) {
    if (!oar_hgemm_own_available() || padded_tile(m, n, (double)m * (double)n * (double)k))
        return oar_gemm_rule(ta, tb, m, n, k, nthreads);
    return oar_gemm_avx512_available() ? OAR_GEMM_AVX512 : OAR_GEMM_AVX2;
}

oar_gemm_backend oar_gemm_choose_half(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int nthreads) {
    int forced = __atomic_load_n(&g_forced, __ATOMIC_RELAXED);
    bool own = forced == OAR_GEMM_AVX2 || forced == OAR_GEMM_AVX512;
    if (forced != OAR_GEMM_AUTO && oar_gemm_backend_available((oar_gemm_backend)forced) &&
        (!own || oar_hgemm_own_available()))
        return (oar_gemm_backend)forced;
    return oar_gemm_rule_half(ta, tb, m, n, k, nthreads);
}

/* ---- the cache: open addressing, no eviction; a crowded table just stops remembering */
#define CACHE_SLOTS 1024
#define MAX_PROBES 32
typedef struct slot {
    int64_t m, n, k;
    int32_t flags; /* ta | tb << 1 | cpu isa << 2 | nthreads << 4 */
    int32_t backend;
    int state; /* 0 empty, 1 filled (release-stored after the fields) */
} slot;
static slot g_cache[CACHE_SLOTS];
static pthread_mutex_t g_cache_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

static int lookup(int64_t m, int64_t n, int64_t k, int32_t flags, uint64_t h, bool *found) {
    for (int probe = 0; probe < MAX_PROBES; probe++) {
        int i = (int)((h + (uint64_t)probe) % CACHE_SLOTS);
        const slot *s = &g_cache[i];
        if (!__atomic_load_n(&s->state, __ATOMIC_ACQUIRE)) {
            *found = false;
            return i;
        }
        if (s->m == m && s->n == n && s->k == k && s->flags == flags) {
            *found = true;
            return i;
        }
    }
    *found = false;
    return -1;
}

oar_gemm_backend oar_gemm_choose(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int nthreads) {
    int forced = __atomic_load_n(&g_forced, __ATOMIC_RELAXED);
    /* a forced backend the CPU switch's cap has since ruled out gives way to the rule */
    if (forced != OAR_GEMM_AUTO && oar_gemm_backend_available((oar_gemm_backend)forced))
        return (oar_gemm_backend)forced;
    /* the cap is part of the key: the rule's answer depends on it (oar_set_cpu_isa) */
    int32_t flags = (int32_t)ta | (int32_t)tb << 1 | (int32_t)oar_get_cpu_isa() << 2 | nthreads << 4;
    uint64_t h = mix(mix(mix(mix(0, (uint64_t)m), (uint64_t)n), (uint64_t)k), (uint64_t)flags);
    bool found;
    int i = lookup(m, n, k, flags, h, &found);
    if (found) return (oar_gemm_backend)g_cache[i].backend;
    oar_gemm_backend b = oar_gemm_rule(ta, tb, m, n, k, nthreads);
    pthread_mutex_lock(&g_cache_mu);
    i = lookup(m, n, k, flags, h, &found); /* another thread may have filled it meanwhile */
    if (!found && i >= 0) {
        slot *s = &g_cache[i];
        s->m = m, s->n = n, s->k = k, s->flags = flags, s->backend = (int32_t)b;
        __atomic_store_n(&s->state, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_cache_mu);
    return b;
}

int oar_gemm_force_backend(oar_gemm_backend b) {
    if (!oar_gemm_backend_available(b)) return -1;
    return __atomic_exchange_n(&g_forced, (int)b, __ATOMIC_RELAXED);
}
