/* oneDNN average pooling (f32) for adaptive_avg_pool2d and its backward, where every bin is
 * the same window: the output size divides the input size (kernel = stride = in / out), which
 * includes the global pooling of ResNet's and MobileNet's heads. Other sizes (uneven bins)
 * are declined and stay with the reference kernel. On ResNet-20's [32, 64, 8, 8] -> 1x1 these
 * ran 11-20x faster than the reference kernel (bench/dnnl_pool_bn.c,
 * docs/kernels-conv-dnnl.md); oneDNN's max pooling and batch norm measured slower than oar's
 * own kernels, so they are not used.
 *
 * Threads as in conv_dnnl.c: oar's pool splits the batch, oneDNN runs one OpenMP thread per
 * part. Each image is computed by the same code whatever the split, so results do not depend
 * on the thread count. Primitives (one per batch size of a part) live in a small LRU cache;
 * each call brings its own scratchpad, so parts of one size can share a primitive. */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dnnl_engine.h"

#ifdef OAR_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* All a primitive depends on; int64 so memcmp sees no padding. */
typedef struct pkey {
    int64_t backward, n, c, h, w, oh, ow;
} pkey;

/* A cached primitive (prim NULL: oneDNN declined the key). refs: the cache's reference and
 * each running call's, so eviction never frees one in use. */
typedef struct pprim {
    pkey key;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t x, y; /* plain NCHW input and output of the forward */
    size_t scratch;          /* bytes of user scratchpad */
    int refs;
    uint64_t used;
} pprim;

#define CACHE_CAP 16
#define MAX_PARTS 64

static struct {
    pthread_mutex_t mu;
    pprim *e[CACHE_CAP];
    int n;
    uint64_t clock;
} g_cache = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void pprim_free(pprim *p) {
    if (!p) return;
    if (p->prim) dnnl_primitive_destroy(p->prim);
    free(p);
}

static void pprim_put(pprim *p) {
    if (p && __atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) == 0) pprim_free(p);
}

