/* Batch tiles (see batch_tiles.h): which nodes compute each image alone, which of them are
 * worth running a slice at a time, and the slice size, all from the CPU's cache sizes
 * (oar_get_cpu_caches, read when the tiles are found):
 *
 * A node joins a tile when its images' tensors (batched inputs and outputs) over the whole
 * batch exceed half the L3 (so at full batch they go through memory, not the caches), one
 * image's exceed a quarter of the L2 (a slice of a few images then fills a core's cache; smaller
 * images, CIFAR's 32x32 in a training step, keep their whole-batch kernels), and
 * its weights are no larger than a slice's activations (each slice reads the weights again:
 * resnet18's late 3x3 convs, 2.4 MB of weights on 7x7 images, stay at full batch). A slice
 * holds as many images as keep each thread's share of one node's tensors within its core's L2,
 * a multiple of the thread count (each conv then gives every thread an image), at least one per
 * thread. Runs of two or more such nodes in a row become tiles: a single node gains nothing,
 * the gain is the next node reading a slice still in cache. On the 2-core Zen 5 these were
 * first measured on (1 MiB L2, 32 MiB L3), the sizes are those of the fixed constants they
 * replace: 16 MiB over the batch, 256 KiB an image, 1 MiB a thread's slice. */
#include "graph/batch_tiles.h"
#include "graph/hoist.h"

#include <stdlib.h>
#include <string.h>

/* the three sizes, from the caches */
typedef struct tile_sizes {
    int64_t min_bytes;   /* a node's tensors over the whole batch: at least this (half the L3) */
    int64_t image_bytes; /* and for one image: at least this (a quarter of the L2) */
    int64_t slice_bytes; /* a thread's share of a slice of one node: at most this (the L2) */
} tile_sizes;

static tile_sizes sizes_of(oar_cpu_caches c) {
    return (tile_sizes){.min_bytes = c.l3 / 2, .image_bytes = c.l2 / 4, .slice_bytes = c.l2};
}

static int64_t value_bytes(const oar_value *v) {
    int64_t n = 1;
    for (int d = 0; d < v->meta.ndim; d++) n *= v->meta.shape[d];
    return n * (int64_t)oar_dtypes[v->meta.dtype].size;
}

/* Whether op n computes image i of its outputs from image i of its batched inputs alone. */
static bool per_image(const oar_program *p, const oar_node *n) {
    const oar_op_def *d = oar_op_table[n->op];
    int x = n->n_in > 0 ? n->in[0] : -1;
    int nd = x >= 0 ? p->values[x].meta.ndim : 0;
    switch (n->op) {
    case OAR_OP_conv2d:
    case OAR_OP_conv2d_act:
    case OAR_OP_max_pool2d:
    case OAR_OP_avg_pool2d:
    case OAR_OP_max_pool2d_nhwc:
    case OAR_OP_avg_pool2d_nhwc: return nd == 4; /* 3-d inputs are one unbatched image */
    case OAR_OP_contiguous: return true;
    case OAR_OP_mean:
    case OAR_OP_sum:
    case OAR_OP_amax:
    case OAR_OP_amin: { /* over dims that leave the batch alone */
        const oar_attr *dims = &n->attrs[0];
        if (dims->kind != OAR_ATTR_INTS || dims->n == 0) return false;
        for (int k = 0; k < dims->n; k++)
            if (dims->ints[k] == 0 || dims->ints[k] + nd == 0) return false;
        return true;
    }
    default: return (d->flags & OAR_OPF_ELEMENTWISE) && d->n_inputs == 1 && !(d->flags & OAR_OPF_RANDOM);
    }
}

/* Values whose data never changes within a run and that carry no batch: weights, biases. */
static bool fixed_value(const oar_program *p, const bool *hoisted, int v) {
    const oar_value *val = &p->values[v];
    return val->kind == OAR_VAL_PARAM || val->kind == OAR_VAL_CONST || (val->kind == OAR_VAL_NODE && hoisted[val->node]);
}

