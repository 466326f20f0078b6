/* Data and model setup for the train, eval and sample commands. */
#include "cli.h"
#include "train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(void) {
    fprintf(stderr,
            "usage: oar train --model NAME --data DATA [options]\n"
            "  --model     tiny | mlp | lenet | resnet20 | mobilenet | gpt-mini | lstm-lm\n"
            "              | word2vec | wide-deep (parameter server; --data austen | clicks, the defaults)\n"
            "  --data      fashion-mnist | digits | PATH of a text file (language models)\n"
            "  --epochs N  --batch N            (defaults: the model's recipe, printed at the start;\n"
            "                                    lenet on fashion-mnist 3 and 16, most models 2 and 64)\n"
            "  --optimizer sgd | adam | adamw   (default sgd with momentum 0.9; adamw for gpt-mini)\n"
            "  --lr X      --weight-decay X     --momentum X   --clip X (gradient norm)\n"
            "  --label-smoothing X  (training loss only; evaluation reports plain cross-entropy)\n"
            "  --schedule cosine | constant     (default cosine: linear warmup, then cosine decay to 0\n"
            "                                    over the whole run, stepped every batch)\n"
            "  --seed N    --threads N          --workers N (data loader threads, default 1)\n"
            "  --checkpoint FILE (default oar-<model>.safetensors)   --resume\n"
            "  --metrics FILE (JSON lines, one per epoch)   --steps N (stop after N steps)\n"
            "  --context N (language models: tokens per window)   --quiet\n"
            "  --mode eager | static (default eager; static compiles the whole training step)\n"
            "  --profile timer|full  step timer table, or also op spans, tables and a Chrome trace\n"
            "  --check-nan-inf   stop at the first op that makes a NaN or Inf, and name it\n"
            "  --nproc N         data parallel over N processes (oar launch; --batch is the global batch)\n"
            "  --amp O1|O2 --amp-dtype bf16|fp16  mixed precision (default bf16; fp16 adds dynamic\n"
            "                    loss scaling; O2 keeps f32 master weights; docs/amp.md)\n"
            "  --ps-servers S --ps-mode sync|async|geo --geo-k K  word2vec and wide-deep: S of the\n"
            "                    --nproc ranks hold the tables (docs/parameter-server.md)\n"
            "  --profile-dir DIR (full: where the trace goes, default oar-profile)\n"
            "  --profile-steps A:B (steps recorded; default: from step min(5, steps/5), 20 steps\n"
            "                    in full mode, to the end in timer mode)\n");
}

/* The flags of train, eval (which reads the same model and data flags) and their values. */
static const cli_flag TRAIN_FLAGS[] = {
    {"--model", CLI_TEXT},         {"--data", CLI_TEXT},        {"--optimizer", CLI_TEXT},
    {"--checkpoint", CLI_TEXT},    {"--metrics", CLI_TEXT},     {"--schedule", CLI_TEXT},
    {"--mode", CLI_TEXT},          {"--profile", CLI_TEXT},     {"--profile-dir", CLI_TEXT},
    {"--profile-steps", CLI_TEXT}, {"--epochs", CLI_COUNT},     {"--batch", CLI_COUNT},
    {"--context", CLI_COUNT},      {"--steps", CLI_COUNT},      {"--threads", CLI_COUNT},
    {"--workers", CLI_INT},        {"--lr", CLI_NUMBER},        {"--weight-decay", CLI_NUMBER},
    {"--momentum", CLI_NUMBER},    {"--clip", CLI_NUMBER},      {"--label-smoothing", CLI_NUMBER},
    {"--seed", CLI_INT},           {"--resume", CLI_NONE},      {"--quiet", CLI_NONE},
    {"--check-nan-inf", CLI_NONE}, {"--nproc", CLI_COUNT},       {"--amp", CLI_TEXT},
    {"--amp-dtype", CLI_TEXT},     {"--ps-servers", CLI_COUNT},  {"--ps-mode", CLI_TEXT},
    {"--geo-k", CLI_COUNT},
};

