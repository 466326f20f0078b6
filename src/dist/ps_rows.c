/* The row-restricted update of a parameter-server table (ps_rows.h). */
#include "dist/ps_rows.h"

#include <stdlib.h>
#include <string.h>

oar_status ps_rows_init(ps_rows *r, const oar_optim_opts *in, int64_t rows, int64_t dim, const char *table) {
    memset(r, 0, sizeof *r);
    oar_status st = oar_optim_resolve(in, &r->o, true);
    if (st != OAR_OK) return st;
    if (r->o.kind == OAR_OPTIM_LAMB)
        return oar_error(OAR_ERR_INVALID_ARG, "ps table '%s': LAMB cannot update a table row by row (its trust ratio "
                         "is a norm over the whole table); use SGD, Adam, AdamW, RMSprop or Adagrad", table);
    if (r->o.kind > OAR_OPTIM_LAMB) /* their scalar state (ASGD's eta, NAdam's mu_product) is per tensor */
        return oar_error(OAR_ERR_UNSUPPORTED, "ps table '%s': %s is not offered for parameter-server tables; use SGD, "
                         "Adam, AdamW, RMSprop or Adagrad", table, oar_optim_kind_name(r->o.kind));
    r->rows = rows, r->dim = dim;
    size_t cells = (size_t)(rows ? rows : 1) * (size_t)dim;
    bool ok = (r->touched = calloc((size_t)(rows ? rows : 1), 1)) && (r->list = malloc(sizeof(int64_t) * (size_t)(rows ? rows : 1)));
    for (int s = 1; ok && s < OAR_SLOT_COUNT; s++) { /* OAR_SLOT_STEP is t */
        if (!oar_optim_slot_used(&r->o, (oar_slot)s)) continue;
        /* written now, not calloc'ed: the pages are mapped here rather than one by one, at a
         * page fault each, inside the updates that first touch their rows */
        ok = (r->slot[s] = malloc(sizeof(float) * (cells ? cells : 1))) != NULL;
        float v = s == OAR_SLOT_SUM ? (float)r->o.initial_accumulator : 0.0f;
        for (size_t i = 0; ok && i < cells; i++) r->slot[s][i] = v;
    }
    if (ok && r->slot[OAR_SLOT_MOMENTUM_BUFFER]) ok = (r->seen = calloc((size_t)(rows ? rows : 1), 1)) != NULL;
    if (!ok) {
        ps_rows_free(r);
        return oar_error(OAR_ERR_OOM, "ps table '%s': out of memory for the optimizer state of %lld x %lld", table,
                         (long long)rows, (long long)dim);
    }
    return OAR_OK;
}

void ps_rows_free(ps_rows *r) {
    for (int s = 0; s < OAR_SLOT_COUNT; s++) free(r->slot[s]);
    free(r->seen), free(r->touched), free(r->list), free(r->scratch);
    memset(r, 0, sizeof *r);
}

/* The used slots, in order; returns how many. */
static int used_slots(const ps_rows *r, int *which) {
    int n = 0;
    for (int s = 1; s < OAR_SLOT_COUNT; s++)
        if (r->slot[s]) which[n++] = s;
    return n;
}

/* One fused update over rows[0..m) (fresh: SGD's momentum buffers are filled by it). */
static void update_rows(ps_rows *r, float *param, const float *grad, double scale, const int64_t *rows, int64_t m,
                        bool fresh) {
    if (!m) return;
    int which[OAR_SLOT_COUNT], ns = used_slots(r, which);
    int64_t d = r->dim, n = m * d;
    float *p = r->scratch, *g = p + n, *s[OAR_SLOT_COUNT];
    for (int k = 0; k < ns; k++) s[k] = g + (k + 1) * n;
    size_t row_bytes = sizeof(float) * (size_t)d;
    for (int64_t i = 0; i < m; i++) {
        int64_t at = rows[i] * d;
        memcpy(p + i * d, param + at, row_bytes);
        for (int64_t j = 0; j < d; j++) g[i * d + j] = scale == 1 ? grad[at + j] : (float)(grad[at + j] * scale);
        for (int k = 0; k < ns; k++) memcpy(s[k] + i * d, r->slot[which[k]] + at, row_bytes);
    }
    oar_optim_update u = {.o = &r->o, .n = n, .p = p, .g = g, .t = r->t, .fresh_momentum = fresh};
    for (int k = 0; k < ns; k++) u.s[which[k]] = s[k];
    oar_optim_update_f32(&u);
    for (int64_t i = 0; i < m; i++) {
        int64_t at = rows[i] * d;
        memcpy(param + at, p + i * d, row_bytes);
        for (int k = 0; k < ns; k++) memcpy(r->slot[which[k]] + at, s[k] + i * d, row_bytes);
    }
}

oar_status ps_rows_apply(ps_rows *r, float *param, float *grad, double scale) {
    int64_t m = r->n_touched;
    r->t++; /* a step of the table, touched or not: every shard of a sync job counts the same t */
    if (!m) return OAR_OK;
    int which[OAR_SLOT_COUNT];
    int64_t need = m * (2 + used_slots(r, which));
    if (r->scratch_rows < need) {
        float *b = realloc(r->scratch, sizeof(float) * (size_t)need * (size_t)r->dim);
        if (!b) return oar_error(OAR_ERR_OOM, "ps update: out of memory for %lld rows", (long long)m);
        r->scratch = b, r->scratch_rows = need;
    }
    if (r->seen) { /* SGD with momentum: rows seen before first, then the fresh ones (list reordered) */
        int64_t k = 0;
        for (int64_t i = 0; i < m; i++)
            if (r->seen[r->list[i]]) {
                int64_t x = r->list[k];
                r->list[k++] = r->list[i], r->list[i] = x;
            }
        update_rows(r, param, grad, scale, r->list, k, false);
        update_rows(r, param, grad, scale, r->list + k, m - k, true);
        for (int64_t i = k; i < m; i++) r->seen[r->list[i]] = 1;
    } else {
        update_rows(r, param, grad, scale, r->list, m, false);
    }
    for (int64_t i = 0; i < m; i++) {
        memset(grad + r->list[i] * r->dim, 0, sizeof(float) * (size_t)r->dim);
        r->touched[r->list[i]] = 0;
    }
    r->n_touched = 0;
    return OAR_OK;
}
