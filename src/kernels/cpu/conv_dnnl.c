/* oneDNN kernels (f32) for conv2d / conv3d, their two backward ops and conv_transpose3d. oar's
 * buffers are plain NCHW / OIHW (NCDHW / OIDHW); the primitive may choose blocked layouts (format "any"), and then each call reorders
 * into and out of them: on ResNet-20 and LeNet steps that is 2x faster than plain layouts,
 * whose oneDNN kernel is gemm-based like our im2col one. Outputs in NHWC-like layouts come
 * back through our transpose (conv_dnnl_layout.c), faster than oneDNN's reorder in that
 * direction; see docs/kernels-conv-dnnl.md. A primitive is specific to shapes
 * and attributes, and creating one costs far more than a small conv, so they
 * live in a small LRU cache.
 * supports() builds (or finds) the primitive and declines whatever oneDNN rejects, so
 * dispatch falls back to the im2col kernels. */
#include "kernels/cpu/conv_dnnl.h"
#include "kernels/cpu/bf16_native.h"
#include "kernels/cpu/conv_dnnl_layout.h"
#include "kernels/cpu/conv_dnnl_memo.h"
#include "kernels/cpu/conv_rows.h"
#include "kernels/cpu/dnnl_engine.h"
#include "kernels/cpu/prim_cache.h"

#ifdef OAR_HAVE_ONEDNN
#include "kernels/cpu/cpu_kernels.h"
#include "ops/kernel_calls.h"

#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef OAR_HAVE_OPENMP
#include <omp.h>
#endif

typedef enum { DK_FORWARD, DK_GRAD_INPUT, DK_GRAD_WEIGHT } dk_kind;

/* Everything a primitive depends on; all int64 so memcmp sees no padding. */
typedef struct dkey {
    int64_t kind, bias;
    int64_t bf16;      /* x, weight, y (and bias) in bf16, computed natively; grad_weight's
                          primitive writes f32 then (the parts are summed in f32, rounded once) */
    int64_t io16;      /* x, weight, y (and bias) stored in bf16, the primitive f32 (a CPU without
                          native bf16): the activations are widened or rounded inside the layout
                          conversions the f32 call makes anyway, anything else through an f32
                          copy; the bits of the via-f32 kernel (widen, this f32 call, round) */
    int64_t sum, relu; /* forward post-ops (conv2d_act): add the residual, then relu (1) or
                          relu6 (2: clip_v2 to [0, 6], NaN staying NaN as in clip) */
    int64_t nhwc;      /* x and y are NHWC in memory (conv2d_act layout=nhwc) */
    int64_t flip;      /* a forward run by the backward-data primitive of the transposed problem
                          (flip_rule: where oneDNN's is faster than its forward kernel) */
    int64_t nsp;       /* spatial dims: 2, or 3 (conv3d: no flip, rows, NHWC or post-ops) */
    int64_t x[5], w[5], y[5]; /* x [n, ci, (d,) h, w], weight [co, ci / groups, (kd,) kh, kw], y [n, co, (od,) oh, ow] */
    int64_t s[3], pl[3], pr[3], d[3], groups;
} dkey;

/* One of the three operands (x, weight, y) as the caller holds it (plain) and as the
 * primitive wants it; where they differ, a reorder converts through a scratch buffer. */
typedef struct doperand {
    dnnl_memory_desc_t plain, want;
    dnnl_primitive_t reorder; /* NULL: the primitive reads / writes the plain buffer */
    size_t bytes;             /* of the converted copy */
    int arg;                  /* DNNL_ARG_* */
    bool chan;                /* converted by our transposes (conv_dnnl_layout.h) rather than by
                                 reorder: an output into plain, a bf16 input out of it */
    oar_chan_layout lay;
} doperand;

#define PACK_SLOTS 16 /* weight packings kept per primitive (prim_cache.h) */

/* A cached primitive (prim NULL: oneDNN declined this key, remembered so as not to retry). */
typedef struct dprim {
    oar_prim_entry hdr; /* first: the cache's count and clock (prim_cache.h) */
    dkey key;
    dnnl_primitive_t prim;
    dnnl_primitive_desc_t hint; /* the forward pd a backward primitive was built from */
    doperand op[3];             /* x, weight, y */
    dnnl_memory_desc_t md_b;
    dnnl_primitive_t res_reorder; /* sum post-op into a blocked output: the residual into its layout */
    oar_packed *packed[PACK_SLOTS]; /* forward: weights reordered, reused while unchanged */
    size_t scratch; /* bytes of user scratchpad */
    char impl[64];  /* oneDNN's implementation name (a row part must run the whole image's) */
} dprim;

/* Which operand each kind writes, and each operand's argument. */
static const int k_out[3] = {2, 0, 1};
static const int k_args[3][3] = {
    {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},
    {DNNL_ARG_DIFF_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_DST},
    {DNNL_ARG_SRC, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_DST},
};
/* A flipped forward (dkey.flip): x is the backward problem's diff_dst, y its diff_src. */
static const int k_flip_args[3] = {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC};

/* The forward conv y = x * w (stride 1, dilation 1, groups 1, pads pl / pr each at most k - 1)
 * equals the backward-data conv that takes y's shape as its input and x as its output
 * gradient, with weights t[ci][co][kh - 1 - i][kw - 1 - j] = w[co][ci][i][j] and padding
 * k - 1 - pl / k - 1 - pr: both sum x[.., oy + i - pl, ox + j - pl] w[.., i, j] over the same
 * taps (in oneDNN's order for that kernel, so other bits than its forward kernel's). Rule
 * measured with oneDNN 2.6 at its AVX2 level (jit:avx2 both ways, 1 thread, batch 32, CPU time;
 * docs/kernels-conv-dnnl.md): the backward-data kernel is 1.27-1.63x faster where the output has
 * at most 16 channels and at most 32 columns and the input at least 8 channels (ResNet-20's
 * 16-channel convs 1.63 -> 1.25 ms); from 3 input channels (a stem) 0.47x, on 48 and 56 columns
 * 0.86-0.96x, 1 x 1 kernels (jit_1x1 both ways) 1.00x. With more output channels only the
 * 3 x 3 convs of k_flip_wide (as many channels in as out), 1.01-1.19x; 24 and 40 channels 0.81-0.98x, 32 at 32 columns 0.99x,
 * 112 and 128 at 16 columns 0.88-1.0x. AVX-512 kernels unmeasured. */
typedef struct flip_wide { int64_t c, max_cols; } flip_wide;
/* c -> c channels, 3 x 3, pad 1, stride 1, batch 32; forward / backward-data at the widths
 * measured: 32 (16 and 8 columns: 1.03, 1.06), 48 (16, 8: 1.04, 1.07), 64 (16, 8, 4: 1.03,
 * 1.02-1.03, 1.13), 80 (8: 1.03), 96 (16, 8: 1.01, 1.07), 128 (8, 4: 1.06, 1.19). */
static const flip_wide k_flip_wide[] = {{32, 16}, {48, 16}, {64, 16}, {80, 8}, {96, 16}, {128, 8}};

static bool flip_rule(const dkey *k) {
    /* bf16 storage (io16) too: it must give the bits of the f32 call on widened inputs */
    if (k->kind != DK_FORWARD || k->nsp != 2 || k->bias || k->sum || k->relu || k->nhwc || k->bf16 || k->groups != 1)
        return false;
    for (int i = 0; i < 2; i++)
        if (k->s[i] != 1 || k->d[i] != 1 || k->pl[i] > k->w[2 + i] - 1 || k->pr[i] > k->w[2 + i] - 1) return false;
    if (k->x[1] < 8 || k->w[2] * k->w[3] <= 1 || oar_dnnl_isa() != OAR_CPU_ISA_AVX2) return false;
    if (k->w[0] <= 16) return k->y[3] <= 32;
    for (size_t i = 0; i < sizeof k_flip_wide / sizeof k_flip_wide[0]; i++)
        if (k->w[0] == k_flip_wide[i].c && k->x[1] == k->w[0] && k->w[2] == 3 && k->w[3] == 3 &&
            k->y[3] <= k_flip_wide[i].max_cols)
            return true;
    return false;
}

