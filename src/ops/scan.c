/* Scans and order statistics along one dim that torch models use: cumprod (its gradient is exact
 * where the input has zeros), the running arg-extremes behind cummax/cummin, and the index of the
 * mode. The index ops are not differentiable: the values are gather(x, dim, index), whose
 * gradient scatters into the chosen positions, as torch's cummax/mode backward does. */
#include "ops/reduce_plan.h"

#include <math.h>
#include <stdlib.h>

/* Walks the lines of x (and y) along d: calls body(x line, y line, n, x stride, y stride) per line. */
typedef void (*line_fn)(const oar_tensor *x, const char *xl, int64_t sx, char *yl, int64_t sy, int64_t n,
                        bool flag);
static void for_lines(const oar_tensor *x, oar_tensor *y, int d, bool y_has_dim, line_fn f, bool flag) {
    reduce_plan px, py;
    reduce_plan_make(x, dim_mask(d, x->ndim), &px);
    reduce_plan_make(y, y_has_dim ? dim_mask(d, y->ndim) : 0, &py);
    int64_t sx = px.n_inner ? px.inner_stride[0] : 0, sy = py.n_inner ? py.inner_stride[0] : 0;
    for (int64_t o = 0; o < px.outer_numel; o++)
        f(x, oar_tensor_ptr(x) + plan_outer_offset(&px, o), sx, oar_tensor_ptr(y) + plan_outer_offset(&py, o), sy,
          px.inner_numel, flag);
}

static oar_status same_shape_infer(const char *name, oar_tensor *const *in, const oar_attr *a, oar_dtype dt,
                                   oar_meta *out, int *n_out) {
    int d;
    oar_status st = plan_dim_check(name, in[0], a[0].i, &d);
    if (st != OAR_OK) return st;
    oar_meta_from(out, in[0]);
    out->dtype = dt;
    *n_out = 1;
    return OAR_OK;
}

/* ---- cumprod(x; dim): integers and bool multiply in int64 (wrapping), as torch */
static void cumprod_line(const oar_tensor *x, const char *xl, int64_t sx, char *yl, int64_t sy, int64_t n, bool f) {
    (void)f;
    const oar_dtype_traits *tx = &oar_dtypes[x->dtype];
    double acc = 1.0;
    uint64_t iacc = 1;
    bool is_float = tx->is_float;
    for (int64_t i = 0; i < n; i++) {
        if (is_float) {
            acc *= tx->load(xl + i * sx);
            tx->store(yl + i * sy, acc);
        } else {
            iacc *= (uint64_t)tx->load_i64(xl + i * sx);
            *(int64_t *)(yl + i * sy) = (int64_t)iacc;
        }
    }
}

static oar_status cumprod_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    return same_shape_infer("cumprod", in, a, oar_dtypes[in[0]->dtype].is_float ? in[0]->dtype : OAR_I64, out, n_out);
}

static oar_status cumprod_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    int d;
    oar_status st = plan_dim_check("cumprod", in[0], a[0].i, &d);
    if (st != OAR_OK) return st;
    for_lines(in[0], out[0], d, true, cumprod_line, false);
    return OAR_OK;
}

static oar_tensor *cumsum_reverse(oar_tensor *x, int64_t dim) {
    oar_attr a[2] = {oar_attr_int(dim), oar_attr_int(1)};
    return oar_op_call1(OAR_OP_cumsum, &x, 1, a);
}

/* d/dx_i sum_j g_j y_j = sum_{j >= i} g_j y_j / x_i where x_i != 0 (a later zero zeroes its terms, an
 * earlier one every y_j). At the first zero of a line, the same sum with that zero replaced by 1
 * (cumprod of the repaired line); later zeros get 0, since each of their terms holds the first zero.
 * Written in differentiable ops, so double backward works. */
