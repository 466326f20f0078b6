/* The fused optimizer updates for f32 parameters (see update_impl.h). */
#include "optim/optim.h"

#include <math.h>
#include <string.h>

#define UPD_T float
#define UPD_SQRT sqrtf
#define UPD_SUFFIX f32
#ifdef OAR_OPTIM_AVX2
#define UPD_AVX2 1
#else
#define UPD_AVX2 0
#endif
#include "optim/update_impl.h"
