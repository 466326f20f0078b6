/* The memory planner: every intermediate of the main block gets a byte offset in one arena,
 * chosen from liveness so buffers whose lifetimes do not overlap share memory. The peak is
 * known before the first run.
 *
 * Steps are the positions of the main block's nodes (0..n-1). A value's buffer is identified
 * by its root: the value that owns the memory. Views alias their input 0's root, and so does
 * output 0 of a node the in-place pass marked. A root lives from the step that defines it to
 * the last step that reads any value aliasing it (a control-flow node reads everything its
 * sub-blocks read). Roots that are not planned:
 *   - inputs, params, constants: external, bound by the executor;
 *   - roots aliased by a main-block output: fresh storage each call (the caller keeps it);
 *   - roots aliased by a gradient write: persistent (they become parameters' .grad);
 *   - values defined inside sub-blocks: allocated when the block runs. */
#ifndef OAR_GRAPH_PLAN_H
#define OAR_GRAPH_PLAN_H

#include "graph/batch_tiles.h"
#include "graph/ir.h"

typedef enum oar_buffer_class {
    OAR_BUF_ARENA = 0, /* planned: offset in the arena */
    OAR_BUF_EXTERNAL,  /* input, param or constant */
    OAR_BUF_FRESH,     /* allocated per call (outputs, sub-block values) */
    OAR_BUF_PERSISTENT /* allocated once, kept by the program (gradient writes) */
} oar_buffer_class;

typedef struct oar_memory_plan {
    int n_values;
    int *root;              /* per value: the value owning its buffer (itself for roots) */
    oar_buffer_class *cls;  /* per value: class of its root */
    int64_t *offset;        /* per root in the arena: byte offset (64-byte aligned); else -1 */
    int64_t *nbytes;        /* per root: bytes (numel * dtype size), 0 for non-roots */
    int *first, *last;      /* per root: live range in main-block steps (inclusive) */
    int64_t arena_bytes;    /* the planned peak of intermediates */
    int64_t persistent_bytes, fresh_bytes; /* outside the arena, for the report */
    /* batch tiles (batch_tiles.h): every root a tile reads lives to the tile's end and every
     * root it writes from the tile's start; the interior ones hold one slice (nbytes) */
    oar_batch_tile *tiles;
    int n_tiles;
    char *tiled;            /* per value: OAR_TILE_NONE, _SLICED (a batched value a tile reads or
                               writes, cut per slice) or _INTERIOR (made and read only in its tile) */
} oar_memory_plan;

/* Plans the main block of p (after passes; dead nodes must be compacted away), with batch tiles
 * for `threads` threads (0: none). */
oar_status oar_plan_memory(const oar_program *p, oar_memory_plan *plan);
oar_status oar_plan_memory_tiled(const oar_program *p, int threads, oar_memory_plan *plan);
void oar_plan_free(oar_memory_plan *plan);
/* Verifies a plan: every arena root fits in the arena, is aligned, and no two roots whose live
 * ranges overlap share a byte. Tests run it on every plan they make. */
oar_status oar_plan_check(const oar_program *p, const oar_memory_plan *plan);

#endif
