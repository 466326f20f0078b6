/* Sweep cases for the index family. */
#include "sweep.h"

const sweep_case sweep_cases_index[] = {
    {0},
};

const sweep_bad sweep_bad_index[] = {
    {0},
};
