/* oar/ps.h — parameter-server training over the distributed runtime (oar/dist.h).
 * Included by oar.h. docs/parameter-server.md has the design and the measurements.
 *
 * The world's first `servers` ranks hold the tables, sharded by row (row r lives on server
 * r % servers); the other ranks are workers. A worker pulls the rows a batch needs, computes
 * gradients of them and pushes them back; the servers apply the optimizer:
 *   sync   every worker's step-t gradients are averaged and applied once, before any step-t+1
 *          pull is answered: the same update as one process training on all the workers'
 *          batches together (to within rounding; see the docs);
 *   async  each push is applied when it arrives and pulls are answered at once (Hogwild style);
 *   geo    GEO-SGD: each worker trains a local copy with the optimizer, and every geo_k steps
 *          pushes the change of the rows it touched (divided by the number of workers), which
 *          the servers add; then it pulls those rows afresh.
 * Servers update only the rows pushed (lazy optimizer state; docs/parameter-server.md). In a
 * one-rank world the rank holds the tables itself and applies each step at step_done: plain
 * training through the same calls. A dead server or worker fails the others' calls naming it
 * (the liveness channel of dist). */
#ifndef OAR_PS_H
#define OAR_PS_H

#include "oar.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum oar_ps_mode { OAR_PS_SYNC = 0, OAR_PS_ASYNC, OAR_PS_GEO } oar_ps_mode;

typedef struct oar_ps_opts {
    int servers;          /* ranks 0..servers-1 serve; 0 means 1; at least one worker must remain
                           * (a one-rank world with 1 runs in process) */
    oar_ps_mode mode;
    int geo_k;            /* GEO: local steps between exchanges; 0 means 10 */
    oar_optim_opts optim; /* the update (servers; GEO: the workers' local one), of the pushed rows
                           * only; any kind but LAMB. Zeroed: SGD lr 0.01 */
} oar_ps_opts;

typedef struct oar_ps oar_ps;

/* Every rank, after oar_dist_init, with the same options. */
OAR_API oar_ps *oar_ps_new(const oar_ps_opts *opts);
OAR_API void oar_ps_free(oar_ps *ps);
OAR_API bool oar_ps_is_server(const oar_ps *ps);
OAR_API int oar_ps_num_workers(const oar_ps *ps);
OAR_API int oar_ps_worker_index(const oar_ps *ps); /* 0..workers-1; -1 on a server */

/* Declares a table, on every rank in the same order: init is its full initial value, f32
 * [rows, dim] (every rank passes the same values; servers keep their rows, GEO workers a
 * copy). Returns the table's id, or -1 with the error set. */
OAR_API int oar_ps_add_table(oar_ps *ps, const char *name, oar_tensor *init);

/* Servers: answer the workers until every one has called oar_ps_finish. */
OAR_API oar_status oar_ps_serve(oar_ps *ps);

/* Workers. pull: the rows ids (i64 [n], any order, repeats allowed) of a table, as a new f32
 * [n, dim] tensor. push: their gradients (f32 [n, dim]; a repeated id's rows add up).
 * step_done: the end of the worker's step (sync: the servers apply the step when every worker
 * has ended it; geo: every geo_k-th call exchanges the changes). finish: the worker is done. */
OAR_API oar_tensor *oar_ps_pull(oar_ps *ps, int table, oar_tensor *ids);
OAR_API oar_status oar_ps_push(oar_ps *ps, int table, oar_tensor *ids, oar_tensor *grads);
OAR_API oar_status oar_ps_step_done(oar_ps *ps);
OAR_API oar_status oar_ps_finish(oar_ps *ps);

#ifdef __cplusplus
}
#endif
#endif /* OAR_PS_H */
