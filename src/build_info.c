/* What this build was made with and what its libraries report at run time (oar.h,
 * oar_library_info_get; printed by `oar info`). Each library is asked through its own API,
 * so the answer is the library actually loaded, not the headers it was built against. */
#include "base/base.h"
#ifdef OAR_HAVE_ONEDNN
#include "kernels/cpu/dnnl_engine.h"
#endif

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#ifdef OAR_HAVE_OPENBLAS
#include <cblas.h>
#endif
#ifdef OAR_HAVE_CJSON
#include <cjson/cJSON.h>
#endif
#ifdef OAR_HAVE_ZLIB
#include <zlib.h>
#endif
#ifdef OAR_HAVE_MPI
#include <mpi.h>
#endif

enum { LIB_OPENBLAS, LIB_ONEDNN, LIB_CJSON, LIB_ZLIB, LIB_MPI, LIB_CUDA, LIB_COUNT };

int oar_library_count(void) { return LIB_COUNT; }

#ifdef OAR_HAVE_OPENBLAS
/* OpenBLAS's core types by the widest vectors their kernels use (its kernel/x86_64 tree); -1
 * for names not listed here. */
static int openblas_core_isa(const char *core) {
    static const char *const avx512[] = {"skylakex", "cooperlake", "sapphirerapids"};
    static const char *const avx2[] = {"haswell", "zen", "excavator"};
    static const char *const older[] = {"sandybridge", "nehalem", "prescott", "core2", "penryn", "dunnington",
                                        "atom", "opteron", "barcelona", "bobcat", "bulldozer", "piledriver",
                                        "steamroller", "katmai", "coppermine", "northwood", "banias"};
    for (size_t i = 0; i < sizeof avx512 / sizeof *avx512; i++)
        if (!strcasecmp(core, avx512[i])) return OAR_CPU_ISA_AVX512;
    for (size_t i = 0; i < sizeof avx2 / sizeof *avx2; i++)
        if (!strcasecmp(core, avx2[i])) return OAR_CPU_ISA_AVX2;
    for (size_t i = 0; i < sizeof older / sizeof *older; i++)
        if (!strcasecmp(core, older[i])) return OAR_CPU_ISA_GENERIC;
    return -1;
}
#endif

#ifdef OAR_HAVE_ONEDNN
static const char *dnnl_isa_name(dnnl_cpu_isa_t isa) {
    switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
    }
}
#endif

oar_status oar_library_info_get(int i, oar_library_info *out) {
    if (i < 0 || i >= LIB_COUNT || !out)
        return oar_error(OAR_ERR_INVALID_ARG, "oar_library_info_get: expected 0 <= i < %d and an output, got i = %d%s",
                         LIB_COUNT, i, out ? "" : " and NULL");
    memset(out, 0, sizeof *out);
    out->isa = -1;
    switch (i) {
    case LIB_OPENBLAS:
        out->name = "OpenBLAS";
#ifdef OAR_HAVE_OPENBLAS
        out->found = true;
        {
            const char *config = openblas_get_config(), *core = openblas_get_corename();
            /* the config starts "OpenBLAS 0.3.21 ..." */
            if (config && !strncmp(config, "OpenBLAS ", 9)) sscanf(config + 9, "%47s", out->version);
            out->isa = core ? openblas_core_isa(core) : -1;
            snprintf(out->detail, sizeof out->detail, "core %s (chosen when the library loaded: OPENBLAS_CORETYPE); config: %s",
                     core ? core : "?", config ? config : "?");
        }
#endif
        break;
    case LIB_ONEDNN:
        out->name = "oneDNN";
#ifdef OAR_HAVE_ONEDNN
        out->found = true;
        {
            const dnnl_version_t *v = dnnl_version();
            snprintf(out->version, sizeof out->version, "%d.%d.%d", v->major, v->minor, v->patch);
            out->isa = (int)oar_dnnl_isa(); /* fixes oneDNN's cap, as its first use would */
            snprintf(out->detail, sizeof out->detail, "effective ISA %s (fixed at first use); used by oar: %s",
                     dnnl_isa_name(dnnl_get_effective_cpu_isa()),
                     oar_dnnl_usable() ? "yes" : "no: oar's cap is below it");
        }
#endif
        break;
    case LIB_CJSON:
        out->name = "cJSON";
#ifdef OAR_HAVE_CJSON
        out->found = true;
        snprintf(out->version, sizeof out->version, "%s", cJSON_Version());
        snprintf(out->detail, sizeof out->detail, "model files, safetensors headers");
#endif
        break;
    case LIB_ZLIB:
        out->name = "zlib";
#ifdef OAR_HAVE_ZLIB
        out->found = true;
        snprintf(out->version, sizeof out->version, "%s", zlibVersion());
        snprintf(out->detail, sizeof out->detail, "gzip'd datasets");
#endif
        break;
    case LIB_MPI:
        out->name = "MPI";
#ifdef OAR_HAVE_MPI
        out->found = true;
        snprintf(out->version, sizeof out->version, "%d.%d", MPI_VERSION, MPI_SUBVERSION);
        snprintf(out->detail, sizeof out->detail, "standard version of the headers built against");
#endif
        break;
    case LIB_CUDA:
        out->name = "CUDA";
        if (oar_cuda_is_built()) {
            out->found = true;
#ifdef OAR_CUDA_TOOLKIT_VERSION
            snprintf(out->version, sizeof out->version, "%s", OAR_CUDA_TOOLKIT_VERSION);
#endif
            int n = oar_cuda_device_count();
            const char *cudnn =
#ifdef OAR_HAVE_CUDNN
                "cuDNN built in"
#else
                "no cuDNN"
#endif
#ifdef OAR_HAVE_NCCL
                ", NCCL built in";
#else
                ", no NCCL";
#endif
            if (n > 0) snprintf(out->detail, sizeof out->detail, "%d device%s; %s", n, n == 1 ? "" : "s", cudnn);
            else snprintf(out->detail, sizeof out->detail, "no device (no GPU or no driver); %s", cudnn);
        }
        break;
    }
    return OAR_OK;
}
