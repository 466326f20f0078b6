/* `oar sample`: generates text from a trained gpt-mini checkpoint, one byte at a time,
 * sampling from the softmax of the last position's logits at a temperature. */
#include "cli.h"
#include "oar.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int oar_cmd_sample(int argc, char **argv) {
    static const cli_flag flags[] = {{"--checkpoint", CLI_TEXT}, {"--prompt", CLI_TEXT}, {"--tokens", CLI_INT},
                                     {"--temperature", CLI_NUMBER}, {"--seed", CLI_INT}};
    if (cli_check_flags("sample", argc, argv, flags, CLI_N_FLAGS(flags), 0)) return 2;
    const char *ckpt = cli_flag_value(argc, argv, "--checkpoint");
    const char *prompt = cli_flag_value(argc, argv, "--prompt");
    const char *n_s = cli_flag_value(argc, argv, "--tokens"), *t_s = cli_flag_value(argc, argv, "--temperature");
    const char *seed_s = cli_flag_value(argc, argv, "--seed");
    int n = n_s ? atoi(n_s) : 200;
    double temperature = t_s ? atof(t_s) : 0.8;
    if (!ckpt) ckpt = "oar-gpt-mini.safetensors";
    if (!prompt || !*prompt) prompt = "\n";
    if (n < 0 || !(temperature > 0)) {
        fprintf(stderr, "oar sample: expected --tokens >= 0 and --temperature > 0\n");
        return 2;
    }
    oar_manual_seed(seed_s ? strtoull(seed_s, NULL, 10) : 0);
    oar_module *m = oar_zoo_create("gpt-mini", NULL);
    if (!m || oar_checkpoint_load(ckpt, m, NULL, NULL) != OAR_OK) {
        fprintf(stderr, "oar sample: %s\n", oar_last_error());
        oar_module_free(m);
        return 1;
    }
    oar_module_train(m, false);
    const int64_t ctx = oar_zoo_find("gpt-mini")->context;
    size_t len = strlen(prompt), cap = len + (size_t)n + 1;
    int64_t *tokens = malloc(sizeof(int64_t) * cap);
    for (size_t i = 0; i < len; i++) tokens[i] = (unsigned char)prompt[i];
    fputs(prompt, stdout);
    oar_no_grad_begin();
    int rc = 0;
    for (int k = 0; k < n; k++) {
        oar_scope_begin();
        int64_t start = (int64_t)len > ctx ? (int64_t)len - ctx : 0, shape[2] = {1, (int64_t)len - start};
        oar_tensor *x = oar_from_data(tokens + start, shape, 2, OAR_I64);
        oar_tensor *logits = oar_forward(m, x); /* [1, T, 256] */
        oar_tensor *last = logits ? oar_slice(logits, 1, shape[1] - 1, shape[1], 1) : NULL;
        oar_tensor *p = oar_softmax(oar_mul_scalar(oar_flatten(last, 0, -1), 1.0 / temperature), 0);
        int64_t one = 1;
        oar_tensor *u = oar_rand(&one, 1, OAR_F64);
        float probs[256];
        double draw;
        if (!p || oar_copy_to_buffer(p, probs, sizeof probs, OAR_F32) != OAR_OK || oar_item(u, &draw) != OAR_OK) {
            fprintf(stderr, "\noar sample: %s\n", oar_last_error());
            rc = 1;
            oar_scope_end();
            break;
        }
        int64_t next = 255;
        for (int64_t c = 0; c < 256; c++) { /* inverse CDF */
            draw -= probs[c];
            if (draw < 0) {
                next = c;
                break;
            }
        }
        tokens[len++] = next;
        putchar((int)next);
        fflush(stdout);
        oar_scope_end();
    }
    oar_no_grad_end();
    putchar('\n');
    free(tokens);
    oar_module_free(m);
    return rc;
}
