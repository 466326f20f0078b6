/* Dynamic loss scaling, as torch.cuda.amp.GradScaler: the loss is multiplied by the scale before
 * backward, gradients are divided by it (amp_unscale: one fused pass that also notes inf/nan),
 * the step is skipped when any gradient is not finite, and the scale backs off on such steps and
 * grows after growth_interval good ones (amp_update_scale). State lives in 0-d tensors so
 * checkpoints save it like any tensor; it moves to the gradients' device at the first unscale
 * (as torch's scaler keeps it on the GPU), so on a GPU the ops run there and the host reads
 * it back only when the step asks whether to skip. */
#include "graph/trace.h"
#include "ops/op.h"
#include "optim/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define UNSCALE_CHUNK 30 /* gradients per amp_unscale call (its in-place inputs fit a 32-bit mask) */
#define SKIP_CHUNK 30    /* hyper tensors per amp_skip_step call (the same reason) */

/* The host side of one compiled step that holds the scaler's check-and-skip (the user of its
 * run hooks): after each run, the skip streak and its warning, and the optimizer's step count
 * less the steps skipped in-program (as eager steps count only those taken). Outlives whichever
 * of the scaler and the program lets go first (s = NULL once the scaler is freed). */
typedef struct traced_step {
    struct oar_grad_scaler *s;
    oar_optim_traced *optim; /* the optimizer's record of the same trace (a hold), or NULL */
    int64_t skipped_before;
    int refs;                /* the scaler's and the hooks' */
} traced_step;

struct oar_grad_scaler {
    oar_grad_scaler_opts opts;
    oar_tensor *scale;          /* f32 0-d */
    oar_tensor *growth_tracker; /* i64 0-d: good steps since the scale last changed */
    oar_tensor *skipped;        /* i64 0-d: skipped steps in total */
    oar_tensor *found;          /* f32 0-d: this step's gradients hold an inf/nan */
    oar_tensor *inv_scale;      /* f32 0-d */
    const oar_optimizer *unscaled; /* the optimizer unscaled this step, if any */
    int64_t streak;             /* skipped steps in a row */
    traced_step **traced;       /* one per trace that recorded a step */
    int n_traced;
    oar_state_source source;    /* its state for compiled steps: "scaler.<name>" */
};

static const char *const state_names[] = {"scale", "growth_tracker", "skipped", "found", "inv_scale"};
#define N_STATE 3  /* saved in checkpoints */
#define N_BOUND 5  /* bound into compiled steps: also this step's record and 1/scale */

oar_grad_scaler_opts oar_grad_scaler_defaults(void) {
    return (oar_grad_scaler_opts){.init_scale = 65536.0, .growth_factor = 2.0, .backoff_factor = 0.5,
                                  .growth_interval = 2000, .dynamic = true, .min_scale = 1.0, .warn_after = 10};
}

static oar_tensor *scalar(oar_dtype dt, double v) {
    oar_tensor *t = oar_tensor_new(dt, NULL, 0);
    if (t && oar_tensor_fill(t, v) != OAR_OK) {
        oar_tensor_unref(t);
        return NULL;
    }
    return t;
}

static oar_tensor *state_tensor(oar_grad_scaler *s, int i) {
    oar_tensor *t[N_BOUND] = {s->scale, s->growth_tracker, s->skipped, s->found, s->inv_scale};
    return t[i];
}

static int source_count(void *owner) { return owner ? N_BOUND : 0; }
static oar_tensor *source_tensor(void *owner, int i, const char **name) {
    if (name) *name = state_names[i];
    return state_tensor(owner, i);
}

const oar_state_source *oar_grad_scaler_state_source(oar_grad_scaler *s) { return s ? &s->source : NULL; }

