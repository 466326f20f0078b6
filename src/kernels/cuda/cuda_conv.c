/* CUDA convolutions through cuDNN (built when cuDNN is found: OAR_HAVE_CUDNN): conv2d,
 * conv1d (unit height), conv2d_grad_input, conv2d_grad_weight, conv_transpose2d (backward data
 * of the conv from its output back to its input) and conv2d_act (NCHW or NHWC through tensor
 * strides). One cuDNN handle per process, made at first use, set to the context's stream at
 * each call; the algorithm is chosen once per problem (cuDNN's heuristics, deterministic
 * algorithms first) and cached; workspaces come from the caching allocator. f32 never uses
 * TF32 unless oar_cuda_set_allow_tf32(true) (CUDNN_FMA_MATH); f64 runs in double; f16/bf16 on
 * tensor cores. Bias, residual and relu run in one epilogue kernel (conv.cu) after the conv.
 * Gradient grids smaller than the full conv output (after output_padding) are zero-padded to
 * it, which adds nothing, as the reference's loop over the grid. */
#include "cuda_glue.h"
#include "launch_conv.h"

#ifdef OAR_HAVE_CUDNN
#include "launch_copy.h"

#include <cudnn.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>

enum { KIND_FWD, KIND_BWD_DATA, KIND_BWD_FILTER };

/* One convolution problem: the conv's input x, filter w and output y (dims NCHW, tensor
 * strides in elements) with its parameters. It is also the algorithm cache's key. */
typedef struct conv_problem {
    int kind, dtype, math;
    int x[4], xs[4], w[4], y[4], ys[4];
    int pad[2], str[2], dil[2], groups;
} conv_problem;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static cudnnHandle_t g_handle;
static bool g_handle_made;

#define CACHE_SIZE 256
static struct {
    conv_problem key;
    int algo;
    size_t workspace;
} g_cache[CACHE_SIZE];
static int g_cached, g_next_slot;

static oar_status cudnn_status(cudnnStatus_t s, const char *op, const char *what) {
    if (s == CUDNN_STATUS_SUCCESS) return OAR_OK;
    oar_status st = s == CUDNN_STATUS_ALLOC_FAILED ? OAR_ERR_OOM
                    : s == CUDNN_STATUS_NOT_SUPPORTED ? OAR_ERR_UNSUPPORTED
                                                      : OAR_ERR_INTERNAL;
    return oar_error(st, "%s: cuDNN %s failed with status %d (%s)", op, what, (int)s, cudnnGetErrorString(s));
}

/* The handle on the context's stream; called with g_mu held. */
static oar_status handle_for(const oar_kctx *ctx, const char *op) {
    if (!g_handle_made) {
        cudnnStatus_t s = cudnnCreate(&g_handle);
        if (s != CUDNN_STATUS_SUCCESS) return cudnn_status(s, op, "cudnnCreate");
        g_handle_made = true;
    }
    return cudnn_status(cudnnSetStream(g_handle, oar_cuda_stream_of(ctx)), op, "cudnnSetStream");
}

static cudnnDataType_t data_type(int dt) {
    switch (dt) {
    case OAR_F64: return CUDNN_DATA_DOUBLE;
    case OAR_F16: return CUDNN_DATA_HALF;
    case OAR_BF16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_FLOAT;
    }
}

static cudnnMathType_t math_type(int dt) {
    if (dt == OAR_F16 || dt == OAR_BF16) return CUDNN_TENSOR_OP_MATH;
    if (dt == OAR_F32) return oar_cuda_get_allow_tf32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    return CUDNN_DEFAULT_MATH;
}

typedef struct descs {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
} descs;

static void descs_free(descs *d) {
    if (d->x) cudnnDestroyTensorDescriptor(d->x);
    if (d->y) cudnnDestroyTensorDescriptor(d->y);
    if (d->w) cudnnDestroyFilterDescriptor(d->w);
    if (d->conv) cudnnDestroyConvolutionDescriptor(d->conv);
}