static oar_status cumprod_grad(oar_grad_ctx *g) {
    if (!g->gout[0] || !g->needs[0]) return OAR_OK;
    oar_tensor *x = g->in[0], *y = g->out[0], *go = g->gout[0];
    int64_t dim = g->attrs[0].i;
    oar_tensor *zeros = oar_zeros_like(x), *ones = oar_ones_like(x);
    oar_tensor *is_zero = oar_eq(x, zeros);
    oar_tensor *seen = oar_cumsum(oar_cast(is_zero, OAR_I64), (int)dim);
    oar_tensor *first = oar_logical_and(is_zero, oar_eq(seen, oar_scalar(1.0, OAR_I64)));
    oar_tensor *nonzero_part = oar_div(cumsum_reverse(oar_mul(go, y), dim), oar_where(is_zero, ones, x));
    oar_tensor *repaired = oar_cumprod(oar_where(first, ones, x), (int)dim);
    oar_tensor *first_part = cumsum_reverse(oar_mul(go, repaired), dim);
    g->gin[0] = oar_where(is_zero, oar_where(first, first_part, zeros), nonzero_part);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_cumprod = {
    .name = "cumprod", .n_inputs = 1, .n_outputs = 1, .n_attrs = 1, .attrs = {{"dim", OAR_ATTR_INT}},
    .flags = OAR_OPF_STRIDED | OAR_OPF_AMP_DENY, .ref_dtypes = OAR_BASE_DTYPES,
    .infer = cumprod_infer, .reference = cumprod_ref, .grad = cumprod_grad,
};

oar_tensor *oar_cumprod(oar_tensor *x, int dim) {
    oar_attr a[1] = {oar_attr_int(dim)};
    return oar_op_call1(OAR_OP_cumprod, &x, 1, a);
}

/* ---- cumargmax / cumargmin(x; dim) -> i64: the index of the running extreme. As torch's
 * cummax/cummin: ties move it to the later index, and a NaN, once seen, holds it (each later NaN
 * takes it over). */
static void cumarg_line(const oar_tensor *x, const char *xl, int64_t sx, char *yl, int64_t sy, int64_t n,
                        bool is_min) {
    const oar_dtype_traits *tx = &oar_dtypes[x->dtype];
    int64_t best = 0;
    if (tx->is_float) {
        double cur = 0;
        for (int64_t i = 0; i < n; i++) {
            double v = tx->load(xl + i * sx);
            if (i == 0 || isnan(v) || (!isnan(cur) && (is_min ? v <= cur : v >= cur))) {
                cur = v;
                best = i;
            }
            *(int64_t *)(yl + i * sy) = best;
        }
    } else {
        int64_t cur = 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t v = tx->load_i64(xl + i * sx);
            if (i == 0 || (is_min ? v <= cur : v >= cur)) {
                cur = v;
                best = i;
            }
            *(int64_t *)(yl + i * sy) = best;
        }
    }
}

#define CUMARG(NAME, IS_MIN)                                                                              \
    static oar_status NAME##_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out,     \
                                   int *n_out) {                                                          \
        (void)n_in;                                                                                       \
        return same_shape_infer(#NAME, in, a, OAR_I64, out, n_out);                                       \
    }                                                                                                     \
    static oar_status NAME##_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in,                    \
                                 oar_tensor *const *out, int n_out, const oar_attr *a) {                  \
        (void)ctx; (void)n_in; (void)n_out;                                                               \
        int d;                                                                                            \
        oar_status st = plan_dim_check(#NAME, in[0], a[0].i, &d);                                         \
        if (st != OAR_OK) return st;                                                                      \
        for_lines(in[0], out[0], d, true, cumarg_line, IS_MIN);                                           \
        return OAR_OK;                                                                                    \
    }                                                                                                     \
    const oar_op_def oar_opdef_##NAME = {                                                                 \
        .name = #NAME, .n_inputs = 1, .n_outputs = 1, .n_attrs = 1, .attrs = {{"dim", OAR_ATTR_INT}},     \
        .flags = OAR_OPF_STRIDED | OAR_OPF_NONDIFF, .ref_dtypes = OAR_BASE_DTYPES,                        \
        .infer = NAME##_infer, .reference = NAME##_ref,                                                   \
    };                                                                                                    \
    oar_tensor *oar_##NAME(oar_tensor *x, int dim) {                                                      \
        oar_attr a[1] = {oar_attr_int(dim)};                                                              \
        return oar_op_call1(OAR_OP_##NAME, &x, 1, a);                                                     \
    }
