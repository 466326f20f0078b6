/* `oar bench --workload quant-infer --model lenet|mlp|resnet20 --quant none|dynamic|static [--batch N]
 * [--threads N] [--repeats R] [--calls C]`: a zoo model's compiled inference (random weights;
 * static calibrates on two random batches), timed as R repeats of C calls after a warm-up; prints
 * one JSON object with the median milliseconds per call and the fastest and slowest repeat.
 * bench/quant_compare.sh runs it beside PyTorch's int8 (bench/quant_torch.py). */
#include "cli.h"
#include "oar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + 1e-6 * (double)ts.tv_nsec;
}

static oar_status forward_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    return oar_forward_n(user, in, 1, out, 1);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static const cli_flag FLAGS[] = {{"--workload", CLI_TEXT}, {"--json", CLI_NONE},    {"--model", CLI_TEXT},
                                 {"--quant", CLI_TEXT},    {"--batch", CLI_COUNT},  {"--threads", CLI_COUNT},
                                 {"--repeats", CLI_COUNT}, {"--calls", CLI_COUNT}};

int oar_bench_quant(int argc, char **argv) {
    if (cli_check_flags("bench --workload quant-infer", argc, argv, FLAGS, CLI_N_FLAGS(FLAGS), 0)) return 2;
    const char *model = cli_flag_value(argc, argv, "--model"), *quant = cli_flag_value(argc, argv, "--quant");
    const char *bs = cli_flag_value(argc, argv, "--batch"), *th = cli_flag_value(argc, argv, "--threads");
    const char *rp = cli_flag_value(argc, argv, "--repeats"), *cl = cli_flag_value(argc, argv, "--calls");
    model = model ? model : "lenet";
    quant = quant ? quant : "none";
    int64_t batch = bs ? atoll(bs) : 1;
    int repeats = rp ? atoi(rp) : 7, calls = cl ? atoi(cl) : (batch > 8 ? 20 : 200);
    const oar_zoo_info *info = oar_zoo_find(model);
    bool dyn = !strcmp(quant, "dynamic"), stat = !strcmp(quant, "static");
    if (!info || (info->input != OAR_ZOO_IMAGE && info->input != OAR_ZOO_FEATURES) ||
        (!dyn && !stat && strcmp(quant, "none")) || batch < 1 || repeats < 1 || calls < 1) {
        fprintf(stderr, "oar bench: quant-infer expects --model lenet, mlp or resnet20 (an image or feature zoo model), --quant "
                        "none|dynamic|static, --batch, --repeats and --calls >= 1\n");
        return 2;
    }
    if (th && oar_set_num_threads(atoi(th)) != OAR_OK) {
        fprintf(stderr, "oar bench: %s\n", oar_last_error());
        return 2;
    }
    int rc = 1;
    oar_jit *f = NULL;
    oar_scope_begin();
    oar_manual_seed(1);
    oar_module *m = oar_zoo_create(model, NULL);
    oar_input_spec spec = info->input == OAR_ZOO_IMAGE
                              ? (oar_input_spec){OAR_F32, 4, {-1, info->in_channels ? info->in_channels : 1, 28, 28}}
                              : (oar_input_spec){OAR_F32, 2, {-1, info->in_channels}};
    int64_t shape[OAR_MAX_DIMS];
    memcpy(shape, spec.shape, sizeof shape);
    shape[0] = batch;
    oar_tensor *x = oar_randn(shape, spec.ndim, OAR_F32);
    if (!m) goto done;
    oar_module_train(m, false);
    int n_layers = 0;
    if (dyn && oar_quantize_dynamic(m, NULL, NULL, 0, &n_layers) != OAR_OK) goto done;
    if (stat) {
        shape[0] = 32;
        oar_tensor *cal[2] = {oar_randn(shape, spec.ndim, OAR_F32), oar_randn(shape, spec.ndim, OAR_F32)};
        if (oar_quantize_static(m, cal, 2, NULL, NULL, 0, &n_layers) != OAR_OK) goto done;
    }
    if (!(f = oar_jit_to_static(forward_fn, m, &(oar_jit_opts){.specs = &spec, .n_specs = 1, .module = m}))) goto done;
    double *ms = malloc(sizeof(double) * (size_t)repeats);
    oar_no_grad_begin();
    for (int r = -1; r < repeats; r++) { /* r = -1: warm-up */
        double t0 = now_ms();
        for (int c = 0; c < calls; c++) {
            oar_tensor *y = NULL;
            if (oar_jit_call(f, &x, 1, &y, 1) != OAR_OK) {
                oar_no_grad_end();
                free(ms);
                goto done;
            }
            oar_release(y);
        }
        if (r >= 0) ms[r] = (now_ms() - t0) / calls;
    }
    oar_no_grad_end();
    qsort(ms, (size_t)repeats, sizeof(double), cmp_double);
    printf("{\"workload\": \"quant-infer\", \"model\": \"%s\", \"quant\": \"%s\", \"batch\": %lld, \"threads\": %d, "
           "\"int8_layers\": %d, \"repeats\": %d, \"calls\": %d, \"ms_median\": %.4f, \"ms_min\": %.4f, "
           "\"ms_max\": %.4f}\n", model, quant, (long long)batch, oar_get_num_threads(), n_layers, repeats, calls,
           ms[repeats / 2], ms[0], ms[repeats - 1]);
    free(ms);
    rc = 0;
done:
    if (rc) fprintf(stderr, "oar bench: %s\n", oar_last_error());
    oar_jit_free(f);
    oar_module_free(m);
    oar_scope_end();
    return rc;
}
