/* The inner loops of the direct convolutions (conv_direct.c), written once over a 16-lane
 * float vector and included once per instruction set: AVX-512 (one zmm) and AVX2+FMA (a pair
 * of ymm). Every output element sees the same FMAs in the same order in both, and the
 * horizontal sums use one fixed scalar tree, so the two are bitwise equal.
 *
 * The includer defines CD_NAME(f) (f with the set's suffix), CD_TARGET (the target
 * attribute), the vector type cd_vec and cd_zero / cd_set1 / cd_load / cd_store / cd_fma
 * (cd_fma(a, b, c) = a * b + c, one rounding), cd_hsum (the fixed tree) cd_in_register
 * (keeps a loaded vector in a register) and cd_add; all are undefined at the end. Tile sizes
 * come in as constant arguments of always-inline functions, so each tile shape is its own
 * fully unrolled loop with its accumulators in registers. */

#define CD_INLINE CD_TARGET static inline __attribute__((always_inline))

/* Forward tile: CB output channels x NV vectors of 16 flat positions from p0, consecutive
 * (ROWS 0) or one per output row (ROWS 1: vector v at p0 + v * wp; for rows of at most 16
 * outputs, where fewer lanes fall on the padding columns). acc starts at the (padded) bias,
 * then acc = fma(x, w, acc) over (ci, ky, kx) in that order. */
CD_INLINE void CD_NAME(fwd_tile)(const cd_fwd *f, const float *restrict xp, const float *restrict wblk,
                                 const float *restrict bblk, float *restrict yblk, int64_t p0, const int CB,
                                 const int NV, const int ROWS) {
    const int64_t vs = ROWS ? f->wp : 16;
    cd_vec acc[8][4];
#pragma GCC unroll 8
    for (int c = 0; c < CB; c++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) acc[c][v] = cd_set1(bblk[c]);
    for (int64_t ci = 0; ci < f->cin; ci++)
        for (int64_t ky = 0; ky < f->kh; ky++) {
            const float *row = xp + ci * f->plane + ky * f->wp + p0;
            const float *wk = wblk + (ci * f->kh + ky) * f->kw * CB;
            for (int64_t kx = 0; kx < f->kw; kx++, wk += CB) {
                cd_vec xv[4];
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++) xv[v] = cd_load(row + kx + vs * v);
#pragma GCC unroll 8
                for (int c = 0; c < CB; c++) {
                    cd_vec w = cd_set1(wk[c]);
#pragma GCC unroll 4
                    for (int v = 0; v < NV; v++) acc[c][v] = cd_fma(xv[v], w, acc[c][v]);
                }
            }
        }
#pragma GCC unroll 8
    for (int c = 0; c < CB; c++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) cd_store(yblk + c * f->pv + p0 + vs * v, acc[c][v]);
}

CD_INLINE void CD_NAME(fwd_all)(const cd_fwd *f, const float *xp, float *yflat, const int CB, const int NV,
                                const int ROWS) {
    for (int64_t c0 = 0; c0 < f->co_pad; c0 += CB)
        for (int64_t p0 = 0; p0 < f->pv; p0 += (ROWS ? f->wp : 16) * NV)
            CD_NAME(fwd_tile)(f, xp, f->wpk + c0 * f->cin * f->kh * f->kw, f->bias + c0, yflat + c0 * f->pv, p0, CB,
                              NV, ROWS);
}

/* yflat [co_pad][pv] from the padded input planes xp, with f's tile shape. */
CD_TARGET static void CD_NAME(fwd_image)(const cd_fwd *f, const float *xp, float *yflat) {
    switch (f->tile) {
    case CD_FWD_6x4: CD_NAME(fwd_all)(f, xp, yflat, 6, 4, 0); break;
    case CD_FWD_8x3: CD_NAME(fwd_all)(f, xp, yflat, 8, 3, 0); break;
    case CD_FWD_6x1: CD_NAME(fwd_all)(f, xp, yflat, 6, 1, 0); break;
    case CD_ROWS_6x2: CD_NAME(fwd_all)(f, xp, yflat, 6, 2, 1); break;
    default: break;
    }
}

