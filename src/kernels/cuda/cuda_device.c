/* The CUDA device behind oar's device table: GPU discovery, the stream kernels launch on,
 * host <-> device copies through pinned staging buffers, strided copies and fills, and the
 * caching allocator (src/base/cuda_alloc.c). One GPU (device 0) for now. */
#include "cuda_backend.h"
#include "base/device.h"
#include "launch_copy.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t g_probe_once = PTHREAD_ONCE_INIT;
static int g_count;
static char g_probe_error[256];

static void probe(void) {
    cudaError_t e = cudaGetDeviceCount(&g_count);
    if (e != cudaSuccess) {
        snprintf(g_probe_error, sizeof g_probe_error, "%s", cudaGetErrorString(e));
        (void)cudaGetLastError();
        g_count = 0;
    }
}

static int cuda_count(void) {
    pthread_once(&g_probe_once, probe);
    return g_count;
}

const char *oar_cuda_probe_error(void) {
    cuda_count();
    return g_probe_error;
}

oar_status oar_cuda_status(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return OAR_OK;
    (void)cudaGetLastError(); /* clear a non-sticky error so the next call starts clean */
    oar_status s = e == cudaErrorMemoryAllocation ? OAR_ERR_OOM : OAR_ERR_INTERNAL;
    return oar_error(s, "%s: CUDA error %d (%s): %s", what, (int)e, cudaGetErrorName(e), cudaGetErrorString(e));
}

/* ---- the stream: one non-blocking stream for the process, created at first use (work on
 * it does not wait for the legacy default stream other libraries may use) */
static pthread_once_t g_stream_once = PTHREAD_ONCE_INIT;
static cudaStream_t g_stream;
static void make_stream(void) {
    if (cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking) != cudaSuccess) {
        (void)cudaGetLastError();
        g_stream = 0;
    }
}
cudaStream_t oar_cuda_current_stream(void) {
    pthread_once(&g_stream_once, make_stream);
    return g_stream;
}
static void *stream_ptr(void) { return (void *)oar_cuda_current_stream(); }

/* ---- pinned staging: two buffers, so a host copy into one overlaps the DMA out of the
 * other; each is reused only after the event recorded behind its last transfer */
#define STAGE_BYTES ((size_t)4 << 20)
typedef struct stage { void *host; cudaEvent_t done; bool pending; } stage;
static pthread_mutex_t g_stage_mu = PTHREAD_MUTEX_INITIALIZER;
static stage g_stage[2];
static int g_stage_next;
static bool g_stage_ready, g_stage_failed;

static bool stage_init(void) {
    if (g_stage_ready || g_stage_failed) return g_stage_ready;
    for (int i = 0; i < 2; i++) {
        if (cudaMallocHost(&g_stage[i].host, STAGE_BYTES) != cudaSuccess ||
            cudaEventCreateWithFlags(&g_stage[i].done, cudaEventDisableTiming) != cudaSuccess) {
            (void)cudaGetLastError();
            g_stage_failed = true; /* fall back to the driver's own staging */
            return false;
        }
    }
    g_stage_ready = true;
    return true;
}

static oar_status copy_to_device(void *dst, const void *src, size_t n, cudaStream_t s) {
    if (n < (64 << 10) || !stage_init()) /* small: the driver copies pageable memory inline */
        return oar_cuda_status(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s), "copy to GPU");
    for (size_t off = 0; off < n; off += STAGE_BYTES) {
        size_t len = n - off < STAGE_BYTES ? n - off : STAGE_BYTES;
        stage *b = &g_stage[g_stage_next];
        g_stage_next ^= 1;
        if (b->pending) {
            oar_status st = oar_cuda_status(cudaEventSynchronize(b->done), "copy to GPU");
            if (st != OAR_OK) return st;
        }
        memcpy(b->host, (const char *)src + off, len);
        cudaError_t e = cudaMemcpyAsync((char *)dst + off, b->host, len, cudaMemcpyHostToDevice, s);
        if (e == cudaSuccess) e = cudaEventRecord(b->done, s);
        if (e != cudaSuccess) return oar_cuda_status(e, "copy to GPU");
        b->pending = true;
    }
    return OAR_OK;
}

