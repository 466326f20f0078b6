/* AMP in compiled steps (issue 15): an O1 (and an O2, f32 masters) f16 training step with a loss scaler traced into one
 * program holds the scaler's check-and-skip (one fused amp_unscale, amp_skip_step masking the
 * optimizer's updates); over steps with planted infs it gives the eager step's bits (losses,
 * parameters, optimizer state, scale, growth tracker, skip count and streak, the optimizer's
 * step count), for SGD with momentum (a skipped first step leaves the buffer to be filled) and
 * Adam (a skipped step does not advance its step count); a compiled run checkpointed and resumed
 * ends with the uninterrupted run's bits. */
#include "test_util.h"

#include <unistd.h>

static oar_tensor *mat(int64_t r, int64_t c, double a, double b) {
    int64_t s[2] = {r, c};
    float *v = malloc(sizeof(float) * (size_t)(r * c));
    for (int64_t i = 0; i < r * c; i++) v[i] = (float)(sin(a * (double)i + b) * 0.5);
    oar_tensor *t = oar_from_data(v, s, 2, OAR_F32);
    free(v);
    return t;
}

static oar_module *mlp(void) {
    oar_manual_seed(11);
    int64_t ln_shape[1] = {16};
    oar_module *layers[5] = {oar_nn_linear(8, 16, true), oar_nn_activation(OAR_ACT_GELU, 0),
                             oar_nn_layer_norm(ln_shape, 1, 1e-5, true), oar_nn_linear(16, 4, true),
                             oar_nn_activation(OAR_ACT_TANH, 0)};
    return oar_nn_sequential(layers, 5);
}

typedef struct run {
    oar_module *m;
    oar_amp_masters *w; /* O2 */
    oar_optimizer *o;
    oar_grad_scaler *sc;
    oar_jit *f; /* NULL: eager */
} run;

/* One step: autocast forward, scaled backward, the scaler's step and update. */
static oar_status step_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    run *r = user;
    oar_optimizer_zero_grad(r->o);
    oar_autocast_opts ac = oar_autocast_defaults();
    ac.dtype = OAR_F16;
    ac.level = r->w ? OAR_AMP_O2 : OAR_AMP_O1;
    oar_status st = oar_autocast_begin(&ac);
    if (st != OAR_OK) return st;
    oar_tensor *loss = oar_mse_loss(oar_forward(r->m, in[0]), in[1], OAR_REDUCE_MEAN);
    oar_autocast_end();
    if (!loss) return oar_last_status();
    if ((st = oar_backward(oar_grad_scaler_scale(r->sc, loss), NULL, false)) != OAR_OK) return st;
    if ((st = r->w ? oar_amp_masters_step(r->w, r->o, r->sc, NULL) : oar_grad_scaler_step(r->sc, r->o, NULL)) != OAR_OK)
        return st;
    if ((st = oar_grad_scaler_update(r->sc)) != OAR_OK) return st;
    out[0] = loss;
    return OAR_OK;
}

/* Heap-allocated: the compiled function keeps the pointer as its user data. */
static run *run_new(oar_optim_kind kind, bool compiled, bool o2) {
    run *r = calloc(1, sizeof *r);
    r->m = mlp();
    oar_optim_opts oo = oar_optim_defaults(kind);
    oo.lr = 0.02;
    if (kind == OAR_OPTIM_SGD) oo.momentum = 0.9;
    if (o2) {
        oar_amp_decorate_opts d = oar_amp_decorate_defaults();
        d.dtype = OAR_F16;
        r->w = oar_amp_decorate(r->m, &d);
        r->o = oar_amp_masters_optimizer(r->w, &oo);
    } else {
        r->o = oar_optimizer_for(r->m, &oo);
    }
    oar_grad_scaler_opts so = oar_grad_scaler_defaults();
    so.growth_interval = 2;
    so.warn_after = 0;
    r->sc = oar_grad_scaler_new(&so);
    if (compiled) {
        const oar_state_source *src[2] = {oar_grad_scaler_state_source(r->sc), oar_amp_masters_state_source(r->w)};
        oar_jit_opts jo = {.module = r->m, .optimizer = r->o, .state_sources = src, .n_state_sources = o2 ? 2 : 1};
        r->f = oar_jit_to_static(step_fn, r, &jo);
        CHECK(r->f != NULL);
    }
    return r;
}

