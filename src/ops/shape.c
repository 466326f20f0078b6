/* Shape ops that move whole blocks of a tensor: concat, stack, split, chunk, flip, and pad
 * with pad_backward (its adjoint). split/chunk return views; the others copy. Reference
 * kernels read inputs of any strides by copying into windows (views) of the output. */
#include "ops/op.h"

#include <string.h>

/* t with dim d restricted to [start, start + len): a by-value view, no references taken. */
static oar_tensor window(const oar_tensor *t, int d, int64_t start, int64_t len) {
    oar_tensor w = *t;
    w.shape[d] = len;
    if (len) w.offset += start * t->strides[d];
    oar_tensor_refresh(&w);
    return w;
}

/* ================================================================ concat */

/* torch keeps a legacy rule: 1-d empty tensors may join anything; they are skipped. */
static bool concat_skips(const oar_tensor *t) { return t->ndim == 1 && t->shape[0] == 0; }

static oar_status concat_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    oar_status st = oar_check_same_dtype("concat", in, n_in);
    if (st != OAR_OK) return st;
    int lead = -1;
    for (int i = 0; i < n_in; i++) {
        if (in[i]->ndim == 0)
            return oar_error(OAR_ERR_SHAPE, "concat: expected inputs with at least 1 dim, got a 0-d input %d; "
                                            "use oar_stack to join 0-d tensors", i);
        if (lead < 0 && !concat_skips(in[i])) lead = i;
    }
    const oar_tensor *x = in[lead < 0 ? 0 : lead];
    int d = oar_dim_index(a[0].i, x->ndim);
    if (d < 0) return oar_dim_error("concat", a[0].i, x->ndim);
    oar_meta_from(out, x);
    *n_out = 1;
    if (lead < 0) return OAR_OK; /* only skipped inputs: the result is empty like them */
    int64_t total = 0;
    for (int i = 0; i < n_in; i++) {
        const oar_tensor *t = in[i];
        if (concat_skips(t)) continue;
        if (t->ndim != x->ndim)
            return oar_error(OAR_ERR_SHAPE, "concat: expected input %d to have %d dims like input %d, got %d",
                             i, x->ndim, lead, t->ndim);
        for (int k = 0; k < x->ndim; k++) {
            if (k != d && t->shape[k] != x->shape[k])
                return oar_error(OAR_ERR_SHAPE, "concat: expected input %d to match input %d in dim %d, got "
                                                "%lld != %lld; only dim %d (the concat dim) may differ",
                                 i, lead, k, (long long)t->shape[k], (long long)x->shape[k], d);
        }
        total += t->shape[d];
    }
    out->shape[d] = total;
    return OAR_OK;
}

static oar_status concat_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                             int n_out, const oar_attr *a) {
    (void)ctx; (void)n_out;
    oar_tensor *y = out[0];
    int d = oar_dim_index(a[0].i, y->ndim);
    int64_t at = 0;
    for (int i = 0; i < n_in; i++) {
        if (concat_skips(in[i])) continue;
        oar_tensor w = window(y, d, at, in[i]->shape[d]);
        oar_status st = oar_tensor_copy_strided(&w, in[i]); /* any device: the GPU's kernel too */
        if (st != OAR_OK) return st;
        at += in[i]->shape[d];
    }
    return OAR_OK;
}

/* Each input's gradient is its slice of g. */
static oar_status concat_grad(oar_grad_ctx *g) {
    int d = oar_dim_index(g->attrs[0].i, g->gout[0]->ndim);
    int64_t at = 0;
    for (int i = 0; i < g->n_in; i++) {
        if (concat_skips(g->in[i])) continue;
        int64_t len = g->in[i]->shape[d];
        if (g->needs[i] && !(g->gin[i] = oar_slice(g->gout[0], d, at, at + len, 1))) return oar_last_status();
        at += len;
    }
    return OAR_OK;
}

const oar_op_def oar_opdef_concat = {
    .name = "concat", .n_inputs = -1, .n_outputs = 1, .n_attrs = 1, .attrs = {{"dim", OAR_ATTR_INT}},
    .flags = OAR_OPF_STRIDED | OAR_OPF_AMP_PROMOTE, .ref_dtypes = OAR_ALL_DTYPES,
    .infer = concat_infer, .reference = concat_ref, .grad = concat_grad,
};

/* ================================================================ stack */

