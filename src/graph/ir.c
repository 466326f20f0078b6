/* Building and editing programs: growable tables of values, nodes and blocks. */
#include "graph/ir.h"

#include <stdlib.h>
#include <string.h>

/* Grows *arr (of elem-sized entries) to hold at least need entries. */
static bool grow(void **arr, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    int n = *cap ? *cap * 2 : 16;
    while (n < need) n *= 2;
    void *p = oar_realloc(*arr, elem * (size_t)n);
    if (!p) return false;
    memset((char *)p + elem * (size_t)*cap, 0, elem * (size_t)(n - *cap));
    *arr = p;
    *cap = n;
    return true;
}
#define GROW(arr, cap, need) grow((void **)&(arr), &(cap), (need), sizeof *(arr))

oar_program *oar_program_new(void) {
    oar_program *p = OAR_NEW(oar_program);
    if (!p) return NULL;
    p->arena = oar_arena_create(16 << 10);
    if (!p->arena || oar_program_add_block(p, -1) != OAR_MAIN_BLOCK) {
        oar_program_free(p);
        return NULL;
    }
    return p;
}

void oar_program_free(oar_program *p) {
    if (!p) return;
    for (int i = 0; i < p->n_values; i++) oar_tensor_unref(p->values[i].tensor);
    for (int i = 0; i < p->n_grad_writes; i++) oar_tensor_unref(p->grad_writes[i].param);
    for (int b = 0; b < p->n_blocks; b++) {
        free(p->blocks[b].nodes);
        free(p->blocks[b].in);
        free(p->blocks[b].out);
    }
    free(p->values);
    free(p->nodes);
    free(p->blocks);
    free(p->grad_writes);
    if (p->arena) oar_arena_destroy(p->arena);
    free(p);
}

const char *oar_program_strdup(oar_program *p, const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = oar_arena_alloc(p->arena, n);
    if (d) memcpy(d, s, n);
    return d;
}

int oar_program_add_block(oar_program *p, int parent) {
    if (!GROW(p->blocks, p->cap_blocks, p->n_blocks + 1)) return -1;
    oar_block *b = &p->blocks[p->n_blocks];
    memset(b, 0, sizeof *b);
    b->parent = parent;
    return p->n_blocks++;
}

static int new_value(oar_program *p, oar_value_kind kind, int block) {
    if (!GROW(p->values, p->cap_values, p->n_values + 1)) return -1;
    oar_value *v = &p->values[p->n_values];
    memset(v, 0, sizeof *v);
    v->kind = kind;
    v->block = block;
    v->node = -1;
    return p->n_values++;
}

int oar_program_add_input(oar_program *p, int block, const oar_meta *m, const char *name) {
    oar_block *b = &p->blocks[block];
    if (!GROW(b->in, b->cap_in, b->n_in + 1)) return -1;
    int id = new_value(p, OAR_VAL_INPUT, block);
    if (id < 0) return -1;
    p->values[id].meta = *m;
    p->values[id].name = oar_program_strdup(p, name);
    b = &p->blocks[block];
    b->in[b->n_in++] = id;
    return id;
}

int oar_program_add_tensor(oar_program *p, oar_value_kind kind, oar_tensor *t, const char *name) {
    int id = new_value(p, kind, OAR_MAIN_BLOCK);
    if (id < 0) return -1;
    oar_value *v = &p->values[id];
    oar_meta_from(&v->meta, t);
    v->tensor = oar_retain(t);
    v->name = oar_program_strdup(p, name);
    return id;
}

