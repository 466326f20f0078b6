/* qconv2d on oneDNN's int8 convolutions, where they are exact: VNNI (vpdpbusd) or AMX tiles
 * with any int8 data; elsewhere (AVX2, AVX-512 without VNNI) oneDNN multiplies with vpmaddubsw,
 * whose pairs of u8 * s8 products saturate at 16 bits, exact only for weights within [-64, 63]
 * (2 * 255 * 64 < 32768): there the kernel runs only u8 data with 7-bit weights
 * (oar_quant_static_opts's weight_bits), hands 8-bit ones to the exact GEMM and declines s8
 * data, whose weights oneDNN halves there (an inexact "scale adjustment"). The primitive's
 * implementation name says which code oneDNN took.
 *
 * oneDNN computes only the plain int32 sums of x * w; the zero points, the rescale, bias,
 * residual, ReLU and requantization are oar's epilogue (qepilogue_avx512.h, qepilogue_avx2.h),
 * so the outputs equal the reference bit for bit. Per chunk of the batch:
 *  1. the NCHW input is transposed into an NHWC buffer framed by the zero point's byte
 *     (u8_layout.c, 3-4x faster than oneDNN's reorder; the padding holds the real value 0), so the convolution itself has no padding and
 *     sum (x - zp) * w = sum x * w - zp * sum w over every tap;
 *  2. the convolution writes the int32 sums in NHWC;
 *  3. the epilogue transposes 16 positions x 16 channels in registers (8 x 8 with AVX2) and
 *     writes consecutive NCHW outputs of each channel.
 * qconv2d_nhwc (the quant_nhwc pass's NHWC int8 graph) needs neither transpose: its input rows
 * are copied into the frame (or, unpadded, read in place), and its epilogue works on 16 (8)
 * consecutive channels of a position, as oneDNN wrote them, into the NHWC output.
 * Weights are reordered into the primitive's layout once per weight (with their sums). On
 * ResNet-20's convolutions oneDNN's int8 runs 3-4x (VNNI) to 6-15x (AMX) faster than its f32;
 * see docs/quant.md for the whole-model figures. */
#include "kernels/cpu/cpu_kernels.h"
#include "ops/quant.h"

#if defined(OAR_HAVE_ONEDNN) && (defined(__x86_64__) || defined(_M_X64))
#include "kernels/cpu/dnnl_engine.h"
#include "kernels/cpu/prim_cache.h"
#include "kernels/cpu/qepilogue_avx2.h"
#include "kernels/cpu/qepilogue_avx512.h"
#include "kernels/cpu/u8_layout.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PACK_SLOTS 16 /* weight packings kept per primitive (prim_cache.h) */
#define PACK_W7 1u    /* oar_packed flag: every weight within [-64, 63] */

/* Everything a primitive depends on; all int64 so memcmp sees no padding. n: a chunk's images. */
typedef struct qkey {
    int64_t n, c, h, w, ph, pw, o, kh, kw, oh, ow, sh, sw, dh, dw, groups, s8;
} qkey;

typedef struct qprim {
    oar_prim_entry hdr;
    qkey key;
    dnnl_primitive_t conv, w_reorder; /* conv NULL: declined */
    bool exact;                                  /* VNNI or AMX code: exact for any int8 data */
    dnnl_memory_desc_t w_plain, w_want, y;
    size_t scratch, w_bytes; /* w_bytes: the weights in the primitive's layout, a multiple of 64 */
    oar_packed *packed[PACK_SLOTS]; /* data: those weights, then each output channel's weight sum */
} qprim;

static const int32_t *pack_wsum(const qprim *p, const oar_packed *k) {
    return (const int32_t *)((const char *)k->data + p->w_bytes);
}

static void qprim_free(void *v) {
    qprim *p = v;
    if (!p) return;
    for (int i = 0; i < PACK_SLOTS; i++) oar_packed_put(p->packed[i]);
    dnnl_primitive_t prims[2] = {p->conv, p->w_reorder};
    for (int i = 0; i < 2; i++)
        if (prims[i]) dnnl_primitive_destroy(prims[i]);
    free(p);
}

static dnnl_primitive_t reorder_prim(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to) {
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    if (dnnl_reorder_primitive_desc_create(&pd, from, oar_dnnl_engine(), to, oar_dnnl_engine(), NULL) == dnnl_success &&
        dnnl_primitive_create(&prim, pd) != dnnl_success)
        prim = NULL;
    if (pd) dnnl_primitive_desc_destroy(pd);
    return prim;
}

