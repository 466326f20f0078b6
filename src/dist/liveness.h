/* The liveness channel: a TCP mesh beside the communicator on which every rank sends a
 * heartbeat to every peer. A peer whose connection closes without a goodbye (killed,
 * crashed, exited early) or that stays silent past the timeout is reported dead at once,
 * whatever MPI is doing: Open MPI 4.1 has no fault tolerance, so a collective with a dead
 * peer would block until mpirun tears the job down. */
#ifndef OAR_DIST_LIVENESS_H
#define OAR_DIST_LIVENESS_H

#include "base/base.h"

/* Gathers every rank's `bytes` bytes at mine into all (rank order); a collective. */
typedef oar_status (*oar_allgather_fn)(const void *mine, void *all, size_t bytes);

typedef struct oar_liveness_opts {
    int rank, size, local_rank;
    int port_base;         /* 0: an ephemeral port */
    int heartbeat_ms, timeout_ms;
    oar_allgather_fn allgather;
    void (*on_death)(void); /* called from the liveness thread after a death is recorded */
} oar_liveness_opts;

oar_status oar_liveness_start(const oar_liveness_opts *o);
/* From now on peers closing their connections is expected (all passed the final barrier). */
void oar_liveness_ending(void);
/* Says goodbye to every peer and stops (a clean end); safe when not started. */
void oar_liveness_stop(void);
/* -1 while every peer is alive, else the first dead rank; msg gets the reason. */
int oar_liveness_dead(char *msg, size_t size);
/* "host:port" of rank r's listener, as exchanged at start ("" if unknown). */
const char *oar_liveness_endpoint(int r);

#endif
