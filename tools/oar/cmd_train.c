/* `oar train`: trains a zoo model on real data, eagerly, with a live progress line, an
 * evaluation after each epoch, metrics as JSON lines, and a checkpoint to resume from. */
#include "cli.h"
#include "bench_util.h"
#include "train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The optimizer the options name (train_recipe_apply filled in the model's defaults). */
static oar_optimizer *make_optimizer(const train_opts *o, oar_module *m, oar_amp_masters *w, const char **kind_name) {
    const char *k = o->optimizer;
    oar_optim_kind kind = !strcmp(k, "adam") ? OAR_OPTIM_ADAM : !strcmp(k, "adamw") ? OAR_OPTIM_ADAMW
                        : !strcmp(k, "sgd") ? OAR_OPTIM_SGD : (oar_optim_kind)-1;
    if ((int)kind < 0) {
        oar_set_error(OAR_ERR_INVALID_ARG, "train: unknown optimizer '%s'; expected sgd, adam or adamw", k);
        return NULL;
    }
    oar_optim_opts oo = oar_optim_defaults(kind);
    if (kind == OAR_OPTIM_SGD) oo.momentum = o->momentum;
    if (o->lr > 0) oo.lr = o->lr;
    if (o->weight_decay >= 0) oo.weight_decay = o->weight_decay;
    *kind_name = k;
    return w ? oar_amp_masters_optimizer(w, &oo) : oar_optimizer_for(m, &oo);
}

/* One training step as a function of the batch, so the same code runs eagerly or, with
 * --mode static, compiled once into a program (the scheduler stays outside: host code). */
typedef struct step_ctx {
    oar_module *m;
    const train_data *d;
    oar_optimizer *opt;
    oar_tensor *const *params; /* what the clip sees: the f32 masters under O2 */
    int n_params;
    double clip, label_smoothing;
    oar_dist_dp *dp;              /* several ranks: gradients averaged in buckets during backward */
    const oar_autocast_opts *amp; /* NULL: f32 */
    oar_amp_masters *masters;     /* O2 */
    oar_grad_scaler *scaler;      /* fp16 */
} step_ctx;

/* Mixed precision: the forward under autocast; the scaled loss backward; under O2 the gradients
 * move to the f32 masters; the scaler unscales before the clip and skips steps with inf/nan. */
static oar_status train_step_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    step_ctx *c = user;
    oar_optimizer_zero_grad(c->opt);
    oar_profiler_range_push("forward");
    oar_status st = c->amp ? oar_autocast_begin(c->amp) : OAR_OK;
    if (st != OAR_OK) return st;
    oar_tensor *loss = train_loss(c->m, c->d, in[0], in[1], c->label_smoothing, NULL);
    if (c->amp) oar_autocast_end();
    oar_profiler_range_pop();
    oar_tensor *root = loss && c->scaler ? oar_grad_scaler_scale(c->scaler, loss) : loss;
    st = !root ? oar_last_status() : c->dp ? oar_dist_dp_backward(c->dp, root) : oar_backward(root, NULL, false);
    if (st == OAR_OK && c->masters) st = oar_amp_masters_sync_grads(c->masters);
    if (st == OAR_OK && c->scaler && c->clip > 0) st = oar_grad_scaler_unscale(c->scaler, c->opt);
    if (st == OAR_OK && c->clip > 0) st = oar_clip_grad_norm(c->params, c->n_params, c->clip, 2.0, NULL);
    bool skipped = false;
    if (st == OAR_OK) st = c->scaler ? oar_grad_scaler_step(c->scaler, c->opt, &skipped) : oar_optimizer_step(c->opt);
    /* compiled, skipped stays false: the sync rounds unchanged masters to the parameters' own bits */
    if (st == OAR_OK && c->masters && !skipped) st = oar_amp_masters_sync_params(c->masters);
    if (st == OAR_OK && c->scaler) st = oar_grad_scaler_update(c->scaler);
    out[0] = loss;
    (void)n_in;
    (void)n_out;
    return st;
}

/* The step compiled, with the batch dim dynamic so a short last batch reuses the program. */
static oar_jit *compile_step(step_ctx *c, oar_tensor *const *batch) {
    oar_input_spec specs[2];
    for (int i = 0; i < 2; i++) {
        specs[i] = (oar_input_spec){oar_dtype_of(batch[i]), oar_ndim(batch[i]), {0}, i ? "y" : "x"};
        memcpy(specs[i].shape, oar_shape(batch[i]), sizeof(int64_t) * (size_t)specs[i].ndim);
        specs[i].shape[0] = -1;
    }
    /* AMP: the scaler's state and O2's masters are bound too; the scaler's check-and-skip and
     * the masters' casts and rounding are ops of the program (docs/amp.md) */
    const oar_state_source *src[2];
    int n_src = 0;
    if (c->scaler) src[n_src++] = oar_grad_scaler_state_source(c->scaler);
    if (c->masters) src[n_src++] = oar_amp_masters_state_source(c->masters);
    oar_jit_opts jo = {.specs = specs, .n_specs = 2, .module = c->m, .optimizer = c->opt, .state_sources = src,
                       .n_state_sources = n_src};
    return oar_jit_to_static(train_step_fn, c, &jo);
}