CUMARG(cumargmax, false)
CUMARG(cumargmin, true)

/* ---- argmode(x; dim) -> i64, the dim removed: the most frequent value (the smallest of equally
 * frequent ones), at its last position, as torch.mode. NaNs count as one value, above all others. */
typedef struct mode_item {
    double f;
    int64_t i, pos;
} mode_item;

static int cmp_nan_last(double a, double b) {
    bool na = isnan(a), nb = isnan(b);
    if (na || nb) return na - nb;
    return (a > b) - (a < b);
}
static int mode_cmp_f(const void *pa, const void *pb) {
    const mode_item *a = pa, *b = pb;
    int c = cmp_nan_last(a->f, b->f);
    return c ? c : (a->pos > b->pos) - (a->pos < b->pos); /* stable: equal values keep their order */
}
static int mode_cmp_i(const void *pa, const void *pb) {
    const mode_item *a = pa, *b = pb;
    int c = (a->i > b->i) - (a->i < b->i);
    return c ? c : (a->pos > b->pos) - (a->pos < b->pos);
}

static oar_status argmode_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const oar_tensor *x = in[0];
    int d;
    oar_status st = plan_dim_check("argmode", x, a[0].i, &d);
    if (st != OAR_OK) return st;
    if (x->ndim && x->shape[d] == 0)
        return oar_error(OAR_ERR_SHAPE, "argmode: expected dim %d to have non-zero size; an empty dim has no "
                                        "mode", d);
    out->dtype = OAR_I64;
    out->ndim = 0;
    for (int k = 0; k < x->ndim; k++)
        if (k != d) out->shape[out->ndim++] = x->shape[k];
    *n_out = 1;
    return OAR_OK;
}

static oar_status argmode_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    const oar_tensor *x = in[0];
    int d;
    oar_status st = plan_dim_check("argmode", x, a[0].i, &d);
    if (st != OAR_OK) return st;
    reduce_plan px, py;
    reduce_plan_make(x, dim_mask(d, x->ndim), &px);
    reduce_plan_make(out[0], 0, &py);
    int64_t n = px.inner_numel, sx = px.n_inner ? px.inner_stride[0] : 0;
    const oar_dtype_traits *tx = &oar_dtypes[x->dtype];
    mode_item *items = malloc((size_t)(n ? n : 1) * sizeof *items);
    if (!items) return oar_error(OAR_ERR_OOM, "argmode: out of memory for a line of %lld elements", (long long)n);
    for (int64_t o = 0; o < px.outer_numel; o++) {
        const char *xl = oar_tensor_ptr(x) + plan_outer_offset(&px, o);
        for (int64_t k = 0; k < n; k++) {
            items[k].pos = k;
            if (tx->is_float) items[k].f = tx->load(xl + k * sx);
            else items[k].i = tx->load_i64(xl + k * sx);
        }
        qsort(items, (size_t)n, sizeof *items, tx->is_float ? mode_cmp_f : mode_cmp_i);
        int64_t best = 0, best_count = 0, run = 0;
        for (int64_t k = 0; k < n; k++) {
            run++;
            bool ends = k == n - 1 || (tx->is_float ? cmp_nan_last(items[k].f, items[k + 1].f) != 0
                                                    : items[k].i != items[k + 1].i);
            if (ends) {
                if (run > best_count) {
                    best_count = run;
                    best = items[k].pos;
                }
                run = 0;
            }
        }
        *(int64_t *)(oar_tensor_ptr(out[0]) + plan_outer_offset(&py, o)) = best;
    }
    free(items);
    return OAR_OK;
}

const oar_op_def oar_opdef_argmode = {
    .name = "argmode", .n_inputs = 1, .n_outputs = 1, .n_attrs = 1, .attrs = {{"dim", OAR_ATTR_INT}},
    .flags = OAR_OPF_STRIDED | OAR_OPF_NONDIFF, .ref_dtypes = OAR_BASE_DTYPES,
    .infer = argmode_infer, .reference = argmode_ref,
};

oar_tensor *oar_argmode(oar_tensor *x, int dim) {
    oar_attr a[1] = {oar_attr_int(dim)};
    return oar_op_call1(OAR_OP_argmode, &x, 1, a);
}
