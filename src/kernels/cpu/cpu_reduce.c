/* CPU vectorized reductions: f32 sum, mean, amax, amin over a contiguous input, any set of
 * reduced dims. After dropping size-1 dims and merging neighbours of the same kind, the
 * input is viewed as outer kept dims (O outputs), outer reduced dims (Q blocks), then a
 * trailing [R, I] block: a reduced run of R rows and I kept columns. Each output column sums
 * Q * R values: Q pieces of R contiguous rows, each reduced by the AVX2 primitives and gathered
 * in double. I == 1 reduces contiguous rows (e.g. per-channel sums over N, H, W); I > 1
 * reduces down columns (e.g. a bias gradient over the batch). Work is split into tasks of
 * (output block, row segment, column tile); the split depends on the shape only, so results
 * do not depend on the number of threads. bf16/f16 inputs (sum and mean, kernel avx2-half) go
 * through the same primitives loading 16-bit values (half_reduce.c) and round the f32 result:
 * the bits of via-f32, without the f32 copy. */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/avx2_reduce.h"
#include "kernels/cpu/nn_kernels.h"

#include <math.h>
#include <stdlib.h>

#ifdef OAR_HAVE_AVX2_REDUCE

typedef enum { K_SUM, K_MEAN, K_MAX, K_MIN } kkind;

typedef struct rlayout {
    int64_t O, Q, R, I;
    int n_o, n_q;
    int64_t o_shape[OAR_MAX_DIMS], o_stride[OAR_MAX_DIMS]; /* strides in floats */
    int64_t q_shape[OAR_MAX_DIMS], q_stride[OAR_MAX_DIMS];
} rlayout;

static bool layout_of(const oar_tensor *x, const oar_attr *dims, rlayout *l) {
    uint32_t mask;
    if (oar_dims_mask("reduce", dims, x->ndim, &mask) != OAR_OK) return false;
    int64_t size[OAR_MAX_DIMS];
    bool red[OAR_MAX_DIMS];
    int g = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (x->shape[d] == 1) continue;
        bool r = (mask >> d) & 1u;
        if (g && red[g - 1] == r) {
            size[g - 1] *= x->shape[d];
        } else {
            size[g] = x->shape[d];
            red[g++] = r;
        }
    }
    int64_t gstride[OAR_MAX_DIMS]; /* contiguous input: the size of what follows */
    for (int k = g - 1; k >= 0; k--) gstride[k] = k == g - 1 ? 1 : gstride[k + 1] * size[k + 1];
    l->O = l->Q = l->R = l->I = 1;
    l->n_o = l->n_q = 0;
    if (g && !red[g - 1]) l->I = size[--g];
    if (g && red[g - 1]) l->R = size[--g];
    for (int k = 0; k < g; k++) {
        if (red[k]) {
            l->q_shape[l->n_q] = size[k];
            l->q_stride[l->n_q++] = gstride[k];
            l->Q *= size[k];
        } else {
            l->o_shape[l->n_o] = size[k];
            l->o_stride[l->n_o++] = gstride[k];
            l->O *= size[k];
        }
    }
    return true;
}

static bool reduce_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                            const oar_attr *attrs) {
    (void)n_in; (void)n_out;
    const oar_tensor *x = in[0];
    rlayout l;
    return oar_cpu_has_avx2() && x->dtype == OAR_F32 && out[0]->dtype == OAR_F32 && x->contiguous &&
           out[0]->contiguous && x->numel > 0 && layout_of(x, &attrs[0], &l);
}

/* 0: f32, 1: bf16, 2: f16 (nn_half.h's kinds), -1: none of these */
static int kind_of(oar_dtype dt) { return dt == OAR_F32 ? 0 : dt == OAR_BF16 ? 1 : dt == OAR_F16 ? 2 : -1; }

static bool reduce_half_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                                 const oar_attr *attrs) {
    (void)n_in; (void)n_out;
    const oar_tensor *x = in[0];
    const int k = kind_of(x->dtype);
    rlayout l;
    return oar_cpu_has_avx2() && (k == 1 || (k == 2 && oar_nn_has_f16c())) &&
           out[0]->dtype == x->dtype && x->contiguous && out[0]->contiguous && x->numel > 0 &&
           layout_of(x, &attrs[0], &l);
}

