/* The parameter server's setup (include/oar/ps.h): roles, tables and their shards, the update
 * and the message helpers. An update runs oar's fused optimizer kernel on the rows the gathered
 * gradient touches only (ps_rows.h), so it costs O(rows pushed), not O(shard). In a one-rank
 * world the rank holds the tables itself and applies each step's gradient at step_done: plain
 * training through the same code, the reference a sync job is compared with. */
#include "dist/ps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

oar_ps *oar_ps_new(const oar_ps_opts *opts) {
    oar_ps *ps = OAR_NEW(oar_ps);
    if (!ps) return NULL;
    ps->o = opts ? *opts : (oar_ps_opts){0};
    if (!opts || (!opts->optim.lr && opts->optim.kind == OAR_OPTIM_SGD && !opts->optim.explicit_values)) {
        ps->o.optim = oar_optim_defaults(OAR_OPTIM_SGD);
        ps->o.optim.lr = opts && opts->optim.lr ? opts->optim.lr : 0.01;
    }
    if (!ps->o.servers) ps->o.servers = 1;
    if (!ps->o.geo_k) ps->o.geo_k = 10;
    ps->rank = oar_dist_rank();
    ps->size = oar_dist_world_size();
    ps->servers = ps->o.servers;
    ps->workers = ps->size - ps->servers;
    if (ps->size == 1 && ps->o.servers == 1) ps->in_process = true, ps->servers = 0, ps->workers = 1;
    if ((ps->servers < 1 && !ps->in_process) || ps->workers < 1 || ps->o.geo_k < 1 || ps->o.mode < OAR_PS_SYNC || ps->o.mode > OAR_PS_GEO) {
        oar_error(OAR_ERR_INVALID_ARG,
                  "ps_new: expected 1 <= servers < world size (%d ranks: at least one worker), geo_k >= 1 and a mode "
                  "sync, async or geo, got servers %d, geo_k %d, mode %d%s",
                  ps->size, ps->o.servers, ps->o.geo_k, (int)ps->o.mode,
                  ps->size <= ps->o.servers ? " (start the job with oar launch --nproc N, N > servers)" : "");
        free(ps);
        return NULL;
    }
    return ps;
}

void oar_ps_free(oar_ps *ps) {
    if (!ps) return;
    for (int i = 0; i < ps->n_tables; i++) {
        ps_table *t = &ps->t[i];
        ps_rows_free(&t->opt);
        oar_release(t->param);
        oar_release(t->grad);
        oar_release(t->base);
        free(t->dirty);
    }
    free(ps);
}

bool oar_ps_is_server(const oar_ps *ps) { return ps && ps->rank < ps->servers; }
int oar_ps_num_workers(const oar_ps *ps) { return ps ? ps->workers : 0; }
int oar_ps_worker_index(const oar_ps *ps) { return ps && ps->rank >= ps->servers ? ps->rank - ps->servers : -1; }

/* A table's state on this rank: a server's shard (rows r with r % servers == rank), a GEO
 * worker's whole copy; other workers hold nothing. */
