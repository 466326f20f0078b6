/* Internal view of optimizers: groups, per-parameter state slots, the fused update kernels. */
#ifndef OAR_OPTIM_H
#define OAR_OPTIM_H

#include "ops/optim_layout.h"
#include "tensor/tensor.h"


/* The f64 "hyper" tensor of a parameter, input of the optimizer_update op: its group's options
 * (refreshed from them before every step, eager or compiled) and SGD's fresh-buffer flag (set
 * when the momentum buffer is made, cleared by the update that fills it). Booleans are 0 or 1;
 * KIND must match the op's kind attribute. */
typedef enum oar_hyper {
    OAR_HYPER_KIND = 0,
    OAR_HYPER_LR,
    OAR_HYPER_MOMENTUM,
    OAR_HYPER_DAMPENING,
    OAR_HYPER_NESTEROV,
    OAR_HYPER_WEIGHT_DECAY,
    OAR_HYPER_BETA1,
    OAR_HYPER_BETA2,
    OAR_HYPER_EPS,
    OAR_HYPER_AMSGRAD,
    OAR_HYPER_ALPHA,
    OAR_HYPER_CENTERED,
    OAR_HYPER_LR_DECAY,
    OAR_HYPER_INITIAL_ACCUMULATOR,
    OAR_HYPER_FRESH_MOMENTUM, /* SGD: the momentum buffer is still to be filled with d_p */
    OAR_HYPER_SKIP,           /* set by amp_skip_step (a loss scaler found inf/nan): the next update
                                 of this parameter changes nothing and clears the flag */
    /* options, as the first block (after the two flags, so older layouts keep their places) */
    OAR_HYPER_MAXIMIZE,
    OAR_HYPER_RHO,
    OAR_HYPER_MOMENTUM_DECAY,
    OAR_HYPER_LAMBD,
    OAR_HYPER_T0,
    OAR_HYPER_ETAMINUS,
    OAR_HYPER_ETAPLUS,
    OAR_HYPER_STEP_SIZE_MIN,
    OAR_HYPER_STEP_SIZE_MAX,
    OAR_HYPER_COUNT
} oar_hyper;

typedef struct oar_optim_param {
    oar_tensor *t;                   /* borrowed */
    int group;
    oar_tensor *slot[OAR_SLOT_COUNT];
    char name[OAR_SLOT_COUNT][40];   /* "<index>.<slot>" once the slot exists */
    oar_tensor *hyper;               /* f64 [OAR_HYPER_COUNT], made with the optimizer */
    /* during a step */
    bool made_momentum;              /* SGD: this step made the buffer (dropped if the step fails) */
    oar_tensor *grad_copy;           /* a contiguous copy of a strided gradient, or NULL */
} oar_optim_param;

/* The steps one traced program makes (the user of its run hooks): the optimizer's step counter
 * advances by `steps` after every run. Owned by the optimizer. */
typedef struct oar_optim_traced {
    struct oar_optimizer *o; /* NULL once the optimizer is freed */
    uint64_t trace;  /* the trace that recorded the steps */
    int64_t steps;   /* oar_optimizer_step calls it recorded */
    int refs;        /* the optimizer's and the program's run hooks' */
} oar_optim_traced;
/* Drops one hold on r (step.c); the last frees it. */
void oar_optim_traced_release(oar_optim_traced *r);
/* A new hold on the record of the trace running now, made by a step it recorded (NULL if none):
 * a loss scaler that skips steps in-program takes them off the count after each run. */
oar_optim_traced *oar_optim_traced_hold(oar_optimizer *o);

/* The state source comes first: the compiler reads opts.optimizer as its source (graph/jit.c). */
struct oar_optimizer {
    oar_state_source source;
    oar_optim_kind kind;
    oar_optim_opts **groups;         /* each allocated alone, so user pointers stay valid */
    int n_groups;
    oar_optim_param *params;
    int n_params;
    int64_t steps;
    /* flat (param, slot) list of existing state, rebuilt when state_dirty */
    int *state_index;
    int n_state, cap_state;
    bool state_dirty;
    oar_optim_traced **traced;       /* one per trace that recorded a step */
    int n_traced;
};

struct oar_scheduler {
    oar_optimizer *o;      /* borrowed */
    oar_sched_opts opts;   /* resolved; milestones sorted */
    int64_t t;
    double *base;          /* per group, as first seen */
    int n_seen;
    double best;           /* plateau */
    int64_t bad_steps;
};

/* ---- schedulers (scheduler.c) */
const char *oar_sched_name(oar_sched_kind k); /* torch's class name: "StepLR", ... */
/* Records the base lr of groups added since the scheduler last looked. */
oar_status oar_sched_see_groups(oar_scheduler *s);

/* ---- options (options.c) */
const char *oar_optim_kind_name(oar_optim_kind kind);  /* "SGD", "Adam", ...; "optimizer" if bad */
/* Fills zero fields with the kind's defaults (unless explicit_values) and checks the result.
 * creating: at construction SGD's lr must be > 0 (it has no default). */
