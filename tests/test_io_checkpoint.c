/* Checkpoints: module round trip (parameters, buffers, step, generator), one message listing
 * every mismatch with nothing changed, bad files, and resuming training from a checkpoint
 * bit for bit like the uninterrupted run (SGD with momentum, Adam, AdamW with amsgrad). */
#include "test_io_util.h"

static char dir[512];

static const char *in_dir(char *buf, size_t size, const char *name) {
    snprintf(buf, size, "%s/%s", dir, name);
    return buf;
}

/* ---- a plain module type for hand-made layouts */
static oar_status identity_forward(oar_module *self, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    out[0] = oar_retain(in[0]);
    return OAR_OK;
}
static const oar_module_ops plain_ops = {"Plain", identity_forward, NULL, NULL};

static oar_module *plain(void) { return oar_module_new(&plain_ops, NULL); }

static void add_param(oar_module *m, const char *name, const int64_t *shape, int ndim, oar_dtype dt, double v) {
    oar_tensor *t = oar_full(shape, ndim, v, dt);
    CHECK(oar_module_add_parameter(m, name, t) == OAR_OK);
    oar_release(t);
}

static void add_buffer(oar_module *m, const char *name, const int64_t *shape, int ndim, double v) {
    oar_tensor *t = oar_full(shape, ndim, v, OAR_F32);
    CHECK(oar_module_add_buffer(m, name, t) == OAR_OK);
    oar_release(t);
}

/* Every parameter and buffer of a and b has the same bytes. */
static bool same_module(oar_module *a, oar_module *b) {
    if (oar_module_num_parameters(a) != oar_module_num_parameters(b) ||
        oar_module_num_buffers(a) != oar_module_num_buffers(b))
        return false;
    for (int i = 0; i < oar_module_num_parameters(a); i++)
        if (!io_same_tensor(oar_module_parameter(a, i, NULL), oar_module_parameter(b, i, NULL))) return false;
    for (int i = 0; i < oar_module_num_buffers(a); i++)
        if (!io_same_tensor(oar_module_buffer(a, i, NULL), oar_module_buffer(b, i, NULL))) return false;
    return true;
}

static oar_module *net(void) {
    oar_module *layers[4] = {oar_nn_linear(6, 16, true), oar_nn_batch_norm1d(16, 1e-5, 0.1, true, true),
                             oar_nn_dropout(0.2), oar_nn_linear(16, 3, true)};
    return oar_nn_sequential(layers, 4);
}

static void test_module_roundtrip(void) {
    oar_scope_begin();
    char path[600];
    in_dir(path, sizeof path, "net.ckpt");
    oar_manual_seed(1);
    oar_module *a = net();
    oar_release(oar_forward(a, oar_randn((int64_t[]){5, 6}, 2, OAR_F32))); /* running statistics move */
    oar_rng_state saved = oar_rng_get_state();
    CHECK(oar_checkpoint_save(path, a, NULL, 17) == OAR_OK);
    oar_manual_seed(2);
    oar_module *b = net();
    CHECK(!same_module(a, b));
    oar_tensor *w0 = oar_module_parameter(b, 0, NULL);
    oar_manual_seed(999);
    int64_t step = -1;
    CHECK(oar_checkpoint_load(path, b, NULL, &step) == OAR_OK);
    CHECK(step == 17);
    CHECK(same_module(a, b));
    CHECK(oar_module_parameter(b, 0, NULL) == w0 && oar_requires_grad(w0)); /* loaded in place */
    oar_rng_state now = oar_rng_get_state();
    CHECK(now.seed == saved.seed && now.offset == saved.offset);
    CHECK(oar_checkpoint_load(path, b, NULL, NULL) == OAR_OK); /* step may be NULL */

    /* the file is plain safetensors with the documented names and metadata */
    oar_tensor_dict *d = oar_safetensors_load(path);
    CHECK(d && oar_dict_get(d, "model.0.weight") && oar_dict_get(d, "model.1.running_mean") &&
          oar_dict_get(d, "model.3.bias"));
    char num[32];
    if (d) {
        CHECK(!strcmp(oar_dict_meta(d, "format"), "oar.checkpoint") && !strcmp(oar_dict_meta(d, "format_version"), "1"));
        CHECK(!strcmp(oar_dict_meta(d, "oar_version"), oar_version()) && !strcmp(oar_dict_meta(d, "step"), "17"));
        snprintf(num, sizeof num, "%llu", (unsigned long long)saved.offset);
        CHECK(!strcmp(oar_dict_meta(d, "rng_offset"), num));
        snprintf(num, sizeof num, "%llu", (unsigned long long)saved.seed);
        CHECK(!strcmp(oar_dict_meta(d, "rng_seed"), num));
        CHECK(oar_dict_meta(d, "optim_kind") == NULL);
        int n_model = 0;
        for (int i = 0; i < oar_dict_size(d); i++) {
            const char *name;
            oar_dict_at(d, i, &name);
            n_model += !strncmp(name, "model.", 6);
        }
        CHECK(n_model == oar_dict_size(d) && n_model == oar_module_num_parameters(a) + oar_module_num_buffers(a));
    }
    oar_dict_free(d);
    oar_module_free(a);
    oar_module_free(b);
    oar_scope_end();
}

