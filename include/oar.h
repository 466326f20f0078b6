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
 *   8. Modules: parameters, buffers, children; initializers; the built-in layers
 *   9. Optimizers, gradient clipping, learning-rate schedules
 *  10. Data: datasets and a batching loader with background prefetch
 *  11. Files: safetensors, .npy, checkpoints
 *  12. The model zoo
 *  13. Static graph: compiling a function by tracing, control flow, export
 *  14. Inference: the predictor
 *  15. Profiling: step timer, op spans, summaries, Chrome trace; the NaN/Inf check
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
    OAR_ERR_NUMERIC,      /* NaN/Inf found by the check flag; a singular or non-converging matrix */
    OAR_ERR_INTERNAL      /* a bug in oar; please report it */
} oar_status;

OAR_API const char *oar_version(void);           /* "0.1.0" */
OAR_API const char *oar_last_error(void);        /* message of the last failure, "" if none */
OAR_API oar_status oar_last_status(void);        /* status of the last failure */
OAR_API void oar_clear_error(void);
OAR_API const char *oar_status_name(oar_status s);
/* For user code (modules, callbacks): records an error the way oar does; returns s. */
OAR_API oar_status oar_set_error(oar_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Warnings: misuse that is not the failure of the call at hand (an oar_scope_end without a
 * matching begin, tensors alive at exit with OAR_DEBUG_HANDLES=1) is reported once per kind, as
 * "oar warning: <message>" on stderr, or to fn (NULL restores stderr). */
typedef void (*oar_warning_fn)(const char *message, void *user);
OAR_API void oar_set_warning_handler(oar_warning_fn fn, void *user);

/* ---------------------------------------------------------------- 2. data types */

/* The numeric values are stored in files and by bindings: new dtypes are only ever appended.
 * i16, u16, u32 and u64 (interchange with ONNX, NumPy and torch.int16) are taken by casts, copies,
 * the shape and index ops, elementwise arithmetic, comparisons and bitwise ops, abs/neg, where,
 * sum/amax/amin/argmax/argmin and topk; other ops refuse them (docs/dtypes.md lists which). */
typedef enum oar_dtype {
    OAR_F32 = 0, OAR_F64, OAR_F16, OAR_BF16,
    OAR_I8, OAR_U8, OAR_I32, OAR_I64, OAR_BOOL,
    OAR_I16, OAR_U16, OAR_U32, OAR_U64,
    /* Low-bit storage types (ONNX's float8/float4/int4/int2, torch 2.x's float8): one element
     * per byte in memory (files pack the 4- and 2-bit ones); casts, copies and the shape and
     * index ops take them, arithmetic refuses them (docs/dtypes.md). */
    OAR_F8E4M3FN, OAR_F8E4M3FNUZ, OAR_F8E5M2, OAR_F8E5M2FNUZ, OAR_F8E8M0, OAR_F4E2M1,
    OAR_I4, OAR_U4, OAR_I2, OAR_U2,
    OAR_DTYPE_COUNT
} oar_dtype;

OAR_API const char *oar_dtype_name(oar_dtype dt);  /* "f32", "bf16", "u64", ... */
OAR_API size_t oar_dtype_size(oar_dtype dt);       /* bytes per element */
OAR_API bool oar_dtype_is_float(oar_dtype dt);
/* Scalar conversions; f32 -> f16/bf16 round to nearest even, NaN stays NaN. */
OAR_API uint16_t oar_f32_to_f16(float x);
OAR_API float oar_f16_to_f32(uint16_t h);
OAR_API uint16_t oar_f32_to_bf16(float x);
OAR_API float oar_bf16_to_f32(uint16_t h);
/* The low-bit dtypes' codes (the byte oar stores: the format's bits, or the integer's value):
 * decode gives the exact value (NaN for NaN codes, 0 for a dtype that is not low-bit);
 * encode rounds floats to nearest even (f8e8m0: up, to the next power of two, ONNX's default)
 * and, out of range, gives the largest finite value when saturate, else inf where the format
 * has it (f8e5m2) or NaN (f4e2m1 always saturates). Integers: saturate rounds half to even and
 * clips (QuantizeLinear's rule), else truncates toward zero and wraps (Cast's); NaN gives 0.
 * oar_cast does not saturate (torch's rule); ONNX's Cast saturates floats by default. */
OAR_API double oar_lowbit_decode(oar_dtype dt, uint8_t code);
OAR_API uint8_t oar_lowbit_encode(oar_dtype dt, double x, bool saturate);
OAR_API bool oar_dtype_is_lowbit(oar_dtype dt);
OAR_API int oar_dtype_bits(oar_dtype dt);          /* bits of information: 4 for u4, 16 for f16 */
OAR_API double oar_lowbit_max(oar_dtype dt);       /* the largest finite value (0 if not low-bit) */

typedef enum oar_device { OAR_CPU = 0, OAR_CUDA = 1 } oar_device;
/* CUDA: whether this build has it, how many GPUs this machine has (0 without a GPU or a
 * driver), and waiting for the work queued on the current stream. Kernels on a GPU run
 * asynchronously: an op returns once its kernel is queued, and errors of a kernel that
 * failed while running surface at the next call that waits (a copy to the host, item,
 * oar_synchronize). */
OAR_API bool oar_cuda_is_built(void);
OAR_API int oar_cuda_device_count(void);
OAR_API bool oar_cuda_is_available(void);  /* built and at least one GPU */
OAR_API oar_status oar_synchronize(oar_device dev);
/* TF32 tensor cores for f32 matrix products on CUDA: off by default (f32 results within
 * f32 rounding, as PyTorch >= 1.12); on trades 10-bit mantissa products for speed. */
OAR_API void oar_cuda_set_allow_tf32(bool allow);
OAR_API bool oar_cuda_get_allow_tf32(void);

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
/* The device the creation functions above put tensors on (OAR_CPU unless set; per thread,
 * like torch.set_default_device). *_like functions follow their argument's device. Random
 * tensors draw the same values on every device. */
OAR_API oar_status oar_set_default_device(oar_device dev);
OAR_API oar_device oar_get_default_device(void);
/* A copy of t on dev (a new view of t when it is there already), like Tensor.to(device):
 * differentiable, so gradients flow back to the source's device. */
OAR_API oar_tensor *oar_to(oar_tensor *t, oar_device dev);

/* Random tensors from the seeded counter-based generator (Philox-4x32-10): element i of a
 * call uses counter (offset + i), so values do not depend on the number of threads. */
OAR_API oar_tensor *oar_rand(const int64_t *shape, int ndim, oar_dtype dt);   /* U[0,1) */
OAR_API oar_tensor *oar_randn(const int64_t *shape, int ndim, oar_dtype dt);  /* N(0,1) */
OAR_API oar_tensor *oar_randint(int64_t low, int64_t high, const int64_t *shape, int ndim,
                                oar_dtype dt);                                 /* [low,high) */

/* References. */
OAR_API oar_tensor *oar_retain(oar_tensor *t);  /* returns t */
OAR_API void oar_release(oar_tensor *t);        /* NULL is fine */

/* Handles are checked. A handle is valid from the call that returned it until its last
 * reference goes: oar_release, the end of the scope that owns it (section 4), or the free of
 * the module, optimizer, dictionary or predictor that lent it. Every function taking a tensor
 * checks the handle first: given a freed one (used after release or after its scope ended, or
 * released twice) it fails with OAR_ERR_STATE and a message naming the misuse (pointers return
 * NULL, counts -1, void functions only set the error) instead of reading freed memory. A freed
 * tensor's memory waits in a per-thread quarantine of 1024 frees before it is reused, so a
 * late use is caught within that window; with OAR_DEBUG_HANDLES=1 in the environment (read at
 * the first tensor) freed tensors are never reused, so every late use is caught, tensors alive
 * are counted, and those still alive at exit are reported as a warning (memory grows: for
 * debugging only). Objects that hold others keep them alive or detect their loss: a compiled
 * function refuses to run once the optimizer it steps was freed. */
OAR_API bool oar_debug_handles(void);     /* whether OAR_DEBUG_HANDLES=1 is on */
OAR_API int64_t oar_live_tensors(void);   /* tensors alive now, in debug mode; -1 otherwise */

/* Properties (borrowed views of the tensor's metadata). */
OAR_API int oar_ndim(const oar_tensor *t);
OAR_API const int64_t *oar_shape(const oar_tensor *t);
OAR_API const int64_t *oar_strides(const oar_tensor *t);  /* in elements */
OAR_API int64_t oar_size(const oar_tensor *t, int dim);
OAR_API int64_t oar_numel(const oar_tensor *t);
OAR_API oar_dtype oar_dtype_of(const oar_tensor *t);
OAR_API oar_device oar_device_of(const oar_tensor *t);
OAR_API bool oar_is_contiguous(const oar_tensor *t);
/* Pointer to the first element (honours the view's offset; use strides to walk it). Host
 * tensors only: for a tensor on a GPU it fails; copy it with oar_to(t, OAR_CPU) first. */
OAR_API void *oar_data(oar_tensor *t);
/* The first element's address in the memory of the tensor's device (a device pointer for a
 * GPU tensor), for handing to other libraries; reading it from the host is the caller's
 * concern. Work oar queued on it may still be running: oar_synchronize first. */
OAR_API void *oar_device_ptr(oar_tensor *t);
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
/* torch.as_strided: a view of t's storage (sizes, nonnegative strides in elements, storage_offset -1:
 * t's own); differentiable for a contiguous t when the view stays inside t's elements. */
OAR_API oar_tensor *oar_as_strided(oar_tensor *t, const int64_t *size, const int64_t *stride, int ndim,
                                   int64_t storage_offset);
OAR_API oar_tensor *oar_unsqueeze(oar_tensor *t, int dim);

/* Copies. */
OAR_API oar_tensor *oar_contiguous(oar_tensor *t);      /* t itself (new reference) if contiguous */
OAR_API oar_tensor *oar_clone(oar_tensor *t);           /* always a fresh copy; differentiable */
OAR_API oar_tensor *oar_cast(oar_tensor *t, oar_dtype dt); /* differentiable between float types */
OAR_API oar_tensor *oar_detach(oar_tensor *t);          /* shares storage, outside autograd */
OAR_API oar_status oar_copy_(oar_tensor *dst, const oar_tensor *src); /* dst <- src, broadcasting, casting */
OAR_API oar_status oar_fill_(oar_tensor *dst, double value);
/* t reads and writes src's memory from now on (torch's Tensor.set_(src) for a source of t's
 * shape, dtype and device): t keeps its identity, gradient, hooks and requires_grad, so every
 * holder of t (modules, optimizers, data parallel) sees the move; its old values are dropped. */
OAR_API oar_status oar_set_storage_(oar_tensor *t, oar_tensor *src);

/* Printing: "tensor([[1.0000, 2.0000], ...], shape=[2, 2], dtype=f32)". Long tensors are
 * summarized with "...". Returns the length needed (snprintf style). */
OAR_API int oar_format(const oar_tensor *t, char *buf, size_t size);
OAR_API void oar_print(const oar_tensor *t);

/* ---------------------------------------------------------------- 4. scopes */

/* Every tensor created between begin and end belongs to the scope and is released at its end,
 * unless passed to oar_keep(), which hands it to the enclosing scope (or to the caller when
 * there is none). Scopes nest; they are per thread. oar_release() on a scoped tensor is safe.
 * A tensor used after its scope ended is a dangling handle, reported by the next call given it
 * (section 3). Unbalanced scopes are warned about once (oar_set_warning_handler): an
 * oar_scope_end with no scope open (ignored), and scopes nested 1000 deep (a begin without
 * its end at every step, which keeps every tensor made since). Tensors made outside any scope
 * are the caller's to release: run with OAR_DEBUG_HANDLES=1 to have those alive at exit
 * reported. */
OAR_API void oar_scope_begin(void);
OAR_API void oar_scope_end(void);
OAR_API oar_tensor *oar_keep(oar_tensor *t);  /* returns t */
/* For bindings whose objects own their tensors by reference (Python): code run between
 * suspend and resume sees no open scope, so the tensors it makes belong to it, not to a scope
 * oar opened around it (a traced function's) that would release them at its end. */
OAR_API void *oar_scope_suspend(void);
OAR_API void oar_scope_resume(void *token);

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

/* Custom functions (a front end's torch.autograd.Function): the caller computes y from inputs
 * without autograd, and oar_custom_function returns y (a view of it) recorded as output `output`
 * of a node over inputs[0..n_inputs-1]. When backward reaches that output, backward(user, output,
 * grad_output, grad_inputs, n_inputs) runs and puts a new reference (or NULL: no gradient) in
 * each grad_inputs[i], shaped like inputs[i]; a status other than OAR_OK fails the backward (set
 * the error first). Inside a traced function the ops backward calls are recorded like any others.
 * release(user) runs once: when the last node or program holding the function is freed (from any
 * thread), or before returning when the call fails. Without grad mode, or with no input requiring grad, y comes back unrecorded. */
typedef oar_status (*oar_custom_backward)(void *user, int output, oar_tensor *grad_output,
                                          oar_tensor **grad_inputs, int n_inputs);
OAR_API oar_tensor *oar_custom_function(oar_tensor *y, int output, oar_tensor *const *inputs, int n_inputs,
                                        oar_custom_backward backward, void (*release)(void *user), void *user);

/* Anomaly detection (torch.autograd.detect_anomaly): when on, every gradient rule's results are
 * scanned during backward, and the first rule that returns a NaN fails the backward with
 * OAR_ERR_NUMERIC: "Function '<op>Backward' returned nan values in its <i>th output." (torch's
 * words; i is the op's input). Process-wide, off by default; costs one pass over each gradient. */
OAR_API void oar_set_detect_anomaly(bool on);
OAR_API bool oar_detect_anomaly_enabled(void);

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
/* Rounded division: div_trunc rounds a / b toward zero (C's integer division, ONNX's Div of
 * integers, torch.div(rounding_mode="trunc")), div_floor toward -inf (torch.floor_divide, Python's
 * //). Integers divide exactly (u64 as unsigned; INT64_MIN / -1 wraps) and x / 0 is 0, NumPy's
 * value (torch raises; oar's Python layer does); floats give trunc / floor of the float
 * quotient. No gradient. */
OAR_API oar_tensor *oar_div_trunc(oar_tensor *a, oar_tensor *b);
OAR_API oar_tensor *oar_div_floor(oar_tensor *a, oar_tensor *b);
OAR_API oar_tensor *oar_pow(oar_tensor *a, oar_tensor *b);
OAR_API oar_tensor *oar_maximum(oar_tensor *a, oar_tensor *b);
OAR_API oar_tensor *oar_minimum(oar_tensor *a, oar_tensor *b);
/* Scalar forms, as torch's operators with a Python number: the scalar takes a's dtype (an
 * integer or bool tensor takes only a scalar its dtype holds exactly: cast to a float dtype
 * first otherwise). The r forms put the scalar first: rsub is s - a, rdiv s / a, rpow s^a. */
OAR_API oar_tensor *oar_add_scalar(oar_tensor *a, double s);      /* a + s */
OAR_API oar_tensor *oar_sub_scalar(oar_tensor *a, double s);      /* a - s */
OAR_API oar_tensor *oar_rsub_scalar(oar_tensor *a, double s);     /* s - a */
OAR_API oar_tensor *oar_mul_scalar(oar_tensor *a, double s);      /* a * s */
OAR_API oar_tensor *oar_div_scalar(oar_tensor *a, double s);      /* a / s */
OAR_API oar_tensor *oar_rdiv_scalar(oar_tensor *a, double s);     /* s / a */
OAR_API oar_tensor *oar_pow_scalar(oar_tensor *a, double s);      /* a ^ s */
OAR_API oar_tensor *oar_rpow_scalar(oar_tensor *a, double s);     /* s ^ a */
OAR_API oar_tensor *oar_maximum_scalar(oar_tensor *a, double s);  /* torch.clamp_min, NaN kept */
OAR_API oar_tensor *oar_minimum_scalar(oar_tensor *a, double s);  /* torch.clamp_max, NaN kept */
OAR_API oar_tensor *oar_eq_scalar(oar_tensor *a, double s);       /* bool results */
OAR_API oar_tensor *oar_ne_scalar(oar_tensor *a, double s);
OAR_API oar_tensor *oar_lt_scalar(oar_tensor *a, double s);
OAR_API oar_tensor *oar_le_scalar(oar_tensor *a, double s);
OAR_API oar_tensor *oar_gt_scalar(oar_tensor *a, double s);
OAR_API oar_tensor *oar_ge_scalar(oar_tensor *a, double s);
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
OAR_API oar_tensor *oar_erfc(oar_tensor *x);
OAR_API oar_tensor *oar_asin(oar_tensor *x);
OAR_API oar_tensor *oar_acos(oar_tensor *x);
OAR_API oar_tensor *oar_atan(oar_tensor *x);
OAR_API oar_tensor *oar_sinh(oar_tensor *x);
OAR_API oar_tensor *oar_asinh(oar_tensor *x);
OAR_API oar_tensor *oar_atanh(oar_tensor *x);
OAR_API oar_tensor *oar_expm1(oar_tensor *x);
OAR_API oar_tensor *oar_exp2(oar_tensor *x);
OAR_API oar_tensor *oar_acosh(oar_tensor *x);
OAR_API oar_tensor *oar_cosh(oar_tensor *x);
/* the gamma family, torch's poles: lgamma +inf at 0 and the negative integers, digamma +-inf at 0
 * and NaN at the negative integers; polygamma(n, x) is digamma's n-th derivative (n >= 0) */
OAR_API oar_tensor *oar_lgamma(oar_tensor *x);
OAR_API oar_tensor *oar_digamma(oar_tensor *x);
OAR_API oar_tensor *oar_polygamma(int64_t n, oar_tensor *x);
OAR_API oar_tensor *oar_erfinv(oar_tensor *x); /* +-inf at +-1, NaN outside [-1, 1] */
/* bitwise ops on integer tensors (and/or/xor take bool too); gcd and lcm are nonnegative */
OAR_API oar_tensor *oar_bitwise_not(oar_tensor *x);
OAR_API oar_tensor *oar_bitwise_and(oar_tensor *a, oar_tensor *b);
OAR_API oar_tensor *oar_bitwise_or(oar_tensor *a, oar_tensor *b);
OAR_API oar_tensor *oar_bitwise_xor(oar_tensor *a, oar_tensor *b);
OAR_API oar_tensor *oar_gcd(oar_tensor *a, oar_tensor *b);
OAR_API oar_tensor *oar_lcm(oar_tensor *a, oar_tensor *b);
/* torch.special's Bessel functions, in double whatever the float dtype (src/ops/special_bessel.h):
 * i0, i1 (and modified_bessel_i0/i1, the same values without a gradient), their scaled forms
 * i0e = e^-|x| i0 and i1e; K0, K1 (+inf at 0, NaN below) and e^x K0, e^x K1; J0, J1; Y0, Y1 (-inf at
 * 0, NaN below); sin(x)/x; Airy's Ai. Only i0, i0e, i1 and i1e are differentiable (as in torch). */
OAR_API oar_tensor *oar_i0(oar_tensor *x);
OAR_API oar_tensor *oar_i0e(oar_tensor *x);
OAR_API oar_tensor *oar_i1(oar_tensor *x);
OAR_API oar_tensor *oar_i1e(oar_tensor *x);
OAR_API oar_tensor *oar_modified_bessel_i0(oar_tensor *x);
OAR_API oar_tensor *oar_modified_bessel_i1(oar_tensor *x);
OAR_API oar_tensor *oar_modified_bessel_k0(oar_tensor *x);
OAR_API oar_tensor *oar_modified_bessel_k1(oar_tensor *x);
OAR_API oar_tensor *oar_scaled_modified_bessel_k0(oar_tensor *x);
OAR_API oar_tensor *oar_scaled_modified_bessel_k1(oar_tensor *x);
OAR_API oar_tensor *oar_bessel_j0(oar_tensor *x);
OAR_API oar_tensor *oar_bessel_j1(oar_tensor *x);
OAR_API oar_tensor *oar_bessel_y0(oar_tensor *x);
OAR_API oar_tensor *oar_bessel_y1(oar_tensor *x);
OAR_API oar_tensor *oar_spherical_bessel_j0(oar_tensor *x);
OAR_API oar_tensor *oar_airy_ai(oar_tensor *x);
/* the regularized incomplete gamma functions P(a, x) and Q(a, x) = 1 - P (torch.igamma, igammac),
 * differentiable in x only; Hurwitz's zeta(x, q) = sum_k (k + q)^-x, differentiable in q only */
OAR_API oar_tensor *oar_gammainc(oar_tensor *a, oar_tensor *x);
OAR_API oar_tensor *oar_gammaincc(oar_tensor *a, oar_tensor *x);
OAR_API oar_tensor *oar_zeta(oar_tensor *x, oar_tensor *q);
/* Gamma(alpha, 1) draws, one per element of alpha (f32/f64; torch._standard_gamma; NaN for alpha <= 0),
 * from the global generator; differentiable in alpha through oar_standard_gamma_grad(alpha, x), the
 * reparameterization derivative dx/dalpha of a draw x at its quantile (torch._standard_gamma_grad) */
OAR_API oar_tensor *oar_standard_gamma(oar_tensor *alpha);
OAR_API oar_tensor *oar_standard_gamma_grad(oar_tensor *alpha, oar_tensor *x);
/* orthogonal polynomials p_n(x), the degree n a float tensor broadcast with x (truncated; 0 below 0),
 * as torch.special: Chebyshev T, U, V, W and the shifted ones (p_n(2x - 1)), Hermite H and He,
 * Laguerre L, Legendre P. Not differentiable. */
OAR_API oar_tensor *oar_chebyshev_polynomial_t(oar_tensor *x, oar_tensor *n);
OAR_API oar_tensor *oar_chebyshev_polynomial_u(oar_tensor *x, oar_tensor *n);
OAR_API oar_tensor *oar_chebyshev_polynomial_v(oar_tensor *x, oar_tensor *n);
OAR_API oar_tensor *oar_chebyshev_polynomial_w(oar_tensor *x, oar_tensor *n);
OAR_API oar_tensor *oar_shifted_chebyshev_polynomial_t(oar_tensor *x, oar_tensor *n);
OAR_API oar_tensor *oar_shifted_chebyshev_polynomial_u(oar_tensor *x, oar_tensor *n);
OAR_API oar_tensor *oar_shifted_chebyshev_polynomial_v(oar_tensor *x, oar_tensor *n);
OAR_API oar_tensor *oar_shifted_chebyshev_polynomial_w(oar_tensor *x, oar_tensor *n);
OAR_API oar_tensor *oar_hermite_polynomial_h(oar_tensor *x, oar_tensor *n);
OAR_API oar_tensor *oar_hermite_polynomial_he(oar_tensor *x, oar_tensor *n);
OAR_API oar_tensor *oar_laguerre_polynomial_l(oar_tensor *x, oar_tensor *n);
OAR_API oar_tensor *oar_legendre_polynomial_p(oar_tensor *x, oar_tensor *n);
/* a << b and a >> b on integer tensors (not bool), NumPy broadcasting; >> is arithmetic on signed
 * types. A shift by b outside [0, width of the dtype) gives 0 (>> of a negative value: -1), as
 * NumPy and torch >= 2.1 define it. */
OAR_API oar_tensor *oar_bitwise_left_shift(oar_tensor *a, oar_tensor *b);
OAR_API oar_tensor *oar_bitwise_right_shift(oar_tensor *a, oar_tensor *b);
OAR_API oar_tensor *oar_atan2(oar_tensor *y, oar_tensor *x); /* the angle of (x, y), in (-pi, pi] */
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
/* Linear algebra on LAPACK (builds with OpenBLAS; elsewhere these return NULL with an error): square
 * f32/f64 matrices batched over leading dims. det's gradient needs invertible matrices; cholesky
 * takes a symmetric positive-definite input and returns the lower factor. */
OAR_API oar_tensor *oar_linalg_det(oar_tensor *a);
OAR_API oar_tensor *oar_linalg_inv(oar_tensor *a);
OAR_API oar_tensor *oar_linalg_cholesky(oar_tensor *a);
/* Solves A X = B for X (B [..., n, k] with A's batch dims); a singular A is an error. */
OAR_API oar_tensor *oar_linalg_solve(oar_tensor *a, oar_tensor *b);
/* Solves A X = B reading A's upper (or lower) triangle, its diagonal taken as ones when unitriangular. */
OAR_API oar_tensor *oar_linalg_solve_triangular(oar_tensor *a, oar_tensor *b, bool upper, bool unitriangular);
/* P L U = A (any m x n): LU packs L (unit diagonal, below) and U; pivots are i32, 1-based, LAPACK's.
 * A zero pivot is an error. The two outputs are borrowed from the current scope. */
OAR_API oar_status oar_linalg_lu_factor(oar_tensor *a, oar_tensor **lu, oar_tensor **pivots);
/* Solves A X = B (A^T X = B when adjoint) from oar_linalg_lu_factor's outputs. */
OAR_API oar_tensor *oar_linalg_lu_solve(oar_tensor *lu, oar_tensor *pivots, oar_tensor *b, bool adjoint);
/* Symmetric A = V diag(L) V^T, L ascending, reading A's lower (upper when asked) triangle. Vectors are
 * unique up to sign. Outputs borrowed from the current scope. */
OAR_API oar_status oar_linalg_eigh(oar_tensor *a, bool upper, oar_tensor **eigenvalues, oar_tensor **eigenvectors);
/* A = U diag(S) Vh, S descending; U [m, m], Vh [n, n] when full_matrices, else [m, k], [k, n]. */
OAR_API oar_status oar_linalg_svd(oar_tensor *a, bool full_matrices, oar_tensor **u, oar_tensor **s, oar_tensor **vh);
/* A = Q R; mode "reduced" (NULL), "complete" or "r" (Q empty). */
OAR_API oar_status oar_linalg_qr(oar_tensor *a, const char *mode, oar_tensor **q, oar_tensor **r);
/* The least-squares (minimum-norm when rank-deficient) X of A X = B; LAPACK's driver "gelsy" (NULL,
 * torch's default), "gelsd", "gelss" or "gels" (full rank only). Differentiable for full-rank A. */
OAR_API oar_tensor *oar_linalg_lstsq(oar_tensor *a, oar_tensor *b, const char *driver);
/* exp(A) of square matrices (scaling and squaring with a Padé approximant). */
OAR_API oar_tensor *oar_linalg_matrix_exp(oar_tensor *a);
/* Cholesky reading A's lower triangle without failing: info (i32 per matrix) is k > 0 where the
 * leading minor of order k is not positive-definite. Outputs borrowed from the current scope. */
OAR_API oar_status oar_linalg_cholesky_ex(oar_tensor *a, oar_tensor **l, oar_tensor **info);
/* Symmetric indefinite A = P L D L^T P^T from its lower triangle (Bunch-Kaufman, sytrf): LD packs L
 * and D's 1x1/2x2 blocks, pivots (i32) are LAPACK's, info k > 0 where D[k-1, k-1] is zero. */
OAR_API oar_status oar_linalg_ldl_factor(oar_tensor *a, oar_tensor **ld, oar_tensor **pivots, oar_tensor **info);
/* Solves A X = B from oar_linalg_ldl_factor's LD and pivots. */
OAR_API oar_tensor *oar_linalg_ldl_solve(oar_tensor *ld, oar_tensor *pivots, oar_tensor *b);
/* A = Q R with Q as Householder reflectors (geqrf): qr holds R on and above the diagonal and the
 * reflectors below; tau [..., min(m, n)]. */
OAR_API oar_status oar_linalg_geqrf(oar_tensor *a, oar_tensor **qr, oar_tensor **tau);
/* The first n columns of the product of the reflectors in a [..., m, n] (m >= n) with tau [..., k]. */
OAR_API oar_tensor *oar_linalg_householder_product(oar_tensor *a, oar_tensor *tau);
/* Q C (C Q when !left; Q^T when transpose) for Q the product of a's reflectors, without forming Q. */
OAR_API oar_tensor *oar_linalg_ormqr(oar_tensor *a, oar_tensor *tau, oar_tensor *c, bool left, bool transpose);
/* The general eigenproblem A V = V diag(L) of real square A (geev): L and V are complex, returned as
 * their real and imaginary parts; vectors of unit norm, LAPACK's order. Outputs borrowed. */
OAR_API oar_status oar_linalg_eig(oar_tensor *a, oar_tensor **l_re, oar_tensor **l_im, oar_tensor **v_re,
                                  oar_tensor **v_im);
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
    bool exclude_pad;           /* avg pooling: divide by the real elements only (torch's
                                   count_include_pad=False); false counts padding, like torch */
} oar_pool_opts;
/* Pooling over the last two dims of [N, C, H, W] or [C, H, W]. opts is required (the kernel
 * size); padding may be at most half the kernel; windows and ceil_mode follow torch. */