static oar_status copy_to_host(void *dst, const void *src, size_t n, cudaStream_t s) {
    if (n < (64 << 10) || !stage_init()) {
        cudaError_t e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, s);
        if (e == cudaSuccess) e = cudaStreamSynchronize(s);
        return oar_cuda_status(e, "copy to host");
    }
    for (size_t off = 0; off < n; off += STAGE_BYTES) {
        size_t len = n - off < STAGE_BYTES ? n - off : STAGE_BYTES;
        stage *b = &g_stage[0];
        cudaError_t e = cudaMemcpyAsync(b->host, (const char *)src + off, len, cudaMemcpyDeviceToHost, s);
        if (e == cudaSuccess) e = cudaStreamSynchronize(s);
        if (e != cudaSuccess) return oar_cuda_status(e, "copy to host");
        memcpy((char *)dst + off, b->host, len);
    }
    return OAR_OK;
}

static oar_status cuda_copy(void *dst, const void *src, size_t n, oar_copy_kind kind) {
    if (!n) return OAR_OK;
    cudaStream_t s = oar_cuda_current_stream();
    if (kind == OAR_COPY_ON_DEVICE)
        return oar_cuda_status(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s), "copy on GPU");
    /* a recorded host copy would replay whatever the staging buffer holds then: refuse it */
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &cap) == cudaSuccess && cap != cudaStreamCaptureStatusNone)
        return oar_error(OAR_ERR_UNSUPPORTED, "copy %s: a copy between host and GPU memory cannot be recorded in "
                                              "a CUDA graph; this op runs as a plain launch",
                         kind == OAR_COPY_TO_DEVICE ? "to GPU" : "to host");
    pthread_mutex_lock(&g_stage_mu);
    oar_status st = kind == OAR_COPY_TO_DEVICE ? copy_to_device(dst, src, n, s) : copy_to_host(dst, src, n, s);
    pthread_mutex_unlock(&g_stage_mu);
    return st;
}

static oar_status cuda_copy_strided(const oar_copy_desc *d) {
    if (d->ndim > OAR_CU_MAX_DIMS)
        return oar_error(OAR_ERR_UNSUPPORTED, "copy on GPU: expected at most %d dims, got %d", OAR_CU_MAX_DIMS, d->ndim);
    oar_cu_strided l = {.ndim = d->ndim};
    int64_t n = 1;
    for (int k = 0; k < d->ndim; k++) {
        l.shape[k] = d->shape[k];
        l.dst_strides[k] = d->dst_strides[k];
        l.src_strides[k] = d->src_strides[k];
        n *= d->shape[k];
    }
    int e = oar_cu_copy_strided(d->dst, d->dst_dtype, d->src, d->src_dtype, &l, n, oar_cuda_current_stream());
    return oar_cuda_status((cudaError_t)e, "copy on GPU");
}

static oar_status cuda_fill(void *dst, oar_dtype dt, int64_t n, double v) {
    return oar_cuda_status((cudaError_t)oar_cu_fill(dst, dt, n, v, oar_cuda_current_stream()), "fill on GPU");
}

static oar_status cuda_synchronize(void) {
    return oar_cuda_status(cudaStreamSynchronize(oar_cuda_current_stream()), "synchronize");
}

/* ---- CUDA graphs: the current stream's launches recorded, instantiated, and launched on the
 * same stream. Relaxed mode: the caching allocator may cudaMalloc while a graph records (the
 * thread-local mode refused it, and an H100 run showed every step split at the first small
 * scratch buffer); anything that would synchronize the recording stream still fails the
 * recording, and the executor runs that node plainly. */
typedef struct cuda_graph {
    cudaGraphExec_t exec;
    void *kept; /* allocator blocks its kernels use (freed while recording) */
} cuda_graph;

