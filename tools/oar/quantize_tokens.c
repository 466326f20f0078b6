/* `oar quantize --out` for the token models: the (dynamically) quantized module exported as a
 * program of token ids to logits, checked against the module in process. */
#include "quantize_tokens.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct tok_ctx {
    oar_module *m;
    bool stateful; /* lstm-lm: [T, N] ids and a recurrent state */
} tok_ctx;

/* ids [N, T] -> logits [N, T, V]; lstm-lm from a zero state, as train_loss runs it */
static oar_status tokens_forward(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    tok_ctx *c = user;
    if (!c->stateful) return oar_forward_n(c->m, in, 1, out, 1);
    oar_tensor *x[3] = {oar_contiguous(oar_transpose(in[0], 0, 1)), NULL, NULL}, *y[3] = {0};
    oar_status st = x[0] ? oar_forward_n(c->m, x, 3, y, 3) : oar_last_status();
    if (st != OAR_OK) return st;
    out[0] = oar_contiguous(oar_transpose(y[0], 0, 1));
    return out[0] ? OAR_OK : oar_last_status();
}

/* The first test batch: ids [N, T] and targets. */
static oar_status first_batch(const train_data *d, int64_t batch, oar_tensor **x, oar_tensor **y) {
    oar_loader_opts lo = {.batch_size = batch};
    oar_loader *l = oar_loader_new(d->test, &lo);
    oar_status st = l ? oar_loader_start_epoch(l, 0) : oar_last_status();
    if (st == OAR_OK && !oar_loader_next(l, x, y, &st) && st == OAR_OK)
        st = oar_set_error(OAR_ERR_INVALID_ARG, "quantize --out: expected a test batch, got an empty test set");
    oar_loader_free(l);
    return st;
}

oar_status quantize_tokens_export(oar_module *m, const train_data *d, int64_t batch, const char *path,
                                  double *max_diff) {
    *max_diff = INFINITY;
    oar_tensor *x = NULL, *y = NULL;
    oar_status st = first_batch(d, batch, &x, &y);
    if (st != OAR_OK) return st;
    tok_ctx c = {m, d->info->input == OAR_ZOO_TOKENS_STATEFUL};
    oar_input_spec spec = {OAR_I64, 2, {-1, oar_shape(x)[1]}, "tokens"};
    const char *names[] = {"logits"};
    oar_jit_opts jo = {.specs = &spec, .n_specs = 1, .output_names = names, .n_output_names = 1, .module = m};
    oar_module_train(m, false);
    oar_no_grad_begin();
    oar_jit *f = oar_jit_to_static(tokens_forward, &c, &jo);
    oar_tensor *ref = NULL, *got = NULL;
    st = f ? oar_jit_call(f, &x, 1, &ref, 1) : oar_last_status();
    if (st == OAR_OK) st = oar_jit_save(f, path);
    oar_jit_free(f);
    oar_release(ref);
    ref = NULL;
    /* in process (the module eagerly) against the written file in the predictor */
    if (st == OAR_OK) st = tokens_forward(&c, &x, 1, &ref, 1);
    oar_predictor *p = st == OAR_OK ? oar_predictor_create(&(oar_predictor_config){.model_path = path}) : NULL;
    if (st == OAR_OK && !p) st = oar_last_status();
    if (st == OAR_OK && (st = oar_predictor_set_input(p, "tokens", x)) == OAR_OK &&
        (st = oar_predictor_run(p)) == OAR_OK && !(got = oar_predictor_get_output(p, "logits")))
        st = oar_last_status();
    if (st == OAR_OK && oar_numel(got) != oar_numel(ref))
        st = oar_set_error(OAR_ERR_STATE, "quantize --out: expected the predictor's logits of %lld values as in "
                                          "process, got %lld", (long long)oar_numel(ref), (long long)oar_numel(got));
    if (st == OAR_OK) {
        int64_t n = oar_numel(ref);
        float *a = malloc(sizeof(float) * (size_t)n), *b = malloc(sizeof(float) * (size_t)n);
        if (!a || !b) st = oar_set_error(OAR_ERR_OOM, "quantize --out: out of memory");
        if (st == OAR_OK && (st = oar_copy_to_buffer(ref, a, sizeof(float) * (size_t)n, OAR_F32)) == OAR_OK)
            st = oar_copy_to_buffer(got, b, sizeof(float) * (size_t)n, OAR_F32);
        double mx = 0;
        for (int64_t i = 0; i < n && st == OAR_OK; i++) mx = fmax(mx, fabs((double)a[i] - (double)b[i]));
        if (st == OAR_OK) *max_diff = mx;
        free(a);
        free(b);
    }
    oar_no_grad_end();
    oar_predictor_free(p);
    oar_release(ref);
    oar_release(got);
    oar_release(x);
    oar_release(y);
    return st;
}