static oar_status descs_make(const conv_problem *p, descs *d, const char *op) {
    memset(d, 0, sizeof *d);
    cudnnDataType_t dt = data_type(p->dtype);
    cudnnStatus_t s = cudnnCreateTensorDescriptor(&d->x);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnCreateTensorDescriptor(&d->y);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnCreateFilterDescriptor(&d->w);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnCreateConvolutionDescriptor(&d->conv);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnSetTensor4dDescriptorEx(d->x, dt, p->x[0], p->x[1], p->x[2], p->x[3], p->xs[0], p->xs[1], p->xs[2],
                                         p->xs[3]);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnSetTensor4dDescriptorEx(d->y, dt, p->y[0], p->y[1], p->y[2], p->y[3], p->ys[0], p->ys[1], p->ys[2],
                                         p->ys[3]);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnSetFilter4dDescriptor(d->w, dt, CUDNN_TENSOR_NCHW, p->w[0], p->w[1], p->w[2], p->w[3]);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnSetConvolution2dDescriptor(d->conv, p->pad[0], p->pad[1], p->str[0], p->str[1], p->dil[0], p->dil[1],
                                            CUDNN_CROSS_CORRELATION,
                                            p->dtype == OAR_F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnSetConvolutionGroupCount(d->conv, p->groups);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnSetConvolutionMathType(d->conv, (cudnnMathType_t)p->math);
    if (s != CUDNN_STATUS_SUCCESS) {
        descs_free(d);
        return cudnn_status(s, op, "descriptor setup");
    }
    return OAR_OK;
}

/* The workspace algo needs under p (any failure: the algorithm does not take this problem). */
static cudnnStatus_t workspace_of(const conv_problem *p, const descs *d, int algo, size_t *bytes) {
    switch (p->kind) {
    case KIND_FWD:
        return cudnnGetConvolutionForwardWorkspaceSize(g_handle, d->x, d->w, d->conv, d->y,
                                                       (cudnnConvolutionFwdAlgo_t)algo, bytes);
    case KIND_BWD_DATA:
        return cudnnGetConvolutionBackwardDataWorkspaceSize(g_handle, d->w, d->y, d->conv, d->x,
                                                            (cudnnConvolutionBwdDataAlgo_t)algo, bytes);
    default:
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(g_handle, d->x, d->y, d->conv, d->w,
                                                              (cudnnConvolutionBwdFilterAlgo_t)algo, bytes);
    }
}

/* FFT and Winograd algorithms transform their operands and keep the transforms in the data
 * type: in f16/bf16 that loses several bits (a bf16 weight gradient measured 10% off on an
 * H100), so half-precision problems take them only when nothing else accepts the problem. */
static bool lossy_in_half(int kind, int algo) {
    switch (kind) {
    case KIND_FWD:
        return algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT || algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
               algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
    case KIND_BWD_DATA:
        return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT || algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
               algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD ||
               algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
    default:
        return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT || algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
               algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
    }
}

/* Chooses (or finds in the cache) the algorithm for p: cuDNN's heuristic ranking, the first
 * deterministic one that accepts the problem, else the first that does; in f16/bf16 the
 * transforming algorithms come last (lossy_in_half). Called with g_mu held. */
static oar_status choose_algo(const conv_problem *p, const descs *d, int *algo, size_t *ws, const char *op) {
    for (int i = 0; i < g_cached; i++)
        if (!memcmp(&g_cache[i].key, p, sizeof *p)) {
            *algo = g_cache[i].algo;
            *ws = g_cache[i].workspace;
            return OAR_OK;
        }
    enum { MAX_ALGOS = 16 };
    int got = 0, algos[MAX_ALGOS];
    bool det[MAX_ALGOS];
    cudnnStatus_t s;
    if (p->kind == KIND_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[MAX_ALGOS];
        s = cudnnGetConvolutionForwardAlgorithm_v7(g_handle, d->x, d->w, d->conv, d->y, MAX_ALGOS, &got, perf);
        for (int i = 0; s == CUDNN_STATUS_SUCCESS && i < got; i++) {
            algos[i] = perf[i].status == CUDNN_STATUS_SUCCESS ? (int)perf[i].algo : -1;
            det[i] = perf[i].determinism == CUDNN_DETERMINISTIC;
        }
    } else if (p->kind == KIND_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[MAX_ALGOS];
        s = cudnnGetConvolutionBackwardDataAlgorithm_v7(g_handle, d->w, d->y, d->conv, d->x, MAX_ALGOS, &got, perf);
        for (int i = 0; s == CUDNN_STATUS_SUCCESS && i < got; i++) {
            algos[i] = perf[i].status == CUDNN_STATUS_SUCCESS ? (int)perf[i].algo : -1;
            det[i] = perf[i].determinism == CUDNN_DETERMINISTIC;
        }
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[MAX_ALGOS];
        s = cudnnGetConvolutionBackwardFilterAlgorithm_v7(g_handle, d->x, d->y, d->conv, d->w, MAX_ALGOS, &got, perf);
        for (int i = 0; s == CUDNN_STATUS_SUCCESS && i < got; i++) {
            algos[i] = perf[i].status == CUDNN_STATUS_SUCCESS ? (int)perf[i].algo : -1;
            det[i] = perf[i].determinism == CUDNN_DETERMINISTIC;
        }
    }
    if (s != CUDNN_STATUS_SUCCESS) return cudnn_status(s, op, "algorithm heuristics");
    if (got > MAX_ALGOS) got = MAX_ALGOS;
    bool half = p->dtype == OAR_F16 || p->dtype == OAR_BF16;
    for (int pass = 0; pass < 4; pass++) /* deterministic, any; exact transforms first in half */
        for (int i = 0; i < got; i++) {
            size_t bytes = 0;
            if (algos[i] < 0 || (pass % 2 == 0 && !det[i])) continue;
            if (half && (pass < 2) == lossy_in_half(p->kind, algos[i])) continue;
            if (!half && pass >= 2) continue;
            if (workspace_of(p, d, algos[i], &bytes) != CUDNN_STATUS_SUCCESS) continue;
            int slot = g_cached < CACHE_SIZE ? g_cached++ : (g_next_slot++ % CACHE_SIZE);
            g_cache[slot].key = *p;
            g_cache[slot].algo = algos[i];
            g_cache[slot].workspace = bytes;
            *algo = algos[i];
            *ws = bytes;
            return OAR_OK;
        }
    return oar_error(OAR_ERR_UNSUPPORTED, "%s: cuDNN has no algorithm for this convolution (input [%d, %d, %d, %d], "
                                          "filter [%d, %d, %d, %d], groups %d, dtype %s)", op, p->x[0], p->x[1],
                     p->x[2], p->x[3], p->w[0], p->w[1], p->w[2], p->w[3], p->groups,
                     oar_dtype_name((oar_dtype)p->dtype));
}

/* Runs problem p: forward reads x and w into y; backward data reads w and y (dy) into x (dx);
 * backward filter reads x and y (dy) into w (dw). */
static oar_status conv_run(const oar_kctx *ctx, conv_problem *p, void *x, void *w, void *y, const char *op) {
    p->math = (int)math_type(p->dtype);
    pthread_mutex_lock(&g_mu);
    oar_status st = handle_for(ctx, op);
    descs d;
    if (st == OAR_OK) st = descs_make(p, &d, op);
    if (st != OAR_OK) {
        pthread_mutex_unlock(&g_mu);
        return st;
    }
    int algo = 0;
    size_t ws_bytes = 0;
    void *ws = NULL;
    st = choose_algo(p, &d, &algo, &ws_bytes, op);
    if (st == OAR_OK && ws_bytes && !(ws = oar_cuda_scratch(ws_bytes)))
        st = oar_error(OAR_ERR_OOM, "%s: out of GPU memory for the cuDNN workspace (%zu bytes)", op, ws_bytes);
    if (st == OAR_OK) {
        double one_d = 1.0, zero_d = 0.0;
        float one_f = 1.0f, zero_f = 0.0f;
        const void *one = p->dtype == OAR_F64 ? (const void *)&one_d : (const void *)&one_f;
        const void *zero = p->dtype == OAR_F64 ? (const void *)&zero_d : (const void *)&zero_f;
        cudnnStatus_t s;
        if (p->kind == KIND_FWD)
            s = cudnnConvolutionForward(g_handle, one, d.x, x, d.w, w, d.conv, (cudnnConvolutionFwdAlgo_t)algo, ws,
                                        ws_bytes, zero, d.y, y);
        else if (p->kind == KIND_BWD_DATA)
            s = cudnnConvolutionBackwardData(g_handle, one, d.w, w, d.y, y, d.conv,
                                             (cudnnConvolutionBwdDataAlgo_t)algo, ws, ws_bytes, zero, d.x, x);
        else
            s = cudnnConvolutionBackwardFilter(g_handle, one, d.x, x, d.y, y, d.conv,
                                               (cudnnConvolutionBwdFilterAlgo_t)algo, ws, ws_bytes, zero, d.w, w);
        st = cudnn_status(s, op, "convolution");
    }
    if (ws) oar_cuda_scratch_free(ws, ws_bytes);
    descs_free(&d);
    pthread_mutex_unlock(&g_mu);
    return st;
}

/* ---- problem setup from tensors */

static bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

/* Sets dims (NCHW order) and contiguous NCHW strides; false when a size exceeds cuDNN's int. */
static bool set_nchw(int *dims, int *strides, const int64_t *s) {
    int64_t st = 1;
    for (int k = 3; k >= 0; k--) {
        if (!fits_int(s[k]) || !fits_int(st)) return false;
        dims[k] = (int)s[k];
        strides[k] = (int)st;
        st *= s[k];
    }
    return fits_int(st);
}

/* NHWC data [n, h, w, c] described as NCHW dims with strides. */
static bool set_nhwc(int *dims, int *strides, const int64_t *nhwc) {
    int64_t n = nhwc[0], h = nhwc[1], w = nhwc[2], c = nhwc[3];
    if (!fits_int(n) || !fits_int(c) || !fits_int(h) || !fits_int(w) || !fits_int(n * h * w * c)) return false;
    dims[0] = (int)n, dims[1] = (int)c, dims[2] = (int)h, dims[3] = (int)w;
    strides[0] = (int)(h * w * c), strides[1] = 1, strides[2] = (int)(w * c), strides[3] = (int)c;
    return true;
}

static bool set_filter(int *dims, const int64_t *s) {
    for (int k = 0; k < 4; k++) {
        if (!fits_int(s[k])) return false;
        dims[k] = (int)s[k];
    }
    return true;
}

/* stride, padding, dilation (2 entries each, or 1 for 1-d: height 1/0/1) and groups. */
static bool set_params(conv_problem *p, const oar_attr *str, const oar_attr *pad, const oar_attr *dil,
                       const oar_attr *groups) {
    const oar_attr *a[3] = {str, pad, dil};
    int *o[3] = {p->str, p->pad, p->dil};
    int neutral[3] = {1, 0, 1};
    for (int i = 0; i < 3; i++) {
        if (a[i]->n == 1) {
            o[i][0] = neutral[i];
            if (!fits_int(a[i]->ints[0])) return false;
            o[i][1] = (int)a[i]->ints[0];
        } else {
            if (!fits_int(a[i]->ints[0]) || !fits_int(a[i]->ints[1])) return false;
            o[i][0] = (int)a[i]->ints[0], o[i][1] = (int)a[i]->ints[1];
        }
    }
    if (!fits_int(groups->i)) return false;
    p->groups = (int)groups->i;
    return true;
}

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
    int64_t span = in + 2 * p - d * (k - 1) - 1;
    return span < 0 ? 0 : span / s + 1;
}

