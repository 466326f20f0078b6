/* Sweep cases for elementwise unary ops. */
#include "sweep.h"

const sweep_case sweep_cases_unary[] = {
    {"neg", "n:3x4", ""},
    {"neg", "i0_9:5", ""},
    {"exp", "n:3x4", ""},
    {"exp", "n:0", ""},
    {"log", "p:3x4", ""},
    {"relu", "d:3x4", ""},
    {"relu", "n:1", ""},
    {0},
};

static bool bad_exp_int(void) {
    int64_t a[1] = {3};
    return oar_exp(oar_zeros(a, 1, OAR_I64)) != NULL;
}

const sweep_bad sweep_bad_unary[] = {
    {"exp of an integer tensor", bad_exp_int, "expected the input to have a floating dtype"},
    {0},
};
