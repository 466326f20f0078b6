/* Sweep cases: the optimizer ops (src/optim/update_op.c, src/optim/norm_op.c).
 *
 * optimizer_update inputs: param; grad; hyper; then the slots step; momentum_buffer; exp_avg;
 * exp_avg_sq; max_exp_avg_sq; square_avg; grad_avg; sum; acc_delta; exp_inf; mu_product; eta;
 * mu; ax; prev; step_size. The hyper tensor (f64 [25]) holds, in order: kind, lr, momentum,
 * dampening, nesterov, weight_decay, beta1, beta2, eps, amsgrad, alpha, centered, lr_decay,
 * initial_accumulator, fresh_momentum, skip, maximize, rho, momentum_decay, lambd, t0,
 * etaminus, etaplus, step_size_min, step_size_max. The sweep compares what the
 * update writes (param, state, the hyper's fresh flag) between the reference and the eager
 * path with a non-contiguous grad and hyper. */
#include "optim/optim.h"
#include "sweep.h"

#include <math.h>

/*                  kind lr    mom damp nest wd   b1  b2    eps   ams alpha cen lr_decay init fresh */
#define H_SGD       "c0,0.1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0f64:25"
#define H_SGD_M     "c0,0.1,0.9,0,0,0.01,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0f64:25"
#define H_SGD_FRESH "c0,0.1,0.9,0,0,0,0,0,0,0,0,0,0,0,1,0,0,0,0,0,0,0,0,0,0f64:25"
#define H_SGD_NEST  "c0,0.05,0.8,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0f64:25"
#define H_SGD_DAMP  "c0,0.1,0.9,0.5,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0f64:25"
#define H_ADAM      "c1,0.001,0,0,0,0,0.9,0.999,1e-08,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0f64:25"
#define H_ADAM_L2   "c1,0.01,0,0,0,0.1,0.8,0.99,1e-06,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0f64:25"
#define H_ADAMW     "c2,0.001,0,0,0,0.01,0.9,0.999,1e-08,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0f64:25"
#define H_ADAMW_AMS "c2,0.01,0,0,0,0.1,0.9,0.999,1e-08,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0f64:25"
#define H_RMS       "c3,0.01,0,0,0,0,0,0,1e-08,0,0.99,0,0,0,0,0,0,0,0,0,0,0,0,0,0f64:25"
#define H_RMS_CM    "c3,0.01,0.9,0,0,0.01,0,0,1e-08,0,0.5,1,0,0,0,0,0,0,0,0,0,0,0,0,0f64:25"
#define H_ADAGRAD   "c4,0.01,0,0,0,0.01,0,0,1e-10,0,0,0,0.01,0,0,0,0,0,0,0,0,0,0,0,0f64:25"
#define H_LAMB      "c5,0.001,0,0,0,0.01,0.9,0.999,1e-06,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0f64:25"
/* Adadelta to Rprop; after skip: maximize rho momentum_decay lambd t0 etaminus etaplus step_size_min/max */
#define H_ADADELTA     "c6,0.5,0,0,0,0.01,0,0,1e-06,0,0,0,0,0,0,0,1,0.8,0,0,0,0,0,0,0f64:25"
#define H_ADADELTA_DEF "c6,1,0,0,0,0,0,0,1e-06,0,0,0,0,0,0,0,0,0.9,0,0,0,0,0,0,0f64:25"
#define H_ADAMAX       "c7,0.002,0,0,0,0.01,0.9,0.999,1e-08,0,0,0,0,0,0,0,1,0,0,0,0,0,0,0,0f64:25"
#define H_NADAM        "c8,0.002,0,0,0,0.01,0.9,0.999,1e-08,0,0,0,0,0,0,0,0,0,0.004,0,0,0,0,0,0f64:25"
#define H_RADAM        "c9,0.001,0,0,0,0.01,0.9,0.9,1e-08,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0f64:25"
#define H_ASGD         "c10,0.01,0,0,0,0.01,0,0,0,0,0.75,0,0,0,0,0,1,0,0,0.0001,3,0,0,0,0f64:25"
#define H_RPROP        "c11,0.01,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,0,0,0,0,0.5,1.2,0.3,1.5f64:25"
/* skip set (a loss scaler found inf/nan in-program): the update changes nothing, clears the flag */
#define H_SGD_SKIP  "c0,0.1,0.9,0,0,0.01,0,0,0,0,0,0,0,0,1,1,0,0,0,0,0,0,0,0,0f64:25"
#define H_ADAM_SKIP "c1,0.01,0,0,0,0.1,0.8,0.99,1e-06,1,0,0,0,0,0,1,0,0,0,0,0,0,0,0,0f64:25"
#define H_LAMB_SKIP "c5,0.001,0,0,0,0.01,0.9,0.999,1e-06,0,0,0,0,0,0,1,0,0,0,0,0,0,0,0,0f64:25"
#define NONE7 "none;none;none;none;none;none;none"
#define NONE8 ";none;none;none;none;none;none;none;none" /* Adadelta to Rprop's slots */
#define STEP "i0_5:"

