/*
 * oar.h — the public C API of oar, a deep learning framework.
 *
 * Read top to bottom:
 *   1. Conventions: status codes, errors, ownership
 *   2. Data types
 *   3. Tensors: creation, properties, views, copies, printing
 *   4. Scopes: releasing a step's temporaries at once
 *   5. Autograd: requires_grad, backward, grad, hooks, no-grad mode
 *   6. Operators, by family
 *   7. Runtime: threads, random numbers, memory statistics
 *
 * Conventions
 *   - Every function that can fail returns an oar_status, or NULL for functions that return
 *     a pointer. The reason is available from oar_last_error() (thread-local) and always
 *     names the operation, what was expected and what was received.
 *   - Ownership is in the name: functions that return oar_tensor* hand the caller a new
 *     reference, released with oar_release(). Functions named *_get or returning const
 *     pointers lend; nothing to release. Inside a scope (section 4) new tensors belong to
 *     the scope and are released when it ends, unless kept with oar_keep().
 *   - Operators accept NULL inputs and return NULL with the earlier error kept, so chains
 *     like oar_relu(oar_add(a, b)) report the first failure.
 *   - Dimension arguments may be negative (counted from the end), as in PyTorch.
 *   - Option structs: pass NULL for defaults; zero fields mean "default" where noted.
 */
#ifndef OAR_H
#define OAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define OAR_API __declspec(dllexport)
#elif defined(__GNUC__)
#define OAR_API __attribute__((visibility("default")))
#else
#define OAR_API
#endif

#define OAR_VERSION_MAJOR 0
#define OAR_VERSION_MINOR 1
#define OAR_VERSION_PATCH 0
#define OAR_MAX_DIMS 8

/* ---------------------------------------------------------------- 1. status, errors */

typedef enum oar_status {
    OAR_OK = 0,
    OAR_ERR_INVALID_ARG,  /* a bad argument: NULL, out-of-range dim, bad option */
    OAR_ERR_SHAPE,        /* shapes do not fit the operation */
    OAR_ERR_DTYPE,        /* dtypes do not fit the operation */
    OAR_ERR_OOM,          /* memory could not be allocated, even after freeing caches */
    OAR_ERR_IO,           /* a file could not be read or written */
    OAR_ERR_FORMAT,       /* malformed or truncated input data */
    OAR_ERR_UNSUPPORTED,  /* valid, but not implemented for these inputs */
    OAR_ERR_STATE,        /* wrong order of calls, e.g. backward through a freed graph */
    OAR_ERR_NUMERIC,      /* NaN/Inf found by the check flag */
    OAR_ERR_INTERNAL      /* a bug in oar; please report it */
} oar_status;

OAR_API const char *oar_version(void);           /* "0.1.0" */
OAR_API const char *oar_last_error(void);        /* message of the last failure, "" if none */
OAR_API oar_status oar_last_status(void);        /* status of the last failure */
OAR_API void oar_clear_error(void);
OAR_API const char *oar_status_name(oar_status s);

/* ---------------------------------------------------------------- 2. data types */

typedef enum oar_dtype {
    OAR_F32 = 0, OAR_F64, OAR_F16, OAR_BF16,
    OAR_I8, OAR_U8, OAR_I32, OAR_I64, OAR_BOOL,
    OAR_DTYPE_COUNT
} oar_dtype;

OAR_API const char *oar_dtype_name(oar_dtype dt);  /* "f32", "bf16", ... */
OAR_API size_t oar_dtype_size(oar_dtype dt);       /* bytes per element */
OAR_API bool oar_dtype_is_float(oar_dtype dt);
/* Scalar conversions; f32 -> f16/bf16 round to nearest even, NaN stays NaN. */
OAR_API uint16_t oar_f32_to_f16(float x);
OAR_API float oar_f16_to_f32(uint16_t h);
OAR_API uint16_t oar_f32_to_bf16(float x);
OAR_API float oar_bf16_to_f32(uint16_t h);

typedef enum oar_device { OAR_CPU = 0, OAR_CUDA = 1 } oar_device;

/* ---------------------------------------------------------------- 3. tensors */

typedef struct oar_tensor oar_tensor;

