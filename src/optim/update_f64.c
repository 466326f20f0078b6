/* The fused optimizer updates for f64 parameters (see update_impl.h). */
#include "optim/optim.h"

#include <math.h>
#include <string.h>

#define UPD_T double
#define UPD_SQRT sqrt
#define UPD_SUFFIX f64
#define UPD_AVX2 0
#include "optim/update_impl.h"
