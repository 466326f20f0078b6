/* The same training step run eagerly and compiled: a small classifier learns a synthetic
 * 4-class problem with its whole step (forward, loss, backward, optimizer) traced once by
 * oar_jit_to_static, then the model is exported and run by the predictor, with no model code.
 *
 *   example_static_step [--steps N] [--out DIR]
 */
#include "oar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct step_ctx {
    oar_module *net;
    oar_optimizer *opt;
} step_ctx;

/* in: x [N, 8], y [N]; out: the loss. Ordinary eager code: compiling it changes nothing here. */
static oar_status train_step(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    step_ctx *c = user;
    oar_optimizer_zero_grad(c->opt);
    oar_tensor *loss = oar_cross_entropy(oar_forward(c->net, in[0]), in[1], NULL);
    oar_status st = loss ? oar_backward(loss, NULL, false) : oar_last_status();
    if (st == OAR_OK) st = oar_optimizer_step(c->opt);
    out[0] = loss;
    return st;
}

static oar_status forward(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    out[0] = oar_forward(user, in[0]);
    return out[0] ? OAR_OK : oar_last_status();
}

/* A batch: 8 features; the class is the quadrant of (x0 + x1, x2 - x3). */
static void make_batch(int64_t n, oar_tensor **x, oar_tensor **y) {
    *x = oar_randn((int64_t[]){n, 8}, 2, OAR_F32);
    const float *p = oar_data(*x);
    int64_t *labels = malloc(sizeof(int64_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) labels[i] = 2 * (p[8 * i] + p[8 * i + 1] > 0) + (p[8 * i + 2] - p[8 * i + 3] > 0);
    *y = oar_from_data(labels, &n, 1, OAR_I64);
    free(labels);
}

int main(int argc, char **argv) {
    int steps = 300;
    const char *dir = "/tmp";
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--steps")) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--out")) dir = argv[++i];
    }
    oar_manual_seed(1);
    oar_module *layers[3] = {oar_nn_linear(8, 32, true), oar_nn_activation(OAR_ACT_RELU, 0), oar_nn_linear(32, 4, true)};
    oar_module *net = oar_nn_sequential(layers, 3);
    oar_optim_opts so = oar_optim_defaults(OAR_OPTIM_ADAM);
    so.lr = 1e-2;
    step_ctx ctx = {net, oar_optimizer_for(net, &so)};

    /* one call compiles the step; the batch dim is dynamic, so every batch size shares it */
    oar_input_spec specs[2] = {{OAR_F32, 2, {-1, 8}, "x"}, {OAR_I64, 1, {-1}, "y"}};
    oar_jit_opts jo = {.specs = specs, .n_specs = 2, .module = net, .optimizer = ctx.opt};
    oar_jit *step = oar_jit_to_static(train_step, &ctx, &jo);
    double loss = 0;
    for (int s = 0; s < steps; s++) {
        oar_scope_begin();
        oar_tensor *io[2], *out[1];
        make_batch(s % 2 ? 48 : 64, &io[0], &io[1]);
        if (oar_jit_call(step, io, 2, out, 1) != OAR_OK || oar_item(out[0], &loss) != OAR_OK) {
            fprintf(stderr, "step %d failed: %s\n", s, oar_last_error());
            return 1;
        }
        if (s % 100 == 0 || s == steps - 1) printf("step %d: loss %.4f\n", s, loss);
        oar_scope_end();
    }
    printf("traced %lld time(s) for %d steps of two batch sizes\n", (long long)oar_jit_num_traces(step), steps);
    oar_jit_free(step); /* before the optimizer its program updates */

    /* export the forward pass in eval mode and run it with the predictor */
    oar_module_train(net, false);
    oar_input_spec fs = {OAR_F32, 2, {-1, 8}, "x"};
    const char *names[1] = {"logits"};
    oar_jit_opts fo = {.specs = &fs, .n_specs = 1, .output_names = names, .n_output_names = 1};
    oar_jit *fwd = oar_jit_to_static(forward, net, &fo);
    char path[1024];
    snprintf(path, sizeof path, "%s/oar_example_classifier", dir);
    oar_scope_begin();
    oar_tensor *x, *y, *logits[1];
    make_batch(256, &x, &y);
    if (oar_jit_call(fwd, &x, 1, logits, 1) != OAR_OK || oar_jit_save(fwd, path) != OAR_OK) {
        fprintf(stderr, "export failed: %s\n", oar_last_error());
        return 1;
    }
    oar_predictor *pred = oar_predictor_create(&(oar_predictor_config){.model_path = path});
    if (!pred || oar_predictor_set_input(pred, "x", x) != OAR_OK || oar_predictor_run(pred) != OAR_OK) {
        fprintf(stderr, "predictor failed: %s\n", oar_last_error());
        return 1;
    }
    oar_tensor *guess = oar_argmax(oar_predictor_get_output(pred, "logits"), 1, false);
    const int64_t *g = oar_data(guess), *t = oar_data(y);
    int right = 0;
    for (int i = 0; i < 256; i++) right += g[i] == t[i];
    printf("predictor on 256 fresh samples: %.1f%% correct (files %s.json, %s.safetensors)\n", 100.0 * right / 256, path,
           path);
    oar_scope_end();
    oar_predictor_free(pred);
    oar_jit_free(fwd);
    oar_optimizer_free(ctx.opt);
    oar_module_free(net);
    return right >= 200 ? 0 : 1; /* the problem is easy: a working pipeline gets > 78% */
}
