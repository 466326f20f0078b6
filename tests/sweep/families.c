/* The list of sweep families, from sweep_families.def. */
#include "sweep.h"

#include <string.h>

const sweep_family sweep_families[] = {
#define SWEEP_FAMILY(f) {#f, sweep_cases_##f, sweep_bad_##f},
#include "sweep_families.def"
#undef SWEEP_FAMILY
};
const int sweep_n_families = sizeof sweep_families / sizeof sweep_families[0];

int sweep_count_cases(const char *op) {
    int n = 0;
    for (int f = 0; f < sweep_n_families; f++)
        for (const sweep_case *c = sweep_families[f].cases; c->op; c++)
            if (strcmp(c->op, op) == 0) n++;
    return n;
}
