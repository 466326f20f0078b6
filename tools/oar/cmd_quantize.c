/* `oar quantize`: a trained zoo model, quantized after training, and what it cost.
 *   oar quantize --model lenet --checkpoint C --method dynamic|static|qat [--calib N]
 *               [--observer minmax|moving_average|percentile|kl|mse|all] [--keep-first] [--keep-last]
 *               [--out DIR] [--data ...] [--batch B] [--threads T] [--weight-bits 8|7]
 * It evaluates the fp32 model on the test set and quantizes it, with weights in 8 or 7 bits (by
 * default the width this CPU multiplies fastest exactly: oar_quant_fast_weight_bits), which it
 * prints and writes in the JSON. dynamic: the module's Linear (LSTM, GRU)
 * weights, activations per batch (oar_quantize_dynamic), evaluated eagerly. static: the model is
 * exported as a program, which oar_quantize_static_model quantizes (BN folded, conv2d and linear
 * int8, activation scales from N training batches, once per observer kind); the int8 program is
 * evaluated in the predictor, as it is deployed. qat: the model is prepared for quantization-aware
 * training and fine-tuned for --epochs E (1; --steps S stops earlier) at --lr (a tenth of the
 * recipe's; --lsq makes the input scales learnable after a tenth of the steps; --control runs the
 * same fine-tune in fp32 as well, so that what the extra training gives is not counted as
 * quantization's), evaluated with its fake quantization, then converted (oar_qat_convert: the
 * static rewrite with the learned activation scales) and evaluated in the predictor. It prints
 * each layer's scale and SQNR (weight; output for static and qat), the test accuracy and the
 * size before and after; with --out the quantized models stay in DIR
 * (<model>-<method>[-<observer>].json + .safetensors) for `oar infer`. The last line is JSON. */
#include "cli.h"
#include "quantize_qat.h"
#include "quantize_tokens.h"
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(void) {
    fprintf(stderr, "usage: oar quantize --model M --checkpoint C --method dynamic|static|qat [--calib N (8)]\n"
                    "         [--observer minmax|moving_average|percentile|kl|mse|all (minmax)] [--keep-first]\n"
                    "         [--keep-last] [--out DIR] [--data D] [--batch B] [--threads T]\n"
                    "         [--weight-bits 8|7 (8 with VNNI/AMX; 7, exact and fast without them)]\n"
                    "         static, qat: [--reduce-range (7-bit activations: u8 [0, 127], torch's reduce_range)]\n"
                    "         static: [--int8-residual (residual additions as qadd of u8 codes, not f32)]\n"
                    "         static, qat: [--disable-pass A,B (the int8 program's evaluation without these passes)]\n"
                    "         qat: [--epochs E (1)] [--steps S] [--lr LR (the recipe's / 10)] [--mode eager|static]\n"
                    "              [--control (the same fine-tune in fp32 too, to separate it from quantization)]\n"
                    "              [--lsq (input scales learned with LSQ after the first 10%% of the steps)]\n"
                    "              [--fuse-bn (ConvBn-fused QAT: the folded weight is fake-quantized)]\n"
                    "              [--freeze-bn N (with --fuse-bn: BatchNorm statistics frozen after N steps)]\n");
}

static int64_t state_bytes(oar_module *m) {
    int64_t b = 0;
    for (int i = 0; i < oar_module_num_parameters(m); i++) {
        oar_tensor *t = oar_module_parameter(m, i, NULL);
        b += oar_numel(t) * (int64_t)oar_dtype_size(oar_dtype_of(t));
    }
    for (int i = 0; i < oar_module_num_buffers(m); i++) {
        oar_tensor *t = oar_module_buffer(m, i, NULL);
        b += oar_numel(t) * (int64_t)oar_dtype_size(oar_dtype_of(t));
    }
    return b;
}

static oar_status forward_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    return oar_forward_n(user, in, 1, out, 1);
}

/* Exports m traced at batch 2 with a dynamic batch, as `oar export` does (for_quant: with the
 * strategy oar_quantize_static_model wants). */