const sweep_case sweep_cases_optim[] = {
    /* SGD: plain, momentum and weight decay, a buffer filled on its first update, nesterov, dampening */
    {"optimizer_update", "n:2x3;n:2x3;" H_SGD ";none;" NONE7 NONE8, "kind=0"},
    {"optimizer_update", "n:2x3;n:2x3;" H_SGD_M ";none;n:2x3;none;none;none;none;none;none" NONE8, "kind=0"},
    {"optimizer_update", "n:5;n:5;" H_SGD_FRESH ";none;n:5;none;none;none;none;none;none" NONE8, "kind=0"},
    {"optimizer_update", "n:3x1x2;n:3x1x2;" H_SGD_NEST ";none;n:3x1x2;none;none;none;none;none;none" NONE8, "kind=0"},
    {"optimizer_update", "n:;n:;" H_SGD_DAMP ";none;n:;none;none;none;none;none;none" NONE8, "kind=0"},
    {"optimizer_update", "n:0x3;n:0x3;" H_SGD_M ";none;n:0x3;none;none;none;none;none;none" NONE8, "kind=0"},
    {"optimizer_update", "n:70001;n:70001;" H_SGD_M ";none;n:70001;none;none;none;none;none;none" NONE8, "kind=0"},
    /* Adam, AdamW: L2 and decoupled decay, amsgrad; sizes past the threads' grain and the AVX2 tail */
    {"optimizer_update", "n:2x3;n:2x3;" H_ADAM ";" STEP ";none;n:2x3;p:2x3;none;none;none;none" NONE8, "kind=1"},
    {"optimizer_update", "n:4x5;n:4x5;" H_ADAM_L2 ";" STEP ";none;n:4x5;p:4x5;p:4x5;none;none;none" NONE8, "kind=1"},
    {"optimizer_update", "n:7;n:7;" H_ADAMW ";" STEP ";none;n:7;p:7;none;none;none;none" NONE8, "kind=2"},
    {"optimizer_update", "n:3x3;n:3x3;" H_ADAMW_AMS ";" STEP ";none;n:3x3;p:3x3;p:3x3;none;none;none" NONE8, "kind=2"},
    {"optimizer_update", "n:;n:;" H_ADAM ";" STEP ";none;n:;p:;none;none;none;none" NONE8, "kind=1"},
    {"optimizer_update", "n:0;n:0;" H_ADAMW ";" STEP ";none;n:0;p:0;none;none;none;none" NONE8, "kind=2"},
    {"optimizer_update", "n:70003;n:70003;" H_ADAMW_AMS ";" STEP ";none;n:70003;p:70003;p:70003;none;none;none" NONE8,
     "kind=2"},
    /* RMSprop: plain; centered with momentum and weight decay */
    {"optimizer_update", "n:2x3;n:2x3;" H_RMS ";" STEP ";none;none;none;none;p:2x3;none;none" NONE8, "kind=3"},
    {"optimizer_update", "n:4x3;n:4x3;" H_RMS_CM ";" STEP ";n:4x3;none;none;none;p:4x3;u:4x3;none" NONE8, "kind=3"},
    {"optimizer_update", "n:33333;n:33333;" H_RMS_CM ";" STEP ";n:33333;none;none;none;p:33333;u:33333;none" NONE8,
     "kind=3"},
    /* Adagrad with lr decay */
    {"optimizer_update", "n:6;n:6;" H_ADAGRAD ";" STEP ";none;none;none;none;none;none;p:6" NONE8, "kind=4"},
    {"optimizer_update", "n:40001;n:40001;" H_ADAGRAD ";" STEP ";none;none;none;none;none;none;p:40001" NONE8, "kind=4"},
    /* skipped updates */
    {"optimizer_update", "n:5;n:5;" H_SGD_SKIP ";none;n:5;none;none;none;none;none;none" NONE8, "kind=0"},
    {"optimizer_update", "n:4x5;n:4x5;" H_ADAM_SKIP ";" STEP ";none;n:4x5;p:4x5;p:4x5;none;none;none" NONE8, "kind=1"},
    {"optimizer_update", "n:40000;n:40000;" H_LAMB_SKIP ";" STEP ";none;n:40000;p:40000;none;none;none;none" NONE8, "kind=5"},
    /* LAMB: one block, several blocks (its norms are summed per block), a zero-size tensor */
    {"optimizer_update", "n:2x3;n:2x3;" H_LAMB ";" STEP ";none;n:2x3;p:2x3;none;none;none;none" NONE8, "kind=5"},
    {"optimizer_update", "n:40000;n:40000;" H_LAMB ";" STEP ";none;n:40000;p:40000;none;none;none;none" NONE8, "kind=5"},
    {"optimizer_update", "n:0x2;n:0x2;" H_LAMB ";" STEP ";none;n:0x2;p:0x2;none;none;none;none" NONE8, "kind=5"},
    /* Adadelta with weight decay and maximize; defaults */
    {"optimizer_update", "n:2x3;n:2x3;" H_ADADELTA ";" STEP ";"
     "none;none;none;none;p:2x3;none;none;p:2x3;none;none;none;none;none;none;none", "kind=6"},
    {"optimizer_update", "n:70001;n:70001;" H_ADADELTA ";" STEP ";"
     "none;none;none;none;p:70001;none;none;p:70001;none;none;none;none;none;none;none", "kind=6"},
    {"optimizer_update", "n:5;n:5;" H_ADADELTA_DEF ";" STEP ";"
     "none;none;none;none;p:5;none;none;p:5;none;none;none;none;none;none;none", "kind=6"},
    /* Adamax with weight decay and maximize */
    {"optimizer_update", "n:4x5;n:4x5;" H_ADAMAX ";" STEP ";"
     "none;n:4x5;none;none;none;none;none;none;p:4x5;none;none;none;none;none;none", "kind=7"},
    {"optimizer_update", "n:40001;n:40001;" H_ADAMAX ";" STEP ";"
     "none;n:40001;none;none;none;none;none;none;p:40001;none;none;none;none;none;none", "kind=7"},
    /* NAdam: mu_product an f32 scalar */
    {"optimizer_update", "n:3x3;n:3x3;" H_NADAM ";" STEP ";"
     "none;n:3x3;p:3x3;none;none;none;none;none;none;c0.8f32:;none;none;none;none;none", "kind=8"},
    {"optimizer_update", "n:40001;n:40001;" H_NADAM ";" STEP ";"
     "none;n:40001;p:40001;none;none;none;none;none;none;c0.8f32:;none;none;none;none;none", "kind=8"},
    /* RAdam before (steps 1-5) and after (10-19) rectification */
    {"optimizer_update", "n:2x3;n:2x3;" H_RADAM ";" STEP ";"
     "none;n:2x3;p:2x3;none;none;none;none;none;none;none;none;none;none;none;none", "kind=9"},
    {"optimizer_update", "n:4x3;n:4x3;" H_RADAM ";i10_20:;"
     "none;n:4x3;p:4x3;none;none;none;none;none;none;none;none;none;none;none;none", "kind=9"},
    /* ASGD averaging (mu < 1) and copying (mu 1), with maximize and weight decay */
    {"optimizer_update", "n:2x3;n:2x3;" H_ASGD ";" STEP ";"
     "none;none;none;none;none;none;none;none;none;none;pf32:;c0.5f32:;n:2x3;none;none", "kind=10"},
    {"optimizer_update", "n:40001;n:40001;" H_ASGD ";" STEP ";"
     "none;none;none;none;none;none;none;none;none;none;pf32:;c0.5f32:;n:40001;none;none", "kind=10"},
    {"optimizer_update", "n:7;n:7;" H_ASGD ";" STEP ";"
     "none;none;none;none;none;none;none;none;none;none;pf32:;c1f32:;n:7;none;none", "kind=10"},
    /* Rprop: signs of g * prev both ways, step sizes clamped */
    {"optimizer_update", "n:4x5;n:4x5;" H_RPROP ";" STEP ";"
     "none;none;none;none;none;none;none;none;none;none;none;none;none;n:4x5;p:4x5", "kind=11"},
    {"optimizer_update", "n:40001;n:40001;" H_RPROP ";" STEP ";"
     "none;none;none;none;none;none;none;none;none;none;none;none;none;n:40001;p:40001", "kind=11"},
    /* vector_norm: every p, empty and 0-d tensors, sizes past one block */
    {"vector_norm", "n:3x4", "p=2"},
    {"vector_norm", "n:2x3x2", "p=1"},
    {"vector_norm", "u:3x4", "p=inf"},
    {"vector_norm", "p:5", "p=3"},
    {"vector_norm", "p:2x2", "p=0.5"},
    {"vector_norm", "n:", "p=2"},
    {"vector_norm", "n:0x3", "p=2", SWEEP_NO_GRAD},
    {"vector_norm", "n:100003", "p=2", SWEEP_NO_GRAD},
    {"vector_norm", "n:100003", "p=inf", SWEEP_NO_GRAD},
    {"vector_norm", "n:50000", "p=1.5", SWEEP_NO_GRAD},
    {0},
};