oar_grad_scaler *oar_grad_scaler_new(const oar_grad_scaler_opts *opts) {
    oar_init();
    oar_grad_scaler_opts o = opts ? *opts : oar_grad_scaler_defaults();
    if (!(o.init_scale > 0 && isfinite(o.init_scale)) || !(o.growth_factor >= 1.0) ||
        !(o.backoff_factor > 0 && o.backoff_factor <= 1.0) || o.growth_interval < 1 || !(o.min_scale > 0) ||
        o.warn_after < 0) {
        oar_error(OAR_ERR_INVALID_ARG, "oar_grad_scaler_new: expected init_scale > 0, growth_factor >= 1, "
                                       "0 < backoff_factor <= 1, growth_interval >= 1, min_scale > 0 and warn_after >= 0, "
                                       "got %g, %g, %g, %lld, %g, %lld; start from oar_grad_scaler_defaults()",
                  o.init_scale, o.growth_factor, o.backoff_factor, (long long)o.growth_interval, o.min_scale,
                  (long long)o.warn_after);
        return NULL;
    }
    oar_grad_scaler *s = calloc(1, sizeof *s);
    if (!s) {
        oar_error(OAR_ERR_OOM, "oar_grad_scaler_new: out of memory");
        return NULL;
    }
    s->opts = o;
    s->source = (oar_state_source){.owner = s, .count = source_count, .tensor = source_tensor, .prefix = "scaler."};
    s->scale = scalar(OAR_F32, o.init_scale);
    s->growth_tracker = scalar(OAR_I64, 0);
    s->skipped = scalar(OAR_I64, 0);
    s->found = scalar(OAR_F32, 0);
    s->inv_scale = scalar(OAR_F32, 1);
    if (!s->scale || !s->growth_tracker || !s->skipped || !s->found || !s->inv_scale) {
        oar_grad_scaler_free(s);
        return NULL;
    }
    return s;
}

static void traced_release(traced_step *r) {
    if (r && __atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        oar_optim_traced_release(r->optim);
        free(r);
    }
}

void oar_grad_scaler_free(oar_grad_scaler *s) {
    if (!s) return;
    for (int k = 0; k < s->n_traced; k++) { /* compiled steps may still hold these */
        s->traced[k]->s = NULL;
        traced_release(s->traced[k]);
    }
    free(s->traced);
    oar_tensor_unref(s->scale);
    oar_tensor_unref(s->growth_tracker);
    oar_tensor_unref(s->skipped);
    oar_tensor_unref(s->found);
    oar_tensor_unref(s->inv_scale);
    free(s);
}

/* A 0-d state tensor's value, read back from its device when it is not on the host. */
static double value_of(const oar_tensor *t) {
    if (t->device == OAR_CPU) return oar_dtypes[t->dtype].load(oar_tensor_ptr(t));
    double v = 0;
    oar_tensor *h = oar_tensor_new(t->dtype, NULL, 0);
    if (h && oar_tensor_copy_strided(h, t) == OAR_OK) v = oar_dtypes[h->dtype].load(oar_tensor_ptr(h));
    oar_tensor_unref(h);
    return v;
}
static float f32_of(const oar_tensor *t) { return (float)value_of(t); }
static int64_t i64_of(const oar_tensor *t) { return (int64_t)value_of(t); }

/* Moves *t to dev (its value kept). */
static oar_status move_to(oar_tensor **t, oar_device dev) {
    if ((*t)->device == dev) return OAR_OK;
    oar_tensor *m = oar_tensor_new_on(dev, (*t)->dtype, NULL, 0);
    if (!m) return oar_last_status();
    oar_status st = oar_tensor_copy_strided(m, *t);
    if (st != OAR_OK) {
        oar_tensor_unref(m);
        return st;
    }
    oar_tensor_unref(*t);
    *t = m;
    return OAR_OK;
}

/* The state the ops read and write goes where the gradients are (the skip count stays on
 * the host: only the host reads it). */
static oar_status state_to(oar_grad_scaler *s, oar_device dev) {
    oar_status st;
    if ((st = move_to(&s->scale, dev)) != OAR_OK || (st = move_to(&s->growth_tracker, dev)) != OAR_OK ||
        (st = move_to(&s->found, dev)) != OAR_OK || (st = move_to(&s->inv_scale, dev)) != OAR_OK)
        return st;
    return OAR_OK;
}

/* inv_scale = 1/scale in double, rounded once to f32, as torch does; on a device by ops, so
 * the scale is not read back. */
static oar_status set_inv_scale(oar_grad_scaler *s) {
    if (s->scale->device == OAR_CPU) {
        *(float *)oar_tensor_ptr(s->inv_scale) = (float)(1.0 / (double)f32_of(s->scale));
        return OAR_OK;
    }
    oar_no_grad_begin();
    oar_tensor *one = oar_full(NULL, 0, 1.0, OAR_F64), *sc = oar_cast(s->scale, OAR_F64);
    oar_tensor *inv = one && sc ? oar_div(one, sc) : NULL;
    oar_status st = inv ? oar_tensor_copy_strided(s->inv_scale, inv) : oar_last_status();
    oar_release(inv);
    oar_release(sc);
    oar_release(one);
    oar_no_grad_end();
    return st;
}