static oar_status cuda_graph_begin(void) {
    oar_status st = oar_cuda_status(
        cudaStreamBeginCapture(oar_cuda_current_stream(), cudaStreamCaptureModeRelaxed), "graph capture");
    if (st == OAR_OK) oar_cuda_alloc_capture_begin();
    return st;
}

static void *cuda_graph_end(bool keep) {
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(oar_cuda_current_stream(), &g);
    void *kept = oar_cuda_alloc_capture_end();
    cudaGraphExec_t exec = NULL;
    if (keep && e == cudaSuccess) e = cudaGraphInstantiate(&exec, g, 0);
    if (g) cudaGraphDestroy(g);
    cuda_graph *cg = keep && e == cudaSuccess ? calloc(1, sizeof *cg) : NULL;
    if (!cg) {
        if (exec) cudaGraphExecDestroy(exec);
        oar_cuda_alloc_capture_release(kept);
        (void)cudaGetLastError(); /* capture errors are not sticky: clear them */
        if (keep) oar_cuda_status(e == cudaSuccess ? cudaErrorMemoryAllocation : e, "graph capture");
        return NULL;
    }
    cg->exec = exec;
    cg->kept = kept;
    return cg;
}

static oar_status cuda_graph_launch(void *graph) {
    return oar_cuda_status(cudaGraphLaunch(((cuda_graph *)graph)->exec, oar_cuda_current_stream()), "graph launch");
}

static void cuda_graph_free(void *graph) {
    cuda_graph *cg = graph;
    if (!cg) return;
    cudaGraphExecDestroy(cg->exec);
    oar_cuda_alloc_capture_release(cg->kept); /* stream-ordered: later work on the stream reuses them */
    free(cg);
}

static const oar_device_ops cuda_ops = {
    .name = "cuda",
    .count = cuda_count,
    .alloc = oar_cuda_alloc,
    .free = oar_cuda_free,
    .stats = oar_cuda_memory_stats,
    .reset_peak = oar_cuda_memory_reset_peak,
    .empty_cache = oar_cuda_memory_empty_cache,
    .set_limit = oar_cuda_memory_set_limit,
    .copy = cuda_copy,
    .copy_strided = cuda_copy_strided,
    .fill = cuda_fill,
    .stream = stream_ptr,
    .synchronize = cuda_synchronize,
    .graph_begin = cuda_graph_begin,
    .graph_end = cuda_graph_end,
    .graph_launch = cuda_graph_launch,
    .graph_free = cuda_graph_free,
    .timeline_reset = oar_cuda_timeline_reset,
    .mark = oar_cuda_timeline_mark,
    .mark_ns = oar_cuda_timeline_ns,
};

void oar_cuda_register(oar_op_id op, uint32_t dtypes, oar_kernel_fn fn, oar_supports_fn supports) {
    oar_register_kernel(op, (oar_kernel_entry){.device = OAR_CUDA, .dtypes = dtypes, .impl = "cuda",
                                               .priority = 10, .fn = fn, .supports = supports});
}

void oar_cuda_register_graphed(oar_op_id op, uint32_t dtypes, oar_kernel_fn fn, oar_supports_fn supports) {
    oar_register_kernel(op, (oar_kernel_entry){.device = OAR_CUDA, .dtypes = dtypes, .impl = "cuda",
                                               .priority = 10, .fn = fn, .supports = supports,
                                               .graph_params = true});
}

void *oar_cuda_scratch(size_t nbytes) { return oar_cuda_alloc(nbytes); }
void oar_cuda_scratch_free(void *p, size_t nbytes) { oar_cuda_free(p, nbytes); }

void oar_cuda_backend_init(void) {
    oar_cuda_alloc_set_stream_fn(stream_ptr);
    oar_device_register(OAR_CUDA, &cuda_ops);
#define OAR_CUDA_FAMILY(f) oar_cuda_register_##f();
#include "cuda_families.def"
#undef OAR_CUDA_FAMILY
}
