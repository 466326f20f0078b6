/* qconv2d on AVX-512 VNNI with output positions in the vector lanes (priority above the
 * im2col + GEMM kernel of qgemm_x86.c, which it replaces on VNNI CPUs).
 *
 * The GEMM form puts output channels in the lanes; LeNet's first conv has 6 of them, so 10 of
 * 16 lanes idle, and its NCHW output is then written one element at a time. Here, per image and
 * group, the input is unfolded into col[K/4][P][4] (4 consecutive taps of one position per
 * 32-bit lane), and vpdpbusd multiplies 16 positions' u8 taps by 4 s8 weight bytes broadcast
 * from the output channel's row: sums of 16 consecutive positions of one channel, which the
 * epilogue (qepilogue_avx512.h) turns into 16 consecutive NCHW outputs with vector stores, bit
 * for bit the reference's (the sweep checks).
 * s8 activations are shifted to u8 by 128 and the shift, with the zero point, is taken back
 * with the weight row sums; padding holds the zero point. Weights are packed once (the cache of
 * qgemm_x86.c, layout ROWS4). */
#include "kernels/cpu/cpu_kernels.h"
#include "ops/quant.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(_M_X64)
#include "kernels/cpu/qepilogue_avx512.h"

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vnni,avx512vl,fma")))
#define OB 4 /* output channels per tile */
#define PV 4 /* 16-position vectors per tile */

typedef struct qdirect {
    const oar_qconv_geom *g;
    const oar_qepilogue *e;
    const uint8_t *x;
    const int8_t *w4;    /* [O][kq * 4] */
    const int32_t *wsum; /* [O] */
    const float *res;
    char *out;
    int64_t cg, og, k, kq, p;
    /* The grid of computed positions: rows of wg (>= ow) columns, pp of them in all (a multiple
     * of 16). Stride 1: wg is the padded input's width, so each tap's values over the grid are
     * one contiguous run of the padded plane (no unfolding); else wg = ow. Per 16-position
     * vector: which lanes are real outputs, and the output index of the first. */
    int64_t wg, pp, hp, wp; /* hp, wp: the padded plane (stride 1) */
    bool view;
    const uint16_t *vmask;
    const int64_t *vstart;
    uint8_t pad, flip;
    int32_t corr; /* zero point + shift */
} qdirect;

static inline __mmask64 lanes_below(int64_t n) { return n >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << n) - 1; }

/* One output row of a tap: dst[ox] = src[ox * sw + off] for ox in [lo, hi), the pad byte
 * elsewhere; bytes flipped to u8 for s8 data. Rows are short (LeNet: 28 and 10 bytes), so
 * stride 1 goes 64 lanes at a time with masked loads and stores rather than libc calls;
 * masked-off lanes read nothing, so the window may hang over the row's ends. */
VNNI static void unfold_row(uint8_t *dst, const uint8_t *src, int64_t ow, int64_t sw, int64_t off, int64_t lo,
                            int64_t hi, uint8_t pad, uint8_t flip) {
    if (sw != 1) {
        for (int64_t ox = 0; ox < ow; ox++) dst[ox] = ox >= lo && ox < hi ? (uint8_t)(src[ox * sw + off] ^ flip) : pad;
        return;
    }
    __m512i padv = _mm512_set1_epi8((char)pad), flipv = _mm512_set1_epi8((char)flip);
    for (int64_t c0 = 0; c0 < ow; c0 += 64) {
        int64_t n = ow - c0 < 64 ? ow - c0 : 64, a = lo > c0 ? lo - c0 : 0, b = hi - c0 < n ? hi - c0 : n;
        __mmask64 valid = b > a ? lanes_below(b) & ~lanes_below(a) : 0;
        __m512i v = _mm512_maskz_loadu_epi8(valid, src + off + c0);
        v = _mm512_mask_blend_epi8(valid, padv, _mm512_xor_si512(v, flipv));
        _mm512_mask_storeu_epi8(dst + c0, lanes_below(n), v);
    }
}