static void test_mismatch_report(void) {
    oar_scope_begin();
    char path[600];
    in_dir(path, sizeof path, "mismatch.ckpt");
    /* the file: Linear(4, 8) -> Linear(8, 3) */
    oar_manual_seed(3);
    oar_module *l1[2] = {oar_nn_linear(4, 8, true), oar_nn_linear(8, 3, true)};
    oar_module *saved = oar_nn_sequential(l1, 2);
    CHECK(oar_checkpoint_save(path, saved, NULL, 5) == OAR_OK);
    /* the module: a different output size, no bias in the last layer, one extra parameter */
    oar_module *l2[2] = {oar_nn_linear(4, 8, true), oar_nn_linear(8, 5, false)};
    oar_module *other = oar_nn_sequential(l2, 2);
    add_param(other, "scale", (int64_t[]){1}, 1, OAR_F32, 2.0);
    oar_no_grad_begin(); /* copies of other's values, to see that nothing changed */
    oar_tensor *before[2] = {oar_clone(oar_module_get(other, "0.weight")), oar_clone(oar_module_get(other, "0.bias"))};
    oar_no_grad_end();
    oar_rng_state rng = oar_rng_get_state();
    int64_t step = -1;
    oar_status st = oar_checkpoint_load(path, other, NULL, &step);
    const char *msg = oar_last_error();
    printf("mismatch message: %s\n", msg);
    CHECK(st == OAR_ERR_INVALID_ARG);
    CHECK(strstr(msg, "3 problems: 1 missing, 1 unexpected, 1 mismatched, 0 other"));
    CHECK(strstr(msg, "missing model.scale"));
    CHECK(strstr(msg, "unexpected model.1.bias"));
    CHECK(strstr(msg, "model.1.weight is f32 [3, 8] in the file, f32 [5, 8] in the module"));
    CHECK(strstr(msg, "nothing was loaded"));
    CHECK(step == -1);
    /* model.0.* fit, yet were not loaded */
    CHECK(io_same_tensor(before[0], oar_module_get(other, "0.weight")));
    CHECK(io_same_tensor(before[1], oar_module_get(other, "0.bias")));
    CHECK(oar_rng_get_state().offset == rng.offset && oar_rng_get_state().seed == rng.seed);

    /* dtypes, nested children, buffers */
    oar_module *f = plain(), *fc = plain();
    add_param(f, "a", (int64_t[]){2, 3}, 2, OAR_F32, 1);
    add_param(f, "b", (int64_t[]){4}, 1, OAR_F32, 1);
    add_buffer(f, "r", (int64_t[]){2}, 1, 1);
    add_param(fc, "w", (int64_t[]){5}, 1, OAR_F32, 1);
    CHECK(oar_module_add_child(f, "c", fc) == OAR_OK);
    CHECK(oar_checkpoint_save(path, f, NULL, 0) == OAR_OK);
    oar_module *g = plain();
    add_param(g, "a", (int64_t[]){2, 3}, 2, OAR_F32, 7);
    add_param(g, "b", (int64_t[]){4}, 1, OAR_F64, 7);
    add_buffer(g, "r", (int64_t[]){2}, 1, 7);
    add_buffer(g, "extra_buf", (int64_t[]){1}, 1, 7);
    CHECK(oar_checkpoint_load(path, g, NULL, NULL) == OAR_ERR_INVALID_ARG);
    msg = oar_last_error();
    CHECK(strstr(msg, "3 problems: 1 missing, 1 unexpected, 1 mismatched"));
    CHECK(strstr(msg, "model.b is f32 [4] in the file, f64 [4] in the module"));
    CHECK(strstr(msg, "unexpected model.c.w") && strstr(msg, "missing model.extra_buf"));
    CHECK(t_at(oar_module_get(g, "a"), 0) == 7 && t_at(oar_module_get(g, "r"), 1) == 7);

    /* many problems: the counts are exact, the details are cut to fit the message */
    oar_module *many = plain();
    for (int i = 0; i < 200; i++) {
        char name[32];
        snprintf(name, sizeof name, "parameter_with_a_long_name_%d", i);
        add_param(many, name, (int64_t[]){1}, 1, OAR_F32, 0);
    }
    CHECK(oar_checkpoint_load(path, many, NULL, NULL) == OAR_ERR_INVALID_ARG);
    msg = oar_last_error();
    CHECK(strstr(msg, "204 problems: 200 missing, 4 unexpected, 0 mismatched, 0 other") && strstr(msg, " more)"));
    CHECK(strlen(msg) < 1024);
    oar_module_free(saved);
    oar_module_free(other);
    oar_module_free(f);
    oar_module_free(g);
    oar_module_free(many);
    oar_scope_end();
}

