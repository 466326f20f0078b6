/* CPU fast kernels for layout copies of any dtype: `contiguous` (a strided view made dense)
 * and concat / stack of strided inputs (the attention blocks feed them transposed views).
 * Each copy is planned once: size-1 dims dropped, dims laid out alike on both sides merged,
 * then the last one or two dims form a block that is copied whole:
 *   rows       both sides dense along the last dim: one memcpy per row;
 *   transpose  the destination is dense along the last dim and the source along another:
 *              8x8 tiles (AVX2 register transposes for 4-byte elements);
 *   strided    anything else (stride 0 broadcasts included): element loops.
 * Blocks are cut into units of about UNIT_BYTES that run on the thread pool when the copy is
 * large enough to pay for the hand-off. Every path moves bytes unchanged (bitwise a copy).
 * The reference kernels (oar_tensor_copy_strided) stay the oracle. */
#include "kernels/cpu/cpu_kernels.h"

#if defined(__x86_64__)
#include "kernels/cpu/avx2_math.h"
#endif

#include <string.h>

#define UNIT_BYTES ((int64_t)32 * 1024)    /* one task's share of a large copy */
#define PAR_MIN_BYTES ((int64_t)64 * 1024) /* below this a copy stays on the calling thread */
#define TILE 8                             /* transpose tile: 8 x 8 elements */

enum { COPY_ROWS, COPY_TRANSPOSE, COPY_STRIDED };

/* One dst <- src copy of equal shapes; strides in bytes. Rows and strided copies: every dim
 * before the last is one list of `rows` rows (outer holds those dims); a unit is a run of rows
 * (or of columns, for a single long row). Transposes: the block is rows x cols, where rows is
 * the source's dense dim; a unit is (outer position, a run of whole tiles of rows). */
typedef struct copy_plan {
    char *dst;
    const char *src;
    int kind, n_outer;
    int64_t es;
    int64_t outer[OAR_MAX_DIMS], outer_ds[OAR_MAX_DIMS], outer_ss[OAR_MAX_DIMS];
    int64_t rows, cols, rds, rss, cds, css;
    int64_t rows_per_unit, cols_per_unit, row_units, col_units, units, bytes;
} copy_plan;

/* Plans copying src (element strides sstr) into dst (element strides dstr) over shape. */
static void plan_copy(copy_plan *p, char *dst, const int64_t *dstr, const char *src, const int64_t *sstr,
                      const int64_t *shape, int nd, int64_t es) {
    int64_t sh[OAR_MAX_DIMS], ds[OAR_MAX_DIMS], ss[OAR_MAX_DIMS];
    int n = 0;
    memset(p, 0, sizeof *p);
    p->dst = dst;
    p->src = src;
    p->es = es;
    p->bytes = es;
    for (int d = 0; d < nd; d++) {
        p->bytes *= shape[d];
        if (shape[d] == 1) continue;
        int64_t a = dstr[d] * es, b = sstr[d] * es;
        if (n && ds[n - 1] == a * shape[d] && ss[n - 1] == b * shape[d]) { /* one longer dim */
            sh[n - 1] *= shape[d];
            ds[n - 1] = a;
            ss[n - 1] = b;
            continue;
        }
        sh[n] = shape[d];
        ds[n] = a;
        ss[n++] = b;
    }
    if (n == 0) { /* one element */
        sh[0] = 1;
        ds[0] = ss[0] = es;
        n = 1;
    }
    int c = n - 1, r = n >= 2 ? n - 2 : -1;
    p->kind = COPY_STRIDED;
    if (ds[c] == es && ss[c] == es) {
        p->kind = COPY_ROWS;
    } else if (ds[c] == es && ss[c] != 0) {
        for (int k = n - 2; k >= 0; k--)
            if (ss[k] == es && ds[k] != 0) {
                p->kind = COPY_TRANSPOSE;
                r = k;
                break;
            }
    }
    p->cols = sh[c];
    p->cds = ds[c];
    p->css = ss[c];
    p->rows = 1;
    if (p->kind == COPY_TRANSPOSE) {
        p->rows = sh[r];
        p->rds = ds[r];
        p->rss = ss[r];
    }
    /* rows and strided copies walk every dim before the last as one list of rows (an
     * odometer), so a unit spans as many rows as UNIT_BYTES allows whatever the shape */
    for (int k = 0; k < c; k++) {
        if (p->kind == COPY_TRANSPOSE && k == r) continue;
        p->outer[p->n_outer] = sh[k];
        p->outer_ds[p->n_outer] = ds[k];
        p->outer_ss[p->n_outer++] = ss[k];
        if (p->kind != COPY_TRANSPOSE) p->rows *= sh[k];
    }
    int64_t row_bytes = p->cols * es;
    p->rows_per_unit = row_bytes >= UNIT_BYTES ? 1 : UNIT_BYTES / row_bytes;
    if (p->kind == COPY_TRANSPOSE) /* whole tiles per unit */
        p->rows_per_unit = p->rows_per_unit < TILE ? TILE : p->rows_per_unit / TILE * TILE;
    if (p->rows_per_unit > p->rows) p->rows_per_unit = p->rows;
    /* a single long row (a 1-d copy) is cut along its columns instead */
    p->cols_per_unit = p->rows == 1 && p->kind != COPY_TRANSPOSE && row_bytes > UNIT_BYTES ? UNIT_BYTES / es
                                                                                           : p->cols;
    p->row_units = (p->rows + p->rows_per_unit - 1) / p->rows_per_unit;
    p->col_units = (p->cols + p->cols_per_unit - 1) / p->cols_per_unit;
    p->units = p->row_units * p->col_units;
    if (p->kind == COPY_TRANSPOSE)
        for (int k = 0; k < p->n_outer; k++) p->units *= p->outer[k];
    if (p->bytes == 0) p->units = 0;
}

