/* The CUDA caching allocator. cudaMalloc and cudaFree are slow and cudaFree synchronizes the
 * device, so freed blocks are kept in size classes (eight per octave: at most 1/8 wasted)
 * and handed out again. Reuse is stream-ordered: a block freed while its last kernels may
 * still be queued on stream S is reused at once by later work on S (the stream runs in
 * order), and by another stream only once the stream it was freed on has drained (rare:
 * oar queues its work on one stream per thread). When cudaMalloc fails the cache is emptied and the request retried before
 * OAR_ERR_OOM is reported. */
#include "cuda_alloc.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>

#define N_CLASSES 480
#define MIN_BLOCK 512

typedef struct cblock {
    void *ptr;
    size_t size;
    cudaStream_t stream; /* the stream it was freed on */
    struct cblock *next;
} cblock;

/* live blocks, found by address at free time: a small open hash */
typedef struct live_entry { void *ptr; size_t size; cudaStream_t stream; } live_entry;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static cblock *classes[N_CLASSES];
static cblock *spare; /* records of blocks handed out, kept for the next free (no malloc per op) */
static live_entry *live;
static size_t live_cap, live_n;
static oar_memory_stats stats;
static int64_t limit_bytes;
static bool capturing;   /* a graph records: freed blocks go to kept */
static cblock *kept;
static void *(*stream_fn)(void);

void oar_cuda_alloc_set_stream_fn(void *(*fn)(void)) { stream_fn = fn; }
static cudaStream_t current_stream(void) { return stream_fn ? (cudaStream_t)stream_fn() : 0; }

static int class_of(size_t n, size_t *rounded) {
    if (n <= MIN_BLOCK) {
        *rounded = MIN_BLOCK;
        return 0;
    }
    int k = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^k < n <= 2^(k+1) */
    size_t base = (size_t)1 << k, step = base >> 3;
    size_t j = (n - base + step - 1) / step; /* 1..8 */
    *rounded = base + j * step;
    return 1 + (k - 9) * 8 + (int)(j - 1);
}

static size_t hash_ptr(const void *p, size_t cap) { return ((uintptr_t)p >> 9) * 0x9E3779B97F4A7C15ull & (cap - 1); }

static bool live_grow(void) {
    size_t cap = live_cap ? live_cap * 2 : 1024;
    live_entry *t = calloc(cap, sizeof *t);
    if (!t) return false;
    for (size_t i = 0; i < live_cap; i++)
        if (live[i].ptr) {
            size_t h = hash_ptr(live[i].ptr, cap);
            while (t[h].ptr) h = (h + 1) & (cap - 1);
            t[h] = live[i];
        }
    free(live);
    live = t;
    live_cap = cap;
    return true;
}

static bool live_add(void *p, size_t size, cudaStream_t s) {
    if ((live_n + 1) * 2 > live_cap && !live_grow()) return false;
    size_t h = hash_ptr(p, live_cap);
    while (live[h].ptr) h = (h + 1) & (live_cap - 1);
    live[h] = (live_entry){p, size, s};
    live_n++;
    return true;
}

static bool live_take(void *p, live_entry *out) {
    if (!live_cap) return false;
    size_t h = hash_ptr(p, live_cap);
    while (live[h].ptr && live[h].ptr != p) h = (h + 1) & (live_cap - 1);
    if (!live[h].ptr) return false;
    *out = live[h];
    live[h].ptr = NULL;
    live_n--;
    /* re-insert the rest of the cluster so lookups stay correct */
    for (size_t i = (h + 1) & (live_cap - 1); live[i].ptr; i = (i + 1) & (live_cap - 1)) {
        live_entry e = live[i];
        live[i].ptr = NULL;
        size_t k = hash_ptr(e.ptr, live_cap);
        while (live[k].ptr) k = (k + 1) & (live_cap - 1);
        live[k] = e;
    }
    return true;
}

static void empty_cache_locked(void) {
    for (int c = 0; c < N_CLASSES; c++)
        while (classes[c]) {
            cblock *b = classes[c];
            classes[c] = b->next;
            cudaFree(b->ptr);
            stats.cached_bytes -= (int64_t)b->size;
            b->next = spare;
            spare = b;
        }
}

/* A cached block of class c, preferring one freed on stream s. */
static cblock *take_cached(int c, cudaStream_t s) {
    cblock **pp = &classes[c], **other = NULL;
    for (; *pp; pp = &(*pp)->next) {
        if ((*pp)->stream == s) break;
        if (!other) other = pp;
    }
    if (!*pp) pp = other;
    if (!pp || !*pp) return NULL;
    cblock *b = *pp;
    *pp = b->next;
    if (b->stream != s) cudaStreamSynchronize(b->stream);
    return b;
}

