/* The op sweep runner. For every case: each kernel against the reference on fresh guarded
 * outputs, the eager path on non-contiguous inputs, and a float64 finite-difference check of
 * the gradient rule. Then coverage: every registered op has a case, every differentiable op
 * a rule, every family a bad-input case that fails with a clear message.
 * Usage: sweep [op-name-filter] [--gemm-backend NAME] (NAME: openblas, dnnl, avx2, avx512;
 * every f32 GEMM then runs on that backend, so the GEMM-backed ops' cases check each one). */
#include "sweep.h"

#include "base/device.h"
#include "ops/dispatch.h"
#include "kernels/cpu/gemm_select.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 64
#define GUARD_BYTE 0xA5

static int g_failures, g_checks;
static const char *g_filter;
/* CUDA: g_cuda when a GPU is present (its kernels are then checked against the reference
 * like every other kernel); g_cuda_only (--device cuda) skips the CPU-only checks */
static bool g_cuda, g_cuda_only;
static bool g_no_low; /* --no-low-precision: skip the f16/bf16 pass (memcheck runs, where time is short) */
static int g_cuda_checked;

#define FAIL(...)                           \
    do {                                    \
        g_failures++;                       \
        fprintf(stderr, "FAIL ");           \
        fprintf(stderr, __VA_ARGS__);       \
        fprintf(stderr, "\n");              \
    } while (0)

/* ---- parsing of case specs */
static int parse_dtype(const char *s, oar_dtype *dt) {
    for (int d = 0; d < OAR_DTYPE_COUNT; d++) {
        size_t n = strlen(oar_dtype_name((oar_dtype)d));
        if (strncmp(s, oar_dtype_name((oar_dtype)d), n) == 0 && (s[n] == '\0' || s[n] == ':')) {
            *dt = (oar_dtype)d;
            return (int)n;
        }
    }
    return 0;
}

#define MAX_VALUES 32
typedef struct input_spec {
    char kind;          /* n u p d b i c, or 0 for none */
    int64_t lo, hi;
    double values[MAX_VALUES]; /* c: the values, repeated to fill the tensor */
    int n_values;
    bool fixed;         /* dtype given explicitly */
    oar_dtype dtype;
    int ndim;
    int64_t shape[OAR_MAX_DIMS];
} input_spec;

static bool parse_input(const char *s, size_t len, input_spec *sp) {
    char buf[128];
    if (len >= sizeof buf) return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    memset(sp, 0, sizeof *sp);
    if (strcmp(buf, "none") == 0) return true;
    char *p = buf;
    sp->kind = *p++;
    if (!strchr("nupdbic", sp->kind)) return false;
    if (sp->kind == 'c') { /* c1,0.5,inf: given values */
        do {
            char *end;
            if (sp->n_values == MAX_VALUES) return false;
            sp->values[sp->n_values++] = strtod(p, &end);
            if (end == p) return false;
            p = end;
        } while (*p == ',' && p++);
    }
    if (sp->kind == 'i') {
        sp->lo = strtoll(p, &p, 10);
        if (*p++ != '_') return false;
        sp->hi = strtoll(p, &p, 10);
        sp->fixed = true;
        sp->dtype = OAR_I64;
    }
    if (sp->kind == 'b') {
        sp->fixed = true;
        sp->dtype = OAR_BOOL;
    }
    if (*p != ':') {
        int n = parse_dtype(p, &sp->dtype);
        if (!n) return false;
        sp->fixed = true;
        p += n;
    }
    if (*p++ != ':') return false;
    while (*p) {
        if (sp->ndim == OAR_MAX_DIMS) return false;
        sp->shape[sp->ndim++] = strtoll(p, &p, 10);
        if (*p == 'x') p++;
        else if (*p) return false;
    }
    return true;
}

static int parse_inputs(const char *spec, input_spec *out) {
    int n = 0;
    const char *s = spec;
    while (*s) {
        const char *e = strchr(s, ';');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (n == OAR_MAX_INPUTS || !parse_input(s, len, &out[n])) return -1;
        n++;
        if (!e) break;
        s = e + 1;
    }
    return n;
}

static bool parse_attrs(const oar_op_def *d, const char *spec, oar_attr *out) {
    if (oar_attrs_parse(d, spec, out) == OAR_OK) return true;
    FAIL("%s", oar_last_error());
    return false;
}

/* ---- inputs */
static uint64_t g_seed;
/* A case's inputs come from its own text (op, inputs, attributes), not its place in the table:
 * adding a case leaves every other case's inputs as they were. FNV-1a, never 0 (xorshift's fixed point). */
static uint64_t case_seed(const sweep_case *c) {
    uint64_t h = 0xcbf29ce484222325ULL;
    const char *parts[3] = {c->op, c->inputs, c->attrs ? c->attrs : ""};
    for (int k = 0; k < 3; k++) {
        for (const char *p = parts[k]; *p; p++) h = (h ^ (uint8_t)*p) * 0x100000001b3ULL;
        h = (h ^ '|') * 0x100000001b3ULL;
    }
    return h ? h : 0x9E3779B97F4A7C15ULL;
}
static double urand(void) { /* xorshift; deterministic per case */
    g_seed ^= g_seed << 13;
    g_seed ^= g_seed >> 7;
    g_seed ^= g_seed << 17;
    return (double)(g_seed >> 11) * (1.0 / 9007199254740992.0);
}

static oar_tensor *make_input(const input_spec *sp, oar_dtype float_dt) {
    if (!sp->kind) return NULL;
    oar_dtype dt = sp->fixed ? sp->dtype : float_dt;
    oar_tensor *t = oar_tensor_new(dt, sp->shape, sp->ndim);
    const oar_dtype_traits *tr = &oar_dtypes[dt];
    char *p = oar_tensor_ptr(t);
    for (int64_t i = 0; i < t->numel; i++) {
        double v;
        switch (sp->kind) {
        case 'n': v = sqrt(-2 * log(urand() + 1e-12)) * cos(6.283185307 * urand()); break;
        case 'u': v = urand() * 2 - 1; break;
        case 'p': v = 0.5 + 1.5 * urand(); break;
        case 'd': v = (double)i; break; /* shuffled below */
        case 'b': v = urand() < 0.5; break;
        case 'c': v = sp->values[i % sp->n_values]; break;
        default: v = (double)(sp->lo + (int64_t)(urand() * (double)(sp->hi - sp->lo))); break;
        }
        tr->store(p + i * (int64_t)tr->size, v);
    }
    if (sp->kind == 'd') { /* distinct values spaced well apart, in random order, centred on 0 */
        for (int64_t i = t->numel - 1; i > 0; i--) {
            int64_t j = (int64_t)(urand() * (double)(i + 1));
            double a = tr->load(p + i * (int64_t)tr->size), b = tr->load(p + j * (int64_t)tr->size);
            tr->store(p + i * (int64_t)tr->size, b);
            tr->store(p + j * (int64_t)tr->size, a);
        }
        for (int64_t i = 0; i < t->numel; i++) {
            double v = tr->load(p + i * (int64_t)tr->size);
            tr->store(p + i * (int64_t)tr->size, (v - (double)t->numel / 2 + 0.5) * 0.25); /* 0 never occurs for even sizes */
        }
    }
    return t;
}

