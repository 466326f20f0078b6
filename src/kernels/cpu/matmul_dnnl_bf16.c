/* matmul and linear in bf16 through oneDNN's matmul primitive: bf16 operands, f32
 * accumulation (vdpbf16ps, or AMX tiles where the CPU has them), the result rounded to bf16
 * once. Only where bf16 is native (bf16_native.h): elsewhere these decline and the f32 GEMMs
 * run on converted copies (cpu_gemm.c). Every product is seen as a batch of [m, k]·[k, n]
 * with one batch stride per operand (0-batch operands broadcast); the rows (or, for long
 * batches, the batch) are split over oar's pool with oneDNN on one thread per part, as the
 * oneDNN convolutions do (dnnl_engine.h says why). Primitives are cached per shape. */
#include "kernels/cpu/bf16_native.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dnnl_engine.h"
#include "kernels/cpu/prim_cache.h"

#ifdef OAR_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* A product of nb batches: C[b] = A[b]·B[b] (+ bias), C's rows contiguous. Strides in
 * elements; a batch stride of 0 broadcasts that operand. All int64 so memcmp sees no padding. */
typedef struct mkey {
    int64_t nb, m, n, k;
    int64_t as[3], bs[3]; /* batch, row, column strides of A [m, k] and B [k, n] */
    int64_t cs;           /* C's batch stride (a part of the rows keeps the whole's) */
    int64_t bias;
} mkey;

typedef struct mprim {
    oar_prim_entry hdr; /* first: the cache's count and clock (prim_cache.h) */
    mkey key;
    dnnl_primitive_t prim; /* NULL: oneDNN declined (or has only reference code for) this key */
    dnnl_memory_desc_t md[4]; /* src, weights, dst, bias */
    size_t scratch;
} mprim;

static void mprim_free(mprim *p) {
    if (!p) return;
    if (p->prim) dnnl_primitive_destroy(p->prim);
    free(p);
}

