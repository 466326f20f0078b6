/* The parameter server's worker side (include/oar/ps.h): pulls and pushes split by the server
 * each row lives on; GEO keeps a local copy trained with the optimizer and exchanges the
 * changed rows every geo_k steps. */
#include "dist/ps.h"

#include <stdlib.h>
#include <string.h>

static oar_status check_worker(const oar_ps *ps, int table, const char *who) {
    if (!ps) return oar_error(OAR_ERR_INVALID_ARG, "%s: expected a parameter server, got NULL", who);
    if (oar_ps_is_server(ps))
        return oar_error(OAR_ERR_STATE, "%s: rank %d is a server (ranks 0..%d serve); only workers pull and push", who,
                         ps->rank, ps->servers - 1);
    if (table < -1 || table >= ps->n_tables)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected a table id in [0, %d), got %d", who, ps->n_tables, table);
    return OAR_OK;
}

/* The ids as host integers, checked against the table's rows. */
static int64_t *read_ids(const ps_table *t, oar_tensor *ids, int64_t *n, const char *who) {
    if (!ids || !OAR_HANDLE_OK(ids) || (ids->dtype != OAR_I64 && ids->dtype != OAR_I32) || ids->ndim != 1) {
        oar_error(OAR_ERR_DTYPE, "%s '%s': expected integer row ids of shape [n], got %s", who, t->name,
                  !ids ? "NULL" : !OAR_HANDLE_OK(ids) ? "a released tensor" : oar_dtype_name(ids->dtype));
        return NULL;
    }
    *n = ids->shape[0];
    int64_t *v = malloc(sizeof(int64_t) * (size_t)(*n ? *n : 1));
    if (!v || oar_copy_to_buffer(ids, v, sizeof(int64_t) * (size_t)*n, OAR_I64) != OAR_OK) {
        free(v);
        if (!v) oar_error(OAR_ERR_OOM, "%s: out of memory", who);
        return NULL;
    }
    for (int64_t i = 0; i < *n; i++)
        if (v[i] < 0 || v[i] >= t->rows) {
            oar_error(OAR_ERR_INVALID_ARG, "%s '%s': expected row ids in [0, %lld), got %lld at %lld", who, t->name,
                      (long long)t->rows, (long long)v[i], (long long)i);
            free(v);
            return NULL;
        }
    return v;
}

/* Rows of ids (n of them) from the servers into out [n, dim]: one request per server. */
static oar_status fetch(oar_ps *ps, int table, const int64_t *ids, int64_t n, float *out) {
    const ps_table *t = &ps->t[table];
    int64_t *sel = malloc(sizeof(int64_t) * (size_t)(n ? n : 1) * 2), *pos = sel + n;
    float *rows = malloc(sizeof(float) * (size_t)((n ? n : 1) * t->dim));
    oar_status st = sel && rows ? OAR_OK : oar_error(OAR_ERR_OOM, "ps_pull: out of memory");
    for (int s = 0; st == OAR_OK && s < ps->servers; s++) {
        int64_t m = 0;
        for (int64_t i = 0; i < n; i++)
            if (ps_server_of(ps, ids[i]) == s) sel[m] = ids[i], pos[m++] = i;
        if (!m) continue;
        st = ps_send(s, PS_PULL, table, m, ps->step, sel, NULL, 0);
        oar_scope_begin();
        oar_tensor *reply = st == OAR_OK ? oar_empty((int64_t[]){m * t->dim}, 1, OAR_F32) : NULL;
        if (st == OAR_OK && !reply) st = oar_last_status();
        if (st == OAR_OK) st = oar_dist_wait(oar_dist_recv(reply, s, PS_TAG_REPLY));
        if (st == OAR_OK) memcpy(rows, oar_data(reply), sizeof(float) * (size_t)(m * t->dim));
        oar_scope_end();
        for (int64_t k = 0; st == OAR_OK && k < m; k++)
            memcpy(out + pos[k] * t->dim, rows + k * t->dim, sizeof(float) * (size_t)t->dim);
    }
    free(sel);
    free(rows);
    return st;
}

oar_tensor *oar_ps_pull(oar_ps *ps, int table, oar_tensor *ids) {
    if (check_worker(ps, table, "ps_pull") != OAR_OK) return NULL;
    ps_table *t = &ps->t[table];
    int64_t n = 0, *v = read_ids(t, ids, &n, "ps_pull");
    if (!v) return NULL;
    oar_tensor *out = oar_empty((int64_t[]){n, t->dim}, 2, OAR_F32);
    oar_status st = out ? OAR_OK : oar_last_status();
    if (st == OAR_OK && (ps->o.mode == OAR_PS_GEO || ps->in_process)) { /* the local copy */
        const float *p = oar_data(t->param);
        float *o = oar_data(out);
        for (int64_t i = 0; i < n; i++) memcpy(o + i * t->dim, p + v[i] * t->dim, sizeof(float) * (size_t)t->dim);
    } else if (st == OAR_OK) {
        st = fetch(ps, table, v, n, oar_data(out));
    }
    free(v);
    if (st != OAR_OK) {
        oar_release(out);
        oar_error_prefix("ps_pull '%s'", t->name);
        return NULL;
    }
    return out;
}