static oar_status zero(oar_tensor *t, cudaStream_t s, const char *op) {
    size_t bytes = (size_t)t->numel * oar_dtypes[t->dtype].size;
    return oar_cuda_status(cudaMemsetAsync(oar_tensor_ptr(t), 0, bytes, s), op);
}

static oar_status too_large(const char *op) {
    return oar_error(OAR_ERR_UNSUPPORTED, "%s: expected sizes below 2^31 for cuDNN, got a larger one; run it on the "
                                          "CPU", op);
}

/* gy [n, c, gh, gw] (contiguous) as the full conv output [n, c, fh, fw]: itself when the grid
 * is full, else zeros with gy copied into the top-left corner (scratch of *bytes). */
static oar_status full_grid(const oar_tensor *gy, int64_t fh, int64_t fw, void **out, size_t *bytes,
                            cudaStream_t s, const char *op) {
    *bytes = 0;
    *out = oar_tensor_ptr(gy);
    if (gy->shape[2] == fh && gy->shape[3] == fw) return OAR_OK;
    size_t es = oar_dtypes[gy->dtype].size;
    *bytes = (size_t)(gy->shape[0] * gy->shape[1] * fh * fw) * es;
    void *buf = oar_cuda_scratch(*bytes ? *bytes : es);
    if (!buf) return oar_error(OAR_ERR_OOM, "%s: out of GPU memory for the padded gradient (%zu bytes)", op, *bytes);
    oar_status st = oar_cuda_status(cudaMemsetAsync(buf, 0, *bytes, s), op);
    if (st == OAR_OK && gy->numel) {
        oar_cu_strided l = {.ndim = 4};
        for (int k = 0; k < 4; k++) l.shape[k] = gy->shape[k];
        l.dst_strides[3] = 1, l.dst_strides[2] = fw, l.dst_strides[1] = fh * fw;
        l.dst_strides[0] = gy->shape[1] * fh * fw;
        l.src_strides[3] = 1, l.src_strides[2] = gy->shape[3], l.src_strides[1] = gy->shape[2] * gy->shape[3];
        l.src_strides[0] = gy->shape[1] * gy->shape[2] * gy->shape[3];
        st = oar_cuda_status((cudaError_t)oar_cu_copy_strided(buf, gy->dtype, oar_tensor_ptr(gy), gy->dtype, &l,
                                                              gy->numel, s), op);
    }
    if (st != OAR_OK) {
        oar_cuda_scratch_free(buf, *bytes ? *bytes : es);
        *bytes = 0;
        return st;
    }
    if (!*bytes) *bytes = es;
    *out = buf;
    return OAR_OK;
}

