/* oneDNN's pooling and batch-norm primitives against oar's own kernels, on the shapes of the
 * reference workloads (LeNet's 2x2 max pooling, ResNet-20's training batch norm and global
 * average pooling), forward and backward. Built only when oneDNN is found.
 *
 * oar's side is the best of oar's own kernels for the op (dispatch's order, passing over
 * the "onednn" ones, pool_dnnl.c's included), run through oar_op_run_kernel on prepared
 * buffers. oneDNN's side runs primitives on plain NCHW memory,
 * built once (as a primitive cache would hold them), with a stream and memory objects made
 * per call as conv_dnnl.c does, threaded two ways:
 *   split: oar's pool runs parts on one OpenMP thread each (conv_dnnl.c's scheme); pooling
 *          splits the batch, batch norm the channels (its statistics run over the batch), as
 *          strided NCHW views of the whole tensor;
 *   omp:   one primitive over the whole tensor, oneDNN's OpenMP threads (2+ threads only).
 * Variants run interleaved, rep by rep, so a busy spell of the shared machine hits them all;
 * each reports the median, min and max of its reps. Max-pool backward in oneDNN reads the
 * forward's workspace, while oar's max_pool2d_backward takes x and finds the maxima again, so
 * oneDNN's backward is timed alone ("bwd") and with the forward that makes its workspace
 * ("fwd+bwd", the cost of standing in for oar's op).
 *
 * usage: bench_dnnl_pool_bn [reps (default 31)] [threads... (default 1 2)]
 * OMP_WAIT_POLICY=passive keeps libgomp's idle workers from spinning against oar's pool. */
#include "base/base.h"
#include "oar/bench_util.h"
#include "ops/op.h"
#include "oar.h"
#include "tensor/tensor.h"

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_PARTS 16
#define MAX_ARGS 12
#define MAX_VARIANTS 4

static dnnl_engine_t g_engine;

static void check(dnnl_status_t st, const char *what) {
    if (st != dnnl_success) {
        fprintf(stderr, "oneDNN: %s failed (status %d)\n", what, (int)st);
        exit(1);
    }
}

/* ---- oneDNN side: per part, up to two primitives run in turn, each with its arguments */
typedef struct dstep {
    dnnl_primitive_t prim;
    int nargs, arg[MAX_ARGS];
    dnnl_memory_desc_t md[MAX_ARGS];
    void *ptr[MAX_ARGS];
} dstep;

typedef struct dvariant {
    int parts, nsteps, omp_threads;
    dstep step[MAX_PARTS][2];
    void *owned[MAX_PARTS * 4]; /* workspaces, statistics */
    int nowned;
    char impl[2][128];
} dvariant;

static void *own(dvariant *v, size_t bytes) {
    void *p = calloc(1, bytes ? bytes : 1);
    v->owned[v->nowned++] = p;
    return p;
}

static void step_arg(dstep *s, int arg, const dnnl_memory_desc_t *md, void *ptr) {
    s->arg[s->nargs] = arg, s->md[s->nargs] = *md, s->ptr[s->nargs] = ptr;
    s->nargs++;
}

static void step_prim(dvariant *v, dstep *s, dnnl_primitive_desc_t pd, int which) {
    const char *impl = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    snprintf(v->impl[which], sizeof v->impl[which], "%s", impl ? impl : "?");
    check(dnnl_primitive_create(&s->prim, pd), "primitive_create");
}

static void run_part(void *ctx, int64_t begin, int64_t end) {
    dvariant *v = ctx;
    if (omp_get_max_threads() != v->omp_threads) omp_set_num_threads(v->omp_threads);
    for (int64_t p = begin; p < end; p++) {
        dnnl_stream_t strm;
        check(dnnl_stream_create(&strm, g_engine, dnnl_stream_default_flags), "stream_create");
        for (int k = 0; k < v->nsteps; k++) {
            dstep *s = &v->step[p][k];
            dnnl_memory_t mem[MAX_ARGS];
            dnnl_exec_arg_t a[MAX_ARGS];
            for (int i = 0; i < s->nargs; i++) {
                check(dnnl_memory_create(&mem[i], &s->md[i], g_engine, s->ptr[i]), "memory_create");
                a[i] = (dnnl_exec_arg_t){s->arg[i], mem[i]};
            }
            check(dnnl_primitive_execute(s->prim, strm, s->nargs, a), "execute");
            check(dnnl_stream_wait(strm), "stream_wait");
            for (int i = 0; i < s->nargs; i++) dnnl_memory_destroy(mem[i]);
        }
        dnnl_stream_destroy(strm);
    }
}