OAR_API oar_tensor *oar_max_pool2d(oar_tensor *x, const oar_pool_opts *opts);
OAR_API oar_tensor *oar_avg_pool2d(oar_tensor *x, const oar_pool_opts *opts);
/* Output bin i of n over a size s averages [floor(i*s/n), ceil((i+1)*s/n)). */
OAR_API oar_tensor *oar_adaptive_avg_pool2d(oar_tensor *x, int64_t out_h, int64_t out_w);

/* Sampling and detection (torchvision's semantics). grid_sample: input [N, C, H, W] read at grid
 * [N, Ho, Wo, 2] ((x, y) in [-1, 1]) -> [N, C, Ho, Wo]; mode "bilinear" or "nearest",
 * padding_mode "zeros", "border" or "reflection" (NULL: the first of each). */
OAR_API oar_tensor *oar_grid_sample(oar_tensor *input, oar_tensor *grid, const char *mode, const char *padding_mode,
                                    bool align_corners);
/* roi_align: boxes [K, 5] rows (batch index, x1, y1, x2, y2) -> [K, C, out_h, out_w];
 * sampling_ratio -1 is adaptive (ceil(box side / bins) samples per bin side). */
OAR_API oar_tensor *oar_roi_align(oar_tensor *input, oar_tensor *boxes, int64_t out_h, int64_t out_w,
                                  double spatial_scale, int64_t sampling_ratio, bool aligned);