int oar_program_add_node(oar_program *p, int block, oar_op_id op, const int *in, int n_in,
                         const oar_attr *attrs, const oar_meta *out_meta, int n_out, int *out_ids) {
    const oar_op_def *d = oar_op_table[op];
    if (!GROW(p->nodes, p->cap_nodes, p->n_nodes + 1)) return -1;
    oar_block *b = &p->blocks[block];
    if (!GROW(b->nodes, b->cap_nodes, b->n_nodes + 1)) return -1;
    int id = p->n_nodes;
    oar_node *n = &p->nodes[id];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->block = block;
    n->n_in = n_in;
    n->n_out = n_out;
    n->in = oar_arena_alloc(p->arena, sizeof(int) * (size_t)(n_in + 1));
    n->out = oar_arena_alloc(p->arena, sizeof(int) * (size_t)(n_out + 1));
    n->attrs = oar_arena_alloc(p->arena, sizeof(oar_attr) * (size_t)(d->n_attrs + 1));
    if (!n->in || !n->out || !n->attrs) return -1;
    memcpy(n->in, in, sizeof(int) * (size_t)n_in);
    if (d->n_attrs) memcpy(n->attrs, attrs, sizeof(oar_attr) * (size_t)d->n_attrs);
    p->n_nodes++;
    for (int o = 0; o < n_out; o++) {
        int v = new_value(p, OAR_VAL_NODE, block);
        if (v < 0) return -1;
        p->values[v].meta = out_meta[o];
        p->values[v].node = id;
        p->values[v].out_index = o;
        p->nodes[id].out[o] = v;
        if (out_ids) out_ids[o] = v;
    }
    b->nodes[b->n_nodes++] = id;
    return id;
}

oar_status oar_program_add_output(oar_program *p, int block, int value) {
    oar_block *b = &p->blocks[block];
    if (!GROW(b->out, b->cap_out, b->n_out + 1)) return OAR_ERR_OOM;
    b->out[b->n_out++] = value;
    return OAR_OK;
}

oar_status oar_program_add_grad_write(oar_program *p, int value, oar_tensor *param) {
    if (!GROW(p->grad_writes, p->cap_grad_writes, p->n_grad_writes + 1)) return OAR_ERR_OOM;
    p->grad_writes[p->n_grad_writes++] = (oar_grad_write){value, oar_retain(param)};
    return OAR_OK;
}

void oar_program_replace_uses(oar_program *p, int from, int to) {
    for (int i = 0; i < p->n_nodes; i++) {
        oar_node *n = &p->nodes[i];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] == from) n->in[k] = to;
    }
    for (int b = 0; b < p->n_blocks; b++)
        for (int k = 0; k < p->blocks[b].n_out; k++)
            if (p->blocks[b].out[k] == from) p->blocks[b].out[k] = to;
    for (int k = 0; k < p->n_grad_writes; k++)
        if (p->grad_writes[k].value == from) p->grad_writes[k].value = to;
}

void oar_program_compact(oar_program *p) {
    for (int b = 0; b < p->n_blocks; b++) {
        oar_block *bl = &p->blocks[b];
        int k = 0;
        for (int i = 0; i < bl->n_nodes; i++)
            if (!p->nodes[bl->nodes[i]].dead) bl->nodes[k++] = bl->nodes[i];
        bl->n_nodes = k;
    }
}

void oar_program_use_counts(const oar_program *p, int *counts) {
    memset(counts, 0, sizeof(int) * (size_t)p->n_values);
    for (int i = 0; i < p->n_nodes; i++) {
        const oar_node *n = &p->nodes[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) counts[n->in[k]]++;
    }
    for (int b = 0; b < p->n_blocks; b++)
        for (int k = 0; k < p->blocks[b].n_out; k++) counts[p->blocks[b].out[k]]++;
    for (int k = 0; k < p->n_grad_writes; k++) counts[p->grad_writes[k].value]++;
}

uint32_t oar_node_mutated_inputs(const oar_node *n) {
    if ((n->op == OAR_OP_batch_norm || n->op == OAR_OP_batch_norm_act) && n->attrs[0].i == 0) return 0; /* eval: only reads the statistics */
    return oar_op_table[n->op]->mutated_inputs;
}

bool oar_node_has_effects(const oar_program *p, const oar_node *n) {
    const oar_op_def *d = oar_op_table[n->op];
    uint32_t m = oar_node_mutated_inputs(n);
    if (d->flags & OAR_OPF_RANDOM) return true;
    if (n->n_blocks) return true; /* control flow: its blocks may hold effects */
    for (int k = 0; k < n->n_in && k < 32; k++)
        if (((m >> k) & 1u) && n->in[k] >= 0) return true;
    (void)p;
    return false;
}

