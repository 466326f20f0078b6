/* The CUDA caching allocator (cuda_alloc.c): per-size-class free lists of device blocks,
 * stream-ordered reuse, the cache emptied and the request retried before OAR_ERR_OOM. */
#ifndef OAR_CUDA_ALLOC_H
#define OAR_CUDA_ALLOC_H

#include "base.h"

void *oar_cuda_alloc(size_t nbytes);
void oar_cuda_free(void *p, size_t nbytes);
oar_memory_stats oar_cuda_memory_stats(void);
void oar_cuda_memory_reset_peak(void);
void oar_cuda_memory_empty_cache(void);
oar_status oar_cuda_memory_set_limit(int64_t bytes);
/* The stream that allocations are ordered on (set by the backend: its current stream). */
void oar_cuda_alloc_set_stream_fn(void *(*current_stream)(void));
/* While a CUDA graph records: blocks freed go to a list the graph keeps (its replays write
 * there) instead of the cache. end returns that list; release gives its blocks to the cache. */
void oar_cuda_alloc_capture_begin(void);
void *oar_cuda_alloc_capture_end(void);
void oar_cuda_alloc_capture_release(void *kept);

#endif