static oar_status stack_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    oar_status st = oar_check_same_dtype("stack", in, n_in);
    if (st != OAR_OK) return st;
    const oar_tensor *x = in[0];
    if (x->ndim >= OAR_MAX_DIMS)
        return oar_error(OAR_ERR_SHAPE, "stack: expected inputs with fewer than %d dims (the result gains "
                                        "one), got %d", OAR_MAX_DIMS, x->ndim);
    int d = oar_dim_index(a[0].i, x->ndim + 1);
    if (d < 0)
        return oar_error(OAR_ERR_INVALID_ARG, "stack: expected dim in [%d, %d] for %d-d inputs, got %lld",
                         -(x->ndim + 1), x->ndim, x->ndim, (long long)a[0].i);
    for (int i = 1; i < n_in; i++) {
        if (in[i]->ndim != x->ndim || memcmp(in[i]->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim)) {
            char s0[128], si[128];
            oar_format_shape(x->shape, x->ndim, s0, sizeof s0);
            oar_format_shape(in[i]->shape, in[i]->ndim, si, sizeof si);
            return oar_error(OAR_ERR_SHAPE, "stack: expected input %d to have input 0's shape %s, got %s; "
                                            "use oar_concat to join along an existing dim", i, s0, si);
        }
    }
    out->dtype = x->dtype;
    out->ndim = x->ndim + 1;
    for (int k = 0, s = 0; k < out->ndim; k++) out->shape[k] = k == d ? n_in : x->shape[s++];
    *n_out = 1;
    return OAR_OK;
}

static oar_status stack_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                            int n_out, const oar_attr *a) {
    (void)ctx; (void)n_out;
    oar_tensor *y = out[0];
    int d = oar_dim_index(a[0].i, y->ndim);
    for (int i = 0; i < n_in; i++) {
        /* the window at position i along d, with that size-1 dim dropped */
        oar_tensor w = window(y, d, i, 1);
        for (int k = d; k + 1 < w.ndim; k++) {
            w.shape[k] = w.shape[k + 1];
            w.strides[k] = w.strides[k + 1];
        }
        w.ndim--;
        oar_tensor_refresh(&w);
        oar_status st = oar_tensor_copy_strided(&w, in[i]); /* any device: the GPU's kernel too */
        if (st != OAR_OK) return st;
    }
    return OAR_OK;
}

/* Input i's gradient is g at position i along the new dim. */
static oar_status stack_grad(oar_grad_ctx *g) {
    int d = oar_dim_index(g->attrs[0].i, g->gout[0]->ndim);
    for (int i = 0; i < g->n_in; i++) {
        if (g->needs[i] && !(g->gin[i] = oar_squeeze(oar_slice(g->gout[0], d, i, i + 1, 1), d)))
            return oar_last_status();
    }
    return OAR_OK;
}

const oar_op_def oar_opdef_stack = {
    .name = "stack", .n_inputs = -1, .n_outputs = 1, .n_attrs = 1, .attrs = {{"dim", OAR_ATTR_INT}},
    .flags = OAR_OPF_STRIDED | OAR_OPF_AMP_PROMOTE, .ref_dtypes = OAR_ALL_DTYPES,
    .infer = stack_infer, .reference = stack_ref, .grad = stack_grad,
};

/* ================================================================ split, chunk */

/* Piece k starts at k * step; all have length step except the last, which has last. */
typedef struct split_plan {
    int dim, n;
    int64_t step, last;
} split_plan;

static int64_t piece_len(const split_plan *p, int k) { return k < p->n - 1 ? p->step : p->last; }

static oar_status plan_dim(const char *op, const oar_tensor *x, int64_t dim, split_plan *p) {
    if (x->ndim == 0)
        return oar_error(OAR_ERR_SHAPE, "%s: expected a tensor with at least 1 dim, got a 0-d tensor", op);
    p->dim = oar_dim_index(dim, x->ndim);
    return p->dim < 0 ? oar_dim_error(op, dim, x->ndim) : OAR_OK;
}

static oar_status plan_finish(const char *op, const char *remedy, const oar_tensor *x, int64_t n, int64_t step,
                              split_plan *p) {
    int64_t size = x->shape[p->dim];
    if (n > OAR_MAX_OUTPUTS)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected at most %d pieces, got %lld (dim %d has size %lld); %s",
                         op, OAR_MAX_OUTPUTS, (long long)n, p->dim, (long long)size, remedy);
    p->n = (int)n;
    p->step = step;
    p->last = size - step * (n - 1);
    return OAR_OK;
}