static void dvariant_run(dvariant *v) {
    if (v->omp_threads > 1) {
        omp_set_num_threads(v->omp_threads);
        run_part(v, 0, 1);
    } else {
        oar_parallel_for(v->parts, 1, run_part, v);
    }
}

static void dvariant_free(dvariant *v) {
    for (int p = 0; p < v->parts; p++)
        for (int k = 0; k < v->nsteps; k++) dnnl_primitive_destroy(v->step[p][k].prim);
    for (int i = 0; i < v->nowned; i++) free(v->owned[i]);
}

/* [n, c, h, w] as part of an NCHW tensor of `cs` channels (a channel slice when c < cs) */
static dnnl_memory_desc_t md_nchw(int64_t n, int64_t c, int64_t h, int64_t w, int64_t cs) {
    dnnl_memory_desc_t md;
    dnnl_dims_t d = {n, c, h, w}, s = {cs * h * w, h * w, w, 1};
    check(dnnl_memory_desc_init_by_strides(&md, 4, d, dnnl_f32, s), "md_nchw");
    return md;
}

static dnnl_memory_desc_t md_vec(int64_t c) {
    dnnl_memory_desc_t md;
    dnnl_dims_t d = {c};
    check(dnnl_memory_desc_init_by_tag(&md, 1, d, dnnl_f32, dnnl_x), "md_vec");
    return md;
}

/* part p of `total` split into `parts`: first index and count (the first total % parts get one more) */
static void part_range(int64_t total, int parts, int p, int64_t *first, int64_t *count) {
    int64_t q = total / parts, r = total % parts;
    *first = p * q + (p < r ? p : r);
    *count = q + (p < r ? 1 : 0);
}

/* ---- pooling: max 2x2 / global average, forward (training) and backward */
typedef struct pool_shape {
    int64_t n, c, h, w, oh, ow, k, s;
    dnnl_alg_kind_t alg;
} pool_shape;

enum { P_FWD, P_BWD, P_FWDBWD };