oar_tensor *oar_grad_scaler_scale(oar_grad_scaler *s, oar_tensor *loss) {
    if (!s || !loss) {
        oar_error(OAR_ERR_INVALID_ARG, "oar_grad_scaler_scale: expected a scaler and a loss, got %s",
                  s ? "a NULL loss" : "a NULL scaler");
        return NULL;
    }
    if (!oar_dtype_is_float(loss->dtype)) {
        oar_error(OAR_ERR_DTYPE, "oar_grad_scaler_scale: expected a float loss, got %s", oar_dtype_name(loss->dtype));
        return NULL;
    }
    oar_tensor *sc = s->scale;
    if (loss->dtype != OAR_F32) sc = oar_cast(sc, loss->dtype);
    return sc ? oar_mul(loss, sc) : NULL;
}

static oar_status begin_unscale(oar_grad_scaler *s) {
    oar_tensor *in[3] = {s->scale, s->inv_scale, s->found}, *none[1];
    int n_out = 1;
    return oar_op_call(OAR_OP_amp_begin_unscale, in, 3, NULL, none, &n_out);
}

/* Traced: amp_unscale_grads over one run of parameters; their gradients become its outputs. */
static oar_status unscale_chunk_traced(oar_grad_scaler *s, oar_tensor **params, int n) {
    oar_tensor *in[UNSCALE_CHUNK + 2] = {s->found, s->inv_scale}, *out[UNSCALE_CHUNK];
    for (int i = 0; i < n; i++) in[2 + i] = params[i]->grad;
    int n_out = n;
    oar_status st = oar_op_call(OAR_OP_amp_unscale_grads, in, n + 2, NULL, out, &n_out);
    for (int i = 0; i < n && st == OAR_OK; i++) { /* new references: the parameters take them */
        oar_tensor_unref(params[i]->grad);
        params[i]->grad = out[i];
    }
    return st;
}

/* amp_unscale over one run of gradients. */
static oar_status unscale_chunk(oar_grad_scaler *s, oar_tensor **grads, int n) {
    oar_tensor *in[UNSCALE_CHUNK + 2] = {s->found, s->inv_scale};
    for (int i = 0; i < n; i++) in[2 + i] = grads[i];
    oar_tensor *none[1];
    int n_out = 1;
    return oar_op_call(OAR_OP_amp_unscale, in, n + 2, NULL, none, &n_out);
}

oar_status oar_grad_scaler_unscale(oar_grad_scaler *s, oar_optimizer *o) {
    if (!s || !o)
        return oar_error(OAR_ERR_INVALID_ARG, "oar_grad_scaler_unscale: expected a scaler and an optimizer, got NULL");
    if (s->unscaled == o)
        return oar_error(OAR_ERR_STATE, "oar_grad_scaler_unscale: this optimizer's gradients were already unscaled "
                                        "since the last oar_grad_scaler_update; unscale once per step");
    oar_status st = OAR_OK;
    bool traced = oar_active_trace != 0;
    for (int i = 0; i < o->n_params && !traced; i++)
        if (o->params[i].t->grad) {
            st = state_to(s, o->params[i].t->grad->device);
            break;
        }
    /* traced: 1/scale and the clean record are ops of the program (the host writes below would
     * happen once, at trace time) */
    if (st == OAR_OK) st = traced ? begin_unscale(s) : set_inv_scale(s);
    if (st != OAR_OK) return st;
    oar_tensor *chunk[UNSCALE_CHUNK];
    int n = 0;
    for (int i = 0; i < o->n_params && st == OAR_OK; i++) {
        oar_tensor *p = o->params[i].t, *g = p->grad;
        if (!g) continue;
        if (traced) {
            chunk[n++] = p;
            if (n == UNSCALE_CHUNK) {
                st = unscale_chunk_traced(s, chunk, n);
                n = 0;
            }
            continue;
        }
        if (!g->contiguous) { /* amp_unscale writes in place: give the parameter a contiguous gradient */
            oar_tensor *c = oar_tensor_contiguous_copy(g);
            if (!c) return oar_last_status();
            oar_tensor_unref(p->grad);
            p->grad = g = c;
        }
        chunk[n++] = g;
        if (n == UNSCALE_CHUNK) {
            st = unscale_chunk(s, chunk, n);
            n = 0;
        }
    }
    if (st == OAR_OK && n) st = traced ? unscale_chunk_traced(s, chunk, n) : unscale_chunk(s, chunk, n);
    if (st == OAR_OK) s->unscaled = o;
    return st;
}