/* Creation. shape has ndim entries (ndim 0 makes a scalar). */
OAR_API oar_tensor *oar_empty(const int64_t *shape, int ndim, oar_dtype dt);
OAR_API oar_tensor *oar_zeros(const int64_t *shape, int ndim, oar_dtype dt);
OAR_API oar_tensor *oar_ones(const int64_t *shape, int ndim, oar_dtype dt);
OAR_API oar_tensor *oar_full(const int64_t *shape, int ndim, double value, oar_dtype dt);
OAR_API oar_tensor *oar_scalar(double value, oar_dtype dt);
OAR_API oar_tensor *oar_zeros_like(const oar_tensor *t);
OAR_API oar_tensor *oar_ones_like(const oar_tensor *t);
/* [start, end) in steps of step, like torch.arange. */
OAR_API oar_tensor *oar_arange(double start, double end, double step, oar_dtype dt);
OAR_API oar_tensor *oar_linspace(double start, double end, int64_t steps, oar_dtype dt);
OAR_API oar_tensor *oar_eye(int64_t n, int64_t m, oar_dtype dt);
/* Copies data (row-major, numel elements of dt). */
OAR_API oar_tensor *oar_from_data(const void *data, const int64_t *shape, int ndim, oar_dtype dt);
/* Wraps data without copying; deleter(data, ctx) runs when the last view is released
 * (deleter may be NULL when the caller keeps data alive longer than the tensor). */
OAR_API oar_tensor *oar_from_blob(void *data, const int64_t *shape, int ndim, oar_dtype dt,
                                  void (*deleter)(void *data, void *ctx), void *ctx);

/* Random tensors from the seeded counter-based generator (Philox-4x32-10): element i of a
 * call uses counter (offset + i), so values do not depend on the number of threads. */
OAR_API oar_tensor *oar_rand(const int64_t *shape, int ndim, oar_dtype dt);   /* U[0,1) */
OAR_API oar_tensor *oar_randn(const int64_t *shape, int ndim, oar_dtype dt);  /* N(0,1) */
OAR_API oar_tensor *oar_randint(int64_t low, int64_t high, const int64_t *shape, int ndim,
                                oar_dtype dt);                                 /* [low,high) */

/* References. */
OAR_API oar_tensor *oar_retain(oar_tensor *t);  /* returns t */
OAR_API void oar_release(oar_tensor *t);        /* NULL is fine */

/* Properties (borrowed views of the tensor's metadata). */
OAR_API int oar_ndim(const oar_tensor *t);
OAR_API const int64_t *oar_shape(const oar_tensor *t);
OAR_API const int64_t *oar_strides(const oar_tensor *t);  /* in elements */
OAR_API int64_t oar_size(const oar_tensor *t, int dim);
OAR_API int64_t oar_numel(const oar_tensor *t);
OAR_API oar_dtype oar_dtype_of(const oar_tensor *t);
OAR_API oar_device oar_device_of(const oar_tensor *t);
OAR_API bool oar_is_contiguous(const oar_tensor *t);
/* Pointer to the first element (honours the view's offset; use strides to walk it). */
OAR_API void *oar_data(oar_tensor *t);
/* The value of a one-element tensor, as double. */
OAR_API oar_status oar_item(const oar_tensor *t, double *out);
/* Copies the elements in row-major order into buf (capacity in bytes), converting to dt. */
OAR_API oar_status oar_copy_to_buffer(const oar_tensor *t, void *buf, size_t capacity, oar_dtype dt);

/* Views share storage with their source (no copy); they are differentiable. */
OAR_API oar_tensor *oar_view(oar_tensor *t, const int64_t *shape, int ndim);   /* -1 infers one dim */
OAR_API oar_tensor *oar_reshape(oar_tensor *t, const int64_t *shape, int ndim);/* view, or copy if needed */
OAR_API oar_tensor *oar_flatten(oar_tensor *t, int start_dim, int end_dim);
OAR_API oar_tensor *oar_permute(oar_tensor *t, const int *dims, int ndim);
OAR_API oar_tensor *oar_transpose(oar_tensor *t, int dim0, int dim1);
OAR_API oar_tensor *oar_slice(oar_tensor *t, int dim, int64_t start, int64_t end, int64_t step);
OAR_API oar_tensor *oar_expand(oar_tensor *t, const int64_t *shape, int ndim); /* -1 keeps a dim */
OAR_API oar_tensor *oar_squeeze(oar_tensor *t, int dim);
OAR_API oar_tensor *oar_unsqueeze(oar_tensor *t, int dim);

