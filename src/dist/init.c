/* Starting and ending the job: the world from the launcher, the liveness channel, the world
 * communicator (MPI, or local for one process). */
#include "dist/comm_nccl.h"
#include "dist/liveness.h"

#ifdef OAR_HAVE_MPI
#include <mpi.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    oar_comm *world;
    int local_rank;
    double collective_timeout_s;
    bool own_mpi; /* oar called MPI_Init, so oar calls MPI_Finalize */
} G;

oar_comm *oar_dist_world_comm(void) { return G.world; }
double oar_dist_collective_timeout(void) { return G.collective_timeout_s > 0 ? G.collective_timeout_s : 300.0; }

/* An integer from the environment; -1 when unset; -2 (with the error set) when malformed. */
static long env_int(const char *name) {
    const char *v = getenv(name);
    if (!v || !*v) return -1;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < 0) {
        oar_error(OAR_ERR_INVALID_ARG, "dist_init: expected %s to be a non-negative integer, got \"%s\"", name, v);
        return -2;
    }
    return x;
}

/* The launcher's view of the world: size and rank (MPI launchers first, then Fleet's). */
static oar_status launcher_world(long *rank, long *size, long *local) {
    static const char *ranks[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
    static const char *sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL};
    *rank = *size = *local = -1;
    for (int k = 0; k < 3 && *rank < 0; k++)
        if ((*rank = env_int(ranks[k])) == -2) return oar_last_status();
    for (int k = 0; k < 2 && *size < 0; k++)
        if ((*size = env_int(sizes[k])) == -2) return oar_last_status();
    if ((*local = env_int("OMPI_COMM_WORLD_LOCAL_RANK")) == -2) return oar_last_status();
    long frank = env_int("PADDLE_TRAINER_ID"), fsize = env_int("PADDLE_TRAINERS_NUM");
    if (frank == -2 || fsize == -2) return oar_last_status();
    if (fsize >= 0 && *size >= 0 && fsize != *size)
        return oar_error(OAR_ERR_INVALID_ARG, "dist_init: PADDLE_TRAINERS_NUM=%ld disagrees with the MPI launcher's "
                                              "world size %ld; unset it or launch that many processes", fsize, *size);
    if (frank >= 0 && *rank >= 0 && frank != *rank)
        return oar_error(OAR_ERR_INVALID_ARG, "dist_init: PADDLE_TRAINER_ID=%ld disagrees with the MPI launcher's "
                                              "rank %ld", frank, *rank);
    if (*size < 0 && fsize > 1)
        return oar_error(OAR_ERR_UNSUPPORTED, "dist_init: PADDLE_TRAINERS_NUM=%ld but no MPI launcher started this "
                                              "process; start the job with `oar launch --nproc %ld -- ...` (or "
                                              "mpirun)", fsize, fsize);
    if (*size < 0) *size = 1, *rank = 0;
    if (*local < 0) *local = *rank;
    return OAR_OK;
}

#ifdef OAR_HAVE_MPI
static oar_status mpi_allgather(const void *mine, void *all, size_t bytes) {
    int err = MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
    return err == MPI_SUCCESS ? OAR_OK : oar_error(OAR_ERR_IO, "dist_init: exchanging endpoints: MPI error %d", err);
}

static void wake_waiters(void) {
    oar_comm *c = G.world;
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}
#endif

static int opt_or_env(int given, const char *env, int fallback, bool *bad) {
    long e = env_int(env);
    if (e == -2) *bad = true;
    if (e > 0) return (int)e;
    return given > 0 ? given : fallback;
}

