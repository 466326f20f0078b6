/* einsum of two f32/f64 operands as batched GEMM. Each label falls in one group: batch (in
 * both operands and the output), m (first operand and output), n (second operand and
 * output), k (both operands, summed), or private (one operand only, summed). An operand is
 * used in place when, per batch, its groups collapse to a row- or column-major matrix; else
 * it is packed (summing its private labels). The product goes straight into the output when
 * the output's order is batch, m, n (or batch, n, m: the transposed product), else through
 * a buffer. Single operands and repeated labels (diagonals) are left to the reference. */
#include "kernels/cpu/gemm_blas.h"
#include "ops/linalg.h"

#ifdef OAR_HAVE_OPENBLAS
#include <string.h>

#define ES_IDS OAR_EINSUM_LABEL_IDS
#define ES_MAXL (2 * OAR_MAX_DIMS) /* distinct labels of two operands */


typedef struct grp {
    int n, id[ES_MAXL];
    int64_t numel;
} grp;

typedef struct es_plan {
    grp b, m, n, k, priv[2]; /* b, m, n in output order; k in the first operand's order */
    int n_out, out[OAR_MAX_DIMS];
    int64_t size[ES_IDS];
    int64_t st[2][ES_IDS];   /* element stride of each label in each operand; 0 if absent or broadcast */
    oar_gemm_mat x, y;       /* per batch: x is m x k, y is k x n */
    bool x_pack, y_pack;
    int order;               /* 1: output is [b, m, n]; -1: [b, n, m]; 0: needs a buffer */
} es_plan;

static void grp_add(grp *g, int id, const int64_t *size) {
    g->id[g->n++] = id;
    g->numel *= size[id];
}

/* The one stride that walks g's labels in order through an operand, if there is one. */
static bool collapse(const grp *g, const int64_t *size, const int64_t *st, int64_t *stride) {
    int64_t expect = 0;
    bool any = false;
    *stride = 0;
    for (int i = g->n - 1; i >= 0; i--) {
        int id = g->id[i];
        if (size[id] == 1) continue;
        if (!any) {
            *stride = st[id];
            expect = st[id] * size[id];
            any = true;
        } else if (st[id] != expect) {
            return false;
        } else {
            expect *= size[id];
        }
    }
    return true;
}

/* Whether the output's labels run as the groups a, b, c in turn. */
static bool out_is(const es_plan *p, const grp *a, const grp *b, const grp *c) {
    const grp *gs[3] = {a, b, c};
    int at = 0;
    for (int g = 0; g < 3; g++)
        for (int i = 0; i < gs[g]->n; i++, at++)
            if (at >= p->n_out || p->out[at] != gs[g]->id[i]) return false;
    return at == p->n_out;
}

/* An operand as a matrix of (rows group) x (cols group), or packed when that fails. */
static oar_gemm_mat operand_mat(const es_plan *p, int o, const grp *rows, const grp *cols, bool *pack) {
    oar_gemm_mat mt = {.rows = rows->numel, .cols = cols->numel};
    bool ok = p->priv[o].n == 0 && collapse(rows, p->size, p->st[o], &mt.rs) && collapse(cols, p->size, p->st[o], &mt.cs);
    if (ok) oar_gemm_mat_layout(&mt);
    *pack = !ok || mt.pack;
    if (*pack) { /* dense [rows][cols] after packing */
        mt.rs = mt.cols;
        mt.cs = 1;
        oar_gemm_mat_layout(&mt);
    }
    return mt;
}