/* ---- bad inputs */
static oar_tensor *t2(int64_t a, int64_t b, oar_dtype dt) {
    int64_t s[2] = {a, b};
    return oar_zeros(s, 2, dt);
}

static oar_tensor *hyper(oar_optim_kind kind, double lr, double momentum) {
    int64_t n = OAR_HYPER_COUNT;
    oar_tensor *h = oar_zeros(&n, 1, OAR_F64);
    oar_optim_opts o = oar_optim_defaults(kind);
    o.lr = lr;
    o.momentum = momentum;
    oar_optim_write_hyper((double *)oar_data(h), &o);
    return h;
}

static bool update(oar_optim_kind kind, oar_tensor *p, oar_tensor *g, oar_tensor *h, int slot, oar_tensor *st,
                   int slot2, oar_tensor *st2) {
    oar_tensor *slots[OAR_SLOT_COUNT] = {0};
    if (slot >= 0) slots[slot] = st;
    if (slot2 >= 0) slots[slot2] = st2;
    return oar_optim_update_call(kind, p, g, h, slots) == OAR_OK;
}

static oar_tensor *step0(void) { return oar_zeros(NULL, 0, OAR_I64); }

static bool bad_grad_shape(void) {
    return update(OAR_OPTIM_SGD, t2(2, 3, OAR_F32), t2(3, 2, OAR_F32), hyper(OAR_OPTIM_SGD, 0.1, 0), -1, NULL, -1, NULL);
}
static bool bad_grad_dtype(void) {
    return update(OAR_OPTIM_SGD, t2(2, 3, OAR_F32), t2(2, 3, OAR_F64), hyper(OAR_OPTIM_SGD, 0.1, 0), -1, NULL, -1, NULL);
}
static bool bad_param_dtype(void) {
    return update(OAR_OPTIM_SGD, t2(2, 3, OAR_F16), t2(2, 3, OAR_F16), hyper(OAR_OPTIM_SGD, 0.1, 0), -1, NULL, -1, NULL);
}
static bool bad_hyper(void) {
    int64_t n = 4;
    return update(OAR_OPTIM_SGD, t2(2, 3, OAR_F32), t2(2, 3, OAR_F32), oar_zeros(&n, 1, OAR_F64), -1, NULL, -1, NULL);
}
static bool bad_missing_slot(void) {
    return update(OAR_OPTIM_ADAM, t2(2, 3, OAR_F32), t2(2, 3, OAR_F32), hyper(OAR_OPTIM_ADAM, 0.1, 0), OAR_SLOT_STEP,
                  step0(), OAR_SLOT_EXP_AVG_SQ, t2(2, 3, OAR_F32));
}
static bool bad_unused_slot(void) {
    return update(OAR_OPTIM_SGD, t2(2, 3, OAR_F32), t2(2, 3, OAR_F32), hyper(OAR_OPTIM_SGD, 0.1, 0), OAR_SLOT_EXP_AVG,
                  t2(2, 3, OAR_F32), -1, NULL);
}
static bool bad_step_dtype(void) {
    return update(OAR_OPTIM_ADAGRAD, t2(2, 3, OAR_F32), t2(2, 3, OAR_F32), hyper(OAR_OPTIM_ADAGRAD, 0.1, 0),
                  OAR_SLOT_STEP, oar_zeros(NULL, 0, OAR_F32), OAR_SLOT_SUM, t2(2, 3, OAR_F32));
}
static bool bad_slot_shape(void) {
    return update(OAR_OPTIM_ADAGRAD, t2(2, 3, OAR_F32), t2(2, 3, OAR_F32), hyper(OAR_OPTIM_ADAGRAD, 0.1, 0),
                  OAR_SLOT_STEP, step0(), OAR_SLOT_SUM, t2(3, 2, OAR_F32));
}
static bool bad_param_strided(void) {
    oar_tensor *p = oar_transpose(t2(3, 2, OAR_F32), 0, 1);
    return update(OAR_OPTIM_SGD, p, t2(2, 3, OAR_F32), hyper(OAR_OPTIM_SGD, 0.1, 0), -1, NULL, -1, NULL);
}
static bool bad_kind(void) {
    oar_tensor *in[3 + OAR_SLOT_COUNT] = {t2(2, 3, OAR_F32), t2(2, 3, OAR_F32), hyper(OAR_OPTIM_SGD, 0.1, 0)}, *out[1];
    oar_attr a = oar_attr_int(19);
    int n = 1;
    return oar_op_call(OAR_OP_optimizer_update, in, 3 + OAR_SLOT_COUNT, &a, out, &n) == OAR_OK;
}
/* found when the kernel runs: the values in hyper */
static bool bad_lr(void) {
    return update(OAR_OPTIM_SGD, t2(2, 3, OAR_F32), t2(2, 3, OAR_F32), hyper(OAR_OPTIM_SGD, -1, 0), -1, NULL, -1, NULL);
}
static bool bad_hyper_kind(void) {
    return update(OAR_OPTIM_ADAGRAD, t2(2, 3, OAR_F32), t2(2, 3, OAR_F32), hyper(OAR_OPTIM_SGD, 0.1, 0),
                  OAR_SLOT_STEP, step0(), OAR_SLOT_SUM, t2(2, 3, OAR_F32));
}
static bool bad_momentum_without_buffer(void) {
    return update(OAR_OPTIM_SGD, t2(2, 3, OAR_F32), t2(2, 3, OAR_F32), hyper(OAR_OPTIM_SGD, 0.1, 0.9), -1, NULL, -1,
                  NULL);
}
static bool bad_norm_int(void) {
    int64_t s = 3;
    return oar_optim_vector_norm(oar_zeros(&s, 1, OAR_I64), 2) != NULL;
}
static bool bad_norm_p(void) { return oar_optim_vector_norm(t2(2, 3, OAR_F32), 0) != NULL; }

