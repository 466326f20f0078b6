/* `oar quantize --method qat`: the fine-tune. The model (a trained checkpoint, loaded by the
 * caller) is prepared for quantization-aware training (oar_qat_prepare) and trained for a short
 * schedule: SGD with momentum 0.9 under a cosine schedule from lr (by default a tenth of the
 * model's recipe rate, as a fine-tune from a converged model wants), the recipe's label
 * smoothing, eagerly or compiled (--mode static; the two give the same bits). */
#include "bench_util.h"
#include "cli.h"
#include "quantize_qat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct qat_step {
    oar_module *m;
    const train_data *d;
    oar_optimizer *opt;
    double label_smoothing;
} qat_step;

static oar_status step_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    qat_step *c = user;
    oar_optimizer_zero_grad(c->opt);
    oar_tensor *loss = train_loss(c->m, c->d, in[0], in[1], c->label_smoothing, NULL);
    oar_status st = loss ? oar_backward(loss, NULL, false) : oar_last_status();
    if (st == OAR_OK) st = oar_optimizer_step(c->opt);
    out[0] = loss;
    return st;
}

static oar_jit *compile(qat_step *c, oar_tensor *const *batch) {
    oar_input_spec specs[2];
    for (int i = 0; i < 2; i++) {
        specs[i] = (oar_input_spec){oar_dtype_of(batch[i]), oar_ndim(batch[i]), {0}, i ? "y" : "x"};
        memcpy(specs[i].shape, oar_shape(batch[i]), sizeof(int64_t) * (size_t)specs[i].ndim);
        specs[i].shape[0] = -1;
    }
    oar_jit_opts jo = {.specs = specs, .n_specs = 2, .module = c->m, .optimizer = c->opt};
    return oar_jit_to_static(step_fn, c, &jo);
}

/* --lsq: the input scales become LSQ parameters (oar_qat_learn_scales) in a group of their own;
 * the schedule goes on where it was (a new scheduler set to step t, every group's lr from the
 * closed form), and a compiled step is traced again (it binds the new parameters). */
static oar_status switch_to_lsq(oar_module *m, oar_optimizer *opt, oar_scheduler **sched, oar_jit **jit, double lr,
                                int64_t total, int64_t t) {
    int n = 0;
    oar_status st = oar_qat_learn_scales(m, &n);
    if (st != OAR_OK) return st;
    oar_tensor **ps = malloc(sizeof(oar_tensor *) * (size_t)(n + 1));
    if (!ps) return oar_set_error(OAR_ERR_OOM, "quantize: out of memory");
    int k = 0;
    for (int i = 0; i < oar_module_num_parameters(m) && k < n; i++) {
        const char *name;
        oar_tensor *p = oar_module_parameter(m, i, &name);
        size_t len = strlen(name);
        if (len >= 9 && !strcmp(name + len - 9, "act_scale")) ps[k++] = p;
    }
    oar_scheduler_free(*sched);
    *sched = NULL;
    oar_optimizer_group_opts(opt, 0)->lr = lr; /* the base rate, which the new scheduler reads */
    if (oar_optimizer_add_group(opt, ps, k, NULL) < 0) st = oar_last_status();
    free(ps);
    if (st == OAR_OK && !(*sched = oar_scheduler_new(opt, &(oar_sched_opts){.kind = OAR_SCHED_WARMUP_COSINE,
                                                                            .t_max = total})))
        st = oar_last_status();
    if (st == OAR_OK) st = oar_scheduler_set_state(*sched, &(oar_sched_state){.t = t});
    oar_jit_free(*jit);
    *jit = NULL;
    if (st == OAR_OK) printf("qat: step %lld: %d input scales learnable from here (LSQ)\n", (long long)t, n);
    return st;
}

