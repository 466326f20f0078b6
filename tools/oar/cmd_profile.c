/* `oar profile --workload NAME`: training steps of a reference workload under the profiler;
 * prints the timer table and, in full mode (the default), the overview, operator, kernel and
 * memory tables, and writes a Chrome trace. Also the profiler setup `oar train --profile`
 * shares. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(void) {
    fprintf(stderr,
            "usage: oar profile --workload NAME [options]\n"
            "  --workload  tiny | mlp | lenet | resnet20 | gpt-mini | lstm-lm (the shapes of oar bench)\n"
            "  --mode      full (default: spans, tables, trace) | timer (step timer only)\n"
            "  --steps N   recorded steps (default 10)     --warmup N  unrecorded steps first (default 3)\n"
            "  --dir DIR   where the trace goes (default oar-profile)\n"
            "  --sort      total | avg | calls (default total)   --rows N (rows per table, default 30)\n"
            "  --threads N\n");
}

static oar_profiler_sort parse_sort(const char *s) {
    if (s && !strcmp(s, "avg")) return OAR_PROFILER_SORT_AVG;
    if (s && !strcmp(s, "calls")) return OAR_PROFILER_SORT_CALLS;
    return OAR_PROFILER_SORT_TOTAL;
}

oar_status cli_profile_start(const char *mode, const char *dir, const char *steps, int64_t total_steps,
                             const char *unit) {
    bool full = mode && !strcmp(mode, "full");
    if (!full && (!mode || strcmp(mode, "timer") != 0))
        return oar_set_error(OAR_ERR_INVALID_ARG, "profile: unknown mode '%s'; expected timer or full",
                             mode ? mode : "(none)");
    oar_profiler_opts po = oar_profiler_defaults(full ? OAR_PROFILER_FULL : OAR_PROFILER_TIMER);
    po.items_unit = unit;
    if (steps) {
        long long a = 0, b = 0;
        if (sscanf(steps, "%lld:%lld", &a, &b) != 2 || a < 0 || b <= a)
            return oar_set_error(OAR_ERR_INVALID_ARG, "profile: expected --profile-steps A:B with 0 <= A < B, got "
                                                      "'%s'", steps);
        po.record_begin = a;
        po.record_end = b;
    } else {
        int64_t a = total_steps / 5 < 5 ? total_steps / 5 : 5;
        po.record_begin = a;
        if (full) po.record_end = a + 20 < total_steps ? a + 20 : total_steps;
        if (po.record_end > 0 && po.record_end <= po.record_begin) po.record_end = po.record_begin + 1;
    }
    if (full) po.trace_dir = dir && *dir ? dir : "oar-profile";
    return oar_profiler_start(&po);
}

oar_status cli_profile_finish(const char *sort, int rows) {
    if (!oar_profiler_running()) return OAR_OK;
    oar_status st = oar_profiler_stop(); /* writes the trace in full mode */
    printf("\n");
    oar_profiler_print(parse_sort(sort), rows);
    if (*oar_profiler_trace_path())
        printf("\ntrace: %s (open it in https://ui.perfetto.dev or chrome://tracing)\n", oar_profiler_trace_path());
    return st;
}

int oar_cmd_profile(int argc, char **argv) {
    static const cli_flag flags[] = {{"--workload", CLI_TEXT}, {"--mode", CLI_TEXT}, {"--steps", CLI_COUNT},
                                     {"--warmup", CLI_INT},    {"--dir", CLI_TEXT},  {"--sort", CLI_TEXT},
                                     {"--rows", CLI_INT},      {"--threads", CLI_COUNT}};
    if (cli_check_flags("profile", argc, argv, flags, CLI_N_FLAGS(flags), 0)) {
        usage();
        return 2;
    }
    const char *name = cli_flag_value(argc, argv, "--workload"), *mode = cli_flag_value(argc, argv, "--mode");
    const char *steps_s = cli_flag_value(argc, argv, "--steps"), *warm_s = cli_flag_value(argc, argv, "--warmup");
    const char *dir = cli_flag_value(argc, argv, "--dir"), *sort = cli_flag_value(argc, argv, "--sort");
    const char *rows_s = cli_flag_value(argc, argv, "--rows"), *th = cli_flag_value(argc, argv, "--threads");
    if (!name) {
        usage();
        return 2;
    }
    if (!mode) mode = "full";
    if (strcmp(mode, "full") != 0 && strcmp(mode, "timer") != 0) {
        fprintf(stderr, "oar profile: unknown --mode '%s'; expected full or timer\n", mode);
        return 2;
    }
    if (sort && strcmp(sort, "total") != 0 && strcmp(sort, "avg") != 0 && strcmp(sort, "calls") != 0) {
        fprintf(stderr, "oar profile: unknown --sort '%s'; expected total, avg or calls\n", sort);
        return 2;
    }
    int steps = steps_s ? atoi(steps_s) : 10, warmup = warm_s ? atoi(warm_s) : 3;
    if (steps < 1 || warmup < 0) {
        fprintf(stderr, "oar profile: expected --steps >= 1 and --warmup >= 0\n");
        return 2;
    }
    if (th && oar_set_num_threads(atoi(th)) != OAR_OK) {
        fprintf(stderr, "oar profile: %s\n", oar_last_error());
        return 2;
    }
    int64_t items = 0;
    const char *unit = "samples";
    bench_state *b = bench_workload_open(name, &items, &unit);
    if (!b) {
        fprintf(stderr, "oar profile: %s\n", oar_last_error());
        return 2;
    }
    char window[64];
    snprintf(window, sizeof window, "%d:%d", warmup, warmup + steps);
    int rc = 0;
    if (cli_profile_start(mode, dir, window, warmup + steps, unit) != OAR_OK) rc = 1;
    printf("profiling %s: %d warm-up steps, then %d recorded steps (%s mode), %d threads\n", name, warmup, steps,
           mode, oar_get_num_threads());
    for (int i = 0; rc == 0 && i < warmup + steps; i++) {
        if (bench_workload_step(b) != OAR_OK) rc = 1;
        else oar_profiler_step(items);
    }
    if (rc) fprintf(stderr, "oar profile: %s\n", oar_last_error());
    if (oar_profiler_running() && cli_profile_finish(sort, rows_s ? atoi(rows_s) : 0) != OAR_OK && !rc) {
        fprintf(stderr, "oar profile: %s\n", oar_last_error());
        rc = 1;
    }
    bench_workload_close(b);
    return rc;
}