/* Copies. */
OAR_API oar_tensor *oar_contiguous(oar_tensor *t);      /* t itself (new reference) if contiguous */
OAR_API oar_tensor *oar_clone(oar_tensor *t);           /* always a fresh copy; differentiable */
OAR_API oar_tensor *oar_cast(oar_tensor *t, oar_dtype dt); /* differentiable between float types */
OAR_API oar_tensor *oar_detach(oar_tensor *t);          /* shares storage, outside autograd */
OAR_API oar_status oar_copy_(oar_tensor *dst, const oar_tensor *src); /* dst <- src, broadcasting, casting */
OAR_API oar_status oar_fill_(oar_tensor *dst, double value);

/* Printing: "tensor([[1.0000, 2.0000], ...], shape=[2, 2], dtype=f32)". Long tensors are
 * summarized with "...". Returns the length needed (snprintf style). */
OAR_API int oar_format(const oar_tensor *t, char *buf, size_t size);
OAR_API void oar_print(const oar_tensor *t);

/* ---------------------------------------------------------------- 4. scopes */

/* Every tensor created between begin and end belongs to the scope and is released at its end,
 * unless passed to oar_keep(), which hands it to the enclosing scope (or to the caller when
 * there is none). Scopes nest; they are per thread. oar_release() on a scoped tensor is safe. */
OAR_API void oar_scope_begin(void);
OAR_API void oar_scope_end(void);
OAR_API oar_tensor *oar_keep(oar_tensor *t);  /* returns t */

/* ---------------------------------------------------------------- 5. autograd */

OAR_API oar_status oar_set_requires_grad(oar_tensor *t, bool requires_grad); /* leaves only */
OAR_API bool oar_requires_grad(const oar_tensor *t);
OAR_API bool oar_is_leaf(const oar_tensor *t);
/* The accumulated gradient of a leaf (borrowed; NULL if none yet). */
OAR_API oar_tensor *oar_grad_get(oar_tensor *t);
OAR_API void oar_zero_grad(oar_tensor *t);  /* drops the accumulated gradient */

/* Computes d(root)/d(leaf) for every leaf reachable from root and adds it to leaf's .grad.
 * grad_root may be NULL when root has one element (then it is 1). The graph's saved
 * tensors are freed afterwards unless retain_graph. */
OAR_API oar_status oar_backward(oar_tensor *root, oar_tensor *grad_root, bool retain_graph);

typedef struct oar_grad_opts {
    bool retain_graph;   /* keep the graph for another backward (implied by create_graph) */
    bool create_graph;   /* record the gradient computation, for higher-order gradients */
    bool allow_unused;   /* an input the outputs do not depend on gets NULL instead of an error */
} oar_grad_opts;

/* Gradients of outputs w.r.t. inputs, returned in grads[i] (new references) without touching
 * any .grad. grad_outputs may be NULL (ones for one-element outputs). */
OAR_API oar_status oar_grad(oar_tensor *const *outputs, int n_outputs,
                            oar_tensor *const *grad_outputs,
                            oar_tensor *const *inputs, int n_inputs,
                            oar_tensor **grads, const oar_grad_opts *opts);

/* A hook sees the gradient of t when it is computed. It may return a replacement (a new
 * reference) or NULL to keep the gradient as it is. Returns a handle for removal, < 0 on error. */
typedef oar_tensor *(*oar_grad_hook)(oar_tensor *grad, void *user);
OAR_API int oar_register_hook(oar_tensor *t, oar_grad_hook hook, void *user);
OAR_API oar_status oar_remove_hook(oar_tensor *t, int handle);

/* Grad mode is per thread; it is on by default. */
OAR_API bool oar_grad_enabled(void);
OAR_API bool oar_set_grad_enabled(bool enabled);  /* returns the previous mode */
OAR_API void oar_no_grad_begin(void);
OAR_API void oar_no_grad_end(void);

/* ---------------------------------------------------------------- 6. operators */

