/* An independent check of a memory plan, written apart from the planner so a planner bug is
 * not repeated here: it re-derives from the program which value aliases which, each root's
 * class and size, and when each arena root is really read, then verifies that every arena
 * root is aligned and inside the arena, that the plan's live ranges cover the real ones, and
 * that no two arena roots live at the same step share a byte. */
#include "graph/plan.h"
#include "graph/hoist.h"

#include <stdlib.h>
#include <string.h>

enum { AT_NONE = 0, AT_MAIN, AT_SUB };

typedef struct checker {
    const oar_program *p;
    const oar_memory_plan *plan;
    int *step;      /* per node: main-block position, else -1 */
    char *at;       /* per value: AT_MAIN (main block or external), AT_SUB, AT_NONE */
    int *rf, *rl;   /* per root: real first and last step */
} checker;

static oar_status bad(const char *what, int v) {
    return oar_error(OAR_ERR_STATE, "plan check: value %%%d: %s", v, what);
}

static oar_status walk(checker *c, int b, int depth) {
    const oar_program *p = c->p;
    const int *root = c->plan->root;
    if (depth > 64) return oar_error(OAR_ERR_STATE, "plan check: blocks nest deeper than 64");
    const oar_block *bl = &p->blocks[b];
    if (b != OAR_MAIN_BLOCK)
        for (int i = 0; i < bl->n_in; i++) c->at[bl->in[i]] = AT_SUB;
    for (int i = 0; i < bl->n_nodes; i++) {
        int id = bl->nodes[i];
        const oar_node *n = &p->nodes[id];
        if (n->dead) return oar_error(OAR_ERR_STATE, "plan check: node %d is dead but still listed", id);
        for (int k = 0; k < n->n_blocks; k++) {
            oar_status st = walk(c, n->blocks[k], depth + 1);
            if (st != OAR_OK) return st;
        }
        if (b == OAR_MAIN_BLOCK) c->step[id] = i;
        bool view = (oar_op_table[n->op]->flags & OAR_OPF_VIEW) != 0;
        for (int o = 0; o < n->n_out; o++) {
            int v = n->out[o];
            c->at[v] = b == OAR_MAIN_BLOCK ? AT_MAIN : AT_SUB;
            bool alias = (view || (n->inplace && o == 0)) && n->n_in > 0 && n->in[0] >= 0;
            int want = alias ? root[n->in[0]] : v;
            if (root[v] != want)
                return bad(alias ? "aliases its node's input 0 but the plan gives it another root"
                                 : "owns its buffer but the plan gives it another root", v);
        }
    }
    return OAR_OK;
}

static void read_at(checker *c, int x, int s) {
    int r = c->plan->root[x];
    if (c->at[r] == AT_MAIN && c->rl[r] < s) c->rl[r] = s;
}

static void sub_reads(checker *c, int b, int s, int depth) {
    if (depth > 64) return;
    const oar_block *bl = &c->p->blocks[b];
    for (int i = 0; i < bl->n_nodes; i++) {
        const oar_node *n = &c->p->nodes[bl->nodes[i]];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) read_at(c, n->in[k], s);
        for (int k = 0; k < n->n_blocks; k++) sub_reads(c, n->blocks[k], s, depth + 1);
    }
    for (int k = 0; k < bl->n_out; k++) read_at(c, bl->out[k], s);
}

typedef struct span {
    int64_t off, end;
    int v;
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    return x->v < y->v ? -1 : x->v > y->v;
}