oar_status oar_ps_push(oar_ps *ps, int table, oar_tensor *ids, oar_tensor *grads) {
    oar_status st = check_worker(ps, table, "ps_push");
    if (st != OAR_OK) return st;
    ps_table *t = &ps->t[table];
    int64_t n = 0, *v = read_ids(t, ids, &n, "ps_push");
    if (!v) return oar_last_status();
    if (!grads || !OAR_HANDLE_OK(grads) || grads->ndim != 2 || grads->shape[0] != n || grads->shape[1] != t->dim) {
        free(v);
        return oar_error(OAR_ERR_SHAPE, "ps_push '%s': expected gradients [%lld, %lld] (one row per id), got %s", t->name,
                         (long long)n, (long long)t->dim, grads && OAR_HANDLE_OK(grads) ? "another shape" : "none");
    }
    float *g = malloc(sizeof(float) * (size_t)((n ? n : 1) * t->dim));
    int64_t *sel = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    float *vals = malloc(sizeof(float) * (size_t)((n ? n : 1) * t->dim));
    if (!g || !sel || !vals) st = oar_error(OAR_ERR_OOM, "ps_push: out of memory");
    if (st == OAR_OK) st = oar_copy_to_buffer(grads, g, sizeof(float) * (size_t)(n * t->dim), OAR_F32);
    if (st == OAR_OK && ps->o.mode == OAR_PS_GEO && !ps->in_process) {
        /* a local step of the optimizer on the copy; the rows it changes go out at the exchange */
        ps_gather(t, v, g, n);
        for (int64_t i = 0; i < n; i++) t->dirty[v[i]] = 1;
        st = ps_apply(t, 1.0);
    } else if (st == OAR_OK && ps->in_process) { /* applied at step_done, as a sync server does */
        ps_gather(t, v, g, n);
    }
    for (int s = 0; st == OAR_OK && ps->o.mode != OAR_PS_GEO && s < ps->servers; s++) {
        int64_t m = 0;
        for (int64_t i = 0; i < n; i++)
            if (ps_server_of(ps, v[i]) == s) {
                sel[m] = v[i];
                memcpy(vals + m * t->dim, g + i * t->dim, sizeof(float) * (size_t)t->dim);
                m++;
            }
        if (m) st = ps_send(s, PS_PUSH, table, m, ps->step, sel, vals, t->dim);
    }
    free(v), free(g), free(sel), free(vals);
    if (st != OAR_OK) oar_error_prefix("ps_push '%s'", t->name);
    return st;
}

/* GEO: each table's changed rows go to their servers as (local - base) / workers, then come
 * back as the servers now hold them, into both the copy and its base. */
static oar_status exchange(oar_ps *ps) {
    oar_status st = OAR_OK;
    for (int ti = 0; st == OAR_OK && ti < ps->n_tables; ti++) {
        ps_table *t = &ps->t[ti];
        int64_t n = 0;
        for (int64_t r = 0; r < t->rows; r++) n += t->dirty[r];
        if (!n) continue;
        int64_t *ids = malloc(sizeof(int64_t) * (size_t)n);
        float *delta = malloc(sizeof(float) * (size_t)(n * t->dim));
        if (!ids || !delta) st = oar_error(OAR_ERR_OOM, "ps (geo): out of memory");
        float *p = oar_data(t->param), *b = oar_data(t->base);
        for (int s = 0; st == OAR_OK && s < ps->servers; s++) {
            int64_t m = 0;
            for (int64_t r = s; r < t->rows; r += ps->servers) {
                if (!t->dirty[r]) continue;
                ids[m] = r;
                for (int64_t k = 0; k < t->dim; k++)
                    delta[m * t->dim + k] = (p[r * t->dim + k] - b[r * t->dim + k]) / (float)ps->workers;
                m++;
            }
            if (m) st = ps_send(s, PS_DELTA, ti, m, ps->step, ids, delta, t->dim);
        }
        int64_t m = 0;
        for (int64_t r = 0; r < t->rows; r++)
            if (t->dirty[r]) ids[m++] = r;
        if (st == OAR_OK) st = fetch(ps, ti, ids, n, delta);
        for (int64_t k = 0; st == OAR_OK && k < n; k++) {
            memcpy(p + ids[k] * t->dim, delta + k * t->dim, sizeof(float) * (size_t)t->dim);
            memcpy(b + ids[k] * t->dim, delta + k * t->dim, sizeof(float) * (size_t)t->dim);
        }
        memset(t->dirty, 0, (size_t)t->rows);
        free(ids), free(delta);
    }
    return st;
}

oar_status oar_ps_step_done(oar_ps *ps) {
    oar_status st = check_worker(ps, -1, "ps_step_done");
    if (st != OAR_OK) return st;
    if (ps->in_process)
        for (int i = 0; st == OAR_OK && i < ps->n_tables; i++) st = ps_apply(&ps->t[i], 1.0);
    if (ps->o.mode == OAR_PS_SYNC)
        for (int s = 0; st == OAR_OK && s < ps->servers; s++) st = ps_send(s, PS_STEP_DONE, 0, 0, ps->step, NULL, NULL, 0);
    ps->step++;
    if (st == OAR_OK && ps->o.mode == OAR_PS_GEO && !ps->in_process && ps->step % ps->o.geo_k == 0) st = exchange(ps);
    return st;
}

oar_status oar_ps_finish(oar_ps *ps) {
    oar_status st = check_worker(ps, -1, "ps_finish");
    if (st == OAR_OK && ps->o.mode == OAR_PS_GEO && !ps->in_process) st = exchange(ps);
    for (int s = 0; st == OAR_OK && s < ps->servers; s++) st = ps_send(s, PS_FINISH, 0, 0, ps->step, NULL, NULL, 0);
    return st;
}