static void test_bad_files(void) {
    oar_scope_begin();
    char path[600], bad[600];
    oar_module *m = net();
    in_dir(path, sizeof path, "plain.safetensors");
    oar_tensor *w = oar_module_parameter(m, 0, NULL);
    const char *name = "model.0.weight";
    CHECK(oar_safetensors_save(path, &name, &w, 1, NULL, NULL, 0) == OAR_OK);
    CHECK(oar_checkpoint_load(path, m, NULL, NULL) == OAR_ERR_INVALID_ARG &&
          strstr(oar_last_error(), "not an oar checkpoint (metadata 'format' is absent"));
    in_dir(path, sizeof path, "good.ckpt");
    CHECK(oar_checkpoint_save(path, m, NULL, 3) == OAR_OK);
    size_t size;
    unsigned char *buf = io_read_file(path, &size);
    in_dir(bad, sizeof bad, "truncated.ckpt");
    CHECK(buf && io_write_file(bad, buf, size - 1));
    CHECK(oar_checkpoint_load(bad, m, NULL, NULL) == OAR_ERR_FORMAT &&
          !strncmp(oar_last_error(), "checkpoint_load: safetensors_load: '", 36));
    free(buf);
    CHECK_ERR(oar_checkpoint_load(in_dir(bad, sizeof bad, "absent.ckpt"), m, NULL, NULL), "cannot open");
    CHECK_ERR(oar_checkpoint_load(path, NULL, NULL, NULL), "expected a module");
    CHECK_ERR(oar_checkpoint_save(path, NULL, NULL, 0), "expected a module");
    CHECK(oar_checkpoint_save(in_dir(bad, sizeof bad, "no/dir/x.ckpt"), m, NULL, 0) == OAR_ERR_IO &&
          !strncmp(oar_last_error(), "checkpoint_save: safetensors_save: cannot create a temporary", 60));
    /* metadata that does not parse */
    oar_tensor_dict *d = oar_safetensors_load(path);
    int n = oar_dict_size(d);
    const char **names = malloc(sizeof(char *) * (size_t)n);
    oar_tensor **ts = malloc(sizeof(oar_tensor *) * (size_t)n);
    for (int i = 0; i < n; i++) ts[i] = oar_dict_at(d, i, &names[i]);
    const char *mk[6] = {"format", "format_version", "step", "rng_seed", "rng_offset", "oar_version"};
    const char *mv[6] = {"oar.checkpoint", "2", "12x", "-1", "1", "0.1.0"};
    CHECK(oar_safetensors_save(in_dir(bad, sizeof bad, "meta.ckpt"), names, ts, n, mk, mv, 6) == OAR_OK);
    CHECK(oar_checkpoint_load(bad, m, NULL, NULL) == OAR_ERR_INVALID_ARG);
    const char *msg = oar_last_error();
    CHECK(strstr(msg, "format version '2' is not one this oar reads") && strstr(msg, "'step' is absent or not an integer") &&
          strstr(msg, "'rng_seed' or 'rng_offset'"));
    free(names);
    free(ts);
    oar_dict_free(d);
    oar_module_free(m);
    oar_scope_end();
}

/* ---- resuming training */
static void train(oar_module *m, oar_optimizer *o, int from, int to) {
    for (int step = from; step < to; step++) {
        oar_scope_begin();
        oar_tensor *x = oar_randn((int64_t[]){8, 6}, 2, OAR_F32), *y = oar_randn((int64_t[]){8, 3}, 2, OAR_F32);
        oar_tensor *loss = oar_mse_loss(oar_forward(m, x), y, OAR_REDUCE_MEAN);
        CHECK(loss && oar_backward(loss, NULL, false) == OAR_OK);
        CHECK(oar_optimizer_step(o) == OAR_OK);
        oar_optimizer_zero_grad(o);
        oar_scope_end();
    }
}

