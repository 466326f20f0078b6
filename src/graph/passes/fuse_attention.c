/* fuse_attention: scaled dot-product attention written with plain ops becomes one
 * fused_attention node, and in a training program its traced backward becomes one
 * attention_backward node.
 *
 * Forward, within one block:
 *     s  = matmul(q, permute(k) swapping the last two dims)
 *    [s  = mul(s, c)]                c: a one-element constant, the scale (else scale 1)
 *    [s  = masked_fill(s, mask, -inf)]   mask: bool [L, S]
 *     p  = softmax(s, dim=-1)
 *     o  = matmul(p, v)
 * -> o, p = fused_attention(q, k, v, mask; scale, causal=0)
 * Each intermediate before p must have exactly this one use. p may have more (the backward
 * reads it): they read the fused node's saved probabilities, which are the same tensor.
 * This is the pattern of models written like torch's reference code (gpt-mini) and of
 * MultiheadAttention (which scales q before the product, so its scale stays outside: 1).
 *
 * Backward, what the gradient rules of those ops trace (g: the gradient of o):
 *     dp = matmul(g, permute(v))  [reshape to the same shape]
 *     ds = softmax_backward(dp, p)
 *    [ds = where(mask, 0, ds)]       masked_fill's rule, with the forward's mask
 *    [ds = mul(ds, c')]              c' equal to the forward scale
 *     dq = matmul(ds, permute(permute(k)))      or matmul(ds, k)
 *     dkᵀ = matmul(permute(q), ds)
 *     dv = matmul(permute(p), g)
 * -> dq, dk, dv = attention_backward(g, q, k, v, p; scale), and dkᵀ = contiguous(permute(dk)). Every
 * intermediate must have only these uses (ds: the two products). What does not match exactly
 * is left as it was: the forward fusion alone is still sound then.
 *
 * Autocast O2 chains (q, k, v bf16 or f16): softmax is in the fp32 class, so the forward has
 * cast(f32) before it and cast(low) after it (the product with v reads the latter), and the
 * backward cast(f32) on dp, softmax_backward on the f32 p, cast(low) on ds. Those casts are
 * part of the match; an f32 p read outside the match reads a cast of the fused node's p. The
 * fused kernels keep scores, p and ds in f32 and round the outputs once: fewer roundings than
 * the chain (tests/test_amp_transformer.c: as close to f32 as the unfused chain).
 *
 * Soundness: the fused ops compute the same mathematical function (softmax rows with -inf
 * entries give 0 there, so where(mask, 0, .) after softmax_backward changes nothing: p is 0
 * on masked keys). Rounding differs (one row pass instead of three, products in another
 * order), so eager/static bitwise tests switch this pass off; tests/test_fusion_transformer.c
 * compares within tolerances. */
#include "graph/passes/passes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct fa_ctx {
    oar_program *p;
    int *uses; /* per value, over live nodes, block outputs and grad writes */
    int *pos;  /* per node, its index in its block */
    int n_counted; /* values counted in uses (values added since are not) */
} fa_ctx;

static oar_status refresh(fa_ctx *c) {
    oar_program *p = c->p;
    free(c->uses);
    free(c->pos);
    c->uses = malloc(sizeof(int) * (size_t)(p->n_values + 1));
    c->pos = malloc(sizeof(int) * (size_t)(p->n_nodes + 1));
    if (!c->uses || !c->pos) return oar_error(OAR_ERR_OOM, "fuse_attention: out of memory");
    oar_program_use_counts(p, c->uses);
    c->n_counted = p->n_values;
    for (int b = 0; b < p->n_blocks; b++)
        for (int i = 0; i < p->blocks[b].n_nodes; i++) c->pos[p->blocks[b].nodes[i]] = i;
    return OAR_OK;
}

/* The live node of block blk that made value v, or NULL. */
static oar_node *producer(const fa_ctx *c, int v, oar_op_id op, int blk) {
    if (v < 0) return NULL;
    const oar_value *val = &c->p->values[v];
    if (val->kind != OAR_VAL_NODE || val->node < 0) return NULL;
    oar_node *n = &c->p->nodes[val->node];
    return !n->dead && n->op == op && n->block == blk ? n : NULL;
}

