/* The CUDA backend's C side: the device runtime (streams, copies, the allocator behind the
 * device table), error conversion, and kernel registration. Kernels are written in .cu files
 * as launchers with plain C signatures (cuda_launch.h) that take the stream; the C glue
 * (cuda_<family>.c) reads tensors, checks what a launcher supports, and registers oar
 * kernels keyed (op, OAR_CUDA, dtypes). .cu files see no oar internals. */
#ifndef OAR_CUDA_BACKEND_H
#define OAR_CUDA_BACKEND_H

#include "base/cuda_alloc.h"
#include "ops/op.h"

#include <cuda_runtime_api.h>

/* Registers the backend's device table and kernels (from oar_init; harmless without a GPU:
 * kernels are registered, and the device reports 0 GPUs). */
void oar_cuda_backend_init(void);

/* A CUDA error as a status with a message naming what failed; OAR_OK for cudaSuccess.
 * Out-of-memory becomes OAR_ERR_OOM. */
oar_status oar_cuda_status(cudaError_t e, const char *what);
/* Checks the launch that just happened (cudaGetLastError) for op. */
#define OAR_CUDA_LAUNCHED(op) oar_cuda_status(cudaGetLastError(), op)

static inline cudaStream_t oar_cuda_stream_of(const oar_kctx *ctx) { return (cudaStream_t)ctx->stream; }
/* The current stream (what kernel contexts carry). */
cudaStream_t oar_cuda_current_stream(void);

/* Registers fn for op on CUDA for the key input's dtypes (OAR_DTYPE_BIT mask). */
void oar_cuda_register(oar_op_id op, uint32_t dtypes, oar_kernel_fn fn, oar_supports_fn supports);
/* The same for a kernel of a host_inputs or random op that honors ctx->params (op.h's
 * oar_kparams), so compiled steps record it in their CUDA graphs. */
void oar_cuda_register_graphed(oar_op_id op, uint32_t dtypes, oar_kernel_fn fn, oar_supports_fn supports);

/* Scratch memory from the caching allocator, stream-ordered (free it after the last launch
 * that uses it; the allocator reuses it only for later work on the same stream). */
void *oar_cuda_scratch(size_t nbytes);
void oar_cuda_scratch_free(void *p, size_t nbytes);

/* Batched product on tensor cores (cuBLASLt, f32 accumulation): y[i] = op(a[i]) op(b[i]) for i
 * < batch over contiguous row-major operands, a [m, k] (stored [k, m] when ta), b [k, n] (stored
 * [n, k] when tb), y [m, n] of dt, or of f32 when y_f32 (cuda_gemm.c). who names the caller. */
oar_status oar_cu_gemm_batched(const char *who, oar_dtype dt, const void *a, bool ta, const void *b, bool tb,
                               void *y, bool y_f32, int64_t batch, int64_t m, int64_t n, int64_t k, void *stream);

/* Per-family registration, one per cuda_<family>.c, listed in cuda_families.def. */
#define OAR_CUDA_FAMILY(f) void oar_cuda_register_##f(void);
#include "cuda_families.def"
#undef OAR_CUDA_FAMILY
/* The profiler's GPU timeline (cuda_timeline.c), the device table's timeline_* entries. */
oar_status oar_cuda_timeline_reset(void);
int32_t oar_cuda_timeline_mark(void);
int64_t oar_cuda_timeline_ns(int32_t from, int32_t to);

/* Why the GPU probe found none ("" when it found some or was not asked). */
const char *oar_cuda_probe_error(void);


#endif