/* oneDNN's native code only (never its reference loops); *exact: VNNI or AMX code, which it
 * names so (brgconv:avx512_core_vnni, brgconv:avx512_core_amx_int8, ...). */
static bool native_impl(dnnl_primitive_desc_t pd, bool *exact) {
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl ||
        strstr(impl, "ref"))
        return false;
    *exact = strstr(impl, "vnni") || strstr(impl, "amx");
    return true;
}

static void *qprim_build(const void *key) {
    qprim *p = calloc(1, sizeof *p); /* metadata, not tensor storage */
    if (!p) return NULL;
    const qkey *k = key;
    p->key = *k;
    oar_dnnl_one_omp_thread();
    int64_t hp = k->h + 2 * k->ph, wp = k->w + 2 * k->pw, g = k->groups;
    dnnl_data_type_t xdt = k->s8 ? dnnl_s8 : dnnl_u8;
    dnnl_dims_t fd = {k->n, k->c, hp, wp}, yd = {k->n, k->o, k->oh, k->ow};
    dnnl_dims_t wd = {g, k->o / g, k->c / g, k->kh, k->kw}, wd4 = {k->o, k->c, k->kh, k->kw};
    dnnl_dims_t st = {k->sh, k->sw}, dl = {k->dh - 1, k->dw - 1}, zero = {0, 0};
    dnnl_memory_desc_t framed, w_any;
    bool ok = dnnl_memory_desc_init_by_tag(&framed, 4, fd, xdt, dnnl_nhwc) == dnnl_success &&
              dnnl_memory_desc_init_by_tag(&p->y, 4, yd, dnnl_s32, dnnl_nhwc) == dnnl_success &&
              (g > 1 ? dnnl_memory_desc_init_by_tag(&p->w_plain, 5, wd, dnnl_s8, dnnl_goihw)
                     : dnnl_memory_desc_init_by_tag(&p->w_plain, 4, wd4, dnnl_s8, dnnl_oihw)) == dnnl_success &&
              (g > 1 ? dnnl_memory_desc_init_by_tag(&w_any, 5, wd, dnnl_s8, dnnl_format_tag_any)
                     : dnnl_memory_desc_init_by_tag(&w_any, 4, wd4, dnnl_s8, dnnl_format_tag_any)) == dnnl_success;
    dnnl_primitive_attr_t attr = NULL;
    ok = ok && dnnl_primitive_attr_create(&attr) == dnnl_success &&
         dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success;
    dnnl_convolution_desc_t cd;
    dnnl_primitive_desc_t pd = NULL;
    ok = ok && dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &framed,
                                                          &w_any, NULL, &p->y, st, dl, zero, zero) == dnnl_success &&
         dnnl_primitive_desc_create(&pd, &cd, attr, oar_dnnl_engine(), NULL) == dnnl_success && native_impl(pd, &p->exact) &&
         (p->exact || !k->s8); /* without VNNI, s8 data has its weights halved (oneDNN's s8s8 scale adjustment) */
    if (ok) {
        const dnnl_memory_desc_t *want = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        p->w_want = *want;
        p->w_bytes = (dnnl_memory_desc_get_size(want) + 63) / 64 * 64;
        p->scratch = smd ? dnnl_memory_desc_get_size(smd) : 0;
        p->w_reorder = reorder_prim(&p->w_plain, &p->w_want);
        if (p->w_reorder && dnnl_primitive_create(&p->conv, pd) != dnnl_success) p->conv = NULL;
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return p;
}

static qprim *g_slots[32];
static oar_prim_cache g_cache = OAR_PRIM_CACHE_INIT(g_slots, qprim, key, qprim_build, qprim_free);

static oar_status run_prim(dnnl_primitive_t prim, dnnl_stream_t s, int n, dnnl_exec_arg_t *args) {
    dnnl_status_t st = dnnl_primitive_execute(prim, s, n, args);
    return st == dnnl_success ? OAR_OK : oar_dnnl_fail("qconv2d", st);
}

/* from -> to through reorder (both buffers the caller's), waited for. */
static oar_status reorder(dnnl_primitive_t r, const dnnl_memory_desc_t *fmd, const void *from,
                          const dnnl_memory_desc_t *tmd, void *to) {
    dnnl_stream_t s = NULL;
    dnnl_memory_t a = NULL, b = NULL;
    dnnl_status_t ds = dnnl_stream_create(&s, oar_dnnl_engine(), dnnl_stream_default_flags);
    if (ds == dnnl_success) ds = dnnl_memory_create(&a, fmd, oar_dnnl_engine(), (void *)from);
    if (ds == dnnl_success) ds = dnnl_memory_create(&b, tmd, oar_dnnl_engine(), to);
    oar_status rc = ds == dnnl_success ? run_prim(r, s, 2, (dnnl_exec_arg_t[]){{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, b}})
                                       : oar_dnnl_fail("qconv2d", ds);
    if (rc == OAR_OK && (ds = dnnl_stream_wait(s)) != dnnl_success) rc = oar_dnnl_fail("qconv2d", ds);
    if (a) dnnl_memory_destroy(a);
    if (b) dnnl_memory_destroy(b);
    if (s) dnnl_stream_destroy(s);
    return rc;
}