/* nms: boxes [N, 4] (x1, y1, x2, y2), scores [N] -> *keep [N] int64: the kept indices by decreasing
 * score, then -1; *count: a 0-d int64, how many are kept. Both are new references the caller
 * releases. */
OAR_API oar_status oar_nms(oar_tensor *boxes, oar_tensor *scores, double iou_threshold, oar_tensor **keep,
                           oar_tensor **count);

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
/* softmax(q kᵀ * scale, -inf where mask [L, S] is true or, if causal, key j > query i) v, one op:
 * q [..., L, D], k [..., S, D], v [..., S, Dv] with equal leading dims; mask bool or NULL. */
OAR_API oar_tensor *oar_scaled_dot_product_attention(oar_tensor *q, oar_tensor *k, oar_tensor *v,
                                                     oar_tensor *mask, double scale, bool causal);
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
/* The CTC loss of each sample, [N] (torch's ctc_loss with reduction 'none'): log_probs [T, N, C]
 * f32/f64; targets i32/i64, padded [N, S] or the samples' labels concatenated [sum of lengths];
 * input_lengths and target_lengths i32/i64 [N]. Labels lie in [0, C) and are not the blank. A
 * target no alignment fits gives inf, or 0 (and a zero gradient) with zero_infinity. The
 * gradient is the exact derivative with respect to log_probs (torch's kernel adds exp(log_probs);
 * through log_softmax the two agree). Reduce with ops: torch's 'mean' divides each loss by its
 * target length (at least 1) before the mean. */
OAR_API oar_tensor *oar_ctc_loss(oar_tensor *log_probs, oar_tensor *targets, oar_tensor *input_lengths,
                                 oar_tensor *target_lengths, int64_t blank, bool zero_infinity);

/* Classification accuracy: the fraction of samples whose target class is among the k largest
 * logits (k = 1: argmax == target, the first maximum on ties, like torch), as an f64 scalar
 * tensor (oar_item reads it). logits [N, C] floating, target [N] integer; no gradient. Made of
 * ops, so it works in traced functions too. */
OAR_API oar_tensor *oar_accuracy(oar_tensor *logits, oar_tensor *target, int64_t k);

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
/* torch.scatter_reduce: reduce is "sum", "prod", "mean", "amax" or "amin"; index and src of one shape;
 * include_self false: the slots src reaches start from src alone. Differentiable in x and src. */
OAR_API oar_tensor *oar_scatter_reduce(oar_tensor *x, int dim, oar_tensor *index, oar_tensor *src, const char *reduce,
                                       bool include_self);
typedef enum oar_pad_mode { OAR_PAD_CONSTANT = 0, OAR_PAD_REFLECT, OAR_PAD_REPLICATE } oar_pad_mode;
/* pads: (before, after) pairs starting from the LAST dim, as torch.nn.functional.pad. */
OAR_API oar_tensor *oar_pad(oar_tensor *x, const int64_t *pads, int n_pads, oar_pad_mode mode, double value);
OAR_API oar_tensor *oar_flip(oar_tensor *x, const int *dims, int n_dims);
OAR_API oar_tensor *oar_cumsum(oar_tensor *x, int dim);
/* torch.cumprod; integers and bool give int64. Its gradient is exact where the input has zeros. */
OAR_API oar_tensor *oar_cumprod(oar_tensor *x, int dim);
/* The indices of torch.cummax / cummin (ties: the later index; NaN holds) and of torch.mode (the
 * smallest of the most frequent values, its last position; dim removed). The values are
 * oar_gather(x, dim, index) (unsqueezed along dim for argmode): differentiable through the gather. */
OAR_API oar_tensor *oar_cumargmax(oar_tensor *x, int dim);
OAR_API oar_tensor *oar_cumargmin(oar_tensor *x, int dim);
OAR_API oar_tensor *oar_argmode(oar_tensor *x, int dim);
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
/* Results independent of the thread count: on, kernels whose sums split work by the number of
 * threads decline (oneDNN's convolution weight gradient) and GEMMs split into fixed blocks, so
 * a training run gives bit-identical parameters at 1 and at N threads. Off by default (the
 * declined kernels are faster); OAR_DETERMINISTIC=1 turns it on at start. Set it before
 * compiling: a compiled step keeps the kernels chosen when it was traced. */
OAR_API void oar_set_deterministic(bool on);
OAR_API bool oar_get_deterministic(void);
OAR_API int oar_get_num_threads(void);

/* The CPU instruction set oar may use (docs/cpu-isa.md). The cap applies to every runtime CPU
 * choice: which of oar's kernels run (AVX2/FMA, AVX-512), the GEMM backend rule, the direct-conv
 * rule, tile widths, and the ISA oneDNN may use. Default: OAR_CPU_ISA from the environment
 * ("generic", "avx2" or "avx512"), else the best the CPU has. oar_set_cpu_isa refuses an ISA
 * the CPU lacks (OAR_ERR_UNSUPPORTED) and applies to ops dispatched afterwards; programs
 * compiled before keep their kernels. oneDNN's own cap is fixed at its first use: if oar's cap
 * is later lowered below it, oar stops calling oneDNN (its kernels decline) rather than let
 * it run above the cap. OpenBLAS picks its kernels when it loads (OPENBLAS_CORETYPE); oar
 * cannot change that, and `oar info` reports it. */
typedef enum oar_cpu_isa {
    OAR_CPU_ISA_GENERIC, /* portable C only: reference and compiler-vectorized kernels */
    OAR_CPU_ISA_AVX2,    /* AVX2 + FMA */
    OAR_CPU_ISA_AVX512   /* AVX-512F on top of AVX2 + FMA */
} oar_cpu_isa;
OAR_API oar_status oar_set_cpu_isa(oar_cpu_isa isa);
OAR_API oar_cpu_isa oar_get_cpu_isa(void);    /* the cap in use */
OAR_API oar_cpu_isa oar_cpu_isa_native(void); /* the best this CPU has */
OAR_API const char *oar_cpu_isa_name(oar_cpu_isa isa); /* "generic", "avx2", "avx512" */
/* The ISA named name (case-insensitive); OAR_ERR_INVALID_ARG naming the choices otherwise. */
OAR_API oar_status oar_cpu_isa_from_name(const char *name, oar_cpu_isa *out);
OAR_API const char *oar_cpu_model(void); /* the CPU's brand string; "" where unknown */
/* The flags that matter to oar and its libraries, space-separated ("avx2 fma avx512f ..."). */
OAR_API const char *oar_cpu_flags(void);
/* Data cache sizes in bytes, one instance of each level (a core's L1d and L2; the L3 a core
 * shares): Linux's sysfs, else CPUID, else 32 KiB / 1 MiB / 8 MiB. Choices sized to a cache
 * read oar_get_cpu_caches (the batch tiles of compiled CPU programs: docs/static-graph.md) when
 * they are made; oar_set_cpu_caches replaces the sizes for choices made afterwards (tests, or a
 * CPU that reports them wrongly), NULL goes back to the detected ones; INVALID_ARG for a size
 * <= 0. */
