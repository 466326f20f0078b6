/* `oar export`: a zoo model with a checkpoint's weights, compiled in eval mode with a dynamic
 * batch dim and saved as PATH.json + PATH.safetensors for the predictor (oar infer), or with
 * --format onnx as an ONNX model (opset 17) other runtimes load. */
#include "cli.h"
#include "oar/onnx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(void) {
    fprintf(stderr,
            "usage: oar export --model NAME --checkpoint FILE --out PATH [options]\n"
            "       oar export --format onnx --model NAME --checkpoint FILE --out FILE.onnx [options]\n"
            "       oar export --format onnx --from MODEL --out FILE.onnx\n"
            "  writes PATH.json (the program) and PATH.safetensors (its weights); the batch dim is dynamic\n"
            "  --format F          oar (default) or onnx: an ONNX model (opset 17), the batch as dim_param\n"
            "  --from MODEL        with --format onnx: an oar model file (MODEL.json + MODEL.safetensors)\n"
            "  --model NAME        tiny | mlp | lenet | resnet20 | mobilenet | gpt-mini\n"
            "  --checkpoint FILE   weights, as written by oar train\n"
            "  --batch N           batch of the example run that traces the model (default 1)\n"
            "  --in-channels C     image models: channels (default 1, as oar train on Fashion-MNIST)\n"
            "  --image-size S      image models: height and width (default 28)\n"
            "  --context T         gpt-mini: tokens per sequence (default: the model's context)\n"
            "  --dtype D           f32 (default), bf16 or fp16: weights stored in D (norm layers keep f32) and\n"
            "                      the program run under autocast O2 (docs/amp.md); input and logits stay f32\n");
}

typedef struct export_ctx {
    oar_module *m;
    oar_dtype dtype; /* f32: plain; bf16/f16: the forward under autocast O2, the logits cast to f32 */
} export_ctx;

static oar_status forward_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    export_ctx *c = user;
    if (c->dtype == OAR_F32) {
        out[0] = oar_forward(c->m, in[0]);
        return out[0] ? OAR_OK : oar_last_status();
    }
    oar_autocast_opts ac = oar_autocast_defaults();
    ac.level = OAR_AMP_O2;
    ac.dtype = c->dtype;
    ac.cpu_policy = OAR_AMP_CPU_TABLE; /* a file's dtypes must not depend on the CPU that wrote it */
    oar_status st = oar_autocast_begin(&ac);
    if (st != OAR_OK) return st;
    oar_tensor *y = oar_forward(c->m, in[0]);
    oar_autocast_end();
    out[0] = y ? oar_cast(y, OAR_F32) : NULL;
    return out[0] ? OAR_OK : oar_last_status();
}

static void format_spec(const oar_input_spec *s, char *buf, size_t size) {
    size_t n = (size_t)snprintf(buf, size, "%s[", oar_dtype_name(s->dtype));
    for (int d = 0; d < s->ndim && n < size; d++) {
        if (s->shape[d] < 0) n += (size_t)snprintf(buf + n, size - n, "%s?", d ? ", " : "");
        else n += (size_t)snprintf(buf + n, size - n, "%s%lld", d ? ", " : "", (long long)s->shape[d]);
    }
    if (n < size) snprintf(buf + n, size - n, "]");
}