/* w in p's layout, with its sums, and a reference for the caller (oar_packed_put): found among
 * p's packings of tracked weights, else made (and kept, when w's storage is tracked). NULL with
 * *rc set. */
static oar_packed *pack_get(qprim *p, const oar_tensor *w, oar_status *rc) {
    oar_qweight_id id = oar_qweight_id_of(w, 0);
    oar_packed *k = id.uid ? oar_packed_find(&g_cache, p->packed, PACK_SLOTS, id.uid, id.version, id.offset) : NULL;
    if (k) return k;
    int64_t o = p->key.o, per = w->numel / o;
    if (!(k = oar_packed_new(p->w_bytes + sizeof(int32_t) * (size_t)o, id.uid, id.version, id.offset))) {
        *rc = oar_error(OAR_ERR_OOM, "qconv2d: out of memory for packed weights (%zu bytes)", p->w_bytes);
        return NULL;
    }
    const int8_t *wv = (const int8_t *)oar_tensor_ptr(w);
    int32_t *wsum = (int32_t *)((char *)k->data + p->w_bytes);
    bool w7 = true;
    for (int64_t i = 0; i < o; i++) {
        int32_t s = 0;
        for (int64_t j = 0; j < per; j++) s += wv[i * per + j], w7 &= wv[i * per + j] >= -64 && wv[i * per + j] < 64;
        wsum[i] = s;
    }
    k->flags = w7 ? PACK_W7 : 0;
    if ((*rc = reorder(p->w_reorder, &p->w_plain, wv, &p->w_want, k->data)) != OAR_OK) {
        oar_packed_put(k);
        return NULL;
    }
    if (id.uid) oar_packed_keep(&g_cache, p->packed, PACK_SLOTS, k);
    return k;
}

/* A call: the batch in chunks of cn images (the last one rem), a primitive for each size. A
 * chunk's int32 sums stay within CHUNK_BYTES, so the epilogue reads them from the cache the
 * convolution wrote them to (whole parts of a batch of 32 measured slower). */
#define CHUNK_BYTES (256 << 10)
typedef struct qcall {
    oar_qconv_geom g;
    oar_qepilogue e;
    int64_t cn, chunks, rem;
    qprim *p[2]; /* cn images, rem images (NULL when rem == cn) */
    oar_packed *k[2];
    const uint8_t *x;
    const float *res;
    const uint8_t *rq;       /* nhwc: the int8 residual's codes (e.qr.on) */
    void *out;
    int32_t xzp;
    bool nhwc;               /* qconv2d_nhwc: x, res, rq and out are NHWC */
    int32_t *sub[2];         /* nhwc: each channel's correction xzp * sum(w), for k[0] and k[1] */
    float *zeros;            /* nhwc: the bias of an op without one */
    oar_status st; /* the first failure */
} qcall;

static inline __mmask16 lanes16(int64_t n) { return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1); }

/* r[i] = row i of a 16 x 16 int32 tile -> r[c] = column c (unpacks within 128-bit lanes, then
 * a 4 x 4 transpose of the lanes). */
OAR_QEPI_TARGET static inline __attribute__((always_inline)) void transpose16(__m512i r[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2)
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]), t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    for (int i = 0; i < 16; i += 4) { /* lane L of u[i + j]: column 4L + j of rows i..i+3 */
        u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]), u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]), u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int j = 0; j < 4; j++) {
        __m512i x = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88), y = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xDD);
        __m512i z = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88), w = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xDD);
        r[j] = _mm512_shuffle_i32x4(x, z, 0x88), r[8 + j] = _mm512_shuffle_i32x4(x, z, 0xDD);
        r[4 + j] = _mm512_shuffle_i32x4(y, w, 0x88), r[12 + j] = _mm512_shuffle_i32x4(y, w, 0xDD);
    }
}

