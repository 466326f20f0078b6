/* The eager call path: validate -> infer -> allocate or view -> select kernel -> run -> record.
 * Kept short and allocation-light: it runs once per op call. */
#include "ops/dispatch.h"
#include "ops/kernel_calls.h"
#include "base/device.h"
#include "profiler/profiler.h"

#include <stdlib.h>
#include <string.h>

static oar_record_fn g_recorder;
void oar_dispatch_set_recorder(oar_record_fn fn) { g_recorder = fn; }
static oar_trace_fn g_tracer;
void oar_dispatch_set_tracer(oar_trace_fn fn) { g_tracer = fn; }
static oar_trace_assign_fn g_trace_assign;
void oar_dispatch_set_trace_assign(oar_trace_assign_fn fn) { g_trace_assign = fn; }
oar_status oar_dispatch_trace_assign(oar_tensor *dst, const oar_tensor *src) {
    if (oar_active_trace && g_trace_assign) return g_trace_assign(dst, src);
    return oar_symbolic_error("copy_", dst);
}

static oar_status check_inputs(const oar_op_def *d, oar_tensor *const *in, int n_in, bool symbolic_ok) {
    if (d->n_inputs >= 0 ? n_in != d->n_inputs : (n_in < 1 || n_in > OAR_MAX_INPUTS))
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected %s%d inputs, got %d", d->name,
                         d->n_inputs < 0 ? "1 to " : "", d->n_inputs < 0 ? OAR_MAX_INPUTS : d->n_inputs,
                         n_in);
    for (int i = 0; i < n_in; i++) {
        if (in[i]) {
            if (OAR_UNLIKELY(!OAR_HANDLE_OK(in[i]))) return oar_handle_error(d->name, "input", i, in[i]);
            if (!in[i]->storage && !symbolic_ok)
                return oar_error(OAR_ERR_STATE, "%s: input %d is symbolic (being traced); eager "
                                                "calls need tensors with data", d->name, i);
            continue;
        }
        if (i < 32 && (d->optional_inputs >> i) & 1u) continue;
        if (oar_last_status() != OAR_OK) return oar_last_status(); /* keep the first error */
        return oar_error(OAR_ERR_INVALID_ARG, "%s: input %d is NULL; expected a tensor", d->name, i);
    }
    /* one device per call (0-d host scalars and the op's host inputs aside) */
    oar_device dev = oar_call_device(in, n_in);
    for (int i = 0; i < n_in; i++) {
        if (!in[i] || in[i]->device == dev) continue;
        if (in[i]->device == OAR_CPU && (in[i]->ndim == 0 || (i < 32 && ((d->host_inputs >> i) & 1u)))) continue;
        int first = 0;
        while (!in[first] || in[first]->device != dev) first++;
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected all inputs on one device, got input %d on %s and "
                                              "input %d on %s; move one with oar_to", d->name, first,
                         oar_device_name(dev), i, oar_device_name(in[i]->device));
    }
    return OAR_OK;
}

/* The device an op's outputs live on. */
static oar_device output_device(const oar_op_def *d, oar_tensor *const *in, int n_in, const oar_attr *attrs) {
    if (d->flags & OAR_OPF_TO_DEVICE) return (oar_device)attrs[0].i;
    return oar_call_device(in, n_in);
}

static oar_status infer(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *attrs, oar_meta *out,
                        int *n_out, bool symbolic_ok) {
    const oar_op_def *d = oar_op_table[op];
    oar_status st = check_inputs(d, in, n_in, symbolic_ok);
    if (st != OAR_OK) return st;
    for (int i = 0; i < d->n_attrs; i++) {
        if (!attrs || attrs[i].kind != d->attrs[i].kind)
            return oar_error(OAR_ERR_INVALID_ARG, "%s: attribute '%s' is missing or has the wrong kind",
                             d->name, d->attrs[i].name);
    }
    int n = d->n_outputs >= 0 ? d->n_outputs : OAR_MAX_OUTPUTS;
    st = d->infer(in, n_in, attrs, out, &n);
    if (st != OAR_OK) return st;
    *n_out = n;
    return OAR_OK;
}

oar_status oar_op_infer(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *attrs,
                        oar_meta *out, int *n_out) {
    return infer(op, in, n_in, attrs, out, n_out, oar_active_trace != 0);
}

oar_status oar_op_infer_symbolic(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *attrs,
                                 oar_meta *out, int *n_out) {
    return infer(op, in, n_in, attrs, out, n_out, true);
}