static mprim *mprim_build(const mkey *k) {
    mprim *p = calloc(1, sizeof *p); /* metadata, not tensor storage */
    if (!p) return NULL;
    p->key = *k;
    bool bb = k->bs[0] != 0, ab = k->as[0] != 0;
    dnnl_dims_t ad = {ab ? k->nb : 1, k->m, k->k}, bd = {bb ? k->nb : 1, k->k, k->n}, cd = {k->nb, k->m, k->n};
    dnnl_dims_t ast = {ab ? k->as[0] : k->m * k->k, k->as[1], k->as[2]};
    dnnl_dims_t bst = {bb ? k->bs[0] : k->k * k->n, k->bs[1], k->bs[2]};
    dnnl_dims_t biasd = {1, 1, k->n}, cst = {k->cs, k->n, 1};
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_matmul_desc_t md;
    bool ok = dnnl_memory_desc_init_by_strides(&p->md[0], 3, ad, dnnl_bf16, ast) == dnnl_success &&
              dnnl_memory_desc_init_by_strides(&p->md[1], 3, bd, dnnl_bf16, bst) == dnnl_success &&
              dnnl_memory_desc_init_by_strides(&p->md[2], 3, cd, dnnl_bf16, cst) == dnnl_success &&
              (!k->bias || dnnl_memory_desc_init_by_tag(&p->md[3], 3, biasd, dnnl_bf16, dnnl_abc) == dnnl_success);
    ok = ok && dnnl_primitive_attr_create(&attr) == dnnl_success &&
         dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success;
    ok = ok && dnnl_matmul_desc_init(&md, &p->md[0], &p->md[1], k->bias ? &p->md[3] : NULL, &p->md[2]) == dnnl_success;
    ok = ok && dnnl_primitive_desc_create(&pd, &md, attr, oar_dnnl_engine(), NULL) == dnnl_success;
    if (ok) { /* native code only: oneDNN's reference loops are the slow path this avoids */
        const char *impl = NULL;
        ok = dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
             !strstr(impl, "ref");
    }
    if (ok) {
        const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        p->scratch = smd ? dnnl_memory_desc_get_size(smd) : 0;
        if (dnnl_primitive_create(&p->prim, pd) != dnnl_success) p->prim = NULL;
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return p;
}

static void *build_entry(const void *key) { return mprim_build(key); }
static void free_entry(void *p) { mprim_free(p); }

static mprim *g_slots[64];
static oar_prim_cache g_cache = OAR_PRIM_CACHE_INIT(g_slots, mprim, key, build_entry, free_entry);

/* The cached primitive for k with a reference for the caller (mprim_put); NULL on OOM. */
static mprim *mprim_get(const mkey *k) { return oar_prim_cache_get(&g_cache, k); }
static void mprim_put(mprim *p) { oar_prim_cache_put(&g_cache, p); }

/* ---- a call: the product, split into parts of q or q + 1 batches (by_batch) or rows */
#define MAX_PARTS 64
#define SPLIT_MIN_MACS ((double)(1 << 18)) /* smaller products run as one part */

typedef struct mcall {
    mkey key; /* the whole product */
    bool by_batch;
    oar_dnnl_split split;
    mprim *p[2]; /* the part primitives (q + 1 and q batches / rows); p[1] NULL when all equal */
    const uint16_t *A, *B, *bias;
    uint16_t *C;
    oar_status st[MAX_PARTS];
} mcall;

static void mcall_release(mcall *c) {
    for (int i = 0; i < 2; i++)
        if (c->p[i]) mprim_put(c->p[i]);
}

/* Builds (or finds) the part primitives; false, nothing held, when oneDNN declines. */
static bool mcall_plan(mcall *c) {
    const mkey *k = &c->key;
    c->p[0] = c->p[1] = NULL;
    if (!oar_cpu_bf16_native() || !oar_dnnl_engine()) return false;
    double macs = (double)k->nb * (double)k->m * (double)k->n * (double)k->k;
    c->by_batch = k->nb >= oar_get_num_threads();
    c->split = oar_dnnl_split_batch(c->by_batch ? k->nb : k->m, macs < SPLIT_MIN_MACS ? 1 : MAX_PARTS);
    oar_dnnl_one_omp_thread(); /* oneDNN sizes its work split at creation */
    for (int i = 0; i < (c->split.r ? 2 : 1); i++) {
        mkey pk = *k;
        int64_t len = c->split.q + (c->split.r ? 1 - i : 0);
        if (c->by_batch) pk.nb = len;
        else pk.m = len;
        mprim *p = mprim_get(&pk);
        if (p && !p->prim) mprim_put(p), p = NULL;
        if (!p) {
            mcall_release(c);
            return false;
        }
        c->p[i] = p;
    }
    return true;
}

static oar_status exec_part(mprim *p, const void *A, const void *B, const void *bias, void *C) {
    dnnl_memory_t mem[5] = {0};
    dnnl_stream_t strm = NULL;
    void *scratch = p->scratch ? oar_alloc(p->scratch) : NULL;
    if (p->scratch && !scratch) return oar_error(OAR_ERR_OOM, "matmul: out of memory for oneDNN's scratchpad");
    dnnl_memory_desc_t smd;
    dnnl_dims_t sd = {(int64_t)p->scratch};
    void *bufs[4] = {(void *)A, (void *)B, C, (void *)bias};
    dnnl_status_t st = dnnl_stream_create(&strm, oar_dnnl_engine(), dnnl_stream_default_flags);
    for (int i = 0; i < 4 && st == dnnl_success; i++)
        if (bufs[i]) st = dnnl_memory_create(&mem[i], &p->md[i], oar_dnnl_engine(), bufs[i]);
    if (scratch && st == dnnl_success) st = dnnl_memory_desc_init_by_tag(&smd, 1, sd, dnnl_u8, dnnl_x);
    if (scratch && st == dnnl_success) st = dnnl_memory_create(&mem[4], &smd, oar_dnnl_engine(), scratch);
    if (st == dnnl_success) {
        dnnl_exec_arg_t a[5] = {{DNNL_ARG_SRC, mem[0]}, {DNNL_ARG_WEIGHTS, mem[1]}, {DNNL_ARG_DST, mem[2]}};
        int n = 3;
        if (mem[3]) a[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, mem[3]};
        if (mem[4]) a[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, mem[4]};
        st = dnnl_primitive_execute(p->prim, strm, n, a);
    }
    if (st == dnnl_success) st = dnnl_stream_wait(strm);
    for (int i = 0; i < 5; i++)
        if (mem[i]) dnnl_memory_destroy(mem[i]);
    if (strm) dnnl_stream_destroy(strm);
    oar_free(scratch, p->scratch);
    return st == dnnl_success ? OAR_OK : oar_dnnl_fail("matmul (bf16)", st);
}

static void run_parts(void *ctx, int64_t lo, int64_t hi) {
    mcall *c = ctx;
    const mkey *k = &c->key;
    oar_dnnl_one_omp_thread();
    for (int64_t i = lo; i < hi; i++) {
        int64_t s = oar_dnnl_part_start(&c->split, i);
        mprim *p = c->p[c->split.r && i >= c->split.r];
        /* a part starts s batches (or rows) in: offsets in A, B (batches only) and C */
        int64_t ao = c->by_batch ? s * k->as[0] : s * k->as[1];
        int64_t bo = c->by_batch ? s * k->bs[0] : 0;
        int64_t co = c->by_batch ? s * k->cs : s * k->n;
        c->st[i] = exec_part(p, c->A + ao, c->B + bo, c->bias, c->C + co);
    }
}

static oar_status mcall_run(mcall *c) {
    oar_parallel_for(c->split.parts, 1, run_parts, c);
    oar_status st = OAR_OK;
    for (int64_t i = 0; i < c->split.parts && st == OAR_OK; i++) st = c->st[i];
    mcall_release(c);
    return st;
}

/* ---- matmul: operands of 2 or more dims whose batch dims each collapse to one stride */

/* The batch stride of t over the output's batch dims (ob[0..nob)), or false where its batch
 * dims do not collapse to one: 0 when t broadcasts over all of them. */
static bool batch_stride(const oar_tensor *t, const int64_t *ob, int nob, int64_t *stride) {
    int tb = t->ndim - 2;
    int64_t nt = 1;
    for (int d = 0; d < tb; d++) nt *= t->shape[d];
    if (nt == 1) {
        *stride = 0;
        return true;
    }
    if (tb != nob) return false;
    for (int d = 0; d < tb; d++)
        if (t->shape[d] != ob[d]) return false;
    for (int d = 0; d + 1 < tb; d++) /* one stride runs through every batch dim */
        if (t->shape[d] != 1 && t->strides[d] != t->strides[d + 1] * t->shape[d + 1]) return false;
    int64_t s = 0;
    for (int d = tb - 1; d >= 0 && !s; d--)
        if (t->shape[d] != 1) s = t->strides[d];
    *stride = s;
    return true;
}

static bool matmul_key(oar_tensor *const *in, oar_tensor *const *out, mkey *k) {
    const oar_tensor *a = in[0], *b = in[1], *y = out[0];
    memset(k, 0, sizeof *k);
    if (a->dtype != OAR_BF16 || b->dtype != OAR_BF16 || y->dtype != OAR_BF16 || a->ndim < 2 || b->ndim < 2 ||
        !y->contiguous || y->numel == 0)
        return false;
    int nob = y->ndim - 2;
    k->m = a->shape[a->ndim - 2], k->k = a->shape[a->ndim - 1], k->n = b->shape[b->ndim - 1];
    if (k->k == 0) return false;
    k->nb = 1;
    for (int d = 0; d < nob; d++) k->nb *= y->shape[d];
    if (!batch_stride(a, y->shape, nob, &k->as[0]) || !batch_stride(b, y->shape, nob, &k->bs[0])) return false;
    k->as[1] = a->strides[a->ndim - 2], k->as[2] = a->strides[a->ndim - 1], k->cs = k->m * k->n;
    k->bs[1] = b->strides[b->ndim - 2], k->bs[2] = b->strides[b->ndim - 1];
    return true;
}

static bool matmul_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out; (void)a;
    mcall c;
    if (!matmul_key(in, out, &c.key) || !mcall_plan(&c)) return false;
    mcall_release(&c);
    return true;
}