/* n elements of es bytes, strided on both sides (ss == 0 fills with one element). */
static void copy_run(char *d, int64_t ds, const char *s, int64_t ss, int64_t n, int64_t es) {
    switch (es) {
    case 4: for (int64_t i = 0; i < n; i++, d += ds, s += ss) memcpy(d, s, 4); break;
    case 8: for (int64_t i = 0; i < n; i++, d += ds, s += ss) memcpy(d, s, 8); break;
    case 2: for (int64_t i = 0; i < n; i++, d += ds, s += ss) memcpy(d, s, 2); break;
    case 1: for (int64_t i = 0; i < n; i++, d += ds, s += ss) *d = *s; break;
    default: for (int64_t i = 0; i < n; i++, d += ds, s += ss) memcpy(d, s, (size_t)es); break;
    }
}

#if defined(__x86_64__)
/* dst row i (8 floats at d + i * ds) <- source column i (element j at s + j * ss + i * 4):
 * eight 8-float loads along the source's dense dim, an in-register transpose, eight stores. */
OAR_AVX2 static void transpose8x8_f32(char *d, int64_t ds, const char *s, int64_t ss) {
    __m256 r0 = _mm256_loadu_ps((const float *)(s + 0 * ss)), r1 = _mm256_loadu_ps((const float *)(s + 1 * ss));
    __m256 r2 = _mm256_loadu_ps((const float *)(s + 2 * ss)), r3 = _mm256_loadu_ps((const float *)(s + 3 * ss));
    __m256 r4 = _mm256_loadu_ps((const float *)(s + 4 * ss)), r5 = _mm256_loadu_ps((const float *)(s + 5 * ss));
    __m256 r6 = _mm256_loadu_ps((const float *)(s + 6 * ss)), r7 = _mm256_loadu_ps((const float *)(s + 7 * ss));
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps((float *)(d + 0 * ds), _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps((float *)(d + 1 * ds), _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps((float *)(d + 2 * ds), _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps((float *)(d + 3 * ds), _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps((float *)(d + 4 * ds), _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps((float *)(d + 5 * ds), _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps((float *)(d + 6 * ds), _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps((float *)(d + 7 * ds), _mm256_permute2f128_ps(u3, u7, 0x31));
}

/* An 8 x tc tile (tc < 8 source columns of 8 rows) whose destination rows follow each other
 * with no gap (ds == tc floats: the whole block is tc columns wide, as an image's NCHW -> NHWC
 * copy with 3 channels): the 8 tc-element rows are 8 * tc consecutive floats, i.e. tc vectors,
 * and lane l of vector v is row (8v + l) / tc, column (8v + l) % tc of the source. Each output
 * vector is assembled from the tc source vectors by lane permutes and blends (tables built once
 * per block by narrow_tables). */
typedef struct narrow_tables {
    int tc;
    __m256i idx[TILE], sel[TILE][TILE]; /* per output vector: source lanes; per source column: lanes it owns */
} narrow_tables;

OAR_AVX2 static void narrow_tables_make(narrow_tables *t, int tc) {
    t->tc = tc;
    for (int v = 0; v < tc; v++) {
        int idx[TILE], sel[TILE][TILE];
        for (int l = 0; l < TILE; l++) {
            int f = v * TILE + l;
            idx[l] = f / tc;
            for (int j = 0; j < tc; j++) sel[j][l] = f % tc == j ? -1 : 0;
        }
        t->idx[v] = _mm256_loadu_si256((const __m256i *)idx);
        for (int j = 0; j < tc; j++) t->sel[v][j] = _mm256_loadu_si256((const __m256i *)sel[j]);
    }
}

OAR_AVX2 static void narrow_dense_f32(float *d, const char *s, int64_t ss, const narrow_tables *t) {
    __m256 r[TILE];
    for (int j = 0; j < t->tc; j++) r[j] = _mm256_loadu_ps((const float *)(s + j * ss));
    for (int v = 0; v < t->tc; v++) {
        __m256 acc = _mm256_permutevar8x32_ps(r[0], t->idx[v]);
        for (int j = 1; j < t->tc; j++)
            acc = _mm256_blendv_ps(acc, _mm256_permutevar8x32_ps(r[j], t->idx[v]), _mm256_castsi256_ps(t->sel[v][j]));
        _mm256_storeu_ps(d + v * TILE, acc);
    }
}

/* An 8 x tc tile with gaps between the destination rows (the last columns of a wider block,
 * or a window of a concat's output): the 8 x 8 register transpose of the tc source vectors,
 * then tc lanes of each row stored under a mask, so nothing past them is written. */
OAR_AVX2 static void narrow_masked_f32(char *d, int64_t ds, const char *s, int64_t ss, int tc) {
    float rows[TILE][TILE];
    __m256 r[TILE];
    for (int j = 0; j < TILE; j++) r[j] = j < tc ? _mm256_loadu_ps((const float *)(s + j * ss)) : _mm256_setzero_ps();
    for (int j = 0; j < TILE; j++) _mm256_storeu_ps(rows[j], r[j]);
    transpose8x8_f32((char *)rows, TILE * 4, (const char *)rows, TILE * 4);
    const int lanes[2 * TILE] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    __m256i mask = _mm256_loadu_si256((const __m256i *)(lanes + TILE - tc));
    for (int i = 0; i < TILE; i++) _mm256_maskstore_ps((float *)(d + i * ds), mask, _mm256_loadu_ps(rows[i]));
}
#endif

/* nr x nc block, destination dense along columns, source dense along rows: 8x8 tiles, whole
 * 4-byte tiles through registers, so are 4-byte tiles of 8 rows and fewer columns (an image's
 * 3 channels), the other edges and sizes element by element (in tile order, so both sides stay
 * in cache). */
static void copy_transpose(const copy_plan *p, char *d, const char *s, int64_t nr, int64_t nc, bool avx2) {
    int64_t es = p->es;
#if defined(__x86_64__)
    narrow_tables nt;
    nt.tc = 0;
    bool dense_narrow = avx2 && es == 4 && nc < TILE && p->rds == nc * es;
    if (dense_narrow) narrow_tables_make(&nt, (int)nc);
#endif
    for (int64_t r0 = 0; r0 < nr; r0 += TILE) {
        int64_t tr = nr - r0 < TILE ? nr - r0 : TILE;
        for (int64_t c0 = 0; c0 < nc; c0 += TILE) {
            int64_t tc = nc - c0 < TILE ? nc - c0 : TILE;
            char *dt = d + r0 * p->rds + c0 * es;
            const char *st = s + r0 * es + c0 * p->css;
#if defined(__x86_64__)
            if (avx2 && es == 4 && tr == TILE && tc == TILE) {
                transpose8x8_f32(dt, p->rds, st, p->css);
                continue;
            }
            if (avx2 && es == 4 && tr == TILE) {
                if (dense_narrow) narrow_dense_f32((float *)dt, st, p->css, &nt);
                else narrow_masked_f32(dt, p->rds, st, p->css, (int)tc);
                continue;
            }
#else
            (void)avx2;
#endif
            for (int64_t i = 0; i < tc; i++) /* source column of the tile -> destination column */
                copy_run(dt + i * es, p->rds, st + i * p->css, es, tr, es);
        }
    }
}

/* Rows [r0, r0 + nr) of the row list, columns [c0, c0 + nc): the start found by division,
 * then an odometer over the dims before the last. */
static void copy_row_list(const copy_plan *p, int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
    /* locals: the copies write through char pointers, which could alias *p */
    const int n_outer = p->n_outer;
    const bool rows = p->kind == COPY_ROWS;
    const int64_t cds = p->cds, css = p->css, es = p->es;
    int64_t idx[OAR_MAX_DIMS], size[OAR_MAX_DIMS], ds[OAR_MAX_DIMS], ss[OAR_MAX_DIMS], rest = r0;
    char *d = p->dst + c0 * cds;
    const char *s = p->src + c0 * css;
    for (int k = n_outer - 1; k >= 0; k--) {
        size[k] = p->outer[k];
        ds[k] = p->outer_ds[k];
        ss[k] = p->outer_ss[k];
        idx[k] = rest % size[k];
        rest /= size[k];
        d += idx[k] * ds[k];
        s += idx[k] * ss[k];
    }
    const size_t row_bytes = (size_t)(nc * es);
    const int last = n_outer - 1; /* rows along the last outer dim go in a tight loop */
    const int64_t dl = last >= 0 ? ds[last] : 0, sl = last >= 0 ? ss[last] : 0;
    for (int64_t r = 0; r < nr;) {
        int64_t run = last >= 0 ? size[last] - idx[last] : 1;
        if (run > nr - r) run = nr - r;
        for (int64_t i = 0; i < run; i++) {
            if (rows) memcpy(d + i * dl, s + i * sl, row_bytes);
            else copy_run(d + i * dl, cds, s + i * sl, css, nc, es);
        }
        r += run;
        if (r == nr) break;
        /* here the last dim is done: back to its start, and carry into the dims before it */
        d -= idx[last] * dl;
        s -= idx[last] * sl;
        idx[last] = 0;
        for (int k = last - 1; k >= 0; k--) {
            d += ds[k];
            s += ss[k];
            if (++idx[k] < size[k]) break;
            d -= ds[k] * size[k];
            s -= ss[k] * size[k];
            idx[k] = 0;
        }
    }
}

static void run_unit(const copy_plan *p, int64_t u, bool avx2) {
    int64_t cu = u % p->col_units, rest = u / p->col_units;
    int64_t ru = rest % p->row_units, o = rest / p->row_units;
    int64_t r0 = ru * p->rows_per_unit, c0 = cu * p->cols_per_unit;
    int64_t nr = p->rows - r0 < p->rows_per_unit ? p->rows - r0 : p->rows_per_unit;
    int64_t nc = p->cols - c0 < p->cols_per_unit ? p->cols - c0 : p->cols_per_unit;
    if (p->kind != COPY_TRANSPOSE) {
        copy_row_list(p, r0, nr, c0, nc);
        return;
    }
    char *d = p->dst;
    const char *s = p->src;
    for (int k = p->n_outer - 1; k >= 0; k--) {
        int64_t i = o % p->outer[k];
        o /= p->outer[k];
        d += i * p->outer_ds[k];
        s += i * p->outer_ss[k];
    }
    copy_transpose(p, d + r0 * p->rds, s + r0 * p->rss, nr, nc, avx2);
}

/* Several copies (one per concat / stack input) as one range of units. */
typedef struct copy_job {
    copy_plan plan[OAR_MAX_INPUTS];
    int64_t first[OAR_MAX_INPUTS + 1]; /* plan k owns units [first[k], first[k + 1]) */
    int n;
    bool avx2;
} copy_job;

static void copy_units(void *ctx, int64_t b, int64_t e) {
    const copy_job *j = ctx;
    int k = 0;
    for (int64_t u = b; u < e; u++) {
        while (u >= j->first[k + 1]) k++;
        run_unit(&j->plan[k], u - j->first[k], j->avx2);
    }
}

static void run_job(const oar_kctx *ctx, copy_job *j) {
    int64_t bytes = 0;
    j->first[0] = 0;
    for (int k = 0; k < j->n; k++) {
        j->first[k + 1] = j->first[k] + j->plan[k].units;
        bytes += j->plan[k].bytes;
    }
    j->avx2 = oar_cpu_has_avx2();
    int64_t units = j->first[j->n];
    if (units == 0) return;
    if (ctx->nthreads > 1 && bytes >= PAR_MIN_BYTES && units > 1) oar_parallel_for(units, 1, copy_units, j);
    else copy_units(j, 0, units);
}

static bool same_dtype_inputs(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                              const oar_attr *attrs) {
    (void)n_out; (void)attrs;
    for (int i = 0; i < n_in; i++)
        if (!in[i] || in[i]->dtype != out[0]->dtype) return false;
    return true;
}

void oar_cpu_copy_layout(const oar_kctx *ctx, oar_tensor *y, const oar_tensor *x) {
    if (y->numel == 0) return;
    copy_job j; /* not zeroed: it is large, and only the planned entries are read */
    j.n = 1;
    int64_t es = (int64_t)oar_dtypes[y->dtype].size;
    plan_copy(&j.plan[0], oar_tensor_ptr(y), y->strides, oar_tensor_ptr(x), x->strides, y->shape, y->ndim, es);
    run_job(ctx, &j);
}

static oar_status contiguous_kernel(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                    int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out; (void)a;
    oar_cpu_copy_layout(ctx, out[0], in[0]);
    return OAR_OK;
}

/* concat: input i goes to the window of the output starting at its offset along dim d. */
static oar_status concat_kernel(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                int n_out, const oar_attr *a) {
    (void)n_out;
    oar_tensor *y = out[0];
    if (y->numel == 0) return OAR_OK;
    int64_t es = (int64_t)oar_dtypes[y->dtype].size;
    int d = (int)(a[0].i < 0 ? a[0].i + y->ndim : a[0].i); /* validated by inference */
    copy_job j;
    j.n = 0;
    int64_t at = 0;
    for (int i = 0; i < n_in; i++) {
        const oar_tensor *x = in[i];
        if (x->ndim == 1 && x->shape[0] == 0) continue; /* the legacy skipped empty input */
        if (x->numel)
            plan_copy(&j.plan[j.n++], oar_tensor_ptr(y) + at * y->strides[d] * es, y->strides, oar_tensor_ptr(x),
                      x->strides, x->shape, x->ndim, es);
        at += x->shape[d];
    }
    run_job(ctx, &j);
    return OAR_OK;
}

/* stack: input i goes to position i along the new dim d (the output's strides without d). */
static oar_status stack_kernel(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                               int n_out, const oar_attr *a) {
    (void)n_out;
    oar_tensor *y = out[0];
    if (y->numel == 0) return OAR_OK;
    int64_t es = (int64_t)oar_dtypes[y->dtype].size;
    int d = (int)(a[0].i < 0 ? a[0].i + y->ndim : a[0].i);
    int64_t wstr[OAR_MAX_DIMS];
    for (int k = 0, m = 0; k < y->ndim; k++)
        if (k != d) wstr[m++] = y->strides[k];
    copy_job j;
    j.n = 0;
    for (int i = 0; i < n_in; i++)
        plan_copy(&j.plan[j.n++], oar_tensor_ptr(y) + i * y->strides[d] * es, wstr, oar_tensor_ptr(in[i]),
                  in[i]->strides, in[i]->shape, in[i]->ndim, es);
    run_job(ctx, &j);
    return OAR_OK;
}

void oar_cpu_register_copy(void) {
    /* below the memcpy join (cpu_index.c), which takes concat / stack of dense inputs */
    oar_kernel_entry e = {.device = OAR_CPU, .dtypes = OAR_BASE_DTYPES, .impl = "copy", .priority = 5,
                          .fn = contiguous_kernel, .supports = same_dtype_inputs};
    oar_register_kernel(OAR_OP_contiguous, e);
    e.fn = concat_kernel;
    oar_register_kernel(OAR_OP_concat, e);
    e.fn = stack_kernel;
    oar_register_kernel(OAR_OP_stack, e);
}