/* Same values, different layout: every dim strided by 2 inside a larger buffer. */
static oar_tensor *make_strided(oar_tensor *src) {
    if (!src || src->ndim == 0 || src->numel == 0) return oar_retain(src);
    int64_t big[OAR_MAX_DIMS];
    for (int d = 0; d < src->ndim; d++) big[d] = src->shape[d] * 2;
    oar_tensor *b = oar_tensor_new(src->dtype, big, src->ndim);
    memset(oar_tensor_ptr(b), 0x7F, (size_t)b->numel * oar_dtypes[b->dtype].size);
    oar_tensor *v = oar_tensor_alias(b);
    oar_tensor_unref(b);
    for (int d = 0; d < src->ndim; d++) {
        v->shape[d] = src->shape[d];
        v->strides[d] *= 2;
    }
    oar_tensor_refresh(v);
    oar_tensor_copy_strided(v, src);
    return v;
}

/* The same tensor with its first dim of size > 1 repeated by stride 0 (every slice along it is
 * the first): the layout expand/broadcast views give; NULL when no dim can take it. */
static oar_tensor *make_broadcast(oar_tensor *src) {
    if (!src || src->numel == 0) return NULL;
    for (int d = 0; d < src->ndim; d++)
        if (src->shape[d] > 1) {
            oar_tensor *v = oar_tensor_alias(src);
            v->strides[d] = 0;
            oar_tensor_refresh(v);
            return v;
        }
    return NULL;
}

/* ---- guarded outputs */
static void guarded_free(void *data, void *ctx) {
    (void)ctx;
    free((char *)data - GUARD);
}

static oar_tensor *guarded_new(const oar_meta *m) {
    oar_tensor *t = oar_tensor_shell(m->dtype, m->shape, m->ndim);
    size_t nbytes = (size_t)t->numel * oar_dtypes[m->dtype].size;
    char *buf = malloc(nbytes + 2 * GUARD);
    memset(buf, GUARD_BYTE, nbytes + 2 * GUARD);
    memset(buf + GUARD, 0xFF, nbytes); /* NaN-ish garbage: a kernel must write every element */
    oar_storage *s = calloc(1, sizeof *s);
    s->refcount = 1;
    s->data = buf + GUARD;
    s->nbytes = nbytes;
    s->deleter = guarded_free;
    t->storage = s;
    return t;
}

static bool guards_intact(const oar_tensor *t) {
    const unsigned char *p = (const unsigned char *)t->storage->data;
    for (int i = 1; i <= GUARD; i++)
        if (p[-i] != GUARD_BYTE || p[t->storage->nbytes + (size_t)i - 1] != GUARD_BYTE) return false;
    return true;
}

/* ---- comparisons */
static bool close_enough(double a, double b, double tol) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b)) return a == b;
    return fabs(a - b) <= tol + tol * fabs(b);
}

/* Set by the GPU's low-precision pass for convolutions and attention: tolerances at the scale of the largest
 * reference value rather than each element's. cuDNN's f16 kernels (tensor cores, f32
 * accumulation) were measured on an H100 up to 35 f16 ulps from the exact result on single
 * elements that are small next to the rest of the output (a 7x7 input gradient: -0.1936 for
 * -0.1979), an error of the sum's scale that no elementwise tolerance describes. The f16/bf16
 * attention backward rounds the probabilities' gradient to the dtype before its tensor-core
 * products, as PyTorch's kernels do (test_cuda checks a GPT-2-sized case at the tensor's scale). */
static bool g_tensor_scale_tol;

static double max_abs(const oar_tensor *t) {
    oar_tensor *ops[1] = {(oar_tensor *)t};
    oar_iter it;
    oar_iter_init(&it, t->shape, t->ndim, ops, 1);
    const oar_dtype_traits *tr = &oar_dtypes[t->dtype];
    double m = 0;
    do {
        double v = fabs(tr->load(it.ptr[0]));
        if (isfinite(v) && v > m) m = v;
    } while (oar_iter_next(&it));
    return m;
}

static bool same_values(const char *what, const oar_tensor *got, const oar_tensor *want, double tol) {
    g_checks++;
    if (got->ndim != want->ndim || got->dtype != want->dtype ||
        memcmp(got->shape, want->shape, sizeof(int64_t) * (size_t)got->ndim)) {
        FAIL("%s: shape/dtype differ from the reference", what);
        return false;
    }
    if (!got->numel) return true;
    oar_tensor *ops[2] = {(oar_tensor *)got, (oar_tensor *)want};
    oar_iter it;
    oar_iter_init(&it, got->shape, got->ndim, ops, 2);
    const oar_dtype_traits *tr = &oar_dtypes[got->dtype];
    double scale = g_tensor_scale_tol && tr->is_float ? max_abs(want) : 0;
    int64_t i = 0;
    do {
        double a = tr->is_float ? tr->load(it.ptr[0]) : 0, b = tr->is_float ? tr->load(it.ptr[1]) : 0;
        bool ok = tr->is_float ? (scale > 0 && isfinite(a) && isfinite(b) ? fabs(a - b) <= tol * (1 + scale)
                                                                          : close_enough(a, b, tol))
                               : tr->load_i64(it.ptr[0]) == tr->load_i64(it.ptr[1]);
        if (!ok) {
            FAIL("%s: element %lld is %.9g, reference %.9g", what, (long long)i, tr->load(it.ptr[0]),
                 tr->load(it.ptr[1]));
            return false;
        }
        i++;
    } while (oar_iter_next(&it));
    return true;
}

static const oar_rng_state FIXED_RNG = {.seed = 1234, .offset = 0};

/* ---- ops that write inputs in place (mutated_inputs: running stats, optimizer updates): every
 * run starts from copies of the case's values, and what it wrote is compared like an output */
static bool mutated(const oar_op_def *d, int i) { return i < 32 && ((d->mutated_inputs >> i) & 1u); }

static void copy_mutated(const oar_op_def *d, oar_tensor *const *from, oar_tensor *const *in, int n_in,
                         oar_tensor **run) {
    for (int i = 0; i < n_in; i++)
        run[i] = from[i] && mutated(d, i) ? oar_tensor_contiguous_copy(from[i]) : oar_retain(in[i]);
}

static void same_mutated(const char *what, const oar_op_def *d, oar_tensor *const *got, oar_tensor *const *want,
                         int n_in, double tol) {
    for (int i = 0; i < n_in; i++)
        if (got[i] && mutated(d, i)) {
            char w[360];
            snprintf(w, sizeof w, "%.300s (input %d, written in place)", what, i);
            same_values(w, got[i], want[i], tol);
        }
}

/* ---- a CUDA kernel on copies of the inputs in GPU memory, its outputs (and what it wrote in
 * place) copied back and compared with the reference's */
static oar_tensor *to_gpu(oar_tensor *t) {
    if (!t) return NULL;
    oar_tensor *g = oar_tensor_new_on(OAR_CUDA, t->dtype, t->shape, t->ndim);
    if (g && oar_tensor_copy_strided(g, t) != OAR_OK) {
        oar_tensor_unref(g);
        return NULL;
    }
    return g;
}