/* 6.1 Elementwise binary, with NumPy broadcasting. Inputs must share a dtype. */
OAR_API oar_tensor *oar_add(oar_tensor *a, oar_tensor *b);
OAR_API oar_tensor *oar_sub(oar_tensor *a, oar_tensor *b);
OAR_API oar_tensor *oar_mul(oar_tensor *a, oar_tensor *b);
OAR_API oar_tensor *oar_div(oar_tensor *a, oar_tensor *b);
OAR_API oar_tensor *oar_pow(oar_tensor *a, oar_tensor *b);
OAR_API oar_tensor *oar_maximum(oar_tensor *a, oar_tensor *b);
OAR_API oar_tensor *oar_minimum(oar_tensor *a, oar_tensor *b);
/* Scalar forms (the scalar takes a's dtype). */
OAR_API oar_tensor *oar_add_scalar(oar_tensor *a, double s);
OAR_API oar_tensor *oar_mul_scalar(oar_tensor *a, double s);
OAR_API oar_tensor *oar_pow_scalar(oar_tensor *a, double s);
/* Comparisons and logic return bool tensors. */
OAR_API oar_tensor *oar_eq(oar_tensor *a, oar_tensor *b);
OAR_API oar_tensor *oar_ne(oar_tensor *a, oar_tensor *b);
OAR_API oar_tensor *oar_lt(oar_tensor *a, oar_tensor *b);
OAR_API oar_tensor *oar_le(oar_tensor *a, oar_tensor *b);
OAR_API oar_tensor *oar_gt(oar_tensor *a, oar_tensor *b);
OAR_API oar_tensor *oar_ge(oar_tensor *a, oar_tensor *b);
OAR_API oar_tensor *oar_logical_and(oar_tensor *a, oar_tensor *b);
OAR_API oar_tensor *oar_logical_or(oar_tensor *a, oar_tensor *b);
OAR_API oar_tensor *oar_logical_not(oar_tensor *a);
/* cond ? a : b, with cond bool; all three broadcast together. */
OAR_API oar_tensor *oar_where(oar_tensor *cond, oar_tensor *a, oar_tensor *b);

/* 6.2 Elementwise unary. */
OAR_API oar_tensor *oar_neg(oar_tensor *x);
OAR_API oar_tensor *oar_abs(oar_tensor *x);
OAR_API oar_tensor *oar_exp(oar_tensor *x);
OAR_API oar_tensor *oar_log(oar_tensor *x);
OAR_API oar_tensor *oar_log1p(oar_tensor *x);
OAR_API oar_tensor *oar_sqrt(oar_tensor *x);
OAR_API oar_tensor *oar_rsqrt(oar_tensor *x);
OAR_API oar_tensor *oar_square(oar_tensor *x);
OAR_API oar_tensor *oar_sin(oar_tensor *x);
OAR_API oar_tensor *oar_cos(oar_tensor *x);
OAR_API oar_tensor *oar_tanh(oar_tensor *x);
OAR_API oar_tensor *oar_sigmoid(oar_tensor *x);
OAR_API oar_tensor *oar_relu(oar_tensor *x);
OAR_API oar_tensor *oar_leaky_relu(oar_tensor *x, double negative_slope);
OAR_API oar_tensor *oar_elu(oar_tensor *x, double alpha);
OAR_API oar_tensor *oar_gelu(oar_tensor *x, bool tanh_approximation);
OAR_API oar_tensor *oar_silu(oar_tensor *x);
/* log(1 + e^(beta x)) / beta, or x where beta x > threshold (torch: 1, 20); beta must be nonzero. */
OAR_API oar_tensor *oar_softplus(oar_tensor *x, double beta, double threshold);
OAR_API oar_tensor *oar_erf(oar_tensor *x);
/* torch.clamp: NaN stays NaN, +-INFINITY means no bound, min > max gives max. Integer tensors
 * keep their dtype, so their bounds must be integers in the dtype's range. */
OAR_API oar_tensor *oar_clip(oar_tensor *x, double min, double max);
OAR_API oar_tensor *oar_sign(oar_tensor *x);
OAR_API oar_tensor *oar_floor(oar_tensor *x);  /* floor, ceil, round: no gradient */
OAR_API oar_tensor *oar_ceil(oar_tensor *x);
OAR_API oar_tensor *oar_round(oar_tensor *x);  /* half to even, like torch.round */