int oar_ps_add_table(oar_ps *ps, const char *name, oar_tensor *init) {
    if (!ps || !init) {
        oar_error(OAR_ERR_INVALID_ARG, "ps_add_table: expected a parameter server and an initial value, got NULL");
        return -1;
    }
    if (!OAR_HANDLE_OK(init)) {
        oar_handle_error("ps_add_table", "init", -1, init);
        return -1;
    }
    if (init->dtype != OAR_F32 || init->ndim != 2 || init->device != OAR_CPU) {
        char s[96];
        oar_format_shape(init->shape, init->ndim, s, sizeof s);
        oar_error(OAR_ERR_SHAPE, "ps_add_table '%s': expected an f32 [rows, dim] table on the CPU, got %s %s",
                  name ? name : "", oar_dtype_name(init->dtype), s);
        return -1;
    }
    if (ps->n_tables == PS_MAX_TABLES) {
        oar_error(OAR_ERR_INVALID_ARG, "ps_add_table: at most %d tables", PS_MAX_TABLES);
        return -1;
    }
    ps_table *t = &ps->t[ps->n_tables];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name ? name : "");
    t->rows = init->shape[0];
    t->dim = init->shape[1];
    bool server = oar_ps_is_server(ps) || ps->in_process, geo = ps->o.mode == OAR_PS_GEO && !ps->in_process;
    if (!server && !geo) return ps->n_tables++;
    oar_status st = OAR_OK;
    void *caller_scope = oar_scope_suspend(); /* the state is the PS's, whatever scope the caller is in */
    oar_scope_begin();
    oar_tensor *full = oar_contiguous(init);
    if (ps->in_process) {
        t->param = oar_keep(oar_clone(full));
    } else if (server) {
        /* the shard: rows rank, rank + servers, ... */
        oar_tensor *idx = oar_arange((double)ps->rank, (double)t->rows, (double)ps->servers, OAR_I64);
        t->param = oar_keep(oar_clone(oar_index_select(full, 0, idx)));
    } else {
        t->param = oar_keep(oar_clone(full));
        t->base = oar_keep(oar_clone(full));
        t->dirty = calloc((size_t)(t->rows ? t->rows : 1), 1);
        if (!t->dirty) st = oar_error(OAR_ERR_OOM, "ps_add_table: out of memory");
    }
    if (t->param) t->grad = oar_keep(oar_zeros(t->param->shape, 2, OAR_F32));
    oar_scope_end();
    oar_scope_resume(caller_scope);
    if (st == OAR_OK && (!t->param || !t->grad || (geo && !server && !t->base))) st = oar_last_status();
    if (st == OAR_OK && !t->param) st = oar_last_status();
    if (st == OAR_OK) st = ps_rows_init(&t->opt, &ps->o.optim, t->param->shape[0], t->dim, t->name);
    if (st != OAR_OK) {
        oar_error_prefix("ps_add_table");
        ps_rows_free(&t->opt);
        oar_release(t->param), oar_release(t->grad), oar_release(t->base);
        free(t->dirty);
        memset(t, 0, sizeof *t);
        return -1;
    }
    return ps->n_tables++;
}

void ps_gather(ps_table *t, const int64_t *local_ids, const float *v, int64_t n) {
    float *dst = oar_data(t->grad);
    for (int64_t i = 0; i < n; i++) {
        float *row = dst + local_ids[i] * t->dim;
        for (int64_t k = 0; k < t->dim; k++) row[k] += v[i * t->dim + k];
        ps_rows_touch(&t->opt, local_ids[i]);
    }
}

oar_status ps_apply(ps_table *t, double scale) {
    return ps_rows_apply(&t->opt, oar_data(t->param), oar_data(t->grad), scale);
}

oar_status ps_send(int peer, ps_kind kind, int table, int64_t n, int64_t step, const int64_t *ids,
                   const float *values, int64_t dim) {
    int64_t h[4] = {kind, table, n, step};
    oar_status st = OAR_OK;
    oar_scope_begin();
    oar_tensor *ht = oar_from_data(h, (int64_t[]){4}, 1, OAR_I64);
    oar_tensor *it = ids && n ? oar_from_data(ids, (int64_t[]){n}, 1, OAR_I64) : NULL;
    oar_tensor *vt = values && n ? oar_from_data(values, (int64_t[]){n * dim}, 1, OAR_F32) : NULL;
    oar_dist_work *w[3] = {ht ? oar_dist_send(ht, peer, PS_TAG_HEADER) : NULL, it ? oar_dist_send(it, peer, PS_TAG_IDS) : NULL,
                           vt ? oar_dist_send(vt, peer, PS_TAG_VALUES) : NULL};
    if (!ht || (ids && n && !it) || (values && n && !vt)) st = oar_last_status();
    for (int k = 0; k < 3; k++) {
        oar_status s = w[k] ? oar_dist_wait(w[k]) : OAR_OK;
        if (st == OAR_OK) st = s;
    }
    oar_scope_end();
    return st;
}

oar_status ps_recv_payload(int peer, int64_t n, int64_t *ids, float *values, int64_t dim) {
    if (n == 0) return OAR_OK;
    oar_status st = OAR_OK;
    oar_scope_begin();
    oar_tensor *it = oar_empty((int64_t[]){n}, 1, OAR_I64);
    oar_tensor *vt = values ? oar_empty((int64_t[]){n * dim}, 1, OAR_F32) : NULL;
    if (!it || (values && !vt)) st = oar_last_status();
    if (st == OAR_OK) st = oar_dist_wait(oar_dist_recv(it, peer, PS_TAG_IDS));
    if (st == OAR_OK && vt) st = oar_dist_wait(oar_dist_recv(vt, peer, PS_TAG_VALUES));
    if (st == OAR_OK) {
        memcpy(ids, oar_data(it), sizeof(int64_t) * (size_t)n);
        if (vt) memcpy(values, oar_data(vt), sizeof(float) * (size_t)(n * dim));
    }
    oar_scope_end();
    return st;
}