bool train_parse(int argc, char **argv, train_opts *o) {
    /* 0 / -1: not given; the model's recipe fills them in below */
    *o = (train_opts){.workers = 1, .momentum = 0.9, .lr = -1, .weight_decay = -1, .label_smoothing = -1};
    if (argc > 1 && cli_check_flags(argv[0], argc, argv, TRAIN_FLAGS, CLI_N_FLAGS(TRAIN_FLAGS), 0)) {
        fprintf(stderr, "\n");
        usage();
        return false;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define FLAG(name) (!strcmp(a, name) && v && (i++, 1))
        if (FLAG("--model")) o->model = v;
        else if (FLAG("--data")) o->data = v;
        else if (FLAG("--optimizer")) o->optimizer = v;
        else if (FLAG("--checkpoint")) o->checkpoint = v;
        else if (FLAG("--metrics")) o->metrics = v;
        else if (FLAG("--schedule")) o->schedule = v;
        else if (FLAG("--mode")) o->mode = v;
        else if (FLAG("--amp")) o->amp = v;
        else if (FLAG("--amp-dtype")) o->amp_dtype = v;
        else if (FLAG("--profile")) o->profile = v;
        else if (FLAG("--profile-dir")) o->profile_dir = v;
        else if (FLAG("--profile-steps")) o->profile_steps = v;
        else if (FLAG("--epochs")) o->epochs = atoi(v) < 1 ? -1 : atoi(v); /* -1: refused below */
        else if (FLAG("--batch")) o->batch = atoll(v) < 1 ? -1 : atoll(v);
        else if (FLAG("--context")) o->context = atoll(v);
        else if (FLAG("--steps")) o->steps_limit = atoll(v);
        else if (FLAG("--threads")) o->threads = atoi(v);
        else if (FLAG("--nproc")) o->nproc = atoi(v);
        else if (FLAG("--ps-servers")) o->ps_servers = atoi(v);
        else if (FLAG("--ps-mode")) o->ps_mode = v;
        else if (FLAG("--geo-k")) o->geo_k = atoi(v);
        else if (FLAG("--workers")) o->workers = atoi(v);
        else if (FLAG("--lr")) o->lr = atof(v);
        else if (FLAG("--weight-decay")) o->weight_decay = atof(v);
        else if (FLAG("--momentum")) o->momentum = atof(v);
        else if (FLAG("--clip")) o->clip = atof(v);
        else if (FLAG("--label-smoothing")) o->label_smoothing = atof(v) < 0 ? -2 : atof(v); /* -2: refused */
        else if (FLAG("--seed")) o->seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--resume")) o->resume = true;
        else if (!strcmp(a, "--quiet")) o->quiet = true;
        else if (!strcmp(a, "--check-nan-inf")) o->check_nan_inf = true;
        else {
            fprintf(stderr, "oar: unknown or incomplete option '%s'\n\n", a);
            usage();
            return false;
        }
#undef FLAG
    }
    if (o->model && !o->data && train_ps_model(o->model)) o->data = strcmp(o->model, "word2vec") ? "clicks" : "austen";
    if ((o->ps_servers || o->ps_mode || o->geo_k) && !train_ps_model(o->model)) {
        fprintf(stderr, "oar: --ps-servers, --ps-mode and --geo-k train word2vec or wide-deep; --model %s trains "
                        "data parallel (--nproc)\n", o->model ? o->model : "(none)");
        return false;
    }
    if (!o->model || !o->data) {
        fprintf(stderr, "oar: --model and --data are required\n\n");
        usage();
        return false;
    }
    if (o->label_smoothing == -2) {
        fprintf(stderr, "oar: --label-smoothing expects a value in [0, 1), got a negative one\n");
        return false;
    }
    train_recipe_apply(o, o->recipe, sizeof o->recipe);
    if (!(o->label_smoothing >= 0 && o->label_smoothing < 1)) {
        fprintf(stderr, "oar: --label-smoothing expects a value in [0, 1), got %g\n", o->label_smoothing);
        return false;
    }
    if (o->amp && strcmp(o->amp, "O0") != 0 && strcmp(o->amp, "O1") != 0 && strcmp(o->amp, "O2") != 0) {
        fprintf(stderr, "oar: unknown --amp '%s'; expected O1 or O2 (O0: off)\n", o->amp);
        return false;
    }
    if (o->amp_dtype && strcmp(o->amp_dtype, "bf16") != 0 && strcmp(o->amp_dtype, "fp16") != 0 &&
        strcmp(o->amp_dtype, "f16") != 0) {
        fprintf(stderr, "oar: unknown --amp-dtype '%s'; expected bf16 or fp16\n", o->amp_dtype);
        return false;
    }
    if (o->amp_dtype && !o->amp) {
        fprintf(stderr, "oar: --amp-dtype needs --amp O1 or O2\n");
        return false;
    }
    if (o->schedule && strcmp(o->schedule, "cosine") != 0 && strcmp(o->schedule, "constant") != 0) {
        fprintf(stderr, "oar: unknown --schedule '%s'; expected cosine or constant\n", o->schedule);
        return false;
    }
    if (o->profile && strcmp(o->profile, "timer") != 0 && strcmp(o->profile, "full") != 0) {
        fprintf(stderr, "oar: unknown --profile '%s'; expected timer or full\n", o->profile);
        return false;
    }
    if (o->epochs < 1 || o->batch < 1 || o->workers < 0) {
        fprintf(stderr, "oar: expected --epochs >= 1, --batch >= 1 and --workers >= 0\n");
        return false;
    }
    return true;
}