oar_tensor *oar_value_shell(const oar_program *p, int value) {
    const oar_meta *m = &p->values[value].meta;
    return oar_tensor_shell(m->dtype, m->shape, m->ndim);
}

oar_program *oar_program_copy(const oar_program *src) {
    oar_program *p = OAR_NEW(oar_program);
    if (!p) return NULL;
    p->arena = oar_arena_create(16 << 10);
    p->values = oar_malloc(sizeof(oar_value) * (size_t)(src->n_values + 1));
    p->nodes = oar_malloc(sizeof(oar_node) * (size_t)(src->n_nodes + 1));
    p->blocks = oar_malloc(sizeof(oar_block) * (size_t)(src->n_blocks + 1));
    p->device = src->device;
    p->grad_writes = oar_malloc(sizeof(oar_grad_write) * (size_t)(src->n_grad_writes + 1));
    if (!p->arena || !p->values || !p->nodes || !p->blocks || !p->grad_writes) goto fail;
    p->cap_values = src->n_values + 1;
    p->cap_nodes = src->n_nodes + 1;
    p->cap_blocks = src->n_blocks + 1;
    p->cap_grad_writes = src->n_grad_writes + 1;
    for (int v = 0; v < src->n_values; v++) {
        p->values[v] = src->values[v];
        p->values[v].name = oar_program_strdup(p, src->values[v].name);
        oar_retain(p->values[v].tensor);
        p->n_values++;
    }
    for (int i = 0; i < src->n_nodes; i++) {
        const oar_node *s = &src->nodes[i];
        oar_node *n = &p->nodes[i];
        *n = *s;
        int n_attrs = oar_op_table[s->op]->n_attrs;
        n->in = oar_arena_alloc(p->arena, sizeof(int) * (size_t)(s->n_in + 1));
        n->out = oar_arena_alloc(p->arena, sizeof(int) * (size_t)(s->n_out + 1));
        n->attrs = oar_arena_alloc(p->arena, sizeof(oar_attr) * (size_t)(n_attrs + 1));
        n->blocks = s->n_blocks ? oar_arena_alloc(p->arena, sizeof(int) * (size_t)s->n_blocks) : NULL;
        if (!n->in || !n->out || !n->attrs || (s->n_blocks && !n->blocks)) goto fail;
        memcpy(n->in, s->in, sizeof(int) * (size_t)s->n_in);
        memcpy(n->out, s->out, sizeof(int) * (size_t)s->n_out);
        memcpy(n->attrs, s->attrs, sizeof(oar_attr) * (size_t)n_attrs);
        if (s->n_blocks) memcpy(n->blocks, s->blocks, sizeof(int) * (size_t)s->n_blocks);
        p->n_nodes++;
    }
    for (int b = 0; b < src->n_blocks; b++) {
        const oar_block *s = &src->blocks[b];
        oar_block *d = &p->blocks[b];
        memset(d, 0, sizeof *d);
        d->parent = s->parent;
        p->n_blocks++;
        d->nodes = oar_malloc(sizeof(int) * (size_t)(s->n_nodes + 1));
        d->in = oar_malloc(sizeof(int) * (size_t)(s->n_in + 1));
        d->out = oar_malloc(sizeof(int) * (size_t)(s->n_out + 1));
        if (!d->nodes || !d->in || !d->out) goto fail;
        memcpy(d->nodes, s->nodes, sizeof(int) * (size_t)s->n_nodes);
        memcpy(d->in, s->in, sizeof(int) * (size_t)s->n_in);
        memcpy(d->out, s->out, sizeof(int) * (size_t)s->n_out);
        d->n_nodes = d->cap_nodes = s->n_nodes;
        d->n_in = d->cap_in = s->n_in;
        d->n_out = d->cap_out = s->n_out;
        if (!d->cap_nodes) d->cap_nodes = 1;
        if (!d->cap_in) d->cap_in = 1;
        if (!d->cap_out) d->cap_out = 1;
    }
    for (int k = 0; k < src->n_grad_writes; k++) {
        p->grad_writes[k] = src->grad_writes[k];
        oar_retain(p->grad_writes[k].param);
        p->n_grad_writes++;
    }
    return p;
fail:
    oar_program_free(p);
    return NULL;
}
