/* A synthetic click log with a planted logistic ground truth (see include/oar/sparse.h): a CTR
 * workload whose best achievable AUC is known, because the probability behind every label is.
 * Nothing is stored but the per-field Zipf tables: entry j's field values, the truth's weights
 * of the values it holds and its label are all drawn on demand from counters keyed by the
 * seed, so the log is the same on every worker, in every epoch and in any order. */
#include "data/data.h"

#include <math.h>
#include <stdlib.h>

#define CLICKS_MAX_FIELDS 26
#define CLICKS_MAX_RANK 15 /* draws: slot 0 the weight, 1..rank the embedding */

typedef struct clicks_dataset {
    oar_dataset base;
    oar_clicks_opts o;
    int64_t card[CLICKS_MAX_FIELDS], first_id[CLICKS_MAX_FIELDS], n_ids;
    double *zipf_cdf[CLICKS_MAX_FIELDS];
    uint64_t value_key, weight_key, label_key;
    double scale_a, scale_e;
} clicks_dataset;

/* A standard normal from two counter draws (Box-Muller). */
static double normal(uint64_t key, int64_t i, int slot) {
    double u1 = ((double)oar_data_draw(key, i, slot, 0, 1ull << 53) + 0.5) / 9007199254740992.0;
    double u2 = (double)oar_data_draw(key, i, slot, 1, 1ull << 53) / 9007199254740992.0;
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Entry j's value of field f, a rank drawn from the field's Zipf distribution. */
static int64_t field_value(const clicks_dataset *c, int64_t j, int f) {
    double u = (double)oar_data_draw(c->value_key, j, f / 2, f % 2, 1ull << 53) / 9007199254740992.0;
    const double *cdf = c->zipf_cdf[f];
    int64_t lo = 0, hi = c->card[f] - 1;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (cdf[mid] > u) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* The truth's logit of entry j (its global ids in ids): bias + the values' weights + every
 * pair of fields' rank-r interaction. */
static double truth_logit(const clicks_dataset *c, const int64_t *ids) {
    int F = (int)c->o.fields, r = (int)c->o.rank;
    double logit = c->o.bias, e[CLICKS_MAX_FIELDS][CLICKS_MAX_RANK];
    for (int f = 0; f < F; f++) {
        logit += c->scale_a * normal(c->weight_key, ids[f], 0);
        for (int k = 0; k < r; k++) e[f][k] = c->scale_e * normal(c->weight_key, ids[f], 1 + k);
    }
    for (int f = 0; f < F; f++)
        for (int g = f + 1; g < F; g++)
            for (int k = 0; k < r; k++) logit += e[f][k] * e[g][k];
    return logit;
}

static void entry(const clicks_dataset *c, int64_t j, int64_t *ids) {
    for (int f = 0; f < c->o.fields; f++) ids[f] = c->first_id[f] + field_value(c, j, f);
}

static oar_status clicks_copy(const oar_dataset *d, int64_t i, uint64_t key, void *input, void *target) {
    (void)key; /* the log is fixed data: the loader's epoch draws nothing here */
    const clicks_dataset *c = (const clicks_dataset *)d;
    int64_t j = c->o.offset + i, *ids = input;
    entry(c, j, ids);
    double p = 1 / (1 + exp(-truth_logit(c, ids)));
    *(float *)target = oar_data_uniform(c->label_key, j, 0) < p ? 1.0f : 0.0f;
    return OAR_OK;
}

static void clicks_destroy(oar_dataset *d) {
    clicks_dataset *c = (clicks_dataset *)d;
    for (int f = 0; f < CLICKS_MAX_FIELDS; f++) free(c->zipf_cdf[f]);
    free(c);
}

static const oar_dataset_vt clicks_vt = {clicks_copy, clicks_destroy};

static oar_status resolve(const oar_clicks_opts *in, oar_clicks_opts *o) {
    *o = in ? *in : (oar_clicks_opts){0};
    if (!o->fields) o->fields = 8;
    if (!o->max_cardinality) o->max_cardinality = 100000;
    if (!o->size) o->size = 1000000;
    if (!o->rank) o->rank = 4;
    if (o->zipf == 0) o->zipf = 1.1;
    if (o->bias == 0) o->bias = -1.0;
    if (o->fields < 1 || o->fields > CLICKS_MAX_FIELDS || o->max_cardinality < 2 || o->size < 1 || o->offset < 0 ||
        o->rank < 1 || o->rank > CLICKS_MAX_RANK || !(o->zipf > 0) || !isfinite(o->bias))
        return oar_error(OAR_ERR_INVALID_ARG,
                         "dataset_clicks: expected 1 <= fields <= %d, max_cardinality >= 2, size >= 1, offset >= 0, "
                         "1 <= rank <= %d, zipf > 0 and a finite bias, got fields %lld, max_cardinality %lld, size "
                         "%lld, offset %lld, rank %lld, zipf %g, bias %g",
                         CLICKS_MAX_FIELDS, CLICKS_MAX_RANK, (long long)o->fields, (long long)o->max_cardinality,
                         (long long)o->size, (long long)o->offset, (long long)o->rank, o->zipf, o->bias);
    return OAR_OK;
}

oar_dataset *oar_dataset_clicks(const oar_clicks_opts *opts) {
    oar_clicks_opts o;
    if (resolve(opts, &o) != OAR_OK) return NULL;
    clicks_dataset *c = OAR_NEW(clicks_dataset);
    if (!c) return NULL;
    c->o = o;
    oar_status st = OAR_OK;
    for (int f = 0; f < o.fields && st == OAR_OK; f++) {
        /* cardinalities spread geometrically from a few values up to max_cardinality */
        double card = pow((double)o.max_cardinality, (double)(f + 1) / (double)o.fields);
        c->card[f] = card < 2 ? 2 : (int64_t)llround(card);
        c->first_id[f] = c->n_ids;
        c->n_ids += c->card[f];
        if (!(c->zipf_cdf[f] = malloc(sizeof(double) * (size_t)c->card[f]))) {
            st = oar_error(OAR_ERR_OOM, "dataset_clicks: out of memory for field %d's %lld values", f,
                           (long long)c->card[f]);
            break;
        }
        double acc = 0;
        for (int64_t v = 0; v < c->card[f]; v++) c->zipf_cdf[f][v] = acc += pow((double)(v + 1), -o.zipf);
        for (int64_t v = 0; v < c->card[f]; v++) c->zipf_cdf[f][v] /= acc;
        c->zipf_cdf[f][c->card[f] - 1] = 1.0;
    }
    oar_epoch_keys k1 = oar_data_epoch_keys(o.seed, 1), k2 = oar_data_epoch_keys(o.seed, 2);
    c->value_key = k1.sample;
    c->weight_key = k1.shuffle;
    c->label_key = k2.sample;
    /* value weights of spread 0.6 and pair interactions adding up to a logit spread of about 0.8 */
    double pairs = (double)o.fields * (double)(o.fields - 1) / 2;
    c->scale_a = 0.6;
    c->scale_e = pairs > 0 ? pow(0.64 / (pairs * (double)o.rank), 0.25) : 0;
    int64_t in_shape[1] = {o.fields}, tgt_shape[1] = {1};
    if (st == OAR_OK)
        st = oar_dataset_init(&c->base, &clicks_vt, o.size, OAR_I64, in_shape, 1, OAR_F32, tgt_shape, 1);
    if (st != OAR_OK) {
        clicks_destroy(&c->base);
        return NULL;
    }
    return &c->base;
}

static const clicks_dataset *as_clicks(const oar_dataset *d) {
    return d && d->vt == &clicks_vt ? (const clicks_dataset *)d : NULL;
}

int64_t oar_clicks_num_ids(const oar_dataset *d) {
    const clicks_dataset *c = as_clicks(d);
    return c ? c->n_ids : 0;
}

double oar_clicks_probability(const oar_dataset *d, int64_t i) {
    const clicks_dataset *c = as_clicks(d);
    if (!c || i < 0 || i >= c->o.size) return NAN;
    int64_t ids[CLICKS_MAX_FIELDS];
    entry(c, c->o.offset + i, ids);
    return 1 / (1 + exp(-truth_logit(c, ids)));
}