static void run_free(run *r) {
    oar_jit_free(r->f);
    oar_grad_scaler_free(r->sc);
    oar_optimizer_free(r->o);
    oar_amp_masters_free(r->w);
    oar_module_free(r->m);
    free(r);
}

/* Steps first..last-1; infs planted into the input at steps 0 and 3 (every gradient goes NaN). */
static void steps(run *r, int first, int last, oar_tensor **losses) {
    oar_tensor *x = mat(32, 8, 0.13, 0.4), *bad = mat(32, 8, 0.13, 0.4), *y = mat(32, 4, 0.29, 0.1);
    ((float *)oar_data(bad))[5] = INFINITY;
    for (int i = first; i < last; i++) {
        oar_tensor *in[2] = {i == 0 || i == 3 ? bad : x, y}, *loss = NULL;
        CHECK((r->f ? oar_jit_call(r->f, in, 2, &loss, 1) : step_fn(r, in, 2, &loss, 1)) == OAR_OK);
        losses[i] = loss;
    }
}

static bool same_state(run *a, run *b) {
    bool same = oar_grad_scaler_get_scale(a->sc) == oar_grad_scaler_get_scale(b->sc) &&
                oar_grad_scaler_growth_tracker(a->sc) == oar_grad_scaler_growth_tracker(b->sc) &&
                oar_grad_scaler_skipped(a->sc) == oar_grad_scaler_skipped(b->sc) &&
                oar_grad_scaler_skip_streak(a->sc) == oar_grad_scaler_skip_streak(b->sc) &&
                oar_optimizer_steps(a->o) == oar_optimizer_steps(b->o);
    if (!same)
        fprintf(stderr, "scaler/optimizer state differs: scale %g/%g tracker %lld/%lld skipped %lld/%lld streak "
                        "%lld/%lld steps %lld/%lld\n", oar_grad_scaler_get_scale(a->sc), oar_grad_scaler_get_scale(b->sc),
                (long long)oar_grad_scaler_growth_tracker(a->sc), (long long)oar_grad_scaler_growth_tracker(b->sc),
                (long long)oar_grad_scaler_skipped(a->sc), (long long)oar_grad_scaler_skipped(b->sc),
                (long long)oar_grad_scaler_skip_streak(a->sc), (long long)oar_grad_scaler_skip_streak(b->sc),
                (long long)oar_optimizer_steps(a->o), (long long)oar_optimizer_steps(b->o));
    for (int i = 0; i < oar_module_num_parameters(a->m); i++) {
        const char *name;
        oar_tensor *p = oar_module_parameter(a->m, i, &name), *q = oar_module_parameter(b->m, i, NULL);
        if (!t_same_bits(p, q)) {
            fprintf(stderr, "parameter %s differs\n", name);
            same = false;
        }
    }
    for (int i = 0; i < oar_amp_masters_count(a->w); i++) {
        const char *name;
        if (!t_same_bits(oar_amp_master(a->w, i, &name), oar_amp_master(b->w, i, NULL))) {
            fprintf(stderr, "master %s differs\n", name);
            same = false;
        }
    }
    for (int i = 0; i < oar_optimizer_num_state(a->o); i++) {
        const char *name;
        oar_tensor *p = oar_optimizer_state(a->o, i, &name), *q = oar_optimizer_state(b->o, i, NULL);
        if (!q || !t_same_bits(p, q)) {
            fprintf(stderr, "optimizer state %s differs\n", name);
            same = false;
        }
    }
    return same;
}

#define N_STEPS 8

