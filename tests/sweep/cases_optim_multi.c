/* Sweep cases: optimizer_update_multi (src/optim/update_multi_op.c), several parameters'
 * optimizer_update as one op. Inputs 0..31 are the state it writes (per parameter: param,
 * hyper, then the slots of the `slots` mask in oar_slot order: 1 step, 2 momentum_buffer,
 * 4 exp_avg, 8 exp_avg_sq, 16 max_exp_avg_sq, 32 square_avg, 64 grad_avg, 128 sum, 256
 * acc_delta, 512 exp_inf, 1024 mu_product, 2048 eta, 4096 mu, 8192 ax, 16384 prev, 32768
 * step_size), absent
 * after the last parameter; then one gradient per parameter. The sweep compares the fused
 * kernel (one dispatch over all parameters' elements) with the reference (the updates one by
 * one), on sizes that put thread-chunk boundaries inside and across parameters. The hyper
 * tensors' layout is that of cases_optim.c. */
#include "optim/optim.h"
#include "sweep.h"

#include <string.h>

/*                  kind lr    mom damp nest wd   b1  b2    eps   ams alpha cen lr_decay init fresh */
#define H_SGD       "c0,0.1,0,0,0,0.01,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0f64:25"
#define H_SGD_M     "c0,0.1,0.9,0,0,0.01,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0f64:25"
#define H_SGD_FRESH "c0,0.1,0.9,0,0,0,0,0,0,0,0,0,0,0,1,0,0,0,0,0,0,0,0,0,0f64:25"
#define H_SGD_NEST  "c0,0.05,0.8,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0f64:25"
#define H_ADAM      "c1,0.001,0,0,0,0,0.9,0.999,1e-08,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0f64:25"
#define H_ADAM_LR   "c1,0.01,0,0,0,0,0.9,0.999,1e-08,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0f64:25"
#define H_ADAMW_AMS "c2,0.01,0,0,0,0.1,0.9,0.999,1e-08,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0f64:25"
#define H_RMS_CM    "c3,0.01,0.9,0,0,0.01,0,0,1e-08,0,0.5,1,0,0,0,0,0,0,0,0,0,0,0,0,0f64:25"
#define H_ADAGRAD   "c4,0.01,0,0,0,0.01,0,0,1e-10,0,0,0,0.01,0,0,0,0,0,0,0,0,0,0,0,0f64:25"
#define H_LAMB      "c5,0.001,0,0,0,0.01,0.9,0.999,1e-06,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0f64:25"
#define H_ADADELTA  "c6,0.5,0,0,0,0.01,0,0,1e-06,0,0,0,0,0,0,0,1,0.8,0,0,0,0,0,0,0f64:25"
#define H_ADAMAX    "c7,0.002,0,0,0,0.01,0.9,0.999,1e-08,0,0,0,0,0,0,0,1,0,0,0,0,0,0,0,0f64:25"
#define H_NADAM     "c8,0.002,0,0,0,0.01,0.9,0.999,1e-08,0,0,0,0,0,0,0,0,0,0.004,0,0,0,0,0,0f64:25"
#define H_RADAM     "c9,0.001,0,0,0,0.01,0.9,0.9,1e-08,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0f64:25"
#define H_ASGD      "c10,0.01,0,0,0,0.01,0,0,0,0,0.75,0,0,0,0,0,1,0,0,0.0001,3,0,0,0,0f64:25"
#define H_ASGD_MIN  "c10,0.01,0,0,0,0.01,0,0,0,0,0.75,0,0,0,0,0,0,0,0,0.0001,3,0,0,0,0f64:25"
#define H_RPROP     "c11,0.01,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,0,0,0,0,0.5,1.2,0.3,1.5f64:25"
#define STEP "i0_5:"
/* absent state inputs: N<k> is k of them, each followed by ';' */
#define N1 "none;"
#define N2 N1 N1
#define N4 N2 N2
#define N8 N4 N4
#define N16 N8 N8
#define SGD_PARAM(shape) "n:" shape ";" H_SGD ";"

