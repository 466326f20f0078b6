/* SyncBatchNorm: batch norm whose training statistics cover the global batch of every rank, so
 * N ranks at batch B normalize as one process at batch N*B does (PyTorch's SyncBatchNorm). The
 * statistics are two differentiable sums over the ranks (ops/collective.h, allreduce_sum):
 * the mean from the per-channel sums, then the biased variance from the sums of squared
 * deviations (two passes, as one process's kernel computes it, rather than E[x^2] - E[x]^2,
 * which cancels). Autograd carries the gradient through the sums: the gradient of a rank's
 * partial sum is the sum of every rank's gradient of the total, so each rank's backward gets
 * the other ranks' share of the statistics' gradient. Running statistics are updated as
 * oar_batch_norm does (unbiased variance over the global count), and evaluation uses them, so
 * a checkpoint is interchangeable with BatchNorm's (same names). Every rank must call forward
 * (and backward) together: each is a collective. In a compiled step the sums and the updates are
 * nodes of the program; the global count is read at tracing, so the program holds for the traced
 * batch sizes of every rank (a program is made per input shape). */
#include "dist/comm.h"
#include "ops/collective.h"
#include "ops/ema.h"
#include "ops/increment.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct sbn {
    int64_t features;
    double eps, momentum;
    const oar_dist_group *group; /* NULL: the world */
    int group_id;                /* the allreduce_sum ops' group; 0: the world */
} sbn;

static oar_tensor *per_channel(oar_tensor *t, int ndim) { /* [C] -> [1, C, 1, ...] */
    int64_t shape[OAR_MAX_DIMS];
    for (int d = 0; d < ndim; d++) shape[d] = d == 1 ? oar_numel(t) : 1;
    return oar_reshape(t, shape, ndim);
}

static oar_status sbn_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    const sbn *c = oar_module_state(m);
    if (n_in != 1 || n_out < 1 || !in[0])
        return oar_error(OAR_ERR_INVALID_ARG, "SyncBatchNorm: expected one input, got %d", n_in);
    oar_tensor *x = in[0];
    int nd = oar_ndim(x);
    if (nd < 2 || oar_shape(x)[1] != c->features || oar_dtype_of(x) != OAR_F32)
        return oar_error(OAR_ERR_SHAPE, "SyncBatchNorm: expected an f32 input of shape [N, %lld, ...] (num_features = "
                         "%lld), got %s with %d dims and %lld channels", (long long)c->features,
                         (long long)c->features, oar_dtype_name(oar_dtype_of(x)), nd,
                         (long long)(nd >= 2 ? oar_shape(x)[1] : 0));
    oar_tensor *w = oar_module_get(m, "weight"), *b = oar_module_get(m, "bias");
    oar_tensor *rm = oar_module_get(m, "running_mean"), *rv = oar_module_get(m, "running_var");
    if (!oar_module_is_training(m)) {
        out[0] = oar_batch_norm(x, w, b, rm, rv, false, 0.0, c->eps);
        return out[0] ? OAR_OK : oar_last_status();
    }
    int dims[OAR_MAX_DIMS], nr = 0;
    for (int d = 0; d < nd; d++)
        if (d != 1) dims[nr++] = d;
    /* the global count: every rank's batch may differ (a last, partial batch) */
    /* the group must still be alive (looked up by id: a freed group's pointer is not read) */
    if (c->group_id && !oar_dist_group_comm_by_id(c->group_id, "SyncBatchNorm")) return oar_last_status();
    oar_tensor *count = oar_scalar((double)(oar_numel(x) / c->features), OAR_F32);
    oar_status st = !count ? oar_last_status()
                    : oar_dist_group_size(c->group) > 1
                        ? oar_dist_wait(oar_dist_group_allreduce(c->group, count, OAR_DIST_SUM, true))
                        : OAR_OK;
    double n = 0;
    if (st == OAR_OK) st = oar_item(count, &n);
    if (st != OAR_OK) return st;
    if (n < 1) return oar_error(OAR_ERR_SHAPE, "SyncBatchNorm: expected a global batch with values, got 0 per channel");
    oar_tensor *mean = oar_mul_scalar(oar_allreduce_sum(oar_sum(x, dims, nr, true), 0, c->group_id), 1.0 / n);
    oar_tensor *dev = oar_sub(x, mean);
    oar_tensor *var = oar_mul_scalar(oar_allreduce_sum(oar_sum(oar_mul(dev, dev), dims, nr, true), 0, c->group_id), 1.0 / n);
    oar_tensor *y = oar_mul(dev, oar_rsqrt(oar_add_scalar(var, c->eps)));
    y = oar_add(oar_mul(y, per_channel(w, nd)), per_channel(b, nd));
    if (!y) return oar_last_status();
    /* running statistics, as oar_batch_norm updates them (unbiased variance, momentum m), and the
     * batch count, through ops that write in place: a compiled step repeats them at every run */
    oar_no_grad_begin();
    st = oar_ema_update_(rm, mean, c->momentum, 1.0);
    if (st == OAR_OK) st = oar_ema_update_(rv, var, c->momentum, n > 1 ? n / (n - 1) : 1.0);
    if (st == OAR_OK) st = oar_increment_(oar_module_get(m, "num_batches_tracked"));
    oar_no_grad_end();
    if (st != OAR_OK) return st;
    out[0] = y;
    return OAR_OK;
}

