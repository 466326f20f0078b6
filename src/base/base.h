/* Internal base layer: errors, allocation, threads, random numbers. No tensor knowledge. */
#ifndef OAR_BASE_H
#define OAR_BASE_H

#include "oar.h"

#include <stdarg.h>

#if defined(__GNUC__)
#define OAR_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define OAR_LIKELY(x) __builtin_expect(!!(x), 1)
#define OAR_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define OAR_PRINTF(a, b)
#define OAR_LIKELY(x) (x)
#define OAR_UNLIKELY(x) (x)
#endif

/* ---- errors (status.c) */
/* Records status s with a printf-style message in the thread's error slot; returns s. */
oar_status oar_error(oar_status s, const char *fmt, ...) OAR_PRINTF(2, 3);
oar_status oar_errorv(oar_status s, const char *fmt, va_list ap);
/* Counts the errors raised on this thread: a caller that gets NULL from code that returns
 * no status (a gradient rule's op calls) tells "failed" from "nothing" by comparing it. */
uint64_t oar_error_serial(void);
/* Keeps the first error raised on this thread while it is installed, even when the code that
 * got it ignored the status or cleared the slot: the jit fails a trace on any error raised
 * inside it, whatever the traced function returned. Watches nest (each sees the errors raised
 * while it is the innermost); end restores the previous one. */
typedef struct oar_error_watch {
    oar_status first;            /* OAR_OK while nothing was raised */
    char message[512];           /* the first error's message, cut to fit */
    struct oar_error_watch *prev;
} oar_error_watch;
void oar_error_watch_begin(oar_error_watch *w);
void oar_error_watch_end(oar_error_watch *w);
/* Prefixes the current message with "context: " (used when an error passes through layers). */
void oar_error_prefix(const char *fmt, ...) OAR_PRINTF(1, 2);
/* A warning (warn.c): to the user's handler, or "oar warning: <message>" on stderr. */
void oar_warn(const char *fmt, ...) OAR_PRINTF(1, 2);
/* Internal invariant violated: reports through the assert hook; never used for user input. */
void oar_internal_assert_fail(const char *expr, const char *file, int line);
#define OAR_ASSERT(x) ((x) ? (void)0 : oar_internal_assert_fail(#x, __FILE__, __LINE__))

/* ---- checksums (crc32c.c): CRC32C of n bytes, continuing from crc (0 to start), so data can
 * be fed in pieces. oar_crc32c uses the CPU's instruction where there is one; the portable
 * (slice-by-8) version gives the same values on every host. */
uint32_t oar_crc32c(uint32_t crc, const void *data, size_t n);
uint32_t oar_crc32c_portable(uint32_t crc, const void *data, size_t n);

/* ---- allocation (alloc.c): 64-byte aligned; failure sets OAR_ERR_OOM and returns NULL */
void *oar_alloc(size_t nbytes);           /* tensor storage, counted in memory stats */
void oar_free(void *p, size_t nbytes);
void *oar_malloc(size_t nbytes);          /* metadata; plain heap, zeroed; OOM message set */
void *oar_realloc(void *p, size_t nbytes);
/* The most bytes in tensors at once since the last reset, and the statistics (stats may be
 * NULL), in one lock; reset restarts the window from the current bytes (the profiler's peak
 * per step; oar_memory_stats' peak is the user's). */
int64_t oar_alloc_window_peak(oar_memory_stats *stats, bool reset);
#define OAR_NEW(T) ((T *)oar_malloc(sizeof(T)))

/* ---- threads (threadpool.c) */
typedef void (*oar_range_fn)(void *ctx, int64_t begin, int64_t end);
/* Runs fn over [0, n) in chunks of at least grain items on the pool; serial when small. */
void oar_parallel_for(int64_t n, int64_t grain, oar_range_fn fn, void *ctx);
/* Adds a hook called with the thread count whenever it is decided or changed, so the
 * libraries oar calls (OpenBLAS, oneDNN) share its one budget of threads. */
void oar_threads_add_library_hook(void (*hook)(int nthreads));

/* ---- random numbers (rng.c): Philox-4x32-10 */
/* Reserves n counters from the global generator and returns their (seed, first counter). */
oar_rng_state oar_rng_reserve(uint64_t n);
/* Four 32-bit random words for counter c under key seed. */
void oar_philox(uint64_t seed, uint64_t counter, uint32_t out[4]);
/* Helpers: the i-th uniform float in [0,1) / normal sample of a reserved stream. */
double oar_rng_uniform(oar_rng_state s, uint64_t i);
double oar_rng_normal(oar_rng_state s, uint64_t i);

/* ---- arena (arena.c): grows in chunks, freed at once */
typedef struct oar_arena oar_arena;
oar_arena *oar_arena_create(size_t chunk_bytes);
void *oar_arena_alloc(oar_arena *a, size_t nbytes);  /* zeroed, 16-byte aligned */
void oar_arena_reset(oar_arena *a);
void oar_arena_destroy(oar_arena *a);

/* One-time library initialisation (registry, kernels, threads); idempotent, thread safe. */
void oar_init(void);

#endif
