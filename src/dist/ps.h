/* The parameter server's shared state and wire format (include/oar/ps.h): ps.c declares
 * tables, ps_server.c answers, ps_worker.c asks. Every message is a header, i64 [4] =
 * (kind, table, n, step), then for n > 0 the n row ids (i64) and, for pushes and deltas, their
 * n rows of values (f32 [n, dim]); a pull is answered by the n rows. Messages travel as dist's
 * point-to-point sends, so a dead peer fails the waits naming it. */
#ifndef OAR_DIST_PS_H
#define OAR_DIST_PS_H

#include "dist/ps_rows.h"
#include "tensor/tensor.h"

#define PS_MAX_TABLES 32

enum { PS_TAG_HEADER = 9101, PS_TAG_IDS, PS_TAG_VALUES, PS_TAG_REPLY };
typedef enum ps_kind { PS_PULL = 1, PS_PUSH, PS_STEP_DONE, PS_DELTA, PS_FINISH } ps_kind;

typedef struct ps_table {
    char name[64];
    int64_t rows, dim;
    oar_tensor *param;      /* servers: their shard [local rows, dim]; GEO and in-process workers: the whole table */
    oar_tensor *grad;       /* the same shape: pushed gradients gathered for the next update */
    ps_rows opt;            /* the update, on the rows gathered into grad (ps_rows.h) */
    oar_tensor *base;       /* GEO workers: the table as of the last exchange */
    uint8_t *dirty;         /* GEO workers: rows changed since then */
} ps_table;

struct oar_ps {
    oar_ps_opts o;
    int rank, size, servers, workers;
    bool in_process;        /* a one-rank world: the only rank works and holds every table itself */
    ps_table t[PS_MAX_TABLES];
    int n_tables;
    int64_t step; /* workers: steps ended; servers: sync updates applied */
};

/* Rows of a table server s holds, and where row r lives. */
static inline int64_t ps_local_rows(const oar_ps *ps, int64_t rows, int s) {
    return rows > s ? (rows - s + ps->servers - 1) / ps->servers : 0;
}
static inline int ps_server_of(const oar_ps *ps, int64_t r) { return (int)(r % ps->servers); }
static inline int64_t ps_local_index(const oar_ps *ps, int64_t r) { return r / ps->servers; }

/* Adds n gradient rows v (ids local to the table's param) into its gathered gradient. */
void ps_gather(ps_table *t, const int64_t *local_ids, const float *v, int64_t n);
/* Applies a table's gathered gradient, scaled, with its optimizer to the rows it touches, then
 * clears it. */
oar_status ps_apply(ps_table *t, double scale);
/* Sends a header and, when given, ids and values to peer; waits for the sends. */
oar_status ps_send(int peer, ps_kind kind, int table, int64_t n, int64_t step, const int64_t *ids,
                   const float *values, int64_t dim);
/* Receives n ids (and n * dim values when values is not NULL) from peer. */
oar_status ps_recv_payload(int peer, int64_t n, int64_t *ids, float *values, int64_t dim);

#endif