static oar_tensor *to_host(oar_tensor *g) {
    oar_tensor *t = oar_tensor_new(g->dtype, g->shape, g->ndim);
    if (t && oar_tensor_copy_strided(t, g) != OAR_OK) {
        oar_tensor_unref(t);
        return NULL;
    }
    return t;
}

static void run_cuda_kernel(const oar_op_def *d, int op, const oar_kernel_entry *e, oar_tensor *const *orig,
                            oar_tensor *const *in, int n_in, const oar_attr *attrs, const oar_meta *meta, int n_out,
                            oar_tensor *const *ref, double tol, const char *label) {
    oar_tensor *host_in[OAR_MAX_INPUTS], *gin[OAR_MAX_INPUTS] = {0}, *gout[OAR_MAX_OUTPUTS] = {0};
    char what[320];
    snprintf(what, sizeof what, "%.256s [%.40s kernel]", label, e->impl);
    copy_mutated(d, orig, in, n_in, host_in); /* inputs written in place start from the case's values */
    bool ok = true;
    for (int i = 0; i < n_in && ok; i++) {
        bool host = i < 32 && ((d->host_inputs >> i) & 1u);
        gin[i] = host ? oar_retain(host_in[i]) : to_gpu(host_in[i]);
        if (host_in[i] && !gin[i]) ok = false;
    }
    for (int o = 0; o < n_out && ok; o++) {
        gout[o] = oar_tensor_new_on(OAR_CUDA, meta[o].dtype, meta[o].shape, meta[o].ndim);
        /* NaN (or all ones for integers) where a kernel forgets to write */
        if (!gout[o] || oar_tensor_fill(gout[o], oar_dtypes[meta[o].dtype].is_float ? NAN : -1) != OAR_OK) ok = false;
    }
    if (!ok) {
        FAIL("%s: could not set up GPU tensors: %s", what, oar_last_error());
    } else if (!e->supports || e->supports(gin, n_in, gout, n_out, attrs)) {
        g_cuda_checked++;
        oar_rng_set_state(FIXED_RNG);
        oar_status st = oar_op_run_kernel((oar_op_id)op, e, gin, n_in, gout, n_out, attrs);
        if (st == OAR_OK) st = oar_synchronize(OAR_CUDA);
        if (st != OAR_OK) {
            FAIL("%s: failed: %s", what, oar_last_error());
        } else {
            for (int o = 0; o < n_out; o++) {
                oar_tensor *h = to_host(gout[o]);
                if (!h) FAIL("%s: copy back failed: %s", what, oar_last_error());
                else same_values(what, h, ref[o], tol);
                oar_tensor_unref(h);
            }
            for (int i = 0; i < n_in; i++)
                if (gin[i] && mutated(d, i)) {
                    oar_tensor *h = gin[i]->device == OAR_CUDA ? to_host(gin[i]) : oar_retain(gin[i]);
                    char w[360];
                    snprintf(w, sizeof w, "%.300s (input %d, written in place)", what, i);
                    if (h) same_values(w, h, in[i], tol);
                    oar_tensor_unref(h);
                }
        }
    }
    for (int i = 0; i < n_in; i++) {
        oar_tensor_unref(gin[i]);
        oar_tensor_unref(host_in[i]);
    }
    for (int o = 0; o < n_out; o++) oar_tensor_unref(gout[o]);
}

/* Input i as a stride-0 (expanded) view, eagerly, against the same values made contiguous: a fast
 * kernel handed the view as if it were dense reads past its storage (matmul's folded GEMM once
 * did). Values an op refuses (a matrix with equal rows made singular) are skipped. */
static void check_broadcast_input(int op, oar_tensor *const *in, int n_in, int i, const oar_attr *attrs, double tol,
                                  const char *label) {
    oar_tensor *view = make_broadcast(in[i]);
    if (!view) return;
    oar_tensor *dense = oar_tensor_contiguous_copy(view), *args[OAR_MAX_INPUTS], *want[OAR_MAX_OUTPUTS],
               *got[OAR_MAX_OUTPUTS];
    int nw = OAR_MAX_OUTPUTS, ng = OAR_MAX_OUTPUTS;
    for (int j = 0; j < n_in; j++) args[j] = in[j];
    bool prev = oar_set_grad_enabled(false);
    args[i] = dense;
    oar_rng_set_state(FIXED_RNG);
    if (oar_op_call((oar_op_id)op, args, n_in, attrs, want, &nw) == OAR_OK) {
        char what[320];
        snprintf(what, sizeof what, "%.256s [eager, input %d broadcast]", label, i);
        args[i] = view;
        oar_rng_set_state(FIXED_RNG);
        if (oar_op_call((oar_op_id)op, args, n_in, attrs, got, &ng) != OAR_OK) {
            FAIL("%s: failed: %s", what, oar_last_error());
        } else {
            for (int o = 0; o < ng; o++) {
                same_values(what, got[o], want[o], tol);
                oar_tensor_unref(got[o]);
            }
        }
        for (int o = 0; o < nw; o++) oar_tensor_unref(want[o]);
    }
    oar_set_grad_enabled(prev);
    oar_tensor_unref(dense);
    oar_tensor_unref(view);
}