/* 6.3 Reductions over a set of dims (dims == NULL or n_dims == 0: all dims). As in torch,
 * sum and prod of integers or bools give i64, mean/var/std/norm need floating inputs,
 * amax/amin over an empty dim fail, and NaN propagates. */
OAR_API oar_tensor *oar_sum(oar_tensor *x, const int *dims, int n_dims, bool keepdim);
OAR_API oar_tensor *oar_mean(oar_tensor *x, const int *dims, int n_dims, bool keepdim);
OAR_API oar_tensor *oar_amax(oar_tensor *x, const int *dims, int n_dims, bool keepdim);
OAR_API oar_tensor *oar_amin(oar_tensor *x, const int *dims, int n_dims, bool keepdim);
OAR_API oar_tensor *oar_prod(oar_tensor *x, const int *dims, int n_dims, bool keepdim);
/* correction: 1 for the unbiased estimate (torch default), 0 for the population one. */
OAR_API oar_tensor *oar_var(oar_tensor *x, const int *dims, int n_dims, int correction, bool keepdim);
OAR_API oar_tensor *oar_std(oar_tensor *x, const int *dims, int n_dims, int correction, bool keepdim);
OAR_API oar_tensor *oar_logsumexp(oar_tensor *x, const int *dims, int n_dims, bool keepdim);
/* p-norm (p = 2 for the Euclidean norm; p = INFINITY for the max norm); p > 0 only. */
OAR_API oar_tensor *oar_norm(oar_tensor *x, double p, const int *dims, int n_dims, bool keepdim);
/* Index (i64) of the first maximum/minimum along dim; NaN counts as the extreme, like torch.
 * torch's dim=None (over all elements) is not offered: flatten first with oar_reshape. */
OAR_API oar_tensor *oar_argmax(oar_tensor *x, int dim, bool keepdim);
OAR_API oar_tensor *oar_argmin(oar_tensor *x, int dim, bool keepdim);

/* 6.4 Linear algebra. */
/* Batched matmul with broadcasting batch dims; 1-d operands follow torch.matmul. */
OAR_API oar_tensor *oar_matmul(oar_tensor *a, oar_tensor *b);
/* x·weightᵀ + bias over the last dim of x (any leading dims); weight is [out, in], bias [out]
 * or NULL. */
OAR_API oar_tensor *oar_linear(oar_tensor *x, oar_tensor *weight, oar_tensor *bias);
/* einsum of one or two operands as torch.einsum (b is NULL for one operand), e.g.
 * "bij,bjk->bik", "ij->ji", "ii->i", "...ij,jk->...ik". Labels are a-z and A-Z; without
 * "->" the output is the labels used once, sorted. Labels of size 1 broadcast. At most 63
 * characters. */
OAR_API oar_tensor *oar_einsum(const char *equation, oar_tensor *a, oar_tensor *b);

/* 6.5 Neural network operators. Images are NCHW. */
typedef struct oar_conv_opts {
    int64_t stride[2];          /* 0 means 1 */
    int64_t padding[2];
    int64_t dilation[2];        /* 0 means 1 */
    int64_t groups;             /* 0 means 1; in_channels for depthwise */
    int64_t output_padding[2];  /* conv_transpose2d only */
} oar_conv_opts;
/* x [N, C, H, W] (conv1d: [N, C, L]; add a batch dim for a single image). conv1d uses
 * index 0 of each pair. weight: [out, in/groups, k...]; bias [out] or NULL. opts NULL:
 * stride 1, no padding, dilation 1, one group. Output sizes follow torch. */
OAR_API oar_tensor *oar_conv1d(oar_tensor *x, oar_tensor *weight, oar_tensor *bias, const oar_conv_opts *opts);
OAR_API oar_tensor *oar_conv2d(oar_tensor *x, oar_tensor *weight, oar_tensor *bias, const oar_conv_opts *opts);
/* weight: [in, out/groups, kh, kw]; output_padding must be below stride or dilation. */
OAR_API oar_tensor *oar_conv_transpose2d(oar_tensor *x, oar_tensor *weight, oar_tensor *bias,
                                         const oar_conv_opts *opts);

