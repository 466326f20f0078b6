/* Reading golden files (tests/golden/NAME.txt, written by the gen_NAME.py scripts from PyTorch). */
#ifndef OAR_GOLDEN_UTIL_H
#define OAR_GOLDEN_UTIL_H

#include "tensor/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A tensor written as "DTYPE NDIM DIM... | VALUE ..." (dtype f64, f32, i64 or bool); NULL
 * when the line does not have that form. */
static inline oar_tensor *golden_parse_tensor(const char *s) {
    char dt[8];
    int ndim, used;
    if (sscanf(s, "%7s %d%n", dt, &ndim, &used) != 2 || ndim < 0 || ndim > OAR_MAX_DIMS) return NULL;
    char *p = (char *)s + used;
    int64_t shape[OAR_MAX_DIMS];
    for (int d = 0; d < ndim; d++) shape[d] = strtoll(p, &p, 10);
    p = strchr(p, '|');
    if (!p) return NULL;
    p++;
    oar_dtype dtype = !strcmp(dt, "f64") ? OAR_F64 : !strcmp(dt, "f32") ? OAR_F32 : !strcmp(dt, "i64") ? OAR_I64
                    : !strcmp(dt, "bool") ? OAR_BOOL : OAR_DTYPE_COUNT;
    if (dtype == OAR_DTYPE_COUNT) return NULL;
    oar_tensor *t = oar_tensor_new(dtype, shape, ndim);
    for (int64_t i = 0; t && i < t->numel; i++)
        oar_dtypes[dtype].store(oar_tensor_ptr(t) + i * (int64_t)oar_dtypes[dtype].size, strtod(p, &p));
    return t;
}

#endif
