/* Gradient bucketing for compiled data parallel. A traced data-parallel step holds one
 * grad_allreduce node per parameter gradient, each synchronous. This pass groups them, in the
 * order the program produces them (backward makes the last layers' gradients first), into
 * buckets of the capacities their attributes carry (the first one small, so communication
 * starts early, as in PyTorch DDP) and replaces each bucket by
 *     allreduce_start(g1..gk)  right after the node that produces its last gradient,
 *     allreduce_wait(bucket)   right before the first node that reads any averaged gradient,
 * then a slice + reshape view of the averaged bucket per gradient. Between the two nodes the
 * communicator's progress thread averages the bucket while the executor runs the rest of
 * backward. The planner keeps the bucket alive from start to wait because wait reads it (the
 * progress thread writes it meanwhile, so nothing else may share those bytes), and the views
 * that become parameters' .grad make it persistent, so gradients are views of the bucket with
 * no copy back. A gradient whose first reader comes before the next gradient closes its bucket,
 * so no wait is ever placed after a reader. The averages are the same fixed-order reduction as
 * the unbucketed nodes, element by element, so results do not depend on the bucketing. */
#include "graph/passes/passes.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct member {
    int node, pos;        /* the grad_allreduce node and its position in the main block */
    int first_use;        /* position of the first main-block node reading its result */
    int64_t numel;
} member;

typedef struct bucket {
    int first, n;         /* members[first .. first+n) */
    int min_use;          /* the wait goes before this position (n_nodes: at the end) */
    int64_t numel;
    int start, wait;      /* the new nodes */
    int *views;           /* per member: the reshape value standing for its result */
} bucket;

static void note_uses(const oar_program *p, int block, int pos, int *first_use) {
    const oar_block *b = &p->blocks[block];
    for (int i = 0; i < b->n_nodes; i++) {
        const oar_node *n = &p->nodes[b->nodes[i]];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && first_use[n->in[k]] > pos) first_use[n->in[k]] = pos;
        for (int k = 0; k < n->n_blocks; k++) note_uses(p, n->blocks[k], pos, first_use);
    }
    for (int k = 0; k < b->n_out; k++)
        if (first_use[b->out[k]] > pos) first_use[b->out[k]] = pos;
}

/* First reading position of every value: a node of the main block (control flow: anything its
 * blocks read), block outputs and gradient writes at the end. */
static int *first_uses(const oar_program *p) {
    int *first = malloc(sizeof(int) * (size_t)(p->n_values + 1));
    if (!first) return NULL;
    for (int v = 0; v < p->n_values; v++) first[v] = INT_MAX;
    const oar_block *mb = &p->blocks[OAR_MAIN_BLOCK];
    for (int i = 0; i < mb->n_nodes; i++) {
        const oar_node *n = &p->nodes[mb->nodes[i]];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && first[n->in[k]] > i) first[n->in[k]] = i;
        for (int k = 0; k < n->n_blocks; k++) note_uses(p, n->blocks[k], i, first);
    }
    for (int k = 0; k < mb->n_out; k++)
        if (first[mb->out[k]] > mb->n_nodes) first[mb->out[k]] = mb->n_nodes;
    for (int k = 0; k < p->n_grad_writes; k++)
        if (first[p->grad_writes[k].value] > mb->n_nodes) first[p->grad_writes[k].value] = mb->n_nodes;
    return first;
}

static uint64_t fnv(uint64_t h, const void *d, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)d)[i]) * 1099511628211ull;
    return h;
}

/* The start, the wait and a view per member of bucket k, appended to the main block (the
 * caller puts them in place). */
static oar_status emit_bucket(oar_program *p, const member *m, bucket *b, int k) {
    const oar_node *n0 = &p->nodes[m[b->first].node];
    int in[OAR_MAX_INPUTS];
    uint64_t sig = 14695981039346656037ull;
    char label[OAR_ATTR_STR_CAP];
    int used = snprintf(label, sizeof label, "gradient bucket %d (", k);
    for (int j = 0; j < b->n; j++) {
        const oar_node *n = &p->nodes[m[b->first + j].node];
        const oar_value *g = &p->values[n->in[0]];
        in[j] = n->in[0];
        sig = fnv(fnv(sig, n->attrs[0].s, strlen(n->attrs[0].s) + 1), g->meta.shape,
                  sizeof(int64_t) * (size_t)g->meta.ndim);
        if (used < (int)sizeof label)
            used += snprintf(label + used, sizeof label - (size_t)used, "%s%s", j ? ", " : "", n->attrs[0].s);
    }
    if (used < (int)sizeof label - 1) snprintf(label + used, sizeof label - (size_t)used, ")");
    else memcpy(label + sizeof label - 5, "...)", 5);
    oar_attr sa[4] = {oar_attr_int(k), oar_attr_int((int64_t)sig), oar_attr_int(n0->attrs[4].i), oar_attr_str(label)};
    int bucket_v, avg_v;
    if ((b->start = oar_pass_insert_node(p, OAR_MAIN_BLOCK, -1, OAR_OP_allreduce_start, in, b->n, sa, &bucket_v)) < 0)
        return oar_last_status();
    oar_attr wa[1] = {oar_attr_int(k)};
    if ((b->wait = oar_pass_insert_node(p, OAR_MAIN_BLOCK, -1, OAR_OP_allreduce_wait, &bucket_v, 1, wa, &avg_v)) < 0)
        return oar_last_status();
    int64_t off = 0;
    for (int j = 0; j < b->n; j++) {
        oar_meta g = p->values[in[j]].meta; /* a copy: adding nodes may move the value table */
        int64_t numel = m[b->first + j].numel;
        oar_attr sl[4] = {oar_attr_int(0), oar_attr_int(off), oar_attr_int(off + numel), oar_attr_int(1)};
        int flat, shaped;
        if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, -1, OAR_OP_slice, &avg_v, 1, sl, &flat) < 0) return oar_last_status();
        oar_attr rs[1] = {oar_attr_ints(g.shape, g.ndim)};
        if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, -1, OAR_OP_reshape, &flat, 1, rs, &shaped) < 0)
            return oar_last_status();
        b->views[j] = shaped;
        off += numel;
    }
    return OAR_OK;
}

