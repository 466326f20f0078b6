/* Sweep cases for the collective ops (src/ops/collective.c). The sweep runs in one process,
 * where no communicator is installed and the average over one rank is the value itself:
 * grad_allreduce copies, allreduce_start packs its gradients into one flat bucket in input
 * order, allreduce_wait hands the bucket on. The averages across ranks are tested under mpirun
 * (tests/dist: compiled data parallel against eager data parallel and one process). */
#include "sweep.h"

#include "ops/collective.h"

#define NG SWEEP_NO_GRAD
#define GA "name=fc.weight channel=0 bucket_bytes=0 first_bucket_bytes=0 fixed_order=1"

const sweep_case sweep_cases_collective[] = {
    {"grad_allreduce", "nf32:3x4", GA, NG},
    {"grad_allreduce", "nf32:", "name=b channel=7 bucket_bytes=1024 first_bucket_bytes=64 fixed_order=0", NG},
    {"grad_allreduce", "nf32:0x5", GA, NG},
    {"allreduce_start", "nf32:3x4", "channel=0 signature=0 fixed_order=1 label=one", NG},
    {"allreduce_start", "nf32:3x4;nf32:5;nf32:;nf32:2x1x3", "channel=3 signature=-77 fixed_order=1 label=four", NG},
    {"allreduce_start", "nf32:0x2;nf32:1000", "channel=1 signature=5 fixed_order=0 label=empty", NG},
    {"allreduce_wait", "nf32:12", "channel=0", NG},
    {"allreduce_wait", "nf32:0", "channel=2", NG},
    /* differentiable: in one process the sum over ranks is the value, and so is its gradient */
    {"allreduce_sum", "nf32:3x4", "channel=0 group=0"},
    {"allreduce_sum", "nf32:1x5x1", "channel=9 group=0"},
    {"allreduce_sum", "nf32:0x3", "channel=0 group=0"},
    {0},
};

/* ---- bad inputs */
static bool int_gradient(void) {
    int64_t s = 3;
    return oar_grad_allreduce(oar_zeros(&s, 1, OAR_I32), "w", 0, 0, 0, true) != NULL;
}
static bool negative_channel(void) {
    int64_t s = 3;
    return oar_grad_allreduce(oar_zeros(&s, 1, OAR_F32), "w", -1, 0, 0, true) != NULL;
}
static bool negative_bucket(void) {
    int64_t s = 3;
    return oar_grad_allreduce(oar_zeros(&s, 1, OAR_F32), "w", 0, -5, 0, true) != NULL;
}
static bool start_f64(void) {
    int64_t s = 3;
    oar_tensor *in[2] = {oar_zeros(&s, 1, OAR_F32), oar_zeros(&s, 1, OAR_F64)};
    oar_attr a[4] = {oar_attr_int(0), oar_attr_int(0), oar_attr_int(1), oar_attr_str("b")};
    return oar_op_call1(OAR_OP_allreduce_start, in, 2, a) != NULL;
}
static bool wait_2d(void) {
    int64_t s[2] = {3, 4};
    oar_tensor *in[1] = {oar_zeros(s, 2, OAR_F32)};
    oar_attr a[1] = {oar_attr_int(0)};
    return oar_op_call1(OAR_OP_allreduce_wait, in, 1, a) != NULL;
}

static bool sum_i64(void) {
    int64_t s = 3;
    return oar_allreduce_sum(oar_zeros(&s, 1, OAR_I64), 0, 0) != NULL;
}

const sweep_bad sweep_bad_collective[] = {
    {"grad_allreduce of an i32 gradient", int_gradient,
     "grad_allreduce: expected f32 gradients (data parallel averages f32), got i32 for input 0"},
    {"grad_allreduce on channel -1", negative_channel, "grad_allreduce: expected 0 <= channel < 20000, got -1"},
    {"allreduce_sum of an i64 tensor", sum_i64, "allreduce_sum: expected an f32 tensor, got i64"},
    {"grad_allreduce with a negative bucket", negative_bucket, "grad_allreduce: expected bucket sizes >= 0 bytes"},
    {"allreduce_start of an f64 gradient", start_f64, "allreduce_start: expected f32 gradients"},
    {"allreduce_wait of a 2-d tensor", wait_2d, "allreduce_wait: expected the 1-d f32 bucket of an allreduce_start, got f32 [3, 4]"},
    {0},
};