/* w [co, ci, kh, kw] into the flipped problem's t [ci, co, kh, kw], reversed in both spatial axes:
 * each kernel of t is one kernel of w read backwards. */
static void flip_weights(const float *restrict w, float *restrict t, const int64_t *ws) {
    const int64_t co = ws[0], ci = ws[1], taps = ws[2] * ws[3];
    for (int64_t i = 0; i < ci; i++)
        for (int64_t o = 0; o < co; o++) {
            const float *src = w + (o * ci + i) * taps + taps - 1;
            float *dst = t + (i * co + o) * taps;
            for (int64_t e = 0; e < taps; e++) dst[e] = src[-e];
        }
}


/* Threads: oneDNN runs one OpenMP thread per call (oar_dnnl_one_omp_thread, which says why)
 * and oar's pool splits the batch; the hook covers the configuring thread. */
#ifdef OAR_HAVE_OPENMP
static void threads_hook(int nthreads) {
    (void)nthreads;
    omp_set_num_threads(1);
}
#endif

static void dprim_free(dprim *p) {
    if (!p) return;
    for (int i = 0; i < PACK_SLOTS; i++) oar_packed_put(p->packed[i]);
    if (p->prim) dnnl_primitive_destroy(p->prim);
    if (p->hint) dnnl_primitive_desc_destroy(p->hint);
    for (int i = 0; i < 3; i++)
        if (p->op[i].reorder) dnnl_primitive_destroy(p->op[i].reorder);
    if (p->res_reorder) dnnl_primitive_destroy(p->res_reorder);
    free(p);
}

/* Takes the layout pd chose for each operand and builds the reorders it needs. */
static bool plan_operands(dprim *p, const_dnnl_primitive_desc_t pd) {
    for (int i = 0; i < 3; i++) {
        doperand *o = &p->op[i];
        o->arg = p->key.flip ? k_flip_args[i] : k_args[p->key.kind][i];
        const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, o->arg);
        if (!md) return false;
        o->want = *md;
        if (dnnl_memory_desc_equal(&o->want, &o->plain)) continue;
        o->bytes = dnnl_memory_desc_get_size(&o->want);
        bool out = i == k_out[p->key.kind];
        const dnnl_memory_desc_t *from = out ? &o->want : &o->plain, *to = out ? &o->plain : &o->want;
        dnnl_primitive_desc_t rpd;
        if (dnnl_reorder_primitive_desc_create(&rpd, from, oar_dnnl_engine(), to, oar_dnnl_engine(), NULL) != dnnl_success) return false;
        dnnl_status_t st = dnnl_primitive_create(&o->reorder, rpd);
        dnnl_primitive_desc_destroy(rpd);
        if (st != dnnl_success) {
            o->reorder = NULL;
            return false;
        }
        /* ours only where it measured faster than oneDNN's reorder: outputs (x of grad_input,
         * y of conv2d) into plain from layouts whose pixels hold all their channels together
         * (NHWC; nChw16c of 16 channels). oneDNN converts nChw16c of more channels ~2x faster,
         * and into those layouts at least as fast. Our transpose writes NCHW, so only where
         * the caller's layout is NCHW: conv2d_act's NHWC output (key.nhwc) goes through the
         * reorder, even when the primitive's layout has the same bytes (nChw8c of 8 channels
         * on AVX2) and merely another descriptor. */
        o->chan = i != 1 && out && !p->key.nhwc && oar_chan_layout_of(&o->want, &o->lay) &&
                  o->lay.pixel_stride == o->lay.c;
        /* bf16 activations: both ways, the NCHW <-> NHWC reorders of a compiled AMP ResNet-20
         * step took as long as a third of its convolutions in oneDNN's reorder */
        if (!out && p->key.bf16 && i != 1 && !p->key.nhwc && oar_chan_layout_of(&o->want, &o->lay)) o->chan = true;
        /* bf16 storage: our conversions widen or round in the same pass, both ways */
        if (p->key.io16 && i != 1 && oar_chan_layout_of(&o->want, &o->lay) && o->lay.esize == 4)
            o->chan = o->lay.plain_bf16 = true;
    }
    return true;
}

/* Whether pd runs oneDNN's own code for its shapes: not its reference loops, nor (no_gemm) the
 * gemm-based code. */
static bool runs_own_code(const_dnnl_primitive_desc_t pd, bool no_gemm) {
    const char *impl = NULL;
    return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
           !strstr(impl, "ref") && (!no_gemm || !strstr(impl, "gemm"));
}

/* The flipped forward's primitive descriptors (flip_rule): the backward-data conv from y's
 * shape to x's, and the forward one it is built from; false where oneDNN declines. */
static bool flip_pds(const dkey *k, const int64_t *x, const int64_t *y, const int64_t *wt,
                     const_dnnl_primitive_attr_t attr, dnnl_primitive_desc_t *fpd, dnnl_primitive_desc_t *pd) {
    dnnl_dims_t s = {1, 1}, d = {0, 0};
    dnnl_dims_t pl = {k->w[2] - 1 - k->pl[0], k->w[3] - 1 - k->pl[1]};
    dnnl_dims_t pr = {k->w[2] - 1 - k->pr[0], k->w[3] - 1 - k->pr[1]};
    dnnl_memory_desc_t ax, ay, aw;
    dnnl_convolution_desc_t fd, bd;
    *fpd = *pd = NULL;
    if (dnnl_memory_desc_init_by_tag(&ax, 4, x, dnnl_f32, dnnl_format_tag_any) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&ay, 4, y, dnnl_f32, dnnl_format_tag_any) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&aw, 4, wt, dnnl_f32, dnnl_format_tag_any) != dnnl_success ||
        dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &ay, &aw, NULL,
                                                   &ax, s, d, pl, pr) != dnnl_success ||
        dnnl_primitive_desc_create(fpd, &fd, NULL, oar_dnnl_engine(), NULL) != dnnl_success) {
        *fpd = NULL;
        return false;
    }
    if (dnnl_dilated_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &ay, &aw, &ax, s, d, pl, pr) !=
            dnnl_success ||
        dnnl_primitive_desc_create(pd, &bd, attr, oar_dnnl_engine(), *fpd) != dnnl_success)
        *pd = NULL;
    if (*pd && runs_own_code(*pd, true)) return true;
    if (*pd) dnnl_primitive_desc_destroy(*pd); /* its gemm or reference code: the forward's is no slower */
    dnnl_primitive_desc_destroy(*fpd);
    *fpd = *pd = NULL;
    return false;
}

