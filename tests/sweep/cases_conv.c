/* Sweep cases for the conv family. */
#include "sweep.h"

const sweep_case sweep_cases_conv[] = {
    {0},
};

const sweep_bad sweep_bad_conv[] = {
    {0},
};
