/* qconv2d on AVX2 CPUs without VNNI for convolutions with few channels (LeNet's 1 -> 6 -> 16,
 * a first conv on RGB or grey images): output positions in the vector lanes, as the VNNI
 * direct kernel (qconv_vnni.c) does with vpdpbusd. oneDNN's int8 code and the GEMM put output
 * channels in the lanes, which 6 channels leave mostly idle, and then transpose their NHWC sums
 * back to NCHW (the epilogue); here the sums of 8 consecutive positions of one channel come
 * out of one register and the epilogue (qepilogue_avx2.h) stores 8 consecutive NCHW outputs.
 *
 * Per image and group, 4 consecutive taps of each position are interleaved into one 32-bit
 * lane; vpmaddubsw multiplies 8 positions' u8 taps by the channel's 4 s8 weight bytes
 * (broadcast) into two 16-bit pair sums per lane, and vpmaddwd by ones adds the pair into
 * int32. A pair sum saturates in general (2 * 255 * 127 > 32767), but not with 7-bit weights
 * within [-64, 63] (2 * 255 * -64 = -32640): oar_quant_fast_weight_bits picks those without
 * VNNI. 8-bit weights (checked once, when the weights are packed) go to the exact GEMM. With a
 * row stride of 1, each input plane is copied kw times, shifted by each kernel column and cut
 * to the output's width (zero-point padded), so that every tap's values over the whole output
 * are one contiguous run of one of those planes: no unfolding, and no wasted lanes (the VNNI
 * kernel's grid as wide as the padded input wastes (kw - 1) / (w + 2 pw) of them: 29% on
 * LeNet's second conv). Otherwise the taps are unfolded row by row. s8 data is flipped to u8
 * and the shift, with the zero point, is taken back with the weight row sums; padding holds the
 * zero point. */
#include "kernels/cpu/cpu_kernels.h"
#include "ops/quant.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

bool oar_qconv_direct_takes(bool vnni, int64_t cg, int64_t og, int64_t stride) {
    (void)vnni; /* the same rule on both: oneDNN's kernels vectorize over 16 channels */
    bool stem = stride > 1 && og >= 16;
    return (cg < 16 || og < 16) && !stem;
}

#if defined(__x86_64__) || defined(_M_X64)
#include "kernels/cpu/qepilogue_avx2.h"

#define AVX2 __attribute__((target("avx2,fma")))
#define OB 4 /* output channels per tile */
#define PV 2 /* 8-position vectors per tile */

typedef struct qd2 {
    const oar_qconv_geom *g;
    const oar_qepilogue *e;
    const uint8_t *x;
    const int8_t *w4;    /* [O][kq * 4] */
    const int32_t *wsum; /* [O] */
    const float *res;
    char *out;
    int64_t cg, og, k, kq, p;
    int64_t pp, hp; /* pp: positions computed (p rounded up to 16); hp: padded input rows */
    bool shifted;   /* row stride 1: taps are runs of the shifted planes */
    uint8_t pad, flip;
    int32_t corr; /* zero point + shift */
} qd2;

/* dst[i] = src[i] ^ flip */
static void copy_flip(uint8_t *dst, const uint8_t *src, int64_t n, uint8_t flip) {
    if (!flip) {
        memcpy(dst, src, (size_t)n);
        return;
    }
    for (int64_t i = 0; i < n; i++) dst[i] = src[i] ^ flip;
}

/* Unfolded rows (stride > 1): row t (tap k0 + t) holds, for every output position, the byte it
 * reads, or the zero point's byte outside the image. */
static void unfold_rows(const qd2 *d, const uint8_t *xg, int64_t k0, int nrows, uint8_t *rows) {
    const oar_qconv_geom *g = d->g;
    for (int t = 0; t < 4; t++) {
        uint8_t *r = rows + t * d->pp;
        memset(r, d->pad, (size_t)d->pp);
        if (t >= nrows) continue; /* taps past K: their weights are zero */
        int64_t k = k0 + t, c = k / (g->kh * g->kw), ky = k / g->kw % g->kh, kx = k % g->kw;
        const uint8_t *plane = xg + c * g->h * g->w;
        for (int64_t oy = 0; oy < g->oh; oy++) {
            int64_t iy = oy * g->sh - g->ph + ky * g->dh;
            if (iy < 0 || iy >= g->h) continue;
            for (int64_t ox = 0; ox < g->ow; ox++) {
                int64_t ix = ox * g->sw - g->pw + kx * g->dw;
                if (ix >= 0 && ix < g->w) r[oy * g->ow + ox] = plane[iy * g->w + ix] ^ d->flip;
            }
        }
    }
}