static bool plan_make(oar_tensor *const *in, const oar_attr *attrs, es_plan *p) {
    if (!in[1]) return false;
    int lab[2][OAR_MAX_DIMS];
    memset(p, 0, sizeof *p);
    if (oar_einsum_labels(attrs[0].s, in, lab, p->out, &p->n_out, p->size) != OAR_OK) return false;
    int where[ES_IDS] = {0}; /* bit 0: first operand, 1: second, 2: output */
    for (int o = 0; o < 2; o++)
        for (int d = 0; d < in[o]->ndim; d++) {
            int id = lab[o][d];
            if (where[id] & (1 << o)) return false; /* a diagonal */
            where[id] |= 1 << o;
            if (!(in[o]->shape[d] == 1 && p->size[id] != 1)) p->st[o][id] = in[o]->strides[d];
        }
    for (int i = 0; i < p->n_out; i++) where[p->out[i]] |= 4;
    grp *gs[] = {&p->b, &p->m, &p->n, &p->k, &p->priv[0], &p->priv[1]};
    for (int g = 0; g < 6; g++) gs[g]->numel = 1;
    for (int i = 0; i < p->n_out; i++) {
        int id = p->out[i];
        grp_add(where[id] == 7 ? &p->b : where[id] == 5 ? &p->m : &p->n, id, p->size);
    }
    for (int d = 0; d < in[0]->ndim; d++)
        if (where[lab[0][d]] == 3) grp_add(&p->k, lab[0][d], p->size);
    for (int o = 0; o < 2; o++)
        for (int d = 0; d < in[o]->ndim; d++)
            if (where[lab[o][d]] == 1 << o) grp_add(&p->priv[o], lab[o][d], p->size);
    p->x = operand_mat(p, 0, &p->m, &p->k, &p->x_pack);
    p->y = operand_mat(p, 1, &p->k, &p->n, &p->y_pack);
    p->order = out_is(p, &p->b, &p->m, &p->n) ? 1 : out_is(p, &p->b, &p->n, &p->m) ? -1 : 0;
    if (p->order < 0) { /* the transposed product needs both transposes readable in place */
        oar_gemm_mat tx = oar_gemm_mat_t(&p->x), ty = oar_gemm_mat_t(&p->y);
        if (tx.pack || ty.pack) p->order = 0;
    }
    return oar_gemm_fits(p->m.numel) && oar_gemm_fits(p->n.numel) && oar_gemm_fits(p->k.numel) &&
           oar_gemm_fits(p->x.rs) && oar_gemm_fits(p->x.cs) && oar_gemm_fits(p->y.rs) && oar_gemm_fits(p->y.cs) &&
           oar_gemm_fits(p->x.ld) && oar_gemm_fits(p->y.ld);
}

static bool einsum_blas_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                                 const oar_attr *attrs) {
    (void)n_in; (void)out; (void)n_out;
    es_plan p;
    if (!plan_make(in, attrs, &p)) return false;
    /* many tiny products (an elementwise product, say) cost more in BLAS calls than in loops */
    return p.b.numel <= 1 || p.m.numel * p.n.numel * p.k.numel >= 16;
}

/* Walks the dims (sizes sz, strides st) in row-major order; *off follows the position. */
static inline void odometer_step(int nd, const int64_t *sz, const int64_t *st, int64_t *idx, int64_t *off) {
    for (int d = nd - 1; d >= 0; d--) {
        *off += st[d];
        if (++idx[d] < sz[d]) return;
        *off -= st[d] * sz[d];
        idx[d] = 0;
    }
}

static inline double load(const char *p, size_t es) { return es == 4 ? *(const float *)p : *(const double *)p; }
static inline void store(char *p, size_t es, double v) {
    if (es == 4) *(float *)p = (float)v;
    else *(double *)p = v;
}

/* dst[b][r][c] = operand o summed over its private labels; dense. */
static void pack(const es_plan *p, int o, const grp *rows, const grp *cols, const char *src, size_t es, char *dst) {
    int nd = 0, np = 0;
    int64_t sz[3 * ES_MAXL], st[3 * ES_MAXL], idx[3 * ES_MAXL] = {0}, psz[ES_MAXL], pst[ES_MAXL];
    const grp *gs[3] = {&p->b, rows, cols};
    for (int g = 0; g < 3; g++)
        for (int i = 0; i < gs[g]->n; i++) {
            sz[nd] = p->size[gs[g]->id[i]];
            st[nd++] = p->st[o][gs[g]->id[i]] * (int64_t)es;
        }
    for (int i = 0; i < p->priv[o].n; i++) {
        psz[np] = p->size[p->priv[o].id[i]];
        pst[np++] = p->st[o][p->priv[o].id[i]] * (int64_t)es;
    }
    int64_t total = p->b.numel * rows->numel * cols->numel, off = 0;
    for (int64_t i = 0; i < total; i++) {
        if (np == 0) {
            memcpy(dst + i * (int64_t)es, src + off, es);
        } else {
            int64_t pidx[ES_MAXL] = {0}, poff = 0;
            double acc = 0;
            for (int64_t j = 0; j < p->priv[o].numel; j++) {
                acc += load(src + off + poff, es);
                odometer_step(np, psz, pst, pidx, &poff);
            }
            store(dst + i * (int64_t)es, es, acc);
        }
        odometer_step(nd, sz, st, idx, &off);
    }
}