/* Plain unfolded rows: row t (tap k0 + t) holds, for every output position, the input byte it
 * reads (flipped to u8 for s8 data), or the zero point's byte outside the image. */
VNNI static void unfold_rows(const qdirect *d, const uint8_t *xg, int64_t k0, int nrows, uint8_t *rows) {
    const oar_qconv_geom *g = d->g;
    const uint8_t pad = d->pad, flip = d->flip;
    for (int t = 0; t < 4; t++) {
        uint8_t *r = rows + t * d->pp;
        if (t >= nrows) { /* taps past K: weights are zero there, any byte will do */
            memset(r, pad, (size_t)d->pp);
            continue;
        }
        int64_t k = k0 + t, c = k / (g->kh * g->kw), ky = k / g->kw % g->kh, kx = k % g->kw;
        const uint8_t *plane = xg + c * g->h * g->w;
        int64_t off = kx * g->dw - g->pw; /* ix = ox * sw + off, inside the row for ox in [lo, hi) */
        int64_t lo = off >= 0 ? 0 : (-off + g->sw - 1) / g->sw, hi = g->w - off > 0 ? (g->w - off + g->sw - 1) / g->sw : 0;
        hi = hi > g->ow ? g->ow : hi;
        lo = lo > hi ? hi : lo;
        for (int64_t oy = 0; oy < g->oh; oy++) {
            int64_t iy = oy * g->sh - g->ph + ky * g->dh;
            bool inside = iy >= 0 && iy < g->h;
            unfold_row(r + oy * g->ow, plane + (inside ? iy : 0) * g->w, g->ow, g->sw, off, inside ? lo : 0,
                       inside ? hi : 0, pad, flip);
        }
        memset(r + d->p, pad, (size_t)(d->pp - d->p));
    }
}

/* Four runs of pp bytes -> [pp][4]: byte t of position i from run t (SSE2 unpacks). */
VNNI static void interleave4(const uint8_t *const r[4], int64_t pp, uint8_t *dst) {
    int64_t i = 0;
    /* 64 positions at a time: the same unpacks in each 128-bit lane (lane L: positions 16L..),
     * giving per lane 4 blocks of 4 positions; a 4 x 4 transpose of the 128-bit blocks puts
     * them in position order */
    for (; i + 64 <= pp; i += 64) {
        __m512i a = _mm512_loadu_si512(r[0] + i), b = _mm512_loadu_si512(r[1] + i);
        __m512i c = _mm512_loadu_si512(r[2] + i), e = _mm512_loadu_si512(r[3] + i);
        __m512i ab0 = _mm512_unpacklo_epi8(a, b), ab1 = _mm512_unpackhi_epi8(a, b);
        __m512i ce0 = _mm512_unpacklo_epi8(c, e), ce1 = _mm512_unpackhi_epi8(c, e);
        __m512i o0 = _mm512_unpacklo_epi16(ab0, ce0), o1 = _mm512_unpackhi_epi16(ab0, ce0); /* lane L: 16L+0..3, 4..7 */
        __m512i o2 = _mm512_unpacklo_epi16(ab1, ce1), o3 = _mm512_unpackhi_epi16(ab1, ce1); /* 8..11, 12..15 */
        __m512i t0 = _mm512_shuffle_i32x4(o0, o1, 0x44), t1 = _mm512_shuffle_i32x4(o0, o1, 0xEE); /* lanes 0,1 | 2,3 */
        __m512i t2 = _mm512_shuffle_i32x4(o2, o3, 0x44), t3 = _mm512_shuffle_i32x4(o2, o3, 0xEE);
        /* t0 = [o0.L0, o0.L1, o1.L0, o1.L1], t2 = [o2.L0, o2.L1, o3.L0, o3.L1]: positions 0-15 are
         * o0.L0 o1.L0 o2.L0 o3.L0 */
        _mm512_storeu_si512(dst + 4 * i, _mm512_shuffle_i32x4(t0, t2, 0x88));
        _mm512_storeu_si512(dst + 4 * i + 64, _mm512_shuffle_i32x4(t0, t2, 0xDD));
        _mm512_storeu_si512(dst + 4 * i + 128, _mm512_shuffle_i32x4(t1, t3, 0x88));
        _mm512_storeu_si512(dst + 4 * i + 192, _mm512_shuffle_i32x4(t1, t3, 0xDD));
    }
    for (; i < pp; i += 16) {
        __m128i a = _mm_loadu_si128((const __m128i *)(r[0] + i)), b = _mm_loadu_si128((const __m128i *)(r[1] + i));
        __m128i c = _mm_loadu_si128((const __m128i *)(r[2] + i)), e = _mm_loadu_si128((const __m128i *)(r[3] + i));
        __m128i ab0 = _mm_unpacklo_epi8(a, b), ab1 = _mm_unpackhi_epi8(a, b);
        __m128i ce0 = _mm_unpacklo_epi8(c, e), ce1 = _mm_unpackhi_epi8(c, e);
        _mm_storeu_si128((__m128i *)(dst + 4 * i), _mm_unpacklo_epi16(ab0, ce0));
        _mm_storeu_si128((__m128i *)(dst + 4 * i + 16), _mm_unpackhi_epi16(ab0, ce0));
        _mm_storeu_si128((__m128i *)(dst + 4 * i + 32), _mm_unpacklo_epi16(ab1, ce1));
        _mm_storeu_si128((__m128i *)(dst + 4 * i + 48), _mm_unpackhi_epi16(ab1, ce1));
    }
}

