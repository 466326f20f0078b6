/* CPU kernels of ctc_loss and ctc_loss_backward (f32, f64; portable C), checked against the
 * reference of src/ops/ctc.c by the sweep. The samples run as tasks of the thread pool, each
 * computed alone, so results do not depend on the thread count. Per sample: the frame's
 * emissions gathered once in the extended target's order, the skip rule as an additive mask
 * (0 or -inf) so the recursion has no branch, a three-term log-sum-exp per state, and only the
 * states some complete alignment can pass through: at frame t, s < 2 (t + 1) (reachable from
 * the start) and s >= L - 2 (T - t) (able to reach the end). The states cut off have alpha or
 * beta -inf, and feed no state of the band, so the band's values are exact. */
#include "kernels/cpu/cpu_kernels.h"
#include "ops/ctc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct ctc_job {
    const oar_ctc_batch *b;
    const void *lp;
    bool f64, zero_inf;
    const void *g;  /* backward: the losses' gradient [N] */
    void *out;      /* forward: losses [N]; backward: log_probs' gradient [T, N, C] */
    bool *failed;   /* per sample: its workspace could not be allocated */
} ctc_job;

/* A task's buffers, sized for the longest target (and T frames for the backward's tables). */
typedef struct ctc_work {
    int64_t *ext;
    bool *skip;
    double *skip_add;  /* [-2, L + 2): 0 where s may come from s - 2, -inf elsewhere and in the pads */
    double *a, *p;     /* alpha at this and the previous frame, [-2, L) */
    double *em;        /* forward: this frame's emissions; backward: every frame's, [T][L] */
    double *beta;      /* backward: [T][L + 2], two -inf pads after each row */
    double *acc;       /* backward: one frame's gradient by class [C] */
    void *block;
} ctc_work;

static bool work_alloc(ctc_work *w, const oar_ctc_batch *b, bool backward) {
    size_t L = (size_t)(2 * b->max_len + 1), T = (size_t)(b->T > 0 ? b->T : 1), C = (size_t)b->C;
    size_t doubles = (L + 4) + 2 * (L + 2) + (backward ? T * L + T * (L + 2) + C : L);
    w->block = malloc(sizeof(double) * doubles + (sizeof(int64_t) + sizeof(bool)) * L);
    if (!w->block) return false;
    double *d = w->block;
    w->skip_add = d + 2;
    w->a = d + (L + 4) + 2;
    w->p = w->a + L + 2;
    w->em = w->p + L;
    w->beta = backward ? w->em + T * L : NULL;
    w->acc = backward ? w->beta + T * (L + 2) : NULL;
    w->ext = (int64_t *)(d + doubles);
    w->skip = (bool *)(w->ext + L);
    return true;
}

/* log(e^a + e^b + e^c) as m + log1p(e^(x - m) + e^(y - m)), m the largest: two exps, not three.
 * NaN stays NaN (a comparison with it is false, so it lands in x or y). */
static inline double lse3(double a, double b, double c) {
    double hi = a > b ? a : b, y = a > b ? b : a;
    double m = hi > c ? hi : c, x = hi > c ? c : hi;
    if (m == -INFINITY) return a + b + c;
    return m + log(1.0 + exp(x - m) + exp(y - m));
}

static inline double lse2(double a, double b) {
    double m = a > b ? a : b, x = a > b ? b : a;
    if (m == -INFINITY) return a + b;
    return m + log(1.0 + exp(x - m));
}

/* The band of states [lo, hi) at frame t of a sample of T frames and L states. */
static inline int64_t band_lo(int64_t t, int64_t T, int64_t L) {
    int64_t lo = L - 2 * (T - t);
    return lo > 0 ? lo : 0;
}
static inline int64_t band_hi(int64_t t, int64_t L) { return 2 * (t + 1) < L ? 2 * (t + 1) : L; }

/* em[s] = log_probs[t, n, ext[s]] for s in [lo, hi) */
static void gather(const ctc_job *j, int64_t t, int64_t n, const int64_t *ext, int64_t lo, int64_t hi, double *em) {
    int64_t row = (t * j->b->N + n) * j->b->C;
    if (j->f64) {
        const double *x = (const double *)j->lp + row;
        for (int64_t s = lo; s < hi; s++) em[s] = x[ext[s]];
    } else {
        const float *x = (const float *)j->lp + row;
        for (int64_t s = lo; s < hi; s++) em[s] = x[ext[s]];
    }
}

