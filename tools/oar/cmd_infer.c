/* `oar infer`: runs an exported model (oar export, oar_jit_save) on .npy inputs with the
 * predictor, prints each output's shape (and, for 2-D float outputs, the argmax of the first
 * rows) and optionally saves the first output as .npy. */
#include "cli.h"
#include "graph/serialize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INPUTS 16

static void usage(void) {
    fprintf(stderr,
            "usage: oar infer PATH --input FILE.npy [--output FILE.npy] [--outputs DIR] [--rows N] [--threads N]\n"
            "                 [--device cpu|cuda]\n"
            "  PATH            the exported model: PATH.json and PATH.safetensors (PATH.json also accepted)\n"
            "  --input FILE    the model's input as .npy; for several inputs: --input NAME=FILE, repeated\n"
            "  --output FILE   saves the first output as .npy\n"
            "  --outputs DIR   .onnx models: saves every output as DIR/output_K.npy (K from 0)\n"
            "  --rows N        2-D float outputs: rows whose argmax is printed (default 8)\n"
            "  --device D      where the model runs: cpu (default) or cuda (replayed as CUDA graphs)\n");
}

/* "dir/model.json" or "dir/model.safetensors" -> "dir/model" (the library's rule), for messages. */
void cli_model_path(const char *arg, char *buf, size_t size) {
    size_t n = oar_model_stem_len(arg);
    snprintf(buf, size, "%.*s", (int)(n < size ? n : size - 1), arg);
}

static void print_shape(const oar_tensor *t) {
    printf("%s[", oar_dtype_name(oar_dtype_of(t)));
    for (int d = 0; d < oar_ndim(t); d++) printf("%s%lld", d ? ", " : "", (long long)oar_shape(t)[d]);
    printf("]");
}

static void print_argmax(oar_tensor *y, int64_t rows) {
    int64_t n = oar_size(y, 0), c = oar_size(y, 1);
    if (n == 0 || c == 0) return;
    double *buf = malloc(sizeof(double) * (size_t)(n * c));
    if (!buf || oar_copy_to_buffer(y, buf, sizeof(double) * (size_t)(n * c), OAR_F64) != OAR_OK) {
        free(buf);
        return;
    }
    int64_t shown = rows < n ? rows : n;
    printf("  argmax of rows 0..%lld:", (long long)shown - 1);
    for (int64_t i = 0; i < shown; i++) {
        int64_t best = 0;
        for (int64_t j = 1; j < c; j++)
            if (buf[i * c + j] > buf[i * c + best]) best = j;
        printf(" %lld", (long long)best);
    }
    printf("%s\n", shown < n ? " ..." : "");
    free(buf);
}

