/* fuse_all_optimizer_ops: the optimizer_update nodes of a step become optimizer_update_multi
 * nodes (src/optim/update_multi_op.c), so a compiled step runs its updates as one instruction
 * and one thread-pool dispatch instead of one per parameter.
 *
 * Walking the main block in order, updates join an open group while they have the group's
 * kind and slots, fit in the op's inputs, and the group may move down to them. The fused node
 * takes the place of the group's last update, so every earlier member runs later than it did;
 * that is invisible when no node between a member and the group's last one
 *   - reads memory the group writes (param, hyper, state, through any alias): it would see the
 *     value from before the update instead of after it;
 *   - writes memory the group reads or writes (a gradient, clipped in place say): the update
 *     would see the new value;
 *   - holds control flow (its blocks may do either).
 * A node that does any of these closes the group first. A member also may not touch memory an
 * earlier member writes (a parameter updated twice in a step), because the fused op runs its
 * parameters as one pass: such an update starts a new group. The gradients are defined before
 * their own update, so before the fused node too. Groups of one update stay as they are.
 *
 * Results are bitwise those of the separate updates: the fused op runs each parameter's loop
 * with the same arithmetic (see optim/update_impl.h). */
#include "graph/passes/passes.h"
#include "ops/optim_layout.h"

#include <stdlib.h>
#include <string.h>

#define UPD_IN_PARAM 0
#define UPD_IN_GRAD 1
#define UPD_IN_HYPER 2
#define UPD_IN_SLOT0 3

typedef struct group {
    int nodes[OAR_OPTIM_MULTI_MAX];
    int n;
    int64_t kind, slots;
    int id;          /* stamps in writes/reads below mark roots of this group */
} group;

typedef struct fuser {
    oar_program *p;
    int *root;
    int *writes, *reads; /* per root: id of the last group that writes / reads it */
    int *fused;          /* node ids of the groups' last members, then the group's members */
    int next_id;
    group g;
} fuser;

static int64_t slots_of(const oar_node *n) {
    int64_t m = 0;
    for (int s = 0; s < OAR_SLOT_COUNT; s++)
        if (n->in[UPD_IN_SLOT0 + s] >= 0) m |= 1 << s;
    return m;
}

static bool is_update(const oar_node *n) { return !n->dead && n->op == OAR_OP_optimizer_update; }

/* The fused node: state of each member in order, then their gradients; it replaces the last
 * member in the block's order and the members die. */
static oar_status emit(fuser *f) {
    group *g = &f->g;
    if (g->n < 2) return OAR_OK;
    oar_program *p = f->p;
    int in[OAR_MAX_INPUTS], at = 0;
    for (int k = 0; k < OAR_OPTIM_MULTI_STATE; k++) in[k] = -1;
    for (int i = 0; i < g->n; i++) {
        const oar_node *n = &p->nodes[g->nodes[i]];
        in[at++] = n->in[UPD_IN_PARAM];
        in[at++] = n->in[UPD_IN_HYPER];
        for (int s = 0; s < OAR_SLOT_COUNT; s++)
            if (n->in[UPD_IN_SLOT0 + s] >= 0) in[at++] = n->in[UPD_IN_SLOT0 + s];
        in[OAR_OPTIM_MULTI_STATE + i] = n->in[UPD_IN_GRAD];
    }
    oar_attr attrs[2] = {oar_attr_int(g->kind), oar_attr_int(g->slots)};
    int id = oar_program_add_node(p, OAR_MAIN_BLOCK, OAR_OP_optimizer_update_multi, in, OAR_OPTIM_MULTI_STATE + g->n,
                                  attrs, NULL, 0, NULL);
    if (id < 0) return oar_last_status();
    oar_block *b = &p->blocks[OAR_MAIN_BLOCK];
    b->n_nodes--; /* appended at the end: it goes where the last member was */
    int last = g->nodes[g->n - 1];
    p->nodes[id].phase = p->nodes[last].phase; /* the profiler's phase of the updates it replaces */
    for (int i = 0; i < b->n_nodes; i++)
        if (b->nodes[i] == last) b->nodes[i] = id;
    p->nodes[last].dead = true; /* it no longer sits in the block; compaction needs no entry */
    for (int i = 0; i < g->n - 1; i++) p->nodes[g->nodes[i]].dead = true;
    return OAR_OK;
}