/* Whether v is permute(src) swapping the last two dims (and nothing else); *src gets src. */
static bool swap_last2(const fa_ctx *c, int v, int blk, int *src) {
    const oar_node *n = producer(c, v, OAR_OP_permute, blk);
    if (!n) return false;
    const oar_attr *d = &n->attrs[0];
    int nd = d->n;
    if (nd < 2 || nd != c->p->values[v].meta.ndim) return false;
    for (int i = 0; i < nd - 2; i++)
        if (d->ints[i] != i) return false;
    if (d->ints[nd - 2] != nd - 1 || d->ints[nd - 1] != nd - 2) return false;
    *src = n->in[0];
    return true;
}

/* mul(x, c) or mul(c, x) with c a constant scalar and the output x's shape: x and c. */
static bool scalar_mul(const fa_ctx *c, const oar_node *n, int *x, double *s) {
    if (n->op != OAR_OP_mul) return false;
    for (int i = 0; i < 2; i++) {
        double v = oar_pass_const_value(c->p, n->in[1 - i]);
        const oar_meta *a = &c->p->values[n->in[i]].meta, *o = &c->p->values[n->out[0]].meta;
        if (!isnan(v) && a->ndim == o->ndim && !memcmp(a->shape, o->shape, sizeof(int64_t) * (size_t)a->ndim)) {
            *x = n->in[i];
            *s = v;
            return true;
        }
    }
    return false;
}

/* v made by a cast from dtype from (f16 or bf16) to f32 in blk, used once: its node, else NULL */
static oar_node *widening_cast(const fa_ctx *c, int v, int blk) {
    oar_node *n = producer(c, v, OAR_OP_cast, blk);
    if (!n || c->uses[v] != 1 || c->p->values[v].meta.dtype != OAR_F32) return NULL;
    oar_dtype from = c->p->values[n->in[0]].meta.dtype;
    return from == OAR_BF16 || from == OAR_F16 ? n : NULL;
}

/* Whether node u casts to dtype dt */
static bool casts_to(const oar_program *p, const oar_node *u, oar_dtype dt) {
    return !u->dead && u->op == OAR_OP_cast && p->values[u->out[0]].meta.dtype == dt;
}

static bool last_dim(const oar_node *n, const oar_program *p) {
    int64_t d = n->attrs[0].i, nd = p->values[n->out[0]].meta.ndim;
    return d == -1 || d == nd - 1;
}

static int defined_at(const fa_ctx *c, int v, int blk) {
    const oar_value *val = &c->p->values[v];
    if (val->kind != OAR_VAL_NODE || val->node < 0 || c->p->nodes[val->node].block != blk) return -1;
    return c->pos[val->node];
}

/* Adds a node (metas from inference) to blk and moves it to position at. Returns its id. */
static int insert_node(fa_ctx *c, int blk, int at, oar_op_id op, const int *in, int n_in, const oar_attr *attrs,
                       int *out_ids) {
    oar_program *p = c->p;
    oar_tensor *shells[OAR_MAX_INPUTS] = {0};
    oar_meta metas[4];
    int n_out = 4;
    oar_status st = OAR_OK;
    for (int i = 0; i < n_in && st == OAR_OK; i++)
        if (in[i] >= 0 && !(shells[i] = oar_value_shell(p, in[i]))) st = oar_last_status();
    if (st == OAR_OK) st = oar_op_table[op]->infer(shells, n_in, attrs, metas, &n_out);
    for (int i = 0; i < n_in; i++) oar_tensor_unref(shells[i]);
    if (st != OAR_OK) return -1;
    int id = oar_program_add_node(p, blk, op, in, n_in, attrs, metas, n_out, out_ids);
    if (id < 0) return -1;
    for (int i = 0; i < n_in; i++)
        if (in[i] >= 0 && in[i] < c->n_counted) c->uses[in[i]]++;
    oar_block *b = &p->blocks[blk];
    memmove(b->nodes + at + 1, b->nodes + at, sizeof(int) * (size_t)(b->n_nodes - 1 - at));
    b->nodes[at] = id;
    if (at + 1 < b->n_nodes) p->nodes[id].phase = p->nodes[b->nodes[at + 1]].phase; /* the profiler's phase there */
    return id;
}

static void kill_node(oar_node *n) { n->dead = true; }