const sweep_case sweep_cases_optim_multi[] = {
    /* SGD with momentum: a buffer filled on this update next to one that is not, one in f64 */
    {"optimizer_update_multi",
     "n:2x3;" H_SGD_M ";n:2x3;n:5;" H_SGD_FRESH ";n:5;nf64:4;" H_SGD_NEST ";nf64:4;" N16 N4 N2 N1 "n:2x3;n:5;nf64:4",
     "kind=0 slots=2", SWEEP_NO_GRAD},
    /* plain SGD: a parameter past the threads' grain between small ones, an empty one */
    {"optimizer_update_multi",
     SGD_PARAM("3") SGD_PARAM("70001") SGD_PARAM("0x2") SGD_PARAM("2x2") N16 N8 "n:3;n:70001;n:0x2;n:2x2",
     "kind=0 slots=0", SWEEP_NO_GRAD},
    /* sixteen parameters: the state region exactly full */
    {"optimizer_update_multi",
     SGD_PARAM("1") SGD_PARAM("2") SGD_PARAM("3") SGD_PARAM("4") SGD_PARAM("5") SGD_PARAM("6") SGD_PARAM("7")
     SGD_PARAM("8") SGD_PARAM("9") SGD_PARAM("10") SGD_PARAM("11") SGD_PARAM("12") SGD_PARAM("13") SGD_PARAM("14")
     SGD_PARAM("15") SGD_PARAM("16") "n:1;n:2;n:3;n:4;n:5;n:6;n:7;n:8;n:9;n:10;n:11;n:12;n:13;n:14;n:15;n:16",
     "kind=0 slots=0", SWEEP_NO_GRAD},
    /* Adam (step, exp_avg, exp_avg_sq) across the grain and the AVX2 tail */
    {"optimizer_update_multi",
     "n:2x3;" H_ADAM ";" STEP ";n:2x3;p:2x3;n:40003;" H_ADAM ";" STEP ";n:40003;p:40003;" N16 N4 N2 "n:2x3;n:40003",
     "kind=1 slots=13", SWEEP_NO_GRAD},
    /* three Adam parameters, the first two with the same options (checked once), the third with
     * another lr */
    {"optimizer_update_multi",
     "n:5;" H_ADAM ";" STEP ";n:5;p:5;n:9;" H_ADAM ";" STEP ";n:9;p:9;n:3;" H_ADAM_LR ";" STEP ";n:3;p:3;" N16 N1
     "n:5;n:9;n:3",
     "kind=1 slots=13", SWEEP_NO_GRAD},
    /* AdamW with amsgrad (max_exp_avg_sq) */
    {"optimizer_update_multi",
     "n:33000;" H_ADAMW_AMS ";" STEP ";n:33000;p:33000;p:33000;n:7;" H_ADAMW_AMS ";" STEP ";n:7;p:7;p:7;" N16 N4
     "n:33000;n:7",
     "kind=2 slots=29", SWEEP_NO_GRAD},
    /* RMSprop centered with momentum (step, momentum_buffer, square_avg, grad_avg) */
    {"optimizer_update_multi",
     "n:4x3;" H_RMS_CM ";" STEP ";n:4x3;p:4x3;u:4x3;n:33333;" H_RMS_CM ";" STEP ";n:33333;p:33333;u:33333;" N16 N4
     "n:4x3;n:33333",
     "kind=3 slots=99", SWEEP_NO_GRAD},
    /* Adagrad (step, sum) */
    {"optimizer_update_multi",
     "n:6;" H_ADAGRAD ";" STEP ";p:6;n:40001;" H_ADAGRAD ";" STEP ";p:40001;" N16 N8 "n:6;n:40001",
     "kind=4 slots=129", SWEEP_NO_GRAD},
    /* LAMB: several norm blocks, then one; its trust ratio is per parameter */
    {"optimizer_update_multi",
     "n:40000;" H_LAMB ";" STEP ";n:40000;p:40000;n:2x3;" H_LAMB ";" STEP ";n:2x3;p:2x3;" N16 N4 N2 "n:40000;n:2x3",
     "kind=5 slots=13", SWEEP_NO_GRAD},
    /* Adadelta to Rprop, two parameters each, one past the threads' grain; ASGD's second
     * parameter differs from the first only in maximize (its options are read again) */
    {"optimizer_update_multi",
     "n:40001;" H_ADADELTA ";" STEP ";p:40001;p:40001;n:5;" H_ADADELTA ";" STEP ";p:5;p:5;" N16 N4 N2
     "n:40001;n:5",
     "kind=6 slots=289", SWEEP_NO_GRAD},
    {"optimizer_update_multi",
     "n:7;" H_ADAMAX ";" STEP ";n:7;p:7;n:40001;" H_ADAMAX ";" STEP ";n:40001;p:40001;" N16 N4 N2 "n:7;n:40001",
     "kind=7 slots=517", SWEEP_NO_GRAD},
    {"optimizer_update_multi",
     "n:40001;" H_NADAM ";" STEP ";n:40001;p:40001;c0.8f32:;n:3;" H_NADAM ";" STEP ";n:3;p:3;c0.5f32:;" N16 N4
     "n:40001;n:3",
     "kind=8 slots=1037", SWEEP_NO_GRAD},
    {"optimizer_update_multi",
     "n:6;" H_RADAM ";i10_20:;n:6;p:6;n:40001;" H_RADAM ";" STEP ";n:40001;p:40001;" N16 N4 N2 "n:6;n:40001",
     "kind=9 slots=13", SWEEP_NO_GRAD},
    {"optimizer_update_multi",
     "n:40001;" H_ASGD ";" STEP ";pf32:;c0.5f32:;n:40001;n:9;" H_ASGD_MIN ";" STEP ";pf32:;c1f32:;n:9;" N16 N4
     "n:40001;n:9",
     "kind=10 slots=14337", SWEEP_NO_GRAD},
    {"optimizer_update_multi",
     "n:4x5;" H_RPROP ";" STEP ";n:4x5;p:4x5;n:40001;" H_RPROP ";" STEP ";n:40001;p:40001;" N16 N4 N2 "n:4x5;n:40001",
     "kind=11 slots=49153", SWEEP_NO_GRAD},
    {0},
};

