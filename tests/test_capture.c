/* The compiler's one capture interface (oar_state_source): an owner that is neither a C module
 * nor a C optimizer (as a Python module is) names its persistent tensors to a compiled step
 * exactly as modules and optimizers do; state an optimizer makes lazily inside the first traced
 * step is named too; bad sources are refused with a message. */
#include "test_util.h"

/* A foreign owner: a linear model kept in a plain struct, as a binding would keep one. */
typedef struct linear_owner {
    oar_tensor *w, *b;
} linear_owner;

static int owner_count(void *owner) {
    (void)owner;
    return 2;
}

static oar_tensor *owner_tensor(void *owner, int i, const char **name) {
    linear_owner *o = owner;
    *name = i == 0 ? "weight" : "bias";
    return i == 0 ? o->w : o->b;
}

typedef struct step_ctx {
    linear_owner *model;
    oar_optimizer *opt;
} step_ctx;

/* One training step: mse of x @ w + b against y, backward, optimizer update. */
static oar_status train_step(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    step_ctx *c = user;
    oar_optimizer_zero_grad(c->opt);
    oar_status st;
    oar_tensor *pred = oar_add(oar_matmul(in[0], c->model->w), c->model->b);
    oar_tensor *loss = oar_mse_loss(pred, in[1], OAR_REDUCE_MEAN);
    if (!loss) return oar_last_status();
    if ((st = oar_backward(loss, NULL, false)) != OAR_OK) return st;
    if ((st = oar_optimizer_step(c->opt)) != OAR_OK) return st;
    out[0] = loss;
    return OAR_OK;
}

static void test_foreign_owner_and_lazy_state(void) {
    oar_scope_begin();
    oar_manual_seed(3);
    linear_owner model = {oar_randn((int64_t[]){4, 3}, 2, OAR_F32), oar_zeros((int64_t[]){3}, 1, OAR_F32)};
    oar_set_requires_grad(model.w, true);
    oar_set_requires_grad(model.b, true);
    oar_tensor *params[2] = {model.w, model.b};
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_ADAM);
    oo.lr = 0.01;
    oar_optimizer *opt = oar_optimizer_new(params, 2, &oo);
    CHECK(opt != NULL);
    oar_state_source mine = {.owner = &model, .count = owner_count, .tensor = owner_tensor, .prefix = "model."};
    const oar_state_source *sources[] = {&mine};
    step_ctx c = {&model, opt};
    oar_jit_opts jo = {.optimizer = opt, .state_sources = sources, .n_state_sources = 1};
    oar_jit *f = oar_jit_to_static(train_step, &c, &jo);
    CHECK(f != NULL);
    oar_tensor *x = oar_randn((int64_t[]){8, 4}, 2, OAR_F32), *y = oar_randn((int64_t[]){8, 3}, 2, OAR_F32);
    oar_tensor *io[2] = {x, y}, *loss[1] = {0};
    double first = 0, last = 0;
    for (int step = 0; step < 20; step++) {
        CHECK(oar_jit_call(f, io, 2, loss, 1) == OAR_OK);
        double v = 0;
        CHECK(oar_item(loss[0], &v) == OAR_OK);
        if (step == 0) first = v;
        last = v;
        oar_release(loss[0]);
    }
    CHECK(oar_jit_num_traces(f) == 1);
    CHECK(last < first); /* the captured state really trains: the names are not all it got */
    static char text[1 << 16];
    CHECK(oar_jit_dump(f, 0, text, sizeof text) > 0);
    CHECK(strstr(text, "\"model.weight\"") != NULL);
    CHECK(strstr(text, "\"model.bias\"") != NULL);
    /* Adam's moments do not exist before the first (traced) step; they are named all the same */
    CHECK(strstr(text, "\"optim.") != NULL);
    oar_jit_free(f);
    oar_optimizer_free(opt);
    oar_scope_end();
}

static oar_status identity(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)user, (void)n_in, (void)n_out;
    out[0] = oar_relu(in[0]);
    return out[0] ? OAR_OK : oar_last_status();
}

static void test_bad_sources(void) {
    oar_state_source broken = {.owner = NULL, .count = owner_count, .tensor = NULL};
    const oar_state_source *one[] = {&broken};
    oar_jit_opts jo = {.state_sources = one, .n_state_sources = 1};
    CHECK(oar_jit_to_static(identity, NULL, &jo) == NULL);
    CHECK(strstr(oar_last_error(), "state source 0") != NULL);
    const oar_state_source *null_one[] = {NULL};
    jo.state_sources = null_one;
    CHECK(oar_jit_to_static(identity, NULL, &jo) == NULL);
    CHECK(strstr(oar_last_error(), "got NULL") != NULL);
    oar_state_source ok = {.owner = NULL, .count = owner_count, .tensor = owner_tensor};
    const oar_state_source *many[20];
    for (int i = 0; i < 20; i++) many[i] = &ok;
    jo.state_sources = many;
    jo.n_state_sources = 20;
    CHECK(oar_jit_to_static(identity, NULL, &jo) == NULL);
    CHECK(strstr(oar_last_error(), "at most") != NULL);
    CHECK(oar_module_state_source(NULL) == NULL && oar_optimizer_state_source(NULL) == NULL);
}

/* A module's own source lists its parameters then its buffers, with their dotted names. */
static void test_module_source(void) {
    oar_module *m = oar_zoo_create("lenet", NULL);
    const oar_state_source *s = oar_module_state_source(m);
    CHECK(s && s->count(s->owner) == oar_module_num_parameters(m) + oar_module_num_buffers(m));
    const char *a = NULL, *b = NULL;
    CHECK(s->tensor(s->owner, 0, &a) == oar_module_parameter(m, 0, &b));
    CHECK(a && b && !strcmp(a, b));
    oar_module_free(m);
}

int main(void) {
    test_foreign_owner_and_lazy_state();
    test_bad_sources();
    test_module_source();
    return test_summary("test_capture");
}
