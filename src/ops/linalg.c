/* Linear algebra: matmul (batched, broadcasting, torch's rules for 1-d operands), linear
 * (x·Wᵀ + b) and einsum. The reference kernels are plain loops computing floats in double and
 * integers in int64; the GEMM-backed kernels live in kernels/cpu/cpu_gemm.c. */
#include "ops/linalg.h"

#include <stdio.h>
#include <string.h>

static oar_status check_numeric(const char *op, oar_tensor *const *in, int n) {
    oar_status st = oar_check_same_dtype(op, in, n);
    if (st != OAR_OK) return st;
    if (in[0]->dtype == OAR_BOOL)
        return oar_error(OAR_ERR_DTYPE, "%s: expected numeric operands, got bool; convert them with oar_cast", op);
    return OAR_OK;
}

static int64_t prod(const int64_t *v, int n) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= v[i];
    return p;
}

/* ---- matmul */
/* The geometry of a batched product, with 1-d operands promoted as torch does (a [k] acts as
 * [1, k], b [k] as [k, 1]). Strides are in elements; broadcast batch dims have stride 0. */
typedef struct mm_geom {
    int nb;
    int64_t batch[OAR_MAX_DIMS];
    int64_t m, k, n, nbatch;
    int64_t a_bs[OAR_MAX_DIMS], b_bs[OAR_MAX_DIMS];
    int64_t a_rs, a_cs, b_rs, b_cs;
} mm_geom;

static oar_status mm_geom_make(const oar_tensor *a, const oar_tensor *b, mm_geom *g) {
    int na = a->ndim, nb = b->ndim;
    if (na < 1 || nb < 1)
        return oar_error(OAR_ERR_SHAPE, "matmul: expected both operands to have at least 1 dim, got %dD and %dD; "
                                        "use oar_mul to scale by a scalar", na, nb);
    char sa[128], sb[128];
    int64_t ka = a->shape[na - 1], kb = nb >= 2 ? b->shape[nb - 2] : b->shape[0];
    if (ka != kb) {
        oar_format_shape(a->shape, na, sa, sizeof sa);
        oar_format_shape(b->shape, nb, sb, sizeof sb);
        return oar_error(OAR_ERR_SHAPE, "matmul: expected a.shape[-1] == b.shape[%s], got %lld != %lld (a %s, b %s); "
                                        "transpose an operand if it is stored the other way round",
                         nb >= 2 ? "-2" : "0", (long long)ka, (long long)kb, sa, sb);
    }
    int ba = na > 2 ? na - 2 : 0, bb = nb > 2 ? nb - 2 : 0;
    memset(g, 0, sizeof *g);
    if (!oar_broadcast_shapes(a->shape, ba, b->shape, bb, g->batch, &g->nb)) {
        oar_format_shape(a->shape, ba, sa, sizeof sa);
        oar_format_shape(b->shape, bb, sb, sizeof sb);
        return oar_error(OAR_ERR_SHAPE, "matmul: expected batch dims that broadcast (equal, or 1), got %s (a) and "
                                        "%s (b)", sa, sb);
    }
    g->m = na >= 2 ? a->shape[na - 2] : 1;
    g->k = ka;
    g->n = nb >= 2 ? b->shape[nb - 1] : 1;
    g->a_rs = na >= 2 ? a->strides[na - 2] : 0;
    g->a_cs = a->strides[na - 1];
    g->b_rs = nb >= 2 ? b->strides[nb - 2] : b->strides[0];
    g->b_cs = nb >= 2 ? b->strides[nb - 1] : 0;
    g->nbatch = prod(g->batch, g->nb);
    for (int d = 0; d < g->nb; d++) {
        int da = d - (g->nb - ba), db = d - (g->nb - bb);
        g->a_bs[d] = da >= 0 && a->shape[da] != 1 ? a->strides[da] : 0;
        g->b_bs[d] = db >= 0 && b->shape[db] != 1 ? b->strides[db] : 0;
    }
    return OAR_OK;
}