/* The NHWC sums of nb images (the first is image b0) -> the NCHW outputs. */
OAR_QEPI_TARGET static void epilogue(const qcall *c, const int32_t *acc, int64_t b0, int64_t nb, const int32_t *wsum) {
    const oar_qconv_geom *g = &c->g;
    int64_t np = g->oh * g->ow, o = g->o;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t p0 = 0; p0 < np; p0 += 16) {
            int64_t pn = np - p0 < 16 ? np - p0 : 16;
            for (int64_t o0 = 0; o0 < o; o0 += 16) {
                int64_t on = o - o0 < 16 ? o - o0 : 16;
                __m512i r[16];
                for (int i = 0; i < 16; i++)
                    r[i] = i < pn ? _mm512_maskz_loadu_epi32(lanes16(on), acc + (b * np + p0 + i) * o + o0)
                                  : _mm512_setzero_si512();
                transpose16(r);
                for (int j = 0; j < on; j++) {
                    int64_t ch = o0 + j;
                    /* 16 channels are 16 streams of residual: the prefetcher alone left them late */
                    if (c->res) _mm_prefetch((const char *)(c->res + ((b0 + b) * o + ch) * np + p0 + 64), _MM_HINT_T0);
                    oar_qepilogue16(&c->e, r[j], (int32_t)((uint32_t)c->xzp * (uint32_t)wsum[ch]), ch, c->res, c->out,
                                    ((b0 + b) * o + ch) * np + p0, lanes16(pn), true);
                }
            }
        }
}

/* The same on CPUs without AVX-512 VNNI: 8 positions x 8 channels. */
OAR_QEPI2_TARGET static void epilogue_avx2(const qcall *c, const int32_t *acc, int64_t b0, int64_t nb,
                                           const int32_t *wsum) {
    const oar_qconv_geom *g = &c->g;
    int64_t np = g->oh * g->ow, o = g->o;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t p0 = 0; p0 < np; p0 += 8) {
            int pn = (int)(np - p0 < 8 ? np - p0 : 8);
            for (int64_t o0 = 0; o0 < o; o0 += 8) {
                int on = (int)(o - o0 < 8 ? o - o0 : 8);
                __m256i r[8], m = _mm256_cmpgt_epi32(_mm256_set1_epi32(on), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
                for (int i = 0; i < 8; i++)
                    r[i] = i < pn ? _mm256_maskload_epi32(acc + (b * np + p0 + i) * o + o0, m) : _mm256_setzero_si256();
                oar_transpose8(r);
                for (int j = 0; j < on; j++) {
                    int64_t ch = o0 + j;
                    oar_qepilogue8(&c->e, r[j], (int32_t)((uint32_t)c->xzp * (uint32_t)wsum[ch]), ch, c->res, c->out,
                                   ((b0 + b) * o + ch) * np + p0, pn);
                }
            }
        }
}

/* The NHWC sums of nb images (the first is image b0) -> the NHWC outputs: they are already in
 * the output's order, so 16 channels of a position at a time, no transpose; per block of 16
 * channels, their constants in registers over every position. */
#define NHWC_FLAGS(call)                                                                                             \
    switch ((c->res != NULL) * 4 + (c->e.act == OAR_QACT_RELU) * 2 + (c->e.out_dtype == OAR_F32)) {                 \
    case 0: call(false, false, false); break;                                                                       \
    case 1: call(false, false, true); break;                                                                        \
    case 2: call(false, true, false); break;                                                                        \
    case 3: call(false, true, true); break;                                                                         \
    case 4: call(true, false, false); break;                                                                        \
    case 5: call(true, false, true); break;                                                                         \
    case 6: call(true, true, false); break;                                                                         \
    default: call(true, true, true); break;                                                                         \
    }

/* the int8 residual's flags (relu, signed residual, multiplication for the division) likewise */
#define QRES_FLAGS(call)                                                                                             \
    switch (c->e.qr.relu * 4 + c->e.qr.r_signed * 2 + c->e.qr.fast) {                                               \
    case 0: call(false, false, false); break;                                                                       \
    case 1: call(false, false, true); break;                                                                        \
    case 2: call(false, true, false); break;                                                                        \
    case 3: call(false, true, true); break;                                                                         \
    case 4: call(true, false, false); break;                                                                        \
    case 5: call(true, false, true); break;                                                                         \
    case 6: call(true, true, false); break;                                                                         \
    default: call(true, true, true); break;                                                                         \
    }