static oar_status export_model(oar_module *m, const train_data *d, const char *path, bool for_quant) {
    const oar_zoo_info *info = d->info;
    oar_input_spec spec = info->input == OAR_ZOO_IMAGE
                              ? (oar_input_spec){OAR_F32, 4, {-1, 1, 28, 28}, "images"} /* grey, as train_model_create */
                              : (oar_input_spec){OAR_F32, 2, {-1, info->in_channels}, "features"};
    const char *names[] = {"logits"};
    oar_jit_opts jo = {.specs = &spec, .n_specs = 1, .output_names = names, .n_output_names = 1, .module = m};
    if (for_quant) oar_quant_export_strategy(&jo.strategy);
    oar_jit *f = oar_jit_to_static(forward_fn, m, &jo);
    if (!f) return oar_last_status();
    int64_t shape[OAR_MAX_DIMS];
    memcpy(shape, spec.shape, sizeof shape);
    shape[0] = 2;
    oar_tensor *x = oar_randn(shape, spec.ndim, OAR_F32), *y = NULL;
    oar_status st = oar_jit_call(f, &x, 1, &y, 1);
    if (st == OAR_OK) st = oar_jit_save(f, path);
    oar_release(y);
    oar_jit_free(f);
    return st;
}

/* The first n training batches, normalized as for training: the calibration set. */
static oar_status calib_batches(const train_data *d, int64_t batch, int n, oar_tensor **out, int *got) {
    oar_loader_opts lo = {.batch_size = batch, .transforms = d->n_transforms ? &d->norm : NULL,
                          .n_transforms = d->n_transforms};
    oar_loader *l = oar_loader_new(d->train, &lo);
    if (!l) return oar_last_status();
    oar_status st = oar_loader_start_epoch(l, 0);
    oar_tensor *x, *y;
    *got = 0;
    while (st == OAR_OK && *got < n && oar_loader_next(l, &x, &y, &st)) {
        out[(*got)++] = x;
        oar_release(y);
    }
    oar_loader_free(l);
    return st;
}

/* The passes the predictor runs the int8 program with (--disable-pass: an A/B of a pass's effect
 * on accuracy, e.g. fuse_qadd, which must have none). */
static oar_build_strategy g_eval_strategy;

/* Test accuracy of the exported model at path, run by the predictor. */
static oar_status predictor_accuracy(const char *path, const train_data *d, int64_t batch, double *acc) {
    oar_predictor *p = oar_predictor_create(&(oar_predictor_config){.model_path = path, .strategy = g_eval_strategy});
    if (!p) return oar_last_status();
    oar_loader_opts lo = {.batch_size = batch, .transforms = d->n_transforms ? &d->norm : NULL,
                          .n_transforms = d->n_transforms};
    oar_loader *l = oar_loader_new(d->test, &lo);
    oar_status st = l ? oar_loader_start_epoch(l, 0) : oar_last_status();
    int64_t right = 0, total = 0;
    oar_tensor *x, *y;
    while (st == OAR_OK && oar_loader_next(l, &x, &y, &st)) {
        oar_scope_begin();
        oar_tensor *z = NULL;
        if ((st = oar_predictor_set_input(p, oar_predictor_input_name(p, 0), x)) == OAR_OK &&
            (st = oar_predictor_run(p)) == OAR_OK && !(z = oar_predictor_get_output(p, oar_predictor_output_name(p, 0))))
            st = oar_last_status();
        int64_t b = oar_shape(x)[0], c = z ? oar_numel(z) / b : 0;
        float *logits = malloc(sizeof(float) * (size_t)(b * c + 1));
        int64_t *labels = malloc(sizeof(int64_t) * (size_t)(b + 1));
        if (st == OAR_OK && (!logits || !labels)) {
            fprintf(stderr, "oar quantize: out of memory\n");
            st = OAR_ERR_OOM;
        }
        if (st == OAR_OK && (st = oar_copy_to_buffer(z, logits, sizeof(float) * (size_t)(b * c), OAR_F32)) == OAR_OK)
            st = oar_copy_to_buffer(y, labels, sizeof(int64_t) * (size_t)b, OAR_I64);
        for (int64_t i = 0; i < b && st == OAR_OK; i++) {
            int64_t best = 0;
            for (int64_t j = 1; j < c; j++)
                if (logits[i * c + j] > logits[i * c + best]) best = j;
            right += best == labels[i];
            total++;
        }
        free(logits);
        free(labels);
        oar_scope_end();
        oar_release(x);
        oar_release(y);
    }
    oar_loader_free(l);
    oar_predictor_free(p);
    *acc = total ? (double)right / (double)total : 0;
    return st;
}