static void traced_warn(oar_grad_scaler *s) {
    if (s->opts.warn_after > 0 && s->streak == s->opts.warn_after)
        oar_warn("oar_grad_scaler_step: %lld steps in a row skipped for inf/nan gradients (scale %g, floor %g); "
                 "the loss itself may be inf/nan, or the learning rate too high",
                 (long long)s->streak, (double)f32_of(s->scale), s->opts.min_scale);
}

static oar_status before_run(void *user) {
    traced_step *r = user;
    if (!r->s)
        return oar_error(OAR_ERR_STATE, "jit_call: the loss scaler this function uses was freed (oar_grad_scaler_free) "
                                        "while the compiled function still uses it; free the compiled function first "
                                        "(oar_jit_free), or keep the scaler until then");
    r->skipped_before = i64_of(r->s->skipped);
    return OAR_OK;
}

/* One host read per run (the skip count), none per parameter. */
static void after_run(void *user) {
    traced_step *r = user;
    if (!r->s) return;
    int64_t skipped = i64_of(r->s->skipped) - r->skipped_before;
    if (r->optim && r->optim->o) r->optim->o->steps -= skipped;
    if (skipped == 0) {
        r->s->streak = 0;
        return;
    }
    for (int64_t k = 0; k < skipped; k++) {
        r->s->streak++;
        traced_warn(r->s);
    }
}

static void release_hooks(void *user) { traced_release(user); }

/* The record of the trace running now, made (its hooks registered) at its first step. */
static traced_step *traced_record(oar_grad_scaler *s, oar_optimizer *o) {
    for (int k = s->n_traced - 1; k >= 0; k--)
        if (s->traced[k]->optim && s->traced[k]->optim->trace == oar_active_trace) return s->traced[k];
    traced_step **list = realloc(s->traced, sizeof *list * (size_t)(s->n_traced + 1));
    if (!list) return NULL;
    s->traced = list;
    traced_step *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    *r = (traced_step){.s = s, .optim = oar_optim_traced_hold(o), .refs = 2}; /* the scaler and the hooks */
    if (oar_trace_add_run_hook(before_run, after_run, release_hooks, r) != OAR_OK) {
        oar_optim_traced_release(r->optim);
        free(r);
        return NULL;
    }
    s->traced[s->n_traced++] = r;
    return r;
}

/* A traced step: amp_skip_step sets every stepped parameter's skip flag when an inf/nan was
 * found, then the optimizer's updates are recorded as usual (a flagged update changes nothing).
 * Whether a run skipped is known after it (the hooks above), not while tracing. */
static oar_status traced_step_(oar_grad_scaler *s, oar_optimizer *o) {
    oar_tensor *in[SKIP_CHUNK + 2] = {s->found, s->skipped}, *none[1];
    int n = 0;
    oar_status st = OAR_OK;
    for (int i = 0; i <= o->n_params && st == OAR_OK; i++) {
        if (i < o->n_params && o->params[i].t->grad) in[2 + n++] = o->params[i].hyper;
        if (n && (n == SKIP_CHUNK || i == o->n_params)) {
            int n_out = 1;
            st = oar_op_call(OAR_OP_amp_skip_step, in, n + 2, NULL, none, &n_out);
            n = 0;
        }
    }
    if (st == OAR_OK) st = oar_optimizer_step(o);
    if (st == OAR_OK && !traced_record(s, o)) st = oar_error(OAR_ERR_OOM, "oar_grad_scaler_step: out of memory");
    return st;
}

