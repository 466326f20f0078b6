/* `oar bench --workload NAME`: benchmarks print JSON (one object per line). Each workload has
 * its own flags; anything else is refused with the list before a run starts, so a typo never
 * times the default settings. */
#include "cli.h"
#include "oar.h"

#include <stdio.h>
#include <string.h>

#define WORKLOAD_LIST "dispatch, gemm, peak, resnet20-infer, tiny, mlp, lenet, resnet20, gpt-mini or lstm-lm"

static const cli_flag DISPATCH[] = {{"--workload", CLI_TEXT}, {"--json", CLI_NONE}, {"--quick", CLI_NONE},
                                    {"--compare-torch", CLI_NONE}};
static const cli_flag GEMM[] = {{"--workload", CLI_TEXT}, {"--json", CLI_NONE},      {"--threads", CLI_COUNT},
                                {"--quick", CLI_NONE},    {"--reps", CLI_COUNT},     {"--peak-gflops", CLI_NUMBER},
                                {"--shape", CLI_TEXT}};
static const cli_flag PEAK[] = {{"--workload", CLI_TEXT}, {"--json", CLI_NONE}, {"--threads", CLI_COUNT}};
/* resnet20-infer and the training steps; --context is for the language models only */
static const cli_flag MODEL[] = {{"--workload", CLI_TEXT}, {"--json", CLI_NONE},        {"--mode", CLI_TEXT},
                                 {"--threads", CLI_COUNT}, {"--batch", CLI_COUNT},      {"--steps", CLI_COUNT},
                                 {"--disable-pass", CLI_TEXT}, {"--profile", CLI_TEXT}, {"--device", CLI_TEXT},
                                 {"--amp", CLI_TEXT},      {"--amp-dtype", CLI_TEXT},  {"--context", CLI_COUNT}};

int oar_cmd_bench(int argc, char **argv) {
    const char *w = cli_flag_value(argc, argv, "--workload");
    if (!w) {
        fprintf(stderr, "oar bench: expected --workload NAME (" WORKLOAD_LIST ")\n");
        return 2;
    }
    if (!strcmp(w, "quant-infer")) return oar_bench_quant(argc, argv); /* bench_quant.c: int8 inference */
    bool special = !strcmp(w, "dispatch") || !strcmp(w, "gemm") || !strcmp(w, "peak") || !strcmp(w, "resnet20-infer");
    if (!special && !bench_train_known(w)) {
        if (oar_zoo_find(w))
            fprintf(stderr, "oar bench: '%s' has no reference workload to time; expected " WORKLOAD_LIST "\n", w);
        else
            fprintf(stderr, "oar bench: unknown workload '%s'; expected " WORKLOAD_LIST "\n", w);
        return 2;
    }
    bool language = !strcmp(w, "gpt-mini") || !strcmp(w, "lstm-lm");
    const cli_flag *flags = MODEL;
    int n = CLI_N_FLAGS(MODEL) - !language; /* --context last */
    if (!strcmp(w, "dispatch")) flags = DISPATCH, n = CLI_N_FLAGS(DISPATCH);
    else if (!strcmp(w, "gemm")) flags = GEMM, n = CLI_N_FLAGS(GEMM);
    else if (!strcmp(w, "peak")) flags = PEAK, n = CLI_N_FLAGS(PEAK);
    char cmd[96];
    snprintf(cmd, sizeof cmd, "bench --workload %.60s", w);
    if (cli_check_flags(cmd, argc, argv, flags, n, 0)) return 2;
    /* passes exist only in a compiled program: switching them off eagerly would time nothing new */
    const char *mode = cli_flag_value(argc, argv, "--mode");
    if (cli_flag_value(argc, argv, "--disable-pass") && !(mode && !strcmp(mode, "static"))) {
        fprintf(stderr, "oar bench: --disable-pass needs --mode static (eager runs no passes)\n");
        return 2;
    }
    if (strcmp(w, "dispatch") == 0) return oar_bench_dispatch(argc, argv);
    if (strcmp(w, "gemm") == 0) return oar_bench_gemm(argc, argv);
    if (strcmp(w, "peak") == 0) return oar_bench_peak(argc, argv);
    if (strcmp(w, "resnet20-infer") == 0) return oar_bench_infer(argc, argv);
    return oar_bench_train(argc, argv);
}
