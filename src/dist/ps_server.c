/* The parameter server's server side (include/oar/ps.h): one header receive posted per worker,
 * polled, each message handled whole before the next of that worker (a worker's messages
 * arrive in the order it sent them). Sync mode holds a pull of step t + 1 until every worker
 * has ended step t and the averaged update is applied. */
#include "dist/ps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A sync push kept until the step ends, so that gradients add up in worker order whatever
 * order they arrived in: the same sums as one process over the workers' batches in turn. */
typedef struct ps_held_push {
    int table;
    int64_t n, *ids;
    float *values;
    struct ps_held_push *next;
} ps_held_push;

typedef struct ps_peer {
    oar_tensor *header;    /* i64 [4], the posted receive's buffer */
    oar_dist_work *recv;   /* NULL once the worker finished */
    int64_t held_table, held_n, *held_ids; /* a sync pull waiting for the update */
    ps_held_push *pushes, **last_push;     /* this step's pushes, in arrival order */
} ps_peer;

static oar_status check_header(const oar_ps *ps, int worker, const int64_t *h) {
    bool ok = h[0] >= PS_PULL && h[0] <= PS_FINISH;
    if (ok && (h[0] == PS_PULL || h[0] == PS_PUSH || h[0] == PS_DELTA))
        ok = h[1] >= 0 && h[1] < ps->n_tables && h[2] >= 0 && h[2] <= ps->t[h[1]].rows * 64;
    if (ok) return OAR_OK;
    return oar_error(OAR_ERR_STATE, "ps_serve: worker rank %d sent a message this server cannot read (kind %lld, table "
                     "%lld of %d, %lld rows): do all ranks declare the same tables in the same order?",
                     ps->servers + worker, (long long)h[0], (long long)h[1], ps->n_tables, (long long)h[2]);
}

static oar_status post(ps_peer *p, int rank) {
    p->recv = oar_dist_recv(p->header, rank, PS_TAG_HEADER);
    return p->recv ? OAR_OK : oar_last_status();
}

/* Answers a pull: the rows, from this server's shard. */
static oar_status reply_rows(oar_ps *ps, int rank, int table, const int64_t *ids, int64_t n) {
    const ps_table *t = &ps->t[table];
    oar_status st = OAR_OK;
    oar_scope_begin();
    oar_tensor *out = oar_empty((int64_t[]){n * t->dim}, 1, OAR_F32);
    if (!out) st = oar_last_status();
    const float *p = st == OAR_OK ? oar_data(t->param) : NULL;
    for (int64_t i = 0; st == OAR_OK && i < n; i++) {
        if (ps_server_of(ps, ids[i]) != ps->rank)
            st = oar_error(OAR_ERR_STATE, "ps_serve: row %lld of '%s' lives on server %d, not %d", (long long)ids[i],
                           t->name, ps_server_of(ps, ids[i]), ps->rank);
        else
            memcpy((float *)oar_data(out) + i * t->dim, p + ps_local_index(ps, ids[i]) * t->dim,
                   sizeof(float) * (size_t)t->dim);
    }
    if (st == OAR_OK) st = oar_dist_wait(oar_dist_send(out, rank, PS_TAG_REPLY));
    oar_scope_end();
    return st;
}

/* Pushed gradients add into the table's gathered gradient (ids become local row numbers in
 * place); deltas (GEO) into the rows. */
static void gather(oar_ps *ps, ps_table *t, int64_t *ids, const float *v, int64_t n, bool into_rows) {
    for (int64_t i = 0; i < n; i++) ids[i] = ps_local_index(ps, ids[i]);
    if (!into_rows) {
        ps_gather(t, ids, v, n);
        return;
    }
    float *dst = oar_data(t->param);
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < t->dim; k++) dst[ids[i] * t->dim + k] += v[i * t->dim + k];
}

