/* CPU vectorized reductions: f32 sum, mean, amax, amin over a contiguous input whose reduced
 * dims form one run, viewed as [O, R, I] (kept dims before the run, the run, kept dims after;
 * size-1 dims do not matter). I == 1 reduces contiguous rows; I > 1 reduces down columns
 * (e.g. a bias gradient over the batch). Work is split into tasks of (outer index, run
 * segment, column tile); the split depends on the shape only, so results do not depend on
 * the number of threads. Other layouts are declined and fall back to the reference. */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/avx2_reduce.h"

#include <math.h>
#include <stdlib.h>

#ifdef OAR_HAVE_AVX2_REDUCE

typedef enum { K_SUM, K_MEAN, K_MAX, K_MIN } kkind;

typedef struct rlayout {
    int64_t O, R, I;
} rlayout;

static bool layout_of(const oar_tensor *x, const oar_attr *dims, rlayout *l) {
    uint32_t mask;
    if (oar_dims_mask("reduce", dims, x->ndim, &mask) != OAR_OK) return false;
    l->O = l->R = l->I = 1;
    int state = 0; /* 0: kept dims before the run, 1: in the run, 2: kept dims after it */
    for (int d = 0; d < x->ndim; d++) {
        int64_t s = x->shape[d];
        if (s == 1) continue;
        bool red = (mask >> d) & 1u;
        if (state == 0 && red) state = 1;
        else if (state == 1 && !red) state = 2;
        else if (state == 2 && red) return false;
        if (state == 0) l->O *= s;
        else if (state == 1) l->R *= s;
        else l->I *= s;
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

#define COL_TILE 256          /* columns per task (a multiple of the 32-column vector tile) */
#define SEG_ROWS 8192         /* run length per task when there are few outputs to share out */
#define FEW_TASKS 16          /* below this many (outer, tile) tasks, split the run too */
#define GRAIN_ELEMS (1 << 15) /* elements per thread chunk at least */

typedef struct rjob {
    kkind kind;
    const float *x;
    float *y;
    rlayout l;
    int64_t seg_len, n_seg, n_tile;
    double *part; /* n_seg > 1: partial results, [O][n_seg][I] */
} rjob;

static double finish(const rjob *j, double v) { return j->kind == K_MEAN ? v / (double)j->l.R : v; }

static double combine(kkind k, double a, double b) {
    if (k == K_SUM || k == K_MEAN) return a + b;
    if (a != a || b != b) return NAN;
    return k == K_MAX ? (b > a ? b : a) : (b < a ? b : a);
}

static void run_tasks(void *ctx, int64_t begin, int64_t end) {
    const rjob *j = ctx;
    const rlayout *l = &j->l;
    bool is_sum = j->kind == K_SUM || j->kind == K_MEAN, is_min = j->kind == K_MIN;
    double dacc[COL_TILE];
    float facc[COL_TILE];
    for (int64_t t = begin; t < end; t++) {
        int64_t o = t / (j->n_seg * j->n_tile), s = (t / j->n_tile) % j->n_seg, c = t % j->n_tile;
        int64_t r0 = s * j->seg_len, r1 = r0 + j->seg_len < l->R ? r0 + j->seg_len : l->R;
        int64_t c0 = c * COL_TILE, c1 = c0 + COL_TILE < l->I ? c0 + COL_TILE : l->I;
        const float *base = j->x + (o * l->R + r0) * l->I + c0;
        int64_t nc = c1 - c0, nr = r1 - r0;
        if (l->I == 1) {
            dacc[0] = is_sum ? oar_avx2_row_sum_f32(base, nr) : oar_avx2_row_extreme_f32(base, nr, is_min);
        } else if (is_sum) {
            oar_avx2_col_sum_f32(base, nr, l->I, nc, dacc);
        } else {
            oar_avx2_col_extreme_f32(base, nr, l->I, nc, is_min, facc);
            for (int64_t k = 0; k < nc; k++) dacc[k] = facc[k];
        }
        if (j->n_seg == 1) {
            for (int64_t k = 0; k < nc; k++) j->y[o * l->I + c0 + k] = (float)finish(j, dacc[k]);
        } else {
            for (int64_t k = 0; k < nc; k++) j->part[(o * j->n_seg + s) * l->I + c0 + k] = dacc[k];
        }
    }
}

static oar_status reduce_avx2(kkind kind, oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a) {
    rjob j = {.kind = kind, .x = (const float *)oar_tensor_ptr(in[0]), .y = (float *)oar_tensor_ptr(out[0])};
    if (!layout_of(in[0], &a[0], &j.l)) return oar_last_status();
    const rlayout *l = &j.l;
    j.n_tile = l->I == 1 ? 1 : (l->I + COL_TILE - 1) / COL_TILE;
    j.n_seg = l->O * j.n_tile < FEW_TASKS ? (l->R + SEG_ROWS - 1) / SEG_ROWS : 1;
    j.seg_len = (l->R + j.n_seg - 1) / j.n_seg;
    j.n_seg = (l->R + j.seg_len - 1) / j.seg_len; /* no empty last segment */
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
                j.y[o * l->I + i] = (float)finish(&j, v);
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
    add(OAR_OP_amax, amax_avx2);
    add(OAR_OP_amin, amin_avx2);
}

#else

void oar_cpu_register_reduce(void) {}

#endif
