/* The NaN/Inf check (PaddlePaddle's FLAGS_check_nan_inf) and FLOP counts for the op table. */
#include "profiler/profiler.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- FLOPs */

static bool starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

static double per_row(const oar_tensor *w) { /* elements of w per output channel */
    return w && w->ndim > 0 && w->shape[0] > 0 ? (double)w->numel / (double)w->shape[0] : 0.0;
}

double oar_prof_flops(const char *name, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out) {
    if (!name || n_out < 1 || !out[0] || n_in < 1 || !in[0]) return 0.0;
    const oar_tensor *y = out[0];
    switch (name[0]) {
    case 'c':
        if (n_in < 2 || !in[1]) return 0.0;
        if (starts_with(name, "conv2d_grad_input")) return 2.0 * (double)in[0]->numel * per_row(in[1]);
        if (starts_with(name, "conv2d_grad_weight")) return 2.0 * (double)in[1]->numel * per_row(y);
        if (starts_with(name, "conv_transpose")) return 2.0 * (double)in[0]->numel * per_row(in[1]);
        if (starts_with(name, "conv1d") || starts_with(name, "conv2d"))
            return 2.0 * (double)y->numel * per_row(in[1]);
        return 0.0;
    case 'l':
        if (starts_with(name, "linear") && in[0]->ndim > 0)
            return 2.0 * (double)y->numel * (double)in[0]->shape[in[0]->ndim - 1];
        return 0.0;
    case 'm':
    case 'b':
        if ((starts_with(name, "matmul") || starts_with(name, "bmm")) && in[0]->ndim > 0)
            return 2.0 * (double)y->numel * (double)in[0]->shape[in[0]->ndim - 1];
        return 0.0;
    case 'a':
        if (starts_with(name, "addmm") && n_in >= 2 && in[1] && in[1]->ndim > 0)
            return 2.0 * (double)y->numel * (double)in[1]->shape[in[1]->ndim - 1];
        return 0.0;
    default: return 0.0;
    }
}

/* ---------------------------------------------------------------- NaN/Inf */

typedef struct bad_count {
    int64_t nan, inf, first;
} bad_count;

/* Non-finite values by bit pattern: exponent all ones; NaN when the mantissa is not zero. */
#define SCAN_BITS(T, EXP, MAN)                                                \
    do {                                                                      \
        const T *p = (const T *)base;                                         \
        for (int64_t i = 0; i < n; i++) {                                     \
            T v = p[i];                                                       \
            if ((v & (EXP)) == (EXP)) {                                       \
                if (c.first < 0) c.first = i;                                 \
                if (v & (MAN)) c.nan++;                                       \
                else c.inf++;                                                 \
            }                                                                 \
        }                                                                     \
    } while (0)

static bad_count scan_contiguous(const void *base, int64_t n, oar_dtype dt) {
    bad_count c = {0, 0, -1};
    switch (dt) {
    case OAR_F32: SCAN_BITS(uint32_t, 0x7f800000u, 0x007fffffu); break;
    case OAR_F64: SCAN_BITS(uint64_t, 0x7ff0000000000000ull, 0x000fffffffffffffull); break;
    case OAR_F16: SCAN_BITS(uint16_t, 0x7c00u, 0x03ffu); break;
    case OAR_BF16: SCAN_BITS(uint16_t, 0x7f80u, 0x007fu); break;
    default: break;
    }
    return c;
}