static int64_t file_bytes(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (int64_t)sb.st_size : -1;
}

int oar_cmd_quantize(int argc, char **argv) {
    const char *method = NULL, *observer = "minmax", *out_dir = NULL;
    int calib = 8, qat_epochs = 1, weight_bits = oar_quant_fast_weight_bits();
    double qat_lr = 0;
    bool keep_first = false, keep_last = false, control = false, lsq = false, reduce_range = false, fuse_bn = false,
         int8_residual = false;
    long long freeze_bn = 0;
    char **rest = malloc(sizeof(char *) * (size_t)(argc + 1));
    int nr = 0;
    rest[nr++] = argv[0];
    for (int i = 1; i < argc; i++) {
        bool has = i + 1 < argc;
        if (!strcmp(argv[i], "--method") && has) method = argv[++i];
        else if (!strcmp(argv[i], "--observer") && has) observer = argv[++i];
        else if (!strcmp(argv[i], "--out") && has) out_dir = argv[++i];
        else if (!strcmp(argv[i], "--calib") && has) calib = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--weight-bits") && has) weight_bits = atoi(argv[++i]); /* 8 or 7 */
        else if (!strcmp(argv[i], "--epochs") && has) qat_epochs = atoi(argv[++i]); /* the fine-tune's */
        else if (!strcmp(argv[i], "--lr") && has) qat_lr = atof(argv[++i]);
        else if (!strcmp(argv[i], "--keep-first")) keep_first = true;
        else if (!strcmp(argv[i], "--keep-last")) keep_last = true;
        else if (!strcmp(argv[i], "--control")) control = true; /* qat: the same fine-tune in fp32 too */
        else if (!strcmp(argv[i], "--lsq")) lsq = true;         /* qat: learned input scales after 10% */
        else if (!strcmp(argv[i], "--reduce-range")) reduce_range = true; /* static, qat: 7-bit activations */
        else if (!strcmp(argv[i], "--int8-residual")) int8_residual = true; /* static: qadd residuals */
        else if (!strcmp(argv[i], "--fuse-bn")) fuse_bn = true;           /* qat: ConvBn-fused */
        else if (!strcmp(argv[i], "--freeze-bn") && has) freeze_bn = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--disable-pass") && has) {
            if (cli_disable_passes(&g_eval_strategy, argv[++i])) {
                free(rest);
                return 2;
            }
        }
        else rest[nr++] = argv[i];
    }
    rest[nr] = NULL;
    bool dynamic = method && !strcmp(method, "dynamic"), stat = method && !strcmp(method, "static");
    bool qat = method && !strcmp(method, "qat"), prog = stat || qat; /* evaluated as int8 programs */
    if (weight_bits != 7 && weight_bits != 8) {
        fprintf(stderr, "oar quantize: expected --weight-bits 8 or 7, got %d; 7 is exact and fast on CPUs without "
                        "VNNI (this CPU's choice: %d)\n", weight_bits, oar_quant_fast_weight_bits());
        free(rest);
        return 2;
    }
    if (int8_residual && !stat) {
        fprintf(stderr, "oar quantize: expected --int8-residual with --method static, got it with --method %s (QAT "
                        "and dynamic quantization keep residual additions in f32 anyway)\n", method ? method : "(none)");
        free(rest);
        return 2;
    }
    if (reduce_range && !prog) {
        fprintf(stderr, "oar quantize: expected --reduce-range with --method static or qat, got it with --method %s "
                        "(dynamic quantization measures each batch's range with the full 8 bits)\n",
                method ? method : "(none)");
        free(rest);
        return 2;
    }
    if ((fuse_bn || freeze_bn) && !qat) {
        fprintf(stderr, "oar quantize: expected --fuse-bn and --freeze-bn with --method qat (they shape the "
                        "fine-tune), got them with --method %s\n", method ? method : "(none)");
        free(rest);
        return 2;
    }
    if (freeze_bn < 0 || (freeze_bn && !fuse_bn)) {
        fprintf(stderr, "oar quantize: expected --freeze-bn N >= 1 together with --fuse-bn (it freezes the fused "
                        "BatchNorms' statistics after N steps), got --freeze-bn %lld%s\n", freeze_bn,
                fuse_bn ? "" : " without --fuse-bn");
        free(rest);
        return 2;
    }
    if ((!dynamic && !stat && !qat) || calib < 1 || calib > 1000 || qat_epochs < 1 || qat_lr < 0) {
        fprintf(stderr, "oar quantize: expected --method dynamic, static or qat, --calib in [1, 1000], --epochs >= 1 "
                        "and --lr >= 0, got --method %s, --calib %d, --epochs %d, --lr %g\n",
                method ? method : "(none)", calib, qat_epochs, qat_lr);
        usage();
        free(rest);
        return 2;
    }
    train_opts o;
    bool ok = train_parse(nr, rest, &o);
    free(rest);
    if (!ok) return 2;
    if (!o.checkpoint) {
        fprintf(stderr, "oar quantize: expected --checkpoint (a trained model's)\n");
        usage();
        return 2;
    }
    const char *kinds[8];
    int nk = 0;
    if (stat && !strcmp(observer, "all")) nk = oar_observer_kinds(kinds, 8);
    else kinds[nk++] = observer;
    if (o.threads && oar_set_num_threads(o.threads) != OAR_OK) {
        fprintf(stderr, "oar quantize: %s\n", oar_last_error());
        return 2;
    }
    if (out_dir) mkdir(out_dir, 0777);
    char tmp_dir[64] = "";
    const char *dir = out_dir;
    if (prog && !dir) { /* the fp32 and int8 programs need a place: a temporary one */
        snprintf(tmp_dir, sizeof tmp_dir, "/tmp/oar-quantize-XXXXXX");
        if (!mkdtemp(tmp_dir)) {
            fprintf(stderr, "oar quantize: cannot make a temporary directory in /tmp\n");
            return 1;
        }
        dir = tmp_dir;
    }
    char fp32_path[1024] = "";
    train_data d = {0};
    oar_module *base = NULL;
    oar_tensor *cal[1000];
    int n_cal = 0, rc = 1;
    double loss0, acc0;
    oar_scope_begin();
    if (train_data_open(&o, &d) != OAR_OK || !(base = train_model_create(&o, &d)) ||
        oar_checkpoint_load(o.checkpoint, base, NULL, NULL) != OAR_OK ||
        train_evaluate(base, &d, d.test, o.batch, &loss0, &acc0) != OAR_OK)
        goto fail;
    if (prog && calib_batches(&d, o.batch, calib, cal, &n_cal) != OAR_OK) goto fail;
    bool tokens = d.info->input != OAR_ZOO_IMAGE && d.info->input != OAR_ZOO_FEATURES;
    if (prog && tokens) {
        fprintf(stderr, "oar quantize: expected an image or feature model for --method %s (its int8 program has "
                        "quantized convs and linears with calibrated inputs), got %s, which takes tokens; use "
                        "--method dynamic (with --out to write the model)\n", method, o.model);
        rc = 2;
        goto done;
    }
    if (stat) { /* static quantization works on the exported program */
        snprintf(fp32_path, sizeof fp32_path, "%s/%s-fp32", dir, o.model);
        oar_module_train(base, false);
        if (export_model(base, &d, fp32_path, true) != OAR_OK) goto fail;
    }
    int64_t bytes0 = state_bytes(base);
    if (reduce_range) printf("oar quantize: activations in 7 bits (u8 [0, 127], --reduce-range)\n");
    printf("oar quantize: weights in %d bits (%s)\n", weight_bits,
                     weight_bits == oar_quant_fast_weight_bits() ? "this CPU's fast exact int8" : "as asked");
    printf("oar quantize: %s from %s, fp32 test accuracy %.4f (loss %.4f), state %lld bytes\n", o.model, o.checkpoint,
           acc0, loss0, (long long)bytes0);
    char json[4096];
    int nj = snprintf(json, sizeof json, "{\"model\": \"%s\", \"method\": \"%s\", \"fp32_accuracy\": %.6f, "
                      "\"fp32_bytes\": %lld, \"weight_bits\": %d, \"reduce_range\": %s, \"fuse_bn\": %s, \"results\": [", o.model,
                      method, acc0, (long long)bytes0, weight_bits, reduce_range ? "true" : "false",
                      fuse_bn ? "true" : "false");
    for (int k = 0; k < nk; k++) {
        oar_module *m = NULL;
        oar_quant_layer layers[64];
        int n = 0;
        oar_status st = OAR_OK;
        double loss = 0, acc = 0;
        int64_t bytes = 0;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s-%s%s%s", dir ? dir : ".", o.model, method, stat ? "-" : "",
                 stat ? kinds[k] : "");
        double fq_acc = 0, fq_loss = 0, ctl_acc = -1, ctl_loss = 0, out_diff = -1;
        int64_t qat_steps = 0;
        if (dynamic) {
            if (!(m = train_model_create(&o, &d))) st = oar_last_status();
            if (st == OAR_OK) st = oar_checkpoint_load(o.checkpoint, m, NULL, NULL);
            if (st == OAR_OK) oar_module_train(m, false);
            if (st == OAR_OK) st = oar_quantize_dynamic(m, &(oar_quant_dynamic_opts){.weight_bits = weight_bits}, layers, 64, &n);
            if (st == OAR_OK) st = train_evaluate(m, &d, d.test, o.batch, &loss, &acc);
            if (st == OAR_OK) bytes = state_bytes(m);
            if (st == OAR_OK && out_dir && !tokens) st = export_model(m, &d, path, false);
            if (st == OAR_OK && out_dir && tokens) { /* ids -> logits, checked in the predictor */
                st = quantize_tokens_export(m, &d, o.batch, path, &out_diff);
                if (st == OAR_OK && !(out_diff <= 1e-4)) {
                    st = oar_set_error(OAR_ERR_STATE, "expected the written model to give the in-process logits, "
                                                      "got a largest difference of %g on the first test batch",
                                       out_diff);
                }
            }
        } else if (qat) { /* fine-tuned with fake quantization, then converted to the int8 program */
            oar_qat_opts qo = {.keep_first = keep_first, .keep_last = keep_last, .weight_bits = weight_bits,
                               .reduce_range = reduce_range, .fuse_bn = fuse_bn};
            oar_qat_convert_opts co = {.input_name = d.info->input == OAR_ZOO_IMAGE ? "images" : "features",
                                       .output_name = "logits"};
            if (!(m = train_model_create(&o, &d))) st = oar_last_status();
            if (st == OAR_OK) st = oar_checkpoint_load(o.checkpoint, m, NULL, NULL);
            if (st == OAR_OK) st = oar_qat_prepare(m, &qo, NULL);
            if (st == OAR_OK)
                st = quantize_qat_train(m, &d, &o, qat_epochs, qat_lr > 0 ? qat_lr : o.lr / 10, lsq, freeze_bn,
                                        &qat_steps);
            if (st == OAR_OK) st = train_evaluate(m, &d, d.test, o.batch, &fq_loss, &fq_acc);
            if (st == OAR_OK && control) { /* the same schedule without fake quant: what the fine-tune alone gives */
                oar_module *c = train_model_create(&o, &d);
                int64_t cs = 0;
                st = c ? oar_checkpoint_load(o.checkpoint, c, NULL, NULL) : oar_last_status();
                if (st == OAR_OK)
                    st = quantize_qat_train(c, &d, &o, qat_epochs, qat_lr > 0 ? qat_lr : o.lr / 10, false, 0, &cs);
                if (st == OAR_OK) st = train_evaluate(c, &d, d.test, o.batch, &ctl_loss, &ctl_acc);
                oar_module_free(c);
            }
            if (st == OAR_OK) st = oar_qat_convert(m, cal, n_cal, path, &co, layers, 64, &n);
            if (st == OAR_OK) st = predictor_accuracy(path, &d, o.batch, &acc);
            char wpath[1100];
            snprintf(wpath, sizeof wpath, "%s.safetensors", path);
            bytes = file_bytes(wpath);
        } else {
            oar_quant_static_opts so = {.observer = kinds[k], .keep_first = keep_first, .keep_last = keep_last,
                                        .weight_bits = weight_bits, .int8_residual = int8_residual};
            so.observer_opts.reduce_range = reduce_range;
            st = oar_quantize_static_model(fp32_path, path, cal, n_cal, &so, layers, 64, &n);
            if (st == OAR_OK) st = predictor_accuracy(path, &d, o.batch, &acc);
            char wpath[1100];
            snprintf(wpath, sizeof wpath, "%s.safetensors", path);
            bytes = file_bytes(wpath);
        }
        oar_module_free(m);
        if (st != OAR_OK) goto fail;
        const char *label = dynamic ? "dynamic" : qat ? "qat" : kinds[k];
        if (qat)
            printf("\nafter %lld QAT steps: fake-quant test accuracy %.4f (loss %.4f); input scales below are the "
                   "learned ones (u8, zero point %d)", (long long)qat_steps, fq_acc, fq_loss,
                   reduce_range ? 64 : 128);
        if (qat && ctl_acc >= 0)
            printf("\ncontrol: the same fine-tune in fp32 gives test accuracy %.4f (loss %.4f); int8 after QAT against "
                   "it: %+.2f points", ctl_acc, ctl_loss, 100 * (acc - ctl_acc));
        printf("\n%s%s%s: %d layers int8\n  %-10s %-7s %10s %22s %12s%s\n", method, stat ? ", observer " : "",
               stat ? kinds[k] : "", n, "layer", "type", "weights", dynamic ? "weight scales" : "input scale",
               "weight SQNR", prog ? "  output SQNR" : "");

        for (int i = 0; i < n && i < 64; i++) {
            char sc[64];
            if (dynamic) snprintf(sc, sizeof sc, "%.3g..%.3g", layers[i].scale_min, layers[i].scale_max);
            else snprintf(sc, sizeof sc, "%.4g", layers[i].scale_min);
            printf("  %-10s %-7s %10lld %22s %9.1f dB", layers[i].name, layers[i].type, (long long)layers[i].weights,
                   sc, layers[i].weight_sqnr_db);
            if (prog) printf(" %9.1f dB", layers[i].output_sqnr_db);
            printf("\n");
        }
        printf("  test accuracy %.4f (fp32 %.4f, %+.2f points), %s %lld bytes (%.2fx smaller)\n", acc, acc0,
               100 * (acc - acc0), prog ? "int8 program's weights file" : "state", (long long)bytes,
               (double)bytes0 / (double)bytes);
        if (dynamic) /* the language models' measure: cross-entropy per token and perplexity */
            printf("  test loss %.4f (fp32 %.4f, %+.4f), perplexity %.4f (fp32 %.4f)\n", loss, loss0, loss - loss0,
                   exp(loss), exp(loss0));
        if (out_dir) printf("  exported to %s.json and %s.safetensors\n", path, path);
        if (out_diff >= 0)
            printf("  the written model in the predictor against the module in process, first test batch: largest "
                   "|logit difference| %g\n", out_diff);
        nj += snprintf(json + nj, sizeof json - (size_t)nj, "%s{\"quant\": \"%s\", \"accuracy\": %.6f, \"bytes\": %lld",
                       k ? ", " : "", label, acc, (long long)bytes);
        if (qat)
            nj += snprintf(json + nj, sizeof json - (size_t)nj, ", \"fake_quant_accuracy\": %.6f, \"qat_steps\": %lld",
                           fq_acc, (long long)qat_steps);
        if (qat && ctl_acc >= 0)
            nj += snprintf(json + nj, sizeof json - (size_t)nj, ", \"control_fp32_accuracy\": %.6f", ctl_acc);
        if (dynamic) nj += snprintf(json + nj, sizeof json - (size_t)nj, ", \"loss\": %.6f, \"fp32_loss\": %.6f", loss, loss0);
        if (out_diff >= 0)
            nj += snprintf(json + nj, sizeof json - (size_t)nj, ", \"out_max_abs_diff\": %g", out_diff);
        nj += snprintf(json + nj, sizeof json - (size_t)nj, "}");
    }
    snprintf(json + nj, sizeof json - (size_t)nj, "]}");
    printf("%s\n", json);
    rc = 0;
fail:
    if (rc) fprintf(stderr, "oar quantize: %s\n", oar_last_error());
done:
    for (int i = 0; i < n_cal; i++) oar_release(cal[i]);
    oar_scope_end();
    oar_module_free(base);
    if (d.train || d.test) train_data_close(&d);
    if (*tmp_dir) { /* only our own files are in it */
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
        if (system(cmd) != 0) fprintf(stderr, "oar quantize: could not remove %s\n", tmp_dir);
    }
    return rc;
}