oar_status oar_optim_resolve(const oar_optim_opts *in, oar_optim_opts *out, bool creating);
oar_status oar_optim_check(const oar_optim_opts *o, bool creating);
/* Whether a slot is used by a parameter under these options. */
bool oar_optim_slot_used(const oar_optim_opts *o, oar_slot slot);
/* The slots of the kinds whose slots do not depend on options (Adadelta to Rprop): all needed. */
bool oar_optim_kind_slot(oar_optim_kind kind, oar_slot s);
/* A slot's value before the first update: 0, Adagrad's initial accumulator, 1 for NAdam's
 * mu_product and ASGD's mu, lr for ASGD's eta and Rprop's step sizes. */
double oar_optim_slot_init(const oar_optim_opts *o, oar_slot s);
/* Kinds with no CUDA kernels (their optimizers refuse parameters off the CPU). */
bool oar_optim_kind_cpu_only(oar_optim_kind kind);
/* The dtype and rank of a slot for a parameter (scalars: rank 0). */
static inline oar_dtype oar_optim_slot_dtype(int s, oar_dtype param) {
    return s == OAR_SLOT_STEP ? OAR_I64 : oar_slot_is_scalar(s) ? OAR_F32 : param;
}

/* ---- state (state.c) */
/* Makes every slot the options use that does not exist yet: zeros (Adagrad's sum: the initial
 * accumulator). SGD's momentum buffer is filled by the first update that runs after it is made:
 * making it sets the parameter's OAR_HYPER_FRESH_MOMENTUM (and *made_momentum). */
oar_status oar_optim_ensure_state(oar_optimizer *o, int param, bool *made_momentum);
/* Puts a parameter's state back to what it is before its first update, in place (the slot
 * tensors stay, so compiled steps bound to them keep working): torch's load_state_dict with no
 * state for the parameter. */
void oar_optim_reset_state(oar_optimizer *o, int param);
/* Whether the parameter's state is as before its first update (no slots, step 0, or SGD's
 * buffer not filled yet): such state is not saved in checkpoints. */
bool oar_optim_state_is_empty(const oar_optimizer *o, int param);
/* Writes a group's options into a hyper tensor's data (FRESH_MOMENTUM is left alone). */
void oar_optim_write_hyper(double *h, const oar_optim_opts *g);
/* The options a hyper tensor holds, for kind (no check). */
void oar_optim_read_hyper(const double *h, oar_optim_kind kind, oar_optim_opts *out);

/* ---- ops (update_op.c, norm_op.c) */
/* optimizer_update on one parameter: inputs param, grad, hyper, then the slots in oar_slot order
 * (NULL where unused). Eager: runs now; traced: recorded. */
oar_status oar_optim_update_call(oar_optim_kind kind, oar_tensor *param, oar_tensor *grad, oar_tensor *hyper,
                                 oar_tensor *const slot[OAR_SLOT_COUNT]);
/* vector_norm: the p-norm of all of x's elements, as an f64 scalar (tracked in the scope). */
oar_tensor *oar_optim_vector_norm(oar_tensor *x, double p);

/* ---- fused updates (update_f32.c, update_f64.c from update_impl.h) */
typedef struct oar_optim_update {
    const oar_optim_opts *o;
    int64_t n;                  /* elements */
    void *p;                    /* parameter data */
    const void *g;              /* gradient data */
    void *s[OAR_SLOT_COUNT];    /* slot data (NULL when unused) */
    int64_t t;                  /* the parameter's step count after this update's increment */
    bool fresh_momentum;        /* SGD: the momentum buffer is filled with d_p on this step */
    bool skip;                  /* OAR_HYPER_SKIP was set: n is 0 and commit only clears the flag */
    /* the scalar slots' values after this update (NAdam's mu_product, ASGD's eta and mu),
     * computed on the host by _fill, stored by _commit; mu_product's new value is also what
     * NAdam's loop uses */
    float mu_product, eta, mu;
} oar_optim_update;

void oar_optim_update_f32(const oar_optim_update *u);
void oar_optim_update_f64(const oar_optim_update *u);

/* One optimizer_update, split so several can be checked before any writes (update_op.c): _read
 * checks the hyper tensor in[2] against kind and the slots passed (in: the op's inputs, param,
 * grad, hyper, then the slots) and fills u (pointing to *o) with the step count this update
 * makes, writing nothing; _commit, after the loops ran, stores the step count, clears SGD's
 * fresh flag and bumps param's version. */
oar_status oar_optim_update_read(oar_optim_kind kind, oar_tensor *const *in, oar_optim_opts *o, oar_optim_update *u);
/* The part of _read after the checks: u from the tensors, for options *o already checked
 * against them (same kind, same slots passed). */
void oar_optim_update_fill(oar_tensor *const *in, const oar_optim_opts *o, oar_optim_update *u);
void oar_optim_update_commit(const oar_optim_update *u, oar_tensor *const *in);

/* What one update loop reads: data pointers and scalars (as double; each loop rounds them to
 * its element type, as torch rounds a Python scalar to the tensor's dtype). The meaning of
 * a, b, c and the scalars depends on the kind; see update_impl.h. */