const sweep_bad sweep_bad_optim[] = {
    {"optimizer_update with a grad of another shape", bad_grad_shape,
     "optimizer_update: expected grad of param's shape [2, 3], got [3, 2]"},
    {"optimizer_update with a grad of another dtype", bad_grad_dtype,
     "optimizer_update: expected grad to be f32 like param, got f64"},
    {"optimizer_update of an f16 param", bad_param_dtype, "optimizer_update: expected param to be f32 or f64, got f16"},
    {"optimizer_update with a short hyper tensor", bad_hyper,
     "optimizer_update: expected hyper to be f64 [25] (the group's options), got f64 [4]"},
    {"optimizer_update of Adam without exp_avg", bad_missing_slot,
     "optimizer_update: expected the exp_avg state (input 5) for Adam, got none"},
    {"optimizer_update of SGD with an exp_avg", bad_unused_slot,
     "optimizer_update: expected no exp_avg state (input 5): SGD does not use it, got f32 [2, 3]"},
    {"optimizer_update with an f32 step", bad_step_dtype,
     "optimizer_update: expected the step state to be i64 [] (a step count), got f32 []"},
    {"optimizer_update with a state of another shape", bad_slot_shape,
     "optimizer_update: expected the sum state to be f32 [2, 3] like param, got f32 [3, 2]"},
    {"optimizer_update of a strided param", bad_param_strided,
     "optimizer_update: expected param to be contiguous (it is updated in place)"},
    {"optimizer_update of an unknown kind", bad_kind, "optimizer_update: expected kind in [0, 11]"},
    {"optimizer_update with a negative lr", bad_lr, "optimizer_update: SGD: expected lr >= 0, got -1"},
    {"optimizer_update with another kind's hyper", bad_hyper_kind,
     "optimizer_update: expected hyperparameters for Adagrad, got kind 0"},
    {"optimizer_update with momentum and no buffer", bad_momentum_without_buffer,
     "optimizer_update: the options now need the momentum_buffer state"},
    {"vector_norm of integers", bad_norm_int, "vector_norm: expected x to be f32 or f64, got i64"},
    {"vector_norm with p = 0", bad_norm_p, "vector_norm: expected p > 0 (INFINITY for the largest magnitude), got 0"},
    {0},
};