/* Builds the primitive for k; a dprim with prim NULL when oneDNN declines. NULL on OOM. */
static dprim *dprim_build(const dkey *k) {
    dprim *p = calloc(1, sizeof *p); /* metadata, not tensor storage */
    if (!p) return NULL;
    p->key = *k;
    int64_t g = k->groups;
    const int nd = 2 + (int)k->nsp; /* 4 or 5 */
    dnnl_dims_t x, y, w, w4, s, pl, pr, d;
    for (int i = 0; i < nd; i++) x[i] = k->x[i], y[i] = k->y[i], w4[i] = k->w[i], w[i + 1] = k->w[i];
    w[0] = g, w[1] = k->w[0] / g;
    for (int i = 0; i < k->nsp; i++)
        s[i] = k->s[i], pl[i] = k->pl[i], pr[i] = k->pr[i], d[i] = k->d[i] - 1; /* oneDNN counts dilation from 0 */
    dnnl_dims_t wt = {k->w[1], k->w[0], k->w[2], k->w[3]}; /* the flipped problem's (flip_rule; 2-d only) */
    dnnl_dims_t b = {k->w[0]};
    dnnl_memory_desc_t ax, aw, ay, awf; /* "any": the primitive picks the layouts it runs fastest on */
    /* groups > 1: the goihw (goidhw) view of the same OIHW (OIDHW) buffer */
    dnnl_format_tag_t act_tag = k->nhwc ? dnnl_nhwc : nd == 5 ? dnnl_ncdhw : dnnl_nchw; /* dims are NC.. either way */
    dnnl_format_tag_t w_tag = nd == 5 ? dnnl_oidhw : dnnl_oihw, gw_tag = nd == 5 ? dnnl_goidhw : dnnl_goihw;
    dnnl_data_type_t dt = k->bf16 ? dnnl_bf16 : dnnl_f32, wdt = k->kind == DK_GRAD_WEIGHT ? dnnl_f32 : dt;
    bool ok = dnnl_memory_desc_init_by_tag(&p->op[0].plain, nd, x, dt, act_tag) == dnnl_success &&
              dnnl_memory_desc_init_by_tag(&p->op[2].plain, nd, y, dt, act_tag) == dnnl_success &&
              (g > 1 ? dnnl_memory_desc_init_by_tag(&p->op[1].plain, nd + 1, w, wdt, gw_tag)
                     : dnnl_memory_desc_init_by_tag(&p->op[1].plain, nd, k->flip ? wt : w4, wdt, w_tag)) ==
                  dnnl_success &&
              dnnl_memory_desc_init_by_tag(&p->md_b, 1, b, dt, dnnl_x) == dnnl_success;
    dnnl_primitive_attr_t attr = NULL;
    ok = ok && dnnl_primitive_attr_create(&attr) == dnnl_success &&
         dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success;
    if (ok && (k->sum || k->relu)) { /* the epilogue of conv2d_act, applied as the output is written */
        dnnl_post_ops_t po = NULL;
        ok = dnnl_post_ops_create(&po) == dnnl_success &&
             (!k->sum || dnnl_post_ops_append_sum(po, 1.0f) == dnnl_success) &&
             (k->relu != 1 || dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f) == dnnl_success) &&
             (k->relu != 2 || dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip_v2, 0.0f, 6.0f) == dnnl_success) &&
             dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
        if (po) dnnl_post_ops_destroy(po);
    }
    bool fwd = k->kind == DK_FORWARD;
    /* NHWC activations (conv_nhwc's layout) go to oneDNN's direct NHWC kernels when it has one
     * (jit:avx2 and brgconv do): with "any" AVX2 got nChw8c, and a reorder each way around
     * every conv was 13% of ResNet-20's inference. Its gemm or reference NHWC code would be
     * slower than the reorders, so then "any" as for NCHW. */
    bool direct_nhwc = k->nhwc && fwd;
    dnnl_convolution_desc_t fd, bd;
    dnnl_primitive_desc_t fpd = NULL, pd = NULL;
    if (k->flip) {
        ok = ok && flip_pds(k, x, y, wt, attr, &fpd, &pd);
        p->hint = fpd; /* kept alive while the backward primitive lives */
    }
    for (int attempt = 0; ok && !k->flip && !fpd && attempt < 2; attempt++, direct_nhwc = false) {
        dnnl_format_tag_t act_any = direct_nhwc ? dnnl_nhwc : dnnl_format_tag_any;
        ok = dnnl_memory_desc_init_by_tag(&ax, nd, x, dt, act_any) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&ay, nd, y, dt, act_any) == dnnl_success &&
             (g > 1 ? dnnl_memory_desc_init_by_tag(&aw, nd + 1, w, wdt, dnnl_format_tag_any)
                    : dnnl_memory_desc_init_by_tag(&aw, nd, w4, wdt, dnnl_format_tag_any)) == dnnl_success &&
             (g > 1 ? dnnl_memory_desc_init_by_tag(&awf, nd + 1, w, dt, dnnl_format_tag_any) /* the forward hint's */
                    : dnnl_memory_desc_init_by_tag(&awf, nd, w4, dt, dnnl_format_tag_any)) == dnnl_success;
        ok = ok && dnnl_dilated_convolution_forward_desc_init(&fd, fwd ? dnnl_forward_inference : dnnl_forward_training,
                                                              dnnl_convolution_direct, &ax, &awf,
                                                              k->bias ? &p->md_b : NULL, &ay, s, d, pl, pr) ==
                       dnnl_success;
        if (ok && dnnl_primitive_desc_create(&fpd, &fd, fwd ? attr : NULL, oar_dnnl_engine(), NULL) != dnnl_success)
            fpd = NULL;
        if (fpd && direct_nhwc && !runs_own_code(fpd, true)) dnnl_primitive_desc_destroy(fpd), fpd = NULL;
    }
    ok = ok && fpd;
    if (k->flip) {
        /* both built above */
    } else if (ok && !fwd) {
        dnnl_status_t st =
            k->kind == DK_GRAD_INPUT
                ? dnnl_dilated_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &ax, &aw, &ay, s, d,
                                                                   pl, pr)
                : dnnl_dilated_convolution_backward_weights_desc_init(&bd, dnnl_convolution_direct, &ax, &aw, NULL,
                                                                      &ay, s, d, pl, pr);
        ok = st == dnnl_success && dnnl_primitive_desc_create(&pd, &bd, attr, oar_dnnl_engine(), fpd) == dnnl_success;
        p->hint = fpd; /* kept alive while the backward primitive lives */
    } else {
        pd = fpd;
    }
    if (ok && k->bf16) ok = runs_own_code(pd, false); /* bf16 only where it is native: never oneDNN's reference loops */
    if (ok) ok = plan_operands(p, pd);
    if (ok && k->sum && p->op[2].reorder) { /* residual (plain) into the output's layout */
        dnnl_primitive_desc_t rpd;
        ok = dnnl_reorder_primitive_desc_create(&rpd, &p->op[2].plain, oar_dnnl_engine(), &p->op[2].want, oar_dnnl_engine(), NULL) ==
             dnnl_success;
        if (ok) {
            ok = dnnl_primitive_create(&p->res_reorder, rpd) == dnnl_success;
            dnnl_primitive_desc_destroy(rpd);
            if (!ok) p->res_reorder = NULL;
        }
    }
    if (ok) {
        const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        p->scratch = smd ? dnnl_memory_desc_get_size(smd) : 0;
        const char *impl = NULL;
        if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
            snprintf(p->impl, sizeof p->impl, "%s", impl);
        if (dnnl_primitive_create(&p->prim, pd) != dnnl_success) p->prim = NULL;
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (!p->prim) {
        for (int i = 0; i < 3; i++)
            if (p->op[i].reorder) dnnl_primitive_destroy(p->op[i].reorder), p->op[i].reorder = NULL;
        if (p->res_reorder) dnnl_primitive_destroy(p->res_reorder), p->res_reorder = NULL;
        if (p->hint) dnnl_primitive_desc_destroy(p->hint), p->hint = NULL;
    }
    return p;
}

static void *build_entry(const void *key) { return dprim_build(key); }
static void free_entry(void *p) { dprim_free(p); }

