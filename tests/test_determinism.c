/* Results independent of the thread count (docs/determinism.md): every zoo model trained from
 * one seed on one batch sequence at 1 thread and at 2 threads ends with bit-identical
 * parameters, eagerly and compiled, with oar_set_deterministic(true). The default mode's
 * counts are printed, not checked: they depend on the CPU path (oneDNN's conv weight
 * gradients, and GEMMs split by the thread count into parts whose BLAS kernels differ). */
#include "zoo_step_util.h"

/* The parameters after steps SGD steps at nthreads, as host copies (the caller frees them). */
static int train(const char *name, int nthreads, bool compiled, int steps, oar_tensor **params) {
    oar_set_num_threads(nthreads);
    zoo_run r;
    zoo_run_init_sgd(&r, name, 5);
    const oar_zoo_info *info = oar_zoo_find(name);
    oar_jit *jit = NULL;
    if (compiled) {
        oar_jit_opts jo = {.module = r.m, .optimizer = r.opt};
        jit = oar_jit_to_static(zoo_step_fn, &r, &jo);
        CHECK(jit != NULL);
    }
    oar_manual_seed(77);
    for (int s = 0; s < steps; s++) {
        oar_scope_begin();
        oar_tensor *x = NULL, *y = NULL, *in[2], *loss = NULL;
        zoo_batch(info, 8, 16, &x, &y);
        in[0] = x, in[1] = y;
        oar_status st = jit ? oar_jit_call(jit, in, 2, &loss, 1) : zoo_step_fn(&r, in, 2, &loss, 1);
        CHECK(st == OAR_OK);
        oar_scope_end();
    }
    int n = oar_module_num_parameters(r.m);
    for (int i = 0; i < n; i++) params[i] = oar_clone(oar_module_parameter(r.m, i, NULL));
    oar_jit_free(jit);
    zoo_run_free(&r);
    return n;
}

/* Parameters that differ between 1 and 2 threads. */
static int diffs(const char *name, bool compiled) {
    oar_tensor *a[256], *b[256];
    int n = train(name, 1, compiled, 3, a);
    CHECK(train(name, 2, compiled, 3, b) == n);
    int d = 0;
    for (int i = 0; i < n; i++) {
        d += !t_same_bits(a[i], b[i]);
        oar_release(a[i]);
        oar_release(b[i]);
    }
    return d;
}

int main(void) {
    const char *zoo[] = {"tiny", "mlp", "lenet", "resnet20", "mobilenet", "gpt-mini", "lstm-lm"};
    for (int i = 0; i < 7; i++) {
        oar_set_deterministic(false);
        int d_default = diffs(zoo[i], false);
        oar_set_deterministic(true);
        int d_eager = diffs(zoo[i], false), d_static = diffs(zoo[i], true);
        printf("test_determinism: %-9s parameters differing between 1 and 2 threads: default %d, deterministic "
               "eager %d, compiled %d\n", zoo[i], d_default, d_eager, d_static);
        CHECK(d_eager == 0);
        CHECK(d_static == 0);
    }
    oar_set_deterministic(false);
    return test_summary("test_determinism");
}