/* x, y: forward buffers; gy, gx: backward ones (oneDNN's own outputs, not oar's) */
static void pool_variant(dvariant *v, const pool_shape *ps, int mode, int parts, int omp_threads, float *x, float *y,
                         float *gy, float *gx) {
    memset(v, 0, sizeof *v);
    v->parts = parts, v->omp_threads = omp_threads, v->nsteps = mode == P_FWDBWD ? 2 : 1;
    omp_set_num_threads(omp_threads); /* oneDNN sizes its work split at creation */
    dnnl_dims_t st = {ps->s, ps->s}, kr = {ps->k, ps->k}, dil = {0, 0}, pad = {0, 0};
    int64_t xi = ps->c * ps->h * ps->w, yi = ps->c * ps->oh * ps->ow;
    for (int p = 0; p < parts; p++) {
        int64_t n0, np;
        part_range(ps->n, parts, p, &n0, &np);
        dnnl_memory_desc_t src = md_nchw(np, ps->c, ps->h, ps->w, ps->c), dst = md_nchw(np, ps->c, ps->oh, ps->ow, ps->c);
        dnnl_pooling_v2_desc_t fd, bd;
        check(dnnl_pooling_v2_forward_desc_init(&fd, dnnl_forward_training, ps->alg, &src, &dst, st, kr, dil, pad, pad),
              "pool fwd desc");
        dnnl_primitive_desc_t fpd, bpd;
        check(dnnl_primitive_desc_create(&fpd, &fd, NULL, g_engine, NULL), "pool fwd pd");
        const dnnl_memory_desc_t *wsmd = dnnl_primitive_desc_query_md(fpd, dnnl_query_workspace_md, 0);
        size_t wsb = wsmd ? dnnl_memory_desc_get_size(wsmd) : 0;
        void *ws = wsb ? own(v, wsb) : NULL;
        int k = 0;
        if (mode != P_BWD) {
            dstep *s = &v->step[p][k++];
            step_prim(v, s, fpd, 0);
            step_arg(s, DNNL_ARG_SRC, &src, x + n0 * xi);
            step_arg(s, DNNL_ARG_DST, &dst, y + n0 * yi);
            if (wsb) step_arg(s, DNNL_ARG_WORKSPACE, wsmd, ws);
        }
        if (mode != P_FWD) {
            check(dnnl_pooling_v2_backward_desc_init(&bd, ps->alg, &src, &dst, st, kr, dil, pad, pad), "pool bwd desc");
            check(dnnl_primitive_desc_create(&bpd, &bd, NULL, g_engine, fpd), "pool bwd pd");
            dstep *s = &v->step[p][k++];
            step_prim(v, s, bpd, 1);
            step_arg(s, DNNL_ARG_DIFF_DST, &dst, gy + n0 * yi);
            step_arg(s, DNNL_ARG_DIFF_SRC, &src, gx + n0 * xi);
            if (wsb) step_arg(s, DNNL_ARG_WORKSPACE, wsmd, ws);
            dnnl_primitive_desc_destroy(bpd);
        }
        if (mode == P_BWD && wsb) { /* the workspace the backward reads: one forward, untimed */
            dnnl_primitive_t f;
            check(dnnl_primitive_create(&f, fpd), "pool fwd");
            dnnl_stream_t strm;
            dnnl_memory_t m[3];
            check(dnnl_stream_create(&strm, g_engine, dnnl_stream_default_flags), "stream");
            check(dnnl_memory_create(&m[0], &src, g_engine, x + n0 * xi), "mem");
            check(dnnl_memory_create(&m[1], &dst, g_engine, y + n0 * yi), "mem");
            check(dnnl_memory_create(&m[2], wsmd, g_engine, ws), "mem");
            dnnl_exec_arg_t a[3] = {{DNNL_ARG_SRC, m[0]}, {DNNL_ARG_DST, m[1]}, {DNNL_ARG_WORKSPACE, m[2]}};
            check(dnnl_primitive_execute(f, strm, 3, a), "pool fwd exec");
            check(dnnl_stream_wait(strm), "wait");
            for (int i = 0; i < 3; i++) dnnl_memory_destroy(m[i]);
            dnnl_stream_destroy(strm);
            dnnl_primitive_destroy(f);
        }
        dnnl_primitive_desc_destroy(fpd);
    }
}

/* ---- batch norm, training: forward (batch statistics) and backward (dx, dweight, dbias) */
typedef struct bn_bufs {
    float *x, *w, *b, *y, *mean, *var, *gy, *gx, *gw, *gb;
} bn_bufs;

static void bn_variant(dvariant *v, const int64_t *shape, bool backward, int parts, int omp_threads, const bn_bufs *B) {
    memset(v, 0, sizeof *v);
    v->parts = parts, v->omp_threads = omp_threads, v->nsteps = 1;
    omp_set_num_threads(omp_threads);
    int64_t n = shape[0], c = shape[1], h = shape[2], w = shape[3], hw = h * w;
    unsigned flags = dnnl_use_scale | dnnl_use_shift;
    for (int p = 0; p < parts; p++) {
        int64_t c0, cp;
        part_range(c, parts, p, &c0, &cp);
        dnnl_memory_desc_t data = md_nchw(n, cp, h, w, c), vec = md_vec(cp);
        dnnl_batch_normalization_desc_t fd, bd;
        dnnl_primitive_desc_t fpd, bpd;
        check(dnnl_batch_normalization_forward_desc_init(&fd, dnnl_forward_training, &data, 1e-5f, flags), "bn fwd desc");
        check(dnnl_primitive_desc_create(&fpd, &fd, NULL, g_engine, NULL), "bn fwd pd");
        dstep *s = &v->step[p][0];
        if (!backward) {
            step_prim(v, s, fpd, 0);
            step_arg(s, DNNL_ARG_SRC, &data, B->x + c0 * hw);
            step_arg(s, DNNL_ARG_DST, &data, B->y + c0 * hw);
            step_arg(s, DNNL_ARG_SCALE, &vec, B->w + c0);
            step_arg(s, DNNL_ARG_SHIFT, &vec, B->b + c0);
            step_arg(s, DNNL_ARG_MEAN, &vec, B->mean + c0);
            step_arg(s, DNNL_ARG_VARIANCE, &vec, B->var + c0);
        } else {
            check(dnnl_batch_normalization_backward_desc_init(&bd, dnnl_backward, &data, &data, 1e-5f, flags), "bn bwd desc");
            check(dnnl_primitive_desc_create(&bpd, &bd, NULL, g_engine, fpd), "bn bwd pd");
            step_prim(v, s, bpd, 0);
            step_arg(s, DNNL_ARG_SRC, &data, B->x + c0 * hw);
            step_arg(s, DNNL_ARG_DIFF_DST, &data, B->gy + c0 * hw);
            step_arg(s, DNNL_ARG_MEAN, &vec, B->mean + c0);
            step_arg(s, DNNL_ARG_VARIANCE, &vec, B->var + c0);
            step_arg(s, DNNL_ARG_SCALE, &vec, B->w + c0);
            step_arg(s, DNNL_ARG_SHIFT, &vec, B->b + c0); /* oneDNN 2.6 asks for it, though dx does not depend on it */
            step_arg(s, DNNL_ARG_DIFF_SRC, &data, B->gx + c0 * hw);
            step_arg(s, DNNL_ARG_DIFF_SCALE, &vec, B->gw + c0);
            step_arg(s, DNNL_ARG_DIFF_SHIFT, &vec, B->gb + c0);
            dnnl_primitive_desc_destroy(bpd);
        }
        dnnl_primitive_desc_destroy(fpd);
    }
}