static void test_resume(const char *label, oar_optim_opts opts) {
    oar_scope_begin();
    char path[600];
    in_dir(path, sizeof path, "resume.ckpt");
    enum { K = 4, N = 10 };
    /* the uninterrupted run */
    oar_manual_seed(42);
    oar_module *ref = net();
    oar_optimizer *oref = oar_optimizer_for(ref, &opts);
    train(ref, oref, 0, N);
    /* the same run, stopped after K steps */
    oar_manual_seed(42);
    oar_module *first = net();
    oar_optimizer *ofirst = oar_optimizer_for(first, &opts);
    train(first, ofirst, 0, K);
    CHECK(oar_checkpoint_save(path, first, ofirst, K) == OAR_OK);
    oar_optimizer_free(ofirst);
    oar_module_free(first);
    /* resumed in fresh objects, after the generator has moved elsewhere */
    for (int variant = 0; variant < 2; variant++) {
        oar_manual_seed(1234);
        oar_module *m = net();
        oar_optimizer *o = oar_optimizer_for(m, &opts);
        int64_t step = -1;
        CHECK(oar_checkpoint_load(path, m, o, &step) == OAR_OK);
        CHECK(step == K && oar_optimizer_steps(o) == K && oar_optimizer_num_state(o) > 0);
        if (variant == 1) oar_manual_seed(1234); /* control: without the generator it diverges */
        train(m, o, (int)step, N);
        bool same = same_module(ref, m);
        if (variant == 0) {
            if (!same) fprintf(stderr, "%s: the resumed run differs from the uninterrupted one\n", label);
            CHECK(same);
            CHECK(oar_optimizer_steps(o) == N);
        } else {
            CHECK(!same);
        }
        oar_optimizer_free(o);
        oar_module_free(m);
    }
    printf("test_io_checkpoint: %s resumes bit for bit\n", label);
    oar_optimizer_free(oref);
    oar_module_free(ref);
    oar_scope_end();
}

/* Copies a checkpoint, dropping tensor `drop` and adding `add` (may be NULL). */
static void rewrite(const char *src, const char *dst, const char *drop, const char *add_name, oar_tensor *add) {
    oar_tensor_dict *d = oar_safetensors_load(src);
    int n = oar_dict_size(d), k = 0;
    const char **names = malloc(sizeof(char *) * (size_t)(n + 1));
    oar_tensor **ts = malloc(sizeof(oar_tensor *) * (size_t)(n + 1));
    for (int i = 0; i < n; i++) {
        ts[k] = oar_dict_at(d, i, &names[k]);
        if (!drop || strcmp(names[k], drop)) k++;
    }
    if (add) {
        names[k] = add_name;
        ts[k++] = add;
    }
    int nm = oar_dict_meta_size(d);
    const char **mk = malloc(sizeof(char *) * (size_t)nm), **mv = malloc(sizeof(char *) * (size_t)nm);
    for (int i = 0; i < nm; i++) mv[i] = oar_dict_meta_at(d, i, &mk[i]);
    CHECK(oar_safetensors_save(dst, names, ts, k, mk, mv, nm) == OAR_OK);
    free(names);
    free(ts);
    free(mk);
    free(mv);
    oar_dict_free(d);
}

