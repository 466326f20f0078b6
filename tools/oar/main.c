/* The oar command: a thin layer over the C API. */
#include "cli.h"
#include "oar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: oar <command> [options]\n"
            "\n"
            "commands:\n"
            "  train --model M --data D [...]    train a zoo model (run 'oar train' for the options)\n"
            "  eval --model M --data D           test loss and accuracy of a checkpoint\n"
            "  sample [--checkpoint F] [--prompt TEXT] [--tokens N]   text from a gpt-mini checkpoint\n"
            "  export --model M --checkpoint F --out PATH   compile a zoo model for inference (PATH.json +\n"
            "                                    PATH.safetensors, dynamic batch; run 'oar export' for options)\n"
            "  infer PATH --input X.npy [--output Y.npy]   run an exported model with the predictor\n"
            "  inspect PATH [--passes]           an exported model: inputs, outputs, program, passes\n"
            "                                    (infer and inspect also take an ONNX model, PATH.onnx)\n"
            "  quantize --model M --checkpoint F --method dynamic|static   int8 after training: per-layer\n"
            "                                    scales and SQNR, accuracy and size before/after, --out DIR\n"
            "  onnx-test DIR... [--expect FILE]  ONNX node conformance cases: pass/fail/unsupported per case\n"
            "                                    and per operator (run 'oar onnx-test' for the options)\n"
            "  onnx-bench PATH.onnx --input X.npy [--threads N] [--steps N] [--profile] [--trace OUT.json]\n"
            "                                    load, first-run and median run times of an ONNX model, as\n"
            "                                    JSON; --profile: op tables, --trace: each call (Chrome trace)\n"
            "  ops [--json]                      list every registered op: kernels, gradient, sweep coverage\n"
            "  info [--json]                     the CPU and its flags, the ISA in use (OAR_CPU_ISA caps it),\n"
            "                                    the libraries and their versions, threads: for bug reports\n"
            "  bench --workload NAME [--json]    dispatch, gemm, peak, resnet20-infer, or a training step:\n"
            "                                    tiny, mlp, lenet, resnet20, gpt-mini, lstm-lm (--threads N\n"
            "                                    --steps N --batch N [--context T] --mode eager|static\n"
            "                                    --disable-pass NAME,...); unknown flags are refused\n"
            "  profile --workload NAME [...]     profile training steps of a workload: timer table, op\n"
            "                                    tables, Chrome trace (run 'oar profile' for the options)\n"
            "  launch --nproc N [--hosts h:n,...] -- PROGRAM ARGS   run PROGRAM as N ranks under mpirun\n"
            "                                    (table of ranks and endpoints; --grace S; the first failed\n"
            "                                    rank's exit status)\n"
            "  --version                         print the version\n"
            "  help                              this text\n");
}

const char *cli_flag_value(int argc, char **argv, const char *flag) {
    size_t n = strlen(flag);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], flag) == 0 && i + 1 < argc) return argv[i + 1];
        if (strncmp(argv[i], flag, n) == 0 && argv[i][n] == '=') return argv[i] + n + 1;
    }
    return NULL;
}

int cli_disable_passes(oar_build_strategy *s, const char *list) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list ? list : "");
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        if (oar_build_strategy_set(s, tok, false) != OAR_OK) {
            fprintf(stderr, "oar bench: %s\n", oar_last_error());
            return 2;
        }
    return 0;
}

int cli_has_flag(int argc, char **argv, const char *flag) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], flag) == 0) return 1;
    return 0;
}

/* OAR_CPU_ISA, checked before anything runs: the library alone can only warn about a bad value
 * and go on at the native ISA, which would make a capped run silently uncapped. */
static int apply_isa_env(void) {
    const char *env = getenv("OAR_CPU_ISA");
    if (!env || !*env) return 0;
    oar_cpu_isa isa;
    if (oar_cpu_isa_from_name(env, &isa) == OAR_OK && oar_set_cpu_isa(isa) == OAR_OK) return 0;
    fprintf(stderr, "oar: OAR_CPU_ISA=%s: %s\n", env, oar_last_error());
    return 2;
}

/* "--flag=value" -> "--flag" "value", so every subcommand's parser (and cli_check_flags) sees
 * one form; the strings are copied once and live for the process. */
static char **g_split_args; /* kept reachable: the split strings live until exit */

static char **split_assignments(int *argc, char **argv) {
    char **out = g_split_args = calloc((size_t)(2 * *argc + 1), sizeof(char *));
    if (!out) return argv;
    int n = 0;
    for (int i = 0; i < *argc; i++) {
        if (!strcmp(argv[i], "--")) { /* what follows is another program's (oar launch) */
            while (i < *argc) out[n++] = argv[i++];
            break;
        }
        const char *eq = strchr(argv[i], '=');
        if (i > 1 && !strncmp(argv[i], "--", 2) && eq && eq > argv[i] + 2) {
            char *flag = strdup(argv[i]);
            if (!flag) return argv;
            flag[eq - argv[i]] = '\0';
            out[n++] = flag;
            out[n++] = flag + (eq - argv[i]) + 1;
        } else {
            out[n++] = argv[i];
        }
    }
    out[n] = NULL;
    *argc = n;
    return out;
}

int main(int argc, char **argv) {
    if (apply_isa_env()) return 2;
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    argv = split_assignments(&argc, argv);
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("oar %s\n", oar_version());
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "ops") == 0) return oar_cmd_ops(argc - 1, argv + 1);
    if (strcmp(cmd, "info") == 0) return oar_cmd_info(argc - 1, argv + 1);
    if (strcmp(cmd, "train") == 0) return oar_cmd_train(argc - 1, argv + 1);
    if (strcmp(cmd, "eval") == 0) return oar_cmd_eval(argc - 1, argv + 1);
    if (strcmp(cmd, "sample") == 0) return oar_cmd_sample(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0) return oar_cmd_bench(argc - 1, argv + 1);
    if (strcmp(cmd, "profile") == 0) return oar_cmd_profile(argc - 1, argv + 1);
    if (strcmp(cmd, "export") == 0) return oar_cmd_export(argc - 1, argv + 1);
    if (strcmp(cmd, "infer") == 0) return oar_cmd_infer(argc - 1, argv + 1);
    if (strcmp(cmd, "inspect") == 0) return oar_cmd_inspect(argc - 1, argv + 1);
    if (strcmp(cmd, "launch") == 0) return oar_cmd_launch(argc - 1, argv + 1);
    if (strcmp(cmd, "launch-rank") == 0) return oar_cmd_launch_rank(argc - 1, argv + 1); /* oar launch's */
    if (strcmp(cmd, "quantize") == 0) return oar_cmd_quantize(argc - 1, argv + 1);
    if (strcmp(cmd, "onnx-test") == 0) return oar_cmd_onnx_test(argc - 1, argv + 1);
    if (strcmp(cmd, "onnx-bench") == 0) return oar_cmd_onnx_bench(argc - 1, argv + 1);
    fprintf(stderr, "oar: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}