/* ---- one pass of a case at one float dtype: kernels vs reference, then strided eager path */
static void run_kernels(const sweep_case *c, int op, const input_spec *specs, int n_in, const oar_attr *attrs,
                        oar_dtype dt, const char *label) {
    const oar_op_def *d = oar_op_table[op];
    oar_tensor *in[OAR_MAX_INPUTS], *orig[OAR_MAX_INPUTS] = {0}, *run[OAR_MAX_INPUTS];
    for (int i = 0; i < n_in; i++) in[i] = make_input(&specs[i], dt);
    if (d->mutated_inputs) copy_mutated(d, in, in, n_in, orig); /* the reference writes into in[] */
    double tol = c->tol > 0 ? c->tol : (dt == OAR_F64 ? 1e-9 : 1e-4);
    oar_meta meta[OAR_MAX_OUTPUTS];
    int n_out = 0;
    if (oar_op_infer((oar_op_id)op, in, n_in, attrs, meta, &n_out) != OAR_OK) {
        FAIL("%s: inference failed: %s", label, oar_last_error());
        goto done;
    }
    if ((d->flags & OAR_OPF_VIEW) && (c->flags & SWEEP_NO_STRIDED)) goto done;
    if (d->flags & OAR_OPF_VIEW) {
        /* views: the eager path on strided inputs must see the same values */
        oar_tensor *a[OAR_MAX_OUTPUTS], *b[OAR_MAX_OUTPUTS], *sin[OAR_MAX_INPUTS];
        int na = OAR_MAX_OUTPUTS, nb = OAR_MAX_OUTPUTS;
        for (int i = 0; i < n_in; i++) sin[i] = make_strided(in[i]);
        if (oar_op_call((oar_op_id)op, in, n_in, attrs, a, &na) != OAR_OK ||
            oar_op_call((oar_op_id)op, sin, n_in, attrs, b, &nb) != OAR_OK) {
            FAIL("%s: view failed: %s", label, oar_last_error());
        } else {
            for (int o = 0; o < na; o++) {
                same_values(label, b[o], a[o], 0);
                oar_tensor_unref(a[o]);
                oar_tensor_unref(b[o]);
            }
        }
        for (int i = 0; i < n_in; i++) oar_tensor_unref(sin[i]);
        goto done;
    }
    oar_tensor *ref[OAR_MAX_OUTPUTS];
    for (int o = 0; o < n_out; o++) ref[o] = guarded_new(&meta[o]);
    const oar_kernel_entry *ks;
    int nk = oar_op_kernels((oar_op_id)op, &ks);
    const oar_kernel_entry *refk = NULL;
    for (int k = 0; k < nk; k++)
        if (strcmp(ks[k].impl, "reference") == 0 && ks[k].device == OAR_CPU &&
            (ks[k].dtypes & OAR_DTYPE_BIT(in[d->key_input]->dtype)))
            refk = &ks[k];
    if (!refk) {
        FAIL("%s: the reference kernel does not handle dtype %s", label, oar_dtype_name(in[d->key_input]->dtype));
        goto free_ref;
    }
    oar_rng_set_state(FIXED_RNG);
    if (oar_op_run_kernel((oar_op_id)op, refk, in, n_in, ref, n_out, attrs) != OAR_OK) {
        FAIL("%s: reference kernel failed: %s", label, oar_last_error());
        goto free_ref;
    }
    for (int o = 0; o < n_out; o++)
        if (!guards_intact(ref[o])) FAIL("%s: reference kernel wrote outside output %d", label, o);
    for (int k = 0; k < nk; k++) {
        const oar_kernel_entry *e = &ks[k];
        if (e->device == OAR_CUDA && e != refk && (e->dtypes & OAR_DTYPE_BIT(in[d->key_input]->dtype))) {
            if (g_cuda) run_cuda_kernel(d, op, e, orig, in, n_in, attrs, meta, n_out, ref, tol, label);
            continue;
        }
        if (g_cuda_only) continue;
        if (e == refk || e->device != OAR_CPU || !(e->dtypes & OAR_DTYPE_BIT(in[d->key_input]->dtype))) continue;
        oar_tensor *out[OAR_MAX_OUTPUTS];
        for (int o = 0; o < n_out; o++) out[o] = guarded_new(&meta[o]);
        if (!e->supports || e->supports(in, n_in, out, n_out, attrs)) {
            char what[320];
            snprintf(what, sizeof what, "%.256s [%.40s kernel]", label, e->impl);
            copy_mutated(d, orig, in, n_in, run);
            oar_rng_set_state(FIXED_RNG);
            if (oar_op_run_kernel((oar_op_id)op, e, run, n_in, out, n_out, attrs) != OAR_OK) {
                FAIL("%s: failed: %s", what, oar_last_error());
            } else {
                for (int o = 0; o < n_out; o++) {
                    if (!guards_intact(out[o])) FAIL("%s: wrote outside output %d", what, o);
                    same_values(what, out[o], ref[o], tol);
                }
                same_mutated(what, d, run, in, n_in, tol);
            }
            for (int i = 0; i < n_in; i++) oar_tensor_unref(run[i]);
        }
        for (int o = 0; o < n_out; o++) oar_tensor_unref(out[o]);
    }
    if (!(c->flags & SWEEP_NO_STRIDED) && !g_cuda_only) {
        oar_tensor *sin[OAR_MAX_INPUTS], *out[OAR_MAX_OUTPUTS];
        int no = OAR_MAX_OUTPUTS;
        for (int i = 0; i < n_in; i++) /* inputs written in place stay contiguous */
            sin[i] = mutated(d, i) && orig[i] ? oar_tensor_contiguous_copy(orig[i]) : make_strided(in[i]);
        char what[320];
        snprintf(what, sizeof what, "%.256s [eager, non-contiguous inputs]", label);
        oar_rng_set_state(FIXED_RNG);
        bool prev = oar_set_grad_enabled(false);
        if (oar_op_call((oar_op_id)op, sin, n_in, attrs, out, &no) != OAR_OK) {
            FAIL("%s: failed: %s", what, oar_last_error());
        } else {
            for (int o = 0; o < no; o++) {
                same_values(what, out[o], ref[o], tol);
                oar_tensor_unref(out[o]);
            }
            same_mutated(what, d, sin, in, n_in, tol);
        }
        oar_set_grad_enabled(prev);
        for (int i = 0; i < n_in; i++) oar_tensor_unref(sin[i]);
    }
    if (!(c->flags & SWEEP_NO_STRIDED) && !g_cuda_only && !d->mutated_inputs)
        for (int i = 0; i < n_in; i++) check_broadcast_input(op, in, n_in, i, attrs, tol, label);
free_ref:
    for (int o = 0; o < n_out; o++) oar_tensor_unref(ref[o]);
done:
    for (int i = 0; i < n_in; i++) {
        oar_tensor_unref(in[i]);
        oar_tensor_unref(orig[i]);
    }
}

/* ---- gradient check in float64: loss = sum_k sum(out_k * w_k) */
static double eval_loss(int op, oar_tensor *const *in, int n_in, const oar_attr *attrs, oar_tensor *const *w,
                        int n_vis, oar_tensor **outs_keep) {
    oar_tensor *out[OAR_MAX_OUTPUTS];
    int no = OAR_MAX_OUTPUTS;
    oar_rng_set_state(FIXED_RNG);
    if (oar_op_call((oar_op_id)op, in, n_in, attrs, out, &no) != OAR_OK) return NAN;
    double loss = 0;
    for (int o = 0; o < no; o++) {
        if (o < n_vis && w[o]) {
            oar_tensor *ops[2] = {out[o], w[o]};
            if (out[o]->numel) {
                oar_iter it;
                oar_iter_init(&it, out[o]->shape, out[o]->ndim, ops, 2);
                const oar_dtype_traits *tr = &oar_dtypes[out[o]->dtype];
                do loss += tr->load(it.ptr[0]) * *(double *)it.ptr[1]; while (oar_iter_next(&it));
            }
        }
        if (outs_keep) outs_keep[o] = out[o];
        else oar_tensor_unref(out[o]);
    }
    return loss;
}