OAR_QEPI_TARGET static void epilogue_nhwc(const qcall *c, const int32_t *acc, int64_t b0, int64_t nb,
                                          const int32_t *sub) {
    int64_t rows = nb * c->g.oh * c->g.ow, o = c->g.o, i0 = b0 * c->g.oh * c->g.ow * o;
    const float *bias = c->e.bias ? c->e.bias : c->zeros;
    for (int64_t o0 = 0; o0 < o; o0 += 16) {
        __mmask16 m = lanes16(o - o0);
        __m512i vs = _mm512_maskz_loadu_epi32(m, sub + o0);
        __m512 vc = _mm512_maskz_loadu_ps(m, c->e.comb + o0), vb = _mm512_maskz_loadu_ps(m, bias + o0);
#define ROWS16(r, a, f) oar_qepilogue16_rows(&c->e, acc + o0, rows, o, m, vs, vc, vb, c->res, c->out, i0 + o0, r, a, f, false)
#define ROWS16_FULL(r, a, f)                                                                                         \
    oar_qepilogue16_rows(&c->e, acc + o0, rows, o, m, vs, vc, vb, c->res, c->out, i0 + o0, r, a, f, true)
#define QRES16(r, s, f) oar_qres16_rows(&c->e, acc + o0, rows, o, m, vs, vc, vb, c->rq, c->out, i0 + o0, r, s, f, false)
#define QRES16_FULL(r, s, f)                                                                                         \
    oar_qres16_rows(&c->e, acc + o0, rows, o, m, vs, vc, vb, c->rq, c->out, i0 + o0, r, s, f, true)
        if (c->rq && m == 0xffff) {
            QRES_FLAGS(QRES16_FULL)
        } else if (c->rq) {
            QRES_FLAGS(QRES16)
        } else if (m == 0xffff) {
            NHWC_FLAGS(ROWS16_FULL)
        } else {
            NHWC_FLAGS(ROWS16)
        }
#undef ROWS16_FULL
#undef QRES16_FULL
#undef QRES16
#undef ROWS16
    }
}

OAR_QEPI2_TARGET static void epilogue_nhwc_avx2(const qcall *c, const int32_t *acc, int64_t b0, int64_t nb,
                                               const int32_t *sub) {
    int64_t rows = nb * c->g.oh * c->g.ow, o = c->g.o, i0 = b0 * c->g.oh * c->g.ow * o;
    const float *bias = c->e.bias ? c->e.bias : c->zeros;
    for (int64_t o0 = 0; o0 < o; o0 += 8) {
        int n = (int)(o - o0 < 8 ? o - o0 : 8);
        __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256i vs = _mm256_maskload_epi32(sub + o0, m);
        __m256 vc = _mm256_maskload_ps(c->e.comb + o0, m), vb = _mm256_maskload_ps(bias + o0, m);
#define ROWS8(r, a, f) oar_qepilogue8_rows(&c->e, acc + o0, rows, o, n, m, vs, vc, vb, c->res, c->out, i0 + o0, r, a, f, false)
#define ROWS8_FULL(r, a, f) oar_qepilogue8_rows(&c->e, acc + o0, rows, o, 8, m, vs, vc, vb, c->res, c->out, i0 + o0, r, a, f, true)
#define QRES8(r, s, f) oar_qres8_rows(&c->e, acc + o0, rows, o, n, m, vs, vc, vb, c->rq, c->out, i0 + o0, r, s, f, false)
#define QRES8_FULL(r, s, f) oar_qres8_rows(&c->e, acc + o0, rows, o, 8, m, vs, vc, vb, c->rq, c->out, i0 + o0, r, s, f, true)
        if (c->rq && n == 8) {
            QRES_FLAGS(QRES8_FULL)
        } else if (c->rq) {
            QRES_FLAGS(QRES8)
        } else if (n == 8) {
            NHWC_FLAGS(ROWS8_FULL)
        } else {
            NHWC_FLAGS(ROWS8)
        }
#undef QRES8_FULL
#undef QRES8
#undef ROWS8_FULL
#undef ROWS8
    }
}
#undef QRES_FLAGS
#undef NHWC_FLAGS

/* NHWC images into the frame: each image row copied inside it. */
static void frame_rows_nhwc(const qcall *c, const uint8_t *x, int64_t n, uint8_t *xf) {
    const oar_qconv_geom *g = &c->g;
    int64_t hp = g->h + 2 * g->ph, wp = g->w + 2 * g->pw;
    for (int64_t b = 0; b < n; b++)
        for (int64_t y = 0; y < g->h; y++)
            memcpy(xf + ((b * hp + y + g->ph) * wp + g->pw) * g->c, x + (b * g->h + y) * g->w * g->c,
                   (size_t)(g->w * g->c));
}

/* Chunk i through buffers for cn images (xf framed): its images into the frame, the
 * convolution, then the epilogue. */
