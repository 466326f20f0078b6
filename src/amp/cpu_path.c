/* Which low-precision path this CPU gets, for `oar info` and `oar train --amp`: what the kernels
 * registered for f16/bf16 do at the current ISA cap (src/kernels/cpu/half_f32.c). */
#include "base/base.h"
#include "kernels/cpu/bf16_native.h"
#include "kernels/cpu/gemm_half.h"

#include <string.h>

const char *oar_amp_cpu_path(oar_dtype dtype) {
    if (dtype != OAR_F16 && dtype != OAR_BF16) return "none (autocast takes f16 or bf16)";
    oar_cpu_isa isa = oar_get_cpu_isa();
    if (isa == OAR_CPU_ISA_GENERIC)
        return "generic: half-width storage, f32 compute (scalar conversions, then the f32 kernels)";
#ifdef OAR_HAVE_OPENBLAS
    bool gemm16 = oar_hgemm_own_available(); /* matmul and linear read 16-bit matrices (gemm_half.c) */
#else
    bool gemm16 = false;
#endif
    if (dtype == OAR_F16)
        return gemm16 ? "f16 storage, f32 compute (matmul and linear: converted inside the f32 GEMM's packing; "
                        "other ops: F16C conversions, then the f32 kernels)"
               : strstr(oar_cpu_flags(), "f16c") ? "f16 storage, f32 compute (F16C conversions, then the f32 kernels)"
                                                 : "f16 storage, f32 compute (scalar conversions, then the f32 kernels)";
    if (oar_cpu_bf16_native())
        return "native bf16 (oneDNN's bf16 conv, matmul and linear on AVX512_BF16, f32 accumulation); other ops "
               "bf16 storage, f32 compute";
    if (isa == OAR_CPU_ISA_AVX512 && strstr(oar_cpu_flags(), "avx512_bf16"))
        return "bf16 storage, f32 compute (vectorized shifts, then the f32 kernels); this build has no oneDNN for "
               "the CPU's AVX512_BF16 dot products; autocast keeps matmul, linear and conv in f32 on f32 inputs";
    if (oar_cpu_bf16_pays(OAR_OP_conv2d) && gemm16)
        return "bf16 storage, f32 compute (conv2d: converted inside oneDNN's f32 convolution's layout passes; matmul "
               "and linear: inside the f32 GEMM's packing; other ops: vectorized shifts, then the f32 kernels); "
               "autocast keeps matmul and linear in f32 on f32 inputs";
    if (oar_cpu_bf16_pays(OAR_OP_conv2d))
        return "bf16 storage, f32 compute (conv2d: converted inside oneDNN's f32 convolution's layout passes; other "
               "ops: vectorized shifts, then the f32 kernels); autocast keeps matmul and linear in f32 on f32 inputs";
    return "bf16 storage, f32 compute (vectorized shifts, then the f32 kernels); autocast keeps matmul, linear and "
           "conv in f32 on f32 inputs";
}