static bad_count scan(oar_tensor *t) {
    if (t->device != OAR_CPU) { /* a GPU output is scanned in a host copy */
        bad_count c = {0, 0, -1};
        oar_tensor *h = oar_tensor_new(t->dtype, t->shape, t->ndim);
        if (h && oar_tensor_copy_strided(h, t) == OAR_OK) c = scan_contiguous(oar_tensor_ptr(h), h->numel, h->dtype);
        oar_tensor_unref(h);
        return c;
    }
    if (t->contiguous) return scan_contiguous(oar_tensor_ptr(t), t->numel, t->dtype);
    bad_count c = {0, 0, -1};
    oar_iter it;
    oar_iter_init(&it, t->shape, t->ndim, &t, 1);
    int64_t i = 0;
    do {
        bad_count one = scan_contiguous(it.ptr[0], 1, t->dtype);
        if (one.first >= 0 && c.first < 0) c.first = i;
        c.nan += one.nan;
        c.inf += one.inf;
        i++;
    } while (oar_iter_next(&it));
    return c;
}

int64_t oar_count_nan(oar_tensor *t) {
    if (!t || !t->storage || !oar_dtypes[t->dtype].is_float || t->numel == 0) return 0;
    return scan(t).nan;
}

/* ", input 1 [4, 3] f32: min -1 max 2 mean 0.25 (1 NaN, 0 Inf)" */
static int describe_input(char *buf, size_t size, int i, oar_tensor *x) {
    char shape[96];
    if (!x) return snprintf(buf, size, "; input %d: none", i);
    oar_format_shape(x->shape, x->ndim, shape, sizeof shape);
    int n = snprintf(buf, size, "; input %d %s %s", i, shape, oar_dtype_name(x->dtype));
    if (!x->storage) return n + snprintf(buf + n, size > (size_t)n ? size - (size_t)n : 0, ": no data");
    if (x->numel == 0) return n + snprintf(buf + n, size > (size_t)n ? size - (size_t)n : 0, ": empty");
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    int64_t nan = 0, inf = 0, finite = 0;
    double (*load)(const void *) = oar_dtypes[x->dtype].load;
    oar_iter it;
    oar_iter_init(&it, x->shape, x->ndim, &x, 1);
    do {
        double v = load(it.ptr[0]);
        if (isnan(v)) nan++;
        else if (isinf(v)) inf++;
        else {
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            sum += v;
            finite++;
        }
    } while (oar_iter_next(&it));
    size_t rest = size > (size_t)n ? size - (size_t)n : 0;
    if (finite)
        n += snprintf(buf + n, rest, ": min %.6g max %.6g mean %.6g", lo, hi, sum / (double)finite);
    else
        n += snprintf(buf + n, rest, ": no finite values");
    rest = size > (size_t)n ? size - (size_t)n : 0;
    if (nan || inf) n += snprintf(buf + n, rest, " (%lld NaN, %lld Inf)", (long long)nan, (long long)inf);
    return n;
}

static _Thread_local uint64_t tl_failures;
uint64_t oar_prof_nan_failures(void) { return tl_failures; }

oar_status oar_check_outputs(const char *op_name, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                             int n_out) {
    for (int o = 0; o < n_out; o++) {
        oar_tensor *y = out[o];
        if (!y || !y->storage || !oar_dtypes[y->dtype].is_float || y->numel == 0) continue;
        bad_count c = scan(y);
        if (c.first < 0) continue;
        char msg[1000], shape[96];
        oar_format_shape(y->shape, y->ndim, shape, sizeof shape);
        int n = snprintf(msg, sizeof msg,
                         "check_nan_inf: op '%s' produced %lld NaN and %lld Inf in output %d (%s %s, first at "
                         "element %lld)", op_name ? op_name : "?", (long long)c.nan, (long long)c.inf, o, shape,
                         oar_dtype_name(y->dtype), (long long)c.first);
        int shown = n_in < 8 ? n_in : 8;
        for (int i = 0; i < shown && n < (int)sizeof msg; i++)
            n += describe_input(msg + n, sizeof msg - (size_t)n, i, in[i]);
        if (shown < n_in && n < (int)sizeof msg) snprintf(msg + n, sizeof msg - (size_t)n, "; ...");
        tl_failures++;
        return oar_error(OAR_ERR_NUMERIC, "%s", msg);
    }
    return OAR_OK;
}