/* ---- oar side */
typedef struct okernel {
    oar_op_id op;
    const oar_kernel_entry *k;
    oar_tensor *in[8], *out[8];
    int n_in, n_out;
    oar_attr attrs[OAR_MAX_ATTRS];
} okernel;

static oar_tensor *randn4(const int64_t *shape, int ndim) {
    oar_tensor *t = oar_randn(shape, ndim, OAR_F32);
    oar_tensor *c = oar_tensor_contiguous_copy(t); /* untracked, ours to free */
    oar_release(t);
    return c;
}

static void okernel_init(okernel *o, const char *op, oar_tensor *const *in, int n_in, const char *attrs) {
    memset(o, 0, sizeof *o);
    o->op = (oar_op_id)oar_op_find(op);
    o->n_in = n_in;
    for (int i = 0; i < n_in; i++) o->in[i] = in[i];
    if (oar_attrs_parse(oar_op_table[o->op], attrs, o->attrs) != OAR_OK) {
        fprintf(stderr, "%s: %s\n", op, oar_last_error());
        exit(1);
    }
    oar_meta m[8];
    int n = 8;
    if (oar_op_infer(o->op, in, n_in, o->attrs, m, &n) != OAR_OK) {
        fprintf(stderr, "%s: %s\n", op, oar_last_error());
        exit(1);
    }
    o->n_out = n;
    for (int i = 0; i < n; i++) o->out[i] = oar_tensor_new(m[i].dtype, m[i].shape, m[i].ndim);
    /* oar's own best kernel: the first (best) that takes the call, passing over oneDNN's */
    const oar_kernel_entry *ks;
    int nk = oar_op_kernels(o->op, &ks);
    for (int i = 0; i < nk && !o->k; i++)
        if (ks[i].device == OAR_CPU && strcmp(ks[i].impl, "onednn") != 0 &&
            (!ks[i].supports || ks[i].supports(o->in, n_in, o->out, n, o->attrs)))
            o->k = &ks[i];
    if (!o->k) {
        fprintf(stderr, "%s: no kernel of oar's own takes it\n", op);
        exit(1);
    }
}

static void okernel_run(okernel *o) {
    if (oar_op_run_kernel(o->op, o->k, o->in, o->n_in, o->out, o->n_out, o->attrs) != OAR_OK) {
        fprintf(stderr, "%s: %s\n", oar_op_table[o->op]->name, oar_last_error());
        exit(1);
    }
}

static void okernel_free(okernel *o) {
    for (int i = 0; i < o->n_out; i++) oar_tensor_unref(o->out[i]);
}