static void grad_check(const sweep_case *c, int op, const input_spec *specs, int n_in, const oar_attr *attrs,
                       const char *label) {
    const oar_op_def *d = oar_op_table[op];
    oar_tensor *in[OAR_MAX_INPUTS];
    int n_float = 0;
    for (int i = 0; i < n_in; i++) {
        in[i] = make_input(&specs[i], OAR_F64);
        if (in[i] && in[i]->dtype == OAR_F64 && in[i]->numel > 0 && !(i == 0 && (c->flags & SWEEP_GRAD_NOT_IN0))) {
            in[i]->requires_grad = true;
            n_float++;
        }
    }
    if (!n_float) goto done;
    int n_vis = d->n_visible ? d->n_visible : OAR_MAX_OUTPUTS;
    oar_tensor *outs[OAR_MAX_OUTPUTS] = {0}, *w[OAR_MAX_OUTPUTS] = {0};
    oar_tensor *wtmp[OAR_MAX_OUTPUTS] = {0};
    /* weights: one random tensor per float output */
    double base = eval_loss(op, in, n_in, attrs, wtmp, 0, outs);
    (void)base;
    int no = 0;
    while (no < OAR_MAX_OUTPUTS && outs[no]) no++;
    if (no == 0) {
        FAIL("%s: forward failed: %s", label, oar_last_error());
        goto done;
    }
    oar_scope_begin();
    oar_tensor *terms = NULL;
    for (int o = 0; o < no && o < n_vis; o++) {
        if (!oar_dtypes[outs[o]->dtype].is_float) continue;
        input_spec ws = {.kind = 'u', .ndim = outs[o]->ndim};
        memcpy(ws.shape, outs[o]->shape, sizeof ws.shape);
        w[o] = make_input(&ws, OAR_F64);
        oar_tensor *t = oar_sum(oar_mul(oar_cast(outs[o], OAR_F64), w[o]), NULL, 0, false);
        terms = terms ? oar_add(terms, t) : t;
    }
    oar_tensor *gin[OAR_MAX_INPUTS] = {0}, *wrt[OAR_MAX_INPUTS];
    int idx[OAR_MAX_INPUTS], nw = 0;
    for (int i = 0; i < n_in; i++)
        if (in[i] && in[i]->requires_grad) {
            idx[nw] = i;
            wrt[nw++] = in[i];
        }
    oar_grad_opts go = {.allow_unused = true};
    if (!terms || !terms->requires_grad) {
        FAIL("%s: outputs do not require grad (no node recorded)", label);
    } else if (oar_grad(&terms, 1, NULL, wrt, nw, gin, &go) != OAR_OK) {
        FAIL("%s: backward failed: %s", label, oar_last_error());
    } else {
        bool prev = oar_set_grad_enabled(false);
        for (int k = 0; k < nw; k++) {
            oar_tensor *x = wrt[k];
            double *xp = (double *)oar_tensor_ptr(x);
            g_checks++;
            for (int64_t e = 0; e < x->numel; e++) {
                double keep = xp[e], h = 1e-6 * (fabs(keep) > 1 ? fabs(keep) : 1);
                xp[e] = keep + h;
                double lp = eval_loss(op, in, n_in, attrs, w, n_vis, NULL);
                xp[e] = keep - h;
                double lm = eval_loss(op, in, n_in, attrs, w, n_vis, NULL);
                xp[e] = keep;
                double num = (lp - lm) / (2 * h);
                double ana = 0;
                if (gin[k]) {
                    oar_tensor *gc = oar_tensor_contiguous_copy(gin[k]);
                    ana = ((double *)oar_tensor_ptr(gc))[e];
                    oar_tensor_unref(gc);
                }
                if (!close_enough(ana, num, 1e-4)) {
                    FAIL("%s: d/d input %d element %lld: rule gives %.8g, finite differences %.8g", label,
                         idx[k], (long long)e, ana, num);
                    break;
                }
            }
        }
        oar_set_grad_enabled(prev);
    }
    oar_scope_end();
    for (int o = 0; o < no; o++) {
        oar_tensor_unref(outs[o]);
        oar_tensor_unref(w[o]);
    }
done:
    for (int i = 0; i < n_in; i++) oar_tensor_unref(in[i]);
    (void)c;
}

/* ---- the zero-size pass: every case again with its batch emptied. An empty request must give
 * the empty (or, reduced over the empty dim, the identity: 0 for sum, NaN for mean) result and
 * never crash, in every kernel, through eager dispatch on strided inputs, and in the gradient
 * rules (a weight's gradient from an empty batch is zero). Ops whose inference refuses every
 * emptied case are listed at the end, with the message, so a refusal is a visible decision. */
static bool g_zero_ran[OAR_OP_COUNT];
static char g_zero_refused[OAR_OP_COUNT][160]; /* the first refusal's message */
static int g_zero_cases;

/* specs with their batch emptied; false when there is no batch to empty (0-d inputs only, or
 * empty already). The batch is dim 0 of the first shaped input, except when an index input
 * addresses that dim (int inputs whose range is [lo, size)): then the lookups are the batch
 * (embedding's tokens, gather's index), since indices into an emptied dim would be out of
 * range. Every input whose dim 0 has the batch's size is emptied with it. */
static bool zero_variant(const input_spec *specs, int n_in, input_spec *out) {
    int64_t b = -1;
    for (int i = 0; i < n_in; i++) {
        out[i] = specs[i];
        if (b < 0 && specs[i].kind && specs[i].ndim > 0) b = specs[i].shape[0];
    }
    for (int i = 0; i < n_in && b > 0; i++)
        if (specs[i].kind == 'i' && specs[i].hi == b) {
            b = specs[i].ndim > 0 ? specs[i].shape[0] : -1;
            break;
        }
    if (b <= 0) return false;
    for (int i = 0; i < n_in; i++)
        if (out[i].kind && out[i].ndim > 0 && out[i].shape[0] == b) out[i].shape[0] = 0;
    return true;
}

static void run_zero(const sweep_case *c, int op, const input_spec *specs, int n_in, const oar_attr *attrs,
                     bool has_float_kind) {
    input_spec zs[OAR_MAX_INPUTS];
    if ((c->flags & SWEEP_NO_BATCH) || !zero_variant(specs, n_in, zs)) return;
    const oar_op_def *d = oar_op_table[op];
    oar_tensor *in[OAR_MAX_INPUTS];
    for (int i = 0; i < n_in; i++) in[i] = make_input(&zs[i], OAR_F32);
    oar_meta meta[OAR_MAX_OUTPUTS];
    int n_out = 0;
    oar_clear_error();
    bool ok = oar_op_infer((oar_op_id)op, in, n_in, attrs, meta, &n_out) == OAR_OK;
    for (int i = 0; i < n_in; i++) oar_tensor_unref(in[i]);
    if (!ok) {
        if (!g_zero_refused[op][0]) snprintf(g_zero_refused[op], sizeof g_zero_refused[op], "%s", oar_last_error());
        return;
    }
    g_zero_ran[op] = true;
    g_zero_cases++;
    char label[256];
    oar_dtype pass_dt[2] = {OAR_F32, OAR_F64};
    for (int p = 0; p < (has_float_kind ? 2 : 1); p++) {
        snprintf(label, sizeof label, "%s(%s | %s) zero-size batch %s", c->op, c->inputs, c->attrs ? c->attrs : "",
                 oar_dtype_name(pass_dt[p]));
        g_seed = case_seed(c);
        run_kernels(c, op, zs, n_in, attrs, pass_dt[p], label);
    }
    if (has_float_kind && !(d->flags & OAR_OPF_NONDIFF) && d->grad && !(c->flags & SWEEP_NO_GRAD) && !g_cuda_only) {
        snprintf(label, sizeof label, "%s(%s | %s) zero-size batch gradient", c->op, c->inputs, c->attrs ? c->attrs : "");
        grad_check(c, op, zs, n_in, attrs, label);
    }
}