/* The primitives; its lock and clock also order the packed weights below. Room for every conv
 * of an imported CNN at 2 threads (mobilenet_v2 at batch 1: about 35 shapes, each whole and as
 * row parts): a conv evicted every call was rebuilt every call. */
static dprim *g_slots[256];
static oar_prim_cache g_cache = OAR_PRIM_CACHE_INIT(g_slots, dprim, key, build_entry, free_entry);

/* The cached primitive for k with a reference the caller drops with dprim_put; NULL on OOM. */
static dprim *dprim_get(const dkey *k) { return oar_prim_cache_get(&g_cache, k); }
static void dprim_put(dprim *p) { oar_prim_cache_put(&g_cache, p); }

/* Right padding that makes oneDNN's output size formula give exactly oh (the grid of a
 * backward op may be smaller than the full output); -1 when none does. */
static int64_t pad_right(int64_t in, int64_t k, int64_t s, int64_t pl, int64_t d, int64_t out) {
    int64_t pr = (out - 1) * s + (k - 1) * d + 1 - in - pl;
    if (pr < 0) pr = 0;
    return (in + pl + pr - (k - 1) * d - 1) / s + 1 == out ? pr : -1;
}

static bool plain_of(const oar_tensor *t, int ndim, oar_dtype dt) {
    return !t || (t->dtype == dt && t->contiguous && t->ndim == ndim);
}

/* Fills the key from x / weight / y shapes (2 + nsp dims) and the attributes (stride, padding,
 * dilation, groups); false where oneDNN cannot express the call or it is empty. */
static bool key_make(dkey *k, dk_kind kind, bool bias, int nsp, const int64_t *xs, const int64_t *ws,
                     const int64_t *ys, const oar_attr *a) {
    memset(k, 0, sizeof *k);
    k->kind = kind, k->bias = bias, k->groups = a[3].i, k->nsp = nsp;
    if (a[0].n != nsp || a[1].n != nsp || a[2].n != nsp) return false;
    for (int i = 0; i < 2 + nsp; i++) {
        k->x[i] = xs[i], k->w[i] = ws[i], k->y[i] = ys[i];
        if (xs[i] < 1 || ws[i] < 1 || ys[i] < 1) return false;
    }
    for (int i = 0; i < nsp; i++) {
        k->s[i] = a[0].ints[i], k->pl[i] = a[1].ints[i], k->d[i] = a[2].ints[i];
        k->pr[i] = pad_right(xs[2 + i], ws[2 + i], k->s[i], k->pl[i], k->d[i], ys[2 + i]);
        if (k->pr[i] < 0) return false;
    }
    return true;
}

/* A call split over the batch (oar_dnnl_split_batch),
 * each with the primitive for its batch size (p[1] is NULL when all parts are equal).
 * A forward conv on NHWC activations whose batch is smaller than the thread count also cuts
 * each image's output rows into `rows` parts (conv_rows.h), one primitive per part
 * (rp[i], referenced once per part: equal parts share an entry), so a batch-1 conv runs on
 * every thread; the batch split then has one image per part. */
#define MAX_PARTS 64
#define MAX_ROWS 16

typedef struct dplan {
    dk_kind kind;
    dprim *p[2];
    oar_dnnl_split split;
    int64_t rows;
    dprim *rp[MAX_ROWS];
    oar_conv_rows cut[MAX_ROWS];
} dplan;

static void rows_release(dplan *pl) {
    for (int64_t i = 0; i < MAX_ROWS; i++)
        if (pl->rp[i]) dprim_put(pl->rp[i]), pl->rp[i] = NULL;
    pl->rows = 1;
}

static void plan_release(dplan *pl) {
    for (int i = 0; i < 2; i++)
        if (pl->p[i]) dprim_put(pl->p[i]);
    rows_release(pl);
}

/* The thread count the batch and row splits share: oar's, at most MAX_PARTS; 1 without OpenMP
 * (oneDNN's own threads could not be kept out). */
static int64_t split_threads(void) {
#ifdef OAR_HAVE_OPENMP
    int64_t nt = oar_get_num_threads();
    return nt < MAX_PARTS ? nt : MAX_PARTS;
#else
    return 1;
#endif
}

/* Each part of a row split computes its outputs with the same implementation as the whole
 * image (whole: the batch-1 primitive), each with its own primitive for its rows and padding. oneDNN's
 * per-output arithmetic (the order it sums channels and taps, bias, post-ops) does not depend on
 * how many rows a call has, so the parts give the whole's bits (test_conv_dnnl checks the
 * models' shapes); a part oneDNN would run with other code is not split at all. */
static void rows_make(dplan *pl, const dkey *whole_key, const dprim *whole) {
    int64_t n = pl->split.parts; /* images, one per batch part */
    int64_t parts = (split_threads() + n - 1) / n;
    if (parts > MAX_ROWS) parts = MAX_ROWS;
    if (parts > whole_key->y[2]) parts = whole_key->y[2];
    if (parts < 2 || !oar_conv_rows_split(whole_key->x[2], whole_key->w[2], whole_key->s[0], whole_key->pl[0],
                                          whole_key->d[0], whole_key->y[2], parts, pl->cut))
        return;
    for (int64_t i = 0; i < parts; i++) {
        dkey k = *whole_key;
        k.x[2] = pl->cut[i].in_h, k.y[2] = pl->cut[i].out_h;
        k.pl[0] = pl->cut[i].pad_t, k.pr[0] = pl->cut[i].pad_b;
        dprim *p = dprim_get(&k);
        pl->rp[i] = p;
        if (!p || !p->prim || strcmp(p->impl, whole->impl) != 0) {
            rows_release(pl);
            return;
        }
    }
    pl->rows = parts;
}

/* The primitives for a call; false (nothing held) when oneDNN declines it. fused: conv2d_act
 * (in[3] the residual or NULL, a[4] the activation). */
static bool plan_make(dplan *pl, dk_kind kind, oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a,
                      bool fused) {
    memset(pl, 0, sizeof *pl);
    pl->kind = kind, pl->rows = 1;
    if (!oar_dnnl_engine()) return false;
    const oar_tensor *x, *w, *y, *b = NULL;
    const oar_attr *conv = a + 1; /* the backward ops lead with a shape attribute */
    switch (kind) {
    case DK_FORWARD: x = in[0], w = in[1], b = in[2], y = out[0], conv = a; break;
    case DK_GRAD_INPUT: y = in[0], w = in[1], x = out[0]; break;
    default: x = in[0], y = in[1], w = out[0]; break;
    }
    oar_dtype dt = x->dtype; /* f32, or bf16: native where the CPU computes it, else stored (io16) */
    if (dt != OAR_F32 && dt != OAR_BF16) return false;
    bool io16 = dt == OAR_BF16 && !oar_cpu_bf16_native();
    const int nd = w->ndim; /* 4: conv2d's, 5: conv3d's */
    if (nd != 4 && nd != 5) return false;
    if (!plain_of(x, nd, dt) || !plain_of(w, nd, dt) || !plain_of(y, nd, dt) || !plain_of(b, 1, dt)) return false;
    dkey k;
    bool nhwc = fused && !strcmp(a[5].s, "nhwc");
    int64_t xs[5], ys[5]; /* NC.. order for oneDNN's dims */
    for (int d = 0; d < nd; d++) {
        static const int from_nhwc[4] = {0, 3, 1, 2};
        xs[d] = x->shape[nhwc ? from_nhwc[d] : d];
        ys[d] = y->shape[nhwc ? from_nhwc[d] : d];
    }
    if (fused && !nhwc && strcmp(a[5].s, "nchw") != 0) return false;
    if (!key_make(&k, kind, b != NULL, nd - 2, xs, w->shape, ys, conv)) return false;
    k.nhwc = nhwc;
    k.bf16 = dt == OAR_BF16 && !io16;
    k.io16 = io16;
    if (io16 && (nhwc || (fused && in[3]))) return false; /* conv_nhwc's layout, the residual: via-f32 */
    if (fused) {
        if (!plain_of(in[3], 4, dt)) return false;
        k.sum = in[3] != NULL;
        k.relu = !strcmp(a[4].s, "relu") ? 1 : !strcmp(a[4].s, "relu6") ? 2 : 0;
        if (!k.relu && strcmp(a[4].s, "none") != 0) return false;
    }
    pl->split = oar_dnnl_split_batch(k.x[0], MAX_PARTS);
    oar_dnnl_one_omp_thread(); /* oneDNN sizes its work split at creation */
    k.flip = flip_rule(&k);
    for (int i = 0; i < (pl->split.r ? 2 : 1); i++) {
        k.x[0] = k.y[0] = pl->split.q + (pl->split.r ? 1 - i : 0);
        dprim *p = dprim_get(&k);
        if (p && !p->prim && k.flip && !i) { /* oneDNN declined the flipped call: the forward one */
            dprim_put(p);
            k.flip = 0;
            p = dprim_get(&k);
        }
        if (p && !p->prim) dprim_put(p), p = NULL;
        if (!p) {
            plan_release(pl);
            return false;
        }
        pl->p[i] = p;
    }
    /* an NHWC image's rows are contiguous slabs of its input and output */
    if (kind == DK_FORWARD && nhwc && pl->split.q == 1 && !pl->split.r && split_threads() > pl->split.parts)
        rows_make(pl, &k, pl->p[0]);
    return true;
}