#ifdef CD_CHAN_TILES /* AVX-512 only: 24-36 accumulators would not fit in AVX2's 16 registers */
/* Forward tile over channels: 16 output channels (one vector) x R rows x C columns of output
 * pixels from (oy0, ox0), the same arithmetic per element as fwd_tile (acc = bias, then
 * fma(x, w, acc) over (ci, ky, kx)). Results go to tile [R * C][16]. */
CD_INLINE void CD_NAME(chan_tile)(const cd_fwd *f, const float *restrict xp, const float *restrict wblk,
                                  const float *restrict bblk, float *restrict tile, int64_t oy0, int64_t ox0,
                                  const int R, const int C) {
    cd_vec acc[3][12];
    cd_vec b = cd_load(bblk);
#pragma GCC unroll 3
    for (int r = 0; r < R; r++)
#pragma GCC unroll 12
        for (int c = 0; c < C; c++) acc[r][c] = b;
    for (int64_t ci = 0; ci < f->cin; ci++)
        for (int64_t ky = 0; ky < f->kh; ky++) {
            const float *row = xp + ci * f->plane + (oy0 + ky) * f->wp + ox0;
            const float *wk = wblk + (ci * f->kh + ky) * f->kw * 16;
            for (int64_t kx = 0; kx < f->kw; kx++, wk += 16) {
                cd_vec w = cd_load(wk);
                const float *q = row + kx;
#pragma GCC unroll 3
                for (int r = 0; r < R; r++, q += f->wp) /* one pointer per row: columns are displacements */
#pragma GCC unroll 12
                    for (int c = 0; c < C; c++) acc[r][c] = cd_fma(cd_set1(q[c]), w, acc[r][c]);
            }
        }
#pragma GCC unroll 3
    for (int r = 0; r < R; r++)
#pragma GCC unroll 12
        for (int c = 0; c < C; c++) cd_store(tile + (r * C + c) * 16, acc[r][c]);
}

/* y [co][oh][ow] of one image by channel tiles; co is a multiple of 16. */
CD_INLINE void CD_NAME(chan_all)(const cd_fwd *f, const float *xp, float *y, int64_t oh, int64_t ow, const int R,
                                 const int C) {
    float tile[3 * 12 * 16];
    for (int64_t c0 = 0; c0 < f->co; c0 += 16)
        for (int64_t oy0 = 0; oy0 < oh; oy0 += R)
            for (int64_t ox0 = 0; ox0 < ow; ox0 += C) {
                CD_NAME(chan_tile)(f, xp, f->wpk + c0 * f->cin * f->kh * f->kw, f->bias + c0, tile, oy0, ox0, R, C);
                int64_t nr = oh - oy0 < R ? oh - oy0 : R, nc = ow - ox0 < C ? ow - ox0 : C;
                for (int64_t l = 0; l < 16; l++)
                    for (int64_t r = 0; r < nr; r++) {
                        float *yr = y + ((c0 + l) * oh + oy0 + r) * ow + ox0;
                        for (int64_t c = 0; c < nc; c++) yr[c] = tile[(r * C + c) * 16 + l];
                    }
            }
}

/* GCC's predictive commoning would carry the broadcasts of one kx over to the next (the same
 * inputs one column on) and spill them: the tile needs its registers for accumulators. */
CD_TARGET __attribute__((optimize("no-predictive-commoning"))) static void CD_NAME(chan_image)(const cd_fwd *f, const float *xp, float *y, int64_t oh, int64_t ow) {
    switch (f->tile) {
    case CD_CHAN_2x10: CD_NAME(chan_all)(f, xp, y, oh, ow, 2, 10); break;
    case CD_CHAN_2x12: CD_NAME(chan_all)(f, xp, y, oh, ow, 2, 12); break;
    case CD_CHAN_3x8: CD_NAME(chan_all)(f, xp, y, oh, ow, 3, 8); break;
    default: break;
    }
}
#endif

#ifdef CD_CHAN_TILES
/* Weight gradient over channels, for 16 output channels (one vector) and 5 x 5 kernels: the
 * same sums as gw_tile, in the same order, without its wasted lanes. gw_tile's lane l sums the
 * flat positions p = l mod 16 (images, then positions, in order) and then the 16 lanes by the
 * tree of cd_hsum; here the vector lanes are the output channels, the positions of class l
 * (pos[cls[l]] .. pos[cls[l + 1]], only those on the output grid: the others add fma(0, x)
 * there, which changes nothing for finite x) are summed into lanes[l], and the 16 classes are
 * added by the same tree. dts[n] is image n's dy transposed: [p][16 channels]. */