/* Fails for each op that refused an empty batch in every case (none ran): a zero-size batch is
 * an ordinary input (an empty request) and each op must give its empty or reduced result. */
static void report_zero(void) {
    int refused = 0;
    for (int op = 0; op < OAR_OP_COUNT; op++)
        if (!g_zero_ran[op] && g_zero_refused[op][0]) {
            refused++;
            FAIL("%s refuses a zero-size batch in every case: %s", oar_op_table[op]->name, g_zero_refused[op]);
        }
    printf("sweep: %d zero-size cases ran, %d ops refuse an empty batch\n", g_zero_cases, refused);
}

/* ---- the gradient rule run on the GPU (every op of the backward on CUDA kernels) against the
 * same rule on the host, in float64: loss = sum_k sum(out_k * w_k) */
static bool gradients_on(oar_device dev, int op, const input_spec *specs, int n_in, const oar_attr *attrs,
                         uint64_t seed, unsigned flags, oar_tensor **grads, const char *label) {
    const oar_op_def *d = oar_op_table[op];
    oar_tensor *in[OAR_MAX_INPUTS] = {0}, *out[OAR_MAX_OUTPUTS];
    bool any_float = false; /* an emptied case has nothing to differentiate: nothing to compare */
    for (int i = 0; i < n_in; i++) {
        int64_t n = 1;
        for (int k = 0; k < specs[i].ndim; k++) n *= specs[i].shape[k];
        any_float |= specs[i].kind && !specs[i].fixed && n > 0;
    }
    if (!any_float) return false;
    oar_clear_error();
    g_seed = seed;
    for (int i = 0; i < n_in; i++) {
        oar_tensor *h = make_input(&specs[i], OAR_F64);
        bool host = i < 32 && ((d->host_inputs >> i) & 1u);
        in[i] = dev == OAR_CPU || host || !h ? oar_retain(h) : to_gpu(h);
        oar_tensor_unref(h);
        if (in[i] && in[i]->dtype == OAR_F64 && in[i]->numel > 0 && !(i == 0 && (flags & SWEEP_GRAD_NOT_IN0)))
            in[i]->requires_grad = true;
    }
    bool ok = false;
    int no = OAR_MAX_OUTPUTS;
    oar_scope_begin();
    oar_rng_set_state(FIXED_RNG);
    if (oar_op_call((oar_op_id)op, in, n_in, attrs, out, &no) != OAR_OK) {
        FAIL("%s on %s: forward failed: %s", label, oar_device_name(dev), oar_last_error());
        goto done;
    }
    int n_vis = d->n_visible ? d->n_visible : no;
    oar_tensor *terms = NULL;
    g_seed = seed ^ 0x5151;
    for (int o = 0; o < no && o < n_vis; o++) {
        if (!oar_dtypes[out[o]->dtype].is_float) continue;
        input_spec ws = {.kind = 'u', .ndim = out[o]->ndim};
        memcpy(ws.shape, out[o]->shape, sizeof ws.shape);
        oar_tensor *wh = make_input(&ws, OAR_F64), *w = out[o]->device == OAR_CPU ? oar_retain(wh) : to_gpu(wh);
        oar_tensor_unref(wh);
        oar_tensor *t = oar_sum(oar_mul(oar_cast(out[o], OAR_F64), w), NULL, 0, false);
        oar_tensor_unref(w);
        terms = terms ? oar_add(terms, t) : t;
    }
    for (int o = 0; o < no; o++) oar_tensor_unref(out[o]);
    oar_tensor *wrt[OAR_MAX_INPUTS], *g[OAR_MAX_INPUTS] = {0};
    int nw = 0;
    for (int i = 0; i < n_in; i++)
        if (in[i] && in[i]->requires_grad) wrt[nw++] = in[i];
    oar_grad_opts go = {.allow_unused = true};
    if (!terms || !terms->requires_grad || oar_grad(&terms, 1, NULL, wrt, nw, g, &go) != OAR_OK) {
        FAIL("%s on %s: backward failed: %s", label, oar_device_name(dev), oar_last_error());
        goto done;
    }
    for (int k = 0; k < nw; k++) grads[k] = g[k] ? (g[k]->device == OAR_CPU ? oar_retain(g[k]) : to_host(g[k])) : NULL;
    grads[nw] = NULL;
    ok = true;
done:
    oar_scope_end();
    for (int i = 0; i < n_in; i++) oar_tensor_unref(in[i]);
    return ok;
}

static void cuda_grad_check(int op, const input_spec *specs, int n_in, const oar_attr *attrs, uint64_t seed,
                            unsigned flags, const char *label) {
    const oar_kernel_entry *ks;
    int nk = oar_op_kernels((oar_op_id)op, &ks);
    bool runs_f64 = false; /* an op without a CUDA f64 kernel is a listed gap (cuda_coverage) */
    for (int k = 0; k < nk; k++) runs_f64 |= ks[k].device == OAR_CUDA && (ks[k].dtypes & OAR_DTYPE_BIT(OAR_F64));
    if (!runs_f64) return;
    oar_tensor *want[OAR_MAX_INPUTS + 1] = {0}, *got[OAR_MAX_INPUTS + 1] = {0};
    if (!gradients_on(OAR_CPU, op, specs, n_in, attrs, seed, flags, want, label)) return;
    if (gradients_on(OAR_CUDA, op, specs, n_in, attrs, seed, flags, got, label)) {
        g_cuda_checked++;
        for (int k = 0; want[k] || got[k]; k++) {
            char w[300];
            snprintf(w, sizeof w, "%.256s [cuda gradient %d]", label, k);
            if (!want[k] != !got[k]) FAIL("%s: one device gave no gradient", w);
            else same_values(w, got[k], want[k], 1e-9);
        }
    }
    for (int k = 0; k <= OAR_MAX_INPUTS; k++) {
        oar_tensor_unref(want[k]);
        oar_tensor_unref(got[k]);
    }
}

/* Whether op has a CPU kernel besides the reference for dt (the low-precision pass tests those);
 * with --device cuda, a CUDA kernel for dt that the reference can be compared with. */
static bool has_fast_kernel(int op, oar_dtype dt) {
    const oar_kernel_entry *ks;
    int nk = oar_op_kernels((oar_op_id)op, &ks);
    oar_device dev = g_cuda_only ? OAR_CUDA : OAR_CPU;
    if (g_cuda_only && !(oar_op_table[op]->ref_dtypes & OAR_DTYPE_BIT(dt))) return false;
    for (int k = 0; k < nk; k++)
        if (ks[k].device == dev && strcmp(ks[k].impl, "reference") != 0 && (ks[k].dtypes & OAR_DTYPE_BIT(dt)))
            return true;
    return false;
}

/* The low-precision pass (AMP's kernels): a case whose float inputs take the pass dtype runs
 * again at f16 and bf16 where the op has a fast kernel for them, compared with the reference at
 * PyTorch's tolerances for those dtypes (bf16 1.6e-2, f16 1e-3, doubled: the kernels round an f32
 * result, the reference a double one). Cases the op's inference refuses at that dtype (inputs it
 * wants f32) are left out. */