static int sbn_describe(const oar_module *m, char *buf, size_t size) {
    const sbn *c = oar_module_state(m);
    return snprintf(buf, size, "%lld, eps=%g, momentum=%g, ranks=%d", (long long)c->features, c->eps, c->momentum,
                    oar_dist_group_n_ranks(c->group));
}

static const oar_module_ops SYNC_BN = {"SyncBatchNorm", sbn_forward, free, sbn_describe};

oar_module *oar_dist_sync_batch_norm_group(int64_t features, double eps, double momentum, const oar_dist_group *g) {
    if (features < 1 || !(eps > 0) || !(momentum >= 0 && momentum <= 1))
        return oar_error(OAR_ERR_INVALID_ARG, "sync_batch_norm: expected features >= 1, eps > 0 and 0 <= momentum <= 1, "
                         "got %lld, %g, %g", (long long)features, eps, momentum), NULL;
    if (g && oar_dist_group_rank(g) < 0) /* Python's SyncBatchNorm refuses NON_GROUP_MEMBER alike */
        return oar_error(OAR_ERR_INVALID_ARG, "sync_batch_norm: rank %d is not a member of the process group (%d "
                         "ranks) it would synchronize over; build the layer with a group this rank belongs to",
                         oar_dist_rank(), oar_dist_group_n_ranks(g)), NULL;
    sbn *c = malloc(sizeof *c);
    if (!c) return oar_error(OAR_ERR_OOM, "sync_batch_norm: out of memory"), NULL;
    *c = (sbn){features, eps, momentum, g, oar_dist_group_id(g)};
    oar_module *m = oar_module_new(&SYNC_BN, c);
    if (!m) {
        free(c);
        return NULL;
    }
    oar_tensor *t[5] = {oar_ones(&features, 1, OAR_F32), oar_zeros(&features, 1, OAR_F32),
                        oar_zeros(&features, 1, OAR_F32), oar_ones(&features, 1, OAR_F32), oar_scalar(0, OAR_I64)};
    oar_status st = OAR_OK;
    for (int k = 0; k < 5; k++)
        if (!t[k]) st = oar_last_status();
    if (st == OAR_OK) st = oar_module_add_parameter(m, "weight", t[0]);
    if (st == OAR_OK) st = oar_module_add_parameter(m, "bias", t[1]);
    if (st == OAR_OK) st = oar_module_add_buffer(m, "running_mean", t[2]);
    if (st == OAR_OK) st = oar_module_add_buffer(m, "running_var", t[3]);
    if (st == OAR_OK) st = oar_module_add_buffer(m, "num_batches_tracked", t[4]);
    for (int k = 0; k < 5; k++) oar_release(t[k]);
    if (st != OAR_OK) {
        oar_module_free(m);
        return NULL;
    }
    return m;
}

oar_module *oar_dist_sync_batch_norm(int64_t features, double eps, double momentum) {
    return oar_dist_sync_batch_norm_group(features, eps, momentum, NULL);
}
