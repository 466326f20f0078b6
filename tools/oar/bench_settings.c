/* The settings every `oar bench` JSON line carries, printed by one function so no workload can
 * leave one out: a figure without the mode, threads, batch, dtype, passes switched off and
 * instruction set it ran with cannot be compared with another. */
#include "cli.h"
#include "kernels/cpu/cpu_kernels.h"

#include <stdio.h>

/* The widest vector instruction set oar's CPU kernels use in this run: AVX-512 tiles where the
 * GEMM and direct-conv kernels have them, else AVX2/FMA, else the portable C kernels. It
 * follows the CPU switch's cap (OAR_CPU_ISA, oar_set_cpu_isa): a capped run's figures must not
 * be filed as the CPU's native ones. The one place the "isa" field comes from. */
const char *bench_isa(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (!oar_cpu_has_avx2()) return "portable";
    return oar_cpu_has_avx512() ? "avx512" : "avx2";
#else
    return "portable";
#endif
}

void bench_print_settings(const bench_settings *s) {
    printf("\"mode\": \"%s\", \"threads\": %d, ", s->mode ? s->mode : "eager", oar_get_num_threads());
    if (s->batch >= 0) printf("\"batch\": %lld, ", (long long)s->batch);
    else printf("\"batch\": null, ");
    if (s->context > 0) printf("\"context\": %lld, ", (long long)s->context);
    printf("\"dtype\": \"%s\", \"disabled_passes\": \"%s\", \"isa\": \"%s\", \"device\": \"%s\"",
           s->dtype ? s->dtype : "f32", s->disabled_passes ? s->disabled_passes : "", bench_isa(),
           s->device ? s->device : "cpu");
}