static oar_status check(checker *c) {
    const oar_program *p = c->p;
    const oar_memory_plan *plan = c->plan;
    int nv = p->n_values;
    for (int v = 0; v < nv; v++) {
        int r = plan->root[v];
        if (r < 0 || r >= nv || plan->root[r] != r) return bad("its root is not a root", v);
        oar_value_kind k = p->values[v].kind;
        if (k != OAR_VAL_NODE && r != v) return bad("an input, parameter or constant must be its own root", v);
        if ((k == OAR_VAL_PARAM || k == OAR_VAL_CONST) || (k == OAR_VAL_INPUT && p->values[v].block == OAR_MAIN_BLOCK))
            c->at[v] = AT_MAIN;
    }
    oar_status st = walk(c, OAR_MAIN_BLOCK, 0);
    if (st != OAR_OK) return st;

    const oar_block *mb = &p->blocks[OAR_MAIN_BLOCK];
    char *seen = calloc((size_t)nv + 1, 1);
    bool *hoisted = oar_program_hoisted_nodes(p);
    if (!seen || !hoisted) {
        free(seen);
        free(hoisted);
        return oar_error(OAR_ERR_OOM, "plan check: out of memory");
    }
    for (int k = 0; k < mb->n_out; k++) seen[plan->root[mb->out[k]]] |= 1;
    for (int k = 0; k < p->n_grad_writes; k++) seen[plan->root[p->grad_writes[k].value]] |= 2;
    for (int v = 0; v < nv && st == OAR_OK; v++) {
        int r = plan->root[v];
        if (plan->cls[v] != plan->cls[r]) st = bad("its class differs from its root's", v);
        if (st != OAR_OK || r != v) {
            if (st == OAR_OK && (plan->nbytes[v] != 0 || plan->offset[v] != -1))
                st = bad("is not a root but has a size or an offset", v);
            continue;
        }
        const oar_value *val = &p->values[v];
        oar_buffer_class want;
        if (val->kind != OAR_VAL_NODE) want = OAR_BUF_EXTERNAL;
        else if (c->at[v] != AT_MAIN || (seen[v] & 1)) want = OAR_BUF_FRESH;
        else if (seen[v] & 2) want = OAR_BUF_PERSISTENT;
        else if (hoisted[val->node]) want = OAR_BUF_PERSISTENT; /* computed once (hoist.h) */
        else want = OAR_BUF_ARENA;
        if (plan->cls[v] != want) {
            st = bad("has the wrong buffer class", v);
            break;
        }
        int64_t bytes = (int64_t)oar_dtypes[val->meta.dtype].size;
        for (int d = 0; d < val->meta.ndim; d++) bytes *= val->meta.shape[d];
        if (plan->tiled && plan->tiled[v] == OAR_TILE_INTERIOR) { /* one slice of its tile (batch_tiles.h) */
            const oar_batch_tile *bt = NULL;
            for (int t = 0; t < plan->n_tiles; t++)
                if (plan->first[v] == plan->tiles[t].first) bt = &plan->tiles[t];
            if (bt) bytes = bytes / bt->batch * bt->sub;
        }
        if (c->at[v] != AT_NONE && plan->nbytes[v] != bytes) {
            st = bad("its size is not numel * dtype size", v);
            break;
        }
        if (want != OAR_BUF_ARENA) {
            if (plan->offset[v] != -1) st = bad("is not planned in the arena but has an offset", v);
            continue;
        }
        if (plan->offset[v] < 0 || plan->offset[v] % 64 != 0) st = bad("its offset is negative or not 64-byte aligned", v);
        else if (plan->offset[v] + plan->nbytes[v] > plan->arena_bytes) st = bad("does not fit in the arena", v);
        c->rf[v] = c->rl[v] = c->step[val->node];
    }
    free(seen);
    free(hoisted);
    if (st != OAR_OK) return st;

    for (int s = 0; s < mb->n_nodes; s++) {
        const oar_node *n = &p->nodes[mb->nodes[s]];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) read_at(c, n->in[k], s);
        for (int k = 0; k < n->n_blocks; k++) sub_reads(c, n->blocks[k], s, 1);
    }

    int n_spans = 0;
    span *spans = malloc(sizeof(span) * ((size_t)nv + 1));
    if (!spans) return oar_error(OAR_ERR_OOM, "plan check: out of memory");
    for (int v = 0; v < nv; v++) {
        if (plan->root[v] != v || plan->cls[v] != OAR_BUF_ARENA) continue;
        if (plan->first[v] > c->rf[v] || plan->last[v] < c->rl[v]) {
            free(spans);
            return bad("its planned live range does not cover the steps that use it", v);
        }
        if (plan->nbytes[v] > 0) spans[n_spans++] = (span){plan->offset[v], plan->offset[v] + plan->nbytes[v], v};
    }
    qsort(spans, (size_t)n_spans, sizeof(span), cmp_span);
    for (int i = 0; i < n_spans && st == OAR_OK; i++) {
        int a = spans[i].v;
        for (int j = i + 1; j < n_spans && spans[j].off < spans[i].end; j++) {
            int b = spans[j].v;
            if (c->rl[a] < c->rf[b] || c->rl[b] < c->rf[a]) continue;
            st = oar_error(OAR_ERR_STATE, "plan check: values %%%d (steps %d-%d) and %%%d (steps %d-%d) are live at "
                           "once and share arena bytes [%lld, %lld)", a, c->rf[a], c->rl[a], b, c->rf[b], c->rl[b],
                           (long long)spans[j].off,
                           (long long)(spans[i].end < spans[j].end ? spans[i].end : spans[j].end));
            break;
        }
    }
    free(spans);
    return st;
}

oar_status oar_plan_check(const oar_program *p, const oar_memory_plan *plan) {
    if (!p || !plan) return oar_error(OAR_ERR_INVALID_ARG, "plan check: expected a program and a plan, got NULL");
    if (plan->n_values != p->n_values || !plan->root || !plan->cls || !plan->offset || !plan->nbytes ||
        !plan->first || !plan->last)
        return oar_error(OAR_ERR_STATE, "plan check: the plan is for %d values, the program has %d",
                         plan->n_values, p->n_values);
    if (plan->arena_bytes < 0) return oar_error(OAR_ERR_STATE, "plan check: negative arena size");
    size_t n1 = (size_t)p->n_values + 1;
    checker c = {p, plan, malloc(sizeof(int) * ((size_t)p->n_nodes + 1)), calloc(n1, 1),
                 malloc(sizeof(int) * n1), malloc(sizeof(int) * n1)};
    oar_status st;
    if (!c.step || !c.at || !c.rf || !c.rl) {
        st = oar_error(OAR_ERR_OOM, "plan check: out of memory");
    } else {
        for (int i = 0; i < p->n_nodes; i++) c.step[i] = -1;
        for (int v = 0; v < p->n_values; v++) c.rf[v] = c.rl[v] = -1;
        st = check(&c);
    }
    free(c.step);
    free(c.at);
    free(c.rf);
    free(c.rl);
    return st;
}