static void run_low_precision(const sweep_case *c, int op, const input_spec *specs, int n_in,
                              const oar_attr *attrs) {
    static const oar_dtype dts[2] = {OAR_BF16, OAR_F16};
    for (int p = 0; p < 2; p++) {
        if (!has_fast_kernel(op, dts[p])) continue;
        oar_tensor *in[OAR_MAX_INPUTS];
        for (int i = 0; i < n_in; i++) in[i] = make_input(&specs[i], dts[p]);
        oar_meta meta[OAR_MAX_OUTPUTS];
        int n_out = 0;
        bool ok = oar_op_infer((oar_op_id)op, in, n_in, attrs, meta, &n_out) == OAR_OK;
        for (int i = 0; i < n_in; i++) oar_tensor_unref(in[i]);
        oar_clear_error();
        if (!ok) continue;
        sweep_case lc = *c;
        double tol = (dts[p] == OAR_BF16 ? 3.2e-2 : 2e-3) * (c->flags & SWEEP_LONG_CHAIN ? 5 : 1);
        if (lc.tol < tol) lc.tol = tol;
        char label[256];
        snprintf(label, sizeof label, "%s(%s | %s) %s", c->op, c->inputs, c->attrs ? c->attrs : "",
                 oar_dtype_name(dts[p]));
        g_seed = case_seed(c);
        g_tensor_scale_tol = g_cuda_only && (strncmp(c->op, "conv", 4) == 0 || strncmp(c->op, "attention", 9) == 0);
        run_kernels(&lc, op, specs, n_in, attrs, dts[p], label);
        g_tensor_scale_tol = false;
    }
}

static void run_case(const sweep_case *c) {
    int op = oar_op_find(c->op);
    if (op < 0) {
        FAIL("case for unknown op '%s'", c->op);
        return;
    }
    const oar_op_def *d = oar_op_table[op];
    input_spec specs[OAR_MAX_INPUTS];
    int n_in = parse_inputs(c->inputs, specs);
    oar_attr attrs[OAR_MAX_ATTRS];
    if (n_in < 0) {
        FAIL("%s: cannot parse inputs \"%s\"", c->op, c->inputs);
        return;
    }
    if (!parse_attrs(d, c->attrs ? c->attrs : "", attrs)) return;
    char label[256];
    bool has_float_kind = false;
    for (int i = 0; i < n_in; i++) has_float_kind |= specs[i].kind && !specs[i].fixed;
    oar_dtype pass_dt[2] = {OAR_F32, OAR_F64};
    for (int p = 0; p < (has_float_kind ? 2 : 1); p++) {
        snprintf(label, sizeof label, "%s(%s | %s) %s", c->op, c->inputs, c->attrs ? c->attrs : "",
                 oar_dtype_name(pass_dt[p]));
        g_seed = case_seed(c);
        run_kernels(c, op, specs, n_in, attrs, pass_dt[p], label);
    }
    if (has_float_kind && !g_no_low && (!g_cuda_only || g_cuda)) run_low_precision(c, op, specs, n_in, attrs);
    bool differentiable = has_float_kind && !(d->flags & OAR_OPF_NONDIFF) && d->grad && !(c->flags & SWEEP_NO_GRAD);
    bool empty = false; /* a case written with a zero-size batch counts as one of the pass */
    for (int i = 0; i < n_in; i++)
        for (int k = 0; k < specs[i].ndim && specs[i].kind; k++) empty |= specs[i].shape[k] == 0;
    if (empty) {
        g_zero_ran[op] = true;
        g_zero_cases++;
    }
    if (g_cuda_only) {
        if (differentiable) {
            snprintf(label, sizeof label, "%s(%s | %s) gradient", c->op, c->inputs, c->attrs ? c->attrs : "");
            cuda_grad_check(op, specs, n_in, attrs, case_seed(c), c->flags, label);
        }
        run_zero(c, op, specs, n_in, attrs, has_float_kind); /* empty batches on the GPU too */
        return;
    }
    if (differentiable) {
        snprintf(label, sizeof label, "%s(%s | %s) gradient", c->op, c->inputs, c->attrs ? c->attrs : "");
        g_seed = case_seed(c);
        grad_check(c, op, specs, n_in, attrs, label);
    }
    run_zero(c, op, specs, n_in, attrs, has_float_kind);
}

/* ---- CUDA coverage: every (op, f32) pair has a CUDA kernel, except the ops listed in the
 * gaps file (one name a line, # comments). The list can only shrink: an op listed there that
 * has a kernel fails too, so the file stays the true list of what is missing. */
static int check_cuda_gaps(const char *path) {
    oar_init();
    if (!oar_cuda_is_built()) {
        printf("sweep: this build has no CUDA; coverage not checked\n");
        return 77;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("FAIL cannot read %s\n", path);
        return 1;
    }
    bool listed[OAR_OP_COUNT] = {0};
    char line[256];
    int fails = 0, n_gaps = 0;
    while (fgets(line, sizeof line, f)) {
        char *p = line;
        while (*p == ' ') p++;
        p[strcspn(p, " \t\r\n#")] = 0;
        if (!*p) continue;
        size_t len = strlen(p);
        bool optional = p[len - 1] == '?'; /* an op that only some builds have (LAPACK's) */
        if (optional) p[len - 1] = 0;
        int op = oar_op_find(p);
        if (op < 0 && optional) continue;
        if (op < 0) {
            printf("FAIL %s lists '%s', which is not an op\n", path, p);
            fails++;
        } else {
            listed[op] = true;
        }
    }
    fclose(f);
    for (int op = 0; op < OAR_OP_COUNT; op++) {
        const oar_op_def *d = oar_op_table[op];
        if ((d->flags & (OAR_OPF_VIEW | OAR_OPF_CONTROL)) || !(d->ref_dtypes & OAR_DTYPE_BIT(OAR_F32))) continue;
        const oar_kernel_entry *ks;
        int nk = oar_op_kernels((oar_op_id)op, &ks);
        bool has = false;
        for (int k = 0; k < nk; k++) has |= ks[k].device == OAR_CUDA && (ks[k].dtypes & OAR_DTYPE_BIT(OAR_F32));
        if (!has && !listed[op]) {
            printf("FAIL op '%s' has no CUDA kernel for f32; write one (src/kernels/cuda) or list it in %s\n",
                   d->name, path);
            fails++;
        } else if (has && listed[op]) {
            printf("FAIL op '%s' has a CUDA kernel now; remove it from %s\n", d->name, path);
            fails++;
        }
        n_gaps += !has;
    }
    printf("sweep: CUDA coverage: %d of %d ops without a CUDA f32 kernel (listed in %s), %d failures\n", n_gaps,
           OAR_OP_COUNT, path, fails);
    return fails ? 1 : 0;
}