static oar_status matmul_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in; (void)a;
    oar_status st = check_numeric("matmul", in, 2);
    if (st != OAR_OK) return st;
    mm_geom g;
    st = mm_geom_make(in[0], in[1], &g);
    if (st != OAR_OK) return st;
    out->dtype = in[0]->dtype;
    out->ndim = g.nb;
    memcpy(out->shape, g.batch, sizeof(int64_t) * (size_t)g.nb);
    if (in[0]->ndim >= 2) out->shape[out->ndim++] = g.m;
    if (in[1]->ndim >= 2) out->shape[out->ndim++] = g.n;
    *n_out = 1;
    return OAR_OK;
}

/* C[batch][i][j] = sum_p A[batch][i][p] * B[batch][p][j]; C is contiguous. */
static void mm_ref_run(const mm_geom *g, const char *A, const char *B, char *C, oar_dtype dt) {
    const oar_dtype_traits *tr = &oar_dtypes[dt];
    int64_t es = (int64_t)tr->size;
    for (int64_t bi = 0; bi < g->nbatch; bi++) {
        int64_t ao = 0, bo = 0, rest = bi;
        for (int d = g->nb - 1; d >= 0; d--) {
            int64_t i = rest % g->batch[d];
            rest /= g->batch[d];
            ao += i * g->a_bs[d];
            bo += i * g->b_bs[d];
        }
        for (int64_t i = 0; i < g->m; i++) {
            for (int64_t j = 0; j < g->n; j++) {
                const char *pa = A + (ao + i * g->a_rs) * es, *pb = B + (bo + j * g->b_cs) * es;
                char *pc = C + ((bi * g->m + i) * g->n + j) * es;
                if (tr->is_float) {
                    double acc = 0;
                    for (int64_t p = 0; p < g->k; p++) acc += tr->load(pa + p * g->a_cs * es) * tr->load(pb + p * g->b_rs * es);
                    tr->store(pc, acc);
                } else { /* wraps like torch's integer matmul */
                    uint64_t acc = 0;
                    for (int64_t p = 0; p < g->k; p++)
                        acc += (uint64_t)tr->load_i64(pa + p * g->a_cs * es) * (uint64_t)tr->load_i64(pb + p * g->b_rs * es);
                    tr->store_i64(pc, (int64_t)acc);
                }
            }
        }
    }
}

static oar_status matmul_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                             int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out; (void)a;
    mm_geom g;
    oar_status st = mm_geom_make(in[0], in[1], &g);
    if (st != OAR_OK) return st;
    if (out[0]->numel) mm_ref_run(&g, oar_tensor_ptr(in[0]), oar_tensor_ptr(in[1]), oar_tensor_ptr(out[0]), in[0]->dtype);
    return OAR_OK;
}

/* With a [.., m, k], b [.., k, n] (1-d operands promoted) and g the output gradient:
 * da = g·bᵀ, db = aᵀ·g, each summed over the batch dims its operand was broadcast along. */
static oar_status matmul_grad(oar_grad_ctx *g) {
    oar_tensor *a = g->in[0], *b = g->in[1], *go = g->gout[0];
    oar_tensor *a2 = a->ndim == 1 ? oar_unsqueeze(a, 0) : a;
    oar_tensor *b2 = b->ndim == 1 ? oar_unsqueeze(b, 1) : b;
    if (a->ndim == 1) go = oar_unsqueeze(go, b->ndim == 1 ? go->ndim : go->ndim - 1);
    if (b->ndim == 1) go = oar_unsqueeze(go, go ? go->ndim : 0);
    if (!a2 || !b2 || !go) return oar_last_status();
    if (g->needs[0]) {
        oar_tensor *da = oar_matmul(go, oar_transpose(b2, -1, -2));
        da = oar_sum_to_shape(da, a2->shape, a2->ndim);
        g->gin[0] = oar_reshape(da, a->shape, a->ndim);
    }
    if (g->needs[1]) {
        oar_tensor *db;
        if (b2->ndim == 2 && a2->ndim > 2) {
            /* b is shared by every batch: one product over the flattened rows, no batched sum */
            int64_t k = a2->shape[a2->ndim - 1], n = b2->shape[1];
            int64_t rows = prod(a2->shape, a2->ndim - 1);
            int64_t as[2] = {rows, k}, gs[2] = {rows, n};
            db = oar_matmul(oar_transpose(oar_reshape(a2, as, 2), 0, 1), oar_reshape(go, gs, 2));
        } else {
            db = oar_sum_to_shape(oar_matmul(oar_transpose(a2, -1, -2), go), b2->shape, b2->ndim);
        }
        g->gin[1] = oar_reshape(db, b->shape, b->ndim);
    }
    return OAR_OK;
}