/* ---- timing: variant 0 is oar's kernel, the rest oneDNN's */
typedef struct bcase {
    const char *name;
    okernel *o;
    dvariant *d[MAX_VARIANTS];
    const char *dlabel[MAX_VARIANTS];
    int nd;
} bcase;

static void run_variant(bcase *c, int i) {
    if (i == 0)
        okernel_run(c->o);
    else
        dvariant_run(c->d[i - 1]);
}

static void time_case(bcase *c, int reps, int nt) {
    int nv = 1 + c->nd;
    for (int i = 0; i < nv; i++) run_variant(c, i); /* warm caches and threads */
    double t0 = bench_now_s();
    run_variant(c, 0);
    double once = bench_now_s() - t0;
    int iters = once > 0 ? (int)(3e-3 / once) : 100; /* ~3 ms per sample of oar's kernel */
    if (iters < 1) iters = 1;
    if (iters > 2000) iters = 2000;
    double *t = malloc(sizeof(double) * (size_t)(nv * reps));
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < nv; i++) {
            double s = bench_now_s();
            for (int k = 0; k < iters; k++) run_variant(c, i);
            t[i * reps + r] = (bench_now_s() - s) / iters * 1e6;
        }
    double med0 = 0;
    for (int i = 0; i < nv; i++) {
        double *ti = t + i * reps;
        qsort(ti, (size_t)reps, sizeof(double), bench_cmp_double);
        double med = ti[reps / 2];
        if (i == 0) med0 = med;
        char label[96];
        if (i == 0)
            snprintf(label, sizeof label, "oar %s", c->o->k->impl);
        else
            snprintf(label, sizeof label, "onednn %s", c->dlabel[i - 1]);
        printf("| %d | %s | %s | %.1f [%.1f..%.1f] | %.2f |\n", nt, c->name, label, med, ti[0], ti[reps - 1],
               med / med0);
    }
    free(t);
    fflush(stdout);
}

static double max_diff(const float *a, const float *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > m || d != d) m = d;
    }
    return m;
}

static float *fptr(oar_tensor *t) { return (float *)oar_tensor_ptr(t); }

/* the oneDNN variants of a case at nt threads: split over `total` (batch or channels), and at
 * nt > 1 oneDNN's OpenMP over the whole */
typedef void (*build_fn)(dvariant *v, int parts, int omp_threads, void *ctx);

static void add_variants(bcase *c, int nt, int64_t total, build_fn build, void *ctx) {
    int parts = nt < total ? nt : (int)total;
    c->d[c->nd] = malloc(sizeof(dvariant));
    build(c->d[c->nd], parts, 1, ctx);
    c->dlabel[c->nd++] = nt > 1 ? "split" : "1 thread";
    if (nt > 1) {
        c->d[c->nd] = malloc(sizeof(dvariant));
        build(c->d[c->nd], 1, nt, ctx);
        c->dlabel[c->nd++] = "omp";
    }
}

static void free_variants(bcase *c) {
    for (int i = 0; i < c->nd; i++) {
        dvariant_free(c->d[i]);
        free(c->d[i]);
    }
    c->nd = 0;
}

typedef struct pool_ctx {
    pool_shape ps;
    int mode;
    float *x, *y, *gy, *gx;
} pool_ctx;

static void build_pool(dvariant *v, int parts, int omp_threads, void *ctx) {
    pool_ctx *p = ctx;
    pool_variant(v, &p->ps, p->mode, parts, omp_threads, p->x, p->y, p->gy, p->gx);
}

typedef struct bn_ctx {
    const int64_t *shape;
    bool backward;
    bn_bufs b;
} bn_ctx;

static void build_bn(dvariant *v, int parts, int omp_threads, void *ctx) {
    bn_ctx *p = ctx;
    bn_variant(v, p->shape, p->backward, parts, omp_threads, &p->b);
}

static void print_impls(const char *label, dvariant *v) {
    fprintf(stderr, "  oneDNN %s: impl %s%s%s\n", label, v->impl[0], v->impl[1][0] ? " / " : "", v->impl[1]);
}

