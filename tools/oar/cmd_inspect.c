/* `oar inspect`: an exported model as text: inputs and outputs with their names, dtypes and
 * shapes ('?': dynamic), the program, and with --passes the pass table with what each pass
 * does to this program when a predictor loads it. */
#include "cli.h"

#include "graph/passes/passes.h"
#include "graph/serialize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(void) {
    fprintf(stderr, "usage: oar inspect PATH [--passes]\n"
                    "  PATH       the exported model: PATH.json and PATH.safetensors (PATH.json also accepted)\n"
                    "  --passes   the graph passes, and the nodes left after each on this program\n");
}

static void print_value(const oar_program *p, int v, const char *name) {
    const oar_value *val = &p->values[v];
    printf("  %-12s %s[", name, oar_dtype_name(val->meta.dtype));
    for (int d = 0; d < val->meta.ndim; d++) {
        if ((val->dyn_dims >> d) & 1u) printf("%s?", d ? ", " : "");
        else printf("%s%lld", d ? ", " : "", (long long)val->meta.shape[d]);
    }
    printf("]  (%%%d)\n", v);
}

static int live_nodes(const oar_program *p) {
    int n = 0;
    for (int i = 0; i < p->n_nodes; i++) n += !p->nodes[i].dead;
    return n;
}

/* Runs the default passes one by one on a copy, in the order a predictor runs them. */
static oar_status print_passes(const oar_program *p) {
    oar_program *c = oar_program_copy(p);
    if (!c) return oar_last_status();
    uint64_t defaults = oar_build_strategy_mask(NULL);
    printf("\npasses (in order; a predictor runs those marked on):\n");
    int before = live_nodes(c);
    for (int i = 0; oar_pass_name(i); i++) {
        bool on = (defaults >> i) & 1u;
        if (on) {
            oar_status st = oar_passes_run(c, 1ull << i, false);
            if (st != OAR_OK) {
                oar_program_free(c);
                return st;
            }
        }
        int after = live_nodes(c);
        char effect[64];
        if (on) snprintf(effect, sizeof effect, "nodes %d -> %d", before, after);
        else snprintf(effect, sizeof effect, "-");
        printf("  %-18s %-3s  %-18s %s\n", oar_pass_name(i), on ? "on" : "off", effect, oar_pass_summary(i));
        before = after;
    }
    oar_program_free(c);
    return OAR_OK;
}

int oar_cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    bool passes = false;
    static const cli_flag flags[] = {{"--passes", CLI_NONE}};
    if (cli_check_flags("inspect", argc, argv, flags, CLI_N_FLAGS(flags), 1)) return 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--passes")) passes = true;
        else if (argv[i][0] != '-' && !path) path = argv[i];
        else {
            fprintf(stderr, "oar inspect: unknown option '%s'\n\n", argv[i]);
            usage();
            return 2;
        }
    }
    if (!path) {
        usage();
        return 2;
    }
    if (cli_is_onnx(path)) return cli_onnx_inspect(path);
    char model[1024];
    cli_model_path(path, model, sizeof model);
    oar_program_io io = {0};
    oar_program *p = oar_program_load_io(model, &io);
    if (!p) {
        fprintf(stderr, "oar inspect: %s\n", oar_last_error());
        return 1;
    }
    const oar_block *main = &p->blocks[OAR_MAIN_BLOCK];
    int n_params = 0, n_consts = 0;
    int64_t weight_bytes = 0;
    for (int v = 0; v < p->n_values; v++) {
        const oar_value *val = &p->values[v];
        if (val->kind != OAR_VAL_PARAM && val->kind != OAR_VAL_CONST) continue;
        n_params += val->kind == OAR_VAL_PARAM;
        n_consts += val->kind == OAR_VAL_CONST;
        int64_t n = 1;
        for (int d = 0; d < val->meta.ndim; d++) n *= val->meta.shape[d];
        weight_bytes += n * (int64_t)oar_dtype_size(val->meta.dtype);
    }
    printf("model %s.json (%d nodes; %d parameters and %d constants, %.1f KiB)\n", model, live_nodes(p), n_params,
           n_consts, (double)weight_bytes / 1024.0);
    printf("inputs:\n");
    for (int i = 0; i < io.n_inputs; i++) print_value(p, main->in[i], io.input_names[i]);
    printf("outputs:\n");
    for (int k = 0; k < io.n_outputs; k++) print_value(p, main->out[k], io.output_names[k]);
    printf("\nprogram:\n");
    int rc = 0;
    int need = oar_program_dump(p, NULL, 0);
    char *text = need >= 0 ? malloc((size_t)need + 1) : NULL;
    if (text) {
        oar_program_dump(p, text, (size_t)need + 1);
        fputs(text, stdout);
        if (need > 0 && text[need - 1] != '\n') putchar('\n');
        free(text);
    }
    if (passes && print_passes(p) != OAR_OK) {
        fprintf(stderr, "oar inspect: %s\n", oar_last_error());
        rc = 1;
    }
    oar_program_free(p);
    return rc;
}