const oar_op_def oar_opdef_matmul = {
    .name = "matmul", .n_inputs = 2, .n_outputs = 1,
    .flags = OAR_OPF_STRIDED | OAR_OPF_AMP_ALLOW | OAR_OPF_QUANTIZABLE,
    .ref_dtypes = OAR_BASE_DTYPES & ~OAR_DTYPE_BIT(OAR_BOOL),
    .infer = matmul_infer, .reference = matmul_ref, .grad = matmul_grad,
};

oar_tensor *oar_matmul(oar_tensor *a, oar_tensor *b) {
    oar_tensor *in[2] = {a, b};
    return oar_op_call1(OAR_OP_matmul, in, 2, NULL);
}

/* ---- linear: y = x·Wᵀ + b over the last dim of x */
static oar_status linear_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)a;
    const oar_tensor *x = in[0], *w = in[1], *bias = n_in > 2 ? in[2] : NULL;
    oar_status st = check_numeric("linear", in, bias ? 3 : 2);
    if (st != OAR_OK) return st;
    char sx[128], sw[128];
    oar_format_shape(x->shape, x->ndim, sx, sizeof sx);
    oar_format_shape(w->shape, w->ndim, sw, sizeof sw);
    if (w->ndim != 2)
        return oar_error(OAR_ERR_SHAPE, "linear: expected weight of shape [out_features, in_features], got %s; "
                                        "for a vector weight use oar_matmul", sw);
    if (x->ndim < 1)
        return oar_error(OAR_ERR_SHAPE, "linear: expected x to have at least 1 dim (features last), got a 0-d tensor");
    if (x->shape[x->ndim - 1] != w->shape[1])
        return oar_error(OAR_ERR_SHAPE, "linear: expected x.shape[-1] == weight.shape[1] (in_features), got %lld != "
                                        "%lld (x %s, weight %s)", (long long)x->shape[x->ndim - 1],
                         (long long)w->shape[1], sx, sw);
    if (bias && (bias->ndim != 1 || bias->shape[0] != w->shape[0])) {
        char sbias[128];
        oar_format_shape(bias->shape, bias->ndim, sbias, sizeof sbias);
        return oar_error(OAR_ERR_SHAPE, "linear: expected bias of shape [%lld] (out_features), got %s",
                         (long long)w->shape[0], sbias);
    }
    oar_meta_from(out, x);
    out->shape[out->ndim - 1] = w->shape[0];
    *n_out = 1;
    return OAR_OK;
}

static oar_status linear_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                             int n_out, const oar_attr *a) {
    (void)ctx; (void)n_out; (void)a;
    const oar_tensor *x = in[0], *w = in[1], *bias = n_in > 2 ? in[2] : NULL;
    const oar_dtype_traits *tr = &oar_dtypes[x->dtype];
    int64_t es = (int64_t)tr->size, rows = prod(x->shape, x->ndim - 1), fo = w->shape[0], fi = w->shape[1];
    const char *X = oar_tensor_ptr(x), *W = oar_tensor_ptr(w), *B = bias ? oar_tensor_ptr(bias) : NULL;
    char *Y = oar_tensor_ptr(out[0]);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t o = 0; o < fo; o++) {
            const char *px = X + r * fi * es, *pw = W + o * fi * es;
            if (tr->is_float) {
                double acc = B ? tr->load(B + o * es) : 0;
                for (int64_t p = 0; p < fi; p++) acc += tr->load(px + p * es) * tr->load(pw + p * es);
                tr->store(Y + (r * fo + o) * es, acc);
            } else {
                uint64_t acc = B ? (uint64_t)tr->load_i64(B + o * es) : 0;
                for (int64_t p = 0; p < fi; p++) acc += (uint64_t)tr->load_i64(px + p * es) * (uint64_t)tr->load_i64(pw + p * es);
                tr->store_i64(Y + (r * fo + o) * es, (int64_t)acc);
            }
        }
    }
    return OAR_OK;
}