static oar_status run_prim(const char *op, dnnl_primitive_t prim, dnnl_stream_t s, int n, dnnl_exec_arg_t *args) {
    dnnl_status_t st = dnnl_primitive_execute(prim, s, n, args);
    return st == dnnl_success ? OAR_OK : oar_dnnl_fail(op, st);
}

/* The weights w in p's layout with a reference for the caller (oar_packed_put), reordering them
 * only when p holds none for w's data as it is now. Static programs and inference call a conv
 * with the same weights again and again: at batch 1 the weight reorder measured a quarter of
 * ResNet-20's time. NULL: the caller reorders itself (untracked storage, or no memory). */
static oar_packed *packed_get(const char *op, dprim *p, const oar_tensor *w, oar_status *rc) {
    const oar_storage *st = w->storage;
    if (!st || !st->uid || !p->op[1].reorder || p->key.kind != DK_FORWARD) return NULL;
    oar_packed *k = oar_packed_find(&g_cache, p->packed, PACK_SLOTS, st->uid, st->version, w->offset);
    if (k) return k;
    if (!(k = oar_packed_new(p->op[1].bytes, st->uid, st->version, w->offset))) return NULL;
    /* bf16 weights widened first; a flipped forward's then transposed and flipped (flip_weights) */
    size_t wide_bytes = sizeof(float) * (size_t)w->numel;
    float *wide = p->key.io16 ? oar_alloc(wide_bytes) : NULL, *flipped = p->key.flip ? oar_alloc(wide_bytes) : NULL;
    if ((p->key.io16 && !wide) || (p->key.flip && !flipped)) {
        oar_free(wide, wide_bytes), oar_free(flipped, wide_bytes);
        oar_packed_put(k);
        return NULL;
    }
    if (wide) oar_cpu_half_to_f32(wide, oar_tensor_ptr(w), w->numel, w->dtype);
    if (flipped) flip_weights(wide ? wide : (const float *)oar_tensor_ptr(w), flipped, p->key.w);
    if (flipped) oar_free(wide, wide_bytes), wide = flipped;
    dnnl_stream_t strm = NULL;
    dnnl_memory_t from = NULL, to = NULL;
    dnnl_status_t ds = dnnl_stream_create(&strm, oar_dnnl_engine(), dnnl_stream_default_flags);
    if (ds == dnnl_success)
        ds = dnnl_memory_create(&from, &p->op[1].plain, oar_dnnl_engine(), wide ? (void *)wide : oar_tensor_ptr(w));
    if (ds == dnnl_success) ds = dnnl_memory_create(&to, &p->op[1].want, oar_dnnl_engine(), k->data);
    *rc = ds == dnnl_success ? run_prim(op, p->op[1].reorder, strm, 2,
                                        (dnnl_exec_arg_t[]){{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}})
                             : oar_dnnl_fail(op, ds);
    if (*rc == OAR_OK && (ds = dnnl_stream_wait(strm)) != dnnl_success) *rc = oar_dnnl_fail(op, ds);
    if (from) dnnl_memory_destroy(from);
    if (to) dnnl_memory_destroy(to);
    if (strm) dnnl_stream_destroy(strm);
    oar_free(wide, wide_bytes);
    if (*rc != OAR_OK) {
        oar_packed_put(k);
        return NULL;
    }
    oar_packed_keep(&g_cache, p->packed, PACK_SLOTS, k);
    return k;
}

/* Runs p on the caller's buffers x, weight, y (and bias or NULL): converts the inputs the
 * primitive wants in another layout, runs it, converts its output back. dyc: a backward
 * call's dy in the primitive's layout goes there (NULL: a buffer of its own), already there
 * when dy_ready (run_call's dy_whole). */