/* Average pooling with window h / oh x w / ow, forward or backward; prim NULL if declined. */
static pprim *pprim_build(const pkey *k) {
    pprim *p = calloc(1, sizeof *p); /* metadata, not tensor storage */
    if (!p) return NULL;
    p->key = *k;
    dnnl_dims_t xd = {k->n, k->c, k->h, k->w}, yd = {k->n, k->c, k->oh, k->ow};
    dnnl_dims_t kr = {k->h / k->oh, k->w / k->ow}, dil = {0, 0}, pad = {0, 0};
    dnnl_primitive_attr_t attr = NULL;
    dnnl_pooling_v2_desc_t fd, bd;
    dnnl_primitive_desc_t fpd = NULL, bpd = NULL;
    bool ok = dnnl_memory_desc_init_by_tag(&p->x, 4, xd, dnnl_f32, dnnl_nchw) == dnnl_success &&
              dnnl_memory_desc_init_by_tag(&p->y, 4, yd, dnnl_f32, dnnl_nchw) == dnnl_success &&
              dnnl_primitive_attr_create(&attr) == dnnl_success &&
              dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success;
    /* no padding, so "exclude padding" divides every window by its full size, as the reference */
    ok = ok && dnnl_pooling_v2_forward_desc_init(&fd, dnnl_forward_training, dnnl_pooling_avg_exclude_padding, &p->x,
                                                 &p->y, kr, kr, dil, pad, pad) == dnnl_success;
    ok = ok && dnnl_primitive_desc_create(&fpd, &fd, k->backward ? NULL : attr, oar_dnnl_engine(), NULL) == dnnl_success;
    if (ok && k->backward)
        ok = dnnl_pooling_v2_backward_desc_init(&bd, dnnl_pooling_avg_exclude_padding, &p->x, &p->y, kr, kr, dil, pad,
                                                pad) == dnnl_success &&
             dnnl_primitive_desc_create(&bpd, &bd, attr, oar_dnnl_engine(), fpd) == dnnl_success;
    const_dnnl_primitive_desc_t pd = k->backward ? bpd : fpd;
    if (ok) {
        const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        p->scratch = smd ? dnnl_memory_desc_get_size(smd) : 0;
        if (dnnl_primitive_create(&p->prim, pd) != dnnl_success) p->prim = NULL;
    }
    if (bpd) dnnl_primitive_desc_destroy(bpd);
    if (fpd) dnnl_primitive_desc_destroy(fpd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return p;
}

/* The cached primitive for k with a reference the caller drops (pprim_put); NULL on OOM. */
static pprim *pprim_get(const pkey *k) {
    pthread_mutex_lock(&g_cache.mu);
    for (int i = 0; i < g_cache.n; i++) {
        pprim *p = g_cache.e[i];
        if (!memcmp(&p->key, k, sizeof *k)) {
            p->used = ++g_cache.clock;
            __atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
            pthread_mutex_unlock(&g_cache.mu);
            return p;
        }
    }
    pthread_mutex_unlock(&g_cache.mu);
    pprim *p = pprim_build(k); /* outside the lock: creation is slow; a racing twin is harmless */
    if (!p) return NULL;
    p->refs = 2; /* the cache's and the caller's */
    pthread_mutex_lock(&g_cache.mu);
    pprim *old = NULL;
    if (g_cache.n < CACHE_CAP) {
        g_cache.e[g_cache.n++] = p;
    } else {
        int lru = 0;
        for (int i = 1; i < g_cache.n; i++)
            if (g_cache.e[i]->used < g_cache.e[lru]->used) lru = i;
        old = g_cache.e[lru];
        g_cache.e[lru] = p;
    }
    p->used = ++g_cache.clock;
    pthread_mutex_unlock(&g_cache.mu);
    pprim_put(old);
    return p;
}

/* A call split over the batch (oar_dnnl_split_batch),
 * each run by the primitive for its size (p[1] NULL when all parts are equal). */
typedef struct pplan {
    pprim *p[2];
    oar_dnnl_split split;
} pplan;

static void plan_release(pplan *pl) {
    for (int i = 0; i < 2; i++) pprim_put(pl->p[i]);
}

/* x [n, c, h, w] or [c, h, w] (one image) and its pooled y, both plain f32; false (nothing
 * held) where oneDNN cannot take the call: uneven bins, empty tensors, or oneDNN declines. */
static bool plan_make(pplan *pl, bool backward, const oar_tensor *x, const oar_tensor *y) {
    memset(pl, 0, sizeof *pl);
    if (!oar_dnnl_engine()) return false;
    if (x->dtype != OAR_F32 || y->dtype != OAR_F32 || !x->contiguous || !y->contiguous) return false;
    if (x->ndim != y->ndim || x->ndim < 3 || x->ndim > 4 || x->numel == 0 || y->numel == 0) return false;
    int nd = x->ndim;
    pkey k = {.backward = backward, .n = nd == 4 ? x->shape[0] : 1, .c = x->shape[nd - 3], .h = x->shape[nd - 2],
              .w = x->shape[nd - 1], .oh = y->shape[nd - 2], .ow = y->shape[nd - 1]};
    if (k.h % k.oh || k.w % k.ow) return false; /* bins of different sizes: no single window */
    pl->split = oar_dnnl_split_batch(k.n, MAX_PARTS);
    oar_dnnl_one_omp_thread(); /* oneDNN sizes its work split at creation */
    for (int i = 0; i < (pl->split.r ? 2 : 1); i++) {
        k.n = pl->split.q + (pl->split.r ? 1 - i : 0);
        pprim *p = pprim_get(&k);
        if (p && !p->prim) pprim_put(p), p = NULL;
        if (!p) {
            plan_release(pl);
            return false;
        }
        pl->p[i] = p;
    }
    return true;
}

/* Runs p on one part: x and y at the part's first image. */
static oar_status execute(const char *op, const pprim *p, void *x, void *y) {
    bool bwd = p->key.backward;
    dnnl_memory_t mx = NULL, my = NULL, ms = NULL;
    dnnl_stream_t strm = NULL;
    void *scratch = p->scratch ? oar_alloc(p->scratch) : NULL;
    if (p->scratch && !scratch) return oar_error(OAR_ERR_OOM, "%s: out of memory for oneDNN's scratchpad", op);
    dnnl_memory_desc_t smd;
    dnnl_dims_t sd = {(int64_t)p->scratch};
    dnnl_status_t st = dnnl_stream_create(&strm, oar_dnnl_engine(), dnnl_stream_default_flags);
    if (st == dnnl_success) st = dnnl_memory_create(&mx, &p->x, oar_dnnl_engine(), x);
    if (st == dnnl_success) st = dnnl_memory_create(&my, &p->y, oar_dnnl_engine(), y);
    if (st == dnnl_success && p->scratch) st = dnnl_memory_desc_init_by_tag(&smd, 1, sd, dnnl_u8, dnnl_x);
    if (st == dnnl_success && p->scratch) st = dnnl_memory_create(&ms, &smd, oar_dnnl_engine(), scratch);
    if (st == dnnl_success) {
        dnnl_exec_arg_t a[3] = {{bwd ? DNNL_ARG_DIFF_SRC : DNNL_ARG_SRC, mx},
                                {bwd ? DNNL_ARG_DIFF_DST : DNNL_ARG_DST, my},
                                {DNNL_ARG_SCRATCHPAD, ms}};
        st = dnnl_primitive_execute(p->prim, strm, ms ? 3 : 2, a);
    }
    if (st == dnnl_success) st = dnnl_stream_wait(strm);
    if (mx) dnnl_memory_destroy(mx);
    if (my) dnnl_memory_destroy(my);
    if (ms) dnnl_memory_destroy(ms);
    if (strm) dnnl_stream_destroy(strm);
    oar_free(scratch, p->scratch);
    return st == dnnl_success ? OAR_OK : oar_dnnl_fail(op, st);
}

typedef struct pjob {
    const char *op;
    const pplan *pl;
    char *x, *y;
    int64_t xb, yb; /* bytes of one image of x / y */
    oar_status st[MAX_PARTS];
} pjob;

static void run_parts(void *ctx, int64_t begin, int64_t end) {
    pjob *j = ctx;
    const pplan *pl = j->pl;
    oar_dnnl_one_omp_thread();
    for (int64_t i = begin; i < end; i++) {
        int64_t n0 = oar_dnnl_part_start(&pl->split, i);
        j->st[i] = execute(j->op, pl->p[pl->split.r && i >= pl->split.r], j->x + n0 * j->xb, j->y + n0 * j->yb);
    }
}

/* x: the pooled op's input (forward: read; backward: the gradient written); y: its output */
static oar_status run_call(const char *op, bool backward, oar_tensor *x, oar_tensor *y) {
    pplan pl;
    if (!plan_make(&pl, backward, x, y)) return oar_error(OAR_ERR_UNSUPPORTED, "%s: oneDNN declined these inputs", op);
    int64_t n = x->ndim == 4 ? x->shape[0] : 1;
    pjob j = {.op = op, .pl = &pl, .x = oar_tensor_ptr(x), .y = oar_tensor_ptr(y),
              .xb = (int64_t)sizeof(float) * (x->numel / n), .yb = (int64_t)sizeof(float) * (y->numel / n)};
    oar_parallel_for(pl.split.parts, 1, run_parts, &j);
    oar_status st = OAR_OK;
    for (int64_t i = 0; i < pl.split.parts && st == OAR_OK; i++) st = j.st[i];
    plan_release(&pl);
    return st;
}

static oar_status adaptive_fwd_dnnl(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                    int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out; (void)a;
    return run_call("adaptive_avg_pool2d", false, in[0], out[0]);
}

static oar_status adaptive_bwd_dnnl(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                    int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out; (void)a;
    return run_call("adaptive_avg_pool2d_backward", true, out[0], in[0]);
}

static bool supports_kind(bool backward, const oar_tensor *x, const oar_tensor *y) {
    pplan pl;
    /* the CPU switch's cap is asked when a kernel is chosen, not when it runs: a program
     * compiled earlier keeps its kernels (docs/cpu-isa.md) and must not fail */
    if (!oar_dnnl_usable()) return false;
    if (!plan_make(&pl, backward, x, y)) return false;
    plan_release(&pl);
    return true;
}

static bool adaptive_fwd_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                                  const oar_attr *a) {
    (void)n_in; (void)n_out; (void)a;
    return supports_kind(false, in[0], out[0]);
}

static bool adaptive_bwd_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                                  const oar_attr *a) {
    (void)n_in; (void)n_out; (void)a;
    return supports_kind(true, out[0], in[0]);
}

void oar_cpu_register_pool_dnnl(void) {
    oar_kernel_entry e = {.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32), .impl = "onednn", .priority = 20,
                          .fn = adaptive_fwd_dnnl, .supports = adaptive_fwd_supports};
    oar_register_kernel(OAR_OP_adaptive_avg_pool2d, e);
    e.fn = adaptive_bwd_dnnl, e.supports = adaptive_bwd_supports;
    oar_register_kernel(OAR_OP_adaptive_avg_pool2d_backward, e);
}

#else

void oar_cpu_register_pool_dnnl(void) {}

#endif