/* torch.split: pieces of split_size (the last may be smaller); 0 only for an empty dim. */
static oar_status split_plan_of(const oar_tensor *x, const oar_attr *a, split_plan *p) {
    oar_status st = plan_dim("split", x, a[0].i, p);
    if (st != OAR_OK) return st;
    int64_t size = x->shape[p->dim], s = a[1].i;
    if (s < 0 || (s == 0 && size > 0))
        return oar_error(OAR_ERR_INVALID_ARG, "split: expected split_size > 0 (0 only for an empty dim), got "
                                              "%lld for dim %d of size %lld", (long long)s, p->dim, (long long)size);
    int64_t n = s ? size / s + (size % s != 0) : 1;
    return plan_finish("split", "use a larger split_size", x, n < 1 ? 1 : n, s, p);
}

/* torch.chunk: pieces of ceil(size / chunks), so there may be fewer than chunks of them; an
 * empty dim gives chunks empty pieces. */
static oar_status chunk_plan_of(const oar_tensor *x, const oar_attr *a, split_plan *p) {
    oar_status st = plan_dim("chunk", x, a[0].i, p);
    if (st != OAR_OK) return st;
    int64_t size = x->shape[p->dim], c = a[1].i;
    if (c <= 0) return oar_error(OAR_ERR_INVALID_ARG, "chunk: expected chunks > 0, got %lld", (long long)c);
    int64_t step = size / c + (size % c != 0);
    int64_t n = step ? size / step + (size % step != 0) : c;
    return plan_finish("chunk", "ask for fewer chunks", x, n, step, p);
}

static oar_status pieces_meta(const oar_tensor *x, const split_plan *p, oar_meta *out, int *n_out) {
    for (int k = 0; k < p->n; k++) {
        oar_meta_from(&out[k], x);
        out[k].shape[p->dim] = piece_len(p, k);
    }
    *n_out = p->n;
    return OAR_OK;
}

static oar_status pieces_view(const oar_tensor *x, const split_plan *p, oar_tensor *const *out) {
    for (int k = 0; k < p->n; k++) {
        memcpy(out[k]->strides, x->strides, sizeof x->strides);
        out[k]->offset = x->offset + (piece_len(p, k) ? p->step * k * x->strides[p->dim] : 0);
    }
    return OAR_OK;
}

/* The gradient joins the pieces' gradients, with zeros where a piece received none. */
static oar_status pieces_grad(oar_grad_ctx *g, const split_plan *p) {
    const oar_tensor *x = g->in[0];
    oar_tensor *parts[OAR_MAX_OUTPUTS];
    for (int k = 0; k < p->n; k++) {
        parts[k] = g->gout[k];
        if (!parts[k]) {
            int64_t shape[OAR_MAX_DIMS];
            memcpy(shape, x->shape, sizeof shape);
            shape[p->dim] = piece_len(p, k);
            oar_tensor *z = oar_tensor_new_on(x->device, x->dtype, shape, x->ndim); /* zeros on x's device */
            if (!z || oar_tensor_fill(z, 0.0) != OAR_OK) {
                oar_tensor_unref(z);
                return oar_last_status();
            }
            parts[k] = oar_track(z);
        }
    }
    g->gin[0] = oar_concat(parts, p->n, p->dim);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

#define PIECES_OP(NAME, PLAN, ATTR)                                                                      \
    static oar_status NAME##_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out,     \
                                   int *n_out) {                                                         \
        (void)n_in;                                                                                      \
        split_plan p;                                                                                    \
        oar_status st = PLAN(in[0], a, &p);                                                              \
        return st != OAR_OK ? st : pieces_meta(in[0], &p, out, n_out);                                  \
    }                                                                                                    \
    static oar_status NAME##_view(oar_tensor *const *in, int n_in, const oar_attr *a,                     \
                                  oar_tensor *const *out, int n_out) {                                   \
        (void)n_in; (void)n_out;                                                                         \
        split_plan p;                                                                                    \
        oar_status st = PLAN(in[0], a, &p);                                                              \
        return st != OAR_OK ? st : pieces_view(in[0], &p, out);                                          \
    }                                                                                                    \
    static oar_status NAME##_grad(oar_grad_ctx *g) {                                                     \
        split_plan p;                                                                                    \
        oar_status st = PLAN(g->in[0], g->attrs, &p);                                                    \
        return st != OAR_OK ? st : pieces_grad(g, &p);                                                   \
    }                                                                                                    \
    const oar_op_def oar_opdef_##NAME = {                                                                \
        .name = #NAME, .n_inputs = 1, .n_outputs = -1, .n_attrs = 2,                                     \
        .attrs = {{"dim", OAR_ATTR_INT}, {ATTR, OAR_ATTR_INT}},                                          \
        .flags = OAR_OPF_VIEW | OAR_OPF_STRIDED, .ref_dtypes = OAR_ALL_DTYPES,                           \
        .infer = NAME##_infer, .view = NAME##_view, .grad = NAME##_grad,                                 \
    };

