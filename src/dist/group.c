/* Process groups (torch.distributed.new_group): a sub-communicator of some of the world's ranks.
 * Creation is a collective over the world: the ranks first compare what they ask for (one
 * allgather, which fails with the liveness and timeout checks of every wait, so a rank that
 * never calls new_group is named instead of hanging), then the backend splits its communicator
 * (MPI_Comm_split on the progress thread). Works on a group go through the world's progress
 * thread on the group's communicator; the waits are the common ones (work.c). */
#include "dist/comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHOWN 6 /* ranks compared and printed in a mismatch message besides the count and hash */

struct oar_dist_group {
    oar_comm *comm;          /* NULL outside the group, or after the world ended */
    int n, *ranks;           /* sorted world ranks */
    int rank;                /* this process's rank in the group, -1 outside */
    bool ended;              /* oar_dist_finalize ran */
    int id;                  /* > 0, in creation order (the compiled ops name groups by it) */
    oar_dist_group *next;    /* the live groups */
};

static oar_dist_group *g_live;
static int g_next_id = 1;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static void describe(char *buf, size_t size, const int64_t *rec) {
    int used = snprintf(buf, size, "[");
    int n = (int)rec[0];
    for (int k = 0; k < n && k < SHOWN && used < (int)size; k++)
        used += snprintf(buf + used, size - (size_t)used, "%s%lld", k ? ", " : "", (long long)rec[2 + k]);
    if (used < (int)size) snprintf(buf + used, size - (size_t)used, "%s]", n > SHOWN ? ", ..." : "");
}

/* Every rank asks for the same ranks, or new_group fails everywhere with both lists named. */
static oar_status agree(oar_comm *world, const int *sorted, int n) {
    enum { REC = 2 + SHOWN };
    int64_t mine[REC] = {n, 0};
    uint64_t h = 1469598103934665603ull;
    for (int k = 0; k < n; k++) h = (h ^ (uint64_t)sorted[k]) * 1099511628211ull;
    mine[1] = (int64_t)(h >> 1);
    for (int k = 0; k < n && k < SHOWN; k++) mine[2 + k] = sorted[k];
    int64_t *all = calloc((size_t)world->size * REC, sizeof(int64_t));
    if (!all) return oar_error(OAR_ERR_OOM, "new_group: out of memory");
    oar_coll_desc d = {.kind = OAR_COLL_ALLGATHER, .buf = all, .in = mine, .count = (int64_t)world->size * REC,
                       .dtype = OAR_I64, .label = "new_group (comparing the ranks every rank asks for)"};
    oar_status st = oar_dist_wait(oar_dist_submit(world, &d));
    for (int j = 0; st == OAR_OK && j < world->size; j++) {
        const int64_t *other = all + (size_t)j * REC;
        if (other[0] == mine[0] && other[1] == mine[1]) continue;
        char a[96], b[96];
        describe(a, sizeof a, mine);
        describe(b, sizeof b, other);
        st = oar_error(OAR_ERR_STATE, "new_group: rank %d asks for ranks %s (%d ranks), rank %d for ranks %s "
                       "(%lld ranks); every rank of the world must call new_group with the same ranks, in the same "
                       "order as its other new_group calls", world->rank, a, n, j, b, (long long)other[0]);
    }
    free(all);
    return st;
}

static oar_status end_comm(oar_dist_group *g, bool clean);

oar_dist_group *oar_dist_new_group(const int *ranks, int n) {
    oar_comm *world = oar_dist_world_comm();
    if (!world) return oar_error(OAR_ERR_STATE, "new_group: distributed state not started; call oar_dist_init "
                                                "first"), NULL;
    if (n < 1 || !ranks)
        return oar_error(OAR_ERR_INVALID_ARG, "new_group: expected at least one rank, got %d%s", n,
                         ranks ? "" : " (ranks is NULL)"), NULL;
    if (n > world->size)
        return oar_error(OAR_ERR_INVALID_ARG, "new_group: expected at most %d ranks (the world size), got %d",
                         world->size, n), NULL;
    int *sorted = malloc(sizeof(int) * (size_t)n);
    oar_dist_group *g = OAR_NEW(oar_dist_group);
    if (!sorted || !g) {
        free(sorted);
        free(g);
        return oar_error(OAR_ERR_OOM, "new_group: out of memory"), NULL;
    }
    memcpy(sorted, ranks, sizeof(int) * (size_t)n);
    qsort(sorted, (size_t)n, sizeof(int), cmp_int);
    oar_status st = OAR_OK;
    for (int k = 0; k < n && st == OAR_OK; k++) {
        if (sorted[k] < 0 || sorted[k] >= world->size)
            st = oar_error(OAR_ERR_INVALID_ARG, "new_group: expected ranks in [0, %d) (the world size is %d), got "
                           "rank %d", world->size, world->size, sorted[k]);
        else if (k && sorted[k] == sorted[k - 1])
            st = oar_error(OAR_ERR_INVALID_ARG, "new_group: expected distinct ranks, got rank %d twice", sorted[k]);
    }
    if (st == OAR_OK) st = agree(world, sorted, n);
    g->rank = -1;
    for (int k = 0; k < n; k++)
        if (sorted[k] == world->rank) g->rank = k;
    if (st == OAR_OK) g->comm = world->ops->split(world, g->rank >= 0, g->rank, &st);
    if (st == OAR_OK && g->comm && (g->comm->rank != g->rank || g->comm->size != n))
        st = oar_error(OAR_ERR_INTERNAL, "new_group: the backend made rank %d of %d, expected rank %d of %d",
                       g->comm->rank, g->comm->size, g->rank, n);
    if (st != OAR_OK) {
        if (g->comm) { /* only after the consistency check failed: a fresh communicator */
            oar_status ignored = end_comm(g, true);
            (void)ignored;
        }
        free(sorted);
        free(g);
        return NULL;
    }
    g->n = n;
    g->ranks = sorted;
    if (g->comm) g->comm->global = sorted; /* messages name world ranks */
    pthread_mutex_lock(&g_mu);
    g->id = g_next_id++;
    g->next = g_live;
    g_live = g;
    pthread_mutex_unlock(&g_mu);
    return g;
}