oar_status oar_dispatch_record(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *attrs,
                               oar_tensor *const *out, int n_out) {
    if (!g_recorder || (oar_op_table[op]->flags & OAR_OPF_NONDIFF)) return OAR_OK;
    for (int i = 0; i < n_in; i++)
        if (in[i] && in[i]->requires_grad) return g_recorder(op, in, n_in, attrs, out, n_out);
    return OAR_OK;
}

uint64_t oar_kernel_calls_n; /* kernel_calls.h */

/* A contiguous copy of x by the best `contiguous` kernel (the blocked, threaded layout copy on
 * CPU: a permuted view, e.g. the NCHW view of an NHWC conv's output read by a pooling, copies
 * several times faster than through the generic strided iterator). */
static oar_tensor *contiguous_copy(oar_tensor *x) {
    oar_tensor *t = oar_tensor_new_on(x->device, x->dtype, x->shape, x->ndim);
    if (!t) return NULL;
    const oar_kernel_entry *k = oar_select_kernel(OAR_OP_contiguous, &x, 1, &t, 1, NULL);
    oar_kctx ctx = {.nthreads = oar_get_num_threads(), .device = x->device, .stream = oar_device_stream(x->device)};
    if (k) oar_kernel_call_begin();
    if (!k || k->fn(&ctx, &x, 1, &t, 1, NULL) != OAR_OK) {
        oar_clear_error();
        if (oar_tensor_copy_strided(t, x) != OAR_OK) {
            oar_tensor_unref(t);
            return NULL;
        }
    }
    return t;
}

oar_status oar_op_run_kernel(oar_op_id op, const oar_kernel_entry *k, oar_tensor *const *in,
                             int n_in, oar_tensor *const *out, int n_out, const oar_attr *attrs) {
    const oar_op_def *d = oar_op_table[op];
    oar_tensor *tmp[OAR_MAX_INPUTS];
    oar_tensor *const *args = in;
    int n_tmp = 0;
    oar_device dev = k->device;
    bool moves = false; /* 0-d host scalars join a call on another device as device copies */
    for (int i = 0; i < n_in && dev != OAR_CPU; i++)
        moves |= in[i] && in[i]->device == OAR_CPU && !(i < 32 && ((d->host_inputs >> i) & 1u));
    if (!(d->flags & OAR_OPF_STRIDED) || moves) {
        for (int i = 0; i < n_in; i++) {
            bool move = dev != OAR_CPU && in[i] && in[i]->device == OAR_CPU && !(i < 32 && ((d->host_inputs >> i) & 1u));
            if (move) {
                if (args == in) {
                    memcpy(tmp, in, sizeof(*in) * (size_t)n_in);
                    args = tmp;
                }
                tmp[i] = oar_tensor_new_on(dev, in[i]->dtype, in[i]->shape, in[i]->ndim);
                if (!tmp[i] || oar_tensor_copy_strided(tmp[i], in[i]) != OAR_OK) {
                    oar_status st = oar_last_status();
                    for (int j = 0; j <= i; j++)
                        if (tmp[j] != in[j]) oar_tensor_unref(tmp[j]);
                    return st;
                }
                n_tmp++;
            } else if (in[i] && !in[i]->contiguous && !(d->flags & OAR_OPF_STRIDED)) {
                if (args == in) {
                    memcpy(tmp, in, sizeof(*in) * (size_t)n_in);
                    args = tmp;
                }
                tmp[i] = contiguous_copy(in[i]);
                if (!tmp[i]) {
                    for (int j = 0; j < i; j++)
                        if (tmp[j] != in[j]) oar_tensor_unref(tmp[j]);
                    return OAR_ERR_OOM;
                }
                n_tmp++;
            }
        }
    }
    oar_kctx ctx = {.nthreads = oar_get_num_threads(), .device = dev, .stream = oar_device_stream(dev)};
    if (d->flags & OAR_OPF_RANDOM) {
        int64_t draws = d->draws ? d->draws(out, n_out, attrs) : n_out ? out[0]->numel : 0;
        ctx.rng = oar_rng_reserve((uint64_t)draws);
    }
    /* a kernel that composes other ops runs them as they are, without autocast's casts */
    const oar_amp_policy *amp = oar_amp_active;
    if (OAR_UNLIKELY(amp != NULL)) oar_amp_active = NULL;
    oar_kernel_call_begin();
    oar_status st = k->fn(&ctx, args, n_in, out, n_out, attrs);
    oar_amp_active = amp;
    if (n_tmp)
        for (int i = 0; i < n_in; i++)
            if (tmp[i] != in[i]) oar_tensor_unref(tmp[i]);
    if (st != OAR_OK && oar_last_status() == OAR_OK)
        oar_error(st, "%s: the %s kernel failed without a message", d->name, k->impl);
    return st;
}

