/* Automatic mixed precision: autocast (which ops run in f16/bf16 and which in f32), dynamic
 * loss scaling, and O2's low-precision parameters with f32 master weights. Included by oar.h.
 *
 * A training step with autocast and a scaler:
 *
 *     oar_autocast_opts ac = oar_autocast_defaults();           // O1, bf16
 *     oar_autocast_begin(&ac);
 *     oar_tensor *loss = model_loss(...);
 *     oar_autocast_end();
 *     oar_backward(oar_grad_scaler_scale(sc, loss), NULL, false);
 *     oar_grad_scaler_step(sc, opt);     // unscales, skips the step on inf/nan
 *     oar_grad_scaler_update(sc);
 */
#ifndef OAR_AMP_H
#define OAR_AMP_H

#include "oar.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- op classes under autocast. Every op declares its class in its definition (flags):
 *   LOW      cast f32 inputs to the low dtype (matmul, linear, conv, einsum, attention)
 *   FP32     cast f16/bf16 inputs to f32 (reductions, softmax, norms, losses; under f16 also
 *            the range-limited exp, log, pow, square, rsqrt, softplus)
 *   PROMOTE  cast float inputs to the widest among them (concat, stack, add, where...); 0-d
 *            tensors take the others' dtype, as in torch's type promotion
 *   FOLLOW   no cast: the op runs in its inputs' dtype (relu, views, indexing...) */
typedef enum oar_amp_class {
    OAR_AMP_FOLLOW = 0,
    OAR_AMP_LOW,
    OAR_AMP_FP32,
    OAR_AMP_PROMOTE,
} oar_amp_class;

typedef enum oar_amp_level {
    OAR_AMP_O0 = 0, /* no autocast (plain f32) */
    OAR_AMP_O1,     /* parameters f32; the class table decides each op's dtype */
    OAR_AMP_O2,     /* parameters low (oar_amp_decorate); the same table, so an op runs low unless
                       it is FP32 or a PROMOTE op meets an f32 input */
} oar_amp_level;

/* What autocast does on a CPU without native bf16 arithmetic (no AVX512_BF16, or oar's ISA cap
 * below avx512: OAR_CPU_ISA=avx2). Such a CPU runs a bf16 matmul as widen, f32 GEMM, round: the
 * same arithmetic as f32 plus conversion passes, so casting f32 inputs down only costs time.
 *   AUTO   (the default) a low op whose float inputs are all f32 stays f32 there, unless its
 *          bf16 kernel converts inside passes it makes anyway (conv2d, conv2d_act: bf16
 *          activations around oneDNN's f32 convolution, as fast as f32 and half the memory);
 *          an input already bf16 casts the others down as usual. With native bf16 (and on
 *          GPUs) the class table applies unchanged.
 *   TABLE  the class table everywhere (what PyTorch's CPU autocast does on any CPU).
 * bf16 only: an f16 region follows the table (no CPU path computes f16 natively). */
typedef enum oar_amp_cpu_policy {
    OAR_AMP_CPU_AUTO = 0,
    OAR_AMP_CPU_TABLE,
} oar_amp_cpu_policy;

typedef struct oar_autocast_opts {
    bool enabled;          /* false: a region where no cast is inserted, even inside another */
    oar_amp_level level;
    oar_dtype dtype;       /* OAR_BF16 or OAR_F16 */
    /* Per-context changes to the class table, by op name (NULL/0: none). An op named in
     * several lists takes the last: low, then fp32, then follow. custom_low is low on every
     * CPU (cpu_policy does not apply to it). */
    const char *const *custom_low;
    int n_custom_low;
    const char *const *custom_fp32;
    int n_custom_fp32;
    const char *const *custom_follow;
    int n_custom_follow;
    oar_amp_cpu_policy cpu_policy; /* AUTO (above) */
} oar_autocast_opts;

