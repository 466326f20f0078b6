/* Direct convolutions (f32, NCHW, stride 1, dilation 1, groups 1) for small channel counts,
 * where im2col + GEMM spends its time packing and runs GEMMs with a tiny K.
 *
 * Each image is copied once into zero-padded planes of width wp = ow + kw - 1, so that output
 * (oy, ox) lies at the flat position p = oy * wp + ox and tap (ky, kx) of it reads the padded
 * input at p + ky * wp + kx: one shifted vector load per tap, no edge branches.
 *   conv2d: tiles of output channels x 16-lane vectors of positions in registers (flat runs,
 *     or one vector per short output row; columns ox >= ow are computed and dropped), or, for
 *     16 channels, one vector of channels x a block of output pixels (no dropped lanes).
 *   conv2d_grad_input: the same kernels on dy padded by k - 1 - pad with the weights flipped
 *     and transposed (a full correlation).
 *   conv2d_grad_weight: dot products of dy (laid out on the same flat grid, zero off the
 *     grid) with shifted input planes; tiles of channels x taps, each a 16-lane accumulator
 *     summed once at the end by a fixed tree (or, for 16 channels x 5 x 5, the same sums with
 *     the channels in the lanes). Images are summed in fixed chunks of CHUNK, and the chunks'
 *     results added in chunk order, so results do not depend on threads.
 * Every tile of an op does the same float operations per output, in the same order; the inner
 * loops (conv_direct_simd.h) exist for AVX-512 and AVX2+FMA and are bitwise equal.
 * Which convs they take: oar_conv_direct_takes (docs/kernels-conv.md has the measurements). */
#include "kernels/cpu/conv_direct.h"

#include "kernels/cpu/cpu_kernels.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* Images per weight-gradient chunk: fixed, so a result never depends on the thread count.
 * 8 runs the weight gradient ~5% faster than 4, but its rounding put the main job (make run,
 * seed 0) at 88.99% test accuracy, under its 89% bar; 4 gives 89.19% (seeds 0-7: 89.19-89.63,
 * mean 89.40; with 8: mean 89.36; before these kernels: 89.36). See docs/kernels-conv.md. */
#define CHUNK 4
/* Largest kernel side the rule admits (weight-gradient accumulators per kernel row). */
#define CD_MAX_K 7

/* Forward tiles: CB channels x NV vectors of flat positions (ROWS: one vector per output row),
 * or (CHAN) 16 channels x R x C output pixels. */
typedef enum { CD_FWD_6x4, CD_FWD_8x3, CD_FWD_6x1, CD_ROWS_6x2, CD_CHAN_2x10, CD_CHAN_2x12, CD_CHAN_3x8 } cd_fwd_tile;
/* Weight-gradient tiles: CB channels x T taps, or (CHAN) 16 channels x 5 x 5 taps. */
typedef enum { CD_GW_4x5, CD_GW_3x5, CD_GW_6x3, CD_GW_2x2, CD_GW_1x5, CD_GW_CHAN } cd_gw_tile;

/* A forward conv over padded planes: cin planes of `plane` floats with row stride wp; output
 * flat positions [0, pv) (fwd_positions) for co_pad channels. */
typedef struct cd_fwd {
    int64_t cin, kh, kw, wp, plane, pv, co, co_pad;
    const float *wpk;  /* [co_pad / CB][cin][kh][kw][CB], CB = 16 for the CHAN tiles */
    const float *bias; /* [co_pad], zero where there is none */
    cd_fwd_tile tile;
} cd_fwd;

/* A weight gradient: x planes as in cd_fwd, dy as co_pad rows of pv floats on the same grid. */
typedef struct cd_gw {
    int64_t cin, kh, kw, wp, plane, pv, co, co_pad;
    bool image_outer; /* loop order in the tile (same results): see gw_run */
    cd_gw_tile tile;
    const int32_t *pos, *cls; /* CHAN: grid positions by class p mod 16, class l at [cls[l], cls[l + 1]) */
} cd_gw;

#define CD512 __attribute__((target("avx512f,avx2,fma")))
#define CD256 __attribute__((target("avx2,fma")))

