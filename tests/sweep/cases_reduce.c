/* Sweep cases for reductions. */
#include "sweep.h"

const sweep_case sweep_cases_reduce[] = {
    {"sum", "n:3x4", "dims= keepdim=0"},
    {"sum", "n:2x3x4", "dims=0,2 keepdim=1"},
    {"sum", "n:2x3x4", "dims=-1 keepdim=0"},
    {"sum", "n:2x0x3", "dims=1 keepdim=0"},
    {"sum", "n:", "dims= keepdim=0"},
    {"sum", "i0_5:4x5", "dims=1 keepdim=0"},
    {0},
};

static bool bad_sum_dim(void) {
    int64_t a[2] = {2, 3};
    int d[1] = {2};
    return oar_sum(oar_zeros(a, 2, OAR_F32), d, 1, false) != NULL;
}

const sweep_bad sweep_bad_reduce[] = {
    {"sum over a dim that does not exist", bad_sum_dim, "expected dims in [-2, 1], got 2"},
    {0},
};
