/* Sweep cases for scan.c: cumprod (its gradient checked by finite differences on lines with one
 * zero, a leading zero and two zeros, where the x_i-division formula alone would fail), and the
 * index ops behind cummax/cummin/mode on ties and NaN. */
#include "sweep.h"

const sweep_case sweep_cases_scan[] = {
    {"cumprod", "n:3x4", "dim=1"},
    {"cumprod", "n:2x3x4", "dim=0"},
    {"cumprod", "p:2x3x4", "dim=-1"},
    {"cumprod", "c1.5,0,2,-0.5,0,3,0.7,1.2:2x4", "dim=1"},
    {"cumprod", "c0.5,0,2,0,1.5,-1:6", "dim=0"},
    {"cumprod", "c0,1.25,0,-2,0.5,3:3x2", "dim=0"},
    {"cumprod", "n:", "dim=0"},
    {"cumprod", "n:2x0x3", "dim=1"},
    {"cumprod", "i-3_4:3x4", "dim=1"},
    {"cumprod", "b:5", "dim=0"},
    {"cumprod", "n:3x300", "dim=1", SWEEP_NO_GRAD},
    {"cumargmax", "d:3x4", "dim=1"},
    {"cumargmax", "c1,3,3,2,nan,5,nan,1:8", "dim=0"},
    {"cumargmax", "i0_3:3x5", "dim=-1"},
    {"cumargmax", "n:2x0", "dim=1"},
    {"cumargmin", "d:4x3", "dim=0"},
    {"cumargmin", "c2,1,1,3,nan,0,nan:7", "dim=0"},
    {"cumargmin", "i-2_2i32:2x6", "dim=1"},
    {"argmode", "i0_3:4x5", "dim=1"},
    {"argmode", "c3,1,3,1,2,5,5,4,4,4:2x5", "dim=1"},
    {"argmode", "c1,2,2,1,3,1,2:7", "dim=0"},
    {"argmode", "c1,nan,nan,2:4", "dim=0"},
    {"argmode", "d:3x4", "dim=0"},
    {"argmode", "n:", "dim=0"},
    {0},
};

static oar_tensor *zeros2(int64_t a, int64_t b) {
    int64_t s[2] = {a, b};
    return oar_zeros(s, 2, OAR_F32);
}
static bool bad_cumprod_dim(void) { return oar_cumprod(zeros2(2, 3), 2) != NULL; }
static bool bad_argmode_empty(void) { return oar_argmode(zeros2(2, 0), 1) != NULL; }
static bool bad_cumargmax_dim(void) { return oar_cumargmax(zeros2(2, 3), -3) != NULL; }

const sweep_bad sweep_bad_scan[] = {
    {"cumprod over a dim that does not exist", bad_cumprod_dim, "cumprod: expected dim in [-2, 1], got 2"},
    {"argmode over an empty dim", bad_argmode_empty, "argmode: expected dim 1 to have non-zero size"},
    {"cumargmax over a dim that does not exist", bad_cumargmax_dim, "cumargmax: expected dim in [-2, 1], got -3"},
    {0},
};