CD_TARGET static void CD_NAME(gw_chan_chunk)(const cd_gw *g, const float *const *xps, const float *const *dts,
                                             int nimg, float *dw) {
    enum { R = 5, T = 5 };
    cd_vec lanes[16][R][T];
    float v[16];
    for (int64_t ci = 0; ci < g->cin; ci++) {
        for (int l = 0; l < 16; l++) {
            cd_vec acc[R][T];
#pragma GCC unroll 5
            for (int r = 0; r < R; r++)
#pragma GCC unroll 5
                for (int t = 0; t < T; t++) acc[r][t] = cd_zero();
            for (int n = 0; n < nimg; n++) {
                const float *xr = xps[n] + ci * g->plane, *dt = dts[n];
                for (int32_t k = g->cls[l]; k < g->cls[l + 1]; k++) {
                    int64_t p = g->pos[k];
                    cd_vec d = cd_load(dt + p * 16);
                    const float *q = xr + p;
#pragma GCC unroll 5
                    for (int r = 0; r < R; r++, q += g->wp) /* one pointer per row: taps are displacements */
#pragma GCC unroll 5
                        for (int t = 0; t < T; t++) acc[r][t] = cd_fma(d, cd_set1(q[t]), acc[r][t]);
                }
            }
#pragma GCC unroll 5
            for (int r = 0; r < R; r++)
#pragma GCC unroll 5
                for (int t = 0; t < T; t++) lanes[l][r][t] = acc[r][t];
        }
        for (int r = 0; r < R; r++)
            for (int t = 0; t < T; t++) {
                cd_vec s[16];
                for (int l = 0; l < 16; l++) s[l] = lanes[l][r][t];
                for (int w = 8; w >= 1; w /= 2) /* cd_hsum's tree: i + 8, i + 4, i + 2, i + 1 */
                    for (int i = 0; i < w; i++) s[i] = cd_add(s[i], s[i + w]);
                cd_store(v, s[0]);
                for (int c = 0; c < 16; c++) dw[((c * g->cin + ci) * g->kh + r) * g->kw + t] = v[c];
            }
    }
}
#endif

/* a[c][t] += dy row c . x shifted by t, over the flat positions [0, pv), by fma in p order. */
CD_INLINE void CD_NAME(gw_pass)(cd_vec (*a)[5], const float *restrict d, const float *restrict xr, int64_t pv,
                                const int CB, const int T) {
    for (int64_t p = 0; p < pv; p += 16) {
        cd_vec dv[6];
#pragma GCC unroll 6
        for (int c = 0; c < CB; c++) dv[c] = cd_load(d + c * pv + p);
#pragma GCC unroll 5
        for (int t = 0; t < T; t++) {
            cd_vec xv = cd_load(xr + t + p);
            cd_in_register(xv); /* one load, not one folded into each FMA (unaligned: 2 lines each) */
#pragma GCC unroll 6
            for (int c = 0; c < CB; c++) a[c][t] = cd_fma(dv[c], xv, a[c][t]);
        }
    }
}

/* Weight-gradient tile: CB output channels x T taps (kx0 .. kx0 + T of every kernel row ky,
 * channel ci), summed over the chunk's images and all flat positions: lane l sums the
 * positions p = l mod 16 in (image, p) order by fma, then one cd_hsum. dy is zero at
 * positions outside the grid. Two loop orders give the same sums: kernel rows outermost
 * (accumulators stay in registers across images), or images outermost (one image's dy rows
 * stay in L1 across the kernel rows; each row's accumulators wait in acc in between). */