/* The cg input planes of one image and group, zero-point padded (and flipped to u8), with a
 * tail of pad bytes for the runs that start late in the last plane. */
VNNI static void pad_planes(const qdirect *d, const uint8_t *xg, uint8_t *dst, int64_t tail) {
    const oar_qconv_geom *g = d->g;
    int64_t plane = d->hp * d->wp;
    memset(dst, d->pad, (size_t)(d->cg * plane + tail));
    for (int64_t c = 0; c < d->cg; c++)
        for (int64_t y = 0; y < g->h; y++)
            unfold_row(dst + c * plane + (y + g->ph) * d->wp + g->pw, xg + (c * g->h + y) * g->w, g->w, 1, 0, 0, g->w,
                       d->pad, d->flip);
}

VNNI static inline __attribute__((always_inline)) void epilogue16(const qdirect *d, __m512i acc, int64_t ch, int64_t i0, __mmask16 m) {
    oar_qepilogue16(d->e, acc, (int32_t)((uint32_t)d->corr * (uint32_t)d->wsum[ch]), ch, d->res, d->out, i0, m, false);
}

/* Output channels [o0, o0 + nb) x position vectors [v0, v0 + nv) of image b, group gr. */
VNNI static inline __attribute__((always_inline)) void tile(const qdirect *d, const uint8_t *col, int64_t b, int64_t gr, int64_t o0, int nb,
                             int64_t v0, int nv) {
    __m512i a[OB][PV];
    for (int i = 0; i < OB; i++)
        for (int j = 0; j < PV; j++) a[i][j] = _mm512_setzero_si512();
    const int32_t *wr[OB];
    for (int i = 0; i < OB; i++) wr[i] = (const int32_t *)(d->w4 + (gr * d->og + o0 + (i < nb ? i : 0)) * d->kq * 4);
    for (int64_t q = 0; q < d->kq; q++) {
        __m512i xv[PV];
        for (int j = 0; j < nv; j++) xv[j] = _mm512_loadu_si512(col + (q * d->pp + (v0 + j) * 16) * 4);
        for (int i = 0; i < nb; i++) {
            __m512i wv = _mm512_set1_epi32(wr[i][q]);
            for (int j = 0; j < nv; j++) a[i][j] = _mm512_dpbusd_epi32(a[i][j], xv[j], wv);
        }
    }
    const oar_qconv_geom *g = d->g;
    for (int i = 0; i < nb; i++) {
        int64_t ch = gr * d->og + o0 + i;
        for (int j = 0; j < nv; j++)
            if (d->vmask[v0 + j]) epilogue16(d, a[i][j], ch, (b * g->o + ch) * d->p + d->vstart[v0 + j], d->vmask[v0 + j]);
    }
}

