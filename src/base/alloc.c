/* Host allocator: 64-byte aligned blocks with a size-bucketed cache, so a training loop that
 * frees and re-allocates the same shapes every step stops calling malloc after step one.
 * When the system refuses memory the cache is emptied and the request retried before an
 * out-of-memory error is reported. */
#include "base.h"
#include "device.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN 64
#define N_BUCKETS 400         /* size classes (bucket_of) */
#define CACHE_LIMIT (1LL << 30) /* keep at most this many freed bytes */

typedef struct block { struct block *next; } block;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static block *buckets[N_BUCKETS];
static oar_memory_stats stats;
static int64_t window_peak; /* the profiler's per-step peak */
static int64_t limit_bytes; /* oar_memory_set_limit; 0: none */

/* Size classes: powers of two up to 4 KiB, then eight classes per octave, so a block wastes at
 * most 1/8 of its size (a planned 75 MB arena would otherwise take a 128 MB block). */
static int bucket_of(size_t n, size_t *rounded) {
    if (n <= 4096) {
        size_t sz = ALIGN;
        int b = 0;
        while (sz < n) {
            sz <<= 1;
            b++;
        }
        *rounded = sz;
        return b;
    }
    int k = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^k < n <= 2^(k+1) */
    size_t base = (size_t)1 << k, step = base >> 3;
    size_t j = (n - base + step - 1) / step; /* 1..8 */
    *rounded = base + j * step;
    return 7 + (k - 12) * 8 + (int)(j - 1);
}

static void empty_cache_locked(void) {
    for (int b = 0; b < N_BUCKETS; b++) {
        while (buckets[b]) {
            block *blk = buckets[b];
            buckets[b] = blk->next;
            free(blk);
        }
    }
    stats.cached_bytes = 0;
}

void *oar_alloc(size_t nbytes) {
    size_t rounded;
    if (nbytes == 0) nbytes = 1;
    int b = bucket_of(nbytes, &rounded);
    if (b >= N_BUCKETS) {
        oar_error(OAR_ERR_OOM, "allocation of %zu bytes is larger than any device memory", nbytes);
        return NULL;
    }
    pthread_mutex_lock(&mu);
    if (limit_bytes > 0 && stats.current_bytes + (int64_t)rounded > limit_bytes) {
        int64_t in_use = stats.current_bytes;
        pthread_mutex_unlock(&mu);
        oar_error(OAR_ERR_OOM,
                  "out of memory: %zu more bytes would bring tensor memory to %.1f MiB, above the limit "
                  "of %.1f MiB set by oar_memory_set_limit; raise the limit or reduce the batch size",
                  rounded, (double)(in_use + (int64_t)rounded) / (1 << 20), (double)limit_bytes / (1 << 20));
        return NULL;
    }
    void *p = buckets[b];
    if (p) {
        buckets[b] = ((block *)p)->next;
        stats.cached_bytes -= (int64_t)rounded;
        stats.n_cache_hits++;
    }
    if (!p) {
        p = aligned_alloc(ALIGN, rounded);
        if (!p) {
            empty_cache_locked();
            p = aligned_alloc(ALIGN, rounded);
        }
    }
    if (p) {
        stats.current_bytes += (int64_t)rounded;
        stats.n_allocs++;
        stats.allocated_bytes += (int64_t)rounded;
        if (stats.current_bytes > stats.peak_bytes) stats.peak_bytes = stats.current_bytes;
        if (stats.current_bytes > window_peak) window_peak = stats.current_bytes;
    }
    pthread_mutex_unlock(&mu);
    if (!p)
        oar_error(OAR_ERR_OOM,
                  "out of memory: could not allocate %zu bytes (%.1f MiB in use by tensors); "
                  "reduce the batch size or free tensors you no longer need",
                  rounded, (double)stats.current_bytes / (1 << 20));
    return p;
}

void oar_free(void *p, size_t nbytes) {
    if (!p) return;
    size_t rounded;
    if (nbytes == 0) nbytes = 1;
    int b = bucket_of(nbytes, &rounded);
    pthread_mutex_lock(&mu);
    stats.current_bytes -= (int64_t)rounded;
    stats.n_frees++;
    if (stats.cached_bytes + (int64_t)rounded <= CACHE_LIMIT) {
        ((block *)p)->next = buckets[b];
        buckets[b] = p;
        stats.cached_bytes += (int64_t)rounded;
        p = NULL;
    }
    pthread_mutex_unlock(&mu);
    free(p);
}

void *oar_malloc(size_t nbytes) {
    void *p = calloc(1, nbytes ? nbytes : 1);
    if (!p) oar_error(OAR_ERR_OOM, "out of memory: could not allocate %zu bytes of metadata", nbytes);
    return p;
}

void *oar_realloc(void *p, size_t nbytes) {
    void *q = realloc(p, nbytes ? nbytes : 1);
    if (!q) oar_error(OAR_ERR_OOM, "out of memory: could not grow a buffer to %zu bytes", nbytes);
    return q;
}

oar_memory_stats oar_host_memory_stats(void) {
    oar_memory_stats s;
    pthread_mutex_lock(&mu);
    s = stats;
    pthread_mutex_unlock(&mu);
    return s;
}

int64_t oar_alloc_window_peak(oar_memory_stats *s, bool reset) {
    pthread_mutex_lock(&mu);
    int64_t p = window_peak;
    if (s) *s = stats;
    if (reset) window_peak = stats.current_bytes;
    pthread_mutex_unlock(&mu);
    return p;
}

void oar_host_memory_reset_peak(void) {
    pthread_mutex_lock(&mu);
    stats.peak_bytes = stats.current_bytes;
    pthread_mutex_unlock(&mu);
}

void oar_host_memory_empty_cache(void) {
    pthread_mutex_lock(&mu);
    empty_cache_locked();
    pthread_mutex_unlock(&mu);
}

oar_status oar_host_memory_set_limit(int64_t bytes) {
    pthread_mutex_lock(&mu);
    limit_bytes = bytes;
    pthread_mutex_unlock(&mu);
    return OAR_OK;
}
