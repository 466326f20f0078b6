/* The native-bf16 switch (bf16_native.h). */
#include "kernels/cpu/bf16_native.h"

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dnnl_engine.h"

#include <string.h>

bool oar_cpu_bf16_pays(oar_op_id op) {
    if (oar_cpu_bf16_native()) return true;
    const oar_kernel_entry *ks;
    int nk = oar_op_kernels_so_far(op, &ks);
    for (int k = 0; k < nk; k++)
        if (ks[k].device == OAR_CPU && (ks[k].dtypes & OAR_DTYPE_BIT(OAR_BF16)) &&
            !strcmp(ks[k].impl, OAR_IMPL_BF16_STORAGE))
            return true;
    return false;
}

bool oar_cpu_bf16_native(void) {
#ifdef OAR_HAVE_ONEDNN
    static int has = -1; /* the CPU's flag; the cap and oneDNN's level are asked on every call */
    if (has < 0) has = strstr(oar_cpu_flags(), "avx512_bf16") != NULL;
    return has && oar_cpu_has_avx512() && oar_dnnl_usable() && oar_dnnl_isa() >= OAR_CPU_ISA_AVX512;
#else
    return false;
#endif
}
