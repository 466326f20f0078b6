/* Sweep cases for the loss family. */
#include "sweep.h"

const sweep_case sweep_cases_loss[] = {
    {0},
};

const sweep_bad sweep_bad_loss[] = {
    {0},
};