static oar_status matmul_bf16(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out; (void)a;
    mcall c = {0};
    if (!matmul_key(in, out, &c.key) || !mcall_plan(&c))
        return oar_error(OAR_ERR_UNSUPPORTED, "matmul: oneDNN's bf16 matmul declined these inputs");
    c.A = (void *)oar_tensor_ptr(in[0]), c.B = (void *)oar_tensor_ptr(in[1]), c.C = (void *)oar_tensor_ptr(out[0]);
    return mcall_run(&c);
}

/* ---- linear: y[rows, fo] = x[rows, fi]·Wᵀ + bias, x contiguous (the op is not strided) */
static bool linear_key(oar_tensor *const *in, int n_in, oar_tensor *const *out, mkey *k) {
    const oar_tensor *x = in[0], *w = in[1], *bias = n_in > 2 ? in[2] : NULL, *y = out[0];
    memset(k, 0, sizeof *k);
    if (x->dtype != OAR_BF16 || w->dtype != OAR_BF16 || y->dtype != OAR_BF16 || (bias && bias->dtype != OAR_BF16) ||
        !x->contiguous || !w->contiguous || (bias && !bias->contiguous) || y->numel == 0 || w->shape[1] == 0)
        return false;
    k->nb = 1, k->n = w->shape[0], k->k = w->shape[1], k->m = y->numel / k->n, k->bias = bias != NULL;
    k->cs = k->m * k->n;
    k->as[1] = k->k, k->as[2] = 1;
    k->bs[1] = 1, k->bs[2] = k->k; /* Wᵀ: W [fo, fi] read column-major */
    return true;
}