#define COL_TILE 256          /* columns per task (a multiple of the 32-column vector tile) */
#define SEG_ROWS 8192         /* rows per task when there are few outputs to share out */
#define FEW_TASKS 16          /* below this many (output, tile) tasks, split the rows too */
#define GRAIN_ELEMS (1 << 15) /* elements per thread chunk at least */

typedef struct rjob {
    kkind kind;
    int dkind; /* kind_of the input and output dtype */
    const void *x;
    void *y;
    rlayout l;
    int64_t seg_len, n_seg, n_tile; /* segments of the Q * R rows each output column reduces */
    double *part; /* n_seg > 1: partial results, [O][n_seg][I] */
} rjob;

static double finish(const rjob *j, double v) { return j->kind == K_MEAN ? v / (double)(j->l.Q * j->l.R) : v; }

/* output i <- v finished, as f32, then rounded to a 16-bit output's dtype */
static void put(const rjob *j, int64_t i, double v) {
    float f = (float)finish(j, v);
    if (j->dkind == 0) ((float *)j->y)[i] = f;
    else ((uint16_t *)j->y)[i] = j->dkind == 1 ? oar_f32_to_bf16(f) : oar_f32_to_f16(f);
}

static double combine(kkind k, double a, double b) {
    if (k == K_SUM || k == K_MEAN) return a + b;
    if (a != a || b != b) return NAN;
    return k == K_MAX ? (b > a ? b : a) : (b < a ? b : a);
}

/* Offset of block q of the outer reduced dims, kept as an odometer to avoid divisions. */
typedef struct qwalk {
    int64_t idx[OAR_MAX_DIMS], off;
} qwalk;

static void qwalk_seek(const rlayout *l, qwalk *w, int64_t q) {
    w->off = 0;
    for (int d = l->n_q - 1; d >= 0; d--) {
        w->idx[d] = q % l->q_shape[d];
        w->off += w->idx[d] * l->q_stride[d];
        q /= l->q_shape[d];
    }
}

static void qwalk_next(const rlayout *l, qwalk *w) {
    for (int d = l->n_q - 1; d >= 0; d--) {
        w->off += l->q_stride[d];
        if (++w->idx[d] < l->q_shape[d]) return;
        w->off -= l->q_stride[d] * l->q_shape[d];
        w->idx[d] = 0;
    }
}

static int64_t outer_offset(const rlayout *l, int64_t o) {
    int64_t off = 0;
    for (int d = l->n_o - 1; d >= 0; d--) {
        off += (o % l->o_shape[d]) * l->o_stride[d];
        o /= l->o_shape[d];
    }
    return off;
}

/* Reduces rows [r0, r1) of the Q * R rows (I elements apart) at element base, columns [0, nc),
 * into acc. */
static void reduce_rows(const rjob *j, int64_t base, int64_t r0, int64_t r1, int64_t nc, double *acc) {
    const rlayout *l = &j->l;
    bool is_sum = j->kind == K_SUM || j->kind == K_MEAN, is_min = j->kind == K_MIN;
    double dtmp[COL_TILE];
    float ftmp[COL_TILE];
    qwalk w;
    qwalk_seek(l, &w, r0 / l->R);
    int64_t rr = r0 % l->R;
    for (int64_t r = r0; r < r1; r += l->R - rr, rr = 0, qwalk_next(l, &w)) {
        int64_t n = l->R - rr < r1 - r ? l->R - rr : r1 - r;
        const int64_t at = base + w.off + rr * l->I;
        const float *p = (const float *)j->x + at;
        const uint16_t *h = (const uint16_t *)j->x + at;
        double *d = r == r0 ? acc : dtmp; /* the first piece is written in place */
        if (j->dkind != 0) { /* sum or mean */
            if (l->I == 1) d[0] = oar_avx2_row_sum_half(h, n, j->dkind);
            else oar_avx2_col_sum_half(h, n, l->I, nc, j->dkind, d);
        } else if (l->I == 1) {
            d[0] = is_sum ? oar_avx2_row_sum_f32(p, n) : oar_avx2_row_extreme_f32(p, n, is_min);
        } else if (is_sum) {
            oar_avx2_col_sum_f32(p, n, l->I, nc, d);
        } else {
            oar_avx2_col_extreme_f32(p, n, l->I, nc, is_min, ftmp);
            for (int64_t k = 0; k < nc; k++) d[k] = ftmp[k];
        }
        if (d != acc)
            for (int64_t k = 0; k < nc; k++) acc[k] = combine(j->kind, acc[k], d[k]);
    }
}