/* enabled, O1, bf16, no custom lists, cpu_policy AUTO. */
OAR_API oar_autocast_opts oar_autocast_defaults(void);
/* Opens an autocast region on this thread (nestable, 32 deep; the innermost rules). While one is
 * open, every op call casts its inputs per the class table with ordinary cast ops, which autograd
 * records and the tracer traces, so gradients reach each tensor in its own dtype. Backward runs
 * with autocast off: gradient rules keep their inputs' dtypes. */
OAR_API oar_status oar_autocast_begin(const oar_autocast_opts *opts);
/* Closes the innermost region (a warning, nothing else, when none is open). */
OAR_API void oar_autocast_end(void);
OAR_API bool oar_autocast_enabled(void);        /* an enabled region is innermost */
OAR_API oar_dtype oar_autocast_dtype(void);     /* its dtype; OAR_F32 outside */
/* The class of op (by name) for dtype: in the innermost enabled region when dtype is its dtype,
 * else the op's declared class. -1 with an error for an unknown op or a dtype other than
 * f16/bf16. */
OAR_API int oar_amp_op_class(const char *op, oar_dtype dtype);
OAR_API const char *oar_amp_class_name(oar_amp_class c); /* "follow", "low", "fp32", "promote" */
/* The low-precision path this CPU gets at the current ISA cap, in words (oar info prints it). */
OAR_API const char *oar_amp_cpu_path(oar_dtype dtype);

/* ---- dynamic loss scaling (torch.cuda.amp.GradScaler / paddle.amp.GradScaler) */
typedef struct oar_grad_scaler_opts {
    double init_scale;      /* 65536 */
    double growth_factor;   /* 2 */
    double backoff_factor;  /* 0.5 */
    int64_t growth_interval;/* 2000 good steps between growths */
    bool dynamic;           /* true; false: the scale stays init_scale (skips still happen) */
    double min_scale;       /* 1: the scale never backs off below it */
    int64_t warn_after;     /* 10: warn (once per streak) after this many skipped steps in a row */
} oar_grad_scaler_opts;
typedef struct oar_grad_scaler oar_grad_scaler;

OAR_API oar_grad_scaler_opts oar_grad_scaler_defaults(void);
OAR_API oar_grad_scaler *oar_grad_scaler_new(const oar_grad_scaler_opts *opts); /* NULL opts: defaults */
OAR_API void oar_grad_scaler_free(oar_grad_scaler *s);
/* loss * scale (tracked in the current scope), in loss's dtype; backward from it. */
OAR_API oar_tensor *oar_grad_scaler_scale(oar_grad_scaler *s, oar_tensor *loss);
/* Divides the gradients of the optimizer's parameters by the scale in place and records
 * whether any is inf/nan, in one fused pass (the amp_unscale op). Once per step at most: call it
 * before clipping so the clip sees true gradients; step calls it when you did not. */
OAR_API oar_status oar_grad_scaler_unscale(oar_grad_scaler *s, oar_optimizer *o);
/* Unscales if needed, then steps the optimizer unless an inf/nan was found. *skipped (may be
 * NULL) says which. */
OAR_API oar_status oar_grad_scaler_step(oar_grad_scaler *s, oar_optimizer *o, bool *skipped);
/* Adjusts the scale after a step (the amp_update_scale op): backoff on inf/nan, growth after
 * growth_interval good steps; clears the step's record. */
OAR_API oar_status oar_grad_scaler_update(oar_grad_scaler *s);
OAR_API double oar_grad_scaler_get_scale(const oar_grad_scaler *s);
OAR_API int64_t oar_grad_scaler_growth_tracker(const oar_grad_scaler *s); /* good steps since the last change */
OAR_API int64_t oar_grad_scaler_skipped(const oar_grad_scaler *s);        /* skipped steps in total */
OAR_API int64_t oar_grad_scaler_skip_streak(const oar_grad_scaler *s);    /* skipped in a row, now */
/* State for checkpoints: "scale" (f32 0-d), "growth_tracker" (i64 0-d), "skipped" (i64 0-d).
 * The tensors are the scaler's own (borrowed); load copies a value in. */