/* dx = g·W; dW = gᵀ·x over the flattened leading dims; db = g summed over them. */
static oar_status linear_grad(oar_grad_ctx *g) {
    oar_tensor *x = g->in[0], *w = g->in[1], *go = g->gout[0];
    if (g->needs[0]) g->gin[0] = oar_matmul(go, w);
    if (g->needs[1]) {
        int64_t rows = prod(x->shape, x->ndim - 1);
        int64_t gs[2] = {rows, w->shape[0]}, xs[2] = {rows, w->shape[1]};
        g->gin[1] = oar_matmul(oar_transpose(oar_reshape(go, gs, 2), 0, 1), oar_reshape(x, xs, 2));
    }
    if (g->n_in > 2 && g->needs[2]) g->gin[2] = oar_sum_to_shape(go, w->shape, 1); /* bias is [out] */
    return OAR_OK;
}

const oar_op_def oar_opdef_linear = {
    .name = "linear", .n_inputs = 3, .n_outputs = 1, .optional_inputs = 1u << 2,
    .unsaved_inputs = 1u << 2, /* the rule needs only the bias's shape, which the weight gives */
    .flags = OAR_OPF_AMP_ALLOW | OAR_OPF_QUANTIZABLE,
    .ref_dtypes = OAR_BASE_DTYPES & ~OAR_DTYPE_BIT(OAR_BOOL),
    .infer = linear_infer, .reference = linear_ref, .grad = linear_grad,
};

oar_tensor *oar_linear(oar_tensor *x, oar_tensor *weight, oar_tensor *bias) {
    oar_tensor *in[3] = {x, weight, bias};
    return oar_op_call1(OAR_OP_linear, in, 3, NULL);
}

/* ---- einsum */
/* Label ids: 'A'-'Z' are 0-25 and 'a'-'z' 26-51 (torch's order for implicit outputs); the dims
 * covered by '...' get ids ES_ELL + j, right-aligned across operands so that they broadcast. */
#define ES_ELL 52
#define ES_IDS (ES_ELL + OAR_MAX_DIMS)

typedef struct es_eq {
    int n_ops, nd[2];
    int lab[2][OAR_MAX_DIMS]; /* one label id per dim of each operand */
    int n_out;
    int out[OAR_MAX_DIMS];
    int64_t size[ES_IDS];     /* broadcast size per label; -1 where unused */
} es_eq;

/* One side of the equation as written: labels and where '...' stood. */
typedef struct es_term {
    int n, ell_at; /* ell_at: index in tok of '...', or -1 */
    int tok[OAR_MAX_DIMS];
} es_term;

static int es_letter_id(char c) { return c >= 'A' && c <= 'Z' ? c - 'A' : c - 'a' + 26; }
static char es_letter(int id) { return (char)(id < 26 ? 'A' + id : 'a' + id - 26); }

static void es_label_name(int id, char *buf, size_t n) {
    if (id < ES_ELL) snprintf(buf, n, "'%c'", es_letter(id));
    else snprintf(buf, n, "'...' dim %d", id - ES_ELL);
}

/* Splits the equation into terms; *arrow tells whether an output term was given. */
static oar_status es_tokenize(const char *eq, es_term *terms, int *n_terms, bool *arrow) {
    int t = 0;
    *arrow = false;
    *n_terms = 0;
    memset(terms, 0, sizeof(es_term) * 3);
    terms[0].ell_at = terms[1].ell_at = terms[2].ell_at = -1;
    for (int i = 0; eq[i]; i++) {
        char c = eq[i];
        es_term *cur = &terms[t];
        if (c == ' ') continue;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            if (cur->n == OAR_MAX_DIMS)
                return oar_error(OAR_ERR_SHAPE, "einsum: expected at most %d labels per term, got more in \"%s\"",
                                 OAR_MAX_DIMS, eq);
            cur->tok[cur->n++] = es_letter_id(c);
        } else if (c == '.') {
            if (eq[i + 1] != '.' || eq[i + 2] != '.')
                return oar_error(OAR_ERR_INVALID_ARG, "einsum: expected '...', got a lone '.' at index %d of \"%s\"",
                                 i, eq);
            if (cur->ell_at >= 0)
                return oar_error(OAR_ERR_INVALID_ARG, "einsum: expected at most one '...' per term, got two in \"%s\"",
                                 eq);
            cur->ell_at = cur->n;
            i += 2;
        } else if (c == ',' && !*arrow) {
            if (t == 1)
                return oar_error(OAR_ERR_INVALID_ARG, "einsum: expected 1 or 2 operands, got more in \"%s\"", eq);
            t++;
        } else if (c == '-' && eq[i + 1] == '>' && !*arrow) {
            *arrow = true;
            *n_terms = t + 1;
            t = 2;
            i++;
        } else {
            return oar_error(OAR_ERR_INVALID_ARG, "einsum: invalid character '%c' at index %d of \"%s\"; expected "
                                                  "labels in [a-zA-Z], '...', ',' and one '->'", c, i, eq);
        }
    }
    if (!*arrow) *n_terms = t + 1;
    return OAR_OK;
}

