/* `oar bench --workload quant-infer --model lenet|mlp|resnet20|lstm-lm|gpt-mini --quant
 * none|dynamic|static [--batch N] [--threads N] [--repeats R] [--calls C] [--weight-bits 8|7]
 * [--disable-pass a,b] [--int8-residual]`: a
 * zoo model's inference as deployed (random weights), exported and run by the predictor: none, the
 * fp32 model; dynamic, the model after oar_quantize_dynamic (Linear, and lstm-lm's LSTM); static
 * (image and feature models), the fp32 export quantized by oar_quantize_static_model (BN folded,
 * calibrated on two random batches). The token models read random ids: lstm-lm [35, N] (sequence
 * first, zero initial state, the zoo's 10000-word vocabulary), gpt-mini [N, 128]. Timed as R
 * repeats of C calls after a warm-up; prints one JSON object with the median milliseconds per call
 * and the fastest and slowest repeat. --disable-pass switches the predictor's passes off by name
 * (quant_nhwc: the int8 convs on NCHW, to compare layouts in one binary); --int8-residual quantizes
 * with residual additions as qadd of u8 codes (oar_quant_static_opts.int8_residual). bench/quant_compare.sh runs it beside PyTorch's int8
 * (bench/quant_torch.py).
 */
#include "cli.h"
#include "oar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
                                 {"--repeats", CLI_COUNT}, {"--calls", CLI_COUNT},
                                 {"--weight-bits", CLI_COUNT}, {"--disable-pass", CLI_TEXT},
                                 {"--int8-residual", CLI_NONE}};