static oar_status handle(oar_ps *ps, ps_peer *peers, int w, int *done_step, int *finished) {
    ps_peer *p = &peers[w];
    int rank = ps->servers + w;
    int64_t h[4];
    memcpy(h, oar_data(p->header), sizeof h);
    oar_status st = check_header(ps, w, h);
    if (st != OAR_OK) return st;
    int64_t n = h[2];
    ps_table *t = h[0] == PS_PULL || h[0] == PS_PUSH || h[0] == PS_DELTA ? &ps->t[h[1]] : NULL;
    int64_t *ids = t ? malloc(sizeof(int64_t) * (size_t)(n ? n : 1)) : NULL;
    float *vals = t && h[0] != PS_PULL ? malloc(sizeof(float) * (size_t)((n ? n : 1) * t->dim)) : NULL;
    if (t && (!ids || (h[0] != PS_PULL && !vals))) st = oar_error(OAR_ERR_OOM, "ps_serve: out of memory");
    if (st == OAR_OK && t) st = ps_recv_payload(rank, n, ids, vals, t->dim);
    switch (st == OAR_OK ? (ps_kind)h[0] : (ps_kind)0) {
    case PS_PULL:
        if (ps->o.mode == OAR_PS_SYNC && h[3] > ps->step) { /* wait for the update of step h[3] - 1 */
            p->held_table = h[1], p->held_n = n, p->held_ids = ids;
            ids = NULL;
        } else {
            st = reply_rows(ps, rank, (int)h[1], ids, n);
        }
        break;
    case PS_PUSH:
        if (ps->o.mode == OAR_PS_SYNC) {
            ps_held_push *hp = malloc(sizeof *hp);
            if (!hp) {
                st = oar_error(OAR_ERR_OOM, "ps_serve: out of memory");
                break;
            }
            *hp = (ps_held_push){(int)h[1], n, ids, vals, NULL};
            ids = NULL, vals = NULL;
            if (!p->last_push) p->last_push = &p->pushes;
            *p->last_push = hp;
            p->last_push = &hp->next;
        } else {
            gather(ps, t, ids, vals, n, false);
            st = ps_apply(t, 1.0);
        }
        break;
    case PS_DELTA: gather(ps, t, ids, vals, n, true); break;
    case PS_STEP_DONE:
        if (++*done_step < ps->workers) break;
        /* every worker ended the step: apply the average, then answer the held pulls */
        *done_step = 0;
        for (int k = 0; k < ps->workers; k++) {
            for (ps_held_push *hp = peers[k].pushes, *next; hp; hp = next) {
                next = hp->next;
                gather(ps, &ps->t[hp->table], hp->ids, hp->values, hp->n, false);
                free(hp->ids), free(hp->values), free(hp);
            }
            peers[k].pushes = NULL;
            peers[k].last_push = &peers[k].pushes;
        }
        for (int i = 0; st == OAR_OK && i < ps->n_tables; i++) st = ps_apply(&ps->t[i], 1.0 / ps->workers);
        ps->step++;
        for (int k = 0; st == OAR_OK && k < ps->workers; k++) {
            if (!peers[k].held_ids) continue;
            st = reply_rows(ps, ps->servers + k, (int)peers[k].held_table, peers[k].held_ids, peers[k].held_n);
            free(peers[k].held_ids);
            peers[k].held_ids = NULL;
        }
        break;
    case PS_FINISH: ++*finished; break;
    default: break;
    }
    free(ids);
    free(vals);
    if (st == OAR_OK && h[0] != PS_FINISH) st = post(p, rank);
    return st;
}

oar_status oar_ps_serve(oar_ps *ps) {
    if (!ps) return oar_error(OAR_ERR_INVALID_ARG, "ps_serve: expected a parameter server, got NULL");
    if (!oar_ps_is_server(ps))
        return oar_error(OAR_ERR_STATE, "ps_serve: rank %d is a worker (ranks %d.. work); only servers serve", ps->rank,
                         ps->servers);
    ps_peer *peers = calloc((size_t)ps->workers, sizeof *peers);
    oar_status st = peers ? OAR_OK : oar_error(OAR_ERR_OOM, "ps_serve: out of memory");
    oar_scope_begin();
    for (int w = 0; st == OAR_OK && w < ps->workers; w++) {
        peers[w].header = oar_empty((int64_t[]){4}, 1, OAR_I64);
        st = peers[w].header ? post(&peers[w], ps->servers + w) : oar_last_status();
    }
    int done_step = 0, finished = 0;
    while (st == OAR_OK && finished < ps->workers) {
        bool any = false;
        for (int w = 0; st == OAR_OK && w < ps->workers; w++) {
            if (!peers[w].recv || !oar_dist_test(peers[w].recv)) continue;
            any = true;
            st = oar_dist_wait(peers[w].recv);
            peers[w].recv = NULL;
            if (st == OAR_OK) st = handle(ps, peers, w, &done_step, &finished);
        }
        if (st != OAR_OK || any) continue;
        char why[64];
        int dead = oar_dist_dead_rank();
        if (dead >= 0) {
            snprintf(why, sizeof why, "rank %d", dead);
            st = oar_error(OAR_ERR_STATE, "ps_serve: %s died (it stopped answering the liveness channel); the "
                           "server stops", why);
            break;
        }
        nanosleep(&(struct timespec){0, 50000}, NULL); /* nothing arrived: poll again in 50 us */
    }
    for (int w = 0; peers && w < ps->workers; w++) {
        free(peers[w].held_ids);
        for (ps_held_push *hp = peers[w].pushes, *next; hp; hp = next) {
            next = hp->next;
            free(hp->ids), free(hp->values), free(hp);
        }
    }
    oar_scope_end();
    free(peers);
    if (st != OAR_OK) oar_error_prefix("ps_serve (rank %d)", ps->rank);
    return st;
}