typedef struct oar_cpu_caches { int64_t l1d, l2, l3; } oar_cpu_caches;
OAR_API oar_cpu_caches oar_get_cpu_caches(void);
OAR_API oar_cpu_caches oar_cpu_caches_detected(void);
OAR_API oar_status oar_set_cpu_caches(const oar_cpu_caches *c);

/* The optional libraries of this build, for bug reports (`oar info`): index 0..count-1 gives
 * OpenBLAS, oneDNN, cJSON, zlib, MPI and CUDA in that order. */
typedef struct oar_library_info {
    const char *name;  /* "OpenBLAS", "oneDNN", "cJSON", "zlib", "MPI", "CUDA" */
    bool found;        /* detected at configure time and built in */
    char version[48];  /* the library's own version where it reports one, else "" */
    char detail[200];  /* what else matters: OpenBLAS's core type and build config, oneDNN's ISA, ... */
    int isa;           /* the oar_cpu_isa level its code runs at; -1 where unknown or not CPU code */
} oar_library_info;
OAR_API int oar_library_count(void);
OAR_API oar_status oar_library_info_get(int i, oar_library_info *out);

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
    int64_t n_frees;        /* blocks given back */
    int64_t allocated_bytes;/* bytes served by all allocations since start (cumulative) */
    int64_t n_cache_hits;   /* allocations served from the cache, without the system */
    int64_t reserved_bytes; /* held from the system: in tensors + cached */
    double fragmentation;   /* cached / reserved: the share held but not in use */
    int64_t n_oom_retries;  /* times the cache was emptied to retry a failed allocation */
} oar_memory_stats;
OAR_API oar_memory_stats oar_memory_stats_get(oar_device dev);
OAR_API void oar_memory_reset_peak(oar_device dev);
OAR_API void oar_memory_empty_cache(oar_device dev);
/* Caps the bytes tensors of dev may hold at once (0: no cap, the default). An allocation past
 * the cap fails with OAR_ERR_OOM, as if the machine had that much memory: for sharing a
 * machine, and for testing how a program handles running out. */
OAR_API oar_status oar_memory_set_limit(oar_device dev, int64_t bytes);


/* ---------------------------------------------------------------- 8. modules */

/* A module is parameters + buffers + child modules + a forward function, like torch.nn.Module.
 * Names are dotted paths ("layers.0.weight"). oar_module_free releases the whole tree.
 * Tensors returned by forward follow the usual rule (new references, scoped if in a scope);
 * parameters and buffers returned by lookups are borrowed from the module. */
typedef struct oar_module oar_module;

/* What a module type does. forward writes n_out new references into out. oar_forward runs it
 * inside a scope of its own, so the temporaries it makes are released when it returns, whether
 * or not it opens a scope itself (a scope it leaves open is closed after it, with a warning);
 * its outputs go to the caller's scope. */
typedef struct oar_module_ops {
    const char *type_name;  /* "Linear", "Sequential", "MyBlock", ... */
    oar_status (*forward)(oar_module *self, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out);
    void (*destroy)(void *state);                                  /* frees state; may be NULL */
    int (*describe)(const oar_module *self, char *buf, size_t size); /* "in=4, out=5"; may be NULL */
} oar_module_ops;

/* A user-defined module: ops must outlive the module; state is passed back by oar_module_state,
 * which takes a const module so that describe can read it too. */
OAR_API oar_module *oar_module_new(const oar_module_ops *ops, void *state);
OAR_API void *oar_module_state(const oar_module *m);
OAR_API const char *oar_module_type(const oar_module *m);
OAR_API void oar_module_free(oar_module *m);
/* Registration takes a reference to t (parameters get requires_grad) / ownership of child. */
OAR_API oar_status oar_module_add_parameter(oar_module *m, const char *name, oar_tensor *t);
OAR_API oar_status oar_module_add_buffer(oar_module *m, const char *name, oar_tensor *t);
OAR_API oar_status oar_module_add_child(oar_module *m, const char *name, oar_module *child);
/* Lookups by dotted path (borrowed; NULL with an error when absent). */
OAR_API oar_tensor *oar_module_get(oar_module *m, const char *path);      /* parameter or buffer */
OAR_API oar_module *oar_module_child(oar_module *m, const char *path);
/* Replaces the tensor registered under path, keeping its name (loading checkpoints). */
OAR_API oar_status oar_module_set(oar_module *m, const char *path, oar_tensor *t);

/* Forward: one input and one output, or several of each. */
OAR_API oar_tensor *oar_forward(oar_module *m, oar_tensor *x);
OAR_API oar_status oar_forward_n(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out);

/* Every parameter (or buffer) of the tree, depth first in registration order. */
OAR_API int oar_module_num_parameters(oar_module *m);
OAR_API oar_tensor *oar_module_parameter(oar_module *m, int i, const char **name); /* borrowed */
OAR_API int oar_module_num_buffers(oar_module *m);
OAR_API oar_tensor *oar_module_buffer(oar_module *m, int i, const char **name);
OAR_API int64_t oar_module_count_elements(oar_module *m, bool trainable_only);

OAR_API void oar_module_train(oar_module *m, bool training); /* recursive; eval is train(false) */
/* Moves every parameter and buffer (and their gradients) to dev in place, like module.to():
 * handles stay valid, so do it before making the optimizer, whose state is made on the
 * parameters' device. */
OAR_API oar_status oar_module_to(oar_module *m, oar_device dev);
OAR_API bool oar_module_is_training(const oar_module *m);
OAR_API void oar_module_zero_grad(oar_module *m);
/* Freezes (requires_grad false) or unfreezes every parameter whose path starts with prefix
 * ("" for all). */
OAR_API oar_status oar_module_set_requires_grad(oar_module *m, const char *prefix, bool requires_grad);
/* A readable tree, like torch's repr: "Sequential(\n  (0): Linear(in_features=4, out_features=8, bias=true)\n ...)". */
OAR_API int oar_module_format(const oar_module *m, char *buf, size_t size);
OAR_API void oar_module_print(const oar_module *m);

/* Initializers: fill t in place (outside autograd) from the global generator. fan_in and
 * fan_out follow torch: dims [out, in, k...] give fan_in = in * prod(k). */
typedef enum oar_fan_mode { OAR_FAN_IN = 0, OAR_FAN_OUT } oar_fan_mode;
OAR_API oar_status oar_init_uniform_(oar_tensor *t, double low, double high);
OAR_API oar_status oar_init_normal_(oar_tensor *t, double mean, double std);
OAR_API oar_status oar_init_constant_(oar_tensor *t, double value); /* zeros_/ones_ are 0 and 1 */
OAR_API oar_status oar_init_xavier_uniform_(oar_tensor *t, double gain);
OAR_API oar_status oar_init_xavier_normal_(oar_tensor *t, double gain);
/* a: the negative slope after the layer (0 for ReLU); gain sqrt(2 / (1 + a^2)). */
OAR_API oar_status oar_init_kaiming_uniform_(oar_tensor *t, double a, oar_fan_mode mode);
OAR_API oar_status oar_init_kaiming_normal_(oar_tensor *t, double a, oar_fan_mode mode);
OAR_API oar_status oar_init_orthogonal_(oar_tensor *t, double gain);

/* Built-in layers, named, shaped and printed as in torch, with f32 parameters initialized as
 * torch does (from oar's generator): Linear and convolutions U(-1/sqrt(fan_in), 1/sqrt(fan_in))
 * for "weight" and "bias", Embedding N(0, 1), normalization weights ones and biases zeros.
 * Convolutions also take one unbatched sample ([C, L] / [C, H, W]); their zero option fields
 * mean torch's defaults, as for the ops. */
OAR_API oar_module *oar_nn_linear(int64_t in, int64_t out, bool bias);
OAR_API oar_module *oar_nn_conv1d(int64_t in, int64_t out, int64_t kernel, const oar_conv_opts *opts, bool bias);
OAR_API oar_module *oar_nn_conv2d(int64_t in, int64_t out, int64_t kernel, const oar_conv_opts *opts, bool bias);
OAR_API oar_module *oar_nn_conv_transpose2d(int64_t in, int64_t out, int64_t kernel, const oar_conv_opts *opts,
                                            bool bias);
/* affine: "weight" and "bias". track: buffers "running_mean", "running_var" and the i64 scalar
 * "num_batches_tracked", updated in training and used in evaluation; without them batch
 * statistics are used always. eps as given (torch: 1e-5); momentum in [0, 1] (torch: 0.1), or
 * negative for torch's momentum=None (a cumulative average). BatchNorm1d takes [N, C] or
 * [N, C, L], BatchNorm2d [N, C, H, W]. */
OAR_API oar_module *oar_nn_batch_norm1d(int64_t features, double eps, double momentum, bool affine, bool track);
OAR_API oar_module *oar_nn_batch_norm2d(int64_t features, double eps, double momentum, bool affine, bool track);
/* LayerNorm also takes two inputs a, b through oar_forward_n with two outputs: out[0] = the
 * normalized a + b, out[1] = a + b (a pre-LN transformer's residual stream), in one pass over
 * each row (op add_layer_norm) when a and b share shape and dtype, with the bits of add and the
 * one-input form. */
OAR_API oar_module *oar_nn_layer_norm(const int64_t *shape, int ndim, double eps, bool affine);
OAR_API oar_module *oar_nn_group_norm(int64_t groups, int64_t channels, double eps, bool affine);
OAR_API oar_module *oar_nn_dropout(double p);            /* the identity in evaluation */
OAR_API oar_module *oar_nn_embedding(int64_t num, int64_t dim);
/* The options are copied (required: the kernel size). */
OAR_API oar_module *oar_nn_max_pool2d(const oar_pool_opts *opts);
OAR_API oar_module *oar_nn_avg_pool2d(const oar_pool_opts *opts);
OAR_API oar_module *oar_nn_adaptive_avg_pool2d(int64_t out_h, int64_t out_w);
OAR_API oar_module *oar_nn_flatten(int start_dim, int end_dim);
typedef enum oar_activation {
    OAR_ACT_RELU = 0, OAR_ACT_LEAKY_RELU, OAR_ACT_ELU, OAR_ACT_GELU, OAR_ACT_GELU_TANH,
    OAR_ACT_SILU, OAR_ACT_TANH, OAR_ACT_SIGMOID, OAR_ACT_SOFTPLUS, OAR_ACT_IDENTITY
} oar_activation;
/* param: negative slope (LEAKY_RELU), alpha (ELU) or beta (SOFTPLUS, threshold 20); 0 selects
 * torch's default (0.01, 1, 1). The other kinds ignore it. */
OAR_API oar_module *oar_nn_activation(oar_activation kind, double param);
/* Children are named "0", "1", ... and run in order. The Sequential owns every child handed to
 * it, even when the call fails: then they are freed (a NULL child, e.g. from a failed
 * constructor, fails the call with that constructor's error). A child that already belongs to
 * another module is refused and left with its owner. */
OAR_API oar_module *oar_nn_sequential(oar_module *const *children, int n);
OAR_API oar_status oar_nn_sequential_append(oar_module *seq, oar_module *child);
/* torch's nn.MultiheadAttention with batch_first=True. forward_n(query [N, L, E], key [N, S, E],
 * value [N, S, E]) -> output [N, L, E] and, when n_out is 2, the attention weights averaged
 * over heads [N, L, S] (torch's need_weights); oar_forward(x) is self-attention; unbatched
 * [L, E] inputs work too. causal hides key j from query i when j > i (torch's attn_mask
 * triu(ones(L, S), 1)); dropout applies to the weights in training only. embed_dim must be
 * divisible by heads. Parameters: in_proj_weight [3E, E], in_proj_bias [3E], out_proj.weight
 * [E, E], out_proj.bias [E] (biases only with bias). */
