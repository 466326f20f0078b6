/* Checked handles (issue 13, defect 3): each misuse of a dangling handle returns an error that
 * names it, instead of crashing or corrupting memory, and runs clean under ASan:
 *   - use after oar_release (ops, accessors, item, autograd, modules, optimizers, files);
 *   - a double release;
 *   - a tensor used after the scope that owned it ended (oar_keep is the remedy, and works);
 *   - a compiled function called after the optimizer it steps was freed;
 *   - a freed tensor's memory is not reused by the next tensors (the quarantine).
 * Run twice by ctest: as is, and with OAR_DEBUG_HANDLES=1 (test_handles_debug), where live
 * tensors are counted and those alive at exit are reported. */
#include "test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#define MISUSE_RELEASE "was already released by oar_release"
#define MISUSE_SCOPE "was released when the scope that owned it ended"

static oar_tensor *vec(double v) { return oar_full((int64_t[]){4}, 1, v, OAR_F32); }

static void test_use_after_release(void) {
    oar_tensor *a = vec(1), *b = vec(2);
    oar_release(a);
    CHECK_ERR(oar_add(a, b), "add: input 0 " MISUSE_RELEASE);
    CHECK(oar_last_status() == OAR_ERR_STATE);
    CHECK_ERR(oar_add(b, a), "add: input 1 " MISUSE_RELEASE);
    CHECK(oar_relu(oar_mul(b, a)) == NULL && strstr(oar_last_error(), "mul: input 1")); /* the first error stays */
    CHECK_ERR(oar_numel(a) == -1, "numel: the tensor " MISUSE_RELEASE);
    CHECK(oar_numel(a) == -1 && oar_ndim(a) == -1 && oar_shape(a) == NULL && oar_data(a) == NULL);
    double v = 0;
    CHECK_ERR(oar_item(a, &v), "item: the tensor " MISUSE_RELEASE);
    CHECK(oar_item(a, &v) == OAR_ERR_STATE);
    CHECK_ERR(oar_fill_(a, 3), "fill_");
    CHECK_ERR(oar_copy_(b, a), "copy_ (src)");
    CHECK(oar_format(a, NULL, 0) == -1);
    CHECK_ERR(oar_retain(a) == NULL, "retain: the tensor " MISUSE_RELEASE);
    CHECK_ERR(oar_keep(a), "keep");
    CHECK_ERR(oar_set_requires_grad(a, true), "set_requires_grad");
    CHECK_ERR(oar_backward(a, NULL, false), "backward");
    CHECK_ERR(oar_grad_get(a), "grad_get");
    CHECK_ERR(oar_detach(a), "detach");
    oar_module *m = oar_nn_linear(4, 2, true);
    CHECK_ERR(oar_forward(m, a), "forward: input 0 " MISUSE_RELEASE);
    CHECK_ERR(oar_module_add_buffer(m, "x", a), "module_add_buffer");
    oar_tensor *ps[2] = {b, a};
    CHECK_ERR(oar_optimizer_new(ps, 2, &(oar_optim_opts){.kind = OAR_OPTIM_SGD, .lr = 0.1}),
              "optimizer_new: parameter 1 " MISUSE_RELEASE);
    CHECK_ERR(oar_clip_grad_value(ps, 2, 1.0), "clip_grad_value: tensor 1");
    /* wrappers that read the tensor before dispatching check it first too */
    CHECK_ERR(oar_reshape(a, (int64_t[]){2, 2}, 2), "reshape: the tensor " MISUSE_RELEASE);
    CHECK_ERR(oar_view(a, (int64_t[]){4}, 1), "view");
    CHECK_ERR(oar_flatten(a, 0, -1), "flatten");
    CHECK_ERR(oar_transpose(a, 0, 0), "transpose");
    CHECK_ERR(oar_zeros_like(a), "zeros_like");
    CHECK_ERR(oar_contiguous(a), "contiguous");
    CHECK_ERR(oar_sub_scalar(a, 1), "sub_scalar");
    CHECK_ERR(oar_accuracy(a, b, 1), "accuracy: logits " MISUSE_RELEASE);
    CHECK_ERR(oar_npy_save("/nonexistent/x.npy", a), "npy_save");
    oar_module_free(m);
    /* the double release: an error, no second free */
    oar_clear_error();
    oar_release(a);
    CHECK(strstr(oar_last_error(), "release: the tensor " MISUSE_RELEASE) != NULL);
    oar_release(b);
    /* a view keeps its storage: releasing the source leaves the view valid */
    oar_tensor *src = vec(5), *view = oar_unsqueeze(src, 0);
    oar_release(src);
    CHECK(oar_numel(view) == 4 && t_at(view, 3) == 5);
    oar_release(view);
}

static void test_use_after_scope(void) {
    oar_tensor *kept = NULL, *lost = NULL;
    oar_scope_begin();
    oar_tensor *x = vec(2);
    lost = oar_sum(oar_mul(x, x), NULL, 0, false);
    kept = oar_keep(oar_sum(x, NULL, 0, false));
    oar_scope_end();
    double v = 0;
    CHECK(oar_item(kept, &v) == OAR_OK && v == 8);
    CHECK_ERR(oar_item(lost, &v), "item: the tensor " MISUSE_SCOPE);
    CHECK(strstr(oar_last_error(), "oar_keep") != NULL); /* the remedy */
    CHECK_ERR(oar_add(lost, kept), "add: input 0 " MISUSE_SCOPE);
    CHECK_ERR(oar_release(lost), "release: the tensor " MISUSE_SCOPE);
    oar_release(kept);
}