static void fmt_eta(double s, char *buf, size_t n) {
    int t = s < 0 ? 0 : (int)(s + 0.5);
    snprintf(buf, n, "%d:%02d", t / 60, t % 60);
}

int oar_cmd_train(int argc, char **argv) {
    train_opts o;
    if (!train_parse(argc, argv, &o)) return 2;
    if (train_ps_model(o.model)) return train_ps_run(&o, argc, argv);
    int relaunched = train_dist_relaunch(argc, argv, o.nproc), world = 1, rank = 0;
    if (relaunched >= 0) return relaunched;
    if (train_dist_begin(&o, &world, &rank) != OAR_OK) {
        fprintf(stderr, "oar train: %s\n", oar_last_error());
        return 2;
    }
    if (o.threads && oar_set_num_threads(o.threads) != OAR_OK) {
        fprintf(stderr, "oar train: %s\n", oar_last_error());
        return 2;
    }
    oar_manual_seed(o.seed);
    if (o.check_nan_inf) oar_set_check_nan_inf(true);
    train_data d;
    oar_module *m = NULL;
    oar_optimizer *opt = NULL;
    oar_loader *loader = NULL;
    oar_scheduler *sched = NULL;
    FILE *metrics = NULL;
    oar_jit *jit = NULL;
    oar_dist_dp *dp = NULL;
    oar_amp_masters *masters = NULL;
    oar_grad_scaler *scaler = NULL;
    oar_autocast_opts amp = oar_autocast_defaults();
    bool use_amp = o.amp && strcmp(o.amp, "O0") != 0;
    amp.level = use_amp && !strcmp(o.amp, "O2") ? OAR_AMP_O2 : OAR_AMP_O1;
    amp.dtype = o.amp_dtype && strcmp(o.amp_dtype, "bf16") != 0 ? OAR_F16 : OAR_BF16;
    int rc = 1;
    char ckpt[512];
    snprintf(ckpt, sizeof ckpt, "%s", o.checkpoint ? o.checkpoint : "");
    if (!*ckpt) snprintf(ckpt, sizeof ckpt, "oar-%s.safetensors", o.model);

    if (train_data_open(&o, &d) != OAR_OK || !(m = train_model_create(&o, &d))) goto fail;
    bool compiled = o.mode && !strcmp(o.mode, "static");
    if (use_amp && world > 1 && (amp.level == OAR_AMP_O2 || amp.dtype == OAR_F16)) {
        /* data parallel averages f32 gradients of the module's parameters: O1 bf16 keeps them */
        oar_set_error(OAR_ERR_INVALID_ARG, "train: --nproc supports --amp O1 --amp-dtype bf16 only (O2 makes the "
                                           "parameters low precision and fp16 scales the loss); use one process");
        goto fail;
    }
    if (use_amp && amp.level == OAR_AMP_O2) {
        oar_amp_decorate_opts dec = oar_amp_decorate_defaults();
        dec.dtype = amp.dtype;
        if (!(masters = oar_amp_decorate(m, &dec))) goto fail;
    }
    if (use_amp && amp.dtype == OAR_F16 && !(scaler = oar_grad_scaler_new(NULL))) goto fail;
    const char *kind = "";
    if (!(opt = make_optimizer(&o, m, masters, &kind))) goto fail;
    double base_lr = oar_optimizer_group_opts(opt, 0)->lr; /* before the schedule's warmup */
    oar_loader_opts lo = {.batch_size = o.batch / world, .shuffle = true, .drop_last = true, .seed = o.seed,
                          .workers = o.workers, .transforms = d.n_transforms ? &d.norm : NULL,
                          .n_transforms = d.n_transforms};
    if (!(loader = oar_loader_new(d.train, &lo)) || oar_dist_shard_loader(loader) != OAR_OK) goto fail;
    int64_t per_epoch = oar_loader_num_batches(loader), step = 0;
    if (per_epoch == 0) {
        oar_set_error(OAR_ERR_INVALID_ARG, "train: the training set (%lld samples) is smaller than one batch of %lld",
                      (long long)oar_dataset_size(d.train), (long long)o.batch);
        goto fail;
    }
    if (o.resume && access(ckpt, R_OK) == 0) {
        if ((use_amp ? oar_amp_checkpoint_load(ckpt, m, opt, NULL, masters, scaler, &step)
                     : oar_checkpoint_load(ckpt, m, opt, &step)) != OAR_OK)
            goto fail;
        printf("resumed from %s at step %lld (epoch %lld)\n", ckpt, (long long)step, (long long)(step / per_epoch));
    }
    if (world > 1 && !(dp = oar_dist_data_parallel(m, NULL))) goto fail; /* rank 0's parameters to all */
    if (!o.schedule || !strcmp(o.schedule, "cosine")) {
        /* warm up over the first 2% of the run, then anneal to 0 by its end; the schedule is a
         * function of the step, so a resumed run continues on the same curve */
        int64_t total = per_epoch * o.epochs;
        oar_sched_opts so = {.kind = OAR_SCHED_WARMUP_COSINE, .t_max = total, .warmup = total / 50};
        if (!(sched = oar_scheduler_new(opt, &so))) goto fail;
        if (step > 0 && oar_scheduler_set_state(sched, &(oar_sched_state){.t = step}) != OAR_OK) goto fail;
    }
    if (o.metrics && !(metrics = fopen(o.metrics, o.resume ? "a" : "w"))) {
        oar_set_error(OAR_ERR_IO, "train: cannot open %s for writing the metrics", o.metrics);
        goto fail;
    }
    printf("model: %s (%s), %lld parameters\n", o.model, d.info->description,
           (long long)oar_module_count_elements(m, true));
    printf("data: %s\n", d.source);
    printf("recipe: %s\n", o.recipe);
    printf("training: %d epochs of %lld steps, batch %lld, %s lr %g (%s schedule), %d threads, %d loader workers\n",
           o.epochs, (long long)per_epoch, (long long)o.batch, kind, base_lr,
           sched ? "warmup + cosine" : "constant", oar_get_num_threads(), o.workers);
    oar_dist_dp_stats ds = {0};
    if (dp && oar_dist_dp_get_stats(dp, &ds) == OAR_OK)
        printf("data parallel: %d ranks of batch %lld, gradients averaged in %d buckets (progress shows rank 0's "
               "loss)\n", world, (long long)(o.batch / world), ds.n_buckets);
    if (use_amp)
        printf("amp: %s %s%s%s (autocast; CPU path: %s)\n", o.amp, oar_dtype_name(amp.dtype),
               masters ? ", f32 master weights" : "", scaler ? ", dynamic loss scaling" : "", oar_amp_cpu_path(amp.dtype));
    bool tty = isatty(fileno(stdout));
    oar_tensor *const *params = NULL;
    int n_params = oar_module_num_parameters(m);
    if (masters) n_params = oar_amp_masters_count(masters);
    oar_tensor **plist = malloc(sizeof(oar_tensor *) * (size_t)(n_params ? n_params : 1));
    for (int i = 0; i < n_params; i++) plist[i] = masters ? oar_amp_master(masters, i, NULL) : oar_module_parameter(m, i, NULL);
    params = plist;
    if (o.profile) {
        int64_t run = per_epoch * o.epochs - step;
        if (o.steps_limit && o.steps_limit - step < run) run = o.steps_limit - step;
        if (cli_profile_start(o.profile, o.profile_dir, o.profile_steps, run, d.language ? "tokens" : "samples") !=
            OAR_OK)
            goto fail_params;
    }

    step_ctx sc = {m, &d, opt, params, n_params, o.clip, o.label_smoothing, dp, use_amp ? &amp : NULL, masters, scaler};
    if (o.mode && !compiled && strcmp(o.mode, "eager") != 0) {
        oar_set_error(OAR_ERR_INVALID_ARG, "train: unknown --mode '%s'; expected eager or static", o.mode);
        goto fail_params;
    }
    for (int64_t epoch = step / per_epoch; epoch < o.epochs; epoch++) {
        oar_module_train(m, true);
        if (oar_loader_start_epoch(loader, epoch) != OAR_OK) goto fail_params;
        double t0 = bench_now_s(), last_print = 0, sum_loss = 0;
        int64_t done = 0, samples = 0, next_report = per_epoch / 10 ? per_epoch / 10 : 1;
        oar_tensor *x, *y;
        oar_status st = OAR_OK;
        oar_profiler_resume(); /* paused for the evaluation of the previous epoch */
        while (oar_loader_next(loader, &x, &y, &st)) {
            oar_scope_begin();
            oar_tensor *io[2] = {x, y}, *loss[1] = {0};
            if (compiled && !jit && !(jit = compile_step(&sc, io))) {
                oar_scope_end();
                goto fail_params;
            }
            double lv = 0;
            bool ok = (jit ? oar_jit_call(jit, io, 2, loss, 1) : train_step_fn(&sc, io, 2, loss, 1)) == OAR_OK &&
                      oar_item(loss[0], &lv) == OAR_OK && (!sched || oar_scheduler_next(sched) == OAR_OK);
            oar_scope_end();
            samples += oar_size(x, 0) * world; /* every rank's shard */
            oar_profiler_step(d.language ? oar_numel(y) : oar_size(x, 0));
            oar_release(x);
            oar_release(y);
            if (!ok) goto fail_params;
            sum_loss += lv;
            done++;
            step++;
            double t = bench_now_s() - t0;
            bool report = tty ? (t - last_print > 0.25 || done == per_epoch) : (done % next_report == 0);
            if (report && !o.quiet) {
                char eta[32];
                fmt_eta(t / (double)done * (double)(per_epoch - done), eta, sizeof eta);
                char scale[96] = "";
                if (scaler && oar_grad_scaler_skipped(scaler)) /* the scaler's state, once it has skipped */
                    snprintf(scale, sizeof scale, "  scale %g (%lld skipped)", oar_grad_scaler_get_scale(scaler),
                             (long long)oar_grad_scaler_skipped(scaler));
                printf("%sepoch %lld/%d  step %lld/%lld  loss %.4f%s  %.0f samples/s  data-wait %.1f%%  ETA %s%s",
                       tty ? "\r" : "", (long long)epoch + 1, o.epochs, (long long)done, (long long)per_epoch,
                       sum_loss / (double)done, scale, (double)samples / t, 100.0 * oar_loader_wait_seconds(loader) / t,
                       eta, tty ? "   " : "\n");
                fflush(stdout);
                last_print = t;
            }
            if (o.steps_limit && step >= o.steps_limit) break;
        }
        if (st != OAR_OK) goto fail_params;
        oar_profiler_pause();
        if (tty && !o.quiet) printf("\n");
        double secs = bench_now_s() - t0, test_loss = 0, test_acc = 0;
        if (use_amp && oar_autocast_begin(&amp) != OAR_OK) goto fail_params; /* O2's low layers need it */
        oar_status est = train_evaluate(m, &d, d.test, o.batch, &test_loss, &test_acc);
        if (use_amp) oar_autocast_end();
        if (est != OAR_OK) goto fail_params;
        double train_loss_avg = done ? sum_loss / (double)done : 0;
        printf("epoch %lld/%d: train loss %.4f, test loss %.4f, test accuracy %.2f%% (%.1f s, %.0f samples/s, "
               "data-wait %.1f%%)\n", (long long)epoch + 1, o.epochs, train_loss_avg, test_loss, 100 * test_acc,
               secs, (double)samples / secs, 100.0 * oar_loader_wait_seconds(loader) / secs);
        if (metrics) {
            fprintf(metrics, "{\"epoch\": %lld, \"step\": %lld, \"train_loss\": %.6f, \"test_loss\": %.6f, "
                             "\"test_accuracy\": %.6f, \"seconds\": %.3f, \"samples_per_s\": %.1f, "
                             "\"data_wait_fraction\": %.4f}\n",
                    (long long)epoch + 1, (long long)step, train_loss_avg, test_loss, test_acc, secs,
                    (double)samples / secs, oar_loader_wait_seconds(loader) / secs);
            fflush(metrics);
        }
        if (rank == 0 && (use_amp ? oar_amp_checkpoint_save(ckpt, m, opt, NULL, masters, scaler, step)
                                  : oar_checkpoint_save(ckpt, m, opt, step)) != OAR_OK)
            goto fail_params;
        if (o.steps_limit && step >= o.steps_limit) break;
    }
    printf("checkpoint: %s\n", ckpt);
    if (o.profile && cli_profile_finish(NULL, 0) != OAR_OK) goto fail_params;
    oar_dist_dp_free(dp);
    dp = NULL;
    if (oar_dist_finalize() != OAR_OK) goto fail_params;
    rc = 0;
fail_params:
    free(plist);
    oar_jit_free(jit);
fail:
    if (rc && world > 1) fprintf(stderr, "oar train: rank %d: %s\n", rank, oar_last_error());
    else if (rc) fprintf(stderr, "oar train: %s\n", oar_last_error());
    if (oar_profiler_running()) oar_profiler_stop(); /* after a failure: still writes the trace */
    if (metrics) fclose(metrics);
    oar_loader_free(loader);
    oar_scheduler_free(sched);
    oar_dist_dp_free(dp);
    oar_optimizer_free(opt);
    oar_grad_scaler_free(scaler);
    oar_amp_masters_free(masters);
    oar_module_free(m);
    train_data_close(&d);
    return rc;
}