PIECES_OP(split, split_plan_of, "split_size")
PIECES_OP(chunk, chunk_plan_of, "chunks")

/* ================================================================ flip */

static oar_status flip_mask(const oar_tensor *x, const oar_attr *dims, uint32_t *mask) {
    uint32_t m = 0;
    for (int i = 0; i < dims->n; i++) {
        int d = oar_dim_index(dims->ints[i], x->ndim);
        if (d < 0) return oar_dim_error("flip", dims->ints[i], x->ndim);
        if (m & (1u << d))
            return oar_error(OAR_ERR_INVALID_ARG, "flip: expected distinct dims, got dim %d twice", d);
        m |= 1u << d;
    }
    *mask = m;
    return OAR_OK;
}

static oar_status flip_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    uint32_t mask = 0;
    oar_status st = flip_mask(in[0], &a[0], &mask);
    if (st != OAR_OK) return st;
    oar_meta_from(out, in[0]);
    *n_out = 1;
    return OAR_OK;
}

/* Reads x through a view that starts at the far end of each flipped dim and walks it backwards. */
static oar_status flip_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                           int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    uint32_t mask = 0;
    oar_status st = flip_mask(in[0], &a[0], &mask);
    if (st != OAR_OK || out[0]->numel == 0) return st;
    oar_tensor r = *in[0];
    for (int d = 0; d < r.ndim; d++) {
        if (!(mask & (1u << d))) continue;
        r.offset += (r.shape[d] - 1) * r.strides[d];
        r.strides[d] = -r.strides[d];
    }
    r.contiguous = false;
    return oar_tensor_copy_strided(out[0], &r); /* any device: the GPU's kernel too */
}

static oar_status flip_grad(oar_grad_ctx *g) {
    const oar_attr *dims = &g->attrs[0];
    int d[OAR_ATTR_MAX_INTS];
    for (int i = 0; i < dims->n; i++) d[i] = (int)dims->ints[i];
    g->gin[0] = oar_flip(g->gout[0], d, dims->n);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_flip = {
    .name = "flip", .n_inputs = 1, .n_outputs = 1, .n_attrs = 1, .attrs = {{"dims", OAR_ATTR_INTS}},
    .flags = OAR_OPF_STRIDED, .ref_dtypes = OAR_ALL_DTYPES,
    .infer = flip_infer, .reference = flip_ref, .grad = flip_grad,
};

/* ================================================================ pad, pad_backward */

/* Per dim: how far the input is shifted (before) and the padded size. */
typedef struct pad_plan {
    int mode;
    int64_t before[OAR_MAX_DIMS], out[OAR_MAX_DIMS];
} pad_plan;

static const char *pad_mode_name(int64_t m) {
    return m == OAR_PAD_CONSTANT ? "constant" : m == OAR_PAD_REFLECT ? "reflect" : "replicate";
}

/* Validates pads (pairs from the last dim, as torch.nn.functional.pad) against shape. */
static oar_status pad_plan_make(const char *op, const int64_t *shape, int nd, const oar_attr *pads, int64_t mode,
                                pad_plan *p) {
    if (mode < OAR_PAD_CONSTANT || mode > OAR_PAD_REPLICATE)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected mode %d (constant), %d (reflect) or %d (replicate), "
                                              "got %lld", op, OAR_PAD_CONSTANT, OAR_PAD_REFLECT, OAR_PAD_REPLICATE,
                         (long long)mode);
    if (pads->n % 2)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected (before, after) pairs of pads, got an odd count %d",
                         op, pads->n);
    if (pads->n / 2 > nd)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected at most %d pairs of pads for a %d-d input (one pair "
                                              "per dim, from the last), got %d pairs", op, nd, nd, pads->n / 2);
    p->mode = (int)mode;
    for (int d = 0; d < nd; d++) {
        p->before[d] = 0;
        p->out[d] = shape[d];
    }
    for (int k = 0; k < pads->n / 2; k++) {
        int d = nd - 1 - k;
        int64_t b = pads->ints[2 * k], e = pads->ints[2 * k + 1], size = shape[d];
        if (mode != OAR_PAD_CONSTANT && size == 0)
            return oar_error(OAR_ERR_SHAPE, "%s: %s mode expected a non-empty dim %d to take values from, got "
                                            "size 0; use constant mode", op, pad_mode_name(mode), d);
        if (mode == OAR_PAD_REFLECT && (b >= size || e >= size))
            return oar_error(OAR_ERR_INVALID_ARG, "%s: reflect mode expected pads < %lld (the size of dim %d), got "
                                                  "(%lld, %lld); use replicate or constant mode for wider pads",
                             op, (long long)size, d, (long long)b, (long long)e);
        if (b < -size || e < -size)
            return oar_error(OAR_ERR_INVALID_ARG, "%s: expected negative pads (cropping) of at most %lld (the size "
                                                  "of dim %d), got (%lld, %lld)", op, (long long)size, d,
                             (long long)b, (long long)e);
        if (b > INT64_MAX / 4 || e > INT64_MAX / 4 || size + b + e < 0)
            return oar_error(OAR_ERR_INVALID_ARG, "%s: expected a padded size of dim %d in [0, 2^61], got %lld + "
                                                  "%lld + %lld", op, d, (long long)size, (long long)b,
                             (long long)e);
        p->before[d] = b;
        p->out[d] = size + b + e;
    }
    return OAR_OK;
}