static void test_optimizer_mismatch(void) {
    oar_scope_begin();
    char path[600], bad[600];
    in_dir(path, sizeof path, "adam.ckpt");
    in_dir(bad, sizeof bad, "adam_bad.ckpt");
    oar_optim_opts adam = oar_optim_defaults(OAR_OPTIM_ADAM), sgd = oar_optim_defaults(OAR_OPTIM_SGD);
    adam.lr = 1e-2;
    sgd.lr = 0.1;
    sgd.momentum = 0.9;
    oar_manual_seed(8);
    oar_module *m = net();
    oar_optimizer *o = oar_optimizer_for(m, &adam);
    train(m, o, 0, 2);
    CHECK(oar_checkpoint_save(path, m, o, 2) == OAR_OK);

    oar_module *fresh = net();
    oar_optimizer *os = oar_optimizer_for(fresh, &sgd);
    CHECK(oar_checkpoint_load(path, fresh, os, NULL) == OAR_ERR_INVALID_ARG &&
          strstr(oar_last_error(), "optimizer: adam in the file, sgd given"));
    CHECK(oar_optimizer_num_state(os) == 0 && !same_module(m, fresh));
    CHECK(oar_checkpoint_load(path, fresh, NULL, NULL) == OAR_OK && same_module(m, fresh)); /* model only */

    /* a missing slot, an unknown one, a wrong shape: all reported, nothing loaded */
    oar_tensor *wrong = oar_zeros((int64_t[]){3}, 1, OAR_F32);
    rewrite(path, bad, "optim.0.exp_avg_sq", "optim.99.exp_avg", wrong);
    oar_module *m2 = net();
    oar_optimizer *o2 = oar_optimizer_for(m2, &adam);
    CHECK(oar_checkpoint_load(bad, m2, o2, NULL) == OAR_ERR_INVALID_ARG);
    const char *msg = oar_last_error();
    CHECK(strstr(msg, "missing optim.0.exp_avg_sq") && strstr(msg, "unexpected optim.99.exp_avg"));
    CHECK(oar_optimizer_num_state(o2) == 0 && oar_optimizer_steps(o2) == 0 && !same_module(m, m2));
    rewrite(path, bad, "optim.1.exp_avg", "optim.1.exp_avg", wrong);
    CHECK(oar_checkpoint_load(bad, m2, o2, NULL) == OAR_ERR_INVALID_ARG &&
          strstr(oar_last_error(), "optim.1.exp_avg is f32 [3] in the file, f32 [16] expected"));
    CHECK(oar_optimizer_num_state(o2) == 0);

    /* a file without optimizer state, or from before the first step, into a used optimizer */
    in_dir(bad, sizeof bad, "no_optim.ckpt");
    CHECK(oar_checkpoint_save(bad, m, NULL, 2) == OAR_OK);
    CHECK(oar_checkpoint_load(bad, m2, o2, NULL) == OAR_ERR_INVALID_ARG &&
          strstr(oar_last_error(), "the file has no optimizer state"));
    oar_optimizer *o3 = oar_optimizer_for(m2, &adam);
    CHECK(oar_checkpoint_save(bad, m2, o3, 0) == OAR_OK);
    /* rewinding: the used optimizer's state goes back to none (tests/test_resume.c) */
    CHECK(oar_checkpoint_load(bad, m, o, NULL) == OAR_OK && oar_optimizer_steps(o) == 0);
    CHECK(oar_checkpoint_load(bad, m2, o3, NULL) == OAR_OK); /* fresh into fresh is fine */

    oar_optimizer_free(o);
    oar_optimizer_free(os);
    oar_optimizer_free(o2);
    oar_optimizer_free(o3);
    oar_module_free(m);
    oar_module_free(fresh);
    oar_module_free(m2);
    oar_scope_end();
}

int main(void) {
    if (!io_mkdtemp(dir, sizeof dir)) {
        fprintf(stderr, "test_io_checkpoint: cannot make a scratch directory\n");
        return 1;
    }
    if (!io_have_safetensors()) {
        printf("test_io_checkpoint: oar was built without cJSON: checkpoints are unsupported\n");
        oar_module *m = net();
        CHECK(oar_checkpoint_save("x.ckpt", m, NULL, 0) == OAR_ERR_UNSUPPORTED);
        CHECK(oar_checkpoint_load("x.ckpt", m, NULL, NULL) == OAR_ERR_UNSUPPORTED);
        oar_module_free(m);
        io_rmtree(dir);
        return test_summary("test_io_checkpoint");
    }
    test_module_roundtrip();
    test_mismatch_report();
    test_bad_files();
    oar_optim_opts sgd = oar_optim_defaults(OAR_OPTIM_SGD);
    sgd.lr = 0.05;
    sgd.momentum = 0.9;
    sgd.weight_decay = 1e-4;
    test_resume("SGD with momentum", sgd);
    oar_optim_opts adam = oar_optim_defaults(OAR_OPTIM_ADAM);
    adam.lr = 1e-2;
    test_resume("Adam", adam);
    oar_optim_opts adamw = oar_optim_defaults(OAR_OPTIM_ADAMW);
    adamw.lr = 1e-2;
    adamw.amsgrad = true;
    test_resume("AdamW with amsgrad", adamw);
    /* the kinds with scalar state (NAdam's mu_product, ASGD's eta and mu: f32 []) and the rest */
    static const char *const added[] = {"Adadelta", "Adamax", "NAdam", "RAdam", "ASGD (averaging from step 3)",
                                        "Rprop"};
    for (int k = OAR_OPTIM_ADADELTA; k <= OAR_OPTIM_RPROP; k++) {
        oar_optim_opts o = oar_optim_defaults((oar_optim_kind)k);
        if (k == OAR_OPTIM_ASGD) o.t0 = 2;
        test_resume(added[k - OAR_OPTIM_ADADELTA], o);
    }
    test_optimizer_mismatch();
    io_rmtree(dir);
    return test_summary("test_io_checkpoint");
}