OAR_API int oar_grad_scaler_num_state(const oar_grad_scaler *s);
OAR_API oar_tensor *oar_grad_scaler_state(oar_grad_scaler *s, int i, const char **name);
OAR_API oar_status oar_grad_scaler_load_state(oar_grad_scaler *s, const char *name, const oar_tensor *value);

/* ---- O2: low-precision parameters with f32 master weights */
typedef struct oar_amp_decorate_opts {
    oar_dtype dtype;             /* OAR_BF16 or OAR_F16 */
    bool keep_norm_fp32;         /* true: batch/layer/group norm parameters stay f32 */
    const char *const *keep_fp32;/* more parameter path prefixes to keep f32 (NULL/0: none) */
    int n_keep_fp32;
} oar_amp_decorate_opts;
typedef struct oar_amp_masters oar_amp_masters;

OAR_API oar_amp_decorate_opts oar_amp_decorate_defaults(void); /* bf16, norms kept f32 */
/* Converts the module's trainable parameters to opts->dtype in place (the handles stay the
 * module's, so a forward written for f32 runs unchanged) and returns their f32 master copies.
 * Build the optimizer over the masters (oar_amp_masters_optimizer); after backward,
 * oar_amp_masters_step moves the low gradients to the masters, steps, and writes the masters
 * back to the parameters. Parameters kept f32 are their own masters. */
OAR_API oar_amp_masters *oar_amp_decorate(oar_module *m, const oar_amp_decorate_opts *opts);
/* The same over a list of parameters (frontends whose modules are not oar_modules: the Python
 * package's oar.amp.decorate): params[i] is converted in place unless keep[i] (keep NULL: none
 * kept); names[i] (names or an entry NULL: its index) names it in errors and checkpoints. Every
 * parameter must be f32 (a low one means a second decorate) and listed once; a refusal converts
 * none. */
OAR_API oar_amp_masters *oar_amp_decorate_params(oar_tensor *const *params, const char *const *names, const bool *keep,
                                                 int n, oar_dtype dtype);
OAR_API void oar_amp_masters_free(oar_amp_masters *w);
OAR_API int oar_amp_masters_count(const oar_amp_masters *w);
/* Master i (f32, borrowed) and the parameter's path in the module. */
OAR_API oar_tensor *oar_amp_master(oar_amp_masters *w, int i, const char **name);
/* An optimizer over the masters (caller frees it before the masters). */
OAR_API oar_optimizer *oar_amp_masters_optimizer(oar_amp_masters *w, const oar_optim_opts *opts);
/* Moves each low parameter's gradient, cast to f32, to its master's .grad, added to a gradient the
 * master holds already (the parameter's is dropped: the optimizer's zero_grad clears the masters'). */
OAR_API oar_status oar_amp_masters_sync_grads(oar_amp_masters *w);
/* Writes the masters back into the low parameters (rounded to nearest even). */
OAR_API oar_status oar_amp_masters_sync_params(oar_amp_masters *w);
/* sync_grads, then the scaler's step (or the optimizer's when s is NULL), then sync_params. */
OAR_API oar_status oar_amp_masters_step(oar_amp_masters *w, oar_optimizer *o, oar_grad_scaler *s, bool *skipped);

/* Checkpoints of AMP runs: oar_checkpoint_save_all's file with the f32 masters saved under the
 * parameters' names (w may be NULL), and the scaler's state (sc may be NULL) in <path>.scaler.
 * The load restores the masters, rounds them into the low parameters and restores the scaler, so
 * a resumed run continues bit for bit. */
OAR_API oar_status oar_amp_checkpoint_save(const char *path, oar_module *m, oar_optimizer *o, oar_scheduler *s,
                                           oar_amp_masters *w, oar_grad_scaler *sc, int64_t step);
OAR_API oar_status oar_amp_checkpoint_load(const char *path, oar_module *m, oar_optimizer *o, oar_scheduler *s,
                                           oar_amp_masters *w, oar_grad_scaler *sc, int64_t *step);

#ifdef __cplusplus
}
#endif
#endif /* OAR_AMP_H */