typedef struct oar_pool_opts {
    int64_t kernel[2];
    int64_t stride[2];          /* 0 means the kernel size */
    int64_t padding[2];
    int64_t dilation[2];        /* 0 means 1; max pooling only */
    bool ceil_mode;
    bool count_include_pad;     /* avg pooling; torch's default is true */
} oar_pool_opts;
/* Pooling over the last two dims of [N, C, H, W] or [C, H, W]. opts is required (the kernel
 * size); padding may be at most half the kernel; windows and ceil_mode follow torch. */
OAR_API oar_tensor *oar_max_pool2d(oar_tensor *x, const oar_pool_opts *opts);
OAR_API oar_tensor *oar_avg_pool2d(oar_tensor *x, const oar_pool_opts *opts);
/* Output bin i of n over a size s averages [floor(i*s/n), ceil((i+1)*s/n)). */
OAR_API oar_tensor *oar_adaptive_avg_pool2d(oar_tensor *x, int64_t out_h, int64_t out_w);

/* Batch norm of x [N, C, ...] over all dims but C. In training, batch statistics (biased
 * variance) normalize and running_mean / running_var (both or neither may be NULL) are updated
 * in place with momentum, using the unbiased variance as torch does; in inference they are
 * required and normalize. Running statistics may have any float dtype and never take
 * gradients. weight and bias ([C]) may be NULL. */
OAR_API oar_tensor *oar_batch_norm(oar_tensor *x, oar_tensor *weight, oar_tensor *bias,
                                   oar_tensor *running_mean, oar_tensor *running_var,
                                   bool training, double momentum, double eps);
/* Normalizes over the last normalized_ndim dims; weight/bias have those dims' shape or NULL. */
OAR_API oar_tensor *oar_layer_norm(oar_tensor *x, int normalized_ndim, oar_tensor *weight,
                                   oar_tensor *bias, double eps);
/* x [N, C, ...] normalized per sample over groups of C/groups channels; weight/bias [C] or NULL. */
OAR_API oar_tensor *oar_group_norm(oar_tensor *x, int64_t groups, oar_tensor *weight,
                                   oar_tensor *bias, double eps);
OAR_API oar_tensor *oar_softmax(oar_tensor *x, int dim);
OAR_API oar_tensor *oar_log_softmax(oar_tensor *x, int dim);
/* Zeroes elements with probability p and scales the rest by 1/(1-p); identity if !training,
 * zeros if p = 1. */
OAR_API oar_tensor *oar_dropout(oar_tensor *x, double p, bool training);
/* Rows of weight [num, dim] picked by integer indices (in [0, num)) of any shape. */
OAR_API oar_tensor *oar_embedding(oar_tensor *weight, oar_tensor *indices);
/* i64 result [..., num_classes]; num_classes = -1 uses max(indices) + 1. */
OAR_API oar_tensor *oar_one_hot(oar_tensor *indices, int64_t num_classes);

/* 6.6 Losses. */
typedef enum oar_reduction { OAR_REDUCE_MEAN = 0, OAR_REDUCE_SUM, OAR_REDUCE_NONE } oar_reduction;
typedef struct oar_ce_opts {
    oar_reduction reduction;
    int64_t ignore_index;       /* targets equal to it do not count; use -100 like torch */
    double label_smoothing;
} oar_ce_opts;
/* NULL opts: mean, ignore_index -100, no smoothing. */
OAR_API oar_ce_opts oar_ce_defaults(void);
/* logits [N, C] (or [N, C, d...], or [C] for one sample), target integer class indices [N]
 * (or [N, d...], or []). As torch: none gives per-sample losses (0 where ignored), mean
 * divides by the samples not ignored (NaN if none); smoothing eps gives
 * (1 - eps) * nll + eps * mean over classes of -log p. */
OAR_API oar_tensor *oar_cross_entropy(oar_tensor *logits, oar_tensor *target, const oar_ce_opts *opts);
/* The same options on log-probabilities: cross_entropy(x) == nll_loss(log_softmax(x)). */
OAR_API oar_tensor *oar_nll_loss(oar_tensor *log_probs, oar_tensor *target, const oar_ce_opts *opts);
/* Elementwise losses: target of the input's shape and dtype (torch would broadcast a
 * mismatch with a warning; oar refuses it). */