/* ---- bad inputs */
static oar_tensor *t1(int64_t n, oar_dtype dt) { return oar_zeros(&n, 1, dt); }

static oar_tensor *hyper(oar_optim_kind kind, double lr) {
    oar_tensor *h = t1(OAR_HYPER_COUNT, OAR_F64);
    oar_optim_opts o = oar_optim_defaults(kind);
    o.lr = lr;
    oar_optim_write_hyper((double *)oar_data(h), &o);
    return h;
}

/* plain SGD of n parameters p[i] with gradients g[i] (hypers h[i], made when NULL) */
static bool sgd_multi(int n, oar_tensor **p, oar_tensor **g, oar_tensor **h, int64_t slots) {
    oar_tensor *in[OAR_MAX_INPUTS] = {0}, *out[1];
    for (int i = 0; i < n; i++) {
        in[2 * i] = p[i];
        in[2 * i + 1] = h && h[i] ? h[i] : hyper(OAR_OPTIM_SGD, 0.1);
        in[OAR_OPTIM_MULTI_STATE + i] = g[i];
    }
    oar_attr a[2] = {oar_attr_int(OAR_OPTIM_SGD), oar_attr_int(slots)};
    int n_out = 1;
    return oar_op_call(OAR_OP_optimizer_update_multi, in, OAR_OPTIM_MULTI_STATE + n, a, out, &n_out) == OAR_OK;
}