static oar_status run_chunk(const qcall *c, int64_t i, uint8_t *xf, int32_t *acc, void *scratch) {
    const oar_qconv_geom *g = &c->g;
    int which = i == c->chunks - 1 && c->p[1];
    const qprim *p = c->p[which];
    const qkey *k = &p->key;
    int64_t b0 = i * c->cn, hp = g->h + 2 * g->ph, wp = g->w + 2 * g->pw;
    const uint8_t *x = c->x + b0 * g->c * g->h * g->w;
    if (!c->nhwc) oar_u8_nchw_to_nhwc(x, k->n, g->c, g->h, g->w, xf + (g->ph * wp + g->pw) * g->c, wp * g->c, hp * wp * g->c);
    else if (g->ph || g->pw) frame_rows_nhwc(c, x, k->n, xf);
    else xf = (uint8_t *)x; /* unpadded NHWC: the convolution reads the input itself */
    oar_status rc = OAR_OK;
    dnnl_stream_t s = NULL;
    dnnl_memory_t m[4] = {0};
    dnnl_memory_desc_t framed, smd;
    dnnl_dims_t fd = {k->n, g->c, hp, wp}, sd = {(int64_t)p->scratch};
    dnnl_status_t ds = dnnl_memory_desc_init_by_tag(&framed, 4, fd, k->s8 ? dnnl_s8 : dnnl_u8, dnnl_nhwc);
    if (ds == dnnl_success) ds = dnnl_stream_create(&s, oar_dnnl_engine(), dnnl_stream_default_flags);
    if (ds == dnnl_success) ds = dnnl_memory_create(&m[0], &framed, oar_dnnl_engine(), xf);
    if (ds == dnnl_success) ds = dnnl_memory_create(&m[1], &p->w_want, oar_dnnl_engine(), c->k[which]->data);
    if (ds == dnnl_success) ds = dnnl_memory_create(&m[2], &p->y, oar_dnnl_engine(), acc);
    if (ds == dnnl_success && p->scratch) ds = dnnl_memory_desc_init_by_tag(&smd, 1, sd, dnnl_u8, dnnl_x);
    if (ds == dnnl_success && p->scratch) ds = dnnl_memory_create(&m[3], &smd, oar_dnnl_engine(), scratch);
    if (ds != dnnl_success) rc = oar_dnnl_fail("qconv2d", ds);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, m[0]}, {DNNL_ARG_WEIGHTS, m[1]}, {DNNL_ARG_DST, m[2]},
                               {DNNL_ARG_SCRATCHPAD, m[3]}};
    if (rc == OAR_OK) rc = run_prim(p->conv, s, p->scratch ? 4 : 3, args);
    if (rc == OAR_OK && (ds = dnnl_stream_wait(s)) != dnnl_success) rc = oar_dnnl_fail("qconv2d", ds);
    for (int j = 0; j < 4; j++)
        if (m[j]) dnnl_memory_destroy(m[j]);
    if (s) dnnl_stream_destroy(s);
    const int32_t *wsum = pack_wsum(p, c->k[which]);
    if (rc == OAR_OK && c->nhwc && oar_cpu_use_vnni()) epilogue_nhwc(c, acc, b0, k->n, c->sub[which]);
    else if (rc == OAR_OK && c->nhwc) epilogue_nhwc_avx2(c, acc, b0, k->n, c->sub[which]);
    else if (rc == OAR_OK && oar_cpu_use_vnni()) epilogue(c, acc, b0, k->n, wsum);
    else if (rc == OAR_OK) epilogue_avx2(c, acc, b0, k->n, wsum);
    return rc;
}

/* The zero point's frame around each of the n images of xf: rows above and below, then the
 * columns left and right of each image row (the transposes write only inside it). */
static void frame(const qcall *c, uint8_t *xf, int64_t n) {
    const oar_qconv_geom *g = &c->g;
    int64_t hp = g->h + 2 * g->ph, wp = g->w + 2 * g->pw;
    uint8_t pad = (uint8_t)c->xzp;
    size_t row = (size_t)(wp * g->c), side = (size_t)(g->pw * g->c);
    for (int64_t b = 0; b < n; b++)
        for (int64_t y = 0; y < hp; y++) {
            uint8_t *r = xf + (b * hp + y) * row;
            if (y < g->ph || y >= g->ph + g->h) {
                memset(r, pad, row);
            } else if (side) {
                memset(r, pad, side);
                memset(r + row - side, pad, side);
            }
        }
}