oar_status oar_grad_scaler_step(oar_grad_scaler *s, oar_optimizer *o, bool *skipped) {
    if (skipped) *skipped = false;
    if (!s || !o)
        return oar_error(OAR_ERR_INVALID_ARG, "oar_grad_scaler_step: expected a scaler and an optimizer, got NULL");
    oar_status st = OAR_OK;
    if (s->unscaled != o && (st = oar_grad_scaler_unscale(s, o)) != OAR_OK) return st;
    if (oar_active_trace) return traced_step_(s, o);
    if (f32_of(s->found) != 0.0f) {
        *(int64_t *)oar_tensor_ptr(s->skipped) += 1;
        s->streak++;
        if (s->opts.warn_after > 0 && s->streak == s->opts.warn_after)
            oar_warn("oar_grad_scaler_step: %lld steps in a row skipped for inf/nan gradients (scale %g, floor %g); "
                     "the loss itself may be inf/nan, or the learning rate too high",
                     (long long)s->streak, (double)f32_of(s->scale), s->opts.min_scale);
        if (skipped) *skipped = true;
        return OAR_OK;
    }
    s->streak = 0;
    return oar_optimizer_step(o);
}

oar_status oar_grad_scaler_update(oar_grad_scaler *s) {
    if (!s) return oar_error(OAR_ERR_INVALID_ARG, "oar_grad_scaler_update: expected a scaler, got NULL");
    oar_status st = OAR_OK;
    if (s->opts.dynamic) {
        oar_tensor *in[3] = {s->scale, s->growth_tracker, s->found};
        oar_attr a[4] = {oar_attr_float(s->opts.growth_factor), oar_attr_float(s->opts.backoff_factor),
                         oar_attr_int(s->opts.growth_interval), oar_attr_float(s->opts.min_scale)};
        oar_tensor *none[1];
        int n_out = 1;
        st = oar_op_call(OAR_OP_amp_update_scale, in, 3, a, none, &n_out);
    }
    if (!oar_active_trace) { /* traced: the next step's amp_begin_unscale clears it */
        oar_status fs = oar_tensor_fill(s->found, 0.0);
        if (st == OAR_OK) st = fs;
    }
    s->unscaled = NULL;
    return st;
}

double oar_grad_scaler_get_scale(const oar_grad_scaler *s) { return s ? f32_of(s->scale) : 0.0; }
int64_t oar_grad_scaler_growth_tracker(const oar_grad_scaler *s) { return s ? i64_of(s->growth_tracker) : 0; }
int64_t oar_grad_scaler_skipped(const oar_grad_scaler *s) { return s ? i64_of(s->skipped) : 0; }
int64_t oar_grad_scaler_skip_streak(const oar_grad_scaler *s) { return s ? s->streak : 0; }

int oar_grad_scaler_num_state(const oar_grad_scaler *s) { return s ? N_STATE : 0; }


oar_tensor *oar_grad_scaler_state(oar_grad_scaler *s, int i, const char **name) {
    if (!s || i < 0 || i >= N_STATE) {
        oar_error(OAR_ERR_INVALID_ARG, "oar_grad_scaler_state: expected an index in [0, %d), got %d", N_STATE, i);
        return NULL;
    }
    if (name) *name = state_names[i];
    return state_tensor(s, i);
}

oar_status oar_grad_scaler_load_state(oar_grad_scaler *s, const char *name, const oar_tensor *value) {
    if (!s || !name || !value)
        return oar_error(OAR_ERR_INVALID_ARG, "oar_grad_scaler_load_state: expected a scaler, a name and a value, got NULL");
    for (int i = 0; i < N_STATE; i++) {
        if (strcmp(name, state_names[i]) != 0) continue;
        oar_tensor *t = state_tensor(s, i);
        if (value->ndim != 0 || value->dtype != t->dtype)
            return oar_error(OAR_ERR_INVALID_ARG, "oar_grad_scaler_load_state: expected '%s' to be a 0-d %s tensor, "
                                                  "got %s with %d dims", name, oar_dtype_name(t->dtype),
                             oar_dtype_name(value->dtype), value->ndim);
        oar_status st = oar_copy_(t, value);
        if (st == OAR_OK && i == 0 && !(f32_of(t) > 0 && isfinite(f32_of(t))))
            return oar_error(OAR_ERR_INVALID_ARG, "oar_grad_scaler_load_state: expected a finite scale > 0, got %g",
                             (double)f32_of(t));
        return st;
    }
    return oar_error(OAR_ERR_INVALID_ARG, "oar_grad_scaler_load_state: expected one of scale, growth_tracker, skipped, "
                                          "got '%s'", name);
}