/* ---- AMP on the GPU: under autocast an op meets f16/bf16 inputs unless the policy casts
 * them to f32 (its fp32 class), so every op with a CUDA f32 kernel that the policy sends a
 * low-precision dtype (its low class, or follow/promote when the op takes that dtype on the
 * host) needs a CUDA kernel for it, or a line "op dtype" in the AMP gaps file (same ratchet
 * as --cuda-gaps: a listed pair that gained a kernel fails). */
static int check_cuda_amp_gaps(const char *path) {
    oar_init();
    if (!oar_cuda_is_built()) {
        printf("sweep: this build has no CUDA; AMP coverage not checked\n");
        return 77;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("FAIL cannot read %s\n", path);
        return 1;
    }
    static bool listed[OAR_OP_COUNT][2];
    const oar_dtype lows[2] = {OAR_F16, OAR_BF16};
    char line[256];
    int fails = 0, n_gaps = 0, n_checked = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "#\r\n")] = 0;
        char name[128], dt[16];
        int got = sscanf(line, "%127s %15s", name, dt);
        if (got <= 0) continue;
        int op = oar_op_find(name), which = got == 2 ? (!strcmp(dt, "f16") ? 0 : !strcmp(dt, "bf16") ? 1 : -1) : -1;
        if (op < 0 || which < 0) {
            printf("FAIL %s: expected lines \"op f16\" or \"op bf16\", got '%s'\n", path, line);
            fails++;
        } else {
            listed[op][which] = true;
        }
    }
    fclose(f);
    for (int op = 0; op < OAR_OP_COUNT; op++) {
        const oar_op_def *d = oar_op_table[op];
        if (d->flags & (OAR_OPF_VIEW | OAR_OPF_CONTROL)) continue;
        const oar_kernel_entry *ks;
        int nk = oar_op_kernels((oar_op_id)op, &ks);
        uint32_t cuda = 0;
        for (int k = 0; k < nk; k++)
            if (ks[k].device == OAR_CUDA) cuda |= ks[k].dtypes;
        if (!(cuda & OAR_DTYPE_BIT(OAR_F32))) continue; /* no GPU kernel at all: --cuda-gaps' list */
        if (d->flags & OAR_OPF_AMP_MIXED) continue;      /* autocast casts their GPU inputs to f32 */
        for (int w = 0; w < 2; w++) {
            uint8_t cls = oar_op_amp_class((oar_op_id)op, lows[w]);
            bool meets = cls == OAR_AMP_LOW || (cls != OAR_AMP_FP32 && (d->ref_dtypes & OAR_DTYPE_BIT(lows[w])));
            if (!meets) continue;
            n_checked++;
            bool has = (cuda & OAR_DTYPE_BIT(lows[w])) != 0;
            const char *dn = oar_dtype_name(lows[w]);
            if (!has && !listed[op][w]) {
                printf("FAIL op '%s' meets %s under autocast (%s class) and has no CUDA kernel for it; write one or "
                       "list \"%s %s\" in %s\n", d->name, dn, oar_amp_class_name((oar_amp_class)cls), d->name, dn,
                       path);
                fails++;
            } else if (has && listed[op][w]) {
                printf("FAIL op '%s' has a CUDA %s kernel now; remove \"%s %s\" from %s\n", d->name, dn, d->name, dn,
                       path);
                fails++;
            }
            n_gaps += !has;
        }
    }
    printf("sweep: CUDA AMP coverage: %d (op, f16/bf16) pairs met under autocast, %d without a CUDA kernel (listed "
           "in %s), %d failures\n", n_checked, n_gaps, path, fails);
    return fails ? 1 : 0;
}

int main(int argc, char **argv) {
    const char *gemm_backend = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--gemm-backend") == 0 && i + 1 < argc) gemm_backend = argv[++i];
        else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc && strcmp(argv[i + 1], "cuda") == 0) g_cuda_only = true, i++;
        else if (strcmp(argv[i], "--cuda-gaps") == 0 && i + 1 < argc) return check_cuda_gaps(argv[++i]);
        else if (strcmp(argv[i], "--cuda-amp-gaps") == 0 && i + 1 < argc) return check_cuda_amp_gaps(argv[++i]);
        else if (strcmp(argv[i], "--no-low-precision") == 0) g_no_low = true;
        else g_filter = argv[i];
    }
    oar_init();
    g_cuda = oar_cuda_is_available();
    if (g_cuda_only && !g_cuda) {
        printf("sweep: no CUDA device (%s); the GPU checks are skipped\n",
               oar_cuda_is_built() ? "none found" : "this build has no CUDA");
        return 77;
    }
    if (gemm_backend) {
        int b = oar_gemm_backend_from_name(gemm_backend);
        if (b < 0) {
            fprintf(stderr, "sweep: unknown --gemm-backend '%s'; expected openblas, dnnl, avx2 or avx512\n",
                    gemm_backend);
            return 2;
        }
        if (oar_gemm_force_backend((oar_gemm_backend)b) < 0) {
            printf("sweep: GEMM backend '%s' is not available in this build; nothing to check\n", gemm_backend);
            return 0;
        }
    }
    int case_no = 0, n_cases = 0;
    for (int f = 0; f < sweep_n_families; f++) {
        for (const sweep_case *c = sweep_families[f].cases; c->op; c++, case_no++) {
            if (g_filter && strcmp(g_filter, c->op) != 0) continue;
            int before = g_failures;
            run_case(c);
            n_cases++;
            if (g_failures != before) fprintf(stderr, "  (case %d of family %s)\n", case_no, sweep_families[f].name);
        }
        if (g_filter || g_cuda_only) continue;
        int n_bad = 0;
        for (const sweep_bad *b = sweep_families[f].bad; b->call; b++, n_bad++) {
            oar_clear_error();
            oar_scope_begin();
            bool ok = b->call();
            oar_scope_end();
            g_checks++;
            if (ok) FAIL("bad input '%s' (%s) was accepted", b->what, sweep_families[f].name);
            else if (!strstr(oar_last_error(), b->expect))
                FAIL("bad input '%s' (%s): message \"%s\" lacks \"%s\"", b->what, sweep_families[f].name,
                     oar_last_error(), b->expect);
        }
        if (n_bad == 0) FAIL("family %s has no bad-input case", sweep_families[f].name);
    }
    if (!g_filter && !g_cuda_only) {
        for (int op = 0; op < OAR_OP_COUNT; op++) {
            const oar_op_def *d = oar_op_table[op];
            /* control flow needs sub-blocks: tests/test_control.c covers it, eager against static; a
             * callback op needs a front end's function: tests/test_custom_function.c */
            if (sweep_count_cases(d->name) == 0 && !(d->flags & (OAR_OPF_CONTROL | OAR_OPF_CALLBACK)))
                FAIL("op '%s' has no sweep case", d->name);
            if (!(d->flags & OAR_OPF_NONDIFF) && !d->grad) FAIL("differentiable op '%s' has no gradient rule", d->name);
        }
    }
    report_zero();
    if (g_cuda) printf("sweep: %d CUDA kernel and gradient runs compared with the reference\n", g_cuda_checked);
    printf("sweep: %d cases, %d checks, %d ops registered, %d failures\n", n_cases, g_checks, OAR_OP_COUNT,
           g_failures);
    return g_failures ? 1 : 0;
}