/* The call itself. prof (profiler spans, the NaN/Inf check) is a constant in each of the two
 * copies oar_op_call uses, so the plain one carries no trace of the hooks. */
#if defined(__GNUC__)
#define CALL_INLINE inline __attribute__((always_inline))
#define CALL_COLD __attribute__((noinline, cold))
#else
#define CALL_INLINE inline
#define CALL_COLD
#endif
static CALL_INLINE oar_status call(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *attrs,
                                   oar_tensor **out, int *n_out, const int prof) {
    const oar_op_def *d = oar_op_table[op];
    oar_meta meta[OAR_MAX_OUTPUTS];
    int n = 0;
    oar_status st = oar_op_infer(op, in, n_in, attrs, meta, &n);
    if (st != OAR_OK) return st;
    if (n > *n_out)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: produces %d outputs but room was given for %d",
                         d->name, n, *n_out);
    int made = 0;
    oar_device dev = output_device(d, in, n_in, attrs);
    for (; made < n; made++) {
        oar_tensor *t;
        if (d->flags & OAR_OPF_VIEW) {
            t = oar_tensor_alias(in[0]);
            if (t) {
                t->dtype = meta[made].dtype;
                t->ndim = meta[made].ndim;
                memcpy(t->shape, meta[made].shape, sizeof(int64_t) * (size_t)t->ndim);
            }
        } else {
            t = oar_tensor_new_on(dev, meta[made].dtype, meta[made].shape, meta[made].ndim);
        }
        if (!t) {
            st = oar_last_status();
            goto fail;
        }
        out[made] = t;
    }
    if (d->flags & OAR_OPF_VIEW) {
        st = d->view(in, n_in, attrs, out, n);
        for (int i = 0; i < n; i++) oar_tensor_refresh(out[i]);
    } else {
        const oar_kernel_entry *k = oar_select_kernel(op, in, n_in, out, n, attrs);
        if (OAR_UNLIKELY(prof) && k) oar_prof_call_kernel_begin(k->impl, dev);
        st = k ? oar_op_run_kernel(op, k, in, n_in, out, n, attrs) : oar_last_status();
        if (OAR_UNLIKELY(prof) && k) st = oar_prof_call_kernel_end(d->name, in, n_in, out, n, st);
    }
    if (st != OAR_OK) goto fail;
    if ((st = oar_dispatch_record(op, in, n_in, attrs, out, n)) != OAR_OK) goto fail;
    *n_out = n;
    return OAR_OK;
fail:
    for (int i = 0; i < made; i++) oar_tensor_unref(out[i]);
    return st;
}

static CALL_COLD oar_status call_profiled(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *attrs,
                                          oar_tensor **out, int *n_out) {
    if (OAR_UNLIKELY(oar_active_trace) && g_tracer) return g_tracer(op, in, n_in, attrs, out, n_out);
    oar_prof_call_begin();
    oar_status st = call(op, in, n_in, attrs, out, n_out, 1);
    oar_prof_call_end(oar_op_table[op]->name, in, n_in, out, st == OAR_OK ? *n_out : 0, st == OAR_OK);
    return st;
}

oar_status oar_op_call(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *attrs,
                       oar_tensor **out, int *n_out) {
    oar_init();
    if (OAR_UNLIKELY(oar_amp_active != NULL) && oar_amp_active->cls[op]) return oar_amp_op_call(op, in, n_in, attrs, out, n_out);
    return oar_op_call_plain(op, in, n_in, attrs, out, n_out);
}

oar_status oar_op_call_plain(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *attrs,
                             oar_tensor **out, int *n_out) {
    if (OAR_UNLIKELY(oar_prof_hooks_on())) return call_profiled(op, in, n_in, attrs, out, n_out);
    if (OAR_UNLIKELY(oar_active_trace) && g_tracer) return g_tracer(op, in, n_in, attrs, out, n_out);
    return call(op, in, n_in, attrs, out, n_out, 0);
}

oar_tensor *oar_op_call1(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *attrs) {
    oar_tensor *out[OAR_MAX_OUTPUTS];
    int n = OAR_MAX_OUTPUTS;
    if (oar_op_call(op, in, n_in, attrs, out, &n) != OAR_OK) return NULL;
    /* hidden outputs (e.g. a dropout mask) stay alive through the autograd node only */
    for (int i = 1; i < n; i++) oar_tensor_unref(out[i]);
    return oar_track(out[0]);
}