/* max_pool2d 2x2 (LeNet) or global average pooling (ResNet-20) of x [n, c, h, w] */
static void bench_pool(const int64_t *xs, bool maxpool, int nt, int reps) {
    pool_ctx pc = {0};
    pool_shape *ps = &pc.ps;
    ps->n = xs[0], ps->c = xs[1], ps->h = xs[2], ps->w = xs[3];
    ps->k = ps->s = maxpool ? 2 : xs[2];
    ps->oh = ps->h / ps->k, ps->ow = ps->w / ps->k;
    ps->alg = maxpool ? dnnl_pooling_max : dnnl_pooling_avg_exclude_padding;
    int64_t ys[4] = {ps->n, ps->c, ps->oh, ps->ow};
    oar_tensor *x = randn4(xs, 4), *gy = randn4(ys, 4);
    okernel fwd, bwd;
    char name[96], in_shape[64];
    snprintf(in_shape, sizeof in_shape, "%lldx%lldx%lldx%lld", (long long)xs[0], (long long)xs[1], (long long)xs[2],
             (long long)xs[3]);
    if (maxpool) {
        const char *a = "kernel=2,2 stride=2,2 padding=0,0 dilation=1,1 ceil_mode=0";
        okernel_init(&fwd, "max_pool2d", &x, 1, a);
        oar_tensor *bi[2] = {gy, x};
        okernel_init(&bwd, "max_pool2d_backward", bi, 2, a);
    } else {
        okernel_init(&fwd, "adaptive_avg_pool2d", &x, 1, "output_size=1,1");
        char a[96];
        snprintf(a, sizeof a, "input_shape=%lld,%lld,%lld,%lld", (long long)xs[0], (long long)xs[1], (long long)xs[2],
                 (long long)xs[3]);
        okernel_init(&bwd, "adaptive_avg_pool2d_backward", &gy, 1, a);
    }
    oar_tensor *y = oar_tensor_new(OAR_F32, ys, 4), *gx = oar_tensor_new(OAR_F32, xs, 4);
    pc.x = fptr(x), pc.y = fptr(y), pc.gy = fptr(gy), pc.gx = fptr(gx);
    const char *opn = maxpool ? "max_pool2d" : "adaptive_avg_pool2d";
    for (int mode = P_FWD; mode <= P_BWD; mode++) {
        bcase c = {.name = name, .o = mode == P_FWD ? &fwd : &bwd};
        snprintf(name, sizeof name, "%s %s %s", opn, mode == P_FWD ? "fwd" : "bwd", in_shape);
        pc.mode = mode;
        add_variants(&c, nt, ps->n, build_pool, &pc);
        if (maxpool && mode == P_BWD) { /* the backward with the forward that makes its workspace */
            pc.mode = P_FWDBWD;
            c.d[c.nd] = malloc(sizeof(dvariant));
            build_pool(c.d[c.nd], nt < ps->n ? nt : (int)ps->n, 1, &pc);
            c.dlabel[c.nd++] = nt > 1 ? "split, fwd+bwd" : "fwd+bwd";
        }
        for (int i = 0; i < c.nd; i++) print_impls(c.dlabel[i], c.d[i]);
        okernel_run(c.o); /* both sides once more, then compare */
        for (int i = 0; i < c.nd; i++) {
            dvariant_run(c.d[i]);
            float *mine = mode == P_FWD ? pc.y : pc.gx;
            double d = max_diff(mine, fptr(c.o->out[0]), c.o->out[0]->numel);
            fprintf(stderr, "  %s: max |oneDNN %s - oar| = %g\n", name, c.dlabel[i], d);
        }
        time_case(&c, reps, nt);
        free_variants(&c);
    }
    okernel_free(&fwd);
    okernel_free(&bwd);
    oar_tensor_unref(x), oar_tensor_unref(gy), oar_tensor_unref(y), oar_tensor_unref(gx);
}