/* The input coordinate that output coordinate o of a dim reads, or -1 for the fill value.
 * Reflect pads are < size, so one bounce always lands inside. */
static int64_t pad_source(int mode, int64_t o, int64_t before, int64_t size) {
    int64_t c = o - before;
    if (c >= 0 && c < size) return c;
    if (mode == OAR_PAD_CONSTANT) return -1;
    if (mode == OAR_PAD_REPLICATE) return c < 0 ? 0 : size - 1;
    return c < 0 ? -c : 2 * (size - 1) - c;
}

static oar_status pad_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const oar_tensor *x = in[0];
    pad_plan p;
    oar_status st = pad_plan_make("pad", x->shape, x->ndim, &a[0], a[1].i, &p);
    if (st != OAR_OK) return st;
    out->dtype = x->dtype;
    out->ndim = x->ndim;
    memcpy(out->shape, p.out, sizeof(int64_t) * (size_t)x->ndim);
    *n_out = 1;
    return OAR_OK;
}

static oar_status pad_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                          int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    const oar_tensor *x = in[0];
    oar_tensor *y = out[0];
    pad_plan p;
    oar_status st = pad_plan_make("pad", x->shape, x->ndim, &a[0], a[1].i, &p);
    if (st != OAR_OK || y->numel == 0) return st;
    const oar_dtype_traits *tr = &oar_dtypes[y->dtype];
    char fill[16];
    tr->store(fill, a[2].f);
    const char *xb = x->numel ? oar_tensor_ptr(x) : NULL;
    oar_iter it;
    oar_iter_init(&it, y->shape, y->ndim, &y, 1);
    do {
        bool inside = true;
        int64_t off = 0;
        for (int d = 0; d < y->ndim && inside; d++) {
            int64_t c = pad_source(p.mode, it.idx[d], p.before[d], x->shape[d]);
            inside = c >= 0;
            off += c * x->strides[d];
        }
        memcpy(it.ptr[0], inside ? xb + off * (int64_t)tr->size : fill, tr->size);
    } while (oar_iter_next(&it));
    return OAR_OK;
}

static oar_tensor *pad_backward_call(oar_tensor *g, const oar_tensor *x, const oar_attr *pads, const oar_attr *mode) {
    oar_attr a[3] = {oar_attr_ints(x->shape, x->ndim), *pads, *mode};
    oar_tensor *in[1] = {g};
    return oar_op_call1(OAR_OP_pad_backward, in, 1, a);
}