/* The sum of 16 lanes by one fixed tree, given the sums of lanes i and i + 8: then i + 4,
 * i + 2, i + 1 (the same in both sets, so they stay bitwise equal). */
CD256 static inline float cd_hsum8(__m256 s8) {
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

/* ---- AVX-512: one zmm per 16-lane vector */
CD512 static inline __m512 cd512_zero(void) { return _mm512_setzero_ps(); }
CD512 static inline __m512 cd512_set1(float v) { return _mm512_set1_ps(v); }
CD512 static inline __m512 cd512_load(const float *p) { return _mm512_loadu_ps(p); }
CD512 static inline void cd512_store(float *p, __m512 v) { _mm512_storeu_ps(p, v); }
CD512 static inline __m512 cd512_fma(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
CD512 static inline __m512 cd512_add(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
#define cd512_in_register(v) __asm__("" : "+v"(v))
CD512 static inline float cd512_hsum(__m512 v) {
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    return cd_hsum8(_mm256_add_ps(_mm512_castps512_ps256(v), hi));
}

#define CD_NAME(f) f##_avx512
#define CD_TARGET CD512
#define cd_vec __m512
#define cd_zero cd512_zero
#define cd_set1 cd512_set1
#define cd_load cd512_load
#define cd_store cd512_store
#define cd_fma cd512_fma
#define cd_add cd512_add
#define cd_hsum cd512_hsum
#define cd_in_register cd512_in_register
#define CD_CHAN_TILES
#include "kernels/cpu/conv_direct_simd.h"

/* ---- AVX2: a pair of ymm per 16-lane vector (lanes 0-7, 8-15) */
typedef struct { __m256 lo, hi; } cd_v8x2;
CD256 static inline cd_v8x2 cd256_zero(void) { return (cd_v8x2){_mm256_setzero_ps(), _mm256_setzero_ps()}; }
CD256 static inline cd_v8x2 cd256_set1(float v) { return (cd_v8x2){_mm256_set1_ps(v), _mm256_set1_ps(v)}; }
CD256 static inline cd_v8x2 cd256_load(const float *p) { return (cd_v8x2){_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
CD256 static inline void cd256_store(float *p, cd_v8x2 v) {
    _mm256_storeu_ps(p, v.lo);
    _mm256_storeu_ps(p + 8, v.hi);
}
CD256 static inline cd_v8x2 cd256_fma(cd_v8x2 a, cd_v8x2 b, cd_v8x2 c) {
    return (cd_v8x2){_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
#define cd256_in_register(v) __asm__("" : "+v"((v).lo), "+v"((v).hi))
CD256 static inline cd_v8x2 cd256_add(cd_v8x2 a, cd_v8x2 b) {
    return (cd_v8x2){_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)};
}
CD256 static inline float cd256_hsum(cd_v8x2 v) { return cd_hsum8(_mm256_add_ps(v.lo, v.hi)); }

#define CD_NAME(f) f##_avx2
#define CD_TARGET CD256
#define cd_vec cd_v8x2
#define cd_zero cd256_zero
#define cd_set1 cd256_set1
#define cd_load cd256_load
#define cd_store cd256_store
#define cd_fma cd256_fma
#define cd_add cd256_add
#define cd_hsum cd256_hsum
#define cd_in_register cd256_in_register
#include "kernels/cpu/conv_direct_simd.h"

/* ---- instruction set */
static int g_forced = OAR_CONV_DIRECT_AUTO;

/* Through the CPU switch, so the cap (oar_set_cpu_isa) holds for the rule, the tiles and the
 * test hook alike. */
static bool isa_available(oar_conv_direct_isa isa) {
    return isa == OAR_CONV_DIRECT_AUTO || (isa == OAR_CONV_DIRECT_AVX2 && oar_cpu_has_avx2()) ||
           (isa == OAR_CONV_DIRECT_AVX512 && oar_cpu_has_avx512());
}

int oar_conv_direct_force_isa(oar_conv_direct_isa isa) {
    if (isa != OAR_CONV_DIRECT_AUTO && isa != OAR_CONV_DIRECT_AVX2 && isa != OAR_CONV_DIRECT_AVX512) return -1;
    if (!isa_available(isa)) return -1;
    return __atomic_exchange_n(&g_forced, (int)isa, __ATOMIC_RELAXED);
}

static bool use_avx512(void) {
    int f = __atomic_load_n(&g_forced, __ATOMIC_RELAXED);
    return isa_available(OAR_CONV_DIRECT_AVX512) && (f == OAR_CONV_DIRECT_AUTO || f == OAR_CONV_DIRECT_AVX512);
}

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

static bool is_chan(cd_fwd_tile t) { return t == CD_CHAN_2x10 || t == CD_CHAN_2x12 || t == CD_CHAN_3x8; }

/* Output positions a forward tile computes: flat runs of 16 * nv, or (ROWS) nv rows of wp. */
static int64_t fwd_positions(cd_fwd_tile t, int64_t oh, int64_t wp, int nv) {
    return t == CD_ROWS_6x2 ? round_up(oh, nv) * wp : round_up(oh * wp, 16 * (int64_t)nv);
}

/* The forward tile for co channels and an oh x ow output, by least vector FMAs: the flat tile
 * that pads co least (AVX2 has one); with AVX-512, one vector per output row where rows fit
 * in 16 lanes (LeNet's conv2 grad_input: 84 against 96 vectors per tap and channel block,
 * 1.1x faster), and, with whole vectors of channels, a channel tile where it does at most 80%
 * of the others' FMAs (it also transposes its results; LeNet's conv2: 100 against 144, 1.4x
 * faster). */
static cd_fwd_tile fwd_tile_for(bool avx512, int64_t co, int64_t oh, int64_t ow, int64_t kw, int *cb, int *nv) {
    if (!avx512) return *cb = 6, *nv = 1, CD_FWD_6x1;
    int64_t wp = ow + kw - 1;
    cd_fwd_tile t = CD_FWD_6x4;
    *cb = 6, *nv = 4;
    if (round_up(co, 8) <= round_up(co, 6)) t = CD_FWD_8x3, *cb = 8, *nv = 3;
    int64_t work = round_up(co, *cb) * fwd_positions(t, oh, wp, *nv) / 16;
    if (wp >= 16 && ow <= 16 && round_up(co, 6) * round_up(oh, 2) < work)
        t = CD_ROWS_6x2, *cb = 6, *nv = 2, work = round_up(co, 6) * round_up(oh, 2);
    if (co % 16) return t;
    static const struct { cd_fwd_tile tile; int r, c; } ch[] = {{CD_CHAN_2x10, 2, 10}, {CD_CHAN_2x12, 2, 12},
                                                               {CD_CHAN_3x8, 3, 8}};
    int best = -1;
    int64_t best_work = work * 4 / 5 + 1;
    for (int i = 0; i < 3; i++) {
        int64_t w = co / 16 * round_up(oh, ch[i].r) * round_up(ow, ch[i].c);
        if (w < best_work) best = i, best_work = w;
    }
    if (best < 0) return t;
    *cb = 16, *nv = 1; /* nv: unused by the channel tiles */
    return ch[best].tile;
}

/* The weight-gradient tile: least padded work over channels x taps, ties to the first. */
static cd_gw_tile gw_tile_for(bool avx512, int64_t co, int64_t kw, int *cb, int *t) {
    /* AVX2 holds a 16-lane accumulator in two of its 16 registers: at most 5 of them */
    static const struct { cd_gw_tile tile; int cb, t; } c512[] = {{CD_GW_4x5, 4, 5}, {CD_GW_3x5, 3, 5}, {CD_GW_6x3, 6, 3}},
                                                        c256[] = {{CD_GW_1x5, 1, 5}, {CD_GW_2x2, 2, 2}};
    const __typeof__(c512[0]) *c = avx512 ? c512 : c256;
    int nc = avx512 ? 3 : 2, best = 0;
    for (int i = 1; i < nc; i++)
        if (round_up(co, c[i].cb) * round_up(kw, c[i].t) < round_up(co, c[best].cb) * round_up(kw, c[best].t)) best = i;
    return *cb = c[best].cb, *t = c[best].t, c[best].tile;
}

/* Copies c planes [sh][sw] into planes of `plane` floats with `rows` rows of wp, at offset
 * (oy, ox), clipped to them; the rest of dst is left as it is (zero). */
static void place(const float *src, int64_t c, int64_t sh, int64_t sw, float *dst, int64_t plane, int64_t rows,
                  int64_t wp, int64_t oy, int64_t ox) {
    int64_t lo = ox < 0 ? -ox : 0, hi = sw < wp - ox ? sw : wp - ox;
    if (hi <= lo) return;
    for (int64_t ch = 0; ch < c; ch++)
        for (int64_t y = 0; y < sh; y++) {
            int64_t ty = y + oy;
            if (ty < 0 || ty >= rows) continue;
            memcpy(dst + ch * plane + ty * wp + ox + lo, src + (ch * sh + y) * sw + lo, sizeof(float) * (size_t)(hi - lo));
        }
}

/* ---- forward-shaped jobs: conv2d, and grad_input as a conv of padded dy */
typedef struct fwd_job {
    cd_fwd f;
    bool avx512;
    const float *src;         /* [n][cin][sh][sw] */
    int64_t n, sh, sw, offy, offx, rows;
    float *dst;               /* [n][co][oh][ow] */
    int64_t oh, ow;
    float *scratch;           /* per part: xbuf floats of padded input, then co_pad * pv of output */
    int64_t xbuf, parts;
} fwd_job;

static void fwd_parts(void *ctx, int64_t begin, int64_t end) {
    const fwd_job *j = ctx;
    const cd_fwd *f = &j->f;
    for (int64_t part = begin; part < end; part++) {
        float *xp = j->scratch + part * (j->xbuf + f->co_pad * f->pv), *yflat = xp + j->xbuf;
        memset(xp, 0, sizeof(float) * (size_t)j->xbuf); /* the padding; place() rewrites the rest per image */
        for (int64_t n = part * j->n / j->parts; n < (part + 1) * j->n / j->parts; n++) {
            place(j->src + n * f->cin * j->sh * j->sw, f->cin, j->sh, j->sw, xp, f->plane, j->rows, f->wp, j->offy,
                  j->offx);
            float *y = j->dst + n * f->co * j->oh * j->ow;
            if (is_chan(f->tile)) { /* AVX-512 only (fwd_tile_for) */
                chan_image_avx512(f, xp, y, j->oh, j->ow);
                continue;
            }
            if (j->avx512) fwd_image_avx512(f, xp, yflat);
            else fwd_image_avx2(f, xp, yflat);
            for (int64_t c = 0; c < f->co; c++)
                for (int64_t oy = 0; oy < j->oh; oy++)
                    memcpy(y + (c * j->oh + oy) * j->ow, yflat + c * f->pv + oy * f->wp, sizeof(float) * (size_t)j->ow);
        }
    }
}

/* w(o, i, ky, kx) of the conv to run: the weight itself, or (flip) grad_input's flipped
 * transpose w[i][o][kh-1-ky][kw-1-kx]. w is [co][ci][kh][kw] of the forward conv. */
static void pack_weights(const float *w, bool flip, int64_t cout, int64_t cin, int64_t kh, int64_t kw, int cb,
                         int64_t co_pad, float *wpk) {
    int64_t taps = cin * kh * kw;
    for (int64_t o = 0; o < co_pad; o++)
        for (int64_t i = 0; i < cin; i++)
            for (int64_t ky = 0; ky < kh; ky++)
                for (int64_t kx = 0; kx < kw; kx++) {
                    float v = 0.0f;
                    if (o < cout)
                        v = flip ? w[((i * cout + o) * kh + kh - 1 - ky) * kw + kw - 1 - kx]
                                 : w[((o * cin + i) * kh + ky) * kw + kx];
                    wpk[(o / cb * taps + (i * kh + ky) * kw + kx) * cb + o % cb] = v;
                }
}

/* dst [n][cout][oh][ow] = conv of src [n][cin][sh][sw] placed at (offy, offx) in zero planes of
 * (oh + kh - 1) x (ow + kw - 1), with w(o, i, ky, kx) as in pack_weights, plus bias. */
static oar_status fwd_run(const oar_kctx *ctx, const float *src, int64_t n, int64_t cin, int64_t sh, int64_t sw,
                          int64_t offy, int64_t offx, const float *w, bool flip, int64_t kh, int64_t kw,
                          const float *bias, float *dst, int64_t cout, int64_t oh, int64_t ow) {
    if (n == 0 || oh == 0 || ow == 0) return OAR_OK;
    fwd_job j = {.avx512 = use_avx512(), .src = src, .n = n, .sh = sh, .sw = sw, .offy = offy, .offx = offx,
                 .dst = dst, .oh = oh, .ow = ow};
    cd_fwd *f = &j.f;
    int cb, nv;
    f->tile = fwd_tile_for(j.avx512, cout, oh, ow, kw, &cb, &nv);
    f->cin = cin, f->kh = kh, f->kw = kw, f->co = cout, f->co_pad = round_up(cout, cb);
    f->wp = ow + kw - 1, j.rows = oh + kh - 1, f->plane = j.rows * f->wp;
    f->pv = fwd_positions(f->tile, oh, f->wp, nv);
    /* the last flat tile reads up to pv + (kh - 1) * wp + kw - 1 past its plane's start; the
     * last channel tile up to 3 rows and 12 columns past the last output's window */
    j.xbuf = cin * f->plane + f->pv + (kh + 4) * f->wp + 32;
    j.parts = ctx->nthreads < n ? ctx->nthreads : n;
    if (j.parts < 1) j.parts = 1;
    size_t wbytes = sizeof(float) * (size_t)(f->co_pad * (cin * kh * kw + 1));
    size_t sbytes = sizeof(float) * (size_t)(j.parts * (j.xbuf + f->co_pad * f->pv));
    float *wbuf = oar_alloc(wbytes);
    j.scratch = oar_alloc(sbytes);
    if (!wbuf || !j.scratch) {
        oar_free(wbuf, wbytes);
        oar_free(j.scratch, sbytes);
        return OAR_ERR_OOM;
    }
    pack_weights(w, flip, cout, cin, kh, kw, cb, f->co_pad, wbuf);
    float *b = wbuf + f->co_pad * cin * kh * kw;
    for (int64_t o = 0; o < f->co_pad; o++) b[o] = bias && o < cout ? bias[o] : 0.0f;
    f->wpk = wbuf, f->bias = b;
    oar_parallel_for(j.parts, 1, fwd_parts, &j);
    oar_free(wbuf, wbytes);
    oar_free(j.scratch, sbytes);
    return OAR_OK;
}

/* ---- weight gradient */
typedef struct gw_job {
    cd_gw g;
    bool avx512;
    const float *x, *dy;      /* x [n][cin][h][w], dy [n][co][oh][ow] */
    int64_t n, h, w, ph, pw, oh, ow, rows;
    float *dw, *partial;      /* chunk 0 writes dw, chunk c > 0 partial + (c - 1) * wsize */
    int64_t wsize, nchunks, parts;
    float *scratch;           /* per part: CHUNK padded inputs of xbuf, then CHUNK dy grids of co_pad * pv */
    int64_t xbuf;
} gw_job;

static void gw_parts(void *ctx, int64_t begin, int64_t end) {
    const gw_job *j = ctx;
    const cd_gw *g = &j->g;
    for (int64_t part = begin; part < end; part++) {
        float *xs = j->scratch + part * CHUNK * (j->xbuf + g->co_pad * g->pv), *ds = xs + CHUNK * j->xbuf;
        memset(xs, 0, sizeof(float) * (size_t)(CHUNK * (j->xbuf + g->co_pad * g->pv)));
        const float *xps[CHUNK], *dys[CHUNK];
        for (int i = 0; i < CHUNK; i++) xps[i] = xs + i * j->xbuf, dys[i] = ds + i * g->co_pad * g->pv;
        for (int64_t c = part * j->nchunks / j->parts; c < (part + 1) * j->nchunks / j->parts; c++) {
            int nimg = 0;
            for (int64_t n = c * CHUNK; n < j->n && n < (c + 1) * CHUNK; n++, nimg++) {
                place(j->x + n * g->cin * j->h * j->w, g->cin, j->h, j->w, (float *)xps[nimg], g->plane, j->rows,
                      g->wp, j->ph, j->pw);
                const float *dy = j->dy + n * g->co * j->oh * j->ow;
                if (g->tile != CD_GW_CHAN) {
                    place(dy, g->co, j->oh, j->ow, (float *)dys[nimg], g->pv, j->oh, g->wp, 0, 0);
                    continue;
                }
                float *dt = (float *)dys[nimg]; /* [p][16]: only grid positions are read */
                for (int64_t co = 0; co < 16; co++)
                    for (int64_t oy = 0; oy < j->oh; oy++)
                        for (int64_t ox = 0; ox < j->ow; ox++) dt[(oy * g->wp + ox) * 16 + co] = dy[(co * j->oh + oy) * j->ow + ox];
            }
            float *out = c == 0 ? j->dw : j->partial + (c - 1) * j->wsize;
            if (g->tile == CD_GW_CHAN) gw_chan_chunk_avx512(g, xps, dys, nimg, out);
            else if (j->avx512) gw_chunk_avx512(g, xps, dys, nimg, out);
            else gw_chunk_avx2(g, xps, dys, nimg, out);
        }
    }
}

static oar_status gw_run(const oar_kctx *ctx, const float *x, int64_t n, int64_t cin, int64_t h, int64_t w,
                         const float *dy, int64_t co, int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t ph,
                         int64_t pw, float *dw) {
    int64_t wsize = co * cin * kh * kw;
    if (n == 0 || oh == 0 || ow == 0) {
        memset(dw, 0, sizeof(float) * (size_t)wsize);
        return OAR_OK;
    }
    gw_job j = {.avx512 = use_avx512(), .x = x, .dy = dy, .n = n, .h = h, .w = w, .ph = ph, .pw = pw, .oh = oh,
                .ow = ow, .dw = dw, .wsize = wsize};
    cd_gw *g = &j.g;
    int cb, t;
    g->tile = gw_tile_for(j.avx512, co, kw, &cb, &t);
    g->cin = cin, g->kh = kh, g->kw = kw, g->co = co, g->co_pad = round_up(co, cb);
    g->wp = ow + kw - 1, j.rows = oh + kh - 1, g->plane = j.rows * g->wp;
    g->pv = round_up(oh * g->wp, 16);
    /* 16 channels and 5 x 5 taps (LeNet's conv2): the channel tile, the same sums without the
     * flat grid's off-grid lanes (100 of 144 there; 1.4x faster) */
    int32_t *pos = NULL, cls[17];
    size_t pos_bytes = 0;
    if (j.avx512 && co == 16 && kh == 5 && kw == 5 && oh * g->wp < INT32_MAX) {
        pos_bytes = sizeof(int32_t) * (size_t)(oh * ow);
        if (!(pos = oar_alloc(pos_bytes))) return OAR_ERR_OOM;
        int32_t k = 0;
        for (int l = 0; l < 16; l++) {
            cls[l] = k;
            for (int64_t p = l; p < oh * g->wp; p += 16)
                if (p % g->wp < ow) pos[k++] = (int32_t)p;
        }
        cls[16] = k;
        g->tile = CD_GW_CHAN, g->pos = pos, g->cls = cls, cb = 16, g->co_pad = 16;
    }
    /* a chunk's dy rows for one channel tile beyond 32 KiB would leave L1 between kernel rows:
     * then run image by image (measured: LeNet's conv1, 86 KiB, 10% faster; conv2, 18 KiB, 25%
     * slower that way) */
    g->image_outer = (int64_t)sizeof(float) * cb * g->pv * CHUNK > 32 * 1024;
    /* taps run in blocks of t, so up to t - 1 past kw; vectors up to pv past the tap */
    j.xbuf = cin * g->plane + g->pv + kh * g->wp + kw + t + 16;
    j.nchunks = (n + CHUNK - 1) / CHUNK;
    j.parts = ctx->nthreads < j.nchunks ? ctx->nthreads : j.nchunks;
    if (j.parts < 1) j.parts = 1;
    size_t pbytes = sizeof(float) * (size_t)((j.nchunks - 1) * wsize);
    size_t sbytes = sizeof(float) * (size_t)(j.parts * CHUNK * (j.xbuf + g->co_pad * g->pv));
    j.partial = pbytes ? oar_alloc(pbytes) : NULL;
    j.scratch = oar_alloc(sbytes);
    if ((pbytes && !j.partial) || !j.scratch) {
        oar_free(j.partial, pbytes);
        oar_free(j.scratch, sbytes);
        oar_free(pos, pos_bytes);
        return OAR_ERR_OOM;
    }
    oar_parallel_for(j.parts, 1, gw_parts, &j);
    for (int64_t c = 1; c < j.nchunks; c++) {
        const float *restrict src = j.partial + (c - 1) * wsize;
        for (int64_t i = 0; i < wsize; i++) dw[i] += src[i];
    }
    oar_free(j.partial, pbytes);
    oar_free(j.scratch, sbytes);
    oar_free(pos, pos_bytes);
    return OAR_OK;
}

/* ---- the rule */
bool oar_conv_direct_takes(oar_conv_direct_op op, int64_t ci, int64_t co, int64_t kh, int64_t kw,
                           const int64_t *stride, const int64_t *pad, const int64_t *dilation, int64_t groups) {
    if (!oar_cpu_has_avx2()) return false;
    if (stride[0] != 1 || stride[1] != 1 || dilation[0] != 1 || dilation[1] != 1 || groups != 1) return false;
    if (pad[0] > kh - 1 || pad[1] > kw - 1) return false; /* grad_input pads dy by k - 1 - pad */
    /* small channel counts: a handful of accumulator tiles cover the output channels */
    if (ci > 16 || co > 16 || kh > CD_MAX_K || kw > CD_MAX_K) return false;
    /* kernels at least 5 wide (LeNet's): on ResNet-20's 3 x 3 convs the weight gradient is
     * 1.5x slower than oneDNN's, and the forward ones, though faster alone, would keep its
     * inference off NHWC (conv_nhwc), which costs more than they gain */
    if (kw < 5) return false;
    /* AVX2 only (its 16-lane accumulators take two of 16 registers): oneDNN's AVX2 backward
     * kernels win once there are more channels (LeNet's conv2: grad_weight 1.4x, grad_input
     * 1.2x faster than ours; conv1 with 1 x 6 channels: ours 5.8x faster) */
    return op == OAR_CONV_DIRECT_FORWARD || isa_available(OAR_CONV_DIRECT_AVX512) || ci * co <= 32;
}

/* attrs from `first`: stride, padding, dilation, groups */
static bool takes_attrs(oar_conv_direct_op op, const int64_t *xs, const int64_t *ws, const oar_attr *a) {
    return oar_conv_direct_takes(op, xs[1], ws[0], ws[2], ws[3], a[0].ints, a[1].ints, a[2].ints, a[3].i);
}

static const float *fptr(const oar_tensor *t) { return t ? (const float *)oar_tensor_ptr(t) : NULL; }

/* attrs from `first`: stride, padding, dilation, groups */
static bool conv2d_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)out; (void)n_out;
    return in[0]->ndim == 4 && takes_attrs(OAR_CONV_DIRECT_FORWARD, in[0]->shape, in[1]->shape, a);
}

static bool grad_input_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                                const oar_attr *a) {
    (void)n_in; (void)n_out;
    return out[0]->ndim == 4 && takes_attrs(OAR_CONV_DIRECT_GRAD_INPUT, out[0]->shape, in[1]->shape, a + 1);
}

static bool grad_weight_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                                 const oar_attr *a) {
    (void)n_in; (void)n_out;
    return in[0]->ndim == 4 && takes_attrs(OAR_CONV_DIRECT_GRAD_WEIGHT, in[0]->shape, out[0]->shape, a + 1);
}

/* conv2d(x, w, bias; stride, padding, dilation, groups) */
static oar_status conv2d_direct(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    const int64_t *xs = in[0]->shape, *ws = in[1]->shape, *ys = out[0]->shape;
    return fwd_run(ctx, fptr(in[0]), xs[0], xs[1], xs[2], xs[3], a[1].ints[0], a[1].ints[1], fptr(in[1]), false,
                   ws[2], ws[3], fptr(in[2]), (float *)oar_tensor_ptr(out[0]), ws[0], ys[2], ys[3]);
}

/* conv2d_grad_input(dy, w; input_shape, ...): dy placed at (k - 1 - pad) in planes of the
 * input's size + k - 1, correlated with the flipped transposed weights. */
static oar_status grad_input_direct(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                    int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    const int64_t *ds = in[0]->shape, *ws = in[1]->shape, *xs = out[0]->shape;
    const int64_t *pad = a[2].ints;
    return fwd_run(ctx, fptr(in[0]), ds[0], ds[1], ds[2], ds[3], ws[2] - 1 - pad[0], ws[3] - 1 - pad[1], fptr(in[1]),
                   true, ws[2], ws[3], NULL, (float *)oar_tensor_ptr(out[0]), xs[1], xs[2], xs[3]);
}

/* conv2d_grad_weight(x, dy; weight_shape, ...) */
static oar_status grad_weight_direct(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                     int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    const int64_t *xs = in[0]->shape, *ds = in[1]->shape, *ws = out[0]->shape;
    const int64_t *pad = a[2].ints;
    return gw_run(ctx, fptr(in[0]), xs[0], xs[1], xs[2], xs[3], fptr(in[1]), ds[1], ds[2], ds[3], ws[2], ws[3], pad[0],
                  pad[1], (float *)oar_tensor_ptr(out[0]));
}

/* conv2d_act (inference: fuse_conv_act's conv2d [+ add] [+ relu]) on the convs the direct
 * kernel takes, NCHW: that kernel, then the residual add and relu in f32 as the add and relu
 * kernels do them (as conv_act.c's composed kernel), so the fused program equals the unfused
 * one and eager inference bitwise. */
static oar_status conv2d_act_direct(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                    int n_out, const oar_attr *a) {
    oar_status st = conv2d_direct(ctx, in, n_in, out, n_out, a);
    if (st != OAR_OK) return st;
    float *y = (float *)oar_tensor_ptr(out[0]);
    const float *r = fptr(in[3]);
    int64_t n = out[0]->numel;
    if (r)
        for (int64_t i = 0; i < n; i++) y[i] += r[i];
    if (!strcmp(a[4].s, "relu"))
        for (int64_t i = 0; i < n; i++) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
    if (!strcmp(a[4].s, "relu6")) /* clip's order: NaN stays NaN */
        for (int64_t i = 0; i < n; i++) y[i] = y[i] < 0.0f ? 0.0f : y[i] > 6.0f ? 6.0f : y[i];
    return OAR_OK;
}

static bool conv2d_act_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                                const oar_attr *a) {
    return !strcmp(a[5].s, "nchw") && conv2d_supports(in, n_in, out, n_out, a);
}

void oar_cpu_register_conv_direct(void) {
    struct { oar_op_id op; oar_kernel_fn fn; oar_supports_fn sup; } k[] = {
        {OAR_OP_conv2d, conv2d_direct, conv2d_supports},
        {OAR_OP_conv2d_act, conv2d_act_direct, conv2d_act_supports},
        {OAR_OP_conv2d_grad_input, grad_input_direct, grad_input_supports},
        {OAR_OP_conv2d_grad_weight, grad_weight_direct, grad_weight_supports},
    };
    /* above oneDNN (20) and im2col / composed (10) on the shapes the rule takes */
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        oar_register_kernel(k[i].op, (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32),
                                                        .impl = "direct", .priority = 30, .fn = k[i].fn,
                                                        .supports = k[i].sup});
}

#else /* no x86-64 SIMD: the im2col and oneDNN kernels take every conv */
int oar_conv_direct_force_isa(oar_conv_direct_isa isa) { return isa == OAR_CONV_DIRECT_AUTO ? OAR_CONV_DIRECT_AUTO : -1; }
bool oar_conv_direct_takes(oar_conv_direct_op op, int64_t ci, int64_t co, int64_t kh, int64_t kw,
                           const int64_t *stride, const int64_t *pad, const int64_t *dilation, int64_t groups) {
    (void)op; (void)ci; (void)co; (void)kh; (void)kw; (void)stride; (void)pad; (void)dilation; (void)groups;
    return false;
}
void oar_cpu_register_conv_direct(void) {}
#endif
