/* Which low-precision path this CPU gets, for `oar info` and `oar train --amp`: what the kernels
 * registered for f16/bf16 do at the current ISA cap. */
#include "base/base.h"

#include <string.h>

const char *oar_amp_cpu_path(oar_dtype dtype) {
    if (dtype != OAR_F16 && dtype != OAR_BF16) return "none (autocast takes f16 or bf16)";
    oar_cpu_isa isa = oar_get_cpu_isa();
    bool native_bf16 = strstr(oar_cpu_flags(), "avx512_bf16") != NULL;
    if (isa == OAR_CPU_ISA_GENERIC) return "generic: f16/bf16 storage, f32 GEMMs on converted copies, portable kernels";
    if (dtype == OAR_BF16 && native_bf16 && isa == OAR_CPU_ISA_AVX512)
        return "avx512 (the CPU has AVX512_BF16, not used yet): bf16 storage, f32 GEMMs on converted copies";
    return isa == OAR_CPU_ISA_AVX512 ? "avx512: f16/bf16 storage, f32 GEMMs on converted copies"
                                     : "avx2: f16/bf16 storage, f32 GEMMs on converted copies";
}