static int64_t slice_images(const tile_sizes *ts, int64_t act, int threads) {
    int64_t k = act > 0 ? ts->slice_bytes / act : 1; /* images per thread */
    return k < 1 ? threads : k * threads;
}

oar_status oar_batch_tiles_find(const oar_program *p, const bool *hoisted, int threads, oar_batch_tile **tiles,
                                int *n_tiles, char *batched) {
    *tiles = NULL;
    *n_tiles = 0;
    const oar_block *mb = &p->blocks[OAR_MAIN_BLOCK];
    if (p->device != OAR_CPU || mb->n_in == 0 || threads < 1) return OAR_OK;
    const oar_meta *m0 = &p->values[mb->in[0]].meta;
    int64_t batch = m0->ndim > 0 ? m0->shape[0] : 0;
    if (batch < 2) return OAR_OK;
    const tile_sizes ts = sizes_of(oar_get_cpu_caches());
    for (int i = 0; i < mb->n_in; i++) {
        const oar_meta *m = &p->values[mb->in[i]].meta;
        if (m->ndim > 0 && m->shape[0] == batch) batched[mb->in[i]] = 1;
    }
    oar_batch_tile *out = malloc(sizeof(oar_batch_tile) * (size_t)(mb->n_nodes / 2 + 1));
    if (!out) return oar_error(OAR_ERR_OOM, "plan: out of memory");
    int n_out = 0, run_first = -1, run_last = -1, run_len = 0;
    int64_t run_sub = 0;
    for (int s = 0; s <= mb->n_nodes; s++) {
        bool breaks = true;
        if (s < mb->n_nodes) {
            int id = mb->nodes[s];
            const oar_node *n = &p->nodes[id];
            const oar_op_def *d = oar_op_table[n->op];
            bool any = false, ok = n->n_blocks == 0 && n->n_in + n->n_out <= OAR_TILE_MAX_ARGS;
            int64_t act = 0, weights = 0;
            for (int k = 0; k < n->n_in && ok; k++) {
                int v = n->in[k];
                if (v < 0) continue;
                if (batched[v]) any = true, act += value_bytes(&p->values[v]) / batch;
                else if (fixed_value(p, hoisted, v)) weights += value_bytes(&p->values[v]);
                else ok = false;
            }
            if (hoisted[id]) {
                breaks = false; /* computed once, before the run: not in the instruction list */
            } else if (d->flags & OAR_OPF_VIEW) {
                /* a permute keeping the batch first passes it on; views of fixed values are
                 * settled when the executor is made and leave the list */
                bool keeps = any && n->op == OAR_OP_permute && n->attrs[0].n > 0 && n->attrs[0].ints[0] == 0;
                if (keeps) batched[n->out[0]] = 1;
                breaks = !(ok && !any);
            } else if (ok && any && per_image(p, n)) {
                for (int o = 0; o < n->n_out; o++) {
                    const oar_meta *m = &p->values[n->out[o]].meta;
                    if (m->ndim == 0 || m->shape[0] != batch) ok = false;
                }
                if (ok) {
                    for (int o = 0; o < n->n_out; o++) {
                        batched[n->out[o]] = 1;
                        act += value_bytes(&p->values[n->out[o]]) / batch;
                    }
                    int64_t sub = slice_images(&ts, act, threads);
                    bool tileable = !n->inplace && act * batch >= ts.min_bytes && act >= ts.image_bytes &&
                                    weights <= act * sub && sub < batch;
                    if (tileable) {
                        if (run_len == 0) run_first = s, run_sub = sub;
                        if (sub < run_sub) run_sub = sub;
                        run_last = s;
                        run_len++;
                        continue;
                    }
                }
            }
            if (!breaks) continue;
        }
        if (run_len >= 2) out[n_out++] = (oar_batch_tile){run_first, run_last, batch, run_sub};
        run_len = 0;
    }
    if (n_out == 0) {
        free(out);
        return OAR_OK;
    }
    *tiles = out;
    *n_tiles = n_out;
    return OAR_OK;
}