OAR_API oar_module *oar_nn_multihead_attention(int64_t embed_dim, int64_t heads, bool bias, bool causal,
                                               double dropout);
/* torch's nn.TransformerEncoderLayer and nn.TransformerDecoderLayer (1.13), with its argument
 * names and semantics. Start from oar_transformer_defaults (torch's defaults: dim_feedforward
 * 2048, dropout 0.1, relu, layer_norm_eps 1e-5, batch_first and norm_first false); every field
 * is then used as given. The encoder's forward takes src, the decoder's forward_n (tgt, memory):
 * [N, L, E] with batch_first, else [L, N, E]; unbatched [L, E] works too; the output has the
 * input's (tgt's) shape. Post-norm: x = norm1(x + sa(x)), x = norm2(x + ff(x)); norm_first:
 * x = x + sa(norm1(x)), x = x + ff(norm2(x)); the decoder puts x (+)= mha(x, memory) with norm2
 * between them and norm3 on ff; ff(x) = linear2(dropout(act(linear1(x)))). Children and
 * parameters have torch's names (self_attn.in_proj_weight, multihead_attn.*, linear1.weight,
 * norm1.bias, ...), so torch state dicts load by name. causal applies torch's square subsequent
 * mask (src_mask / tgt_mask) to self-attention; other masks and key padding masks are not
 * offered. */
typedef struct oar_transformer_opts {
    int64_t d_model, nhead, dim_feedforward;
    double dropout;             /* on attention weights, the feed-forward and each residual branch */
    oar_activation activation;  /* OAR_ACT_RELU or OAR_ACT_GELU (exact, torch's 'gelu') */
    double layer_norm_eps;
    bool batch_first, norm_first;
    bool causal;                /* self-attention hides later positions */
} oar_transformer_opts;
OAR_API oar_transformer_opts oar_transformer_defaults(int64_t d_model, int64_t nhead);
OAR_API oar_module *oar_nn_transformer_encoder_layer(const oar_transformer_opts *opts);
OAR_API oar_module *oar_nn_transformer_decoder_layer(const oar_transformer_opts *opts);
/* Recurrent layers: forward_n(x, h0, c0) -> (y, h_n, c_n) for LSTM, (x, h0) -> (y, h_n) for GRU;
 * h0/c0 may be NULL (zeros) and n_out may be smaller (oar_forward gives y). x is [T, N, I], or
 * [N, T, I] with batch_first, or [T, I] unbatched; y is [T, N, H] ([N, T, H], [T, H]); states
 * are [layers, N, H] ([layers, H] unbatched). Parameters weight_ih_l{k}, weight_hh_l{k},
 * bias_ih_l{k}, bias_hh_l{k} in torch's layout and gate order (LSTM i, f, g, o; GRU r, z, n). */
OAR_API oar_module *oar_nn_lstm(int64_t input, int64_t hidden, int layers, bool batch_first);
OAR_API oar_module *oar_nn_gru(int64_t input, int64_t hidden, int layers, bool batch_first);

/* ---------------------------------------------------------------- 9. optimizers */

/* Updates follow torch.optim 1.13 (foreach=False; maximize only where noted) exactly; LAMB, which torch
 * lacks, is defined below. They run in place on the parameters' storage outside autograd, one
 * fused loop per tensor (threaded for large ones). Parameters must be contiguous f32 or f64 CPU
 * leaf tensors; a gradient must have its parameter's shape and dtype. State buffers are made
 * once, at a parameter's first update, so steps after the first allocate nothing (a
 * non-contiguous gradient is the exception: it is copied first). */
typedef struct oar_optimizer oar_optimizer;
typedef enum oar_optim_kind {
    OAR_OPTIM_SGD = 0, OAR_OPTIM_ADAM, OAR_OPTIM_ADAMW, OAR_OPTIM_RMSPROP, OAR_OPTIM_ADAGRAD, OAR_OPTIM_LAMB,
    OAR_OPTIM_ADADELTA, OAR_OPTIM_ADAMAX, OAR_OPTIM_NADAM, OAR_OPTIM_RADAM, OAR_OPTIM_ASGD, OAR_OPTIM_RPROP
} oar_optim_kind;

/* Hyper-parameters. Unless explicit_values is set, a zero field takes the torch default of the
 * chosen kind; only these defaults are nonzero:
 *            lr      beta1  beta2   eps     alpha  weight_decay
 *   SGD      none    -      -       -       -      0    (lr is required: 0 is an error)
 *   Adam     1e-3    0.9    0.999   1e-8    -      0
 *   AdamW    1e-3    0.9    0.999   1e-8    -      1e-2
 *   RMSprop  1e-2    -      -       1e-8    0.99   0
 *   Adagrad  1e-2    -      -       1e-10   -      0
 *   LAMB     1e-3    0.9    0.999   1e-6    -      0
 *   Adadelta 1.0     -      -       1e-6    -      0    rho 0.9
 *   Adamax   2e-3    0.9    0.999   1e-8    -      0
 *   NAdam    2e-3    0.9    0.999   1e-8    -      0    momentum_decay 4e-3
 *   RAdam    1e-3    0.9    0.999   1e-8    -      0
 *   ASGD     1e-2    -      -       -       0.75   0    lambd 1e-4, t0 1e6
 *   Rprop    1e-2    -      -       -       -      -    etas (0.5, 1.2), step_sizes (1e-6, 50)
 * Every other field defaults to 0 / false, as in torch. oar_optim_defaults returns that table's
 * row with explicit_values set, so every field is then used as given, zero included (e.g.
 * AdamW without weight decay, or Adam with beta1 = 0).
 * Checked as torch does: lr, momentum, weight_decay, eps, alpha, lr_decay and
 * initial_accumulator >= 0 and finite; 0 <= beta1, beta2 < 1; nesterov needs momentum > 0 and
 * dampening 0; 0 <= rho <= 1; momentum_decay >= 0; 0 < etaminus < 1 < etaplus; maximize only for
 * the kinds whose torch 1.13 class oar follows with it (Adadelta, Adamax, ASGD, Rprop). A value of
 * the wrong sign is an error ("Adam: expected 0 <= beta1 < 1, got 1.5").
 *
 * The updates, per parameter p with gradient g and step count t (after the increment), as in
 * torch: SGD (first-step buffer = g, no dampening on that step), Adam (L2: g += wd p), AdamW
 * (decoupled: p *= 1 - lr wd), RMSprop (centered, momentum), Adagrad (lr / (1 + (t-1) lr_decay)).
 * LAMB (You et al. 2019, Algorithm 2, with the identity scaling function):
 *   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
 *   u = (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps) + weight_decay p
 *   p -= lr * r u,  r = ||p|| / ||u|| (Euclidean norms over the tensor), r = 1 if either is 0
 * Adadelta, Adamax, NAdam, RAdam, ASGD and Rprop follow torch 1.13's single-tensor code, as the
 * others do: ASGD's eta and mu and NAdam's mu_product are f32 scalars as in torch. These six run
 * on the CPU (a parameter on another device is refused when the optimizer is made). */
typedef struct oar_optim_opts {
    oar_optim_kind kind;
    double lr;
    double momentum, dampening;  /* SGD; RMSprop uses momentum too */
    bool nesterov;               /* SGD */
    double weight_decay;         /* L2 for SGD/Adam/RMSprop/Adagrad, decoupled for AdamW/LAMB */
    double beta1, beta2, eps;    /* Adam, AdamW, LAMB; eps also RMSprop, Adagrad */
    bool amsgrad;                /* Adam, AdamW */
    double alpha;                /* RMSprop smoothing */
    bool centered;               /* RMSprop */
    double lr_decay, initial_accumulator; /* Adagrad */
    bool maximize;               /* Adadelta, Adamax, ASGD, Rprop: ascend the gradient */
    double rho;                  /* Adadelta */
    double momentum_decay;       /* NAdam */
    double lambd, t0;            /* ASGD (alpha is its eta power) */
    double etaminus, etaplus;    /* Rprop */
    double step_size_min, step_size_max; /* Rprop */
    bool explicit_values;        /* every field is used as given (set by oar_optim_defaults) */
} oar_optim_opts;
OAR_API oar_optim_opts oar_optim_defaults(oar_optim_kind kind);

/* An optimizer over n tensors (borrowed: they must outlive it), as one parameter group.
 * Parameters must be distinct. */
OAR_API oar_optimizer *oar_optimizer_new(oar_tensor *const *params, int n, const oar_optim_opts *opts);
/* The same over every trainable (requires_grad) parameter of a module, each once. */
OAR_API oar_optimizer *oar_optimizer_for(oar_module *m, const oar_optim_opts *opts);
/* Another parameter group with its own options (e.g. no weight decay for biases); returns its
 * index, or -1 on error. opts NULL copies group 0's options; otherwise the rules of
 * oar_optimizer_new apply and the kind must be the optimizer's. To change one field, start from
 * a copy of *oar_optimizer_group_opts(o, 0) (its explicit_values is set). Parameters continue
 * the numbering of the earlier groups. */
OAR_API int oar_optimizer_add_group(oar_optimizer *o, oar_tensor *const *params, int n, const oar_optim_opts *opts);
OAR_API int oar_optimizer_num_groups(const oar_optimizer *o);
/* The group's options with defaults filled in (explicit_values set). Mutable: edits (lr, wd...)
 * take effect at the next step, where they are checked again; the kind must not change. The
 * pointer stays valid until oar_optimizer_free. NULL with an error for a bad index. */
OAR_API oar_optim_opts *oar_optimizer_group_opts(oar_optimizer *o, int group);
OAR_API void oar_optimizer_free(oar_optimizer *o);
/* One update from the parameters' .grad (parameters without a gradient are skipped and keep
 * their state and step count, as in torch). Everything is checked before anything is updated,
 * so a failed step changes nothing. Each parameter's update is one optimizer_update op, so a
 * step inside a function compiled by oar_jit_to_static is part of the program: every run
 * updates the parameters and state, uses the groups' options as they are just before it
 * (edits and schedulers between calls take effect) and adds 1 to oar_optimizer_steps. The
 * parameters updated are those with a gradient at tracing; changing momentum, amsgrad or
 * centered afterwards needs a new trace. Free the compiled function before the optimizer: once the
 * optimizer is freed, calling the function fails (OAR_ERR_STATE) instead of updating freed state. */
OAR_API oar_status oar_optimizer_step(oar_optimizer *o);
/* Drops every parameter's gradient (like torch's zero_grad(set_to_none=True)). */
OAR_API void oar_optimizer_zero_grad(oar_optimizer *o);
/* Successful oar_optimizer_step calls so far (or as set by oar_optimizer_set_steps). */
OAR_API int64_t oar_optimizer_steps(const oar_optimizer *o);
/* State (momentum buffers, moments, step counts) as named tensors, for inspection and
 * checkpoints: names are "<param index>.<slot>", e.g. "3.exp_avg". Slots, made at a
 * parameter's first update:
 *   SGD      momentum_buffer (when momentum != 0)
 *   Adam(W)  step, exp_avg, exp_avg_sq, max_exp_avg_sq (amsgrad)
 *   RMSprop  step, square_avg, momentum_buffer (momentum > 0), grad_avg (centered)
 *   Adagrad  step, sum
 *   LAMB     step, exp_avg, exp_avg_sq
 *   Adadelta step, square_avg, acc_delta
 *   Adamax   step, exp_avg, exp_inf
 *   NAdam    step, exp_avg, exp_avg_sq, mu_product
 *   RAdam    step, exp_avg, exp_avg_sq
 *   ASGD     step, eta, mu, ax
 *   Rprop    step, prev, step_size
 * "step" is an i64 scalar (the parameter's own update count); mu_product, eta and mu are f32
 * scalars; the others have the parameter's shape and dtype. Listed by parameter, then in the
 * order of oar_slot (src/ops/optim_layout.h). */
OAR_API int oar_optimizer_num_state(oar_optimizer *o);
OAR_API oar_tensor *oar_optimizer_state(oar_optimizer *o, int i, const char **name); /* borrowed */
/* Copies value into the named slot (creating the parameter's state, zero-filled, if it has none
 * yet). The slot must be one the parameter's options use (or one it already has); shape and
 * dtype must match. */
