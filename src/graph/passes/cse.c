/* Common subexpressions: within one block, a node computing the same op on the same inputs
 * with equal attributes as an earlier node is replaced by it (its outputs' uses move to the
 * earlier node's outputs, and it is killed). Blocks are walked in order and rewrites happen as
 * they are found, so whole duplicated chains collapse in one sweep.
 *
 * Never merged: nodes with effects (random draws, in-place mutations, control flow), nodes
 * whose own result is mutated later, and two reads of a value that some node mutates in place
 * with a mutation between them (a parameter read before and after the optimizer's update
 * holds two different values): each candidate records, per input, how many mutations of
 * that input's memory ran before it, and only equal records match. */
#include "graph/passes/passes.h"

#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t attr_hash(uint64_t h, const oar_attr *a) {
    h = mix(h, (uint64_t)a->kind);
    switch (a->kind) {
    case OAR_ATTR_INT:
    case OAR_ATTR_DTYPE: return mix(h, (uint64_t)a->i);
    case OAR_ATTR_FLOAT: {
        uint64_t bits;
        memcpy(&bits, &a->f, sizeof bits);
        return mix(h, bits);
    }
    case OAR_ATTR_INTS:
        h = mix(h, (uint64_t)a->n);
        for (int k = 0; k < a->n && k < OAR_ATTR_MAX_INTS; k++) h = mix(h, (uint64_t)a->ints[k]);
        return h;
    case OAR_ATTR_STR:
        for (int k = 0; k < OAR_ATTR_STR_CAP && a->s[k]; k++) h = mix(h, (uint64_t)(unsigned char)a->s[k]);
        return h;
    default: return h;
    }
}

/* Attributes are compared by kind: floats bitwise (so -0.0 differs from 0.0 and a NaN equals
 * itself), lists over their used entries, strings up to their terminator. */
static bool attr_equal(const oar_attr *a, const oar_attr *b) {
    if (a->kind != b->kind) return false;
    switch (a->kind) {
    case OAR_ATTR_INT:
    case OAR_ATTR_DTYPE: return a->i == b->i;
    case OAR_ATTR_FLOAT: return memcmp(&a->f, &b->f, sizeof a->f) == 0;
    case OAR_ATTR_INTS:
        if (a->n != b->n) return false;
        return memcmp(a->ints, b->ints, sizeof(int64_t) * (size_t)(a->n < 0 ? 0 : a->n > OAR_ATTR_MAX_INTS ? OAR_ATTR_MAX_INTS : a->n)) == 0;
    case OAR_ATTR_STR: return strncmp(a->s, b->s, OAR_ATTR_STR_CAP) == 0;
    default: return true;
    }
}

static uint64_t node_hash(const oar_node *n) {
    const oar_op_def *d = oar_op_table[n->op];
    uint64_t h = mix(0x51ed270b27a8f1a3ull, (uint64_t)n->op);
    h = mix(h, (uint64_t)n->n_in);
    for (int k = 0; k < n->n_in; k++) h = mix(h, (uint64_t)(int64_t)n->in[k]);
    for (int k = 0; k < d->n_attrs; k++) h = attr_hash(h, &n->attrs[k]);
    return h;
}

static bool node_equal(const oar_node *a, const oar_node *b) {
    if (a->op != b->op || a->n_in != b->n_in || a->n_out != b->n_out) return false;
    for (int k = 0; k < a->n_in; k++)
        if (a->in[k] != b->in[k]) return false;
    const oar_op_def *d = oar_op_table[a->op];
    for (int k = 0; k < d->n_attrs; k++)
        if (!attr_equal(&a->attrs[k], &b->attrs[k])) return false;
    return true;
}

typedef struct cse_state {
    oar_program *p;
    const int *root;       /* per value: its memory's root */
    const bool *mut;       /* per root: some node mutates it in place */
    uint32_t *version;     /* per root: mutations seen so far in the walk */
    uint32_t *captured;    /* per node: versions of its inputs' roots when it ran (n_in each) */
    int *cap_at;           /* per node: offset into captured, -1 when not a candidate */
    int n_captured;
    int merged;
} cse_state;

static bool candidate(const cse_state *c, const oar_node *n) {
    const oar_op_def *d = oar_op_table[n->op];
    if (n->dead || n->n_blocks || n->inplace) return false;
    if ((d->flags & OAR_OPF_RANDOM) || d->mutated_inputs) return false;
    if (oar_node_has_effects(c->p, n)) return false;
    /* a result that is itself mutated later must stay a separate buffer (views share their
     * input's memory anyway, so for them the input's version below is what matters) */
    if (!(d->flags & OAR_OPF_VIEW))
        for (int o = 0; o < n->n_out; o++)
            if (c->mut[c->root[n->out[o]]]) return false;
    return true;
}

static uint32_t input_version(const cse_state *c, int x) {
    return x >= 0 && c->mut[c->root[x]] ? c->version[c->root[x]] : 0;
}

