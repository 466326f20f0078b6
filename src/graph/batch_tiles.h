/* Batch tiles: runs of a CPU program's main-block nodes that the executor runs a few images
 * at a time (batch_tiles.c). At batch 32 a CNN's early activations are far larger than the
 * caches (squeezenet1_1's first conv writes 101 MB that the pooling then reads back from
 * memory); run image by image, each slice a node writes is read by the next while still in
 * cache. Every node of a tile computes each image from that image alone (convolutions,
 * poolings, unary elementwise ops, the input's layout copy, reductions over non-batch dims),
 * so running the tile slice by slice gives what the whole batch gives.
 *
 * The planner (plan.c) keeps every buffer a tile touches live through the whole tile, and the
 * values made and read only inside it ("interior") get buffers of one slice's size; the
 * executor runs the tile's instructions once per slice, with headers cut to the slice. */
#ifndef OAR_GRAPH_BATCH_TILES_H
#define OAR_GRAPH_BATCH_TILES_H

#include "graph/ir.h"

typedef struct oar_batch_tile {
    int first, last;  /* main-block steps, inclusive */
    int64_t batch;    /* the batch (dim 0 of the values it slices) */
    int64_t sub;      /* images per slice (a multiple of the thread count, < batch) */
} oar_batch_tile;

enum { OAR_TILE_NONE = 0, OAR_TILE_SLICED, OAR_TILE_INTERIOR };
#define OAR_TILE_MAX_ARGS 8 /* inputs + outputs of a node in a tile: the executor cuts them on its stack */

/* Finds the tiles of p's main block for `threads` threads. hoisted: per node, computed once
 * (hoist.h). On success *tiles (malloc'd, may be NULL when none) and *n_tiles are set, and
 * batched (n_values entries, zeroed by the caller) marks the values whose dim 0 is the batch. */
oar_status oar_batch_tiles_find(const oar_program *p, const bool *hoisted, int threads, oar_batch_tile **tiles,
                                int *n_tiles, char *batched);

#endif