/* Resolves the equation against the operands: label ids per dim, sizes, output labels. */
static oar_status es_parse(const char *eq, oar_tensor *const *ops, int n_ops, es_eq *e) {
    es_term terms[3];
    int n_terms;
    bool arrow;
    oar_status st = es_tokenize(eq, terms, &n_terms, &arrow);
    if (st != OAR_OK) return st;
    if (n_terms != n_ops)
        return oar_error(OAR_ERR_INVALID_ARG, "einsum: expected %d operand%s as the equation \"%s\" names, got %d",
                         n_terms, n_terms == 1 ? "" : "s", eq, n_ops);
    memset(e, 0, sizeof *e);
    e->n_ops = n_ops;
    int n_ell = 0, ell_dims[2] = {0, 0};
    for (int o = 0; o < n_ops; o++) {
        const es_term *tm = &terms[o];
        const oar_tensor *x = ops[o];
        if (tm->ell_at < 0 ? tm->n != x->ndim : tm->n > x->ndim) {
            char s[128];
            oar_format_shape(x->shape, x->ndim, s, sizeof s);
            return oar_error(OAR_ERR_SHAPE, "einsum: expected operand %d to have %s%d dims (one per label), got shape "
                                            "%s%s", o, tm->ell_at < 0 ? "" : "at least ", tm->n, s,
                             tm->ell_at < 0 ? "; use '...' for dims without labels" : "");
        }
        ell_dims[o] = x->ndim - tm->n;
        e->nd[o] = x->ndim;
        if (ell_dims[o] > n_ell) n_ell = ell_dims[o];
    }
    for (int id = 0; id < ES_IDS; id++) e->size[id] = -1;
    for (int o = 0; o < n_ops; o++) {
        const es_term *tm = &terms[o];
        int d = 0;
        for (int i = 0; i <= tm->n; i++) {
            if (i == tm->ell_at)
                for (int j = 0; j < ell_dims[o]; j++) e->lab[o][d++] = ES_ELL + n_ell - ell_dims[o] + j;
            if (i < tm->n) e->lab[o][d++] = tm->tok[i];
        }
        int64_t local[ES_IDS];
        for (int id = 0; id < ES_IDS; id++) local[id] = -1;
        char name[32];
        for (d = 0; d < ops[o]->ndim; d++) {
            int id = e->lab[o][d];
            int64_t s = ops[o]->shape[d];
            if (local[id] >= 0 && local[id] != s) {
                es_label_name(id, name, sizeof name);
                return oar_error(OAR_ERR_SHAPE, "einsum: expected the dims of label %s, repeated in operand %d, to have "
                                                "one size, got %lld and %lld", name, o, (long long)local[id], (long long)s);
            }
            local[id] = s;
        }
        for (int id = 0; id < ES_IDS; id++) {
            int64_t s = local[id];
            if (s < 0) continue;
            if (e->size[id] < 0 || e->size[id] == 1) {
                e->size[id] = s;
            } else if (s != 1 && s != e->size[id]) {
                es_label_name(id, name, sizeof name);
                return oar_error(OAR_ERR_SHAPE, "einsum: expected label %s to have one size across operands (or 1, to "
                                                "broadcast), got %lld before and %lld in operand %d", name,
                                 (long long)e->size[id], (long long)s, o);
            }
        }
    }
    if (arrow) {
        const es_term *tm = &terms[2];
        bool seen[ES_IDS] = {0};
        for (int i = 0; i <= tm->n; i++) {
            if (i == tm->ell_at)
                for (int j = 0; j < n_ell; j++) {
                    if (e->n_out == OAR_MAX_DIMS) goto too_many;
                    e->out[e->n_out++] = ES_ELL + j;
                }
            if (i == tm->n) break;
            int id = tm->tok[i];
            if (seen[id])
                return oar_error(OAR_ERR_INVALID_ARG, "einsum: expected each output label once, got '%c' twice in \"%s\"",
                                 es_letter(id), eq);
            if (e->size[id] < 0)
                return oar_error(OAR_ERR_INVALID_ARG, "einsum: expected output labels that appear in an operand, got '%c' "
                                                      "in \"%s\"", es_letter(id), eq);
            seen[id] = true;
            if (e->n_out == OAR_MAX_DIMS) goto too_many;
            e->out[e->n_out++] = id;
        }
    } else { /* implicit output: the '...' dims, then the labels used once, in order */
        int count[ES_ELL] = {0};
        for (int o = 0; o < n_ops; o++)
            for (int i = 0; i < terms[o].n; i++) count[terms[o].tok[i]]++;
        for (int j = 0; j < n_ell; j++) e->out[e->n_out++] = ES_ELL + j;
        for (int id = 0; id < ES_ELL; id++) {
            if (count[id] != 1) continue;
            if (e->n_out == OAR_MAX_DIMS) goto too_many;
            e->out[e->n_out++] = id;
        }
    }
    return OAR_OK;
too_many:
    return oar_error(OAR_ERR_SHAPE, "einsum: expected at most %d output dims, got more from \"%s\"", OAR_MAX_DIMS, eq);
}

