/* The memory planner (see plan.h for the model). Three steps:
 *   1. roots: walking the blocks in execution order, a view's outputs and an in-place node's
 *      output 0 take their input 0's root; every other value is its own root;
 *   2. classes and live ranges: a root's class comes from what it is and who else sees it
 *      (inputs, params, constants: external; a main-block output aliases it: fresh; a
 *      gradient write does: persistent; a sub-block defines it: fresh; otherwise arena). An
 *      arena root lives from its defining step to the last step reading any of its aliases; a
 *      control-flow node reads, at its step, every outside value its sub-blocks touch;
 *   3. offsets: roots by size, largest first, each at the lowest 64-byte aligned offset that
 *      overlaps no placed root whose live range meets its own (greedy best-fit by offset).
 *      Ranges are inclusive, so a node's inputs and outputs never share bytes unless the
 *      node was marked in place (then they are one root). */
#include "graph/plan.h"
#include "graph/hoist.h"
#include "graph/passes/passes.h"

#include <stdlib.h>
#include <string.h>

#define PLAN_ALIGN 64

enum { WHERE_NONE = 0, WHERE_MAIN, WHERE_SUB };

typedef struct planner {
    const oar_program *p;
    oar_memory_plan *plan;
    int *step;     /* per node: position in the main block, -1 otherwise */
    char *where;   /* per value: WHERE_MAIN (main block or external), WHERE_SUB, WHERE_NONE */
} planner;