/* Four runs of pp bytes -> [pp][4]: byte t of position i from run t. */
AVX2 static void interleave4(const uint8_t *const r[4], int64_t pp, uint8_t *dst) {
    for (int64_t i = 0; i < pp; i += 16) {
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

/* The shifted planes of one image and group: plane (c, kx) has hp rows of ow bytes, byte
 * (y, ox) the input's (y - ph, ox * sw + kx * dw - pw) flipped to u8, or the zero point's byte
 * outside the image; then a tail of pad bytes for the runs that start late in the last plane.
 * Tap (c, ky, kx) over all outputs is then the run of p bytes from row ky * dh of plane (c, kx). */
static void shift_planes(const qd2 *d, const uint8_t *xg, uint8_t *dst, int64_t tail) {
    const oar_qconv_geom *g = d->g;
    int64_t plane = d->hp * g->ow;
    memset(dst, d->pad, (size_t)(d->cg * g->kw * plane + tail));
    for (int64_t c = 0; c < d->cg; c++)
        for (int64_t kx = 0; kx < g->kw; kx++) {
            int64_t off = kx * g->dw - g->pw; /* ix = ox * sw + off, inside the row for ox in [lo, hi) */
            int64_t lo = off >= 0 ? 0 : (-off + g->sw - 1) / g->sw;
            int64_t hi = g->w - off > 0 ? (g->w - off + g->sw - 1) / g->sw : 0;
            hi = hi > g->ow ? g->ow : hi;
            if (lo >= hi) continue;
            uint8_t *pl = dst + (c * g->kw + kx) * plane;
            for (int64_t y = 0; y < g->h; y++) {
                const uint8_t *src = xg + (c * g->h + y) * g->w + off;
                uint8_t *row = pl + (y + g->ph) * g->ow;
                if (g->sw == 1) copy_flip(row + lo, src + lo, hi - lo, d->flip);
                else
                    for (int64_t ox = lo; ox < hi; ox++) row[ox] = src[ox * g->sw] ^ d->flip;
            }
        }
}

/* Output channels [o0, o0 + nb) x position vectors [v0, v0 + nv) of image b, group gr. */
AVX2 static inline __attribute__((always_inline)) void tile(const qd2 *d, const uint8_t *col, int64_t b, int64_t gr,
                                                            int64_t o0, int nb, int64_t v0, int nv) {
    __m256i a[OB][PV];
    for (int i = 0; i < OB; i++)
        for (int j = 0; j < PV; j++) a[i][j] = _mm256_setzero_si256();
    const int32_t *wr[OB];
    for (int i = 0; i < OB; i++) wr[i] = (const int32_t *)(d->w4 + (gr * d->og + o0 + (i < nb ? i : 0)) * d->kq * 4);
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t q = 0; q < d->kq; q++) {
        __m256i xv[PV];
        for (int j = 0; j < nv; j++) xv[j] = _mm256_loadu_si256((const __m256i *)(col + (q * d->pp + (v0 + j) * 8) * 4));
        for (int i = 0; i < nb; i++) {
            __m256i wv = _mm256_set1_epi32(wr[i][q]);
            for (int j = 0; j < nv; j++)
                a[i][j] = _mm256_add_epi32(a[i][j], _mm256_madd_epi16(_mm256_maddubs_epi16(xv[j], wv), ones));
        }
    }
    const oar_qconv_geom *g = d->g;
    for (int i = 0; i < nb; i++) {
        int64_t ch = gr * d->og + o0 + i;
        int32_t sub = (int32_t)((uint32_t)d->corr * (uint32_t)d->wsum[ch]);
        for (int j = 0; j < nv; j++) {
            int64_t p0 = (v0 + j) * 8, n = d->p - p0 < 8 ? d->p - p0 : 8;
            oar_qepilogue8(d->e, a[i][j], sub, ch, d->res, d->out, (b * g->o + ch) * d->p + p0, (int)n);
        }
    }
}

/* tile with nb and nv constants, so that its accumulators stay in registers */
AVX2 static void tile_any(const qd2 *d, const uint8_t *col, int64_t b, int64_t gr, int64_t o0, int nb, int64_t v0,
                          int nv) {
#define TILE_CASE(NBC, NVC) \
    case NBC * 8 + NVC: tile(d, col, b, gr, o0, NBC, v0, NVC); break;
#define TILE_ROW(NBC) TILE_CASE(NBC, 1) TILE_CASE(NBC, 2)
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

typedef struct qd2_task {
    const qd2 *d;
    oar_status st;
} qd2_task;

/* The shifted planes' tail: the runs of pp bytes from the last plane's rows end within it. */
static int64_t shift_tail(const qd2 *d) { return d->pp + 64; }

/* tasks [tb, te) of (image, group): the taps over the grid into col, then every tile */
AVX2 static void run_tasks(void *ctx, int64_t tb, int64_t te) {
    qd2_task *t = ctx;
    const qd2 *d = t->d;
    const oar_qconv_geom *g = d->g;
    int64_t scratch = d->shifted ? d->cg * g->kw * d->hp * g->ow + shift_tail(d) : 4 * d->pp;
    uint8_t *col = malloc((size_t)(d->kq * d->pp * 4 + scratch + d->pp));
    if (!col) {
        t->st = OAR_ERR_OOM;
        return;
    }
    uint8_t *work = col + d->kq * d->pp * 4, *padrow = work + scratch;
    memset(padrow, d->pad, (size_t)d->pp);
    for (int64_t task = tb; task < te; task++) {
        int64_t b = task / g->groups, gr = task % g->groups;
        const uint8_t *xg = d->x + (b * g->c + gr * d->cg) * g->h * g->w;
        if (d->shifted) shift_planes(d, xg, work, shift_tail(d));
        for (int64_t q = 0; q < d->kq; q++) {
            int64_t left = d->k - 4 * q;
            const uint8_t *r[4];
            if (!d->shifted) {
                unfold_rows(d, xg, 4 * q, left < 4 ? (int)left : 4, work);
                for (int i = 0; i < 4; i++) r[i] = work + i * d->pp;
            } else {
                for (int i = 0; i < 4; i++) {
                    int64_t k = 4 * q + i, c = k / (g->kh * g->kw), ky = k / g->kw % g->kh, kx = k % g->kw;
                    r[i] = i < left ? work + ((c * g->kw + kx) * d->hp + ky * g->dh) * g->ow : padrow;
                }
            }
            interleave4(r, d->pp, col + q * d->pp * 4);
        }
        int64_t nvec = (d->p + 7) / 8;
        for (int64_t o0 = 0; o0 < d->og; o0 += OB) {
            int nb = (int)(d->og - o0 < OB ? d->og - o0 : OB);
            for (int64_t v0 = 0; v0 < nvec; v0 += PV)
                tile_any(d, col, b, gr, o0, nb, v0, (int)(nvec - v0 < PV ? nvec - v0 : PV));
        }
    }
    free(col);
}

static oar_status qconv_direct_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                    int n_out, const oar_attr *a) {
    (void)ctx, (void)n_in, (void)n_out;
    oar_qconv_geom g;
    oar_status st = oar_qconv_geom_get(in[QL_X], in[QL_W], a, &g);
    if (st != OAR_OK) return st;
    int64_t k = g.c / g.groups * g.kh * g.kw;
    oar_qweight_id wid = oar_qweight_id_of(in[QL_W], 0);
    oar_qpacked *pk = oar_qpacked_get(OAR_QLAYOUT_ROWS4, (const int8_t *)oar_tensor_ptr(in[QL_W]), &wid, g.o, k);
    if (!pk) return oar_error(OAR_ERR_OOM, "qconv2d: out of memory for packed weights");
    if (!pk->w7) { /* 8-bit weights would saturate vpmaddubsw's pair sums: the exact GEMM */
        oar_qpacked_put(pk);
        return oar_qconv_gemm(in, out, a, false);
    }
    oar_qepilogue e;
    if ((st = oar_qepilogue_init(&e, in, out[0], a + 4)) != OAR_OK) {
        oar_qpacked_put(pk);
        return st;
    }
    int32_t xzp = (int32_t)oar_dtypes[in[QL_XZP]->dtype].load_i64(oar_tensor_ptr(in[QL_XZP]));
    bool s8 = in[QL_X]->dtype == OAR_I8;
    qd2 d = {.g = &g, .e = &e, .x = (const uint8_t *)oar_tensor_ptr(in[QL_X]), .cg = g.c / g.groups,
             .og = g.o / g.groups, .p = g.oh * g.ow, .flip = s8 ? 0x80 : 0, .k = k, .kq = (k + 3) / 4,
             .res = in[QL_RES] ? (const float *)oar_tensor_ptr(in[QL_RES]) : NULL, .out = oar_tensor_ptr(out[0]),
             .w4 = pk->wp, .wsum = pk->wsum};
    d.pad = (uint8_t)(s8 ? xzp + 128 : xzp), d.corr = xzp + (s8 ? 128 : 0);
    d.shifted = g.sh == 1, d.hp = g.h + 2 * g.ph, d.pp = (d.p + 15) / 16 * 16;
    qd2_task t = {&d, OAR_OK};
    int64_t tasks = g.n * g.groups;
    if (tasks) oar_parallel_for(tasks, 1 + (1 << 16) / (d.og * d.pp * d.k + 1), run_tasks, &t);
    oar_qpacked_put(pk);
    oar_qepilogue_free(&e);
    if (t.st != OAR_OK)
        return oar_error(t.st, "qconv2d: out of memory for the unfolded input (%lld x %lld bytes)", (long long)d.kq * 4,
                         (long long)d.pp);
    return OAR_OK;
}

static bool supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in, (void)out, (void)n_out;
    oar_qconv_geom g;
    return oar_cpu_has_avx2() && !oar_cpu_use_vnni() && oar_qconv_geom_get(in[QL_X], in[QL_W], a, &g) == OAR_OK &&
           oar_qconv_direct_takes(false, g.c / g.groups, g.o / g.groups, g.sh * g.sw);
}

void oar_cpu_register_qconv_direct_avx2(void) {
    oar_register_kernel(OAR_OP_qconv2d, (oar_kernel_entry){.device = OAR_CPU,
                                                           .dtypes = OAR_DTYPE_BIT(OAR_U8) | OAR_DTYPE_BIT(OAR_I8),
                                                           .impl = "avx2-direct", .priority = 45,
                                                           .fn = qconv_direct_avx2, .supports = supports});
}
#else
void oar_cpu_register_qconv_direct_avx2(void) {}
#endif
