/* Shared pieces of `oar train`, `oar eval` and `oar sample`: data and model setup by name,
 * one evaluation pass, and the options they all read. */
#ifndef OAR_TRAIN_H
#define OAR_TRAIN_H

#include "oar.h"

typedef struct train_opts {
    const char *model, *data, *optimizer, *checkpoint, *metrics, *schedule;
    const char *profile, *profile_dir, *profile_steps; /* --profile timer|full, --profile-dir, A:B */
    const char *mode;  /* --mode eager|static: the training step run op by op, or compiled */
    const char *amp, *amp_dtype; /* --amp O1|O2, --amp-dtype bf16|fp16 (NULL: not given) */
    int epochs, threads, workers;
    int nproc;         /* --nproc N: data parallel over N ranks (0: as launched) */
    int ps_servers;    /* --ps-servers S: parameter-server ranks (word2vec, wide-deep; 0: 1 in a job) */
    const char *ps_mode; /* --ps-mode sync|async|geo (NULL: sync) */
    int geo_k;         /* --geo-k K: GEO's local steps between exchanges (0: 10) */
    int64_t batch, context, steps_limit;
    double lr, weight_decay, momentum, clip;
    double label_smoothing; /* --label-smoothing: of the training loss only */
    uint64_t seed;
    bool resume, quiet, check_nan_inf;
    char recipe[256]; /* the model's defaults, as train_recipe_apply describes them */
} train_opts;

/* Parses the flags shared by train/eval/sample and fills the options not given from the model's
 * recipe (train_recipe_apply); prints usage and returns false on error. */
bool train_parse(int argc, char **argv, train_opts *o);
/* Fills epochs, batch, optimizer, lr, weight decay and label smoothing not given (0, NULL or
 * negative) from the per-model table in train_recipe.c, and describes that recipe in desc. */
void train_recipe_apply(train_opts *o, char *desc, size_t size);

typedef struct train_data {
    oar_dataset *train, *test;
    const oar_zoo_info *info;
    bool language;      /* token windows; loss is per token */
    oar_transform norm; /* images: normalization applied by the loader */
    int n_transforms;
    char source[512];   /* where the data came from, for the log */
} train_data;

/* Finds the data for o->data ("fashion-mnist", "digits", or a text file) and checks that it
 * suits the model. */
oar_status train_data_open(const train_opts *o, train_data *d);
void train_data_close(train_data *d);
oar_module *train_model_create(const train_opts *o, const train_data *d);

/* Cross-entropy of the model on a batch, with label smoothing (0: none); logits are reshaped
 * for language models. */
oar_tensor *train_loss(oar_module *m, const train_data *d, oar_tensor *x, oar_tensor *y, double label_smoothing,
                       oar_tensor **logits);

/* Mean loss and accuracy over a dataset, in eval mode without gradients. */
oar_status train_evaluate(oar_module *m, const train_data *d, oar_dataset *ds, int64_t batch, double *loss,
                          double *accuracy);

/* train_dist.c: with --nproc N > 1 outside a job, runs this command under `oar launch` and
 * returns its status (-1: nothing to do, go on); train_dist_begin joins the job (any world
 * size), checks the options against it and silences ranks other than 0. */
int train_dist_relaunch(int argc, char **argv, int nproc);
oar_status train_dist_begin(train_opts *o, int *world, int *rank);

/* train_ps.c: the sparse-embedding models (word2vec, wide-deep), trained through the parameter
 * server; train_ps_run replaces the whole command for them. */
bool train_ps_model(const char *model);
int train_ps_run(train_opts *o, int argc, char **argv);

#endif