OAR_API oar_status oar_optimizer_load_state(oar_optimizer *o, const char *name, const oar_tensor *value);
/* Sets the counter returned by oar_optimizer_steps (>= 0); per-parameter "step" state is
 * separate (restore it with oar_optimizer_load_state). */
OAR_API oar_status oar_optimizer_set_steps(oar_optimizer *o, int64_t steps);

/* Gradient clipping over a set of tensors' .grad (tensors without one are skipped), like
 * torch.nn.utils.clip_grad_norm_: the total norm is the norm_type-norm of the per-tensor
 * norms (norm_type > 0, or INFINITY for the largest magnitude); when it exceeds max_norm
 * (>= 0) every gradient is scaled by max_norm / (total + 1e-6) (a NaN total makes them NaN,
 * as in torch). A scaled gradient is a new tensor that replaces .grad (pointers from
 * oar_grad_get taken before are stale). The total norm before clipping is returned in
 * *total_norm (may be NULL; 0 when no tensor has a gradient). Both functions are made of ops,
 * so they work in a function compiled by oar_jit_to_static; there the total has no value while
 * tracing and *total_norm is set to NaN: use oar_clip_grad_norm_total and return the tensor. */
OAR_API oar_status oar_clip_grad_norm(oar_tensor *const *params, int n, double max_norm, double norm_type,
                                      double *total_norm);
/* The same, returning the total norm as an f64 scalar tensor (NULL on error), which a traced
 * function can return as an output. */
OAR_API oar_tensor *oar_clip_grad_norm_total(oar_tensor *const *params, int n, double max_norm, double norm_type);
/* Clamps every gradient element into [-clip, clip] (clip >= 0; NaN stays NaN), replacing .grad. */
OAR_API oar_status oar_clip_grad_value(oar_tensor *const *params, int n, double clip);

/* Learning-rate schedules, as torch.optim.lr_scheduler. A scheduler counts steps t (torch's
 * last_epoch): t = 0 at creation, which already sets every group's lr to its value at t = 0;
 * each oar_scheduler_step adds 1 and sets every group's lr to its value at t. base is a group's
 * lr when the scheduler first sees it (at creation, or at the first step after the group was
 * added). Closed forms:
 *   STEP         base * gamma^floor(t / step_size)                    gamma 0 means 0.1
 *   MULTISTEP    base * gamma^(number of milestones <= t)             gamma 0 means 0.1
 *   EXPONENTIAL  base * gamma^t                                       gamma required
 *   COSINE       eta_min + (base - eta_min) (1 + cos(pi t / t_max)) / 2  (torch CosineAnnealingLR;
 *                periodic past t_max, as torch)
 *   WARMUP_COSINE  base * t / warmup                                  for t < warmup,
 *                eta_min + (base - eta_min) (1 + cos(pi (t - warmup) / (t_max - warmup))) / 2
 *                                                                     for warmup <= t <= t_max,
 *                eta_min after t_max (0 <= warmup < t_max; warmup 0: cosine from the start)
 *   ONE_CYCLE    torch OneCycleLR(max_lr, total_steps = t_max, pct_start (0 means 0.3),
 *                div_factor (0: 25), final_div_factor (0: 1e4), anneal_strategy 'cos',
 *                three_phase False, cycle_momentum False); max_lr 0 means each group's base.
 *                Stepping past t = t_max is an error, as in torch.
 *   PLATEAU      torch ReduceLROnPlateau(mode min, or max with mode_max; factor gamma (0: 0.1,
 *                must be < 1); patience; threshold in 'rel' mode; min_lr eta_min; cooldown 0;
 *                eps 1e-8): the lr is multiplied by gamma when the metric has not improved on
 *                the best by the relative threshold for more than patience steps. Only PLATEAU
 *                reads the metric, and does not change the lr at creation.
 * Unless explicit_values is set, zero fields take the defaults named above and, for PLATEAU,
 * patience 10 and threshold 1e-4 (torch's); oar_sched_defaults returns them with
 * explicit_values set, so that zero means zero. */
typedef struct oar_scheduler oar_scheduler;
typedef enum oar_sched_kind {
    OAR_SCHED_STEP = 0,      /* lr * gamma^(floor(t / step_size)) */
    OAR_SCHED_MULTISTEP,     /* lr * gamma^(number of milestones <= t) */
    OAR_SCHED_EXPONENTIAL,   /* lr * gamma^t */
    OAR_SCHED_COSINE,        /* cosine from lr to eta_min over t_max */
    OAR_SCHED_WARMUP_COSINE, /* linear warmup over warmup steps, then cosine to eta_min at t_max */
    OAR_SCHED_ONE_CYCLE,     /* torch OneCycleLR (cosine annealing), max_lr over t_max steps */
    OAR_SCHED_PLATEAU        /* multiply by gamma after `patience` non-improving metrics */
} oar_sched_kind;
typedef struct oar_sched_opts {
    oar_sched_kind kind;
    int64_t step_size, t_max, warmup, patience;
    int64_t milestones[16];
    int n_milestones;
    double gamma, eta_min, max_lr, pct_start, div_factor, final_div_factor, threshold;
    bool mode_max;           /* plateau: the metric should increase */
    bool explicit_values;    /* every field is used as given (set by oar_sched_defaults) */
} oar_sched_opts;
OAR_API oar_sched_opts oar_sched_defaults(oar_sched_kind kind);
/* The scheduler borrows the optimizer (it must outlive the scheduler). */
OAR_API oar_scheduler *oar_scheduler_new(oar_optimizer *o, const oar_sched_opts *opts);
OAR_API oar_status oar_scheduler_step(oar_scheduler *s, double metric); /* metric: plateau only */
/* One step of a scheduler that reads no metric (every kind but PLATEAU, which it refuses). */
OAR_API oar_status oar_scheduler_next(oar_scheduler *s);
/* The lr of a group as last set (torch's get_last_lr); NaN with an error for a bad group. */
OAR_API double oar_scheduler_lr(const oar_scheduler *s, int group);
OAR_API int64_t oar_scheduler_t(const oar_scheduler *s); /* steps taken (torch's last_epoch) */
/* What a resumed run needs besides the groups' lrs (checkpoints save it, see section 11): the
 * step count t and PLATEAU's best metric and non-improving steps. Setting it moves the
 * scheduler to t at once (no stepping t times): the closed forms set every group's lr to its
 * value at t; PLATEAU leaves the lrs as they are. t must be >= 0 (<= t_max for ONE_CYCLE). */
typedef struct oar_sched_state {
    int64_t t;
    double best;          /* plateau: +inf (min mode) or -inf (max mode) before any metric */
    int64_t bad_steps;    /* plateau */
} oar_sched_state;
OAR_API oar_sched_state oar_scheduler_get_state(const oar_scheduler *s);
OAR_API oar_status oar_scheduler_set_state(oar_scheduler *s, const oar_sched_state *state);
OAR_API void oar_scheduler_free(oar_scheduler *s);

/* ---------------------------------------------------------------- 10. data */

/* A dataset yields samples by index as (input, target) tensors; the loader stacks them into
 * batches. Datasets are read-only and may be used from several threads at once. */
typedef struct oar_dataset oar_dataset;
/* IDX files (MNIST format; .gz read through zlib): images as f32 [1, rows, cols] scaled to
 * [0, 1], labels as i64. */
OAR_API oar_dataset *oar_dataset_idx(const char *images_path, const char *labels_path);
/* CSV with a header: numeric feature columns (f32) and an integer label column (by name, or
 * the last column when label is NULL). */
OAR_API oar_dataset *oar_dataset_csv(const char *path, const char *label);
/* A byte corpus for language models: sample i is a window of `window` bytes (i64 token ids)
 * and the target is the same window shifted by one; there are (bytes - 1) / window samples.
 * Windows start at i * window, or, when random_windows, at an offset drawn from the loader's
 * (seed, epoch, i) (oar_dataset_get draws as for seed 0, epoch 0). */
OAR_API oar_dataset *oar_dataset_text(const char *path, int64_t window, bool random_windows);
/* The same over the part [begin, end) of the file, as fractions of its size (e.g. 0 to 0.9 to
 * train and 0.9 to 1 to evaluate). */
OAR_API oar_dataset *oar_dataset_text_range(const char *path, int64_t window, bool random_windows, double begin,
                                            double end);
/* In-memory tensors: sample i is x[i] and y[i] (both retained; a non-contiguous one is copied
 * once). Any dtypes; both need the same size in dim 0. */
OAR_API oar_dataset *oar_dataset_tensors(oar_tensor *x, oar_tensor *y);
/* A dataset computed by the caller: get() writes sample i into input and target, contiguous
 * buffers of the declared per-sample shapes and dtypes (at most OAR_MAX_DIMS - 1 dims). It is
 * called from the loader's workers at the same time, so it must be thread safe. On failure it
 * returns an error status and may write a message into errmsg (errmsg_size bytes), which the
 * loader reports. free_user (may be NULL) runs on user in oar_dataset_free. */
typedef oar_status (*oar_sample_fn)(void *user, int64_t i, void *input, void *target,
                                    char *errmsg, size_t errmsg_size);
typedef struct oar_dataset_fns {
    int64_t size;
    oar_dtype input_dtype, target_dtype;
    int input_ndim, target_ndim;
    int64_t input_shape[OAR_MAX_DIMS], target_shape[OAR_MAX_DIMS];
    oar_sample_fn get;
    void (*free_user)(void *user);
    void *user;
} oar_dataset_fns;
OAR_API oar_dataset *oar_dataset_custom(const oar_dataset_fns *fns);
OAR_API int64_t oar_dataset_size(const oar_dataset *d);
/* Sample i as new references (caller releases). */
OAR_API oar_status oar_dataset_get(oar_dataset *d, int64_t i, oar_tensor **input, oar_tensor **target);
/* Every sample at once, in order, as new references: inputs [N, sample dims...] and targets
 * [N, ...] (e.g. a CSV as X [N, features] f32 and y [N] i64, without a loader). */
OAR_API oar_status oar_dataset_to_tensors(oar_dataset *d, oar_tensor **inputs, oar_tensor **targets);
OAR_API void oar_dataset_free(oar_dataset *d);

/* Transforms act on f32 input samples, in order, in place in the batch. Channels are the
 * sample's first dim; random choices depend only on (seed, epoch, sample index). */
typedef enum oar_transform_kind {
    OAR_TF_NORMALIZE = 0,   /* (x - mean) / std in f32, per channel; n_channels is 1 (one mean/std
                             * for all; 0 also means 1) or the channel count. Up to 16 channels in
                             * mean[]/std[]; any number through means/stds */
    OAR_TF_RANDOM_CROP,     /* pad the last two dims by `padding` zeros, crop back to the original
                             * size at a random place */
    OAR_TF_HFLIP            /* flip the last dim with probability p */
} oar_transform_kind;
typedef struct oar_transform {
    oar_transform_kind kind;
    double mean[16], std[16];
    int n_channels;
    int64_t padding;
    double p;
    /* NORMALIZE over more than 16 channels or features (e.g. a CSV's columns): n_channels
     * values each, used instead of mean[]/std[] when set (both or neither); copied by
     * oar_loader_new, so they need not outlive the call. */
    const double *means, *stds;
} oar_transform;

typedef struct oar_loader_opts {
    int64_t batch_size;     /* 0 means 1 */
    bool shuffle;
    bool drop_last;
    uint64_t seed;          /* order and random transforms depend only on (seed, epoch) */
    int workers;            /* background threads preparing batches; 0 = in the caller. Batches
                             * are identical for any number of workers and arrive in order */
    int prefetch;           /* batches prepared ahead; 0 means 2 per worker */
    const oar_transform *transforms;  /* copied by oar_loader_new; at most 15 */
    int n_transforms;
} oar_loader_opts;
typedef struct oar_loader oar_loader;
/* The loader borrows the dataset (it must outlive the loader). */
OAR_API oar_loader *oar_loader_new(oar_dataset *d, const oar_loader_opts *opts);
OAR_API int64_t oar_loader_num_batches(const oar_loader *l);
/* Starts an epoch (0, 1, ...): shuffles with (seed, epoch) and starts prefetching. */
OAR_API oar_status oar_loader_start_epoch(oar_loader *l, int64_t epoch);
/* The next batch as new references: inputs [B, sample dims...] and targets [B, ...], contiguous
 * (B is batch_size, or less for the last batch unless drop_last). Returns false at the end of
 * the epoch with *status OAR_OK, or on error with *status set (a worker's error keeps its
 * message, and the epoch stays failed until the next oar_loader_start_epoch). status may be
 * NULL. Called before any oar_loader_start_epoch, it runs epoch 0. */