oar_status oar_dist_init(const oar_dist_opts *opts) {
    if (G.world) return OAR_OK;
    oar_dist_opts o = opts ? *opts : (oar_dist_opts){0};
    bool bad = false;
    int beat = opt_or_env(o.heartbeat_ms, "OAR_DIST_HEARTBEAT_MS", 100, &bad);
    int peer = opt_or_env(o.peer_timeout_ms, "OAR_DIST_PEER_TIMEOUT_MS", 1500, &bad);
    int coll = opt_or_env(o.collective_timeout_ms, "OAR_DIST_COLLECTIVE_TIMEOUT_MS", 300000, &bad);
    long port = env_int("OAR_DIST_PORT");
    if (bad || port == -2) return oar_last_status();
    if (o.heartbeat_ms < 0 || o.peer_timeout_ms < 0 || o.collective_timeout_ms < 0)
        return oar_error(OAR_ERR_INVALID_ARG, "dist_init: expected timeouts >= 0 (0 means the default), got "
                         "heartbeat %d, peer %d, collective %d ms", o.heartbeat_ms, o.peer_timeout_ms,
                         o.collective_timeout_ms);
    if (peer < 3 * beat)
        return oar_error(OAR_ERR_INVALID_ARG, "dist_init: expected the peer timeout (%d ms) to be at least 3 "
                         "heartbeats (%d ms each), or a slow beat would count as a death", peer, beat);
    long rank, size, local;
    oar_status st = launcher_world(&rank, &size, &local);
    if (st != OAR_OK) return st;
    G.collective_timeout_s = coll / 1000.0;
    G.local_rank = (int)local;
#ifdef OAR_HAVE_MPI
    if (size > 1) {
        int inited = 0, provided = 0;
        MPI_Initialized(&inited);
        if (!inited && MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
            return oar_error(OAR_ERR_IO, "dist_init: MPI_Init_thread failed");
        G.own_mpi = !inited;
        if (inited) MPI_Query_thread(&provided);
        if (provided < MPI_THREAD_SERIALIZED)
            return oar_error(OAR_ERR_UNSUPPORTED, "dist_init: the MPI library offers thread level %d, oar needs "
                                                  "MPI_THREAD_SERIALIZED (%d) for its progress thread (initialise MPI "
                                                  "with MPI_Init_thread, or let oar_dist_init do it)",
                             provided, MPI_THREAD_SERIALIZED);
        int r = 0, n = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
        MPI_Comm_size(MPI_COMM_WORLD, &n);
        if (r != rank || n != size)
            return oar_error(OAR_ERR_STATE, "dist_init: MPI says rank %d of %d, the launcher's variables rank %ld "
                             "of %ld", r, n, rank, size);
        oar_liveness_opts lo = {.rank = r, .size = n, .local_rank = (int)local, .port_base = (int)(port > 0 ? port : 0),
                                .heartbeat_ms = beat, .timeout_ms = peer, .allgather = mpi_allgather,
                                .on_death = wake_waiters};
        if ((st = oar_liveness_start(&lo)) != OAR_OK) return st;
        G.world = oar_comm_mpi_new();
        if (!G.world) {
            oar_liveness_stop();
            return oar_last_status();
        }
        oar_dist_program_collectives_install(true);
        return OAR_OK;
    }
#else
    if (size > 1)
        return oar_error(OAR_ERR_UNSUPPORTED, "dist_init: the launcher started %ld processes, but this oar was built "
                         "without MPI; install libopenmpi-dev and rebuild (cmake reports MPI: found)", size);
#endif
    G.world = oar_comm_local_new();
    if (G.world) oar_dist_program_collectives_install(true);
    return G.world ? OAR_OK : oar_last_status();
}

oar_status oar_dist_finalize(void) {
    oar_comm *c = G.world;
    if (!c) return OAR_OK;
    char why[320];
    oar_status st = oar_liveness_dead(why, sizeof why) >= 0 ? oar_error(OAR_ERR_IO, "dist_finalize: %s", why) : OAR_OK;
    oar_dist_program_collectives_install(false);
    if (st == OAR_OK && c->size > 1) st = oar_dist_wait(oar_dist_barrier());
    bool clean = st == OAR_OK;
    oar_dist_groups_end(clean); /* their communicators run on the world's progress thread */
    if (clean) oar_liveness_ending();
    oar_dist_device_comms_end(clean); /* NCCL's, bootstrapped over the world */
    c->ops->shutdown(c, clean);
    oar_liveness_stop();
#ifdef OAR_HAVE_MPI
    if (clean && c->size > 1 && G.own_mpi) MPI_Finalize();
#endif
    if (clean) {
        free(c->impl);
        free(c);
    } /* else the backend may still own requests in flight: leave them */
    G.world = NULL;
    return st;
}

bool oar_dist_initialized(void) { return G.world != NULL; }
int oar_dist_rank(void) { return G.world ? G.world->rank : 0; }
int oar_dist_world_size(void) { return G.world ? G.world->size : 1; }
int oar_dist_local_rank(void) { return G.world ? G.local_rank : 0; }
const char *oar_dist_backend(void) { return G.world ? G.world->ops->name : "local"; }
int oar_dist_dead_rank(void) { return oar_liveness_dead(NULL, 0); }

oar_status oar_dist_shard_loader(oar_loader *l) {
    return oar_loader_set_shard(l, oar_dist_rank(), oar_dist_world_size());
}
