/* `oar bench --workload NAME`: benchmarks print JSON (one object per line). */
#include "cli.h"
#include "oar.h"

#include <stdio.h>
#include <string.h>

int oar_cmd_bench(int argc, char **argv) {
    const char *w = cli_flag_value(argc, argv, "--workload");
    if (!w) {
        fprintf(stderr, "oar bench: expected --workload NAME (dispatch, gemm, peak, resnet20-infer, tiny, mlp, lenet, resnet20, gpt-mini, lstm-lm)\n");
        return 2;
    }
    if (strcmp(w, "dispatch") == 0) return oar_bench_dispatch(argc, argv);
    if (strcmp(w, "gemm") == 0) return oar_bench_gemm(argc, argv);
    if (strcmp(w, "peak") == 0) return oar_bench_peak(argc, argv);
    if (strcmp(w, "resnet20-infer") == 0) return oar_bench_infer(argc, argv);
    int rc = oar_bench_train(argc, argv);
    if (rc != 2 || oar_zoo_find(w)) return rc; /* zoo models without a workload were reported */
    fprintf(stderr, "oar bench: unknown workload '%s'; expected dispatch, gemm, peak, resnet20-infer, tiny, mlp, lenet, resnet20, "
                    "gpt-mini or lstm-lm\n", w);
    return 2;
}