int oar_bench_quant(int argc, char **argv) {
    if (cli_check_flags("bench --workload quant-infer", argc, argv, FLAGS, CLI_N_FLAGS(FLAGS), 0)) return 2;
    const char *model = cli_flag_value(argc, argv, "--model"), *quant = cli_flag_value(argc, argv, "--quant");
    const char *bs = cli_flag_value(argc, argv, "--batch"), *th = cli_flag_value(argc, argv, "--threads");
    const char *rp = cli_flag_value(argc, argv, "--repeats"), *cl = cli_flag_value(argc, argv, "--calls");
    /* static and dynamic: 8, or 7 (CPUs without VNNI); by default what `oar quantize` picks on this CPU */
    const char *wb = cli_flag_value(argc, argv, "--weight-bits");
    int weight_bits = wb ? atoi(wb) : oar_quant_fast_weight_bits();
    model = model ? model : "lenet";
    quant = quant ? quant : "none";
    int64_t batch = bs ? atoll(bs) : 1;
    const oar_zoo_info *info = oar_zoo_find(model);
    bool tokens = info && (info->input == OAR_ZOO_TOKENS || info->input == OAR_ZOO_TOKENS_STATEFUL);
    int repeats = rp ? atoi(rp) : 7, calls = cl ? atoi(cl) : tokens ? (batch > 8 ? 3 : 20) : (batch > 8 ? 20 : 200);
    bool dyn = !strcmp(quant, "dynamic"), stat = !strcmp(quant, "static");
    if (!info || (info->input != OAR_ZOO_IMAGE && info->input != OAR_ZOO_FEATURES && !tokens) ||
        (!dyn && !stat && strcmp(quant, "none")) || (tokens && stat) || batch < 1 || repeats < 1 || calls < 1) {
        fprintf(stderr, "oar bench: quant-infer expects --model lenet, mlp, resnet20 (--quant none|dynamic|static) or "
                        "lstm-lm, gpt-mini (--quant none|dynamic), --batch, --repeats and --calls >= 1\n");
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
                          : info->input == OAR_ZOO_FEATURES ? (oar_input_spec){OAR_F32, 2, {-1, info->in_channels}}
                          : info->input == OAR_ZOO_TOKENS  ? (oar_input_spec){OAR_I64, 2, {-1, info->context}}
                                                            : (oar_input_spec){OAR_I64, 2, {info->context, batch}};
    int64_t shape[OAR_MAX_DIMS];
    memcpy(shape, spec.shape, sizeof shape);
    shape[info->input == OAR_ZOO_TOKENS_STATEFUL] = batch; /* lstm-lm is sequence first */
    oar_tensor *x = tokens ? oar_randint(0, info->num_classes, shape, spec.ndim, OAR_I64)
                           : oar_randn(shape, spec.ndim, OAR_F32);
    if (!m) goto done;
    oar_module_train(m, false);
    int n_layers = 0;
    if (dyn && oar_quantize_dynamic(m, &(oar_quant_dynamic_opts){.weight_bits = weight_bits}, NULL, 0, &n_layers) !=
                   OAR_OK) {
        fprintf(stderr, "oar bench: %s\n", oar_last_error());
        goto done;
    }
    /* the model as deployed: exported, (for static) quantized as a program, run by the predictor */
    char dir[64] = "/tmp/oar-bench-quant-XXXXXX", fp32[128], int8[128];
    if (!mkdtemp(dir)) {
        fprintf(stderr, "oar bench: cannot make a temporary directory in /tmp\n");
        goto done;
    }
    snprintf(fp32, sizeof fp32, "%s/fp32", dir);
    snprintf(int8, sizeof int8, "%s/int8", dir);
    oar_jit_opts jo = {.specs = &spec, .n_specs = 1, .module = m};
    if (stat) oar_quant_export_strategy(&jo.strategy);
    oar_tensor *y0 = NULL;
    bool ok = (f = oar_jit_to_static(forward_fn, m, &jo)) && oar_jit_call(f, &x, 1, &y0, 1) == OAR_OK &&
              oar_jit_save(f, fp32) == OAR_OK;
    oar_release(y0);
    if (ok && stat) {
        shape[0] = 32;
        oar_tensor *cal[2] = {oar_randn(shape, spec.ndim, OAR_F32), oar_randn(shape, spec.ndim, OAR_F32)};
        oar_quant_static_opts so = {.weight_bits = weight_bits,
                                    .int8_residual = cli_has_flag(argc, argv, "--int8-residual") != 0};
        ok = oar_quantize_static_model(fp32, int8, cal, 2, &so, NULL, 0, &n_layers) == OAR_OK;
        if (!ok) fprintf(stderr, "oar bench: %s\n", oar_last_error());
    }
    oar_predictor_config pc = {.model_path = stat ? int8 : fp32};
    const char *off = cli_flag_value(argc, argv, "--disable-pass");
    if (ok && off && cli_disable_passes(&pc.strategy, off)) ok = false;
    oar_predictor *pred = ok ? oar_predictor_create(&pc) : NULL;
    for (const char *const *e = (const char *const[]){".json", ".safetensors", NULL}; *e; e++) {
        char file[160];
        snprintf(file, sizeof file, "%s%s", fp32, *e), unlink(file);
        snprintf(file, sizeof file, "%s%s", int8, *e), unlink(file);
    }
    rmdir(dir);
    if (!pred) goto done;
    double *ms = malloc(sizeof(double) * (size_t)repeats);
    const char *in_name = oar_predictor_input_name(pred, 0), *out_name = oar_predictor_output_name(pred, 0);
    oar_no_grad_begin();
    for (int r = -1; r < repeats; r++) { /* r = -1: warm-up */
        double t0 = now_ms();
        for (int c = 0; c < calls; c++) {
            oar_tensor *y = NULL;
            if (oar_predictor_set_input(pred, in_name, x) != OAR_OK || oar_predictor_run(pred) != OAR_OK ||
                !(y = oar_predictor_get_output(pred, out_name))) {
                oar_no_grad_end();
                free(ms);
                oar_predictor_free(pred);
                goto done;
            }
            oar_release(y);
        }
        if (r >= 0) ms[r] = (now_ms() - t0) / calls;
    }
    oar_predictor_free(pred);
    oar_no_grad_end();
    qsort(ms, (size_t)repeats, sizeof(double), cmp_double);
    printf("{\"workload\": \"quant-infer\", \"model\": \"%s\", \"quant\": \"%s\", \"batch\": %lld, \"threads\": %d, "
           "\"int8_layers\": %d, \"weight_bits\": %d, \"repeats\": %d, \"calls\": %d, \"ms_median\": %.4f, "
           "\"ms_min\": %.4f, \"ms_max\": %.4f, \"disabled_passes\": \"%s\"}\n", model, quant, (long long)batch,
           oar_get_num_threads(), n_layers, stat || dyn ? weight_bits : 32, repeats, calls,
           ms[repeats / 2], ms[0], ms[repeats - 1], off ? off : "");
    free(ms);
    rc = 0;
done:
    if (rc) fprintf(stderr, "oar bench: %s\n", oar_last_error());
    oar_jit_free(f);
    oar_module_free(m);
    oar_scope_end();
    return rc;
}