OAR_API bool oar_loader_next(oar_loader *l, oar_tensor **inputs, oar_tensor **targets, oar_status *status);
/* Seconds the caller spent in oar_loader_next since the epoch started (the reader cost): the
 * time blocked on workers, or with 0 workers the time spent building batches. */
OAR_API double oar_loader_wait_seconds(const oar_loader *l);
/* Stops and joins the workers (also mid-epoch) and drops the batches they prepared. */
OAR_API void oar_loader_free(oar_loader *l);

/* ---------------------------------------------------------------- 11. files */

/* safetensors (8-byte little-endian header length, JSON header, raw little-endian data),
 * readable by the Python safetensors library. Writes are atomic: a temporary file in the same
 * directory, fsync, rename over path, fsync of the directory; a failed save removes the
 * temporary and leaves any previous file under path intact. Tensors may have any strides
 * (they are written in row-major order); names must be distinct, non-empty UTF-8 and not
 * "__metadata__"; metadata (may be NULL with n_meta 0) is string key/value pairs.
 * safetensors needs cJSON: without it these functions fail with OAR_ERR_UNSUPPORTED. */
OAR_API oar_status oar_safetensors_save(const char *path, const char *const *names, oar_tensor *const *tensors,
                                        int n, const char *const *meta_keys, const char *const *meta_values,
                                        int n_meta);
typedef struct oar_tensor_dict oar_tensor_dict;
/* Loads every tensor into a dictionary, after validating the whole file: header length
 * against the file size, well-formed JSON, dtype names, shapes, data offsets inside the data
 * section, covering it without overlap or holes, sizes equal to numel * itemsize, bools 0/1.
 * A bad file gives NULL with OAR_ERR_FORMAT (or OAR_ERR_UNSUPPORTED for a dtype oar lacks)
 * and a message naming the file and the problem. */
OAR_API oar_tensor_dict *oar_safetensors_load(const char *path);
/* The same from size bytes in memory (copied; data may be freed afterwards). */
OAR_API oar_tensor_dict *oar_safetensors_load_buffer(const void *data, size_t size);
/* Integrity: every safetensors file oar writes (oar_safetensors_save, checkpoints, exported
 * weights) records a CRC32C of each tensor's bytes in its metadata ("oar.crc32c.<name>", which
 * other readers ignore; these keys are not returned by oar_dict_meta). Every load checks them
 * and fails with OAR_ERR_FORMAT naming the file, the tensor and both checksums when data was
 * damaged after it was written. Files without checksums load as before. Verification costs one
 * pass over the data (GB/s); oar_set_verify_checksums(false), or OAR_SKIP_CHECKSUM=1 in the
 * environment, skips it (the call wins over the environment). Metadata keys starting with
 * "oar.crc32c." are reserved. */
OAR_API void oar_set_verify_checksums(bool verify);
/* Tensors are in file order; the dictionary owns them (oar_retain one to keep it longer). */
OAR_API int oar_dict_size(const oar_tensor_dict *d);
OAR_API oar_tensor *oar_dict_at(oar_tensor_dict *d, int i, const char **name); /* borrowed */
OAR_API oar_tensor *oar_dict_get(oar_tensor_dict *d, const char *name);        /* borrowed; NULL if absent */
OAR_API const char *oar_dict_meta(const oar_tensor_dict *d, const char *key);  /* NULL if absent */
OAR_API int oar_dict_meta_size(const oar_tensor_dict *d);
OAR_API const char *oar_dict_meta_at(const oar_tensor_dict *d, int i, const char **key); /* the value */
OAR_API void oar_dict_free(oar_tensor_dict *d);

/* NumPy .npy. Saving writes version 1.0 (2.0 when the header needs it), little-endian, C
 * order, atomically as above; bf16 has no NumPy type and is refused (cast to f32 first).
 * Loading reads versions 1.0, 2.0 and 3.0 with descr f2/f4/f8/i1/u1/i4/i8/b1 in either byte
 * order, converting big-endian data and Fortran-order arrays to oar's layout. */
OAR_API oar_status oar_npy_save(const char *path, const oar_tensor *t);
OAR_API oar_tensor *oar_npy_load(const char *path);
OAR_API oar_tensor *oar_npy_load_buffer(const void *data, size_t size);

/* Checkpoints, in one safetensors file: module parameters and buffers ("model.<path>"),
 * optimizer state ("optim.<name>", see oar_optimizer_state), and metadata (decimal strings):
 * format and oar versions, step, the generator's seed and offset, the optimizer's kind,
 * parameter count and step count. Loading first checks the file against the module and the
 * optimizer (names, shapes, dtypes, optimizer kind, each parameter's state complete) and
 * reports every mismatch in one message (OAR_ERR_INVALID_ARG: counts of missing, unexpected
 * and mismatched entries, then the details), changing nothing when anything is wrong; then it
 * copies the values into the existing tensors (in place, so optimizers holding the parameters
 * stay valid), restores the optimizer state and step count and the generator, and sets *step
 * (may be NULL). Resuming from a checkpoint reproduces the uninterrupted run bit for bit.
 * o may be NULL: the file's optimizer state is then ignored (loading weights only). */
OAR_API oar_status oar_checkpoint_save(const char *path, oar_module *m, oar_optimizer *o, int64_t step);
OAR_API oar_status oar_checkpoint_load(const char *path, oar_module *m, oar_optimizer *o, int64_t *step);
/* The same with the learning-rate scheduler too (s may be NULL): its kind, t, plateau state and
 * every group's base and current lr. Loading with s checks the file has a scheduler of s's kind
 * over as many groups, and restores it with the rest. A scheduler in the file is ignored when s
 * is NULL, as optimizer state is when o is.
 * Rewinding: a parameter without state in the file (saved before its first update) gets its
 * state reset to none, as torch's load_state_dict does, in place, so functions compiled with
 * oar_jit_to_static on this optimizer keep working; such state is also not saved. */
OAR_API oar_status oar_checkpoint_save_all(const char *path, oar_module *m, oar_optimizer *o, oar_scheduler *s,
                                           int64_t step);
OAR_API oar_status oar_checkpoint_load_all(const char *path, oar_module *m, oar_optimizer *o, oar_scheduler *s,
                                           int64_t *step);

/* ---------------------------------------------------------------- 12. the model zoo */

/* The reference workloads (../shared/bench) as modules, built with this API like user code. */
typedef enum oar_zoo_input {
    OAR_ZOO_FEATURES = 0,     /* [N, features] f32 */
    OAR_ZOO_IMAGE,            /* [N, C, H, W] f32 */
    OAR_ZOO_TOKENS,           /* [N, T] i64 -> logits [N, T, vocab] */
    OAR_ZOO_TOKENS_STATEFUL   /* forward_n(x [T, N] i64, h, c) -> (logits [T, N, vocab], h, c) */
} oar_zoo_input;
typedef struct oar_zoo_info {
    const char *name, *description;
    oar_zoo_input input;
    int64_t in_channels;      /* images: channels; features: width */
    int64_t num_classes;      /* classes, or vocabulary size */
    int64_t context;          /* language models: sequence length */
} oar_zoo_info;
typedef struct oar_zoo_opts {
    int64_t in_channels;      /* 0: the model's default */
    int64_t num_classes;      /* 0: the model's default */
} oar_zoo_opts;
OAR_API oar_module *oar_zoo_create(const char *name, const oar_zoo_opts *opts);
OAR_API const oar_zoo_info *oar_zoo_info_at(int i);    /* NULL past the end */
OAR_API const oar_zoo_info *oar_zoo_find(const char *name);

/* ---------------------------------------------------------------- 13. static graph */

/* One call turns a function written with this API into a compiled one. The first call with
 * a given input signature (dtypes, shapes, except dims declared dynamic) runs fn once with
 * symbolic tensors (shape and dtype, no data) and records every op it calls into a program:
 * module forwards, losses, oar_backward (its gradient rules become ops), optimizer steps and
 * zero_grad, oar_cond/oar_while. The program is optimized by passes, its intermediates are
 * planned into one arena, and later calls with that signature run it without calling fn.
 *
 * What the traced function may do:
 *   - Tensors made inside it (oar_zeros, oar_from_data, ...) become constants of the program.
 *   - Parameters, buffers and optimizer state it touches are bound by reference: each run
 *     reads their current values and updates them in place, as eager code would.
 *   - Random ops (dropout) draw fresh numbers at every run, from the global generator.
 *   - Reading data (oar_item, oar_data, printing values) is an error naming the op that made
 *     the tensor: the value does not exist until the program runs. Branch and loop on tensor
 *     values with oar_cond and oar_while, which work the same in both modes.
 *   - Gradients from oar_backward are fresh at every call: call zero_grad in the function (or
 *     before each call), as a training step does. They are set as parameters' .grad after a
 *     run, unless the function clears them itself.
 *   - Host-side effects (a counter in C, a learning-rate schedule stepped inside fn) happen
 *     once, at tracing: keep them outside the function.
 * Errors in fn surface from oar_jit_call with fn's message. Any error raised while fn is
 * traced fails the call, even when fn ignored that status and returned OK: nothing is
 * compiled from a trace in which a call failed. */
typedef oar_status (*oar_static_fn)(void *user, oar_tensor *const *in, int n_in, oar_tensor **out,
                                    int n_out);

typedef struct oar_input_spec {
    oar_dtype dtype;
    int ndim;
    int64_t shape[OAR_MAX_DIMS]; /* -1: dynamic, any size at call time (e.g. the batch) */
    const char *name;            /* NULL: "input0", "input1", ... */
} oar_input_spec;

/* Which passes run, switched by name (oar_pass_name lists them). Zeroed means the defaults. */
typedef struct oar_build_strategy {
    uint64_t enable, disable; /* bits over the pass table; disable wins */
} oar_build_strategy;
OAR_API oar_status oar_build_strategy_set(oar_build_strategy *s, const char *pass, bool on);
OAR_API const char *oar_pass_name(int i);    /* NULL past the end */
OAR_API const char *oar_pass_summary(int i);

/* Persistent tensors (parameters, buffers, optimizer state) are bound into a program by
 * reference whoever owns them; their owner names them to the compiler through this one
 * interface, so the compiler knows no layers: C modules, C optimizers and a binding's own
 * classes (Python modules) are captured alike. The program calls a captured tensor
 * "<prefix><name>" (export files, checkpoints, messages). count and tensor are asked while
 * tracing, so state made lazily (an optimizer's moments) is named once it exists; tensor may
 * return NULL for a slot that is empty. A source must outlive the compiled functions using it.
 * Modules and optimizers are sources themselves (the functions below return the handle's own
 * source, valid while the handle lives). */
typedef struct oar_state_source {
    void *owner;
    int (*count)(void *owner);
    oar_tensor *(*tensor)(void *owner, int i, const char **name); /* borrowed */
    const char *prefix;                                           /* NULL: none */
} oar_state_source;
OAR_API const oar_state_source *oar_module_state_source(oar_module *m);       /* its parameters, buffers */
OAR_API const oar_state_source *oar_optimizer_state_source(oar_optimizer *o); /* "optim.<name>" */

typedef struct oar_jit_opts {
    const oar_input_spec *specs; /* NULL, or one per input: dtypes and dynamic dims */
    int n_specs;
    const char *const *output_names; /* n_output_names names; the rest "output0", ... (export) */
    int n_output_names;
    oar_module *module;          /* shorthand for the module's state source */
    oar_optimizer *optimizer;    /* shorthand for the optimizer's state source */
    const oar_state_source *const *state_sources; /* more owners (n_state_sources, copied) */
    int n_state_sources;
    int cache_capacity;          /* programs kept, one per signature; 0: 8 (least recent goes) */
    oar_build_strategy strategy;
} oar_jit_opts;

typedef struct oar_jit oar_jit;
OAR_API oar_jit *oar_jit_to_static(oar_static_fn fn, void *user, const oar_jit_opts *opts);
/* Calls the compiled function: out receives n_out new references (fresh tensors: later calls
 * never overwrite them). */