static oar_status close_group(fuser *f) {
    oar_status st = emit(f);
    f->g.n = 0;
    f->g.id = ++f->next_id;
    return st;
}

static bool group_writes(const fuser *f, int v) { return v >= 0 && f->writes[f->root[v]] == f->g.id; }
static bool group_touches(const fuser *f, int v) {
    return v >= 0 && (f->writes[f->root[v]] == f->g.id || f->reads[f->root[v]] == f->g.id);
}

/* Whether node n (not joining the group) may stay before the group's fused node. */
static bool conflicts(const fuser *f, const oar_node *n) {
    if (n->n_blocks) return true;
    uint32_t m = oar_op_table[n->op]->mutated_inputs | (n->inplace ? 1u : 0u); /* in place: writes input 0 */
    for (int k = 0; k < n->n_in; k++) {
        if (group_writes(f, n->in[k])) return true;
        if (k < 32 && ((m >> k) & 1u) && group_touches(f, n->in[k])) return true;
    }
    return false;
}

/* Whether update n may join the open group (else it starts the next one). */
static bool joins(const fuser *f, const oar_node *n) {
    const group *g = &f->g;
    if (g->n == 0) return true;
    int64_t slots = slots_of(n);
    if (n->attrs[0].i != g->kind || slots != g->slots || g->n == OAR_OPTIM_MULTI_MAX) return false;
    if ((g->n + 1) * oar_optim_multi_group(slots) > OAR_OPTIM_MULTI_STATE) return false;
    for (int k = 0; k < n->n_in; k++) /* its state and gradient must be apart from the group's writes */
        if (group_writes(f, n->in[k])) return false;
    for (int k = 0; k < n->n_in; k++)
        if (k != UPD_IN_GRAD && group_touches(f, n->in[k])) return false;
    return true;
}

static void join(fuser *f, int id) {
    const oar_node *n = &f->p->nodes[id];
    group *g = &f->g;
    if (g->n == 0) {
        g->kind = n->attrs[0].i;
        g->slots = slots_of(n);
    }
    g->nodes[g->n++] = id;
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] < 0) continue;
        if (k == UPD_IN_GRAD) f->reads[f->root[n->in[k]]] = g->id;
        else f->writes[f->root[n->in[k]]] = g->id;
    }
}

oar_status oar_pass_fuse_all_optimizer_ops(oar_program *p) {
    fuser f = {.p = p, .next_id = 1};
    f.g.id = 1;
    f.root = oar_pass_value_roots(p);
    f.writes = calloc((size_t)p->n_values + 1, sizeof(int));
    f.reads = calloc((size_t)p->n_values + 1, sizeof(int));
    oar_status st = OAR_OK;
    if (!f.root || !f.writes || !f.reads) st = oar_error(OAR_ERR_OOM, "fuse_all_optimizer_ops: out of memory");
    /* the block's list is walked by position: emit() edits entries already passed, never later ones */
    int n_nodes = p->blocks[OAR_MAIN_BLOCK].n_nodes;
    for (int i = 0; i < n_nodes && st == OAR_OK; i++) {
        int id = p->blocks[OAR_MAIN_BLOCK].nodes[i];
        const oar_node *n = &p->nodes[id];
        if (n->dead) continue;
        if (is_update(n)) {
            if (!joins(&f, n)) st = close_group(&f);
            if (st == OAR_OK) join(&f, id);
        } else if (f.g.n > 0 && conflicts(&f, n)) {
            st = close_group(&f);
        }
    }
    if (st == OAR_OK) st = close_group(&f);
    free(f.root);
    free(f.writes);
    free(f.reads);
    return st;
}