static oar_status epilogue(const oar_kctx *ctx, oar_tensor *y, const oar_tensor *bias, const oar_tensor *res,
                           bool relu, bool nhwc, const char *op) {
    if (!bias && !res && !relu) return OAR_OK;
    int64_t channels = nhwc ? y->shape[3] : y->shape[1], inner = 1;
    if (!nhwc)
        for (int k = 2; k < y->ndim; k++) inner *= y->shape[k]; /* [n, c, h, w], or conv1d's [n, c, l] */
    int e = oar_cu_conv_epilogue(oar_tensor_ptr(y), bias ? oar_tensor_ptr(bias) : NULL,
                                 res ? oar_tensor_ptr(res) : NULL, y->dtype, y->numel, channels, inner ? inner : 1,
                                 relu, oar_cuda_stream_of(ctx));
    return oar_cuda_status((cudaError_t)e, op);
}

/* conv2d / conv1d / conv2d_act forward: x (NCHW, or NHWC for conv2d_act), w [co, ci/g, kh, kw]
 * (or [co, ci/g, k]), attrs stride, padding, dilation, groups. */
static oar_status forward(const oar_kctx *ctx, oar_tensor *const *in, oar_tensor *y, const oar_attr *a,
                          const oar_tensor *res, bool relu, bool nhwc, const char *op) {
    if (y->numel == 0) return OAR_OK;
    const oar_tensor *x = in[0], *w = in[1];
    conv_problem p;
    memset(&p, 0, sizeof p);
    p.kind = KIND_FWD;
    p.dtype = x->dtype;
    int64_t xs[4], ws[4], ys[4];
    if (x->ndim == 3) { /* conv1d: unit height */
        xs[0] = x->shape[0], xs[1] = x->shape[1], xs[2] = 1, xs[3] = x->shape[2];
        ws[0] = w->shape[0], ws[1] = w->shape[1], ws[2] = 1, ws[3] = w->shape[2];
        ys[0] = y->shape[0], ys[1] = y->shape[1], ys[2] = 1, ys[3] = y->shape[2];
    } else {
        memcpy(xs, x->shape, sizeof xs);
        memcpy(ws, w->shape, sizeof ws);
        memcpy(ys, y->shape, sizeof ys);
    }
    bool ok = set_filter(p.w, ws) && set_params(&p, &a[0], &a[1], &a[2], &a[3]);
    ok = ok && (nhwc ? set_nhwc(p.x, p.xs, xs) && set_nhwc(p.y, p.ys, ys)
                     : set_nchw(p.x, p.xs, xs) && set_nchw(p.y, p.ys, ys));
    if (!ok) return too_large(op);
    oar_status st = conv_run(ctx, &p, oar_tensor_ptr(x), oar_tensor_ptr(w), oar_tensor_ptr(y), op);
    if (st != OAR_OK) return st;
    return epilogue(ctx, y, in[2], res, relu, nhwc, op);
}

