/* Trains a wide & deep click-through-rate model on a synthetic click log whose truth is known
 * (oar_dataset_clicks), eagerly, and compares its test AUC with the best any model can reach
 * (the AUC of the truth's own probabilities). The sparse-embedding workload a parameter server
 * trains; here in one process. Needs no data files.
 *
 *   example_wide_deep [--steps N] [--batch B] [--lr X] [--seed S]
 * Exits 1 when the test AUC is not within 0.05 of the best (given enough steps). */
#include "oar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EMB_DIM 8

/* wide: one weight per feature id, summed over the fields (a logistic regression on one-hot
 * features); deep: each field's id embedded, concatenated, through an MLP. Children: "wide"
 * [ids, 1], "deep_emb" [ids, EMB_DIM], "mlp". */
static oar_status wide_deep_forward(oar_module *self, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    oar_tensor *x = in[0]; /* i64 [B, F] */
    int64_t b = oar_shape(x)[0], f = oar_shape(x)[1];
    int dims[2] = {1, 2};
    oar_tensor *wide = oar_sum(oar_forward(oar_module_child(self, "wide"), x), dims, 2, false); /* [B] */
    oar_tensor *emb = oar_forward(oar_module_child(self, "deep_emb"), x);                      /* [B, F, D] */
    oar_tensor *deep = oar_forward(oar_module_child(self, "mlp"), oar_reshape(emb, (int64_t[]){b, f * EMB_DIM}, 2));
    out[0] = oar_add(oar_reshape(wide, (int64_t[]){b, 1}, 2), deep); /* logits [B, 1] */
    return out[0] ? OAR_OK : oar_last_status();
}

static const oar_module_ops WIDE_DEEP = {"WideDeep", wide_deep_forward, NULL, NULL};

static oar_module *wide_deep_new(int64_t ids, int64_t fields) {
    oar_module *m = oar_module_new(&WIDE_DEEP, NULL);
    oar_module *wide = oar_nn_embedding(ids, 1), *emb = oar_nn_embedding(ids, EMB_DIM);
    oar_init_constant_(oar_module_get(wide, "weight"), 0.0);
    oar_init_normal_(oar_module_get(emb, "weight"), 0.0, 0.01);
    oar_module *layers[5] = {oar_nn_linear(fields * EMB_DIM, 64, true), oar_nn_activation(OAR_ACT_RELU, 0), oar_nn_linear(64, 32, true),
                             oar_nn_activation(OAR_ACT_RELU, 0), oar_nn_linear(32, 1, true)};
    oar_module_add_child(m, "wide", wide);
    oar_module_add_child(m, "deep_emb", emb);
    oar_module_add_child(m, "mlp", oar_nn_sequential(layers, 5));
    return m;
}

/* AUC of the model's scores over a whole split, in batches. */
static oar_status evaluate(oar_module *m, oar_dataset *d, double *auc) {
    oar_tensor *x = NULL, *y = NULL;
    oar_status st = oar_dataset_to_tensors(d, &x, &y);
    if (st != OAR_OK) return st;
    oar_module_train(m, false);
    bool g = oar_set_grad_enabled(false);
    oar_scope_begin();
    oar_tensor *scores = oar_forward(m, x);
    st = scores ? oar_auc(scores, y, auc) : oar_last_status();
    oar_scope_end();
    oar_set_grad_enabled(g);
    oar_module_train(m, true);
    oar_release(x);
    oar_release(y);
    return st;
}

int main(int argc, char **argv) {
    int64_t steps = 2000, batch = 256;
    double lr = 0.01;
    uint64_t seed = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--steps")) steps = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) batch = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--lr")) lr = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed")) seed = (uint64_t)atoll(argv[i + 1]);
        else {
            fprintf(stderr, "example_wide_deep: unknown flag %s; expected --steps --batch --lr --seed\n", argv[i]);
            return 2;
        }
    }
    oar_clicks_opts co = {.fields = 8, .max_cardinality = 20000, .size = 500000, .seed = 1};
    oar_dataset *train = oar_dataset_clicks(&co);
    co.offset = co.size;
    co.size = 20000;
    oar_dataset *test = oar_dataset_clicks(&co);
    if (!train || !test) {
        fprintf(stderr, "example_wide_deep: %s\n", oar_last_error());
        return 1;
    }
    int64_t ids = oar_clicks_num_ids(train);
    /* the best AUC: the truth's probabilities against the test labels */
    double *p = malloc(sizeof(double) * (size_t)co.size), best = 0, auc = 0;
    for (int64_t i = 0; i < co.size; i++) p[i] = oar_clicks_probability(test, i);
    oar_tensor *pt = oar_from_data(p, (int64_t[]){co.size}, 1, OAR_F64), *tx = NULL, *ty = NULL;
    oar_status st = oar_dataset_to_tensors(test, &tx, &ty);
    if (st == OAR_OK) st = oar_auc(pt, ty, &best);
    printf("wide & deep on a click log of %lld entries, %lld feature ids in 8 fields; Adam lr %g, batch %lld, %lld "
           "steps; best achievable test AUC %.4f\n",
           (long long)oar_dataset_size(train), (long long)ids, lr, (long long)batch, (long long)steps, best);
    oar_manual_seed(seed);
    oar_module *m = wide_deep_new(ids, 8);
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_ADAM);
    oo.lr = lr;
    oar_optimizer *opt = oar_optimizer_for(m, &oo);
    oar_loader_opts lo = {.batch_size = batch, .shuffle = true, .drop_last = true, .seed = seed};
    oar_loader *l = oar_loader_new(train, &lo);
    for (int64_t step = 0, epoch = 0; st == OAR_OK && step < steps; epoch++) {
        if ((st = oar_loader_start_epoch(l, epoch)) != OAR_OK) break;
        oar_tensor *x, *y;
        while (step < steps && oar_loader_next(l, &x, &y, &st)) {
            oar_scope_begin();
            oar_optimizer_zero_grad(opt);
            oar_tensor *loss = oar_bce_with_logits(oar_forward(m, x), y, OAR_REDUCE_MEAN);
            if (!loss) st = oar_last_status();
            if (st == OAR_OK) st = oar_backward(loss, NULL, false);
            if (st == OAR_OK) st = oar_optimizer_step(opt);
            oar_scope_end();
            oar_release(x);
            oar_release(y);
            if (st == OAR_OK && ++step % (steps / 3 > 0 ? steps / 3 : 1) == 0) {
                if ((st = evaluate(m, test, &auc)) == OAR_OK)
                    printf("  step %lld  test AUC %.4f (best %.4f)\n", (long long)step, auc, best);
            }
        }
    }
    if (st == OAR_OK) st = evaluate(m, test, &auc);
    int rc = 0;
    if (st != OAR_OK) {
        fprintf(stderr, "example_wide_deep: %s\n", oar_last_error());
        rc = 1;
    } else if (steps >= 2000 && auc < best - 0.05) {
        fprintf(stderr, "example_wide_deep: test AUC %.4f is more than 0.05 below the best %.4f\n", auc, best);
        rc = 1;
    }
    free(p);
    oar_release(pt), oar_release(tx), oar_release(ty);
    oar_loader_free(l);
    oar_optimizer_free(opt);
    oar_module_free(m);
    oar_dataset_free(train);
    oar_dataset_free(test);
    return rc;
}