int oar_cmd_export(int argc, char **argv) {
    const char *model = NULL, *ckpt = NULL, *out_path = NULL, *format = "oar", *from = NULL, *dtype = "f32";
    int64_t batch = 1, channels = 1, size = 28, context = 0;
    static const cli_flag flags[] = {{"--model", CLI_TEXT},       {"--checkpoint", CLI_TEXT}, {"--out", CLI_TEXT},
                                     {"--batch", CLI_COUNT},      {"--in-channels", CLI_COUNT},
                                     {"--image-size", CLI_COUNT}, {"--context", CLI_INT},
                                     {"--format", CLI_TEXT},      {"--from", CLI_TEXT},
                                     {"--dtype", CLI_TEXT}};
    if (cli_check_flags("export", argc, argv, flags, CLI_N_FLAGS(flags), 0)) return 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define FLAG(name) (!strcmp(a, name) && v && (i++, 1))
        if (FLAG("--model")) model = v;
        else if (FLAG("--checkpoint")) ckpt = v;
        else if (FLAG("--out")) out_path = v;
        else if (FLAG("--batch")) batch = atoll(v);
        else if (FLAG("--in-channels")) channels = atoll(v);
        else if (FLAG("--image-size")) size = atoll(v);
        else if (FLAG("--context")) context = atoll(v);
        else if (FLAG("--format")) format = v;
        else if (FLAG("--from")) from = v;
        else if (FLAG("--dtype")) dtype = v;
        else {
            fprintf(stderr, "oar export: unknown or incomplete option '%s'\n\n", a);
            usage();
            return 2;
        }
#undef FLAG
    }
    bool onnx = !strcmp(format, "onnx");
    if (!onnx && strcmp(format, "oar")) {
        fprintf(stderr, "oar export: expected --format oar or onnx, got '%s'\n", format);
        return 2;
    }
    oar_dtype dt = !strcmp(dtype, "f32") ? OAR_F32 : !strcmp(dtype, "bf16") ? OAR_BF16
                 : !strcmp(dtype, "fp16") || !strcmp(dtype, "f16") ? OAR_F16 : OAR_DTYPE_COUNT;
    if (dt == OAR_DTYPE_COUNT) {
        fprintf(stderr, "oar export: unknown --dtype '%s'; expected f32, bf16 or fp16\n", dtype);
        return 2;
    }
    if (dt != OAR_F32 && onnx) {
        fprintf(stderr, "oar export: --dtype %s is for --format oar (the ONNX export writes f32 models)\n", dtype);
        return 2;
    }
    if (from) {
        if (!onnx || model || ckpt || !out_path) {
            fprintf(stderr, "oar export: --from MODEL takes --format onnx and --out FILE.onnx, without --model "
                            "and --checkpoint\n");
            return 2;
        }
        if (oar_onnx_save_model(from, out_path, NULL) != OAR_OK) {
            fprintf(stderr, "oar export: %s\n", oar_last_error());
            return 1;
        }
        printf("exported %s to %s (ONNX, opset 17)\n", from, out_path);
        return 0;
    }
    if (!model || !ckpt || !out_path) {
        fprintf(stderr, "oar export: --model, --checkpoint and --out are required\n\n");
        usage();
        return 2;
    }
    if (batch < 1 || channels < 1 || size < 1 || context < 0) {
        fprintf(stderr, "oar export: expected --batch, --in-channels and --image-size >= 1, --context >= 0\n");
        return 2;
    }
    const oar_zoo_info *info = oar_zoo_find(model);
    if (!info) {
        oar_module_free(oar_zoo_create(model, NULL)); /* sets the message listing the models */
        fprintf(stderr, "oar export: %s\n", oar_last_error());
        return 2;
    }
    if (info->input == OAR_ZOO_TOKENS_STATEFUL) {
        fprintf(stderr, "oar export: %s is not supported: its forward carries the recurrent state (tokens, h, c) "
                        "across calls, which the exported single-input forward does not have; export gpt-mini for a "
                        "language model\n", model);
        return 2;
    }
    oar_input_spec spec = {.dtype = OAR_F32, .shape = {-1}};
    oar_zoo_opts zo = {0};
    if (info->input == OAR_ZOO_IMAGE) {
        zo.in_channels = channels;
        spec = (oar_input_spec){OAR_F32, 4, {-1, channels, size, size}, "images"};
    } else if (info->input == OAR_ZOO_FEATURES) {
        spec = (oar_input_spec){OAR_F32, 2, {-1, info->in_channels}, "features"};
    } else {
        int64_t t = context ? context : info->context;
        if (t > info->context) {
            fprintf(stderr, "oar export: %s takes at most %lld tokens, got --context %lld\n", model,
                    (long long)info->context, (long long)t);
            return 2;
        }
        spec = (oar_input_spec){OAR_I64, 2, {-1, t}, "tokens"};
    }
    int rc = 1;
    bool hint = false;
    oar_jit *f = NULL;
    oar_scope_begin();
    oar_module *m = oar_zoo_create(model, &zo);
    int64_t step = 0;
    if (!m) goto done;
    if (oar_checkpoint_load(ckpt, m, NULL, &step) != OAR_OK) {
        hint = info->input == OAR_ZOO_IMAGE;
        goto done;
    }
    oar_module_train(m, false);
    if (dt != OAR_F32) { /* the weights to dt in place (norms stay f32); inference needs no masters */
        oar_amp_decorate_opts dec = oar_amp_decorate_defaults();
        dec.dtype = dt;
        oar_amp_masters *w = oar_amp_decorate(m, &dec);
        if (!w) goto done;
        oar_amp_masters_free(w);
    }
    const char *out_names[] = {"logits", NULL};
    oar_jit_opts jo = {.specs = &spec, .n_specs = 1, .output_names = out_names, .n_output_names = 1, .module = m};
    export_ctx ec = {m, dt};
    if (!(f = oar_jit_to_static(forward_fn, &ec, &jo))) goto done;
    int64_t shape[OAR_MAX_DIMS];
    memcpy(shape, spec.shape, sizeof shape);
    shape[0] = batch;
    oar_tensor *x = spec.dtype == OAR_I64 ? oar_randint(0, info->num_classes, shape, spec.ndim, OAR_I64)
                                          : oar_randn(shape, spec.ndim, OAR_F32);
    oar_tensor *y[1] = {0};
    if (!x || oar_jit_call(f, &x, 1, y, 1) != OAR_OK) goto done;
    if ((onnx ? oar_onnx_save(f, out_path, NULL) : oar_jit_save(f, out_path)) != OAR_OK) goto done;
    char in_desc[128], out_desc[128];
    format_spec(&spec, in_desc, sizeof in_desc);
    oar_input_spec os = {oar_dtype_of(y[0]), oar_ndim(y[0]), {0}, NULL};
    memcpy(os.shape, oar_shape(y[0]), sizeof(int64_t) * (size_t)os.ndim);
    os.shape[0] = -1;
    format_spec(&os, out_desc, sizeof out_desc);
    char stem[1024]; /* --out may be given as PATH or PATH.json */
    cli_model_path(out_path, stem, sizeof stem);
    if (onnx)
        printf("exported %s (checkpoint %s, step %lld) to %s (ONNX, opset 17)\n", model, ckpt, (long long)step,
               out_path);
    else
        printf("exported %s (checkpoint %s, step %lld) to %s.json and %s.safetensors%s%s\n", model, ckpt,
               (long long)step, stem, stem, dt != OAR_F32 ? ", weights in " : "", dt != OAR_F32 ? oar_dtype_name(dt) : "");
    printf("  input  '%s' %s\n  output '%s' %s\n", spec.name, in_desc, out_names[0], out_desc);
    rc = 0;
done:
    if (rc) fprintf(stderr, "oar export: %s\n", oar_last_error());
    if (hint)
        fprintf(stderr, "oar export: the model was built for %lld-channel %lldx%lld images: --in-channels and "
                        "--image-size must match the checkpoint's training data\n", (long long)channels,
                (long long)size, (long long)size);
    oar_jit_free(f);
    oar_module_free(m);
    oar_scope_end();
    return rc;
}