static int es_n_ops(oar_tensor *const *in) { return in[1] ? 2 : 1; }

_Static_assert(ES_IDS == OAR_EINSUM_LABEL_IDS, "one count of label ids for the op and its kernel");
oar_status oar_einsum_labels(const char *eq, oar_tensor *const *in, int lab[2][OAR_MAX_DIMS], int out[OAR_MAX_DIMS],
                             int *n_out, int64_t size[ES_IDS]) {
    es_eq e;
    oar_status st = es_parse(eq, in, es_n_ops(in), &e);
    if (st != OAR_OK) return st;
    memcpy(lab, e.lab, sizeof e.lab);
    memcpy(out, e.out, sizeof e.out);
    *n_out = e.n_out;
    memcpy(size, e.size, sizeof e.size);
    return OAR_OK;
}

static oar_status einsum_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    int n_ops = es_n_ops(in);
    oar_status st = check_numeric("einsum", in, n_ops);
    if (st != OAR_OK) return st;
    es_eq e;
    st = es_parse(a[0].s, in, n_ops, &e);
    if (st != OAR_OK) return st;
    out->dtype = in[0]->dtype;
    out->ndim = e.n_out;
    for (int i = 0; i < e.n_out; i++) out->shape[i] = e.size[e.out[i]];
    *n_out = 1;
    return OAR_OK;
}

/* The loop nest: each output element sums the product of the operands over the labels that
 * are not in the output. A label's stride in an operand is the sum of its dims' strides (so a
 * repeated label walks the diagonal), or 0 where the operand broadcasts it. */