static oar_status pad_grad(oar_grad_ctx *g) {
    g->gin[0] = pad_backward_call(g->gout[0], g->in[0], &g->attrs[0], &g->attrs[1]);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_pad = {
    .name = "pad", .n_inputs = 1, .n_outputs = 1, .n_attrs = 3,
    .attrs = {{"pads", OAR_ATTR_INTS}, {"mode", OAR_ATTR_INT}, {"value", OAR_ATTR_FLOAT}},
    .flags = OAR_OPF_STRIDED, .ref_dtypes = OAR_ALL_DTYPES,
    .infer = pad_infer, .reference = pad_ref, .grad = pad_grad,
};

/* pad_backward(g; shape, pads, mode): the adjoint of pad. Each element of g is added to the
 * input element it was read from (reflected and replicated borders read some twice). */
static oar_status pad_backward_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out,
                                     int *n_out) {
    (void)n_in;
    const oar_tensor *g = in[0];
    if (g->dtype == OAR_BOOL)
        return oar_error(OAR_ERR_DTYPE, "pad_backward: expected a numeric gradient, got bool");
    int nd = a[0].n;
    if (nd > OAR_MAX_DIMS)
        return oar_error(OAR_ERR_SHAPE, "pad_backward: expected a shape of at most %d dims, got %d", OAR_MAX_DIMS, nd);
    for (int d = 0; d < nd; d++) /* from a model file, the shape may be anything */
        if (a[0].ints[d] < 0 || a[0].ints[d] > INT64_MAX / 4)
            return oar_error(OAR_ERR_SHAPE, "pad_backward: expected sizes in [0, 2^61] in the shape, got %lld",
                             (long long)a[0].ints[d]);
    pad_plan p;
    oar_status st = pad_plan_make("pad_backward", a[0].ints, nd, &a[1], a[2].i, &p);
    if (st != OAR_OK) return st;
    if (g->ndim != nd || memcmp(g->shape, p.out, sizeof(int64_t) * (size_t)nd)) {
        char want[128], got[128];
        oar_format_shape(p.out, nd, want, sizeof want);
        oar_format_shape(g->shape, g->ndim, got, sizeof got);
        return oar_error(OAR_ERR_SHAPE, "pad_backward: expected the gradient to have the padded shape %s, got %s",
                         want, got);
    }
    out->dtype = g->dtype;
    out->ndim = nd;
    memcpy(out->shape, a[0].ints, sizeof(int64_t) * (size_t)nd);
    *n_out = 1;
    return OAR_OK;
}

static oar_status pad_backward_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                   int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    oar_tensor *g = in[0], *y = out[0];
    pad_plan p;
    oar_status st = pad_plan_make("pad_backward", y->shape, y->ndim, &a[1], a[2].i, &p);
    if (st != OAR_OK) return st;
    const oar_dtype_traits *tr = &oar_dtypes[y->dtype];
    if (y->numel) memset(oar_tensor_ptr(y), 0, (size_t)y->numel * tr->size);
    if (g->numel == 0) return OAR_OK;
    char *yb = y->numel ? oar_tensor_ptr(y) : NULL;
    oar_iter it;
    oar_iter_init(&it, g->shape, g->ndim, &g, 1);
    do {
        bool inside = true;
        int64_t off = 0;
        for (int d = 0; d < g->ndim && inside; d++) {
            int64_t c = pad_source(p.mode, it.idx[d], p.before[d], y->shape[d]);
            inside = c >= 0;
            off += c * y->strides[d];
        }
        if (!inside) continue; /* a constant fill: no input element to credit */
        char *dst = yb + off * (int64_t)tr->size;
        if (tr->is_float) tr->store(dst, tr->load(dst) + tr->load(it.ptr[0]));
        else tr->store_i64(dst, (int64_t)((uint64_t)tr->load_i64(dst) + (uint64_t)tr->load_i64(it.ptr[0])));
    } while (oar_iter_next(&it));
    return OAR_OK;
}

