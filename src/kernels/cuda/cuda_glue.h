/* Small helpers the C glue of several kernel families shares: contiguous copies of strided
 * inputs, the device flag through which index kernels report a bad index, and a fill value's
 * bytes in an element type. */
#ifndef OAR_CUDA_GLUE_H
#define OAR_CUDA_GLUE_H

#include "cuda_backend.h"

#include <string.h>

/* Contiguous copies made for one kernel call, released together. */
typedef struct oar_cu_temps {
    oar_tensor *t[OAR_MAX_INPUTS];
    int n;
} oar_cu_temps;

/* t itself when contiguous (or NULL), else a contiguous copy on its device (NULL with the
 * error set when that fails). */
static inline oar_tensor *oar_cu_contig(oar_tensor *t, oar_cu_temps *tmp) {
    if (!t || t->contiguous || t->numel == 0) return t;
    oar_tensor *c = oar_tensor_contiguous_copy(t);
    if (c) tmp->t[tmp->n++] = c;
    return c;
}

static inline void oar_cu_temps_free(oar_cu_temps *tmp) {
    for (int i = 0; i < tmp->n; i++) oar_tensor_unref(tmp->t[i]);
    tmp->n = 0;
}

/* The index-error flag (launch_index.h): two zeroed unsigned long longs on the device. */
static inline unsigned long long *oar_cu_err_begin(cudaStream_t s, const char *op, oar_status *st) {
    unsigned long long *e = oar_cuda_scratch(2 * sizeof(unsigned long long));
    if (!e) {
        *st = oar_error(OAR_ERR_OOM, "%s: out of GPU memory for the index check flag", op);
        return NULL;
    }
    *st = oar_cuda_status(cudaMemsetAsync(e, 0, 2 * sizeof(unsigned long long), s), op);
    if (*st != OAR_OK) {
        oar_cuda_scratch_free(e, 2 * sizeof(unsigned long long));
        return NULL;
    }
    return e;
}

/* Reads the flag back (waits for the kernel) and frees it; *bad tells whether an index was out
 * of range, *value which. While the stream is captured into a CUDA graph nothing is read (the
 * kernels skipped bad indices; they cannot be reported without waiting). */
static inline oar_status oar_cu_err_end(unsigned long long *e, cudaStream_t s, const char *op, bool *bad,
                                        int64_t *value) {
    *bad = false;
    unsigned long long h[2] = {0, 0};
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    cudaError_t ce = cudaStreamIsCapturing(s, &cap);
    if (ce == cudaSuccess && cap == cudaStreamCaptureStatusNone) {
        ce = cudaMemcpyAsync(h, e, sizeof h, cudaMemcpyDeviceToHost, s);
        if (ce == cudaSuccess) ce = cudaStreamSynchronize(s);
    }
    oar_cuda_scratch_free(e, 2 * sizeof(unsigned long long));
    oar_status st = oar_cuda_status(ce, op);
    if (st != OAR_OK) return st;
    *bad = h[0] != 0;
    *value = (int64_t)h[1];
    return OAR_OK;
}

/* value stored in dtype dt (the CPU's conversion), as the low bytes of a uint64. */
static inline uint64_t oar_cu_fill_bits(oar_dtype dt, double value) {
    unsigned char b[16] = {0};
    oar_dtypes[dt].store(b, value);
    uint64_t bits;
    memcpy(&bits, b, sizeof bits);
    return bits;
}

/* Size of dim d (a 0-d tensor reads as [1]). */
static inline int64_t oar_cu_size_at(const oar_tensor *t, int d) { return d < t->ndim ? t->shape[d] : 1; }

#endif
