/* Sweep cases for ema_update (src/ops/ema.c), an in-place running average: the sweep runs it from
 * the case's values each time and compares what it wrote. */
#include "sweep.h"

#include "ops/ema.h"

const sweep_case sweep_cases_ema[] = {
    {"ema_update", "nf32:4;nf32:4", "momentum=0.1 scale=1"},
    /* a [1, C, 1] statistic into a [C] average (SyncBatchNorm), the unbiased-variance scale */
    {"ema_update", "nf32:3;nf32:1x3x1", "momentum=0.5 scale=1.25"},
    {"ema_update", "nf32:2x5;nf32:10", "momentum=1 scale=1"},
    {"ema_update", "nf32:6;nf32:6", "momentum=0 scale=3"},
    {"ema_update", "nf32:0;nf32:0x2", "momentum=0.1 scale=1"},
    {0},
};

static bool f64_average(void) {
    int64_t s = 3;
    return oar_ema_update_(oar_zeros(&s, 1, OAR_F64), oar_zeros(&s, 1, OAR_F32), 0.1, 1) == OAR_OK;
}
static bool wrong_count(void) {
    int64_t s = 3, t = 4;
    return oar_ema_update_(oar_zeros(&s, 1, OAR_F32), oar_zeros(&t, 1, OAR_F32), 0.1, 1) == OAR_OK;
}
static bool bad_momentum(void) {
    int64_t s = 3;
    return oar_ema_update_(oar_zeros(&s, 1, OAR_F32), oar_zeros(&s, 1, OAR_F32), 1.5, 1) == OAR_OK;
}

const sweep_bad sweep_bad_ema[] = {
    {"ema_update of an f64 average", f64_average, "ema_update: expected an f32 average and value, got f64 and f32"},
    {"ema_update with 4 values for 3", wrong_count,
     "ema_update: expected a value with as many elements as the average (3), got 4"},
    {"ema_update with momentum 1.5", bad_momentum, "ema_update: expected 0 <= momentum <= 1, got 1.5"},
    {0},
};