/* tile with nb and nv constants, so that its accumulators stay in registers */
VNNI static void tile_any(const qdirect *d, const uint8_t *col, int64_t b, int64_t gr, int64_t o0, int nb, int64_t v0,
                          int nv) {
#define TILE_CASE(NBC, NVC) \
    case NBC * 8 + NVC: tile(d, col, b, gr, o0, NBC, v0, NVC); break;
#define TILE_ROW(NBC) TILE_CASE(NBC, 1) TILE_CASE(NBC, 2) TILE_CASE(NBC, 3) TILE_CASE(NBC, 4)
    switch (nb * 8 + nv) {
        TILE_ROW(1)
        TILE_ROW(2)
        TILE_ROW(3)
        TILE_ROW(4)
    default: break;
    }
#undef TILE_ROW
#undef TILE_CASE
}

typedef struct qdirect_task {
    const qdirect *d;
    oar_status st;
} qdirect_task;

/* The padded planes' tail: runs of pp bytes from the last plane's taps end before it. */
static int64_t view_tail(const qdirect *d) { return (d->g->kw - 1) * d->g->dw + d->pp + 64; }

/* tasks [b, e) of (image, group): the taps over the grid into col, then every tile */
VNNI static void run_tasks(void *ctx, int64_t tb, int64_t te) {
    qdirect_task *t = ctx;
    const qdirect *d = t->d;
    const oar_qconv_geom *g = d->g;
    int64_t scratch = d->view ? d->cg * d->hp * d->wp + view_tail(d) : 4 * d->pp;
    uint8_t *col = malloc((size_t)(d->kq * d->pp * 4 + scratch + d->pp));
    if (!col) {
        t->st = OAR_ERR_OOM;
        return;
    }
    uint8_t *work = col + d->kq * d->pp * 4, *padrow = work + scratch;
    memset(padrow, d->pad, (size_t)d->pp); /* taps past K: their weights are zero */
    for (int64_t task = tb; task < te; task++) {
        int64_t b = task / g->groups, gr = task % g->groups;
        const uint8_t *xg = d->x + (b * g->c + gr * d->cg) * g->h * g->w;
        if (d->view) pad_planes(d, xg, work, view_tail(d));
        for (int64_t q = 0; q < d->kq; q++) {
            int64_t left = d->k - 4 * q;
            const uint8_t *r[4];
            if (!d->view) {
                unfold_rows(d, xg, 4 * q, left < 4 ? (int)left : 4, work);
                for (int i = 0; i < 4; i++) r[i] = work + i * d->pp;
            } else {
                for (int i = 0; i < 4; i++) {
                    int64_t k = 4 * q + i, c = k / (g->kh * g->kw), ky = k / g->kw % g->kh, kx = k % g->kw;
                    r[i] = i < left ? work + c * d->hp * d->wp + ky * g->dh * d->wp + kx * g->dw : padrow;
                }
            }
            interleave4(r, d->pp, col + q * d->pp * 4);
        }
        int64_t nvec = d->pp / 16;
        for (int64_t o0 = 0; o0 < d->og; o0 += OB) {
            int nb = (int)(d->og - o0 < OB ? d->og - o0 : OB);
            for (int64_t v0 = 0; v0 < nvec; v0 += PV)
                tile_any(d, col, b, gr, o0, nb, v0, (int)(nvec - v0 < PV ? nvec - v0 : PV));
        }
    }
    free(col);
}