static bool linear_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_out; (void)a;
    mcall c;
    if (!linear_key(in, n_in, out, &c.key) || !mcall_plan(&c)) return false;
    mcall_release(&c);
    return true;
}

static oar_status linear_bf16(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *a) {
    (void)ctx; (void)n_out; (void)a;
    mcall c = {0};
    if (!linear_key(in, n_in, out, &c.key) || !mcall_plan(&c))
        return oar_error(OAR_ERR_UNSUPPORTED, "linear: oneDNN's bf16 matmul declined these inputs");
    c.A = (void *)oar_tensor_ptr(in[0]), c.B = (void *)oar_tensor_ptr(in[1]), c.C = (void *)oar_tensor_ptr(out[0]);
    c.bias = n_in > 2 && in[2] ? (void *)oar_tensor_ptr(in[2]) : NULL;
    return mcall_run(&c);
}

void oar_cpu_register_matmul_bf16(void) {
    /* above the f32-GEMM-on-copies kernels (priority 20), which take over where these decline */
    oar_register_kernel(OAR_OP_matmul, (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_BF16),
                                                          .impl = OAR_IMPL_BF16_NATIVE, .priority = 25,
                                                          .fn = matmul_bf16, .supports = matmul_supports});
    oar_register_kernel(OAR_OP_linear, (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_BF16),
                                                          .impl = OAR_IMPL_BF16_NATIVE, .priority = 25,
                                                          .fn = linear_bf16, .supports = linear_supports});
}

#else

void oar_cpu_register_matmul_bf16(void) {}

#endif