static oar_status conv2d_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    return forward(ctx, in, out[0], a, NULL, false, false, "conv2d");
}

static oar_status conv1d_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    return forward(ctx, in, out[0], a, NULL, false, false, "conv1d");
}

/* relu6's clip to [0, 6] after the epilogue: the CUDA clip kernel for y's dtype, in place on
 * the conv's stream (fuse_conv_act makes relu6 on the CPU only; eager calls and the sweep
 * reach it here). NULL when none takes y. */
static const oar_kernel_entry *relu6_clip_kernel(oar_tensor *y, const oar_attr *ca) {
    const oar_kernel_entry *ks;
    int n = oar_op_kernels(OAR_OP_clip, &ks);
    for (int i = 0; i < n; i++)
        if (ks[i].device == OAR_CUDA && (ks[i].dtypes & OAR_DTYPE_BIT(y->dtype)) &&
            (!ks[i].supports || ks[i].supports(&y, 1, &y, 1, ca)))
            return &ks[i];
    return NULL;
}

/* conv2d_act: attrs stride, padding, dilation, groups, act ("relu"/"relu6"/"none"), layout ("nchw"/"nhwc") */
static oar_status conv2d_act_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                  int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    bool relu = !strcmp(a[4].s, "relu"), relu6 = !strcmp(a[4].s, "relu6"), nhwc = !strcmp(a[5].s, "nhwc");
    oar_status st = forward(ctx, in, out[0], a, in[3], relu, nhwc, "conv2d_act");
    if (st != OAR_OK || !relu6 || out[0]->numel == 0) return st;
    oar_tensor *y = out[0];
    oar_attr ca[2] = {oar_attr_float(0.0), oar_attr_float(6.0)};
    const oar_kernel_entry *k = relu6_clip_kernel(y, ca);
    if (!k) return oar_error(OAR_ERR_UNSUPPORTED, "conv2d_act: no CUDA clip kernel for relu6 on %s", oar_dtype_name(y->dtype));
    return k->fn(ctx, &y, 1, &y, 1, ca);
}