typedef struct oar_optim_ctx {
    void *p;
    const void *g;
    void *a, *b, *c;
    double lr_neg, wd, k1, k1c, k2, k2c, eps, scale, bc1, bc2, lr, extra;
    bool wd_on, flag1, flag2, flag3;
    int64_t n, block;
    double *sum_p2, *sum_u2; /* LAMB: per-block partial squared norms */
} oar_optim_ctx;

/* The fixed order in which 8 lanes of a sum are combined. */
static inline double oar_optim_sum8(const double a[8]) {
    double t0 = a[0] + a[4], t1 = a[1] + a[5], t2 = a[2] + a[6], t3 = a[3] + a[7];
    return (t0 + t1) + (t2 + t3);
}

/* AVX2 versions of the f32 loops whose square roots and divisions the compiler leaves scalar,
 * and of SGD's, which it leaves 4-wide (update_avx2.c). They use the same operations in the
 * same order (no FMA), so they give the same bits as the portable loops, whichever handles an
 * element. */
#if defined(__x86_64__) && defined(__GNUC__)
#define OAR_OPTIM_AVX2 1
bool oar_optim_use_avx2(void);
void oar_optim_sgd_f32_avx2(void *ctx, int64_t begin, int64_t end);
void oar_optim_adam_f32_avx2(void *ctx, int64_t begin, int64_t end);
void oar_optim_rmsprop_f32_avx2(void *ctx, int64_t begin, int64_t end);
void oar_optim_adagrad_f32_avx2(void *ctx, int64_t begin, int64_t end);
void oar_optim_adadelta_f32_avx2(void *ctx, int64_t begin, int64_t end);
void oar_optim_nadam_f32_avx2(void *ctx, int64_t begin, int64_t end);
void oar_optim_radam_f32_avx2(void *ctx, int64_t begin, int64_t end);
void oar_optim_lamb_moments_f32_avx2(void *ctx, int64_t block_begin, int64_t block_end);
void oar_optim_lamb_apply_f32_avx2(void *ctx, int64_t begin, int64_t end);
#endif

/* Elements per thread chunk: large enough that handing work to the pool is noise. */
#define OAR_OPTIM_GRAIN 32768
/* Reductions (LAMB's norms, clipping) sum fixed blocks, so results do not depend on the
 * number of threads: at most OAR_OPTIM_MAX_BLOCKS blocks of at least OAR_OPTIM_MIN_BLOCK. */
#define OAR_OPTIM_MAX_BLOCKS 64
#define OAR_OPTIM_MIN_BLOCK 16384
static inline int64_t oar_optim_block_size(int64_t n) {
    int64_t b = (n + OAR_OPTIM_MAX_BLOCKS - 1) / OAR_OPTIM_MAX_BLOCKS;
    return b < OAR_OPTIM_MIN_BLOCK ? OAR_OPTIM_MIN_BLOCK : b;
}

/* One parameter's update made ready to run over ranges of its elements (update_impl.h), so
 * several parameters can share one thread-pool dispatch (optimizer_update_multi): `run` over
 * elements [0, n) of c. LAMB first runs `moments` over blocks [0, n_blocks) of c.block
 * elements, filling sum_p2 and sum_u2, then oar_optim_lamb_trust sets its step; `run` then
 * applies it. Whatever the split, each element gets the same arithmetic as
 * oar_optim_update_f32/f64, which run a plan themselves. LAMB's per-block sums go to `sums`
 * (2 * OAR_OPTIM_MAX_BLOCKS doubles, kept by the caller; NULL for other kinds), so a plan
 * stays small for the kinds that need none. */
typedef struct oar_optim_plan {
    oar_optim_ctx c;
    void (*run)(void *ctx, int64_t begin, int64_t end);
    void (*moments)(void *ctx, int64_t block_begin, int64_t block_end); /* LAMB only, else NULL */
    int64_t n_blocks;
} oar_optim_plan;

void oar_optim_plan_f32(const oar_optim_update *u, oar_optim_plan *pl, double *sums);
void oar_optim_plan_f64(const oar_optim_update *u, oar_optim_plan *pl, double *sums);
/* LAMB, after `moments` ran over every block: the trust ratio ||p|| / ||u|| scales the step. */
void oar_optim_lamb_trust(oar_optim_plan *pl, double lr);

/* ---- optimizer_update_multi (update_multi_op.c): several parameters' updates as one op,
 * inputs laid out as ops/optim_layout.h says (NULL after the last parameter's state).
 * Attributes: kind, slots. */
/* Parameter i's inputs in optimizer_update's layout (param, grad, hyper, the 8 slots). */
void oar_optim_multi_single(oar_tensor *const *in, int n_in, int64_t slots, int i, oar_tensor *one[3 + OAR_SLOT_COUNT]);
/* Every parameter's oar_optim_update_read (o, u: one per parameter), nothing written; then,
 * after the loops, every parameter's oar_optim_update_commit. */
oar_status oar_optim_multi_read(oar_tensor *const *in, int n_in, oar_optim_kind kind, int64_t slots, oar_optim_opts *o,
                                oar_optim_update *u);
void oar_optim_multi_commit(oar_tensor *const *in, int n_in, int64_t slots, const oar_optim_update *u);

#endif
