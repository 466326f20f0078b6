/* Internal profiler interface: what the other layers call.
 *
 * The recording core here is a leaf, like logging: it only needs base/ and tensor/, so any
 * layer may call it (ops dispatch, the static executor, autograd, optimizers, the loader).
 * The public side (start/stop, scheduler, summaries, Chrome trace) is in oar.h, section 13.
 *
 * Cost when off: every hook starts with one relaxed load of a global int and a predictable
 * branch. Timer mode records nothing per op: only step marks and loader waits.
 *
 * How a caller times one kernel run (the eager dispatch and the static executor alike):
 *
 *     int64_t t0 = oar_prof_spans_on() ? oar_prof_now() : 0;
 *     st = k->fn(&ctx, in, n_in, out, n_out, attrs);
 *     if (t0 && st == OAR_OK)
 *         oar_prof_kernel_end(op_name, k->impl, in, n_in, out, n_out, t0);
 *     if (st == OAR_OK && oar_prof_check_on())
 *         st = oar_check_outputs(op_name, in, n_in, out, n_out);
 *
 * op_name is the op (or fused op: "linear_relu", ...) and impl the kernel's backend
 * ("reference", "avx2", "openblas", "onednn", ...). Both must be string literals or
 * otherwise live for the whole process (they are stored by pointer). Input shapes and dtypes
 * are copied into the span when the run records shapes; FLOPs come from oar_prof_flops.
 * The eager dispatch uses the oar_prof_call_* hooks below (one load when off), which also
 * separate the op's framework time (allocation, autograd recording) from the kernel's. On a
 * device with a timeline (CUDA) they also record marks (events) on the device's stream around
 * the kernel, resolved into device spans only when a summary or trace is made.
 */
#ifndef OAR_PROFILER_H
#define OAR_PROFILER_H

#include "tensor/tensor.h"

#include <time.h>

enum { OAR_PROF_OFF = 0, OAR_PROF_TIMER = 1, OAR_PROF_FULL = 2 };

/* OAR_PROF_FULL while spans are being recorded (a full run inside its scheduler's window),
 * OAR_PROF_TIMER while a run is active but not recording spans, OAR_PROF_OFF otherwise. */
extern int oar_prof_level;
/* Nonzero when the NaN/Inf check is on (oar_set_check_nan_inf, OAR_CHECK_NAN_INF=1). */
extern int oar_prof_nan_check;

/* Bit 0: spans are being recorded; bit 1: the NaN/Inf check is on. The eager dispatch reads
 * only this, once per call. */
extern int oar_prof_hooks;
static inline int oar_prof_hooks_on(void) { return __atomic_load_n(&oar_prof_hooks, __ATOMIC_RELAXED); }

static inline bool oar_prof_spans_on(void) {
    return OAR_UNLIKELY(__atomic_load_n(&oar_prof_level, __ATOMIC_ACQUIRE) >= OAR_PROF_FULL);
}
static inline bool oar_prof_active(void) {
    return OAR_UNLIKELY(__atomic_load_n(&oar_prof_level, __ATOMIC_RELAXED) != OAR_PROF_OFF);
}
static inline bool oar_prof_check_on(void) {
    return OAR_UNLIKELY(__atomic_load_n(&oar_prof_nan_check, __ATOMIC_RELAXED) != 0);
}
/* Nanoseconds on CLOCK_MONOTONIC; never 0. */
static inline int64_t oar_prof_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
}

/* One op execution: [t0, t1] is the whole call, [k0, k1] its kernel (k0 == 0: no kernel, e.g.
 * a view). in/out are read for shapes, dtypes and FLOPs. Call only when t0 != 0. */
void oar_prof_op(const char *name, const char *impl, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                 int n_out, int64_t t0, int64_t k0, int64_t k1, int64_t t1);
/* The eager dispatch's hooks, used when oar_prof_hooks_on() was nonzero at the start of the
 * call: call_begin and call_end around the whole call (ok: it succeeded, and its span is
 * recorded), kernel_begin/kernel_end around the kernel (kernel_end runs the NaN/Inf check and
 * returns the call's status). They nest, for ops called inside an op. */
void oar_prof_call_begin(void);
void oar_prof_call_kernel_begin(const char *impl, oar_device dev);
oar_status oar_prof_call_kernel_end(const char *name, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                    int n_out, oar_status st);
void oar_prof_call_end(const char *name, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                       bool ok);

/* A kernel run timed from t0 to now, as one span (the static executor's instructions). */
void oar_prof_kernel_end(const char *name, const char *impl, oar_tensor *const *in, int n_in,
                         oar_tensor *const *out, int n_out, int64_t t0);

/* Ranges: nested per thread. The names "forward", "backward" and "optimizer" are the
 * overview's phases (counted once where they nest). oar_prof_push copies name. */
void oar_prof_push(const char *name);
void oar_prof_pop(void);
/* The innermost phase range open on this thread (1 forward, 2 backward, 3 optimizer; 0 none),
 * tracked even with the profiler off: the tracer stamps each node with it. */
uint8_t oar_prof_current_phase(void);
const char *oar_prof_phase_name(uint8_t phase); /* NULL for 0 */
/* Whether ranges are recorded now (a full run): the executor then replays node phases. */
bool oar_prof_ranges_on(void);

/* Time the caller waited for data in [t0, t1] (the loader's reader cost). Counted by the
 * timer; a "dataloader" span in full mode. */
void oar_prof_reader(int64_t t0, int64_t t1);
/* A span [t0, t1] on the calling thread (e.g. a loader worker building a batch); name must
 * live for the whole process. */
void oar_prof_span(const char *name, int64_t t0, int64_t t1);
/* Names the calling thread's track in the trace (copied); cheap to call repeatedly. */
void oar_prof_thread_name(const char *name);

/* FLOPs of one execution from its inputs' and outputs' shapes, for matmul, linear, conv1d,
 * conv2d (and their gradient ops), conv_transpose2d, and fused ops whose names start with
 * one of those; 0 when unknown. */
double oar_prof_flops(const char *name, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out);

/* The NaN/Inf check: scans the floating-point outputs; on the first NaN or Inf returns
 * OAR_ERR_NUMERIC with a message naming the op, the output, the counts, and the min, max and
 * mean of every input. Call when oar_prof_check_on(). */
oar_status oar_check_outputs(const char *op_name, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                             int n_out);

/* How many NaN values t holds (any float dtype, strided or on a device; 0 for other dtypes). */
int64_t oar_count_nan(oar_tensor *t);

/* How many times oar_check_outputs failed on this thread: a caller that runs ops whose
 * failures it would not otherwise see (gradient rules treat a NULL result as a zero
 * gradient) compares it before and after. */
uint64_t oar_prof_nan_failures(void);

/* Reads OAR_CHECK_NAN_INF from the environment (called by oar_init). */
void oar_prof_init_from_env(void);

#endif