oar_status quantize_qat_train(oar_module *m, const train_data *d, const train_opts *o, int epochs, double lr, bool lsq,
                              int64_t freeze_bn, int64_t *steps_done) {
    *steps_done = 0;
    bool compiled = o->mode && !strcmp(o->mode, "static");
    if (o->mode && !compiled && strcmp(o->mode, "eager") != 0)
        return oar_set_error(OAR_ERR_INVALID_ARG, "quantize: unknown --mode '%s'; expected eager or static", o->mode);
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = lr;
    oo.momentum = 0.9;
    oar_optimizer *opt = oar_optimizer_for(m, &oo);
    oar_loader_opts lo = {.batch_size = o->batch, .shuffle = true, .drop_last = true, .seed = o->seed + 1,
                          .workers = o->workers, .transforms = d->n_transforms ? &d->norm : NULL,
                          .n_transforms = d->n_transforms};
    oar_loader *loader = opt ? oar_loader_new(d->train, &lo) : NULL;
    oar_scheduler *sched = NULL;
    oar_jit *jit = NULL;
    oar_status st = loader ? OAR_OK : oar_last_status();
    int64_t per_epoch = loader ? oar_loader_num_batches(loader) : 0, total = per_epoch * epochs;
    if (o->steps_limit && o->steps_limit < total) total = o->steps_limit;
    if (st == OAR_OK && total < 1)
        st = oar_set_error(OAR_ERR_INVALID_ARG, "quantize: expected at least one QAT step, got %lld (%d epochs of "
                           "%lld)",
                       (long long)total, epochs, (long long)per_epoch);
    if (st == OAR_OK && !(sched = oar_scheduler_new(opt, &(oar_sched_opts){.kind = OAR_SCHED_WARMUP_COSINE,
                                                                          .t_max = total})))
        st = oar_last_status();
    printf("qat: fine-tuning %lld steps (%.2f epochs of %lld), batch %lld, sgd lr %g (cosine), %s\n",
           (long long)total, (double)total / (double)(per_epoch ? per_epoch : 1), (long long)per_epoch,
           (long long)o->batch, lr, compiled ? "compiled step" : "eager");
    qat_step c = {m, d, opt, o->label_smoothing};
    oar_module_train(m, true);
    double sum = 0, t0 = bench_now_s();
    int64_t since = 0, report = total / 10 ? total / 10 : 1;
    for (int64_t epoch = 0; st == OAR_OK && *steps_done < total; epoch++) {
        if ((st = oar_loader_start_epoch(loader, epoch)) != OAR_OK) break;
        oar_tensor *x, *y;
        while (*steps_done < total && oar_loader_next(loader, &x, &y, &st)) {
            oar_scope_begin();
            oar_tensor *io[2] = {x, y}, *loss = NULL;
            double lv = 0;
            if (lsq && *steps_done == (total / 10 ? total / 10 : 1)) /* averaged scales first, then learned */
                st = switch_to_lsq(m, opt, &sched, &jit, lr, total, *steps_done);
            if (st == OAR_OK && freeze_bn > 0 && *steps_done == freeze_bn) { /* BN statistics fixed from here */
                int nf = 0;
                if ((st = oar_qat_freeze_bn(m, &nf)) == OAR_OK)
                    printf("qat: step %lld: %d BatchNorm statistics frozen from here\n", (long long)*steps_done, nf);
                oar_jit_free(jit); /* the BN ops of a compiled step change: traced again */
                jit = NULL;
            }
            if (st == OAR_OK && compiled && !jit && !(jit = compile(&c, io))) st = oar_last_status();
            if (st == OAR_OK) st = jit ? oar_jit_call(jit, io, 2, &loss, 1) : step_fn(&c, io, 2, &loss, 1);
            if (st == OAR_OK && (st = oar_item(loss, &lv)) == OAR_OK) st = oar_scheduler_next(sched);
            oar_scope_end();
            oar_release(x);
            oar_release(y);
            if (st != OAR_OK) break;
            sum += lv;
            since++;
            if (++*steps_done % report == 0 || *steps_done == total) {
                printf("qat: step %lld/%lld  loss %.4f  %.0f samples/s\n", (long long)*steps_done, (long long)total,
                       sum / (double)since, (double)(*steps_done * o->batch) / (bench_now_s() - t0));
                fflush(stdout);
                sum = 0, since = 0;
            }
        }
    }
    if (st != OAR_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", oar_last_error());
        st = oar_set_error(st, "qat step %lld: %s", (long long)*steps_done + 1, msg);
    }
    oar_jit_free(jit);
    oar_scheduler_free(sched);
    oar_loader_free(loader);
    oar_optimizer_free(opt);
    return st;
}