static oar_status execute(const char *op, dprim *p, void *const user[3], void *user_bias, void *res, void *wpacked,
                          void *dyc, bool dy_ready) {
    enum { SCRATCH = 3, BIAS = 4, N_MEM = 8 }; /* 0..2 plain operands, 5..7 converted ones */
    dnnl_memory_t mem[N_MEM] = {0};
    dnnl_stream_t strm = NULL;
    void *tmp[4] = {0};
    size_t tmp_bytes[4] = {p->op[0].bytes, wpacked ? 0 : p->op[1].bytes, dyc ? 0 : p->op[2].bytes, p->scratch};
    oar_status rc = OAR_OK;
    for (int i = 0; i < 4; i++)
        if (tmp_bytes[i] && !(tmp[i] = oar_alloc(tmp_bytes[i]))) rc = OAR_ERR_OOM;
    /* bf16 storage (io16): operands our transposes do not convert get an f32 plain copy (the
     * weights, the bias, layouts they do not take); the output's is rounded back at the end */
    int out = k_out[p->key.kind];
    void *bufs[3] = {user[0], user[1], user[2]}, *bias = user_bias, *wide[4] = {0};
    size_t wide_bytes[4] = {0};
    for (int i = 0; i < 4 && p->key.io16 && rc == OAR_OK; i++) {
        bool f32_out = i == 1 && p->key.kind == DK_GRAD_WEIGHT; /* the f32 partial gradients */
        if (i == 3 ? !bias : f32_out || p->op[i].chan || (i == 1 && wpacked)) continue;
        wide_bytes[i] = i == 3 ? sizeof(float) * (size_t)p->key.w[0] : dnnl_memory_desc_get_size(&p->op[i].plain);
        if (!(wide[i] = oar_alloc(wide_bytes[i]))) {
            rc = OAR_ERR_OOM;
        } else if (i != out) {
            oar_cpu_half_to_f32(wide[i], i == 3 ? bias : bufs[i], (int64_t)(wide_bytes[i] / sizeof(float)), OAR_BF16);
        }
        if (i == 3) bias = wide[i];
        else bufs[i] = wide[i];
    }
    /* the weights the flipped problem takes (flip_weights), from the f32 ones (widened if bf16) */
    const int64_t wn = p->key.w[0] * p->key.w[1] * p->key.w[2] * p->key.w[3];
    size_t flip_bytes = p->key.flip && !wpacked ? sizeof(float) * (size_t)wn : 0;
    float *flipped = NULL;
    if (flip_bytes && rc == OAR_OK) {
        if (!(flipped = oar_alloc(flip_bytes))) rc = OAR_ERR_OOM;
        else flip_weights(bufs[1], flipped, p->key.w), bufs[1] = flipped;
    }
    dnnl_memory_desc_t smd;
    dnnl_dims_t sd = {(int64_t)p->scratch};
    dnnl_status_t st = dnnl_stream_create(&strm, oar_dnnl_engine(), dnnl_stream_default_flags);
    if (p->scratch && st == dnnl_success) st = dnnl_memory_desc_init_by_tag(&smd, 1, sd, dnnl_u8, dnnl_x);
    for (int i = 0; i < 3 && st == dnnl_success && rc == OAR_OK; i++) {
        st = dnnl_memory_create(&mem[i], &p->op[i].plain, oar_dnnl_engine(), bufs[i]);
        if (st == dnnl_success && p->op[i].reorder)
            st = dnnl_memory_create(&mem[5 + i], &p->op[i].want, oar_dnnl_engine(),
                                    i == 1 && wpacked ? wpacked : i == 2 && dyc ? dyc : tmp[i]);
    }
    if (p->scratch && st == dnnl_success && rc == OAR_OK) st = dnnl_memory_create(&mem[SCRATCH], &smd, oar_dnnl_engine(), tmp[3]);
    if (bias && st == dnnl_success && rc == OAR_OK) st = dnnl_memory_create(&mem[BIAS], &p->md_b, oar_dnnl_engine(), bias);
    if (st != dnnl_success && rc == OAR_OK) rc = oar_dnnl_fail(op, st);
    dnnl_memory_t res_mem = NULL;
    if (rc == OAR_OK && p->key.sum) { /* the sum post-op adds what the output holds: the residual */
        if (p->res_reorder) {
            st = dnnl_memory_create(&res_mem, &p->op[2].plain, oar_dnnl_engine(), res);
            rc = st == dnnl_success ? run_prim(op, p->res_reorder, strm, 2,
                                               (dnnl_exec_arg_t[]){{DNNL_ARG_FROM, res_mem}, {DNNL_ARG_TO, mem[5 + 2]}})
                                    : oar_dnnl_fail(op, st);
        } else if (res != bufs[2]) {
            memcpy(bufs[2], res, dnnl_memory_desc_get_size(&p->op[2].plain));
        }
    }
    for (int i = 0; i < 3 && rc == OAR_OK; i++) /* inputs into the wanted layout */
        if (p->op[i].reorder && i != out && !(i == 1 && wpacked) && !(i == 2 && dy_ready)) {
            if (p->op[i].chan) oar_plain_to_chan(&p->op[i].lay, bufs[i], tmp[i]);
            else
                rc = run_prim(op, p->op[i].reorder, strm, 2,
                              (dnnl_exec_arg_t[]){{DNNL_ARG_FROM, mem[i]}, {DNNL_ARG_TO, mem[5 + i]}});
        }
    if (rc == OAR_OK) {
        dnnl_exec_arg_t a[5];
        int n = 0;
        for (int i = 0; i < 3; i++) a[n++] = (dnnl_exec_arg_t){p->op[i].arg, p->op[i].reorder ? mem[5 + i] : mem[i]};
        if (mem[SCRATCH]) a[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, mem[SCRATCH]};
        if (mem[BIAS]) a[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, mem[BIAS]};
        rc = run_prim(op, p->prim, strm, n, a);
    }
    if (rc == OAR_OK && p->op[out].reorder && !p->op[out].chan)
        rc = run_prim(op, p->op[out].reorder, strm, 2,
                      (dnnl_exec_arg_t[]){{DNNL_ARG_FROM, mem[5 + out]}, {DNNL_ARG_TO, mem[out]}});
    if (rc == OAR_OK && (st = dnnl_stream_wait(strm)) != dnnl_success) rc = oar_dnnl_fail(op, st);
    if (rc == OAR_OK && p->op[out].chan) oar_chan_to_plain(&p->op[out].lay, tmp[out], bufs[out]); /* after the wait */
    if (rc == OAR_OK && wide[out])
        oar_cpu_f32_to_half(user[out], wide[out], (int64_t)(wide_bytes[out] / sizeof(float)), OAR_BF16);
    for (int i = 0; i < N_MEM; i++)
        if (mem[i]) dnnl_memory_destroy(mem[i]);
    if (res_mem) dnnl_memory_destroy(res_mem);
    if (strm) dnnl_stream_destroy(strm);
    for (int i = 0; i < 4; i++) oar_free(tmp[i], tmp_bytes[i]), oar_free(wide[i], wide_bytes[i]);
    oar_free(flipped, flip_bytes);
    return rc == OAR_ERR_OOM ? oar_error(OAR_ERR_OOM, "%s: out of memory for oneDNN buffers", op) : rc;
}

/* One call over its parts. grad_weight parts after the first write their own partial
 * gradient (summed at the end) since oneDNN overwrites its output; in bf16 every part writes
 * an f32 partial and the sum is rounded to bf16 once. */
typedef struct djob {
    const char *op;
    const dplan *pl;
    char *x, *w, *y, *bias, *res; /* res: conv2d_act's residual or NULL */
    oar_packed *packed[2];           /* forward: each primitive's weights already reordered, or NULL */
    int64_t xb, yb;   /* bytes of one image of x / y */
    float *partial;   /* grad_weight: parts - first gradients of wn floats */
    int64_t wn, first; /* first: the first part that writes a partial (0 in bf16, else 1) */
    int64_t xrow, yrow;              /* row split: bytes of one row of x / y (NHWC) */
    char *dyc;                       /* backward: dy converted for all parts (dy_whole), or NULL */
    int64_t dyc_image;               /* its bytes per image */
    bool dy_ready;                   /* dyc holds the conversion already (the memo's) */
    oar_packed *rpacked[MAX_ROWS];   /* row split: each part's weights already reordered, or NULL */
    oar_status st[MAX_PARTS * MAX_ROWS];
} djob;

/* Tasks of a row split: task t is row part t % rows of image t / rows. */
static void run_rows(void *ctx, int64_t begin, int64_t end) {
    djob *j = ctx;
    const dplan *pl = j->pl;
    oar_dnnl_one_omp_thread();
    for (int64_t t = begin; t < end; t++) {
        int64_t img = t / pl->rows, r = t % pl->rows;
        const oar_conv_rows *c = &pl->cut[r];
        int64_t yo = img * j->yb + c->out0 * j->yrow;
        oar_packed *k = j->rpacked[r];
        j->st[t] = execute(j->op, pl->rp[r], (void *[3]){j->x + img * j->xb + c->in0 * j->xrow, j->w, j->y + yo},
                           j->bias, j->res ? j->res + yo : NULL, k ? k->data : NULL, NULL, false);
    }
}

/* Each row part's packed weights; a part whose primitive wants the layout an earlier part's
 * does shares that packing, so the weights are kept once (own[i]: part i holds a reference). */
static oar_status rows_pack(const char *op, const dplan *pl, const oar_tensor *w, oar_packed **packed, bool *own) {
    oar_status st = OAR_OK;
    for (int64_t i = 0; i < pl->rows && st == OAR_OK; i++) {
        int64_t same = 0;
        while (same < i && !(packed[same] && dnnl_memory_desc_equal(&pl->rp[i]->op[1].want, &pl->rp[same]->op[1].want)))
            same++;
        if (same < i) packed[i] = packed[same];
        else packed[i] = packed_get(op, pl->rp[i], w, &st), own[i] = packed[i] != NULL;
    }
    return st;
}