/* Sets up sample n's extended target and skip mask; returns its state count. */
static int64_t prepare(const ctc_job *j, int64_t n, ctc_work *w) {
    int64_t L = oar_ctc_extend(j->b, n, w->ext, w->skip);
    for (int64_t s = -2; s < L + 2; s++) w->skip_add[s] = s >= 0 && s < L && w->skip[s] ? 0.0 : -INFINITY;
    for (int64_t s = -2; s < L; s++) w->a[s] = w->p[s] = -INFINITY;
    return L;
}

/* One alpha step: a[s] over the band from p, the previous frame's alpha, and the emissions em. */
static inline void alpha_step(const double *p, const double *skip_add, const double *em, int64_t lo, int64_t hi,
                              double *a) {
    for (int64_t s = lo; s < hi; s++) {
        double c = p[s - 2] + skip_add[s]; /* -inf at every blank: two terms there (a branch of period 2) */
        a[s] = (c == -INFINITY ? lse2(p[s], p[s - 1]) : lse3(p[s], p[s - 1], c)) + em[s];
    }
}

/* One beta step, from the next frame's beta q (two -inf pads after its row). */
static inline void beta_step(const double *q, const double *skip_add, const double *em, int64_t lo, int64_t hi,
                             double *b) {
    for (int64_t s = lo; s < hi; s++) {
        double c = q[s + 2] + skip_add[s + 2];
        b[s] = (c == -INFINITY ? lse2(q[s], q[s + 1]) : lse3(q[s], q[s + 1], c)) + em[s];
    }
}

static void swap(double **x, double **y) {
    double *t = *x;
    *x = *y;
    *y = t;
}

/* ---- forward: the log-likelihood of sample n */
static double forward_sample(const ctc_job *j, int64_t n, ctc_work *w) {
    int64_t T = j->b->in_len[n], L = prepare(j, n, w);
    if (T == 0) return L == 1 ? 0.0 : -INFINITY;
    double *a = w->a, *p = w->p;
    int64_t hi = band_hi(0, L);
    gather(j, 0, n, w->ext, 0, hi, w->em);
    for (int64_t s = band_lo(0, T, L); s < hi; s++) a[s] = w->em[s];
    for (int64_t t = 1; t < T; t++) {
        swap(&a, &p);
        int64_t lo = band_lo(t, T, L);
        hi = band_hi(t, L);
        gather(j, t, n, w->ext, lo, hi, w->em);
        alpha_step(p, w->skip_add, w->em, lo, hi, a);
    }
    return L > 1 ? lse2(a[L - 1], a[L - 2]) : a[0];
}

static void forward_task(void *ctx, int64_t n0, int64_t n1) {
    const ctc_job *j = ctx;
    ctc_work w;
    if (!work_alloc(&w, j->b, false)) {
        for (int64_t n = n0; n < n1; n++) j->failed[n] = true;
        return;
    }
    for (int64_t n = n0; n < n1; n++) {
        double nll = -forward_sample(j, n, &w);
        if (j->zero_inf && isinf(nll)) nll = 0;
        if (j->f64) ((double *)j->out)[n] = nll;
        else ((float *)j->out)[n] = (float)nll;
    }
    free(w.block);
}

/* ---- backward: beta for every frame, then alpha frame by frame with the gradient of that frame */
static void store_row(const ctc_job *j, int64_t t, int64_t n, const double *v, double g, bool nan) {
    int64_t C = j->b->C, row = (t * j->b->N + n) * C;
    for (int64_t c = 0; c < C; c++) {
        /* classes on no alignment get exact zeros, whatever g is */
        double d = nan ? NAN : v && v[c] != 0 ? -g * v[c] : 0.0;
        if (j->f64) ((double *)j->out)[row + c] = d;
        else ((float *)j->out)[row + c] = (float)d;
    }
}