/* v's only use was a node just killed: when a permute made v, kill it too, and so on up a
 * chain of permutes (kᵀ of kᵀ in the backward). */
static void kill_view_if_unused(fa_ctx *c, int v, int blk) {
    for (oar_node *n; c->uses[v] == 1 && (n = producer(c, v, OAR_OP_permute, blk));) {
        kill_node(n);
        c->uses[v] = 0;
        v = n->in[0];
    }
    if (v >= 0 && c->uses[v] > 0) c->uses[v]--;
}

/* ---- the forward chain ending at softmax node sm; on success *fused is the new node */
typedef struct fwd_match {
    int mm1, mul, mf, sm, mm2; /* node ids; -1 for absent optional steps */
    int widen, narrow;         /* O2's bf16/f16 chains: the casts around the f32 softmax, else -1 */
    int q, k, kt, v, mask;
    double scale;
} fwd_match;

static bool match_forward(const fa_ctx *c, int sm_id, fwd_match *m) {
    const oar_program *p = c->p;
    const oar_node *sm = &p->nodes[sm_id];
    int blk = sm->block;
    if (sm->dead || sm->op != OAR_OP_softmax || !last_dim(sm, p)) return false;
    *m = (fwd_match){-1, -1, -1, sm_id, -1, -1, -1, -1, -1, -1, -1, -1, 1.0};
    int x = sm->in[0];
    oar_node *n;
    if ((n = widening_cast(c, x, blk))) { /* autocast's f32 softmax in a bf16/f16 chain */
        m->widen = (int)(n - p->nodes);
        x = n->in[0];
    }
    const oar_dtype dt = p->values[x].meta.dtype;
    if ((n = producer(c, x, OAR_OP_masked_fill, blk))) {
        if (c->uses[x] != 1 || n->attrs[0].f != -INFINITY) return false;
        const oar_meta *mk = &p->values[n->in[1]].meta, *s = &p->values[x].meta;
        if (mk->dtype != OAR_BOOL || mk->ndim != 2 || s->ndim < 2 || mk->shape[0] != s->shape[s->ndim - 2] ||
            mk->shape[1] != s->shape[s->ndim - 1])
            return false;
        m->mf = (int)(n - p->nodes);
        m->mask = n->in[1];
        x = n->in[0];
    }
    if ((n = producer(c, x, OAR_OP_mul, blk))) {
        int y;
        if (c->uses[x] != 1 || !scalar_mul(c, n, &y, &m->scale)) return false;
        m->mul = (int)(n - p->nodes);
        x = y;
    }
    if (!(n = producer(c, x, OAR_OP_matmul, blk)) || c->uses[x] != 1) return false;
    m->mm1 = (int)(n - p->nodes);
    m->q = n->in[0];
    m->kt = n->in[1];
    if (!swap_last2(c, m->kt, blk, &m->k)) return false;
    /* the product with v: the first matmul(p, v) among p's uses (in a half chain: among the uses
     * of p cast back to the chain's dtype) */
    int pv = sm->out[0];
    for (int i = 0; m->widen >= 0 && i < p->blocks[blk].n_nodes && m->narrow < 0; i++) {
        const oar_node *u = &p->nodes[p->blocks[blk].nodes[i]];
        if (u->in && u->n_in == 1 && u->in[0] == pv && casts_to(p, u, dt)) m->narrow = p->blocks[blk].nodes[i];
    }
    if (m->widen >= 0 && m->narrow < 0) return false;
    if (m->narrow >= 0) pv = p->nodes[m->narrow].out[0];
    for (int i = 0; i < p->blocks[blk].n_nodes && m->mm2 < 0; i++) {
        const oar_node *u = &p->nodes[p->blocks[blk].nodes[i]];
        if (!u->dead && u->op == OAR_OP_matmul && u->in[0] == pv && u->in[1] != pv) {
            m->mm2 = p->blocks[blk].nodes[i];
            m->v = u->in[1];
        }
    }
    if (m->mm2 < 0) return false;
    /* shapes: equal batch dims (no broadcasting), which inference checks */
    const oar_meta *q = &p->values[m->q].meta, *k = &p->values[m->k].meta, *v = &p->values[m->v].meta;
    if (q->ndim < 2 || k->ndim != q->ndim || v->ndim != q->ndim) return false;
    return q->dtype == dt && k->dtype == dt && v->dtype == dt; /* one chain dtype */
}