static bool conv2d_act_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                                const oar_attr *a) {
    (void)in; (void)n_in; (void)n_out;
    oar_attr ca[2] = {oar_attr_float(0.0), oar_attr_float(6.0)};
    bool act = !strcmp(a[4].s, "relu") || !strcmp(a[4].s, "none") ||
               (!strcmp(a[4].s, "relu6") && relu6_clip_kernel(out[0], ca) != NULL);
    return act && (!strcmp(a[5].s, "nhwc") || !strcmp(a[5].s, "nchw"));
}

/* Backward data of the conv with input shape xshape, filter w and gradient gy (grid possibly
 * smaller than the full output) into dx; attrs stride, padding, dilation, groups. */
static oar_status backward_data(const oar_kctx *ctx, const oar_tensor *gy, const oar_tensor *w, oar_tensor *dx,
                                const oar_attr *spdg, const char *op) {
    if (dx->numel == 0) return OAR_OK;
    cudaStream_t s = oar_cuda_stream_of(ctx);
    if (gy->numel == 0) return zero(dx, s, op);
    conv_problem p;
    memset(&p, 0, sizeof p);
    p.kind = KIND_BWD_DATA;
    p.dtype = dx->dtype;
    if (!set_params(&p, &spdg[0], &spdg[1], &spdg[2], &spdg[3])) return too_large(op);
    int64_t fh = out_size(dx->shape[2], w->shape[2], p.str[0], p.pad[0], p.dil[0]);
    int64_t fw = out_size(dx->shape[3], w->shape[3], p.str[1], p.pad[1], p.dil[1]);
    int64_t ys[4] = {gy->shape[0], gy->shape[1], fh, fw};
    if (!set_filter(p.w, w->shape) || !set_nchw(p.x, p.xs, dx->shape) || !set_nchw(p.y, p.ys, ys))
        return too_large(op);
    void *dy;
    size_t bytes;
    oar_status st = full_grid(gy, fh, fw, &dy, &bytes, s, op);
    if (st != OAR_OK) return st;
    st = conv_run(ctx, &p, oar_tensor_ptr(dx), oar_tensor_ptr(w), dy, op);
    if (bytes) oar_cuda_scratch_free(dy, bytes);
    return st;
}