void *oar_cuda_alloc(size_t nbytes) {
    size_t rounded;
    int c = class_of(nbytes ? nbytes : 1, &rounded);
    if (c >= N_CLASSES) {
        oar_error(OAR_ERR_OOM, "cuda: allocation of %zu bytes is larger than any GPU memory", nbytes);
        return NULL;
    }
    cudaStream_t s = current_stream();
    pthread_mutex_lock(&mu);
    if (limit_bytes > 0 && stats.current_bytes + (int64_t)rounded > limit_bytes) {
        int64_t in_use = stats.current_bytes;
        pthread_mutex_unlock(&mu);
        oar_error(OAR_ERR_OOM,
                  "cuda: out of memory: %zu more bytes would bring GPU tensor memory to %.1f MiB, above the "
                  "limit of %.1f MiB set by oar_memory_set_limit; raise the limit or reduce the batch size",
                  rounded, (double)(in_use + (int64_t)rounded) / (1 << 20), (double)limit_bytes / (1 << 20));
        return NULL;
    }
    void *p = NULL;
    cblock *b = take_cached(c, s);
    if (b) {
        p = b->ptr;
        stats.cached_bytes -= (int64_t)rounded;
        stats.n_cache_hits++;
        b->next = spare;
        spare = b;
    } else {
        cudaError_t e = cudaMalloc(&p, rounded);
        if (e != cudaSuccess && capturing) { /* no cudaFree while a graph records */
            (void)cudaGetLastError();
            p = NULL;
        } else if (e != cudaSuccess) {
            (void)cudaGetLastError(); /* not sticky: clear it */
            empty_cache_locked();
            stats.n_oom_retries++;
            e = cudaMalloc(&p, rounded);
            if (e != cudaSuccess) {
                (void)cudaGetLastError();
                p = NULL;
            }
        }
    }
    if (p && !live_add(p, rounded, s)) {
        cudaFree(p);
        p = NULL;
    }
    if (p) {
        stats.current_bytes += (int64_t)rounded;
        stats.n_allocs++;
        stats.allocated_bytes += (int64_t)rounded;
        if (stats.current_bytes > stats.peak_bytes) stats.peak_bytes = stats.current_bytes;
    }
    int64_t in_use = stats.current_bytes;
    pthread_mutex_unlock(&mu);
    if (!p) {
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        oar_error(OAR_ERR_OOM,
                  "cuda: out of memory: could not allocate %.1f MiB (%.1f MiB in tensors; the GPU has %.1f of "
                  "%.1f MiB free after oar emptied its cache); reduce the batch size or free tensors",
                  (double)rounded / (1 << 20), (double)in_use / (1 << 20), (double)free_b / (1 << 20),
                  (double)total_b / (1 << 20));
    }
    return p;
}

void oar_cuda_free(void *p, size_t nbytes) {
    (void)nbytes;
    if (!p) return;
    cudaStream_t s = current_stream();
    pthread_mutex_lock(&mu);
    live_entry e;
    if (!live_take(p, &e)) {
        pthread_mutex_unlock(&mu);
        oar_internal_assert_fail("cuda free of a pointer the allocator did not hand out", __FILE__, __LINE__);
        return;
    }
    size_t rounded;
    int c = class_of(e.size, &rounded);
    stats.current_bytes -= (int64_t)rounded;
    stats.n_frees++;
    cblock *b = spare;
    if (b) spare = b->next;
    else b = calloc(1, sizeof *b);
    if (!b) { /* cannot cache it: give it back (cudaFree waits for the device) */
        pthread_mutex_unlock(&mu);
        cudaFree(p);
        return;
    }
    b->ptr = p;
    b->size = rounded;
    b->stream = s;
    if (capturing) { /* the graph's replays use it: held, still counted in use */
        b->next = kept;
        kept = b;
        stats.current_bytes += (int64_t)rounded;
        pthread_mutex_unlock(&mu);
        return;
    }
    b->next = classes[c];
    classes[c] = b;
    stats.cached_bytes += (int64_t)rounded;
    pthread_mutex_unlock(&mu);
}

void oar_cuda_alloc_capture_begin(void) {
    pthread_mutex_lock(&mu);
    capturing = true;
    kept = NULL;
    pthread_mutex_unlock(&mu);
}

void *oar_cuda_alloc_capture_end(void) {
    pthread_mutex_lock(&mu);
    capturing = false;
    cblock *list = kept;
    kept = NULL;
    pthread_mutex_unlock(&mu);
    return list;
}

void oar_cuda_alloc_capture_release(void *list) {
    pthread_mutex_lock(&mu);
    for (cblock *b = list, *next; b; b = next) {
        next = b->next;
        size_t rounded;
        int c = class_of(b->size, &rounded);
        stats.current_bytes -= (int64_t)rounded;
        b->stream = current_stream(); /* reused after the graph's last replay on this stream */
        b->next = classes[c];
        classes[c] = b;
        stats.cached_bytes += (int64_t)rounded;
    }
    pthread_mutex_unlock(&mu);
}

oar_memory_stats oar_cuda_memory_stats(void) {
    pthread_mutex_lock(&mu);
    oar_memory_stats s = stats;
    pthread_mutex_unlock(&mu);
    return s;
}

void oar_cuda_memory_reset_peak(void) {
    pthread_mutex_lock(&mu);
    stats.peak_bytes = stats.current_bytes;
    pthread_mutex_unlock(&mu);
}

void oar_cuda_memory_empty_cache(void) {
    pthread_mutex_lock(&mu);
    empty_cache_locked();
    pthread_mutex_unlock(&mu);
}

oar_status oar_cuda_memory_set_limit(int64_t bytes) {
    pthread_mutex_lock(&mu);
    limit_bytes = bytes;
    pthread_mutex_unlock(&mu);
    return OAR_OK;
}