int oar_cmd_infer(int argc, char **argv) {
    const char *path = NULL, *out_file = NULL, *out_dir = NULL, *device = "cpu";
    const char *inputs[MAX_INPUTS];
    int n_inputs = 0, threads = 0;
    int64_t rows = 8;
    static const cli_flag flags[] = {{"--input", CLI_TEXT}, {"--output", CLI_TEXT}, {"--outputs", CLI_TEXT},
                                     {"--rows", CLI_INT}, {"--threads", CLI_COUNT}, {"--device", CLI_TEXT}};
    if (cli_check_flags("infer", argc, argv, flags, CLI_N_FLAGS(flags), 1)) return 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define FLAG(name) (!strcmp(a, name) && v && (i++, 1))
        if (FLAG("--input")) {
            if (n_inputs == MAX_INPUTS) {
                fprintf(stderr, "oar infer: at most %d inputs\n", MAX_INPUTS);
                return 2;
            }
            inputs[n_inputs++] = v;
        } else if (FLAG("--output")) out_file = v;
        else if (FLAG("--outputs")) out_dir = v;
        else if (FLAG("--rows")) rows = atoll(v);
        else if (FLAG("--threads")) threads = atoi(v);
        else if (FLAG("--device")) device = v;
        else if (a[0] != '-' && !path) path = a;
        else {
            fprintf(stderr, "oar infer: unknown or incomplete option '%s'\n\n", a);
            usage();
            return 2;
        }
#undef FLAG
    }
    if (!path || !n_inputs) {
        fprintf(stderr, "oar infer: a model PATH and --input are required\n\n");
        usage();
        return 2;
    }
    if (threads && oar_set_num_threads(threads) != OAR_OK) {
        fprintf(stderr, "oar infer: %s\n", oar_last_error());
        return 2;
    }
    if (strcmp(device, "cpu") != 0 && strcmp(device, "cuda") != 0) {
        fprintf(stderr, "oar infer: unknown --device %s; expected cpu or cuda\n", device);
        return 2;
    }
    bool on_gpu = !strcmp(device, "cuda");
    if (on_gpu && cli_is_onnx(path)) {
        fprintf(stderr, "oar infer: --device cuda runs oar's exported models; ONNX files run on the host\n");
        return 2;
    }
    if (cli_is_onnx(path)) return cli_onnx_infer(path, inputs, n_inputs, out_file, out_dir);
    if (out_dir) {
        fprintf(stderr, "oar infer: --outputs DIR is for .onnx models; use --output FILE.npy here\n");
        return 2;
    }
    char model[1024];
    cli_model_path(path, model, sizeof model);
    int rc = 1;
    oar_scope_begin();
    oar_predictor *p = oar_predictor_create_on(&(oar_predictor_config){.model_path = model}, on_gpu ? OAR_CUDA : OAR_CPU);
    if (!p) goto done;
    int n_in = oar_predictor_num_inputs(p);
    if (n_inputs != n_in) {
        oar_set_error(OAR_ERR_INVALID_ARG, "the model takes %d input%s (%s%s), got %d --input", n_in,
                      n_in == 1 ? "" : "s", oar_predictor_input_name(p, 0), n_in > 1 ? ", ..." : "", n_inputs);
        goto done;
    }
    for (int i = 0; i < n_inputs; i++) {
        const char *name = oar_predictor_input_name(p, 0), *file = inputs[i];
        char buf[256];
        const char *eq = strchr(inputs[i], '=');
        if (eq && (size_t)(eq - inputs[i]) < sizeof buf) {
            memcpy(buf, inputs[i], (size_t)(eq - inputs[i]));
            buf[eq - inputs[i]] = '\0';
            name = buf;
            file = eq + 1;
        } else if (n_in > 1) {
            oar_set_error(OAR_ERR_INVALID_ARG, "the model takes %d inputs: name each one, --input NAME=FILE", n_in);
            goto done;
        }
        oar_tensor *x = oar_npy_load(file);
        if (!x || oar_predictor_set_input(p, name, x) != OAR_OK) goto done;
    }
    if (oar_predictor_run(p) != OAR_OK) goto done;
    printf("model %s: %d input%s, %d output%s\n", model, n_in, n_in == 1 ? "" : "s", oar_predictor_num_outputs(p),
           oar_predictor_num_outputs(p) == 1 ? "" : "s");
    for (int k = 0; k < oar_predictor_num_outputs(p); k++) {
        const char *name = oar_predictor_output_name(p, k);
        oar_tensor *y = oar_predictor_get_output(p, name);
        if (!y) goto done;
        printf("output '%s': ", name);
        print_shape(y);
        printf("\n");
        oar_dtype dt = oar_dtype_of(y);
        if (oar_ndim(y) == 2 && oar_dtype_is_float(dt))
            print_argmax(y, rows);
        if (k == 0 && out_file) {
            if (oar_npy_save(out_file, y) != OAR_OK) goto done;
            printf("saved output '%s' to %s\n", name, out_file);
        }
    }
    rc = 0;
done:
    if (rc) fprintf(stderr, "oar infer: %s\n", oar_last_error());
    oar_predictor_free(p);
    oar_scope_end();
    return rc;
}