static int fuse_forward(fa_ctx *c, const fwd_match *m) {
    oar_program *p = c->p;
    int blk = p->nodes[m->sm].block;
    /* at softmax's place when v already exists there, else at the product's place when nothing
     * between reads p (in a half chain: p or its narrowing cast's output, but that cast) */
    int at = c->pos[m->sm], vdef = defined_at(c, m->v, blk);
    int p32 = p->nodes[m->sm].out[0], p16 = m->narrow >= 0 ? p->nodes[m->narrow].out[0] : -1;
    if (vdef >= at) {
        for (int i = at + 1; i < c->pos[m->mm2]; i++) {
            const oar_node *u = &p->nodes[p->blocks[blk].nodes[i]];
            if (u->dead || p->blocks[blk].nodes[i] == m->narrow) continue;
            for (int k = 0; k < u->n_in; k++)
                if (u->in[k] == p32 || (p16 >= 0 && u->in[k] == p16)) return -1;
        }
        at = c->pos[m->mm2];
    }
    int in[4] = {m->q, m->k, m->v, m->mask}, out[2];
    oar_attr a[2] = {oar_attr_float(m->scale), oar_attr_int(0)};
    int id = insert_node(c, blk, at, OAR_OP_fused_attention, in, 4, a, out);
    if (id < 0) {
        oar_clear_error();
        return -1; /* inference refused the shapes: leave the chain */
    }
    int o_old = p->nodes[m->mm2].out[0], p_old = p16 >= 0 ? p16 : p32;
    p->values[out[0]].dyn_dims = p->values[o_old].dyn_dims;
    p->values[out[1]].dyn_dims = p->values[p_old].dyn_dims;
    oar_program_replace_uses(p, o_old, out[0]);
    oar_program_replace_uses(p, p_old, out[1]);
    if (p16 >= 0 && c->uses[p32] > 1) {
        /* the f32 probabilities had readers besides the narrowing cast (softmax's backward): they
         * read the fused node's, widened (the backward fusion below takes that cast in) */
        int wide;
        oar_attr f32 = oar_attr_dtype(OAR_F32);
        if (insert_node(c, blk, at + 1, OAR_OP_cast, &out[1], 1, &f32, &wide) < 0) return -1;
        p->values[wide].dyn_dims = p->values[p32].dyn_dims;
        oar_program_replace_uses(p, p32, wide);
    }
    kill_view_if_unused(c, m->kt, blk);
    kill_node(&p->nodes[m->mm1]);
    if (m->mul >= 0) kill_node(&p->nodes[m->mul]);
    if (m->mf >= 0) kill_node(&p->nodes[m->mf]);
    if (m->widen >= 0) kill_node(&p->nodes[m->widen]);
    kill_node(&p->nodes[m->sm]);
    if (m->narrow >= 0) kill_node(&p->nodes[m->narrow]);
    kill_node(&p->nodes[m->mm2]);
    return id;
}

/* ---- the backward of fused node fa */

/* The only live use of value v in blk (a node), or -1; uses must be exactly 1. */
static int sole_user(const fa_ctx *c, int v, int blk) {
    if (c->uses[v] != 1) return -1;
    const oar_block *b = &c->p->blocks[blk];
    for (int i = 0; i < b->n_nodes; i++) {
        const oar_node *u = &c->p->nodes[b->nodes[i]];
        if (u->dead) continue;
        for (int k = 0; k < u->n_in; k++)
            if (u->in[k] == v) return b->nodes[i];
    }
    return -1;
}

static bool same_shape(const oar_program *p, int a, int b) {
    const oar_meta *x = &p->values[a].meta, *y = &p->values[b].meta;
    return x->ndim == y->ndim && !memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->ndim);
}