static void backward_sample(const ctc_job *j, int64_t n, ctc_work *w) {
    int64_t T = j->b->in_len[n], L = prepare(j, n, w), R = L + 2, C = j->b->C;
    double g = j->f64 ? ((const double *)j->g)[n] : ((const float *)j->g)[n];
    for (int64_t t = T; t < j->b->T; t++) store_row(j, t, n, NULL, 0, false); /* past the input: no gradient */
    if (T == 0) return;
    double *em = w->em, *beta = w->beta;
    for (int64_t i = 0; i < T * R; i++) beta[i] = -INFINITY;
    for (int64_t t = 0; t < T; t++) gather(j, t, n, w->ext, band_lo(t, T, L), band_hi(t, L), em + t * L);
    for (int64_t s = band_lo(T - 1, T, L); s < band_hi(T - 1, L); s++)
        beta[(T - 1) * R + s] = s >= L - 2 ? em[(T - 1) * L + s] : -INFINITY;
    for (int64_t t = T - 2; t >= 0; t--) {
        const double *q = beta + (t + 1) * R, *e = em + t * L;
        double *b = beta + t * R;
        beta_step(q, w->skip_add, e, band_lo(t, T, L), band_hi(t, L), b);
    }
    double ll = L > 1 ? lse2(beta[0], beta[1]) : beta[0];
    if (ll == -INFINITY) { /* no alignment: zero_infinity gives zeros, torch's kernel NaN otherwise */
        for (int64_t t = 0; t < T; t++) store_row(j, t, n, NULL, 0, !j->zero_inf);
        return;
    }
    double *a = w->a, *p = w->p, *acc = w->acc;
    memset(acc, 0, sizeof(double) * (size_t)C);
    for (int64_t t = 0; t < T; t++) {
        int64_t lo = band_lo(t, T, L), hi = band_hi(t, L);
        const double *e = em + t * L, *b = beta + t * R;
        if (t == 0) {
            for (int64_t s = lo; s < hi; s++) a[s] = e[s];
        } else {
            swap(&a, &p);
            alpha_step(p, w->skip_add, e, lo, hi, a);
        }
        for (int64_t s = lo; s < hi; s++) {
            double ab = a[s] + b[s];
            if (ab != -INFINITY) acc[w->ext[s]] += exp(ab - e[s] - ll);
        }
        store_row(j, t, n, acc, g, false);
        for (int64_t s = lo; s < hi; s++) acc[w->ext[s]] = 0;
    }
}

static void backward_task(void *ctx, int64_t n0, int64_t n1) {
    const ctc_job *j = ctx;
    ctc_work w;
    if (!work_alloc(&w, j->b, true)) {
        for (int64_t n = n0; n < n1; n++) j->failed[n] = true;
        return;
    }
    for (int64_t n = n0; n < n1; n++) backward_sample(j, n, &w);
    free(w.block);
}

/* ---- drivers */
static oar_status run(const char *op, oar_tensor *const *in, oar_tensor *out, const void *g, const oar_attr *a,
                      oar_range_fn task) {
    oar_ctc_batch b;
    oar_status st = oar_ctc_batch_init(op, &b, in[0], in[1], in[2], in[3], a[0].i);
    if (st != OAR_OK) return st;
    ctc_job j = {.b = &b, .lp = oar_tensor_ptr(in[0]), .f64 = in[0]->dtype == OAR_F64, .zero_inf = a[1].i != 0,
                 .g = g, .out = oar_tensor_ptr(out)};
    if (b.N > 0 && !(j.failed = oar_malloc(sizeof(bool) * (size_t)b.N))) st = OAR_ERR_OOM;
    if (st == OAR_OK) oar_parallel_for(b.N, 1, task, &j);
    for (int64_t n = 0; n < b.N && st == OAR_OK; n++)
        if (j.failed[n]) st = oar_error(OAR_ERR_OOM, "%s: out of memory for the workspace of sample %lld", op, (long long)n);
    free(j.failed);
    oar_ctc_batch_free(&b);
    return st;
}

static oar_status ctc_forward(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    return run("ctc_loss", in, out[0], NULL, a, forward_task);
}

static oar_status ctc_backward(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                               int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    return run("ctc_loss_backward", in + 1, out[0], oar_tensor_ptr(in[0]), a, backward_task);
}

void oar_cpu_register_ctc(void) {
    uint32_t dts = OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64);
    oar_register_kernel(OAR_OP_ctc_loss, (oar_kernel_entry){.device = OAR_CPU, .dtypes = dts, .impl = "c",
                                                            .priority = 5, .fn = ctc_forward});
    oar_register_kernel(OAR_OP_ctc_loss_backward, (oar_kernel_entry){.device = OAR_CPU, .dtypes = dts, .impl = "c",
                                                                     .priority = 5, .fn = ctc_backward});
}