static void bench_bn(const int64_t *xs, int nt, int reps) {
    int64_t c = xs[1];
    oar_tensor *x = randn4(xs, 4), *gy = randn4(xs, 4), *w = randn4(&c, 1), *b = randn4(&c, 1);
    oar_tensor *rm = oar_tensor_new(OAR_F32, &c, 1), *rv = oar_tensor_new(OAR_F32, &c, 1);
    for (int64_t i = 0; i < c; i++) fptr(rm)[i] = 0, fptr(rv)[i] = 1;
    okernel fwd, bwd;
    oar_tensor *fi[6] = {x, w, b, rm, rv, NULL}; /* no num_batches_tracked: momentum is given */
    okernel_init(&fwd, "batch_norm", fi, 6, "training=1 momentum=0.1 eps=1e-5");
    okernel_run(&fwd); /* saved mean and rstd for the backward */
    if (fwd.n_out < 3) {
        fprintf(stderr, "batch_norm: expected saved statistics among its outputs\n");
        exit(1);
    }
    oar_tensor *bi[5] = {gy, x, w, fwd.out[1], fwd.out[2]};
    okernel_init(&bwd, "batch_norm_backward", bi, 5, "");
    bn_ctx bc = {.shape = xs};
    oar_tensor *own_t[6];
    for (int i = 0; i < 2; i++) own_t[i] = oar_tensor_new(OAR_F32, xs, 4);
    for (int i = 2; i < 6; i++) own_t[i] = oar_tensor_new(OAR_F32, &c, 1);
    bc.b = (bn_bufs){.x = fptr(x), .w = fptr(w), .b = fptr(b), .y = fptr(own_t[0]), .gx = fptr(own_t[1]),
                     .mean = fptr(own_t[2]), .var = fptr(own_t[3]), .gw = fptr(own_t[4]), .gb = fptr(own_t[5]),
                     .gy = fptr(gy)};
    char name[96];
    snprintf(name, sizeof name, "batch_norm %%s %lldx%lldx%lldx%lld", (long long)xs[0], (long long)xs[1],
             (long long)xs[2], (long long)xs[3]);
    char fname[96];
    for (int back = 0; back < 2; back++) {
        snprintf(fname, sizeof fname, name, back ? "bwd" : "fwd");
        bcase cs = {.name = fname, .o = back ? &bwd : &fwd};
        bc.backward = back;
        add_variants(&cs, nt, c, build_bn, &bc);
        for (int i = 0; i < cs.nd; i++) print_impls(cs.dlabel[i], cs.d[i]);
        if (back) { /* oneDNN's backward reads its forward's mean and variance */
            dvariant f;
            bn_variant(&f, xs, false, 1, 1, &bc.b);
            dvariant_run(&f);
            dvariant_free(&f);
        }
        okernel_run(cs.o);
        for (int i = 0; i < cs.nd; i++) {
            dvariant_run(cs.d[i]);
            double d = max_diff(back ? bc.b.gx : bc.b.y, fptr(cs.o->out[0]), x->numel);
            fprintf(stderr, "  %s: max |oneDNN %s - oar| = %g\n", fname, cs.dlabel[i], d);
        }
        time_case(&cs, reps, nt);
        free_variants(&cs);
    }
    okernel_free(&fwd);
    okernel_free(&bwd);
    for (int i = 0; i < 6; i++) oar_tensor_unref(own_t[i]);
    oar_tensor *mine[6] = {x, gy, w, b, rm, rv};
    for (int i = 0; i < 6; i++) oar_tensor_unref(mine[i]);
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 31;
    int threads[8] = {1, 2}, nthreads = 2;
    if (argc > 2) {
        nthreads = 0;
        for (int i = 2; i < argc && nthreads < 8; i++) threads[nthreads++] = atoi(argv[i]);
    }
    if (reps < 3) reps = 3;
    oar_init(); /* kernels registered before oar_select_kernel */
    check(dnnl_engine_create(&g_engine, dnnl_cpu, 0), "engine_create");
    oar_manual_seed(0);
    static const int64_t lenet[2][4] = {{64, 6, 28, 28}, {64, 16, 10, 10}};
    static const int64_t resnet[3][4] = {{32, 16, 32, 32}, {32, 32, 16, 16}, {32, 64, 8, 8}};
    printf("| threads | op, input | kernel | us: median [min..max] of %d | vs oar |\n| --- | --- | --- | --- | --- |\n", reps);
    for (int t = 0; t < nthreads; t++) {
        int nt = threads[t];
        oar_set_num_threads(nt);
        for (int i = 0; i < 2; i++) bench_pool(lenet[i], true, nt, reps);
        for (int i = 0; i < 3; i++) bench_bn(resnet[i], nt, reps);
        bench_pool(resnet[2], false, nt, reps);
    }
    dnnl_engine_destroy(g_engine);
    return 0;
}