static void run_parts(void *ctx, int64_t begin, int64_t end) {
    djob *j = ctx;
    const dplan *pl = j->pl;
    oar_dnnl_one_omp_thread();
    for (int64_t i = begin; i < end; i++) {
        int64_t n0 = oar_dnnl_part_start(&pl->split, i);
        dprim *p = pl->p[pl->split.r && i >= pl->split.r];
        void *w = pl->kind == DK_GRAD_WEIGHT && i >= j->first ? (void *)(j->partial + (i - j->first) * j->wn) : j->w;
        oar_packed *k = j->packed[pl->split.r && i >= pl->split.r];
        oar_status st = execute(j->op, p, (void *[3]){j->x + n0 * j->xb, w, j->y + n0 * j->yb}, j->bias,
                                j->res ? j->res + n0 * j->yb : NULL, k ? k->data : NULL,
                                j->dyc ? j->dyc + n0 * j->dyc_image : NULL, j->dy_ready);
        j->st[i] = st;
    }
}

/* A backward call's dy converted whole, so that the other backward op of the layer can take it
 * (conv_dnnl_memo.h): where each part's primitive converts dy by oneDNN's reorder into a layout
 * with images outermost and of one size, the parts' copies are slices of one buffer. Fills key
 * and *image (bytes per image); false where dy is converted otherwise or not at all. */
static bool dy_whole(const dplan *pl, const oar_tensor *dy, oar_dy_key *key, int64_t *image) {
    memset(key, 0, sizeof *key);
    if (pl->kind == DK_FORWARD || pl->rows > 1) return false;
    for (int i = 0; i < (pl->split.r ? 2 : 1); i++) {
        const dprim *p = pl->p[i];
        const doperand *o = &p->op[2];
        if (p->key.bf16 || p->key.io16 || !o->reorder || o->chan || o->want.format_kind != dnnl_blocked) return false;
        int64_t per = (int64_t)o->bytes / p->key.y[0];
        if (per * p->key.y[0] != (int64_t)o->bytes || o->want.format_desc.blocking.strides[0] * (int64_t)sizeof(float) != per ||
            (i && per != *image))
            return false;
        *image = per;
        key->want[i] = o->want;
    }
    key->src = oar_tensor_ptr(dy);
    key->uid = dy->storage->uid, key->version = dy->storage->version, key->offset = dy->offset;
    key->bytes = (size_t)(*image * dy->shape[0]);
    key->kind = pl->kind;
    return true;
}

static oar_status run_call(const char *op, dk_kind kind, oar_tensor *const *in, oar_tensor *const *out,
                           const oar_attr *a, oar_tensor *x, oar_tensor *w, oar_tensor *y, oar_tensor *bias,
                           bool fused) {
    dplan pl;
    if (!plan_make(&pl, kind, in, out, a, fused)) return oar_error(OAR_ERR_UNSUPPORTED, "%s: oneDNN declined these inputs", op);
    djob j = {.op = op, .pl = &pl, .x = oar_tensor_ptr(x), .w = oar_tensor_ptr(w), .y = oar_tensor_ptr(y),
              .bias = bias ? oar_tensor_ptr(bias) : NULL, .res = fused && in[3] ? oar_tensor_ptr(in[3]) : NULL, .xb = (int64_t)oar_dtypes[x->dtype].size * (x->numel / x->shape[0]),
              .yb = (int64_t)oar_dtypes[y->dtype].size * (y->numel / y->shape[0]), .wn = w->numel,
              .first = w->dtype == OAR_F32 ? 1 : 0};
    size_t pbytes = kind == DK_GRAD_WEIGHT ? sizeof(float) * (size_t)((pl.split.parts - j.first) * j.wn) : 0;
    oar_status st = OAR_OK;
    if (pbytes && !(j.partial = oar_alloc(pbytes))) st = oar_error(OAR_ERR_OOM, "%s: out of memory", op);
    bool own[MAX_ROWS] = {0};
    int64_t tasks = pl.split.parts * pl.rows;
    if (pl.rows > 1) {
        j.xrow = j.xb / x->shape[1], j.yrow = j.yb / y->shape[1]; /* NHWC: [n, h, w, c] */
        st = rows_pack(op, &pl, w, j.rpacked, own);
        if (st == OAR_OK) oar_parallel_for(tasks, 1, run_rows, &j);
    } else {
        for (int i = 0; i < 2 && st == OAR_OK && kind == DK_FORWARD; i++)
            if (pl.p[i]) j.packed[i] = packed_get(op, pl.p[i], w, &st);
        /* dy: the previous call's conversion when it was the layer's other backward op */
        uint64_t call = oar_kernel_calls_now();
        oar_dy_key key;
        if (st == OAR_OK && dy_whole(&pl, y, &key, &j.dyc_image)) {
            j.dyc = oar_dy_memo_take(&key, call);
            j.dy_ready = j.dyc != NULL;
            if (!j.dyc && !(j.dyc = oar_alloc(key.bytes))) st = oar_error(OAR_ERR_OOM, "%s: out of memory", op);
        }
        if (st == OAR_OK) oar_parallel_for(tasks, 1, run_parts, &j);
        for (int64_t i = 0; i < tasks && st == OAR_OK; i++) st = j.st[i];
        if (j.dyc && st == OAR_OK && !j.dy_ready) oar_dy_memo_keep(&key, call, j.dyc); /* for the other op */
        else if (j.dyc) oar_free(j.dyc, key.bytes);
    }
    for (int i = 0; i < 2; i++) oar_packed_put(j.packed[i]);
    for (int i = 0; i < MAX_ROWS; i++)
        if (own[i]) oar_packed_put(j.rpacked[i]);
    for (int64_t i = 0; i < tasks && st == OAR_OK; i++) st = j.st[i];
    float *gw = j.first ? (float *)j.w : j.partial;
    for (int64_t i = 1; st == OAR_OK && pbytes && i < pl.split.parts; i++) {
        const float *restrict src = j.partial + (i - j.first) * j.wn;
        for (int64_t e = 0; e < j.wn; e++) gw[e] += src[e];
    }
    if (st == OAR_OK && pbytes && !j.first) oar_cpu_f32_to_half(j.w, gw, j.wn, w->dtype);
    oar_free(j.partial, pbytes);
    plan_release(&pl);
    return st;
}

/* ---- the kernels (one for the 2-d and 3-d op of each kind: the weight's rank tells them apart) */
static const char *op_name(const oar_tensor *w, const char *name2, const char *name3) {
    return w->ndim == 5 ? name3 : name2;
}

static oar_status conv2d_dnnl(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    return run_call(op_name(in[1], "conv2d", "conv3d"), DK_FORWARD, in, out, a, in[0], in[1], out[0], in[2], false);
}

static oar_status conv2d_act_dnnl(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                  int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    return run_call("conv2d_act", DK_FORWARD, in, out, a, in[0], in[1], out[0], in[2], true);
}

static oar_status grad_input_dnnl(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                  int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    return run_call(op_name(in[1], "conv2d_grad_input", "conv3d_grad_input"), DK_GRAD_INPUT, in, out, a, out[0],
                    in[1], in[0], NULL, false);
}

static oar_status grad_weight_dnnl(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                   int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    return run_call(op_name(out[0], "conv2d_grad_weight", "conv3d_grad_weight"), DK_GRAD_WEIGHT, in, out, a, in[0],
                    out[0], in[1], NULL, false);
}

