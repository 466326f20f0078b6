/* The native-bf16 switch (bf16_native.h). */
#include "kernels/cpu/bf16_native.h"

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dnnl_engine.h"

#include <string.h>

bool oar_cpu_bf16_native(void) {
#ifdef OAR_HAVE_ONEDNN
    static int has = -1; /* the CPU's flag; the cap and oneDNN's level are asked on every call */
    if (has < 0) has = strstr(oar_cpu_flags(), "avx512_bf16") != NULL;
    return has && oar_cpu_has_avx512() && oar_dnnl_usable() && oar_dnnl_isa() >= OAR_CPU_ISA_AVX512;
#else
    return false;
#endif
}
