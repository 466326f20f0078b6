/* Internal: checkpoints. The file is safetensors with "model.<path>" and "optim.<name>"
 * tensors and the metadata keys below; loading checks everything first (checkpoint_check.c),
 * collecting every problem, and changes nothing unless all is well. */
#ifndef OAR_CHECKPOINT_H
#define OAR_CHECKPOINT_H

#include "io/io.h"

#define OAR_CKPT_FORMAT "oar.checkpoint"
#define OAR_CKPT_VERSION "1"
/* metadata keys */
#define OAR_CKPT_K_FORMAT "format"
#define OAR_CKPT_K_VERSION "format_version"
#define OAR_CKPT_K_OAR "oar_version"
#define OAR_CKPT_K_STEP "step"
#define OAR_CKPT_K_SEED "rng_seed"
#define OAR_CKPT_K_OFFSET "rng_offset"
#define OAR_CKPT_K_OPTIM "optim_kind"     /* absent when saved without an optimizer */
#define OAR_CKPT_K_OSTEPS "optim_steps"
#define OAR_CKPT_K_OPARAMS "optim_params"  /* how many parameters the optimizer updates */

const char *oar_ckpt_optim_name(oar_optim_kind kind); /* "sgd", "adam", ... */
/* Strict decimal parsing: the whole string, no sign for unsigned, no overflow. */
bool oar_ckpt_parse_u64(const char *s, uint64_t *out);
bool oar_ckpt_parse_i64(const char *s, int64_t *out);

/* Problems found while checking a checkpoint against a module and an optimizer. */
typedef enum oar_ckpt_problem_kind { OAR_CKPT_MISSING, OAR_CKPT_UNEXPECTED, OAR_CKPT_MISMATCH, OAR_CKPT_OTHER } oar_ckpt_problem_kind;
typedef struct oar_ckpt_problems {
    char **items;
    int n, cap;
    int count[4];  /* by kind */
    bool oom;
} oar_ckpt_problems;
void oar_ckpt_problem(oar_ckpt_problems *p, oar_ckpt_problem_kind kind, const char *fmt, ...) OAR_PRINTF(3, 4);
/* Sets one error message listing the counts and as many problems as fit; returns its status. */
oar_status oar_ckpt_problems_report(const oar_ckpt_problems *p, const char *path);
void oar_ckpt_problems_free(oar_ckpt_problems *p);

/* Everything the load needs, parsed from the metadata by oar_ckpt_check. */
typedef struct oar_ckpt_meta {
    int64_t step;
    oar_rng_state rng;
    bool has_optim;
    int64_t optim_steps;
    bool has_sched;               /* a scheduler was given and the file's state for it parsed */
    oar_sched_state sched;
    double *sched_base, *sched_lr; /* one per group (one allocation, at sched_base) */
} oar_ckpt_meta;
/* Checks d against m, o and s (o and s may be NULL): metadata, names, shapes, dtypes, optimizer
 * kind and state, scheduler kind and state. Problems go to p; the return is OAR_OK unless
 * something failed outright (OOM). meta->sched_base must be freed afterwards. */
oar_status oar_ckpt_check(oar_tensor_dict *d, oar_module *m, oar_optimizer *o, oar_scheduler *s,
                          oar_ckpt_meta *meta, oar_ckpt_problems *p);

/* ---- the scheduler (checkpoint_sched.c), as metadata under these keys */
#define OAR_CKPT_N_SCHED 6
extern const char *const oar_ckpt_sched_keys[OAR_CKPT_N_SCHED];
/* The values for oar_ckpt_sched_keys (each oar_malloc'd, freed by the caller even on error). */
oar_status oar_ckpt_sched_meta(oar_scheduler *s, char *vals[OAR_CKPT_N_SCHED]);
void oar_ckpt_sched_check(oar_tensor_dict *d, oar_scheduler *s, oar_ckpt_meta *meta, oar_ckpt_problems *p);
void oar_ckpt_sched_apply(oar_scheduler *s, const oar_ckpt_meta *meta);

#endif