/* After node n ran, the roots it mutates (directly, or anywhere inside its blocks) change. */
static void bump_versions(cse_state *c, const oar_node *n) {
    uint32_t m = oar_op_table[n->op]->mutated_inputs;
    for (int k = 0; k < n->n_in && k < 32; k++)
        if (((m >> k) & 1u) && n->in[k] >= 0) c->version[c->root[n->in[k]]]++;
    if (n->n_blocks)
        for (int v = 0; v < c->p->n_values; v++)
            if (c->mut[v]) c->version[v]++;
}

/* One block: an open-addressing table of earlier candidate nodes keyed by their hash. Two
 * nodes reading a mutated value are equal only if no mutation of it ran between them. */
static oar_status cse_block(cse_state *c, int b) {
    oar_program *p = c->p;
    const oar_block *bl = &p->blocks[b];
    if (bl->n_nodes == 0) return OAR_OK;
    size_t cap = 16;
    while (cap < (size_t)bl->n_nodes * 2) cap *= 2;
    int *slot = malloc(sizeof(int) * cap);
    uint64_t *hash = malloc(sizeof(uint64_t) * cap);
    if (!slot || !hash) {
        free(slot);
        free(hash);
        return oar_error(OAR_ERR_OOM, "cse: out of memory");
    }
    for (size_t i = 0; i < cap; i++) slot[i] = -1;
    for (int i = 0; i < bl->n_nodes; i++) {
        int id = p->blocks[b].nodes[i];
        oar_node *n = &p->nodes[id];
        if (n->dead) continue;
        if (!candidate(c, n)) {
            bump_versions(c, n);
            continue;
        }
        uint32_t *ver = c->captured + c->n_captured;
        c->cap_at[id] = c->n_captured;
        c->n_captured += n->n_in;
        uint64_t h = node_hash(n);
        for (int k = 0; k < n->n_in; k++) {
            ver[k] = input_version(c, n->in[k]);
            h = mix(h, ver[k]);
        }
        size_t pos = (size_t)h & (cap - 1);
        int found = -1;
        while (slot[pos] >= 0) {
            int e = slot[pos];
            if (hash[pos] == h && node_equal(&p->nodes[e], n) &&
                memcmp(c->captured + c->cap_at[e], ver, sizeof(uint32_t) * (size_t)n->n_in) == 0) {
                found = e;
                break;
            }
            pos = (pos + 1) & (cap - 1);
        }
        if (found < 0) {
            slot[pos] = id;
            hash[pos] = h;
            continue;
        }
        const oar_node *keep = &p->nodes[found];
        for (int o = 0; o < n->n_out; o++) oar_program_replace_uses(p, n->out[o], keep->out[o]);
        n->dead = true;
        c->merged++;
    }
    free(slot);
    free(hash);
    return OAR_OK;
}

static oar_status cse_blocks(cse_state *c, int b, int depth) {
    if (depth > 64) return OAR_OK;
    oar_status st = cse_block(c, b);
    for (int i = 0; st == OAR_OK && i < c->p->blocks[b].n_nodes; i++) {
        const oar_node *n = &c->p->nodes[c->p->blocks[b].nodes[i]];
        if (n->dead) continue;
        for (int k = 0; st == OAR_OK && k < n->n_blocks; k++) st = cse_blocks(c, n->blocks[k], depth + 1);
    }
    return st;
}

oar_status oar_pass_cse(oar_program *p) {
    int64_t total_in = 0;
    for (int i = 0; i < p->n_nodes; i++) total_in += p->nodes[i].n_in;
    cse_state c = {.p = p};
    int *root = oar_pass_value_roots(p);
    c.root = root;
    bool *mut = root ? oar_pass_mutable_roots(p, root) : NULL;
    c.mut = mut;
    c.version = calloc((size_t)p->n_values + 1, sizeof(uint32_t));
    c.captured = malloc(sizeof(uint32_t) * (size_t)(total_in + 1));
    c.cap_at = malloc(sizeof(int) * ((size_t)p->n_nodes + 1));
    oar_status st = OAR_OK;
    if (!root || !mut || !c.version || !c.captured || !c.cap_at) st = oar_error(OAR_ERR_OOM, "cse: out of memory");
    if (st == OAR_OK) {
        for (int i = 0; i < p->n_nodes; i++) c.cap_at[i] = -1;
        st = cse_blocks(&c, OAR_MAIN_BLOCK, 0);
    }
    free(root);
    free(mut);
    free(c.version);
    free(c.captured);
    free(c.cap_at);
    if (st != OAR_OK || !c.merged) return st;
    /* merging added uses to the kept nodes' outputs: an in-place mark (from an earlier run of
     * the in-place pass) over such a value is no longer safe */
    int *uses = malloc(sizeof(int) * (size_t)(p->n_values + 1));
    if (!uses) return oar_error(OAR_ERR_OOM, "cse: out of memory");
    oar_program_use_counts(p, uses);
    for (int i = 0; i < p->n_nodes; i++) {
        oar_node *n = &p->nodes[i];
        if (n->inplace && (n->n_in < 1 || n->in[0] < 0 || uses[n->in[0]] != 1)) n->inplace = false;
    }
    free(uses);
    return OAR_OK;
}