/* chunks [begin, end) on one thread, through one set of buffers */
static void run_chunks(void *ctx, int64_t begin, int64_t end) {
    qcall *c = ctx;
    const oar_qconv_geom *g = &c->g;
    oar_dnnl_one_omp_thread();
    size_t scratch_bytes = c->p[0]->scratch;
    if (c->p[1] && c->p[1]->scratch > scratch_bytes) scratch_bytes = c->p[1]->scratch;
    bool framed = !c->nhwc || g->ph || g->pw; /* else the input is read in place */
    size_t xbytes = framed ? (size_t)(c->cn * (g->h + 2 * g->ph) * (g->w + 2 * g->pw) * g->c) : 1;
    size_t ybytes = sizeof(int32_t) * (size_t)(c->cn * g->oh * g->ow * g->o);
    uint8_t *xf = oar_alloc(xbytes);
    int32_t *acc = oar_alloc(ybytes);
    void *scratch = scratch_bytes ? oar_alloc(scratch_bytes) : NULL;
    oar_status rc = OAR_OK;
    if (!xf || !acc || (scratch_bytes && !scratch))
        rc = oar_error(OAR_ERR_OOM, "qconv2d: out of memory for the framed input and int32 sums (%zu + %zu bytes)",
                       xbytes, ybytes);
    if (rc == OAR_OK && framed) frame(c, xf, c->cn);
    for (int64_t i = begin; i < end && rc == OAR_OK; i++) rc = run_chunk(c, i, xf, acc, scratch);
    oar_status ok = OAR_OK;
    if (rc != OAR_OK) __atomic_compare_exchange_n(&c->st, &ok, rc, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    oar_free(xf, xbytes);
    oar_free(acc, ybytes);
    oar_free(scratch, scratch_bytes);
}

/* The primitives of x's parts (references the caller drops with release); false when oneDNN
 * has no exact int8 kernel for them. */
static bool plan(qcall *c, oar_tensor *const *in, const oar_attr *a) {
    if (!oar_cpu_has_avx2() || !oar_dnnl_usable() ||
        (c->nhwc ? oar_qconv_nhwc_geom_get : oar_qconv_geom_get)(in[QL_X], in[QL_W], a, &c->g) != OAR_OK)
        return false;
    const oar_qconv_geom *g = &c->g;
    if (g->n < 1) return false; /* an empty batch: the other kernels write nothing just as well */
    /* few channels (LeNet's 1->6->16, a first conv on grey images): the direct kernels are
     * faster (LeNet batch 32 with VNNI: 0.67 against 0.93-0.97 ms of CPU time per call; the
     * AVX2 one, qconv_direct_avx2.c, ranks above this kernel and takes them itself), except
     * strided stems with 16+ outputs (the rule's comment) */
    if (!c->nhwc && oar_qconv_direct_takes(oar_cpu_use_vnni(), g->c / g->groups, g->o / g->groups, g->sh * g->sw))
        return false;
    int64_t per_image = g->oh * g->ow * g->o * (int64_t)sizeof(int32_t);
    c->cn = CHUNK_BYTES / per_image < 1 ? 1 : CHUNK_BYTES / per_image;
    c->cn = c->cn < g->n ? c->cn : g->n;
    c->chunks = (g->n + c->cn - 1) / c->cn, c->rem = g->n - (c->chunks - 1) * c->cn;
    for (int i = 0; i < 2; i++) {
        int64_t n = i ? c->rem : c->cn;
        if (i == 1 && c->rem == c->cn) break;
        qkey k = {.n = n, .c = g->c, .h = g->h, .w = g->w, .ph = g->ph, .pw = g->pw, .o = g->o, .kh = g->kh,
                  .kw = g->kw, .oh = g->oh, .ow = g->ow, .sh = g->sh, .sw = g->sw, .dh = g->dh, .dw = g->dw,
                  .groups = g->groups, .s8 = in[QL_X]->dtype == OAR_I8};
        c->p[i] = oar_prim_cache_get(&g_cache, &k);
        /* inexact code where oar has VNNI (oneDNN capped lower): the direct VNNI kernel is the one */
        if (!c->p[i] || !c->p[i]->conv || (!c->p[i]->exact && oar_cpu_use_vnni())) return false;
    }
    return true;
}

static void release(qcall *c) {
    free(c->zeros);
    for (int i = 0; i < 2; i++) {
        free(c->sub[i]);
        oar_packed_put(c->k[i]);
        if (c->p[i]) oar_prim_cache_put(&g_cache, c->p[i]);
    }
}

/* nhwc: each packed weight's per-channel corrections, and zeros for a missing bias */
static oar_status nhwc_tables(qcall *c) {
    int64_t o = c->g.o;
    if (!(c->zeros = calloc((size_t)o, sizeof(float))))
        return oar_error(OAR_ERR_OOM, "qconv2d_nhwc: out of memory for %lld channels", (long long)o);
    for (int i = 0; i < 2; i++) {
        if (!c->k[i]) continue;
        const int32_t *wsum = pack_wsum(c->p[i], c->k[i]);
        if (!(c->sub[i] = malloc(sizeof(int32_t) * (size_t)o)))
            return oar_error(OAR_ERR_OOM, "qconv2d_nhwc: out of memory for %lld channels", (long long)o);
        for (int64_t j = 0; j < o; j++) c->sub[i][j] = (int32_t)((uint32_t)c->xzp * (uint32_t)wsum[j]);
    }
    return OAR_OK;
}

static oar_status qconv_run(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                            const oar_attr *a, bool nhwc) {
    qcall c = {.nhwc = nhwc};
    oar_status st = OAR_OK;
    if (!plan(&c, in, a)) {
        release(&c);
        return oar_error(OAR_ERR_UNSUPPORTED, "%s: oneDNN has no exact int8 kernel for these inputs",
                         nhwc ? "qconv2d_nhwc" : "qconv2d");
    }
    if ((st = (nhwc ? oar_qepilogue_init_nhwc : oar_qepilogue_init)(&c.e, in, out[0], a + 4)) != OAR_OK) {
        release(&c);
        return st;
    }
    c.x = (const uint8_t *)oar_tensor_ptr(in[QL_X]);
    c.res = in[QL_RES] && !c.e.qr.on ? (const float *)oar_tensor_ptr(in[QL_RES]) : NULL;
    c.rq = c.e.qr.on ? (const uint8_t *)oar_tensor_ptr(in[QL_RES]) : NULL;
    c.out = oar_tensor_ptr(out[0]);
    c.xzp = (int32_t)oar_dtypes[in[QL_XZP]->dtype].load_i64(oar_tensor_ptr(in[QL_XZP]));
    bool exact = true;
    for (int i = 0; i < 2 && st == OAR_OK; i++)
        if (c.p[i] && (c.k[i] = pack_get(c.p[i], in[QL_W], &st)) && !c.p[i]->exact && !(c.k[i]->flags & PACK_W7))
            exact = false;
    if (st == OAR_OK && !exact) { /* 8-bit weights on code that would saturate: the exact GEMM */
        oar_qepilogue_free(&c.e);
        release(&c);
        return (nhwc ? oar_qconv_gemm_nhwc : oar_qconv_gemm)(in, out, a, oar_cpu_use_vnni());
    }
    if (st == OAR_OK && nhwc) st = nhwc_tables(&c);
    if (st == OAR_OK) oar_parallel_for(c.chunks, 1, run_chunks, &c);
    if (st == OAR_OK) st = c.st;
    oar_qepilogue_free(&c.e);
    release(&c);
    return st;
}

static oar_status qconv_dnnl(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                             const oar_attr *a) {
    return qconv_run(ctx, in, n_in, out, n_out, a, false);
}
static oar_status qconv_dnnl_nhwc(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                  int n_out, const oar_attr *a) {
    return qconv_run(ctx, in, n_in, out, n_out, a, true);
}

static bool supports_layout(oar_tensor *const *in, const oar_attr *a, bool nhwc) {
    qcall c = {.nhwc = nhwc};
    bool ok = plan(&c, in, a);
    release(&c);
    return ok;
}
static bool supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in, (void)out, (void)n_out;
    return supports_layout(in, a, false);
}
static bool supports_nhwc(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in, (void)out, (void)n_out;
    return supports_layout(in, a, true);
}

void oar_cpu_register_qconv_dnnl(void) {
    oar_register_kernel(OAR_OP_qconv2d, (oar_kernel_entry){.device = OAR_CPU,
                                                           .dtypes = OAR_DTYPE_BIT(OAR_U8) | OAR_DTYPE_BIT(OAR_I8),
                                                           .impl = "onednn-int8", .priority = 40, .fn = qconv_dnnl,
                                                           .supports = supports});
    oar_register_kernel(OAR_OP_qconv2d_nhwc, (oar_kernel_entry){.device = OAR_CPU,
                                                                .dtypes = OAR_DTYPE_BIT(OAR_U8) | OAR_DTYPE_BIT(OAR_I8),
                                                                .impl = "onednn-int8", .priority = 40,
                                                                .fn = qconv_dnnl_nhwc, .supports = supports_nhwc});
}
#else
void oar_cpu_register_qconv_dnnl(void) {}
#endif
