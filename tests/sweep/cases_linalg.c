/* Sweep cases for the linalg family. */
#include "sweep.h"

const sweep_case sweep_cases_linalg[] = {
    {0},
};

const sweep_bad sweep_bad_linalg[] = {
    {0},
};