static oar_status einsum_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                             int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    int n_ops = es_n_ops(in);
    es_eq e;
    oar_status st = es_parse(a[0].s, in, n_ops, &e);
    if (st != OAR_OK) return st;
    int64_t st_of[2][ES_IDS] = {{0}};
    for (int o = 0; o < n_ops; o++)
        for (int d = 0; d < in[o]->ndim; d++) {
            int id = e.lab[o][d];
            if (!(in[o]->shape[d] == 1 && e.size[id] != 1)) st_of[o][id] += in[o]->strides[d];
        }
    bool in_out[ES_IDS] = {0};
    for (int i = 0; i < e.n_out; i++) in_out[e.out[i]] = true;
    int sum_ids[ES_IDS], n_sum = 0;
    for (int id = 0; id < ES_IDS; id++)
        if (e.size[id] >= 0 && !in_out[id]) sum_ids[n_sum++] = id;
    int64_t n_inner = 1;
    for (int i = 0; i < n_sum; i++) n_inner *= e.size[sum_ids[i]];
    const oar_dtype_traits *tr = &oar_dtypes[in[0]->dtype];
    int64_t es = (int64_t)tr->size;
    const char *A = oar_tensor_ptr(in[0]), *B = n_ops == 2 ? oar_tensor_ptr(in[1]) : NULL;
    char *Y = oar_tensor_ptr(out[0]);
    for (int64_t oi = 0; oi < out[0]->numel; oi++) {
        int64_t base[2] = {0, 0}, rest = oi;
        for (int i = e.n_out - 1; i >= 0; i--) {
            int64_t idx = rest % e.size[e.out[i]];
            rest /= e.size[e.out[i]];
            for (int o = 0; o < n_ops; o++) base[o] += idx * st_of[o][e.out[i]];
        }
        double accf = 0;
        uint64_t acci = 0;
        for (int64_t si = 0; si < n_inner; si++) {
            int64_t off[2] = {base[0], base[1]};
            rest = si;
            for (int i = n_sum - 1; i >= 0; i--) {
                int64_t idx = rest % e.size[sum_ids[i]];
                rest /= e.size[sum_ids[i]];
                for (int o = 0; o < n_ops; o++) off[o] += idx * st_of[o][sum_ids[i]];
            }
            if (tr->is_float) accf += tr->load(A + off[0] * es) * (B ? tr->load(B + off[1] * es) : 1.0);
            else acci += (uint64_t)tr->load_i64(A + off[0] * es) * (B ? (uint64_t)tr->load_i64(B + off[1] * es) : 1u);
        }
        if (tr->is_float) tr->store(Y + oi * es, accf);
        else tr->store_i64(Y + oi * es, (int64_t)acci);
    }
    return OAR_OK;
}

/* Writes the equation with label lists as letters; '...' ids take letters the equation does
 * not use. */
static void es_render(const es_eq *e, const int *const *terms, const int *lens, int n_terms, const int *res,
                      int n_res, char *buf, size_t cap) {
    bool used[ES_ELL] = {0};
    for (int o = 0; o < e->n_ops; o++)
        for (int d = 0; d < e->nd[o]; d++)
            if (e->lab[o][d] < ES_ELL) used[e->lab[o][d]] = true;
    char ell_letter[OAR_MAX_DIMS];
    for (int j = 0, id = 0; j < OAR_MAX_DIMS; j++) {
        while (id < ES_ELL && used[id]) id++;
        ell_letter[j] = id < ES_ELL ? es_letter(id++) : '?';
    }
    size_t p = 0;
#define PUT(c) do { if (p + 1 < cap) buf[p++] = (c); } while (0)
#define PUT_ID(id) PUT((id) < ES_ELL ? es_letter(id) : ell_letter[(id) - ES_ELL])
    for (int t = 0; t < n_terms; t++) {
        if (t) PUT(',');
        for (int i = 0; i < lens[t]; i++) PUT_ID(terms[t][i]);
    }
    PUT('-');
    PUT('>');
    for (int i = 0; i < n_res; i++) PUT_ID(res[i]);
#undef PUT_ID
#undef PUT
    buf[p] = '\0';
}

/* d/dX of einsum: the einsum of the output gradient with the other operand, producing X's
 * distinct labels; then labels summed in X alone are expanded back, dims X broadcast are
 * summed, and repeated labels (diagonals) are written back through identity masks. */