int oar_dist_group_id(const oar_dist_group *g) { return g ? g->id : 0; }

oar_comm *oar_dist_group_comm_by_id(int id, const char *who) {
    if (id == 0) return oar_dist_group_comm(NULL, who);
    pthread_mutex_lock(&g_mu);
    oar_dist_group *g = g_live;
    while (g && g->id != id) g = g->next;
    pthread_mutex_unlock(&g_mu);
    if (!g) {
        oar_error(OAR_ERR_INVALID_ARG, "%s: no live process group has id %d (freed, or made in another job); make "
                  "it with oar_dist_new_group and keep it alive while its ops run", who, id);
        return NULL;
    }
    return oar_dist_group_comm(g, who);
}

int oar_dist_group_rank(const oar_dist_group *g) { return g ? g->rank : oar_dist_rank(); }
int oar_dist_group_size(const oar_dist_group *g) { return g ? (g->rank >= 0 ? g->n : -1) : oar_dist_world_size(); }
int oar_dist_group_n_ranks(const oar_dist_group *g) { return g ? g->n : oar_dist_world_size(); }

int oar_dist_group_global_rank(const oar_dist_group *g, int group_rank) {
    int n = oar_dist_group_n_ranks(g);
    if (group_rank < 0 || group_rank >= n)
        return oar_error(OAR_ERR_INVALID_ARG, "dist_group_global_rank: expected 0 <= group rank < %d (the group's "
                         "size), got %d", n, group_rank), -1;
    return g ? g->ranks[group_rank] : group_rank;
}

int oar_dist_group_rank_of(const oar_dist_group *g, int global_rank) {
    if (!g) return global_rank >= 0 && global_rank < oar_dist_world_size() ? global_rank : -1;
    for (int k = 0; k < g->n; k++)
        if (g->ranks[k] == global_rank) return k;
    return -1;
}

static oar_status end_comm(oar_dist_group *g, bool clean) {
    oar_comm *c = g->comm;
    g->comm = NULL;
    if (!c) return OAR_OK;
    oar_status st = OAR_OK;
    if (clean) st = oar_dist_wait(oar_dist_submit(c, &(oar_coll_desc){.kind = OAR_COLL_FREE,
                                                                       .label = "freeing a process group"}));
    if (clean && st == OAR_OK) {
        free(c->impl);
        free(c);
    } /* else the backend may still own requests in flight on it: leave them */
    return st;
}

oar_status oar_dist_group_free(oar_dist_group *g) {
    if (!g) return OAR_OK;
    pthread_mutex_lock(&g_mu);
    for (oar_dist_group **p = &g_live; *p; p = &(*p)->next)
        if (*p == g) {
            *p = g->next;
            break;
        }
    pthread_mutex_unlock(&g_mu);
    oar_status st = end_comm(g, true); /* a failed free leaves the communicator to the backend */
    free(g->ranks);
    free(g);
    return st;
}

void oar_dist_groups_end(bool clean) {
    pthread_mutex_lock(&g_mu);
    oar_dist_group *g = g_live;
    g_live = NULL;
    pthread_mutex_unlock(&g_mu);
    for (; g; g = g->next) {
        (void)end_comm(g, clean);
        g->ended = true;
    }
}

oar_comm *oar_dist_group_comm(const oar_dist_group *g, const char *who) {
    if (!g) {
        oar_comm *w = oar_dist_world_comm();
        if (!w) oar_error(OAR_ERR_STATE, "%s: distributed state not started; call oar_dist_init first", who);
        return w;
    }
    if (g->ended) {
        oar_error(OAR_ERR_STATE, "%s: the group's job ended (oar_dist_finalize ran); make groups after oar_dist_init",
                  who);
        return NULL;
    }
    if (!g->comm) {
        char list[96];
        int64_t rec[2 + SHOWN] = {g->n, 0};
        for (int k = 0; k < g->n && k < SHOWN; k++) rec[2 + k] = g->ranks[k];
        describe(list, sizeof list, rec);
        oar_error(OAR_ERR_STATE, "%s: rank %d is not a member of the group of ranks %s; only its members may run "
                  "its collectives", who, oar_dist_rank(), list);
        return NULL;
    }
    return g->comm;
}