/* pad_backward is linear in g, so its own gradient is pad again (zeros in the fill). */
static oar_status pad_backward_grad(oar_grad_ctx *g) {
    oar_attr a[3] = {g->attrs[1], g->attrs[2], oar_attr_float(0.0)};
    oar_tensor *in[1] = {g->gout[0]};
    g->gin[0] = oar_op_call1(OAR_OP_pad, in, 1, a);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_pad_backward = {
    .name = "pad_backward", .n_inputs = 1, .n_outputs = 1, .n_attrs = 3,
    .attrs = {{"shape", OAR_ATTR_INTS}, {"pads", OAR_ATTR_INTS}, {"mode", OAR_ATTR_INT}},
    .flags = OAR_OPF_STRIDED, .ref_dtypes = OAR_ALL_DTYPES & ~OAR_DTYPE_BIT(OAR_BOOL),
    .infer = pad_backward_infer, .reference = pad_backward_ref, .grad = pad_backward_grad,
};

/* ================================================================ public API */

static bool check_list(const char *op, const void *xs, int n, int max, const char *what) {
    if (n < 1 || n > max || !xs) {
        oar_error(OAR_ERR_INVALID_ARG, "%s: expected 1 to %d %s, got %d%s", op, max, what, n,
                  xs ? "" : " (the array is NULL)");
        return false;
    }
    return true;
}

oar_tensor *oar_concat(oar_tensor *const *xs, int n, int dim) {
    if (!check_list("concat", xs, n, OAR_MAX_INPUTS, "inputs")) return NULL;
    oar_attr a = oar_attr_int(dim);
    return oar_op_call1(OAR_OP_concat, xs, n, &a);
}

oar_tensor *oar_stack(oar_tensor *const *xs, int n, int dim) {
    if (!check_list("stack", xs, n, OAR_MAX_INPUTS, "inputs")) return NULL;
    oar_attr a = oar_attr_int(dim);
    return oar_op_call1(OAR_OP_stack, xs, n, &a);
}

/* Runs split or chunk: out == NULL only counts the pieces. */
static int pieces_call(oar_op_id op, oar_tensor *x, const oar_attr *a, oar_tensor **out, int max_out) {
    const char *name = oar_op_table[op]->name;
    oar_tensor *in[1] = {x};
    oar_meta m[OAR_MAX_OUTPUTS];
    int n = 0;
    if (oar_op_infer(op, in, 1, a, m, &n) != OAR_OK) return -1;
    if (!out) return n;
    if (n > max_out) {
        oar_error(OAR_ERR_INVALID_ARG, "%s: expected room for %d pieces in out, got max_out = %d; pass out = NULL "
                                       "to count the pieces first", name, n, max_out);
        return -1;
    }
    oar_tensor *parts[OAR_MAX_OUTPUTS];
    int made = OAR_MAX_OUTPUTS;
    if (oar_op_call(op, in, 1, a, parts, &made) != OAR_OK) return -1;
    for (int k = 0; k < made; k++) out[k] = oar_track(parts[k]);
    return made;
}

int oar_split(oar_tensor *x, int64_t split_size, int dim, oar_tensor **out, int max_out) {
    oar_attr a[2] = {oar_attr_int(dim), oar_attr_int(split_size)};
    return pieces_call(OAR_OP_split, x, a, out, max_out);
}

int oar_chunk(oar_tensor *x, int chunks, int dim, oar_tensor **out, int max_out) {
    oar_attr a[2] = {oar_attr_int(dim), oar_attr_int(chunks)};
    return pieces_call(OAR_OP_chunk, x, a, out, max_out);
}

oar_tensor *oar_flip(oar_tensor *x, const int *dims, int n_dims) {
    if (n_dims < 0 || n_dims > OAR_MAX_DIMS || (n_dims && !dims)) {
        oar_error(OAR_ERR_INVALID_ARG, "flip: expected 0 to %d dims, got %d%s", OAR_MAX_DIMS, n_dims,
                  dims ? "" : " (dims is NULL)");
        return NULL;
    }
    oar_attr a = oar_attr_dims(dims, n_dims);
    oar_tensor *in[1] = {x};
    return oar_op_call1(OAR_OP_flip, in, 1, &a);
}

oar_tensor *oar_pad(oar_tensor *x, const int64_t *pads, int n_pads, oar_pad_mode mode, double value) {
    if (n_pads < 0 || n_pads > 2 * OAR_MAX_DIMS || (n_pads && !pads)) {
        oar_error(OAR_ERR_INVALID_ARG, "pad: expected 0 to %d pads (a pair per dim), got %d%s", 2 * OAR_MAX_DIMS,
                  n_pads, pads ? "" : " (pads is NULL)");
        return NULL;
    }
    oar_attr a[3] = {oar_attr_ints(pads, n_pads), oar_attr_int(mode), oar_attr_float(value)};
    oar_tensor *in[1] = {x};
    return oar_op_call1(OAR_OP_pad, in, 1, a);
}