CD_INLINE void CD_NAME(gw_tile)(const cd_gw *g, const float *const *xps, const float *const *dys, int nimg,
                                int64_t ci, int64_t kx0, int64_t co0, cd_vec (*acc)[6][5], float *out,
                                const int CB, const int T) {
    cd_vec a[6][5];
    if (!g->image_outer) {
        for (int64_t ky = 0; ky < g->kh; ky++) {
#pragma GCC unroll 6
            for (int c = 0; c < CB; c++)
#pragma GCC unroll 5
                for (int t = 0; t < T; t++) a[c][t] = cd_zero();
            for (int n = 0; n < nimg; n++)
                CD_NAME(gw_pass)(a, dys[n] + co0 * g->pv, xps[n] + ci * g->plane + ky * g->wp + kx0, g->pv, CB, T);
#pragma GCC unroll 6
            for (int c = 0; c < CB; c++)
#pragma GCC unroll 5
                for (int t = 0; t < T; t++) out[(ky * CB + c) * T + t] = cd_hsum(a[c][t]);
        }
        return;
    }
    for (int64_t ky = 0; ky < g->kh; ky++)
#pragma GCC unroll 6
        for (int c = 0; c < CB; c++)
#pragma GCC unroll 5
            for (int t = 0; t < T; t++) acc[ky][c][t] = cd_zero();
    for (int n = 0; n < nimg; n++)
        for (int64_t ky = 0; ky < g->kh; ky++) {
#pragma GCC unroll 6
            for (int c = 0; c < CB; c++)
#pragma GCC unroll 5
                for (int t = 0; t < T; t++) a[c][t] = acc[ky][c][t];
            CD_NAME(gw_pass)(a, dys[n] + co0 * g->pv, xps[n] + ci * g->plane + ky * g->wp + kx0, g->pv, CB, T);
#pragma GCC unroll 6
            for (int c = 0; c < CB; c++)
#pragma GCC unroll 5
                for (int t = 0; t < T; t++) acc[ky][c][t] = a[c][t];
        }
    for (int64_t ky = 0; ky < g->kh; ky++)
#pragma GCC unroll 6
        for (int c = 0; c < CB; c++)
#pragma GCC unroll 5
            for (int t = 0; t < T; t++) out[(ky * CB + c) * T + t] = cd_hsum(acc[ky][c][t]);
}

CD_INLINE void CD_NAME(gw_all)(const cd_gw *g, const float *const *xps, const float *const *dys, int nimg,
                               float *dw, const int CB, const int T) {
    cd_vec acc[CD_MAX_K][6][5];
    float out[CD_MAX_K * 6 * 5];
    for (int64_t co0 = 0; co0 < g->co_pad; co0 += CB)
        for (int64_t ci = 0; ci < g->cin; ci++)
            for (int64_t kx0 = 0; kx0 < g->kw; kx0 += T) {
                CD_NAME(gw_tile)(g, xps, dys, nimg, ci, kx0, co0, acc, out, CB, T);
                for (int64_t ky = 0; ky < g->kh; ky++)
                    for (int c = 0; c < CB && co0 + c < g->co; c++)
                        for (int t = 0; t < T && kx0 + t < g->kw; t++)
                            dw[(((co0 + c) * g->cin + ci) * g->kh + ky) * g->kw + kx0 + t] = out[(ky * CB + c) * T + t];
            }
}

/* dw [co][cin][kh][kw] of one chunk of images (written, not accumulated). */
CD_TARGET static void CD_NAME(gw_chunk)(const cd_gw *g, const float *const *xps, const float *const *dys, int nimg,
                                        float *dw) {
    switch (g->tile) {
    case CD_GW_4x5: CD_NAME(gw_all)(g, xps, dys, nimg, dw, 4, 5); break;
    case CD_GW_3x5: CD_NAME(gw_all)(g, xps, dys, nimg, dw, 3, 5); break;
    case CD_GW_6x3: CD_NAME(gw_all)(g, xps, dys, nimg, dw, 6, 3); break;
    case CD_GW_2x2: CD_NAME(gw_all)(g, xps, dys, nimg, dw, 2, 2); break;
    case CD_GW_1x5: CD_NAME(gw_all)(g, xps, dys, nimg, dw, 1, 5); break;
    default: break; /* CD_GW_CHAN: gw_chan_chunk */
    }
}

#undef CD_INLINE
/* the includer's parameters, so the next instruction set can define its own */
#undef CD_CHAN_TILES
#undef CD_NAME
#undef CD_TARGET
#undef cd_vec
#undef cd_zero
#undef cd_set1
#undef cd_load
#undef cd_store
#undef cd_fma
#undef cd_add
#undef cd_hsum
#undef cd_in_register