OAR_API oar_status oar_jit_call(oar_jit *f, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out);
OAR_API void oar_jit_free(oar_jit *f);
OAR_API bool oar_is_tracing(void);

/* The cache: programs kept now, traces made so far, and program i as readable text. */
OAR_API int oar_jit_num_programs(const oar_jit *f);
OAR_API int64_t oar_jit_num_traces(const oar_jit *f);
OAR_API int oar_jit_dump(const oar_jit *f, int i, char *buf, size_t size); /* like snprintf; -1 if no i */

/* Memory of program i: the planned arena peak is known before the first run; measured_peak
 * is the allocator's peak during its runs (0 before one). */
typedef struct oar_program_memory_stats {
    int64_t planned_arena_bytes;  /* intermediates, planned by liveness */
    int64_t persistent_bytes;     /* owned by the program (gradients it writes) */
    int64_t output_bytes;         /* fresh per call (results handed to the caller) */
    int64_t naive_bytes;          /* all intermediates with no reuse, for comparison */
    int64_t measured_peak_bytes;  /* allocator peak (since the last oar_memory_reset_peak) above the
                                     level before a run, plus the arena: reset the peak before a run
                                     to measure that run alone */
    int n_nodes, n_buffers;
} oar_program_memory_stats;
OAR_API oar_status oar_program_memory_stats_get(const oar_jit *f, int i, oar_program_memory_stats *out);

/* Control flow that behaves the same eagerly and compiled. Branches and bodies take n inputs
 * and write n_out new references. oar_cond runs then_fn or else_fn on in[] as pred (a one-
 * element tensor) is nonzero or zero; both must return the same dtypes and shapes. oar_while
 * carries n loop variables: while cond_fn(vars) yields a nonzero one-element tensor,
 * vars = body_fn(vars) (same dtypes and shapes); out receives the final values. Gradients
 * flow through both, in both modes. */
typedef oar_status (*oar_block_fn)(void *user, oar_tensor *const *in, int n_in, oar_tensor **out,
                                   int n_out);
OAR_API oar_status oar_cond(oar_tensor *pred, oar_block_fn then_fn, oar_block_fn else_fn, void *user,
                            oar_tensor *const *in, int n_in, oar_tensor **out, int n_out);
OAR_API oar_status oar_while(oar_block_fn cond_fn, oar_block_fn body_fn, void *user, oar_tensor *const *vars,
                             int n, oar_tensor **out);

/* Export for deployment: path.json (the program, versioned and readable: ops, attributes,
 * inputs and outputs with names, shapes (-1 for dynamic dims) and dtypes, oar's version) and
 * path.safetensors (its parameters and constants). Saves the program of the latest call.
 * path is "dir/model"; "dir/model.json" (or ".safetensors") names the same two files. */
OAR_API oar_status oar_jit_save(oar_jit *f, const char *path);

/* ---------------------------------------------------------------- 14. inference: the predictor */

/* Loads an exported model (no tracing, no model code) and runs it. Inputs and outputs are
 * addressed by the names saved with the model. A clone shares the weights and has its own
 * buffers, so clones may run on different threads at once. */
typedef struct oar_predictor oar_predictor;
typedef struct oar_predictor_config {
    const char *model_path;      /* "dir/model" (or "dir/model.json", "dir/model.safetensors")
                                    for dir/model.json and dir/model.safetensors */
    oar_build_strategy strategy; /* passes run on the loaded program */
} oar_predictor_config;
OAR_API oar_predictor *oar_predictor_create(const oar_predictor_config *config);
OAR_API oar_predictor *oar_predictor_clone(oar_predictor *p);
OAR_API void oar_predictor_free(oar_predictor *p);
OAR_API int oar_predictor_num_inputs(const oar_predictor *p);
OAR_API int oar_predictor_num_outputs(const oar_predictor *p);
OAR_API const char *oar_predictor_input_name(const oar_predictor *p, int i);
OAR_API const char *oar_predictor_output_name(const oar_predictor *p, int i);
/* Binds an input by name (the predictor keeps a reference until the next set or free). */
OAR_API oar_status oar_predictor_set_input(oar_predictor *p, const char *name, oar_tensor *t);
OAR_API oar_status oar_predictor_run(oar_predictor *p);
/* The output of the last run, a new reference; NULL (error set) for an unknown name. */
OAR_API oar_tensor *oar_predictor_get_output(oar_predictor *p, const char *name);

/* ---------------------------------------------------------------- 15. profiling */

/* Two modes, as PaddlePaddle's profiler:
 *   TIMER  near-zero overhead: per step, the time spent waiting for data (reader_cost), the
 *          step's time (batch_cost: from one oar_profiler_step to the next) and the throughput
 *          (ips: the items passed to oar_profiler_step per second: samples, or tokens for
 *          language models; steps per second when 0 is passed).
 *   FULL   also every op execution (eager calls and static-graph instructions, with the
 *          kernel's backend and the inputs' shapes and dtypes), data-loader waits, the phases
 *          and user ranges, as spans on one track per thread; tables per phase, op, kernel and
 *          memory; a Chrome trace (open it in https://ui.perfetto.dev or chrome://tracing).
 * Phases are ranges named "forward", "backward" and "optimizer": oar_backward, oar_grad and
 * oar_optimizer_step push theirs; push "forward" around the forward pass and loss (without it
 * the overview counts the rest of the step as forward). One run at a time, process wide.
 * Steps count from 0 at oar_profiler_start; step i is recorded when i >= skip_first and
 * record_begin <= i < record_end (record_end 0: no end). Outside that window full mode records
 * no spans. Summaries read the last run: call them after oar_profiler_stop, or between steps. */
typedef enum oar_profiler_mode { OAR_PROFILER_TIMER = 1, OAR_PROFILER_FULL = 2 } oar_profiler_mode;
typedef struct oar_profiler_opts {
    oar_profiler_mode mode;
    int64_t skip_first;                /* steps left out at the start (warm-up) */
    int64_t record_begin, record_end;  /* steps recorded: [begin, end); end 0: until stop */
    bool record_shapes;                /* full: inputs' shapes and dtypes in op spans */
    bool record_memory;                /* allocations, bytes and peak per step */
    const char *items_unit;            /* what oar_profiler_step counts: NULL means "samples" */
    const char *trace_dir;             /* full: stop writes DIR/oar-trace-<pid>-<run>.json; NULL: none */
    bool print_at_stop;                /* stop prints the summary to stdout */
    int64_t max_events;                /* spans kept per thread, the rest counted as dropped; 0: 4M */
} oar_profiler_opts;
/* The mode with record_shapes and record_memory on, everything else zero. */
OAR_API oar_profiler_opts oar_profiler_defaults(oar_profiler_mode mode);
OAR_API oar_status oar_profiler_start(const oar_profiler_opts *opts);  /* NULL: timer defaults */
OAR_API oar_status oar_profiler_stop(void);
OAR_API bool oar_profiler_running(void);
/* Ends the current step, which processed `items` samples (or tokens); 0 counts steps only. */
OAR_API void oar_profiler_step(int64_t items);
/* Between steps: time from pause to resume (evaluation, checkpoints) belongs to no step. */
OAR_API void oar_profiler_pause(void);
OAR_API void oar_profiler_resume(void);
/* A user range, nested per thread, shown as a span in full mode (name is copied, 63 chars). */
OAR_API void oar_profiler_range_push(const char *name);
OAR_API void oar_profiler_range_pop(void);

/* The timer over the recorded steps: seconds, and ips in items (or steps) per second. */
typedef struct oar_profiler_timer {
    int64_t steps, items;
    double reader_avg, reader_max, reader_min;
    double batch_avg, batch_max, batch_min;
    double ips_avg, ips_max, ips_min;
    double steps_per_s, items_per_s;   /* over the total batch time */
    double reader_ratio;               /* total reader_cost / total batch_cost */
} oar_profiler_timer;
OAR_API oar_status oar_profiler_timer_get(oar_profiler_timer *out);

/* Full mode: where the recorded steps' time went, in seconds; the five parts sum to step. */
typedef struct oar_profiler_overview {
    int64_t steps;
    double step, data, forward, backward, optimizer, other;
    bool forward_inferred;  /* no "forward" range was recorded: forward is the rest of the step */
} oar_profiler_overview;
OAR_API oar_status oar_profiler_overview_get(oar_profiler_overview *out);

/* Full mode: rows of the operator table (one per op) and of the kernel table (one per op and
 * kernel). An op's time is the whole call (checks, allocation, kernel, autograd recording); a
 * kernel's is the kernel alone. GFLOP/s uses kernel time, for ops whose FLOPs are known
 * (matmul, linear, convolutions). */
typedef enum oar_profiler_sort {
    OAR_PROFILER_SORT_TOTAL = 0, OAR_PROFILER_SORT_AVG, OAR_PROFILER_SORT_CALLS
} oar_profiler_sort;
typedef struct oar_profiler_op_row {
    const char *name;          /* borrowed until the next oar_profiler_start */
    const char *impl;          /* kernel table: the kernel ("avx2", "openblas", ...); op table: NULL */
    int64_t calls;
    double total, avg, min, max;   /* seconds */
    double step_fraction;          /* total / recorded step time */
    double gflops_per_s;           /* 0 when unknown */
} oar_profiler_op_row;
OAR_API int oar_profiler_op_count(bool kernels);
OAR_API oar_status oar_profiler_op_at(bool kernels, oar_profiler_sort sort, int i, oar_profiler_op_row *out);
OAR_API oar_status oar_profiler_op_find(const char *name, oar_profiler_op_row *out); /* op table */

/* Memory over the recorded steps (record_memory), from the CPU allocator. */
typedef struct oar_profiler_memory {
    int64_t steps;
    double allocs_per_step, bytes_per_step;  /* averages */
    int64_t max_allocs, max_bytes;           /* in one step */
    int64_t peak_bytes;                      /* most in tensors at once during a recorded step */
    int64_t current_bytes, cached_bytes;     /* at the end of the last recorded step */
} oar_profiler_memory;
OAR_API oar_status oar_profiler_memory_get(oar_profiler_memory *out);

/* The summary as text: the timer table, then in full mode the overview, operator and kernel
 * tables (max_rows rows each; 0 means 30), and the memory table. snprintf-style: returns the
 * length needed. oar_profiler_print writes it to stdout. */
OAR_API int oar_profiler_summary(char *buf, size_t size, oar_profiler_sort sort, int max_rows);
OAR_API void oar_profiler_print(oar_profiler_sort sort, int max_rows);
/* Full mode: the last run's spans as Chrome trace JSON, written atomically to path. */
OAR_API oar_status oar_profiler_export_chrome_trace(const char *path);
/* The trace file oar_profiler_stop wrote under trace_dir ("" when none). */
OAR_API const char *oar_profiler_trace_path(void);

/* The NaN/Inf check (PaddlePaddle's FLAGS_check_nan_inf): when on, every op's floating-point
 * outputs are scanned, and the first op that produces a NaN or Inf fails with OAR_ERR_NUMERIC
 * and a message naming the op, the output, the counts, and the min, max and mean of each input.
 * Off by default; OAR_CHECK_NAN_INF=1 in the environment turns it on. Independent of the
 * profiler. */
OAR_API void oar_set_check_nan_inf(bool on);
OAR_API bool oar_check_nan_inf_enabled(void);

#ifdef __cplusplus
}
#endif

/* The subsystems' APIs, one header each (each includes this one). */
#include "oar/ops.h"    /* the op table at run time: schemas and calls by name */
#include "oar/amp.h"    /* mixed precision: autocast, loss scaling, O2 masters */
#include "oar/quant.h"  /* quantization: observers, int8 ops, post-training and dynamic */
#include "oar/dist.h"   /* distributed training: collectives, data parallel */
#include "oar/ps.h"     /* parameter-server training */
#include "oar/sparse.h" /* sparse-feature workloads: skip-gram and click-log data, AUC */
#include "oar/onnx.h"   /* ONNX import */
#include "oar/cuda_graphs.h" /* compiled programs on the GPU replayed as CUDA graphs */
#include "oar/profiler_device.h" /* the profiler on devices: GPU spans */
#include "oar/grad.h"   /* assigning a leaf's gradient */
#include "oar/rnn.h"    /* one LSTM/GRU layer over a sequence, for front ends */
#include "oar/amp_static.h" /* AMP in compiled steps: the loss scaler's state */

#endif /* OAR_H */