/* Puts every bucket's start after its last member and its wait (with the views made right after
 * it) before its first reader. The new nodes were appended after the n_old original ones. */
static oar_status reorder(oar_program *p, const member *m, const bucket *b, int nb, int n_old) {
    oar_block *mb = &p->blocks[OAR_MAIN_BLOCK];
    int n_all = mb->n_nodes;
    int *order = malloc(sizeof(int) * (size_t)n_all), *rank_of = malloc(sizeof(int) * (size_t)p->n_nodes);
    if (!order || !rank_of) {
        free(order);
        free(rank_of);
        return oar_error(OAR_ERR_OOM, "bucket_allreduce: out of memory");
    }
    for (int i = 0; i < n_all; i++) rank_of[mb->nodes[i]] = i;
    int k = 0;
    for (int i = 0; i <= n_old; i++) {
        for (int j = 0; j < nb; j++) {
            if (b[j].min_use != i) continue;
            for (int x = rank_of[b[j].wait]; x < (j + 1 < nb ? rank_of[b[j + 1].start] : n_all); x++)
                order[k++] = mb->nodes[x]; /* the wait, then its views */
        }
        if (i == n_old) break;
        order[k++] = mb->nodes[i];
        for (int j = 0; j < nb; j++)
            if (m[b[j].first + b[j].n - 1].pos == i) order[k++] = b[j].start;
    }
    memcpy(mb->nodes, order, sizeof(int) * (size_t)k);
    free(order);
    free(rank_of);
    return k == n_all ? OAR_OK : oar_error(OAR_ERR_STATE, "bucket_allreduce: placed %d of %d nodes", k, n_all);
}

oar_status oar_pass_bucket_allreduce(oar_program *p) {
    const oar_block *mb = &p->blocks[OAR_MAIN_BLOCK];
    int n_old = mb->n_nodes, nm = 0;
    for (int i = 0; i < n_old; i++) nm += !p->nodes[mb->nodes[i]].dead && p->nodes[mb->nodes[i]].op == OAR_OP_grad_allreduce;
    if (nm == 0) return OAR_OK;
    member *m = calloc((size_t)nm, sizeof *m);
    bucket *b = calloc((size_t)nm, sizeof *b);
    int *views = malloc(sizeof(int) * (size_t)nm);
    int *first = first_uses(p);
    oar_status st = m && b && views && first ? OAR_OK : oar_error(OAR_ERR_OOM, "bucket_allreduce: out of memory");
    int nb = 0;
    for (int i = 0, j = 0; st == OAR_OK && i < n_old; i++) {
        const oar_node *n = &p->nodes[mb->nodes[i]];
        if (n->dead || n->op != OAR_OP_grad_allreduce) continue;
        const oar_value *g = &p->values[n->in[0]];
        int64_t numel = 1;
        for (int d = 0; d < g->meta.ndim; d++) numel *= g->meta.shape[d];
        m[j] = (member){.node = mb->nodes[i], .pos = i, .first_use = first[n->out[0]], .numel = numel};
        /* the bucket so far, or a new one: full, at 64 inputs, a reader already due, another reduction */
        bucket *cur = nb ? &b[nb - 1] : NULL;
        int64_t cap = nb == 1 ? n->attrs[3].i : n->attrs[2].i; /* bucket 0 has the small capacity */
        if (cap <= 0) cap = nb == 1 ? 1 << 20 : 32 << 20;
        bool fits = cur && (cur->numel + numel) * 4 <= cap && cur->n < OAR_MAX_INPUTS && i < cur->min_use &&
                    p->nodes[m[cur->first].node].attrs[4].i == n->attrs[4].i;
        if (!fits) {
            cur = &b[nb++];
            *cur = (bucket){.first = j, .min_use = INT_MAX};
        }
        cur->n++;
        cur->numel += numel;
        if (m[j].first_use < cur->min_use) cur->min_use = m[j].first_use;
        j++;
    }
    for (int k = 0, used = 0; st == OAR_OK && k < nb; k++) {
        b[k].views = views + used;
        used += b[k].n;
        if (b[k].min_use > n_old) b[k].min_use = n_old;
        st = emit_bucket(p, m, &b[k], k);
    }
    if (st == OAR_OK) st = reorder(p, m, b, nb, n_old);
    for (int k = 0; st == OAR_OK && k < nb; k++)
        for (int j = 0; j < b[k].n; j++) {
            oar_node *n = &p->nodes[m[b[k].first + j].node];
            oar_program_replace_uses(p, n->out[0], b[k].views[j]);
            n->dead = true;
            p->nodes[b[k].start].phase = p->nodes[b[k].wait].phase = n->phase;
        }
    free(m);
    free(b);
    free(views);
    free(first);
    return st;
}