static oar_tensor *es_grad_operand(const es_eq *e, int x, oar_tensor *gout, oar_tensor *const *in) {
    const oar_tensor *X = in[x];
    int nd = X->ndim;
    bool keep_id[ES_IDS] = {0};
    for (int i = 0; i < e->n_out; i++) keep_id[e->out[i]] = true;
    if (e->n_ops == 2)
        for (int d = 0; d < in[1 - x]->ndim; d++) keep_id[e->lab[1 - x][d]] = true;
    int uniq[OAR_MAX_DIMS], first[OAR_MAX_DIMS], nu = 0, kept[OAR_MAX_DIMS], nk = 0;
    bool repeated = false;
    for (int d = 0; d < nd; d++) {
        int id = e->lab[x][d], u = 0;
        while (u < nu && uniq[u] != id) u++;
        if (u < nu) {
            repeated = true;
            continue;
        }
        first[nu] = d;
        uniq[nu++] = id;
        if (keep_id[id]) kept[nk++] = id;
    }
    const int *terms[2] = {e->out, e->lab[1 - x]};
    int lens[2] = {e->n_out, e->n_ops == 2 ? in[1 - x]->ndim : 0};
    char eq[OAR_ATTR_STR_CAP];
    es_render(e, terms, lens, e->n_ops, kept, nk, eq, sizeof eq);
    oar_tensor *t = oar_einsum(eq, gout, e->n_ops == 2 ? in[1 - x] : NULL);
    int64_t xs[OAR_MAX_DIMS];
    int sum_dims[OAR_MAX_DIMS], n_sum = 0;
    for (int u = 0; u < nu; u++) {
        xs[u] = X->shape[first[u]];
        if (!keep_id[uniq[u]]) t = oar_unsqueeze(t, u);
        else if (t && xs[u] == 1 && t->shape[u] != 1) sum_dims[n_sum++] = u;
    }
    if (n_sum) t = oar_sum(t, sum_dims, n_sum, true);
    t = oar_expand(t, xs, nu);
    if (!repeated) return t;
    for (int d = 0; d < nd; d++) {
        bool is_first = false;
        for (int u = 0; u < nu; u++) is_first |= first[u] == d;
        if (!is_first) t = oar_unsqueeze(t, d);
    }
    t = oar_expand(t, X->shape, nd);
    for (int d = 0; d < nd; d++) {
        int f = 0;
        while (e->lab[x][f] != e->lab[x][d]) f++;
        if (f == d) continue;
        int64_t ms[OAR_MAX_DIMS];
        for (int k = 0; k < nd; k++) ms[k] = k == f || k == d ? X->shape[d] : 1;
        t = oar_mul(t, oar_reshape(oar_to(oar_eye(X->shape[d], X->shape[d], X->dtype), X->device), ms, nd));
    }
    return t;
}

static oar_status einsum_grad(oar_grad_ctx *g) {
    int n_ops = es_n_ops(g->in);
    es_eq e;
    oar_status st = es_parse(g->attrs[0].s, g->in, n_ops, &e);
    if (st != OAR_OK) return st;
    for (int x = 0; x < n_ops; x++) {
        if (!g->needs[x]) continue;
        g->gin[x] = es_grad_operand(&e, x, g->gout[0], g->in);
        if (!g->gin[x]) return oar_last_status();
    }
    return OAR_OK;
}

const oar_op_def oar_opdef_einsum = {
    .name = "einsum", .n_inputs = 2, .n_outputs = 1, .optional_inputs = 1u << 1,
    .n_attrs = 1, .attrs = {{"equation", OAR_ATTR_STR}},
    .flags = OAR_OPF_STRIDED | OAR_OPF_AMP_ALLOW,
    .ref_dtypes = OAR_BASE_DTYPES & ~OAR_DTYPE_BIT(OAR_BOOL),
    .infer = einsum_infer, .reference = einsum_ref, .grad = einsum_grad,
};

oar_tensor *oar_einsum(const char *equation, oar_tensor *a, oar_tensor *b) {
    if (!equation) {
        oar_error(OAR_ERR_INVALID_ARG, "einsum: expected an equation such as \"ij,jk->ik\", got NULL");
        return NULL;
    }
    if (strlen(equation) >= OAR_ATTR_STR_CAP) {
        oar_error(OAR_ERR_INVALID_ARG, "einsum: expected an equation of at most %d characters, got %zu; drop the "
                                       "spaces", OAR_ATTR_STR_CAP - 1, strlen(equation));
        return NULL;
    }
    if (a && !b && strchr(equation, ',')) {
        /* b may be NULL because an earlier call failed: keep that error */
        if (oar_last_status() != OAR_OK) return NULL;
        oar_error(OAR_ERR_INVALID_ARG, "einsum: input 1 is NULL; expected a tensor, as \"%s\" names two operands",
                  equation);
        return NULL;
    }
    oar_attr attr = oar_attr_str(equation);
    oar_tensor *in[2] = {a, b};
    return oar_op_call1(OAR_OP_einsum, in, 2, &attr);
}