static void run_tasks(void *ctx, int64_t begin, int64_t end) {
    const rjob *j = ctx;
    const rlayout *l = &j->l;
    double acc[COL_TILE];
    for (int64_t t = begin; t < end; t++) {
        int64_t o = t / (j->n_seg * j->n_tile), s = (t / j->n_tile) % j->n_seg, c = t % j->n_tile;
        int64_t rows = l->Q * l->R, r0 = s * j->seg_len, r1 = r0 + j->seg_len < rows ? r0 + j->seg_len : rows;
        int64_t c0 = c * COL_TILE, c1 = c0 + COL_TILE < l->I ? c0 + COL_TILE : l->I;
        reduce_rows(j, outer_offset(l, o) + c0, r0, r1, c1 - c0, acc);
        if (j->n_seg == 1) {
            for (int64_t k = 0; k < c1 - c0; k++) put(j, o * l->I + c0 + k, acc[k]);
        } else {
            for (int64_t k = 0; k < c1 - c0; k++) j->part[(o * j->n_seg + s) * l->I + c0 + k] = acc[k];
        }
    }
}

static oar_status reduce_avx2(kkind kind, oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a) {
    rjob j = {.kind = kind, .dkind = kind_of(in[0]->dtype), .x = oar_tensor_ptr(in[0]), .y = oar_tensor_ptr(out[0])};
    if (!layout_of(in[0], &a[0], &j.l)) return oar_last_status();
    const rlayout *l = &j.l;
    int64_t rows = l->Q * l->R;
    j.n_tile = l->I == 1 ? 1 : (l->I + COL_TILE - 1) / COL_TILE;
    j.n_seg = l->O * j.n_tile < FEW_TASKS ? (rows + SEG_ROWS - 1) / SEG_ROWS : 1;
    j.seg_len = (rows + j.n_seg - 1) / j.n_seg;
    j.n_seg = (rows + j.seg_len - 1) / j.seg_len; /* no empty last segment */
    if (j.n_seg > 1) {
        j.part = oar_malloc(sizeof(double) * (size_t)(l->O * j.n_seg * l->I));
        if (!j.part) return OAR_ERR_OOM;
    }
    int64_t n_tasks = l->O * j.n_seg * j.n_tile;
    int64_t per_task = j.seg_len * (l->I < COL_TILE ? l->I : COL_TILE);
    oar_parallel_for(n_tasks, per_task >= GRAIN_ELEMS ? 1 : GRAIN_ELEMS / per_task, run_tasks, &j);
    if (j.n_seg > 1) {
        for (int64_t o = 0; o < l->O; o++) {
            for (int64_t i = 0; i < l->I; i++) {
                const double *p = j.part + o * j.n_seg * l->I + i;
                double v = p[0];
                for (int64_t s = 1; s < j.n_seg; s++) v = combine(kind, v, p[s * l->I]);
                put(&j, o * l->I + i, v);
            }
        }
        free(j.part);
    }
    return OAR_OK;
}
#define FAST_REDUCE(NAME, KIND)                                                                     \
    static oar_status NAME##_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in,             \
                                  oar_tensor *const *out, int n_out, const oar_attr *a) {           \
        (void)ctx; (void)n_in; (void)n_out;                                                         \
        return reduce_avx2(KIND, in, out, a);                                                       \
    }

FAST_REDUCE(sum, K_SUM)
FAST_REDUCE(mean, K_MEAN)
FAST_REDUCE(amax, K_MAX)
FAST_REDUCE(amin, K_MIN)

static void add(oar_op_id op, oar_kernel_fn fn) {
    oar_register_kernel(op, (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32), .impl = "avx2",
                                               .priority = 10, .fn = fn, .supports = reduce_supports});
}

void oar_cpu_register_reduce(void) {
    add(OAR_OP_sum, sum_avx2);
    add(OAR_OP_mean, mean_avx2);
    for (int i = 0; i < 2; i++)
        oar_register_kernel(i ? OAR_OP_mean : OAR_OP_sum,
                            (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_BF16) | OAR_DTYPE_BIT(OAR_F16),
                                               .impl = OAR_IMPL_HALF_PARTIAL, .priority = 10,
                                               .fn = i ? mean_avx2 : sum_avx2, .supports = reduce_half_supports});
    add(OAR_OP_amax, amax_avx2);
    add(OAR_OP_amin, amin_avx2);
}

#else

void oar_cpu_register_reduce(void) {}

#endif