/* conv2d_grad_input(grad, weight; input_shape, stride, padding, dilation, groups) */
static oar_status grad_input_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                  int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    return backward_data(ctx, in[0], in[1], out[0], a + 1, "conv2d_grad_input");
}

/* conv2d_grad_weight(x, grad; weight_shape, stride, padding, dilation, groups) */
static oar_status grad_weight_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                   int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    const char *op = "conv2d_grad_weight";
    const oar_tensor *x = in[0], *gy = in[1];
    oar_tensor *dw = out[0];
    if (dw->numel == 0) return OAR_OK;
    cudaStream_t s = oar_cuda_stream_of(ctx);
    if (x->numel == 0 || gy->numel == 0) return zero(dw, s, op); /* an empty batch: nothing to sum */
    conv_problem p;
    memset(&p, 0, sizeof p);
    p.kind = KIND_BWD_FILTER;
    p.dtype = dw->dtype;
    if (!set_params(&p, &a[1], &a[2], &a[3], &a[4])) return too_large(op);
    int64_t fh = out_size(x->shape[2], dw->shape[2], p.str[0], p.pad[0], p.dil[0]);
    int64_t fw = out_size(x->shape[3], dw->shape[3], p.str[1], p.pad[1], p.dil[1]);
    int64_t ys[4] = {gy->shape[0], gy->shape[1], fh, fw};
    if (!set_filter(p.w, dw->shape) || !set_nchw(p.x, p.xs, x->shape) || !set_nchw(p.y, p.ys, ys)) return too_large(op);
    void *dy;
    size_t bytes;
    oar_status st = full_grid(gy, fh, fw, &dy, &bytes, s, op);
    if (st != OAR_OK) return st;
    st = conv_run(ctx, &p, oar_tensor_ptr(x), oar_tensor_ptr(dw), dy, op);
    if (bytes) oar_cuda_scratch_free(dy, bytes);
    return st;
}

/* conv_transpose2d(x, weight [in, out / groups, kh, kw], bias?; stride, padding,
 * output_padding, dilation, groups): backward data of the conv from y to x, whose filter is
 * the weight as given ([co = in, ci / groups = out / groups, kh, kw]). */
static oar_status transpose_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                 int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    const char *op = "conv_transpose2d";
    oar_attr spdg[4] = {a[0], a[1], a[3], a[4]};
    oar_status st = backward_data(ctx, in[0], in[1], out[0], spdg, op);
    if (st != OAR_OK || out[0]->numel == 0) return st;
    return epilogue(ctx, out[0], in[2], NULL, false, false, op);
}

void oar_cuda_register_conv(void) {
    const uint32_t dts = OAR_FLOAT_DTYPES;
    oar_cuda_register(OAR_OP_conv2d, dts, conv2d_cuda, NULL);
    oar_cuda_register(OAR_OP_conv1d, dts, conv1d_cuda, NULL);
    oar_cuda_register(OAR_OP_conv2d_grad_input, dts, grad_input_cuda, NULL);
    oar_cuda_register(OAR_OP_conv2d_grad_weight, dts, grad_weight_cuda, NULL);
    oar_cuda_register(OAR_OP_conv_transpose2d, dts, transpose_cuda, NULL);
    oar_cuda_register(OAR_OP_conv2d_act, dts, conv2d_act_cuda, conv2d_act_supports);
}

#else /* no cuDNN: the convolutions stay unregistered on the GPU */

void oar_cuda_register_conv(void) {}

#endif