static bool bad_no_grads(void) {
    oar_tensor *in[OAR_OPTIM_MULTI_STATE] = {t1(3, OAR_F32), hyper(OAR_OPTIM_SGD, 0.1)}, *out[1];
    oar_attr a[2] = {oar_attr_int(OAR_OPTIM_SGD), oar_attr_int(0)};
    int n_out = 1;
    return oar_op_call(OAR_OP_optimizer_update_multi, in, OAR_OPTIM_MULTI_STATE, a, out, &n_out) == OAR_OK;
}
static bool bad_grad_shape(void) {
    oar_tensor *p[2] = {t1(3, OAR_F32), t1(4, OAR_F32)}, *g[2] = {t1(3, OAR_F32), t1(5, OAR_F32)};
    return sgd_multi(2, p, g, NULL, 0);
}
static bool bad_slots_layout(void) { /* slots says momentum buffers, none are there */
    oar_tensor *p[2] = {t1(3, OAR_F32), t1(4, OAR_F32)}, *g[2] = {t1(3, OAR_F32), t1(4, OAR_F32)};
    return sgd_multi(2, p, g, NULL, 2);
}
static bool bad_same_param(void) {
    oar_tensor *w = t1(3, OAR_F32), *p[2] = {w, w}, *g[2] = {t1(3, OAR_F32), t1(3, OAR_F32)};
    return sgd_multi(2, p, g, NULL, 0);
}
static bool bad_slots_mask(void) {
    oar_tensor *p[1] = {t1(3, OAR_F32)}, *g[1] = {t1(3, OAR_F32)};
    return sgd_multi(1, p, g, NULL, 1 << OAR_SLOT_COUNT);
}
static bool bad_kind(void) {
    oar_tensor *in[OAR_OPTIM_MULTI_STATE + 1] = {t1(3, OAR_F32), hyper(OAR_OPTIM_SGD, 0.1)}, *out[1];
    in[OAR_OPTIM_MULTI_STATE] = t1(3, OAR_F32);
    oar_attr a[2] = {oar_attr_int(17), oar_attr_int(0)};
    int n_out = 1;
    return oar_op_call(OAR_OP_optimizer_update_multi, in, OAR_OPTIM_MULTI_STATE + 1, a, out, &n_out) == OAR_OK;
}
/* found when the kernel runs: parameter 1's lr is negative, and parameter 0 must stay as it was */
static bool bad_lr_writes_nothing(void) {
    oar_tensor *p[2] = {t1(3, OAR_F32), t1(4, OAR_F32)}, *g[2] = {oar_ones((int64_t[]){3}, 1, OAR_F32), t1(4, OAR_F32)};
    oar_tensor *h[2] = {hyper(OAR_OPTIM_SGD, 0.1), hyper(OAR_OPTIM_SGD, -1)};
    bool ok = sgd_multi(2, p, g, h, 0);
    const float *d = oar_data(p[0]);
    return ok || d[0] != 0 || d[1] != 0 || d[2] != 0; /* a write to parameter 0 would "succeed" */
}

const sweep_bad sweep_bad_optim_multi[] = {
    {"optimizer_update_multi with no gradient", bad_no_grads,
     "optimizer_update_multi: expected 32 state inputs then one gradient per parameter, got 32 inputs"},
    {"optimizer_update_multi with a grad of another shape", bad_grad_shape,
     "optimizer_update_multi: parameter 1: optimizer_update: expected grad of param's shape [4], got [5]"},
    {"optimizer_update_multi whose slots do not match its inputs", bad_slots_layout,
     "optimizer_update_multi: expected input 4 to be a tensor (2 parameters of 3 state inputs), got none"},
    {"optimizer_update_multi of one parameter twice", bad_same_param,
     "optimizer_update_multi: expected state inputs in distinct memory, got inputs 0 and 2 sharing a buffer"},
    {"optimizer_update_multi with a bad slots mask", bad_slots_mask,
     "optimizer_update_multi: expected slots to be a mask of the 16 state slots, got 65536"},
    {"optimizer_update_multi of an unknown kind", bad_kind, "optimizer_update_multi: expected kind in [0, 11]"},
    {"optimizer_update_multi with a negative lr on parameter 1", bad_lr_writes_nothing,
     "optimizer_update_multi: parameter 1: optimizer_update: SGD: expected lr >= 0, got -1"},
    {0},
};