OAR_API oar_tensor *oar_mse_loss(oar_tensor *input, oar_tensor *target, oar_reduction r);
OAR_API oar_tensor *oar_l1_loss(oar_tensor *input, oar_tensor *target, oar_reduction r);
/* beta >= 0 (1 in torch); beta = 0 is the L1 loss. */
OAR_API oar_tensor *oar_smooth_l1_loss(oar_tensor *input, oar_tensor *target, oar_reduction r, double beta);
/* Numerically stable for any logits; target probabilities in [0, 1]. */
OAR_API oar_tensor *oar_bce_with_logits(oar_tensor *logits, oar_tensor *target, oar_reduction r);

/* 6.7 Shape and indexing. */
OAR_API oar_tensor *oar_concat(oar_tensor *const *xs, int n, int dim);
OAR_API oar_tensor *oar_stack(oar_tensor *const *xs, int n, int dim);
/* Splits into pieces of split_size along dim (the last may be smaller); chunk makes pieces of
 * ceil(size / chunks), so possibly fewer than chunks, like torch.chunk. Writes the pieces
 * (differentiable views, at most 64) into out and returns how many, or -1 on error; more
 * pieces than max_out is an error. With out == NULL it only returns the count. */
OAR_API int oar_split(oar_tensor *x, int64_t split_size, int dim, oar_tensor **out, int max_out);
OAR_API int oar_chunk(oar_tensor *x, int chunks, int dim, oar_tensor **out, int max_out);
OAR_API oar_tensor *oar_index_select(oar_tensor *x, int dim, oar_tensor *index);
OAR_API oar_tensor *oar_gather(oar_tensor *x, int dim, oar_tensor *index);
/* A copy of x with src added at index along dim (torch.Tensor.scatter_add). */
OAR_API oar_tensor *oar_scatter_add(oar_tensor *x, int dim, oar_tensor *index, oar_tensor *src);
typedef enum oar_pad_mode { OAR_PAD_CONSTANT = 0, OAR_PAD_REFLECT, OAR_PAD_REPLICATE } oar_pad_mode;
/* pads: (before, after) pairs starting from the LAST dim, as torch.nn.functional.pad. */
OAR_API oar_tensor *oar_pad(oar_tensor *x, const int64_t *pads, int n_pads, oar_pad_mode mode, double value);
OAR_API oar_tensor *oar_flip(oar_tensor *x, const int *dims, int n_dims);
OAR_API oar_tensor *oar_cumsum(oar_tensor *x, int dim);
/* k largest (or smallest) along dim: values and i64 indices (both new references). Ties
 * keep the lowest index first; NaN ranks above every number; sorted = false returns the
 * chosen elements in input order. */
OAR_API oar_status oar_topk(oar_tensor *x, int64_t k, int dim, bool largest, bool sorted,
                            oar_tensor **values, oar_tensor **indices);
OAR_API oar_tensor *oar_masked_fill(oar_tensor *x, oar_tensor *mask, double value);
OAR_API oar_tensor *oar_tril(oar_tensor *x, int64_t diagonal);
OAR_API oar_tensor *oar_triu(oar_tensor *x, int64_t diagonal);

/* ---------------------------------------------------------------- 7. runtime */

/* Threads used by oar's kernels and the libraries it calls (OpenBLAS, oneDNN). Defaults
 * to OAR_NUM_THREADS from the environment, else the number of cores. */
OAR_API oar_status oar_set_num_threads(int n);
OAR_API int oar_get_num_threads(void);

/* The global generator: the seed, and how many counters were used since seeding. */
OAR_API void oar_manual_seed(uint64_t seed);
typedef struct oar_rng_state { uint64_t seed, offset; } oar_rng_state;
OAR_API oar_rng_state oar_rng_get_state(void);
OAR_API void oar_rng_set_state(oar_rng_state s);

typedef struct oar_memory_stats {
    int64_t current_bytes;  /* in tensors now */
    int64_t peak_bytes;     /* most at once since start or reset */
    int64_t cached_bytes;   /* freed blocks kept for reuse */
    int64_t n_allocs;       /* allocations served */
} oar_memory_stats;
OAR_API oar_memory_stats oar_memory_stats_get(oar_device dev);
OAR_API void oar_memory_reset_peak(oar_device dev);
OAR_API void oar_memory_empty_cache(oar_device dev);

#ifdef __cplusplus
}
#endif
#endif /* OAR_H */