/* y (contiguous, output order) from the product buffer c laid out [b][m][n]. */
static void scatter(const es_plan *p, const char *c, size_t es, char *y, int64_t numel) {
    int64_t cst[ES_IDS] = {0}, inner = 1;
    const grp *gs[3] = {&p->n, &p->m, &p->b};
    for (int g = 0; g < 3; g++)
        for (int i = gs[g]->n - 1; i >= 0; i--) {
            cst[gs[g]->id[i]] = inner * (int64_t)es;
            inner *= p->size[gs[g]->id[i]];
        }
    int64_t sz[OAR_MAX_DIMS], st[OAR_MAX_DIMS], idx[OAR_MAX_DIMS] = {0}, off = 0;
    for (int i = 0; i < p->n_out; i++) {
        sz[i] = p->size[p->out[i]];
        st[i] = cst[p->out[i]];
    }
    for (int64_t i = 0; i < numel; i++) {
        memcpy(y + i * (int64_t)es, c + off, es);
        odometer_step(p->n_out, sz, st, idx, &off);
    }
}

static oar_status einsum_blas(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *attrs) {
    (void)ctx; (void)n_in; (void)n_out;
    oar_tensor *y = out[0];
    oar_dtype dt = in[0]->dtype;
    size_t es = oar_dtypes[dt].size;
    if (y->numel == 0) return OAR_OK;
    es_plan p;
    if (!plan_make(in, attrs, &p)) return OAR_ERR_INTERNAL; /* supports() said yes */
    int64_t M = p.m.numel, N = p.n.numel, K = p.k.numel, nb = p.b.numel;
    if (K == 0 || p.priv[0].numel == 0 || p.priv[1].numel == 0) {
        memset(oar_tensor_ptr(y), 0, (size_t)y->numel * es);
        return OAR_OK;
    }
    size_t xbytes = p.x_pack ? (size_t)(nb * M * K) * es : 0, ybytes = p.y_pack ? (size_t)(nb * K * N) * es : 0;
    size_t cbytes = p.order ? 0 : (size_t)y->numel * es, total = xbytes + ybytes + cbytes;
    char *buf = NULL;
    if (total && !(buf = oar_alloc(total))) return OAR_ERR_OOM;
    const char *X = oar_tensor_ptr(in[0]), *Y = oar_tensor_ptr(in[1]);
    if (p.x_pack) pack(&p, 0, &p.m, &p.k, X, es, buf);
    if (p.y_pack) pack(&p, 1, &p.k, &p.n, Y, es, buf + xbytes);
    char *C = p.order ? oar_tensor_ptr(y) : buf + xbytes + ybytes;
    /* the output [b, n, m] is the transposed product: yᵀ·xᵀ */
    oar_gemm_mat A = p.order < 0 ? oar_gemm_mat_t(&p.y) : p.x, B = p.order < 0 ? oar_gemm_mat_t(&p.x) : p.y;
    int64_t bidx[ES_MAXL] = {0}, bsz[ES_MAXL], xst[ES_MAXL], yst[ES_MAXL], xo = 0, yo = 0;
    for (int i = 0; i < p.b.n; i++) {
        bsz[i] = p.size[p.b.id[i]];
        xst[i] = p.st[0][p.b.id[i]];
        yst[i] = p.st[1][p.b.id[i]];
    }
    for (int64_t bi = 0; bi < nb; bi++) {
        const char *xp = p.x_pack ? buf + bi * M * K * (int64_t)es : X + xo * (int64_t)es;
        const char *yp = p.y_pack ? buf + xbytes + bi * K * N * (int64_t)es : Y + yo * (int64_t)es;
        const char *ap = p.order < 0 ? yp : xp, *bp = p.order < 0 ? xp : yp;
        oar_gemm(dt, A.trans, B.trans, A.rows, B.cols, A.cols, ap, A.ld, bp, B.ld, 0.0, C + bi * M * N * (int64_t)es,
                 B.cols > 1 ? B.cols : 1);
        for (int d = p.b.n - 1; d >= 0; d--) { /* next batch: both operands' offsets */
            xo += xst[d];
            yo += yst[d];
            if (++bidx[d] < bsz[d]) break;
            xo -= xst[d] * bsz[d];
            yo -= yst[d] * bsz[d];
            bidx[d] = 0;
        }
    }
    if (!p.order) scatter(&p, C, es, oar_tensor_ptr(y), y->numel);
    if (buf) oar_free(buf, total);
    return OAR_OK;
}

static oar_status einsum_half(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *attrs) {
    (void)n_out;
    return oar_gemm_via_f32(einsum_blas, ctx, in, n_in, out, attrs);
}

void oar_cpu_register_gemm_einsum(void) {
    oar_register_kernel(OAR_OP_einsum, (oar_kernel_entry){.device = OAR_CPU,
                                                          .dtypes = OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64),
                                                          .impl = "gemm", .priority = 20, .fn = einsum_blas,
                                                          .supports = einsum_blas_supports});
    oar_register_kernel(OAR_OP_einsum, (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_GEMM_HALF_DTYPES,
                                                          .impl = "gemm-f32", .priority = 20, .fn = einsum_half,
                                                          .supports = einsum_blas_supports});
}
#endif