/* conv_transpose3d(x, weight, bias?; stride, padding, output_padding, dilation, groups) is
 * conv3d's backward-data with x as the grad (ops/conv.c), then the bias per channel: its
 * attributes as conv3d_grad_input's (the leading shape attribute is not read). f32 only; bf16
 * runs through the via-f32 kernel. */
static void transpose_attrs(const oar_attr *a, oar_attr *t) {
    t[0] = oar_attr_int(0), t[1] = a[0], t[2] = a[1], t[3] = a[3], t[4] = a[4];
}

static oar_status transpose3d_dnnl(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                   int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    oar_attr t[5];
    transpose_attrs(a, t);
    oar_status st = run_call("conv_transpose3d", DK_GRAD_INPUT, in, out, t, out[0], in[1], in[0], NULL, false);
    if (st != OAR_OK || !in[2]) return st;
    const oar_tensor *y = out[0];
    float *py = (float *)oar_tensor_ptr(y);
    const float *pb = (const float *)oar_tensor_ptr(in[2]);
    int64_t c = y->shape[1], plane = y->numel / (y->shape[0] * c);
    for (int64_t i = 0; i < y->shape[0] * c; i++)
        for (int64_t e = 0; e < plane; e++) py[i * plane + e] += pb[i % c];
    return OAR_OK;
}

static bool supports_kind(dk_kind kind, oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a,
                          bool fused) {
    dplan pl;
    /* the CPU switch's cap is asked when a kernel is chosen, not when it runs: a program
     * compiled earlier keeps its kernels (docs/cpu-isa.md) and must not fail */
    if (!oar_dnnl_usable()) return false;
    if (!plan_make(&pl, kind, in, out, a, fused)) return false;
    plan_release(&pl);
    return true;
}
static bool conv2d_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    return supports_kind(DK_FORWARD, in, out, a, false);
}
static bool conv2d_act_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                                const oar_attr *a) {
    (void)n_in; (void)n_out;
    return supports_kind(DK_FORWARD, in, out, a, true);
}
static bool grad_input_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                                const oar_attr *a) {
    (void)n_in; (void)n_out;
    return supports_kind(DK_GRAD_INPUT, in, out, a, false);
}
static bool grad_weight_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                                 const oar_attr *a) {
    (void)n_in; (void)n_out;
    /* oneDNN sums the batch in per-thread partials: a different sum for each thread count */
    return !oar_get_deterministic() && supports_kind(DK_GRAD_WEIGHT, in, out, a, false);
}
static bool transpose3d_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                                 const oar_attr *a) {
    (void)n_in; (void)n_out;
    oar_attr t[5];
    transpose_attrs(a, t);
    return in[0]->dtype == OAR_F32 && supports_kind(DK_GRAD_INPUT, in, out, t, false);
}

/* The bf16 entries split by the CPU, so a profile names the path that ran: native bf16, or bf16
 * storage around the f32 primitive (in[0] is an activation of the call's dtype for every kind). */
#define BF16_SUPPORTS(fn)                                                                                             \
    static bool fn##_native(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) { \
        return oar_cpu_bf16_native() && fn(in, n_in, out, n_out, a);                                                \
    }                                                                                                               \
    static bool fn##_io16(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {   \
        return !oar_cpu_bf16_native() && fn(in, n_in, out, n_out, a);                                               \
    }
BF16_SUPPORTS(conv2d_supports)
BF16_SUPPORTS(conv2d_act_supports)
BF16_SUPPORTS(grad_input_supports)
BF16_SUPPORTS(grad_weight_supports)

int oar_dnnl_conv_act_converts(oar_tensor *const *in, oar_tensor *out, const oar_attr *a) {
    dplan pl;
    if (!oar_dnnl_usable() || !plan_make(&pl, DK_FORWARD, in, &out, a, true)) return -1;
    int converts = pl.p[0]->op[0].reorder || pl.p[0]->op[2].reorder;
    plan_release(&pl);
    return converts;
}

int oar_dnnl_conv_flipped(oar_tensor *const *in, oar_tensor *out, const oar_attr *a) {
    dplan pl;
    if (!oar_dnnl_usable() || !plan_make(&pl, DK_FORWARD, in, &out, a, false)) return -1;
    int flipped = pl.p[0]->key.flip != 0;
    plan_release(&pl);
    return flipped;
}

int64_t oar_dnnl_dy_taken(void) { return oar_dy_memo_taken(); }

int oar_dnnl_conv_act_rows(oar_tensor *const *in, oar_tensor *out, const oar_attr *a) {
    dplan pl;
    if (!oar_dnnl_usable() || !plan_make(&pl, DK_FORWARD, in, &out, a, true)) return -1;
    int rows = (int)pl.rows;
    plan_release(&pl);
    return rows;
}

void oar_cpu_conv_register_dnnl(void) {
#ifdef OAR_HAVE_OPENMP
    oar_threads_add_library_hook(threads_hook);
#endif
    struct { oar_op_id op; oar_kernel_fn fn; oar_supports_fn sup, native, io16; } k[] = {
        {OAR_OP_conv2d, conv2d_dnnl, conv2d_supports, conv2d_supports_native, conv2d_supports_io16},
        {OAR_OP_conv2d_act, conv2d_act_dnnl, conv2d_act_supports, conv2d_act_supports_native,
         conv2d_act_supports_io16},
        {OAR_OP_conv2d_grad_input, grad_input_dnnl, grad_input_supports, grad_input_supports_native,
         grad_input_supports_io16},
        {OAR_OP_conv2d_grad_weight, grad_weight_dnnl, grad_weight_supports, grad_weight_supports_native,
         grad_weight_supports_io16},
        {OAR_OP_conv3d, conv2d_dnnl, conv2d_supports, conv2d_supports_native, conv2d_supports_io16},
        {OAR_OP_conv3d_grad_input, grad_input_dnnl, grad_input_supports, grad_input_supports_native,
         grad_input_supports_io16},
        {OAR_OP_conv3d_grad_weight, grad_weight_dnnl, grad_weight_supports, grad_weight_supports_native,
         grad_weight_supports_io16},
        {OAR_OP_conv_transpose3d, transpose3d_dnnl, transpose3d_supports, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        oar_register_kernel(k[i].op, (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32),
                                                        .impl = "onednn", .priority = 20, .fn = k[i].fn,
                                                        .supports = k[i].sup});
        if (!k[i].native) continue;
        /* native bf16 (AVX512_BF16 / AMX) only */
        oar_register_kernel(k[i].op, (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_BF16),
                                                        .impl = OAR_IMPL_BF16_NATIVE, .priority = 20, .fn = k[i].fn,
                                                        .supports = k[i].native});
        /* elsewhere bf16 storage around the f32 primitive; where it declines (the residual
         * epilogue, NHWC), via-f32 runs */
        oar_register_kernel(k[i].op, (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_BF16),
                                                        .impl = OAR_IMPL_BF16_STORAGE, .priority = 20, .fn = k[i].fn,
                                                        .supports = k[i].io16});
    }
}

#else

void oar_cpu_conv_register_dnnl(void) {}

int oar_dnnl_conv_act_converts(oar_tensor *const *in, oar_tensor *out, const oar_attr *a) {
    (void)in, (void)out, (void)a;
    return -1;
}

int oar_dnnl_conv_act_rows(oar_tensor *const *in, oar_tensor *out, const oar_attr *a) {
    (void)in, (void)out, (void)a;
    return -1;
}

int oar_dnnl_conv_flipped(oar_tensor *const *in, oar_tensor *out, const oar_attr *a) {
    (void)in, (void)out, (void)a;
    return -1;
}

int64_t oar_dnnl_dy_taken(void) { return -1; }

#endif