static oar_status qconv_direct(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                               int n_out, const oar_attr *a) {
    oar_qconv_geom g;
    oar_qepilogue e;
    oar_status st = oar_qconv_geom_get(in[QL_X], in[QL_W], a, &g);
    if (st != OAR_OK || (st = oar_qepilogue_init(&e, in, out[0], a + 4)) != OAR_OK) return st;
    int32_t xzp = (int32_t)oar_dtypes[in[QL_XZP]->dtype].load_i64(oar_tensor_ptr(in[QL_XZP]));
    bool s8 = in[QL_X]->dtype == OAR_I8;
    qdirect d = {.g = &g, .e = &e, .x = (const uint8_t *)oar_tensor_ptr(in[QL_X]), .cg = g.c / g.groups,
                 .og = g.o / g.groups, .p = g.oh * g.ow, .flip = s8 ? 0x80 : 0,
                 .res = in[QL_RES] ? (const float *)oar_tensor_ptr(in[QL_RES]) : NULL, .out = oar_tensor_ptr(out[0])};
    d.k = d.cg * g.kh * g.kw, d.kq = (d.k + 3) / 4;
    d.pad = (uint8_t)(s8 ? xzp + 128 : xzp), d.corr = xzp + (s8 ? 128 : 0);
    d.view = g.sh == 1 && g.sw == 1, d.hp = g.h + 2 * g.ph, d.wp = g.w + 2 * g.pw;
    d.wg = d.view ? d.wp : g.ow, d.pp = (g.oh * d.wg + 15) / 16 * 16;
    int64_t nvec = d.pp / 16;
    uint16_t *vmask = malloc(sizeof(uint16_t) * (size_t)nvec);
    int64_t *vstart = malloc(sizeof(int64_t) * (size_t)nvec);
    for (int64_t v = 0; vmask && vstart && v < nvec; v++) { /* grid position p -> output (p / wg, p % wg) */
        vmask[v] = 0, vstart[v] = -1;
        for (int l = 0; l < 16; l++) {
            int64_t p = v * 16 + l, oy = p / d.wg, ox = p % d.wg;
            if (oy >= g.oh || ox >= g.ow) continue;
            vmask[v] |= (uint16_t)(1u << l);
            if (vstart[v] < 0) vstart[v] = oy * g.ow + ox;
        }
    }
    d.vmask = vmask, d.vstart = vstart;
    oar_qweight_id wid = oar_qweight_id_of(in[QL_W], 0);
    oar_qpacked *pk = oar_qpacked_get(OAR_QLAYOUT_ROWS4, (const int8_t *)oar_tensor_ptr(in[QL_W]), &wid, g.o, d.k);
    if (!pk || !vmask || !vstart) {
        oar_qpacked_put(pk);
        free(vmask);
        free(vstart);
        oar_qepilogue_free(&e);
        return oar_error(OAR_ERR_OOM, "qconv2d: out of memory for packed weights");
    }
    d.w4 = pk->wp, d.wsum = pk->wsum;
    qdirect_task t = {&d, OAR_OK};
    int64_t tasks = g.n * g.groups;
    if (tasks) oar_parallel_for(tasks, 1 + (1 << 16) / (g.o / g.groups * d.pp * d.k + 1), run_tasks, &t);
    oar_qpacked_put(pk);
    free(vmask);
    free(vstart);
    oar_qepilogue_free(&e);
    if (t.st != OAR_OK)
        return oar_error(t.st, "qconv2d: out of memory for the unfolded input (%lld x %lld bytes)", (long long)d.kq * 4,
                         (long long)d.pp);
    return OAR_OK;
}

static bool supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    return oar_cpu_use_vnni();
}

void oar_cpu_register_qconv_direct(void) {
    oar_register_kernel(OAR_OP_qconv2d, (oar_kernel_entry){.device = OAR_CPU,
                                                           .dtypes = OAR_DTYPE_BIT(OAR_U8) | OAR_DTYPE_BIT(OAR_I8),
                                                           .impl = "avx512-vnni-direct", .priority = 30,
                                                           .fn = qconv_direct, .supports = supports});
}
#else
void oar_cpu_register_qconv_direct(void) {}
#endif