static int64_t align_up(int64_t x) { return (x + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN; }

static int64_t value_bytes(const oar_value *v) {
    int64_t n = 1;
    for (int d = 0; d < v->meta.ndim; d++) n *= v->meta.shape[d];
    return n * (int64_t)oar_dtypes[v->meta.dtype].size;
}

static bool same_meta(const oar_value *a, const oar_value *b) {
    return a->meta.dtype == b->meta.dtype && a->meta.ndim == b->meta.ndim &&
           memcmp(a->meta.shape, b->meta.shape, sizeof(int64_t) * (size_t)a->meta.ndim) == 0;
}

/* Roots, in execution order; sub-block values are marked WHERE_SUB. */
static oar_status assign_roots(planner *pl, int b, int depth) {
    const oar_program *p = pl->p;
    int *root = pl->plan->root;
    if (depth > 64) return oar_error(OAR_ERR_FORMAT, "plan: blocks nest deeper than 64");
    const oar_block *bl = &p->blocks[b];
    if (b != OAR_MAIN_BLOCK)
        for (int i = 0; i < bl->n_in; i++) pl->where[bl->in[i]] = WHERE_SUB;
    for (int i = 0; i < bl->n_nodes; i++) {
        int id = bl->nodes[i];
        const oar_node *n = &p->nodes[id];
        if (n->dead)
            return oar_error(OAR_ERR_STATE, "plan: node %d (%s) is dead; compact the program before planning",
                             id, oar_op_table[n->op]->name);
        for (int k = 0; k < n->n_blocks; k++) {
            oar_status st = assign_roots(pl, n->blocks[k], depth + 1);
            if (st != OAR_OK) return st;
        }
        bool view = (oar_op_table[n->op]->flags & OAR_OPF_VIEW) != 0;
        if (n->inplace && !view) {
            int x = n->n_in > 0 ? n->in[0] : -1;
            if (x < 0 || n->n_out < 1 || !same_meta(&p->values[x], &p->values[n->out[0]]))
                return oar_error(OAR_ERR_STATE, "plan: node %d (%s) is marked in place but its input 0 and "
                                 "output 0 differ in dtype or shape; run the inplace pass again after "
                                 "changing shapes", id, oar_op_table[n->op]->name);
            oar_value_kind k = p->values[root[x]].kind;
            if (k != OAR_VAL_NODE)
                return oar_error(OAR_ERR_STATE, "plan: node %d (%s) is marked in place over an input, "
                                 "parameter or constant, which the program must not overwrite",
                                 id, oar_op_table[n->op]->name);
        }
        for (int o = 0; o < n->n_out; o++) {
            int v = n->out[o];
            pl->where[v] = b == OAR_MAIN_BLOCK ? WHERE_MAIN : WHERE_SUB;
            if ((view || (n->inplace && o == 0)) && n->n_in > 0 && n->in[0] >= 0) root[v] = root[n->in[0]];
        }
        if (b == OAR_MAIN_BLOCK) pl->step[id] = i;
    }
    return OAR_OK;
}

static void bump(oar_memory_plan *plan, int r, int s) {
    if (plan->last[r] < s) plan->last[r] = s;
}

/* Every value a sub-block tree touches whose root lives in the main block is read at step s. */
static void sub_reads(planner *pl, int b, int s, int depth) {
    const oar_program *p = pl->p;
    oar_memory_plan *plan = pl->plan;
    if (depth > 64) return;
    const oar_block *bl = &p->blocks[b];
    for (int i = 0; i < bl->n_nodes; i++) {
        const oar_node *n = &p->nodes[bl->nodes[i]];
        for (int k = 0; k < n->n_in; k++) {
            int x = n->in[k];
            if (x >= 0 && pl->where[plan->root[x]] == WHERE_MAIN) bump(plan, plan->root[x], s);
        }
        for (int k = 0; k < n->n_blocks; k++) sub_reads(pl, n->blocks[k], s, depth + 1);
    }
    for (int k = 0; k < bl->n_out; k++) {
        int x = bl->out[k];
        if (pl->where[plan->root[x]] == WHERE_MAIN) bump(plan, plan->root[x], s);
    }
}

typedef struct placed {
    int64_t off, end;
} placed;

static int cmp_placed(const void *a, const void *b) {
    const placed *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

typedef struct root_key {
    int64_t nbytes;
    int first, id;
} root_key;

/* Largest first; ties by definition step, then id, so plans are deterministic. */
static int cmp_roots(const void *a, const void *b) {
    const root_key *x = a, *y = b;
    if (x->nbytes != y->nbytes) return x->nbytes > y->nbytes ? -1 : 1;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Greedy: largest first, lowest aligned offset clear of every live-overlapping placed root. */
static oar_status place(oar_memory_plan *plan, int *order, int n) {
    placed *busy = malloc(sizeof(placed) * (size_t)(n + 1));
    root_key *keys = malloc(sizeof(root_key) * (size_t)(n + 1));
    if (!busy || !keys) {
        free(busy);
        free(keys);
        return oar_error(OAR_ERR_OOM, "plan: out of memory");
    }
    for (int i = 0; i < n; i++) keys[i] = (root_key){plan->nbytes[order[i]], plan->first[order[i]], order[i]};
    qsort(keys, (size_t)n, sizeof(root_key), cmp_roots);
    for (int i = 0; i < n; i++) order[i] = keys[i].id;
    free(keys);
    int64_t peak = 0;
    for (int i = 0; i < n; i++) {
        int r = order[i];
        int64_t size = plan->nbytes[r];
        if (size == 0) {
            plan->offset[r] = 0;
            continue;
        }
        int nb = 0;
        for (int j = 0; j < i; j++) {
            int q = order[j];
            if (plan->nbytes[q] == 0 || plan->last[q] < plan->first[r] || plan->last[r] < plan->first[q]) continue;
            busy[nb++] = (placed){plan->offset[q], plan->offset[q] + plan->nbytes[q]};
        }
        qsort(busy, (size_t)nb, sizeof(placed), cmp_placed);
        int64_t at = 0;
        for (int j = 0; j < nb; j++) {
            if (at + size <= busy[j].off) break;
            if (busy[j].end > at) at = align_up(busy[j].end);
        }
        plan->offset[r] = at;
        if (at + size > peak) peak = at + size;
    }
    plan->arena_bytes = peak;
    free(busy);
    return OAR_OK;
}

void oar_plan_free(oar_memory_plan *plan) {
    if (!plan) return;
    free(plan->root);
    free(plan->cls);
    free(plan->offset);
    free(plan->nbytes);
    free(plan->first);
    free(plan->last);
    free(plan->tiles);
    free(plan->tiled);
    memset(plan, 0, sizeof *plan);
}

oar_status oar_plan_memory(const oar_program *p, oar_memory_plan *plan) { return oar_plan_memory_tiled(p, 0, plan); }

/* The step a read at step s counts at: the end of s's tile, if any. */
static int tile_end(const int *tile_of, const oar_memory_plan *plan, int s) {
    return tile_of[s] >= 0 ? plan->tiles[tile_of[s]].last : s;
}

/* Tiles: roots written in a tile live from its start, the batched outputs its nodes make that
 * nothing after it reads hold one slice, and the other batched values its nodes touch are cut
 * per slice. Reads inside a tile were counted at its end (tile_end). */
static void plan_tiles(const oar_program *p, oar_memory_plan *plan, const int *tile_of, const bool *hoisted,
                       const char *batched) {
    const oar_block *mb = &p->blocks[OAR_MAIN_BLOCK];
    for (int s = 0; s < mb->n_nodes; s++) {
        int t = tile_of[s];
        const oar_node *n = &p->nodes[mb->nodes[s]];
        if (t < 0 || hoisted[mb->nodes[s]] || (oar_op_table[n->op]->flags & OAR_OPF_VIEW)) continue;
        const oar_batch_tile *bt = &plan->tiles[t];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && batched[n->in[k]] && !plan->tiled[n->in[k]]) plan->tiled[n->in[k]] = OAR_TILE_SLICED;
        for (int o = 0; o < n->n_out; o++) {
            int v = n->out[o];
            plan->first[v] = bt->first;
            bool interior = plan->root[v] == v && plan->cls[v] == OAR_BUF_ARENA && plan->last[v] <= bt->last;
            plan->tiled[v] = interior ? OAR_TILE_INTERIOR : OAR_TILE_SLICED;
            if (interior) plan->nbytes[v] = plan->nbytes[v] / bt->batch * bt->sub;
        }
    }
}

oar_status oar_plan_memory_tiled(const oar_program *p, int threads, oar_memory_plan *plan) {
    if (!p || !plan) return oar_error(OAR_ERR_INVALID_ARG, "plan: expected a program and a plan, got NULL");
    memset(plan, 0, sizeof *plan);
    int nv = p->n_values;
    size_t n1 = (size_t)nv + 1;
    plan->n_values = nv;
    plan->root = malloc(sizeof(int) * n1);
    plan->cls = malloc(sizeof(oar_buffer_class) * n1);
    plan->offset = malloc(sizeof(int64_t) * n1);
    plan->nbytes = calloc(n1, sizeof(int64_t));
    plan->first = malloc(sizeof(int) * n1);
    plan->last = malloc(sizeof(int) * n1);
    planner pl = {p, plan, malloc(sizeof(int) * ((size_t)p->n_nodes + 1)), calloc(n1, 1)};
    char *seen = calloc(n1, 1); /* per root: 1 aliased by a main-block output, 2 by a gradient write */
    int *order = malloc(sizeof(int) * n1);
    bool *hoisted = oar_program_hoisted_nodes(p); /* computed once: outside the arena */
    char *batched = calloc(n1, 1);
    int *tile_of = malloc(sizeof(int) * ((size_t)p->blocks[OAR_MAIN_BLOCK].n_nodes + 1));
    plan->tiled = calloc(n1, 1);
    oar_status st = OAR_OK;
    if (!batched || !tile_of || !plan->tiled || !hoisted || !plan->root || !plan->cls || !plan->offset || !plan->nbytes || !plan->first || !plan->last || !pl.step ||
        !pl.where || !seen || !order) {
        st = oar_error(OAR_ERR_OOM, "plan: out of memory");
        goto done;
    }
    for (int v = 0; v < nv; v++) {
        plan->root[v] = v;
        plan->offset[v] = -1;
        plan->first[v] = plan->last[v] = -1;
        oar_value_kind k = p->values[v].kind;
        if ((k == OAR_VAL_PARAM || k == OAR_VAL_CONST) || (k == OAR_VAL_INPUT && p->values[v].block == OAR_MAIN_BLOCK))
            pl.where[v] = WHERE_MAIN;
    }
    for (int i = 0; i < p->n_nodes; i++) pl.step[i] = -1;
    st = assign_roots(&pl, OAR_MAIN_BLOCK, 0);
    if (st != OAR_OK) goto done;

    const oar_block *mb = &p->blocks[OAR_MAIN_BLOCK];
    int n_steps = mb->n_nodes;
    st = threads > 0 ? oar_batch_tiles_find(p, hoisted, threads, &plan->tiles, &plan->n_tiles, batched) : OAR_OK;
    if (st != OAR_OK) goto done;
    for (int s = 0; s < n_steps; s++) tile_of[s] = -1;
    for (int t = 0; t < plan->n_tiles; t++)
        for (int s = plan->tiles[t].first; s <= plan->tiles[t].last; s++) tile_of[s] = t;
    for (int k = 0; k < mb->n_out; k++) seen[plan->root[mb->out[k]]] |= 1;
    for (int k = 0; k < p->n_grad_writes; k++) seen[plan->root[p->grad_writes[k].value]] |= 2;

    /* classes, sizes and definition steps of roots */
    for (int v = 0; v < nv; v++) {
        if (plan->root[v] != v) continue;
        const oar_value *val = &p->values[v];
        oar_buffer_class c;
        if (val->kind == OAR_VAL_INPUT || val->kind == OAR_VAL_PARAM || val->kind == OAR_VAL_CONST) c = OAR_BUF_EXTERNAL;
        else if (pl.where[v] != WHERE_MAIN) c = OAR_BUF_FRESH;
        else if (seen[v] & 1) c = OAR_BUF_FRESH; /* the caller keeps it, even if also a gradient */
        else if (seen[v] & 2) c = OAR_BUF_PERSISTENT;
        else if (val->kind == OAR_VAL_NODE && hoisted[val->node]) c = OAR_BUF_PERSISTENT;
        else c = OAR_BUF_ARENA;
        plan->cls[v] = c;
        if (pl.where[v] != WHERE_NONE) plan->nbytes[v] = value_bytes(val);
        if (pl.where[v] == WHERE_MAIN) {
            plan->first[v] = val->kind == OAR_VAL_NODE ? pl.step[val->node] : 0;
            plan->last[v] = plan->first[v];
        }
    }
    for (int v = 0; v < nv; v++) plan->cls[v] = plan->cls[plan->root[v]];

    /* last reads */
    for (int s = 0; s < n_steps; s++) {
        const oar_node *n = &p->nodes[mb->nodes[s]];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) bump(plan, plan->root[n->in[k]], tile_end(tile_of, plan, s));
        for (int k = 0; k < n->n_blocks; k++) sub_reads(&pl, n->blocks[k], s, 1);
    }
    if (plan->n_tiles) plan_tiles(p, plan, tile_of, hoisted, batched);
    int n_arena = 0;
    for (int v = 0; v < nv; v++) {
        if (plan->root[v] != v) continue;
        switch (plan->cls[v]) {
        case OAR_BUF_ARENA: order[n_arena++] = v; break;
        case OAR_BUF_PERSISTENT:
            plan->persistent_bytes += plan->nbytes[v];
            plan->last[v] = n_steps > 0 ? n_steps - 1 : plan->last[v]; /* outlives the run */
            break;
        case OAR_BUF_FRESH:
            if (pl.where[v] == WHERE_MAIN) {
                plan->fresh_bytes += plan->nbytes[v];
                plan->last[v] = n_steps > 0 ? n_steps - 1 : plan->last[v];
            }
            break;
        default: break;
        }
    }
    st = place(plan, order, n_arena);
done:
    free(pl.step);
    free(pl.where);
    free(seen);
    free(order);
    free(hoisted);
    free(batched);
    free(tile_of);
    if (st != OAR_OK) oar_plan_free(plan);
    return st;
}

int64_t oar_plan_naive_bytes(const oar_program *p) {
    oar_memory_plan plan;
    if (oar_plan_memory(p, &plan) != OAR_OK) return -1;
    int64_t total = 0;
    for (int v = 0; v < plan.n_values; v++)
        if (plan.root[v] == v && plan.cls[v] == OAR_BUF_ARENA) total += plan.nbytes[v];
    oar_plan_free(&plan);
    return total;
}
