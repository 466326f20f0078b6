/* Printing in the style of PyTorch: nested brackets, aligned columns, long dims elided. */
#include "tensor/tensor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EDGE 3       /* elements shown at each end of a long dim */
#define SUMMARIZE 1000

typedef struct out {
    char *buf;
    size_t size, len;
} out;

static void put(out *o, const char *fmt, ...) OAR_PRINTF(2, 3);
static void put(out *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->len < o->size ? o->buf + o->len : NULL, o->len < o->size ? o->size - o->len : 0, fmt, ap);
    va_end(ap);
    if (n > 0) o->len += (size_t)n;
}

static void put_value(out *o, const oar_tensor *t, const char *p, bool int_like, int prec) {
    const oar_dtype_traits *tr = &oar_dtypes[t->dtype];
    if (t->dtype == OAR_BOOL) put(o, "%s", *(const uint8_t *)p ? "true" : "false");
    else if (oar_dtype_bits_u64(t->dtype)) put(o, "%llu", (unsigned long long)*(const uint64_t *)p);
    else if (!tr->is_float) put(o, "%lld", (long long)tr->load_i64(p));
    else {
        double v = tr->load(p);
        if (isnan(v)) put(o, "nan");
        else if (isinf(v)) put(o, v > 0 ? "inf" : "-inf");
        else if (int_like) put(o, "%.0f.", v);
        else put(o, "%.*f", prec, v);
    }
}

static void put_dim(out *o, const oar_tensor *t, int d, const char *p, bool summarize, bool int_like) {
    if (d == t->ndim) {
        put_value(o, t, p, int_like, 4);
        return;
    }
    int64_t n = t->shape[d];
    int64_t step = t->strides[d] * (int64_t)oar_dtypes[t->dtype].size;
    put(o, "[");
    for (int64_t i = 0; i < n; i++) {
        if (summarize && n > 2 * EDGE && i == EDGE) {
            put(o, d == t->ndim - 1 ? "..., " : "...,\n%*s", d == t->ndim - 1 ? 0 : 8 + d, "");
            i = n - EDGE - 1;
            continue;
        }
        put_dim(o, t, d + 1, p + i * step, summarize, int_like);
        if (i + 1 < n) put(o, d == t->ndim - 1 ? ", " : ",\n%*s", d == t->ndim - 1 ? 0 : 8 + d, "");
    }
    put(o, "]");
}

int oar_format(const oar_tensor *t, char *buf, size_t size) {
    OAR_CHECK_HANDLE("format", t, -1);
    out o = {buf, size, 0};
    if (size) buf[0] = '\0';
    if (!t) {
        put(&o, "tensor(NULL)");
        return (int)o.len;
    }
    char shape[128];
    oar_format_shape(t->shape, t->ndim, shape, sizeof shape);
    if (!t->storage) { /* printing values while tracing is a data read: report it */
        oar_symbolic_error("print", t);
        put(&o, "tensor(<symbolic, made by %s>, shape=%s, dtype=%s)", t->trace_op ? t->trace_op : "an input",
            shape, oar_dtype_name(t->dtype));
        return (int)o.len;
    }
    if (t->device != OAR_CPU) { /* printed from a host copy, the device named as torch does */
        oar_tensor *h = oar_tensor_new(t->dtype, t->shape, t->ndim);
        if (!h || oar_tensor_copy_strided(h, t) != OAR_OK) {
            oar_tensor_unref(h);
            put(&o, "tensor(<on %s: could not copy to the host: %s>)", t->device == OAR_CUDA ? "cuda" : "a device",
                oar_last_error());
            return (int)o.len;
        }
        h->requires_grad = t->requires_grad;
        int n = oar_format(h, buf, size);
        oar_tensor_unref(h);
        o.len = n > 0 ? (size_t)n : 0;
        /* ", device='cuda'" before the closing parenthesis */
        if (o.len && o.len + 16 < size && buf[o.len - 1] == ')') {
            o.len--;
            buf[o.len] = '\0';
            put(&o, ", device='cuda')");
        } else {
            o.len += 15;
        }
        return (int)o.len;
    }
    bool int_like = oar_dtypes[t->dtype].is_float;
    if (int_like) { /* print 1., 2. when every value is integral, like torch */
        oar_tensor *ops[1] = {(oar_tensor *)t};
        oar_iter it;
        oar_iter_init(&it, t->shape, t->ndim, ops, 1);
        if (t->numel == 0) int_like = false;
        else do {
            double v = oar_dtypes[t->dtype].load(it.ptr[0]);
            if (!isfinite(v) || v != floor(v) || fabs(v) > 1e15) { int_like = false; break; }
        } while (oar_iter_next(&it));
    }
    put(&o, "tensor(");
    put_dim(&o, t, 0, oar_tensor_ptr(t), t->numel > SUMMARIZE, int_like);
    put(&o, ", shape=%s, dtype=%s%s)", shape, oar_dtype_name(t->dtype),
        t->requires_grad ? ", requires_grad" : "");
    return (int)o.len;
}

void oar_print(const oar_tensor *t) {
    int n = oar_format(t, NULL, 0);
    char *buf = malloc((size_t)n + 1);
    if (!buf) {
        fputs("tensor(<out of memory while printing>)\n", stdout);
        return;
    }
    oar_format(t, buf, (size_t)n + 1);
    puts(buf);
    free(buf);
}