static bool readable(const char *p) { return access(p, R_OK) == 0; }

static const char *shared_dir(void) {
    const char *s = getenv("OAR_SHARED_DIR");
    return s && *s ? s : "../shared";
}

/* Fashion-MNIST: the full set from Debian's dataset-fashion-mnist, else the 20k subset in
 * ../shared/data. */
static oar_status open_fashion(train_data *d) {
    static const char *dirs[] = {"/usr/share/datasets/fashion-mnist", NULL};
    char tr_img[512], tr_lab[512], te_img[512], te_lab[512];
    const char *dir = NULL;
    for (int i = 0; dirs[i]; i++) {
        snprintf(tr_img, sizeof tr_img, "%s/train-images-idx3-ubyte.gz", dirs[i]);
        if (readable(tr_img)) dir = dirs[i];
    }
    if (dir) {
        snprintf(tr_lab, sizeof tr_lab, "%s/train-labels-idx1-ubyte.gz", dir);
        snprintf(te_img, sizeof te_img, "%s/t10k-images-idx3-ubyte.gz", dir);
        snprintf(te_lab, sizeof te_lab, "%s/t10k-labels-idx1-ubyte.gz", dir);
        snprintf(d->source, sizeof d->source, "Fashion-MNIST from %s (60000 train, 10000 test)", dir);
    } else {
        snprintf(tr_img, sizeof tr_img, "%s/data/fashion-mnist/train-first20000-images-idx3-ubyte.gz", shared_dir());
        snprintf(tr_lab, sizeof tr_lab, "%s/data/fashion-mnist/train-first20000-labels-idx1-ubyte.gz", shared_dir());
        snprintf(te_img, sizeof te_img, "%s/data/fashion-mnist/t10k-images-idx3-ubyte.gz", shared_dir());
        snprintf(te_lab, sizeof te_lab, "%s/data/fashion-mnist/t10k-labels-idx1-ubyte.gz", shared_dir());
        if (!readable(tr_img))
            return oar_set_error(OAR_ERR_IO, "fashion-mnist: not found in /usr/share/datasets/fashion-mnist "
                                             "(install the Debian package dataset-fashion-mnist: make setup) "
                                             "nor in %s/data/fashion-mnist", shared_dir());
        snprintf(d->source, sizeof d->source, "Fashion-MNIST subset from %s/data (20000 train, 10000 test)", shared_dir());
    }
    d->train = oar_dataset_idx(tr_img, tr_lab);
    d->test = d->train ? oar_dataset_idx(te_img, te_lab) : NULL;
    /* the training set's mean and standard deviation of pixel values (in [0, 1]) */
    d->norm = (oar_transform){.kind = OAR_TF_NORMALIZE, .mean = {0.2860}, .std = {0.3530}, .n_channels = 1};
    d->n_transforms = 1;
    return d->test ? OAR_OK : oar_last_status();
}

static oar_status open_digits(train_data *d) {
    char tr[512], te[512];
    snprintf(tr, sizeof tr, "%s/data/sklearn/digits_train.csv", shared_dir());
    snprintf(te, sizeof te, "%s/data/sklearn/digits_test.csv", shared_dir());
    if (!readable(tr))
        return oar_set_error(OAR_ERR_IO, "digits: %s not found (set OAR_SHARED_DIR to the shared folder)", tr);
    d->train = oar_dataset_csv(tr, "label");
    d->test = d->train ? oar_dataset_csv(te, "label") : NULL;
    /* pixel values are 0..16 */
    d->norm = (oar_transform){.kind = OAR_TF_NORMALIZE, .mean = {0.0}, .std = {16.0}, .n_channels = 1};
    d->n_transforms = 1;
    snprintf(d->source, sizeof d->source, "UCI digits from %s/data/sklearn (1437 train, 360 test)", shared_dir());
    return d->test ? OAR_OK : oar_last_status();
}

static oar_status open_text(const train_opts *o, train_data *d) {
    if (!readable(o->data))
        return oar_set_error(OAR_ERR_IO, "%s: no such dataset name or readable text file; expected fashion-mnist, "
                                         "digits or the path of a text file", o->data);
    int64_t T = o->context ? o->context : d->info->context;
    /* the first 90% of the file trains, the last 10% evaluates */
    d->train = oar_dataset_text_range(o->data, T, true, 0.0, 0.9);
    d->test = d->train ? oar_dataset_text_range(o->data, T, false, 0.9, 1.0) : NULL;
    d->language = true;
    snprintf(d->source, sizeof d->source, "text %s (bytes; %lld-token windows; 90%% train, 10%% test)", o->data,
             (long long)T);
    return d->test ? OAR_OK : oar_last_status();
}