static void test_eager_equal(oar_optim_kind kind, bool o2) {
    oar_scope_begin();
    run *e = run_new(kind, false, o2), *c = run_new(kind, true, o2);
    oar_tensor *le[N_STEPS], *lc[N_STEPS];
    steps(e, 0, N_STEPS, le);
    steps(c, 0, N_STEPS, lc);
    bool same_losses = true;
    for (int i = 0; i < N_STEPS; i++) same_losses &= t_same_bits(le[i], lc[i]);
    CHECK(same_losses);
    CHECK(same_state(e, c));
    /* the planted steps were skipped, the scale backed off twice and grew at the interval */
    CHECK(oar_grad_scaler_skipped(c->sc) == 2);
    CHECK(oar_optimizer_steps(c->o) == N_STEPS - 2);
    CHECK(oar_grad_scaler_get_scale(c->sc) == 65536.0 * 0.5 * 2 * 0.5 * 2 * 2);
    /* one fused check and the mask are ops of the program */
    static char dump[1 << 18];
    CHECK(oar_jit_dump(c->f, 0, dump, sizeof dump) > 0);
    int unscales = 0, skips = 0;
    for (const char *p = dump; (p = strstr(p, "amp_unscale")) != NULL; p++) unscales++;
    for (const char *p = dump; (p = strstr(p, "amp_skip_step")) != NULL; p++) skips++;
    CHECK(unscales == 1 && skips == 1); /* amp_unscale_grads: one fused pass */
    CHECK(oar_jit_num_traces(c->f) == 1);
    run_free(e);
    run_free(c);
    oar_scope_end();
}

/* A compiled run saved after 4 steps and resumed in fresh objects (a new program) ends with the
 * bits of the run that went on. */
static void test_resume(bool o2) {
    oar_scope_begin();
    char path[256];
    snprintf(path, sizeof path, "test_amp_static_%d.safetensors", (int)getpid());
    run *a = run_new(OAR_OPTIM_ADAM, true, o2), *b = run_new(OAR_OPTIM_ADAM, true, o2);
    oar_tensor *la[N_STEPS], *lb[N_STEPS];
    steps(a, 0, 4, la);
    CHECK(oar_amp_checkpoint_save(path, a->m, a->o, NULL, a->w, a->sc, 4) == OAR_OK);
    steps(a, 4, N_STEPS, la);
    int64_t step = 0;
    CHECK(oar_amp_checkpoint_load(path, b->m, b->o, NULL, b->w, b->sc, &step) == OAR_OK && step == 4);
    steps(b, 4, N_STEPS, lb);
    bool same_losses = true;
    for (int i = 4; i < N_STEPS; i++) same_losses &= t_same_bits(la[i], lb[i]);
    CHECK(same_losses);
    CHECK(same_state(a, b));
    char sp[300];
    snprintf(sp, sizeof sp, "%s.scaler", path);
    remove(sp);
    remove(path);
    run_free(a);
    run_free(b);
    oar_scope_end();
}

/* A compiled function outliving its scaler is refused at the next call, not run on freed state. */
static void test_freed_scaler(void) {
    oar_scope_begin();
    run *c = run_new(OAR_OPTIM_SGD, true, false);
    oar_tensor *l[2];
    steps(c, 1, 2, l);
    oar_grad_scaler_free(c->sc);
    c->sc = NULL;
    oar_tensor *in[2] = {mat(32, 8, 0.13, 0.4), mat(32, 4, 0.29, 0.1)}, *loss = NULL;
    CHECK_ERR(oar_jit_call(c->f, in, 2, &loss, 1), "the loss scaler this function uses was freed");
    run_free(c);
    oar_scope_end();
}

int main(void) {
    test_eager_equal(OAR_OPTIM_SGD, false);
    test_eager_equal(OAR_OPTIM_ADAM, false);
    test_eager_equal(OAR_OPTIM_ADAMW, true); /* O2: f16 parameters, f32 masters */
    test_resume(false);
    test_resume(true);
    test_freed_scaler();
    return test_summary("test_amp_static");
}