static bool fuse_backward(fa_ctx *c, int fa) {
    oar_program *p = c->p;
    const oar_node *f = &p->nodes[fa];
    int blk = f->block, q = f->in[0], k = f->in[1], v = f->in[2], mask = f->in[3], pv = f->out[1];
    double scale = f->attrs[0].f;
    /* p's uses: softmax_backward(dp, p) and permute(p) -> matmul(permute(p), g); in a bf16/f16
     * chain softmax_backward is f32 and reads p widened (pw), and the casts around it go too */
    const bool half = p->values[pv].meta.dtype != OAR_F32;
    int sb = -1, pt = -1, n_use = 0, pw = -1, dpw = -1, dsn = -1;
    const oar_block *b = &p->blocks[blk];
    for (int i = 0; i < b->n_nodes; i++) {
        const oar_node *u = &p->nodes[b->nodes[i]];
        if (u->dead) continue;
        for (int s = 0; s < u->n_in; s++) {
            if (u->in[s] != pv) continue;
            n_use++;
            if (half && casts_to(p, u, OAR_F32) && (sb = sole_user(c, u->out[0], blk)) >= 0) {
                const oar_node *w = &p->nodes[sb];
                if (w->op == OAR_OP_softmax_backward && w->in[1] == u->out[0] && w->in[0] != u->out[0] && last_dim(w, p))
                    pw = b->nodes[i];
                else
                    sb = -1;
            }
            if (!half && u->op == OAR_OP_softmax_backward && s == 1 && last_dim(u, p)) sb = b->nodes[i];
            int src;
            if (u->op == OAR_OP_permute && swap_last2(c, u->out[0], blk, &src)) pt = b->nodes[i];
        }
    }
    if (sb < 0 || pt < 0 || n_use != 2 || c->uses[pv] != 2 || (half && pw < 0)) return false;
    int mmv = sole_user(c, p->nodes[pt].out[0], blk);
    if (mmv < 0 || p->nodes[mmv].op != OAR_OP_matmul || p->nodes[mmv].in[0] != p->nodes[pt].out[0]) return false;
    int g = p->nodes[mmv].in[1];
    /* dp = matmul(g, permute(v)), maybe through a reshape to the same shape (and widened) */
    int dp = p->nodes[sb].in[0], rs = -1;
    oar_node *n;
    if (half) {
        if (!(n = widening_cast(c, dp, blk)) || p->values[n->in[0]].meta.dtype != p->values[pv].meta.dtype) return false;
        dpw = (int)(n - p->nodes);
        dp = n->in[0];
    }
    n = producer(c, dp, OAR_OP_reshape, blk);
    if (n) {
        if (c->uses[dp] != 1 || !same_shape(p, dp, n->in[0])) return false;
        rs = (int)(n - p->nodes);
        dp = n->in[0];
    }
    oar_node *dpm = producer(c, dp, OAR_OP_matmul, blk);
    int vsrc;
    if (!dpm || c->uses[dp] != 1 || dpm->in[0] != g || !swap_last2(c, dpm->in[1], blk, &vsrc) || vsrc != v)
        return false;
    int dpm_id = (int)(dpm - p->nodes), vt = dpm->in[1];
    /* ds: [narrowed] [where(mask, 0, .)] [mul(., scale)] */
    int ds = p->nodes[sb].out[0], wh = -1, mu = -1;
    int user = sole_user(c, ds, blk);
    if (half) {
        if (user < 0 || !casts_to(p, &p->nodes[user], p->values[pv].meta.dtype)) return false;
        dsn = user;
        ds = p->nodes[user].out[0];
        user = sole_user(c, ds, blk);
    }
    if (user >= 0 && p->nodes[user].op == OAR_OP_where) {
        const oar_node *w = &p->nodes[user];
        if (mask < 0 || w->in[0] != mask || w->in[2] != ds || oar_pass_const_value(c->p, w->in[1]) != 0.0 ||
            !same_shape(p, w->out[0], ds))
            return false;
        wh = user;
        ds = w->out[0];
        user = sole_user(c, ds, blk);
    } else if (mask >= 0) {
        return false;
    }
    if (user >= 0 && p->nodes[user].op == OAR_OP_mul) {
        int x;
        double s;
        if (!scalar_mul(c, &p->nodes[user], &x, &s) || x != ds || s != scale) return false;
        mu = user;
        ds = p->nodes[user].out[0];
    } else if (scale != 1.0) {
        return false;
    }
    /* ds's two uses: matmul(ds, k) and matmul(permute(q), ds) */
    if (c->uses[ds] != 2) return false;
    int mq = -1, mk = -1, ksrc = -1, qsrc = -1;
    for (int i = 0; i < b->n_nodes; i++) {
        const oar_node *u = &p->nodes[b->nodes[i]];
        if (u->dead || u->op != OAR_OP_matmul) continue;
        if (u->in[0] == ds && u->in[1] != ds) {
            int kk = u->in[1], kt;
            if (kk == k || (swap_last2(c, kk, blk, &kt) && swap_last2(c, kt, blk, &ksrc) && ksrc == k))
                mq = b->nodes[i];
        } else if (u->in[1] == ds && u->in[0] != ds && swap_last2(c, u->in[0], blk, &qsrc) && qsrc == q) {
            mk = b->nodes[i];
        }
    }
    if (mq < 0 || mk < 0) return false;
    /* the new node goes where the first of the replaced products was */
    int at = c->pos[dpm_id] < c->pos[mmv] ? c->pos[dpm_id] : c->pos[mmv];
    if (defined_at(c, g, blk) >= at || c->pos[fa] >= at) return false;
    int in[5] = {g, q, k, v, pv}, d[3];
    oar_attr a = oar_attr_float(scale);
    int id = insert_node(c, blk, at, OAR_OP_attention_backward, in, 5, &a, d);
    if (id < 0) {
        oar_clear_error();
        return false;
    }
    int dkt_old = p->nodes[mk].out[0], nd = p->values[dkt_old].meta.ndim, perm[OAR_MAX_DIMS], dkt;
    for (int i = 0; i < nd; i++) perm[i] = i;
    perm[nd - 2] = nd - 1;
    perm[nd - 1] = nd - 2;
    oar_attr pa = oar_attr_dims(perm, nd);
    /* dkᵀ was a dense product: later views of it (a reshape merging heads) rely on that
     * layout, so the transpose of dk is made dense too (a copy of S x D per head) */
    int dkt_view;
    if (insert_node(c, blk, at + 1, OAR_OP_permute, &d[1], 1, &pa, &dkt_view) < 0 ||
        insert_node(c, blk, at + 2, OAR_OP_contiguous, &dkt_view, 1, NULL, &dkt) < 0)
        return false;
    int dq_old = p->nodes[mq].out[0], dv_old = p->nodes[mmv].out[0];
    p->values[d[0]].dyn_dims = p->values[dq_old].dyn_dims;
    p->values[d[2]].dyn_dims = p->values[dv_old].dyn_dims;
    p->values[dkt].dyn_dims = p->values[dkt_old].dyn_dims;
    oar_program_replace_uses(p, dq_old, d[0]);
    oar_program_replace_uses(p, dv_old, d[2]);
    oar_program_replace_uses(p, dkt_old, dkt);
    int mq_k = p->nodes[mq].in[1], mk_q = p->nodes[mk].in[0];
    kill_view_if_unused(c, vt, blk);
    kill_view_if_unused(c, mq_k, blk);
    kill_view_if_unused(c, mk_q, blk);
    kill_node(&p->nodes[pt]);
    kill_node(&p->nodes[mmv]);
    kill_node(&p->nodes[dpm_id]);
    if (rs >= 0) kill_node(&p->nodes[rs]);
    if (half) {
        kill_node(&p->nodes[pw]);
        kill_node(&p->nodes[dpw]);
        kill_node(&p->nodes[dsn]);
    }
    kill_node(&p->nodes[sb]);
    if (wh >= 0) kill_node(&p->nodes[wh]);
    if (mu >= 0) kill_node(&p->nodes[mu]);
    kill_node(&p->nodes[mq]);
    kill_node(&p->nodes[mk]);
    return true;
}

oar_status oar_pass_fuse_attention(oar_program *p) {
    fa_ctx c = {p, NULL, NULL, 0};
    oar_status st = refresh(&c);
    for (int i = 0; st == OAR_OK && i < p->n_nodes; i++) {
        fwd_match m;
        if (!match_forward(&c, i, &m)) continue;
        int fa = fuse_forward(&c, &m);
        if (fa < 0) continue;
        oar_program_compact(p);
        if ((st = refresh(&c)) != OAR_OK) break;
        if (fuse_backward(&c, fa)) {
            oar_program_compact(p);
            st = refresh(&c);
        }
    }
    free(c.uses);
    free(c.pos);
    return st;
}