oar_status train_data_open(const train_opts *o, train_data *d) {
    memset(d, 0, sizeof *d);
    d->info = oar_zoo_find(o->model);
    if (!d->info) {
        oar_zoo_create(o->model, NULL); /* sets the message listing the known models */
        return oar_last_status();
    }
    bool tokens = d->info->input == OAR_ZOO_TOKENS || d->info->input == OAR_ZOO_TOKENS_STATEFUL;
    oar_status st;
    if (!strcmp(o->data, "fashion-mnist")) st = open_fashion(d);
    else if (!strcmp(o->data, "digits")) st = open_digits(d);
    else st = open_text(o, d);
    if (st != OAR_OK) return st;
    if (tokens != d->language)
        return oar_set_error(OAR_ERR_INVALID_ARG, "%s: this model takes %s, but --data %s gives %s", o->model,
                             tokens ? "text" : "images or features", o->data, d->language ? "text" : "images");
    if (d->info->input == OAR_ZOO_FEATURES && strcmp(o->data, "digits") != 0)
        return oar_set_error(OAR_ERR_INVALID_ARG, "%s: takes 64 features; use --data digits", o->model);
    if (d->info->input == OAR_ZOO_IMAGE && strcmp(o->data, "fashion-mnist") != 0)
        return oar_set_error(OAR_ERR_INVALID_ARG, "%s: takes images; use --data fashion-mnist", o->model);
    return OAR_OK;
}

void train_data_close(train_data *d) {
    oar_dataset_free(d->train);
    oar_dataset_free(d->test);
    d->train = d->test = NULL;
}

oar_module *train_model_create(const train_opts *o, const train_data *d) {
    oar_zoo_opts zo = {0};
    if (d->info->input == OAR_ZOO_IMAGE) zo.in_channels = 1;       /* Fashion-MNIST is grey */
    if (d->language) zo.num_classes = 256;                         /* bytes */
    return oar_zoo_create(o->model, &zo);
}

oar_tensor *train_loss(oar_module *m, const train_data *d, oar_tensor *x, oar_tensor *y, double label_smoothing,
                       oar_tensor **logits) {
    oar_tensor *z;
    if (d->info->input == OAR_ZOO_TOKENS_STATEFUL) {
        /* [N, T] -> [T, N]; a fresh state per window (windows are drawn at random) */
        oar_tensor *in[3] = {oar_contiguous(oar_transpose(x, 0, 1)), NULL, NULL}, *out[3];
        if (oar_forward_n(m, in, 3, out, 3) != OAR_OK) return NULL;
        z = oar_transpose(out[0], 0, 1);
    } else {
        z = oar_forward(m, x);
    }
    if (logits) *logits = z;
    oar_ce_opts ce = oar_ce_defaults();
    ce.label_smoothing = label_smoothing;
    if (d->language) {
        int64_t v = oar_size(z, -1), flat = -1;
        int64_t s2[2] = {-1, v};
        return oar_cross_entropy(oar_reshape(z, s2, 2), oar_reshape(y, &flat, 1), &ce);
    }
    return oar_cross_entropy(z, y, &ce);
}

oar_status train_evaluate(oar_module *m, const train_data *d, oar_dataset *ds, int64_t batch, double *loss,
                          double *accuracy) {
    oar_loader_opts lo = {.batch_size = batch, .transforms = d->n_transforms ? &d->norm : NULL,
                          .n_transforms = d->n_transforms};
    oar_loader *l = oar_loader_new(ds, &lo);
    if (!l) return oar_last_status();
    bool was_training = oar_module_is_training(m);
    oar_module_train(m, false);
    oar_no_grad_begin();
    double sum_loss = 0, right = 0, count = 0;
    oar_status st = oar_loader_start_epoch(l, 0);
    oar_tensor *x, *y;
    while (st == OAR_OK && oar_loader_next(l, &x, &y, &st)) {
        oar_scope_begin();
        oar_tensor *logits = NULL, *lv = train_loss(m, d, x, y, 0.0, &logits); /* plain NLL */
        double v, n = (double)oar_numel(y);
        if (!lv || oar_item(lv, &v) != OAR_OK) {
            st = oar_last_status();
        } else {
            sum_loss += v * n;
            count += n;
            oar_tensor *hit = oar_cast(oar_eq(oar_argmax(logits, -1, false), y), OAR_F64);
            double h;
            if (oar_item(oar_sum(hit, NULL, 0, false), &h) == OAR_OK) right += h;
        }
        oar_scope_end();
        oar_release(x);
        oar_release(y);
    }
    oar_no_grad_end();
    oar_module_train(m, was_training);
    oar_loader_free(l);
    if (st != OAR_OK) return st;
    *loss = count ? sum_loss / count : 0;
    *accuracy = count ? right / count : 0;
    return OAR_OK;
}