/* A freed struct is not handed to the next tensors (a stale handle must not find a live one). */
static void test_quarantine(void) {
    oar_tensor *a = vec(1);
    void *addr = a;
    oar_release(a);
    bool reused = false;
    oar_tensor *made[100];
    for (int i = 0; i < 100; i++) {
        made[i] = vec(i);
        reused |= (void *)made[i] == addr;
    }
    CHECK(!reused);
    CHECK_ERR(oar_numel(a), MISUSE_RELEASE);
    for (int i = 0; i < 100; i++) oar_release(made[i]);
}

/* ---- a compiled step and the optimizer it captured */
typedef struct trainer {
    oar_module *m;
    oar_optimizer *o;
} trainer;

static oar_status train_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    trainer *t = user;
    (void)n_in, (void)n_out;
    oar_optimizer_zero_grad(t->o);
    oar_tensor *loss = oar_mse_loss(oar_forward(t->m, in[0]), in[1], OAR_REDUCE_MEAN);
    oar_status st = loss ? oar_backward(loss, NULL, false) : oar_last_status();
    if (st == OAR_OK) st = oar_optimizer_step(t->o);
    out[0] = loss;
    return st;
}

static void test_optimizer_freed_before_jit(void) {
    oar_scope_begin();
    trainer t = {oar_nn_linear(3, 2, true), NULL};
    t.o = oar_optimizer_for(t.m, &(oar_optim_opts){.kind = OAR_OPTIM_ADAM});
    oar_jit *f = oar_jit_to_static(train_fn, &t, &(oar_jit_opts){.module = t.m, .optimizer = t.o});
    oar_tensor *in[2] = {oar_randn((int64_t[]){4, 3}, 2, OAR_F32), oar_randn((int64_t[]){4, 2}, 2, OAR_F32)};
    oar_tensor *out[1] = {0};
    CHECK(oar_jit_call(f, in, 2, out, 1) == OAR_OK);
    oar_optimizer_free(t.o);
    t.o = NULL;
    out[0] = NULL;
    CHECK(oar_jit_call(f, in, 2, out, 1) == OAR_ERR_STATE);
    CHECK(strstr(oar_last_error(), "the optimizer this function steps was freed") != NULL);
    CHECK(out[0] == NULL);
    oar_jit_free(f);
    /* the other order, and an optimizer freed before the function ever ran again */
    t.o = oar_optimizer_for(t.m, &(oar_optim_opts){.kind = OAR_OPTIM_SGD, .lr = 0.1});
    f = oar_jit_to_static(train_fn, &t, &(oar_jit_opts){.module = t.m, .optimizer = t.o});
    CHECK(oar_jit_call(f, in, 2, out, 1) == OAR_OK);
    oar_jit_free(f);
    oar_optimizer_free(t.o);
    oar_module_free(t.m);
    oar_scope_end();
}

/* ---- debug mode */
static void test_debug_mode(void) {
    if (!oar_debug_handles()) {
        CHECK(oar_live_tensors() == -1);
        return;
    }
    int64_t before = oar_live_tensors();
    oar_tensor *a = vec(1);
    CHECK(oar_live_tensors() == before + 1);
    oar_release(a);
    CHECK(oar_live_tensors() == before);
    /* late uses are caught however many tensors were freed since */
    for (int i = 0; i < 20000; i++) oar_release(vec(i));
    CHECK_ERR(oar_numel(a), MISUSE_RELEASE);
    /* a tensor still alive at exit is reported: in a child, whose stderr we read */
    int fds[2];
    CHECK(pipe(fds) == 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        oar_tensor *leak = vec(7);
        (void)leak;
        exit(0);
    }
    close(fds[1]);
    char buf[4096] = {0};
    size_t got = 0;
    ssize_t k;
    while (got < sizeof buf - 1 && (k = read(fds[0], buf + got, sizeof buf - 1 - got)) > 0) got += (size_t)k;
    close(fds[0]);
    waitpid(pid, NULL, 0);
    char want[128];
    int64_t live = oar_live_tensors() + 1; /* the child's: ours and its leak */
    snprintf(want, sizeof want, "oar warning: %lld tensor%s still alive at exit (OAR_DEBUG_HANDLES=1)", (long long)live,
             live == 1 ? " is" : "s are");
    CHECK(strstr(buf, want) != NULL);
    if (!strstr(buf, "still alive at exit")) fprintf(stderr, "child's stderr: %s\n", buf);
}

int main(void) {
    test_use_after_release();
    test_use_after_scope();
    test_quarantine();
    test_optimizer_freed_before_jit();
    test_debug_mode();
    printf("test_handles: debug mode %s\n", oar_debug_handles() ? "on" : "off");
    return test_summary("test_handles");
}
