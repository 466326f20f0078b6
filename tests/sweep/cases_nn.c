/* Sweep cases for the nn family. */
#include "sweep.h"

const sweep_case sweep_cases_nn[] = {
    {0},
};

const sweep_bad sweep_bad_nn[] = {
    {0},
};
